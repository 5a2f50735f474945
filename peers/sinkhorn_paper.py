"""Sinkhorn-WMD peer: the paper's own Python algorithm, dense (family `sinkhorn`).

This is the Python implementation that Tithi & Petrini ("A New Parallel Algorithm for
Sinkhorn Word-Movers Distance Using Fused SDDMM-SpMM", Figure 3 and Table I) profile and
then replace with their SDDMM_SpMM kernels. It is kept as written there:

    M = cdist(vecs[sel], vecs)             # vs x V: the query's words against ALL V words
    K = exp(-lambda M);  x = ones(vs, N) / vs
    loop: u = 1 / x
          v = c .multiply(1 / (K.T @ u))   # the dense V x N product, then masked by c
          x = (K / r) @ v                  # dense @ sparse
    u = 1 / x;  v as above;  WMD = sum_s u * ((K * M) @ v)

The line v = c.multiply(1 / (K.T @ u)) (91.9% of the time in the paper's profile) is what
makes it slow: a dense V x N product, its reciprocal and the mask, every iteration. The
product's BLAS call uses `threads` threads (OMP/OpenBLAS/MKL variables); the rest runs on one.

With `tol` set, each document stops on its own as docs/peers.md defines: after an iteration
a document whose max_s |x_new - x| / max_s x_new <= tol keeps that x and is no longer
updated (only the active documents' columns go through the loop).

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
from scipy.spatial.distance import cdist  # noqa: E402


def sinkhorn_wmd(vecs, sel, r, c, lam, iters, tol):
    """Distances (N,) and iterations per document (N,); c is V x N CSC."""
    M = cdist(vecs[sel], vecs).astype(np.float64)
    K = np.exp(-lam * M)
    K_over_r = (1.0 / r)[:, None] * K
    n_docs = c.shape[1]
    x = np.ones((len(r), n_docs)) / len(r)
    iterations = np.zeros(n_docs, dtype=np.int64)
    if tol is None:
        for _ in range(iters):
            u = 1.0 / x
            v = c.multiply(1.0 / (K.T @ u)).tocsc()
            x = K_over_r @ v
        iterations[:] = iters
    else:
        active = np.arange(n_docs)
        for _ in range(iters):
            if active.size == 0:
                break
            u = 1.0 / x[:, active]
            v = c[:, active].multiply(1.0 / (K.T @ u)).tocsc()
            x_new = K_over_r @ v
            change = np.abs(x_new - x[:, active]).max(axis=0) / x_new.max(axis=0)
            x[:, active] = x_new
            iterations[active] += 1
            active = active[~(change <= tol)]
    u = 1.0 / x
    v = c.multiply(1.0 / (K.T @ u)).tocsc()
    return np.asarray((u * ((K * M) @ v)).sum(axis=0)).ravel(), iterations


def run(request):
    peer.run_sinkhorn(request, sinkhorn_wmd)


if __name__ == "__main__":
    peer.main(run, "sinkhorn")
