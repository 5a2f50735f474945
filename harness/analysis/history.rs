//! `parbench history`: how each gated quantity moved across commits, and where it stepped.
//!
//! The deterministic tier's baseline (`results/baselines/gate.json`) is rewritten in the commit
//! that accepts a change, so its git history is the history of every instruction count: each
//! commit that touched the file gives one version of it (`git log`, then `git cat-file`).
//! Alternatively a folder of stored runs gives the same series, each run placed by the commit
//! its `meta.json` records.
//!
//! Each experiment x point x variant has two quantities: the instructions of one run (counted
//! under callgrind, exact to about 0.3%, so a change of a few percent is real), and the median
//! time per calibration on each machine kind (noisier, hence its own threshold).
//!
//! Step detection follows airspeed velocity (asv): the series is cut into constant pieces by
//! minimising the sum of absolute deviations from each piece's median plus a penalty per cut
//! (exact optimal partitioning, O(n^2 log n) for n commits). The fit is made on logarithms, so
//! that a change is relative and one penalty, half the threshold, fits every series: a single
//! commit that moves by more than the threshold is cut off, noise well within it is not.
//! Consecutive pieces whose medians differ by more than the threshold make a step. A slow creep
//! of many changes each under the threshold is not a step.

use crate::analysis::check::{Baseline, BaselineError, INSTRUCTIONS_METRIC};
use crate::analysis::plot::PALETTE;
use crate::exec::executor::CALIBRATION_METRIC;
use crate::exec::machine::rfc3339_from_unix;
use crate::experiment::plan::point_key;
use crate::results::{self, StoredRun, EXPERIMENT_YAML, META_JSON, RESULTS_PARQUET};
use crate::util::csv::field;
use crate::util::stats::median;
use anyhow::{anyhow, bail, Context, Result};
use plotters::coord::ranged1d::{
    AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The baseline read by default: the deterministic tier's.
pub const DEFAULT_BASELINE: &str = "results/baselines/gate.json";
/// Where the table and the figures go by default.
pub const DEFAULT_OUT: &str = "results/history";
/// Default relative change of an instruction count that is a step.
pub const DEFAULT_THRESHOLD: f64 = 0.02;
/// Default relative change of a time per calibration that is a step: calibrated times still
/// move by several percent between sessions on one machine.
pub const DEFAULT_TIME_THRESHOLD: f64 = 0.10;
/// The table written into the output folder.
pub const HISTORY_CSV: &str = "history.csv";

/// How deep under `--runs DIR` run directories are looked for (`DIR/<commit>/<experiment>` is
/// two levels).
const MAX_RUN_DEPTH: usize = 4;
/// The machine kind of runs made before parbench recorded one.
const UNKNOWN_MACHINE: &str = "unknown machine";

/// Arguments of `parbench history`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
#[command(
    about = "How instruction counts and calibrated times moved across commits, and where they stepped",
    long_about = "Follows every experiment x point x variant of the regression gate across commits: its \
instruction count and its median time per calibration on each machine kind. The history is read from the \
committed versions of a baseline (by default the deterministic tier's, results/baselines/gate.json; one \
version per commit that changed it, uncommitted edits not included), or from a folder of stored runs \
(--runs), each placed by the commit its meta.json records.\n\n\
Step changes are found as airspeed velocity does: each series is cut into constant pieces (least absolute \
deviations from each piece's median, on logarithms, plus a penalty per cut of half the threshold), and a \
step is reported where consecutive pieces differ by more than --threshold (instructions) or \
--time-threshold (times).\n\n\
Writes OUT/history.csv (one row per series, commit and machine kind) and, per experiment, \
OUT/<experiment>-instructions.svg and OUT/<experiment>-time.svg (one line per variant; steps ringed, their \
commits shaded), then prints one line per step.\n\n\
Example:  parbench history --experiment gate_sinkhorn"
)]
pub struct HistoryArgs {
    /// Baseline JSON whose committed versions make the history, read with git from the
    /// repository holding it (one point per commit that changed it).
    #[arg(long, value_name = "FILE", default_value = DEFAULT_BASELINE)]
    pub baseline: PathBuf,
    /// Read stored runs instead of a baseline's history: every run directory under DIR (each
    /// with its commit in meta.json); runs of one commit are pooled, commits ordered by when
    /// their first run started.
    #[arg(long, value_name = "DIR", conflicts_with = "baseline")]
    pub runs: Option<PathBuf>,
    /// Folder for history.csv and the figures (created if missing).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Only this experiment (e.g. gate_sinkhorn).
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    /// An instruction count that changes by more than this fraction makes a step (0.02 = 2%).
    #[arg(long, value_name = "FRACTION", default_value_t = DEFAULT_THRESHOLD)]
    pub threshold: f64,
    /// A time per calibration that changes by more than this fraction makes a step.
    #[arg(long, value_name = "FRACTION", default_value_t = DEFAULT_TIME_THRESHOLD)]
    pub time_threshold: f64,
}

/// One commit of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitInfo {
    pub hash: String,
    /// RFC 3339 UTC: the commit's date (baseline history), or when its first run started
    /// (`--runs`).
    pub date: String,
    /// First line of the commit message; empty when unknown.
    pub subject: String,
}

impl CommitInfo {
    /// The abbreviated hash figures and reports show.
    pub fn short_hash(&self) -> &str {
        self.hash.get(..7).unwrap_or(&self.hash)
    }
}

/// What a series measures.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Quantity {
    /// Instructions of one run under callgrind.
    Instructions,
    /// Median over repetitions of wall time over its point's calibration, on one
    /// machine kind.
    TimePerCalibration { machine: String },
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quantity::Instructions => write!(f, "instructions"),
            Quantity::TimePerCalibration { machine } => {
                write!(f, "time per calibration on {machine}")
            }
        }
    }
}

/// A step change of one quantity of one experiment x point x variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub experiment: String,
    pub point: String,
    pub variant: String,
    pub quantity: Quantity,
    /// Index in [`HistoryReport::commits`] of the first commit at the new level.
    pub commit_index: usize,
    pub commit: CommitInfo,
    /// Median of the piece before the step.
    pub before: f64,
    /// Median of the piece from the step on.
    pub after: f64,
    /// `after / before - 1` in percent (infinite from 0).
    pub percent: f64,
}

/// What `parbench history` found and wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryReport {
    /// What the history was read from.
    pub source: String,
    /// The commits, oldest first.
    pub commits: Vec<CommitInfo>,
    /// Quantities followed (experiment x point x variant x quantity with at least one value).
    pub series: usize,
    pub threshold: f64,
    pub time_threshold: f64,
    pub steps: Vec<Step>,
    /// Commits and runs skipped, and why.
    pub notes: Vec<String>,
    pub out_dir: PathBuf,
    pub files: Vec<PathBuf>,
    /// Experiments with more than one point: their steps name the point.
    multi_point_experiments: BTreeSet<String>,
}

impl fmt::Display for HistoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let span = match (self.commits.first(), self.commits.last()) {
            (Some(first), Some(last)) if self.commits.len() > 1 => {
                format!(" ({}..{})", first.short_hash(), last.short_hash())
            }
            _ => String::new(),
        };
        writeln!(
            f,
            "history of {}: {} commit(s){span}, {} series, {} step(s) (over {} for instructions, {} for times)",
            self.source,
            self.commits.len(),
            self.series,
            self.steps.len(),
            fmt_threshold(self.threshold),
            fmt_threshold(self.time_threshold),
        )?;
        for step in &self.steps {
            let point = if self.multi_point_experiments.contains(&step.experiment) {
                format!(" [{}]", step.point)
            } else {
                String::new()
            };
            // A subject line can run to hundreds of characters; the step line names the commit.
            const SUBJECT_CHARS: usize = 60;
            let subject = match step.commit.subject.chars().count() {
                0 => String::new(),
                n if n <= SUBJECT_CHARS => format!(" ({})", step.commit.subject),
                _ => {
                    let head: String = step.commit.subject.chars().take(SUBJECT_CHARS).collect();
                    format!(" ({}…)", head.trim_end())
                }
            };
            writeln!(
                f,
                "{}{point} `{}` {}: {} -> {} ({}) at {}{subject}",
                step.experiment,
                step.variant,
                step.quantity,
                fmt_short(step.before),
                fmt_short(step.after),
                fmt_percent(step.percent),
                step.commit.short_hash(),
            )?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        writeln!(
            f,
            "wrote {} file(s) to {}",
            self.files.len(),
            self.out_dir.display()
        )
    }
}

