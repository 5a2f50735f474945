//! Word vectors in the word2vec binary format, as word2vec.c's `-binary 1` and gensim's
//! `save_word2vec_format(binary=True)` write them.
//!
//! Format: a text header line `V d`, then `V` records, each the word's bytes, one space, and
//! `d` little-endian `f32` values; word2vec.c ends each record with a newline, gensim does not,
//! so whitespace before a word is skipped. Values are widened to `f64` exactly. A file whose
//! name ends in `.gz`, or that starts with the gzip magic bytes, is decompressed on the fly.
//!
//! Reading needs no parse of numbers, so it runs at the speed of the disk or the page cache:
//! the fastest way to load a table after the parsed cache ([`super::cache`]).

use super::{open_input, Embeddings, EmbeddingsError, ReadStats};
use std::collections::HashMap;
use std::io::{self, BufRead, Read, Write};
use std::path::Path;

/// Longest word accepted, in bytes: word2vec.c keeps 100; a longer run is a damaged file, not
/// a word, and is reported rather than read into memory whole.
const MAX_WORD_BYTES: usize = 1 << 16;

/// Reads a word2vec binary file (plain or gzip); see the module docs for the format.
pub fn read_word2vec_binary(path: &Path) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    let (reader, _) = open_input(path)?;
    read_word2vec_binary_from(reader, path)
}

/// Reads the word2vec binary format from any reader; `path` is only used in error messages.
pub fn read_word2vec_binary_from<R: BufRead>(
    mut reader: R,
    path: &Path,
) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
    let mut offset = 0u64;
    let mut header = Vec::new();
    let io_error = |source| EmbeddingsError::Io {
        path: path.to_path_buf(),
        source,
    };
    offset += reader.read_until(b'\n', &mut header).map_err(io_error)? as u64;
    let header_text = String::from_utf8_lossy(&header).trim().to_owned();
    let bad_header = || EmbeddingsError::BadHeader {
        path: path.to_path_buf(),
        found: header_text.clone(),
    };
    if header.is_empty() {
        return Err(EmbeddingsError::Empty {
            path: path.to_path_buf(),
        });
    }
    let (words, dim) = match header_text
        .split_whitespace()
        .collect::<Vec<_>>()
        .as_slice()
    {
        [v, d] => match (v.parse::<usize>(), d.parse::<usize>()) {
            (Ok(v), Ok(d)) if d > 0 => (v, d),
            _ => return Err(bad_header()),
        },
        _ => return Err(bad_header()),
    };
    let record_bytes = dim.checked_mul(4).ok_or_else(bad_header)?;

    // As for text, the header's count reserves a few thousand words at most: the records, not
    // the header, decide how much memory the table takes.
    let capacity = words.min(1 << 12);
    let mut table = Embeddings {
        words: Vec::with_capacity(capacity),
        dim,
        vecs: Vec::with_capacity(capacity * dim),
        index: HashMap::with_capacity(capacity),
    };
    let mut stats = ReadStats {
        had_header: true,
        ..ReadStats::default()
    };
    let mut word = Vec::new();
    let mut values = vec![0u8; record_bytes];
    for record in 1..=words {
        let bad = |offset: u64, word: &[u8], problem: String| EmbeddingsError::BadRecord {
            path: path.to_path_buf(),
            offset,
            record,
            word: String::from_utf8_lossy(word).into_owned(),
            problem,
        };
        offset += skip_whitespace(&mut reader).map_err(io_error)?;
        let start = offset;
        word.clear();
        let n = (&mut reader)
            .take(MAX_WORD_BYTES as u64 + 1)
            .read_until(b' ', &mut word)
            .map_err(io_error)?;
        offset += n as u64;
        if word.last() != Some(&b' ') {
            let problem = if n == 0 {
                format!("the file ends here, but the header promises {words} vectors")
            } else if n > MAX_WORD_BYTES {
                format!("no space within {MAX_WORD_BYTES} bytes: not a word2vec binary record")
            } else {
                "the file ends inside the word".to_string()
            };
            return Err(bad(start, &word, problem));
        }
        word.pop();
        let text = std::str::from_utf8(&word)
            .map_err(|_| bad(start, &word, "the word is not valid UTF-8".to_string()))?;
        reader.read_exact(&mut values).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                bad(
                    offset,
                    &word,
                    format!("the file ends inside its {dim} values ({record_bytes} bytes)"),
                )
            } else {
                io_error(e)
            }
        })?;
        let values_at = offset;
        offset += record_bytes as u64;
        stats.lines += 1;
        if table.index.contains_key(text) {
            stats.duplicate_words += 1;
            continue;
        }
        let id = u32::try_from(table.words.len()).map_err(|_| EmbeddingsError::Shape {
            words: table.words.len() + 1,
            dim,
            values: table.vecs.len(),
        })?;
        let row = table.vecs.len();
        table.vecs.extend(
            values
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        );
        if let Some(k) = table.vecs[row..].iter().position(|x| !x.is_finite()) {
            return Err(bad(
                values_at + 4 * k as u64,
                &word,
                format!("component {k} is not finite ({})", table.vecs[row + k]),
            ));
        }
        table.index.insert(text.to_owned(), id);
        table.words.push(text.to_owned());
    }
    offset += skip_whitespace(&mut reader).map_err(io_error)?;
    if !reader.fill_buf().map_err(io_error)?.is_empty() {
        return Err(EmbeddingsError::BadRecord {
            path: path.to_path_buf(),
            offset,
            record: words + 1,
            word: String::new(),
            problem: format!("data after the {words} vectors the header promises"),
        });
    }
    Ok((table, stats))
}

