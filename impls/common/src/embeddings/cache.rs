//! A cache of parsed embeddings files: the table as raw little-endian `f64`, read back at the
//! speed of the page cache instead of parsed again.
//!
//! An entry belongs to one source file (by its canonical path) and holds the source's size and
//! modification time when it was parsed; a source that changed since, or an entry that is
//! damaged or of another version, is parsed again and the entry replaced. Entries are written
//! atomically, so a reader never sees half of one, and storing prunes the entries whose source
//! files are gone (the peers' work directories come and go).
//!
//! Layout of an entry: the magic bytes, then `u64` fields (source size, modification seconds
//! and nanoseconds, format, lines, duplicate words, header, dimension, words, bytes of the
//! source's path, bytes of the words), the path, the words joined by newlines (words hold no
//! whitespace), zero padding to a multiple of 8, and `words x dim` values.

use super::{Embeddings, EmbeddingsError, EmbeddingsFormat, ReadStats};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// First bytes of an entry; the last two digits are the layout's version.
const MAGIC: &[u8; 8] = b"PBEMBC01";
/// `u64` fields after the magic.
const FIELDS: usize = 11;
/// Ending of an entry's file name.
const ENTRY_EXTENSION: &str = "pbemb";

/// Where parsed tables are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingsCache {
    dir: PathBuf,
}

/// How a read through the cache went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// The table came from the cache.
    Hit,
    /// The file was parsed and the table stored for next time.
    Stored,
    /// The file was parsed, and the table could not be stored (why): the read still succeeded.
    NotStored(String),
}

impl CacheUse {
    /// How the table was had, for a progress line: "from the parsed cache", "parsed; stored
    /// in the cache", "parsed; not cached (why)".
    pub fn describe(&self) -> String {
        match self {
            CacheUse::Hit => "from the parsed cache".to_string(),
            CacheUse::Stored => "parsed; stored in the cache for the next read".to_string(),
            CacheUse::NotStored(why) => format!("parsed; not cached ({why})"),
        }
    }
}

/// Reads the embeddings file at `path` (format by its name) through `cache` when there is one,
/// else parses it; the cache's use is `None` without a cache.
pub fn read_maybe_cached(
    path: &Path,
    cache: Option<&EmbeddingsCache>,
) -> Result<(Embeddings, ReadStats, Option<CacheUse>), EmbeddingsError> {
    match cache {
        Some(cache) => cache.read(path).map(|(e, s, u)| (e, s, Some(u))),
        None => EmbeddingsFormat::of(path)
            .read(path)
            .map(|(e, s)| (e, s, None)),
    }
}

/// What an entry says of its source.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    seconds: u64,
    nanos: u64,
    format: u64,
}

impl Stamp {
    fn of(path: &Path, format: EmbeddingsFormat) -> io::Result<Stamp> {
        let meta = std::fs::metadata(path)?;
        let since = meta
            .modified()?
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Ok(Stamp {
            len: meta.len(),
            seconds: since.as_secs(),
            nanos: u64::from(since.subsec_nanos()),
            format: match format {
                EmbeddingsFormat::Text => 0,
                EmbeddingsFormat::Binary => 1,
            },
        })
    }
}

impl EmbeddingsCache {
    /// A cache in `dir` (made when the first entry is stored).
    pub fn new(dir: impl Into<PathBuf>) -> EmbeddingsCache {
        EmbeddingsCache { dir: dir.into() }
    }

    /// The user's cache: [`crate::cache_dir`]`("embeddings")`.
    pub fn default_location() -> Option<EmbeddingsCache> {
        crate::cache_dir("embeddings").map(EmbeddingsCache::new)
    }

    /// The cache's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry of the (canonical) source path: named by a hash of the path, so one source
    /// has one entry, replaced when the source changes.
    fn entry_path(&self, canonical: &Path) -> PathBuf {
        // FNV-1a: stable across builds and platforms, unlike std's hasher; a collision only
        // costs a parse, as the entry records its source's path.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in canonical.as_os_str().as_encoded_bytes() {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let stem = canonical
            .file_name()
            .map(|n| n.to_string_lossy().chars().take(40).collect::<String>())
            .unwrap_or_default();
        self.dir
            .join(format!("{stem}-{hash:016x}.{ENTRY_EXTENSION}"))
    }

