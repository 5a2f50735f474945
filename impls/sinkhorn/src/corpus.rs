//! Building a problem from tokenized documents and word vectors (in progress).
