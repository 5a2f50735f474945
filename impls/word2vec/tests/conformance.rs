//! Conformance suite: every check runs against every variant in `word2vec::variants()`, so a new
//! variant is tested by registering it there; kernel-level checks compare each variant's update
//! with the reference on the cases where the algorithms say they coincide.

use parbench_common::rng::Rng;
use word2vec::reference::{cosine, pair_update, sgns_loss, sigmoid};
use word2vec::sampling::{keep_probability, NegativeSampler, Subsampler};
use word2vec::{
    full, gemm, hogwild, variants, Control, Corpus, EpochReport, TrainOutput, TrainParams, Trainer,
    W2vError,
};

fn quiet(_: &EpochReport) -> Control {
    Control::Continue
}

fn train(v: &dyn Trainer, corpus: &Corpus, params: &TrainParams) -> TrainOutput {
    v.train(corpus, params, &mut quiet)
        .unwrap_or_else(|e| panic!("{}: {e}", v.name()))
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
        threads: 1,
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
    let (mut inp, mut out) = (input.clone(), output.clone());
    hogwild::step(&mut inp, &mut out, d, context, &targets, alpha);
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
    let mut checked = 0;
    for j in 0..d {
        let idx = context as usize * d + j;
        let want = -(alpha as f64) * grad(true, idx);
        let got = (inp[idx] - input[idx]) as f64;
        assert!(
            (got - want).abs() < 2e-5,
            "in[{context}][{j}]: update {got}, -alpha grad {want}"
        );
        checked += 1;
        for &t in &targets {
            let idx = t as usize * d + j;
            let want = -(alpha as f64) * grad(false, idx);
            let got = (out[idx] - output[idx]) as f64;
            assert!(
                (got - want).abs() < 2e-5,
                "out[{t}][{j}]: update {got}, -alpha grad {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, d * (1 + targets.len()));
    // Rows the pair does not touch stay put.
    assert_eq!(&inp[..2 * d], &input[..2 * d]);
    assert_eq!(&out[3 * d..4 * d], &output[3 * d..4 * d]);
}

#[test]
fn hogwild_step_matches_the_reference_update() {
    for d in [1usize, 7, 16, 17, 100] {
        let mut rng = Rng::new(d as u64);
        let input = random_matrix(&mut rng, 5, d, 1.0);
        let output = random_matrix(&mut rng, 5, d, 1.0);
        // A repeated negative is applied twice in sequence, as word2vec.c does.
        let targets = [1u32, 3, 3, 0];
        let (mut i1, mut o1) = (input.clone(), output.clone());
        hogwild::step(&mut i1, &mut o1, d, 2, &targets, 0.1);
        let (mut i2, mut o2) = (input.clone(), output.clone());
        pair_update(&mut i2, &mut o2, d, 2, &targets, 0.1);
        assert_close(&format!("d {d} input"), &i1, &i2, 2e-5);
        assert_close(&format!("d {d} output"), &o1, &o2, 2e-5);
    }
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
                    alpha * (if j == 0 { 1.0 } else { 0.0 } - sigmoid(f))
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

#[test]
fn gemm_batch_matches_the_snapshot_products_on_awkward_shapes() {
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
        let (mut i1, mut o1) = (input.clone(), output.clone());
        gemm::step(&mut i1, &mut o1, d, &contexts, &targets, 0.05);
        let (mut i2, mut o2) = (input.clone(), output.clone());
        reference_batch(&mut i2, &mut o2, d, &contexts, &targets, 0.05);
        assert_close(&format!("{d}x{n}x{m} input"), &i1, &i2, 2e-5);
        assert_close(&format!("{d}x{n}x{m} output"), &o1, &o2, 2e-5);
    }
}

#[test]
fn gemm_with_one_context_word_is_the_hogwild_update() {
    let d = 37;
    let mut rng = Rng::new(5);
    let input = random_matrix(&mut rng, 8, d, 1.0);
    let output = random_matrix(&mut rng, 8, d, 1.0);
    let targets = [6u32, 1, 2, 7];
    let (mut i1, mut o1) = (input.clone(), output.clone());
    gemm::step(&mut i1, &mut o1, d, &[3], &targets, 0.07);
    let (mut i2, mut o2) = (input.clone(), output.clone());
    hogwild::step(&mut i2, &mut o2, d, 3, &targets, 0.07);
    assert_close("input", &i1, &i2, 1e-5);
    assert_close("output", &o1, &o2, 1e-5);
}

#[test]
fn full_on_two_words_is_two_hogwild_pairs() {
    let d = 20;
    let mut rng = Rng::new(8);
    let input = random_matrix(&mut rng, 6, d, 1.0);
    let output = random_matrix(&mut rng, 6, d, 1.0);
    let targets = vec![vec![0u32, 4, 5], vec![1u32, 3]];
    let (mut i1, mut o1) = (input.clone(), output.clone());
    let stats = full::step_stream(&mut i1, &mut o1, d, 1, &[0, 1], &targets, 0.1);
    let (mut i2, mut o2) = (input.clone(), output.clone());
    hogwild::step(&mut i2, &mut o2, d, 1, &targets[0], 0.1);
    hogwild::step(&mut i2, &mut o2, d, 0, &targets[1], 0.1);
    assert_close("input", &i1, &i2, 1e-5);
    assert_close("output", &o1, &o2, 1e-5);
    assert_eq!(stats.pairs, 5);
    assert_eq!(stats.traffic.input_rows_read, 2);
    assert_eq!(stats.traffic.input_rows_written, 2);
    assert_eq!(stats.traffic.output_rows_read, 5);
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
fn full_stream_matches_its_definition_over_many_windows() {
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
        let (mut i1, mut o1) = (input.clone(), output.clone());
        let stats = full::step_stream(&mut i1, &mut o1, d, half, &words, &targets, 0.05);
        let (mut i2, mut o2) = (input.clone(), output.clone());
        reference_full(&mut i2, &mut o2, d, half, &words, &targets, 0.05);
        let what = format!("half {half}, {len} words, d {d}");
        assert_close(&format!("{what}: input"), &i1, &i2, 3e-5);
        assert_close(&format!("{what}: output"), &o1, &o2, 3e-5);
        // Lifetime reuse: every word's input row is read once and written once.
        assert_eq!(stats.traffic.input_rows_read, len as u64, "{what}");
        assert_eq!(stats.traffic.input_rows_written, len as u64, "{what}");
    }
}

#[test]
fn single_thread_runs_repeat_bit_for_bit_and_the_seed_matters() {
    let corpus = planted_corpus(8, 60, 15, 1);
    for v in variants() {
        let params = TrainParams {
            sample: 1e-2,
            ..small_params()
        };
        let a = train(v.as_ref(), &corpus, &params);
        let b = train(v.as_ref(), &corpus, &params);
        assert_eq!(
            a.model.vectors(),
            b.model.vectors(),
            "{}: vectors",
            v.name()
        );
        assert_eq!(
            a.output_vectors,
            b.output_vectors,
            "{}: output vectors",
            v.name()
        );
        assert_eq!(a.epochs[0].pairs, b.epochs[0].pairs, "{}", v.name());
        let c = train(v.as_ref(), &corpus, &TrainParams { seed: 12, ..params });
        assert_ne!(
            a.model.vectors(),
            c.model.vectors(),
            "{}: seed ignored",
            v.name()
        );
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
    for v in variants() {
        let params = TrainParams {
            epochs: 3,
            threads: 2,
            alpha: 0.05,
            ..small_params()
        };
        let out = train(v.as_ref(), &corpus, &params);
        let (within, across) = group_cosines(&out, per_group);
        assert!(
            within > across + 0.3,
            "{}: mean cosine within groups {within:.3}, across {across:.3}",
            v.name()
        );
        assert_eq!(out.epochs_completed, 3);
        assert_eq!(out.words_processed, 3 * corpus.num_words(), "{}", v.name());
        assert!(out.model.vectors().iter().all(|x| x.is_finite()));
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
    for v in variants() {
        let out = train(v.as_ref(), &corpus, &params);
        let e = out.epochs[0];
        assert_eq!(e.words, corpus.num_words(), "{}", v.name());
        assert_eq!(
            e.kept_words,
            corpus.num_words(),
            "{}: sample 0 keeps all",
            v.name()
        );
        let t = e.traffic;
        match v.name() {
            "hogwild" => {
                assert_eq!(t.output_rows_read, e.pairs);
                assert_eq!(t.input_rows_read, t.input_rows_written);
            }
            "gemm" => assert_eq!(t.output_rows_read, t.output_rows_written),
            "full" => {
                assert_eq!(t.input_rows_read, e.kept_words);
                assert_eq!(t.input_rows_written, e.kept_words);
            }
            _ => {}
        }
        assert!(
            (out.flops - 6.0 * params.dim as f64 * e.pairs as f64).abs() < 1.0,
            "{}",
            v.name()
        );
        bytes.push((
            v.name(),
            t.bytes_read(params.dim) + t.bytes_written(params.dim),
        ));
    }
    let of = |name: &str| bytes.iter().find(|(n, _)| *n == name).unwrap().1;
    assert!(of("full") < of("gemm"), "{bytes:?}");
    assert!(of("gemm") < of("hogwild"), "{bytes:?}");
}

#[test]
fn progress_reports_advance_and_stop_ends_the_run_early() {
    let corpus = planted_corpus(10, 400, 20, 5);
    for v in variants() {
        let params = TrainParams {
            epochs: 4,
            threads: 2,
            report_interval_seconds: 0.001,
            ..small_params()
        };
        let mut reports: Vec<EpochReport> = Vec::new();
        let out = v
            .train(&corpus, &params, &mut |r| {
                reports.push(*r);
                if r.epoch_finished && r.epoch == 1 {
                    Control::Stop
                } else {
                    Control::Continue
                }
            })
            .unwrap();
        assert_eq!(out.epochs_completed, 2, "{}", v.name());
        assert_eq!(out.words_processed, 2 * corpus.num_words(), "{}", v.name());
        let finished: Vec<usize> = reports
            .iter()
            .filter(|r| r.epoch_finished)
            .map(|r| r.epoch)
            .collect();
        assert_eq!(finished, [0, 1], "{}", v.name());
        assert!(reports
            .windows(2)
            .all(|w| w[0].words_processed <= w[1].words_processed && w[0].alpha >= w[1].alpha));
        let last = reports.last().unwrap();
        assert_eq!(last.words_total, 4 * corpus.num_words());
        assert!(last.alpha < params.alpha && last.alpha > params.alpha * 0.4);
    }
}

#[test]
fn bad_parameters_and_an_empty_corpus_are_rejected() {
    let corpus = planted_corpus(3, 4, 5, 6);
    let empty = Corpus::from_ids(&["a"], vec![], vec![0]);
    for v in variants() {
        let base = small_params();
        let bad = [
            TrainParams {
                dim: 0,
                ..base.clone()
            },
            TrainParams {
                window: 0,
                ..base.clone()
            },
            TrainParams {
                threads: 0,
                ..base.clone()
            },
            TrainParams {
                epochs: 0,
                ..base.clone()
            },
            TrainParams {
                alpha: f64::NAN,
                ..base.clone()
            },
            TrainParams {
                sample: -1.0,
                ..base.clone()
            },
        ];
        for p in &bad {
            assert!(
                v.train(&corpus, p, &mut quiet).is_err(),
                "{}: {p:?}",
                v.name()
            );
        }
        assert!(matches!(
            v.train(&empty, &base, &mut quiet),
            Err(W2vError::EmptyCorpus)
        ));
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
// `distributed` (data parallel over ranks, on the in-process communicator).
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
        let ranks = d.train_ranks(&corpus, &params, &mut quiet).unwrap();
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

#[test]
fn one_rank_counts_its_exchanges_but_sends_and_averages_nothing() {
    // Many exchanges of every row are due, but one rank has nothing to average: the run equals
    // the same segmentation with no row ever due, and nothing is sent.
    let corpus = planted_corpus(8, 80, 15, 3);
    let params = small_params();
    let every = SyncOptions {
        sync_words: 97,
        hot_words: usize::MAX,
        rare_every: 1,
        scale_alpha: true,
    };
    let never = SyncOptions {
        hot_words: 0,
        rare_every: usize::MAX,
        ..every.clone()
    };
    for inner in ["hogwild", "gemm", "full"] {
        let a = distributed(inner, 1, every.clone())
            .train_ranks(&corpus, &params, &mut quiet)
            .unwrap();
        let b = distributed(inner, 1, never.clone())
            .train_ranks(&corpus, &params, &mut quiet)
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
fn distributed_ranks_end_with_one_model_and_learn_the_planted_groups() {
    let per_group = 10;
    let corpus = planted_corpus(per_group, 1200, 20, 2);
    let params = TrainParams {
        epochs: 3,
        alpha: 0.025,
        ..small_params()
    };
    for (inner, ranks) in [("gemm", 2), ("hogwild", 3), ("full", 2)] {
        let sync = SyncOptions {
            sync_words: 2000,
            hot_words: 5,
            rare_every: 3,
            scale_alpha: true,
        };
        let runs: Vec<RankOutput> = distributed(inner, ranks, sync)
            .train_ranks(&corpus, &params, &mut quiet)
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
        .train_ranks(&corpus, &params, &mut quiet)
        .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}
