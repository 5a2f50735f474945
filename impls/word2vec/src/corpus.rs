//! Reading a corpus once into a vocabulary and a stream of word ids.
//!
//! The text (plain, or gzip when the path ends in `.gz` or the file starts with the gzip magic
//! bytes) is streamed through a byte tokenizer that splits on ASCII space, tab, carriage return
//! and newline, as word2vec.c's `ReadWord` does; a newline ends a sentence. Words are counted and
//! recorded as provisional ids in one pass (a hash map lookup per token, O(tokens)); then the
//! vocabulary keeps the words seen at least `min_count` times, numbered by decreasing count
//! (ties by the word: [`Vocab::sorted_by_count`]), and the id stream is remapped, dropping the
//! rare words, so training reads 4 bytes per word from memory (17.5M words: 70 MB).
//!
//! Sentence structure is kept as the positions where lines end; training cuts sentences further
//! into at most [`MAX_SENTENCE_WORDS`] kept words, as word2vec.c does, so a corpus that is one
//! long line (text8) trains in 1000-word sentences. Tokens are not lowercased (word2vec.c does
//! not either); evaluation is case-insensitive instead.

use flate2::read::MultiGzDecoder;
use parbench_common::text::Vocab;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// word2vec.c's `MAX_SENTENCE_LENGTH`: sentences longer than this many kept words are cut.
pub const MAX_SENTENCE_WORDS: usize = 1000;

/// What can be wrong with a corpus.
#[derive(Debug, Error)]
pub enum CorpusError {
    /// The corpus file could not be opened.
    #[error("cannot read corpus {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The text holds no word at all.
    #[error("{path}: the corpus has no words (it is empty or only whitespace)")]
    Empty {
        /// The file (or the name given to the reader).
        path: PathBuf,
    },
    /// A word is not valid UTF-8.
    #[error("{path}:{line}: byte {offset} starts a word that is not valid UTF-8 (convert the file to UTF-8, e.g. with iconv)")]
    NotUtf8 {
        /// The file (or the name given to the reader).
        path: PathBuf,
        /// The 1-based line of the word.
        line: u64,
        /// 0-based byte offset of the word in the (decompressed) text.
        offset: u64,
    },
    /// The text could not be read on: an I/O error, or a damaged gzip stream.
    #[error("{path}:{line}: cannot read the corpus on: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The 1-based line being read.
        line: u64,
        /// What reading gave.
        source: io::Error,
    },
    /// No word reaches `min_count`, so the vocabulary would be empty.
    #[error("{path}: no word occurs at least {min_count} times ({distinct} distinct words in {tokens} tokens); lower min_count")]
    EmptyVocabulary {
        /// The file (or the name given to the reader).
        path: PathBuf,
        /// The `min_count` asked for.
        min_count: u64,
        /// Distinct words in the text.
        distinct: usize,
        /// Tokens in the text (up to `max_tokens`).
        tokens: u64,
    },
}

/// How to read a corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusOptions {
    /// Words seen fewer times are dropped from the vocabulary and the stream (word2vec.c: 5).
    pub min_count: u64,
    /// Keep only this many of the most frequent words (pWord2Vec Table II); `None` keeps all.
    pub max_vocab: Option<usize>,
    /// Read only the first this many tokens (quick runs on a prefix); `None` reads everything.
    pub max_tokens: Option<u64>,
}

impl Default for CorpusOptions {
    fn default() -> Self {
        CorpusOptions {
            min_count: 5,
            max_vocab: None,
            max_tokens: None,
        }
    }
}

/// A corpus encoded once: the vocabulary and every in-vocabulary token as a `u32` id.
#[derive(Clone, Debug)]
pub struct Corpus {
    vocab: Vocab,
    ids: Vec<u32>,
    /// Strictly increasing positions in `ids` where a line (sentence) ends; the last is
    /// `ids.len()`.
    line_ends: Vec<usize>,
}

