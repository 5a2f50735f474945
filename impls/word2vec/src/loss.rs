//! An estimate of the skip-gram negative-sampling loss for progress reports
//! ([`crate::TrainParams::loss_sample`]): the mean, over a fixed sample of (context, center)
//! pairs of the corpus, of
//!
//! ```text
//! -ln sigma(in[context] . out[center]) - sum_k ln sigma(-in[context] . out[negative_k])
//! ```
//!
//! the objective every variant descends (word2vec.c's skip-gram with `negative` noise words per
//! pair, Mikolov et al. 2013, eq. 4), with the exact logistic function in `f64` rather than the
//! training's table.
//!
//! The sample is drawn once per run from its own random stream (`Rng::stream(seed, u64::MAX)`,
//! which no training thread uses), so the estimate changes nothing the run computes: the models
//! are bit for bit those of a run without it. Pairs are corpus pairs before subsampling: a
//! uniform position of the run's words, and a context word at distance 1..=`window` on the same
//! line; each pair gets `negative` noise words from the unigram^0.75 table, skipping a draw equal
//! to the center as training does. Evaluating it reads `(1 + negative) x samples` rows of `d`
//! floats: O(samples x negative x d), about a millisecond for 10,000 pairs of d = 100.

use crate::driver::Shared;
use parbench_common::rng::Rng;
use std::ops::Range;

/// The stream index of the probe's generator (training threads use 0..threads).
const PROBE_STREAM: u64 = u64::MAX;

/// The fixed sample of pairs a run's loss estimate averages over.
pub(crate) struct LossProbe {
    /// (context, center) word ids.
    pairs: Vec<(u32, u32)>,
    /// Noise words, `negative` slots per pair; `None` where the draw hit the center.
    noise: Vec<Option<u32>>,
    negative: usize,
}

impl LossProbe {
    /// Draws `samples` pairs from the words `shard` of `shared.ids` (fewer where lines of one
    /// word leave too few pairs; none for an empty shard).
    pub fn new(shared: &Shared, shard: Range<usize>, samples: usize, seed: u64) -> LossProbe {
        let mut rng = Rng::stream(seed, PROBE_STREAM);
        let (ids, line_ends) = (shared.ids, shared.line_ends);
        let window = shared.window.max(1);
        let mut pairs = Vec::with_capacity(samples);
        let mut noise = Vec::with_capacity(samples * shared.negative);
        // Bounded: a corpus of one-word lines has no pair at all.
        let mut attempts = 0usize;
        while pairs.len() < samples && !shard.is_empty() && attempts < 8 * samples {
            attempts += 1;
            let p = shard.start + rng.below(shard.len() as u64) as usize;
            let line = line_ends.partition_point(|&e| e <= p);
            let line_start = if line == 0 { 0 } else { line_ends[line - 1] }.max(shard.start);
            let line_end = line_ends
                .get(line)
                .copied()
                .unwrap_or(ids.len())
                .min(shard.end);
            let distance = 1 + rng.below(window as u64) as usize;
            let q = if rng.below(2) == 0 {
                p.checked_sub(distance)
            } else {
                Some(p + distance)
            };
            let Some(q) = q.filter(|&q| q >= line_start && q < line_end) else {
                continue;
            };
            let center = ids[p];
            pairs.push((ids[q], center));
            for _ in 0..shared.negative {
                let t = shared.negatives.sample(&mut rng);
                noise.push((t != center).then_some(t));
            }
        }
        LossProbe {
            pairs,
            noise,
            negative: shared.negative,
        }
    }

    /// The mean loss per pair with the matrices as they are now (NaN without pairs).
    ///
    /// # Safety
    /// No training thread may be writing the matrices (call between segments).
    pub unsafe fn loss(&self, shared: &Shared) -> f64 {
        if self.pairs.is_empty() {
            return f64::NAN;
        }
        let dot = |context: u32, target: u32| -> f64 {
            // SAFETY: the caller guarantees no thread writes the rows meanwhile.
            let (a, b) = unsafe { (shared.input.row(context), shared.output.row(target)) };
            a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
        };
        let mut total = 0.0;
        for (i, &(context, center)) in self.pairs.iter().enumerate() {
            total += neg_ln_sigmoid(dot(context, center));
            let noise = &self.noise[i * self.negative..(i + 1) * self.negative];
            for &t in noise.iter().flatten() {
                total += neg_ln_sigmoid(-dot(context, t));
            }
        }
        total / self.pairs.len() as f64
    }
}

/// `-ln sigma(x) = ln(1 + e^-x)`, without overflow for large `|x|`.
fn neg_ln_sigmoid(x: f64) -> f64 {
    (-x).max(0.0) + (-x.abs()).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Control, Corpus, EpochReport, TrainParams};

    /// Lines drawn from one of two word groups each, so training has something to learn.
    fn planted(seed: u64) -> Corpus {
        let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut rng = Rng::new(seed);
        let (mut ids, mut ends) = (Vec::new(), Vec::new());
        for line in 0..300 {
            for _ in 0..12 {
                ids.push(((line % 2) * 20 + rng.below(20) as usize) as u32);
            }
            ends.push(ids.len());
        }
        Corpus::from_ids(&refs, ids, ends)
    }

    #[test]
    fn asking_for_the_loss_leaves_every_variants_model_unchanged_and_it_falls() {
        let corpus = planted(5);
        for name in crate::variant_names() {
            let trainer = crate::variant(name).unwrap();
            let params = TrainParams {
                dim: 12,
                window: 3,
                negative: 4,
                sample: 0.0,
                epochs: 4,
                seed: 9,
                min_count: 1,
                ..TrainParams::default()
            };
            let plain = trainer
                .train(&corpus, &params, crate::Par::Seq, &mut |_| {
                    Control::Continue
                })
                .unwrap();
            let mut reports: Vec<EpochReport> = Vec::new();
            let probed = trainer
                .train(
                    &corpus,
                    &TrainParams {
                        loss_sample: 500,
                        ..params.clone()
                    },
                    crate::Par::Seq,
                    &mut |r| {
                        reports.push(*r);
                        Control::Continue
                    },
                )
                .unwrap();
            assert_eq!(probed.model.vectors(), plain.model.vectors(), "{name}");
            assert_eq!(probed.output_vectors, plain.output_vectors, "{name}");
            let losses: Vec<f64> = reports
                .iter()
                .filter(|r| r.epoch_finished)
                .map(|r| r.loss.expect("a closing report carries the loss"))
                .collect();
            assert_eq!(losses.len(), 4, "{name}");
            assert!(
                reports.iter().all(|r| r.epoch_finished || r.loss.is_none()),
                "{name}"
            );
            // Untrained, every score is about 0: the loss is near (1 + negative) ln 2.
            let untrained = 5.0 * std::f64::consts::LN_2;
            assert!(
                losses[3] < losses[0] && losses[0] < untrained,
                "{name}: losses {losses:?}, untrained {untrained}"
            );
        }
    }

    #[test]
    fn neg_ln_sigmoid_is_stable_and_right() {
        assert!((neg_ln_sigmoid(0.0) - std::f64::consts::LN_2).abs() < 1e-15);
        assert!((neg_ln_sigmoid(2.0) - (1.0 + (-2.0f64).exp()).ln()).abs() < 1e-15);
        assert!((neg_ln_sigmoid(-800.0) - 800.0).abs() < 1e-12);
        assert!(neg_ln_sigmoid(800.0) >= 0.0 && neg_ln_sigmoid(800.0) < 1e-300);
    }
}
