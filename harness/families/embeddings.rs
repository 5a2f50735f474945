//! Loading word vectors: the first stage of every Sinkhorn-WMD query a user runs, and at the
//! paper's shape (100,000 words of dimension 300) a larger cost than the solve it feeds.
//!
//! A point writes a seeded table in word2vec's text format (values with `decimals` decimals,
//! as word2vec.c's `%lf` gives six) to a temporary file, plain and gzip-compressed, and in
//! word2vec's binary format, and stores the parsed table in a cache in its folder; the variants
//! read it with `threads` threads:
//! - `text`: the plain file, parsed in blocks whose chunks every thread parses at once;
//! - `text-gz`: the compressed one, decompressed on one thread and parsed the same way;
//! - `binary`: the binary file (`f32` values, as the format has them), read on one thread;
//! - `cached`: the plain file through the parsed cache (`EmbeddingsCache`), which holds it: what
//!   every read of an unchanged file after the first costs.
//!
//! Every run checks that it read back exactly the table written in its format (the binary
//! one's values rounded to `f32`), and the cached run that it was served from the cache.
//! Metrics: `gb_per_s` (bytes of text per second: every variant's time counted against the text
//! it stands in for, so the four compare as rates of loading the same table), `source_bytes`
//! (the file the variant reads), `file_bytes` (the plain file), `words`, `dim`; the work is what
//! the reader scans (the text, decompressed for `text-gz`; else its own file) streamed once and
//! the table written once.

use crate::exec::bound::work_metrics;
use crate::families::params::{positive, PointIssue};
use crate::family::{Measurement, PreparedInput, TypedFamily};
use anyhow::{anyhow, bail, Context, Result};
use parbench_common::embeddings::{
    read_word2vec_binary, read_word2vec_text_with_stats, write_word2vec_binary,
    write_word2vec_text, CacheUse, Embeddings, EmbeddingsCache, ReadStats,
};
use parbench_common::{Par, Precision, Work};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct EmbeddingsFamily;

/// The variants, in the order the tables list them.
const VARIANTS: [&str; 4] = ["text", "text-gz", "binary", "cached"];

crate::point_params! {
    /// A table of word vectors to write and read back.
    pub struct EmbeddingsPoint {
        /// words in the table
        words: usize = 100_000,
        /// dimension of every vector
        dim: usize = 300,
        /// decimals every component is written with (word2vec.c writes 6)
        decimals: usize = 6,
    }
}

/// The written files, removed when the point is done with them.
struct WrittenTable {
    table: Embeddings,
    /// The table as the binary file holds it, in `f32`.
    table_f32: Embeddings,
    dir: PathBuf,
    plain: PathBuf,
    gzip: PathBuf,
    binary: PathBuf,
    cache: EmbeddingsCache,
}

impl Drop for WrittenTable {
    fn drop(&mut self) {
        // Best effort: a temporary directory left behind is the system's to clean.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl TypedFamily for EmbeddingsFamily {
    type Point = EmbeddingsPoint;
    const NAME: &'static str = "embeddings";

    fn variants(&self) -> Vec<&'static str> {
        VARIANTS.to_vec()
    }

