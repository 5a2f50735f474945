//! Building a [`WmdProblem`] from raw documents and word vectors.
//!
//! Each document is tokenized ([`parbench_common::text::tokenize`]: whitespace, lowercase), stop
//! words are removed, words without an embedding are dropped (and counted), and the remaining
//! counts are normalized to a histogram over the embedding vocabulary: column `j` of the paper's
//! `c` (V x N). A document left with no word is an error naming its line, since it has no
//! distribution to transport. Cost: one hash lookup per token plus a sort of each document's word
//! ids, O(tokens + nnz log(max doc length)); the CSR is assembled once from triplets.
//!
//! `V` is either the whole embedding vocabulary (as in the paper, where `M` is `v_s x V`) or only
//! the words that occur in some document ([`CorpusVocab::Used`]). The distances are the same
//! either way: a word no document holds carries no mass. Only the work of the dense baseline and
//! of the distance matrix changes.
//!
//! [`query_problem`] then takes one document's histogram as the query and every document
//! (the query included) as targets.

use crate::problem::{WmdError, WmdProblem};
use parbench_common::embeddings::{Embeddings, EmbeddingsError};
use parbench_common::text::{is_stop_word, tokenize, Vocab};
use parbench_common::{Csr, CsrError, Rng};
use thiserror::Error;

/// Why a corpus or a query problem could not be built.
#[derive(Debug, Error)]
pub enum CorpusError {
    /// A document has no token left after removing stop words and words without an embedding.
    #[error("document on line {line} has no word left ({tokens} tokens: {stop_words} stop words, {oov} without an embedding)")]
    EmptyDocument {
        /// The line number the caller gave the document.
        line: usize,
        /// Whitespace tokens the document had.
        tokens: usize,
        /// How many of them were stop words.
        stop_words: usize,
        /// How many of them had no embedding.
        oov: usize,
    },
    /// The input held no document at all.
    #[error("there are no documents")]
    NoDocuments,
    /// The query document index is not below the number of documents.
    #[error("query document {query} is out of range: there are {docs} documents (0-based)")]
    QueryOutOfRange {
        /// The 0-based query document asked for.
        query: usize,
        /// Documents in the corpus.
        docs: usize,
    },
    /// [`query_problem`] got other embeddings than the corpus was built with (compared by size).
    #[error("the corpus was built with other embeddings ({corpus_words} words, dimension {corpus_dim}) than the ones given ({given_words} words, dimension {given_dim})")]
    EmbeddingsMismatch {
        /// Words of the embeddings the corpus was built with.
        corpus_words: usize,
        /// Dimension of the embeddings the corpus was built with.
        corpus_dim: usize,
        /// Words of the embeddings given now.
        given_words: usize,
        /// Dimension of the embeddings given now.
        given_dim: usize,
    },
    /// More documents than `u32` column indices can address (the count is carried).
    #[error("too many documents for u32 column indices: {0}")]
    TooManyDocuments(usize),
    /// The built histograms failed [`WmdProblem`]'s validation.
    #[error(transparent)]
    Problem(#[from] WmdError),
    /// The document matrix could not be built as a CSR matrix.
    #[error(transparent)]
    Matrix(#[from] CsrError),
    /// The embeddings could not be read or are invalid.
    #[error(transparent)]
    Embeddings(#[from] EmbeddingsError),
}

/// Which words make up the rows of the document matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorpusVocab {
    /// Every word of the embeddings, in embedding order (the paper's setting).
    Embeddings,
    /// Only the words some document uses, in embedding order.
    Used,
}

/// What building a corpus removed, for reporting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorpusStats {
    /// Documents read.
    pub documents: usize,
    /// Every whitespace token read.
    pub tokens: usize,
    /// Tokens dropped as stop words ([`parbench_common::text::is_stop_word`]).
    pub stop_words_removed: usize,
    /// Tokens dropped because the embeddings have no vector for them.
    pub oov_tokens: usize,
    /// Distinct words among the `oov_tokens`.
    pub oov_types: usize,
    /// Tokens that made it into a histogram.
    pub kept_tokens: usize,
}

/// Normalized bag-of-words histograms of a document collection over an embedding vocabulary.
#[derive(Clone, Debug)]
pub struct DocCorpus {
    /// Row `r` of the matrices is the embedding word `word_ids[r]`.
    word_ids: Vec<u32>,
    /// `c`: rows are words, columns documents; every column sums to 1.
    docs_by_word: Csr,
    docs_by_doc: Csr,
    /// Line each document came from, as the caller numbered it.
    lines: Vec<usize>,
    embedding_words: usize,
    embedding_dim: usize,
    /// What building removed and kept, for reports.
    pub stats: CorpusStats,
}

impl DocCorpus {
    /// Builds the histograms of `docs`, given as (line number, text) pairs, over the whole
    /// embedding vocabulary (the paper's setting); the line numbers are only used to name a
    /// document in errors and are echoed by [`DocCorpus::line`].
    pub fn build<I, S>(docs: I, embeddings: &Embeddings) -> Result<DocCorpus, CorpusError>
    where
        I: IntoIterator<Item = (usize, S)>,
        S: AsRef<str>,
    {
        DocCorpus::build_with_vocab(docs, embeddings, CorpusVocab::Embeddings)
    }

