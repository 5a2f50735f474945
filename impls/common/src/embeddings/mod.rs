//! Word vectors in the word2vec text format; [`binary`] reads and writes word2vec's binary
//! format, and [`cache`] keeps parsed tables so that a file read again is not parsed again.
//!
//! Format: a header line `V d`, then `V` lines `word x1 ... xd` separated by spaces (trailing
//! space allowed, as the original word2vec tool writes). Files without the header (GloVe's format)
//! are read too: the dimension is then taken from the first vector line. A path ending in `.gz`, or
//! a file starting with the gzip magic bytes, is decompressed on the fly.
//!
//! Reading is one pass over the file in blocks of whole lines, each block split into chunks that
//! the threads of the current rayon pool parse at once (O(V d) parses in all), each straight into
//! rows of one row-major `f64` array set aside for it, while the next block is read; the rows are
//! then taken in file order, so the result and the first error reported are those of a
//! line-by-line read. Every error names the file, the 1-based line and what was expected there.
//! A word that appears twice keeps its first vector; the later lines are counted in
//! [`ReadStats`].
//!
//! Where the time goes, at the Sinkhorn paper's shape (100,000 words of dimension 300, six
//! decimals: 9.5 bytes a number), on one thread of an Intel Xeon (AVX-512) at 0.6-0.7 GB/s
//! (the `indexed` module has the parse): the parse itself, about half (every field's start and end
//! found first, then four numbers converted at once in AVX2 lanes, then a line's divisions
//! by 10^6 in packed registers); the kernel's page faults of the fresh 240 MB table, a sixth,
//! taken by every thread at once since each zeroes the rows it parses; the kernel's copy of
//! the file, a tenth; counting each chunk's lines, the first touch of its bytes, a sixteenth.
//! Two threads read the file at 0.97 GB/s (a quick run's median) to 1.18 GB/s (best of five).
//!
//! Writing uses Rust's shortest round-trip formatting of `f64`, so a written file reads back to
//! exactly the same values.

pub mod binary;
pub mod cache;
mod indexed;

pub use indexed::simd_path;

pub use binary::{read_word2vec_binary, write_word2vec_binary};
pub use cache::{read_maybe_cached, CacheUse, EmbeddingsCache};

use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use indexed::line_count;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
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
    /// A record of a word2vec binary file is damaged.
    #[error("{path}: byte {offset}: vector {record} (word {word:?}): {problem}")]
    BadRecord {
        /// The file.
        path: PathBuf,
        /// Where the problem is, in bytes from the start of the (decompressed) file.
        offset: u64,
        /// 1-based index of the record.
        record: usize,
        /// The record's word, as far as it was read.
        word: String,
        /// What is wrong.
        problem: String,
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
        let index = Embeddings::index_words(&words)?;
        Ok(Embeddings {
            words,
            dim,
            vecs,
            index,
        })
    }

    /// The word -> row map of a table's words, checked as [`Embeddings::new`] says: words
    /// distinct, non-empty and without whitespace. Apart from the values, so a reader can build
    /// it while the values still arrive.
    pub(crate) fn index_words(words: &[String]) -> Result<HashMap<String, u32>, EmbeddingsError> {
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
        Ok(index)
    }

    /// A seeded table of `words` words (`w0`, `w1`, ...) of dimension `dim`, components uniform
    /// in [-1, 1) rounded to `decimals` decimals: what word2vec.c writes with six, so a file of
    /// it has a real file's size and digits, and reads back to exactly these values.
    pub fn random(
        words: usize,
        dim: usize,
        decimals: u32,
        seed: u64,
    ) -> Result<Embeddings, EmbeddingsError> {
        let mut rng = crate::Rng::new(seed);
        let scale = 10f64.powi(decimals.min(15) as i32);
        let vecs = (0..words.saturating_mul(dim))
            .map(|_| ((2.0 * rng.next_f64() - 1.0) * scale).round() / scale)
            .collect();
        Embeddings::new((0..words).map(|w| format!("w{w}")).collect(), dim, vecs)
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

/// The two formats word vectors come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbeddingsFormat {
    /// word2vec text (and GloVe's, without the header).
    Text,
    /// word2vec binary ([`binary`]).
    Binary,
}

impl EmbeddingsFormat {
    /// The format of the file at `path` by its name: `.bin` (or `.bin.gz`) is binary, as
    /// word2vec.c and gensim name their binary files; anything else is text.
    pub fn of(path: &Path) -> EmbeddingsFormat {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase());
        let name = name.as_deref().unwrap_or("");
        let name = name.strip_suffix(".gz").unwrap_or(name);
        if name.ends_with(".bin") {
            EmbeddingsFormat::Binary
        } else {
            EmbeddingsFormat::Text
        }
    }

    /// Reads the file at `path` in this format.
    pub fn read(self, path: &Path) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
        match self {
            EmbeddingsFormat::Text => read_word2vec_text_with_stats(path),
            EmbeddingsFormat::Binary => read_word2vec_binary(path),
        }
    }
}

/// Reads an embeddings file in the format its name says ([`EmbeddingsFormat::of`]).
pub fn read_embeddings(path: &Path) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    EmbeddingsFormat::of(path).read(path)
}

/// Reads a word2vec text file (plain or gzip); see the module docs for the format.
pub fn read_word2vec_text(path: &Path) -> Result<Embeddings, EmbeddingsError> {
    read_word2vec_text_with_stats(path).map(|(e, _)| e)
}

/// [`read_word2vec_text`], also reporting duplicates and whether there was a header.
pub fn read_word2vec_text_with_stats(
    path: &Path,
) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    let (reader, plain_len) = open_input(path)?;
    // A plain file's size bounds its values (each takes two bytes at least, a digit and a
    // separator), so the table can be reserved once, whatever the header claims.
    let blocking = Blocking {
        values_hint: plain_len.map_or(0, |len| usize::try_from(len / 2).unwrap_or(0)),
        ..Blocking::FILES
    };
    read_in_blocks(reader, path, blocking)
}

