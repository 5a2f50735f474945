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
            shared.avx512,
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
    // Two batches in flight: the next one is drawn and its rows prefetched before the one
    // before it is computed, so the model rows' cache misses overlap that work. The draws and
    // the updates keep their order, so the numbers are those of drawing and updating in turn.
    // `update` has one call site: called from two, it was not inlined, and a closure compiled
    // apart from the caller's `target_feature`s calls libm for `mul_add` (6x the instructions).
    let mut draws = Draws::new(shared, range);
    let mut batch = [Pending::new(shared), Pending::new(shared)];
    let mut current = 0;
    if !draws.next(shared, state, &mut batch[current]) {
        return;
    }
    loop {
        let drawn = draws.next(shared, state, &mut batch[current ^ 1]);
        if drawn && shared.prefetch {
            shared.input.prefetch(&batch[current ^ 1].contexts);
            shared.output.prefetch(&batch[current ^ 1].targets);
        }
        let b = &batch[current];
        update(&b.contexts, &b.targets, b.alpha, &mut state.stats);
        if !drawn {
            break;
        }
        current ^= 1;
    }
}

/// The batches of a chunk, drawn one at a time: the sentences, and the position reached in the
/// current one.
struct Draws {
    sentences: Sentences,
    sentence: Vec<u32>,
    pos: usize,
    alpha: f32,
    consumed: u64,
}

impl Draws {
    fn new(shared: &Shared, range: Range<usize>) -> Draws {
        Draws {
            sentences: Sentences::new(shared, range),
            sentence: Vec::with_capacity(crate::corpus::MAX_SENTENCE_WORDS),
            pos: 0,
            alpha: shared.advance(0),
            consumed: 0,
        }
    }

    /// Draws the next batch into `out`; false once the chunk is done or the run stopped.
    #[inline(always)]
    fn next(&mut self, shared: &Shared, state: &mut ThreadState, out: &mut Pending) -> bool {
        let window = shared.window;
        loop {
            while self.pos == self.sentence.len() {
                if self.consumed > 0 {
                    self.alpha = shared.advance(self.consumed);
                    self.consumed = 0;
                }
                if shared.stopped() {
                    return false;
                }
                let consumed = self
                    .sentences
                    .next(shared, &mut state.rng, &mut self.sentence);
                if consumed == 0 {
                    return false;
                }
                state.stats.words += consumed;
                state.stats.kept_words += self.sentence.len() as u64;
                self.consumed = consumed;
                self.pos = 0;
            }
            let (pos, sentence) = (self.pos, &self.sentence);
            self.pos += 1;
            let center = sentence[pos];
            let reach = window - state.rng.below(window as u64) as usize;
            let lo = pos.saturating_sub(reach);
            let hi = (pos + reach).min(sentence.len() - 1);
            out.contexts.clear();
            out.contexts
                .extend((lo..=hi).filter(|&c| c != pos).map(|c| sentence[c]));
            if out.contexts.is_empty() {
                continue;
            }
            state.stats.context_pairs += out.contexts.len() as u64;
            shared.draw_targets(center, &mut state.rng, &mut out.targets);
            out.alpha = self.alpha;
            return true;
        }
    }
}

/// A drawn batch waiting for its update.
struct Pending {
    contexts: Vec<u32>,
    targets: Vec<u32>,
    alpha: f32,
}

impl Pending {
    fn new(shared: &Shared) -> Pending {
        Pending {
            contexts: Vec::with_capacity(2 * shared.window),
            targets: Vec::with_capacity(shared.negative + 1),
            alpha: 0.0,
        }
    }
}

