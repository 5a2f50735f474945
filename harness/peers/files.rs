//! The standard files of the peer protocol (`docs/peers.md`), written for a peer and read back
//! from it. Inputs go into a fresh work directory no one else reads, so they are written plainly
//! (no fsync: a paper-shape embedding file is hundreds of megabytes); what a peer writes is
//! checked line by line, and every error names the file and the line.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

/// Creates `path` and fills it through `write`.
pub fn write_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let run = || -> std::io::Result<()> {
        let mut w = BufWriter::new(File::create(path)?);
        write(&mut w)?;
        w.flush()
    };
    run().with_context(|| format!("cannot write the peer input {}", path.display()))
}

/// Word vectors in word2vec's text format (`parbench_common::embeddings`' writer).
pub fn write_word2vec_text<'a>(
    path: &Path,
    vocab: usize,
    dim: usize,
    words: impl Iterator<Item = (String, &'a [f64])>,
) -> Result<()> {
    write_with(path, |w| {
        parbench_common::embeddings::write_word2vec_rows(w, vocab, dim, words)
    })
}

/// Lines of one CSV column under the header `header`, each a finite number.
pub fn read_number_column(path: &Path, header: &str) -> Result<Vec<f64>> {
    Ok(read_number_rows(path, header)?
        .into_iter()
        .map(|row| row[0])
        .collect())
}

/// The rows of a CSV of finite numbers under the header `header` (`a,b`: two per row).
pub fn read_number_rows(path: &Path, header: &str) -> Result<Vec<Vec<f64>>> {
    let lines = read_lines(path)?;
    let Some((first, rest)) = lines.split_first() else {
        bail!(
            "{}: empty file, expected the header `{header}`",
            path.display()
        );
    };
    if first.trim() != header {
        bail!(
            "{}:1: the header is `{}`, expected `{header}`",
            path.display(),
            first.trim()
        );
    }
    let width = header.split(',').count();
    rest.iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let row: Vec<f64> = l
                .split(',')
                .map(|f| parse_finite(f.trim(), path, i + 2))
                .collect::<Result<_>>()?;
            if row.len() != width {
                bail!(
                    "{}:{}: {} fields, expected {width} ({header})",
                    path.display(),
                    i + 2,
                    row.len()
                );
            }
            Ok(row)
        })
        .collect()
}

/// A headerless CSV of `rows` lines of `cols` non-negative integers each.
pub fn read_count_matrix(path: &Path, rows: usize, cols: usize) -> Result<Vec<Vec<u64>>> {
    let lines = read_lines(path)?;
    let lines: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != rows {
        bail!(
            "{}: {} lines, expected {rows} (one per row)",
            path.display(),
            lines.len()
        );
    }
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let counts: Vec<u64> = line
                .split(',')
                .map(|f| {
                    f.trim().parse::<u64>().map_err(|_| {
                        anyhow::anyhow!(
                            "{}:{}: `{}` is not a non-negative integer count",
                            path.display(),
                            i + 1,
                            f.trim()
                        )
                    })
                })
                .collect::<Result<_>>()?;
            if counts.len() != cols {
                bail!(
                    "{}:{}: {} counts, expected {cols}",
                    path.display(),
                    i + 1,
                    counts.len()
                );
            }
            Ok(counts)
        })
        .collect()
}

fn read_lines(path: &Path) -> Result<Vec<String>> {
    let file = File::open(path).with_context(|| {
        format!(
            "the peer wrote no {} (its output is missing)",
            path.display()
        )
    })?;
    BufReader::new(file)
        .lines()
        .enumerate()
        .map(|(i, l)| l.with_context(|| format!("{}:{}: not UTF-8 text", path.display(), i + 1)))
        .collect()
}

fn parse_finite(text: &str, path: &Path, line: usize) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(x) => bail!("{}:{line}: {x} is not a finite number", path.display()),
        Err(_) => bail!("{}:{line}: `{text}` is not a number", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_column_reads_back_and_its_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.csv");
        std::fs::write(&path, "distance\n1.5\n2e-3\n").unwrap();
        assert_eq!(
            read_number_column(&path, "distance").unwrap(),
            vec![1.5, 2e-3]
        );
        std::fs::write(&path, "distance\n1.5\nnan\n").unwrap();
        let e = read_number_column(&path, "distance")
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("d.csv:3: NaN is not a finite number"), "{e}");
        std::fs::write(&path, "dist\n1.5\n").unwrap();
        let e = read_number_column(&path, "distance")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":1: the header is `dist`"), "{e}");
        let e = read_number_column(&dir.path().join("none.csv"), "distance")
            .unwrap_err()
            .to_string();
        assert!(e.contains("its output is missing"), "{e}");
    }

    #[test]
    fn a_count_matrix_must_have_its_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.csv");
        std::fs::write(&path, "1,2\n3,4\n").unwrap();
        assert_eq!(
            read_count_matrix(&path, 2, 2).unwrap(),
            vec![vec![1, 2], vec![3, 4]]
        );
        assert!(read_count_matrix(&path, 3, 2)
            .unwrap_err()
            .to_string()
            .contains("2 lines, expected 3"));
        std::fs::write(&path, "1,2\n3,-4\n").unwrap();
        let e = read_count_matrix(&path, 2, 2).unwrap_err().to_string();
        assert!(
            e.contains("c.csv:2: `-4` is not a non-negative integer count"),
            "{e}"
        );
    }

    #[test]
    fn word_vectors_read_back_as_the_same_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.txt");
        let vecs = [[0.1f64, -1.0 / 3.0], [1e-300, 12345.678901234567]];
        write_word2vec_text(
            &path,
            2,
            2,
            vecs.iter()
                .enumerate()
                .map(|(i, v)| (format!("w{i}"), &v[..])),
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("2 2"));
        for (line, v) in lines.zip(&vecs) {
            let parsed: Vec<f64> = line
                .split(' ')
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            assert_eq!(parsed, v.to_vec());
        }
    }
}
