//! word2vec (in progress).
