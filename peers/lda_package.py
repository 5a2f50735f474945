"""LDA peer: the PyPI `lda` package's collapsed Gibbs sampler (family `lda`).

What a user of `lda` (Allen Riddell's package, Cython) writes:

    model = lda.LDA(n_topics=topics, n_iter=iters, alpha=alpha, eta=beta, random_state=seed)
    model.fit(X)       # X: the D x W document-word count matrix (scipy CSR, integers)

It is the standard collapsed Gibbs sampler (Griffiths & Steyvers) with symmetric priors,
`alpha` on document-topic and `eta` (= our `beta`) on topic-word, one sequential sweep over the
tokens per iteration; the initial state assigns token i topic i mod K. It runs on one thread
whatever `threads` says. The final state's counts are model.nzw_ (K x W, written transposed as
word_topic.csv) and model.ndz_ (D x K, doc_topic.csv).

Timed (compute_s): model.fit only, which includes lda's own conversion of X to token lists and
its initial state (Python loops over the nonzeros and the tokens), as for any user of the
package. Phases split fit at its first sweep: `setup` (that conversion, the initial state and
the first log-likelihood) and `sampling` (the sweeps and the last log-likelihood).
We pass refresh=iters so that fit computes its log-likelihood (progress logging only) at the
first and last sweep instead of every 10th, and silence its INFO logging. The seed is taken
modulo 2^32 (numpy's RandomState).
Packages (pinned): lda 3.0.2, numpy 2.4.6, scipy 1.17.1.
"""

import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import lda  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402


def run(request):
    topics, alpha, beta, iters, seed = peer.lda_params(request)
    n_docs, n_words, docs, words, counts = peer.read_docword(request.input("docword"))
    x = sp.csr_matrix((counts, (docs, words)), shape=(n_docs, n_words), dtype=np.int64)
    x.sum_duplicates()
    x.eliminate_zeros()

    logging.getLogger("lda").setLevel(logging.WARNING)
    model = lda.LDA(n_topics=topics, n_iter=iters, alpha=alpha, eta=beta,
                    random_state=seed % 2**32, refresh=max(iters, 1))
    # Observe (without changing anything) when fit's first sweep starts, to split its time.
    first_sweep = []
    sample_topics = model._sample_topics

    def timed_sample_topics(rands):
        if not first_sweep:
            first_sweep.append(time.perf_counter())
        return sample_topics(rands)

    model._sample_topics = timed_sample_topics
    timer = peer.Timer()
    start = time.perf_counter()
    with timer.compute():
        model.fit(x)
    end = time.perf_counter()
    setup_end = first_sweep[0] if first_sweep else end
    peer.write_counts(request.out("word_topic.csv"), np.asarray(model.nzw_).T)
    peer.write_counts(request.out("doc_topic.csv"), np.asarray(model.ndz_))
    peer.write_timing(request.output, timer.compute_s,
                      {"setup": setup_end - start, "sampling": end - setup_end})


if __name__ == "__main__":
    peer.main(run, "lda")
