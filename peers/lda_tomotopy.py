"""LDA peer: tomotopy's LDAModel, collapsed Gibbs sampling in C++ (family `lda`).

What a user of tomotopy writes, set up so that it samples the same model as the others:

    model = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0,
                        k=topics, alpha=alpha, eta=beta, seed=seed)
    model.optim_interval = 0          # keep the priors fixed and symmetric
    model.add_doc(tokens)             # per document, word w as the token str(w), with repeats
    model.train(iters, workers=threads, parallel=NONE if threads == 1 else DEFAULT)

- tomotopy's `alpha` is the prior of each topic (a symmetric vector of K values), the same as
  the symmetric `alpha` of docs/peers.md. By default tomotopy re-estimates alpha every 10
  iterations (optim_interval=10); with optim_interval=0 it keeps it fixed, as the model here
  requires. It holds the priors in float32 (eta = 0.01 becomes 0.0099999998).
- TermWeight.ONE, min_cf=min_df=rm_top=0: every token counts once and no word is dropped.
- With more than one worker the DEFAULT scheme (tomotopy picks COPY_MERGE or PARTITION)
  samples parts of the corpus in parallel, so the result then depends on the thread count
  even with a fixed seed; with one worker we ask for NONE, the plain sequential sampler.
- tomotopy does not take empty documents (add_doc returns None): they are not added and keep
  a row of zeros; words that never occur keep a row of zeros too.

Afterwards the counts are rebuilt from each document's final per-token topics (doc.words are
ids into model.vocabs, whose strings are our word numbers).
Timed (compute_s): train only. The seed is taken modulo 2^63.
Packages (pinned): tomotopy 0.14.0, numpy 2.4.6.
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import numpy as np  # noqa: E402
import tomotopy as tp  # noqa: E402


def run(request):
    topics, alpha, beta, iters, seed = peer.lda_params(request)
    n_docs, n_words, docs, words, counts = peer.read_docword(request.input("docword"))
    order = np.argsort(docs, kind="stable")
    docs, words, counts = docs[order], words[order], counts[order]
    bounds = np.searchsorted(docs, np.arange(n_docs + 1))

    model = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0,
                        k=topics, alpha=alpha, eta=beta, seed=seed % 2**63)
    model.optim_interval = 0
    model.burn_in = 0
    names = [str(w) for w in range(n_words)]
    added = []  # corpus document number of each document in the model
    for d in range(n_docs):
        lo, hi = bounds[d], bounds[d + 1]
        tokens = np.repeat(words[lo:hi], counts[lo:hi])
        if tokens.size:
            model.add_doc([names[w] for w in tokens.tolist()])
            added.append(d)

    parallel = tp.ParallelScheme.NONE if request.threads == 1 else tp.ParallelScheme.DEFAULT
    timer = peer.Timer()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The training result may differ")
        with timer.compute():
            if added:
                model.train(iters, workers=request.threads, parallel=parallel)

    if len(model.docs) != len(added):
        raise peer.PeerError(f"tomotopy holds {len(model.docs)} documents, "
                             f"{len(added)} were added")
    vocab_word = np.array([int(v) for v in model.vocabs], dtype=np.int64)
    doc_topic = np.zeros((n_docs, topics), dtype=np.int64)
    cells = []  # word * topics + topic, per token
    for d, doc in zip(added, model.docs):
        z = np.asarray(doc.topics, dtype=np.int64)
        cells.append(vocab_word[np.asarray(doc.words, dtype=np.int64)] * topics + z)
        doc_topic[d] = np.bincount(z, minlength=topics)
    cells = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
    word_topic = np.bincount(cells, minlength=n_words * topics).reshape(n_words, topics)
    peer.write_counts(request.out("word_topic.csv"), word_topic)
    peer.write_counts(request.out("doc_topic.csv"), doc_topic)
    peer.write_timing(request.output, timer.compute_s)


if __name__ == "__main__":
    peer.main(run, "lda")
