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
//! 2. the lists are all-gathered and merged into their union (phase `replication`), each rank's
//!    count carrying whether its progress callback asked to stop: if any did, this exchange is
//!    the last (every row due, listed again) and every rank returns after it, so a
//!    [`Control::Stop`] ends the whole job at the next exchange with one model on every rank;
//! 3. the deltas `row - snapshot` of the union's rows are summed by one all-reduce (phase
//!    `reduction`, `2 d` words per row), and every rank sets `row = snapshot + sum / p`, which
//!    becomes the new snapshot.
//!
//! Every rank makes the same exchanges: an epoch has as many segments on every rank as the
//! longest shard needs (shards differ by up to a word; a shorter one ends its epoch with an
//! empty segment).
//!
//! With one rank there is nothing to average and the exchange is skipped (still counted; it
//! would be exact arithmetic, `s + (x - s)` in f64 is `x`, but it cost a quarter of the run's
//! time at 250k words per exchange on wiki17m), so a one-rank run is the shared-memory variant
//! cut into the same segments; with `sync_words` at least the shard, it is the shared-memory
//! variant itself.

use crate::driver::{self, ChunkKernel, SegmentEnd, Segments};
use crate::model::initial_input_vectors;
use crate::problem::{Control, EpochReport, Traffic, TrainOutput, TrainParams, W2vError};
use crate::{Bidmach, Corpus, Full, FullRegister, Gemm, Hogwild, Par, Trainer};
use parbench_common::comm::threads::run_threads;
use parbench_common::comm::{CommError, CommStats, Communicator, Phase};
use parbench_common::par::spawn_scoped;
use std::ops::Range;
use std::sync::mpsc;
use std::sync::Mutex;
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
    /// Exchange every row of both matrices at every exchange, changed or not, due or not: the
    /// full-model synchronization that sub-model synchronization (the rows above) saves on
    /// (pWord2Vec Section III-E). The model is the one every row being due gives; the traffic
    /// is the whole model's, `2 V d` values reduced at every exchange.
    pub full_model: bool,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            sync_words: 1_000_000,
            hot_words: 10_000,
            rare_every: 4,
            scale_alpha: true,
            full_model: false,
        }
    }
}

/// One rank's result: its training output (the model is the same on every rank at the end) and
/// what its exchanges cost.
#[derive(Clone, Debug)]
pub struct RankOutput {
    /// The rank's training output; the model is the same on every rank.
    pub train: TrainOutput,
    /// Segment ends reached, each an exchange (with one rank nothing is sent).
    pub exchanges: usize,
    /// Rows (input and output counted apart) averaged over all exchanges.
    pub rows_exchanged: u64,
    /// Wall seconds in the exchanges (sending, waiting, averaging).
    pub exchange_seconds: f64,
    /// Words and messages this rank's communicator counted.
    pub comm: CommStats,
}

/// The shared-memory kernel a rank trains with.
fn kernel(inner: &str) -> Result<&'static dyn ChunkKernel, W2vError> {
    match inner {
        "hogwild" => Ok(&Hogwild),
        "gemm" => Ok(&Gemm),
        "full" => Ok(&Full),
        "full-register" => Ok(&FullRegister),
        "bidmach" => Ok(&Bidmach),
        other => Err(W2vError::Exchange(format!(
            "unknown inner variant {other}: use hogwild, gemm, full, full-register or bidmach"
        ))),
    }
}

fn comm_error(e: CommError) -> W2vError {
    W2vError::Exchange(e.to_string())
}

