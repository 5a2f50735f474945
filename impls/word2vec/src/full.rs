//! `full`: the FULL-W2V scheme (Randall et al., Section 3) on the CPU.
//!
//! Each thread reads its slice of the corpus as one stream of kept words (sentence delimiters
//! ignored, Section 4) and slides a window of fixed half-width `W_f = ceil(W / 2)` over it (the
//! mean of word2vec.c's random reduced window, Section 3.2). For the center word `w` at
//! position `p`, the context is the up to `2 W_f` kept words within `W_f` of `p`; `w` and K
//! negatives drawn once per window (a draw equal to `w` skipped) are the targets.
//!
//! - Negative independence (Section 3.1): each target's vector is loaded once, paired with every
//!   context word (`f = <c, t>`, `g = alpha (label - sigmoid(f))`, context update `+= g t`,
//!   target update `+= g c`), and its accumulated update is added to `out[t]` once. The context
//!   vectors do not change within a window (their updates wait in `pending`), so the targets are
//!   independent and the window runs as one batch of small products ([`crate::batch`], the
//!   kernels `gemm` uses): `S = C T^T`, then `pending += G T` and `out[t] += G^T C`.
//! - Lifetime reuse of context words (Section 3.2): a word's input vector is loaded into a ring
//!   buffer of `2 W_f + 1` slots when it enters the window, kept there (with the updates
//!   applied after every window it is a context of, and their sum) while the window slides
//!   over it, and its summed update is added to `in[w]` once when it leaves. Adding the delta
//!   rather than storing the local copy keeps what other threads wrote meanwhile (Hogwild).
//!
//! The stream, the windows and their products are written once, over where the context rows
//! live between windows (the `ContextRows` trait): the ring buffer here, the shared model in
//! the FULL-Register ablation ([`crate::full_register`]), which is everything above but the
//! ring buffer.
//!
//! Model traffic per kept word: one input row read and one written, `2 m` output rows (`m <=
//! K + 1`), against `gemm`'s `2 (n + m)` and `hogwild`'s `n (2 + 2 m)` rows (`n` contexts).
//! Arithmetic is the same `6 d` flops per (context, target) pair, now `2 W_f m` pairs per word.

use crate::batch;
use crate::corpus::{Corpus, MAX_SENTENCE_WORDS};
use crate::driver::{self, ChunkKernel, Shared, ThreadState};
use crate::model::HogwildMatrix;
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::sampling::Sigmoid;
use crate::vecops::add;
use crate::{Par, Trainer};
use parbench_common::rng::Rng;
use std::ops::Range;

/// FULL-W2V: fixed window, shared negatives processed one at a time, context ring buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Full;

impl Trainer for Full {
    fn name(&self) -> &'static str {
        "full"
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &TrainParams,
        par: Par,
        progress: &mut dyn FnMut(&EpochReport) -> Control,
    ) -> Result<TrainOutput, W2vError> {
        driver::train(self, corpus, params, par, progress)
    }
}

/// The fixed half-width FULL-W2V uses for a maximum window `window`.
pub fn fixed_half_window(window: usize) -> usize {
    window.div_ceil(2)
}

/// Where the stream of kept words, the targets and the learning rate come from: the corpus
/// with subsampling and sampled negatives in training, fixed lists in tests.
trait WindowSource {
    /// The next kept word, `None` at the end of the stream.
    fn next_word(&mut self, stats: &mut EpochStats) -> Option<u32>;
    /// The word2vec.c sentence of the word `next_word` returned last, as a number that changes
    /// where a sentence does (the stream ignores sentences; this only counts the pairings
    /// that cross one).
    fn sentence(&self) -> u64;
    /// `center` followed by the negatives of its window.
    fn targets(&mut self, center: u32, out: &mut Vec<u32>);
    fn alpha(&self) -> f32;
}

/// Corpus words between two updates of the shared word counter (and checks of the stop flag).
const WORDS_PER_TICK: u64 = 10_000;

struct CorpusSource<'a, 'b> {
    shared: &'a Shared<'b>,
    rng: &'a mut Rng,
    pos: usize,
    end: usize,
    since_tick: u64,
    alpha: f32,
    /// word2vec.c's sentences, as [`driver::Sentences`] cuts them: the current one's number
    /// and kept words, whether a line ended since its last word, and the next line end
    /// (`usize::MAX` past the last) with its index.
    sentence: u64,
    sentence_kept: usize,
    line_ended: bool,
    line: usize,
    line_end: usize,
}

