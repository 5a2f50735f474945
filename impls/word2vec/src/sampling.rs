//! The random and scheduled pieces every variant shares: frequent-word subsampling, negative
//! sampling from unigram^0.75, the learning-rate schedule, and a sigmoid table.
//!
//! - Subsampling keeps a word of count `c` out of `T` corpus words with word2vec.c's probability
//!   `p = (sqrt(c / (t T)) + 1) (t T) / c` (clipped to 1), `t` the `sample` threshold; stored as
//!   a 32-bit threshold so a draw is one comparison.
//! - Negatives come from Vose's alias method over `count^0.75`: O(V) to build, O(1) and one
//!   64-bit random number per draw (the high half picks a bucket, the low half flips its coin).
//!   word2vec.c's 1e8-entry table would be 400 MB and miss the cache on every draw; the alias
//!   table is `8 V` bytes (570 kB for text8) and draws from the same distribution exactly.
//! - The learning rate decays linearly with the words processed over all epochs,
//!   `alpha_0 max(1 - done / (epochs T + 1), 1e-4)`, as word2vec.c.
//! - `sigmoid` is tabulated on [-8, 8] with linear interpolation (error below 4e-6; outside,
//!   0 or 1, off by less than 3.4e-4), so the update is the exact formula for all
//!   practical purposes at the cost of a lookup.

use parbench_common::rng::Rng;

/// Per-word subsampling thresholds: word `w` is kept when the high 32 bits of a draw are below
/// `thresholds[w]` (2^32 keeps always).
#[derive(Clone, Debug)]
pub struct Subsampler {
    thresholds: Vec<u64>,
}

/// word2vec.c's keep probability of a word seen `count` times in `total_words` (sample > 0).
pub fn keep_probability(count: u64, total_words: u64, sample: f64) -> f64 {
    if sample <= 0.0 || count == 0 {
        return 1.0;
    }
    let st = sample * total_words as f64;
    let c = count as f64;
    (((c / st).sqrt() + 1.0) * st / c).min(1.0)
}

impl Subsampler {
    /// Thresholds for words with the given `counts` (by id) and subsampling threshold `sample` (0
    /// keeps every word).
    pub fn new(counts: &[u64], sample: f64) -> Subsampler {
        let total: u64 = counts.iter().sum();
        let thresholds = counts
            .iter()
            .map(|&c| (keep_probability(c, total, sample) * 4_294_967_296.0) as u64)
            .collect();
        Subsampler { thresholds }
    }

    /// Whether to keep one occurrence of `word`.
    #[inline(always)]
    pub fn keep(&self, word: u32, rng: &mut Rng) -> bool {
        (rng.next_u64() >> 32) < self.thresholds[word as usize]
    }
}

/// Draws words with probability proportional to `count^0.75` (Vose's alias method).
#[derive(Clone, Debug)]
pub struct NegativeSampler {
    /// (coin threshold, alias) per bucket; a bucket that keeps its own word is its own alias.
    buckets: Vec<(u32, u32)>,
}

impl NegativeSampler {
    /// The unigram^0.75 distribution over `counts` (which must not be all zero).
    pub fn new(counts: &[u64]) -> NegativeSampler {
        let weights: Vec<f64> = counts.iter().map(|&c| (c as f64).powf(0.75)).collect();
        NegativeSampler::from_weights(&weights)
    }

    /// Any non-negative weights with a positive sum.
    pub fn from_weights(weights: &[f64]) -> NegativeSampler {
        let n = weights.len();
        let sum: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.iter().map(|&w| w * n as f64 / sum).collect();
        let mut buckets: Vec<(u32, u32)> = (0..n as u32).map(|i| (u32::MAX, i)).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            buckets[s] = ((scaled[s] * 4_294_967_296.0) as u32, l as u32);
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Whatever is left holds probability 1 up to rounding: keeps its own word.
        NegativeSampler { buckets }
    }

    /// One word.
    #[inline(always)]
    pub fn sample(&self, rng: &mut Rng) -> u32 {
        let r = rng.next_u64();
        let i = (((r >> 32) * self.buckets.len() as u64) >> 32) as usize;
        let (threshold, alias) = self.buckets[i];
        if (r as u32) < threshold {
            i as u32
        } else {
            alias
        }
    }

    /// The probability of drawing each word (for tests).
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.buckets.len() as f64;
        let mut p = vec![0.0; self.buckets.len()];
        for (i, &(t, a)) in self.buckets.iter().enumerate() {
            let own = if a as usize == i {
                1.0
            } else {
                t as f64 / 4_294_967_296.0
            };
            p[i] += own / n;
            p[a as usize] += (1.0 - own) / n;
        }
        p
    }
}

/// The learning rate after `done` of `total` words (all epochs).
#[inline]
pub fn learning_rate(alpha0: f64, done: u64, total: u64) -> f32 {
    (alpha0 * (1.0 - done as f64 / (total as f64 + 1.0)).max(1e-4)) as f32
}

const SIGMOID_RANGE: f32 = 8.0;
const SIGMOID_STEPS: usize = 2048;

/// `1 / (1 + exp(-x))` by table lookup with linear interpolation.
#[derive(Clone, Debug)]
pub struct Sigmoid {
    table: Vec<f32>,
}

impl Default for Sigmoid {
    fn default() -> Self {
        Sigmoid::new()
    }
}

impl Sigmoid {
    /// Builds the table: 2050 values over `[-8, 8]`.
    pub fn new() -> Sigmoid {
        let table = (0..=SIGMOID_STEPS + 1)
            .map(|i| {
                let x = -SIGMOID_RANGE as f64
                    + i as f64 * 2.0 * SIGMOID_RANGE as f64 / SIGMOID_STEPS as f64;
                (1.0 / (1.0 + (-x).exp())) as f32
            })
            .collect();
        Sigmoid { table }
    }

    /// `sigmoid(x)`: exactly 1 for `x >= 8`, exactly 0 for `x <= -8` and NaN, interpolated in
    /// between.
    #[inline(always)]
    pub fn eval(&self, x: f32) -> f32 {
        if x >= SIGMOID_RANGE {
            return 1.0;
        }
        if x <= -SIGMOID_RANGE || x.is_nan() {
            return 0.0;
        }
        let pos = (x + SIGMOID_RANGE) * (SIGMOID_STEPS as f32 / (2.0 * SIGMOID_RANGE));
        let i = (pos as usize).min(SIGMOID_STEPS);
        let frac = pos - i as f32;
        let a = self.table[i];
        a + frac * (self.table[i + 1] - a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_table_matches_the_formula() {
        let s = Sigmoid::new();
        let mut worst = 0f64;
        for i in -1560..=1560 {
            let x = i as f32 * 0.0051;
            let exact = 1.0 / (1.0 + (-(x as f64)).exp());
            worst = worst.max((s.eval(x) as f64 - exact).abs());
        }
        assert!(worst < 4e-6, "worst error {worst}");
        for x in [8.0f32, 9.5, -8.0, -12.0] {
            let exact = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!((s.eval(x) as f64 - exact).abs() < 3.4e-4, "{x}");
        }
        assert_eq!(s.eval(100.0), 1.0);
        assert_eq!(s.eval(-100.0), 0.0);
    }

    #[test]
    fn learning_rate_decays_linearly_to_its_floor() {
        assert!((learning_rate(0.025, 0, 1000) - 0.025).abs() < 1e-9);
        let half = learning_rate(0.025, 500, 999);
        assert!((half - 0.0125).abs() < 1e-6, "{half}");
        assert!((learning_rate(0.025, 2000, 1000) - 0.025e-4).abs() < 1e-12);
    }
}
