//! Tokenizing, stop words and vocabularies (filled in by the text/embeddings work).
