"""FusedMM peer: scipy's two-call sequence for the local kernels (family `fusedmm`).

What a scipy user writes for the kernels of docs/peers.md, S sparse m x n (CSR), A dense
m x r, B dense n x r:

    sddmm     R = S .* (A B^T) at the nonzeros of S only:
              vals = S.data * einsum("ij,ij->i", A[rows], B[cols])  (in chunks)
    spmma     S @ B
    spmmb     S.T @ A
    fusedmma  R @ B      (R: CSR with S's pattern and the SDDMM values)
    fusedmmb  R.T @ A

The fused kernels are an SDDMM call followed by an SpMM call with the intermediate R stored,
the unfused sequence that local kernel fusion (Bharadwaj, Buluc, Demmel, "Distributed-Memory
Sparse Kernels for Machine Learning") and the Sinkhorn-WMD paper's SDDMM_SpMM do away with.
Everything runs on one thread (scipy's sparse products and numpy's einsum use no BLAS
threads), whatever `threads` says.

Output result.mtx: sddmm as a `coordinate real general` matrix with S's pattern (explicit
zeros kept), the others as `array real general`, 17 significant digits.
Timed (compute_s): the kernel; phases `sddmm` and `spmm` for the fused kernels.
Packages (pinned): numpy 2.4.6, scipy 1.17.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

KERNELS = ("sddmm", "spmma", "spmmb", "fusedmma", "fusedmmb")
CHUNK_ELEMENTS = 1 << 20  # bound on each gathered temporary (8 MiB of f64)


def sddmm(s, a, b):
    """S .* (A B^T) on the pattern of S (CSR in, CSR out with the same structure)."""
    rows = np.repeat(np.arange(s.shape[0]), np.diff(s.indptr))
    cols = s.indices
    dots = np.empty(s.nnz)
    chunk = max(1, CHUNK_ELEMENTS // max(1, a.shape[1]))
    for start in range(0, s.nnz, chunk):
        end = start + chunk
        np.einsum("ij,ij->i", a[rows[start:end]], b[cols[start:end]], out=dots[start:end])
    return sp.csr_matrix((s.data * dots, s.indices, s.indptr), shape=s.shape)


def read_dense(request, role):
    matrix = peer.read_mtx(request.input(role), role)
    if sp.issparse(matrix):
        matrix = matrix.toarray()
    return np.ascontiguousarray(matrix, dtype=np.float64)


def run(request):
    kernel = request.param("kernel", str)
    if kernel not in KERNELS:
        raise peer.PeerError(f"unknown kernel {kernel!r}; expected one of {', '.join(KERNELS)}")
    s = peer.read_mtx(request.input("s"), "s")
    if not sp.issparse(s):
        raise peer.PeerError("input `s` must be a coordinate (sparse) MatrixMarket matrix")
    s = sp.csr_matrix(s, dtype=np.float64)
    s.sum_duplicates()  # also sorts the column indices
    a, b = read_dense(request, "a"), read_dense(request, "b")
    (m, n), r = s.shape, a.shape[1]
    if a.shape[0] != m or b.shape != (n, r):
        raise peer.PeerError(f"shapes do not fit: S is {m} x {n}, A is {a.shape[0]} x "
                             f"{a.shape[1]}, B is {b.shape[0]} x {b.shape[1]}")

    timer = peer.Timer()
    with timer.compute():
        if kernel == "sddmm":
            result = sddmm(s, a, b)
        elif kernel == "spmma":
            result = s @ b
        elif kernel == "spmmb":
            result = s.T @ a
        else:
            with timer.phase("sddmm"):
                rs = sddmm(s, a, b)
            with timer.phase("spmm"):
                result = rs @ b if kernel == "fusedmma" else rs.T @ a
    peer.write_mtx(request.out("result.mtx"), result if kernel == "sddmm" else np.asarray(result))
    peer.write_timing(request.output, timer.compute_s, timer.phases_s or None)


if __name__ == "__main__":
    peer.main(run, "fusedmm")