/// Skips whitespace (the newline word2vec.c writes after each record); returns the bytes
/// skipped.
fn skip_whitespace<R: BufRead>(reader: &mut R) -> io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let buf = reader.fill_buf()?;
        let n = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let all = n == buf.len() && n > 0;
        reader.consume(n);
        skipped += n as u64;
        if !all {
            return Ok(skipped);
        }
    }
}

/// Writes `embeddings` in the word2vec binary format (each record ends with a newline, as
/// word2vec.c writes it), gzip-compressed when `path` ends in `.gz`, atomically. Values are
/// stored as `f32`, as the format has them: a value an `f32` cannot hold exactly is rounded.
pub fn write_word2vec_binary(path: &Path, embeddings: &Embeddings) -> Result<(), EmbeddingsError> {
    super::write_maybe_gzipped(path, |out| write_word2vec_binary_to(out, embeddings))
}

/// Writes the word2vec binary format to any writer.
pub fn write_word2vec_binary_to<W: Write + ?Sized>(
    out: &mut W,
    embeddings: &Embeddings,
) -> io::Result<()> {
    writeln!(out, "{} {}", embeddings.len(), embeddings.dim)?;
    let mut bytes = Vec::with_capacity(4 * embeddings.dim);
    for (i, word) in embeddings.words.iter().enumerate() {
        out.write_all(word.as_bytes())?;
        out.write_all(b" ")?;
        bytes.clear();
        for &x in embeddings.vec(i) {
            bytes.extend_from_slice(&(x as f32).to_le_bytes());
        }
        out.write_all(&bytes)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Embeddings {
        Embeddings::new(
            vec!["king".into(), "queen".into(), "ü".into()],
            2,
            vec![1.0, -2.5, 0.125, 3.0, -0.0, 1e-3],
        )
        .unwrap()
    }

    fn as_f32(e: &Embeddings) -> Vec<f64> {
        e.vecs.iter().map(|&x| f64::from(x as f32)).collect()
    }

    fn read(bytes: &[u8]) -> Result<(Embeddings, ReadStats), EmbeddingsError> {
        read_word2vec_binary_from(bytes, Path::new("v.bin"))
    }

    #[test]
    fn writes_and_reads_back_the_f32_values() {
        let t = table();
        let mut bytes = Vec::new();
        write_word2vec_binary_to(&mut bytes, &t).unwrap();
        let (back, stats) = read(&bytes).unwrap();
        assert_eq!(back.words, t.words);
        assert_eq!(back.vecs, as_f32(&t));
        assert_eq!(back.get("queen").unwrap(), &[0.125, 3.0]);
        assert_eq!(stats.lines, 3);
        assert_eq!(stats.duplicate_words, 0);
    }

    /// A record laid out by hand: what gensim writes (no newline after a record).
    #[test]
    fn reads_records_without_newlines_and_keeps_the_first_of_a_repeated_word() {
        let mut bytes = b"3 2\n".to_vec();
        for (word, a, b) in [("a", 1.5f32, -2.0f32), ("b", 0.25, 4.0), ("a", 9.0, 9.0)] {
            bytes.extend_from_slice(word.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(&a.to_le_bytes());
            bytes.extend_from_slice(&b.to_le_bytes());
        }
        let (e, stats) = read(&bytes).unwrap();
        assert_eq!(e.words, ["a", "b"]);
        assert_eq!(e.vecs, [1.5, -2.0, 0.25, 4.0]);
        assert_eq!(stats.duplicate_words, 1);
        assert_eq!(stats.lines, 3);
    }

    #[test]
    fn damaged_files_name_the_byte_the_record_and_the_problem() {
        let mut good = Vec::new();
        write_word2vec_binary_to(&mut good, &table()).unwrap();
        // Header "3 2\n" (4 bytes); record 1 is "king " (5) + 8 bytes + "\n".
        let cut = read(&good[..4 + 5 + 3]).unwrap_err().to_string();
        assert_eq!(
            cut,
            "v.bin: byte 9: vector 1 (word \"king\"): the file ends inside its 2 values (8 bytes)"
        );
        let short = read(&good[..good.len() - 5]).unwrap_err().to_string();
        assert!(short.contains("vector 3"), "{short}");
        let mut extra = good.clone();
        extra.extend_from_slice(b"more");
        let err = read(&extra).unwrap_err().to_string();
        assert!(err.contains("data after the 3 vectors"), "{err}");
        let mut nan = good.clone();
        nan[4 + 5..4 + 9].copy_from_slice(&f32::NAN.to_le_bytes());
        let err = read(&nan).unwrap_err().to_string();
        assert_eq!(
            err,
            "v.bin: byte 9: vector 1 (word \"king\"): component 0 is not finite (NaN)"
        );
        let mut fewer = b"4 2".to_vec();
        fewer.extend_from_slice(&good[3..]);
        let err = read(&fewer).unwrap_err().to_string();
        assert!(
            err.contains("vector 4") && err.contains("header promises 4"),
            "{err}"
        );
        for header in ["", "x 2\n", "3 0\n", "3\n", "3 2 1\n"] {
            let err = read(header.as_bytes()).unwrap_err().to_string();
            assert!(err.starts_with("v.bin:1:"), "{header:?}: {err}");
        }
    }

    #[test]
    fn plain_and_gzip_files_read_the_same() {
        let dir = std::env::temp_dir().join(format!("parbench-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = table();
        for name in ["v.bin", "v.bin.gz"] {
            let path = dir.join(name);
            write_word2vec_binary(&path, &t).unwrap();
            let (back, _) = read_word2vec_binary(&path).unwrap();
            assert_eq!(back.vecs, as_f32(&t), "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