impl CorpusSource<'_, '_> {
    fn line_end(shared: &Shared, line: usize) -> usize {
        shared.line_ends.get(line).copied().unwrap_or(usize::MAX)
    }
}

impl WindowSource for CorpusSource<'_, '_> {
    #[inline(always)]
    fn next_word(&mut self, stats: &mut EpochStats) -> Option<u32> {
        while self.pos < self.end {
            let w = self.shared.ids[self.pos];
            self.pos += 1;
            self.since_tick += 1;
            stats.words += 1;
            let at_line_end = self.pos == self.line_end;
            if at_line_end {
                self.line += 1;
                self.line_end = Self::line_end(self.shared, self.line);
            }
            if self.since_tick == WORDS_PER_TICK {
                self.alpha = self.shared.advance(self.since_tick);
                self.since_tick = 0;
                if self.shared.stopped() {
                    self.end = self.pos;
                }
            }
            if self.shared.subsampler.keep(w, self.rng) {
                if self.line_ended || self.sentence_kept == MAX_SENTENCE_WORDS {
                    self.sentence += 1;
                    self.sentence_kept = 0;
                }
                // A line's last word is in the line's sentence; the next kept word is not.
                self.line_ended = at_line_end;
                self.sentence_kept += 1;
                return Some(w);
            }
            self.line_ended |= at_line_end;
        }
        None
    }

    fn sentence(&self) -> u64 {
        self.sentence
    }

    #[inline(always)]
    fn targets(&mut self, center: u32, out: &mut Vec<u32>) {
        self.shared.draw_targets(center, self.rng, out);
    }

    fn alpha(&self) -> f32 {
        self.alpha
    }
}

impl ChunkKernel for Full {
    fn run_chunk(&self, shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
        run_chunk::<Ring>(shared, range, state)
    }
}

/// One thread's slice of the corpus as one stream of windows, the contexts held by `C`: the
/// training loop of `full` (`C` = the ring buffer) and of `full-register` (`C` = the model).
pub(crate) fn run_chunk<C: ContextRows>(
    shared: &Shared,
    range: Range<usize>,
    state: &mut ThreadState,
) {
    let line = driver::first_line_end_after(shared, range.start);
    let mut source = CorpusSource {
        shared,
        rng: &mut state.rng,
        pos: range.start,
        end: range.end,
        since_tick: 0,
        alpha: shared.advance(0),
        sentence: 0,
        sentence_kept: 0,
        line_ended: false,
        line,
        line_end: CorpusSource::line_end(shared, line),
    };
    let half = fixed_half_window(shared.window);
    run_stream_dispatch::<_, C>(
        &shared.input,
        &shared.output,
        &shared.sigmoid,
        half,
        shared.negative,
        &mut source,
        &mut state.stats,
        shared.fma,
        shared.avx512,
        shared.prefetch,
    );
    shared.advance(source.since_tick);
}

#[allow(clippy::too_many_arguments)]
fn run_stream_dispatch<S: WindowSource, C: ContextRows>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
    half: usize,
    negative: usize,
    source: &mut S,
    stats: &mut EpochStats,
    fma: bool,
    avx512: bool,
    prefetch: bool,
) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `fma` is true only when the CPU has AVX2 and FMA, `avx512` only when it has
        // AVX-512F too.
        unsafe {
            run_stream_fma::<S, C>(
                input, output, sigmoid, half, negative, source, stats, avx512, prefetch,
            )
        };
        return;
    }
    let _ = fma;
    run_stream::<false, S, C>(
        input, output, sigmoid, half, negative, source, stats, false, prefetch,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn run_stream_fma<S: WindowSource, C: ContextRows>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
    half: usize,
    negative: usize,
    source: &mut S,
    stats: &mut EpochStats,
    avx512: bool,
    prefetch: bool,
) {
    run_stream::<true, S, C>(
        input, output, sigmoid, half, negative, source, stats, avx512, prefetch,
    )
}

