"""Shared helpers for parbench's peer programs (protocol version 1, docs/peers.md).

A peer program starts with

    import os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import parbench_peer as peer
    peer.limit_threads()        # before numpy is imported
    import numpy as np

and ends with ``peer.main(run, FAMILY)``, where ``run(request)`` reads its input, times its
compute with a ``Timer``, writes its outputs (``write_lines``, ``write_mtx``, ``write_counts``:
each to a temporary file renamed into place) and last ``write_timing``. ``main`` turns any
exception into ``peer error: ...`` and the traceback on stderr, and exit status 1.

This module imports numpy and scipy only inside the functions that need them, so that
``limit_threads`` can set the thread variables before the BLAS library is loaded.
"""

import json
import math
import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager

PROTOCOL = 1
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class PeerError(Exception):
    """A problem with the request or the input that the peer reports and exits on."""


def limit_threads():
    """Sets OMP/OpenBLAS/MKL thread counts to the request's `threads`.

    Must run before numpy is imported. Reads sys.argv[1] cheaply and does nothing if it
    cannot: `load_request` then reports what is wrong with the request.
    """
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            threads = json.load(f)["threads"]
    except Exception:
        return
    if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
        for var in THREAD_VARS:
            os.environ[var] = str(threads)


class Request:
    """The parsed request.json. Relative paths are resolved against the directory holding
    request.json, which is assumed to be the work directory (the program's current
    directory, against which docs/peers.md resolves them)."""

    def __init__(self, path, family):
        self.path = os.path.abspath(path)
        self.base = os.path.dirname(self.path)
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
        except OSError as e:
            raise PeerError(f"cannot read request {path}: {e}") from e
        except ValueError as e:
            raise PeerError(f"request {path} is not valid JSON: {e}") from e
        if not isinstance(raw, dict):
            raise PeerError(f"request {path}: expected a JSON object")
        self.raw = raw
        if raw.get("protocol") != PROTOCOL:
            raise PeerError(f"request protocol {raw.get('protocol')!r}, "
                            f"this peer speaks {PROTOCOL}")
        if raw.get("family") != family:
            raise PeerError(f"request family {raw.get('family')!r}, "
                            f"this peer is for {family!r}")
        self.family = family
        self.peer = raw.get("peer")
        self.threads = self._int(raw.get("threads", 1), "threads", minimum=1)
        self.seed = raw.get("seed")
        self.params = raw.get("params") or {}
        self.inputs = raw.get("input") or {}
        if not isinstance(self.params, dict) or not isinstance(self.inputs, dict):
            raise PeerError("request: `params` and `input` must be objects")
        if not isinstance(raw.get("output"), str):
            raise PeerError("request: `output` (a directory) is missing")
        self.output = self.resolve(raw["output"])
        os.makedirs(self.output, exist_ok=True)

    def resolve(self, path):
        return path if os.path.isabs(path) else os.path.join(self.base, path)

    def input(self, role):
        """The resolved path of an input file, which must exist."""
        if not isinstance(self.inputs.get(role), str):
            raise PeerError(f"request: input file `{role}` is missing")
        path = self.resolve(self.inputs[role])
        if not os.path.isfile(path):
            raise PeerError(f"input `{role}`: no such file {path}")
        return path

    def param(self, name, kind=None, allow_null=False):
        """A parameter; kind is float, int or str (ints are accepted where floats are)."""
        if name not in self.params:
            raise PeerError(f"request: parameter `{name}` is missing")
        value = self.params[name]
        if value is None and allow_null:
            return None
        if kind is int:
            return self._int(value, name)
        if kind is float:
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value)):
                raise PeerError(f"parameter `{name}` must be a finite number, got {value!r}")
            return float(value)
        if kind is str and not isinstance(value, str):
            raise PeerError(f"parameter `{name}` must be a string, got {value!r}")
        return value

    def out(self, name):
        return os.path.join(self.output, name)

    @staticmethod
    def _int(value, name, minimum=0):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise PeerError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
        return value


def load_request(family):
    """Reads the request named on the command line and checks it is for `family`."""
    if len(sys.argv) != 2:
        raise PeerError(f"usage: {os.path.basename(sys.argv[0])} REQUEST_JSON")
    return Request(sys.argv[1], family)


