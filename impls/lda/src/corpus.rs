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
//! - Any dataset of the data dir by its name ([`Corpus::read_dataset`]): UCI with its vocabulary
//!   found next to it ([`uci_vocab_for`]), a tar archive of one post per file (20 Newsgroups,
//!   read by `parbench_common::corpora`, mail headers stripped), or text.
//!
//! Every malformed input is a [`CorpusError`] naming the file and the 1-based line. Header counts
//! are not trusted for allocation beyond what the crate can hold (u32 ids and token counts):
//! memory grows with what the file holds, except the table of `D` documents, which is allocated
//! fallibly.

use flate2::read::MultiGzDecoder;
use parbench_common::corpora::{read_labeled_tar_gz, strip_mail_header, CorporaError};
use parbench_common::text::{content_tokens, Vocab};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What can be wrong with a corpus file or an in-memory corpus.
#[derive(Debug, Error)]
pub enum CorpusError {
    /// The file could not be opened.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line could not be read: it is not UTF-8, or the file (or its gzip stream) is damaged.
    #[error("{path}:{line}: cannot read the line: {source}")]
    ReadLine {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What reading it gave.
        source: std::io::Error,
    },
    /// A header value beyond what a corpus here can hold.
    #[error("{path}:{line}: the header value {what} = {value} is too large ({limit})")]
    HeaderTooLarge {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// Which header value: D or W.
        what: &'static str,
        /// Its value.
        value: usize,
        /// Why it is too large.
        limit: &'static str,
    },
    /// A header line of a UCI docword file (D, W or NNZ) is not a non-negative integer.
    #[error(
        "{path}:{line}: expected the header value {what} (a non-negative integer), found {found:?}"
    )]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// Which header value was expected: D, W or NNZ.
        what: &'static str,
        /// The line as found.
        found: String,
    },
    /// A docword entry line is not three positive integers `docID wordID count`.
    #[error(
        "{path}:{line}: expected `docID wordID count` (three positive integers), found {found:?}"
    )]
    BadEntry {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The line as found.
        found: String,
    },
    /// A docword entry names a document outside `1..=D`.
    #[error("{path}:{line}: document id {doc} is outside 1..={docs} (the header's D)")]
    DocOutOfRange {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The 1-based document id found.
        doc: u64,
        /// The header's D.
        docs: usize,
    },
    /// A docword entry names a word outside `1..=W`.
    #[error("{path}:{line}: word id {word} is outside 1..={words} (the header's W)")]
    WordOutOfRange {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The 1-based word id found.
        word: u64,
        /// The header's W.
        words: usize,
    },
    /// The docword file has another number of entry lines than its header's NNZ.
    #[error("{path}:{line}: the file ends with {found} entries, but the header announces NNZ = {expected}")]
    EntryCountMismatch {
        /// The file.
        path: PathBuf,
        /// The file's last line.
        line: usize,
        /// The header's NNZ.
        expected: usize,
        /// Entry lines read.
        found: usize,
    },
    /// The vocabulary file has fewer words than the docword header's W.
    #[error("{path}:{line}: the vocabulary ends after {found} words, but the docword header says W = {expected}")]
    VocabTooShort {
        /// The vocabulary file.
        path: PathBuf,
        /// The line where the next word was expected.
        line: usize,
        /// The docword header's W.
        expected: usize,
        /// Words the vocabulary file has.
        found: usize,
    },
    /// A line of the vocabulary file is empty.
    #[error("{path}:{line}: empty word in the vocabulary file")]
    EmptyVocabWord {
        /// The vocabulary file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
    },
    /// An in-memory document ([`Corpus::new`]) holds a word id not below the number of words.
    #[error("document {doc}, token {position}: word id {word} is outside the vocabulary of {words} words")]
    TokenOutOfRange {
        /// 0-based document.
        doc: usize,
        /// 0-based position of the token in the document.
        position: usize,
        /// The word id found.
        word: u32,
        /// The number of words.
        words: usize,
    },
    /// The corpus has more tokens than the `u32` topic counts can hold.
    #[error("the corpus has {tokens} tokens; counts are u32, so at most {max} are supported")]
    TooManyTokens {
        /// Tokens in the corpus.
        tokens: u64,
        /// `u32::MAX`.
        max: u64,
    },
    /// The counts of a docword file add up to more tokens than u32 counts allow.
    #[error("{path}:{line}: the counts so far add up to {tokens} tokens; counts are u32, so at most {max} are supported")]
    TooManyTokensAt {
        /// The file.
        path: PathBuf,
        /// The 1-based line where the total went over.
        line: usize,
        /// The total so far.
        tokens: u64,
        /// The most supported.
        max: u64,
    },
    /// [`Corpus::new`] got word names, but not one per word.
    #[error("a vocabulary of {found} names was given for {words} words")]
    VocabLength {
        /// The number of words.
        words: usize,
        /// Names given.
        found: usize,
    },
    /// An archive of one document per file could not be read (the error names the archive).
    #[error(transparent)]
    Archive(#[from] CorporaError),
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
        let mut lines = NumberedLines::new(open(path)?, path);
        while lines.last < limit {
            let Some((_, line)) = lines.next_line()? else {
                break;
            };
            for token in content_tokens(&line) {
                counted.add(&token);
            }
        }
        let vocab = counted.sorted_by_count(options.min_count);
        let mut docs = Vec::new();
        let mut lines = NumberedLines::new(open(path)?, path);
        while lines.last < limit {
            let Some((_, line)) = lines.next_line()? else {
                break;
            };
            docs.push(vocab.encode(content_tokens(&line)).collect());
        }
        let num_words = vocab.len();
        Corpus::new(docs, vocab.words().to_vec(), num_words)
    }

    /// Reads a dataset by its file name: UCI (`docword.*`, with the `vocab.*` file next to it
    /// when there is one, see [`uci_vocab_for`]), a `.tar.gz` / `.tgz` of one document per file
    /// (20 Newsgroups; mail headers stripped, tokenized like [`Corpus::from_texts`]), or text
    /// with one document per line (`.gz` allowed, see [`Corpus::read_text`]). `docs` keeps the
    /// first documents (UCI: the first ids; an archive: the first files); `min_count` applies to
    /// the text formats.
    pub fn read_dataset(
        path: &Path,
        docs: Option<usize>,
        min_count: u64,
    ) -> Result<Corpus, CorpusError> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("docword") {
            let vocab = uci_vocab_for(path);
            let corpus = Corpus::read_uci(path, vocab.as_deref())?;
            return match docs {
                Some(n) if n < corpus.num_docs() => Corpus::new(
                    corpus.docs()[..n].to_vec(),
                    corpus.vocab().to_vec(),
                    corpus.num_words(),
                ),
                _ => Ok(corpus),
            };
        }
        if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            let posts = read_labeled_tar_gz(path, docs)?;
            let texts: Vec<&str> = posts.iter().map(|p| strip_mail_header(&p.text)).collect();
            return Ok(Corpus::from_texts(&texts, min_count));
        }
        Corpus::read_text(
            path,
            &TextOptions {
                min_count,
                max_docs: docs,
            },
        )
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

