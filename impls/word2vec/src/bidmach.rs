//! `bidmach`: BIDMach's CPU scheme as pWord2Vec describes it (Ji et al., Section III-D): the
//! same batches as `gemm` (a center word's context words against the center and K negatives
//! shared by the window), organised as matrix-vector products instead of one matrix product.
//!
//! Two steps per batch, each a sequence of matrix-vector products, one per output row `t`,
//! reading the rows from the model as it goes:
//!
//! ```text
//! positives: t = the center, label 1;  negatives: each negative t in turn, label 0
//!   g_i = alpha (label - sigmoid(<in[c_i], out[t]>))   for every context word c_i
//!   e_i += g_i out[t]                                   (out[t] as it was before this product)
//!   out[t] += sum_i g_i in[c_i]
//! after each step: in[c_i] += e_i, e cleared
//! ```
//!
//! So the negatives see the inputs the positive step moved. The shared negatives give it
//! `gemm`'s reuse of output rows across the window, but no product is register- or
//! cache-blocked: each reads every context row again, level-1 work of `6 d` flops per pair for
//! about `4 d` floats moved through the cache, as in `hogwild`. The paper measured this scheme
//! at 1.6x the original word2vec on a CPU, against 2.8-3.6x for its GEMM formulation.

use crate::corpus::Corpus;
use crate::driver::{self, ChunkKernel, Shared, ThreadState};
use crate::model::HogwildMatrix;
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::sampling::Sigmoid;
use crate::vecops::{add, axpy, dot};
use crate::{Par, Trainer};
use std::ops::Range;

/// Shared negatives, products one output row at a time (BIDMach on a CPU).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bidmach;

impl Trainer for Bidmach {
    fn name(&self) -> &'static str {
        "bidmach"
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

/// One thread's buffers: the context words' input updates (`n x d`) and their errors.
struct Scratch {
    dim: usize,
    updates: Vec<f32>,
    errors: Vec<f32>,
}

impl Scratch {
    fn new(dim: usize, max_inputs: usize) -> Scratch {
        Scratch {
            dim,
            updates: vec![0.0; max_inputs * dim],
            errors: vec![0.0; max_inputs],
        }
    }
}

impl ChunkKernel for Bidmach {
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
    let mut scratch = Scratch::new(shared.dim, 2 * shared.window);
    crate::gemm::for_each_batch(shared, range, state, |contexts, targets, alpha, stats| {
        batch_update::<FMA>(
            &shared.input,
            &shared.output,
            contexts,
            targets,
            alpha,
            &shared.sigmoid,
            &mut scratch,
            stats,
        )
    });
}

/// One batch: `contexts` are the inputs, `targets[0]` the center word (label 1) and the rest
/// negatives (label 0); the positive step, then the negative one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn batch_update<const FMA: bool>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
    sigmoid: &Sigmoid,
    scratch: &mut Scratch,
    stats: &mut EpochStats,
) {
    let (n, m) = (contexts.len(), targets.len());
    let Some((center, negatives)) = targets.split_first() else {
        return;
    };
    let positives = std::slice::from_ref(center);
    for (step, label) in [(positives, 1.0), (negatives, 0.0)] {
        one_step::<FMA>(
            input, output, contexts, step, label, alpha, sigmoid, scratch,
        );
    }
    stats.pairs += (n * m) as u64;
    // Every product reads each context row from the model again; the updates are written
    // once per step.
    stats.traffic.input_rows_read += (n * m) as u64;
    stats.traffic.input_rows_written += (2 * n) as u64;
    stats.traffic.output_rows_read += m as u64;
    stats.traffic.output_rows_written += m as u64;
}

/// One step: a matrix-vector product per target of `step`, every one labelled `label`, then
/// the context rows updated.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn one_step<const FMA: bool>(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    contexts: &[u32],
    step: &[u32],
    label: f32,
    alpha: f32,
    sigmoid: &Sigmoid,
    scratch: &mut Scratch,
) {
    if step.is_empty() {
        return;
    }
    let d = scratch.dim;
    let n = contexts.len();
    let updates = &mut scratch.updates[..n * d];
    updates.fill(0.0);
    let errors = &mut scratch.errors[..n];
    for &t in step {
        {
            // SAFETY: input and output rows are different matrices, and only these shared
            // views of them are alive on this thread until the block ends.
            let target = unsafe { output.row(t) };
            for ((&c, g), update) in contexts
                .iter()
                .zip(errors.iter_mut())
                .zip(updates.chunks_exact_mut(d))
            {
                let f = dot::<FMA>(unsafe { input.row(c) }, target);
                *g = (label - sigmoid.eval(f)) * alpha;
                axpy::<FMA>(*g, target, update);
            }
        }
        // SAFETY: the shared views above are gone; the only reference to this output row.
        let target = unsafe { output.row_mut(t) };
        for (&c, &g) in contexts.iter().zip(errors.iter()) {
            // SAFETY: a row of the input matrix, read while only the output row is borrowed.
            axpy::<FMA>(g, unsafe { input.row(c) }, target);
        }
    }
    for (&c, update) in contexts.iter().zip(updates.chunks_exact(d)) {
        // SAFETY: no other reference to the input rows is alive on this thread.
        add(update, unsafe { input.row_mut(c) });
    }
}

/// The `bidmach` update of one batch on plain matrices, with the negatives given: `contexts`
/// the inputs, `targets[0]` the center word (label 1), the rest negatives. The code the
/// training loop runs (the AVX2 + FMA instantiation where the CPU has them), for the tests.
pub fn step(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
) {
    step_on(
        driver::cpu_has_fma(),
        input,
        output,
        dim,
        contexts,
        targets,
        alpha,
    )
}

/// [`step`] on the portable instantiation whatever the CPU has.
#[doc(hidden)]
pub fn step_portable(
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
) {
    step_on(false, input, output, dim, contexts, targets, alpha)
}

/// `fma` must be true only where the CPU has AVX2 and FMA.
fn step_on(
    fma: bool,
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
) {
    let input = HogwildMatrix::new(input, dim);
    let output = HogwildMatrix::new(output, dim);
    let sigmoid = Sigmoid::new();
    let mut scratch = Scratch::new(dim, contexts.len());
    let mut stats = EpochStats::default();
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: `fma` is true only where the CPU has AVX2 and FMA.
        unsafe {
            step_fma(
                &input,
                &output,
                contexts,
                targets,
                alpha,
                &sigmoid,
                &mut scratch,
                &mut stats,
            )
        };
        return;
    }
    let _ = fma;
    batch_update::<false>(
        &input,
        &output,
        contexts,
        targets,
        alpha,
        &sigmoid,
        &mut scratch,
        &mut stats,
    );
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn step_fma(
    input: &HogwildMatrix,
    output: &HogwildMatrix,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
    sigmoid: &Sigmoid,
    scratch: &mut Scratch,
    stats: &mut EpochStats,
) {
    batch_update::<true>(
        input, output, contexts, targets, alpha, sigmoid, scratch, stats,
    )
}