class Timer:
    """Wall-clock time (time.perf_counter) of the compute phase and of named phases in it.

        timer = Timer()
        with timer.compute():
            with timer.phase("sddmm"): ...
        write_timing(out, timer.compute_s, timer.phases_s)
    """

    def __init__(self):
        self.compute_s = 0.0
        self.phases_s = {}

    @contextmanager
    def compute(self):
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            self.compute_s += time.perf_counter() - t0

    @contextmanager
    def phase(self, name):
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            self.phases_s[name] = self.phases_s.get(name, 0.0) + time.perf_counter() - t0


@contextmanager
def atomic_open(path, mode="w"):
    """Opens a temporary file next to `path`; on success it replaces `path` atomically."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    text = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
    try:
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates it 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_file(path, text):
    with atomic_open(path) as f:
        f.write(text)


def write_lines(path, lines):
    """Writes an iterable of lines (without newlines), one per line."""
    with atomic_open(path) as f:
        for line in lines:
            f.write(line)
            f.write("\n")


def write_mtx(path, matrix):
    """MatrixMarket, `general` symmetry, 17 significant digits (round-trips f64)."""
    import scipy.io

    with atomic_open(path, "wb") as f:
        scipy.io.mmwrite(f, matrix, precision=17, symmetry="general")


def read_mtx(path, role):
    """scipy.io.mmread, naming the input role in the error when the file is malformed."""
    import scipy.io

    try:
        return scipy.io.mmread(path)
    except Exception as e:
        raise PeerError(f"input `{role}` ({path}) is not a valid MatrixMarket file: {e}") from e


def _number(value, what):
    """A finite int or float (numpy scalars become Python numbers) for timing.json."""
    if hasattr(value, "item"):
        value = value.item()
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value)):
        raise PeerError(f"timing: {what} must be a finite number, got {value!r}")
    return value


def write_timing(output_dir, compute_s, phases_s=None, metrics=None):
    """Writes timing.json atomically; call it after every other output file is in place."""
    timing = {"compute_s": float(_number(compute_s, "compute_s"))}
    if phases_s:
        timing["phases_s"] = {k: float(_number(v, f"phase {k}")) for k, v in phases_s.items()}
    if metrics:
        timing["metrics"] = {k: _number(v, f"metric {k}") for k, v in metrics.items()}
    write_file(os.path.join(output_dir, "timing.json"), json.dumps(timing) + "\n")


# --- readers shared by the peers of one family -------------------------------------------


def read_embeddings(path):
    """word2vec text format -> (V, d) float64 array; word i is line i + 1."""
    import numpy as np

    with open(path, encoding="utf-8") as f:
        header = f.readline().split()
        try:
            n_words, dim = (int(h) for h in header)
        except ValueError as e:
            raise PeerError(f"embeddings {path}: the header must be `V d`, got {header!r}") from e
        vecs = np.empty((n_words, dim), dtype=np.float64)
        row = 0
        for n, line in enumerate(f, start=2):
            fields = line.split()
            if not fields:
                continue
            if row == n_words or len(fields) != dim + 1:
                raise PeerError(f"embeddings {path} line {n}: expected {n_words} lines of a "
                                f"word and {dim} numbers")
            try:
                vecs[row] = fields[1:]
            except ValueError as e:
                raise PeerError(f"embeddings {path} line {n}: {e}") from e
            row += 1
    if row != n_words:
        raise PeerError(f"embeddings {path}: the header says {n_words} words, found {row}")
    return vecs


def read_query(path, n_words):
    """CSV `word,weight` -> (word ids int64, weights float64)."""
    import numpy as np

    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines or [h.strip() for h in lines[0].split(",")] != ["word", "weight"]:
        raise PeerError(f"query {path}: the header must be `word,weight`")
    words, weights = [], []
    for n, line in enumerate(lines[1:], start=2):
        parts = line.split(",")
        try:
            if len(parts) != 2:
                raise ValueError("expected two fields")
            words.append(int(parts[0]))
            weights.append(float(parts[1]))
        except ValueError as e:
            raise PeerError(f"query {path} line {n}: {line!r}: {e}") from e
    words = np.array(words, dtype=np.int64)
    weights = np.array(weights, dtype=np.float64)
    if words.size == 0:
        raise PeerError(f"query {path}: no words")
    if words.min() < 0 or words.max() >= n_words or np.unique(words).size != words.size:
        raise PeerError(f"query {path}: words must be distinct ids in 0..{n_words - 1}")
    if not np.all(weights > 0):
        raise PeerError(f"query {path}: weights must be positive")
    return words, weights


def read_sinkhorn_input(request):
    """(vecs (V, d), query words, query weights, c as CSC (V, N)) of a sinkhorn request."""
    import numpy as np

    vecs = read_embeddings(request.input("embeddings"))
    words, weights = read_query(request.input("query"), vecs.shape[0])
    c = read_mtx(request.input("docs"), "docs").tocsc()
    if c.shape[0] != vecs.shape[0]:
        raise PeerError(f"docs has {c.shape[0]} rows, the embeddings {vecs.shape[0]} words")
    c.sum_duplicates()
    c.sort_indices()
    empty = np.flatnonzero(np.diff(c.indptr) == 0)
    if empty.size:
        raise PeerError(f"docs: document {empty[0]} (0-based) has no words; every column must "
                        f"be a normalized histogram ({empty.size} empty)")
    return vecs, words, weights, c


def sinkhorn_params(request):
    lam = request.param("lambda", float)
    iters = request.param("iters", int)
    tol = request.param("tol", float, allow_null=True)
    if lam <= 0:
        raise PeerError(f"parameter `lambda` must be positive, got {lam}")
    return lam, iters, tol


def write_distances(request, distances):
    write_lines(request.out("distances.csv"),
                ["distance"] + [repr(float(d)) for d in distances])


def run_sinkhorn(request, solve, min_iters=0):
    """The whole run of a Sinkhorn peer around its solver:
    ``solve(vecs, query_words, query_weights, c, lam, iters, tol) -> (distances, iterations)``,
    timed as the compute phase; the inputs read before, the distances and timing written after."""
    lam, iters, tol = sinkhorn_params(request)
    if iters < min_iters:
        raise PeerError(f"this peer needs `iters` >= {min_iters}, got {iters}")
    vecs, words, weights, c = read_sinkhorn_input(request)
    timer = Timer()
    with timer.compute():
        distances, iterations = solve(vecs, words, weights, c, lam, iters, tol)
    write_distances(request, distances)
    write_timing(request.output, timer.compute_s,
                 metrics={"iterations": int(iterations.max(initial=0))})


def read_docword(path):
    """UCI bag-of-words -> (D, W, doc ids, word ids, counts), ids 0-based, int64 arrays."""
    import warnings

    import numpy as np

    with open(path, encoding="utf-8") as f:
        try:
            n_docs, n_words, nnz = (int(f.readline()) for _ in range(3))
        except ValueError as e:
            raise PeerError(f"docword {path}: the header must be three lines D, W, NNZ") from e
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # loadtxt warns on an empty body
                triples = np.loadtxt(f, dtype=np.int64, ndmin=2)
        except ValueError as e:
            raise PeerError(f"docword {path}: expected `doc word count` lines: {e}") from e
    if triples.size == 0:
        triples = triples.reshape(0, 3)
    if n_docs < 0 or n_words < 0 or triples.shape != (nnz, 3):
        raise PeerError(f"docword {path}: the header says NNZ = {nnz}, found "
                        f"{triples.shape[0]} lines of {triples.shape[1]} numbers")
    docs, words, counts = triples[:, 0] - 1, triples[:, 1] - 1, triples[:, 2]
    if nnz and (docs.min() < 0 or docs.max() >= n_docs or words.min() < 0
                or words.max() >= n_words or counts.min() < 0):
        raise PeerError(f"docword {path}: a document or word number is out of range "
                        "or a count is negative")
    return n_docs, n_words, docs, words, counts


def lda_params(request):
    topics = request.param("topics", int)
    if topics < 1:
        raise PeerError("parameter `topics` must be at least 1")
    alpha = request.param("alpha", float)
    beta = request.param("beta", float)
    if alpha <= 0 or beta <= 0:
        raise PeerError("parameters `alpha` and `beta` must be positive")
    iters = request.param("iters", int)
    seed = request.param("seed", int) if "seed" in request.params else request.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise PeerError(f"the seed must be an integer >= 0, got {seed!r}")
    return topics, alpha, beta, iters, seed


def write_counts(path, counts):
    """A 2-D integer array as CSV lines without a header."""
    write_lines(path, (",".join(map(str, row)) for row in counts.tolist()))


def main(run, family):
    """Runs `run(request)`; any failure is reported on stderr and the exit status is 1."""
    try:
        run(load_request(family))
    except Exception as e:  # noqa: BLE001 - every failure must become a clear exit 1
        name = os.path.basename(sys.argv[0])
        print(f"peer error: {name}: {e}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        sys.exit(1)
