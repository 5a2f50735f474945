//! Stored results: one directory per run, holding everything needed to re-plot and re-check it.
//!
//! ```text
//! RUN_DIR/
//!   experiment.yaml   the experiment file as run (a copy)
//!   meta.json         RunMeta: flags, seed, data source, machine, timestamps, versions
//!   results.parquet   tidy rows (one per point x variant x repetition)
//!   results.csv       the same rows, for spreadsheets and quick greps
//!   figures/          <figure>.png and <figure>.svg
//!   summary.txt       human-readable summary and claim verdicts
//! ```
//!
//! Row columns, in order: `experiment, point, variant, repetition, param_<name>...,
//! wall_time_s, phase_<name>_s..., metric_<name>..., equiv_rel_error` (params, phases and metrics
//! sorted by name). Parameter columns keep their type (Int64, Float64, String, Boolean); a
//! parameter set to integers in some rows and floats in others is stored as Float64, any other
//! mix as String. A value a row lacks is null, and reads back as an absent key.
//!
//! Every file of a run directory is written through [`write_atomic_with`] (a temporary sibling,
//! fsync, rename, fsync of the directory), so a sweep killed at any moment leaves each file either
//! absent or complete, never torn. The runner rewrites the whole table after every point: with
//! hundreds of rows that costs milliseconds.
//!
//! Analysis reads only what is stored: [`load_run`] gives the experiment as run (its stored copy,
//! parsed without looking up the family or the data dir), the quick flag from `meta.json`, and
//! the rows, so a run stays plottable and checkable after its dataset is gone or a variant has
//! been renamed.

use crate::exec::machine::MachineInfo;
use crate::experiment::plan::Plan;
use crate::family::{Params, ResultRow, Value};
use anyhow::{bail, Context};
use polars::prelude::{
    Column, CsvWriter, DataFrame, DataType, ParquetReader, ParquetWriter, PlSmallStr, SerReader,
    SerWriter,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const EXPERIMENT_YAML: &str = "experiment.yaml";
pub const META_JSON: &str = "meta.json";
pub const RESULTS_PARQUET: &str = "results.parquet";
pub const RESULTS_CSV: &str = "results.csv";
pub const FIGURES_DIR: &str = "figures";
pub const SUMMARY_TXT: &str = "summary.txt";

pub use crate::exec::machine::now_rfc3339;

const PARAM_PREFIX: &str = "param_";
const PHASE_PREFIX: &str = "phase_";
const PHASE_SUFFIX: &str = "_s";
const METRIC_PREFIX: &str = "metric_";

/// Provenance of a run, stored as `meta.json` next to its results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The experiment's `name`.
    pub experiment: String,
    /// Path of the experiment file as given on the command line.
    pub source_file: String,
    /// Whether `--quick` overrides were applied.
    pub quick: bool,
    pub seed: u64,
    pub data_dir: Option<String>,
    /// File of the data dir the points read, for `source: dataset`.
    pub dataset: Option<String>,
    pub machine: MachineInfo,
    /// RFC 3339 UTC.
    pub started: String,
    /// RFC 3339 UTC; None while the run is in progress (or was interrupted).
    pub finished: Option<String>,
    pub parbench_version: String,
}

impl RunMeta {
    /// The metadata of a run of `plan` starting now (`started`, RFC 3339), not yet finished.
    pub fn new(plan: &Plan, machine: MachineInfo, started: String) -> Self {
        RunMeta {
            experiment: plan.config.name.clone(),
            source_file: plan.source.display().to_string(),
            quick: plan.quick,
            seed: plan.config.data.seed,
            data_dir: plan
                .dataset
                .as_ref()
                .and_then(|d| d.parent())
                .map(|d| d.display().to_string()),
            dataset: plan
                .dataset
                .as_ref()
                .and_then(|d| d.file_name())
                .map(|f| f.to_string_lossy().into_owned()),
            machine,
            started,
            finished: None,
            parbench_version: PARBENCH_VERSION.to_string(),
        }
    }
}

/// The version of this crate, for [`RunMeta::parbench_version`].
pub const PARBENCH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the figures of a run directory go.
pub fn figures_dir(run_dir: &Path) -> PathBuf {
    run_dir.join(FIGURES_DIR)
}

