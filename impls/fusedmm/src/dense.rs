//! A dense row-major matrix: the `A` (m x r) and `B` (n x r) embeddings of FusedMM.
//!
//! Row-major because every kernel touches whole rows (one row of `A` or `B` per nonzero of `S`),
//! and `r` is small (16 to 512), so a row is a few cache lines read with unit stride.

use parbench_common::memory::HUGE_PAGE_MIN_BYTES;
use parbench_common::Rng;

/// A `rows x cols` matrix of `f64`, stored row by row.
#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

/// An empty vector with room for `len` values, none written yet, on 2 MB pages from 4 MB on
/// (transparent huge pages, where the kernel allows them): the kernels gather rows of these
/// matrices at random, and with 4 KB pages nearly every gather of a 16 MB matrix also misses
/// the TLB; FusedMMA at 16k rows and r = 128, one thread, took a median 0.113 s with 2 MB
/// pages against 0.143 s without over eight alternating runs on the AVX2 AMD EPYC kind. The
/// advice must come before the pages are first written, which is why the constructors fill
/// this vector rather than allocate one.
fn unwritten(len: usize) -> Vec<f64> {
    parbench_common::memory::unwritten(len)
}

impl Dense {
    /// The zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> Dense {
        let len = rows * cols;
        let data = if len * 8 >= HUGE_PAGE_MIN_BYTES {
            let mut data = unwritten(len);
            data.resize(len, 0.0);
            data
        } else {
            // Zeroed by the allocator, often for free: small matrices keep 4 KB pages.
            vec![0.0; len]
        };
        Dense { rows, cols, data }
    }

    /// Wraps row-major data; `None` when `data.len() != rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f64>) -> Option<Dense> {
        (data.len() == rows * cols).then_some(Dense { rows, cols, data })
    }

    /// Entries uniform in `[-1, 1)`, row `i` drawn from its own stream of `seed`, so the matrix
    /// does not depend on how it is generated in parallel or split into blocks.
    pub fn random(rows: usize, cols: usize, seed: u64) -> Dense {
        let mut data = unwritten(rows * cols);
        for i in 0..rows {
            let mut rng = Rng::stream(seed, i as u64);
            data.extend((0..cols).map(|_| 2.0 * rng.next_f64() - 1.0));
        }
        Dense { rows, cols, data }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// All entries, row-major.
    pub fn data(&self) -> &[f64] {
        &self.data
    }
    /// All entries, row-major, for writing.
    pub fn data_mut(&mut self) -> &mut [f64] {
        &mut self.data
    }
    /// The row-major entries, without copying.
    pub fn into_vec(self) -> Vec<f64> {
        self.data
    }
    /// Row `i` (`cols` values); panics when `i >= rows`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
    /// Row `i` for writing; panics when `i >= rows`.
    pub fn row_mut(&mut self, i: usize) -> &mut [f64] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }
    /// Entry `(i, j)`. Only the flat index `i cols + j` is bounds-checked, so a `j >= cols` reads
    /// the next row instead of panicking.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// A copy of rows `start..end`.
    pub fn row_block(&self, start: usize, end: usize) -> Dense {
        Dense {
            rows: end - start,
            cols: self.cols,
            data: self.data[start * self.cols..end * self.cols].to_vec(),
        }
    }

    /// A copy of the rows `rows` restricted to the columns `cols` (the column-split algorithms
    /// hold such blocks).
    pub fn block(&self, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>) -> Dense {
        let width = cols.len();
        let mut data = Vec::with_capacity(rows.len() * width);
        for i in rows.clone() {
            data.extend_from_slice(&self.row(i)[cols.clone()]);
        }
        Dense {
            rows: rows.len(),
            cols: width,
            data,
        }
    }

    /// Adds `other` (same shape) entry by entry.
    pub fn add_assign(&mut self, other: &Dense) {
        assert_eq!(
            (self.rows, self.cols),
            (other.rows, other.cols),
            "shapes of a sum"
        );
        for (x, y) in self.data.iter_mut().zip(&other.data) {
            *x += y;
        }
    }

    /// Stacks blocks with the same column count on top of each other.
    pub fn vstack(cols: usize, blocks: &[Dense]) -> Dense {
        let rows = blocks.iter().map(|b| b.rows).sum();
        let mut data = Vec::with_capacity(rows * cols);
        for b in blocks {
            debug_assert_eq!(b.cols, cols);
            data.extend_from_slice(&b.data);
        }
        Dense { rows, cols, data }
    }

    /// The matrix whose row `perm[i]` is row `i` of `self` (rows move with a permutation of the
    /// sparse matrix's rows or columns).
    pub fn permute_rows(&self, perm: &[u32]) -> Dense {
        assert_eq!(perm.len(), self.rows, "permutation length");
        let mut out = Dense::zeros(self.rows, self.cols);
        for (i, &to) in perm.iter().enumerate() {
            out.row_mut(to as usize).copy_from_slice(self.row(i));
        }
        out
    }

    /// Entry-wise absolute values (for error bounds in tests).
    pub fn abs(&self) -> Dense {
        Dense {
            rows: self.rows,
            cols: self.cols,
            data: self.data.iter().map(|x| x.abs()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Matrices past the 2 MB-page threshold (8 MB here) are built like small ones: zeros are
    /// zero and a random matrix's rows are those of the same rows drawn in a small one.
    #[test]
    fn large_matrices_are_built_like_small_ones() {
        const { assert!(1000 * 1024 * 8 >= HUGE_PAGE_MIN_BYTES) };
        let zeros = Dense::zeros(1000, 1024);
        assert_eq!(zeros.data().len(), 1000 * 1024);
        assert!(zeros.data().iter().all(|&x| x == 0.0));
        let large = Dense::random(1000, 1024, 7);
        let small = Dense::random(3, 1024, 7);
        for i in 0..3 {
            assert_eq!(large.row(i), small.row(i));
        }
        assert_eq!(large.data().len(), 1000 * 1024);
    }
}
