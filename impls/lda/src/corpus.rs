//! A corpus as token streams of word ids, and its readers.
//!
//! - UCI bag-of-words ([`Corpus::read_uci`]): `docword.*.txt` holds three header lines `D`, `W`,
//!   `NNZ` and then `NNZ` lines `docID wordID count` (1-based ids); `vocab.*.txt` one word per
//!   line, word `i` on line `i`. Each `(doc, word, count)` line becomes `count` tokens of `word`
//!   appended to the document in file order (order is irrelevant to LDA, a bag of words). Lines
//!   beyond `W` in the vocabulary file are ignored (the UCI `vocab.kos.txt` ends with a stray
//!   `temp`). Cost: one pass over the file, O(NNZ + tokens).
//! - Plain text ([`Corpus::read_text`]): one document per line, tokenized by
//!   `parbench_common::text` (whitespace, lowercase), stop words removed, words seen fewer than
//!   `min_count` times dropped; ids by decreasing frequency. Two streaming passes (count, then
//!   encode), so the file is never held whole in memory. `.gz` files are decompressed on the fly.
//!
//! Every malformed input is a [`CorpusError`] naming the file and the 1-based line.

use flate2::read::MultiGzDecoder;
use parbench_common::text::{content_tokens, Vocab};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What can be wrong with a corpus file or an in-memory corpus.
#[derive(Debug, Error)]
pub enum CorpusError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path}:{line}: expected the header value {what} (a non-negative integer), found {found:?}"
    )]
    BadHeader {
        path: PathBuf,
        line: usize,
        what: &'static str,
        found: String,
    },
    #[error(
        "{path}:{line}: expected `docID wordID count` (three positive integers), found {found:?}"
    )]
    BadEntry {
        path: PathBuf,
        line: usize,
        found: String,
    },
    #[error("{path}:{line}: document id {doc} is outside 1..={docs} (the header's D)")]
    DocOutOfRange {
        path: PathBuf,
        line: usize,
        doc: u64,
        docs: usize,
    },
    #[error("{path}:{line}: word id {word} is outside 1..={words} (the header's W)")]
    WordOutOfRange {
        path: PathBuf,
        line: usize,
        word: u64,
        words: usize,
    },
    #[error("{path}: the header announces NNZ = {expected} entries but the file has {found}")]
    EntryCountMismatch {
        path: PathBuf,
        expected: usize,
        found: usize,
    },
    #[error("{path}: the vocabulary has {found} words but the docword header says W = {expected}")]
    VocabTooShort {
        path: PathBuf,
        expected: usize,
        found: usize,
    },
    #[error("{path}:{line}: empty word in the vocabulary file")]
    EmptyVocabWord { path: PathBuf, line: usize },
    #[error("document {doc}, token {position}: word id {word} is outside the vocabulary of {words} words")]
    TokenOutOfRange {
        doc: usize,
        position: usize,
        word: u32,
        words: usize,
    },
    #[error("the corpus has {tokens} tokens; counts are u32, so at most {max} are supported")]
    TooManyTokens { tokens: u64, max: u64 },
    #[error("a vocabulary of {found} names was given for {words} words")]
    VocabLength { words: usize, found: usize },
}

/// Documents as sequences of word ids in `0..num_words`.
#[derive(Clone, Debug, PartialEq)]
pub struct Corpus {
    docs: Vec<Vec<u32>>,
    vocab: Vec<String>,
    num_words: usize,
}

/// Options for [`Corpus::read_text`].
#[derive(Clone, Debug, PartialEq)]
pub struct TextOptions {
    /// Words seen fewer times than this (after stop-word removal) are dropped.
    pub min_count: u64,
    /// Read at most this many lines (documents).
    pub max_docs: Option<usize>,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            min_count: 1,
            max_docs: None,
        }
    }
}

impl Corpus {
    /// Checks and assembles a corpus: every token `< num_words`, `vocab` empty (no names known)
    /// or of length `num_words`, and the token total within u32 counts.
    pub fn new(
        docs: Vec<Vec<u32>>,
        vocab: Vec<String>,
        num_words: usize,
    ) -> Result<Corpus, CorpusError> {
        if !vocab.is_empty() && vocab.len() != num_words {
            return Err(CorpusError::VocabLength {
                words: num_words,
                found: vocab.len(),
            });
        }
        let mut tokens = 0u64;
        for (doc, words) in docs.iter().enumerate() {
            tokens += words.len() as u64;
            if let Some(position) = words.iter().position(|&w| w as usize >= num_words) {
                return Err(CorpusError::TokenOutOfRange {
                    doc,
                    position,
                    word: words[position],
                    words: num_words,
                });
            }
        }
        if tokens > u32::MAX as u64 {
            return Err(CorpusError::TooManyTokens {
                tokens,
                max: u32::MAX as u64,
            });
        }
        Ok(Corpus {
            docs,
            vocab,
            num_words,
        })
    }

