//! Word vectors in the word2vec text format.
//!
//! Format: a header line `V d`, then `V` lines `word x1 ... xd` separated by spaces (trailing
//! space allowed, as the original word2vec tool writes). Files without the header (GloVe's format)
//! are read too: the dimension is then taken from the first vector line. A path ending in `.gz`, or
//! a file starting with the gzip magic bytes, is decompressed on the fly.
//!
//! Reading is one pass over the lines, O(V d) parses, keeping the vectors as one row-major `f64`
//! array. Every error names the file, the 1-based line and what was expected there. A word that
//! appears twice keeps its first vector; the later lines are counted in [`ReadStats`].
//!
//! Writing uses Rust's shortest round-trip formatting of `f64`, so a written file reads back to
//! exactly the same values.

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What can be wrong with an embeddings file or an embeddings table.
#[derive(Debug, Error)]
pub enum EmbeddingsError {
    /// The file could not be opened or read.
    #[error("cannot read embeddings file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The file could not be created or written.
    #[error("cannot write embeddings file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The first line is blank, or the file has no lines at all.
    #[error("{path}:1: the first line is empty (expected a header line \"<words> <dimension>\" or a first vector line)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A line could not be read: the file (or its gzip stream) is damaged.
    #[error("{path}:{line}: cannot read the line: {source}")]
    ReadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The I/O error.
        source: io::Error,
    },
    /// A line is not valid UTF-8.
    #[error("{path}:{line}: the line is not valid UTF-8")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// The first line looks like a header (two fields) but is not two positive integers.
    #[error("{path}:1: bad header {found:?}: expected \"<words> <dimension>\" with both positive integers")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// The first line as read, trimmed.
        found: String,
    },
    /// A vector line has a different number of components than the dimension.
    #[error("{path}:{line}: word {word:?} has {found} numbers, expected {dim} (the dimension {source_of_dim})")]
    WrongDimension {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The word the line starts with.
        word: String,
        /// Number of components on the line.
        found: usize,
        /// The dimension every line must have.
        dim: usize,
        /// Where `dim` came from, as a phrase for the message ("given by the header", "of the first
        /// vector line").
        source_of_dim: &'static str,
    },
    /// A component does not parse as a number.
    #[error(
        "{path}:{line}: component {component} of word {word:?} is {text:?}, expected a number"
    )]
    BadNumber {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The word the line starts with.
        word: String,
        /// 0-based index of the component within the vector.
        component: usize,
        /// The component's text.
        text: String,
    },
    /// A component parses but is NaN or infinite.
    #[error("{path}:{line}: component {component} of word {word:?} is not finite ({text})")]
    NotFinite {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The word the line starts with.
        word: String,
        /// 0-based index of the component within the vector.
        component: usize,
        /// The component's text.
        text: String,
    },
    /// The header's word count differs from the number of vector lines.
    #[error(
        "{path}:1: the header promises {expected} words, but the file has {found} vector lines"
    )]
    CountMismatch {
        /// The file.
        path: PathBuf,
        /// Words the header announces.
        expected: usize,
        /// Vector lines in the file.
        found: usize,
    },
    /// A table's vector array is not `words x dim` long.
    #[error("embeddings table: {values} values for {words} words of dimension {dim}")]
    Shape {
        /// Number of words.
        words: usize,
        /// The dimension.
        dim: usize,
        /// Length of the vector array.
        values: usize,
    },
    /// A table lists the same word twice.
    #[error("embeddings table: word {word:?} appears twice (ids {first} and {second})")]
    DuplicateWord {
        /// The word.
        word: String,
        /// Row of its first occurrence.
        first: usize,
        /// Row of its second occurrence.
        second: usize,
    },
    /// A table's word cannot be written as one field of the text format.
    #[error("embeddings table: word {index} is {word:?}; words must be non-empty and contain no whitespace")]
    BadWord {
        /// Row of the word.
        index: usize,
        /// The word (empty, or containing whitespace).
        word: String,
    },
    /// A table was given dimension 0.
    #[error("embeddings table: dimension must be positive")]
    ZeroDimension,
}