    /// The entry that holds (or would hold) the table of the file at `path`.
    pub fn entry_of(&self, path: &Path) -> Result<PathBuf, EmbeddingsError> {
        let canonical = std::fs::canonicalize(path).map_err(|source| EmbeddingsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(self.entry_path(&canonical))
    }

    /// Reads the embeddings file at `path` (its format by [`EmbeddingsFormat::of`]) from the
    /// cache when an entry of it is there and the file is unchanged, else parses it and stores
    /// the table. Errors are the file's own (a missing file, a bad line); a cache that cannot
    /// be read is passed by, and one that cannot be written is said in [`CacheUse::NotStored`].
    pub fn read(&self, path: &Path) -> Result<(Embeddings, ReadStats, CacheUse), EmbeddingsError> {
        let format = EmbeddingsFormat::of(path);
        let io_err = |source| EmbeddingsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let canonical = std::fs::canonicalize(path).map_err(io_err)?;
        let stamp = Stamp::of(&canonical, format).map_err(io_err)?;
        let entry = self.entry_path(&canonical);
        if let Ok(Some((table, stats))) = read_entry(&entry, &canonical, &stamp) {
            return Ok((table, stats, CacheUse::Hit));
        }
        let (table, stats) = format.read(path)?;
        // A file changed while it was read is not stored: its stamp would be wrong.
        let outcome = match Stamp::of(&canonical, format) {
            Ok(after) if after == stamp => {
                match self.store(&entry, &canonical, &stamp, &table, &stats) {
                    Ok(()) => CacheUse::Stored,
                    Err(e) => CacheUse::NotStored(format!("{}: {e}", entry.display())),
                }
            }
            _ => CacheUse::NotStored(format!("{} changed while it was read", path.display())),
        };
        Ok((table, stats, outcome))
    }

    /// Stores `table`, with the `stats` a read of it gives, as the parsed form of the file at
    /// `path`: for a writer that has just written the table there, and need not parse it back.
    pub fn put(
        &self,
        path: &Path,
        table: &Embeddings,
        stats: &ReadStats,
    ) -> Result<(), EmbeddingsError> {
        let io_err = |source| EmbeddingsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let canonical = std::fs::canonicalize(path).map_err(io_err)?;
        let stamp = Stamp::of(&canonical, EmbeddingsFormat::of(path)).map_err(io_err)?;
        let entry = self.entry_path(&canonical);
        self.store(&entry, &canonical, &stamp, table, stats)
            .map_err(|source| EmbeddingsError::Write {
                path: entry,
                source,
            })
    }

    fn store(
        &self,
        entry: &Path,
        canonical: &Path,
        stamp: &Stamp,
        table: &Embeddings,
        stats: &ReadStats,
    ) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        self.prune();
        let source = canonical.as_os_str().as_encoded_bytes();
        let words = table.words.join("\n");
        crate::atomic::write_atomic_with(entry, |out| {
            out.write_all(MAGIC)?;
            let fields: [u64; FIELDS] = [
                stamp.len,
                stamp.seconds,
                stamp.nanos,
                stamp.format,
                stats.lines as u64,
                stats.duplicate_words as u64,
                u64::from(stats.had_header),
                table.dim as u64,
                table.words.len() as u64,
                source.len() as u64,
                words.len() as u64,
            ];
            for f in fields {
                out.write_all(&f.to_le_bytes())?;
            }
            out.write_all(source)?;
            out.write_all(words.as_bytes())?;
            out.write_all(&[0; 8][..padding(source.len() + words.len())])?;
            let mut bytes = Vec::with_capacity(8 << 10);
            for block in table.vecs.chunks(1 << 10) {
                bytes.clear();
                bytes.extend(block.iter().flat_map(|x| x.to_le_bytes()));
                out.write_all(&bytes)?;
            }
            Ok(())
        })
    }