impl Corpus {
    /// Reads and encodes the corpus at `path`.
    pub fn read(path: &Path, options: &CorpusOptions) -> Result<Corpus, CorpusError> {
        let io_err = |source| CorpusError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io_err)?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let gz = path.extension().is_some_and(|e| e == "gz")
            || reader
                .fill_buf()
                .map_err(io_err)?
                .starts_with(&[0x1f, 0x8b]);
        let source: Box<dyn Read> = if gz {
            Box::new(MultiGzDecoder::new(reader))
        } else {
            Box::new(reader)
        };
        Corpus::from_reader(source, path, options)
    }

    /// Encodes in-memory text (tests, small corpora); errors name the path `<memory>`.
    pub fn from_text(text: &str, options: &CorpusOptions) -> Result<Corpus, CorpusError> {
        Corpus::from_reader(text.as_bytes(), Path::new("<memory>"), options)
    }

    /// Encodes the text `source` yields; `path` only names it in errors.
    pub fn from_reader<R: Read>(
        source: R,
        path: &Path,
        options: &CorpusOptions,
    ) -> Result<Corpus, CorpusError> {
        let mut counted = Vocab::new();
        let mut raw_ids: Vec<u32> = Vec::new();
        let mut line_ends: Vec<usize> = Vec::new();
        let mut reader = BufReader::with_capacity(1 << 20, source);
        let mut word: Vec<u8> = Vec::with_capacity(64);
        let mut offset: u64 = 0;
        let mut word_start: u64 = 0;
        // 1-based line of the byte being read, and of the word being read (errors name them).
        let mut line: u64 = 1;
        let mut word_line: u64 = 1;
        let max_tokens = options.max_tokens.unwrap_or(u64::MAX);
        let mut push_word = |word: &mut Vec<u8>, (line, start): (u64, u64), ids: &mut Vec<u32>| {
            let text = std::str::from_utf8(word).map_err(|_| CorpusError::NotUtf8 {
                path: path.to_path_buf(),
                line,
                offset: start,
            })?;
            ids.push(counted.add(text));
            word.clear();
            Ok::<(), CorpusError>(())
        };
        'read: loop {
            let buf = reader.fill_buf().map_err(|source| CorpusError::Read {
                path: path.to_path_buf(),
                line,
                source,
            })?;
            if buf.is_empty() {
                break;
            }
            let len = buf.len();
            for &b in buf {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => {
                        if !word.is_empty() {
                            push_word(&mut word, (word_line, word_start), &mut raw_ids)?;
                            if raw_ids.len() as u64 >= max_tokens {
                                break 'read;
                            }
                        }
                        if b == b'\n' {
                            line += 1;
                            if line_ends.last() != Some(&raw_ids.len()) {
                                line_ends.push(raw_ids.len());
                            }
                        }
                    }
                    _ => {
                        if word.is_empty() {
                            word_start = offset;
                            word_line = line;
                        }
                        word.push(b);
                    }
                }
                offset += 1;
            }
            reader.consume(len);
        }
        if !word.is_empty() && (raw_ids.len() as u64) < max_tokens {
            push_word(&mut word, (word_line, word_start), &mut raw_ids)?;
        }
        if raw_ids.is_empty() {
            return Err(CorpusError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut vocab = counted.sorted_by_count(options.min_count.max(1));
        if let Some(max) = options.max_vocab {
            if vocab.len() > max {
                vocab = truncated(&vocab, max);
            }
        }
        if vocab.is_empty() {
            return Err(CorpusError::EmptyVocabulary {
                path: path.to_path_buf(),
                min_count: options.min_count,
                distinct: counted.len(),
                tokens: raw_ids.len() as u64,
            });
        }
        // Provisional id -> final id, u32::MAX for dropped words.
        let remap: Vec<u32> = counted
            .words()
            .iter()
            .map(|w| vocab.id(w).unwrap_or(u32::MAX))
            .collect();
        let mut ids = Vec::with_capacity(raw_ids.len());
        let mut ends = Vec::with_capacity(line_ends.len() + 1);
        let mut next_end = line_ends.iter().peekable();
        for (pos, &raw) in raw_ids.iter().enumerate() {
            while next_end.peek().is_some_and(|&&e| e == pos) {
                next_end.next();
                if ends.last() != Some(&ids.len()) && !ids.is_empty() {
                    ends.push(ids.len());
                }
            }
            let id = remap[raw as usize];
            if id != u32::MAX {
                ids.push(id);
            }
        }
        if ends.last() != Some(&ids.len()) {
            ends.push(ids.len());
        }
        // Counts must describe the encoded stream (they drive subsampling and negatives), so a
        // prefix read with max_tokens has the prefix's counts, which sorted_by_count gave.
        Ok(Corpus {
            vocab,
            ids,
            line_ends: ends,
        })
    }

    /// Builds a corpus from ids and line ends directly (tests, synthetic corpora). `line_ends`
    /// must be strictly increasing and end at `ids.len()`; the counts of `vocab` are replaced
    /// by the occurrences in `ids`.
    ///
    /// # Panics
    /// When an id is outside the vocabulary or `line_ends` is malformed.
    pub fn from_ids(words: &[&str], ids: Vec<u32>, line_ends: Vec<usize>) -> Corpus {
        assert!(
            line_ends.windows(2).all(|w| w[0] < w[1]) && line_ends.last() == Some(&ids.len()),
            "line_ends must increase strictly and end at ids.len()"
        );
        let mut counts = vec![0u64; words.len()];
        for &id in &ids {
            counts[id as usize] += 1;
        }
        let mut vocab = Vocab::new();
        for (w, &c) in words.iter().zip(&counts) {
            vocab.add_count(w, c);
        }
        assert_eq!(vocab.len(), words.len(), "words must be distinct");
        Corpus {
            vocab,
            ids,
            line_ends,
        }
    }

    /// The vocabulary: words with their counts, ids by decreasing count.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Every in-vocabulary token, in corpus order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Positions in [`Corpus::ids`] where lines end (strictly increasing, last = `ids().len()`).
    pub fn line_ends(&self) -> &[usize] {
        &self.line_ends
    }

    /// Tokens trained per epoch (word2vec.c's `train_words`).
    pub fn num_words(&self) -> u64 {
        self.ids.len() as u64
    }
}

