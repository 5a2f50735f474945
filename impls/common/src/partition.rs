//! The nnz-balanced ("2D") split of a CSR matrix.
//!
//! Splitting rows evenly leaves threads idle when row lengths vary (Zipf-distributed documents do).
//! Instead every part gets the same number of nonzeros, `nnz * t / parts` for part `t`, and finds the
//! row that holds its first nonzero by a binary search on the row pointers (as in the Sinkhorn-WMD
//! paper, Section III): O(log nrows) per part, no sequential pre-pass.

/// Where one part of an nnz-balanced split begins: the nonzero index and the row holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPoint {
    /// First nonzero of the part (index into the CSR's indices/values).
    pub nnz: usize,
    /// Row that contains that nonzero (the last row whose pointer is <= `nnz`).
    pub row: usize,
}

/// The row containing nonzero `k`, for `indptr` of a CSR: the largest `r` with `indptr[r] <= k`
/// and `indptr[r + 1] > k` (empty rows are skipped). Returns `nrows` for `k == nnz`.
pub fn row_of_nonzero(indptr: &[usize], k: usize) -> usize {
    let nrows = indptr.len() - 1;
    if k >= indptr[nrows] {
        return nrows;
    }
    // partition_point gives the first r with indptr[r] > k; the row is the one before it.
    indptr.partition_point(|&p| p <= k) - 1
}

/// Splits the nonzeros of a CSR with row pointers `indptr` into `parts` contiguous ranges of equal
/// size (within one). Returns `parts + 1` split points; part `t` covers nonzeros
/// `points[t].nnz .. points[t + 1].nnz`, starting inside row `points[t].row`.
pub fn nnz_balanced(indptr: &[usize], parts: usize) -> Vec<SplitPoint> {
    let parts = parts.max(1);
    let nnz = *indptr.last().unwrap_or(&0);
    (0..=parts)
        .map(|t| {
            let k = (nnz as u128 * t as u128 / parts as u128) as usize;
            SplitPoint {
                nnz: k,
                row: row_of_nonzero(indptr, k),
            }
        })
        .collect()
}

/// Splits whole rows into `parts` contiguous ranges with about equal nonzeros (no row is cut).
/// Returns `parts + 1` row boundaries. Used where one owner per row avoids write conflicts.
pub fn rows_balanced(indptr: &[usize], parts: usize) -> Vec<usize> {
    let parts = parts.max(1);
    let nrows = indptr.len() - 1;
    let nnz = indptr[nrows];
    let mut bounds: Vec<usize> = (0..=parts)
        .map(|t| {
            let k = (nnz as u128 * t as u128 / parts as u128) as usize;
            indptr.partition_point(|&p| p < k).min(nrows)
        })
        .collect();
    bounds[0] = 0;
    bounds[parts] = nrows;
    for t in 1..=parts {
        bounds[t] = bounds[t].max(bounds[t - 1]);
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_of_nonzero_skips_empty_rows() {
        // rows: 0 has 2, 1 empty, 2 has 1, 3 empty, 4 has 3
        let indptr = [0, 2, 2, 3, 3, 6];
        let rows: Vec<usize> = (0..=6).map(|k| row_of_nonzero(&indptr, k)).collect();
        assert_eq!(rows, vec![0, 0, 2, 4, 4, 4, 5]);
    }

    #[test]
    fn parts_cover_all_nonzeros_evenly() {
        let indptr = [0, 2, 2, 3, 3, 6, 10];
        for parts in 1..=12 {
            let pts = nnz_balanced(&indptr, parts);
            assert_eq!(pts.len(), parts + 1);
            assert_eq!(pts[0].nnz, 0);
            assert_eq!(pts[parts].nnz, 10);
            for w in pts.windows(2) {
                let size = w[1].nnz - w[0].nnz;
                assert!(
                    size == 10 / parts || size == 10 / parts + 1,
                    "parts {parts} size {size}"
                );
                if w[0].nnz < 10 {
                    assert!(indptr[w[0].row] <= w[0].nnz && w[0].nnz < indptr[w[0].row + 1]);
                }
            }
        }
    }

    #[test]
    fn row_split_covers_rows_in_order() {
        let indptr = [0, 5, 5, 6, 7, 20];
        for parts in 1..=7 {
            let b = rows_balanced(&indptr, parts);
            assert_eq!(b[0], 0);
            assert_eq!(b[parts], 5);
            assert!(b.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