    /// Removes the entries whose source file is gone, and temporary files a killed writer left.
    fn prune(&self) {
        crate::atomic::remove_stale_temp_files(&self.dir);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == ENTRY_EXTENSION) {
                if let Ok(source) = entry_source(&path) {
                    if !source.exists() {
                        // Best effort: another process may have removed or replaced it.
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
    }
}

/// Zero bytes that bring `n` to a multiple of 8.
fn padding(n: usize) -> usize {
    (8 - n % 8) % 8
}

/// The magic and fields of an entry, or an error if it has none.
fn read_fields(reader: &mut impl Read) -> io::Result<[u64; FIELDS]> {
    let mut magic = [0u8; 8];
    reader.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not an entry"));
    }
    let mut fields = [0u64; FIELDS];
    for f in &mut fields {
        let mut b = [0u8; 8];
        reader.read_exact(&mut b)?;
        *f = u64::from_le_bytes(b);
    }
    Ok(fields)
}

fn read_bytes(reader: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(bytes)
}

/// The source path an entry records.
fn entry_source(entry: &Path) -> io::Result<PathBuf> {
    let mut reader = BufReader::new(File::open(entry)?);
    let fields = read_fields(&mut reader)?;
    let bytes = read_bytes(&mut reader, fields[9])?;
    Ok(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The table of `entry` when it is whole and was made from `canonical` as `stamp` describes
/// it; `Ok(None)` when it is of another file or another version of it.
fn read_entry(
    entry: &Path,
    canonical: &Path,
    stamp: &Stamp,
) -> io::Result<Option<(Embeddings, ReadStats)>> {
    let mut file = File::open(entry)?;
    let entry_len = file.metadata()?.len();
    let mut reader = BufReader::new(&mut file);
    let f = read_fields(&mut reader)?;
    let recorded = Stamp {
        len: f[0],
        seconds: f[1],
        nanos: f[2],
        format: f[3],
    };
    let (dim, words, source_len, words_len) = (f[7], f[8], f[9], f[10]);
    let values = words.checked_mul(dim);
    let expected_len = values
        .and_then(|v| v.checked_mul(8))
        .and_then(|v| v.checked_add(source_len))
        .and_then(|v| v.checked_add(words_len))
        .map(|v| v + (8 + 8 * FIELDS) as u64 + padding((source_len + words_len) as usize) as u64);
    if recorded != *stamp || expected_len != Some(entry_len) || dim == 0 {
        return Ok(None);
    }
    if read_bytes(&mut reader, source_len)? != canonical.as_os_str().as_encoded_bytes() {
        return Ok(None);
    }
    let word_bytes = read_bytes(&mut reader, words_len)?;
    let Ok(word_text) = String::from_utf8(word_bytes) else {
        return Ok(None);
    };
    let len = usize::try_from(values.unwrap_or(0))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "too large"))?;
    let values_at = entry_len - 8 * len as u64;
    drop(reader);
    // Zeroed by the allocator without touching the pages (fresh pages of a large allocation
    // are zero), so the read is the only pass over them. Not advised to 2 MB pages: with them
    // the quick loading experiment's cached reads ranged 0.06-0.95 s (the kernel compacting
    // memory for each huge page as it was first written), without them 0.17-0.23 s.
    let mut vecs = vec![0.0f64; len];
    // The words are indexed while the values are read, and the values are read by every
    // thread of the pool at once: the read's cost is the kernel faulting in and copying
    // to fresh pages, which one thread did at 1.7 GB/s on the Intel Xeon kind.
    let (indexed, read) = rayon::join(
        || {
            let table_words: Vec<String> = if words == 0 {
                Vec::new()
            } else {
                word_text.split('\n').map(str::to_owned).collect()
            };
            let index = Embeddings::index_words(&table_words);
            (table_words, index)
        },
        || read_values_at(&file, values_at, as_bytes_mut(&mut vecs)),
    );
    read?;
    let (table_words, Ok(index)) = indexed else {
        return Ok(None);
    };
    if table_words.len() as u64 != words {
        return Ok(None);
    }
    if cfg!(target_endian = "big") {
        for x in &mut vecs {
            *x = f64::from_bits(u64::from_le(x.to_bits()));
        }
    }
    let table = Embeddings {
        words: table_words,
        dim: dim as usize,
        vecs,
        index,
    };
    let stats = ReadStats {
        lines: f[4] as usize,
        duplicate_words: f[5] as usize,
        had_header: f[6] != 0,
    };
    Ok(Some((table, stats)))
}

/// Fills `bytes` from `file` at `offset`, in pieces the threads of the current rayon pool read
/// at once (positioned reads share no cursor).
#[cfg(unix)]
fn read_values_at(file: &File, offset: u64, bytes: &mut [u8]) -> io::Result<()> {
    use rayon::prelude::*;
    use std::os::unix::fs::FileExt;
    // A few pieces per thread, so one slowed thread leaves work to the others, and none under
    // 1 MiB, so the reads stay large.
    let piece = bytes
        .len()
        .div_ceil(4 * rayon::current_num_threads().max(1))
        .max(1 << 20);
    bytes
        .par_chunks_mut(piece)
        .enumerate()
        .try_for_each(|(i, chunk)| file.read_exact_at(chunk, offset + (i * piece) as u64))
}

#[cfg(not(unix))]
fn read_values_at(mut file: &File, offset: u64, bytes: &mut [u8]) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(bytes)
}

