//! `sequential`: the standard collapsed Gibbs sampler (Griffiths & Steyvers 2004), the paper's
//! baseline.
//!
//! For each token: remove it from n_dk, n_kw, n_k; form the K unnormalized probabilities
//! `(n_dk + alpha) (n_kw + beta) / (n_k + W beta)` as a running cumulative sum; draw one uniform
//! `u` in `[0, total)` and take the first topic whose cumulative sum exceeds it; add the token
//! back. O(K) per token, O(N K) per iteration. The reciprocals `1 / (n_k + W beta)` are cached
//! and updated for the two topics a token touches, so the inner loop is two loads, two
//! conversions, three multiply-adds per topic.
//!
//! Determinism: one random stream seeded from `params.seed`, documents in corpus order: the same
//! seed gives the same assignments bit for bit.

use crate::corpus::Corpus;
use crate::kernel::{train_single, Kernel, Tables};
use crate::problem::{Control, InnerSampler, IterationReport, LdaError, LdaOutput, LdaParams};
use crate::{LdaSampler, Par};
use parbench_common::Rng;

/// The standard O(K)-per-token sampler.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sequential;

impl LdaSampler for Sequential {
    fn name(&self) -> &'static str {
        "sequential"
    }

    fn token_cost(&self, _params: &LdaParams) -> crate::TokenCost {
        crate::TokenCost::Standard
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        _par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError> {
        train_single(InnerSampler::Standard, corpus, params, progress)
    }
}

/// The standard kernel's caches.
pub(crate) struct StandardKernel {
    topics: usize,
    alpha: f64,
    beta: f64,
    w_beta: f64,
    /// `1 / (n_k + W beta)`.
    inv_denominator: Vec<f64>,
    /// Cumulative unnormalized probabilities of the current draw.
    cumulative: Vec<f64>,
    /// Whether [`avx2::draw`] can run here (checked once, not per token).
    avx2: bool,
}

impl StandardKernel {
    pub(crate) fn new(params: &LdaParams, num_words: usize) -> StandardKernel {
        StandardKernel {
            topics: params.topics,
            alpha: params.alpha,
            beta: params.beta,
            w_beta: num_words as f64 * params.beta,
            inv_denominator: vec![0.0; params.topics],
            cumulative: vec![0.0; params.topics],
            avx2: avx2::available(),
        }
    }
}

impl Kernel for StandardKernel {
    fn prepare(&mut self, tables: &Tables) {
        for (inv, &n) in self.inv_denominator.iter_mut().zip(&tables.topic_totals) {
            *inv = 1.0 / (n as f64 + self.w_beta);
        }
    }

    fn begin_doc(&mut self, _: &[u32], _: &Tables) {}

    #[inline(always)]
    fn remove(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables) {
        let k = k as usize;
        ndk[k] -= 1;
        tables.word_topic[w as usize * self.topics + k] -= 1;
        tables.topic_totals[k] -= 1;
        self.inv_denominator[k] = 1.0 / (tables.topic_totals[k] as f64 + self.w_beta);
    }

    #[inline(always)]
    fn draw(&mut self, w: u32, ndk: &[u32], tables: &Tables, rng: &mut Rng) -> u32 {
        let k = self.topics;
        let row = &tables.word_topic[w as usize * k..(w as usize + 1) * k];
        let ndk = &ndk[..k];
        let inv = &self.inv_denominator[..k];
        let cumulative = &mut self.cumulative[..k];
        let (alpha, beta) = (self.alpha, self.beta);
        let r = rng.next_f64();
        if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU has AVX2, FMA and POPCNT, and the four
            // slices are all K long (cut above).
            return unsafe { avx2::draw(ndk, row, inv, alpha, beta, cumulative, r) };
        }
        draw_scalar(ndk, row, inv, alpha, beta, cumulative, r)
    }

    #[inline(always)]
    fn add(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables) {
        let k = k as usize;
        ndk[k] += 1;
        tables.word_topic[w as usize * self.topics + k] += 1;
        tables.topic_totals[k] += 1;
        self.inv_denominator[k] = 1.0 / (tables.topic_totals[k] as f64 + self.w_beta);
    }

    fn end_doc(&mut self, _: &[u32], _: &Tables) {}
}

/// The standard kernel's draw on this CPU (see [`crate::simd_path`]).
pub(crate) fn simd_path() -> &'static str {
    if avx2::available() {
        "avx2+fma"
    } else {
        "scalar"
    }
}

