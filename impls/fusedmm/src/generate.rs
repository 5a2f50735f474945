//! Seeded sparse matrices for the experiments (paper Section VI) and the random permutation the
//! paper applies for load balance.
//!
//! - [`erdos_renyi`]: every row has exactly `per_row` distinct columns drawn uniformly (Floyd's
//!   sampling, O(per_row) per row), as the paper's weak-scaling matrices have a fixed number of
//!   nonzeros per row. Values uniform in (0, 1]. Each row has its own stream of the seed, so the
//!   matrix does not depend on the thread count.
//! - [`rmat`]: R-MAT (Chakrabarti, Zhan, Faloutsos 2004), `2^scale` vertices and
//!   `edge_factor * 2^scale` edges, each edge choosing one of four quadrants per level with
//!   probabilities `(a, b, c, d)`; duplicate edges are merged (their values summed). Power-law
//!   degrees, so nnz-balanced partitions matter. Sequential, one stream per edge block.
//! - [`circulant`]: `S_ij != 0` iff `i + j` is a multiple of `cols / per_row`, a pattern whose
//!   nonzeros split evenly over every block, so the cost model of the algorithms that move
//!   nonzeros is exact on it. Values uniform in (0, 1].
//! - [`random_permutation`] and [`permute`]: Fisher-Yates from a seed; `permute` moves entry
//!   `(i, j)` to `(row_perm[i], col_perm[j])`.

use parbench_common::{Csr, CsrError, Par, Rng};
use rayon::prelude::*;
use std::collections::HashSet;
use thiserror::Error;