/// Where the window's context rows live while the window slides: the one thing `full` and
/// `full-register` do differently. Stream position `pos` (word `w`) enters the window once,
/// is a context of up to `2 W_f` windows (each loads its row, then applies that window's
/// update to it), and leaves once. Implementations count the input rows they move in `stats`.
pub(crate) trait ContextRows {
    /// Room for the positions of one window of half-width `half`, rows of `dim`.
    fn new(dim: usize, half: usize) -> Self;
    /// Position `pos` (word `w`) enters the window.
    fn enter(&mut self, pos: usize, w: u32, input: &HogwildMatrix, stats: &mut EpochStats);
    /// The row of position `pos` (word `w`) as this window sees it, copied into `dest`.
    fn load(
        &mut self,
        pos: usize,
        w: u32,
        input: &HogwildMatrix,
        dest: &mut [f32],
        stats: &mut EpochStats,
    );
    /// This window's update `delta` of position `pos` (word `w`), after all its targets.
    fn update(
        &mut self,
        pos: usize,
        w: u32,
        delta: &[f32],
        input: &HogwildMatrix,
        stats: &mut EpochStats,
    );
    /// Position `pos` (word `w`) leaves the window.
    fn leave(&mut self, pos: usize, w: u32, input: &HogwildMatrix, stats: &mut EpochStats);
}

/// `full`'s ring buffer (Section 3.2): slot `p % slots` holds stream position `p` while it is
/// in a window, loaded from the model when it enters and added back (as the sum of its updates)
/// when it leaves: one input row read and one written per position.
struct Ring {
    dim: usize,
    slots: usize,
    /// The word's vector as this thread sees it (loaded on entry, updated after each window).
    vectors: Vec<f32>,
    /// The sum of the updates since entry, added to the model on exit.
    deltas: Vec<f32>,
}

impl Ring {
    fn slot(&self, pos: usize) -> Range<usize> {
        slot_range(pos, self.slots, self.dim)
    }
}

impl ContextRows for Ring {
    fn new(dim: usize, half: usize) -> Ring {
        let slots = 2 * half + 1;
        Ring {
            dim,
            slots,
            vectors: vec![0.0; slots * dim],
            deltas: vec![0.0; slots * dim],
        }
    }

    #[inline(always)]
    fn enter(&mut self, pos: usize, w: u32, input: &HogwildMatrix, stats: &mut EpochStats) {
        let r = self.slot(pos);
        input.gather(std::slice::from_ref(&w), &mut self.vectors[r.clone()]);
        self.deltas[r].fill(0.0);
        stats.traffic.input_rows_read += 1;
    }

    #[inline(always)]
    fn load(
        &mut self,
        pos: usize,
        _: u32,
        _: &HogwildMatrix,
        dest: &mut [f32],
        _: &mut EpochStats,
    ) {
        dest.copy_from_slice(&self.vectors[self.slot(pos)]);
    }

    #[inline(always)]
    fn update(&mut self, pos: usize, _: u32, delta: &[f32], _: &HogwildMatrix, _: &mut EpochStats) {
        let r = self.slot(pos);
        add(delta, &mut self.vectors[r.clone()]);
        add(delta, &mut self.deltas[r]);
    }

    /// The summed update goes to the model. Adding the delta rather than storing the local
    /// copy keeps what other threads wrote meanwhile (Hogwild).
    #[inline(always)]
    fn leave(&mut self, pos: usize, w: u32, input: &HogwildMatrix, stats: &mut EpochStats) {
        // SAFETY: the only reference to this input row on this thread.
        add(&self.deltas[self.slot(pos)], unsafe { input.row_mut(w) });
        stats.traffic.input_rows_written += 1;
    }
}

/// The values of stream position `pos` in a ring of `slots` rows of `dim`.
fn slot_range(pos: usize, slots: usize, dim: usize) -> Range<usize> {
    let s = pos % slots;
    s * dim..(s + 1) * dim
}

/// One thread's window over the stream: the words of the positions in it, and the scratch of
/// one window's products.
struct Window<C> {
    dim: usize,
    /// The batched products take their AVX-512 kernels.
    avx512: bool,
    slots: usize,
    /// Slot `p % slots` holds the word at stream position `p` while it is in a window, and
    /// its word2vec.c sentence.
    words: Vec<u32>,
    sentences: Vec<u64>,
    /// The context rows.
    rows: C,
    /// The window's contexts' and targets' rows side by side, the `n x m` errors, one column
    /// of them and the contexts' updates (`n x d`).
    batch_x: Vec<f32>,
    batch_y: Vec<f32>,
    s: Vec<f32>,
    column: Vec<f32>,
    pending: Vec<f32>,
    /// Stream positions of the contexts in `batch_x`.
    contexts: Vec<usize>,
    /// The positions before this one have left the window.
    left: usize,
}

