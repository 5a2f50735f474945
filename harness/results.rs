//! Stored results: one directory per run, holding everything needed to re-plot and re-check it.
//!
//! ```text
//! RUN_DIR/
//!   experiment.yaml   the experiment file as run (a copy)
//!   meta.json         RunMeta: flags, seed, data source, machine, timestamps, versions
//!   results.parquet   tidy rows (one per point x variant x repetition)
//!   results.csv       the same rows, for spreadsheets and quick greps
//!   traces.parquet    progress traces (one row per progress step of every recorded run)
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
//! Trace columns, in order: `experiment, point, variant, repetition, param_<name>..., step,
//! time_s, metric_<name>...`: one row per progress report of every recorded (not warm-up) run
//! ([`crate::family::TraceStep`]), typed like the results table rather than in a long
//! (name, value) format, so that a trace row reads like a result row (filters on parameters,
//! `metric_<name>` columns, nulls for what a step did not report) and a figure selects on it the
//! same way. `step` is 1-based within its run; rows are sorted by point, variant, repetition,
//! step. The table exists, possibly empty, in every run directory made since traces exist; an
//! older run reads as having none.
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
use crate::family::{Params, ResultRow, TraceRow, Value};
use anyhow::{bail, Context};
use polars::prelude::{
    Column, CsvWriter, DataFrame, DataType, ParquetReader, ParquetWriter, PlSmallStr, SerReader,
    SerWriter,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};

pub const EXPERIMENT_YAML: &str = "experiment.yaml";
pub const META_JSON: &str = "meta.json";
pub const RESULTS_PARQUET: &str = "results.parquet";
pub const RESULTS_CSV: &str = "results.csv";
pub const TRACES_PARQUET: &str = "traces.parquet";
pub const FIGURES_DIR: &str = "figures";
pub const SUMMARY_TXT: &str = "summary.txt";

pub use crate::exec::machine::now_rfc3339;

use crate::util::column::{
    Column as ResultColumn, EQUIV_REL_ERROR, METRIC_PREFIX, PARAM_PREFIX, PHASE_PREFIX,
    PHASE_SUFFIX, WALL_TIME,
};

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
    /// The peers (programs outside parbench) the run ran as variants, with their versions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peers: BTreeMap<String, crate::peers::PeerRecord>,
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
            peers: crate::peers::records(&plan.peers),
        }
    }
}

/// The version of this crate, for [`RunMeta::parbench_version`].
pub const PARBENCH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the figures of a run directory go.
pub fn figures_dir(run_dir: &Path) -> PathBuf {
    run_dir.join(FIGURES_DIR)
}

// The one atomic write of the whole workspace lives in parbench-common (the crates write models
// and embeddings with it too).
pub use parbench_common::atomic::{
    is_temp_file, remove_stale_temp_files, write_atomic, write_atomic_with,
};

/// The run directories under `dir`: itself if it holds a run, else its subdirectories that do
/// (a reproduce directory), sorted.
pub fn run_dirs(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if dir.join(META_JSON).exists() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut dirs = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.join(META_JSON).exists() {
            dirs.push(p);
        }
    }
    dirs.sort();
    if dirs.is_empty() {
        anyhow::bail!(
            "{} holds no run (no meta.json in it or its subdirectories)",
            dir.display()
        );
    }
    Ok(dirs)
}

