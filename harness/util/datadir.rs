//! Where the real datasets live.
//!
//! The data dir is found, in order: the `--data-dir` flag, the `PARBENCH_DATA` environment
//! variable, `../shared/data` from the current directory, `../shared/data` from the repository
//! root (as compiled in). Every file in it is described in its `MANIFEST.md`. The readers of the
//! files are in the crates: document collections in `parbench_common::corpora`, UCI and text
//! corpora in `lda::corpus`, word2vec corpora in `word2vec::corpus`, matrices in `fusedmm::mtx`.

use anyhow::{bail, Result};
use std::ffi::OsString;
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

/// An input path given on a command line: the path itself when it exists (or is absolute), else
/// the same relative path inside the data dir when a file is there, else the path as given, so
/// that the error reading it names what the user typed. Every command resolves its inputs so.
pub fn locate_input(path: &Path, data_dir: Option<&Path>) -> PathBuf {
    if path.exists() || path.is_absolute() {
        return path.to_path_buf();
    }
    match data_dir.map(|d| d.join(path)) {
        Some(candidate) if candidate.is_file() => candidate,
        _ => path.to_path_buf(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