/// One batch: `contexts` are the inputs, `targets[0]` the center word (label 1) and the rest
/// negatives (label 0).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn batch_update<const FMA: bool>(
    avx512: bool,
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
    batch::logits::<FMA>(avx512, x, y, d, n, m, s);
    batch::errors(s, m, alpha, sigmoid, true);
    for (i, &c) in contexts.iter().enumerate() {
        // SAFETY: the only reference to the row on this thread while it lives.
        batch::combine::<FMA>(avx512, &s[i * m..(i + 1) * m], y, d, unsafe {
            input.row_mut(c)
        });
    }
    let column = &mut scratch.column[..n];
    for (j, &t) in targets.iter().enumerate() {
        for (i, g) in column.iter_mut().enumerate() {
            *g = s[i * m + j];
        }
        // SAFETY: as above, for the output matrix.
        batch::combine::<FMA>(avx512, column, x, d, unsafe { output.row_mut(t) });
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

/// `fma` must be true only where the CPU has AVX2 and FMA; with it the AVX-512 products run
/// where the CPU has them.
fn step_on(
    fma: bool,
    input: &mut [f32],
    output: &mut [f32],
    dim: usize,
    contexts: &[u32],
    targets: &[u32],
    alpha: f32,
) {
    let avx512 = fma && driver::cpu_has_avx512();
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
                avx512,
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
        false,
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
    avx512: bool,
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
        avx512, input, output, contexts, targets, alpha, sigmoid, scratch, stats,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::TrainParams;
    use crate::{Corpus, Par};
    use std::sync::Mutex;

    type Batch = (Vec<u32>, Vec<u32>, f32);

    /// Records the batches a chunk hands to its update: through [`for_each_batch`]'s pipeline,
    /// or drawn and handed out in turn (the loop as written before the pipeline).
    struct Recorder {
        pipelined: bool,
        seen: Mutex<Vec<Batch>>,
    }

    impl ChunkKernel for Recorder {
        fn run_chunk(&self, shared: &Shared, range: Range<usize>, state: &mut ThreadState) {
            let mut seen = Vec::new();
            let mut record = |c: &[u32], t: &[u32], a: f32, _: &mut EpochStats| {
                seen.push((c.to_vec(), t.to_vec(), a))
            };
            if self.pipelined {
                for_each_batch(shared, range, state, &mut record);
            } else {
                in_turn(shared, range, state, &mut record);
            }
            self.seen.lock().expect("not poisoned").extend(seen);
        }
    }

    fn in_turn(
        shared: &Shared,
        range: Range<usize>,
        state: &mut ThreadState,
        update: &mut impl FnMut(&[u32], &[u32], f32, &mut EpochStats),
    ) {
        let window = shared.window;
        let mut sentence = Vec::new();
        let mut sentences = Sentences::new(shared, range);
        let mut alpha = shared.advance(0);
        loop {
            let consumed = sentences.next(shared, &mut state.rng, &mut sentence);
            if consumed == 0 {
                break;
            }
            for pos in 0..sentence.len() {
                let reach = window - state.rng.below(window as u64) as usize;
                let lo = pos.saturating_sub(reach);
                let hi = (pos + reach).min(sentence.len() - 1);
                let contexts: Vec<u32> = (lo..=hi)
                    .filter(|&c| c != pos)
                    .map(|c| sentence[c])
                    .collect();
                if contexts.is_empty() {
                    continue;
                }
                let mut targets = vec![sentence[pos]];
                for _ in 0..shared.negative {
                    let t = shared.negatives.sample(&mut state.rng);
                    if t != sentence[pos] {
                        targets.push(t);
                    }
                }
                update(&contexts, &targets, alpha, &mut state.stats);
            }
            alpha = shared.advance(consumed);
        }
    }

    fn batches(pipelined: bool, corpus: &Corpus, params: &TrainParams) -> Vec<Batch> {
        let recorder = Recorder {
            pipelined,
            seen: Mutex::new(Vec::new()),
        };
        driver::train(&recorder, corpus, params, Par::Seq, &mut |_| {
            Control::Continue
        })
        .expect("trains");
        recorder.seen.into_inner().expect("not poisoned")
    }

    #[test]
    fn the_prefetching_pipeline_hands_out_the_batches_drawn_in_turn() {
        // Lines of one word (no context: skipped batches), two words, and long ones, with
        // subsampling on, so the random stream is shared by every kind of draw.
        let words: Vec<String> = (0..200).map(|i| format!("w{i}")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut ids = Vec::new();
        let mut ends = Vec::new();
        for (line, len) in [1usize, 2, 17, 1, 40, 3, 1, 25]
            .iter()
            .cycle()
            .take(60)
            .enumerate()
        {
            ids.extend((0..*len).map(|k| ((line * 7 + k * k) % 200) as u32));
            ends.push(ids.len());
        }
        let corpus = Corpus::from_ids(&refs, ids, ends);
        // Rows this long make the 200-word model outgrow `PREFETCH_MIN_BYTES`, so the
        // prefetches run too (the recorder computes nothing with the rows).
        let params = TrainParams {
            dim: 4096,
            window: 4,
            negative: 3,
            sample: 0.05,
            epochs: 2,
            seed: 5,
            ..TrainParams::default()
        };
        assert!(2 * 200 * params.dim * 4 >= driver::PREFETCH_MIN_BYTES);
        let pipelined = batches(true, &corpus, &params);
        assert!(pipelined.len() > 300, "{} batches", pipelined.len());
        assert_eq!(pipelined, batches(false, &corpus, &params));
    }
}