/// Reads the history, finds its steps, and writes `history.csv` and the figures into
/// `args.out`.
pub fn run(args: &HistoryArgs) -> Result<HistoryReport> {
    for (flag, value) in [
        ("--threshold", args.threshold),
        ("--time-threshold", args.time_threshold),
    ] {
        if !(value.is_finite() && value > 0.0) {
            bail!("{flag} must be a positive fraction (0.02 = 2%), not {value}");
        }
    }
    let mut collected = match &args.runs {
        Some(dir) => read_runs(dir)?,
        None => read_baseline_history(&args.baseline)?,
    };
    if let Some(wanted) = &args.experiment {
        let known: BTreeSet<&str> = collected
            .samples
            .keys()
            .map(|k| k.experiment.as_str())
            .collect();
        if !known.contains(wanted.as_str()) {
            let known: Vec<&str> = known.into_iter().collect();
            bail!(
                "no experiment `{wanted}` in {}; it has: {}",
                collected.source,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
        collected.samples.retain(|k, _| &k.experiment == wanted);
    }

    let traces = traces(&collected.samples);
    let steps = find_steps(&traces, &collected.commits, args);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut files = Vec::new();
    let csv_path = args.out.join(HISTORY_CSV);
    results::write_atomic(
        &csv_path,
        history_csv(&collected.commits, &collected.samples, &steps).as_bytes(),
    )?;
    files.push(csv_path);
    files.extend(write_figures(&collected.commits, &traces, &steps, args)?);

    let mut points: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for key in collected.samples.keys() {
        points
            .entry(&key.experiment)
            .or_default()
            .insert(&key.point);
    }
    Ok(HistoryReport {
        source: collected.source,
        series: traces.len(),
        threshold: args.threshold,
        time_threshold: args.time_threshold,
        steps,
        notes: collected.notes,
        out_dir: args.out.clone(),
        files,
        multi_point_experiments: points
            .into_iter()
            .filter(|(_, p)| p.len() > 1)
            .map(|(e, _)| e.to_string())
            .collect(),
        commits: collected.commits,
    })
}

// ---------------------------------------------------------------------------------------------
// Step detection

/// A step in a series of values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// Index of the first value at the new level.
    pub index: usize,
    /// Median of the piece before.
    pub before: f64,
    /// Median of the piece from `index` on.
    pub after: f64,
}

/// The steps of `values` (in order) larger than `threshold` (a fraction): see the module
/// documentation. Values should be finite; all positive (counts, times) they are fitted on
/// logarithms, otherwise as they are, with the penalty scaled to their median magnitude.
pub fn detect_steps(values: &[f64], threshold: f64) -> Vec<Change> {
    let (fitted, penalty) = if values.iter().all(|v| *v > 0.0) {
        // ln(1 + x) ~ x: a cut of half the threshold costs the same at every level.
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        (logs, 0.5 * threshold)
    } else {
        let magnitudes: Vec<f64> = values.iter().map(|v| v.abs()).collect();
        let scale = median(&magnitudes).filter(|s| *s > 0.0).unwrap_or(1.0);
        (values.to_vec(), 0.5 * threshold * scale)
    };
    let starts = segment(&fitted, penalty);
    let level = |piece: usize| {
        let end = starts.get(piece + 1).copied().unwrap_or(values.len());
        median(&values[starts[piece]..end]).unwrap_or(f64::NAN)
    };
    (1..starts.len())
        .filter_map(|piece| {
            let (before, after) = (level(piece - 1), level(piece));
            (relative_change(before, after).abs() > threshold).then_some(Change {
                index: starts[piece],
                before,
                after,
            })
        })
        .collect()
}

/// `after / before - 1`; infinite from 0 to anything else, 0 from 0 to 0.
fn relative_change(before: f64, after: f64) -> f64 {
    if before == 0.0 {
        if after == 0.0 {
            0.0
        } else {
            f64::INFINITY.copysign(after)
        }
    } else {
        after / before - 1.0
    }
}

/// Start indices of the pieces (the first is 0) of the segmentation of `y` that minimises the
/// sum over pieces of the absolute deviations from the piece's median, plus `penalty` per cut.
fn segment(y: &[f64], penalty: f64) -> Vec<usize> {
    let n = y.len();
    if n == 0 {
        return Vec::new();
    }
    // best[j]: cost of the best segmentation of y[..j]; start[j]: where its last piece starts.
    // best[i] is final once every piece ending at i has been tried, i.e. before piece i starts.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut start = vec![0usize; n + 1];
    best[0] = 0.0;
    for i in 0..n {
        let opened = best[i] + if i > 0 { penalty } else { 0.0 };
        let mut piece = RunningMedian::default();
        for j in i + 1..=n {
            piece.push(y[j - 1]);
            let cost = opened + piece.abs_deviation();
            // Strictly less: on a tie the earlier start, hence the longer last piece, stays.
            if cost < best[j] {
                best[j] = cost;
                start[j] = i;
            }
        }
    }
    let mut starts = Vec::new();
    let mut end = n;
    while end > 0 {
        end = start[end];
        starts.push(end);
    }
    starts.reverse();
    starts
}

/// An `f64` ordered by `total_cmp`, for the heaps of [`RunningMedian`].
#[derive(Clone, Copy, Debug)]
struct Ordered(f64);

impl PartialEq for Ordered {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ordered {}
impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The sum of absolute deviations from the median of a growing sample, in O(log n) a value:
/// the lower half in a max-heap, the upper half in a min-heap, each with its sum.
#[derive(Default)]
struct RunningMedian {
    lower: BinaryHeap<Ordered>,
    upper: BinaryHeap<Reverse<Ordered>>,
    lower_sum: f64,
    upper_sum: f64,
}

impl RunningMedian {
    fn push(&mut self, value: f64) {
        if self.lower.peek().is_none_or(|top| value <= top.0) {
            self.lower.push(Ordered(value));
            self.lower_sum += value;
        } else {
            self.upper.push(Reverse(Ordered(value)));
            self.upper_sum += value;
        }
        // Keep lower.len() == upper.len() or upper.len() + 1: the median is lower's top.
        if self.lower.len() > self.upper.len() + 1 {
            if let Some(moved) = self.lower.pop() {
                self.lower_sum -= moved.0;
                self.upper_sum += moved.0;
                self.upper.push(Reverse(moved));
            }
        } else if self.upper.len() > self.lower.len() {
            if let Some(Reverse(moved)) = self.upper.pop() {
                self.upper_sum -= moved.0;
                self.lower_sum += moved.0;
                self.lower.push(moved);
            }
        }
    }

    /// Sum of |value - median| (with an even count any point between the middle two gives the
    /// same sum, so lower's top serves).
    fn abs_deviation(&self) -> f64 {
        let Some(&Ordered(m)) = self.lower.peek() else {
            return 0.0;
        };
        (self.upper_sum - m * self.upper.len() as f64)
            + (m * self.lower.len() as f64 - self.lower_sum)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the history

/// Where a series lives.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    experiment: String,
    point: String,
    variant: String,
}

/// What one commit recorded for one experiment x point x variant.
#[derive(Clone, Debug, Default, PartialEq)]
struct Sample {
    instructions: Option<f64>,
    /// Machine kind -> median time per calibration.
    time_per_calibration: BTreeMap<String, f64>,
}

impl Sample {
    fn is_empty(&self) -> bool {
        self.instructions.is_none() && self.time_per_calibration.is_empty()
    }
}

/// Everything read, before analysis.
#[derive(Default)]
struct Collected {
    source: String,
    commits: Vec<CommitInfo>,
    /// Series -> commit index -> sample.
    samples: BTreeMap<SeriesKey, BTreeMap<usize, Sample>>,
    notes: Vec<String>,
}

impl Collected {
    /// The sample of series `key` at commit `index`, made empty when new.
    fn sample(&mut self, key: SeriesKey, index: usize) -> &mut Sample {
        self.samples
            .entry(key)
            .or_default()
            .entry(index)
            .or_default()
    }
}

/// Runs `git ARGS` in `dir`. The outer error: git could not be started; the inner: git ran and
/// failed (with its message).
fn git(dir: &Path, args: &[&str]) -> Result<std::result::Result<Vec<u8>, String>> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .context("cannot run git (is it installed and on PATH?)")?;
    if output.status.success() {
        return Ok(Ok(output.stdout));
    }
    let message = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Ok(Err(if message.is_empty() {
        format!("git {} exited with {}", args.join(" "), output.status)
    } else {
        message
    }))
}

/// Every committed version of the baseline `file` that this parbench reads, oldest first.
fn read_baseline_history(file: &Path) -> Result<Collected> {
    let shown = file.display();
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("--baseline {shown}: not the name of a file"))?;
    let folder = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let folder = folder
        .canonicalize()
        .with_context(|| format!("--baseline {shown}: no folder {}", folder.display()))?;
    let top = match git(&folder, &["rev-parse", "--show-toplevel"])? {
        Ok(out) => PathBuf::from(String::from_utf8_lossy(&out).trim()),
        Err(why) => bail!(
            "--baseline {shown} is not in a git repository ({why}); a baseline's history is read from git: pass a committed baseline, or stored runs with --runs DIR"
        ),
    };
    let top = top
        .canonicalize()
        .with_context(|| format!("cannot open the repository at {}", top.display()))?;
    let relative = folder.strip_prefix(&top).with_context(|| {
        format!(
            "--baseline {shown}: {} is not inside the repository at {}",
            folder.display(),
            top.display()
        )
    })?;
    let mut parts = Vec::new();
    for part in relative.iter().chain([std::ffi::OsStr::new(name)]) {
        let part = part
            .to_str()
            .ok_or_else(|| anyhow!("--baseline {shown}: the path is not valid UTF-8"))?;
        parts.push(part);
    }
    let in_repo = parts.join("/");

    // Literal pathspecs: a file name is never a glob. Signatures would add lines to the log.
    let log = match git(
        &top,
        &[
            "--literal-pathspecs",
            "-c",
            "log.showSignature=false",
            "log",
            "--no-color",
            "--reverse",
            "--format=%H%x09%ct%x09%s",
            "--",
            &in_repo,
        ],
    )? {
        Ok(out) => String::from_utf8_lossy(&out).into_owned(),
        Err(why) => bail!(
            "cannot read the history of {in_repo} in {}: {why}",
            top.display()
        ),
    };
    let entries: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
    if entries.is_empty() {
        let exists = if file.exists() {
            "it exists but"
        } else {
            "there is no such file, and it"
        };
        bail!(
            "--baseline {shown}: {exists} was never committed to the repository at {}, so it has no history (commit it, or read stored runs with --runs DIR)",
            top.display()
        );
    }

    let mut collected = Collected {
        source: shown.to_string(),
        ..Collected::default()
    };
    for entry in &entries {
        let mut fields = entry.splitn(3, '\t');
        let (Some(hash), Some(time)) = (fields.next(), fields.next()) else {
            continue;
        };
        let commit = CommitInfo {
            hash: hash.to_string(),
            date: time.parse().map(rfc3339_from_unix).unwrap_or_default(),
            subject: fields.next().unwrap_or_default().to_string(),
        };
        let short = commit.short_hash().to_string();
        let text = match git(&top, &["cat-file", "blob", &format!("{hash}:{in_repo}")])? {
            Ok(bytes) => String::from_utf8(bytes),
            Err(_) => {
                collected.notes.push(format!(
                    "{short}: {in_repo} is not in this commit (deleted or moved); skipped"
                ));
                continue;
            }
        };
        let Ok(text) = text else {
            collected
                .notes
                .push(format!("{short}: {in_repo} is not UTF-8 text; skipped"));
            continue;
        };
        match Baseline::parse(&text, Path::new(&format!("{short}:{in_repo}"))) {
            Ok(baseline) => {
                add_baseline(&mut collected.samples, collected.commits.len(), &baseline);
                collected.commits.push(commit);
            }
            Err(BaselineError::Version {
                found, expected, ..
            }) => collected.notes.push(format!(
                "{short}: baseline format version {found} (this parbench reads version {expected}); skipped"
            )),
            Err(err) => collected.notes.push(format!("{short}: skipped: {err}")),
        }
    }
    if collected.commits.is_empty() {
        bail!(
            "--baseline {shown}: none of the {} commit(s) of it holds a baseline this parbench reads:\n  {}",
            entries.len(),
            collected.notes.join("\n  ")
        );
    }
    if let Ok(Ok(status)) = git(
        &top,
        &[
            "--literal-pathspecs",
            "status",
            "--porcelain",
            "--",
            &in_repo,
        ],
    ) {
        if !status.is_empty() {
            collected.notes.push(format!(
                "{shown} has uncommitted changes: they are not part of the history"
            ));
        }
    }
    Ok(collected)
}

/// Adds the entries of one commit's baseline to the series.
fn add_baseline(
    samples: &mut BTreeMap<SeriesKey, BTreeMap<usize, Sample>>,
    commit: usize,
    baseline: &Baseline,
) {
    for (experiment, exp) in &baseline.experiments {
        for (point, variants) in &exp.points {
            for (variant, entry) in variants {
                let sample = Sample {
                    instructions: entry.instructions.map(|n| n as f64),
                    time_per_calibration: entry
                        .timings
                        .iter()
                        .filter_map(|(kind, t)| Some((kind.clone(), median(&t.normalized)?)))
                        .collect(),
                };
                if sample.is_empty() {
                    continue;
                }
                let key = SeriesKey {
                    experiment: experiment.clone(),
                    point: point.clone(),
                    variant: variant.clone(),
                };
                samples.entry(key).or_default().insert(commit, sample);
            }
        }
    }
}

/// The run directories under `root`: itself or any folder below it holding `meta.json` (a run's
/// own folders are not searched further). A folder holding results or an experiment copy but no
/// `meta.json` is an error: its commit, hence its place in the history, is unknown.
fn find_run_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        if dir.join(META_JSON).is_file() {
            found.push(dir);
            continue;
        }
        if let Some(what) = [RESULTS_PARQUET, EXPERIMENT_YAML]
            .into_iter()
            .find(|f| dir.join(f).exists())
        {
            bail!(
                "{} holds {what} but no {META_JSON}: the commit of that run is unknown (restore its {META_JSON}, or move it out of {})",
                dir.display(),
                root.display()
            );
        }
        if depth == MAX_RUN_DEPTH {
            continue;
        }
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot read {}", dir.display()))?
                .path();
            // Hidden folders are scratch space (callgrind's dumps), never runs.
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if path.is_dir() && !hidden {
                pending.push((path, depth + 1));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The stored runs under `root`, placed by the commit their `meta.json` records.
fn read_runs(root: &Path) -> Result<Collected> {
    if !root.is_dir() {
        bail!("--runs {}: no such folder", root.display());
    }
    let dirs = find_run_dirs(root)?;
    if dirs.is_empty() {
        bail!(
            "--runs {}: no run directory in it (a run directory holds {META_JSON}; `parbench gate count --out DIR` and `parbench run --out DIR` make them)",
            root.display()
        );
    }
    let mut collected = Collected {
        source: format!("the runs under {}", root.display()),
        ..Collected::default()
    };
    // Commit -> (when its first run started, its runs).
    let mut by_commit: BTreeMap<String, (String, Vec<StoredRun>)> = BTreeMap::new();
    for dir in &dirs {
        let mut run = match results::load_run(dir) {
            Ok(run) => run,
            Err(err) => {
                collected
                    .notes
                    .push(format!("{}: skipped: {err:#}", dir.display()));
                continue;
            }
        };
        // Times per calibration as `check` computes them: over the run's median calibration.
        crate::analysis::check::use_run_calibration(&mut run.rows);
        let Some(commit) = run
            .machine
            .git_commit
            .clone()
            .filter(|c| !c.trim().is_empty())
        else {
            collected.notes.push(format!(
                "{}: skipped: its {META_JSON} records no git commit (made outside a repository?)",
                dir.display()
            ));
            continue;
        };
        let (first, runs) = by_commit
            .entry(commit)
            .or_insert_with(|| (run.machine.timestamp.clone(), Vec::new()));
        // RFC 3339 UTC timestamps of one format order as strings do.
        if run.machine.timestamp < *first {
            first.clone_from(&run.machine.timestamp);
        }
        runs.push(run);
    }
    if by_commit.is_empty() {
        bail!(
            "--runs {}: none of its {} run(s) can be placed on the history:\n  {}",
            root.display(),
            dirs.len(),
            collected.notes.join("\n  ")
        );
    }
    let mut ordered: Vec<(String, String, Vec<StoredRun>)> = by_commit
        .into_iter()
        .map(|(hash, (first, runs))| (hash, first, runs))
        .collect();
    ordered.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));

    for (index, (hash, date, runs)) in ordered.into_iter().enumerate() {
        let subject = commit_subject(root, &hash);
        collected.commits.push(CommitInfo {
            hash,
            date,
            subject,
        });
        // Pooled over the commit's runs: instruction counts, and times per calibration by
        // machine kind.
        let mut counts: BTreeMap<SeriesKey, Vec<f64>> = BTreeMap::new();
        let mut times: BTreeMap<SeriesKey, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
        for run in &runs {
            // A counting run's times are valgrind's and mean nothing (as in `parbench check`).
            let counting = run
                .rows
                .iter()
                .any(|r| r.metrics.contains_key(INSTRUCTIONS_METRIC));
            let machine = if run.machine.fingerprint.is_empty() {
                UNKNOWN_MACHINE.to_string()
            } else {
                run.machine.fingerprint.clone()
            };
            for row in &run.rows {
                let key = SeriesKey {
                    experiment: run.config.name.clone(),
                    point: point_key(&row.params),
                    variant: row.variant.clone(),
                };
                if let Some(&count) = row.metrics.get(INSTRUCTIONS_METRIC) {
                    counts.entry(key.clone()).or_default().push(count);
                }
                let calibration = row.metrics.get(CALIBRATION_METRIC).copied();
                if let Some(c) = calibration.filter(|c| !counting && *c > 0.0) {
                    times
                        .entry(key)
                        .or_default()
                        .entry(machine.clone())
                        .or_default()
                        .push(row.wall_time_s / c);
                }
            }
        }
        for (key, values) in counts {
            collected.sample(key, index).instructions = median(&values);
        }
        for (key, by_machine) in times {
            let sample = collected.sample(key, index);
            for (machine, values) in by_machine {
                if let Some(m) = median(&values) {
                    sample.time_per_calibration.insert(machine, m);
                }
            }
        }
    }
    Ok(collected)
}