impl<C: ContextRows> Window<C> {
    fn new(dim: usize, half: usize, negative: usize, avx512: bool) -> Self {
        let slots = 2 * half + 1;
        Window {
            dim,
            avx512,
            slots,
            words: vec![0; slots],
            sentences: vec![0; slots],
            rows: C::new(dim, half),
            batch_x: vec![0.0; 2 * half * dim],
            batch_y: vec![0.0; (negative + 1) * dim],
            s: vec![0.0; 2 * half * (negative + 1)],
            column: vec![0.0; 2 * half],
            pending: vec![0.0; 2 * half * dim],
            contexts: vec![0; 2 * half],
            left: 0,
        }
    }

    /// Stream position `pos` (word `w`, of sentence `sentence`) enters the window.
    #[inline(always)]
    fn enter(
        &mut self,
        pos: usize,
        w: u32,
        sentence: u64,
        input: &HogwildMatrix,
        stats: &mut EpochStats,
    ) {
        self.words[pos % self.slots] = w;
        self.sentences[pos % self.slots] = sentence;
        self.rows.enter(pos, w, input, stats);
        stats.kept_words += 1;
    }

    /// The positions before `end` that are still in the window leave it.
    #[inline(always)]
    fn leave_before(&mut self, end: usize, input: &HogwildMatrix, stats: &mut EpochStats) {
        while self.left < end {
            let w = self.word(self.left);
            self.rows.leave(self.left, w, input, stats);
            self.left += 1;
        }
    }

    fn word(&self, pos: usize) -> u32 {
        self.words[pos % self.slots]
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn run_stream<const FMA: bool, S: WindowSource, C: ContextRows>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
    half: usize,
    negative: usize,
    source: &mut S,
    stats: &mut EpochStats,
    avx512: bool,
    prefetch: bool,
) {
    let mut win = Window::<C>::new(input.dim(), half, negative, avx512);
    // With `prefetch` (models past the L2), two windows in flight: the next window's word and
    // targets are drawn, and their rows prefetched, before the window before it is computed,
    // so that the rows' cache misses overlap its work. Every draw comes from the source in the
    // order drawing window by window takes (the next kept word, then the targets and the rate
    // of the window it completes), and the words enter and leave at the same points, so the
    // numbers are those of drawing each window, then computing it, as without `prefetch`.
    let mut targets = Vec::with_capacity(negative + 1);
    let mut next_targets = Vec::with_capacity(negative + 1);
    let mut next_alpha = None;
    let mut next = source.next_word(stats).map(|w| (w, source.sentence()));
    let mut entered = 0usize;
    while let Some((w, sentence)) = next {
        win.enter(entered, w, sentence, input, stats);
        entered += 1;
        // The window this word completes, with its draws (made now unless drawn ahead).
        let ready = entered
            .checked_sub(half + 1)
            .map(|center| match next_alpha.take() {
                Some(alpha) => {
                    std::mem::swap(&mut targets, &mut next_targets);
                    (center, alpha)
                }
                None => (center, draw_window(source, win.word(center), &mut targets)),
            });
        next = source.next_word(stats).map(|w| (w, source.sentence()));
        let Some((center, alpha)) = ready else {
            continue;
        };
        if let Some((w, _)) = next.filter(|_| prefetch) {
            // The window the next word completes is centered one position on.
            next_alpha = Some(draw_window(source, win.word(center + 1), &mut next_targets));
            input.prefetch(std::slice::from_ref(&w));
            output.prefetch(&next_targets);
        }
        window::<FMA, C>(
            &mut win, center, entered, half, &targets, alpha, input, output, sigmoid, stats,
        );
        win.leave_before((center + 1).saturating_sub(half), input, stats);
    }
    finish_stream::<FMA, S, C>(
        &mut win,
        entered,
        half,
        source,
        &mut targets,
        input,
        output,
        sigmoid,
        stats,
    );
}

/// After the stream's last word: the windows of the last `half` positions (each drawn, then
/// computed: none follows them), then every position leaves.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn finish_stream<const FMA: bool, S: WindowSource, C: ContextRows>(
    win: &mut Window<C>,
    entered: usize,
    half: usize,
    source: &mut S,
    targets: &mut Vec<u32>,
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
    stats: &mut EpochStats,
) {
    for center in entered.saturating_sub(half)..entered {
        let alpha = draw_window(source, win.word(center), targets);
        window::<FMA, C>(
            win, center, entered, half, targets, alpha, input, output, sigmoid, stats,
        );
    }
    win.leave_before(entered, input, stats);
}

