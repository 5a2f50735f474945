//! Special functions and random variates the samplers and the synthetic corpus need.
//!
//! - [`ln_gamma`]: `ln Γ(x)` for `x > 0` by the upward recurrence `Γ(x) = Γ(x + n) / (x (x+1) ...
//!   (x+n-1))` to `x + n >= 10`, then Stirling's series with eight Bernoulli terms. The first
//!   omitted term is below `2e-18` at `x = 10`, so the result is accurate to a few ulps of the
//!   larger of `|ln Γ(x)|` and `ln(x ... (x+n-1))` (absolute error about `1e-15` near the zeros
//!   at 1 and 2). Cost: one or two logarithms plus a dozen flops.
//! - [`gamma_variate`]: Marsaglia & Tsang (2000) for shape `a >= 1`; for `a < 1` the boost
//!   `G(a) = G(a + 1) U^(1/a)`, kept in log space so that tiny shapes do not underflow.
//! - [`dirichlet`]: normalized gamma variates, computed from their logarithms.

use parbench_common::Rng;

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Below this the recurrence shifts the argument up before Stirling's series.
const STIRLING_FROM: f64 = 10.0;

/// `B_{2n} / (2n (2n - 1))` for n = 1..8, the coefficients of `x^-(2n-1)` in Stirling's series.
const STIRLING: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360_360.0,
    1.0 / 156.0,
    -3617.0 / 122_400.0,
];

/// `ln Γ(x)` for finite `x > 0` (NaN otherwise).
pub fn ln_gamma(x: f64) -> f64 {
    if !(x > 0.0 && x.is_finite()) {
        return f64::NAN;
    }
    let mut shifted = x;
    let mut product = 1.0;
    while shifted < STIRLING_FROM {
        product *= shifted;
        shifted += 1.0;
    }
    let inv = 1.0 / shifted;
    let inv2 = inv * inv;
    let mut series = 0.0;
    for &c in STIRLING.iter().rev() {
        series = series * inv2 + c;
    }
    let stirling = (shifted - 0.5) * shifted.ln() - shifted + LN_SQRT_2PI + series * inv;
    if product == 1.0 {
        stirling
    } else {
        stirling - product.ln()
    }
}

/// `ln` of a Gamma(shape, 1) variate, `shape > 0`.
pub fn ln_gamma_variate(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        // G(a) = G(a + 1) * U^(1/a); in logs so U^(1/a) cannot underflow for small a.
        let u = 1.0 - rng.next_f64(); // (0, 1]
        return ln_gamma_variate(rng, shape + 1.0) + u.ln() / shape;
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.next_f64();
        if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return (d * v).ln();
        }
    }
}

/// A Gamma(shape, 1) variate, `shape > 0`.
pub fn gamma_variate(rng: &mut Rng, shape: f64) -> f64 {
    ln_gamma_variate(rng, shape).exp()
}

/// A draw from the symmetric Dirichlet(`concentration`) over `len` outcomes.
pub fn dirichlet(rng: &mut Rng, concentration: f64, len: usize) -> Vec<f64> {
    let logs: Vec<f64> = (0..len)
        .map(|_| ln_gamma_variate(rng, concentration))
        .collect();
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut p: Vec<f64> = logs.iter().map(|&l| (l - max).exp()).collect();
    let sum: f64 = p.iter().sum();
    for x in &mut p {
        *x /= sum;
    }
    p
}

/// Index of a draw from the discrete distribution with (unnormalized, non-negative) `weights`.
pub fn sample_discrete(rng: &mut Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let u = rng.next_f64() * total;
    let mut acc = 0.0;
    for (i, &w) in weights.iter().enumerate() {
        acc += w;
        if acc > u {
            return i;
        }
    }
    weights.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of `math.lgamma` (CPython, correctly rounded to ~1 ulp).
    const KNOWN: [(f64, f64); 13] = [
        (1e-3, 6.907178885383854),
        (0.1, 2.2527126517342055),
        (0.5, 0.5723649429247004),
        (1.0, 0.0),
        (1.5, -0.12078223763524543),
        (2.0, 0.0),
        (3.7, 1.4280723266653883),
        (7.25, 7.0521854507385395),
        (10.0, 12.801827480081467),
        (33.3, 82.60372358165495),
        (100.0, 359.1342053695754),
        (1234.5, 7550.550901077896),
        (1e6, 12815504.569147611),
    ];

    #[test]
    fn ln_gamma_matches_known_values() {
        for (x, expected) in KNOWN {
            let actual = ln_gamma(x);
            let tol = 1e-13 * expected.abs().max(1.0);
            assert!(
                (actual - expected).abs() <= tol,
                "ln_gamma({x}): expected {expected:e}, actual {actual:e}"
            );
        }
    }

    #[test]
    fn ln_gamma_satisfies_the_recurrence_and_factorials() {
        let mut factorial_ln = 0.0;
        for n in 1..60u32 {
            // Γ(n + 1) = n!
            factorial_ln += (n as f64).ln();
            let actual = ln_gamma(n as f64 + 1.0);
            assert!(
                (actual - factorial_ln).abs() <= 1e-13 * factorial_ln.max(1.0),
                "ln Γ({}) = {actual}, ln {n}! = {factorial_ln}",
                n + 1
            );
        }
        for &x in &[0.01, 0.3, 0.9, 2.5, 9.99, 10.0, 10.01, 57.0] {
            let lhs = ln_gamma(x + 1.0);
            let rhs = ln_gamma(x) + f64::ln(x);
            assert!((lhs - rhs).abs() <= 1e-13 * lhs.abs().max(1.0), "x = {x}");
        }
        assert!(ln_gamma(0.0).is_nan() && ln_gamma(-1.0).is_nan());
    }

    #[test]
    fn gamma_variates_have_the_right_mean() {
        let mut rng = Rng::new(11);
        for &shape in &[0.1, 0.7, 1.0, 3.5] {
            let n = 40_000;
            let mean = (0..n).map(|_| gamma_variate(&mut rng, shape)).sum::<f64>() / n as f64;
            // The standard deviation of the mean is sqrt(shape / n).
            let sd = (shape / n as f64).sqrt();
            assert!(
                (mean - shape).abs() < 5.0 * sd,
                "shape {shape}: mean {mean}"
            );
        }
    }

    #[test]
    fn dirichlet_sums_to_one_and_small_concentration_is_sparse() {
        let mut rng = Rng::new(5);
        let p = dirichlet(&mut rng, 0.01, 50);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p.iter().all(|&x| x >= 0.0));
        let largest = p.iter().copied().fold(0.0, f64::max);
        assert!(
            largest > 0.5,
            "Dirichlet(0.01) should concentrate: {largest}"
        );
    }
}
