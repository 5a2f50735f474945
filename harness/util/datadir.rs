//! Where the real datasets live, and readers for the document collections the experiments use.
//!
//! The data dir is found, in order: the `--data-dir` flag, the `PARBENCH_DATA` environment
//! variable, `../shared/data` from the current directory, `../shared/data` from the repository
//! root (as compiled in). Every file in it is described in its `MANIFEST.md`.
//!
//! Readers:
//! - [`read_r8`]: one document per line, `label<TAB>text` (R8, R52) or plain text.
//! - [`read_labeled_tar_gz`]: a `.tar.gz` of one file per document in `<split>/<label>/<id>`
//!   folders (20 Newsgroups, Ohsumed), read in one streaming pass with a minimal tar reader
//!   (512-byte headers, ustar prefixes and GNU long names; no other tar features are needed).

use anyhow::{bail, Context, Result};
use flate2::read::MultiGzDecoder;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Environment variable naming the data dir.
pub const DATA_ENV: &str = "PARBENCH_DATA";

/// The data dir path relative to the current directory or the repository root.
const RELATIVE_DATA_DIR: &str = "../shared/data";

/// The data dir to use: `explicit` if given (even if it does not exist, so that a typo is
/// reported rather than silently replaced), else `$PARBENCH_DATA` if set and non-empty, else
/// the first existing `../shared/data` relative to the current directory or the repository root.
pub fn resolve(explicit: Option<&Path>) -> Option<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    resolve_from(explicit, std::env::var_os(DATA_ENV), &cwd, &repo_root())
}

/// [`resolve`] with its inputs explicit, for testing.
pub fn resolve_from(
    explicit: Option<&Path>,
    env: Option<OsString>,
    cwd: &Path,
    repo_root: &Path,
) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = env.filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    [
        cwd.join(RELATIVE_DATA_DIR),
        repo_root.join(RELATIVE_DATA_DIR),
    ]
    .into_iter()
    .find(|d| d.is_dir())
}

/// The repository root as compiled in (the root package's manifest directory).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The path of `file` in the data dir, or an error naming the file, where it looked, and where
/// the file is described.
pub fn require(data_dir: Option<&Path>, file: &str) -> Result<PathBuf> {
    match data_dir {
        Some(dir) => {
            let path = dir.join(file);
            if path.is_file() {
                return Ok(path);
            }
            let why = if dir.is_dir() {
                "is not in"
            } else {
                "cannot be read because there is no directory"
            };
            bail!(
                "data file {file} {why} {}; the data dir comes from --data-dir, else ${DATA_ENV}, \
                 else ../shared/data; the files are described in MANIFEST.md of the shared data dir",
                dir.display()
            )
        }
        None => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            bail!(
                "data file {file} is needed but no data dir was found (looked at --data-dir, \
                 ${DATA_ENV}, {} and {}); pass --data-dir DIR or set {DATA_ENV}; the files are \
                 described in MANIFEST.md of the shared data dir",
                cwd.join(RELATIVE_DATA_DIR).display(),
                repo_root().join(RELATIVE_DATA_DIR).display()
            )
        }
    }
}

/// Reads one document per line as (label, text): `label<TAB>text` lines split at the first tab;
/// a line without a tab is all text with an empty label. Every line is kept (blank ones too) so
/// that document `i` is line `i + 1`.
pub fn read_r8(path: &Path) -> Result<Vec<(String, String)>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut docs = Vec::new();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        let n = reader
            .read_until(b'\n', &mut raw)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        let line_no = docs.len() + 1;
        let line = std::str::from_utf8(&raw).with_context(|| {
            format!("{}:{line_no}: the line is not valid UTF-8", path.display())
        })?;
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (label, text) = line.split_once('\t').unwrap_or(("", line));
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
pub fn read_labeled_tar_gz(path: &Path, max_docs: Option<usize>) -> Result<Vec<LabeledDoc>> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_labeled_tar(MultiGzDecoder::new(BufReader::new(file)), max_docs)
        .with_context(|| format!("reading the tar archive {}", path.display()))
}

/// Tar block size.
const BLOCK: usize = 512;