/// Trains this rank's share of `corpus` with `inner` (`hogwild`, `gemm`, `full`,
/// `full-register` or `bidmach`) and `par.degree()` threads, exchanging with the other ranks of `comm` as
/// `sync` says. Every rank calls it with the same arguments. `progress` reports this rank's own
/// progress. A thread the system refuses ends this rank's run with [`W2vError::Threads`].
pub fn train_rank(
    comm: &dyn Communicator,
    inner: &str,
    corpus: &Corpus,
    params: &TrainParams,
    par: Par,
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
    let shard = shard_of(n, p, rank);
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
        let local = if end.stop_requested {
            Control::Stop
        } else {
            Control::Continue
        };
        if p == 1 {
            exchanges += 1;
            return Ok(local);
        }
        let t = Instant::now();
        let (snap_in, snap_out) = (&mut snap_in, &mut snap_out);
        let changed_rows = |all: bool| -> Vec<u32> {
            if sync.full_model {
                // Every rank sends every row: no list to agree on (the counts still travel,
                // with whether a rank stops).
                return Vec::new();
            }
            let due = |row: usize| {
                all || row < sync.hot_words || end.index.is_multiple_of(sync.rare_every)
            };
            (0..rows)
                .filter(|&r| due(r))
                .filter(|&r| {
                    let span = r * dim..(r + 1) * dim;
                    differs(&input[span.clone()], &snap_in[span.clone()])
                        || differs(&output[span.clone()], &snap_out[span])
                })
                .map(|r| r as u32)
                .collect()
        };
        // Whether any rank stops travels with the row counts; a stop makes this exchange the
        // last, so every row is due and every rank ends with the same model.
        let changed = changed_rows(end.last);
        let (mut union, stop) =
            union_over_ranks(comm, &changed, end.stop_requested).map_err(comm_error)?;
        if stop && !end.last {
            union = union_over_ranks(comm, &changed_rows(true), true)
                .map_err(comm_error)?
                .0;
        }
        if sync.full_model {
            union = (0..rows as u32).collect();
        }
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
        Ok(if stop {
            Control::Stop
        } else {
            Control::Continue
        })
    };
    let segments = Segments {
        words: sync.sync_words,
        count: segments_per_epoch(n, p, sync.sync_words),
        exchange: &mut exchange,
    };
    let train = driver::train_shard(
        kernel,
        corpus,
        shard,
        &params,
        par,
        Some(segments),
        progress,
    )?;
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

/// The shard of `rank` among `p` of a corpus of `n` words.
fn shard_of(n: usize, p: usize, rank: usize) -> Range<usize> {
    (rank * n / p)..((rank + 1) * n / p)
}

/// Segments per epoch on every rank: as many as the longest shard needs. Shards differ by up to
/// a word, so one may need a segment more than another; the others end their epoch with an empty
/// segment, and every rank makes the same exchanges.
fn segments_per_epoch(n: usize, p: usize, sync_words: u64) -> usize {
    (0..p)
        .map(|r| {
            let len = shard_of(n, p, r).len() as u64;
            len.div_ceil(sync_words.clamp(1, len.max(1))).max(1) as usize
        })
        .max()
        .unwrap_or(1)
}

/// The sorted union of every rank's `rows`, and whether any rank asked to `stop`.
fn union_over_ranks(
    comm: &dyn Communicator,
    rows: &[u32],
    stop: bool,
) -> Result<(Vec<u32>, bool), CommError> {
    let p = comm.size();
    let heads = comm.all_gather_u32(
        Phase::Replication,
        &[rows.len() as u32, stop as u32],
        &vec![2; p],
    )?;
    let counts: Vec<usize> = heads.chunks_exact(2).map(|h| h[0] as usize).collect();
    let any_stop = heads.chunks_exact(2).any(|h| h[1] != 0);
    let mut all = comm.all_gather_u32(Phase::Replication, rows, &counts)?;
    all.sort_unstable();
    all.dedup();
    Ok((all, any_stop))
}

