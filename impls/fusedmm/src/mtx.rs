//! MatrixMarket files (<https://math.nist.gov/MatrixMarket/formats.html>): sparse matrices as
//! `coordinate` and dense matrices (the embeddings `A`, `B`, SpMM outputs) as `array`.
//!
//! Read: `coordinate` with field `real`, `double`, `integer` or `pattern` (pattern entries get
//! value 1), symmetry `general`, `symmetric` or `skew-symmetric` (the stored triangle is mirrored,
//! negated for skew); `array` with field `real`, `double` or `integer`, `general` (column-major, as
//! the format prescribes) or `symmetric` (lower triangle, column-major). Indices are 1-based;
//! `%` lines after the header are comments; blank lines are skipped; duplicate coordinate entries
//! are summed. `complex` and `hermitian` are rejected as unsupported. Every malformed line is
//! reported with its 1-based line number.
//!
//! Write: [`write_coordinate`] (`real general`) and [`write_array`] (`real general`), values in
//! Rust's shortest round-trip form, so writing then reading gives the same bits.

use crate::dense::Dense;
use parbench_common::{Csr, CsrError};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use thiserror::Error;

/// What is wrong with a MatrixMarket file; `line` is 1-based.
#[derive(Debug, Error)]
pub enum MtxError {
    #[error("cannot read the matrix file: {0}")]
    Io(#[from] std::io::Error),
    #[error("line 1: missing the `%%MatrixMarket matrix <format> <field> <symmetry>` header")]
    MissingHeader,
    #[error("line {line}: {message}")]
    BadHeader { line: usize, message: String },
    #[error("line {line}: {what} is not supported (use real, integer or pattern; general, symmetric or skew-symmetric)")]
    Unsupported { line: usize, what: String },
    #[error("line {line}: expected the size line `{expected}`, found `{found}`")]
    BadSize {
        line: usize,
        expected: &'static str,
        found: String,
    },
    #[error("line {line}: {message}: `{found}`")]
    BadEntry {
        line: usize,
        message: &'static str,
        found: String,
    },
    #[error("line {line}: entry ({row}, {col}) is outside the {rows} x {cols} matrix (indices are 1-based)")]
    IndexOutOfRange {
        line: usize,
        row: usize,
        col: usize,
        rows: usize,
        cols: usize,
    },
    #[error("line {line}: more entries than the {expected} the size line announced")]
    TooManyEntries { line: usize, expected: usize },
    #[error("the file ends after {got} entries, but the size line announced {expected}")]
    Truncated { expected: usize, got: usize },
    #[error("the file holds a {found} matrix where a {wanted} one is needed")]
    WrongFormat {
        found: &'static str,
        wanted: &'static str,
    },
    #[error("dimensions {rows} x {cols} exceed 32-bit column indices")]
    TooLarge { rows: usize, cols: usize },
    #[error(transparent)]
    Csr(#[from] CsrError),
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

/// Reads a MatrixMarket file of either format.
pub fn read_matrix(reader: impl BufRead) -> Result<MatrixFile, MtxError> {
    let mut lines = reader.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines.next().ok_or(MtxError::MissingHeader)?;
    let header = header?;
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

    // Data lines: skip comments and blank lines, keep line numbers.
    let mut data = lines.filter_map(|(n, l)| match l {
        Ok(s) if s.trim().is_empty() || s.trim_start().starts_with('%') => None,
        other => Some((n, other)),
    });
    let expected = if coordinate {
        "rows cols nnz"
    } else {
        "rows cols"
    };
    let (size_line, size) = match data.next() {
        Some((n, l)) => (n, l?),
        None => {
            return Err(MtxError::BadSize {
                line: 2,
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
            return Err(MtxError::TooLarge { rows, cols });
        }
        let nnz = dims[2];
        let mut triplets = Vec::with_capacity(if symmetry == Symmetry::General {
            nnz
        } else {
            2 * nnz
        });
        let mut got = 0usize;
        for (n, l) in data {
            let l = l?;
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
            return Err(MtxError::Truncated { expected: nnz, got });
        }
        Ok(MatrixFile::Sparse(Csr::from_triplets(
            rows, cols, &triplets,
        )?))
    } else {
        // Column-major; symmetric files store the lower triangle (skew: strictly lower).
        let positions: Vec<(usize, usize)> = match symmetry {
            Symmetry::General => (0..cols)
                .flat_map(|j| (0..rows).map(move |i| (i, j)))
                .collect(),
            Symmetry::Symmetric => (0..cols)
                .flat_map(|j| (j..rows).map(move |i| (i, j)))
                .collect(),
            Symmetry::Skew => (0..cols)
                .flat_map(|j| (j + 1..rows).map(move |i| (i, j)))
                .collect(),
        };
        let mut out = Dense::zeros(rows, cols);
        let mut got = 0usize;
        for (n, l) in data {
            let l = l?;
            for tok in l.split_whitespace() {
                let Some(&(i, j)) = positions.get(got) else {
                    return Err(MtxError::TooManyEntries {
                        line: n,
                        expected: positions.len(),
                    });
                };
                let v = parse_value(Some(tok), n, &l)?;
                out.row_mut(i)[j] = v;
                match symmetry {
                    Symmetry::General => {}
                    Symmetry::Symmetric => out.row_mut(j)[i] = v,
                    Symmetry::Skew => out.row_mut(j)[i] = -v,
                }
                got += 1;
            }
        }
        if got != positions.len() {
            return Err(MtxError::Truncated {
                expected: positions.len(),
                got,
            });
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

/// Reads a MatrixMarket file from disk.
pub fn read_path(path: &Path) -> Result<MatrixFile, MtxError> {
    read_matrix(BufReader::new(File::open(path)?))
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
