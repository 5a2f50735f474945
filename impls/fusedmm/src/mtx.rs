//! MatrixMarket files (<https://math.nist.gov/MatrixMarket/formats.html>): sparse matrices as
//! `coordinate` and dense matrices (the embeddings `A`, `B`, SpMM outputs) as `array`.
//!
//! Read: `coordinate` with field `real`, `double`, `integer` or `pattern` (pattern entries get
//! value 1), symmetry `general`, `symmetric` or `skew-symmetric` (the stored triangle is mirrored,
//! negated for skew); `array` with field `real`, `double` or `integer`, `general` (column-major, as
//! the format prescribes) or `symmetric` (lower triangle, column-major). Indices are 1-based;
//! `%` lines after the header are comments; blank lines are skipped; duplicate coordinate entries
//! are summed. `complex` and `hermitian` are rejected as unsupported. Every malformed line is
//! reported with its 1-based line number, and [`read_path`] also names the file. The counts of the
//! size line are only trusted as far as the file bears them out: nothing is allocated for entries
//! before they are read, so a size line announcing 10^12 entries costs nothing.
//!
//! Write: [`write_coordinate`] (`real general`) and [`write_array`] (`real general`), values in
//! Rust's shortest round-trip form, so writing then reading gives the same bits.

use crate::dense::Dense;
use parbench_common::{Csr, CsrError};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// At most this many entries are reserved before they are read: the size line is the file's word,
/// not a fact (the vectors grow as the entries come).
const MAX_PREALLOCATED_ENTRIES: usize = 1 << 12;

