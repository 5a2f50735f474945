//! The training loop every variant shares: validation, model initialization, the tables,
//! threads, epochs, the learning-rate schedule and progress. A variant supplies only what one
//! thread does with its slice of the corpus in one epoch ([`ChunkKernel`]).
//!
//! Threads: `par.degree()` scoped OS threads per segment, thread `t` training on the `t`-th
//! contiguous slice of the encoded corpus (word2vec.c splits the file the same way), with its
//! own generator `Rng::stream(seed, t)` that carries over from epoch to epoch. The calling
//! thread only waits, wakes every `report_interval_seconds` to send a progress report, and
//! raises the stop flag when the callback says so. An epoch ends when every thread has finished
//! its slice (a barrier word2vec.c does not have; it costs one join per epoch and gives exact
//! per-epoch counters). Every thread starts through [`spawn_scoped`]: when the system refuses
//! one, the threads already started are stopped and the run returns [`W2vError::Threads`]
//! rather than going on with fewer threads (the slices are fixed by the thread count).
//!
//! Determinism: with one thread a run depends only on the seed (and on whether the CPU has
//! AVX2+FMA, which changes rounding). With more threads the Hogwild races and the shared word
//! counter behind the learning rate make runs differ in the last bits.

use crate::corpus::{Corpus, MAX_SENTENCE_WORDS};
use crate::model::{initial_input_vectors, HogwildMatrix, Model};
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::sampling::{learning_rate, NegativeSampler, Sigmoid, Subsampler};
use parbench_common::par::{spawn_scoped, Par};
use parbench_common::rng::Rng;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Everything the threads share during a run.
pub(crate) struct Shared<'a> {
    pub ids: &'a [u32],
    pub line_ends: &'a [usize],
    pub input: HogwildMatrix,
    pub output: HogwildMatrix,
    pub dim: usize,
    pub window: usize,
    pub negative: usize,
    pub subsampler: Subsampler,
    pub negatives: NegativeSampler,
    pub sigmoid: Sigmoid,
    alpha0: f64,
    /// `epochs x` corpus words.
    total_words: u64,
    /// Corpus words processed by all threads, all epochs.
    words_done: AtomicU64,
    stop: AtomicBool,
    /// The CPU has AVX2 and FMA: kernels run their `target_feature` instantiation.
    pub fma: bool,
    /// The CPU has AVX-512F too: the batched products (`gemm`, `full`, `full-register`) run
    /// their 512-bit kernels.
    pub avx512: bool,
    /// The two matrices together outgrow [`PREFETCH_MIN_BYTES`]: the batched kernels prefetch
    /// the next batch's rows.
    pub prefetch: bool,
}

/// The model size from which prefetching the next batch's rows pays: past the 1-2 MiB L2
/// caches of these machines, random rows miss them (on wiki17m's 21k words at d = 100, 17 MB,
/// it cut `gemm`'s median one-thread training from 3.4-4.3 s to 2.95-3.65 s); a model that
/// fits has its rows in cache, where the prefetches are instructions spent for nothing (+25%
/// under callgrind on the gate's 500 words).
pub(crate) const PREFETCH_MIN_BYTES: usize = 4 << 20;

impl Shared<'_> {
    /// `out` becomes the center word, then `negative` draws from the noise distribution, a draw
    /// equal to the center skipped (word2vec.c's rule).
    #[inline(always)]
    pub fn draw_targets(&self, center: u32, rng: &mut Rng, out: &mut Vec<u32>) {
        out.clear();
        out.push(center);
        for _ in 0..self.negative {
            let t = self.negatives.sample(rng);
            if t != center {
                out.push(t);
            }
        }
    }

    /// Records `words` more corpus words processed by this thread and returns the learning
    /// rate for what it does next.
    #[inline]
    pub fn advance(&self, words: u64) -> f32 {
        let done = self.words_done.fetch_add(words, Ordering::Relaxed) + words;
        learning_rate(self.alpha0, done, self.total_words)
    }

    /// The learning rate now (without recording anything).
    pub fn alpha_now(&self) -> f32 {
        learning_rate(
            self.alpha0,
            self.words_done.load(Ordering::Relaxed),
            self.total_words,
        )
    }

    /// Whether the caller asked to stop; threads check between sentences.
    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// One thread's state: its random stream (kept across epochs) and this epoch's counters.
