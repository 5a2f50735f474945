//! The word2vec file formats, as word2vec.c writes them and gensim's
//! `KeyedVectors.load_word2vec_format` reads them.
//!
//! - Text: a header line `V d`, then per word a line `word x_1 ... x_d` (single spaces). Values
//!   use Rust's shortest round-trip formatting of `f32`, so a written file reads back exactly.
//! - Binary: the same header line, then per word the word's UTF-8 bytes, one space, `d`
//!   little-endian `f32`, and a newline (`fwrite` of the floats on a little-endian machine,
//!   then `\n`, as word2vec.c).
//!
//! [`read_model`] tells the two apart by trying to parse the first record as text. Files ending
//! in `.gz` (or starting with the gzip magic bytes) are decompressed. Reading loads the file into
//! memory and parses it in one pass, O(V d). The header's counts are trusted for allocation only
//! as far as the file's bytes could hold them, and vectors must be finite (NaN or an infinity is
//! an error, as in `parbench_common::embeddings`). Errors name the file and, in the text format,
//! the line; in the binary format, the word and its byte offset.

use crate::model::Model;
use flate2::read::MultiGzDecoder;
use parbench_common::atomic::{write_atomic, write_atomic_with};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What can be wrong with a model file.
#[derive(Debug, Error)]
pub enum ModelIoError {
    /// The model file could not be opened or read.
    #[error("cannot read model {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The model file could not be created or written.
    #[error("cannot write model {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The first line is not `<words> <dimension>` with both positive.
    #[error("{path}:1: bad header {found:?}: expected \"<words> <dimension>\" (a word2vec text or binary file)")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// The first line as read.
        found: String,
    },
    /// A malformed record of a text file.
    #[error("{path}:{line}: word {index} of {words}: {problem}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// The 0-based index of the word.
        index: usize,
        /// Words the header announced.
        words: usize,
        /// What is wrong.
        problem: String,
    },
    /// A malformed record of a binary file.
    #[error("{path}: word {index} of {words}, at byte {offset}: {problem}")]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// The 0-based index of the word.
        index: usize,
        /// Words the header announced.
        words: usize,
        /// Where the record starts in the (decompressed) file.
        offset: usize,
        /// What is wrong.
        problem: String,
    },
    /// A model word cannot be written as one whitespace-free token.
    #[error(
        "model: word {index} is {word:?}; words must be non-empty without whitespace to be written"
    )]
    BadWord {
        /// The 0-based index of the word.
        index: usize,
        /// The word (empty, or containing whitespace).
        word: String,
    },
}

fn check_words(model: &Model) -> Result<(), ModelIoError> {
    for (index, w) in model.words().iter().enumerate() {
        if w.is_empty() || w.chars().any(char::is_whitespace) {
            return Err(ModelIoError::BadWord {
                index,
                word: w.clone(),
            });
        }
    }
    Ok(())
}

/// Writes `model` in word2vec text format, atomically (a reader never sees half a model, and a
/// failed write leaves the older file in place).
pub fn write_text(model: &Model, path: &Path) -> Result<(), ModelIoError> {
    check_words(model)?;
    write_atomic_with(path, |out| write_text_to(model, out)).map_err(|source| ModelIoError::Write {
        path: path.to_path_buf(),
        source,
    })
}