/// What is wrong with a MatrixMarket file; `line` is 1-based.
#[derive(Debug, Error)]
pub enum MtxError {
    /// The file could not be opened or read.
    #[error("cannot read the matrix file: {0}")]
    Io(#[from] std::io::Error),
    /// A line could not be read: it is not UTF-8, or the reader failed.
    #[error("line {line}: cannot read the matrix file: {source}")]
    Read {
        /// The 1-based line.
        line: usize,
        /// What reading it gave.
        source: std::io::Error,
    },
    /// The first line is not a `%%MatrixMarket matrix` header.
    #[error("line 1: missing the `%%MatrixMarket matrix <format> <field> <symmetry>` header")]
    MissingHeader,
    /// The header is malformed.
    #[error("line {line}: {message}")]
    BadHeader {
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The header names a format, field or symmetry this reader does not handle (complex,
    /// hermitian...).
    #[error("line {line}: {what} is not supported (use real, integer or pattern; general, symmetric or skew-symmetric)")]
    Unsupported {
        /// The 1-based line.
        line: usize,
        /// The unsupported word.
        what: String,
    },
    /// The size line is not the integers its format needs.
    #[error("line {line}: expected the size line `{expected}`, found `{found}`")]
    BadSize {
        /// The 1-based line.
        line: usize,
        /// The expected shape of the line (`rows cols nnz` or `rows cols`).
        expected: &'static str,
        /// The line as found.
        found: String,
    },
    /// An entry line does not parse.
    #[error("line {line}: {message}: `{found}`")]
    BadEntry {
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        message: &'static str,
        /// The line as found.
        found: String,
    },
    /// An entry lies outside the matrix (indices are 1-based).
    #[error("line {line}: entry ({row}, {col}) is outside the {rows} x {cols} matrix (indices are 1-based)")]
    IndexOutOfRange {
        /// The 1-based line.
        line: usize,
        /// The 1-based row found.
        row: usize,
        /// The 1-based column found.
        col: usize,
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// The file has more entries than its size line announced.
    #[error("line {line}: more entries than the {expected} the size line announced")]
    TooManyEntries {
        /// The 1-based line of the first extra entry.
        line: usize,
        /// Entries the size line announced.
        expected: usize,
    },
    /// The file ends before the entries its size line announced.
    #[error(
        "line {line}: the file ends after {got} entries, but the size line announced {expected}"
    )]
    Truncated {
        /// The file's last line.
        line: usize,
        /// Entries the size line announced.
        expected: usize,
        /// Entries the file holds.
        got: usize,
    },
    /// A dense file was given where a sparse one is needed, or the other way round.
    #[error("the file holds a {found} matrix where a {wanted} one is needed")]
    WrongFormat {
        /// The format of the file.
        found: &'static str,
        /// The format needed.
        wanted: &'static str,
    },
    /// The size line announces dimensions beyond this reader's limits.
    #[error("line {line}: dimensions {rows} x {cols} exceed {limit}")]
    TooLarge {
        /// The size line.
        line: usize,
        /// Rows announced.
        rows: usize,
        /// Columns announced.
        cols: usize,
        /// What they exceed.
        limit: &'static str,
    },
    /// The entries did not form a valid CSR.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// An error of [`read_path`], naming the file.
    #[error("{}: {error}", path.display())]
    File {
        /// The file read.
        path: PathBuf,
        /// What was wrong with it.
        error: Box<MtxError>,
    },
}

/// A matrix read from a MatrixMarket file.
#[derive(Clone, Debug, PartialEq)]
pub enum MatrixFile {
    /// From a `coordinate` file.
    Sparse(Csr),
    /// From an `array` file.
    Dense(Dense),
}

#[derive(Clone, Copy, PartialEq)]
enum Field {
    Real,
    Pattern,
}

#[derive(Clone, Copy, PartialEq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

fn parse_usize(tok: &str) -> Option<usize> {
    tok.parse::<usize>().ok()
}

fn parse_value(tok: Option<&str>, line: usize, raw: &str) -> Result<f64, MtxError> {
    let bad = |message| MtxError::BadEntry {
        line,
        message,
        found: raw.trim().to_string(),
    };
    let v: f64 = tok
        .ok_or_else(|| bad("missing value"))?
        .parse()
        .map_err(|_| bad("value is not a number"))?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(bad("value is not finite"))
    }
}

/// The lines of a file with their 1-based numbers, remembering the last one read (errors found at
/// the end of the file name it).
struct NumberedLines<R> {
    lines: std::io::Lines<R>,
    last: usize,
}

impl<R: BufRead> NumberedLines<R> {
    /// The next line, `None` at the end of the file. A line that cannot be read (not UTF-8, an
    /// I/O error) is an error naming it.
    fn next_line(&mut self) -> Result<Option<(usize, String)>, MtxError> {
        let Some(line) = self.lines.next() else {
            return Ok(None);
        };
        self.last += 1;
        let n = self.last;
        line.map(|l| Some((n, l)))
            .map_err(|source| MtxError::Read { line: n, source })
    }

    /// The next line that is neither blank nor a `%` comment.
    fn next_data(&mut self) -> Result<Option<(usize, String)>, MtxError> {
        while let Some((n, l)) = self.next_line()? {
            let t = l.trim_start();
            if !t.is_empty() && !t.starts_with('%') {
                return Ok(Some((n, l)));
            }
        }
        Ok(None)
    }
}

/// Reads a MatrixMarket file of either format.
pub fn read_matrix(reader: impl BufRead) -> Result<MatrixFile, MtxError> {
    let mut lines = NumberedLines {
        lines: reader.lines(),
        last: 0,
    };
    let (_, header) = lines.next_line()?.ok_or(MtxError::MissingHeader)?;
    let words: Vec<String> = header
        .split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(MtxError::MissingHeader);
    }
    if words.len() != 5 || words[1] != "matrix" {
        return Err(MtxError::BadHeader {
            line: 1,
            message: format!(
                "expected `%%MatrixMarket matrix <format> <field> <symmetry>`, found `{}`",
                header.trim()
            ),
        });
    }
    let unsupported = |what: &str| MtxError::Unsupported {
        line: 1,
        what: what.to_string(),
    };
    let coordinate = match words[2].as_str() {
        "coordinate" => true,
        "array" => false,
        other => return Err(unsupported(&format!("format `{other}`"))),
    };
    let field = match words[3].as_str() {
        "real" | "double" | "integer" => Field::Real,
        "pattern" if coordinate => Field::Pattern,
        other => return Err(unsupported(&format!("field `{other}`"))),
    };
    let symmetry = match words[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        other => return Err(unsupported(&format!("symmetry `{other}`"))),
    };