/// The `max` most frequent words of `vocab`, counts kept.
fn truncated(vocab: &Vocab, max: usize) -> Vocab {
    let mut out = Vocab::new();
    for id in 0..max as u32 {
        out.add_count(vocab.word(id), vocab.count(id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(min_count: u64) -> CorpusOptions {
        CorpusOptions {
            min_count,
            ..CorpusOptions::default()
        }
    }

    #[test]
    fn encodes_by_frequency_drops_rare_words_and_keeps_line_ends() {
        let c = Corpus::from_text("b a b\n\nc a b x\r\n a", &opts(2)).unwrap();
        assert_eq!(c.vocab().words(), &["a", "b"]);
        assert_eq!(c.vocab().counts(), &[3, 3]);
        // b a b | a b | a   (c and x dropped)
        assert_eq!(c.ids(), &[1, 0, 1, 0, 1, 0]);
        assert_eq!(c.line_ends(), &[3, 5, 6]);
        assert_eq!(c.num_words(), 6);
    }

    #[test]
    fn max_tokens_reads_a_prefix_and_max_vocab_keeps_the_most_frequent() {
        let c = Corpus::from_text(
            "a a a b b c d",
            &CorpusOptions {
                min_count: 1,
                max_vocab: Some(2),
                max_tokens: Some(6),
            },
        )
        .unwrap();
        assert_eq!(c.vocab().words(), &["a", "b"]);
        assert_eq!(c.ids(), &[0, 0, 0, 1, 1]);
        assert_eq!(c.line_ends(), &[5]);
    }

    #[test]
    fn bad_corpora_give_clear_errors() {
        assert!(matches!(
            Corpus::from_text(" \n\t ", &opts(1)),
            Err(CorpusError::Empty { .. })
        ));
        let err = Corpus::from_text("a b c", &opts(5)).unwrap_err();
        assert!(matches!(
            err,
            CorpusError::EmptyVocabulary {
                distinct: 3,
                tokens: 3,
                ..
            }
        ));
        assert!(err.to_string().contains("lower min_count"), "{err}");
        let bytes: &[u8] = b"ok fine \xff\xfe bad";
        let err = Corpus::from_reader(bytes, Path::new("x.txt"), &opts(1)).unwrap_err();
        assert!(
            matches!(err, CorpusError::NotUtf8 { offset: 8, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn reads_plain_and_gzip_files_alike() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("w2v-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "the cat the dog\nthe end\n";
        let plain = dir.join("c.txt");
        std::fs::write(&plain, text).unwrap();
        let gz = dir.join("c.txt.gz");
        let mut enc = GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap();
        let a = Corpus::read(&plain, &opts(1)).unwrap();
        let b = Corpus::read(&gz, &opts(1)).unwrap();
        assert_eq!(a.ids(), b.ids());
        assert_eq!(a.line_ends(), &[4, 6]);
        assert_eq!(a.vocab().words(), b.vocab().words());
        let missing = Corpus::read(&dir.join("nope.txt"), &opts(1)).unwrap_err();
        assert!(matches!(missing, CorpusError::Io { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