/// The file at `path` to read, decompressed when it is gzip (by its name or its first bytes),
/// with its size when it is not.
pub(crate) fn open_input(
    path: &Path,
) -> Result<(Box<dyn BufRead + Send>, Option<u64>), EmbeddingsError> {
    let io_err = |source| EmbeddingsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = BufReader::new(File::open(path).map_err(io_err)?);
    let starts_with_gzip_magic = file.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    if starts_with_gzip_magic || path.extension().is_some_and(|e| e == "gz") {
        Ok((Box::new(BufReader::new(MultiGzDecoder::new(file))), None))
    } else {
        let len = file.get_ref().metadata().map_err(io_err)?.len();
        Ok((Box::new(file), Some(len)))
    }
}

/// Writes a file atomically with `write`, through gzip when `path` ends in `.gz`.
pub(crate) fn write_maybe_gzipped(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), EmbeddingsError> {
    let gzip = path.extension().is_some_and(|e| e == "gz");
    crate::atomic::write_atomic_with(path, |file| {
        if gzip {
            let mut gz = GzEncoder::new(file, Compression::default());
            write(&mut gz)?;
            gz.finish().map(drop)
        } else {
            write(file)
        }
    })
    .map_err(|source| EmbeddingsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the word2vec text format from any reader; `path` is only used in error messages.
pub fn read_word2vec_text_from<R: BufRead + Send>(
    reader: R,
    path: &Path,
) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    read_in_blocks(reader, path, Blocking::FILES)
}

/// How the reader cuts a file into work.
#[derive(Clone, Copy, Debug)]
struct Blocking {
    /// Bytes read and parsed at a time: enough to keep every thread busy, little next to the
    /// table itself.
    block_bytes: usize,
    /// Bytes a thread parses at least, so a small file is not split into chunks that cost more
    /// to hand out than to parse.
    min_chunk_bytes: usize,
    /// Values the table will hold at most, when the input's size says (0: unknown).
    values_hint: usize,
}

impl Blocking {
    const FILES: Blocking = Blocking {
        block_bytes: 16 << 20,
        min_chunk_bytes: 1 << 18,
        values_hint: 0,
    };
}

fn read_in_blocks<R: BufRead + Send>(
    mut reader: R,
    path: &Path,
    blocking: Blocking,
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
    // most (the vectors grow as the lines come), not for whatever it announces. The table is
    // left on 4 KB pages: on 2 MB pages an idle host read it 1.3x faster, but a CI dry run,
    // its memory fragmented by the build, took 2x longer (the kernel compacting memory for
    // each huge page as it was first written).
    let capacity = expected_words.unwrap_or(1024).min(1 << 12);
    let mut table = Table {
        words: Vec::with_capacity(capacity),
        vecs: Vec::with_capacity(match expected_words {
            // Both the header and the file's size agree it is this large.
            Some(v) if blocking.values_hint > 0 => v.saturating_mul(dim).min(blocking.values_hint),
            _ => capacity.saturating_mul(dim).min(1 << 16),
        }),
        index: HashMap::with_capacity(capacity),
        stats: ReadStats {
            had_header: header.is_some(),
            ..ReadStats::default()
        },
    };
    let shape = LineShape { dim, source_of_dim };

    if header.is_none() {
        table.parse_and_absorb(first.as_bytes(), &shape, usize::MAX, path, 1)?;
    }
    // Blocks of whole lines, each parsed by every thread of the current rayon pool while the
    // next block is read (reading is one thread's work, and would otherwise leave the others
    // idle); the block's words then go into the table, which is quick next to the parse.
    let read_block = |reader: &mut R, buf: &mut Vec<u8>| -> io::Result<bool> {
        let before = buf.len();
        reader.take(blocking.block_bytes as u64).read_to_end(buf)?;
        Ok(buf.len() == before)
    };
    let read_error = |line: usize| {
        move |source| EmbeddingsError::ReadLine {
            path: p(),
            line,
            source,
        }
    };
    // Two block buffers, read into in turn: a new one per block cost a page fault per 4 KB.
    // They grow as the file asks (a small file allocates little).
    let mut ready: Vec<u8> = Vec::new();
    let mut spare: Vec<u8> = Vec::new();
    let mut eof = read_block(&mut reader, &mut ready).map_err(read_error(line_no + 1))?;
    loop {
        let end = if eof {
            ready.len()
        } else {
            match memrchr_newline(&ready) {
                Some(i) => i + 1,
                None => {
                    // A line longer than a block: read on.
                    eof = read_block(&mut reader, &mut ready).map_err(read_error(line_no + 1))?;
                    continue;
                }
            }
        };
        // The partial last line starts the next block.
        let mut next = std::mem::take(&mut spare);
        next.clear();
        next.extend_from_slice(&ready[end..]);
        ready.truncate(end);
        let last = eof;
        let chunks = chunks_of(&ready, blocking.min_chunk_bytes);
        let (read, parsed) = rayon::join(
            || (!last).then(|| read_block(&mut reader, &mut next)),
            || parse_chunks(&chunks, &shape, &mut table.vecs),
        );
        let lines: usize = parsed.iter().map(|(c, _)| c.lines).sum();
        table.absorb(parsed, &shape, path, line_no + 1)?;
        line_no += lines;
        match read {
            None => break,
            Some(read) => eof = read.map_err(read_error(line_no + 1))?,
        }
        spare = std::mem::replace(&mut ready, next);
    }
    let Table {
        words,
        vecs,
        index,
        stats,
    } = table;
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

/// What every vector line must have.
struct LineShape {
    dim: usize,
    source_of_dim: &'static str,
}

/// The vector lines of one chunk, in order: each word's text (as offsets into `text`), their
/// vectors written to the chunk's rows of the table, and the first error, after which the chunk
/// was not parsed further.
struct ParsedChunk {
    /// Physical lines of the chunk (blank ones included), for the line numbers after it.
    lines: usize,
    /// The words, one after another; word `r` has the chunk's row `r`.
    text: String,
    /// End of each word in `text`.
    word_ends: Vec<usize>,
    error: Option<LineError>,
}

impl ParsedChunk {
    fn new() -> ParsedChunk {
        ParsedChunk {
            lines: 0,
            text: String::new(),
            word_ends: Vec::new(),
            error: None,
        }
    }

    fn fail(&mut self, kind: LineErrorKind) {
        self.error = Some(LineError {
            line: self.lines,
            kind,
        });
        self.lines += 1;
    }
}

/// A bad line, before the file's path is known to it.
struct LineError {
    /// 0-based index of the line in its chunk.
    line: usize,
    kind: LineErrorKind,
}

enum LineErrorKind {
    NotUtf8,
    WrongDimension {
        word: String,
        found: usize,
    },
    BadNumber {
        word: String,
        component: usize,
        text: String,
    },
    NotFinite {
        word: String,
        component: usize,
        text: String,
    },
}

impl LineError {
    /// The error, in a chunk whose first line has the 1-based number `first_line`.
    fn into_error(self, path: &Path, shape: &LineShape, first_line: usize) -> EmbeddingsError {
        let path = path.to_path_buf();
        let line = first_line + self.line;
        match self.kind {
            LineErrorKind::NotUtf8 => EmbeddingsError::NotUtf8 { path, line },
            LineErrorKind::WrongDimension { word, found } => EmbeddingsError::WrongDimension {
                path,
                line,
                word,
                found,
                dim: shape.dim,
                source_of_dim: shape.source_of_dim,
            },
            LineErrorKind::BadNumber {
                word,
                component,
                text,
            } => EmbeddingsError::BadNumber {
                path,
                line,
                word,
                component,
                text,
            },
            LineErrorKind::NotFinite {
                word,
                component,
                text,
            } => EmbeddingsError::NotFinite {
                path,
                line,
                word,
                component,
                text,
            },
        }
    }
}

/// The table as it grows, block after block.
struct Table {
    words: Vec<String>,
    vecs: Vec<f64>,
    index: HashMap<String, u32>,
    stats: ReadStats,
}

/// A block's chunks after [`parse_chunks`]: each chunk's result and where in the table's
/// values its rows start.
type ParsedBlock = Vec<(ParsedChunk, usize)>;

impl Table {
    /// Parses a block of whole lines whose first line is `first_line` into the table; returns
    /// the block's physical lines.
    fn parse_and_absorb(
        &mut self,
        block: &[u8],
        shape: &LineShape,
        min_chunk_bytes: usize,
        path: &Path,
        first_line: usize,
    ) -> Result<usize, EmbeddingsError> {
        let parsed = parse_chunks(&chunks_of(block, min_chunk_bytes), shape, &mut self.vecs);
        let lines = parsed.iter().map(|(c, _)| c.lines).sum();
        self.absorb(parsed, shape, path, first_line)?;
        Ok(lines)
    }

    /// Takes a parsed block's words in file order (a word seen before keeps its first vector),
    /// closing up the rows of blank lines and repeated words, then fails with the first error
    /// a chunk had; `first_line` is the block's first line number.
    fn absorb(
        &mut self,
        parsed: ParsedBlock,
        shape: &LineShape,
        path: &Path,
        mut first_line: usize,
    ) -> Result<(), EmbeddingsError> {
        let dim = shape.dim;
        let mut kept = self.words.len();
        let mut failure = None;
        for (chunk, first_value) in parsed {
            let mut start = 0;
            for (r, &end) in chunk.word_ends.iter().enumerate() {
                let word = &chunk.text[start..end];
                start = end;
                self.stats.lines += 1;
                if self.index.contains_key(word) {
                    self.stats.duplicate_words += 1;
                    continue;
                }
                let id = u32::try_from(kept).map_err(|_| EmbeddingsError::Shape {
                    words: kept + 1,
                    dim,
                    values: kept * dim,
                })?;
                let at = first_value + r * dim;
                if at != kept * dim {
                    self.vecs.copy_within(at..at + dim, kept * dim);
                }
                self.index.insert(word.to_owned(), id);
                self.words.push(word.to_owned());
                kept += 1;
            }
            if let Some(e) = chunk.error {
                failure = Some(e.into_error(path, shape, first_line));
                break;
            }
            first_line += chunk.lines;
        }
        self.vecs.truncate(kept * dim);
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The position of the last newline of `bytes`.
fn memrchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}

/// Splits a block of whole lines into chunks of about equal size at line ends, enough for
/// every thread of the current rayon pool to have a few.
fn chunks_of(block: &[u8], min_chunk_bytes: usize) -> Vec<&[u8]> {
    let parts =
        (block.len() / min_chunk_bytes.max(1)).clamp(1, 4 * rayon::current_num_threads().max(1));
    let target = block.len().div_ceil(parts).max(1);
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(parts);
    let mut rest = block;
    while !rest.is_empty() {
        let cut = if rest.len() <= target {
            rest.len()
        } else {
            rest[target..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| target + i + 1)
        };
        let (chunk, tail) = rest.split_at(cut);
        chunks.push(chunk);
        rest = tail;
    }
    chunks
}

/// Parses the chunks on the current rayon pool, each straight into values of `vecs` set aside
/// for it (a row per line, so every vector line has its row before any is parsed); the rows of
/// blank lines, bad lines and repeated words are closed up by [`Table::absorb`].
fn parse_chunks(chunks: &[&[u8]], shape: &LineShape, vecs: &mut Vec<f64>) -> ParsedBlock {
    use rayon::prelude::*;
    let lines: Vec<usize> = if chunks.len() == 1 {
        vec![line_count(chunks[0])]
    } else {
        chunks.par_iter().map(|c| line_count(c)).collect()
    };
    // A value takes two bytes at least (a digit and a separator), so a chunk holds at most
    // half its length in values, whole rows and the start of a bad one together: the bound
    // that keeps a header's absurd dimension from reserving what the file cannot fill.
    let room: Vec<usize> = chunks
        .iter()
        .zip(&lines)
        .map(|(c, &n)| n.saturating_mul(shape.dim).min(c.len() / 2 + 1))
        .collect();
    let first = vecs.len();
    let total: usize = room.iter().sum();
    // Each chunk's values are first written (zeroed) by the thread that parses it, not all of
    // them by one thread beforehand: the kernel's page faults of a fresh table, a sixth of the
    // reading time, are then taken by every thread at once.
    vecs.reserve(total);
    let mut rest = &mut vecs.spare_capacity_mut()[..total];
    let mut work = Vec::with_capacity(chunks.len());
    let mut at = first;
    for (&chunk, &n) in chunks.iter().zip(&room) {
        let (values, tail) = std::mem::take(&mut rest).split_at_mut(n);
        work.push((chunk, values, at));
        rest = tail;
        at += n;
    }
    let parse = |(chunk, values, at): (&[u8], &mut [std::mem::MaybeUninit<f64>], usize)| {
        values.fill(std::mem::MaybeUninit::new(0.0));
        // SAFETY: every element of `values` was written just above, and MaybeUninit<f64> has
        // the layout of f64.
        let values = unsafe { &mut *(values as *mut [std::mem::MaybeUninit<f64>] as *mut [f64]) };
        (parse_lines(chunk, shape, values), at)
    };
    let parsed = if work.len() == 1 {
        work.into_iter().map(parse).collect()
    } else {
        work.into_par_iter().map(parse).collect()
    };
    // SAFETY: the `total` values after the first `first` were each written by the task of
    // their chunk, and every task has finished (a panic in one would not reach this line).
    unsafe { vecs.set_len(first + total) };
    parsed
}

/// Parses whole lines (the last one may lack its newline) into `rows`, one row per vector line,
/// stopping at the first bad one.
fn parse_lines(bytes: &[u8], shape: &LineShape, rows: &mut [f64]) -> ParsedChunk {
    if let Some(out) = indexed::parse_lines_indexed(bytes, shape, rows) {
        return out;
    }
    let mut out = ParsedChunk::new();
    if let Ok(text) = std::str::from_utf8(bytes) {
        // Nearly every file: fields cut at ASCII whitespace, where a line-by-line read cuts
        // them too unless a word or number holds Unicode whitespace; a chunk with anything
        // outside ASCII that makes that doubtful is read again the slow way.
        match parse_lines_fast(text, shape, rows, &mut out) {
            Ok(()) => return out,
            Err(kind) if text.is_ascii() => {
                out.fail(kind);
                return out;
            }
            Err(_) => out = ParsedChunk::new(),
        }
    }
    for raw in bytes.split_inclusive(|&b| b == b'\n') {
        let parsed = std::str::from_utf8(raw)
            .map_err(|_| LineErrorKind::NotUtf8)
            .and_then(|text| parse_fields(text.split_whitespace(), shape, rows, &mut out));
        if let Err(kind) = parsed {
            out.fail(kind);
            break;
        }
        out.lines += 1;
    }
    out
}

/// Where an ASCII separator byte (a blank or a newline) stands in `text`, in order, with
/// whether it ends a line: found 64 bytes at a time as bit masks (which the compiler turns
/// into vector compares), so the parser learns where every field ends without a byte loop.
struct Separators<'a> {
    text: &'a [u8],
    /// Where the next 64 bytes start.
    next_block: usize,
    /// Where the current 64 bytes start.
    base: usize,
    /// Separators of the current 64 bytes not yet given out; bit j is byte `base + j`.
    separators: u64,
    newlines: u64,
}

impl<'a> Separators<'a> {
    fn new(text: &'a [u8]) -> Separators<'a> {
        Separators {
            text,
            next_block: 0,
            base: 0,
            separators: 0,
            newlines: 0,
        }
    }
}

/// The masks of `indexed::masks64` for 16 bytes, with SSE2's byte compares: the portable loop
/// below is what the other architectures run, and on x86_64 it compiled to shuffles that made
/// reading slower than the byte loop it replaced.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn masks16(part: &[u8]) -> (u16, u16) {
    use std::arch::x86_64::*;
    assert!(part.len() >= 16);
    // SAFETY: SSE2 is part of every x86_64 processor, so its intrinsics can run on any; the
    // unaligned load reads the first 16 bytes of `part`, which the assert above guarantees.
    unsafe {
        let v = _mm_loadu_si128(part.as_ptr().cast());
        let space = _mm_cmpeq_epi8(v, _mm_set1_epi8(b' ' as i8));
        // Tab to carriage return are 9..=13: after subtracting 9, the bytes whose unsigned
        // minimum with 4 is themselves.
        let shifted = _mm_sub_epi8(v, _mm_set1_epi8(b'\t' as i8));
        let control = _mm_cmpeq_epi8(_mm_min_epu8(shifted, _mm_set1_epi8(4)), shifted);
        let newline = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
        (
            _mm_movemask_epi8(_mm_or_si128(space, control)) as u16,
            _mm_movemask_epi8(newline) as u16,
        )
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn masks16(part: &[u8]) -> (u16, u16) {
    let (mut separators, mut newlines) = (0u16, 0u16);
    for (j, &c) in part[..16].iter().enumerate() {
        // b'\t'..=b'\r' are tab, newline, vertical tab, form feed and carriage return.
        separators |= u16::from(c == b' ' || c.wrapping_sub(b'\t') < 5) << j;
        newlines |= u16::from(c == b'\n') << j;
    }
    (separators, newlines)
}

impl Iterator for Separators<'_> {
    type Item = (usize, bool);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, bool)> {
        while self.separators == 0 {
            let start = self.next_block;
            if start >= self.text.len() {
                return None;
            }
            let mut block = [0u8; 64];
            let end = (start + 64).min(self.text.len());
            block[..end - start].copy_from_slice(&self.text[start..end]);
            (self.separators, self.newlines, _) = indexed::masks64(&block);
            self.base = start;
            self.next_block = end;
        }
        let j = self.separators.trailing_zeros();
        self.separators &= self.separators - 1;
        Some((self.base + j as usize, (self.newlines >> j) & 1 == 1))
    }
}

/// Parses the lines of `text` into `rows` as [`parse_fields`] would their `split_whitespace`
/// fields, where every separator is ASCII: the hot loop of reading a file. Every field's end
/// comes from [`Separators`], so the numbers of a line do not wait on each other and the
/// processor parses several at once. Fails at the first bad line, or at a word holding Unicode
/// whitespace (which a line-by-line read would have split).
fn parse_lines_fast(
    text: &str,
    shape: &LineShape,
    rows: &mut [f64],
    out: &mut ParsedChunk,
) -> Result<(), LineErrorKind> {
    let b = text.as_bytes();
    let dim = shape.dim;
    let mut start = 0;
    let mut word: Option<(usize, usize)> = None;
    let mut found = 0usize;
    let mut row_start = 0;
    // No row is written past `rows`, however large the dimension a header claims.
    let mut divisors = vec![1.0; dim.min(rows.len())];
    // A last line without its newline ends where the text does.
    let last = (b.last().is_some_and(|&c| c != b'\n')).then_some((b.len(), true));
    for (at, ends_line) in Separators::new(b).chain(last) {
        if at > start {
            match word {
                None => {
                    let w = &text[start..at];
                    if !w.is_ascii() && w.chars().any(char::is_whitespace) {
                        // Never reported: any error sends a chunk with non-ASCII text to the
                        // line-by-line read, which splits this word where it should.
                        return Err(LineErrorKind::NotUtf8);
                    }
                    word = Some((start, at));
                }
                Some((ws, we)) => {
                    if found < dim {
                        let parts = short_decimal_parts(b, start, at).or_else(|| {
                            scan_decimal_parts(b, start)
                                .filter(|&(_, _, end)| end == at)
                                .map(|(numerator, divisor, _)| (numerator, divisor))
                        });
                        let (numerator, divisor) = match parts {
                            // Finite by construction (at most 2^53 times 10^22).
                            Some(parts) => parts,
                            None => (checked_number(&text[start..at], &text[ws..we], found)?, 1.0),
                        };
                        rows[row_start + found] = numerator;
                        divisors[found] = divisor;
                    }
                    found += 1;
                }
            }
        }
        start = at + 1;
        if ends_line {
            if let Some((ws, we)) = word.take() {
                finish_line(&text[ws..we], found, shape, out)?;
                divide_row(&mut rows[row_start..row_start + dim], &divisors);
                row_start += dim;
            }
            found = 0;
            out.lines += 1;
        }
    }
    Ok(())
}

/// A row's numerators over their divisors: one pass of packed divisions, none waiting on
/// another (a division is as slow as the rest of a number's parse).
#[inline(always)]
fn divide_row(row: &mut [f64], divisors: &[f64]) {
    for (value, divisor) in row.iter_mut().zip(divisors) {
        *value /= *divisor;
    }
}

/// Parses a line's fields (the word, then the numbers) into the next row of `rows`.
fn parse_fields<'a>(
    mut fields: impl Iterator<Item = &'a str>,
    shape: &LineShape,
    rows: &mut [f64],
    out: &mut ParsedChunk,
) -> Result<(), LineErrorKind> {
    let Some(word) = fields.next() else {
        return Ok(());
    };
    let row_start = out.word_ends.len() * shape.dim;
    let mut found = 0usize;
    for field in fields {
        if found < shape.dim {
            rows[row_start + found] = checked_number(field, word, found)?;
        }
        found += 1;
    }
    finish_line(word, found, shape, out)
}

/// Component `component` of `word`'s line as [`parse_number`] reads it, or why it cannot be one:
/// not a number, or not finite.
fn checked_number(field: &str, word: &str, component: usize) -> Result<f64, LineErrorKind> {
    match parse_number(field) {
        Some(v) if v.is_finite() => Ok(v),
        Some(_) => Err(LineErrorKind::NotFinite {
            word: word.to_owned(),
            component,
            text: field.to_owned(),
        }),
        None => Err(LineErrorKind::BadNumber {
            word: word.to_owned(),
            component,
            text: field.to_owned(),
        }),
    }
}

/// Checks a line's count of numbers and records its word.
fn finish_line(
    word: &str,
    found: usize,
    shape: &LineShape,
    out: &mut ParsedChunk,
) -> Result<(), LineErrorKind> {
    if found != shape.dim {
        return Err(LineErrorKind::WrongDimension {
            word: word.to_owned(),
            found,
        });
    }
    out.text.push_str(word);
    out.word_ends.push(out.text.len());
    Ok(())
}

/// Powers of ten that are exact in an f64.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A number as `str::parse::<f64>` reads it, the same value bit for bit. The plain decimals
/// embedding files hold (`-0.123456`, `1.5e-3`) take Clinger's fast path ([`scan_decimal`]);
/// everything else (more digits, larger exponents, `inf`, `nan`, malformed text) goes to the
/// standard parser, which also decides what is an error.
fn parse_number(text: &str) -> Option<f64> {
    match scan_decimal(text.as_bytes(), 0) {
        Some((value, end)) if end == text.len() => Some(value),
        _ => text.parse().ok(),
    }
}

/// The decimal number starting at `b[i]`, and where it ends, when Clinger's fast path gives it
/// exactly: at most 19 digits making a mantissa of at most 2^53, and a power of ten of at most
/// 22, both exact in an f64, so one multiplication or division is correctly rounded. `None`
/// where the fast path does not apply (the caller then asks the standard parser).
#[inline(always)]
fn scan_decimal(b: &[u8], i: usize) -> Option<(f64, usize)> {
    scan_decimal_parts(b, i).map(|(numerator, divisor, end)| (numerator / divisor, end))
}

/// [`scan_decimal`] before its one division: the number is `numerator / divisor`, both exact
/// (a number with a positive exponent has its multiplication done, and divisor 1). The parser
/// divides a whole line's numbers at once: a division is as slow as the rest of a number's
/// parse, and where each waited on its own, it was a quarter of the reading time.
#[inline(always)]
fn scan_decimal_parts(b: &[u8], mut i: usize) -> Option<(f64, f64, usize)> {
    let first = *b.get(i)?;
    let negative = first == b'-';
    i += usize::from(negative || first == b'+');
    let (mut mantissa, mut digits) = (0u64, 0usize);
    i = take_digits(b, i, &mut mantissa, &mut digits)?;
    let mut scale: i32 = 0;
    if b.get(i) == Some(&b'.') {
        let before = digits;
        i = take_digits(b, i + 1, &mut mantissa, &mut digits)?;
        scale = -((digits - before) as i32);
    }
    // No digit at all is the standard parser's to refuse.
    if digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let sign = *b.get(i)?;
        let exp_negative = sign == b'-';
        i += usize::from(exp_negative || sign == b'+');
        let start = i;
        let mut exp: i32 = 0;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 3 {
            exp = exp * 10 + i32::from(b[i] - b'0');
            i += 1;
        }
        if i == start {
            return None;
        }
        scale += if exp_negative { -exp } else { exp };
    }
    let power = *EXACT_POWERS_OF_TEN.get(scale.unsigned_abs() as usize)?;
    if mantissa > 1 << 53 {
        return None;
    }
    let m = signed(mantissa, negative);
    Some(if scale < 0 {
        (m, power, i)
    } else {
        (m * power, 1.0, i)
    })
}