    let expected = if coordinate {
        "rows cols nnz"
    } else {
        "rows cols"
    };
    let (size_line, size) = match lines.next_data()? {
        Some(numbered) => numbered,
        None => {
            return Err(MtxError::BadSize {
                line: lines.last + 1,
                expected,
                found: String::new(),
            })
        }
    };
    let dims: Vec<Option<usize>> = size.split_whitespace().map(parse_usize).collect();
    let want = if coordinate { 3 } else { 2 };
    if dims.len() != want || dims.iter().any(Option::is_none) {
        return Err(MtxError::BadSize {
            line: size_line,
            expected,
            found: size.trim().to_string(),
        });
    }
    let dims: Vec<usize> = dims.into_iter().flatten().collect();
    let (rows, cols) = (dims[0], dims[1]);
    if symmetry != Symmetry::General && rows != cols {
        return Err(MtxError::BadSize {
            line: size_line,
            expected: "a square matrix (symmetric files must be square)",
            found: size.trim().to_string(),
        });
    }

    if coordinate {
        if rows > u32::MAX as usize || cols > u32::MAX as usize {
            return Err(MtxError::TooLarge {
                line: size_line,
                rows,
                cols,
                limit: "32-bit column indices",
            });
        }
        let nnz = dims[2];
        // Reserve no more than a few entries before they are read (see MAX_PREALLOCATED_ENTRIES):
        // `nnz` may be anything, and symmetric files store up to two triplets per entry.
        let per_entry = if symmetry == Symmetry::General { 1 } else { 2 };
        let mut triplets = Vec::with_capacity(nnz.min(MAX_PREALLOCATED_ENTRIES) * per_entry);
        let mut got = 0usize;
        while let Some((n, l)) = lines.next_data()? {
            if got == nnz {
                return Err(MtxError::TooManyEntries {
                    line: n,
                    expected: nnz,
                });
            }
            let mut toks = l.split_whitespace();
            let idx = |t: Option<&str>| t.and_then(parse_usize);
            let (i, j) = match (idx(toks.next()), idx(toks.next())) {
                (Some(i), Some(j)) => (i, j),
                _ => {
                    return Err(MtxError::BadEntry {
                        line: n,
                        message: "expected `row col value` with integer indices",
                        found: l.trim().to_string(),
                    })
                }
            };
            if i == 0 || j == 0 || i > rows || j > cols {
                return Err(MtxError::IndexOutOfRange {
                    line: n,
                    row: i,
                    col: j,
                    rows,
                    cols,
                });
            }
            let v = match field {
                Field::Pattern => 1.0,
                Field::Real => parse_value(toks.next(), n, &l)?,
            };
            if toks.next().is_some() {
                return Err(MtxError::BadEntry {
                    line: n,
                    message: "too many fields",
                    found: l.trim().to_string(),
                });
            }
            triplets.push((i - 1, j - 1, v));
            if i != j {
                match symmetry {
                    Symmetry::General => {}
                    Symmetry::Symmetric => triplets.push((j - 1, i - 1, v)),
                    Symmetry::Skew => triplets.push((j - 1, i - 1, -v)),
                }
            }
            got += 1;
        }
        if got != nnz {
            return Err(MtxError::Truncated {
                line: lines.last,
                expected: nnz,
                got,
            });
        }
        Ok(MatrixFile::Sparse(Csr::from_triplets(
            rows, cols, &triplets,
        )?))
    } else {
        // Column-major; symmetric files store the lower triangle (skew: strictly lower). The
        // values are collected first and the matrix allocated only once the file has held them
        // all: the size line alone could announce 10^12 of them.
        let first_row = move |j: usize| match symmetry {
            Symmetry::General => 0,
            Symmetry::Symmetric => j,
            Symmetry::Skew => j + 1,
        };
        let expected_values = match symmetry {
            Symmetry::General => rows.checked_mul(cols),
            Symmetry::Symmetric => rows.checked_mul(rows.saturating_add(1)).map(|x| x / 2),
            Symmetry::Skew => rows.checked_mul(rows.saturating_sub(1)).map(|x| x / 2),
        }
        .filter(|_| rows.checked_mul(cols).is_some())
        .ok_or(MtxError::TooLarge {
            line: size_line,
            rows,
            cols,
            limit: "the addressable memory",
        })?;
        let mut values = Vec::with_capacity(expected_values.min(MAX_PREALLOCATED_ENTRIES));
        while let Some((n, l)) = lines.next_data()? {
            for tok in l.split_whitespace() {
                if values.len() == expected_values {
                    return Err(MtxError::TooManyEntries {
                        line: n,
                        expected: expected_values,
                    });
                }
                values.push(parse_value(Some(tok), n, &l)?);
            }
        }
        if values.len() != expected_values {
            return Err(MtxError::Truncated {
                line: lines.last,
                expected: expected_values,
                got: values.len(),
            });
        }
        let mut out = Dense::zeros(rows, cols);
        let positions = (0..cols).flat_map(|j| (first_row(j)..rows).map(move |i| (i, j)));
        // Values first: `zip` then never asks `positions` for more than there are values (a
        // 0 x 10^18 array has no position, and finding that out would take 10^18 steps).
        for (v, (i, j)) in values.into_iter().zip(positions) {
            out.row_mut(i)[j] = v;
            match symmetry {
                Symmetry::General => {}
                Symmetry::Symmetric => out.row_mut(j)[i] = v,
                Symmetry::Skew => out.row_mut(j)[i] = -v,
            }
        }
        Ok(MatrixFile::Dense(out))
    }
}