/// The UCI vocabulary file next to a `docword.*` file (`docword.kos.txt` -> `vocab.kos.txt`,
/// a `.gz` suffix dropped), if it exists.
pub fn uci_vocab_for(docword: &Path) -> Option<PathBuf> {
    let name = docword.file_name()?.to_str()?;
    let rest = name.strip_prefix("docword")?;
    let rest = rest.strip_suffix(".gz").unwrap_or(rest);
    let vocab = docword.with_file_name(format!("vocab{rest}"));
    vocab.is_file().then_some(vocab)
}

fn io_error(path: &Path, source: std::io::Error) -> CorpusError {
    CorpusError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// At most this many vocabulary names are reserved before they are read: the header's W is the
/// file's word, not a fact.
const MAX_PREALLOCATED_NAMES: usize = 1 << 12;

/// The lines of a file, numbered from 1, remembering the last one read (errors at the end of the
/// file name it).
struct NumberedLines<'p, R> {
    lines: std::io::Lines<R>,
    path: &'p Path,
    last: usize,
}

impl<'p, R: BufRead> NumberedLines<'p, R> {
    fn new(reader: R, path: &'p Path) -> Self {
        NumberedLines {
            lines: reader.lines(),
            path,
            last: 0,
        }
    }

    /// The next line, `None` at the end of the file. A line that cannot be read (not UTF-8, a
    /// damaged gzip stream) is an error naming it.
    fn next_line(&mut self) -> Result<Option<(usize, String)>, CorpusError> {
        let Some(line) = self.lines.next() else {
            return Ok(None);
        };
        self.last += 1;
        let n = self.last;
        line.map(|l| Some((n, l)))
            .map_err(|source| CorpusError::ReadLine {
                path: self.path.to_path_buf(),
                line: n,
                source,
            })
    }

