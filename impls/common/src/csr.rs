//! Compressed sparse row matrices.
//!
//! Column indices are `u32` (every matrix parbench handles has fewer than 2^32 columns) to halve
//! the index traffic of the memory-bound kernels; row pointers are `usize`.

use thiserror::Error;

/// Why a set of arrays is not a valid CSR matrix.
#[derive(Debug, Error, PartialEq)]
pub enum CsrError {
    /// The row pointer array does not have `nrows + 1` entries (also: a triplet's row is out of
    /// range).
    #[error("row pointer array has length {got}, expected nrows + 1 = {expected}")]
    IndptrLength {
        /// Length given (for a triplet, its row + 1).
        got: usize,
        /// `nrows + 1`.
        expected: usize,
    },
    /// The row pointers do not start at 0, decrease somewhere, or do not end at `nnz`.
    #[error("row pointers must start at 0, be non-decreasing and end at nnz = {nnz}; row {row} breaks this")]
    IndptrOrder {
        /// First row whose pointers break the order (0 when the first or last pointer is wrong).
        row: usize,
        /// Number of stored entries, `indices.len()`.
        nnz: usize,
    },
    /// `indices` and `values` differ in length.
    #[error("indices ({indices}) and values ({values}) have different lengths")]
    LengthMismatch {
        /// Length of `indices`.
        indices: usize,
        /// Length of `values`.
        values: usize,
    },
    /// A column index is not below `ncols`.
    #[error("row {row} has column index {col}, but the matrix has {ncols} columns")]
    ColumnOutOfRange {
        /// Row of the offending entry.
        row: usize,
        /// The out-of-range column index.
        col: u32,
        /// Number of columns of the matrix.
        ncols: usize,
    },
    /// A row's columns are not strictly increasing (a duplicate or an unsorted entry).
    #[error(
        "row {row} has column {col} twice or out of order (columns must be strictly increasing)"
    )]
    UnsortedRow {
        /// The row.
        row: usize,
        /// The first column not greater than the one before it.
        col: u32,
    },
    /// A stored value is NaN or infinite.
    #[error("entry ({row}, {col}) is not finite: {value}")]
    NotFinite {
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: u32,
        /// The value itself.
        value: f64,
    },
}

/// A sparse matrix in CSR form with sorted, unique column indices in every row.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr {
    nrows: usize,
    ncols: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    values: Vec<f64>,
}

impl Csr {
    /// Builds a matrix from its arrays, checking every CSR invariant.
    pub fn new(
        nrows: usize,
        ncols: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        values: Vec<f64>,
    ) -> Result<Csr, CsrError> {
        if indptr.len() != nrows + 1 {
            return Err(CsrError::IndptrLength {
                got: indptr.len(),
                expected: nrows + 1,
            });
        }
        if indices.len() != values.len() {
            return Err(CsrError::LengthMismatch {
                indices: indices.len(),
                values: values.len(),
            });
        }
        let nnz = indices.len();
        if indptr[0] != 0 || indptr[nrows] != nnz {
            return Err(CsrError::IndptrOrder { row: 0, nnz });
        }
        for row in 0..nrows {
            let (a, b) = (indptr[row], indptr[row + 1]);
            if b < a || b > nnz {
                return Err(CsrError::IndptrOrder { row, nnz });
            }
            for k in a..b {
                let col = indices[k];
                if col as usize >= ncols {
                    return Err(CsrError::ColumnOutOfRange { row, col, ncols });
                }
                if k > a && indices[k - 1] >= col {
                    return Err(CsrError::UnsortedRow { row, col });
                }
                if !values[k].is_finite() {
                    return Err(CsrError::NotFinite {
                        row,
                        col,
                        value: values[k],
                    });
                }
            }
        }
        Ok(Csr {
            nrows,
            ncols,
            indptr,
            indices,
            values,
        })
    }