/// Why a generator cannot produce the requested matrix.
#[derive(Debug, Error, PartialEq)]
pub enum GenerateError {
    /// Erdős-Rényi with more distinct nonzeros per row than columns.
    #[error(
        "{per_row} distinct nonzeros per row do not fit in {cols} columns; use at most {cols}"
    )]
    TooManyPerRow {
        /// Nonzeros per row asked for.
        per_row: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// R-MAT quadrant probabilities that are negative or sum to more than 1 (`d = 1 - a - b - c`).
    #[error("R-MAT probabilities a={a}, b={b}, c={c} must be non-negative with a + b + c <= 1")]
    BadProbabilities {
        /// Probability of the top-left quadrant.
        a: f64,
        /// Probability of the top-right quadrant.
        b: f64,
        /// Probability of the bottom-left quadrant.
        c: f64,
    },
    /// R-MAT scale above 31 (the scale is carried).
    #[error("R-MAT scale {0} is too large: at most 31 (column indices are 32-bit)")]
    ScaleTooLarge(u32),
    /// Dimensions beyond `u32` indices.
    #[error("dimensions {rows} x {cols} exceed 32-bit indices")]
    TooLarge {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// A circulant pattern whose nonzeros per row do not divide the columns.
    #[error("the circulant generator needs nnz_per_row to divide cols ({per_row} does not divide {cols})")]
    CirculantPeriod {
        /// Nonzeros per row asked for.
        per_row: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// The generated triplets did not form a valid CSR.
    #[error(transparent)]
    Csr(#[from] CsrError),
}

/// An `rows x cols` matrix with exactly `per_row` distinct uniformly random columns in every row.
pub fn erdos_renyi(
    rows: usize,
    cols: usize,
    per_row: usize,
    seed: u64,
    par: Par,
) -> Result<Csr, GenerateError> {
    if per_row > cols {
        return Err(GenerateError::TooManyPerRow { per_row, cols });
    }
    if rows > u32::MAX as usize || cols > u32::MAX as usize {
        return Err(GenerateError::TooLarge { rows, cols });
    }
    let row_of = |i: usize| -> Vec<(u32, f64)> {
        let mut rng = Rng::stream(seed, i as u64);
        // Floyd's algorithm: a uniform `per_row`-subset of 0..cols in per_row draws.
        let mut chosen = HashSet::with_capacity(per_row);
        for j in cols - per_row..cols {
            let t = rng.below(j as u64 + 1) as usize;
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        let mut row: Vec<u32> = chosen.into_iter().map(|c| c as u32).collect();
        row.sort_unstable();
        row.into_iter().map(|c| (c, 1.0 - rng.next_f64())).collect()
    };
    let rows_data: Vec<Vec<(u32, f64)>> = match par {
        Par::Seq => (0..rows).map(row_of).collect(),
        Par::Rayon(_) => par.install(|| (0..rows).into_par_iter().map(row_of).collect()),
    };
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0);
    let mut indices = Vec::with_capacity(rows * per_row);
    let mut values = Vec::with_capacity(rows * per_row);
    for row in rows_data {
        for (c, v) in row {
            indices.push(c);
            values.push(v);
        }
        indptr.push(indices.len());
    }
    Ok(Csr::new(rows, cols, indptr, indices, values)?)
}

/// R-MAT parameters; `d = 1 - a - b - c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmatSpec {
    /// `2^scale` rows and columns.
    pub scale: u32,
    /// Edges drawn per vertex (before duplicates are merged).
    pub edge_factor: usize,
    /// Probability of the top-left quadrant at every level.
    pub a: f64,
    /// Probability of the top-right quadrant.
    pub b: f64,
    /// Probability of the bottom-left quadrant; the bottom-right one gets `1 - a - b - c`.
    pub c: f64,
    /// Seed: a spec and seed give the same matrix, bit for bit.
    pub seed: u64,
}

impl RmatSpec {
    /// The Graph500 probabilities (0.57, 0.19, 0.19, 0.05).
    pub fn new(scale: u32, edge_factor: usize, seed: u64) -> RmatSpec {
        RmatSpec {
            scale,
            edge_factor,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            seed,
        }
    }
}

/// Edges per independently seeded stream of the R-MAT generator.
const RMAT_BLOCK: usize = 4096;

/// An R-MAT matrix: power-law rows and columns, duplicates merged.
pub fn rmat(spec: &RmatSpec) -> Result<Csr, GenerateError> {
    let RmatSpec { a, b, c, .. } = *spec;
    if !(a >= 0.0 && b >= 0.0 && c >= 0.0 && a + b + c <= 1.0) {
        return Err(GenerateError::BadProbabilities { a, b, c });
    }
    if spec.scale > 31 {
        return Err(GenerateError::ScaleTooLarge(spec.scale));
    }
    let n = 1usize << spec.scale;
    let edges = n * spec.edge_factor;
    let mut triplets = Vec::with_capacity(edges);
    for block in 0..edges.div_ceil(RMAT_BLOCK) {
        let mut rng = Rng::stream(spec.seed, block as u64);
        for _ in block * RMAT_BLOCK..((block + 1) * RMAT_BLOCK).min(edges) {
            let (mut i, mut j) = (0usize, 0usize);
            for level in 0..spec.scale {
                let u = rng.next_f64();
                let bit = 1usize << (spec.scale - 1 - level);
                // Quadrants: a top-left, b top-right, c bottom-left, d bottom-right.
                let (down, right) = if u < a {
                    (0, 0)
                } else if u < a + b {
                    (0, 1)
                } else if u < a + b + c {
                    (1, 0)
                } else {
                    (1, 1)
                };
                i |= down * bit;
                j |= right * bit;
            }
            triplets.push((i, j, 1.0 - rng.next_f64()));
        }
    }
    Ok(Csr::from_triplets(n, n, &triplets)?)
}

/// The period of the circulant pattern with `per_row` nonzeros in each of `cols` columns,
/// `cols / per_row`; an error unless `per_row` is positive and divides `cols`.
pub fn circulant_period(cols: usize, per_row: usize) -> Result<usize, GenerateError> {
    if per_row == 0 || !cols.is_multiple_of(per_row) {
        return Err(GenerateError::CirculantPeriod { per_row, cols });
    }
    Ok(cols / per_row)
}

/// A circulant pattern: entry `(i, j)` present iff `(i + j) % period == 0` with
/// `period = cols / per_row` ([`circulant_period`]), values uniform in `(0, 1]` from the seed.
/// Every row has `per_row` nonzeros, and any block whose columns are a contiguous range of a
/// multiple of `period` columns holds exactly one nonzero a row per period, so the algorithms
/// that move nonzeros send the cost model's average exactly. O(rows per_row), sequential.
pub fn circulant(
    rows: usize,
    cols: usize,
    per_row: usize,
    seed: u64,
) -> Result<Csr, GenerateError> {
    let period = circulant_period(cols, per_row)?;
    if rows > u32::MAX as usize || cols > u32::MAX as usize {
        return Err(GenerateError::TooLarge { rows, cols });
    }
    let mut rng = Rng::new(seed);
    let mut triplets = Vec::with_capacity(rows.saturating_mul(per_row));
    for i in 0..rows {
        let first = (period - i % period) % period;
        for j in (first..cols).step_by(period) {
            triplets.push((i, j, 1.0 - rng.next_f64()));
        }
    }
    Ok(Csr::from_triplets(rows, cols, &triplets)?)
}

/// A uniformly random permutation of `0..n` (Fisher-Yates), as `u32` targets.
pub fn random_permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// `S` with entry `(i, j)` moved to `(row_perm[i], col_perm[j])`.
pub fn permute(s: &Csr, row_perm: &[u32], col_perm: &[u32]) -> Result<Csr, CsrError> {
    assert_eq!(row_perm.len(), s.nrows(), "row permutation length");
    assert_eq!(col_perm.len(), s.ncols(), "column permutation length");
    let mut t = Vec::with_capacity(s.nnz());
    for (i, &to_row) in row_perm.iter().enumerate() {
        let (cols, vals) = s.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            t.push((to_row as usize, col_perm[j as usize] as usize, v));
        }
    }
    Csr::from_triplets(s.nrows(), s.ncols(), &t)
}