/// Writes `bytes` to `path` atomically; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Marks the temporary files of [`write_atomic_with`]: `.<name>.tmp-<pid>-<n>`.
const TEMP_MARK: &str = ".tmp-";

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

/// The one way parbench writes a file others may read while it is being replaced (everything
/// in a run directory, figures, baselines, output tables): readers see either the old file or
/// the complete new one, also after a crash or a SIGKILL at any instant.
///
/// `write` fills a hidden temporary sibling (`.<name>.tmp-<pid>-<n>`, unique per process and
/// call, so concurrent writers never share one) in the same directory, hence on the same file
/// system; it is flushed and fsynced, renamed over `path` (atomic on POSIX), and the directory
/// is fsynced so the rename itself survives a power loss. On any failure the temporary file is
/// removed and the old `path` is left as it was. A process killed mid-write leaves only the
/// temporary file, which [`remove_stale_temp_files`] clears.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name = path
        .file_name()
        .with_context(|| format!("{} does not name a file", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(
        "{TEMP_MARK}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp_path = path.with_file_name(tmp_name);
    let write_tmp = || -> std::io::Result<()> {
        // Unique among live processes; one left by a dead process of the same id is stale.
        let mut w = std::io::BufWriter::new(File::create(&tmp_path)?);
        write(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    if let Err(err) = write_tmp() {
        let _ = std::fs::remove_file(&tmp_path);
        return Err(err).with_context(|| format!("cannot write {}", tmp_path.display()));
    }
    if let Err(err) = std::fs::rename(&tmp_path, path) {
        let _ = std::fs::remove_file(&tmp_path);
        return Err(err).with_context(|| {
            format!("cannot move {} over {}", tmp_path.display(), path.display())
        });
    }
    sync_dir(path.parent())
        .with_context(|| format!("cannot fsync the directory of {}", path.display()))
}

/// Fsyncs a directory, making a rename in it durable. Platforms that cannot open a directory
/// (Windows) are skipped, and so are file systems that do not sync directories (EINVAL,
/// ENOTSUP); any other failure is an error.
fn sync_dir(dir: Option<&Path>) -> std::io::Result<()> {
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
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Writes `meta.json` into `run_dir`.
pub fn write_meta(run_dir: &Path, meta: &RunMeta) -> anyhow::Result<()> {
    let json = serde_json::to_vec_pretty(meta).context("cannot serialise run metadata")?;
    write_atomic(&run_dir.join(META_JSON), &json)
}

/// Reads `meta.json` from `run_dir`.
pub fn read_meta(run_dir: &Path) -> anyhow::Result<RunMeta> {
    let path = run_dir.join(META_JSON);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid run metadata", path.display()))
}

/// Writes the rows as `results.parquet` and `results.csv` into `run_dir` (both atomically).
pub fn write_rows(run_dir: &Path, rows: &[ResultRow]) -> anyhow::Result<()> {
    let mut frame = rows_to_frame(rows)?;
    let mut parquet = Vec::new();
    ParquetWriter::new(&mut parquet)
        .finish(&mut frame)
        .context("cannot encode results as Parquet")?;
    let mut csv = Vec::new();
    CsvWriter::new(&mut csv)
        .include_header(true)
        .finish(&mut frame)
        .context("cannot encode results as CSV")?;
    write_atomic(&run_dir.join(RESULTS_PARQUET), &parquet)?;
    write_atomic(&run_dir.join(RESULTS_CSV), &csv)
}

/// Reads `results.parquet` from `run_dir` back into rows, exactly as written.
pub fn read_rows(run_dir: &Path) -> anyhow::Result<Vec<ResultRow>> {
    let path = run_dir.join(RESULTS_PARQUET);
    let file = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let frame = ParquetReader::new(file)
        .finish()
        .with_context(|| format!("cannot read {} as Parquet", path.display()))?;
    frame_to_rows(&frame).with_context(|| format!("unexpected table in {}", path.display()))
}

/// A stored run, as analysis sees it: everything comes from the run directory.
#[derive(Clone, Debug)]
pub struct StoredRun {
    pub dir: PathBuf,
    /// The stored experiment file, parsed, with its `quick` overrides applied when the run was
    /// quick. Not validated against the family (which may have changed since, or be gone).
    pub config: crate::experiment::config::ExperimentConfig,
    /// Whether the run used `--quick` (from `meta.json`).
    pub quick: bool,
    pub rows: Vec<ResultRow>,
}

/// The part of `meta.json` analysis needs; unknown or missing fields (a run made by another
/// parbench version) are tolerated.
#[derive(Deserialize)]
struct StoredFlags {
    #[serde(default)]
    quick: bool,
}

/// Loads a run for plotting and checking from `dir` alone: `experiment.yaml` (parsed with
/// [`crate::experiment::config::parse_str`], quick overrides per `meta.json`), `meta.json` and
/// `results.parquet`. It resolves no family and no data dir, so it works after the dataset is
/// deleted and on runs whose experiment names variants or parameters parbench no longer has.
pub fn load_run(dir: &Path) -> anyhow::Result<StoredRun> {
    let meta_path = dir.join(META_JSON);
    let meta_text = std::fs::read_to_string(&meta_path)
        .with_context(|| format!("cannot read {}", meta_path.display()))?;
    let flags: StoredFlags = serde_json::from_str(&meta_text)
        .with_context(|| format!("{} is not valid run metadata", meta_path.display()))?;
    let yaml_path = dir.join(EXPERIMENT_YAML);
    let yaml = std::fs::read_to_string(&yaml_path)
        .with_context(|| format!("cannot read {}", yaml_path.display()))?;
    let config = crate::experiment::config::parse_str(&yaml, &yaml_path)
        .with_context(|| format!("re-reading the experiment stored in {}", dir.display()))?;
    let config = if flags.quick {
        crate::experiment::config::apply_quick(config)
    } else {
        config
    };
    if !dir.join(RESULTS_PARQUET).exists() {
        bail!(
            "{} holds no results yet (the run stopped before its first point finished); continue it with `parbench run EXPERIMENT --resume {}`",
            dir.display(),
            dir.display()
        );
    }
    let rows = read_rows(dir)?;
    Ok(StoredRun {
        dir: dir.to_path_buf(),
        config,
        quick: flags.quick,
        rows,
    })
}

/// The storage type of one parameter column, from the values the rows give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParamKind {
    Bool,
    Int,
    Float,
    Str,
}

impl ParamKind {
    fn of(value: &Value) -> Self {
        match value {
            Value::Bool(_) => ParamKind::Bool,
            Value::Int(_) => ParamKind::Int,
            Value::Float(_) => ParamKind::Float,
            Value::Str(_) => ParamKind::Str,
        }
    }

    /// The narrowest kind holding both without losing information (ints widen to floats;
    /// anything else falls back to text).
    fn join(self, other: Self) -> Self {
        use ParamKind::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Int, Float) | (Float, Int) => Float,
            _ => Str,
        }
    }
}

fn rows_to_frame(rows: &[ResultRow]) -> anyhow::Result<DataFrame> {
    let mut param_kinds: BTreeMap<&str, ParamKind> = BTreeMap::new();
    let mut phases: BTreeSet<&str> = BTreeSet::new();
    let mut metrics: BTreeSet<&str> = BTreeSet::new();
    for row in rows {
        for (name, value) in &row.params {
            let kind = ParamKind::of(value);
            param_kinds
                .entry(name)
                .and_modify(|k| *k = k.join(kind))
                .or_insert(kind);
        }
        phases.extend(row.phases_s.keys().map(String::as_str));
        metrics.extend(row.metrics.keys().map(String::as_str));
    }

    let to_i64 = |n: usize| i64::try_from(n).context("index does not fit in a 64-bit integer");
    let mut columns = vec![
        Column::new(
            "experiment".into(),
            rows.iter()
                .map(|r| r.experiment.clone())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "point".into(),
            rows.iter()
                .map(|r| to_i64(r.point))
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
        Column::new(
            "variant".into(),
            rows.iter().map(|r| r.variant.clone()).collect::<Vec<_>>(),
        ),
        Column::new(
            "repetition".into(),
            rows.iter()
                .map(|r| to_i64(r.repetition))
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
    ];
    for (&name, &kind) in &param_kinds {
        let column_name: PlSmallStr = format!("{PARAM_PREFIX}{name}").into();
        let values = rows.iter().map(|r| r.params.get(name));
        let column = match kind {
            ParamKind::Bool => Column::new(
                column_name,
                values
                    .map(|v| match v {
                        Some(Value::Bool(b)) => Some(*b),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ParamKind::Int => Column::new(
                column_name,
                values
                    .map(|v| match v {
                        Some(Value::Int(i)) => Some(*i),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            ParamKind::Float => Column::new(
                column_name,
                values
                    .map(|v| v.and_then(Value::as_f64))
                    .collect::<Vec<_>>(),
            ),
            ParamKind::Str => Column::new(
                column_name,
                values.map(|v| v.map(|v| v.to_string())).collect::<Vec<_>>(),
            ),
        };
        columns.push(column);
    }
    columns.push(Column::new(
        "wall_time_s".into(),
        rows.iter().map(|r| r.wall_time_s).collect::<Vec<_>>(),
    ));
    for name in phases {
        columns.push(Column::new(
            format!("{PHASE_PREFIX}{name}{PHASE_SUFFIX}").into(),
            rows.iter()
                .map(|r| r.phases_s.get(name).copied())
                .collect::<Vec<_>>(),
        ));
    }
    for name in metrics {
        columns.push(Column::new(
            format!("{METRIC_PREFIX}{name}").into(),
            rows.iter()
                .map(|r| r.metrics.get(name).copied())
                .collect::<Vec<_>>(),
        ));
    }
    columns.push(Column::new(
        "equiv_rel_error".into(),
        rows.iter().map(|r| r.equiv_rel_error).collect::<Vec<_>>(),
    ));
    DataFrame::new(rows.len(), columns).context("cannot assemble the results table")
}

/// What a stored column holds, recognised from its name.
enum ColumnRole<'a> {
    Param(&'a str),
    Phase(&'a str),
    Metric(&'a str),
}

fn column_role(name: &str) -> Option<ColumnRole<'_>> {
    if let Some(param) = name.strip_prefix(PARAM_PREFIX) {
        return Some(ColumnRole::Param(param));
    }
    if let Some(phase) = name
        .strip_prefix(PHASE_PREFIX)
        .and_then(|rest| rest.strip_suffix(PHASE_SUFFIX))
    {
        return Some(ColumnRole::Phase(phase));
    }
    name.strip_prefix(METRIC_PREFIX).map(ColumnRole::Metric)
}

fn frame_to_rows(frame: &DataFrame) -> anyhow::Result<Vec<ResultRow>> {
    let height = frame.height();
    let required_str = |name: &str| -> anyhow::Result<Vec<String>> {
        let column = frame
            .column(name)
            .with_context(|| format!("missing column `{name}`"))?;
        let values = column
            .str()
            .with_context(|| format!("column `{name}` is not text"))?;
        (0..height)
            .map(|i| {
                values
                    .get(i)
                    .map(str::to_string)
                    .with_context(|| format!("null in column `{name}`, row {i}"))
            })
            .collect()
    };
    let required_index = |name: &str| -> anyhow::Result<Vec<usize>> {
        let values = optional_i64(frame, name)?;
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.and_then(|v| usize::try_from(v).ok())
                    .with_context(|| format!("column `{name}`, row {i}: not a row index"))
            })
            .collect()
    };

    let experiments = required_str("experiment")?;
    let variants = required_str("variant")?;
    let points = required_index("point")?;
    let repetitions = required_index("repetition")?;
    let wall_times = optional_f64(frame, "wall_time_s")?;
    let equiv = if frame.column("equiv_rel_error").is_ok() {
        optional_f64(frame, "equiv_rel_error")?
    } else {
        vec![None; height]
    };

    let mut rows: Vec<ResultRow> = (0..height)
        .map(|i| {
            Ok(ResultRow {
                experiment: experiments[i].clone(),
                point: points[i],
                params: Params::new(),
                variant: variants[i].clone(),
                repetition: repetitions[i],
                wall_time_s: wall_times[i]
                    .with_context(|| format!("null in column `wall_time_s`, row {i}"))?,
                phases_s: BTreeMap::new(),
                metrics: BTreeMap::new(),
                equiv_rel_error: equiv[i],
            })
        })
        .collect::<anyhow::Result<_>>()?;

    for column in frame.columns() {
        let name = column.name().as_str();
        match column_role(name) {
            Some(ColumnRole::Param(param)) => {
                for (row, value) in rows.iter_mut().zip(param_values(column)?) {
                    if let Some(value) = value {
                        row.params.insert(param.to_string(), value);
                    }
                }
            }
            Some(ColumnRole::Phase(phase)) => {
                for (row, value) in rows.iter_mut().zip(optional_f64(frame, name)?) {
                    if let Some(value) = value {
                        row.phases_s.insert(phase.to_string(), value);
                    }
                }
            }
            Some(ColumnRole::Metric(metric)) => {
                for (row, value) in rows.iter_mut().zip(optional_f64(frame, name)?) {
                    if let Some(value) = value {
                        row.metrics.insert(metric.to_string(), value);
                    }
                }
            }
            // The fixed columns were read above; unknown ones (a newer writer) are skipped.
            None => {}
        }
    }
    Ok(rows)
}

fn optional_i64(frame: &DataFrame, name: &str) -> anyhow::Result<Vec<Option<i64>>> {
    let column = frame
        .column(name)
        .with_context(|| format!("missing column `{name}`"))?
        .cast(&DataType::Int64)
        .with_context(|| format!("column `{name}` is not integer"))?;
    let values = column.i64()?;
    Ok((0..frame.height()).map(|i| values.get(i)).collect())
}

fn optional_f64(frame: &DataFrame, name: &str) -> anyhow::Result<Vec<Option<f64>>> {
    let column = frame
        .column(name)
        .with_context(|| format!("missing column `{name}`"))?
        .cast(&DataType::Float64)
        .with_context(|| format!("column `{name}` is not numeric"))?;
    let values = column.f64()?;
    Ok((0..frame.height()).map(|i| values.get(i)).collect())
}

/// A parameter column back as values, typed by the column's dtype.
fn param_values(column: &Column) -> anyhow::Result<Vec<Option<Value>>> {
    let name = column.name();
    let height = column.len();
    Ok(match column.dtype() {
        DataType::Boolean => {
            let values = column.bool()?;
            (0..height)
                .map(|i| values.get(i).map(Value::Bool))
                .collect()
        }
        dtype if dtype.is_integer() => {
            let column = column.cast(&DataType::Int64)?;
            let values = column.i64()?;
            (0..height).map(|i| values.get(i).map(Value::Int)).collect()
        }
        dtype if dtype.is_float() => {
            let column = column.cast(&DataType::Float64)?;
            let values = column.f64()?;
            (0..height)
                .map(|i| values.get(i).map(Value::Float))
                .collect()
        }
        DataType::String => {
            let values = column.str()?;
            (0..height)
                .map(|i| values.get(i).map(|s| Value::Str(s.to_string())))
                .collect()
        }
        other => bail!("parameter column `{name}` has unsupported type {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_kinds_widen_ints_to_floats_and_mixes_to_text() {
        use ParamKind::*;
        assert_eq!(Int.join(Int), Int);
        assert_eq!(Int.join(Float), Float);
        assert_eq!(Float.join(Int), Float);
        assert_eq!(Bool.join(Int), Str);
        assert_eq!(Str.join(Float), Str);
    }

    #[test]
    fn column_roles_strip_prefixes_and_units() {
        assert!(matches!(
            column_role("param_threads"),
            Some(ColumnRole::Param("threads"))
        ));
        assert!(matches!(
            column_role("phase_loop_s"),
            Some(ColumnRole::Phase("loop"))
        ));
        assert!(matches!(
            column_role("metric_gflop_per_s"),
            Some(ColumnRole::Metric("gflop_per_s"))
        ));
        assert!(column_role("wall_time_s").is_none());
        assert!(column_role("equiv_rel_error").is_none());
    }
}
