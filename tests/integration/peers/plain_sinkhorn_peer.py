"""A peer for the tests, in plain Python (no numpy): the Sinkhorn-WMD iteration of docs/peers.md,
one document at a time, written from the definition. Its first argument picks how it behaves:
ok, fail (exits 1 after a message), sleep (never finishes), nan (writes a NaN distance), short
(one distance too few), notiming (writes no timing.json)."""
import json
import math
import os
import sys
import time

mode, request_path = sys.argv[1], sys.argv[2]
with open(request_path) as f:
    req = json.load(f)
base = os.path.dirname(os.path.abspath(request_path))
path = lambda rel: os.path.join(base, rel)

if mode == "fail":
    print("plain peer: the solver diverged on purpose", file=sys.stderr)
    sys.exit(1)
if mode == "sleep":
    time.sleep(60)

with open(path(req["input"]["embeddings"])) as f:
    vocab, dim = map(int, f.readline().split())
    vecs = [list(map(float, line.split()[1:])) for line in f]
query = []
with open(path(req["input"]["query"])) as f:
    assert f.readline().strip() == "word,weight"
    for line in f:
        w, x = line.split(",")
        query.append((int(w), float(x)))
docs = {}
with open(path(req["input"]["docs"])) as f:
    assert f.readline().startswith("%%MatrixMarket matrix coordinate real general")
    rows, cols, nnz = map(int, f.readline().split())
    for line in f:
        i, j, x = line.split()
        docs.setdefault(int(j) - 1, []).append((int(i) - 1, float(x)))

start = time.perf_counter()
lam, iters = req["params"]["lambda"], req["params"]["iters"]
dist = lambda a, b: math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
out = []
for j in range(cols):
    words = docs[j]
    m = [[dist(vecs[q], vecs[t]) for t, _ in words] for q, _ in query]
    k = [[math.exp(-lam * d) for d in row] for row in m]
    vs = len(query)

    def v_of(u):
        return [c / sum(k[s][i] * u[s] for s in range(vs)) for i, (_, c) in enumerate(words)]

    x = [1.0 / vs] * vs
    for _ in range(iters):
        u = [1.0 / a for a in x]
        v = v_of(u)
        x = [sum(k[s][i] / query[s][1] * v[i] for i in range(len(words))) for s in range(vs)]
    u = [1.0 / a for a in x]
    v = v_of(u)
    out.append(sum(u[s] * sum(k[s][i] * m[s][i] * v[i] for i in range(len(words))) for s in range(vs)))
compute_s = time.perf_counter() - start

if mode == "nan":
    out[-1] = float("nan")
if mode == "short":
    out = out[:-1]
outdir = path(req["output"])
with open(os.path.join(outdir, "distances.csv"), "w") as f:
    f.write("distance\n" + "".join(repr(d) + "\n" for d in out))
if mode != "notiming":
    with open(os.path.join(outdir, "timing.json"), "w") as f:
        json.dump({"compute_s": compute_s, "metrics": {"documents": len(out)}}, f)