/// [`scan_decimal_parts`] of the field `b[start..end]` when it is an optional `-` and at most
/// eight bytes of digits with at most one `.` among them (`-0.123456`, as word2vec.c writes
/// every number), read as one eight-byte word: the dot found and squeezed out in the word,
/// and the digits converted together. `None` for anything else, which the general scan reads.
#[inline(always)]
fn short_decimal_parts(b: &[u8], start: usize, end: usize) -> Option<(f64, f64)> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let negative = b.get(start) == Some(&b'-');
    let from = start + usize::from(negative);
    let len = end.checked_sub(from)?;
    let word = u64::from_le_bytes(b.get(from..from + 8)?.try_into().ok()?);
    if len == 0 || len > 8 {
        return None;
    }
    // The field's bytes, and zero bytes after them (not digits, so they end the run).
    let word = if len == 8 {
        word
    } else {
        word & ((1 << (8 * len)) - 1)
    };
    // Bytes equal to '.': zero bytes of `word ^ '.'`, exact up to the first one.
    let dots = word ^ (u64::from(b'.') * ONES);
    let dot_bits = dots.wrapping_sub(ONES) & !dots & HIGHS;
    let (digits_word, digits, scale) = match dot_bits.trailing_zeros() / 8 {
        at if (at as usize) < len => {
            let at = at as usize;
            let low = word & ((1u64 << (8 * at)) - 1);
            let high = if at + 1 < 8 {
                (word >> (8 * (at + 1))) << (8 * at)
            } else {
                0
            };
            (low | high, len - 1, len - 1 - at)
        }
        _ => (word, len, 0),
    };
    let (mantissa, count) = eight_digits(digits_word);
    if count != digits || digits == 0 {
        return None;
    }
    Some((signed(mantissa, negative), EXACT_POWERS_OF_TEN[scale]))
}