/// The subject of `commit` when the repository around `dir` knows it; empty otherwise (the
/// runs may come from another clone).
fn commit_subject(dir: &Path, commit: &str) -> String {
    match git(
        dir,
        &[
            "-c",
            "log.showSignature=false",
            "log",
            "-1",
            "--no-color",
            "--format=%s",
            commit,
            "--",
        ],
    ) {
        Ok(Ok(out)) => String::from_utf8_lossy(&out).trim().to_string(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Analysis and output

/// One quantity of one series, over the commits that recorded it.
struct Trace<'a> {
    key: &'a SeriesKey,
    quantity: Quantity,
    /// (commit index, value), commits in order.
    points: Vec<(usize, f64)>,
}

fn traces(samples: &BTreeMap<SeriesKey, BTreeMap<usize, Sample>>) -> Vec<Trace<'_>> {
    let mut out = Vec::new();
    for (key, by_commit) in samples {
        let mut by_quantity: BTreeMap<Quantity, Vec<(usize, f64)>> = BTreeMap::new();
        for (&commit, sample) in by_commit {
            if let Some(n) = sample.instructions {
                by_quantity
                    .entry(Quantity::Instructions)
                    .or_default()
                    .push((commit, n));
            }
            for (machine, &t) in &sample.time_per_calibration {
                by_quantity
                    .entry(Quantity::TimePerCalibration {
                        machine: machine.clone(),
                    })
                    .or_default()
                    .push((commit, t));
            }
        }
        for (quantity, mut points) in by_quantity {
            points.retain(|(_, v)| v.is_finite());
            if !points.is_empty() {
                out.push(Trace {
                    key,
                    quantity,
                    points,
                });
            }
        }
    }
    out
}

fn threshold_of(quantity: &Quantity, args: &HistoryArgs) -> f64 {
    match quantity {
        Quantity::Instructions => args.threshold,
        Quantity::TimePerCalibration { .. } => args.time_threshold,
    }
}

fn find_steps(traces: &[Trace], commits: &[CommitInfo], args: &HistoryArgs) -> Vec<Step> {
    let mut steps = Vec::new();
    for trace in traces {
        let values: Vec<f64> = trace.points.iter().map(|&(_, v)| v).collect();
        for change in detect_steps(&values, threshold_of(&trace.quantity, args)) {
            let commit_index = trace.points[change.index].0;
            let Some(commit) = commits.get(commit_index) else {
                continue;
            };
            steps.push(Step {
                experiment: trace.key.experiment.clone(),
                point: trace.key.point.clone(),
                variant: trace.key.variant.clone(),
                quantity: trace.quantity.clone(),
                commit_index,
                commit: commit.clone(),
                before: change.before,
                after: change.after,
                percent: 100.0 * relative_change(change.before, change.after),
            });
        }
    }
    steps
}

/// `history.csv`: one row per series, commit and machine kind (instructions do not depend on
/// the machine: they repeat on each machine kind's row, and a commit without times has one row
/// with an empty machine).
fn history_csv(
    commits: &[CommitInfo],
    samples: &BTreeMap<SeriesKey, BTreeMap<usize, Sample>>,
    steps: &[Step],
) -> String {
    let stepped: BTreeSet<(&str, &str, &str, &Quantity, usize)> = steps
        .iter()
        .map(|s| {
            (
                s.experiment.as_str(),
                s.point.as_str(),
                s.variant.as_str(),
                &s.quantity,
                s.commit_index,
            )
        })
        .collect();
    let mut out = String::from(
        "experiment,point,variant,commit,date,subject,machine,instructions,time_per_calibration,instructions_step,time_step\n",
    );
    for (key, by_commit) in samples {
        for (&index, sample) in by_commit {
            let Some(commit) = commits.get(index) else {
                continue;
            };
            let is_step = |q: &Quantity| {
                stepped.contains(&(
                    key.experiment.as_str(),
                    key.point.as_str(),
                    key.variant.as_str(),
                    q,
                    index,
                ))
            };
            let instructions = sample
                .instructions
                .map(|n| n.to_string())
                .unwrap_or_default();
            let instructions_step = is_step(&Quantity::Instructions);
            let mut machines: Vec<(&str, Option<f64>)> = sample
                .time_per_calibration
                .iter()
                .map(|(m, t)| (m.as_str(), Some(*t)))
                .collect();
            if machines.is_empty() {
                machines.push(("", None));
            }
            for (machine, time) in machines {
                let time_step = !machine.is_empty()
                    && is_step(&Quantity::TimePerCalibration {
                        machine: machine.to_string(),
                    });
                let cells = [
                    field(&key.experiment).into_owned(),
                    field(&key.point).into_owned(),
                    field(&key.variant).into_owned(),
                    commit.hash.clone(),
                    commit.date.clone(),
                    field(&commit.subject).into_owned(),
                    field(machine).into_owned(),
                    instructions.clone(),
                    time.map(|t| t.to_string()).unwrap_or_default(),
                    instructions_step.to_string(),
                    time_step.to_string(),
                ];
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
    }
    out
}

/// One SVG per experiment and kind of quantity (instructions; times, when there are any).
fn write_figures(
    commits: &[CommitInfo],
    traces: &[Trace],
    steps: &[Step],
    args: &HistoryArgs,
) -> Result<Vec<PathBuf>> {
    let mut by_experiment: BTreeMap<&str, Vec<&Trace>> = BTreeMap::new();
    for trace in traces {
        by_experiment
            .entry(&trace.key.experiment)
            .or_default()
            .push(trace);
    }
    let mut written = Vec::new();
    for (experiment, traces) in by_experiment {
        let points: BTreeSet<&str> = traces.iter().map(|t| t.key.point.as_str()).collect();
        let machines: BTreeSet<&Quantity> = traces
            .iter()
            .map(|t| &t.quantity)
            .filter(|q| **q != Quantity::Instructions)
            .collect();
        for timed in [false, true] {
            let lines: Vec<Line> = traces
                .iter()
                .filter(|t| (t.quantity != Quantity::Instructions) == timed)
                .map(|t| {
                    let mut label = t.key.variant.clone();
                    if points.len() > 1 {
                        label.push_str(&format!(" [{}]", t.key.point));
                    }
                    if let (Quantity::TimePerCalibration { machine }, true) =
                        (&t.quantity, machines.len() > 1)
                    {
                        label.push_str(&format!(" on {machine}"));
                    }
                    let steps = steps
                        .iter()
                        .filter(|s| {
                            s.experiment == t.key.experiment
                                && s.point == t.key.point
                                && s.variant == t.key.variant
                                && s.quantity == t.quantity
                        })
                        .map(|s| s.commit_index)
                        .collect();
                    Line {
                        label,
                        points: t.points.clone(),
                        steps,
                    }
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let (what, y_label, suffix, threshold) = if timed {
                (
                    "time per calibration",
                    "median time per calibration",
                    "time",
                    args.time_threshold,
                )
            } else {
                (
                    "instructions",
                    "instructions per run (callgrind)",
                    "instructions",
                    args.threshold,
                )
            };
            let figure = Figure {
                title: format!("{experiment}: {what} by commit"),
                y_label,
                commits,
                lines,
                step_label: format!("step (over {})", fmt_threshold(threshold)),
            };
            let svg = render_svg(&figure)
                .with_context(|| format!("cannot draw the {what} of `{experiment}`"))?;
            let path = args
                .out
                .join(format!("{}-{suffix}.svg", file_stem(experiment)));
            results::write_atomic(&path, svg.as_bytes())?;
            written.push(path);
        }
    }
    Ok(written)
}

/// `name` as part of a file name: anything but letters, digits, `-`, `_` and `.` becomes `_`.
fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "unnamed".to_string()
    } else {
        stem
    }
}

/// A value with 3 significant digits and an SI suffix: `41.7M`, `1.3k`, `0.0123`.
fn fmt_short(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let (scaled, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(unit, _)| x.abs() >= *unit)
        .map_or((x, ""), |(unit, suffix)| (x / unit, suffix));
    let magnitude = scaled.abs();
    let decimals = if magnitude == 0.0 {
        0
    } else {
        (2 - magnitude.log10().floor() as i32).clamp(0, 9) as usize
    };
    let text = format!("{scaled:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}{suffix}")
}

/// A percentage with its sign: `+32%`, `-2.4%`; "from 0" when infinite.
fn fmt_percent(p: f64) -> String {
    if !p.is_finite() {
        return "from 0".to_string();
    }
    if p.abs() >= 10.0 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    }
}

/// A threshold (a fraction) as a percentage without sign: `2%`.
fn fmt_threshold(fraction: f64) -> String {
    format!("{}%", fmt_short(100.0 * fraction))
}

// ---------------------------------------------------------------------------------------------
// Figures

const WIDTH: u32 = 1024;
const HEIGHT: u32 = 640;
const FONT: &str = "sans-serif";
/// Commit labels on the x axis, at most: short hashes further apart overlap.
const MAX_COMMIT_LABELS: usize = 14;
/// A line with more commits than this is drawn without markers.
const MAX_MARKERS: usize = 80;
/// Beyond this ratio of largest to smallest value the y axis is logarithmic (a dense variant
/// next to a sparse one would otherwise flatten the latter).
const LOG_SCALE_RATIO: f64 = 30.0;
/// Half the width, in commits, of the shaded column behind a step.
const STEP_BAND: f64 = 0.12;
/// Steps are black: no line of the palette is.
const STEP_COLOR: RGBColor = BLACK;
/// Legend rows: height and font size in pixels, and the approximate width of one character.
const LEGEND_ROW: i32 = 20;
const LEGEND_FONT: u32 = 14;
const LEGEND_CHAR_WIDTH: i32 = 8;

/// One figure: a line per series over the commit axis.
struct Figure<'a> {
    title: String,
    y_label: &'a str,
    commits: &'a [CommitInfo],
    lines: Vec<Line>,
    step_label: String,
}

struct Line {
    label: String,
    /// (commit index, value).
    points: Vec<(usize, f64)>,
    /// Commit indices where the line steps.
    steps: Vec<usize>,
}

fn render_svg(figure: &Figure) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        render(&root, figure)?;
        root.present()?;
    }
    Ok(svg)
}