/// The bytes of `values`, to read an entry's values into them in one call, with no copy.
fn as_bytes_mut(values: &mut [f64]) -> &mut [u8] {
    // SAFETY: the slice covers exactly the memory of `values` (len * 8 bytes, initialized),
    // u8 needs no alignment, and every byte pattern is a valid f64, so whatever is written
    // through the bytes leaves valid values. The borrow of `values` lasts as long as the bytes.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embeddings::write_word2vec_text;

    fn tempdir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("parbench-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_second_read_is_a_hit_with_the_same_table_and_stats() {
        let dir = tempdir("hit");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        let table = Embeddings::random(300, 7, 6, 1).unwrap();
        let file = dir.join("v.txt");
        write_word2vec_text(&file, &table).unwrap();
        let (first, stats, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Stored);
        assert_eq!(first, table);
        let (second, stats2, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Hit);
        assert_eq!(second, table);
        assert_eq!(stats, stats2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_table_put_for_its_file_is_read_back_as_its_parse() {
        let dir = tempdir("put");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        let table = Embeddings::random(40, 3, 6, 9).unwrap();
        let file = dir.join("v.txt");
        write_word2vec_text(&file, &table).unwrap();
        let parsed = crate::embeddings::read_word2vec_text_with_stats(&file).unwrap();
        cache.put(&file, &table, &parsed.1).unwrap();
        let (read, stats, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Hit);
        assert_eq!((read, stats), parsed);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_changed_file_is_parsed_again_and_its_entry_replaced() {
        let dir = tempdir("changed");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        let file = dir.join("v.txt");
        std::fs::write(&file, "2 2\na 1 2\nb 3 4\n").unwrap();
        cache.read(&file).unwrap();
        // Same size, new content and time.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, "2 2\na 5 6\nb 7 8\n").unwrap();
        let (table, _, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Stored);
        assert_eq!(table.get("a").unwrap(), &[5.0, 6.0]);
        let entries = std::fs::read_dir(cache.dir()).unwrap().count();
        assert_eq!(entries, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_entry_is_passed_by_and_rewritten() {
        let dir = tempdir("damaged");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        let file = dir.join("v.txt");
        std::fs::write(&file, "2 2\na 1 2\nb 3 4\n").unwrap();
        cache.read(&file).unwrap();
        let entry = cache.entry_path(&std::fs::canonicalize(&file).unwrap());
        let mut bytes = std::fs::read(&entry).unwrap();
        for cut in [0, 7, 40, bytes.len() - 1] {
            std::fs::write(&entry, &bytes[..cut]).unwrap();
            let (table, _, used) = cache.read(&file).unwrap();
            assert_eq!(used, CacheUse::Stored, "cut at {cut}");
            assert_eq!(table.get("b").unwrap(), &[3.0, 4.0]);
        }
        // A word made a duplicate: the entry's table is refused, the file read again.
        let at = bytes.windows(3).position(|w| w == b"a\nb").unwrap();
        bytes[at + 2] = b'a';
        std::fs::write(&entry, &bytes).unwrap();
        let (table, _, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Stored);
        assert_eq!(table.words, ["a", "b"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_are_the_files_own_and_an_unwritable_cache_is_said_not_fatal() {
        let dir = tempdir("errors");
        let blocker = dir.join("not-a-dir");
        std::fs::write(&blocker, "").unwrap();
        let cache = EmbeddingsCache::new(blocker.join("cache"));
        let err = cache
            .read(&dir.join("missing.txt"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.txt"), "{err}");
        let file = dir.join("bad.txt");
        std::fs::write(&file, "2 2\na 1 x\n").unwrap();
        let err = cache.read(&file).unwrap_err().to_string();
        assert!(err.contains("bad.txt:2:"), "{err}");
        std::fs::write(&file, "1 2\na 1 2\n").unwrap();
        let (_, _, used) = cache.read(&file).unwrap();
        assert!(matches!(used, CacheUse::NotStored(_)), "{used:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn entries_of_removed_files_are_pruned_when_another_is_stored() {
        let dir = tempdir("prune");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        for name in ["a.txt", "b.txt"] {
            std::fs::write(dir.join(name), "1 1\nw 1\n").unwrap();
        }
        cache.read(&dir.join("a.txt")).unwrap();
        std::fs::remove_file(dir.join("a.txt")).unwrap();
        cache.read(&dir.join("b.txt")).unwrap();
        let names: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with("b.txt-"), "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn binary_files_are_cached_as_their_f32_values() {
        let dir = tempdir("binary");
        let cache = EmbeddingsCache::new(dir.join("cache"));
        let table = Embeddings::random(50, 4, 6, 2).unwrap();
        let file = dir.join("v.bin");
        crate::embeddings::write_word2vec_binary(&file, &table).unwrap();
        let (first, _, _) = cache.read(&file).unwrap();
        let (second, _, used) = cache.read(&file).unwrap();
        assert_eq!(used, CacheUse::Hit);
        assert_eq!(first, second);
        assert!(first.vecs.iter().all(|&x| f64::from(x as f32) == x));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