    /// [`DocCorpus::build`] with a choice of rows: every embedding word or only the used ones.
    pub fn build_with_vocab<I, S>(
        docs: I,
        embeddings: &Embeddings,
        vocab: CorpusVocab,
    ) -> Result<DocCorpus, CorpusError>
    where
        I: IntoIterator<Item = (usize, S)>,
        S: AsRef<str>,
    {
        let mut stats = CorpusStats::default();
        let mut lines = Vec::new();
        let mut oov_words = std::collections::HashSet::new();
        // (embedding id, document, weight) for every nonzero.
        let mut triplets: Vec<(usize, usize, f64)> = Vec::new();
        let mut doc_ids: Vec<u32> = Vec::new();
        for (line, text) in docs {
            let doc = lines.len();
            doc_ids.clear();
            let (mut tokens, mut stop_words, mut oov) = (0, 0, 0);
            for token in tokenize(text.as_ref()) {
                tokens += 1;
                if is_stop_word(&token) {
                    stop_words += 1;
                } else if let Some(id) = embeddings.id(&token) {
                    doc_ids.push(id);
                } else {
                    oov += 1;
                    if !oov_words.contains(token.as_ref()) {
                        oov_words.insert(token.into_owned());
                    }
                }
            }
            if doc_ids.is_empty() {
                return Err(CorpusError::EmptyDocument {
                    line,
                    tokens,
                    stop_words,
                    oov,
                });
            }
            stats.tokens += tokens;
            stats.stop_words_removed += stop_words;
            stats.oov_tokens += oov;
            stats.kept_tokens += doc_ids.len();
            doc_ids.sort_unstable();
            let total = doc_ids.len() as f64;
            for run in doc_ids.chunk_by(|a, b| a == b) {
                triplets.push((run[0] as usize, doc, run.len() as f64 / total));
            }
            lines.push(line);
        }
        if lines.is_empty() {
            return Err(CorpusError::NoDocuments);
        }
        if lines.len() > u32::MAX as usize {
            return Err(CorpusError::TooManyDocuments(lines.len()));
        }
        stats.documents = lines.len();
        stats.oov_types = oov_words.len();

        let word_ids: Vec<u32> = match vocab {
            CorpusVocab::Embeddings => (0..embeddings.len() as u32).collect(),
            CorpusVocab::Used => {
                let mut used = vec![false; embeddings.len()];
                for &(w, _, _) in &triplets {
                    used[w] = true;
                }
                let ids: Vec<u32> = (0..embeddings.len() as u32)
                    .filter(|&w| used[w as usize])
                    .collect();
                let mut row_of = vec![u32::MAX; embeddings.len()];
                for (row, &w) in ids.iter().enumerate() {
                    row_of[w as usize] = row as u32;
                }
                for t in &mut triplets {
                    t.0 = row_of[t.0] as usize;
                }
                ids
            }
        };
        // Every triplet is in range and finite by construction, so this cannot fail; the error is
        // still passed on rather than unwrapped.
        let docs_by_word = Csr::from_triplets(word_ids.len(), lines.len(), &triplets)?;
        let docs_by_doc = docs_by_word.transpose();
        Ok(DocCorpus {
            word_ids,
            docs_by_word,
            docs_by_doc,
            lines,
            embedding_words: embeddings.len(),
            embedding_dim: embeddings.dim,
            stats,
        })
    }