/// The title over the whole figure, the chart, and the legend in a column at its right, where
/// it hides no line however many variants there are.
fn render<DB>(root: &DrawingArea<DB, Shift>, figure: &Figure) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let body = root.titled(&figure.title, (FONT, 24))?;
    let longest = figure
        .lines
        .iter()
        .map(|l| l.label.chars().count())
        .chain([figure.step_label.chars().count()])
        .max()
        .unwrap_or(0);
    let legend_width = (48 + LEGEND_CHAR_WIDTH * longest as i32).clamp(140, WIDTH as i32 / 2);
    let (plot, legend) = body.split_horizontally(WIDTH as i32 - legend_width);

    let x_spec = CommitAxis {
        commits: figure.commits.len().max(1),
    };
    let (lo, hi) = figure
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|&(_, v)| v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > 0.0 && hi / lo > LOG_SCALE_RATIO {
        let pad = (hi / lo).powf(0.05);
        let (lo, hi) = (lo / pad, hi * pad);
        let y_spec = (lo..hi).log_scale().with_key_points(log_ticks(lo, hi));
        draw_chart(&plot, figure, x_spec, y_spec, (lo, hi))?;
    } else {
        let (lo, hi) = padded(lo, hi);
        draw_chart(&plot, figure, x_spec, lo..hi, (lo, hi))?;
    }
    draw_legend(&legend, figure)
}