/// Writes `meta.json` into `run_dir`.
pub fn write_meta(run_dir: &Path, meta: &RunMeta) -> anyhow::Result<()> {
    let json = serde_json::to_vec_pretty(meta).context("cannot serialise run metadata")?;
    Ok(write_atomic(&run_dir.join(META_JSON), &json)?)
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
    Ok(write_atomic(&run_dir.join(RESULTS_CSV), &csv)?)
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

/// Writes the trace rows as `traces.parquet` into `run_dir` (atomically), sorted by point,
/// variant, repetition and step. An empty table is written too, so a run directory made since
/// traces exist always has one.
pub fn write_traces(run_dir: &Path, traces: &[TraceRow]) -> anyhow::Result<()> {
    let mut sorted: Vec<&TraceRow> = traces.iter().collect();
    sorted.sort_by(|a, b| {
        (a.point, &a.variant, a.repetition, a.step).cmp(&(
            b.point,
            &b.variant,
            b.repetition,
            b.step,
        ))
    });
    let mut frame = traces_to_frame(&sorted)?;
    let mut parquet = Vec::new();
    ParquetWriter::new(&mut parquet)
        .finish(&mut frame)
        .context("cannot encode the traces as Parquet")?;
    Ok(write_atomic(&run_dir.join(TRACES_PARQUET), &parquet)?)
}

/// Reads `traces.parquet` from `run_dir` back into rows, exactly as written; a run directory
/// without one (made before traces existed) has no trace rows.
pub fn read_traces(run_dir: &Path) -> anyhow::Result<Vec<TraceRow>> {
    let path = run_dir.join(TRACES_PARQUET);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let file = File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
    let frame = ParquetReader::new(file)
        .finish()
        .with_context(|| format!("cannot read {} as Parquet", path.display()))?;
    frame_to_traces(&frame).with_context(|| format!("unexpected table in {}", path.display()))
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
    /// Where the run was made (from `meta.json`).
    pub machine: StoredMachine,
}

/// The part of `meta.json` analysis needs; unknown or missing fields (a run made by another
/// parbench version) are tolerated.
#[derive(Deserialize)]
struct StoredFlags {
    #[serde(default)]
    quick: bool,
    #[serde(default)]
    machine: StoredMachine,
}

/// The machine of a stored run, as far as the regression gate needs it (fields a run made by
/// an earlier parbench lacks are empty).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct StoredMachine {
    #[serde(default)]
    pub cpu_model: String,
    /// See [`crate::exec::machine::fingerprint`].
    #[serde(default)]
    pub fingerprint: String,
    /// Vector path per family crate (see [`crate::exec::machine::dispatch`]).
    #[serde(default)]
    pub dispatch: BTreeMap<String, String>,
    #[serde(default)]
    pub git_commit: Option<String>,
    #[serde(default)]
    pub timestamp: String,
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
        machine: flags.machine,
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

/// The `param_<name>` columns of rows with these parameters, typed per [`ParamKind`], sorted by
/// name.
fn param_columns(params: &[&Params]) -> Vec<Column> {
    let mut param_kinds: BTreeMap<&str, ParamKind> = BTreeMap::new();
    for p in params {
        for (name, value) in p.iter() {
            let kind = ParamKind::of(value);
            param_kinds
                .entry(name)
                .and_modify(|k| *k = k.join(kind))
                .or_insert(kind);
        }
    }
    let mut columns = Vec::new();
    for (&name, &kind) in &param_kinds {
        let column_name: PlSmallStr = format!("{PARAM_PREFIX}{name}").into();
        let values = params.iter().map(|p| p.get(name));
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
    columns
}

fn rows_to_frame(rows: &[ResultRow]) -> anyhow::Result<DataFrame> {
    let mut phases: BTreeSet<&str> = BTreeSet::new();
    let mut metrics: BTreeSet<&str> = BTreeSet::new();
    for row in rows {
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
    columns.extend(param_columns(
        &rows.iter().map(|r| &r.params).collect::<Vec<_>>(),
    ));
    columns.push(Column::new(
        WALL_TIME.into(),
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
        EQUIV_REL_ERROR.into(),
        rows.iter().map(|r| r.equiv_rel_error).collect::<Vec<_>>(),
    ));
    DataFrame::new(rows.len(), columns).context("cannot assemble the results table")
}

fn traces_to_frame(traces: &[&TraceRow]) -> anyhow::Result<DataFrame> {
    let metrics: BTreeSet<&str> = traces
        .iter()
        .flat_map(|t| t.metrics.keys().map(String::as_str))
        .collect();
    let to_i64 = |n: usize| i64::try_from(n).context("index does not fit in a 64-bit integer");
    let indices = |f: fn(&TraceRow) -> usize| {
        traces
            .iter()
            .map(|t| to_i64(f(t)))
            .collect::<anyhow::Result<Vec<_>>>()
    };
    let mut columns = vec![
        Column::new(
            "experiment".into(),
            traces
                .iter()
                .map(|t| t.experiment.clone())
                .collect::<Vec<_>>(),
        ),
        Column::new("point".into(), indices(|t| t.point)?),
        Column::new(
            "variant".into(),
            traces.iter().map(|t| t.variant.clone()).collect::<Vec<_>>(),
        ),
        Column::new("repetition".into(), indices(|t| t.repetition)?),
    ];
    columns.extend(param_columns(
        &traces.iter().map(|t| &t.params).collect::<Vec<_>>(),
    ));
    columns.push(Column::new("step".into(), indices(|t| t.step)?));
    columns.push(Column::new(
        "time_s".into(),
        traces.iter().map(|t| t.time_s).collect::<Vec<_>>(),
    ));
    for name in metrics {
        columns.push(Column::new(
            format!("{METRIC_PREFIX}{name}").into(),
            traces
                .iter()
                .map(|t| t.metrics.get(name).copied())
                .collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(traces.len(), columns).context("cannot assemble the trace table")
}

fn frame_to_traces(frame: &DataFrame) -> anyhow::Result<Vec<TraceRow>> {
    let experiments = required_str(frame, "experiment")?;
    let variants = required_str(frame, "variant")?;
    let points = required_index(frame, "point")?;
    let repetitions = required_index(frame, "repetition")?;
    let steps = required_index(frame, "step")?;
    let times = optional_f64(frame, "time_s")?;
    let mut traces: Vec<TraceRow> = (0..frame.height())
        .map(|i| {
            Ok(TraceRow {
                experiment: experiments[i].clone(),
                point: points[i],
                params: Params::new(),
                variant: variants[i].clone(),
                repetition: repetitions[i],
                step: steps[i],
                time_s: times[i].with_context(|| format!("null in column `time_s`, row {i}"))?,
                metrics: BTreeMap::new(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    for column in frame.columns() {
        let name = column.name().as_str();
        match ResultColumn::parse(name) {
            Some(ResultColumn::Param(param)) => {
                for (row, value) in traces.iter_mut().zip(param_values(column)?) {
                    if let Some(value) = value {
                        row.params.insert(param.to_string(), value);
                    }
                }
            }
            Some(ResultColumn::Metric(metric)) => {
                for (row, value) in traces.iter_mut().zip(optional_f64(frame, name)?) {
                    if let Some(value) = value {
                        row.metrics.insert(metric.to_string(), value);
                    }
                }
            }
            // The fixed columns were read above; others (a newer writer) are skipped.
            _ => {}
        }
    }
    Ok(traces)
}

/// A text column without nulls.
fn required_str(frame: &DataFrame, name: &str) -> anyhow::Result<Vec<String>> {
    let column = frame
        .column(name)
        .with_context(|| format!("missing column `{name}`"))?;
    let values = column
        .str()
        .with_context(|| format!("column `{name}` is not text"))?;
    (0..frame.height())
        .map(|i| {
            values
                .get(i)
                .map(str::to_string)
                .with_context(|| format!("null in column `{name}`, row {i}"))
        })
        .collect()
}

/// An integer column of non-negative values without nulls (indices, counts).
fn required_index(frame: &DataFrame, name: &str) -> anyhow::Result<Vec<usize>> {
    let values = optional_i64(frame, name)?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.and_then(|v| usize::try_from(v).ok())
                .with_context(|| format!("column `{name}`, row {i}: not a row index"))
        })
        .collect()
}

fn frame_to_rows(frame: &DataFrame) -> anyhow::Result<Vec<ResultRow>> {
    let height = frame.height();
    let experiments = required_str(frame, "experiment")?;
    let variants = required_str(frame, "variant")?;
    let points = required_index(frame, "point")?;
    let repetitions = required_index(frame, "repetition")?;
    let wall_times = optional_f64(frame, WALL_TIME)?;
    let equiv = if frame.column(EQUIV_REL_ERROR).is_ok() {
        optional_f64(frame, EQUIV_REL_ERROR)?
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
        match ResultColumn::parse(name) {
            Some(ResultColumn::Param(param)) => {
                for (row, value) in rows.iter_mut().zip(param_values(column)?) {
                    if let Some(value) = value {
                        row.params.insert(param.to_string(), value);
                    }
                }
            }
            Some(ResultColumn::Phase(phase)) => {
                for (row, value) in rows.iter_mut().zip(optional_f64(frame, name)?) {
                    if let Some(value) = value {
                        row.phases_s.insert(phase.to_string(), value);
                    }
                }
            }
            Some(ResultColumn::Metric(metric)) => {
                for (row, value) in rows.iter_mut().zip(optional_f64(frame, name)?) {
                    if let Some(value) = value {
                        row.metrics.insert(metric.to_string(), value);
                    }
                }
            }
            // The fixed columns were read above; unknown ones (a newer writer) are skipped.
            _ => {}
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

    fn trace_row(point: usize, variant: &str, repetition: usize, step: usize) -> TraceRow {
        let mut metrics = BTreeMap::from([("residual".to_string(), 1.0 / step as f64)]);
        // A metric only some steps have: null in the others, absent when read back.
        if step.is_multiple_of(2) {
            metrics.insert("loglik".to_string(), -1e6 - step as f64);
        }
        TraceRow {
            experiment: "e".into(),
            point,
            params: Params::from([
                ("threads".to_string(), Value::Int(point as i64 + 1)),
                ("alpha".to_string(), Value::Float(0.1)),
                ("inner".to_string(), Value::Str("gemm".into())),
                ("evaluate".to_string(), Value::Bool(point == 0)),
            ]),
            variant: variant.into(),
            repetition,
            step,
            time_s: 0.25 * step as f64 + point as f64,
            metrics,
        }
    }

    #[test]
    fn trace_tables_read_back_exactly_as_written_in_run_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        for point in [1, 0] {
            for variant in ["sync", "async"] {
                for repetition in [1, 0] {
                    for step in [3, 1, 2] {
                        written.push(trace_row(point, variant, repetition, step));
                    }
                }
            }
        }
        // One row without parameters a point of another shape lacks.
        let mut bare = trace_row(2, "sync", 0, 1);
        bare.params.remove("inner");
        written.push(bare);
        write_traces(dir.path(), &written).unwrap();
        let back = read_traces(dir.path()).unwrap();
        let mut expected = written.clone();
        expected.sort_by(|a, b| {
            (a.point, &a.variant, a.repetition, a.step).cmp(&(
                b.point,
                &b.variant,
                b.repetition,
                b.step,
            ))
        });
        assert_eq!(back.len(), expected.len());
        for (b, e) in back.iter().zip(&expected) {
            assert_eq!(b, e, "\nread back: {b:?}\nwritten:   {e:?}");
        }
    }

    #[test]
    fn an_empty_trace_table_and_a_missing_one_read_as_no_rows() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_traces(dir.path()).unwrap().is_empty());
        write_traces(dir.path(), &[]).unwrap();
        assert!(dir.path().join(TRACES_PARQUET).is_file());
        assert!(read_traces(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn param_kinds_widen_ints_to_floats_and_mixes_to_text() {
        use ParamKind::*;
        assert_eq!(Int.join(Int), Int);
        assert_eq!(Int.join(Float), Float);
        assert_eq!(Float.join(Int), Float);
        assert_eq!(Bool.join(Int), Str);
        assert_eq!(Str.join(Float), Str);
    }
}
