"""Tests of the peer programs against the protocol of docs/peers.md.

Run with the peers' virtual environment:  python peers/test_peers.py
Each test writes a tiny input in the protocol's files into a temporary work directory, runs the
program as parbench does (work directory as cwd, the request's path as the only argument) and
checks its outputs against references computed here from the definitions in docs/peers.md.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import scipy.io
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))


def program(name):
    return os.path.join(HERE, name)


class WorkDir:
    """A temporary work directory holding input/ files and request.json files."""

    def __init__(self, test):
        self._tmp = tempfile.TemporaryDirectory(prefix="parbench-peer-test-")
        test.addCleanup(self._tmp.cleanup)
        self.path = self._tmp.name
        os.makedirs(os.path.join(self.path, "input"))
        self.runs = 0

    def file(self, name):
        return os.path.join(self.path, name)

    def run(self, prog, family, params, inputs, threads=1, seed=42):
        """Writes a request, runs `prog`; returns (completed process, output dir)."""
        self.runs += 1
        output = f"output-{self.runs}"
        os.makedirs(self.file(output))
        request = {"protocol": 1, "family": family, "peer": os.path.basename(prog),
                   "threads": threads, "seed": seed, "params": params, "input": inputs,
                   "output": output}
        request_path = self.file(f"request-{self.runs}.json")
        with open(request_path, "w") as f:
            json.dump(request, f)
        done = subprocess.run([sys.executable, program(prog), request_path], cwd=self.path,
                              capture_output=True, text=True, timeout=300)
        return done, self.file(output)


def timing_of(test, done, out_dir):
    test.assertEqual(done.returncode, 0, f"peer failed:\n{done.stderr}")
    with open(os.path.join(out_dir, "timing.json")) as f:
        timing = json.load(f)
    test.assertGreater(timing["compute_s"], 0)
    leftovers = [n for n in os.listdir(out_dir) if n.startswith(".tmp-")]
    test.assertEqual(leftovers, [], "temporary files left in the output directory")
    return timing


def assert_fails(test, done, out_dir):
    test.assertNotEqual(done.returncode, 0)
    test.assertIn("peer error", done.stderr)
    test.assertFalse(os.path.exists(os.path.join(out_dir, "timing.json")))


# --- sinkhorn -------------------------------------------------------------------------------

def make_sinkhorn_input(work, n_words=50, dim=8, n_docs=7, query_size=5, seed=1):
    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n_words, dim)) / math.sqrt(dim)
    with open(work.file("input/embeddings.txt"), "w") as f:
        f.write(f"{n_words} {dim}\n")
        for i, row in enumerate(vecs.tolist()):
            f.write(f"w{i} " + " ".join(repr(v) for v in row) + "\n")
    q_words = rng.choice(n_words, size=query_size, replace=False)
    q_weights = rng.random(query_size) + 0.1
    q_weights /= q_weights.sum()
    with open(work.file("input/query.csv"), "w") as f:
        f.write("word,weight\n")
        for w, x in zip(q_words.tolist(), q_weights.tolist()):
            f.write(f"{w},{x!r}\n")
    docs, rows, cols, vals = [], [], [], []
    for j in range(n_docs):
        words = np.sort(rng.choice(n_words, size=rng.integers(3, 9), replace=False))
        weights = rng.random(len(words)) + 0.1
        weights /= weights.sum()
        docs.append((words.tolist(), weights.tolist()))
        rows += words.tolist()
        cols += [j] * len(words)
        vals += weights.tolist()
    c = sp.coo_matrix((vals, (rows, cols)), shape=(n_words, n_docs))
    scipy.io.mmwrite(work.file("input/docs.mtx"), c, precision=17, symmetry="general")
    inputs = {"embeddings": "input/embeddings.txt", "query": "input/query.csv",
              "docs": "input/docs.mtx"}
    return vecs.tolist(), q_words.tolist(), q_weights.tolist(), docs, inputs


def reference_wmd(vecs, q_words, r, docs, lam, iters, tol):
    """docs/peers.md's iteration, one document at a time, in plain Python."""
    distances, iterations = [], []
    for words, b in docs:
        M = [[math.sqrt(sum((p - q) ** 2 for p, q in zip(vecs[s], vecs[i]))) for i in words]
             for s in q_words]
        K = [[math.exp(-lam * m) for m in row] for row in M]
        vs, n = len(q_words), len(words)

        def v_of(u):
            return [b[i] / sum(K[s][i] * u[s] for s in range(vs)) for i in range(n)]

        x = [1.0 / vs] * vs
        done = 0
        for _ in range(iters):
            v = v_of([1.0 / xs for xs in x])
            x_new = [sum(K[s][i] * v[i] for i in range(n)) / r[s] for s in range(vs)]
            change = max(abs(a - c) for a, c in zip(x_new, x)) / max(x_new)
            x, done = x_new, done + 1
            if tol is not None and change <= tol:
                break
        u = [1.0 / xs for xs in x]
        v = v_of(u)
        distances.append(sum(u[s] * sum(K[s][i] * M[s][i] * v[i] for i in range(n))
                             for s in range(vs)))
        iterations.append(done)
    return distances, iterations


