"""Sinkhorn-WMD peer: the paper's algorithm computed only at the nonzeros of c, in numpy/scipy.

The same iteration as sinkhorn_paper.py (Tithi & Petrini, Figure 3), with the paper's
algorithmic change (Section III-B4, Listings 2-3, Figure 4) written with vectorized
numpy/scipy instead of fused C++ kernels:

- M and K only for the U words that occur in some document (cdist of the query's vectors
  against those words), not for all V words;
- SDDMM: (K^T u)[i, j] = sum_s K[s, i] u[s, j] only for the nonzeros (i, j) of c (gathered
  rows and a row-wise dot product, in chunks that bound the temporaries), then v at those
  nonzeros: v = c / (K^T u);
- SpMM: x = diag(1/r) K v with v sparse, as x^T = v^T (K/r)^T, a scipy CSR times dense
  product (v^T in CSR is c's CSC structure with v's values);
- WMD_j = sum over the nonzeros (i, j) of v[i, j] * sum_s u[s, j] K[s, i] M[s, i] (a second
  SDDMM, summed per document).

The two kernels are separate calls, not fused, and run on one thread (scipy's sparse
products and numpy's einsum do not use BLAS threads), whatever `threads` says.

With `tol` set, each document stops on its own as docs/peers.md defines: after an iteration
a document whose max_s |x_new - x| / max_s x_new <= tol keeps that x and is no longer
updated (the nonzeros of the still-active documents are re-selected when one stops).

Timed (compute_s): M, K, the loop and the distances; not the reading of the files.
Metric `iterations`: the most iterations any document ran.
Packages (pinned): numpy 2.4.6, scipy 1.17.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.spatial.distance import cdist  # noqa: E402

CHUNK_ELEMENTS = 1 << 20  # bound on each gathered temporary (8 MiB of f64)


class Pattern:
    """The nonzeros of some documents' columns of c (U x n CSC, local word ids)."""

    def __init__(self, c_cols):
        self.n_docs = c_cols.shape[1]
        self.indptr = c_cols.indptr
        self.rows = c_cols.indices
        self.data = c_cols.data
        self.cols = np.repeat(np.arange(self.n_docs), np.diff(self.indptr))


def sddmm(at, bt, rows, cols):
    """out[k] = at[rows[k]] . bt[cols[k]] (row-major operands, one row per word/document)."""
    out = np.empty(len(rows))
    chunk = max(1, CHUNK_ELEMENTS // max(1, at.shape[1]))
    for start in range(0, len(rows), chunk):
        end = start + chunk
        np.einsum("ks,ks->k", at[rows[start:end]], bt[cols[start:end]], out=out[start:end])
    return out


def step(pattern, kt, krt, ut):
    """One iteration from u^T (n x vs): v = c / SDDMM(K^T u), then x^T = v^T (K/r)^T."""
    v = pattern.data / sddmm(kt, ut, pattern.rows, pattern.cols)
    vt = sp.csr_matrix((v, pattern.rows, pattern.indptr), shape=(pattern.n_docs, kt.shape[0]))
    return vt @ krt


def sinkhorn_wmd(vecs, sel, r, c, lam, iters, tol):
    """Distances (N,) and iterations per document (N,); c is V x N CSC, sorted, no duplicates."""
    n_docs = c.shape[1]
    used = np.unique(c.indices)
    c_local = sp.csc_matrix((c.data, np.searchsorted(used, c.indices), c.indptr),
                            shape=(len(used), n_docs))
    M = cdist(vecs[sel], vecs[used]).astype(np.float64)  # vs x U
    K = np.exp(-lam * M)
    kt = np.ascontiguousarray(K.T)  # U x vs: one row per word
    krt = np.ascontiguousarray((K / r[:, None]).T)
    kmt = np.ascontiguousarray((K * M).T)

    full = Pattern(c_local)
    xt = np.full((n_docs, len(r)), 1.0 / len(r))  # x^T: one row per document
    iterations = np.zeros(n_docs, dtype=np.int64)
    if tol is None:
        for _ in range(iters):
            xt = step(full, kt, krt, 1.0 / xt)
        iterations[:] = iters
    else:
        active, pattern = np.arange(n_docs), full
        for _ in range(iters):
            if active.size == 0:
                break
            x_new = step(pattern, kt, krt, 1.0 / xt[active])
            change = np.abs(x_new - xt[active]).max(axis=1) / x_new.max(axis=1)
            xt[active] = x_new
            iterations[active] += 1
            keep = ~(change <= tol)
            if not keep.all():
                active = active[keep]
                pattern = Pattern(c_local[:, active])

    ut = 1.0 / xt
    v = full.data / sddmm(kt, ut, full.rows, full.cols)
    per_nonzero = v * sddmm(kmt, ut, full.rows, full.cols)
    return np.bincount(full.cols, weights=per_nonzero, minlength=n_docs), iterations


def run(request):
    peer.run_sinkhorn(request, sinkhorn_wmd)


if __name__ == "__main__":
    peer.main(run, "sinkhorn")
