//! Readers of the labeled document collections the experiments use.
//!
//! - [`read_r8`]: one document per line, `label<TAB>text` (R8, R52) or plain text. One pass over
//!   the lines, O(bytes); every line is kept (blank ones too), so document `i` is line `i + 1`.
//! - [`read_labeled_tar_gz`] and [`read_labeled_tar`]: a (gzipped) tar archive of one file per
//!   document in `<split>/<label>/<id>` folders (20 Newsgroups, Ohsumed), read in one streaming
//!   pass with a minimal tar reader: 512-byte headers with their checksum checked, ustar
//!   prefixes and GNU long names (`L` entries); directories, links and pax headers are skipped.
//!   No other tar feature is needed for these archives. O(archive bytes).
//! - [`strip_mail_header`]: a 20 Newsgroups post without its mail header.
//!
//! Every error names the file, and the 1-based line ([`read_r8`]) or the byte offset of the tar
//! header concerned ([`TarError`]). A size announced by a tar header is never allocated up
//! front: memory grows with the bytes the archive really holds, so a corrupt header costs an
//! error, not the memory it claims.

use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a document collection could not be read; every variant names the file.
#[derive(Debug, Error)]
pub enum CorporaError {
    /// The file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A line could not be read.
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
    /// A tar archive is malformed, cut short, or its gzip stream is damaged.
    #[error("reading the tar archive {path}: {source}")]
    Tar {
        /// The archive.
        path: PathBuf,
        /// What is wrong, and where.
        source: TarError,
    },
}

/// What is wrong with a tar stream; offsets are those of the entry's header in the
/// uncompressed stream.
#[derive(Debug, Error)]
pub enum TarError {
    /// The stream ends inside a 512-byte header block.
    #[error("the archive ends inside the header block at byte {offset}")]
    EndsInHeader {
        /// Offset of the header block.
        offset: u64,
    },
    /// A header's stored checksum is not the sum of its bytes.
    #[error("the tar header at byte {offset} has checksum {stored}, expected {expected}: not a tar archive, or corrupt")]
    Checksum {
        /// Offset of the header.
        offset: u64,
        /// The checksum the header stores.
        stored: u64,
        /// The sum of its bytes (the checksum field counted as spaces).
        expected: u64,
    },
    /// A numeric header field is not an octal number.
    #[error(
        "bad {field} field in the tar header at byte {offset}: {text:?} is not an octal number"
    )]
    BadNumber {
        /// Offset of the header.
        offset: u64,
        /// The field (`size`, `checksum`).
        field: &'static str,
        /// The field's text.
        text: String,
    },
    /// An entry holds fewer bytes than its header announces.
    #[error(
        "the tar entry at byte {offset} is cut short: expected {expected} bytes, found {found}"
    )]
    CutShort {
        /// Offset of the entry's header.
        offset: u64,
        /// Bytes the header announces.
        expected: u64,
        /// Bytes the archive holds.
        found: u64,
    },
    /// Reading the stream failed (a damaged gzip stream, an I/O error).
    #[error("reading the entry at byte {offset}: {source}")]
    Io {
        /// Offset of the entry's header.
        offset: u64,
        /// The I/O error.
        source: io::Error,
    },
}

/// Reads one document per line as (label, text): `label<TAB>text` lines split at the first tab;
/// a line without a tab is all text with an empty label. Every line is kept (blank ones too) so
/// that document `i` is line `i + 1`; a `\r\n` ending is removed with the `\n`.
pub fn read_r8(path: &Path) -> Result<Vec<(String, String)>, CorporaError> {
    let file = File::open(path).map_err(|source| CorporaError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::new(file);
    let mut docs = Vec::new();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        let line = docs.len() + 1;
        let n = reader
            .read_until(b'\n', &mut raw)
            .map_err(|source| CorporaError::ReadLine {
                path: path.to_path_buf(),
                line,
                source,
            })?;
        if n == 0 {
            break;
        }
        let text = std::str::from_utf8(&raw).map_err(|_| CorporaError::NotUtf8 {
            path: path.to_path_buf(),
            line,
        })?;
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let (label, text) = text.split_once('\t').unwrap_or(("", text));
        docs.push((label.to_string(), text.to_string()));
    }
    Ok(docs)
}

/// One document of a labeled tar archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabeledDoc {
    /// The grandparent folder (`20news-bydate-train`, `training`, ...).
    pub split: String,
    /// The parent folder (`sci.space`, `C04`, ...).
    pub label: String,
    /// Path inside the archive.
    pub path: String,
    /// Contents, decoded as UTF-8 with invalid bytes replaced (20 Newsgroups has Latin-1 posts).
    pub text: String,
}

