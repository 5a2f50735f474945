//! The MatrixMarket reader against malformed input: valid files made by the test are mutated
//! (truncated, bytes flipped, junk or non-UTF-8 inserted, numbers replaced by NaN, infinities,
//! negatives, zero or absurd values, absurd size lines). The reader must never panic, never
//! allocate what a header announces before the file shows it, and either read the file or
//! refuse it with an error naming the line (and the file, through `read_path`).

#[path = "../../common/tests/support/malformed.rs"]
mod malformed;

use fusedmm::mtx::{self, MatrixFile, MtxError};
use malformed::{
    apply_all, assert_names_file_and_line, assert_names_line, config, largest_allocation,
    mutations, replace_number, TempDir, ABSURD_COUNTS,
};
use proptest::prelude::*;
use std::path::Path;

/// A small valid MatrixMarket file and the dense matrix (row-major) it describes.
#[derive(Clone, Debug)]
struct MtxCase {
    text: String,
    rows: usize,
    cols: usize,
    dense: Vec<f64>,
    coordinate: bool,
}

/// Values that sum exactly (quarters), in the file's text form.
fn value() -> impl Strategy<Value = f64> {
    (-40i32..=40).prop_map(|k| k as f64 / 4.0)
}

fn comment_or_blank() -> impl Strategy<Value = Option<&'static str>> {
    prop::option::weighted(
        0.2,
        prop::sample::select(vec!["% a comment", "", "   ", "%% another"]),
    )
}

fn coordinate_case() -> impl Strategy<Value = MtxCase> {
    let field = prop::sample::select(vec!["real", "integer", "pattern", "double"]);
    let symmetry = prop::sample::select(vec!["general", "symmetric", "skew-symmetric"]);
    (1usize..=5, 1usize..=5, field, symmetry).prop_flat_map(|(rows, cols, field, symmetry)| {
        let cols = if symmetry == "general" { cols } else { rows };
        let entry = (0..rows, 0..cols, value(), comment_or_blank());
        prop::collection::vec(entry, 0..8).prop_map(move |entries| {
            let mut dense = vec![0.0; rows * cols];
            let mut lines = Vec::new();
            for &(i, j, v, extra) in &entries {
                // Symmetric files store the lower triangle; skew ones the strictly lower one.
                let (i, j) = if symmetry == "general" || i >= j {
                    (i, j)
                } else {
                    (j, i)
                };
                if symmetry == "skew-symmetric" && i == j {
                    continue;
                }
                let v = match field {
                    "pattern" => 1.0,
                    "integer" => v.round(),
                    _ => v,
                };
                dense[i * cols + j] += v;
                match symmetry {
                    "symmetric" if i != j => dense[j * cols + i] += v,
                    "skew-symmetric" => dense[j * cols + i] -= v,
                    _ => {}
                }
                lines.push(if field == "pattern" {
                    format!("{} {}", i + 1, j + 1)
                } else {
                    format!("{} {} {v}", i + 1, j + 1)
                });
                if let Some(extra) = extra {
                    lines.push(extra.to_string());
                }
            }
            let nnz = lines
                .iter()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('%'))
                .count();
            let text = format!(
                "%%MatrixMarket matrix coordinate {field} {symmetry}\n% made by a test\n{rows} {cols} {nnz}\n{}",
                lines.iter().map(|l| format!("{l}\n")).collect::<String>()
            );
            MtxCase {
                text,
                rows,
                cols,
                dense,
                coordinate: true,
            }
        })
    })
}

