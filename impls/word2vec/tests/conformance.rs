//! Conformance suite: every check runs against every variant in `word2vec::variants()`, so a new
//! variant is tested by registering it there; kernel-level checks compare each variant's update
//! with the reference on the cases where the algorithms say they coincide.

use parbench_common::rng::Rng;
use word2vec::reference::{cosine, pair_update, sgns_loss, sigmoid};
use word2vec::sampling::{keep_probability, NegativeSampler, Subsampler};
use word2vec::{
    bidmach, full, full_register, gemm, hogwild, variant_names, variants, Control, Corpus,
    EpochReport, EpochStats, Par, TrainOutput, TrainParams, Trainer, W2vError,
};

fn quiet(_: &EpochReport) -> Control {
    Control::Continue
}

/// A run on one thread (`distributed`: one per rank).
fn train(v: &dyn Trainer, corpus: &Corpus, params: &TrainParams) -> TrainOutput {
    train_on(v, corpus, params, Par::Seq)
}

fn train_on(v: &dyn Trainer, corpus: &Corpus, params: &TrainParams, par: Par) -> TrainOutput {
    v.train(corpus, params, par, &mut quiet)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name()))
}

/// A trainer under test: every shared-memory variant, and `distributed` over each of them on two
/// in-process ranks.
struct Case {
    /// `gemm`, or `distributed(gemm)`.
    label: String,
    trainer: Box<dyn Trainer>,
    /// The shared-memory variant doing the arithmetic (the trainer itself, or its ranks').
    inner: &'static str,
    /// The ranks' learning rate is the run's times this (`distributed` scales it by `p`).
    alpha_scale: f64,
}

/// The exchange settings the suite runs `distributed` with: several exchanges per epoch on the
/// test corpora, hot rows at every one, the others every second.
fn suite_sync() -> SyncOptions {
    SyncOptions {
        sync_words: 500,
        hot_words: 5,
        rare_every: 2,
        scale_alpha: true,
        full_model: false,
    }
}

fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = variants()
        .into_iter()
        .map(|v| Case {
            label: v.name().to_string(),
            inner: v.name(),
            trainer: v,
            alpha_scale: 1.0,
        })
        .collect();
    for inner in variant_names() {
        cases.push(Case {
            label: format!("distributed({inner})"),
            trainer: Box::new(distributed(inner, 2, suite_sync())),
            inner,
            alpha_scale: 2.0,
        });
    }
    cases
}

/// The instantiations of the kernels this CPU runs: the portable one always (forced through the
/// `*_portable` entry points), and the one the default entry points take where the CPU has AVX2
/// and FMA (with the batched products in AVX-512 where it has that; the AVX2 products are held
/// to them in the crate's unit tests).
fn simd_paths() -> Vec<&'static str> {
    let mut paths = vec!["portable"];
    if word2vec::simd_path() != "portable" {
        paths.push(word2vec::simd_path());
    }
    paths
}

type PairStep = fn(&mut [f32], &mut [f32], usize, u32, &[u32], f32);
type BatchStep = fn(&mut [f32], &mut [f32], usize, &[u32], &[u32], f32);
type StreamStep = fn(&mut [f32], &mut [f32], usize, usize, &[u32], &[Vec<u32>], f32) -> EpochStats;

fn hogwild_step(path: &str) -> PairStep {
    match path {
        "portable" => hogwild::step_portable,
        _ => hogwild::step,
    }
}

fn gemm_step(path: &str) -> BatchStep {
    match path {
        "portable" => gemm::step_portable,
        _ => gemm::step,
    }
}

fn full_step(path: &str) -> StreamStep {
    match path {
        "portable" => full::step_stream_portable,
        _ => full::step_stream,
    }
}

fn full_register_step(path: &str) -> StreamStep {
    match path {
        "portable" => full_register::step_stream_portable,
        _ => full_register::step_stream,
    }
}

/// Says which instantiations a kernel test checked (visible with `--nocapture`).
fn report_paths(test: &str, paths: &[&str]) {
    eprintln!(
        "{test}: checked the {} kernel path(s): {paths:?}",
        paths.len()
    );
}

fn random_matrix(rng: &mut Rng, rows: usize, dim: usize, scale: f64) -> Vec<f32> {
    (0..rows * dim)
        .map(|_| ((rng.next_f64() - 0.5) * scale) as f32)
        .collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, expected {w}"
        );
    }
}