/// Reads a `coordinate` file as a CSR.
pub fn read_sparse(reader: impl BufRead) -> Result<Csr, MtxError> {
    match read_matrix(reader)? {
        MatrixFile::Sparse(s) => Ok(s),
        MatrixFile::Dense(_) => Err(MtxError::WrongFormat {
            found: "dense (array)",
            wanted: "sparse (coordinate)",
        }),
    }
}

/// Reads an `array` file as a dense matrix.
pub fn read_dense(reader: impl BufRead) -> Result<Dense, MtxError> {
    match read_matrix(reader)? {
        MatrixFile::Dense(d) => Ok(d),
        MatrixFile::Sparse(_) => Err(MtxError::WrongFormat {
            found: "sparse (coordinate)",
            wanted: "dense (array)",
        }),
    }
}

/// Reads a MatrixMarket file from disk; errors name the file ([`MtxError::File`]).
pub fn read_path(path: &Path) -> Result<MatrixFile, MtxError> {
    File::open(path)
        .map_err(MtxError::from)
        .and_then(|file| read_matrix(BufReader::new(file)))
        .map_err(|error| MtxError::File {
            path: path.to_path_buf(),
            error: Box::new(error),
        })
}

/// Writes `s` as `coordinate real general`.
pub fn write_coordinate(mut w: impl Write, s: &Csr) -> std::io::Result<()> {
    let mut w = BufWriter::new(&mut w);
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "{} {} {}", s.nrows(), s.ncols(), s.nnz())?;
    for i in 0..s.nrows() {
        let (cols, vals) = s.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            writeln!(w, "{} {} {}", i + 1, j + 1, v)?;
        }
    }
    w.flush()
}

/// Writes `d` as `array real general` (column-major, one value per line).
pub fn write_array(mut w: impl Write, d: &Dense) -> std::io::Result<()> {
    let mut w = BufWriter::new(&mut w);
    writeln!(w, "%%MatrixMarket matrix array real general")?;
    writeln!(w, "{} {}", d.rows(), d.cols())?;
    for j in 0..d.cols() {
        for i in 0..d.rows() {
            writeln!(w, "{}", d.get(i, j))?;
        }
    }
    w.flush()
}
