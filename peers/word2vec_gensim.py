"""word2vec peer: gensim's Word2Vec, skip-gram with negative sampling (family `word2vec`).

What a user of gensim writes, with the point's parameters:

    sentences = LineSentence(corpus)            # streamed from the file, once per pass
    model = Word2Vec(sg=1, hs=0, negative=negative, vector_size=dim, window=window,
                     sample=sample, alpha=alpha, min_alpha=alpha * 1e-4, epochs=epochs,
                     seed=seed, min_count=1, workers=threads)
    model.build_vocab(corpus_iterable=sentences)
    model.train(corpus_iterable=sentences, total_examples=model.corpus_count,
                epochs=model.epochs)

- sg=1, hs=0: skip-gram with negative sampling only (gensim's unigram^0.75 noise table, as
  word2vec.c's). `window` is the maximum window: gensim draws each word's effective window in
  1..window (shrink_windows, its default), as word2vec.c does.
- alpha decays linearly over all epochs to min_alpha = alpha * 1e-4, word2vec.c's floor.
- min_count=1: the corpus holds only parbench's vocabulary, and every word of it is kept.
- threads = gensim's `workers`: that many worker threads train (Hogwild, Cython without the
  GIL) on jobs of up to 10,000 words, which one more Python thread reads from the corpus and
  hands them (the producer, holding the GIL while it splits lines), as gensim users get it.
  With one worker and a fixed seed the model is deterministic; with more it is not.
- The seed is taken modulo 2^32 (numpy's RandomState, which gensim seeds with it).
- gensim's LineSentence splits a line longer than 10,000 words into 10,000-word sentences (its
  MAX_WORDS_IN_BATCH), so a one-line corpus (text8-style) is trained as 10,000-word sentences:
  windows do not cross those cuts, as for any gensim user on such a file.

Timed (compute_s): `train` only, which reads the corpus file again on every epoch (from the
page cache) as gensim does. `build_vocab` (one pass over the file: counting, the vocabulary,
the noise table and the initial vectors) is reported as a phase of its own (`build_vocab`) but is
not part of compute_s, as parbench's own variants do not time their corpus reading and model
initialization; the phases are `build_vocab` and `train` (= compute_s).
Metrics: `words_per_s` = corpus words x epochs / train seconds (the corpus's word count from
build_vocab, model.corpus_total_words), parbench's definition; `kept_words_per_epoch` = the words
gensim trained on per epoch after subsampling (train's effective word count / epochs).
Output: model.txt, the input vectors (model.wv) in word2vec text format, every word, each
float32 value written with 9 significant digits (which read back as float32 give the trained
value exactly), through a temporary file renamed into place.
Packages (pinned): gensim 4.4.0, numpy 2.4.6, scipy 1.17.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parbench_peer as peer  # noqa: E402

peer.limit_threads()

import numpy as np  # noqa: E402
from gensim.models.word2vec import LineSentence, Word2Vec  # noqa: E402

MIN_ALPHA_FRACTION = 1e-4  # word2vec.c: alpha never falls below starting_alpha * 0.0001


def word2vec_params(request):
    dim = request.param("dim", int)
    window = request.param("window", int)
    negative = request.param("negative", int)
    epochs = request.param("epochs", int)
    for name, value in (("dim", dim), ("window", window), ("negative", negative),
                        ("epochs", epochs)):
        if value < 1:
            raise peer.PeerError(f"parameter `{name}` must be at least 1, got {value}")
    sample = request.param("sample", float)
    if sample < 0:
        raise peer.PeerError(f"parameter `sample` must be >= 0, got {sample}")
    alpha = request.param("alpha", float)
    if alpha <= 0:
        raise peer.PeerError(f"parameter `alpha` must be positive, got {alpha}")
    seed = request.param("seed", int) if "seed" in request.params else request.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise peer.PeerError(f"the seed must be an integer >= 0, got {seed!r}")
    return dim, window, negative, sample, alpha, epochs, seed


def write_model(path, words, vectors):
    """word2vec text format: `V d`, then `word x_1 ... x_d` per word."""
    with peer.atomic_open(path) as f:
        f.write(f"{vectors.shape[0]} {vectors.shape[1]}\n")
        fmt = "{:.9g}".format
        for word, row in zip(words, vectors.tolist()):
            f.write(word)
            f.write(" ")
            f.write(" ".join(map(fmt, row)))
            f.write("\n")


def run(request):
    dim, window, negative, sample, alpha, epochs, seed = word2vec_params(request)
    sentences = LineSentence(request.input("corpus"))
    model = Word2Vec(sg=1, hs=0, negative=negative, vector_size=dim, window=window,
                     sample=sample, alpha=alpha, min_alpha=alpha * MIN_ALPHA_FRACTION,
                     epochs=epochs, seed=seed % 2**32, min_count=1, workers=request.threads)
    timer = peer.Timer()
    with timer.phase("build_vocab"):
        model.build_vocab(corpus_iterable=sentences)
    corpus_words = model.corpus_total_words
    if not corpus_words or len(model.wv) == 0:
        raise peer.PeerError("the corpus has no words")

    with timer.compute():
        kept, processed = model.train(corpus_iterable=sentences,
                                      total_examples=model.corpus_count, epochs=model.epochs)
    if processed != corpus_words * epochs:
        raise peer.PeerError(f"gensim trained on {processed} words, expected {corpus_words} "
                             f"words x {epochs} epochs")

    vectors = np.asarray(model.wv.vectors)
    if vectors.shape != (len(model.wv), dim):
        raise peer.PeerError(f"gensim's vectors have shape {vectors.shape}, expected "
                             f"({len(model.wv)}, {dim})")
    write_model(request.out("model.txt"), model.wv.index_to_key, vectors)
    timer.phases_s["train"] = timer.compute_s
    peer.write_timing(request.output, timer.compute_s, timer.phases_s,
                      {"words_per_s": corpus_words * epochs / timer.compute_s,
                       "kept_words_per_epoch": kept / epochs})


if __name__ == "__main__":
    peer.main(run, "word2vec")