/// Two groups of `per_group` words; every line draws its words from one group only, so
/// within-group words share contexts and across-group words never do.
fn planted_corpus(per_group: usize, lines: usize, line_len: usize, seed: u64) -> Corpus {
    let words: Vec<String> = (0..2 * per_group).map(|i| format!("w{i}")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let mut rng = Rng::new(seed);
    let mut ids = Vec::new();
    let mut ends = Vec::new();
    for line in 0..lines {
        let group = line % 2;
        for _ in 0..line_len {
            ids.push((group * per_group + rng.below(per_group as u64) as usize) as u32);
        }
        ends.push(ids.len());
    }
    Corpus::from_ids(&refs, ids, ends)
}

fn small_params() -> TrainParams {
    TrainParams {
        dim: 16,
        window: 3,
        negative: 3,
        sample: 0.0,
        alpha: 0.025,
        epochs: 2,
        seed: 11,
        ..TrainParams::default()
    }
}

#[test]
fn update_is_minus_alpha_times_the_finite_difference_gradient_of_the_loss() {
    let (v, d) = (6, 7);
    let mut rng = Rng::new(3);
    let input = random_matrix(&mut rng, v, d, 1.0);
    let output = random_matrix(&mut rng, v, d, 1.0);
    let (context, targets) = (2u32, [4u32, 0, 5, 1]);
    let alpha = 0.05f32;
    let h = 1e-3f32;
    let grad = |matrix_is_input: bool, idx: usize| -> f64 {
        let (mut i1, mut o1) = (input.clone(), output.clone());
        let (mut i2, mut o2) = (input.clone(), output.clone());
        if matrix_is_input {
            i1[idx] += h;
            i2[idx] -= h;
        } else {
            o1[idx] += h;
            o2[idx] -= h;
        }
        let step = if matrix_is_input {
            i1[idx] as f64 - i2[idx] as f64
        } else {
            o1[idx] as f64 - o2[idx] as f64
        };
        (sgns_loss(&i1, &o1, d, context, &targets) - sgns_loss(&i2, &o2, d, context, &targets))
            / step
    };
    let paths = simd_paths();
    for &path in &paths {
        let (mut inp, mut out) = (input.clone(), output.clone());
        hogwild_step(path)(&mut inp, &mut out, d, context, &targets, alpha);
        let mut checked = 0;
        for j in 0..d {
            let idx = context as usize * d + j;
            let want = -(alpha as f64) * grad(true, idx);
            let got = (inp[idx] - input[idx]) as f64;
            assert!(
                (got - want).abs() < 2e-5,
                "{path}: in[{context}][{j}]: update {got}, -alpha grad {want}"
            );
            checked += 1;
            for &t in &targets {
                let idx = t as usize * d + j;
                let want = -(alpha as f64) * grad(false, idx);
                let got = (out[idx] - output[idx]) as f64;
                assert!(
                    (got - want).abs() < 2e-5,
                    "{path}: out[{t}][{j}]: update {got}, -alpha grad {want}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, d * (1 + targets.len()));
        // Rows the pair does not touch stay put.
        assert_eq!(&inp[..2 * d], &input[..2 * d], "{path}");
        assert_eq!(&out[3 * d..4 * d], &output[3 * d..4 * d], "{path}");
    }
    report_paths("finite-difference gradient", &paths);
}

#[test]
fn hogwild_step_matches_the_reference_update_on_every_kernel_path() {
    let paths = simd_paths();
    for d in [1usize, 7, 16, 17, 100] {
        let mut rng = Rng::new(d as u64);
        let input = random_matrix(&mut rng, 5, d, 1.0);
        let output = random_matrix(&mut rng, 5, d, 1.0);
        // A repeated negative is applied twice in sequence, as word2vec.c does.
        let targets = [1u32, 3, 3, 0];
        let (mut i2, mut o2) = (input.clone(), output.clone());
        pair_update(&mut i2, &mut o2, d, 2, &targets, 0.1);
        for &path in &paths {
            let (mut i1, mut o1) = (input.clone(), output.clone());
            hogwild_step(path)(&mut i1, &mut o1, d, 2, &targets, 0.1);
            assert_close(&format!("{path}: d {d} input"), &i1, &i2, 2e-5);
            assert_close(&format!("{path}: d {d} output"), &o1, &o2, 2e-5);
        }
    }
    report_paths("hogwild against the f64 reference", &paths);
}

/// pWord2Vec's batch from one snapshot, in f64.
fn reference_batch(
    input: &mut [f32],
    output: &mut [f32],
    d: usize,
    contexts: &[u32],
    targets: &[u32],
    alpha: f64,
) {
    reference_products(input, output, d, contexts, targets, 1, alpha)
}

/// The products of `contexts` against `targets` from one snapshot, in f64, the first
/// `positives` targets labelled 1 and the rest 0, every update added after.
fn reference_products(
    input: &mut [f32],
    output: &mut [f32],
    d: usize,
    contexts: &[u32],
    targets: &[u32],
    positives: usize,
    alpha: f64,
) {
    let row = |m: &[f32], r: u32| -> Vec<f64> {
        m[r as usize * d..(r as usize + 1) * d]
            .iter()
            .map(|&x| x as f64)
            .collect()
    };
    let xs: Vec<Vec<f64>> = contexts.iter().map(|&c| row(input, c)).collect();
    let ys: Vec<Vec<f64>> = targets.iter().map(|&t| row(output, t)).collect();
    let g: Vec<Vec<f64>> = xs
        .iter()
        .map(|x| {
            ys.iter()
                .enumerate()
                .map(|(j, y)| {
                    let f: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
                    alpha * (if j < positives { 1.0 } else { 0.0 } - sigmoid(f))
                })
                .collect()
        })
        .collect();
    for (i, &c) in contexts.iter().enumerate() {
        for k in 0..d {
            let dx: f64 = (0..targets.len()).map(|j| g[i][j] * ys[j][k]).sum();
            input[c as usize * d + k] += dx as f32;
        }
    }
    for (j, &t) in targets.iter().enumerate() {
        for k in 0..d {
            let dy: f64 = (0..contexts.len()).map(|i| g[i][j] * xs[i][k]).sum();
            output[t as usize * d + k] += dy as f32;
        }
    }
}

/// One gemm batch on every kernel path against [`reference_batch`] on the same matrices
/// (`what` names the case in a failure).
fn check_gemm_batch(
    what: &str,
    paths: &[&str],
    (input, output): (&[f32], &[f32]),
    d: usize,
    contexts: &[u32],
    targets: &[u32],
) {
    let (mut i2, mut o2) = (input.to_vec(), output.to_vec());
    reference_batch(&mut i2, &mut o2, d, contexts, targets, 0.05);
    for &path in paths {
        let (mut i1, mut o1) = (input.to_vec(), output.to_vec());
        gemm_step(path)(&mut i1, &mut o1, d, contexts, targets, 0.05);
        assert_close(&format!("{path}: {what} input"), &i1, &i2, 2e-5);
        assert_close(&format!("{path}: {what} output"), &o1, &o2, 2e-5);
    }
}

#[test]
fn gemm_batch_matches_the_snapshot_products_on_awkward_shapes_on_every_kernel_path() {
    let paths = simd_paths();
    for (d, n, m) in [
        (1, 1, 1),
        (7, 3, 5),
        (17, 2, 4),
        (100, 10, 6),
        (33, 5, 9),
        (300, 4, 6),
    ] {
        let mut rng = Rng::new((d * 100 + n * 10 + m) as u64);
        let v = 12;
        let input = random_matrix(&mut rng, v, d, 0.8);
        let output = random_matrix(&mut rng, v, d, 0.8);
        let contexts: Vec<u32> = (0..n as u32).collect();
        let targets: Vec<u32> = (0..m as u32).map(|j| j + 2).collect();
        check_gemm_batch(
            &format!("{d}x{n}x{m}"),
            &paths,
            (&input, &output),
            d,
            &contexts,
            &targets,
        );
    }
    report_paths("gemm against the f64 snapshot products", &paths);
}

/// A window can hold a word twice and the negatives can repeat a word: every update must still
/// read the rows as they were before the batch (a kernel that read a row in place after writing
/// it, rather than from its copy, would show here: reading the contexts' rows in place with the
/// contexts updated first fails this test).
#[test]
fn gemm_batch_with_repeated_words_matches_the_snapshot_products_on_every_kernel_path() {
    let paths = simd_paths();
    let (d, v) = (100, 12);
    let mut rng = Rng::new(4242);
    let input = random_matrix(&mut rng, v, d, 0.8);
    let output = random_matrix(&mut rng, v, d, 0.8);
    let contexts: Vec<u32> = vec![0, 3, 0, 5, 3];
    // Word 3 is also a target: the input and output rows of one word are different rows.
    let targets: Vec<u32> = vec![2, 7, 7, 3, 9];
    check_gemm_batch(
        "repeated words,",
        &paths,
        (&input, &output),
        d,
        &contexts,
        &targets,
    );
    report_paths(
        "gemm with repeated words against the f64 snapshot products",
        &paths,
    );
}

fn bidmach_step(path: &str) -> BatchStep {
    match path {
        "portable" => bidmach::step_portable,
        _ => bidmach::step,
    }
}

#[test]
fn bidmach_is_the_positive_products_then_the_negative_ones_on_every_kernel_path() {
    let paths = simd_paths();
    for (d, n, m) in [(1, 1, 1), (7, 3, 5), (17, 2, 4), (100, 10, 6), (300, 4, 6)] {
        let mut rng = Rng::new((d * 100 + n * 10 + m) as u64 + 7);
        let v = 12;
        let input = random_matrix(&mut rng, v, d, 0.8);
        let output = random_matrix(&mut rng, v, d, 0.8);
        let contexts: Vec<u32> = (0..n as u32).collect();
        let targets: Vec<u32> = (0..m as u32).map(|j| j + 2).collect();
        // The positive step from the snapshot, then the negatives from the inputs it moved.
        let (mut i2, mut o2) = (input.clone(), output.clone());
        reference_products(&mut i2, &mut o2, d, &contexts, &targets[..1], 1, 0.05);
        reference_products(&mut i2, &mut o2, d, &contexts, &targets[1..], 0, 0.05);
        // Not the one-snapshot batch of gemm where there are negatives and several inputs.
        let (mut i3, mut o3) = (input.clone(), output.clone());
        reference_batch(&mut i3, &mut o3, d, &contexts, &targets, 0.05);
        let differs = i2.iter().zip(&i3).any(|(a, b)| (a - b).abs() > 1e-6);
        assert_eq!(differs, m > 1, "{d}x{n}x{m}");
        for &path in &paths {
            let (mut i1, mut o1) = (input.clone(), output.clone());
            bidmach_step(path)(&mut i1, &mut o1, d, &contexts, &targets, 0.05);
            assert_close(&format!("{path}: {d}x{n}x{m} input"), &i1, &i2, 2e-5);
            assert_close(&format!("{path}: {d}x{n}x{m} output"), &o1, &o2, 2e-5);
        }
    }
    // No targets, no contexts: nothing moves.
    let mut rng = Rng::new(3);
    let (input, output) = (
        random_matrix(&mut rng, 4, 5, 1.0),
        random_matrix(&mut rng, 4, 5, 1.0),
    );
    for &path in &paths {
        let (mut i1, mut o1) = (input.clone(), output.clone());
        bidmach_step(path)(&mut i1, &mut o1, 5, &[0, 1], &[], 0.05);
        bidmach_step(path)(&mut i1, &mut o1, 5, &[], &[2, 3], 0.05);
        assert_eq!((i1, o1), (input.clone(), output.clone()), "{path}");
    }
    report_paths("bidmach against the f64 two-step products", &paths);
}

#[test]
fn gemm_with_one_context_word_is_the_hogwild_update() {
    let d = 37;
    let mut rng = Rng::new(5);
    let input = random_matrix(&mut rng, 8, d, 1.0);
    let output = random_matrix(&mut rng, 8, d, 1.0);
    let targets = [6u32, 1, 2, 7];
    let paths = simd_paths();
    for &path in &paths {
        let (mut i1, mut o1) = (input.clone(), output.clone());
        gemm_step(path)(&mut i1, &mut o1, d, &[3], &targets, 0.07);
        let (mut i2, mut o2) = (input.clone(), output.clone());
        hogwild_step(path)(&mut i2, &mut o2, d, 3, &targets, 0.07);
        assert_close(&format!("{path}: input"), &i1, &i2, 1e-5);
        assert_close(&format!("{path}: output"), &o1, &o2, 1e-5);
        // And both against the f64 reference.
        let (mut i3, mut o3) = (input.clone(), output.clone());
        pair_update(&mut i3, &mut o3, d, 3, &targets, 0.07);
        assert_close(&format!("{path}: input vs reference"), &i1, &i3, 2e-5);
        assert_close(&format!("{path}: output vs reference"), &o1, &o3, 2e-5);
    }
    report_paths("gemm with one context word", &paths);
}

#[test]
fn full_on_two_words_is_two_hogwild_pairs() {
    let d = 20;
    let mut rng = Rng::new(8);
    let input = random_matrix(&mut rng, 6, d, 1.0);
    let output = random_matrix(&mut rng, 6, d, 1.0);
    let targets = vec![vec![0u32, 4, 5], vec![1u32, 3]];
    let paths = simd_paths();
    for &path in &paths {
        let (mut i1, mut o1) = (input.clone(), output.clone());
        let stats = full_step(path)(&mut i1, &mut o1, d, 1, &[0, 1], &targets, 0.1);
        // The f64 reference, pair by pair: word 1 is the context of center 0, then word 0 of
        // center 1.
        let (mut i2, mut o2) = (input.clone(), output.clone());
        pair_update(&mut i2, &mut o2, d, 1, &targets[0], 0.1);
        pair_update(&mut i2, &mut o2, d, 0, &targets[1], 0.1);
        assert_close(&format!("{path}: input"), &i1, &i2, 2e-5);
        assert_close(&format!("{path}: output"), &o1, &o2, 2e-5);
        assert_eq!(stats.pairs, 5, "{path}");
        assert_eq!(stats.traffic.input_rows_read, 2, "{path}");
        assert_eq!(stats.traffic.input_rows_written, 2, "{path}");
        assert_eq!(stats.traffic.output_rows_read, 5, "{path}");
    }
    report_paths("full on two words", &paths);
}

/// FULL-W2V's window semantics written directly on the model (valid when the stream's words
/// are distinct, so each ring slot is the only copy of its row).
fn reference_full(
    input: &mut [f32],
    output: &mut [f32],
    d: usize,
    half: usize,
    words: &[u32],
    targets: &[Vec<u32>],
    alpha: f64,
) {
    for (p, window_targets) in targets.iter().take(words.len()).enumerate() {
        let lo = p.saturating_sub(half);
        let hi = (p + half).min(words.len() - 1);
        let ctx: Vec<usize> = (lo..=hi).filter(|&q| q != p).collect();
        let mut pending = vec![vec![0f64; d]; ctx.len()];
        for (k, &t) in window_targets.iter().enumerate() {
            let o: Vec<f64> = (0..d).map(|j| output[t as usize * d + j] as f64).collect();
            let mut dt = vec![0f64; d];
            for (ci, &q) in ctx.iter().enumerate() {
                let c: Vec<f64> = (0..d)
                    .map(|j| input[words[q] as usize * d + j] as f64)
                    .collect();
                let f: f64 = c.iter().zip(&o).map(|(a, b)| a * b).sum();
                let g = alpha * (if k == 0 { 1.0 } else { 0.0 } - sigmoid(f));
                for j in 0..d {
                    pending[ci][j] += g * o[j];
                    dt[j] += g * c[j];
                }
            }
            for j in 0..d {
                output[t as usize * d + j] += dt[j] as f32;
            }
        }
        for (ci, &q) in ctx.iter().enumerate() {
            for j in 0..d {
                input[words[q] as usize * d + j] += pending[ci][j] as f32;
            }
        }
    }
}

#[test]
fn full_stream_matches_its_definition_over_many_windows_on_every_kernel_path() {
    let paths = simd_paths();
    for (half, len, d) in [(1usize, 5usize, 9usize), (2, 9, 16), (3, 12, 33), (3, 2, 8)] {
        let v = 40;
        let mut rng = Rng::new((half * 1000 + len) as u64);
        let input = random_matrix(&mut rng, v, d, 1.0);
        let output = random_matrix(&mut rng, v, d, 1.0);
        let words: Vec<u32> = (0..len as u32).map(|i| 3 * i + 1).collect();
        let targets: Vec<Vec<u32>> = words
            .iter()
            .map(|&w| {
                let mut t = vec![w];
                t.extend((0..3).map(|_| 2 * rng.below(20) as u32 + 2));
                t.retain(|&x| x == w || x % 3 != 1);
                t
            })
            .collect();
        let (mut i2, mut o2) = (input.clone(), output.clone());
        reference_full(&mut i2, &mut o2, d, half, &words, &targets, 0.05);
        for &path in &paths {
            let (mut i1, mut o1) = (input.clone(), output.clone());
            let stats = full_step(path)(&mut i1, &mut o1, d, half, &words, &targets, 0.05);
            let what = format!("{path}: half {half}, {len} words, d {d}");
            assert_close(&format!("{what}: input"), &i1, &i2, 3e-5);
            assert_close(&format!("{what}: output"), &o1, &o2, 3e-5);
            // Lifetime reuse: every word's input row is read once and written once.
            assert_eq!(stats.traffic.input_rows_read, len as u64, "{what}");
            assert_eq!(stats.traffic.input_rows_written, len as u64, "{what}");
            // Without the ring buffer (distinct words: the same definition), once per window.
            let (mut i3, mut o3) = (input.clone(), output.clone());
            let fr = full_register_step(path)(&mut i3, &mut o3, d, half, &words, &targets, 0.05);
            let what = format!("full-register, {what}");
            assert_close(&format!("{what}: input"), &i3, &i2, 3e-5);
            assert_close(&format!("{what}: output"), &o3, &o2, 3e-5);
            let slots = context_slots(len, half);
            assert_eq!(fr.traffic.input_rows_read, slots, "{what}");
            assert_eq!(fr.traffic.input_rows_written, slots, "{what}");
            assert_eq!(fr.traffic.output_rows_read, stats.traffic.output_rows_read);
            assert_eq!(fr.pairs, stats.pairs, "{what}");
        }
    }
    report_paths(
        "full and full-register against their f64 definition",
        &paths,
    );
}

/// Context slots of the windows over a stream of `len` words with the fixed reach `half`: the
/// window of position `p` has `min(p, half) + min(len - 1 - p, half)` contexts, so each
/// distance `k = 1..=half` contributes `2 (len - k)` (none once `k >= len`); `2 half len -
/// half (half + 1)` when `len > half`.
fn context_slots(len: usize, half: usize) -> u64 {
    (1..=half).map(|k| 2 * len.saturating_sub(k) as u64).sum()
}

#[test]
fn full_register_stream_matches_its_definition_with_words_repeated_in_a_window() {
    // `reference_full` updates the model after every window, which is `full-register`'s
    // definition whatever the words (for `full` only when no word repeats within a window). A
    // vocabulary of 5 words over streams of up to 14 repeats words inside windows, and targets
    // repeat too.
    let paths = simd_paths();
    for (half, len, d) in [
        (1usize, 7usize, 9usize),
        (2, 11, 16),
        (3, 14, 33),
        (5, 3, 8),
    ] {
        let v = 5;
        let mut rng = Rng::new((half * 7919 + len) as u64);
        let input = random_matrix(&mut rng, v, d, 1.0);
        let output = random_matrix(&mut rng, v, d, 1.0);
        let words: Vec<u32> = (0..len).map(|_| rng.below(v as u64) as u32).collect();
        let targets: Vec<Vec<u32>> = words
            .iter()
            .map(|&w| {
                let mut t = vec![w];
                t.extend(
                    (0..4)
                        .map(|_| rng.below(v as u64) as u32)
                        .filter(|&x| x != w),
                );
                t
            })
            .collect();
        let (mut i2, mut o2) = (input.clone(), output.clone());
        reference_full(&mut i2, &mut o2, d, half, &words, &targets, 0.05);
        for &path in &paths {
            let (mut i1, mut o1) = (input.clone(), output.clone());
            let stats = full_register_step(path)(&mut i1, &mut o1, d, half, &words, &targets, 0.05);
            let what = format!("{path}: half {half}, {len} words {words:?}, d {d}");
            assert_close(&format!("{what}: input"), &i1, &i2, 3e-5);
            assert_close(&format!("{what}: output"), &o1, &o2, 3e-5);
            let targets_moved: u64 = targets.iter().map(|t| t.len() as u64).sum();
            assert_eq!(
                stats.traffic.input_rows_read,
                context_slots(len, half),
                "{what}"
            );
            assert_eq!(stats.traffic.input_rows_written, context_slots(len, half));
            assert_eq!(stats.traffic.output_rows_read, targets_moved, "{what}");
            assert_eq!(stats.traffic.output_rows_written, targets_moved, "{what}");
        }
    }
    report_paths("full-register with repeated words", &paths);
}

#[test]
fn single_thread_runs_repeat_bit_for_bit_and_the_seed_matters() {
    let corpus = planted_corpus(8, 60, 15, 1);
    for case in cases() {
        let (v, name) = (case.trainer.as_ref(), &case.label);
        let params = TrainParams {
            sample: 1e-2,
            ..small_params()
        };
        let a = train(v, &corpus, &params);
        let b = train(v, &corpus, &params);
        assert_eq!(a.model.vectors(), b.model.vectors(), "{name}: vectors");
        assert_eq!(a.output_vectors, b.output_vectors, "{name}: output vectors");
        assert_eq!(a.epochs[0].pairs, b.epochs[0].pairs, "{name}");
        let c = train(v, &corpus, &TrainParams { seed: 12, ..params });
        assert_ne!(a.model.vectors(), c.model.vectors(), "{name}: seed ignored");
    }
}

fn group_cosines(out: &TrainOutput, per_group: usize) -> (f64, f64) {
    let (mut within, mut across, mut nw, mut na) = (0.0, 0.0, 0, 0);
    let m = &out.model;
    for a in 0..2 * per_group {
        for b in a + 1..2 * per_group {
            let wa = m.id(&format!("w{a}")).unwrap() as usize;
            let wb = m.id(&format!("w{b}")).unwrap() as usize;
            let c = cosine(m.vector(wa), m.vector(wb));
            if (a < per_group) == (b < per_group) {
                within += c;
                nw += 1;
            } else {
                across += c;
                na += 1;
            }
        }
    }
    (within / nw as f64, across / na as f64)
}

#[test]
fn every_variant_learns_planted_groups_with_several_threads() {
    let per_group = 10;
    let corpus = planted_corpus(per_group, 1200, 20, 2);
    for case in cases() {
        let name = &case.label;
        let params = TrainParams {
            epochs: 3,
            alpha: 0.05,
            ..small_params()
        };
        let out = train_on(case.trainer.as_ref(), &corpus, &params, Par::threads(2));
        let (within, across) = group_cosines(&out, per_group);
        assert!(
            within > across + 0.3,
            "{name}: mean cosine within groups {within:.3}, across {across:.3}"
        );
        assert_eq!(out.epochs_completed, 3, "{name}");
        assert_eq!(out.words_processed, 3 * corpus.num_words(), "{name}");
        assert!(out.model.vectors().iter().all(|x| x.is_finite()), "{name}");
    }
}

#[test]
fn counters_follow_each_variants_access_pattern_and_full_moves_the_least() {
    let corpus = planted_corpus(10, 200, 20, 4);
    let params = TrainParams {
        epochs: 1,
        sample: 0.0,
        ..small_params()
    };
    let mut bytes = Vec::new();
    for case in cases() {
        let name = &case.label;
        let out = train(case.trainer.as_ref(), &corpus, &params);
        let e = out.epochs[0];
        assert_eq!(e.words, corpus.num_words(), "{name}");
        assert_eq!(
            e.kept_words,
            corpus.num_words(),
            "{name}: sample 0 keeps all"
        );
        let t = e.traffic;
        match case.inner {
            "hogwild" => {
                // One output row per pair, one input row per (context, center) pair.
                assert_eq!(t.output_rows_read, e.pairs, "{name}");
                assert_eq!(t.output_rows_written, e.pairs, "{name}");
                assert_eq!(t.input_rows_read, t.input_rows_written, "{name}");
            }
            "gemm" => {
                assert_eq!(t.output_rows_read, t.output_rows_written, "{name}");
                assert_eq!(t.input_rows_read, t.input_rows_written, "{name}");
            }
            "bidmach" => {
                // Each context row read once per product, written once per step; the
                // output rows once per batch, as gemm.
                assert_eq!(t.input_rows_read, e.pairs, "{name}");
                assert_eq!(t.output_rows_read, t.output_rows_written, "{name}");
                assert!(t.input_rows_written < t.input_rows_read, "{name}");
            }
            "full" => {
                assert_eq!(t.input_rows_read, e.kept_words, "{name}");
                assert_eq!(t.input_rows_written, e.kept_words, "{name}");
            }
            "full-register" => {
                // Every context row read and written once per window it is in.
                assert_eq!(t.input_rows_read, t.input_rows_written, "{name}");
                assert_eq!(t.output_rows_read, t.output_rows_written, "{name}");
                assert!(t.input_rows_read > e.kept_words, "{name}");
            }
            other => panic!("{name}: no access pattern stated for {other}"),
        }
        bytes.push((
            name.clone(),
            t.bytes_read(params.dim) + t.bytes_written(params.dim),
        ));
    }
    let of = |name: &str| bytes.iter().find(|(n, _)| n == name).unwrap().1;
    for prefix in ["", "distributed("] {
        let label = |inner: &str| {
            if prefix.is_empty() {
                inner.to_string()
            } else {
                format!("{prefix}{inner})")
            }
        };
        assert!(of(&label("full")) < of(&label("gemm")), "{bytes:?}");
        assert!(of(&label("gemm")) < of(&label("hogwild")), "{bytes:?}");
        assert!(
            of(&label("full")) < of(&label("full-register")),
            "{bytes:?}"
        );
        assert!(
            of(&label("full-register")) < of(&label("hogwild")),
            "{bytes:?}"
        );
    }
}

/// (context, center) pairs of a window of fixed reach over a stretch of `len` consecutive words:
/// every word pairs with each other word at most `reach` positions away, counted here by
/// enumerating the positions.
fn pairs_in_stretch(len: usize, reach: usize) -> u64 {
    let mut pairs = 0;
    for p in 0..len {
        for q in 0..len {
            if q != p && q.abs_diff(p) <= reach {
                pairs += 1;
            }
        }
    }
    pairs
}

/// A corpus of the given line lengths over `vocab` words (word `i` of the corpus is id
/// `i % vocab`).
fn corpus_of_lines(lengths: &[usize], vocab: usize) -> Corpus {
    let words: Vec<String> = (0..vocab).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let n: usize = lengths.iter().sum();
    let ids: Vec<u32> = (0..n).map(|i| (i % vocab) as u32).collect();
    let ends: Vec<usize> = lengths
        .iter()
        .scan(0, |end, &l| {
            *end += l;
            Some(*end)
        })
        .collect();
    Corpus::from_ids(&refs, ids, ends)
}

#[test]
fn pairs_and_flops_follow_a_hand_count_on_tiny_corpora() {
    // With one thread and no subsampling the pairs trained are fixed by the corpus and window:
    // `hogwild` and `gemm` pair the words of a sentence (a line, or the part of it inside a
    // rank's shard), `full` the words of its whole stream (a rank's shard, line ends ignored),
    // each target once per context word. Counted here from the line lengths alone.
    //
    // Case 1: window 1 (every reduced window is 1, `full`'s fixed half-window is 1), no
    // negatives: one pair per (context, center).
    // Case 2: window 4 with 3 negatives over a one-word vocabulary: every negative drawn is the
    // center word and skipped, so still one pair per (context, center); lines of two words, so
    // any reduced window in 1..=4 covers the line; `full`'s half-window is 2.
    // The lines are laid out so that the half-way split between two ranks falls on a line end.
    let case_1 = (
        vec![1usize, 2, 3, 5, 4, 6, 7, 2, 1, 5, 3, 3],
        9usize,
        1usize,
        0usize,
    );
    let case_2 = (vec![2usize; 14], 1usize, 4usize, 3usize);
    let epochs = 2;
    for (lengths, vocab, window, negative) in [case_1, case_2] {
        let corpus = corpus_of_lines(&lengths, vocab);
        let n = lengths.iter().sum::<usize>();
        let half_lines = lengths
            .iter()
            .scan(0, |s, &l| {
                *s += l;
                Some(*s)
            })
            .position(|end| end == n / 2)
            .expect("a line ends half-way");
        let params = TrainParams {
            dim: 8,
            window,
            negative,
            sample: 0.0,
            epochs,
            ..small_params()
        };
        let sentence_pairs: u64 = lengths.iter().map(|&l| pairs_in_stretch(l, 1)).sum();
        let full_reach = window.div_ceil(2);
        let full_within_lines: u64 = lengths
            .iter()
            .map(|&l| pairs_in_stretch(l, full_reach))
            .sum();
        for case in cases() {
            let name = format!("{} (window {window}, {negative} negatives)", case.label);
            let ranks = if case.alpha_scale > 1.0 { 2 } else { 1 };
            // One exchange per epoch, so a rank's shard is one segment.
            let trainer: Box<dyn Trainer> = if ranks > 1 {
                Box::new(distributed(
                    case.inner,
                    ranks,
                    SyncOptions {
                        sync_words: u64::MAX,
                        ..suite_sync()
                    },
                ))
            } else {
                variants()
                    .into_iter()
                    .find(|v| v.name() == case.inner)
                    .unwrap()
            };
            let expected: u64 = match case.inner {
                "full" | "full-register" => {
                    let shards = if ranks == 1 {
                        vec![n]
                    } else {
                        vec![n / 2, n / 2]
                    };
                    let reach = window.div_ceil(2);
                    shards.iter().map(|&l| pairs_in_stretch(l, reach)).sum()
                }
                _ => sentence_pairs,
            };
            assert!(half_lines > 0 && expected > 0);
            // The pairings `full` forms across a line end: those of its stream less those
            // inside the lines (the shards split at a line end, so no line spans two).
            let cross = match case.inner {
                "full" | "full-register" => expected - full_within_lines,
                _ => 0,
            };
            let out = train(trainer.as_ref(), &corpus, &params);
            assert_eq!(out.epochs.len(), epochs, "{name}");
            for (e, stats) in out.epochs.iter().enumerate() {
                assert_eq!(stats.words, n as u64, "{name}: epoch {e} words");
                assert_eq!(stats.kept_words, n as u64, "{name}: epoch {e} kept words");
                assert_eq!(stats.pairs, expected, "{name}: epoch {e} pairs");
                // One target per window here, so every pair is a (center, context) pairing.
                assert_eq!(stats.context_pairs, expected, "{name}: epoch {e} pairings");
                assert_eq!(
                    stats.cross_sentence_pairs, cross,
                    "{name}: epoch {e} cross-sentence pairings"
                );
            }
            // 6 d flops per pair: the dot product, the context's gradient and the target's
            // update, d multiply-adds each.
            let flops = 6.0 * params.dim as f64 * (epochs as u64 * expected) as f64;
            assert_eq!(out.flops, flops, "{name}: flops");
        }
    }
}

#[test]
fn full_counts_the_pairings_across_word2vec_c_sentence_cuts() {
    // One line of 2,500 words: word2vec.c cuts it into sentences of 1000, 1000 and 500 words.
    // `full`'s stream runs across both cuts, and each cut adds the pairings of words within
    // the half-window on either side of it: 2 (1 + 2 + ... + W_f) = W_f (W_f + 1). Two more
    // lines (of 3 and 1 words) end the corpus; each line end is a cut as well.
    let lengths = [2500usize, 3, 1];
    let corpus = corpus_of_lines(&lengths, 40);
    let n: usize = lengths.iter().sum();
    for (window, half) in [(1usize, 1usize), (4, 2), (5, 3)] {
        let params = TrainParams {
            dim: 8,
            window,
            negative: 2,
            sample: 0.0,
            epochs: 1,
            ..small_params()
        };
        let sentences = [1000usize, 1000, 500, 3, 1];
        let within: u64 = sentences.iter().map(|&l| pairs_in_stretch(l, half)).sum();
        let stream = pairs_in_stretch(n, half);
        for name in ["full", "full-register"] {
            let v = variants().into_iter().find(|v| v.name() == name).unwrap();
            let stats = train(v.as_ref(), &corpus, &params).epochs[0];
            assert_eq!(
                stats.context_pairs, stream,
                "{name}, window {window}: pairings"
            );
            assert_eq!(
                stats.cross_sentence_pairs,
                stream - within,
                "{name}, window {window}: pairings across a cut"
            );
        }
        // By hand, the same from the cuts: the cuts between the 1000-, 1000-, 500- and 3-word
        // sentences add W_f (W_f + 1) each (both sides have W_f words); the cut before the
        // 1-word sentence adds 2 min(3, W_f) (its word pairs with the line before's last
        // words), and no pairing reaches across two cuts. Windows 1, 4, 5: 8, 22 and 42.
        let by_cut = (3 * half * (half + 1) + 2 * half.min(3)) as u64;
        assert_eq!(stream - within, by_cut, "window {window}");
        assert_eq!(by_cut, [8, 22, 42][half - 1]);
    }
    // The sentence-respecting variants never form one.
    for name in ["hogwild", "gemm", "bidmach"] {
        let v = variants().into_iter().find(|v| v.name() == name).unwrap();
        let stats = train(v.as_ref(), &corpus, &small_params()).epochs[0];
        assert!(stats.context_pairs > 0, "{name}");
        assert_eq!(stats.cross_sentence_pairs, 0, "{name}");
    }
}

/// The model rows one run moved in its only epoch.
fn traffic_of(name: &str, corpus: &Corpus, params: &TrainParams) -> (EpochStats, u64) {
    let v = word2vec::variant(name).expect("a variant");
    let out = train(v.as_ref(), corpus, params);
    assert_eq!(out.epochs.len(), 1, "{name}");
    let e = out.epochs[0];
    let bytes = e.traffic.bytes_read(params.dim) + e.traffic.bytes_written(params.dim);
    (e, bytes)
}

#[test]
fn model_traffic_follows_a_hand_count_on_tiny_corpora() {
    // One thread, no subsampling, one epoch: the rows moved follow from the line lengths, the
    // window and the targets per window `m` alone. `m = K + 1` less the negatives that draw the
    // center (skipped), which only the seed decides; the two exact cases make `m = 1` (no
    // negatives, or a one-word vocabulary where every negative is the center), the third has
    // `K = 5` and checks what does not depend on `m` exactly.
    //
    // Stream of L words (lines ignored), fixed reach W_f = ceil(W / 2), context slots
    // C = sum_p n_p = 2 W_f L - W_f (W_f + 1); hogwild's (context, center) pairs P per line:
    //   full          input L read, L written;   output L m read, L m written
    //   full-register input C read, C written;   output L m read, L m written
    //   hogwild       input P read, P written;   output P m read, P m written
    // and every row is 4 d bytes.
    struct Case {
        lines: Vec<usize>,
        vocab: usize,
        window: usize,
        negative: usize,
        /// Hogwild's pairs per line, or `None` where its random reduced window decides it.
        hogwild_pairs_per_line: fn(usize) -> u64,
        /// Targets per window where every one is known.
        m: Option<u64>,
    }
    let cases = [
        // W = 1: every reduced window is 1, W_f = 1: 2 (l - 1) pairs in a line of l.
        Case {
            lines: vec![4, 3, 5],
            vocab: 5,
            window: 1,
            negative: 0,
            hogwild_pairs_per_line: |l| 2 * (l as u64 - 1),
            m: Some(1),
        },
        // W = 4, W_f = 2, 3 negatives all equal to the one word: lines of 2 words, which any
        // reduced window in 1..=4 covers: 2 pairs a line.
        Case {
            lines: vec![2; 7],
            vocab: 1,
            window: 4,
            negative: 3,
            hogwild_pairs_per_line: |_| 2,
            m: Some(1),
        },
        // K = 5 over 5 words: the input rows are still exact.
        Case {
            lines: vec![4, 3, 5],
            vocab: 5,
            window: 1,
            negative: 5,
            hogwild_pairs_per_line: |l| 2 * (l as u64 - 1),
            m: None,
        },
    ];
    for case in cases {
        let corpus = corpus_of_lines(&case.lines, case.vocab);
        let params = TrainParams {
            dim: 8,
            window: case.window,
            negative: case.negative,
            sample: 0.0,
            epochs: 1,
            seed: 5,
            ..small_params()
        };
        let what = format!(
            "lines {:?}, window {}, {} negatives",
            case.lines, case.window, case.negative
        );
        let len: usize = case.lines.iter().sum();
        let l = len as u64;
        let half = case.window.div_ceil(2);
        let slots = 2 * (half * len) as u64 - (half * (half + 1)) as u64;
        assert_eq!(slots, context_slots(len, half));
        let pairs: u64 = case
            .lines
            .iter()
            .map(|&n| (case.hogwild_pairs_per_line)(n))
            .sum();
        let row = 4 * params.dim as u64;
        let (full, full_bytes) = traffic_of("full", &corpus, &params);
        let (reg, reg_bytes) = traffic_of("full-register", &corpus, &params);
        let (hog, hog_bytes) = traffic_of("hogwild", &corpus, &params);
        for (name, e, input_rows) in [
            ("full", &full, l),
            ("full-register", &reg, slots),
            ("hogwild", &hog, pairs),
        ] {
            let t = e.traffic;
            assert_eq!(t.input_rows_read, input_rows, "{name}, {what}");
            assert_eq!(t.input_rows_written, input_rows, "{name}, {what}");
            assert_eq!(t.output_rows_read, t.output_rows_written, "{name}, {what}");
        }
        // full and full-register draw the same targets (the same stream of draws).
        let t = full.traffic.output_rows_read;
        assert_eq!(reg.traffic.output_rows_read, t, "{what}");
        assert!(
            l <= t && t <= l * (params.negative as u64 + 1),
            "{what}: {t}"
        );
        let h = hog.traffic.output_rows_read;
        assert_eq!(h, hog.pairs, "hogwild, {what}: one output row per pair");
        if let Some(m) = case.m {
            assert_eq!(t, l * m, "{what}");
            assert_eq!(h, pairs * m, "{what}");
            assert_eq!(full_bytes, 2 * (l + l * m) * row, "full, {what}");
            assert_eq!(
                reg_bytes,
                2 * (slots + l * m) * row,
                "full-register, {what}"
            );
            assert_eq!(hog_bytes, 2 * (pairs + pairs * m) * row, "hogwild, {what}");
        }
    }
}

#[test]
fn full_traffic_is_flat_in_the_window_while_hogwild_grows_linearly() {
    // FULL-W2V Section 3.2: `full` moves each context row once per lifetime, so its rows per
    // word do not depend on the window (1 + m: the word's input row and its window's targets);
    // `full-register` moves 2 W_f + m per word and `hogwild` about (W + 1)(1 + m), the mean
    // reduced window being (W + 1) / 2 on each side. One thread, no subsampling, 500-word
    // sentences, so the ends of sentences and of the stream hardly count.
    let spec = word2vec::generate::PlantedSpec {
        groups: 4,
        group_words: 25,
        sentence_words: 500,
        words: 30_000,
    };
    let corpus = spec.corpus(3).unwrap();
    let n = corpus.num_words();
    let sentences = n / spec.sentence_words as u64;
    let k = 5u64;
    let at = |window: usize| TrainParams {
        dim: 16,
        window,
        negative: k as usize,
        sample: 0.0,
        epochs: 1,
        ..small_params()
    };
    let (_, full_2) = traffic_of("full", &corpus, &at(2));
    let (_, hog_2) = traffic_of("hogwild", &corpus, &at(2));
    for window in [2usize, 4, 7, 10] {
        let params = at(window);
        let half = window.div_ceil(2);
        let (full, full_bytes) = traffic_of("full", &corpus, &params);
        let (reg, _) = traffic_of("full-register", &corpus, &params);
        let (hog, hog_bytes) = traffic_of("hogwild", &corpus, &params);
        let what = format!("window {window}");
        // Exact: one input row per word for full, one per context slot for full-register.
        assert_eq!(full.traffic.input_rows_read, n, "{what}");
        assert_eq!(
            reg.traffic.input_rows_read,
            context_slots(n as usize, half),
            "{what}"
        );
        // Targets per window: K + 1 less the few negatives that draw the center (1 in 25
        // words of a sentence's group, 1 in 100 of all: under 2%).
        let m = full.traffic.output_rows_read as f64 / n as f64;
        assert!(
            m <= (k + 1) as f64 && m > 0.98 * (k + 1) as f64,
            "{what}: m {m}"
        );
        let flat = full_bytes as f64 / full_2 as f64;
        assert!(
            (flat - 1.0).abs() < 0.005,
            "{what}: full's bytes {flat} x window 2's"
        );
        // Hogwild's expected pairs: a reduced window b uniform in 1..=W gives a line of l
        // words 2 b l - b (b + 1) pairs.
        let l = spec.sentence_words as f64;
        let expected: f64 = sentences as f64
            * (1..=window)
                .map(|b| (2 * b) as f64 * l - (b * (b + 1)) as f64)
                .sum::<f64>()
            / window as f64;
        let pairs = hog.traffic.input_rows_read as f64;
        assert!(
            (pairs / expected - 1.0).abs() < 0.015,
            "{what}: hogwild's pairs {pairs}, expected {expected}"
        );
        let growth = hog_bytes as f64 / hog_2 as f64;
        let linear = (window + 1) as f64 / 3.0;
        assert!(
            (growth / linear - 1.0).abs() < 0.02,
            "{what}: hogwild's bytes {growth} x window 2's, expected about (W + 1) / 3 = {linear}"
        );
    }
}

#[test]
fn progress_reports_advance_and_stop_ends_the_run_early() {
    let corpus = planted_corpus(10, 400, 20, 5);
    for case in cases() {
        let name = &case.label;
        let params = TrainParams {
            epochs: 4,
            report_interval_seconds: 0.001,
            ..small_params()
        };
        let mut reports: Vec<EpochReport> = Vec::new();
        let out = case
            .trainer
            .train(&corpus, &params, Par::threads(2), &mut |r| {
                reports.push(*r);
                if r.epoch_finished && r.epoch == 1 {
                    Control::Stop
                } else {
                    Control::Continue
                }
            })
            .unwrap();
        assert_eq!(out.epochs_completed, 2, "{name}");
        assert_eq!(out.words_processed, 2 * corpus.num_words(), "{name}");
        let finished: Vec<usize> = reports
            .iter()
            .filter(|r| r.epoch_finished)
            .map(|r| r.epoch)
            .collect();
        assert_eq!(finished, [0, 1], "{name}");
        assert!(
            reports
                .windows(2)
                .all(|w| w[0].words_processed <= w[1].words_processed && w[0].alpha >= w[1].alpha),
            "{name}: {reports:?}"
        );
        let last = reports.last().unwrap();
        assert_eq!(last.words_total, 4 * corpus.num_words(), "{name}");
        // Half the run done: the rate has decayed to about half its start.
        let start = params.alpha * case.alpha_scale;
        assert!(
            last.alpha < start && last.alpha > start * 0.4,
            "{name}: alpha {} after half the run, starting at {start}",
            last.alpha
        );
    }
}

#[test]
fn bad_parameters_and_an_empty_corpus_are_rejected() {
    let corpus = planted_corpus(3, 4, 5, 6);
    let empty = Corpus::from_ids(&["a"], vec![], vec![0]);
    let base = small_params();
    type Change = fn(&mut TrainParams);
    // Each change alone breaks the base parameters; the error must name what is wrong.
    let bad: [(&str, Change, &str); 8] = [
        ("dim 0", |p| p.dim = 0, "dimension"),
        ("dim 4097", |p| p.dim = 4097, "dimension"),
        ("window 0", |p| p.window = 0, "window"),
        ("window 65", |p| p.window = 65, "window"),
        ("negative 257", |p| p.negative = 257, "negatives"),
        ("epochs 0", |p| p.epochs = 0, "epochs"),
        ("alpha NaN", |p| p.alpha = f64::NAN, "alpha"),
        ("sample -1", |p| p.sample = -1.0, "subsampling threshold"),
    ];
    for case in cases() {
        let (v, name) = (case.trainer.as_ref(), &case.label);
        // The base parameters train, so each failure below is the change's doing.
        let ok = v
            .train(&corpus, &base, Par::Seq, &mut quiet)
            .unwrap_or_else(|e| panic!("{name}: the base parameters fail: {e}"));
        assert_eq!(ok.epochs_completed, base.epochs, "{name}");
        // Zero threads cannot be asked for: `Par::Rayon(0)` is one thread (its degree), the
        // sequential run bit for bit (two threads would cut the corpus and the streams apart).
        let zero = train_on(v, &corpus, &base, Par::Rayon(0));
        assert_eq!(zero.model.vectors(), ok.model.vectors(), "{name}");
        assert_eq!(zero.output_vectors, ok.output_vectors, "{name}");
        for (what, change, needle) in bad {
            let mut p = base.clone();
            change(&mut p);
            assert_ne!(p, base, "{what} changes nothing");
            match v.train(&corpus, &p, Par::Seq, &mut quiet) {
                Ok(_) => panic!("{name}: {what} was accepted"),
                Err(e) => assert!(
                    e.to_string().contains(needle),
                    "{name}: {what}: the error does not name the {needle}: {e}"
                ),
            }
        }
        let err = v.train(&empty, &base, Par::Seq, &mut quiet).err();
        assert!(
            matches!(err, Some(W2vError::EmptyCorpus)),
            "{name}: an empty corpus gave {err:?}"
        );
    }
}

#[test]
fn subsampling_keeps_words_with_word2vec_c_probability() {
    // (sqrt(c / (t T)) + 1) (t T) / c with c = 1000, T = 100000, t = 1e-3: tT = 100.
    let p = keep_probability(1000, 100_000, 1e-3);
    let want = ((1000f64 / 100.0).sqrt() + 1.0) * 100.0 / 1000.0;
    assert!((p - want).abs() < 1e-12, "{p} vs {want}");
    assert_eq!(keep_probability(10, 100_000, 1e-3), 1.0);
    assert_eq!(keep_probability(1000, 100_000, 0.0), 1.0);
    let counts = [60_000u64, 30_000, 9_000, 1_000];
    let s = Subsampler::new(&counts, 1e-3);
    let mut rng = Rng::new(9);
    let draws = 200_000;
    for (w, &c) in counts.iter().enumerate() {
        let p = keep_probability(c, 100_000, 1e-3);
        let kept = (0..draws).filter(|_| s.keep(w as u32, &mut rng)).count() as f64;
        let sd = (draws as f64 * p * (1.0 - p)).sqrt().max(1.0);
        assert!(
            (kept - draws as f64 * p).abs() < 5.0 * sd,
            "word {w}: kept {kept}, expected {}",
            draws as f64 * p
        );
    }
}

#[test]
fn negatives_follow_unigram_to_the_three_quarters_by_chi_square() {
    let counts: Vec<u64> = (1..=20u64).map(|i| i * i * 7 + 3).collect();
    let sampler = NegativeSampler::new(&counts);
    let weights: Vec<f64> = counts.iter().map(|&c| (c as f64).powf(0.75)).collect();
    let total: f64 = weights.iter().sum();
    let expected: Vec<f64> = weights.iter().map(|w| w / total).collect();
    for (p, e) in sampler.probabilities().iter().zip(&expected) {
        assert!((p - e).abs() < 1e-8, "alias table {p} vs {e}");
    }
    let mut rng = Rng::new(10);
    let draws = 400_000;
    let mut seen = vec![0f64; counts.len()];
    for _ in 0..draws {
        seen[sampler.sample(&mut rng) as usize] += 1.0;
    }
    let chi2: f64 = seen
        .iter()
        .zip(&expected)
        .map(|(o, p)| (o - p * draws as f64).powi(2) / (p * draws as f64))
        .sum();
    // 19 degrees of freedom: P(chi2 > 43.8) = 0.001.
    assert!(chi2 < 43.8, "chi-square {chi2}, observed {seen:?}");
}

// ---------------------------------------------------------------------------------------------
// `distributed` (data parallel over ranks, on the in-process communicator): the checks above run
// it as a `Trainer` through `cases()`; these are the ones specific to its ranks and exchanges.
// ---------------------------------------------------------------------------------------------

use word2vec::distributed::{train_rank, RankOutput};
use word2vec::{Distributed, SyncOptions};

fn distributed(inner: &str, ranks: usize, sync: SyncOptions) -> Distributed {
    Distributed {
        inner: inner.to_string(),
        ranks,
        sync,
    }
}

#[test]
fn distributed_with_one_rank_is_its_shared_memory_variant_bit_for_bit() {
    let corpus = planted_corpus(8, 60, 15, 1);
    let params = small_params();
    for v in variants() {
        let alone = train(v.as_ref(), &corpus, &params);
        // One exchange, at the very end: the whole shard is one segment.
        let sync = SyncOptions {
            sync_words: u64::MAX,
            ..SyncOptions::default()
        };
        let d = distributed(v.name(), 1, sync);
        let ranks = d
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        let out = &ranks[0].train;
        assert_eq!(out.model.vectors(), alone.model.vectors(), "{}", v.name());
        assert_eq!(out.output_vectors, alone.output_vectors, "{}", v.name());
        assert_eq!(
            ranks[0].exchanges,
            params.epochs,
            "{}: one per epoch",
            v.name()
        );
        assert_eq!(out.words_processed, alone.words_processed);
    }
}

/// Sub-model sync with every changed row due at every exchange, 97 corpus words apart.
fn every_row_due() -> SyncOptions {
    SyncOptions {
        sync_words: 97,
        hot_words: usize::MAX,
        rare_every: 1,
        scale_alpha: true,
        full_model: false,
    }
}

#[test]
fn one_rank_counts_its_exchanges_but_sends_and_averages_nothing() {
    // Many exchanges of every row are due, but one rank has nothing to average: the run equals
    // the same segmentation with no row ever due, and nothing is sent.
    let corpus = planted_corpus(8, 80, 15, 3);
    let params = small_params();
    let every = every_row_due();
    let never = SyncOptions {
        hot_words: 0,
        rare_every: usize::MAX,
        ..every.clone()
    };
    for inner in ["hogwild", "gemm", "full", "full-register"] {
        let a = distributed(inner, 1, every.clone())
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        let b = distributed(inner, 1, never.clone())
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        assert!(a[0].exchanges > 10, "{inner}: {} exchanges", a[0].exchanges);
        assert_eq!(a[0].rows_exchanged, 0, "{inner}");
        assert_eq!(a[0].comm.total().words_sent, 0, "{inner}");
        assert_eq!(
            a[0].train.model.vectors(),
            b[0].train.model.vectors(),
            "{inner}"
        );
        assert_eq!(
            a[0].train.output_vectors, b[0].train.output_vectors,
            "{inner}"
        );
    }
}

#[test]
fn full_model_sync_sends_the_whole_model_and_trains_what_every_row_due_trains() {
    // Full-model sync averages every row at every exchange; rows no rank changed average to
    // themselves, so the model is the one every changed row being due gives, bit for bit. On
    // 2 ranks the ring all-reduce of n values has each rank send exactly n words: the traffic
    // is `rows exchanged x d`, and full-model sync exchanges both matrices' V rows every time.
    // A vocabulary of 1000 words, of which 97 corpus words touch a fraction between exchanges.
    let corpus = planted_corpus(500, 80, 15, 3);
    let params = small_params();
    let every_row = every_row_due();
    let full = SyncOptions {
        hot_words: 0,
        rare_every: usize::MAX,
        full_model: true,
        ..every_row.clone()
    };
    let rows = corpus.vocab().len() as u64;
    let reduced = |r: &RankOutput| {
        r.comm
            .phase(parbench_common::comm::Phase::Reduction)
            .words_sent
    };
    for inner in ["hogwild", "gemm", "full", "full-register"] {
        let a = distributed(inner, 2, every_row.clone())
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        let b = distributed(inner, 2, full.clone())
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        assert_eq!(
            a[0].train.model.vectors(),
            b[0].train.model.vectors(),
            "{inner}"
        );
        assert_eq!(
            a[0].train.output_vectors, b[0].train.output_vectors,
            "{inner}"
        );
        assert!(b[0].exchanges > 10, "{inner}: {} exchanges", b[0].exchanges);
        assert_eq!(b[0].exchanges, a[0].exchanges, "{inner}");
        assert_eq!(
            b[0].rows_exchanged,
            2 * rows * b[0].exchanges as u64,
            "{inner}"
        );
        // Some rows go untouched between two exchanges 97 words apart.
        assert!(a[0].rows_exchanged < b[0].rows_exchanged, "{inner}");
        for r in a.iter().chain(&b) {
            assert_eq!(reduced(r), r.rows_exchanged * params.dim as u64, "{inner}");
        }
    }
}

#[test]
fn distributed_ranks_end_with_one_model_and_learn_the_planted_groups() {
    let per_group = 10;
    let corpus = planted_corpus(per_group, 1200, 20, 2);
    let params = TrainParams {
        epochs: 3,
        alpha: 0.025,
        ..small_params()
    };
    for (inner, ranks) in [
        ("gemm", 2),
        ("hogwild", 3),
        ("full", 2),
        ("full-register", 2),
    ] {
        let sync = SyncOptions {
            sync_words: 2000,
            hot_words: 5,
            rare_every: 3,
            scale_alpha: true,
            full_model: false,
        };
        let runs: Vec<RankOutput> = distributed(inner, ranks, sync)
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap();
        for r in &runs[1..] {
            assert_eq!(
                r.train.model.vectors(),
                runs[0].train.model.vectors(),
                "{inner}"
            );
            assert_eq!(
                r.train.output_vectors, runs[0].train.output_vectors,
                "{inner}"
            );
            assert_eq!(r.exchanges, runs[0].exchanges, "{inner}");
        }
        let out = &runs[0].train;
        assert_eq!(
            out.words_processed,
            3 * corpus.num_words(),
            "{inner}: all ranks' words"
        );
        let (within, across) = group_cosines(out, per_group);
        assert!(
            within > across + 0.3,
            "{inner} on {ranks} ranks: mean cosine within groups {within:.3}, across {across:.3}"
        );
        // Every word sent is received, and the model exchange is the reduction phase.
        let sent: u64 = runs.iter().map(|r| r.comm.total().words_sent).sum();
        let received: u64 = runs.iter().map(|r| r.comm.total().words_received).sum();
        assert_eq!(sent, received, "{inner}");
        assert!(
            runs[0]
                .comm
                .phase(parbench_common::comm::Phase::Reduction)
                .words_sent
                > 0
        );
    }
}

#[test]
fn distributed_rejects_bad_options_on_every_rank() {
    let corpus = planted_corpus(3, 4, 5, 6);
    let params = small_params();
    let err = parbench_common::comm::threads::run_threads(2, |comm| {
        train_rank(
            comm,
            "nosuch",
            &corpus,
            &params,
            Par::Seq,
            &SyncOptions::default(),
            &mut quiet,
        )
    })
    .unwrap_err();
    assert!(
        err.error.to_string().contains("unknown inner variant"),
        "{}",
        err.error
    );
    let bad = SyncOptions {
        rare_every: 0,
        ..SyncOptions::default()
    };
    let err = distributed("gemm", 2, bad)
        .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
        .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}

#[test]
fn a_stop_on_any_rank_ends_every_rank_at_the_same_exchange_with_one_model() {
    let corpus = planted_corpus(8, 100, 15, 7);
    let params = TrainParams {
        epochs: 4,
        ..small_params()
    };
    let sync = SyncOptions {
        sync_words: 150,
        ..suite_sync()
    };
    let shard = corpus.num_words() / 2;
    let per_epoch = shard.div_ceil(150) as usize;
    for stopper in [0usize, 1] {
        for inner in ["hogwild", "gemm", "full", "full-register"] {
            // Rank `stopper` stops at the end of epoch 1 (its second closing report).
            let runs = parbench_common::comm::threads::run_threads(2, |comm| {
                let me = comm.rank();
                train_rank(comm, inner, &corpus, &params, Par::Seq, &sync, &mut |r| {
                    if me == stopper && r.epoch_finished && r.epoch == 1 {
                        Control::Stop
                    } else {
                        Control::Continue
                    }
                })
            })
            .unwrap();
            let what = format!("{inner}, rank {stopper} stops");
            for r in &runs {
                let out = &r.value.train;
                assert_eq!(out.epochs_completed, 2, "{what}");
                assert_eq!(out.words_processed, 2 * shard, "{what}: this rank's words");
                assert_eq!(r.value.exchanges, 2 * per_epoch, "{what}");
            }
            let (a, b) = (&runs[0].value.train, &runs[1].value.train);
            assert_eq!(a.model.vectors(), b.model.vectors(), "{what}: one model");
            assert_eq!(a.output_vectors, b.output_vectors, "{what}: one model");
        }
    }
}

#[test]
fn shards_needing_different_segment_counts_still_exchange_in_step() {
    // 61 lines of 15 words: shards of 457 and 458 words. With an exchange every 457 words rank
    // 0's shard is one segment and rank 1's two: rank 0 ends each epoch with an empty segment
    // so that both make the same exchanges.
    let corpus = planted_corpus(8, 61, 15, 9);
    assert_eq!(corpus.num_words(), 915);
    let params = small_params();
    let sync = SyncOptions {
        sync_words: 457,
        ..suite_sync()
    };
    for inner in ["hogwild", "gemm", "full", "full-register"] {
        let runs = distributed(inner, 2, sync.clone())
            .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
            .unwrap_or_else(|e| panic!("{inner}: {e}"));
        assert_eq!(runs[0].exchanges, 2 * params.epochs, "{inner}");
        assert_eq!(runs[1].exchanges, 2 * params.epochs, "{inner}");
        assert_eq!(
            runs[0].train.model.vectors(),
            runs[1].train.model.vectors(),
            "{inner}"
        );
        assert_eq!(
            runs[0].train.words_processed,
            params.epochs as u64 * 915,
            "{inner}"
        );
    }
}

#[test]
fn a_panicking_callback_does_not_hang_the_ranks() {
    let corpus = planted_corpus(8, 100, 15, 8);
    let d = distributed("gemm", 2, suite_sync());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        d.train(&corpus, &small_params(), Par::Seq, &mut |_| {
            panic!("callback fails")
        })
    }));
    assert!(outcome.is_err(), "the callback's panic was lost");
    // The ranks are free again: the next run completes.
    let again = train(&d, &corpus, &small_params());
    assert_eq!(again.epochs_completed, small_params().epochs);
}

#[test]
fn a_job_across_processes_reports_the_busiest_rank_and_the_whole_jobs_counters() {
    // `train_job` is what every process of an MPI job runs; on the in-process communicator it
    // must give what `distributed` gives on in-process ranks.
    use word2vec::distributed::train_job;
    let corpus = planted_corpus(8, 80, 15, 3);
    let params = small_params();
    let sync = suite_sync();
    let in_process = distributed("gemm", 2, sync.clone())
        .train_ranks(&corpus, &params, Par::Seq, &mut quiet)
        .unwrap();
    // Two processes, each told the job has `told` ranks.
    let job_of = |told: usize| {
        parbench_common::comm::threads::run_threads(2, |comm| {
            train_job(
                comm,
                told,
                "gemm",
                &corpus,
                &params,
                Par::Seq,
                &sync,
                &mut quiet,
            )
        })
    };
    let jobs = job_of(2).unwrap();
    let busiest = in_process
        .iter()
        .map(|r| r.comm.total().words_sent)
        .max()
        .unwrap();
    for job in &jobs {
        let job = &job.value;
        assert_eq!(job.words_sent_max, busiest);
        assert!(job.words_sent_max > 0);
        assert_eq!(job.exchanges, in_process[0].exchanges);
        assert_eq!(
            job.train.words_processed,
            in_process[0].train.words_processed
        );
        assert_eq!(
            job.train.model.vectors(),
            in_process[0].train.model.vectors()
        );
        assert_eq!(
            job.train.total_traffic(),
            in_process[0].train.total_traffic()
        );
    }
    assert_eq!(jobs[0].value.rows_exchanged, in_process[0].rows_exchanged);
    let err = job_of(3).unwrap_err();
    assert!(err.error.to_string().contains("3 ranks"), "{}", err.error);
}

#[test]
fn every_variants_work_is_its_own_flops_and_model_traffic() {
    let corpus = planted_corpus(6, 20, 12, 5);
    let params = small_params();
    for v in variants() {
        let out = train_on(v.as_ref(), &corpus, &params, Par::threads(2));
        let w = out.work(params.dim, 2);
        let t = out.total_traffic();
        let rows =
            t.input_rows_read + t.input_rows_written + t.output_rows_read + t.output_rows_written;
        assert_eq!(
            w.reuse_bytes,
            (rows * 4 * params.dim as u64) as f64,
            "{}",
            v.name()
        );
        assert!(rows > 0, "{}: no traffic counted", v.name());
        assert_eq!(w.flops, out.flops, "{}", v.name());
        assert_eq!(w.precision, parbench_common::Precision::F32);
        assert_eq!(
            w.stream_bytes,
            4.0 * out.words_processed as f64,
            "{}",
            v.name()
        );
        // Both V x d matrices of 12 words, f32.
        assert_eq!(
            w.reuse_footprint_bytes,
            (2 * 12 * params.dim * 4) as f64,
            "{}",
            v.name()
        );
    }
}