pub(crate) struct ThreadState {
    pub rng: Rng,
    pub stats: EpochStats,
}

/// What one thread does in one epoch with its slice of the corpus.
pub(crate) trait ChunkKernel: Sync {
    /// Trains on `shared.ids[range]`, calling `shared.advance` as it consumes words and
    /// returning early once `shared.stopped()`; adds its counts to `state.stats`.
    fn run_chunk(&self, shared: &Shared, range: Range<usize>, state: &mut ThreadState);
}

/// Whether this CPU can run the `avx2,fma` instantiations.
pub(crate) fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU can run the batched products' AVX-512F kernels (it has AVX2 and FMA too).
pub(crate) fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpu_has_fma() && is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `kernel` for every epoch on each of `par.degree()` threads.
pub(crate) fn train(
    kernel: &dyn ChunkKernel,
    corpus: &Corpus,
    params: &TrainParams,
    par: Par,
    progress: &mut dyn FnMut(&EpochReport) -> Control,
) -> Result<TrainOutput, W2vError> {
    train_shard(
        kernel,
        corpus,
        0..corpus.ids().len(),
        params,
        par,
        None,
        progress,
    )
}

/// Where an exchange between two segments falls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentEnd {
    /// Segments completed so far, all epochs.
    pub index: usize,
    /// The last segment of the last epoch.
    pub last: bool,
    /// This run's progress callback asked to stop (during the segment, or in the closing report
    /// of the epoch the segment ends).
    pub stop_requested: bool,
}

/// Called after each segment, with no training thread running: may read and change the input
/// and output matrices (the distributed variant's model exchange). Returns whether the run
/// goes on: [`Control::Stop`] ends it after this segment even when this run's own callback did
/// not ask (another rank's did).
pub(crate) type Exchange<'a> =
    dyn FnMut(SegmentEnd, &mut [f32], &mut [f32]) -> Result<Control, W2vError> + 'a;

/// How [`train_shard`] cuts each epoch: segments of `words` corpus words, at least `count` of
/// them (the last ones empty where the shard runs out first, so that every rank of a
/// distributed run makes the same number of exchanges), with `exchange` called after each.
pub(crate) struct Segments<'a, 'b> {
    pub words: u64,
    pub count: usize,
    pub exchange: &'a mut Exchange<'b>,
}