/// The targets of the window centered on `center` (the center word, then its negatives), and
/// the learning rate it trains at.
#[inline(always)]
fn draw_window<S: WindowSource>(source: &mut S, center: u32, targets: &mut Vec<u32>) -> f32 {
    source.targets(center, targets);
    source.alpha()
}

/// Contexts `win.batch_x[..n]` against `targets`, all distinct: the logits, the errors
/// (`positive_first`: `targets[0]` is the center word), the contexts' pending updates
/// (`win.pending[..n]`) and the targets' rows in the model.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn window_batch<const FMA: bool, C>(
    win: &mut Window<C>,
    n: usize,
    targets: &[u32],
    positive_first: bool,
    alpha: f32,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
) {
    let (d, m, avx512) = (win.dim, targets.len(), win.avx512);
    output.gather(targets, &mut win.batch_y);
    let (x, y) = (&win.batch_x[..n * d], &win.batch_y[..m * d]);
    let s = &mut win.s[..n * m];
    batch::logits::<FMA>(avx512, x, y, d, n, m, s);
    batch::errors(s, m, alpha, sigmoid, positive_first);
    for (i, pending) in win.pending[..n * d].chunks_exact_mut(d).enumerate() {
        batch::combine::<FMA>(avx512, &s[i * m..(i + 1) * m], y, d, pending);
    }
    let column = &mut win.column[..n];
    for (j, &t) in targets.iter().enumerate() {
        for (i, g) in column.iter_mut().enumerate() {
            *g = s[i * m + j];
        }
        // SAFETY: the only reference to this output row on this thread.
        batch::combine::<FMA>(avx512, column, x, d, unsafe { output.row_mut(t) });
    }
}

/// One window: every target against every context word of `center`'s window. A function
/// rather than a closure in [`run_stream`]: a closure is compiled without the enclosing
/// function's `target_feature`s, which turns `mul_add` into a libm call (measured 25x slower).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn window<const FMA: bool, C: ContextRows>(
    win: &mut Window<C>,
    center: usize,
    entered: usize,
    half: usize,
    targets: &[u32],
    alpha: f32,
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    sigmoid: &Sigmoid,
    stats: &mut EpochStats,
) {
    let lo = center.saturating_sub(half);
    let hi = (center + half).min(entered - 1);
    let d = win.dim;
    // The window's contexts side by side (from where `C` keeps them) and its targets' rows
    // (read from the model once): one batch of products, as in `gemm`.
    let mut n = 0;
    let center_sentence = win.sentences[center % win.slots];
    for q in (lo..=hi).filter(|&q| q != center) {
        stats.cross_sentence_pairs += u64::from(win.sentences[q % win.slots] != center_sentence);
        let w = win.word(q);
        let dest = &mut win.batch_x[n * d..(n + 1) * d];
        win.rows.load(q, w, input, dest, stats);
        win.contexts[n] = q;
        n += 1;
    }
    win.pending[..n * d].fill(0.0);
    // Targets one at a time, as the definition has it, is the same as a batch of distinct
    // targets (the contexts are fixed within the window); a repeated negative must see its
    // first occurrence's update, so the targets run in batches that end before a repeat.
    let mut start = 0;
    while start < targets.len() {
        let mut end = start + 1;
        while end < targets.len() && !targets[start..end].contains(&targets[end]) {
            end += 1;
        }
        window_batch::<FMA, C>(
            win,
            n,
            &targets[start..end],
            start == 0,
            alpha,
            output,
            sigmoid,
        );
        start = end;
    }
    stats.pairs += n as u64 * targets.len() as u64;
    stats.context_pairs += n as u64;
    stats.traffic.output_rows_read += targets.len() as u64;
    stats.traffic.output_rows_written += targets.len() as u64;
    for i in 0..n {
        let q = win.contexts[i];
        let w = win.word(q);
        win.rows
            .update(q, w, &win.pending[i * d..(i + 1) * d], input, stats);
    }
}

