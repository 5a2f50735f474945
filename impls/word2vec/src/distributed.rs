//! `distributed`: data-parallel word2vec across ranks (pWord2Vec, Ji et al., Section III-E).
//!
//! Every rank holds the whole model and trains its contiguous share of the corpus (`1 / p` of
//! the words) with any of the shared-memory variants and its own threads. Every `sync_words`
//! corpus words (per rank) the ranks exchange the model rows updated since the last exchange and
//! all take their average: rows of the `hot_words` most frequent words (the vocabulary is sorted
//! by frequency, so ids below `hot_words`) at every exchange, the others every `rare_every`
//! exchanges, everything at the end, so every rank finishes with the same model. The starting
//! learning rate is multiplied by `p` (`scale_alpha`): averaging divides each rank's step by `p`.
//!
//! The exchange, on any [`Communicator`] (in-process threads or MPI):
//! 1. each rank lists the due rows that differ from the snapshot taken at the last exchange
//!    (input and output matrices; a bitwise comparison, so nothing is missed);
//! 2. the lists are all-gathered and merged into their union (phase `replication`);
//! 3. the deltas `row - snapshot` of the union's rows are summed by one all-reduce (phase
//!    `reduction`, `2 d` words per row), and every rank sets `row = snapshot + sum / p`, which
//!    becomes the new snapshot.
//!
//! With one rank there is nothing to average and the exchange is skipped (still counted; it
//! would be exact arithmetic, `s + (x - s)` in f64 is `x`, but it cost a quarter of the run's
//! time at 250k words per exchange on wiki17m), so a one-rank run is the shared-memory variant
//! cut into the same segments; with `sync_words` at least the shard, it is the shared-memory
//! variant itself.

use crate::driver::{self, ChunkKernel, Exchange, SegmentEnd};
use crate::model::initial_input_vectors;
use crate::problem::{Control, EpochReport, Traffic, TrainOutput, TrainParams, W2vError};
use crate::{Corpus, Full, Gemm, Hogwild, Trainer};
use parbench_common::comm::threads::run_threads;
use parbench_common::comm::{CommError, CommStats, Communicator, Phase};
use std::time::Instant;

/// How and how often the ranks exchange the model.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncOptions {
    /// Corpus words each rank trains between two exchanges.
    pub sync_words: u64,
    /// Rows of words with a vocabulary id below this (the most frequent) are exchanged at
    /// every exchange.
    pub hot_words: usize,
    /// The other rows are exchanged at every `rare_every`-th exchange (and at the last).
    pub rare_every: usize,
    /// Multiply the starting learning rate by the number of ranks.
    pub scale_alpha: bool,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            sync_words: 1_000_000,
            hot_words: 10_000,
            rare_every: 4,
            scale_alpha: true,
        }
    }
}

/// One rank's result: its training output (the model is the same on every rank at the end) and
/// what its exchanges cost.
#[derive(Clone, Debug)]
pub struct RankOutput {
    pub train: TrainOutput,
    pub exchanges: usize,
    /// Rows (input and output counted apart) averaged over all exchanges.
    pub rows_exchanged: u64,
    pub exchange_seconds: f64,
    pub comm: CommStats,
}

/// The shared-memory kernel a rank trains with.
fn kernel(inner: &str) -> Result<&'static dyn ChunkKernel, W2vError> {
    match inner {
        "hogwild" => Ok(&Hogwild),
        "gemm" => Ok(&Gemm),
        "full" => Ok(&Full),
        other => Err(W2vError::Exchange(format!(
            "unknown inner variant {other}: use hogwild, gemm or full"
        ))),
    }
}

fn comm_error(e: CommError) -> W2vError {
    W2vError::Exchange(e.to_string())
}

