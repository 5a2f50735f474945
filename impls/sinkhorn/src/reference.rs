//! An independent, deliberately plain Sinkhorn-WMD for the tests: one target document at a time,
//! written from the definition with none of the variants' machinery (no GEMM, no padding, no
//! word-major arrays, no shared helpers).
//!
//! For document `j` with words `t_1..t_m` and weights `c`: `M[s][i] = ||e_{q_s} - e_{t_i}||`
//! summed term by term, `K = exp(-lambda M)`, `x = 1 / v_s`; each iteration
//! `u = 1 / x`, `v_i = c_i / sum_s K[s][i] u_s`, `x_s = sum_i (K[s][i] / r_s) v_i`, stopping after
//! `max_iter` iterations or once `max_s |x_new - x| / max_s x_new <= tol`; then
//! `wmd = sum_s u_s sum_i K[s][i] M[s][i] v_i` with `u = 1 / x`, `v` recomputed from that `u`.
//! Cost `O(iterations v_s m)` per document, `O(v_s m d)` for its distances.

use crate::problem::{SinkhornParams, WmdError, WmdProblem};

/// The Sinkhorn distance of the query to every target document (and the iterations each ran).
pub fn reference_wmd(problem: &WmdProblem, params: &SinkhornParams) -> Result<Vec<f64>, WmdError> {
    params.validate()?;
    (0..problem.num_docs())
        .map(|j| reference_doc(problem, params, j))
        .collect()
}

/// The Sinkhorn distance of the query to target document `doc`.
pub fn reference_doc(
    problem: &WmdProblem,
    params: &SinkhornParams,
    doc: usize,
) -> Result<f64, WmdError> {
    let query = problem.query();
    let (words, c) = problem.docs_by_doc().row(doc);
    let vs = query.len();
    let lambda = params.lambda;
    let m: Vec<Vec<f64>> = query
        .iter()
        .map(|&(q, _)| {
            words
                .iter()
                .map(|&t| {
                    let a = problem.vec(q as usize);
                    let b = problem.vec(t as usize);
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| (x - y) * (x - y))
                        .sum::<f64>()
                        .sqrt()
                })
                .collect()
        })
        .collect();
    let k: Vec<Vec<f64>> = m
        .iter()
        .map(|row| row.iter().map(|&d| (-lambda * d).exp()).collect())
        .collect();
    let v_of = |u: &[f64]| -> Vec<f64> {
        (0..words.len())
            .map(|i| c[i] / (0..vs).map(|s| k[s][i] * u[s]).sum::<f64>())
            .collect()
    };
    let mut x = vec![1.0 / vs as f64; vs];
    for _ in 0..params.max_iter {
        let u: Vec<f64> = x.iter().map(|&x| 1.0 / x).collect();
        let v = v_of(&u);
        let x_new: Vec<f64> = (0..vs)
            .map(|s| {
                (0..words.len())
                    .map(|i| k[s][i] / query[s].1 * v[i])
                    .sum::<f64>()
            })
            .collect();
        if x_new.iter().any(|&x| !(x.is_finite() && x > 0.0)) {
            return Err(WmdError::Underflow { lambda });
        }
        let diff = x_new
            .iter()
            .zip(&x)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let scale = x_new.iter().fold(0.0, |a: f64, &b| a.max(b));
        x = x_new;
        if params.tol.is_some_and(|t| diff / scale <= t) {
            break;
        }
    }
    let u: Vec<f64> = x.iter().map(|&x| 1.0 / x).collect();
    let v = v_of(&u);
    let wmd: f64 = (0..vs)
        .map(|s| {
            u[s] * (0..words.len())
                .map(|i| k[s][i] * m[s][i] * v[i])
                .sum::<f64>()
        })
        .sum();
    if wmd.is_finite() {
        Ok(wmd)
    } else {
        Err(WmdError::Underflow { lambda })
    }
}
