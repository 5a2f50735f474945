//! `full-register`: FULL-W2V's ablation FULL-Register (Randall et al., Section 5 and Table 4):
//! the techniques of Section 3.1 without the context ring buffer of Section 3.2.
//!
//! Everything `full` does but one: the same stream of kept words (sentence delimiters
//! ignored), the same fixed half-width `W_f = ceil(W / 2)`, the same targets (the center and K
//! negatives drawn once per window) each loaded once per window, paired with every context
//! word and added back once (negative independence, the "register" of the name: here a local
//! copy for the whole window). But a context row is not kept between windows: every window
//! reads each of its up to `2 W_f` context rows from the shared model and adds its update back
//! to the model when the window is done, as word2vec.c does per (context, center) pair but
//! once per window. The loop is `full`'s ([`crate::full`]) with the model in place of the ring
//! buffer, so the two differ in exactly that.
//!
//! Within one window the contexts are a snapshot (their updates wait until every target is
//! done), as in `full`; on one thread with distinct words in every window the two variants
//! compute the same model up to rounding (`full` sums a word's updates before adding them to
//! the model, this adds each window's), and with a word repeated inside a window this one
//! sees each window's update of the other occurrence, which `full`'s separate ring slots do
//! not.
//!
//! Model traffic per window of `n` contexts (`n = 2 W_f` away from the ends of a thread's
//! stream) and `m <= K + 1` targets: `n` input rows read and `n` written, `m` output rows read
//! and `m` written; per kept word `2 W_f + m` read, against `full`'s `1 + m`. This is the
//! `2 W_f / (2 W_f + 1)` of Section 3.2 applied to the context rows: `full` moves each context
//! row once per lifetime of `2 W_f + 1` windows, this once per window it is a context of.

use crate::corpus::Corpus;
use crate::driver::{self, ChunkKernel, Shared, ThreadState};
use crate::full::{self, ContextRows};
use crate::model::HogwildMatrix;
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::vecops::add;
use crate::{Par, Trainer};
use std::ops::Range;

/// FULL-Register: `full` without the context ring buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct FullRegister;

impl Trainer for FullRegister {
    fn name(&self) -> &'static str {
        "full-register"
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

impl ChunkKernel for FullRegister {
    fn run_chunk(&self, shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
        full::run_chunk::<ModelRows>(shared, range, state)
    }
}

/// The context rows stay in the shared model: loaded by every window that has them as a
/// context, and that window's update added straight back.
pub(crate) struct ModelRows;

impl ContextRows for ModelRows {
    fn new(_: usize, _: usize) -> ModelRows {
        ModelRows
    }

    #[inline(always)]
    fn enter(&mut self, _: usize, _: u32, _: &HogwildMatrix, _: &mut EpochStats) {}

    #[inline(always)]
    fn load(
        &mut self,
        _: usize,
        w: u32,
        input: &HogwildMatrix,
        dest: &mut [f32],
        stats: &mut EpochStats,
    ) {
        input.gather(std::slice::from_ref(&w), dest);
        stats.traffic.input_rows_read += 1;
    }

    #[inline(always)]
    fn update(
        &mut self,
        _: usize,
        w: u32,
        delta: &[f32],
        input: &HogwildMatrix,
        stats: &mut EpochStats,
    ) {
        // SAFETY: the only reference to this input row on this thread (`delta` is this
        // thread's scratch, not a view of the model).
        add(delta, unsafe { input.row_mut(w) });
        stats.traffic.input_rows_written += 1;
    }

    #[inline(always)]
    fn leave(&mut self, _: usize, _: u32, _: &HogwildMatrix, _: &mut EpochStats) {}
}

/// Runs `full-register` over the stream `words` on plain matrices with half-window `half`, as
/// [`full::step_stream`] does for `full`: the center at stream position `p` uses `targets[p]`
/// (the center word first, then its negatives), no subsampling, the learning rate stays
/// `alpha`. Returns the pair and traffic counts. The same code the training loop runs (the
/// AVX2 + FMA instantiation where the CPU has them), exposed for the conformance tests.
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
    full::step_stream_on::<ModelRows>(
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
    full::step_stream_on::<ModelRows>(false, input, output, dim, half, words, targets, alpha)
}