def read_distances(out_dir):
    with open(os.path.join(out_dir, "distances.csv")) as f:
        lines = f.read().splitlines()
    assert lines[0] == "distance", lines[0]
    return [float(x) for x in lines[1:]]


class SinkhornTest(unittest.TestCase):
    def setUp(self):
        self.work = WorkDir(self)
        self.vecs, self.q_words, self.r, self.docs, self.inputs = make_sinkhorn_input(self.work)

    def check_against_reference(self, prog, lam, iters, tol, rtol):
        params = {"lambda": lam, "iters": iters, "tol": tol}
        done, out = self.work.run(prog, "sinkhorn", params, self.inputs)
        timing = timing_of(self, done, out)
        got = read_distances(out)
        want, iterations = reference_wmd(self.vecs, self.q_words, self.r, self.docs,
                                         lam, iters, tol)
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertLessEqual(abs(g - w), rtol * abs(w), f"{prog}: {got} vs {want}")
        return timing, iterations

    def test_paper_and_numpy_sparse_match_the_definition(self):
        for prog in ("sinkhorn_paper.py", "sinkhorn_numpy_sparse.py"):
            with self.subTest(prog=prog):
                timing, _ = self.check_against_reference(prog, 3.0, 15, None, 1e-12)
                self.assertEqual(timing["metrics"]["iterations"], 15)

    def test_per_document_tolerance(self):
        _, iterations = reference_wmd(self.vecs, self.q_words, self.r, self.docs, 3.0, 200, 1e-6)
        self.assertGreater(len(set(iterations)), 1, "documents should stop at different times")
        for prog in ("sinkhorn_paper.py", "sinkhorn_numpy_sparse.py"):
            with self.subTest(prog=prog):
                timing, want_its = self.check_against_reference(prog, 3.0, 200, 1e-6, 1e-12)
                self.assertEqual(timing["metrics"]["iterations"], max(want_its))

    def test_pot_agrees_at_convergence(self):
        timing, _ = self.check_against_reference("sinkhorn_pot.py", 3.0, 2000, None, 1e-6)
        self.assertEqual(timing["metrics"]["iterations"], 2000)

    def test_malformed_inputs_fail(self):
        with open(self.work.file("input/bad.mtx"), "w") as f:
            f.write("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1\n")
        bad_docs = dict(self.inputs, docs="input/bad.mtx")
        with open(self.work.file("input/short.txt"), "w") as f:
            f.write("50 8\nw0 1 2 3\n")
        bad_vecs = dict(self.inputs, embeddings="input/short.txt")
        missing = dict(self.inputs, query="input/nothing.csv")
        params = {"lambda": 1.0, "iters": 5, "tol": None}
        for prog, inputs in (("sinkhorn_paper.py", bad_docs),
                             ("sinkhorn_numpy_sparse.py", bad_vecs),
                             ("sinkhorn_pot.py", missing)):
            with self.subTest(prog=prog):
                assert_fails(self, *self.work.run(prog, "sinkhorn", params, inputs))
        with self.subTest("missing parameter"):
            assert_fails(self, *self.work.run("sinkhorn_paper.py", "sinkhorn",
                                              {"lambda": 1.0, "tol": None}, self.inputs))
        with self.subTest("wrong family"):
            assert_fails(self, *self.work.run("sinkhorn_paper.py", "lda", params, self.inputs))


# --- fusedmm --------------------------------------------------------------------------------

