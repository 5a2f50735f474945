//! The one way parbench writes a file that others may read while it is being replaced (models,
//! embeddings, everything in a run directory, figures, baselines, output tables): a reader sees
//! either the old file or the complete new one, also after a crash or a SIGKILL at any instant.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Marks the temporary files of [`write_atomic_with`]: `.<name>.tmp-<pid>-<n>`.
const TEMP_MARK: &str = ".tmp-";

/// Writes `bytes` to `path` atomically; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Whether `file_name` is a temporary file of [`write_atomic_with`] (a writer killed between
/// creating and renaming it leaves one behind; it never replaces a real file).
pub fn is_temp_file(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.contains(TEMP_MARK)
}

/// Removes the temporary files a killed writer left in `dir` (not recursive); the files they
/// were meant to replace are intact. Returns how many were removed.
pub fn remove_stale_temp_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_temp_file))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Writes `path` through `write`, atomically.
///
/// `write` fills a hidden temporary sibling (`.<name>.tmp-<pid>-<n>`, unique per process and
/// call, so concurrent writers never share one) in the same directory, hence on the same file
/// system; it is flushed and fsynced, renamed over `path` (atomic on POSIX), and the directory
/// is fsynced so the rename itself survives a power loss. On any failure the temporary file is
/// removed and the old `path` is left as it was. A process killed mid-write leaves only the
/// temporary file, which [`remove_stale_temp_files`] clears. Errors name the file.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let named = |what: String, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        "{TEMP_MARK}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp_path = path.with_file_name(tmp_name);
    let write_tmp = || -> io::Result<()> {
        // Unique among live processes; one left by a dead process of the same id is stale.
        let mut w = BufWriter::new(File::create(&tmp_path)?);
        write(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    if let Err(err) = write_tmp() {
        let _ = std::fs::remove_file(&tmp_path);
        return Err(named(format!("cannot write {}", tmp_path.display()), err));
    }
    if let Err(err) = std::fs::rename(&tmp_path, path) {
        let _ = std::fs::remove_file(&tmp_path);
        let what = format!("cannot move {} over {}", tmp_path.display(), path.display());
        return Err(named(what, err));
    }
    sync_dir(path.parent()).map_err(|e| {
        named(
            format!("cannot fsync the directory of {}", path.display()),
            e,
        )
    })
}

/// Fsyncs a directory, making a rename in it durable. Platforms that cannot open a directory
/// (Windows) are skipped, and so are file systems that do not sync directories (EINVAL,
/// ENOTSUP); any other failure is an error.
fn sync_dir(dir: Option<&Path>) -> io::Result<()> {
    let dir = match dir {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !cfg!(unix) {
        return Ok(());
    }
    match File::open(dir)?.sync_all() {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("parbench-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["out.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_writer_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("parbench-atomic-f-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("out.txt"), "{err}");
        assert!(err.to_string().contains("disk full"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert_eq!(remove_stale_temp_files(&dir), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temporary_names_are_recognised_and_real_names_are_not() {
        assert!(is_temp_file(".results.csv.tmp-12-0"));
        assert!(!is_temp_file("results.csv"));
        assert!(!is_temp_file(".hidden"));
    }
}