/// A topic's unnormalized probability, `(n_dk + alpha) (n_kw + beta) / (n_k + W beta)`, from
/// its document count `n`, word count `count` and `inv = 1 / (n_k + W beta)` (the AVX2 draw forms
/// the same product four topics at a time and takes the last K mod 4 from here).
#[inline(always)]
fn term(n: u32, count: u32, inv: f64, alpha: f64, beta: f64) -> f64 {
    (n as f64 + alpha) * (count as f64 + beta) * inv
}

/// The standard draw for uniform `r` in `[0, 1)`, one topic at a time: the first topic whose
/// cumulative sum exceeds `r * total`, the last one if rounding left it at the total. (Measured
/// on KOS, K = 20: this one pass beats a vectorizable two-pass form, products then a
/// subtracting search, by about 20%.)
#[inline(always)]
fn draw_scalar(
    ndk: &[u32],
    row: &[u32],
    inv: &[f64],
    alpha: f64,
    beta: f64,
    cumulative: &mut [f64],
    r: f64,
) -> u32 {
    let mut total = 0.0;
    for (((c, &n), &count), &i) in cumulative.iter_mut().zip(ndk).zip(row).zip(inv) {
        total += term(n, count, i, alpha, beta);
        *c = total;
    }
    let u = r * total;
    let mut t = 0;
    while t + 1 < cumulative.len() && cumulative[t] <= u {
        t += 1;
    }
    t as u32
}

/// The standard draw four topics at a time (measured on KOS, K = 20, one thread: 1.3x the
/// tokens/s of the scalar loop). That loop's running sum is one chain of K dependent additions
/// and its search a branch that mispredicts where it stops; here each group of four is summed
/// in registers (two shifted additions), only the carry from group to group is a chain (one
/// addition a group), and the search counts the cumulative sums at most `u` without a branch.
mod avx2 {
    /// Whether this CPU can run [`draw`].
    pub(super) fn available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            has!("avx2") && has!("fma") && has!("popcnt")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The topic drawn for uniform `r` in `[0, 1)`: the number of cumulative sums at most
    /// `r * total`, capped at the last topic. That is the scalar loop's first topic whose sum
    /// exceeds `r * total`: the sums never decrease (every term is positive, and
    /// floating-point addition is monotone in each operand, so a sum over more terms is not
    /// below one over fewer, whatever their grouping, but for the last bit, which moves a
    /// boundary between two topics by an ulp of the total).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and POPCNT; `ndk`, `row`, `inv` and `cumulative` must be
    /// equally long.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,popcnt")]
    pub(super) unsafe fn draw(
        ndk: &[u32],
        row: &[u32],
        inv: &[f64],
        alpha: f64,
        beta: f64,
        cumulative: &mut [f64],
        r: f64,
    ) -> u32 {
        use std::arch::x86_64::*;
        let k = cumulative.len();
        assert!(ndk.len() == k && row.len() == k && inv.len() == k);
        let groups = k / 4;
        // SAFETY: AVX2, FMA and POPCNT are enabled; every load and store is of the four
        // values at `4 g`, `g < k / 4`, inside the four K-long slices (asserted above).
        unsafe {
            let (va, vb) = (_mm256_set1_pd(alpha), _mm256_set1_pd(beta));
            let zero = _mm256_setzero_pd();
            // The sum of the groups before this one in every lane: the only chain from group
            // to group, one addition long (the broadcast of a group's own total is off it).
            let mut carry = zero;
            for g in 0..groups {
                let at = 4 * g;
                // Counts are below 2^31 (a corpus's tokens), so reading them as i32 is exact.
                let n = _mm256_cvtepi32_pd(_mm_loadu_si128(ndk.as_ptr().add(at).cast()));
                let c = _mm256_cvtepi32_pd(_mm_loadu_si128(row.as_ptr().add(at).cast()));
                let p = _mm256_mul_pd(
                    _mm256_mul_pd(_mm256_add_pd(n, va), _mm256_add_pd(c, vb)),
                    _mm256_loadu_pd(inv.as_ptr().add(at)),
                );
                // [a, b, c, d] -> [a, a+b, b+c, c+d] -> [a, a+b, a+b+c, a+b+c+d].
                let shifted =
                    _mm256_blend_pd::<0b0001>(_mm256_permute4x64_pd::<0b10_01_00_00>(p), zero);
                let p = _mm256_add_pd(p, shifted);
                let p = _mm256_add_pd(p, _mm256_permute2f128_pd::<0x08>(p, p));
                _mm256_storeu_pd(cumulative.as_mut_ptr().add(at), _mm256_add_pd(p, carry));
                carry = _mm256_add_pd(carry, _mm256_permute4x64_pd::<0b11_11_11_11>(p));
            }
            let mut total = _mm256_cvtsd_f64(carry);
            for t in 4 * groups..k {
                total += super::term(ndk[t], row[t], inv[t], alpha, beta);
                cumulative[t] = total;
            }
            let u = r * total;
            let vu = _mm256_set1_pd(u);
            let mut below = 0;
            for g in 0..groups {
                let sums = _mm256_loadu_pd(cumulative.as_ptr().add(4 * g));
                below += _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(sums, vu)).count_ones();
            }
            below += cumulative[4 * groups..].iter().filter(|&&s| s <= u).count() as u32;
            below.min(k as u32 - 1)
        }
    }

    /// Never called: [`available`] is false off x86-64.
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) unsafe fn draw(
        _: &[u32],
        _: &[u32],
        _: &[f64],
        _: f64,
        _: f64,
        _: &mut [f64],
        _: f64,
    ) -> u32 {
        unreachable!("AVX2 is x86-64 only")
    }
}