    /// The next line that is not blank.
    fn next_nonblank(&mut self) -> Result<Option<(usize, String)>, CorpusError> {
        while let Some((n, l)) = self.next_line()? {
            if !l.trim().is_empty() {
                return Ok(Some((n, l)));
            }
        }
        Ok(None)
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
    let mut lines = NumberedLines::new(reader, path);
    // (value, line) of D, W and NNZ.
    let mut header = [(0usize, 0usize); 3];
    for (slot, what) in header.iter_mut().zip(["D", "W", "NNZ"]) {
        let (line, text) = lines
            .next_nonblank()?
            .unwrap_or((lines.last + 1, String::new()));
        let value = text.trim().parse().map_err(|_| CorpusError::BadHeader {
            path: path.to_path_buf(),
            line,
            what,
            found: text.clone(),
        })?;
        *slot = (value, line);
    }
    let [(num_docs, docs_line), (num_words, words_line), (nnz, _)] = header;
    // Word ids are u32, and so is the token total: a corpus of more than u32::MAX documents
    // could not give each a token. Beyond that a header is absurd, and D sizes a table that is
    // allocated before any entry is read.
    for (value, line, what) in [(num_docs, docs_line, "D"), (num_words, words_line, "W")] {
        if value > u32::MAX as usize {
            return Err(CorpusError::HeaderTooLarge {
                path: path.to_path_buf(),
                line,
                what,
                value,
                limit: "at most 4294967295",
            });
        }
    }
    // D empty documents up front (trailing documents may have no entry): up to ~100 GB for a
    // header of u32::MAX, so refuse what cannot be allocated instead of aborting.
    let mut docs: Vec<Vec<u32>> = Vec::new();
    docs.try_reserve_exact(num_docs)
        .map_err(|_| CorpusError::HeaderTooLarge {
            path: path.to_path_buf(),
            line: docs_line,
            what: "D",
            value: num_docs,
            limit: "the document table does not fit in memory",
        })?;
    docs.resize_with(num_docs, Vec::new);
    let mut entries = 0usize;
    let mut tokens = 0u64;
    while let Some((line, text)) = lines.next_nonblank()? {
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
        // Saturating: a count near u64::MAX would overflow the sum (a panic in debug builds).
        tokens = tokens.saturating_add(count);
        if tokens > u32::MAX as u64 {
            return Err(CorpusError::TooManyTokensAt {
                path: path.to_path_buf(),
                line,
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
            line: lines.last,
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
    let mut names = Vec::with_capacity(num_words.min(MAX_PREALLOCATED_NAMES));
    let mut lines = NumberedLines::new(reader, path);
    while names.len() < num_words {
        let Some((line, text)) = lines.next_line()? else {
            break;
        };
        let word = text.trim();
        if word.is_empty() {
            return Err(CorpusError::EmptyVocabWord {
                path: path.to_path_buf(),
                line,
            });
        }
        names.push(word.to_owned());
    }
    if names.len() < num_words {
        return Err(CorpusError::VocabTooShort {
            path: path.to_path_buf(),
            line: lines.last + 1,
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
    fn datasets_are_read_by_name_with_the_uci_vocabulary_found_beside_them() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("lda-dataset-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let docword = dir.join("docword.tiny.txt");
        std::fs::write(&docword, "3\n2\n3\n1 1 2\n2 2 1\n3 1 1\n").unwrap();
        assert_eq!(uci_vocab_for(&docword), None);
        let corpus = Corpus::read_dataset(&docword, Some(2), 5).unwrap();
        assert_eq!(corpus.docs(), &[vec![0, 0], vec![1]]);
        assert!(corpus.vocab().is_empty());
        std::fs::write(dir.join("vocab.tiny.txt"), "oil\nbank\n").unwrap();
        assert_eq!(uci_vocab_for(&docword), Some(dir.join("vocab.tiny.txt")));
        assert_eq!(
            uci_vocab_for(&dir.join("docword.tiny.txt.gz")),
            Some(dir.join("vocab.tiny.txt"))
        );
        let corpus = Corpus::read_dataset(&docword, None, 5).unwrap();
        assert_eq!(
            (corpus.num_docs(), corpus.vocab()),
            (3, &["oil".to_string(), "bank".to_string()][..])
        );
        let text = dir.join("docs.txt");
        std::fs::write(&text, "oil bank\nthe oil\noil\n").unwrap();
        let corpus = Corpus::read_dataset(&text, Some(2), 2).unwrap();
        assert_eq!(corpus.docs(), &[vec![0], vec![0]]);
        let archive = dir.join("posts.tar.gz");
        std::fs::write(&archive, b"not an archive").unwrap();
        let err = Corpus::read_dataset(&archive, None, 1).unwrap_err();
        assert!(matches!(err, CorpusError::Archive(_)), "{err}");
        assert!(err.to_string().contains("posts.tar.gz"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
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