/// The x axis: commit i at x = i, half a commit of margin on either side, a label at every
/// commit or, with many, at evenly spaced ones (plotters' own ticks on an f64 axis fall between
/// commits).
struct CommitAxis {
    commits: usize,
}

impl Ranged for CommitAxis {
    // The labels come from the chart's formatter (short hashes); this only satisfies the mesh.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let fraction = (value + 0.5) / self.commits as f64;
        limit.0 + (fraction * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light grid lines between commits would mean nothing.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        let labels = hint.max_num_points().clamp(1, MAX_COMMIT_LABELS);
        let every = self.commits.div_ceil(labels).max(1);
        (0..self.commits).step_by(every).map(|i| i as f64).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.commits as f64 - 0.5
    }
}

/// A linear axis around [lo, hi], not from zero: a change of a few percent must show.
fn padded(lo: f64, hi: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    let span = hi - lo;
    if span <= 1e-9 * hi.abs().max(lo.abs()) {
        let half = if hi == 0.0 { 1.0 } else { 0.05 * hi.abs() };
        return (lo - half, hi + half);
    }
    (lo - 0.08 * span, hi + 0.08 * span)
}

/// Ticks m x 10^k inside [lo, hi] (0 < lo < hi): m in {1, 2, 5}, or {1, 1.5, 2, 3, 5, 7} within
/// about a decade (plotters' own log ticks leave most decades unlabelled).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mantissas: &[f64] = if hi / lo <= 15.0 {
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (first..=last)
        .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|t| (lo..=hi).contains(t))
        .collect()
}