/// `mantissa` as an f64 with the sign of `negative` (so `-0` is -0.0, as the standard parser
/// reads it), set by a bit, not a branch: half the numbers of an embeddings file are negative,
/// at random, and a mispredicted branch cost a third of the parse (`copysign` from a table of
/// signs measured slower still). Rounding to nearest is symmetric, so the sign can go on
/// before a division as well as after.
#[inline(always)]
fn signed(mantissa: u64, negative: bool) -> f64 {
    f64::from_bits((mantissa as f64).to_bits() | (u64::from(negative) << 63))
}

/// Appends the run of digits at `b[i..]` to `mantissa`, eight at a time, and returns where the
/// run ends; `None` past 19 digits in all (the mantissa could then overflow).
#[inline(always)]
fn take_digits(b: &[u8], mut i: usize, mantissa: &mut u64, digits: &mut usize) -> Option<usize> {
    loop {
        let (value, count) = match b.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
            Some(word) => eight_digits(u64::from_le_bytes(word)),
            None => {
                // The last few bytes of the text, one at a time.
                let (mut value, mut count) = (0u64, 0usize);
                while i + count < b.len() && b[i + count].is_ascii_digit() {
                    value = value * 10 + u64::from(b[i + count] - b'0');
                    count += 1;
                }
                (value, count)
            }
        };
        *digits += count;
        if *digits > 19 {
            return None;
        }
        *mantissa = *mantissa * POWERS_OF_TEN_U64[count] + value;
        i += count;
        if count < 8 {
            return Some(i);
        }
    }
}