/// Trains this rank's share of `corpus` with `inner` (`hogwild`, `gemm` or `full`) and
/// `params.threads` threads, exchanging with the other ranks of `comm` as `sync` says. Every
/// rank calls it with the same arguments. `progress` reports this rank's own progress.
pub fn train_rank(
    comm: &dyn Communicator,
    inner: &str,
    corpus: &Corpus,
    params: &TrainParams,
    sync: &SyncOptions,
    progress: &mut dyn FnMut(&EpochReport) -> Control,
) -> Result<RankOutput, W2vError> {
    let kernel = kernel(inner)?;
    if sync.sync_words == 0 || sync.rare_every == 0 {
        return Err(W2vError::Exchange(
            "sync_words and rare_every must be at least 1".to_string(),
        ));
    }
    let (p, rank) = (comm.size(), comm.rank());
    let n = corpus.ids().len();
    let shard = (rank * n / p)..((rank + 1) * n / p);
    let mut params = params.clone();
    if sync.scale_alpha {
        params.alpha *= p as f64;
    }
    let dim = params.dim;
    // The model as training starts, the same on every rank (the same seed): what the first
    // exchange compares against.
    let rows = corpus.vocab().len();
    // One rank keeps no snapshot: it never averages.
    let mut snap_in = if p > 1 {
        initial_input_vectors(rows, dim, params.seed)
    } else {
        Vec::new()
    };
    let mut snap_out = vec![0f32; if p > 1 { rows * dim } else { 0 }];
    let (mut exchanges, mut rows_exchanged, mut exchange_seconds) = (0usize, 0u64, 0f64);
    let mut exchange = |end: SegmentEnd, input: &mut [f32], output: &mut [f32]| {
        if p == 1 {
            exchanges += 1;
            return Ok(());
        }
        let t = Instant::now();
        let (snap_in, snap_out) = (&mut snap_in, &mut snap_out);
        let due = |row: usize| {
            row < sync.hot_words || end.index.is_multiple_of(sync.rare_every) || end.last
        };
        let changed: Vec<u32> = (0..rows)
            .filter(|&r| due(r))
            .filter(|&r| {
                let span = r * dim..(r + 1) * dim;
                differs(&input[span.clone()], &snap_in[span.clone()])
                    || differs(&output[span.clone()], &snap_out[span])
            })
            .map(|r| r as u32)
            .collect();
        let union = union_over_ranks(comm, &changed).map_err(comm_error)?;
        let mut deltas = Vec::with_capacity(union.len() * 2 * dim);
        for &r in &union {
            let span = r as usize * dim..(r as usize + 1) * dim;
            for (m, s) in [(&*input, &*snap_in), (&*output, &*snap_out)] {
                deltas.extend(
                    m[span.clone()]
                        .iter()
                        .zip(&s[span.clone()])
                        .map(|(&x, &y)| x as f64 - y as f64),
                );
            }
        }
        comm.all_reduce_sum(Phase::Reduction, &mut deltas)
            .map_err(comm_error)?;
        let mut sums = deltas.chunks_exact(dim);
        for &r in &union {
            let span = r as usize * dim..(r as usize + 1) * dim;
            for (m, s) in [(&mut *input, &mut *snap_in), (&mut *output, &mut *snap_out)] {
                let sum = sums.next().expect("two rows of deltas per exchanged row");
                for ((x, y), d) in m[span.clone()]
                    .iter_mut()
                    .zip(&mut s[span.clone()])
                    .zip(sum)
                {
                    *x = (*y as f64 + d / p as f64) as f32;
                    *y = *x;
                }
            }
        }
        exchanges += 1;
        rows_exchanged += 2 * union.len() as u64;
        exchange_seconds += t.elapsed().as_secs_f64();
        Ok(())
    };
    let segments: Option<(u64, &mut Exchange)> = Some((sync.sync_words, &mut exchange));
    let train = driver::train_shard(kernel, corpus, shard, &params, segments, progress)?;
    Ok(RankOutput {
        train,
        exchanges,
        rows_exchanged,
        exchange_seconds,
        comm: comm.stats(),
    })
}

fn differs(a: &[f32], b: &[f32]) -> bool {
    a.iter().zip(b).any(|(x, y)| x.to_bits() != y.to_bits())
}

/// The sorted union of every rank's `rows`.
fn union_over_ranks(comm: &dyn Communicator, rows: &[u32]) -> Result<Vec<u32>, CommError> {
    let p = comm.size();
    let lens = comm.all_gather_u32(Phase::Replication, &[rows.len() as u32], &vec![1; p])?;
    let counts: Vec<usize> = lens.iter().map(|&n| n as usize).collect();
    let mut all = comm.all_gather_u32(Phase::Replication, rows, &counts)?;
    all.sort_unstable();
    all.dedup();
    Ok(all)
}