/// [`read_labeled_tar_gz`] on an uncompressed tar stream.
pub fn read_labeled_tar(mut tar: impl Read, max_docs: Option<usize>) -> Result<Vec<LabeledDoc>> {
    let max_docs = max_docs.unwrap_or(usize::MAX);
    let mut docs = Vec::new();
    let mut header = [0u8; BLOCK];
    let mut long_name: Option<String> = None;
    let mut offset = 0u64;
    while docs.len() < max_docs {
        if !read_block_or_eof(&mut tar, &mut header)? {
            break;
        }
        if header.iter().all(|&b| b == 0) {
            break; // end-of-archive marker
        }
        check_header_checksum(&header, offset)?;
        let size = parse_octal(&header[124..136])
            .with_context(|| format!("bad size field in the tar header at byte {offset}"))?;
        let typeflag = header[156];
        let data = read_entry_data(&mut tar, size)
            .with_context(|| format!("the tar entry at byte {offset} is cut short"))?;
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

/// Reads one block; Ok(false) at a clean end of stream (some writers omit the zero blocks).
fn read_block_or_eof(r: &mut impl Read, block: &mut [u8; BLOCK]) -> Result<bool> {
    let mut filled = 0;
    while filled < BLOCK {
        let n = r.read(&mut block[filled..])?;
        if n == 0 {
            if filled == 0 {
                return Ok(false);
            }
            bail!("the archive ends inside a header block");
        }
        filled += n;
    }
    Ok(true)
}

/// Reads `size` bytes of entry data and the padding to the next block boundary.
fn read_entry_data(r: &mut impl Read, size: u64) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(size.min(1 << 24) as usize);
    r.by_ref().take(size).read_to_end(&mut data)?;
    if data.len() as u64 != size {
        bail!("expected {size} bytes, found {}", data.len());
    }
    let padding = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
    std::io::copy(&mut r.by_ref().take(padding), &mut std::io::sink())?;
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

/// An octal number field, NUL- or space-terminated.
fn parse_octal(field: &[u8]) -> Result<u64> {
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
    u64::from_str_radix(&text, 8).with_context(|| format!("{text:?} is not an octal number"))
}

/// The header checksum: the byte sum with the checksum field counted as spaces.
fn check_header_checksum(h: &[u8; BLOCK], offset: u64) -> Result<()> {
    let stored = parse_octal(&h[148..156])?;
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
        bail!("the tar header at byte {offset} has checksum {stored}, expected {sum}: not a tar archive, or corrupt");
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

    #[test]
    fn explicit_dir_wins_then_env_then_relative_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().join("repo");
        let root = tmp.path().join("elsewhere/repo");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let explicit = Path::new("/x/y");
        let env = Some(OsString::from("/from/env"));
        assert_eq!(
            resolve_from(Some(explicit), env.clone(), &cwd, &root),
            Some(explicit.into())
        );
        assert_eq!(
            resolve_from(None, env, &cwd, &root),
            Some(PathBuf::from("/from/env"))
        );
        assert_eq!(resolve_from(None, Some(OsString::new()), &cwd, &root), None);
        std::fs::create_dir_all(tmp.path().join("elsewhere/shared/data")).unwrap();
        assert_eq!(
            resolve_from(None, None, &cwd, &root),
            Some(root.join("../shared/data"))
        );
        std::fs::create_dir_all(tmp.path().join("shared/data")).unwrap();
        assert_eq!(
            resolve_from(None, None, &cwd, &root),
            Some(cwd.join("../shared/data"))
        );
    }

    #[test]
    fn require_names_the_missing_file_and_the_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("present.txt"), "x").unwrap();
        assert_eq!(
            require(Some(tmp.path()), "present.txt").unwrap(),
            tmp.path().join("present.txt")
        );
        let msg = require(Some(tmp.path()), "r8-train.txt")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("r8-train.txt") && msg.contains("MANIFEST.md"),
            "{msg}"
        );
        assert!(msg.contains(&tmp.path().display().to_string()), "{msg}");
        let msg = require(None, "r8-test.txt").unwrap_err().to_string();
        assert!(
            msg.contains("r8-test.txt") && msg.contains(DATA_ENV),
            "{msg}"
        );
    }

    #[test]
    fn read_r8_splits_label_and_keeps_line_numbering() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("r8.txt");
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
        let msg = format!("{:#}", read_r8(&path).unwrap_err());
        assert!(msg.contains(":2:"), "{msg}");
        assert!(read_r8(&tmp.path().join("missing.txt")).is_err());
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
        assert!(read_labeled_tar(&garbage[..], None).is_err());
        let archive = tar(&[("a/b/c", b'0', &[b'x'; 600])]);
        assert!(read_labeled_tar(&archive[..BLOCK + 100], None).is_err());
        assert!(read_labeled_tar(&archive[..100], None).is_err());
    }

    #[test]
    fn tar_gz_of_the_shared_20news_if_present() {
        let Some(dir) = resolve(None) else { return };
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