class FusedMMTest(unittest.TestCase):
    def setUp(self):
        self.work = WorkDir(self)
        rng = np.random.default_rng(2)
        m, n, r = 30, 20, 4
        rows, cols = [], []
        for i in range(m):
            if i == 7:
                continue  # an empty row
            picked = rng.choice(n, size=4, replace=False)
            rows += [i] * 4
            cols += picked.tolist()
        self.s = sp.coo_matrix((rng.normal(size=len(rows)), (rows, cols)), shape=(m, n))
        self.a = rng.normal(size=(m, r))
        self.b = rng.normal(size=(n, r))
        for name, mat in (("s", self.s), ("a", self.a), ("b", self.b)):
            scipy.io.mmwrite(self.work.file(f"input/{name}.mtx"), mat, precision=17,
                             symmetry="general")
        self.inputs = {"s": "input/s.mtx", "a": "input/a.mtx", "b": "input/b.mtx"}

    def test_kernels_match_dense_reference(self):
        s = self.s.toarray()
        r_dense = s * (self.a @ self.b.T)
        expected = {"sddmm": r_dense, "spmma": s @ self.b, "spmmb": s.T @ self.a,
                    "fusedmma": r_dense @ self.b, "fusedmmb": r_dense.T @ self.a}
        for kernel, want in expected.items():
            with self.subTest(kernel=kernel):
                done, out = self.work.run("fusedmm_scipy.py", "fusedmm", {"kernel": kernel},
                                          self.inputs)
                timing = timing_of(self, done, out)
                with open(os.path.join(out, "result.mtx")) as f:
                    header = f.readline().split()
                got = scipy.io.mmread(os.path.join(out, "result.mtx"))
                if kernel == "sddmm":
                    self.assertEqual(header[2:], ["coordinate", "real", "general"])
                    got = got.tocoo()
                    self.assertEqual(set(zip(got.row.tolist(), got.col.tolist())),
                                     set(zip(self.s.row.tolist(), self.s.col.tolist())))
                    got = got.toarray()
                else:
                    self.assertEqual(header[2:], ["array", "real", "general"])
                if kernel.startswith("fused"):
                    self.assertEqual(sorted(timing["phases_s"]), ["sddmm", "spmm"])
                self.assertEqual(got.shape, want.shape)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * abs(want).max())

    def test_malformed_inputs_fail(self):
        scipy.io.mmwrite(self.work.file("input/b_bad.mtx"), np.ones((19, 4)), symmetry="general")
        bad = dict(self.inputs, b="input/b_bad.mtx")
        assert_fails(self, *self.work.run("fusedmm_scipy.py", "fusedmm", {"kernel": "spmma"}, bad))
        assert_fails(self, *self.work.run("fusedmm_scipy.py", "fusedmm", {"kernel": "gemm"},
                                          self.inputs))


# --- lda ------------------------------------------------------------------------------------

class LdaTest(unittest.TestCase):
    D, W, K = 20, 30, 4

    def setUp(self):
        self.work = WorkDir(self)
        rng = np.random.default_rng(3)
        counts = np.zeros((self.D, self.W), dtype=np.int64)
        for d in range(self.D):
            if d == 5:
                continue  # an empty document
            tokens = rng.integers(0, self.W - 1, size=rng.integers(80, 120))  # word W-1 unused
            np.add.at(counts[d], tokens, 1)
        self.counts = counts
        d_idx, w_idx = np.nonzero(counts)
        with open(self.work.file("input/docword.txt"), "w") as f:
            f.write(f"{self.D}\n{self.W}\n{len(d_idx)}\n")
            for d, w in zip(d_idx.tolist(), w_idx.tolist()):
                f.write(f"{d + 1} {w + 1} {counts[d, w]}\n")
        self.inputs = {"docword": "input/docword.txt"}
        self.params = {"topics": self.K, "alpha": 0.1, "beta": 0.01, "iters": 20, "seed": 7}

    def read_counts(self, out_dir, name, n_rows):
        with open(os.path.join(out_dir, name)) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), n_rows)
        table = np.array([[int(v) for v in line.split(",")] for line in lines])
        self.assertEqual(table.shape, (n_rows, self.K))
        self.assertTrue((table >= 0).all())
        return table

    def check(self, prog, threads=1):
        done, out = self.work.run(prog, "lda", self.params, self.inputs, threads=threads)
        self.timing = timing_of(self, done, out)
        word_topic = self.read_counts(out, "word_topic.csv", self.W)
        doc_topic = self.read_counts(out, "doc_topic.csv", self.D)
        np.testing.assert_array_equal(word_topic.sum(axis=1), self.counts.sum(axis=0))
        np.testing.assert_array_equal(doc_topic.sum(axis=1), self.counts.sum(axis=1))
        np.testing.assert_array_equal(word_topic.sum(axis=0), doc_topic.sum(axis=0))
        return word_topic, doc_topic

    def test_lda_package_counts_add_up(self):
        first = self.check("lda_package.py")
        self.assertEqual(sorted(self.timing["phases_s"]), ["sampling", "setup"])
        again = self.check("lda_package.py")
        for x, y in zip(first, again):
            np.testing.assert_array_equal(x, y)  # the seed fixes the result

    def test_tomotopy_counts_add_up(self):
        self.check("lda_tomotopy.py")
        self.check("lda_tomotopy.py", threads=2)

    def test_malformed_inputs_fail(self):
        with open(self.work.file("input/short.txt"), "w") as f:
            f.write("2\n3\n2\n1 1 4\n")
        with open(self.work.file("input/range.txt"), "w") as f:
            f.write("2\n3\n1\n1 4 4\n")
        for prog, name in (("lda_package.py", "short.txt"), ("lda_tomotopy.py", "range.txt")):
            with self.subTest(prog=prog):
                assert_fails(self, *self.work.run(prog, "lda", self.params,
                                                  {"docword": f"input/{name}"}))