    // Exact: the sizes, and the work they make.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &["file_bytes", "source_bytes", "words", "dim", "work_*"]
    }

    fn check(&self, point: &EmbeddingsPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        positive(&mut issues, "words", point.words);
        positive(&mut issues, "dim", point.dim);
        if point.decimals > 15 {
            issues.push(PointIssue::new(
                &["decimals"],
                format!(
                    "`decimals` is {}, more than an f64 holds (15)",
                    point.decimals
                ),
                "write at most 15 decimals",
            ));
        }
        issues
    }

    fn prepare(
        &self,
        point: &EmbeddingsPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        if let Some(path) = dataset {
            bail!(
                "the embeddings family writes its own seeded files; it reads no dataset (got {})",
                path.display()
            );
        }
        let table = Embeddings::random(point.words, point.dim, point.decimals as u32, seed)
            .context("generating the table")?;
        // One directory per prepared point: a point prepared while another's files still
        // exist never shares them (each is removed with its point).
        static PREPARED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = PREPARED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "parbench-embeddings-{}-{n}-{}x{}",
            std::process::id(),
            point.words,
            point.dim
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let table_f32 = Embeddings::new(
            table.words.clone(),
            table.dim,
            table.vecs.iter().map(|&x| f64::from(x as f32)).collect(),
        )?;
        let written = WrittenTable {
            table,
            table_f32,
            plain: dir.join("vectors.txt"),
            gzip: dir.join("vectors.txt.gz"),
            binary: dir.join("vectors.bin"),
            cache: EmbeddingsCache::new(dir.join("cache")),
            dir,
        };
        write_word2vec_text(&written.plain, &written.table)?;
        write_word2vec_text(&written.gzip, &written.table)?;
        write_word2vec_binary(&written.binary, &written.table)?;
        // The cached variant measures what every read after the first costs. The table is
        // already here, so it is stored as the file's parse, not parsed back (the cached run
        // checks it reads back exactly the table written).
        let stats = ReadStats {
            lines: written.table.len(),
            duplicate_words: 0,
            had_header: true,
        };
        written
            .cache
            .put(&written.plain, &written.table, &stats)
            .context("storing the table in the parsed cache")?;
        Ok(Box::new(written))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &EmbeddingsPoint,
        threads: usize,
    ) -> Result<Measurement> {
        let written = input
            .downcast_ref::<WrittenTable>()
            .ok_or_else(|| anyhow!("internal: the prepared input is not a written table"))?;
        // A pool even for one thread (`Par::Rayon(1)`, not `Par::Seq`): the reader parses in
        // the pool it is called from, which would otherwise be the global one.
        let pool = Par::Rayon(threads.max(1))
            .pool()?
            .ok_or_else(|| anyhow!("internal: a rayon setting gave no pool"))?;
        let (path, expected) = match variant {
            "text" | "cached" => (&written.plain, &written.table),
            "text-gz" => (&written.gzip, &written.table),
            "binary" => (&written.binary, &written.table_f32),
            other => bail!("unknown embeddings variant {other}"),
        };
        let start = Instant::now();
        let table = pool.install(|| -> Result<_> {
            Ok(match variant {
                "binary" => read_word2vec_binary(path)?.0,
                "cached" => {
                    let (table, _, used) = written.cache.read(path)?;
                    if used != CacheUse::Hit {
                        bail!(
                            "the parsed cache did not serve {} ({used:?})",
                            path.display()
                        );
                    }
                    table
                }
                _ => read_word2vec_text_with_stats(path)?.0,
            })
        })?;
        let wall = start.elapsed().as_secs_f64();
        let source = match variant {
            "cached" => written.cache.entry_of(path)?,
            _ => path.clone(),
        };
        if &table != expected {
            bail!(
                "{variant} read {} back as another table than was written",
                path.display()
            );
        }
        let size = |p: &Path| -> Result<f64> {
            Ok(std::fs::metadata(p)
                .with_context(|| format!("reading the size of {}", p.display()))?
                .len() as f64)
        };
        let text_bytes = size(&written.plain)?;
        let source_bytes = size(&source)?;
        let table_bytes = 8.0 * (point.words * point.dim) as f64;
        let work = Work {
            flops: 0.0,
            precision: Precision::F64,
            // What the reader scans: the text (decompressed, for text-gz), else its own file.
            stream_bytes: if variant.starts_with("text") {
                text_bytes
            } else {
                source_bytes
            } + table_bytes,
            reuse_bytes: 0.0,
            reuse_footprint_bytes: 0.0,
            threads: threads.max(1),
        };
        let mut metrics = BTreeMap::from([
            ("gb_per_s".to_string(), text_bytes / wall / 1e9),
            ("file_bytes".to_string(), text_bytes),
            ("source_bytes".to_string(), source_bytes),
            ("words".to_string(), point.words as f64),
            ("dim".to_string(), point.dim as f64),
        ]);
        metrics.extend(work_metrics(&work));
        Ok(Measurement {
            wall_time_s: wall,
            phases_s: BTreeMap::from([("read".to_string(), wall)]),
            metrics,
            output: table.vecs,
            trace: Vec::new(),
        })
    }
}