/// 10^k for k in 0..=8.
const POWERS_OF_TEN_U64: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The digits leading eight bytes read as a little-endian word (the first byte lowest), and how
/// many there are: branch-free, as the word is tested and converted whole (SWAR).
#[inline(always)]
fn eight_digits(word: u64) -> (u64, usize) {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    // A byte's top bit is set below '0' (the subtraction wraps) or above '9' (adding 0x46
    // reaches 0x80); bytes after the first such one may be disturbed by borrows and carries,
    // and do not matter.
    let offset = word.wrapping_sub(ZEROS);
    let non_digit = (word.wrapping_add(0x4646_4646_4646_4646) | offset) & 0x8080_8080_8080_8080;
    let count = (non_digit.trailing_zeros() / 8) as usize;
    if count == 0 {
        return (0, 0);
    }
    // The digits moved to the top bytes, zeros below: the eight-digit number they make.
    let v = offset << (8 * (8 - count));
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v = ((v & 0x0000_00FF_0000_00FF)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32))))
        >> 32;
    (v, count)
}

/// Writes `embeddings` in word2vec text format (with header), gzip-compressed when `path` ends in
/// `.gz`. The file appears atomically: it is written under a temporary name in the same directory
/// and renamed when complete.
pub fn write_word2vec_text(path: &Path, embeddings: &Embeddings) -> Result<(), EmbeddingsError> {
    write_maybe_gzipped(path, |out| write_word2vec_text_to(out, embeddings))
}