    /// Number of documents N.
    pub fn num_docs(&self) -> usize {
        self.lines.len()
    }

    /// Rows of the document matrix (V).
    pub fn vocab_size(&self) -> usize {
        self.word_ids.len()
    }

    /// Embedding id of each row.
    pub fn word_ids(&self) -> &[u32] {
        &self.word_ids
    }

    /// The line document `doc` came from.
    ///
    /// # Panics
    /// When `doc >= num_docs()`.
    pub fn line(&self, doc: usize) -> usize {
        self.lines[doc]
    }

    /// `c`: V x N, columns are normalized histograms.
    pub fn docs_by_word(&self) -> &Csr {
        &self.docs_by_word
    }

    /// Histogram of document `doc` as (row, weight) pairs sorted by row.
    ///
    /// # Panics
    /// When `doc >= num_docs()`.
    pub fn histogram(&self, doc: usize) -> Vec<(u32, f64)> {
        let (rows, weights) = self.docs_by_doc.row(doc);
        rows.iter().copied().zip(weights.iter().copied()).collect()
    }
}

/// The problem "document `query_doc` against every document of `corpus`" (itself included).
/// `embeddings` must be the ones the corpus was built with.
pub fn query_problem(
    corpus: &DocCorpus,
    embeddings: &Embeddings,
    query_doc: usize,
) -> Result<WmdProblem, CorpusError> {
    if query_doc >= corpus.num_docs() {
        return Err(CorpusError::QueryOutOfRange {
            query: query_doc,
            docs: corpus.num_docs(),
        });
    }
    batch_problem(corpus, embeddings, corpus.histogram(query_doc))
}

/// The problem "`query` against every document of `corpus`", `query` a histogram over the
/// corpus's rows (one of [`TargetsAndQueries::queries`], say): the first of a batch, whose
/// next queries take its place through [`WmdProblem::set_query`]. `embeddings` must be the ones
/// the corpus was built with.
pub fn batch_problem(
    corpus: &DocCorpus,
    embeddings: &Embeddings,
    query: Vec<(u32, f64)>,
) -> Result<WmdProblem, CorpusError> {
    if embeddings.len() != corpus.embedding_words || embeddings.dim != corpus.embedding_dim {
        return Err(CorpusError::EmbeddingsMismatch {
            corpus_words: corpus.embedding_words,
            corpus_dim: corpus.embedding_dim,
            given_words: embeddings.len(),
            given_dim: embeddings.dim,
        });
    }
    let vecs: Vec<f64> = if corpus.word_ids.len() == embeddings.len() {
        embeddings.vecs.clone()
    } else {
        corpus
            .word_ids
            .iter()
            .flat_map(|&w| embeddings.vec(w as usize).iter().copied())
            .collect()
    };
    Ok(WmdProblem::new(
        vecs,
        embeddings.dim,
        query,
        corpus.docs_by_word.clone(),
    )?)
}

/// Target documents and query documents over one vocabulary, the words either uses: what a
/// batch of queries against a collection needs (kNN classification by WMD: the training split
/// as targets, the test split as queries).
#[derive(Clone, Debug)]
pub struct TargetsAndQueries {
    /// The targets; its rows are every word a target or a query uses, and its statistics
    /// count the queries' tokens too.
    pub targets: DocCorpus,
    /// Each query's histogram over the targets' rows, in the order given.
    pub queries: Vec<Vec<(u32, f64)>>,
}

impl TargetsAndQueries {
    /// Builds the histograms of `targets` and of `queries` (both (line number, text) pairs, as
    /// [`DocCorpus::build`] takes them) over the words they use. A document of either left with
    /// no word is an error naming its line.
    pub fn build<I, J, S>(
        targets: I,
        queries: J,
        embeddings: &Embeddings,
    ) -> Result<TargetsAndQueries, CorpusError>
    where
        I: IntoIterator<Item = (usize, S)>,
        J: IntoIterator<Item = (usize, S)>,
        S: AsRef<str>,
    {
        let targets: Vec<(usize, S)> = targets.into_iter().collect();
        let num_targets = targets.len();
        if num_targets == 0 {
            return Err(CorpusError::NoDocuments);
        }
        let all = DocCorpus::build_with_vocab(
            targets.into_iter().chain(queries),
            embeddings,
            CorpusVocab::Used,
        )?;
        let queries = (num_targets..all.num_docs())
            .map(|doc| all.histogram(doc))
            .collect();
        let mut triplets = Vec::new();
        for doc in 0..num_targets {
            let (rows, weights) = all.docs_by_doc.row(doc);
            triplets.extend(
                rows.iter()
                    .zip(weights)
                    .map(|(&row, &weight)| (row as usize, doc, weight)),
            );
        }
        let docs_by_word = Csr::from_triplets(all.word_ids.len(), num_targets, &triplets)?;
        let targets = DocCorpus {
            docs_by_doc: docs_by_word.transpose(),
            docs_by_word,
            lines: all.lines[..num_targets].to_vec(),
            ..all
        };
        Ok(TargetsAndQueries { targets, queries })
    }
}

/// Distinct non-stop-word tokens of `docs`, most frequent first (ties by word): the vocabulary
/// to give [`random_embeddings`] when there is no trained embeddings file.
pub fn content_words<I, S>(docs: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut vocab = Vocab::new();
    for doc in docs {
        for token in tokenize(doc.as_ref()) {
            if !is_stop_word(&token) {
                vocab.add(&token);
            }
        }
    }
    vocab.sorted_by_count(1).words().to_vec()
}

/// Random word vectors: every component N(0, 1/dim), so vectors have expected squared norm 1.
/// A word's vector depends only on `seed` and the word itself (its generator stream is keyed by
/// an FNV-1a hash of the word), not on which other words are in the list or in which order.
pub fn random_embeddings<S: AsRef<str>>(
    words: &[S],
    dim: usize,
    seed: u64,
) -> Result<Embeddings, EmbeddingsError> {
    let scale = 1.0 / (dim.max(1) as f64).sqrt();
    let mut vecs = Vec::with_capacity(words.len() * dim);
    for word in words {
        let mut rng = Rng::stream(seed, fnv1a64(word.as_ref().as_bytes()));
        vecs.extend((0..dim).map(|_| rng.normal() * scale));
    }
    Embeddings::new(
        words.iter().map(|w| w.as_ref().to_owned()).collect(),
        dim,
        vecs,
    )
}

/// Random embeddings ([`random_embeddings`]) for the content words of `docs`, given as
/// (line number, text) pairs as [`DocCorpus::build`] takes them: a stand-in for trained vectors
/// when experimenting on real documents, so the document structure (vocabulary, lengths, overlap)
/// is real while the geometry is random.
pub fn random_embeddings_for<S: AsRef<str>>(
    docs: &[(usize, S)],
    dim: usize,
    seed: u64,
) -> Result<Embeddings, EmbeddingsError> {
    let words = content_words(docs.iter().map(|(_, text)| text.as_ref()));
    random_embeddings(&words, dim, seed)
}

/// 64-bit FNV-1a: a fixed hash (unlike `std`'s, which is randomly keyed per process).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embeddings(words: &[&str]) -> Embeddings {
        random_embeddings(words, 4, 7).unwrap()
    }

    #[test]
    fn targets_and_queries_share_the_rows_either_uses() {
        let emb = embeddings(&["oil", "price", "bank", "rates", "wheat", "unused"]);
        let targets = [(1, "oil price oil"), (2, "bank rates")];
        let queries = [(1, "wheat price"), (2, "rates rates oil")];
        let split = TargetsAndQueries::build(targets, queries, &emb).unwrap();
        let c = &split.targets;
        // Rows: oil, price, bank, rates, wheat (in embedding order; `unused` is nobody's).
        assert_eq!(c.word_ids(), &[0, 1, 2, 3, 4]);
        assert_eq!(c.num_docs(), 2);
        assert_eq!(c.docs_by_word().ncols(), 2);
        assert_eq!(c.histogram(0), vec![(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
        assert_eq!(c.histogram(1), vec![(2, 0.5), (3, 0.5)]);
        assert_eq!(c.line(1), 2);
        assert_eq!(
            split.queries,
            vec![
                vec![(1, 0.5), (4, 0.5)],
                vec![(0, 1.0 / 3.0), (3, 2.0 / 3.0)]
            ]
        );
        // A batch problem solves the queries one after another against the same collection,
        // and agrees with a problem built for each query on its own.
        let params = crate::SinkhornParams::default();
        let mut batch = batch_problem(c, &emb, split.queries[0].clone()).unwrap();
        for query in &split.queries {
            batch.set_query(query.clone()).unwrap();
            let own = WmdProblem::new(
                batch.vecs().to_vec(),
                batch.dim(),
                query.clone(),
                c.docs_by_word().clone(),
            )
            .unwrap();
            let solve = |p: &WmdProblem| {
                crate::FusedSddmmSpmm
                    .solve(p, &params, crate::Par::Seq, &mut |_| {
                        crate::Control::Continue
                    })
                    .unwrap()
                    .distances
            };
            use crate::WmdSolver;
            assert_eq!(solve(&batch), solve(&own));
        }
        // A bad query is refused and the problem keeps the one it had.
        let before = batch.query().to_vec();
        assert_eq!(
            batch.set_query(vec![(9, 1.0)]),
            Err(WmdError::QueryWordOutOfRange { word: 9, vocab: 5 })
        );
        assert_eq!(batch.query(), &before[..]);
    }

    #[test]
    fn a_query_without_a_known_word_is_an_error_naming_its_line() {
        let emb = embeddings(&["oil", "price"]);
        let err =
            TargetsAndQueries::build([(1, "oil price")], [(7, "the zebra")], &emb).unwrap_err();
        assert!(
            matches!(err, CorpusError::EmptyDocument { line: 7, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn histograms_are_normalized_counts_after_stop_words_and_oov() {
        let emb = embeddings(&["oil", "price", "bank", "rates"]);
        let docs = [
            (1, "The OIL price and the oil RIG"),
            (2, "bank rates of the bank"),
        ];
        let c = DocCorpus::build(docs, &emb).unwrap();
        assert_eq!(c.num_docs(), 2);
        assert_eq!(c.vocab_size(), 4);
        // doc 0: oil x2, price x1 (the, and, the: stop words; rig: out of vocabulary)
        assert_eq!(c.histogram(0), vec![(0, 2.0 / 3.0), (1, 1.0 / 3.0)]);
        assert_eq!(c.histogram(1), vec![(2, 2.0 / 3.0), (3, 1.0 / 3.0)]);
        assert_eq!(
            c.stats,
            CorpusStats {
                documents: 2,
                tokens: 12,
                stop_words_removed: 5,
                oov_tokens: 1,
                oov_types: 1,
                kept_tokens: 6,
            }
        );
        assert_eq!(c.line(1), 2);
        for s in c.docs_by_word().column_sums() {
            assert!((s - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn empty_document_names_its_line_and_why() {
        let emb = embeddings(&["oil"]);
        let docs = [(1, "oil"), (2, "oil oil"), (3, "the of xyzzy"), (4, "oil")];
        let err = DocCorpus::build_with_vocab(docs, &emb, CorpusVocab::Used).unwrap_err();
        assert!(
            matches!(
                err,
                CorpusError::EmptyDocument {
                    line: 3,
                    tokens: 3,
                    stop_words: 2,
                    oov: 1
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("line 3"));
        let blank = DocCorpus::build([(9, "   ")], &emb).unwrap_err();
        assert!(matches!(
            blank,
            CorpusError::EmptyDocument {
                line: 9,
                tokens: 0,
                ..
            }
        ));
        let none: [(usize, &str); 0] = [];
        assert!(matches!(
            DocCorpus::build(none, &emb),
            Err(CorpusError::NoDocuments)
        ));
    }

    #[test]
    fn used_vocabulary_keeps_only_occurring_words_in_embedding_order() {
        let emb = embeddings(&["a1", "b2", "c3", "d4", "e5"]);
        let docs = [(1, "d4 b2"), (2, "b2 b2")];
        let c = DocCorpus::build_with_vocab(docs, &emb, CorpusVocab::Used).unwrap();
        assert_eq!(c.word_ids(), &[1, 3]);
        assert_eq!(c.histogram(0), vec![(0, 0.5), (1, 0.5)]);
        assert_eq!(c.histogram(1), vec![(0, 1.0)]);
    }

    #[test]
    fn query_problem_uses_the_query_histogram_and_every_document() {
        let emb = embeddings(&["a1", "b2", "c3", "d4", "e5"]);
        let docs = [(1, "d4 b2 b2"), (2, "b2 e5"), (3, "a1")];
        for vocab in [CorpusVocab::Embeddings, CorpusVocab::Used] {
            let c = DocCorpus::build_with_vocab(docs, &emb, vocab).unwrap();
            let p = query_problem(&c, &emb, 0).unwrap();
            assert_eq!(p.num_docs(), 3);
            assert_eq!(p.vocab(), c.vocab_size());
            assert_eq!(p.dim(), 4);
            assert_eq!(p.nnz(), 5);
            // The query's words keep their vectors whichever rows they land on.
            let query_words: Vec<&str> = p
                .query()
                .iter()
                .map(|&(row, _)| emb.words[c.word_ids()[row as usize] as usize].as_str())
                .collect();
            assert_eq!(query_words, ["b2", "d4"]);
            let weights: Vec<f64> = p.query().iter().map(|&(_, w)| w).collect();
            assert_eq!(weights, [2.0 / 3.0, 1.0 / 3.0]);
            for &(row, _) in p.query() {
                let w = c.word_ids()[row as usize] as usize;
                assert_eq!(p.vec(row as usize), emb.vec(w));
            }
        }
        let c = DocCorpus::build_with_vocab(docs, &emb, CorpusVocab::Used).unwrap();
        assert!(matches!(
            query_problem(&c, &emb, 3),
            Err(CorpusError::QueryOutOfRange { query: 3, docs: 3 })
        ));
        let other = embeddings(&["a1", "b2"]);
        assert!(matches!(
            query_problem(&c, &other, 0),
            Err(CorpusError::EmbeddingsMismatch { .. })
        ));
    }

    #[test]
    fn random_embeddings_depend_only_on_seed_and_word() {
        let a = random_embeddings(&["x", "y", "z"], 8, 11).unwrap();
        let b = random_embeddings(&["z", "x"], 8, 11).unwrap();
        assert_eq!(a.get("x"), b.get("x"));
        assert_eq!(a.get("z"), b.get("z"));
        assert_ne!(a.get("x"), a.get("y"));
        let c = random_embeddings(&["x"], 8, 12).unwrap();
        assert_ne!(a.get("x"), c.get("x"));
        assert!(matches!(
            random_embeddings(&["x", "x"], 2, 1),
            Err(EmbeddingsError::DuplicateWord { .. })
        ));
    }

    #[test]
    fn random_embeddings_have_unit_expected_squared_norm() {
        let words: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
        let e = random_embeddings(&words, 50, 3).unwrap();
        let mean_sq = e.vecs.iter().map(|x| x * x).sum::<f64>() / words.len() as f64;
        // Mean of 2000 chi-square(50)/50 draws: standard error about 0.0045.
        assert!((mean_sq - 1.0).abs() < 0.03, "{mean_sq}");
    }

    #[test]
    fn random_embeddings_for_documents_cover_every_content_word() {
        let docs = vec![
            (1, "Oil prices rose".to_string()),
            (2, "the oil".to_string()),
        ];
        let emb = random_embeddings_for(&docs, 3, 5).unwrap();
        assert_eq!(emb.words, ["oil", "prices", "rose"]);
        let c = DocCorpus::build(docs.iter().map(|(l, t)| (*l, t.as_str())), &emb).unwrap();
        assert_eq!(c.stats.oov_tokens, 0);
        assert!(matches!(
            random_embeddings_for(&docs, 0, 5),
            Err(EmbeddingsError::ZeroDimension)
        ));
    }

    #[test]
    fn content_words_are_non_stop_words_by_frequency() {
        let words = content_words(["The oil and OIL", "bank of oil", "bank"]);
        assert_eq!(words, ["oil", "bank"]);
    }
}