/// The counters of a run that add up over ranks, in a fixed order: words and flops, then per
/// epoch the words, kept words, pairs and model traffic (integers are exact in an `f64`).
fn counters(out: &TrainOutput) -> Vec<f64> {
    let mut c = vec![out.words_processed as f64, out.flops];
    for e in &out.epochs {
        let t = &e.traffic;
        c.extend(
            [
                e.words,
                e.kept_words,
                e.pairs,
                t.input_rows_read,
                t.input_rows_written,
                t.output_rows_read,
                t.output_rows_written,
            ]
            .map(|x| x as f64),
        );
    }
    c
}

/// Sets `out`'s counters to the whole job's (`sums` of [`counters`] over ranks) and its time to
/// the job's `seconds`; each epoch keeps this rank's wall time.
fn set_whole_job(out: &mut TrainOutput, sums: &[f64], seconds: f64) {
    out.words_processed = sums[0] as u64;
    out.flops = sums[1];
    for (e, c) in out.epochs.iter_mut().zip(sums[2..].chunks_exact(7)) {
        let [words, kept, pairs, ir, iw, or, ow] = [c[0], c[1], c[2], c[3], c[4], c[5], c[6]];
        (e.words, e.kept_words, e.pairs) = (words as u64, kept as u64, pairs as u64);
        e.traffic = Traffic {
            input_rows_read: ir as u64,
            input_rows_written: iw as u64,
            output_rows_read: or as u64,
            output_rows_written: ow as u64,
        };
    }
    out.seconds = seconds;
    out.words_per_second = out.words_processed as f64 / seconds.max(1e-9);
}

/// This rank's output with the whole job's words, flops and traffic (summed over the ranks of
/// `comm`: a collective, every rank calls it after [`train_rank`]) and the job's `seconds`.
pub fn whole_job(
    comm: &dyn Communicator,
    mut out: TrainOutput,
    seconds: f64,
) -> Result<TrainOutput, W2vError> {
    let mut sums = counters(&out);
    comm.all_reduce_sum(Phase::Reduction, &mut sums)
        .map_err(comm_error)?;
    set_whole_job(&mut out, &sums, seconds);
    Ok(out)
}

/// `distributed` as a [`Trainer`]: `ranks` in-process ranks (threads that only exchange
/// messages), each training with `params.threads` threads of its own; rank 0's model (every
/// rank's, after the last exchange) is the result, and words/s counts all ranks' words.
#[derive(Clone, Debug)]
pub struct Distributed {
    pub inner: String,
    pub ranks: usize,
    pub sync: SyncOptions,
}

impl Trainer for Distributed {
    fn name(&self) -> &'static str {
        "distributed"
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &TrainParams,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<TrainOutput, W2vError> {
        Ok(self.train_ranks(corpus, params, progress)?.remove(0).train)
    }
}

impl Distributed {
    /// Every rank's output, rank 0's train output carrying the whole run's words and time.
    pub fn train_ranks(
        &self,
        corpus: &Corpus,
        params: &TrainParams,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<Vec<RankOutput>, W2vError> {
        let start = Instant::now();
        let runs = run_threads(self.ranks.max(1), |comm| {
            train_rank(comm, &self.inner, corpus, params, &self.sync, &mut |_| {
                Control::Continue
            })
        })
        .map_err(|f| f.error)?;
        let seconds = start.elapsed().as_secs_f64();
        let mut outs: Vec<RankOutput> = runs.into_iter().map(|r| r.value).collect();
        let mut sums = counters(&outs[0].train);
        for o in &outs[1..] {
            for (s, c) in sums.iter_mut().zip(counters(&o.train)) {
                *s += c;
            }
        }
        set_whole_job(&mut outs[0].train, &sums, seconds);
        let first = &outs[0].train;
        let words = first.words_processed;
        let _ = progress(&EpochReport {
            epoch: first.epochs_completed.saturating_sub(1),
            epochs: params.epochs,
            epoch_finished: true,
            words_processed: words,
            words_total: words,
            alpha: 0.0,
            words_per_second: first.words_per_second,
            elapsed_seconds: seconds,
        });
        Ok(outs)
    }
}