/// The counters of a run that add up over ranks, in a fixed order: words and flops, then per
/// epoch the words, kept words, pairs, context and cross-sentence pairings and model traffic
/// (integers are exact in an `f64`).
fn counters(out: &TrainOutput) -> Vec<f64> {
    let mut c = vec![out.words_processed as f64, out.flops];
    for e in &out.epochs {
        let t = &e.traffic;
        c.extend(
            [
                e.words,
                e.kept_words,
                e.pairs,
                e.context_pairs,
                e.cross_sentence_pairs,
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
    for (e, &[words, kept, pairs, context, cross, ir, iw, or, ow]) in
        out.epochs.iter_mut().zip(sums[2..].as_chunks::<9>().0)
    {
        (e.words, e.kept_words, e.pairs) = (words as u64, kept as u64, pairs as u64);
        (e.context_pairs, e.cross_sentence_pairs) = (context as u64, cross as u64);
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

/// A whole run of `distributed` across the processes of a job, as every rank reports it.
#[derive(Clone, Debug)]
pub struct JobOutput {
    /// This rank's training output (the model is the same on every rank) with the whole job's
    /// words, flops and traffic, and the job's wall seconds: from a barrier before training to
    /// a barrier after it.
    pub train: TrainOutput,
    /// Words sent in the run by the busiest rank.
    pub words_sent_max: u64,
    /// Exchanges this rank made (every rank makes the same).
    pub exchanges: usize,
    /// Rows (input and output counted apart) this rank averaged over all exchanges.
    pub rows_exchanged: u64,
    /// Wall seconds this rank spent in the exchanges.
    pub exchange_seconds: f64,
}

/// `distributed` on the ranks of `comm`, the processes of an MPI job (every rank calls it with
/// the same arguments; `ranks` is the number the caller planned for and must be the job's
/// size; each rank trains with `par.degree()` threads): [`train_rank`] between two barriers, then the busiest rank's words sent (gathered)
/// and the whole job's counters ([`whole_job`]), so every rank returns the same totals.
/// `progress` hears this rank's own reports. The world's counters run over every run of the
/// process; this run's words are the difference.
// The arguments are train_rank's plus the planned rank count; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn train_job(
    comm: &dyn Communicator,
    ranks: usize,
    inner: &str,
    corpus: &Corpus,
    params: &TrainParams,
    par: Par,
    sync: &SyncOptions,
    progress: &mut dyn FnMut(&EpochReport) -> Control,
) -> Result<JobOutput, W2vError> {
    if ranks != comm.size() {
        return Err(W2vError::Exchange(format!(
            "{ranks} ranks were asked for, but the job has {} processes",
            comm.size()
        )));
    }
    let before = comm.stats().total().words_sent;
    comm.barrier().map_err(comm_error)?;
    let start = Instant::now();
    let r = train_rank(comm, inner, corpus, params, par, sync, progress)?;
    comm.barrier().map_err(comm_error)?;
    let seconds = start.elapsed().as_secs_f64();
    let sent = (comm.stats().total().words_sent - before) as f64;
    let per_rank = comm
        .all_gather_f64(Phase::Replication, &[sent], &vec![1; comm.size()])
        .map_err(comm_error)?;
    let words_sent_max = per_rank.iter().fold(0f64, |m, &w| m.max(w)) as u64;
    Ok(JobOutput {
        train: whole_job(comm, r.train, seconds)?,
        words_sent_max,
        exchanges: r.exchanges,
        rows_exchanged: r.rows_exchanged,
        exchange_seconds: r.exchange_seconds,
    })
}

/// `distributed` as a [`Trainer`]: `ranks` in-process ranks (threads that only exchange
/// messages), each training with `par.degree()` threads of its own; rank 0's model (every
/// rank's, after the last exchange) is the result, and words/s counts all ranks' words.
///
/// Progress: the callback hears rank 0's reports (on the calling thread, as the trait says),
/// with its words scaled to the whole corpus (the ranks train shares of equal size, to a word,
/// between the same exchanges; at the end of an epoch the scaled count is exact). Its learning
/// rate is the ranks' (`p alpha` decaying, with [`SyncOptions::scale_alpha`]). A
/// [`Control::Stop`] ends rank 0's segment early and, at the exchange that follows, every
/// rank's run: the ranks average the whole model there and return what they trained.
#[derive(Clone, Debug)]
pub struct Distributed {
    /// The shared-memory variant each rank trains with (`hogwild`, `gemm`, `full`,
    /// `full-register` or `bidmach`).
    pub inner: String,
    /// In-process ranks (at least 1).
    pub ranks: usize,
    /// How and how often the ranks exchange the model.
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
        par: Par,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<TrainOutput, W2vError> {
        Ok(self
            .train_ranks(corpus, params, par, progress)?
            .remove(0)
            .train)
    }
}

impl Distributed {
    /// Every rank's output, rank 0's train output carrying the whole run's words and time;
    /// each rank trains with `par.degree()` threads. `progress` hears rank 0's reports as
    /// [`Distributed`] describes. A thread the system refuses on any rank ends the run with
    /// [`W2vError::Threads`].
    pub fn train_ranks(
        &self,
        corpus: &Corpus,
        params: &TrainParams,
        par: Par,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<Vec<RankOutput>, W2vError> {
        let start = Instant::now();
        let ranks = self.ranks.max(1);
        let n = corpus.ids().len() as u128;
        let shard0 = shard_of(corpus.ids().len(), ranks, 0).len().max(1) as u128;
        let scale = |words: u64| (words as u128 * n / shard0) as u64;
        // Rank 0 runs on a thread of its own; its reports come here and the callback's answers
        // go back. Rank 0 holds the only sender of reports, so the loop below ends when rank 0
        // is done; a callback that panics drops the answer channel, which rank 0 reads as Stop.
        let (report_tx, report_rx) = mpsc::channel::<EpochReport>();
        let (control_tx, control_rx) = mpsc::channel::<Control>();
        let relay = Mutex::new(Some((report_tx, control_rx)));
        let runs = std::thread::scope(|scope| {
            let job = spawn_scoped(scope, 1, || {
                run_threads(ranks, |comm| {
                    let link = if comm.rank() == 0 {
                        relay.lock().unwrap_or_else(|e| e.into_inner()).take()
                    } else {
                        None
                    };
                    let mut report = |r: &EpochReport| match &link {
                        Some((to_caller, answers)) => {
                            let scaled = EpochReport {
                                words_processed: scale(r.words_processed),
                                words_total: scale(r.words_total),
                                words_per_second: r.words_per_second * n as f64 / shard0 as f64,
                                ..*r
                            };
                            if to_caller.send(scaled).is_err() {
                                return Control::Stop;
                            }
                            answers.recv().unwrap_or(Control::Stop)
                        }
                        None => Control::Continue,
                    };
                    let out = train_rank(
                        comm,
                        &self.inner,
                        corpus,
                        params,
                        par,
                        &self.sync,
                        &mut report,
                    );
                    drop(link);
                    out
                })
            });
            // Refused: no rank started, so there is no report to relay.
            let job = match job {
                Ok(job) => job,
                Err(e) => return Ok(Err(e)),
            };
            // Owned here, so that a panicking callback drops it while unwinding (before the
            // scope waits for the ranks) and rank 0, reading Stop, lets every rank finish.
            let control_tx = control_tx;
            for r in report_rx {
                // Rank 0 waits for the answer, so it is never left without one.
                let _ = control_tx.send(progress(&r));
            }
            job.join().map(Ok)
        });
        let runs = match runs {
            Ok(Ok(runs)) => runs.map_err(|f| f.error)?,
            Ok(Err(refused)) => return Err(W2vError::Threads(refused)),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        let seconds = start.elapsed().as_secs_f64();
        let mut outs: Vec<RankOutput> = runs.into_iter().map(|r| r.value).collect();
        let mut sums = counters(&outs[0].train);
        for o in &outs[1..] {
            for (s, c) in sums.iter_mut().zip(counters(&o.train)) {
                *s += c;
            }
        }
        set_whole_job(&mut outs[0].train, &sums, seconds);
        Ok(outs)
    }
}