#[cfg(test)]
mod tests {
    use super::{avx2, draw_scalar};
    use parbench_common::Rng;

    type Draw = fn(&[u32], &[u32], &[f64], f64, f64, &mut [f64], f64) -> u32;

    /// The draws this CPU can run: the scalar loop, and the AVX2 one where it can.
    fn draws() -> Vec<(&'static str, Draw)> {
        let mut all: Vec<(&'static str, Draw)> = vec![("scalar", draw_scalar)];
        if avx2::available() {
            // SAFETY: the CPU has AVX2, FMA and POPCNT (checked above); every caller below
            // passes four equally long slices.
            all.push(("avx2", |n, c, i, a, b, s, r| unsafe {
                avx2::draw(n, c, i, a, b, s, r)
            }));
        }
        all
    }

    /// Terms exact in binary, so every cumulative sum and every `u` below is exact and the
    /// topic each `u` must give is known: with alpha = beta = 0.5, unit reciprocals and zero
    /// word counts, topic t's term is (n_t + 0.5) / 2.
    #[test]
    fn every_draw_takes_the_first_topic_whose_sum_exceeds_u_in_a_hand_made_case() {
        for k in [1, 3, 4, 6, 9, 13] {
            let ndk: Vec<u32> = (0..k as u32).map(|t| (7 * t + 3) % 5).collect();
            let (row, inv) = (vec![0u32; k], vec![1.0; k]);
            let terms: Vec<f64> = ndk.iter().map(|&n| (n as f64 + 0.5) * 0.5).collect();
            let total: f64 = terms.iter().sum();
            for j in 0..64 {
                let r = j as f64 / 64.0;
                let u = r * total;
                let (mut sum, mut want) = (0.0, k - 1);
                for (t, term) in terms.iter().enumerate() {
                    sum += term;
                    if sum > u {
                        want = t;
                        break;
                    }
                }
                for (name, draw) in draws() {
                    let mut cumulative = vec![0.0; k];
                    let got = draw(&ndk, &row, &inv, 0.5, 0.5, &mut cumulative, r);
                    assert_eq!(got as usize, want, "{name}, K = {k}, r = {r}");
                }
            }
        }
    }

    /// The AVX2 draw against the scalar loop on random counts, K = 1 to 40 (every remainder of
    /// K / 4): the same topic, except where `u` is within a few ulps of a cumulative sum, where
    /// the two may round the sum differently.
    #[test]
    fn the_avx2_draw_agrees_with_the_scalar_loop() {
        if !avx2::available() {
            return;
        }
        let mut rng = Rng::new(11);
        let (mut compared, mut at_a_boundary) = (0, 0);
        for k in 1..=40 {
            for _ in 0..200 {
                let ndk: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 50) as u32).collect();
                let row: Vec<u32> = (0..k).map(|_| (rng.next_u64() % 1000) as u32).collect();
                let inv: Vec<f64> = (0..k)
                    .map(|_| 1.0 / (1000.0 + (rng.next_u64() % 5000) as f64))
                    .collect();
                let r = rng.next_f64();
                let mut sums = vec![0.0; k];
                let want = draw_scalar(&ndk, &row, &inv, 0.1, 0.01, &mut sums, r);
                let u = r * sums[k - 1];
                if sums
                    .iter()
                    .any(|&s| (s - u).abs() <= 4.0 * f64::EPSILON * s)
                {
                    at_a_boundary += 1;
                    continue;
                }
                let mut cumulative = vec![0.0; k];
                // SAFETY: checked above that the CPU has AVX2, FMA and POPCNT; four K-long
                // slices.
                let got = unsafe { avx2::draw(&ndk, &row, &inv, 0.1, 0.01, &mut cumulative, r) };
                assert_eq!(got, want, "K = {k}, r = {r}");
                compared += 1;
            }
        }
        assert!(
            at_a_boundary < 10,
            "{at_a_boundary} draws at a boundary of {compared}"
        );
    }
}