/// A marker of line `index`'s shape (its colour repeats every 10 lines, its shape every 4), on
/// the chart or in the legend.
fn draw_marker<DB, CT>(
    area: &DrawingArea<DB, CT>,
    index: usize,
    at: CT::From,
    color: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    CT: CoordTranslate,
    CT::From: Clone,
{
    let style = color.filled();
    match index % 4 {
        0 => area.draw(&Circle::new(at, 4, style)),
        1 => area.draw(&TriangleMarker::new(at, 5, style)),
        2 => area.draw(&(EmptyElement::at(at) + Rectangle::new([(-3, -3), (3, 3)], style))),
        _ => area.draw(&Cross::new(at, 4, color.stroke_width(2))),
    }
}

fn draw_chart<DB, XS, YS>(
    area: &DrawingArea<DB, Shift>,
    figure: &Figure,
    x_spec: XS,
    y_spec: YS,
    (y_lo, y_hi): (f64, f64),
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    XS: AsRangedCoord<Value = f64>,
    YS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(56)
        .y_label_area_size(84)
        .build_cartesian_2d(x_spec, y_spec)?;
    let commits = figure.commits;
    let x_formatter = |v: &f64| {
        let index = v.round();
        if (v - index).abs() > 1e-6 || index < 0.0 {
            return String::new();
        }
        commits
            .get(index as usize)
            .map(|c| c.short_hash().to_string())
            .unwrap_or_default()
    };
    let y_formatter = |v: &f64| fmt_short(*v);
    chart
        .configure_mesh()
        .x_labels(MAX_COMMIT_LABELS)
        .x_desc("commit (oldest first)")
        .y_desc(figure.y_label)
        .axis_desc_style((FONT, 18))
        .label_style((FONT, 13))
        .x_label_formatter(&x_formatter)
        .y_label_formatter(&y_formatter)
        .light_line_style(BLACK.mix(0.04))
        .draw()?;

    // The step columns first, so that the lines are drawn over them.
    let step_commits: BTreeSet<usize> = figure
        .lines
        .iter()
        .flat_map(|l| l.steps.iter().copied())
        .collect();
    chart.draw_series(step_commits.iter().map(|&c| {
        let x = c as f64;
        Rectangle::new(
            [(x - STEP_BAND, y_lo), (x + STEP_BAND, y_hi)],
            STEP_COLOR.mix(0.07).filled(),
        )
    }))?;
    for (index, line) in figure.lines.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        let coords: Vec<(f64, f64)> = line.points.iter().map(|&(c, v)| (c as f64, v)).collect();
        chart.draw_series(LineSeries::new(
            coords.iter().copied(),
            color.stroke_width(2),
        ))?;
        if coords.len() <= MAX_MARKERS {
            for &c in &coords {
                draw_marker(chart.plotting_area(), index, c, color)?;
            }
        }
        chart.draw_series(
            line.points
                .iter()
                .filter(|(c, _)| line.steps.contains(c))
                .map(|&(c, v)| Circle::new((c as f64, v), 8, STEP_COLOR.stroke_width(2))),
        )?;
    }
    Ok(())
}