    /// Reads a UCI `docword` file (plain or `.gz`) and optionally its `vocab` file.
    pub fn read_uci(docword: &Path, vocab: Option<&Path>) -> Result<Corpus, CorpusError> {
        let reader = open(docword)?;
        let (docs, num_words) = parse_uci_docword(reader, docword)?;
        let names = match vocab {
            Some(path) => parse_uci_vocab(open(path)?, path, num_words)?,
            None => Vec::new(),
        };
        Corpus::new(docs, names, num_words)
    }

    /// Reads a plain-text corpus (plain or `.gz`), one document per line.
    pub fn read_text(path: &Path, options: &TextOptions) -> Result<Corpus, CorpusError> {
        let limit = options.max_docs.unwrap_or(usize::MAX);
        let mut counted = Vocab::new();
        for line in open(path)?.lines().take(limit) {
            let line = line.map_err(|source| io_error(path, source))?;
            for token in content_tokens(&line) {
                counted.add(&token);
            }
        }
        let vocab = counted.sorted_by_count(options.min_count);
        let mut docs = Vec::new();
        for line in open(path)?.lines().take(limit) {
            let line = line.map_err(|source| io_error(path, source))?;
            docs.push(vocab.encode(content_tokens(&line)).collect());
        }
        let num_words = vocab.len();
        Corpus::new(docs, vocab.words().to_vec(), num_words)
    }

    /// A corpus from in-memory documents, tokenized like [`Corpus::read_text`].
    pub fn from_texts<S: AsRef<str>>(texts: &[S], min_count: u64) -> Corpus {
        let vocab = Vocab::build(
            texts.iter().flat_map(|t| content_tokens(t.as_ref())),
            min_count,
        );
        let docs = texts
            .iter()
            .map(|t| vocab.encode(content_tokens(t.as_ref())).collect())
            .collect();
        Corpus {
            docs,
            vocab: vocab.words().to_vec(),
            num_words: vocab.len(),
        }
    }

    /// Token word ids of every document.
    pub fn docs(&self) -> &[Vec<u32>] {
        &self.docs
    }
    /// Token word ids of document `d`.
    pub fn doc(&self, d: usize) -> &[u32] {
        &self.docs[d]
    }
    /// Word names by id (empty when no vocabulary was given).
    pub fn vocab(&self) -> &[String] {
        &self.vocab
    }
    /// The name of word `id`, or `#id` when the corpus has no vocabulary.
    pub fn word_name(&self, id: u32) -> String {
        self.vocab
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| format!("#{id}"))
    }
    /// Vocabulary size W.
    pub fn num_words(&self) -> usize {
        self.num_words
    }
    /// Number of documents D.
    pub fn num_docs(&self) -> usize {
        self.docs.len()
    }
    /// Total tokens N.
    pub fn num_tokens(&self) -> usize {
        self.docs.iter().map(Vec::len).sum()
    }
}

fn io_error(path: &Path, source: std::io::Error) -> CorpusError {
    CorpusError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A buffered reader of `path`, decompressing when the name ends in `.gz`.
fn open(path: &Path) -> Result<Box<dyn BufRead>, CorpusError> {
    let file = File::open(path).map_err(|source| io_error(path, source))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::with_capacity(1 << 16, reader)))
}

/// Parses a UCI docword stream; `path` only names it in errors. Returns the documents and W.
pub fn parse_uci_docword<R: BufRead>(
    reader: R,
    path: &Path,
) -> Result<(Vec<Vec<u32>>, usize), CorpusError> {
    let mut lines = reader.lines().enumerate().filter_map(|(i, l)| match l {
        Ok(s) if s.trim().is_empty() => None,
        other => Some((i + 1, other)),
    });
    let mut header = [0usize; 3];
    for (slot, what) in header.iter_mut().zip(["D", "W", "NNZ"]) {
        let (line, text) = match lines.next() {
            Some((line, text)) => (line, text.map_err(|e| io_error(path, e))?),
            None => (0, String::new()),
        };
        *slot = text.trim().parse().map_err(|_| CorpusError::BadHeader {
            path: path.to_path_buf(),
            line,
            what,
            found: text.clone(),
        })?;
    }
    let [num_docs, num_words, nnz] = header;
    if num_words > u32::MAX as usize {
        return Err(CorpusError::BadHeader {
            path: path.to_path_buf(),
            line: 2,
            what: "W",
            found: num_words.to_string(),
        });
    }
    let mut docs: Vec<Vec<u32>> = vec![Vec::new(); num_docs];
    let mut entries = 0usize;
    let mut tokens = 0u64;
    for (line, text) in lines {
        let text = text.map_err(|e| io_error(path, e))?;
        let bad = || CorpusError::BadEntry {
            path: path.to_path_buf(),
            line,
            found: text.clone(),
        };
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>());
        let (doc, word, count) = match (fields.next(), fields.next(), fields.next(), fields.next())
        {
            (Some(Ok(d)), Some(Ok(w)), Some(Ok(c)), None) if c > 0 => (d, w, c),
            _ => return Err(bad()),
        };
        if doc == 0 || doc > num_docs as u64 {
            return Err(CorpusError::DocOutOfRange {
                path: path.to_path_buf(),
                line,
                doc,
                docs: num_docs,
            });
        }
        if word == 0 || word > num_words as u64 {
            return Err(CorpusError::WordOutOfRange {
                path: path.to_path_buf(),
                line,
                word,
                words: num_words,
            });
        }
        tokens += count;
        if tokens > u32::MAX as u64 {
            return Err(CorpusError::TooManyTokens {
                tokens,
                max: u32::MAX as u64,
            });
        }
        let target = &mut docs[doc as usize - 1];
        target.extend(std::iter::repeat_n(word as u32 - 1, count as usize));
        entries += 1;
    }
    if entries != nnz {
        return Err(CorpusError::EntryCountMismatch {
            path: path.to_path_buf(),
            expected: nnz,
            found: entries,
        });
    }
    Ok((docs, num_words))
}