fn write_text_to(model: &Model, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{} {}", model.len(), model.dim())?;
    for (i, w) in model.words().iter().enumerate() {
        out.write_all(w.as_bytes())?;
        for x in model.vector(i) {
            write!(out, " {x}")?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The bytes of `model` in word2vec binary format.
pub fn binary_bytes(model: &Model) -> Result<Vec<u8>, ModelIoError> {
    check_words(model)?;
    let mut out = Vec::with_capacity(16 + model.vectors().len() * 4 + model.len() * 12);
    out.extend_from_slice(format!("{} {}\n", model.len(), model.dim()).as_bytes());
    for (i, w) in model.words().iter().enumerate() {
        out.extend_from_slice(w.as_bytes());
        out.push(b' ');
        for x in model.vector(i) {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// Writes `model` in word2vec binary format, atomically like [`write_text`].
pub fn write_binary(model: &Model, path: &Path) -> Result<(), ModelIoError> {
    let bytes = binary_bytes(model)?;
    write_atomic(path, &bytes).map_err(|source| ModelIoError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Which format a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// word2vec's text format: a header, then `word x1 ... xd` lines.
    Text,
    /// word2vec's binary format: a text header, then per word its name, a space, `d` little-endian
    /// `f32`s and a newline.
    Binary,
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, ModelIoError> {
    let err = |source| ModelIoError::Read {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(err)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(err)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Reads a word2vec text or binary file, whichever it is.
pub fn read_model(path: &Path) -> Result<Model, ModelIoError> {
    let bytes = read_bytes(path)?;
    let format = detect(&bytes, path)?;
    parse(&bytes, path, format)
}

/// Reads a file in the given format.
pub fn read_format(path: &Path, format: Format) -> Result<Model, ModelIoError> {
    parse(&read_bytes(path)?, path, format)
}

/// Parses model bytes in the given format; `path` only names them in errors.
pub fn parse(bytes: &[u8], path: &Path, format: Format) -> Result<Model, ModelIoError> {
    match format {
        Format::Text => parse_text(bytes, path),
        Format::Binary => parse_binary(bytes, path),
    }
}

fn header(bytes: &[u8], path: &Path) -> Result<(usize, usize, usize), ModelIoError> {
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let line = String::from_utf8_lossy(&bytes[..end]);
    let bad = || ModelIoError::BadHeader {
        path: path.to_path_buf(),
        found: line.chars().take(80).collect(),
    };
    let mut fields = line.split_whitespace();
    let words: usize = fields.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let dim: usize = fields.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    if dim == 0 || fields.next().is_some() {
        return Err(bad());
    }
    Ok((words, dim, (end + 1).min(bytes.len())))
}

/// Text if the first record parses as `word` and `d` numbers, else binary.
pub fn detect(bytes: &[u8], path: &Path) -> Result<Format, ModelIoError> {
    let (words, dim, start) = header(bytes, path)?;
    if words == 0 {
        return Ok(Format::Text);
    }
    let rest = &bytes[start..];
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let is_text = std::str::from_utf8(&rest[..end]).is_ok_and(|line| {
        let mut f = line.split_whitespace();
        f.next().is_some() && f.clone().count() == dim && f.all(|x| x.parse::<f32>().is_ok())
    });
    Ok(if is_text {
        Format::Text
    } else {
        Format::Binary
    })
}

/// How many records of at least `record_bytes` bytes each fit in `available` bytes: the most a
/// reader reserves for, whatever the header announces.
fn records_that_fit(available: usize, record_bytes: Option<usize>) -> usize {
    record_bytes.map_or(0, |b| available / b.max(1))
}

fn parse_text(bytes: &[u8], path: &Path) -> Result<Model, ModelIoError> {
    let (n, dim, start) = header(bytes, path)?;
    let bad = |line: usize, index: usize, problem: String| ModelIoError::BadLine {
        path: path.to_path_buf(),
        line,
        index,
        words: n,
        problem,
    };
    let body = &bytes[start..];
    // A record takes at least `2 dim + 1` bytes (`w`, then ` x` per component): reserve no more
    // records than the file can hold, whatever the header says.
    let fit = records_that_fit(body.len(), dim.checked_mul(2).map(|b| b + 1));
    let mut words = Vec::with_capacity(n.min(fit));
    let mut vectors = Vec::with_capacity(n.min(fit) * dim);
    // Lines as `str::lines` cuts them (the last newline ends a line, `\r\n` counts as one),
    // checked for UTF-8 one by one so that an error names its line.
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    let mut line_start = start;
    for (line, raw) in (2..).zip(body.split(|&b| b == b'\n')) {
        let offset = line_start;
        line_start += raw.len() + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let record = std::str::from_utf8(raw).map_err(|e| {
            bad(
                line,
                words.len(),
                format!("byte {} is not valid UTF-8", offset + e.valid_up_to()),
            )
        })?;
        if record.trim().is_empty() {
            continue;
        }
        let index = words.len();
        if index == n {
            return Err(bad(
                line,
                index,
                format!("more lines than the header's {n} words"),
            ));
        }
        let mut fields = record.split_whitespace();
        let word = fields.next().unwrap_or_default();
        let mut found = 0;
        for x in fields {
            let v: f32 = x.parse().map_err(|_| {
                bad(
                    line,
                    index,
                    format!("{x:?} is not a number (word {word:?})"),
                )
            })?;
            // "nan", "inf" and "1e39" parse; a vector with them is no use to anyone.
            if !v.is_finite() {
                return Err(bad(
                    line,
                    index,
                    format!("{x:?} is not a finite number (word {word:?})"),
                ));
            }
            if found < dim {
                vectors.push(v);
            }
            found += 1;
        }
        if found != dim {
            return Err(bad(
                line,
                index,
                format!("word {word:?} has {found} numbers, expected {dim}"),
            ));
        }
        words.push(word.to_owned());
    }
    if words.len() != n {
        // Reported on the line after the file's last.
        let lines = bytes.iter().filter(|&&b| b == b'\n').count()
            + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
        return Err(bad(
            lines + 1,
            words.len(),
            format!("the file ends after {} of {n} words", words.len()),
        ));
    }
    Model::new(words, dim, vectors).map_err(|e| bad(1, 0, e.to_string()))
}

fn parse_binary(bytes: &[u8], path: &Path) -> Result<Model, ModelIoError> {
    let (n, dim, mut pos) = header(bytes, path)?;
    let bad = |index: usize, offset: usize, problem: String| ModelIoError::BadRecord {
        path: path.to_path_buf(),
        index,
        words: n,
        offset,
        problem,
    };
    // The header's dimension is the file's word: 4 dim may not even be a number of bytes.
    let need = dim
        .checked_mul(4)
        .ok_or_else(|| bad(0, pos, format!("a dimension of {dim} is too large")))?;
    // A record takes at least `4 dim + 2` bytes (a 1-byte word, a space, the floats): reserve no
    // more records than the file can hold, whatever the header says.
    let fit = records_that_fit(bytes.len() - pos, need.checked_add(2));
    let mut words = Vec::with_capacity(n.min(fit));
    let mut vectors = Vec::with_capacity(n.min(fit) * dim);
    for index in 0..n {
        // gensim skips the newline after the previous vector (and any other leading spaces).
        while pos < bytes.len() && (bytes[pos] == b'\n' || bytes[pos] == b' ') {
            pos += 1;
        }
        let start = pos;
        let len = bytes[pos..]
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad(index, start, "the file ends inside a word".into()))?;
        let word = std::str::from_utf8(&bytes[pos..pos + len])
            .map_err(|_| bad(index, start, "the word is not valid UTF-8".into()))?;
        pos += len + 1;
        if bytes.len() - pos < need {
            return Err(bad(
                index,
                start,
                format!("the file ends inside the vector of {word:?}"),
            ));
        }
        let vector = bytes[pos..pos + need]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        for (component, v) in vector.enumerate() {
            // Any 4 bytes are a float; NaN or an infinity is no use to anyone.
            if !v.is_finite() {
                return Err(bad(
                    index,
                    start,
                    format!("component {component} of word {word:?} is not finite ({v})"),
                ));
            }
            vectors.push(v);
        }
        pos += need;
        words.push(word.to_owned());
    }
    Model::new(words, dim, vectors).map_err(|e| bad(0, 0, e.to_string()))
}
