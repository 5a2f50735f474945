"""Sinkhorn-WMD peer: POT's ot.sinkhorn2, one document at a time (family `sinkhorn`).

What a user of POT (Python Optimal Transport) writes for one query against N documents: for
document j with words t (the nonzeros of column j of c) and weights b = c[t, j],

    M_j  = cdist(vecs[query], vecs[t])
    WMD_j = ot.sinkhorn2(a, b, M_j, reg=1/lambda, method="sinkhorn", numItermax=iters,
                         stopThr=tol or 0)        # = <T_j, M_j>, T_j the regularized plan

POT iterates otherwise than the paper (docs/peers.md): it starts from u = 1/vs and each
iteration sets v = b / (K^T u), then u = a / (K v), and forms the plan from that last (u, v),
so after a given number of iterations its plan meets the query's marginal a exactly, where the
paper's last step (a v-update) meets the document's marginal b. The two agree only at
convergence. Its `stopThr` is a different test, too: the norm of the violation of the b
marginal, checked every 10th iteration; with `tol` null we pass stopThr=0, so it runs exactly
`iters` iterations (it stops earlier only on numerical overflow, keeping the last good u, v).
With `tol` set we pass stopThr=tol, the nearest thing POT offers, not the same stop.

Timed (compute_s): the per-document cdist and sinkhorn2 calls, not the reading of the files.
Metric `iterations`: the most iterations POT ran on any document (its log's niter + 1).
`threads` only reaches its small BLAS calls; the documents run one after another.
Packages (pinned): POT 0.9.7.post1, numpy 2.4.6, scipy 1.17.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import numpy as np  # noqa: E402
import ot  # noqa: E402
from scipy.spatial.distance import cdist  # noqa: E402


def pot_wmd(vecs, sel, a, c, lam, iters, tol):
    query_vecs = vecs[sel]
    n_docs = c.shape[1]
    distances = np.empty(n_docs)
    iterations = np.zeros(n_docs, dtype=np.int64)
    for j in range(n_docs):
        lo, hi = c.indptr[j], c.indptr[j + 1]
        words, b = c.indices[lo:hi], c.data[lo:hi]
        m_j = cdist(query_vecs, vecs[words])
        loss, log = ot.sinkhorn2(a, b, m_j, 1.0 / lam, method="sinkhorn", numItermax=iters,
                                 stopThr=0.0 if tol is None else tol, log=True, warn=False)
        distances[j] = float(loss)
        iterations[j] = log["niter"] + 1
    return distances, iterations


def run(request):
    # POT's sinkhorn2 runs at least one iteration.
    peer.run_sinkhorn(request, pot_wmd, min_iters=1)


if __name__ == "__main__":
    peer.main(run, "sinkhorn")