/// Parses a UCI vocabulary stream: the first `num_words` lines name words 1..=W; any further
/// lines are ignored.
pub fn parse_uci_vocab<R: BufRead>(
    reader: R,
    path: &Path,
    num_words: usize,
) -> Result<Vec<String>, CorpusError> {
    let mut names = Vec::with_capacity(num_words);
    for (i, line) in reader.lines().enumerate().take(num_words) {
        let line = line.map_err(|e| io_error(path, e))?;
        let word = line.trim();
        if word.is_empty() {
            return Err(CorpusError::EmptyVocabWord {
                path: path.to_path_buf(),
                line: i + 1,
            });
        }
        names.push(word.to_owned());
    }
    if names.len() < num_words {
        return Err(CorpusError::VocabTooShort {
            path: path.to_path_buf(),
            expected: num_words,
            found: names.len(),
        });
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Vec<Vec<u32>>, usize), CorpusError> {
        parse_uci_docword(text.as_bytes(), Path::new("test.txt"))
    }

    #[test]
    fn uci_expands_counts_into_tokens_in_file_order() {
        let (docs, words) = parse("3\n5\n4\n1 2 2\n1 5 1\n3 1 3\n1 3 1\n").unwrap();
        assert_eq!(words, 5);
        assert_eq!(docs, vec![vec![1, 1, 4, 2], vec![], vec![0, 0, 0]]);
    }

    #[test]
    fn uci_errors_name_the_line() {
        let cases: [(&str, usize, &str); 6] = [
            ("2\n5\n1\n1 2\n", 4, "BadEntry"),
            ("2\n5\n2\n1 2 1\n1 x 1\n", 5, "BadEntry"),
            ("2\n5\n1\n3 2 1\n", 4, "DocOutOfRange"),
            ("2\n5\n2\n1 2 1\n\n2 6 1\n", 6, "WordOutOfRange"),
            ("2\n5\n1\n1 2 0\n", 4, "BadEntry"),
            ("2\nfive\n1\n1 2 1\n", 2, "BadHeader"),
        ];
        for (text, expected_line, kind) in cases {
            let err = parse(text).unwrap_err();
            let line = match &err {
                CorpusError::BadEntry { line, .. }
                | CorpusError::DocOutOfRange { line, .. }
                | CorpusError::WordOutOfRange { line, .. }
                | CorpusError::BadHeader { line, .. } => *line,
                other => panic!("{text:?}: expected {kind}, got {other}"),
            };
            assert_eq!(line, expected_line, "{text:?}: {err}");
            assert!(format!("{err:?}").starts_with(kind), "{err:?}");
            assert!(err
                .to_string()
                .contains(&format!("test.txt:{expected_line}")));
        }
    }

    #[test]
    fn uci_entry_count_must_match_the_header() {
        let err = parse("1\n3\n3\n1 1 1\n1 2 1\n").unwrap_err();
        assert!(matches!(
            err,
            CorpusError::EntryCountMismatch {
                expected: 3,
                found: 2,
                ..
            }
        ));
    }

    #[test]
    fn vocab_tolerates_extra_lines_and_rejects_short_files() {
        let names = parse_uci_vocab("a\nb\nc\ntemp".as_bytes(), Path::new("v"), 3).unwrap();
        assert_eq!(names, ["a", "b", "c"]);
        let err = parse_uci_vocab("a\nb\n".as_bytes(), Path::new("v"), 3).unwrap_err();
        assert!(matches!(
            err,
            CorpusError::VocabTooShort {
                expected: 3,
                found: 2,
                ..
            }
        ));
    }

    #[test]
    fn from_texts_removes_stop_words_and_rare_words() {
        let c = Corpus::from_texts(&["The oil price", "oil and the bank", "Bank oil"], 2);
        assert_eq!(c.vocab(), &["oil", "bank"]);
        assert_eq!(c.docs(), &[vec![0], vec![0, 1], vec![1, 0]]);
        assert_eq!(c.num_tokens(), 5);
    }

    #[test]
    fn new_rejects_out_of_range_tokens() {
        let err = Corpus::new(vec![vec![0, 3]], Vec::new(), 3).unwrap_err();
        assert!(matches!(
            err,
            CorpusError::TokenOutOfRange {
                doc: 0,
                position: 1,
                word: 3,
                ..
            }
        ));
    }
}
