//! `hogwild`: word2vec.c's skip-gram with negative sampling, pair by pair (pWord2Vec's
//! Algorithm 1), threads sharing the model without locks.
//!
//! For every kept center word `w` at position `p` of a sentence, a reduced window
//! `b = W - U[0, W)` is drawn, and for every context word `c` within `b` of `p`: K negatives are
//! drawn (a draw equal to `w` is skipped, as word2vec.c does), then for each target `t` (`w`
//! with label 1, then the negatives with label 0): `f = <in[c], out[t]>`,
//! `g = alpha (label - sigmoid(f))`, `e += g out[t]`, `out[t] += g in[c]`; finally `in[c] += e`.
//!
//! Cost per (context, target) pair: `6 d` flops for `4 d` floats loaded from the model (`in[c]`
//! once per context word, `out[t]` read and written): a level-1 BLAS sequence, bound by memory
//! traffic and latency, which is what the other two variants reduce.

use crate::corpus::Corpus;
use crate::driver::{self, ChunkKernel, Sentences, Shared, ThreadState};
use crate::model::HogwildMatrix;
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::sampling::Sigmoid;
use crate::vecops::{add, axpy, dot};
use crate::{Par, Trainer};
use std::ops::Range;

/// The original word2vec.c algorithm.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hogwild;

impl Trainer for Hogwild {
    fn name(&self) -> &'static str {
        "hogwild"
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

impl ChunkKernel for Hogwild {
    fn run_chunk(&self, shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
        #[cfg(target_arch = "x86_64")]
        if shared.fma {
            // SAFETY: `shared.fma` is set only when the CPU has AVX2 and FMA.
            unsafe { run_chunk_fma(shared, range, state) };
            return;
        }
        run_chunk::<false>(shared, range, state)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_chunk_fma(shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
    run_chunk::<true>(shared, range, state)
}

#[inline(always)]
fn run_chunk<const FMA: bool>(shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
    let mut sentence = Vec::with_capacity(crate::corpus::MAX_SENTENCE_WORDS);
    let mut gradient = vec![0f32; shared.dim];
    let mut targets: Vec<u32> = Vec::with_capacity(shared.negative + 1);
    let mut sentences = Sentences::new(shared, range);
    let mut alpha = shared.advance(0);
    let window = shared.window;
    while !shared.stopped() {
        let consumed = sentences.next(shared, &mut state.rng, &mut sentence);
        if consumed == 0 {
            break;
        }
        state.stats.words += consumed;
        state.stats.kept_words += sentence.len() as u64;
        for pos in 0..sentence.len() {
            let center = sentence[pos];
            let reach = window - state.rng.below(window as u64) as usize;
            let lo = pos.saturating_sub(reach);
            let hi = (pos + reach).min(sentence.len() - 1);
            for (c, &context) in sentence.iter().enumerate().take(hi + 1).skip(lo) {
                if c == pos {
                    continue;
                }
                shared.draw_targets(center, &mut state.rng, &mut targets);
                pair_update::<FMA>(
                    &shared.input,
                    &shared.output,
                    context,
                    &targets,
                    alpha,
                    &shared.sigmoid,
                    &mut gradient,
                    &mut state.stats,
                );
            }
        }
        alpha = shared.advance(consumed);
    }
}

/// One context word against its targets (`targets[0]` positive, the rest negative).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pair_update<const FMA: bool>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    context: u32,
    targets: &[u32],
    alpha: f32,
    sigmoid: &Sigmoid,
    gradient: &mut [f32],
    stats: &mut EpochStats,
) {
    gradient.fill(0.0);
    {
        // SAFETY: only this shared view of row `context` of `input` is alive on this thread
        // until it is dropped below; the output rows are another matrix.
        let l1 = unsafe { input.row(context) };
        for (k, &target) in targets.iter().enumerate() {
            let label = if k == 0 { 1.0 } else { 0.0 };
            // SAFETY: the only reference to this output row on this thread.
            let l2 = unsafe { output.row_mut(target) };
            let f = dot::<FMA>(l1, l2);
            let g = (label - sigmoid.eval(f)) * alpha;
            axpy::<FMA>(g, l2, gradient);
            axpy::<FMA>(g, l1, l2);
        }
    }
    // SAFETY: the shared view above is gone; this is the only reference to the row.
    add(gradient, unsafe { input.row_mut(context) });
    let n = targets.len() as u64;
    stats.pairs += n;
    stats.context_pairs += 1;
    stats.traffic.input_rows_read += 1;
    stats.traffic.input_rows_written += 1;
    stats.traffic.output_rows_read += n;
    stats.traffic.output_rows_written += n;
}

/// The `hogwild` update of one (context, center) pair on plain matrices, with the negatives
/// given: `targets[0]` is the center word (label 1), the rest negatives (label 0). The same
/// code the training loop runs (the AVX2 + FMA instantiation where the CPU has them), exposed
/// for the conformance tests.
pub fn step(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    context: u32,
    targets: &[u32],
    alpha: f32,
) {
    step_on(
        driver::cpu_has_fma(),
        input,
        output,
        dim,
        context,
        targets,
        alpha,
    )
}

/// [`step`] on the portable instantiation whatever the CPU has, so that tests on an AVX2 host
/// check the code an older CPU runs.
#[doc(hidden)]
pub fn step_portable(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    context: u32,
    targets: &[u32],
    alpha: f32,
) {
    step_on(false, input, output, dim, context, targets, alpha)
}

/// `fma` must be true only where the CPU has AVX2 and FMA.
fn step_on(
    fma: bool,
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    context: u32,
    targets: &[u32],
    alpha: f32,
) {
    let input = HogwildMatrix::new(input, dim);
    let output = HogwildMatrix::new(output, dim);
    let sigmoid = Sigmoid::new();
    let mut gradient = vec![0f32; dim];
    let mut stats = EpochStats::default();
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `fma` is true only where the CPU has AVX2 and FMA.
        unsafe {
            step_fma(
                &input,
                &output,
                context,
                targets,
                alpha,
                &sigmoid,
                &mut gradient,
                &mut stats,
            )
        };
        return;
    }
    let _ = fma;
    pair_update::<false>(
        &input,
        &output,
        context,
        targets,
        alpha,
        &sigmoid,
        &mut gradient,
        &mut stats,
    );
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn step_fma(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    context: u32,
    targets: &[u32],
    alpha: f32,
    sigmoid: &Sigmoid,
    gradient: &mut [f32],
    stats: &mut EpochStats,
) {
    pair_update::<true>(
        input, output, context, targets, alpha, sigmoid, gradient, stats,
    )
}