/// Writes the word2vec text format (with header) to any writer.
pub fn write_word2vec_text_to<W: Write + ?Sized>(
    out: &mut W,
    embeddings: &Embeddings,
) -> io::Result<()> {
    let rows = (0..embeddings.len()).map(|i| (embeddings.words[i].as_str(), embeddings.vec(i)));
    write_word2vec_rows(out, embeddings.len(), embeddings.dim, rows)
}

/// Writes `count` rows of `dim` numbers in the word2vec text format (with header), each number
/// in its shortest form that reads back as the same f64; for vectors not held as [`Embeddings`].
pub fn write_word2vec_rows<'a, W: Write + ?Sized, S: AsRef<str>>(
    out: &mut W,
    count: usize,
    dim: usize,
    rows: impl Iterator<Item = (S, &'a [f64])>,
) -> io::Result<()> {
    writeln!(out, "{count} {dim}")?;
    for (word, vector) in rows {
        out.write_all(word.as_ref().as_bytes())?;
        for x in vector {
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

    /// Read in tiny blocks and chunks, so every line boundary case of the parallel reader comes
    /// up: lines longer than a block, chunks of one line, errors and duplicates in later chunks.
    fn parse_in_pieces(
        text: &str,
        block_bytes: usize,
        min_chunk_bytes: usize,
    ) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        pool.install(|| {
            read_in_blocks(
                text.as_bytes(),
                Path::new("vecs.txt"),
                Blocking {
                    block_bytes,
                    min_chunk_bytes,
                    values_hint: 0,
                },
            )
        })
    }

    /// A file of `n` words of dimension 3 (word `w7` twice when `duplicate`), with blank lines.
    fn file(n: usize, duplicate: bool) -> String {
        let mut text = format!("{} 3\n", n + usize::from(duplicate));
        for i in 0..n {
            text.push_str(&format!("w{i} {i}.5 -{i} 0.125\n"));
            if i % 5 == 4 {
                text.push('\n');
            }
            if duplicate && i == 40 {
                text.push_str("w7 9 9 9\n");
            }
        }
        text
    }

    #[test]
    fn reading_in_pieces_gives_what_one_pass_gives() {
        for duplicate in [false, true] {
            let text = file(60, duplicate);
            let whole = parse(&text).unwrap();
            assert_eq!(whole.0.len(), 60);
            assert_eq!(whole.1.duplicate_words, usize::from(duplicate));
            assert_eq!(whole.0.get("w7").unwrap(), &[7.5, -7.0, 0.125]);
            for (block, chunk) in [(7, 1), (64, 1), (64, 30), (300, 20), (10_000, 1)] {
                assert_eq!(
                    parse_in_pieces(&text, block, chunk).unwrap(),
                    whole,
                    "{block} {chunk}"
                );
            }
        }
    }

    #[test]
    fn errors_in_later_chunks_name_their_own_line_and_the_first_one_wins() {
        let mut lines: Vec<String> = file(50, false).lines().map(String::from).collect();
        // Line 31 (the 30th vector line counting blanks) and line 45 are bad.
        lines[30] = "bad 1 x 2".to_string();
        lines[44] = "short 1".to_string();
        let text = lines.join("\n") + "\n";
        for (block, chunk) in [(10_000, 1_000_000), (50, 1), (500, 16)] {
            let err = parse_in_pieces(&text, block, chunk)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("vecs.txt:31: component 1 of word \"bad\""),
                "{err}"
            );
        }
        lines[30] = "fine 1 2 3".to_string();
        let text = lines.join("\n") + "\n";
        let err = parse_in_pieces(&text, 50, 1).unwrap_err().to_string();
        assert!(
            err.starts_with("vecs.txt:45: word \"short\" has 1 numbers, expected 3"),
            "{err}"
        );
    }

    #[test]
    fn numbers_read_bit_for_bit_as_the_standard_parser_reads_them() {
        let cases = [
            "0",
            "-0",
            "+0",
            "0.5",
            "-0.123456",
            "1",
            "12345678901234567",
            "123456789012345678",
            "1234567890123456789",
            "12345678901234567890",
            "9007199254740993",
            "0.1",
            "0.3",
            "3.14159265358979",
            "1e22",
            "1e23",
            "1.5e-3",
            "1E5",
            "2e+2",
            "-7.25e-22",
            "1e-23",
            "00012.50",
            ".5",
            "5.",
            "-.5",
            "0.000000000000000000001",
            "1e400",
            "1e-400",
            "inf",
            "-inf",
            "NaN",
            "nan",
            "",
            "-",
            ".",
            "e5",
            "1e",
            "1e+",
            "1.2.3",
            "1-2",
            "0x10",
            "1,5",
            "--1",
            "1e1000000000",
            "4.9e-324",
            "1.7976931348623157e308",
        ];
        for text in cases {
            let want = text.parse::<f64>().ok();
            let got = parse_number(text);
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{text:?}");
        }
        // Every 6-decimal value word2vec.c writes in [-2, 2], and shortest round-trip ones.
        let mut rng = crate::Rng::new(5);
        for _ in 0..100_000 {
            let x = 4.0 * rng.next_f64() - 2.0;
            for text in [
                format!("{x:.6}"),
                format!("{x}"),
                format!("{x:e}"),
                format!("{:.3}", x * 1e-5),
            ] {
                assert_eq!(
                    parse_number(&text).map(f64::to_bits),
                    Some(text.parse::<f64>().unwrap().to_bits()),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn a_random_table_is_seeded_rounded_and_reads_back_exactly() {
        let a = Embeddings::random(50, 7, 6, 3).unwrap();
        assert_eq!(a, Embeddings::random(50, 7, 6, 3).unwrap());
        assert_ne!(a.vecs, Embeddings::random(50, 7, 6, 4).unwrap().vecs);
        assert!(a.vecs.iter().all(|x| (-1.0..=1.0).contains(x)));
        assert!(a.vecs.iter().all(|x| ((x * 1e6).round() / 1e6) == *x));
        let mut text = Vec::new();
        write_word2vec_text_to(&mut text, &a).unwrap();
        let (back, _) = read_word2vec_text_from(&text[..], Path::new("r.txt")).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn eight_digits_at_a_time_read_every_run_length() {
        for text in [
            "12345678", "1234567x", "0000001 ", "9", "98765432", " 1234567", "0.", "07.55555",
        ] {
            let mut word = [b' '; 8];
            word[..text.len()].copy_from_slice(text.as_bytes());
            let run: String = text.chars().take_while(char::is_ascii_digit).collect();
            let want = run.parse::<u64>().unwrap_or(0);
            assert_eq!(
                eight_digits(u64::from_le_bytes(word)),
                (want, run.len()),
                "{text:?}"
            );
        }
    }

    /// A line-by-line read with `split_whitespace`: the reader's specification.
    fn line_by_line(text: &str, dim: usize) -> Option<Vec<(String, Vec<f64>)>> {
        let mut rows = Vec::new();
        for line in text.lines().skip(1) {
            let mut fields = line.split_whitespace();
            let Some(word) = fields.next() else { continue };
            let values: Vec<f64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
            if values.len() != dim {
                return None;
            }
            rows.push((word.to_string(), values));
        }
        Some(rows)
    }

    /// Numbers as word2vec.c and shortest printing write them (`-0.123456`, `0.12345`), four
    /// of which the indexed parser converts at once, among others that send their group of four, or their line, to the
    /// general parser: every value bit for bit what `str::parse` gives, at dimensions that
    /// are and are not multiples of four, whole and read in small chunks.
    #[test]
    fn word2vec_c_numbers_and_their_neighbours_read_bit_for_bit() {
        let odd = [
            "-0.000000",
            "0.000000",
            "9.999999",
            "-9.999999",
            "0.1234567",
            "1.23456",
            "+0.123456",
            "12.345678",
            "1e-3",
            "-0.5",
            "0.12345",
            "3",
            "-7.000000e-01",
        ];
        let mut rng = crate::Rng::new(11);
        for dim in [1, 3, 4, 5, 8, 13, 300] {
            for odd_share in [0.0, 0.02, 0.3] {
                let mut text = String::new();
                let mut want = Vec::new();
                for w in 0..40 {
                    let mut line = format!("w{w}");
                    let mut row = Vec::new();
                    for _ in 0..dim {
                        let field = if rng.next_f64() < odd_share {
                            odd[rng.below(odd.len() as u64) as usize].to_string()
                        } else {
                            // As word2vec.c prints six decimals, and as shortest round-trip
                            // printing gives them (`0.12345`, `-0.5`, `3`).
                            let x = ((20.0 * rng.next_f64() - 10.0) * 1e6).round() / 1e6;
                            if rng.next_f64() < 0.5 {
                                format!("{x:.6}")
                            } else {
                                format!("{x}")
                            }
                        };
                        row.push(field.parse::<f64>().unwrap());
                        line.push(' ');
                        line.push_str(&field);
                    }
                    text.push_str(&line);
                    text.push_str(if w % 7 == 3 { " \n" } else { "\n" });
                    want.push((format!("w{w}"), row));
                }
                let text = format!("{} {dim}\n{text}", want.len());
                for (block, chunk) in [(1 << 20, 1 << 20), (301, 1)] {
                    let (e, _) = parse_in_pieces(&text, block, chunk).unwrap();
                    for (i, (word, row)) in want.iter().enumerate() {
                        assert_eq!(&e.words[i], word);
                        let got: Vec<u64> = e.vec(i).iter().map(|v| v.to_bits()).collect();
                        let bits: Vec<u64> = row.iter().map(|v| v.to_bits()).collect();
                        assert_eq!(got, bits, "{word} dim {dim} share {odd_share} {block}");
                    }
                }
            }
        }
    }

    #[test]
    fn words_outside_ascii_and_unicode_whitespace_read_as_line_by_line() {
        for text in [
            "2 2\nü 1 2\nwörd 3 4\n",
            // No-break space inside a word: split there, as split_whitespace does.
            "2 2\nü 1 2\nwo\u{a0}rd 3\n",
            "1 2\nwo\u{a0}rd 3\n",
            // Ideographic space between two fields.
            "1 2\nx 1\u{3000}2\n",
            "1 2\nx 1\u{3000}y\n",
            "2 2\n日本 0.5 -0.25\n\u{2003}\nab 1 2",
        ] {
            let want = line_by_line(text, 2);
            for (block, chunk) in [(10_000, 1 << 20), (5, 1)] {
                let got = parse_in_pieces(text, block, chunk).ok().map(|(e, _)| {
                    (0..e.len())
                        .map(|i| (e.words[i].clone(), e.vec(i).to_vec()))
                        .collect::<Vec<_>>()
                });
                assert_eq!(got, want, "{text:?} {block} {chunk}");
            }
        }
    }

    #[test]
    fn a_line_longer_than_a_block_and_a_last_line_without_newline_are_read() {
        let long: String = (0..200).map(|i| format!(" {i}")).collect();
        let text = format!("2 200\nlong{long}\nlast{long}");
        let (e, _) = parse_in_pieces(&text, 16, 1).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e.get("last").unwrap()[199], 199.0);
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