/// One row per line (its colour, marker and label), then the step marker, from the top; rows
/// that do not fit are counted in a last row.
fn draw_legend<DB>(area: &DrawingArea<DB, Shift>, figure: &Figure) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
{
    let text =
        TextStyle::from((FONT, LEGEND_FONT).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let (_, height) = area.dim_in_pixel();
    let rows = ((height as i32 - 2 * LEGEND_ROW) / LEGEND_ROW).max(2) as usize;
    let has_steps = figure.lines.iter().any(|l| !l.steps.is_empty());
    let shown = if figure.lines.len() + usize::from(has_steps) > rows {
        rows - 1
    } else {
        figure.lines.len()
    };
    let row_y = |row: usize| LEGEND_ROW + row as i32 * LEGEND_ROW;
    for (index, line) in figure.lines.iter().take(shown).enumerate() {
        let (y, color) = (row_y(index), PALETTE[index % PALETTE.len()]);
        area.draw(&PathElement::new(
            vec![(4, y), (32, y)],
            color.stroke_width(2),
        ))?;
        draw_marker(area, index, (18, y), color)?;
        area.draw(&Text::new(line.label.clone(), (40, y), text.clone()))?;
    }
    let mut row = shown;
    if shown < figure.lines.len() {
        let more = format!("... {} more (see the CSV)", figure.lines.len() - shown);
        area.draw(&Text::new(more, (40, row_y(row)), text.clone()))?;
        row += 1;
    }
    if has_steps && row < rows + 1 {
        let y = row_y(row);
        area.draw(&Circle::new((18, y), 7, STEP_COLOR.stroke_width(2)))?;
        area.draw(&Text::new(figure.step_label.clone(), (40, y), text))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::check::{BaselineEntry, ExperimentBaseline, Timing};
    use crate::family::{Params, ResultRow, Value};
    use clap::Parser;

    /// `values[i]` of a flat series at 100 with deterministic noise in [-amplitude, amplitude]
    /// (relative), from a fixed linear congruential generator.
    fn noisy(n: usize, amplitude: f64) -> Vec<f64> {
        let mut state: u64 = 12345;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
                100.0 * (1.0 + amplitude * (2.0 * unit - 1.0))
            })
            .collect()
    }

    #[test]
    fn a_flat_series_has_no_step() {
        assert!(detect_steps(&[4.2e7; 12], 0.02).is_empty());
        assert!(detect_steps(&[], 0.02).is_empty());
        assert!(detect_steps(&[1.0], 0.02).is_empty());
        assert!(detect_steps(&[0.0; 5], 0.02).is_empty());
    }

    #[test]
    fn one_jump_is_one_step_at_its_index() {
        let mut series = vec![100.0; 6];
        series.extend([130.0; 4]);
        assert_eq!(
            detect_steps(&series, 0.02),
            [Change {
                index: 6,
                before: 100.0,
                after: 130.0
            }]
        );
        // At the newest commit alone: what a history is mostly read for.
        let last = [100.0, 100.0, 100.0, 103.0];
        assert_eq!(detect_steps(&last, 0.02).len(), 1);
        assert_eq!(detect_steps(&last, 0.02)[0].index, 3);
        // Under the threshold: no step.
        assert!(detect_steps(&[100.0, 100.0, 100.0, 101.5], 0.02).is_empty());
    }

    #[test]
    fn noise_within_the_threshold_is_no_step() {
        let series = noisy(60, 0.003);
        assert!(series.iter().any(|v| (v - 100.0).abs() > 0.2));
        assert!(detect_steps(&series, 0.02).is_empty());
    }

    #[test]
    fn two_jumps_are_two_steps() {
        let mut series = vec![100.0; 5];
        series.extend([130.0; 5]);
        series.extend([90.0; 5]);
        let steps = detect_steps(&series, 0.02);
        let indices: Vec<usize> = steps.iter().map(|s| s.index).collect();
        assert_eq!(indices, [5, 10]);
        assert_eq!((steps[1].before, steps[1].after), (130.0, 90.0));
        // The same with noise on top.
        let noise = noisy(15, 0.003);
        let noisy_series: Vec<f64> = series
            .iter()
            .zip(&noise)
            .map(|(v, n)| v * n / 100.0)
            .collect();
        let indices: Vec<usize> = detect_steps(&noisy_series, 0.02)
            .iter()
            .map(|s| s.index)
            .collect();
        assert_eq!(indices, [5, 10]);
    }

    #[test]
    fn the_running_median_gives_the_sum_of_absolute_deviations() {
        let values = [5.0, 1.0, 9.0, 3.0, 3.0, 12.0, -4.0];
        let mut running = RunningMedian::default();
        for (k, v) in values.iter().enumerate() {
            running.push(*v);
            let m = median(&values[..=k]).unwrap();
            let want: f64 = values[..=k].iter().map(|x| (x - m).abs()).sum();
            assert!((running.abs_deviation() - want).abs() < 1e-12, "after {k}");
        }
    }

    #[test]
    fn values_and_percentages_are_short() {
        assert_eq!(fmt_short(41_700_000.0), "41.7M");
        assert_eq!(fmt_short(55_123_456.0), "55.1M");
        assert_eq!(fmt_short(1300.0), "1.3k");
        assert_eq!(fmt_short(12.5), "12.5");
        assert_eq!(fmt_short(0.01234), "0.0123");
        assert_eq!(fmt_percent(32.1), "+32%");
        assert_eq!(fmt_percent(-2.44), "-2.4%");
        assert_eq!(fmt_percent(f64::INFINITY), "from 0");
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        history: HistoryArgs,
    }

    #[test]
    fn the_arguments_have_defaults_and_exclude_each_other() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let args = Cli::try_parse_from(["history"]).unwrap().history;
        assert_eq!(args.baseline, Path::new(DEFAULT_BASELINE));
        assert_eq!(args.out, Path::new(DEFAULT_OUT));
        assert_eq!(args.threshold, DEFAULT_THRESHOLD);
        assert_eq!(args.runs, None);
        let args = Cli::try_parse_from(["history", "--runs", "r", "--experiment", "e"])
            .unwrap()
            .history;
        assert_eq!(args.runs.as_deref(), Some(Path::new("r")));
        assert!(Cli::try_parse_from(["history", "--runs", "r", "--baseline", "b"]).is_err());
    }

    const KIND: &str = "cpu | avx2 | 2 cpus";
    const POINT: &str = "docs=100,threads=1";

    fn args(baseline: PathBuf, out: PathBuf) -> HistoryArgs {
        HistoryArgs {
            baseline,
            runs: None,
            out,
            experiment: None,
            threshold: DEFAULT_THRESHOLD,
            time_threshold: DEFAULT_TIME_THRESHOLD,
        }
    }

    /// Runs git in `dir` with an identity and no signing, whatever the machine's configuration.
    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=parbench test",
                "-c",
                "user.email=test@example.com",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A baseline of one experiment, one point, variants `fused` and `sparse` with these
    /// instruction counts, and constant times on one machine kind.
    fn baseline(version: u32, fused: u64, sparse: u64) -> Baseline {
        let entry = |instructions: u64, time: f64| BaselineEntry {
            instructions: Some(instructions),
            counted_path: Some("sinkhorn avx2".to_string()),
            timings: BTreeMap::from([(
                KIND.to_string(),
                Timing {
                    normalized: vec![time, time * 1.002, time * 0.999],
                    median_wall_time_s: 0.05,
                    relative: Vec::new(),
                },
            )]),
            ..BaselineEntry::default()
        };
        Baseline {
            version,
            experiments: BTreeMap::from([(
                "gate_sinkhorn".to_string(),
                ExperimentBaseline {
                    reference_variant: "sparse".to_string(),
                    optional: None,
                    points: BTreeMap::from([(
                        POINT.to_string(),
                        BTreeMap::from([
                            ("fused".to_string(), entry(fused, 12.0)),
                            ("sparse".to_string(), entry(sparse, 20.0)),
                        ]),
                    )]),
                    claims: BTreeMap::new(),
                },
            )]),
            ..Baseline::default()
        }
    }

    fn commit_baseline(repo: &Path, file: &Path, baseline: &Baseline, subject: &str) -> String {
        let json = serde_json::to_string_pretty(baseline).unwrap();
        std::fs::write(file, json + "\n").unwrap();
        git_in(repo, &["add", "."]);
        git_in(repo, &["commit", "-q", "-m", subject]);
        git_in(repo, &["rev-parse", "HEAD"])
    }

    #[test]
    fn a_baseline_history_shows_the_commit_that_changed_a_count() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let folder = repo.join("results").join("baselines");
        std::fs::create_dir_all(&folder).unwrap();
        git_in(&repo, &["init", "-q"]);
        let file = folder.join("gate.json");
        // An old format first: skipped, with a note. Then `sparse` moves by 0.2% (under the
        // threshold) and `fused` by 30% in the last commit.
        commit_baseline(&repo, &file, &baseline(1, 900, 5000), "old format");
        commit_baseline(&repo, &file, &baseline(2, 1000, 5000), "first");
        commit_baseline(&repo, &file, &baseline(2, 1000, 5010), "second");
        // Version 2 and the current format are both read.
        let third = commit_baseline(&repo, &file, &baseline(3, 1300, 5010), "third");

        let out = tmp.path().join("history");
        let report = run(&args(file.clone(), out.clone())).unwrap();
        let text = report.to_string();
        assert_eq!(report.commits.len(), 3, "{text}");
        assert_eq!(report.series, 4, "{text}");
        assert_eq!(report.steps.len(), 1, "{text}");
        let step = &report.steps[0];
        assert_eq!(
            (step.variant.as_str(), &step.quantity, step.commit_index),
            ("fused", &Quantity::Instructions, 2)
        );
        assert_eq!(step.commit.hash, third);
        assert_eq!((step.before, step.after), (1000.0, 1300.0));
        assert!((step.percent - 30.0).abs() < 1e-9);
        assert!(
            text.contains(&format!(
                "gate_sinkhorn `fused` instructions: 1k -> 1.3k (+30%) at {} (third)",
                &third[..7]
            )),
            "{text}"
        );
        assert!(
            report.notes.iter().any(|n| n.contains("version 1")),
            "{text}"
        );

        for name in [
            HISTORY_CSV,
            "gate_sinkhorn-instructions.svg",
            "gate_sinkhorn-time.svg",
        ] {
            assert!(out.join(name).is_file(), "{name} missing: {text}");
        }
        assert_eq!(report.files.len(), 3);
        let svg = std::fs::read_to_string(out.join("gate_sinkhorn-instructions.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains(&third[..7]));
        let csv = std::fs::read_to_string(out.join(HISTORY_CSV)).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 3, "{csv}");
        let stepped: Vec<&&str> = lines
            .iter()
            .filter(|l| l.ends_with(",true,false"))
            .collect();
        assert_eq!(stepped.len(), 1, "{csv}");
        assert!(
            stepped[0].starts_with(&format!("gate_sinkhorn,\"{POINT}\",fused,{third},")),
            "{csv}"
        );
        assert!(stepped[0].contains(",1300,"), "{csv}");

        // One experiment only, and a name that is not there.
        let mut only = args(file.clone(), out.clone());
        only.experiment = Some("gate_sinkhorn".to_string());
        assert_eq!(run(&only).unwrap().steps.len(), 1);
        only.experiment = Some("gate_nope".to_string());
        let err = format!("{:#}", run(&only).unwrap_err());
        assert!(
            err.contains("gate_nope") && err.contains("gate_sinkhorn"),
            "{err}"
        );
    }

    #[test]
    fn a_baseline_outside_git_or_never_committed_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("gate.json");
        std::fs::write(&file, "{}").unwrap();
        let out = tmp.path().join("out");
        // Only meaningful where the temporary folder is itself outside any repository.
        if git(tmp.path(), &["rev-parse", "--show-toplevel"])
            .unwrap()
            .is_err()
        {
            let err = format!("{:#}", run(&args(file.clone(), out.clone())).unwrap_err());
            assert!(err.contains("not in a git repository"), "{err}");
        }

        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git_in(&repo, &["init", "-q"]);
        std::fs::write(repo.join("README"), "x").unwrap();
        git_in(&repo, &["add", "README"]);
        git_in(&repo, &["commit", "-q", "-m", "readme"]);
        std::fs::write(repo.join("gate.json"), "{}").unwrap();
        let err = format!(
            "{:#}",
            run(&args(repo.join("gate.json"), out.clone())).unwrap_err()
        );
        assert!(err.contains("never committed"), "{err}");
        let err = format!(
            "{:#}",
            run(&args(repo.join("missing").join("gate.json"), out.clone())).unwrap_err()
        );
        assert!(err.contains("no folder"), "{err}");

        let mut bad = args(repo.join("gate.json"), out);
        bad.threshold = -1.0;
        let err = format!("{:#}", run(&bad).unwrap_err());
        assert!(err.contains("--threshold"), "{err}");
    }

    /// A stored run of a mock experiment at `commit`: 3 repetitions of `slow` and `fast`, either
    /// counted (instructions) or timed (with a calibration of 0.01 s).
    fn write_run(
        dir: &Path,
        commit: Option<&str>,
        started: &str,
        counts: Option<(f64, f64)>,
        slow_s: f64,
    ) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join(EXPERIMENT_YAML),
            "name: gate_mock\ndescription: d\npaper: none\nreproduces: none\nfamily: mock\n\
             data: { source: synthetic, seed: 1 }\nvariants: [slow, fast]\n\
             params: { size: 10, threads: 1 }\nrepetitions: 3\n",
        )
        .unwrap();
        let meta = serde_json::json!({
            "quick": false,
            "machine": { "git_commit": commit, "timestamp": started, "fingerprint": KIND },
        });
        std::fs::write(dir.join(META_JSON), meta.to_string()).unwrap();
        let params = Params::from([
            ("size".to_string(), Value::Int(10)),
            ("threads".to_string(), Value::Int(1)),
        ]);
        let mut rows = Vec::new();
        for (variant, time, count) in [
            ("slow", slow_s, counts.map(|c| c.0)),
            ("fast", 0.1, counts.map(|c| c.1)),
        ] {
            for (repetition, noise) in [1.0, 1.01, 0.99].into_iter().enumerate() {
                let metrics = match count {
                    Some(n) => BTreeMap::from([(INSTRUCTIONS_METRIC.to_string(), n)]),
                    None => BTreeMap::from([(CALIBRATION_METRIC.to_string(), 0.01)]),
                };
                rows.push(ResultRow {
                    experiment: "gate_mock".to_string(),
                    point: 0,
                    params: params.clone(),
                    variant: variant.to_string(),
                    repetition,
                    wall_time_s: time * noise,
                    phases_s: BTreeMap::new(),
                    metrics,
                    equiv_rel_error: None,
                });
            }
        }
        results::write_rows(dir, &rows).unwrap();
    }

    #[test]
    fn stored_runs_are_placed_by_commit_and_ordered_by_time() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("runs");
        // Hashes out of alphabetical order: the order is the runs' start times.
        let commits = [
            ("c0ffee1", "2024-01-01"),
            ("a11ce22", "2024-01-02"),
            ("0bad333", "2024-01-03"),
        ];
        for (k, (commit, day)) in commits.iter().enumerate() {
            let fast = if k == 2 { 1500.0 } else { 1000.0 };
            let slow_s = if k == 2 { 2.0 } else { 1.0 };
            write_run(
                &root.join(commit).join("count"),
                Some(commit),
                &format!("{day}T10:00:00Z"),
                Some((9000.0, fast)),
                1.0,
            );
            write_run(
                &root.join(commit).join("time"),
                Some(commit),
                &format!("{day}T11:00:00Z"),
                None,
                slow_s,
            );
        }
        write_run(&root.join("stray"), None, "2024-01-04T00:00:00Z", None, 1.0);

        let out = tmp.path().join("history");
        let mut history = args(PathBuf::from(DEFAULT_BASELINE), out.clone());
        history.runs = Some(root.clone());
        let report = run(&history).unwrap();
        let text = report.to_string();
        let order: Vec<&str> = report.commits.iter().map(|c| c.hash.as_str()).collect();
        assert_eq!(order, ["c0ffee1", "a11ce22", "0bad333"], "{text}");
        assert!(
            report.notes.iter().any(|n| n.contains("no git commit")),
            "{text}"
        );
        let mut found: Vec<(String, Quantity, usize)> = report
            .steps
            .iter()
            .map(|s| (s.variant.clone(), s.quantity.clone(), s.commit_index))
            .collect();
        found.sort();
        let time = Quantity::TimePerCalibration {
            machine: KIND.to_string(),
        };
        assert_eq!(
            found,
            [
                ("fast".to_string(), Quantity::Instructions, 2),
                ("slow".to_string(), time, 2),
            ],
            "{text}"
        );
        let slow = report.steps.iter().find(|s| s.variant == "slow").unwrap();
        assert!((slow.before - 100.0).abs() < 1e-9 && (slow.after - 200.0).abs() < 1e-9);
        assert!(out.join("gate_mock-instructions.svg").is_file());
        assert!(out.join("gate_mock-time.svg").is_file());
    }

    #[test]
    fn a_runs_folder_without_runs_or_with_a_run_lacking_meta_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("runs");
        std::fs::create_dir_all(root.join("empty")).unwrap();
        let mut history = args(PathBuf::from(DEFAULT_BASELINE), tmp.path().join("out"));
        history.runs = Some(root.clone());
        let err = format!("{:#}", run(&history).unwrap_err());
        assert!(err.contains("no run directory"), "{err}");

        write_run(
            &root.join("r1"),
            Some("abc"),
            "2024-01-01T00:00:00Z",
            None,
            1.0,
        );
        std::fs::remove_file(root.join("r1").join(META_JSON)).unwrap();
        let err = format!("{:#}", run(&history).unwrap_err());
        assert!(err.contains("r1") && err.contains("no meta.json"), "{err}");

        history.runs = Some(tmp.path().join("nowhere"));
        let err = format!("{:#}", run(&history).unwrap_err());
        assert!(err.contains("no such folder"), "{err}");
    }
}
