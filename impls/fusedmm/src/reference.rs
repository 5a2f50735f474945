//! Deliberately plain kernels for the tests, written from the definitions on dense arrays:
//! `S` is expanded to a dense `m x n` array, `A B^T` is formed in full, and the sparse products
//! loop over every `(i, j)`. No CSR traversal, no splitting, no shared helpers with the kernels.
//! Cost O(m n r); only for small matrices.
//!
//! Every function also accepts absolute values: run on `|S|`, `|A|`, `|B|`, it gives the sum of
//! absolute terms of each output entry, which bounds the rounding error of any summation order
//! (`|computed - exact| <= k eps * sum |terms|`); tests scale their tolerance by it.

use crate::dense::Dense;
use parbench_common::Csr;

fn dense_s(s: &Csr) -> Vec<f64> {
    s.to_dense()
}

/// `A B^T` in full (`m x n`, row-major).
fn abt(a: &Dense, b: &Dense) -> Vec<f64> {
    let (m, n, r) = (a.rows(), b.rows(), a.cols());
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0;
            for l in 0..r {
                acc += a.get(i, l) * b.get(j, l);
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// `S .* (A B^T)` as a dense `m x n` array (zero off the pattern of `S`).
pub fn sddmm_dense(s: &Csr, a: &Dense, b: &Dense) -> Vec<f64> {
    let sd = dense_s(s);
    let p = abt(a, b);
    sd.iter().zip(&p).map(|(x, y)| x * y).collect()
}

/// `R B` for `R` given as a dense `m x n` array.
pub fn spmm_a_dense(r: &[f64], m: usize, b: &Dense) -> Dense {
    let (n, w) = (b.rows(), b.cols());
    let mut out = Dense::zeros(m, w);
    for i in 0..m {
        for l in 0..w {
            let mut acc = 0.0;
            for j in 0..n {
                acc += r[i * n + j] * b.get(j, l);
            }
            out.row_mut(i)[l] = acc;
        }
    }
    out
}

/// `R^T A` for `R` given as a dense `m x n` array.
pub fn spmm_b_dense(r: &[f64], n: usize, a: &Dense) -> Dense {
    let (m, w) = (a.rows(), a.cols());
    let mut out = Dense::zeros(n, w);
    for j in 0..n {
        for l in 0..w {
            let mut acc = 0.0;
            for i in 0..m {
                acc += r[i * n + j] * a.get(i, l);
            }
            out.row_mut(j)[l] = acc;
        }
    }
    out
}

/// SDDMM: the values of `S .* (A B^T)` in the order of the nonzeros of `s`.
pub fn sddmm(s: &Csr, a: &Dense, b: &Dense) -> Vec<f64> {
    let full = sddmm_dense(s, a, b);
    let n = s.ncols();
    let mut out = Vec::with_capacity(s.nnz());
    for i in 0..s.nrows() {
        for &j in s.row(i).0 {
            out.push(full[i * n + j as usize]);
        }
    }
    out
}

/// SpMMA: `R B`.
pub fn spmm_a(r: &Csr, b: &Dense) -> Dense {
    spmm_a_dense(&r.to_dense(), r.nrows(), b)
}

/// SpMMB: `R^T A`.
pub fn spmm_b(r: &Csr, a: &Dense) -> Dense {
    spmm_b_dense(&r.to_dense(), r.ncols(), a)
}

/// FusedMMA: `(S .* (A B^T)) B`.
pub fn fusedmm_a(s: &Csr, a: &Dense, b: &Dense) -> Dense {
    spmm_a_dense(&sddmm_dense(s, a, b), s.nrows(), b)
}

/// FusedMMB: `(S .* (A B^T))^T A`.
pub fn fusedmm_b(s: &Csr, a: &Dense, b: &Dense) -> Dense {
    spmm_b_dense(&sddmm_dense(s, a, b), s.ncols(), a)
}

/// `|S|`: the same pattern with absolute values.
pub fn abs_csr(s: &Csr) -> Csr {
    // The pattern and finiteness of a valid matrix carry over.
    Csr::new(
        s.nrows(),
        s.ncols(),
        s.indptr().to_vec(),
        s.indices().to_vec(),
        s.values().iter().map(|x| x.abs()).collect(),
    )
    .expect("absolute values of a valid CSR")
}