fn array_case() -> impl Strategy<Value = MtxCase> {
    let symmetry = prop::sample::select(vec!["general", "symmetric"]);
    (1usize..=4, 1usize..=4, symmetry).prop_flat_map(|(rows, cols, symmetry)| {
        let cols = if symmetry == "general" { cols } else { rows };
        let count = if symmetry == "general" {
            rows * cols
        } else {
            rows * (rows + 1) / 2
        };
        prop::collection::vec(value(), count).prop_map(move |values| {
            let mut dense = vec![0.0; rows * cols];
            let mut next = values.iter();
            for j in 0..cols {
                let first = if symmetry == "general" { 0 } else { j };
                for i in first..rows {
                    let v = *next.next().expect("one value per position");
                    dense[i * cols + j] = v;
                    if symmetry == "symmetric" {
                        dense[j * cols + i] = v;
                    }
                }
            }
            let body: String = values.iter().map(|v| format!("{v}\n")).collect();
            MtxCase {
                text: format!("%%MatrixMarket matrix array real {symmetry}\n{rows} {cols}\n{body}"),
                rows,
                cols,
                dense,
                coordinate: false,
            }
        })
    })
}

fn any_case() -> impl Strategy<Value = MtxCase> {
    prop_oneof![3 => coordinate_case(), 1 => array_case()]
}

/// Elements of the result, which a reader may of course allocate: the CSR's row pointers or the
/// dense array.
fn result_elements(m: &MatrixFile) -> usize {
    match m {
        MatrixFile::Sparse(s) => s.nrows() + 1 + s.nnz(),
        MatrixFile::Dense(d) => d.rows() * d.cols(),
    }
}

/// Reads `bytes` through `read_matrix` and `read_path`: no panic, allocation bounded by the
/// input (plus the result's own size), errors naming the line (and the file, for `read_path`).
fn check_read(bytes: &[u8], dir: &TempDir) -> Result<MatrixFile, MtxError> {
    let (result, largest) = largest_allocation(|| mtx::read_matrix(bytes));
    let result_bytes = result.as_ref().map_or(0, |m| 16 * result_elements(m));
    assert!(
        largest <= malformed::allocation_bound(bytes.len()) + result_bytes,
        "{largest} bytes allocated at once for {} bytes of input",
        bytes.len()
    );
    let path = dir.join("m.mtx");
    std::fs::write(&path, bytes).expect("write the test file");
    let from_file = mtx::read_path(&path);
    match (&result, &from_file) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(e), Err(f)) => {
            assert_names_line(&e.to_string(), "", bytes);
            assert_names_file_and_line(&f.to_string(), &path, bytes);
        }
        _ => panic!("read_matrix and read_path disagree: {result:?} / {from_file:?}"),
    }
    result
}