# --- word2vec -------------------------------------------------------------------------------

class Word2vecTest(unittest.TestCase):
    """A corpus of planted word groups: every sentence draws its words from one group, so a
    trained model puts each word's nearest neighbour in its own group (parbench's
    `planted_accuracy` on its synthetic corpus)."""

    GROUPS, PER_GROUP, SENTENCE, WORDS = 5, 10, 10, 50_000
    PARAMS = {"dim": 16, "window": 5, "negative": 5, "sample": 1e-3, "alpha": 0.025,
              "epochs": 3, "seed": 2**40 + 7}  # a seed over 2^32 is taken modulo 2^32

    def setUp(self):
        self.work = WorkDir(self)
        rng = np.random.default_rng(4)
        self.words = [f"g{g}w{i}" for g in range(self.GROUPS) for i in range(self.PER_GROUP)]
        with open(self.work.file("input/corpus.txt"), "w") as f:
            for _ in range(self.WORDS // self.SENTENCE):
                g = rng.integers(self.GROUPS)
                picked = g * self.PER_GROUP + rng.integers(self.PER_GROUP, size=self.SENTENCE)
                f.write(" ".join(self.words[w] for w in picked.tolist()) + "\n")
        self.inputs = {"corpus": "input/corpus.txt"}

    def read_model(self, out_dir):
        with open(os.path.join(out_dir, "model.txt")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0].split(), [str(len(self.words)), str(self.PARAMS["dim"])])
        vecs = {}
        for line in lines[1:]:
            fields = line.split(" ")
            self.assertEqual(len(fields), self.PARAMS["dim"] + 1, line)
            self.assertNotIn(fields[0], vecs)
            vecs[fields[0]] = [float(x) for x in fields[1:]]
        self.assertEqual(sorted(vecs), sorted(self.words))
        vecs = np.array([vecs[w] for w in self.words])
        self.assertTrue(np.isfinite(vecs).all())
        return vecs

    def planted_accuracy(self, vecs):
        unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        nearest = sims.argmax(axis=1)
        groups = np.arange(len(self.words)) // self.PER_GROUP
        return float(np.mean(groups[nearest] == groups))

    def check(self, threads):
        done, out = self.work.run("word2vec_gensim.py", "word2vec", self.PARAMS, self.inputs,
                                  threads=threads)
        timing = timing_of(self, done, out)
        self.assertEqual(sorted(timing["phases_s"]), ["build_vocab", "train"])
        self.assertAlmostEqual(timing["phases_s"]["train"], timing["compute_s"], places=9)
        words_per_s = self.WORDS * self.PARAMS["epochs"] / timing["compute_s"]
        self.assertAlmostEqual(timing["metrics"]["words_per_s"] / words_per_s, 1.0, places=9)
        kept = timing["metrics"]["kept_words_per_epoch"]
        self.assertTrue(0 < kept < self.WORDS, kept)  # subsampling drops frequent words
        vecs = self.read_model(out)
        accuracy = self.planted_accuracy(vecs)
        self.assertGreater(accuracy, 0.8, f"threads={threads}: planted accuracy {accuracy}")
        return vecs

    def test_one_thread_learns_the_groups_deterministically(self):
        first = self.check(threads=1)
        np.testing.assert_array_equal(first, self.check(threads=1))  # the seed fixes the model

    def test_two_threads_learn_the_groups(self):
        self.check(threads=2)

    def test_malformed_inputs_fail(self):
        with open(self.work.file("input/empty.txt"), "w") as f:
            f.write("\n\n")
        cases = (("missing corpus", self.PARAMS, {}),
                 ("no such file", self.PARAMS, {"corpus": "input/nothing.txt"}),
                 ("empty corpus", self.PARAMS, {"corpus": "input/empty.txt"}),
                 ("missing parameter",
                  {k: v for k, v in self.PARAMS.items() if k != "negative"}, self.inputs),
                 ("zero negatives", dict(self.PARAMS, negative=0), self.inputs))
        for name, params, inputs in cases:
            with self.subTest(name):
                assert_fails(self, *self.work.run("word2vec_gensim.py", "word2vec", params,
                                                  inputs))


if __name__ == "__main__":
    unittest.main(verbosity=2)