/// A fixed stream for the tests: the words, then for each center in order its targets.
struct FixedSource<'a> {
    words: &'a [u32],
    pos: usize,
    targets: &'a [Vec<u32>],
    next_center: usize,
    alpha: f32,
}

impl WindowSource for FixedSource<'_> {
    fn next_word(&mut self, stats: &mut EpochStats) -> Option<u32> {
        let w = self.words.get(self.pos).copied()?;
        self.pos += 1;
        stats.words += 1;
        Some(w)
    }
    /// The fixed streams are one sentence.
    fn sentence(&self) -> u64 {
        0
    }
    fn targets(&mut self, center: u32, out: &mut Vec<u32>) {
        out.clear();
        let given = &self.targets[self.next_center];
        assert_eq!(
            given.first(),
            Some(&center),
            "targets must start with the center"
        );
        out.extend_from_slice(given);
        self.next_center += 1;
    }
    fn alpha(&self) -> f32 {
        self.alpha
    }
}

/// Runs `full` over the stream `words` on plain matrices with half-window `half`: the center
/// at stream position `p` uses `targets[p]` (the center word first, then its negatives). No
/// subsampling; the learning rate stays `alpha`. Returns the pair and traffic counts. The same
/// code the training loop runs, exposed for the conformance tests.
///
/// Runs the AVX2 + FMA instantiation where the CPU has them, its products in AVX-512 where the
/// CPU has that.
///
/// # Panics
/// When `targets` has fewer entries than `words` or one does not start with its center word.
pub fn step_stream(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    half: usize,
    words: &[u32],
    targets: &[Vec<u32>],
    alpha: f32,
) -> EpochStats {
    step_stream_on::<Ring>(
        driver::cpu_has_fma(),
        input,
        output,
        dim,
        half,
        words,
        targets,
        alpha,
    )
}

/// [`step_stream`] on the portable instantiation whatever the CPU has, so that tests on an
/// AVX2 host check the code an older CPU runs.
#[doc(hidden)]
pub fn step_stream_portable(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    half: usize,
    words: &[u32],
    targets: &[Vec<u32>],
    alpha: f32,
) -> EpochStats {
    step_stream_on::<Ring>(false, input, output, dim, half, words, targets, alpha)
}