proptest! {
    #![proptest_config(config(256, 0x6d74_7801))]

    #[test]
    fn valid_files_read_as_the_matrix_they_describe(case in any_case()) {
        let m = mtx::read_matrix(case.text.as_bytes());
        let (rows, cols, dense) = match m {
            Ok(MatrixFile::Sparse(s)) if case.coordinate => (s.nrows(), s.ncols(), s.to_dense()),
            Ok(MatrixFile::Dense(d)) if !case.coordinate => (d.rows(), d.cols(), d.data().to_vec()),
            other => panic!("{:?} read as {other:?}", case.text),
        };
        prop_assert_eq!((rows, cols), (case.rows, case.cols));
        prop_assert_eq!(dense, case.dense);
    }

    #[test]
    fn mutated_files_are_read_or_refused_with_the_line(
        case in any_case(),
        changes in mutations(),
    ) {
        let dir = TempDir::new("mtx-mutated");
        let bytes = apply_all(case.text.as_bytes(), &changes);
        let _ = check_read(&bytes, &dir);
    }

    #[test]
    fn absurd_size_lines_are_refused_without_allocating_them(
        case in any_case(),
        field in 0usize..3,
        absurd in prop::sample::select(
            ABSURD_COUNTS.iter().copied().chain(["1000000"]).collect::<Vec<_>>()
        ),
    ) {
        // The size line holds the file's first numbers: three in a coordinate file, two in an
        // array file.
        let fields = if case.coordinate { 3 } else { 2 };
        // A 10^6-row coordinate matrix is valid (and its CSR that large); only arrays, whose
        // every entry the file must hold, get the smaller absurd size.
        prop_assume!(absurd != "1000000" || !case.coordinate);
        let bytes = replace_number(case.text.as_bytes(), field % fields, absurd);
        let dir = TempDir::new("mtx-absurd");
        let result = check_read(&bytes, &dir);
        prop_assert!(result.is_err(), "{:?} was read", String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn the_allocation_probe_sees_allocations() {
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert!(largest >= v.len(), "{largest}");
}

fn read(text: &[u8]) -> Result<MatrixFile, MtxError> {
    let (result, largest) = largest_allocation(|| mtx::read_matrix(text));
    assert!(
        largest <= malformed::allocation_bound(text.len()),
        "{largest} bytes"
    );
    result
}

#[test]
fn a_size_line_announcing_10e12_entries_allocates_nothing_up_front() {
    // Found by absurd_size_lines...: the triplets were reserved for nnz up front (an abort).
    let err = read(b"%%MatrixMarket matrix coordinate real general\n2 2 1000000000000\n1 1 1\n")
        .unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
    assert!(matches!(err, MtxError::Truncated { got: 1, .. }), "{err}");
}

#[test]
fn a_symmetric_size_line_near_usize_max_does_not_overflow() {
    // Found by absurd_size_lines...: 2 * nnz overflowed (a panic in debug builds).
    let err = read(b"%%MatrixMarket matrix coordinate real symmetric\n2 2 9223372036854775807\n")
        .unwrap_err();
    assert!(matches!(err, MtxError::Truncated { .. }), "{err}");
}

#[test]
fn an_array_announcing_10e12_entries_allocates_nothing_up_front() {
    // Found by absurd_size_lines...: every position of the array, and the array itself, were
    // allocated before the first value was read.
    let err =
        read(b"%%MatrixMarket matrix array real general\n1000000 1000000\n1\n2\n").unwrap_err();
    assert!(matches!(err, MtxError::Truncated { got: 2, .. }), "{err}");
    let err =
        read(b"%%MatrixMarket matrix array real general\n4294967296 4294967296\n1\n").unwrap_err();
    assert!(err.to_string().starts_with("line 2:"), "{err}");
    let err = read(b"%%MatrixMarket matrix array real symmetric\n4294967296 4294967296\n1\n")
        .unwrap_err();
    assert!(err.to_string().starts_with("line 2:"), "{err}");
}

#[test]
fn an_empty_array_with_absurdly_many_columns_reads_at_once() {
    // Found while fixing the above: the positions of a 0-row array were listed column by column,
    // 10^18 empty columns here (a hang).
    let m = read(b"%%MatrixMarket matrix array real general\n0 1000000000000000000\n").unwrap();
    assert!(matches!(m, MatrixFile::Dense(d) if d.rows() == 0));
}

#[test]
fn a_line_that_is_not_utf8_is_named() {
    // Found by mutated_files...: the I/O error of a non-UTF-8 line had no line number.
    let err =
        read(b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 \xff\n").unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
    let err = read(b"%%MatrixMarket matrix coordinate real general\xc3\n2 2 1\n").unwrap_err();
    assert!(err.to_string().starts_with("line 1:"), "{err}");
}

#[test]
fn a_file_that_ends_early_names_its_last_line() {
    // Found by mutated_files...: the truncation error named no line.
    let err =
        read(b"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n% end\n").unwrap_err();
    assert!(err.to_string().starts_with("line 4:"), "{err}");
    let err = read(b"%%MatrixMarket matrix array real general\n2 1\n1\n").unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
    let err =
        read(b"%%MatrixMarket matrix coordinate real general\n% only a comment\n").unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
}

#[test]
fn dimensions_beyond_32_bits_name_the_size_line() {
    // Found by absurd_size_lines...: the error named no line.
    let err =
        read(b"%%MatrixMarket matrix coordinate real general\n%\n4294967296 1 0\n").unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
}

#[test]
fn read_path_names_the_file() {
    // Found by mutated_files...: read_path's errors did not say which file.
    let dir = TempDir::new("mtx-path");
    let path = dir.join("bad.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 1\n",
    )
    .unwrap();
    let err = mtx::read_path(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("line 3"), "{err}");
    let missing = mtx::read_path(Path::new("/nonexistent/m.mtx")).unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/m.mtx"),
        "{missing}"
    );
}