/// [`train`] on the words `shard` of the corpus only, each epoch cut into `segments` (the
/// threads split every segment as they would the whole shard). Without segments, one segment
/// is the whole shard.
pub(crate) fn train_shard(
    kernel: &dyn ChunkKernel,
    corpus: &Corpus,
    shard: Range<usize>,
    params: &TrainParams,
    par: Par,
    mut segments: Option<Segments>,
    progress: &mut dyn FnMut(&EpochReport) -> Control,
) -> Result<TrainOutput, W2vError> {
    params.validate()?;
    let vocab = corpus.vocab();
    if corpus.ids().is_empty() || vocab.is_empty() {
        return Err(W2vError::EmptyCorpus);
    }
    let dim = params.dim;
    let mut input = initial_input_vectors(vocab.len(), dim, params.seed);
    let mut output = vec![0f32; vocab.len() * dim];
    let words_per_epoch = shard.len() as u64;
    let shared = Shared {
        ids: corpus.ids(),
        line_ends: corpus.line_ends(),
        input: HogwildMatrix::new(&mut input, dim),
        output: HogwildMatrix::new(&mut output, dim),
        dim,
        window: params.window,
        negative: params.negative,
        subsampler: Subsampler::new(vocab.counts(), params.sample),
        negatives: NegativeSampler::new(vocab.counts()),
        sigmoid: Sigmoid::new(),
        alpha0: params.alpha,
        total_words: words_per_epoch * params.epochs as u64,
        words_done: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        fma: cpu_has_fma(),
        avx512: cpu_has_avx512(),
        prefetch: (input.len() + output.len()) * std::mem::size_of::<f32>() >= PREFETCH_MIN_BYTES,
    };
    let threads = par.degree();
    let segment_len = match &segments {
        Some(s) => s.words.clamp(1, shard.len().max(1) as u64) as usize,
        None => shard.len().max(1),
    };
    let mut bounds: Vec<Range<usize>> = (shard.start..shard.end)
        .step_by(segment_len)
        .map(|a| a..(a + segment_len).min(shard.end))
        .collect();
    if let Some(s) = &segments {
        bounds.resize(bounds.len().max(s.count), shard.end..shard.end);
    }
    let slices = |seg: &Range<usize>| -> Vec<Range<usize>> {
        let (a, n) = (seg.start, seg.len());
        (0..threads)
            .map(|t| (a + t * n / threads)..(a + (t + 1) * n / threads))
            .collect()
    };
    let mut segments_done = 0usize;
    let mut states: Vec<ThreadState> = (0..threads)
        .map(|t| ThreadState {
            rng: Rng::stream(params.seed, t as u64),
            stats: EpochStats::default(),
        })
        .collect();
    // Drawn from its own stream, so asking for the loss leaves the training draws unchanged.
    let probe = (params.loss_sample > 0).then(|| {
        crate::loss::LossProbe::new(&shared, shard.clone(), params.loss_sample, params.seed)
    });
    let interval = Duration::from_secs_f64(params.report_interval_seconds.clamp(1e-3, 3600.0));
    let start = Instant::now();
    let mut epochs = Vec::with_capacity(params.epochs);
    let report = |epoch: usize, finished: bool| {
        let elapsed = start.elapsed().as_secs_f64();
        let words = shared.words_done.load(Ordering::Relaxed);
        EpochReport {
            epoch,
            epochs: params.epochs,
            epoch_finished: finished,
            words_processed: words,
            words_total: shared.total_words,
            alpha: shared.alpha_now() as f64,
            words_per_second: words as f64 / elapsed.max(1e-9),
            elapsed_seconds: elapsed,
            // SAFETY: a closing report comes after the segment's threads have joined, so no
            // thread writes the matrices while the probe reads them.
            loss: probe
                .as_ref()
                .filter(|_| finished)
                .map(|p| unsafe { p.loss(&shared) }),
        }
    };
    for epoch in 0..params.epochs {
        let epoch_start = Instant::now();
        for s in &mut states {
            s.stats = EpochStats::default();
        }
        for (k, segment) in bounds.iter().enumerate() {
            let ranges = slices(segment);
            let refused = std::thread::scope(|scope| {
                let (done_tx, done_rx) = mpsc::channel::<()>();
                for (state, range) in states.iter_mut().zip(&ranges) {
                    let done_tx = done_tx.clone();
                    let shared = &shared;
                    let range = range.clone();
                    let started = spawn_scoped(scope, threads, move || {
                        kernel.run_chunk(shared, range, state);
                        // The receiver lives until every thread has reported, or is gone
                        // after a refused thread, when nobody waits for the report.
                        let _ = done_tx.send(());
                    });
                    if let Err(e) = started {
                        // The threads already running return at their next sentence; the
                        // scope joins them before the error is returned.
                        shared.stop.store(true, Ordering::Relaxed);
                        return Some(e);
                    }
                }
                drop(done_tx);
                let mut finished = 0;
                while finished < threads {
                    match done_rx.recv_timeout(interval) {
                        Ok(()) => finished += 1,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if progress(&report(epoch, false)) == Control::Stop {
                                shared.stop.store(true, Ordering::Relaxed);
                            }
                        }
                        // A thread panicked; the scope propagates the panic when it joins.
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                None
            });
            if let Some(e) = refused {
                return Err(W2vError::Threads(e));
            }
            segments_done += 1;
            let epoch_end = k + 1 == bounds.len();
            // The epoch's closing report comes before the exchange that ends it, so that a
            // stop asked for there is known to the exchange (where the ranks of a distributed
            // run agree on stopping).
            if epoch_end && !shared.stopped() && progress(&report(epoch, true)) == Control::Stop {
                shared.stop.store(true, Ordering::Relaxed);
            }
            if let Some(s) = segments.as_mut() {
                let end = SegmentEnd {
                    index: segments_done,
                    last: epoch + 1 == params.epochs && epoch_end,
                    stop_requested: shared.stopped(),
                };
                // SAFETY: every training thread of the segment has joined (the scope ended),
                // so these are the only references to the matrices until the next segment.
                let (inp, out) = unsafe { (shared.input.all_mut(), shared.output.all_mut()) };
                if (s.exchange)(end, inp, out)? == Control::Stop {
                    shared.stop.store(true, Ordering::Relaxed);
                }
            }
            if shared.stopped() {
                break;
            }
        }
        let mut stats = EpochStats::default();
        for s in &states {
            stats.add_counts(&s.stats);
        }
        stats.seconds = epoch_start.elapsed().as_secs_f64();
        epochs.push(stats);
        if shared.stopped() {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let words_processed = shared.words_done.load(Ordering::Relaxed);
    let pairs: u64 = epochs.iter().map(|e| e.pairs).sum();
    drop(shared);
    Ok(TrainOutput {
        model: Model::new(vocab.words().to_vec(), dim, input)?,
        output_vectors: output,
        epochs_completed: epochs.len(),
        words_processed,
        seconds,
        words_per_second: words_processed as f64 / seconds.max(1e-9),
        flops: 6.0 * dim as f64 * pairs as f64,
        epochs,
    })
}

/// The index in `shared.line_ends` of the first line end after corpus position `pos`.
pub(crate) fn first_line_end_after(shared: &Shared, pos: usize) -> usize {
    shared.line_ends.partition_point(|&e| e <= pos)
}

/// Cuts a thread's slice into word2vec.c sentences: the kept words (after subsampling) of one
/// line, at most [`MAX_SENTENCE_WORDS`] of them.
pub(crate) struct Sentences {
    pos: usize,
    end: usize,
    /// Index into `line_ends` of the first line end after `pos`.
    line: usize,
}

impl Sentences {
    pub fn new(shared: &Shared, range: Range<usize>) -> Sentences {
        let line = first_line_end_after(shared, range.start);
        Sentences {
            pos: range.start,
            end: range.end,
            line,
        }
    }

    /// Fills `out` with the next sentence's kept words and returns how many corpus words it
    /// consumed (0 at the end of the slice).
    #[inline]
    pub fn next(&mut self, shared: &Shared, rng: &mut Rng, out: &mut Vec<u32>) -> u64 {
        out.clear();
        let start = self.pos;
        while self.pos < self.end && out.len() < MAX_SENTENCE_WORDS {
            while self.line < shared.line_ends.len() && shared.line_ends[self.line] <= self.pos {
                self.line += 1;
            }
            let line_end = shared
                .line_ends
                .get(self.line)
                .copied()
                .unwrap_or(self.end)
                .min(self.end);
            while self.pos < line_end && out.len() < MAX_SENTENCE_WORDS {
                let w = shared.ids[self.pos];
                self.pos += 1;
                if shared.subsampler.keep(w, rng) {
                    out.push(w);
                }
            }
            if self.pos == line_end {
                break;
            }
        }
        (self.pos - start) as u64
    }
}
