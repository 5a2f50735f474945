//! The flop model: flops counted per phase and kernel, for the GFLOP/s the variants report.

/// Flops of the distance GEMM and the norms.
pub fn distance_flops(words: usize, vs: usize, dim: usize) -> f64 {
    (2 * words * vs * dim + 2 * words * dim + 3 * words * vs) as f64
}

/// Flops of the precompute (an exponential counted as one).
pub fn precompute_flops(words: usize, vs: usize) -> f64 {
    (4 * words * vs) as f64
}

/// Flops of one fused SDDMM + SpMM over `nnz` nonzeros: a dot, a division and an axpy each.
pub fn sddmm_spmm_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 1)) as f64
}

/// Flops of the final step over `nnz` nonzeros (two dots, a division, a product) and the sums.
pub fn final_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 2)) as f64
}

/// Flops of the `x`/`u` update of `docs` documents (change, copy, reciprocal).
pub fn update_flops(docs: usize, vs: usize) -> f64 {
    (docs * 4 * vs) as f64
}