/// A table of word vectors: `words[i]` has the vector `vecs[i * dim..(i + 1) * dim]`.
///
/// The fields are public for reading; build or change tables through [`Embeddings::new`] so that
/// `index` stays the inverse of `words`.
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    /// Word of each row; no duplicates, no whitespace.
    pub words: Vec<String>,
    /// Components per vector (at least 1).
    pub dim: usize,
    /// Row-major `words.len() x dim`.
    pub vecs: Vec<f64>,
    /// Word -> row.
    pub index: HashMap<String, u32>,
}

/// What reading a file found besides the vectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Vector lines read (including duplicates).
    pub lines: usize,
    /// Vector lines skipped because their word had appeared before.
    pub duplicate_words: usize,
    /// Whether the file had a `V d` header.
    pub had_header: bool,
}

impl Embeddings {
    /// Checks and assembles a table: `dim > 0`, `vecs.len() == words.len() * dim`, words distinct,
    /// non-empty and without whitespace (so the table can be written back and read again).
    /// Values are not checked here; the consumers check what they need (finiteness for WMD).
    pub fn new(
        words: Vec<String>,
        dim: usize,
        vecs: Vec<f64>,
    ) -> Result<Embeddings, EmbeddingsError> {
        if dim == 0 {
            return Err(EmbeddingsError::ZeroDimension);
        }
        if vecs.len() != words.len() * dim {
            return Err(EmbeddingsError::Shape {
                words: words.len(),
                dim,
                values: vecs.len(),
            });
        }
        if words.len() > u32::MAX as usize {
            return Err(EmbeddingsError::Shape {
                words: words.len(),
                dim,
                values: vecs.len(),
            });
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            if w.is_empty() || w.chars().any(char::is_whitespace) {
                return Err(EmbeddingsError::BadWord {
                    index: i,
                    word: w.clone(),
                });
            }
            if let Some(&first) = index.get(w.as_str()) {
                return Err(EmbeddingsError::DuplicateWord {
                    word: w.clone(),
                    first: first as usize,
                    second: i,
                });
            }
            index.insert(w.clone(), i as u32);
        }
        Ok(Embeddings {
            words,
            dim,
            vecs,
            index,
        })
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the table has no words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Row of `word`, if present.
    pub fn id(&self, word: &str) -> Option<u32> {
        self.index.get(word).copied()
    }

    /// Vector of row `id`.
    ///
    /// # Panics
    /// When `id >= len()`.
    pub fn vec(&self, id: usize) -> &[f64] {
        &self.vecs[id * self.dim..(id + 1) * self.dim]
    }

    /// Vector of `word`, if present.
    pub fn get(&self, word: &str) -> Option<&[f64]> {
        self.id(word).map(|id| self.vec(id as usize))
    }
}

/// Reads a word2vec text file (plain or gzip); see the module docs for the format.
pub fn read_word2vec_text(path: &Path) -> Result<Embeddings, EmbeddingsError> {
    read_word2vec_text_with_stats(path).map(|(e, _)| e)
}

/// [`read_word2vec_text`], also reporting duplicates and whether there was a header.
pub fn read_word2vec_text_with_stats(
    path: &Path,
) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    let io_err = |source| EmbeddingsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = BufReader::new(File::open(path).map_err(io_err)?);
    let starts_with_gzip_magic = file.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    let gzipped = starts_with_gzip_magic || path.extension().is_some_and(|e| e == "gz");
    if gzipped {
        read_word2vec_text_from(BufReader::new(MultiGzDecoder::new(file)), path)
    } else {
        read_word2vec_text_from(file, path)
    }
}