    /// Builds a matrix from (row, col, value) triplets; duplicates are summed.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, f64)],
    ) -> Result<Csr, CsrError> {
        let mut counts = vec![0usize; nrows + 1];
        for &(r, c, _) in triplets {
            if r >= nrows {
                return Err(CsrError::IndptrLength {
                    got: r + 1,
                    expected: nrows + 1,
                });
            }
            if c >= ncols {
                return Err(CsrError::ColumnOutOfRange {
                    row: r,
                    col: c as u32,
                    ncols,
                });
            }
            counts[r + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut cols = vec![0u32; triplets.len()];
        let mut vals = vec![0f64; triplets.len()];
        for &(r, c, v) in triplets {
            cols[next[r]] = c as u32;
            vals[next[r]] = v;
            next[r] += 1;
        }
        // Sort each row and merge duplicates.
        let mut indptr = vec![0usize; nrows + 1];
        let mut indices = Vec::with_capacity(triplets.len());
        let mut values = Vec::with_capacity(triplets.len());
        let mut row_buf: Vec<(u32, f64)> = Vec::new();
        for r in 0..nrows {
            row_buf.clear();
            row_buf.extend((counts[r]..counts[r + 1]).map(|k| (cols[k], vals[k])));
            row_buf.sort_by_key(|&(c, _)| c);
            for &(c, v) in &row_buf {
                if indices.len() > indptr[r] && *indices.last().unwrap_or(&u32::MAX) == c {
                    if let Some(last) = values.last_mut() {
                        *last += v;
                    }
                } else {
                    indices.push(c);
                    values.push(v);
                }
            }
            indptr[r + 1] = indices.len();
        }
        Csr::new(nrows, ncols, indptr, indices, values)
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns (every column index is below it).
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Row pointers, `nrows + 1` of them: row `r` is `indptr[r]..indptr[r + 1]` of `indices` and
    /// `values`.
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }
    /// Column index of every stored entry, row by row, strictly increasing within a row.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    /// Value of every stored entry, aligned with [`Csr::indices`]; all finite.
    pub fn values(&self) -> &[f64] {
        &self.values
    }
    /// Column indices and values of one row.
    pub fn row(&self, r: usize) -> (&[u32], &[f64]) {
        let (a, b) = (self.indptr[r], self.indptr[r + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }

    /// The transpose, built by a counting sort (O(nnz + ncols)); rows of the result are sorted.
    pub fn transpose(&self) -> Csr {
        let mut indptr = vec![0usize; self.ncols + 1];
        for &c in &self.indices {
            indptr[c as usize + 1] += 1;
        }
        for i in 0..self.ncols {
            indptr[i + 1] += indptr[i];
        }
        let mut next = indptr.clone();
        let mut indices = vec![0u32; self.nnz()];
        let mut values = vec![0f64; self.nnz()];
        for r in 0..self.nrows {
            for k in self.indptr[r]..self.indptr[r + 1] {
                let c = self.indices[k] as usize;
                indices[next[c]] = r as u32;
                values[next[c]] = self.values[k];
                next[c] += 1;
            }
        }
        Csr {
            nrows: self.ncols,
            ncols: self.nrows,
            indptr,
            indices,
            values,
        }
    }

    /// Sum of every column (length ncols).
    pub fn column_sums(&self) -> Vec<f64> {
        let mut s = vec![0.0; self.ncols];
        for (&c, &v) in self.indices.iter().zip(&self.values) {
            s[c as usize] += v;
        }
        s
    }

    /// Dense row-major copy (for tests and small references).
    pub fn to_dense(&self) -> Vec<f64> {
        let mut d = vec![0.0; self.nrows * self.ncols];
        for r in 0..self.nrows {
            let (cols, vals) = self.row(r);
            for (&c, &v) in cols.iter().zip(vals) {
                d[r * self.ncols + c as usize] = v;
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triplets_sum_duplicates_and_transpose_round_trips() {
        let m = Csr::from_triplets(3, 4, &[(2, 1, 1.0), (0, 3, 2.0), (0, 0, 1.0), (2, 1, 0.5)])
            .unwrap();
        assert_eq!(m.nnz(), 3);
        assert_eq!(m.row(2), (&[1u32][..], &[1.5][..]));
        let t = m.transpose();
        assert_eq!(t.nrows(), 4);
        assert_eq!(t.row(1), (&[2u32][..], &[1.5][..]));
        assert_eq!(t.transpose(), m);
        assert_eq!(m.column_sums(), vec![1.0, 1.5, 0.0, 2.0]);
    }

    #[test]
    fn invalid_arrays_are_rejected() {
        assert!(matches!(
            Csr::new(2, 2, vec![0, 1], vec![0], vec![1.0]),
            Err(CsrError::IndptrLength { .. })
        ));
        assert!(matches!(
            Csr::new(1, 2, vec![0, 2], vec![1, 0], vec![1.0, 1.0]),
            Err(CsrError::UnsortedRow { .. })
        ));
        assert!(matches!(
            Csr::new(1, 2, vec![0, 1], vec![5], vec![1.0]),
            Err(CsrError::ColumnOutOfRange { .. })
        ));
        assert!(matches!(
            Csr::new(1, 2, vec![0, 1], vec![0], vec![f64::NAN]),
            Err(CsrError::NotFinite { .. })
        ));
    }
}
