//! `gemm`: pWord2Vec (Ji et al., Section III): minibatching with shared negative samples.
//!
//! For every kept center word `w` with reduced window `b` (drawn as in `hogwild`), its `n`
//! context words form the input batch `X` (`n x d`, copied from `in`), and `w` plus K negatives
//! drawn once for the whole batch (a draw equal to `w` skipped) form the outputs `Y`
//! (`m x d`, `m <= K + 1`, copied from `out`). Then three small matrix products:
//!
//! ```text
//! S  = X Y^T                          n x m logits
//! G  = alpha (labels - sigmoid(S))    labels: 1 in column 0, else 0
//! dX = G Y,   dY = G^T X              the input and output updates
//! in[c_i] += dX_i,  out[t_j] += dY_j  written back once per batch, each row of dX and dY
//!                                     summed in registers and added straight into the model
//! ```
//!
//! All from the same snapshot of the rows, unlike `hogwild`, which updates `out[t]` after each
//! context word; with one context word and distinct targets the two coincide (tested).
//!
//! Cost per batch: `6 n m d` flops for `2 (n + m) d` floats moved to and from the model, against
//! `hogwild`'s `n (2 + 2 m) d`: the outputs are loaded once instead of once per context word.
//! The products (`crate::batch`) are register-blocked loops (2 inputs x 4 outputs per block for
//! the logits), with AVX2/FMA intrinsics where the CPU has them; at these shapes (about
//! 10 x 100..300 times 300 x 6) a BLAS call would spend more on dispatch and packing than on
//! arithmetic.

use crate::batch;
use crate::corpus::Corpus;
use crate::driver::{self, ChunkKernel, Sentences, Shared, ThreadState};
use crate::model::HogwildMatrix;
use crate::problem::{Control, EpochReport, EpochStats, TrainOutput, TrainParams, W2vError};
use crate::sampling::Sigmoid;
use crate::{Par, Trainer};
use std::ops::Range;

/// pWord2Vec's minibatched update with shared negatives.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gemm;

impl Trainer for Gemm {
    fn name(&self) -> &'static str {
        "gemm"
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

/// One thread's buffers: the batch's rows and the products.
struct Scratch {
    dim: usize,
    /// `n x d` copies of the input rows, then `m x d` of the output rows.
    x: Vec<f32>,
    y: Vec<f32>,
    /// `n x m` logits, then errors scaled by alpha.
    s: Vec<f32>,
    /// One column of `s`, contiguous.
    column: Vec<f32>,
}

impl Scratch {
    fn new(dim: usize, max_inputs: usize, max_outputs: usize) -> Scratch {
        Scratch {
            dim,
            x: vec![0.0; max_inputs * dim],
            y: vec![0.0; max_outputs * dim],
            s: vec![0.0; max_inputs * max_outputs],
            column: vec![0.0; max_inputs],
        }
    }
}

impl ChunkKernel for Gemm {
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
    let mut scratch = Scratch::new(shared.dim, 2 * shared.window, shared.negative + 1);
    for_each_batch(shared, range, state, |contexts, targets, alpha, stats| {
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

/// The batches of a chunk, as pWord2Vec forms them, each handed to `update` with the rate
/// then: for every kept center word, its context words within a reduced window (drawn as in
/// `hogwild`) and its targets, the center then K negatives drawn once for the whole window (a
/// draw equal to the center skipped). Shared by the variants that batch this way.
#[inline(always)]
pub(crate) fn for_each_batch(
    shared: &Shared,
    range: Range<usize>,
    state: &mut ThreadState,
    mut update: impl FnMut(&[u32], &[u32], f32, &mut EpochStats),
) {
    let window = shared.window;
    let mut sentence = Vec::with_capacity(crate::corpus::MAX_SENTENCE_WORDS);
    let mut contexts: Vec<u32> = Vec::with_capacity(2 * window);
    let mut targets: Vec<u32> = Vec::with_capacity(shared.negative + 1);
    let mut sentences = Sentences::new(shared, range);
    let mut alpha = shared.advance(0);
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
            contexts.clear();
            contexts.extend((lo..=hi).filter(|&c| c != pos).map(|c| sentence[c]));
            if contexts.is_empty() {
                continue;
            }
            state.stats.context_pairs += contexts.len() as u64;
            targets.clear();
            targets.push(center);
            for _ in 0..shared.negative {
                let t = shared.negatives.sample(&mut state.rng);
                if t != center {
                    targets.push(t);
                }
            }
            update(&contexts, &targets, alpha, &mut state.stats);
        }
        alpha = shared.advance(consumed);
    }
}

/// One batch: `contexts` are the inputs, `targets[0]` the center word (label 1) and the rest
/// negatives (label 0).
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
    let d = scratch.dim;
    let (n, m) = (contexts.len(), targets.len());
    input.gather(contexts, &mut scratch.x);
    output.gather(targets, &mut scratch.y);
    let (x, y) = (&scratch.x[..n * d], &scratch.y[..m * d]);
    let s = &mut scratch.s[..n * m];
    batch::logits::<FMA>(x, y, d, n, m, s);
    batch::errors(s, m, alpha, sigmoid, true);
    for (i, &c) in contexts.iter().enumerate() {
        // SAFETY: the only reference to the row on this thread while it lives.
        batch::combine::<FMA>(&s[i * m..(i + 1) * m], y, d, unsafe { input.row_mut(c) });
    }
    let column = &mut scratch.column[..n];
    for (j, &t) in targets.iter().enumerate() {
        for (i, g) in column.iter_mut().enumerate() {
            *g = s[i * m + j];
        }
        // SAFETY: as above, for the output matrix.
        batch::combine::<FMA>(column, x, d, unsafe { output.row_mut(t) });
    }
    stats.pairs += (n * m) as u64;
    stats.traffic.input_rows_read += n as u64;
    stats.traffic.input_rows_written += n as u64;
    stats.traffic.output_rows_read += m as u64;
    stats.traffic.output_rows_written += m as u64;
}

/// The `gemm` update of one batch on plain matrices, with the negatives given: `contexts` the
/// inputs, `targets[0]` the center word (label 1), the rest negatives. The same code the
/// training loop runs (the AVX2 + FMA instantiation where the CPU has them), exposed for the
/// conformance tests.
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

/// [`step`] on the portable instantiation whatever the CPU has, so that tests on an AVX2 host
/// check the code an older CPU runs.
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
    let mut scratch = Scratch::new(dim, contexts.len(), targets.len());
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