/// Reads the word2vec text format from any reader; `path` is only used in error messages.
pub fn read_word2vec_text_from<R: BufRead>(
    mut reader: R,
    path: &Path,
) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    let p = || path.to_path_buf();
    let mut raw = Vec::new();
    let mut line_no = 0usize;
    // Reads the next line into `raw`; Ok(false) at end of file.
    let mut next_line = |raw: &mut Vec<u8>, line_no: &mut usize| -> Result<bool, EmbeddingsError> {
        raw.clear();
        let n = reader
            .read_until(b'\n', raw)
            .map_err(|source| EmbeddingsError::ReadLine {
                path: p(),
                line: *line_no + 1,
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        *line_no += 1;
        Ok(true)
    };

    if !next_line(&mut raw, &mut line_no)? {
        return Err(EmbeddingsError::Empty { path: p() });
    }
    let first = std::str::from_utf8(&raw)
        .map_err(|_| EmbeddingsError::NotUtf8 { path: p(), line: 1 })?
        .to_owned();
    let first_fields: Vec<&str> = first.split_whitespace().collect();
    if first_fields.is_empty() {
        return Err(EmbeddingsError::Empty { path: p() });
    }

    // A header is exactly two integers; anything else is a headerless (GloVe) first vector line.
    let header = match first_fields.as_slice() {
        [a, b] => match (a.parse::<usize>(), b.parse::<usize>()) {
            (Ok(v), Ok(d)) => Some((v, d)),
            _ => None,
        },
        _ => None,
    };
    let looks_like_header = first_fields.len() == 2
        && first_fields
            .iter()
            .all(|f| f.bytes().all(|c| c.is_ascii_digit() || c == b'-'));
    if header.is_none() && looks_like_header {
        return Err(EmbeddingsError::BadHeader {
            path: p(),
            found: first.trim().to_owned(),
        });
    }
    if let Some((_, 0)) = header {
        return Err(EmbeddingsError::BadHeader {
            path: p(),
            found: first.trim().to_owned(),
        });
    }

    let (expected_words, dim, source_of_dim) = match header {
        Some((v, d)) => (Some(v), d, "given by the header"),
        None => (None, first_fields.len() - 1, "of the first vector line"),
    };
    if dim == 0 {
        return Err(EmbeddingsError::WrongDimension {
            path: p(),
            line: 1,
            word: first_fields[0].to_owned(),
            found: 0,
            dim: 0,
            source_of_dim: "expected at least one number",
        });
    }

    // The header's count is the file's word, not a fact: reserve for a few thousand words at
    // most (the vectors grow as the lines come), not for whatever it announces.
    let capacity = expected_words.unwrap_or(1024).min(1 << 12);
    let mut words: Vec<String> = Vec::with_capacity(capacity);
    let mut vecs: Vec<f64> = Vec::with_capacity(capacity.saturating_mul(dim).min(1 << 16));
    let mut index: HashMap<String, u32> = HashMap::with_capacity(capacity);
    let mut stats = ReadStats {
        had_header: header.is_some(),
        ..ReadStats::default()
    };

    let mut parse_vector_line = |text: &str, line: usize| -> Result<(), EmbeddingsError> {
        let mut fields = text.split_whitespace();
        // The caller skips blank lines, so a word is always there.
        let Some(word) = fields.next() else {
            return Ok(());
        };
        stats.lines += 1;
        let start = vecs.len();
        let mut found = 0usize;
        for field in fields {
            if found < dim {
                let value: f64 = field.parse().map_err(|_| EmbeddingsError::BadNumber {
                    path: p(),
                    line,
                    word: word.to_owned(),
                    component: found,
                    text: field.to_owned(),
                })?;
                if !value.is_finite() {
                    return Err(EmbeddingsError::NotFinite {
                        path: p(),
                        line,
                        word: word.to_owned(),
                        component: found,
                        text: field.to_owned(),
                    });
                }
                vecs.push(value);
            }
            found += 1;
        }
        if found != dim {
            return Err(EmbeddingsError::WrongDimension {
                path: p(),
                line,
                word: word.to_owned(),
                found,
                dim,
                source_of_dim,
            });
        }
        if index.contains_key(word) {
            stats.duplicate_words += 1;
            vecs.truncate(start);
            return Ok(());
        }
        let id = u32::try_from(words.len()).map_err(|_| EmbeddingsError::Shape {
            words: words.len() + 1,
            dim,
            values: vecs.len(),
        })?;
        index.insert(word.to_owned(), id);
        words.push(word.to_owned());
        Ok(())
    };

    if header.is_none() {
        parse_vector_line(&first, 1)?;
    }
    while next_line(&mut raw, &mut line_no)? {
        let text = std::str::from_utf8(&raw).map_err(|_| EmbeddingsError::NotUtf8 {
            path: p(),
            line: line_no,
        })?;
        // Blank lines (an extra newline at the end, say) are not vector lines and are skipped.
        if text.trim().is_empty() {
            continue;
        }
        parse_vector_line(text, line_no)?;
    }
    if let Some(expected) = expected_words {
        if stats.lines != expected {
            return Err(EmbeddingsError::CountMismatch {
                path: p(),
                expected,
                found: stats.lines,
            });
        }
    }
    Ok((
        Embeddings {
            words,
            dim,
            vecs,
            index,
        },
        stats,
    ))
}

/// Writes `embeddings` in word2vec text format (with header), gzip-compressed when `path` ends in
/// `.gz`. The file appears atomically: it is written under a temporary name in the same directory
/// and renamed when complete.
pub fn write_word2vec_text(path: &Path, embeddings: &Embeddings) -> Result<(), EmbeddingsError> {
    let gzip = path.extension().is_some_and(|e| e == "gz");
    crate::atomic::write_atomic_with(path, |file| {
        if gzip {
            let mut gz = GzEncoder::new(file, Compression::default());
            write_word2vec_text_to(&mut gz, embeddings)?;
            gz.finish().map(drop)
        } else {
            write_word2vec_text_to(file, embeddings)
        }
    })
    .map_err(|source| EmbeddingsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the word2vec text format (with header) to any writer.
pub fn write_word2vec_text_to<W: Write>(out: &mut W, embeddings: &Embeddings) -> io::Result<()> {
    writeln!(out, "{} {}", embeddings.len(), embeddings.dim)?;
    for (i, word) in embeddings.words.iter().enumerate() {
        out.write_all(word.as_bytes())?;
        for x in embeddings.vec(i) {
            write!(out, " {x}")?;
        }
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
        read_word2vec_text_from(text.as_bytes(), Path::new("vecs.txt"))
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "parbench-emb-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_header_and_vectors_with_trailing_spaces() {
        let (e, stats) = parse("3 2\nking 1 2 \nqueen -0.5 1e-3\nman 3 4\n").unwrap();
        assert_eq!(e.words, ["king", "queen", "man"]);
        assert_eq!(e.dim, 2);
        assert_eq!(e.vecs, [1.0, 2.0, -0.5, 1e-3, 3.0, 4.0]);
        assert_eq!(e.id("queen"), Some(1));
        assert_eq!(e.get("man"), Some(&[3.0, 4.0][..]));
        assert_eq!(e.get("woman"), None);
        assert_eq!(
            stats,
            ReadStats {
                lines: 3,
                duplicate_words: 0,
                had_header: true
            }
        );
    }

    #[test]
    fn reads_headerless_glove_format() {
        let (e, stats) = parse("the 0.1 0.2 0.3\nof 1 2 3").unwrap();
        assert_eq!(e.words, ["the", "of"]);
        assert_eq!(e.dim, 3);
        assert!(!stats.had_header);
    }

    #[test]
    fn keeps_first_vector_of_a_duplicate_word_and_counts_it() {
        let (e, stats) = parse("3 1\na 1\nb 2\na 3\n").unwrap();
        assert_eq!(e.words, ["a", "b"]);
        assert_eq!(e.vecs, [1.0, 2.0]);
        assert_eq!(stats.duplicate_words, 1);
        assert_eq!(stats.lines, 3);
    }

    #[test]
    fn wrong_number_of_components_names_line_word_and_dimension() {
        let err = parse("2 3\na 1 2 3\nb 1 2\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::WrongDimension { line: 3, found: 2, dim: 3, ref word, .. } if word == "b"
        ));
        let msg = err.to_string();
        assert!(
            msg.contains("vecs.txt:3") && msg.contains("expected 3"),
            "{msg}"
        );
        let err = parse("1 2\na 1 2 3\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::WrongDimension {
                line: 2,
                found: 3,
                ..
            }
        ));
    }

    #[test]
    fn unparsable_and_non_finite_numbers_are_reported() {
        let err = parse("1 2\na 1 x2\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::BadNumber { line: 2, component: 1, ref text, .. } if text == "x2"
        ));
        let err = parse("1 2\na nan 1\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::NotFinite {
                line: 2,
                component: 0,
                ..
            }
        ));
        let err = parse("1 2\na 1 inf\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::NotFinite { component: 1, .. }
        ));
    }

    #[test]
    fn header_problems_are_reported() {
        assert!(matches!(
            parse("").unwrap_err(),
            EmbeddingsError::Empty { .. }
        ));
        assert!(matches!(
            parse("\n").unwrap_err(),
            EmbeddingsError::Empty { .. }
        ));
        assert!(matches!(
            parse("3 0\n").unwrap_err(),
            EmbeddingsError::BadHeader { .. }
        ));
        assert!(matches!(
            parse("-3 2\n").unwrap_err(),
            EmbeddingsError::BadHeader { .. }
        ));
        assert!(matches!(
            parse("word\n").unwrap_err(),
            EmbeddingsError::WrongDimension { .. }
        ));
    }

    #[test]
    fn header_count_must_match_the_vector_lines() {
        let err = parse("3 1\na 1\nb 2\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::CountMismatch {
                expected: 3,
                found: 2,
                ..
            }
        ));
        let err = parse("1 1\na 1\nb 2\n").unwrap_err();
        assert!(matches!(
            err,
            EmbeddingsError::CountMismatch {
                expected: 1,
                found: 2,
                ..
            }
        ));
        // A trailing blank line is not a vector line.
        assert!(parse("1 1\na 1\n\n").is_ok());
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let bytes = b"1 1\n\xff\xfe 1\n";
        let err = read_word2vec_text_from(&bytes[..], Path::new("v")).unwrap_err();
        assert!(matches!(err, EmbeddingsError::NotUtf8 { line: 2, .. }));
    }

    #[test]
    fn new_validates_shape_and_words() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(Embeddings::new(w(&["a", "b"]), 2, vec![0.0; 4]).is_ok());
        assert!(matches!(
            Embeddings::new(w(&["a", "b"]), 2, vec![0.0; 3]),
            Err(EmbeddingsError::Shape { .. })
        ));
        assert!(matches!(
            Embeddings::new(w(&["a", "a"]), 1, vec![0.0; 2]),
            Err(EmbeddingsError::DuplicateWord {
                first: 0,
                second: 1,
                ..
            })
        ));
        assert!(matches!(
            Embeddings::new(w(&["a b"]), 1, vec![0.0]),
            Err(EmbeddingsError::BadWord { index: 0, .. })
        ));
        assert!(matches!(
            Embeddings::new(w(&[]), 0, vec![]),
            Err(EmbeddingsError::ZeroDimension)
        ));
    }

    #[test]
    fn write_then_read_round_trips_exactly_plain_and_gzip() {
        let words = vec!["x".to_string(), "ÿ-word".to_string(), "z".to_string()];
        let vecs = vec![0.1, -1.0 / 3.0, 1e-300, 12345.678, f64::MIN_POSITIVE, -0.0];
        let e = Embeddings::new(words, 2, vecs).unwrap();
        let dir = tempdir();
        for name in ["v.txt", "v.txt.gz"] {
            let path = dir.join(name);
            write_word2vec_text(&path, &e).unwrap();
            let (back, stats) = read_word2vec_text_with_stats(&path).unwrap();
            assert_eq!(back, e, "{name}");
            assert!(stats.had_header);
        }
        // The .gz file really is compressed (and is detected by its magic bytes too).
        let gz = std::fs::read(dir.join("v.txt.gz")).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        std::fs::rename(dir.join("v.txt.gz"), dir.join("v.bin")).unwrap();
        assert_eq!(read_word2vec_text(&dir.join("v.bin")).unwrap(), e);
        // No temporary files are left behind.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|d| d.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_file_is_an_io_error_naming_the_path() {
        let err = read_word2vec_text(Path::new("/nonexistent/dir/vecs.txt")).unwrap_err();
        assert!(matches!(err, EmbeddingsError::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/dir/vecs.txt"));
    }
}