/// Reads the regular files of a `.tar.gz` (at most `max_docs` of them, in archive order) as
/// labeled documents; see [`LabeledDoc`]. 20 Newsgroups and Ohsumed are laid out this way.
pub fn read_labeled_tar_gz(
    path: &Path,
    max_docs: Option<usize>,
) -> Result<Vec<LabeledDoc>, CorporaError> {
    let file = File::open(path).map_err(|source| CorporaError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    read_labeled_tar(MultiGzDecoder::new(BufReader::new(file)), max_docs).map_err(|source| {
        CorporaError::Tar {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Tar block size.
const BLOCK: usize = 512;

/// Bytes reserved at most for an entry's data before reading it: the header's size is not
/// trusted, the buffer grows with what the archive really holds.
const INITIAL_ENTRY_CAPACITY: u64 = 1 << 16;

/// [`read_labeled_tar_gz`] on an uncompressed tar stream.
pub fn read_labeled_tar(
    mut tar: impl Read,
    max_docs: Option<usize>,
) -> Result<Vec<LabeledDoc>, TarError> {
    let max_docs = max_docs.unwrap_or(usize::MAX);
    let mut docs = Vec::new();
    let mut header = [0u8; BLOCK];
    let mut long_name: Option<String> = None;
    let mut offset = 0u64;
    while docs.len() < max_docs {
        if !read_block_or_eof(&mut tar, &mut header, offset)? {
            break;
        }
        if header.iter().all(|&b| b == 0) {
            break; // end-of-archive marker
        }
        check_header_checksum(&header, offset)?;
        let size = parse_octal(&header[124..136], "size", offset)?;
        let typeflag = header[156];
        let data = read_entry_data(&mut tar, size, offset)?;
        offset += (BLOCK as u64) + size.div_ceil(BLOCK as u64) * BLOCK as u64;
        match typeflag {
            // GNU long name: the data is the name of the next entry.
            b'L' => {
                let name = String::from_utf8_lossy(&data);
                long_name = Some(name.trim_end_matches('\0').to_string());
            }
            b'0' | 0 => {
                let name = long_name.take().unwrap_or_else(|| header_name(&header));
                let mut parts = name.rsplit('/').filter(|p| !p.is_empty()).skip(1);
                let label = parts.next().unwrap_or("").to_string();
                let split = parts.next().unwrap_or("").to_string();
                let text = String::from_utf8_lossy(&data).into_owned();
                docs.push(LabeledDoc {
                    split,
                    label,
                    path: name,
                    text,
                });
            }
            // Directories, links, pax headers: nothing to read.
            _ => long_name = None,
        }
    }
    Ok(docs)
}

/// A 20 Newsgroups post without its header block (everything up to the first blank line):
/// `From:`, `Subject:`, `Organization:` lines and addresses would otherwise dominate the topics.
/// A post without a blank line is returned whole.
pub fn strip_mail_header(text: &str) -> &str {
    let body_start = text
        .find("\n\n")
        .or_else(|| text.find("\r\n\r\n"))
        .map_or(0, |i| i + 2);
    &text[body_start..]
}

/// Reads one block; `Ok(false)` at a clean end of stream (some writers omit the zero blocks).
fn read_block_or_eof(
    r: &mut impl Read,
    block: &mut [u8; BLOCK],
    offset: u64,
) -> Result<bool, TarError> {
    let mut filled = 0;
    while filled < BLOCK {
        let n = match r.read(&mut block[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(TarError::Io { offset, source }),
        };
        if n == 0 {
            if filled == 0 {
                return Ok(false);
            }
            return Err(TarError::EndsInHeader { offset });
        }
        filled += n;
    }
    Ok(true)
}

/// Reads `size` bytes of entry data and the padding to the next block boundary.
fn read_entry_data(r: &mut impl Read, size: u64, offset: u64) -> Result<Vec<u8>, TarError> {
    let failed = |source| TarError::Io { offset, source };
    let mut data = Vec::with_capacity(size.min(INITIAL_ENTRY_CAPACITY) as usize);
    r.by_ref()
        .take(size)
        .read_to_end(&mut data)
        .map_err(failed)?;
    if data.len() as u64 != size {
        return Err(TarError::CutShort {
            offset,
            expected: size,
            found: data.len() as u64,
        });
    }
    let padding = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
    io::copy(&mut r.by_ref().take(padding), &mut io::sink()).map_err(failed)?;
    Ok(data)
}

/// The entry name: ustar `prefix/name`, or just `name`.
fn header_name(h: &[u8; BLOCK]) -> String {
    let field = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let name = field(&h[0..100]);
    let prefix = if &h[257..262] == b"ustar" {
        field(&h[345..500])
    } else {
        String::new()
    };
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// An octal number field, NUL- or space-terminated (at most 12 digits: no overflow).
fn parse_octal(field: &[u8], name: &'static str, offset: u64) -> Result<u64, TarError> {
    let text: String = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as char)
        .collect::<String>()
        .trim()
        .to_string();
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(&text, 8).map_err(|_| TarError::BadNumber {
        offset,
        field: name,
        text,
    })
}

/// The header checksum: the byte sum with the checksum field counted as spaces.
fn check_header_checksum(h: &[u8; BLOCK], offset: u64) -> Result<(), TarError> {
    let stored = parse_octal(&h[148..156], "checksum", offset)?;
    let sum: u64 = h
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                b' ' as u64
            } else {
                b as u64
            }
        })
        .sum();
    if stored != sum {
        return Err(TarError::Checksum {
            offset,
            stored,
            expected: sum,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A minimal ustar header for a regular file (or `typeflag` entry).
    fn header(name: &str, size: usize, typeflag: u8) -> [u8; BLOCK] {
        let mut h = [0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[156] = typeflag;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    fn tar(entries: &[(&str, u8, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(name, flag, data) in entries {
            out.extend_from_slice(&header(name, data.len(), flag));
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
        }
        out.resize(out.len() + 2 * BLOCK, 0);
        out
    }

    fn temp_dir() -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("parbench-corpora-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn read_r8_splits_label_and_keeps_line_numbering() {
        let dir = temp_dir();
        let path = dir.join("r8.txt");
        let mut f = File::create(&path).unwrap();
        write!(f, "earn\tprofit rose\r\n\nplain line\nacq\tbuys\ta stake").unwrap();
        drop(f);
        let docs = read_r8(&path).unwrap();
        assert_eq!(
            docs,
            [
                ("earn".into(), "profit rose".into()),
                (String::new(), String::new()),
                (String::new(), "plain line".into()),
                ("acq".into(), "buys\ta stake".into()),
            ]
        );
        std::fs::write(&path, b"ok\tfine\nbad\t\xff\n").unwrap();
        let msg = read_r8(&path).unwrap_err().to_string();
        assert!(msg.contains(&format!("{}:2:", path.display())), "{msg}");
        let missing = dir.join("missing.txt");
        let msg = read_r8(&missing).unwrap_err().to_string();
        assert!(msg.contains(&missing.display().to_string()), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tar_reader_labels_documents_by_folder() {
        let long = format!("train/{}/7", "g".repeat(120));
        let archive = tar(&[
            ("train/", b'5', b""),
            ("train/sci.space/1", b'0', b"orbit launch"),
            ("test/rec.autos/2", b'0', &[b'c', b'a', b'r', 0xe9]),
            ("././@LongLink", b'L', long.as_bytes()),
            ("ignored", b'0', &[b'x'; 700]),
        ]);
        let docs = read_labeled_tar(&archive[..], None).unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(
            (docs[0].split.as_str(), docs[0].label.as_str()),
            ("train", "sci.space")
        );
        assert_eq!(docs[0].text, "orbit launch");
        assert_eq!(docs[1].label, "rec.autos");
        assert_eq!(docs[1].text, "car\u{fffd}");
        assert_eq!(docs[2].path, long);
        assert_eq!(docs[2].label, "g".repeat(120));
        assert_eq!(docs[2].text.len(), 700);
        assert_eq!(read_labeled_tar(&archive[..], Some(2)).unwrap().len(), 2);
    }

    #[test]
    fn tar_reader_rejects_garbage_and_truncation() {
        let garbage = vec![b'a'; 2 * BLOCK];
        assert!(matches!(
            read_labeled_tar(&garbage[..], None),
            Err(TarError::BadNumber { offset: 0, .. } | TarError::Checksum { offset: 0, .. })
        ));
        let archive = tar(&[("a/b/c", b'0', &[b'x'; 600])]);
        assert!(matches!(
            read_labeled_tar(&archive[..BLOCK + 100], None),
            Err(TarError::CutShort {
                offset: 0,
                expected: 600,
                found: 100
            })
        ));
        assert!(matches!(
            read_labeled_tar(&archive[..100], None),
            Err(TarError::EndsInHeader { offset: 0 })
        ));
    }

    #[test]
    fn tar_gz_errors_name_the_archive() {
        let dir = temp_dir();
        let path = dir.join("docs.tar.gz");
        std::fs::write(&path, b"not gzip at all").unwrap();
        let msg = read_labeled_tar_gz(&path, None).unwrap_err().to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        let msg = read_labeled_tar_gz(&dir.join("none.tar.gz"), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("none.tar.gz"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mail_headers_are_stripped_up_to_the_first_blank_line() {
        assert_eq!(
            strip_mail_header("From: a@b\nSubject: x\n\nbody text\n\nmore"),
            "body text\n\nmore"
        );
        assert_eq!(strip_mail_header("no header at all"), "no header at all");
    }

    /// The shared data dir, when present: `$PARBENCH_DATA`, else `../shared/data` beside the
    /// repository.
    fn shared_data() -> Option<PathBuf> {
        let dir = std::env::var_os("PARBENCH_DATA")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
        dir.is_dir().then_some(dir)
    }

    #[test]
    fn tar_gz_of_the_shared_20news_if_present() {
        let Some(dir) = shared_data() else { return };
        let path = dir.join("20news-bydate.tar.gz");
        if !path.is_file() {
            return;
        }
        let docs = read_labeled_tar_gz(&path, Some(50)).unwrap();
        assert_eq!(docs.len(), 50);
        assert!(docs
            .iter()
            .all(|d| d.split == "20news-bydate-test" || d.split == "20news-bydate-train"));
        assert!(docs
            .iter()
            .all(|d| !d.label.is_empty() && !d.text.is_empty()));
    }
}
