//! Word vectors in word2vec text format (filled in by the text/embeddings work).