/// [`step_stream`] with the context rows held by `C`; `fma` must be true only where the CPU
/// has AVX2 and FMA (with it the AVX-512 products run where the CPU has them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_stream_on<C: ContextRows>(
    fma: bool,
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    half: usize,
    words: &[u32],
    targets: &[Vec<u32>],
    alpha: f32,
) -> EpochStats {
    assert!(targets.len() >= words.len());
    let input = HogwildMatrix::new(input, dim);
    let output = HogwildMatrix::new(output, dim);
    let sigmoid = Sigmoid::new();
    let negative = targets.iter().map(|t| t.len()).max().unwrap_or(1);
    let mut source = FixedSource {
        words,
        pos: 0,
        targets,
        next_center: 0,
        alpha,
    };
    let mut stats = EpochStats::default();
    run_stream_dispatch::<_, C>(
        &input,
        &output,
        &sigmoid,
        half.max(1),
        negative,
        &mut source,
        &mut stats,
        fma,
        fma && driver::cpu_has_avx512(),
        // Prefetches change no number; on, the tests run the code large models run.
        true,
    );
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A stream that logs every call made of it: words from a list, the sentence changing
    /// every 7 words, and targets and a rate of their own for every window (from a count of
    /// the windows drawn), so that a window computed with another's shows in the model.
    struct Logged<'a> {
        words: &'a [u32],
        vocabulary: u32,
        pos: usize,
        windows: u32,
        log: RefCell<Vec<String>>,
    }

    impl WindowSource for Logged<'_> {
        fn next_word(&mut self, stats: &mut EpochStats) -> Option<u32> {
            let w = self.words.get(self.pos).copied();
            self.pos += usize::from(w.is_some());
            stats.words += u64::from(w.is_some());
            self.log.borrow_mut().push(format!("word {w:?}"));
            w
        }
        fn sentence(&self) -> u64 {
            self.log.borrow_mut().push("sentence".to_string());
            self.pos as u64 / 7
        }
        fn targets(&mut self, center: u32, out: &mut Vec<u32>) {
            self.windows += 1;
            out.clear();
            out.push(center);
            // Three negatives, a repeat and the center itself among them now and then.
            out.extend((0..3).map(|k| (self.windows * 5 + k * k) % self.vocabulary));
            self.log
                .borrow_mut()
                .push(format!("targets {center} -> {out:?}"));
        }
        fn alpha(&self) -> f32 {
            self.log.borrow_mut().push("alpha".to_string());
            0.02 + 0.001 * (self.windows % 9) as f32
        }
    }

    /// The loop before the windows were pipelined: each window drawn, then computed.
    fn in_turn<C: ContextRows>(
        input: &HogwildMatrix,
        output: &HogwildMatrix,
        half: usize,
        source: &mut Logged,
        stats: &mut EpochStats,
    ) {
        let sigmoid = Sigmoid::new();
        let mut win = Window::<C>::new(input.dim(), half, 3, false);
        let mut targets = Vec::new();
        let mut entered = 0;
        while let Some(w) = source.next_word(stats) {
            let sentence = source.sentence();
            win.enter(entered, w, sentence, input, stats);
            entered += 1;
            if entered > half {
                let center = entered - 1 - half;
                let alpha = draw_window(source, win.word(center), &mut targets);
                window::<false, C>(
                    &mut win, center, entered, half, &targets, alpha, input, output, &sigmoid,
                    stats,
                );
                win.leave_before((center + 1).saturating_sub(half), input, stats);
            }
        }
        finish_stream::<false, _, C>(
            &mut win,
            entered,
            half,
            source,
            &mut targets,
            input,
            output,
            &sigmoid,
            stats,
        );
    }

    fn pipelined_is_in_turn<C: ContextRows>() {
        let (vocabulary, dim) = (23u32, 5);
        let stream: Vec<u32> = (0..40u32).map(|i| (i * i + 3 * i) % vocabulary).collect();
        for half in 1..=3 {
            for len in [0, 1, 2, 3, 4, 7, 40] {
                let start: Vec<f32> = (0..vocabulary as usize * dim)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 200.0)
                    .collect();
                // `None`: the reference loop; `Some(prefetch)`: the stream.
                let run = |mode: Option<bool>| {
                    let (mut inp, mut out) = (start.clone(), start.clone());
                    out.reverse();
                    let mut source = Logged {
                        words: &stream[..len],
                        vocabulary,
                        pos: 0,
                        windows: 0,
                        log: RefCell::new(Vec::new()),
                    };
                    let mut stats = EpochStats::default();
                    {
                        let input = HogwildMatrix::new(&mut inp, dim);
                        let output = HogwildMatrix::new(&mut out, dim);
                        if let Some(prefetch) = mode {
                            let sigmoid = Sigmoid::new();
                            run_stream::<false, _, C>(
                                &input,
                                &output,
                                &sigmoid,
                                half,
                                3,
                                &mut source,
                                &mut stats,
                                false,
                                prefetch,
                            );
                        } else {
                            in_turn::<C>(&input, &output, half, &mut source, &mut stats);
                        }
                    }
                    (inp, out, stats, source.log.into_inner())
                };
                let want = run(None);
                for prefetch in [true, false] {
                    let (inp, out, stats, log) = run(Some(prefetch));
                    let at = format!("half {half}, {len} words, prefetch {prefetch}");
                    assert_eq!(log, want.3, "{at}: the calls");
                    assert_eq!(stats, want.2, "{at}");
                    assert!(inp == want.0 && out == want.1, "{at}: the models differ");
                    assert_eq!(stats.pairs > 0, len > 1, "{at}");
                }
            }
        }
    }

    #[test]
    fn the_pipelined_windows_draw_and_compute_what_windows_in_turn_do() {
        pipelined_is_in_turn::<Ring>();
        pipelined_is_in_turn::<crate::full_register::ModelRows>();
    }
}
