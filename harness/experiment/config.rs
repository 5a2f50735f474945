//! Experiment files: the serde schema. Loading with file/line errors and the `quick` merge live
//! in `load`; the checked, expanded form is [`crate::experiment::plan::Plan`]. A file is parsed once into a
//! [`Document`] (YAML tree with positions, see `config/yaml.rs`), which both deserializes into an
//! [`ExperimentConfig`] and tells where any key or value was written.

use crate::family::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One experiment file, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Short identifier, used for the run directory (`fig8_dense_vs_fused_par`).
    pub name: String,
    /// One-line description shown by `parbench list` and in the summary.
    #[serde(default)]
    pub description: String,
    /// The paper reproduced (file under ../shared/papers or a citation).
    pub paper: String,
    /// The figure or table of the paper this reproduces ("Fig. 8", "Table I").
    pub reproduces: String,
    /// Algorithm family (`sinkhorn`).
    pub family: String,
    pub data: DataConfig,
    /// Variants to run at every point: the family's, its shipped peers (`peers/peers.yaml`)
    /// and the peers declared under `peers:`.
    pub variants: Vec<String>,
    /// Programs outside parbench run as variants through the peer protocol (`docs/peers.md`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peers: BTreeMap<String, PeerDecl>,
    /// Fixed parameters of every point.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Grid: every combination of these lists is a point (`threads` may appear here).
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<Value>>,
    #[serde(default = "default_repetitions")]
    pub repetitions: usize,
    /// Run the points in rounds (round `k`: repetition `k` of every variant at every point)
    /// instead of one after another, so claims that compare points see a drift of the machine
    /// fall on them alike. Every point's input is prepared at once and held; points must run
    /// in this process (no `backend: mpi`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleave_points: bool,
    #[serde(default)]
    pub warmup: usize,
    /// Overrides applied by `--quick` (CI-sized runs).
    #[serde(default)]
    pub quick: Option<QuickConfig>,
    #[serde(default)]
    pub equivalence: Option<EquivalenceConfig>,
    #[serde(default)]
    pub figures: Vec<FigureConfig>,
    #[serde(default)]
    pub claims: Vec<ClaimConfig>,
    /// How the points whose `backend` is `mpi` start their processes; required when any is.
    #[serde(default)]
    pub launcher: Option<LauncherConfig>,
    /// What the regression gate (`parbench check --baseline`) may leave out of this
    /// experiment, and why.
    #[serde(default, skip_serializing_if = "GateConfig::is_empty")]
    pub gate: GateConfig,
}

/// A peer an experiment declares: a program that speaks the peer protocol (`docs/peers.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerDecl {
    /// The program and its first arguments (the request's path is appended); a relative path
    /// with a `/` is taken from the experiment file's folder, a bare name from PATH.
    pub command: Vec<String>,
    /// What it is, for the report.
    #[serde(default)]
    pub about: String,
    /// Seconds a run may take before it is stopped (default 600).
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

/// Exemptions from the regression gate, each with its reason (printed by the check). Without
/// one, an entry of the baseline that the run lacks, or that ran too briefly to time, fails
/// the check.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig {
    /// Why this experiment's times are not gated (its runs are too short to time on a shared
    /// machine, say); its exact counters and instruction counts still are.
    #[serde(default)]
    pub untimed: Option<String>,
    /// Why a run may lack this experiment (it needs a dataset or an MPI launcher that a
    /// machine may not have).
    #[serde(default)]
    pub optional: Option<String>,
}

impl GateConfig {
    /// No exemption.
    pub fn is_empty(&self) -> bool {
        self.untimed.is_none() && self.optional.is_none()
    }
}

/// The MPI launcher: for every variant of an MPI point the harness runs
/// `command args... -np P parbench launched ...` (P from the family: the ranks, or LDA's
/// workers + 1) and reads the measurements rank 0 prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LauncherConfig {
    /// The program that starts an MPI job (`mpirun`, `srun`, a wrapper script).
    #[serde(default = "default_launcher_command")]
    pub command: String,
    /// Arguments given before `-np P` (`--oversubscribe` to run more ranks than cores).
    #[serde(default)]
    pub args: Vec<String>,
}

fn default_launcher_command() -> String {
    "mpirun".to_string()
}

fn default_repetitions() -> usize {
    3
}

/// Where a point's input comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// `synthetic` (the family's seeded generator, shaped by the point's parameters) or
    /// `dataset` (a file of the data dir).
    pub source: DataSource,
    /// File name inside the data dir, for `source: dataset`.
    #[serde(default)]
    pub file: Option<String>,
    /// Seed of every random choice in data generation.
    #[serde(default)]
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSource {
    Synthetic,
    Dataset,
}

/// What `--quick` replaces: parameters and sweep lists key by key, the rest whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickConfig {
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<Value>>,
    #[serde(default)]
    pub repetitions: Option<usize>,
    #[serde(default)]
    pub warmup: Option<usize>,
    #[serde(default)]
    pub variants: Option<Vec<String>>,
    /// Claims sized for the quick shapes, checked instead of `claims` on a quick run: where a
    /// paper's margin only holds at full size (quality after full training, say), the full run
    /// asserts it and the quick run a looser statement of the same result.
    #[serde(default)]
    pub claims: Option<Vec<ClaimConfig>>,
}

/// Variants are compared with the reference variant's output at the same point: the runner
/// records each row's `equiv_rel_error`, and `kind: equivalence` claims hold it to `rel_tol`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EquivalenceConfig {
    pub reference: String,
    /// The experiment's one equivalence tolerance: the largest allowed relative difference,
    /// max_i |a_i - b_i| / max_i |b_i| (normwise), checked by `kind: equivalence` claims.
    pub rel_tol: f64,
}

/// A figure filter's value for one key: a value, or a list of values a row's may be any of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FilterValue {
    AnyOf(Vec<Value>),
    One(Value),
}

impl FilterValue {
    /// The values a row may have.
    pub fn values(&self) -> &[Value] {
        match self {
            FilterValue::AnyOf(values) => values,
            FilterValue::One(value) => std::slice::from_ref(value),
        }
    }

    /// `Some(true)` for `max`, `Some(false)` for `min` (a single value, not in a list).
    pub fn extreme(&self) -> Option<bool> {
        match self {
            FilterValue::One(value) => extreme_word(value),
            FilterValue::AnyOf(_) => None,
        }
    }

    /// What is wrong with a list, and how to fix it: an empty one keeps no row, and `max` or
    /// `min` mean something only alone.
    pub fn list_problem(&self) -> Option<(&'static str, &'static str)> {
        let FilterValue::AnyOf(values) = self else {
            return None;
        };
        if values.is_empty() {
            Some((
                "an empty list, which keeps no row",
                "list at least one value, or leave the key out",
            ))
        } else if values.iter().any(|v| extreme_word(v).is_some()) {
            Some((
                "`max` or `min` inside a list",
                "write `max` or `min` alone, not in a list",
            ))
        } else {
            None
        }
    }
}

/// `Some(true)` for the word `max`, `Some(false)` for `min`.
fn extreme_word(value: &Value) -> Option<bool> {
    match value.as_str() {
        Some("max") => Some(true),
        Some("min") => Some(false),
        _ => None,
    }
}

impl fmt::Display for FilterValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterValue::One(value) => write!(f, "{value}"),
            FilterValue::AnyOf(values) => {
                let parts: Vec<String> = values.iter().map(Value::to_string).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

/// One figure: a line per series, min-max band (or error bars) over repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureConfig {
    /// What the figure is drawn from: the results table (default) or the trace table.
    #[serde(default)]
    pub kind: FigureKind,
    /// File stem of the PNG and SVG.
    pub name: String,
    /// Title, naming the paper's figure ("Fig. 8: dense vs fused-par over threads").
    pub title: String,
    /// A parameter name, or a metric column (`metric_nnz_x_query`).
    pub x: String,
    /// A column: `wall_time_s`, `phase_<name>_s`, `metric_<name>`.
    pub y: String,
    /// `variant` (default) or a parameter name (one line per value of it).
    #[serde(default = "default_series")]
    pub series: String,
    /// Keep only rows whose parameters (or `variant`) equal these values, or any value of a list
    /// (`variant: [sync, async non_blocking=true]`); `max` or `min` for a numeric parameter keeps
    /// the rows at its largest or smallest value in the run (the quick and the full sweep then
    /// share one figure spec).
    #[serde(default)]
    pub filter: BTreeMap<String, FilterValue>,
    /// Plot `reference / value` instead of the value: a speedup over another variant at the same
    /// point (`speedup_over: {variant: sparse}`) or over the series' own point with x at a given
    /// value (`speedup_over: {x: 1}`, strong scaling).
    #[serde(default)]
    pub speedup_over: Option<SpeedupBase>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    /// Axis labels; defaults are derived from the column names, with units.
    #[serde(default)]
    pub x_label: Option<String>,
    #[serde(default)]
    pub y_label: Option<String>,
}

fn default_series() -> String {
    "variant".to_string()
}

/// The table a figure reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FigureKind {
    /// `results.parquet`: one marker per (series, x) over the rows of the sweep.
    #[default]
    Results,
    /// `traces.parquet`: one line per series through the progress steps of single runs (a
    /// convergence curve); x is `step`, `time_s` or a trace `metric_<name>`, y `time_s` or a
    /// trace `metric_<name>`, and each step's marker is the median over repetitions (and over
    /// the points a series pools) with a min-max band. `speedup_over` does not apply.
    Trace,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedupBase {
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub x: Option<Value>,
}

/// A checkable statement about the results, resolved and evaluated by [`crate::analysis::claims`]. Every
/// kind fails when no row matches, and when a variant it names lacks rows or the column at a
/// selected point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClaimConfig {
    /// Every recorded equivalence error is at most `equivalence.rel_tol`, and every variant but
    /// the reference carries one at every point. `max_rel_error` may only restate `rel_tol`
    /// (older files wrote it): the experiment has one equivalence tolerance.
    Equivalence {
        name: String,
        #[serde(default)]
        max_rel_error: Option<f64>,
    },
    /// median(column of `numerator`) / median(column of `denominator`) at the same point is at
    /// least `at_least` (and at most `at_most`), at every point selected by `at`.
    Ratio {
        name: String,
        #[serde(default = "default_column")]
        column: String,
        numerator: String,
        denominator: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        /// Parameter -> value, or "max"/"min" to take the largest/smallest value swept.
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// median(column of `minuend`) - median(column of `subtrahend`) at the same point lies within
    /// the bounds at every point selected by `at`: for quality metrics, where the papers state
    /// absolute gaps ("within 0.03 Spearman").
    Difference {
        name: String,
        column: String,
        minuend: String,
        subtrahend: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// `variant` is statistically equivalent to `reference` in `column` over the values of the
    /// parameter `over` (seeds, say): the paired differences of their medians at each value of
    /// `over` (the other parameters equal) have a 90% confidence interval for their mean
    /// (Student's t) inside (-`margin`, `margin`): two one-sided tests at the 5% level, at every
    /// group of points selected by `at`. With `test: non_inferiority` only the lower end is held
    /// (above -`margin`): "as good or better", for higher-is-better metrics.
    EquivalentOver {
        name: String,
        column: String,
        variant: String,
        reference: String,
        over: String,
        margin: f64,
        #[serde(default)]
        test: EquivalenceTest,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// The log-log slope of `column` (median per point) against `x` lies in [min, max] for each
    /// listed variant, over the points selected by `at` (`x` a parameter or a metric column).
    Slope {
        name: String,
        x: String,
        #[serde(default = "default_column")]
        column: String,
        variants: Vec<String>,
        min: f64,
        max: f64,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// Parallel scaling of one variant: median(column at `param` = `from`) / median(column at
    /// `param` = `to`) is at least `at_least`, at every point selected by `at` (the other
    /// parameters equal). `from`/`to` may be values or "min"/"max". With `over` (a swept
    /// parameter: seeds), a test across its values instead of one draw: the ratio is taken at
    /// each value of `over`, and the lower end of the 90% interval of their mean (Student's t,
    /// one-sided at the 5% level) must be at least `at_least`. With `relative_to` (another
    /// variant), the variant's column is first divided by that variant's at the same point:
    /// how a speedup over it changes with `param` ("fusion's lead grows with the threads").
    Scaling {
        name: String,
        variant: String,
        #[serde(default = "default_column")]
        column: String,
        #[serde(default = "default_scaling_param")]
        param: String,
        from: Value,
        to: Value,
        at_least: f64,
        #[serde(default)]
        over: Option<String>,
        #[serde(default)]
        relative_to: Option<String>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// Phase `phase` takes at least `at_least` (and at most `at_most`) of the variant's wall
    /// time (median over repetitions), at every point selected by `at`.
    Share {
        name: String,
        variant: String,
        phase: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// median(`column` of `variant`) is at least `at_least` (and at most `at_most`) at every
    /// point selected by `at`: a column against a constant, so no variant has to report a
    /// dummy metric to be a denominator.
    Bound {
        name: String,
        variant: String,
        column: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
}

/// Which side(s) of an `equivalent_over` claim's interval are held to the margin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EquivalenceTest {
    /// Both ends inside (-margin, margin): neither worse nor better by the margin.
    #[default]
    Equivalence,
    /// The lower end above -margin: not worse by the margin, better allowed.
    NonInferiority,
}

fn default_scaling_param() -> String {
    "threads".to_string()
}

fn default_column() -> String {
    "wall_time_s".to_string()
}

impl ClaimConfig {
    pub fn name(&self) -> &str {
        match self {
            ClaimConfig::Equivalence { name, .. }
            | ClaimConfig::Ratio { name, .. }
            | ClaimConfig::Difference { name, .. }
            | ClaimConfig::EquivalentOver { name, .. }
            | ClaimConfig::Slope { name, .. }
            | ClaimConfig::Scaling { name, .. }
            | ClaimConfig::Share { name, .. }
            | ClaimConfig::Bound { name, .. } => name,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Loading: file -> ExperimentConfig, with errors that name the file, the line and the column.
// ---------------------------------------------------------------------------------------------

pub(crate) mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

/// Why an experiment file could not be read into an [`ExperimentConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("{}: cannot read experiment file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or does not match the schema (unknown key, wrong type, missing
    /// field); `line`/`column` are 1-based, those of the offending node (or key).
    #[error("{}: {message}", Located { path, line: *line, column: *column })]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
}

impl ConfigError {
    /// The 1-based line the error points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Parse { line, .. } => *line,
        }
    }
}

/// `path:line:column` (or as much of it as is known), the prefix compilers use, so editors and
/// terminals can jump to the spot.
pub struct Located<'a> {
    pub path: &'a Path,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// Reads and parses an experiment file; with `quick`, applies its `quick:` overrides (see
/// [`apply_quick`]). Validation against the family happens later, in [`crate::experiment::plan::build`].
pub fn load(path: &Path, quick: bool) -> Result<ExperimentConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = parse_str(&text, path)?;
    Ok(if quick { apply_quick(config) } else { config })
}

/// Parses YAML text of an experiment file; `path` only labels the errors.
pub fn parse_str(text: &str, path: &Path) -> Result<ExperimentConfig, ConfigError> {
    Document::parse(text, path)?.config()
}

/// Turns a YAML error into a [`ConfigError::Parse`] that reads `file:L:C: what went wrong`, with
/// Rust type names said plainly and a suggestion for a misspelt key.
fn yaml_error(path: &Path, err: &yaml::Error) -> ConfigError {
    let mut message = plain_types(&err.to_string());
    if let Some(suggestion) = did_you_mean(&message) {
        message.push_str(&format!(" (did you mean `{suggestion}`?)"));
    }
    let position = err.position();
    ConfigError::Parse {
        path: path.to_path_buf(),
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        message,
    }
}

/// Rust type names in serde's messages, said the way an experiment file's author thinks of them.
fn plain_types(message: &str) -> String {
    [
        ("expected usize", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected f64", "expected a number"),
        (
            "expected a sequence",
            "expected a list (`[a, b]` or lines starting with `- `)",
        ),
    ]
    .iter()
    .fold(message.to_string(), |m, (from, to)| m.replace(from, to))
}

/// For "unknown field `x`, expected one of `a`, `b`": the expected name closest to `x`, when it
/// is close enough to be a typo (edit distance at most a third of the name, at least 1).
fn did_you_mean(message: &str) -> Option<String> {
    let unknown = unknown_field(message)?;
    let rest = message.split_once("expected one of")?.1;
    let expected: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let limit = (unknown.chars().count() / 3).max(1);
    expected
        .into_iter()
        .map(|name| (edit_distance(unknown, name), name))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, name)| name.to_string())
}

/// The name in serde's "unknown field `x`" message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    Some(rest.split_once('`')?.0)
}

/// Levenshtein distance, O(|a| |b|); names are short.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Applies the `quick:` overrides: each parameter or sweep key it names replaces that key (a key
/// moved between `params` and `sweep` leaves the other map, so a quick run never sees the same
/// key twice); `repetitions`, `warmup`, `variants` and `claims` are replaced whole. The `quick` section
/// itself is kept, so the result still records what was overridden.
pub fn apply_quick(mut config: ExperimentConfig) -> ExperimentConfig {
    let Some(quick) = config.quick.clone() else {
        return config;
    };
    for (key, value) in quick.params {
        config.sweep.remove(&key);
        config.params.insert(key, value);
    }
    for (key, values) in quick.sweep {
        config.params.remove(&key);
        config.sweep.insert(key, values);
    }
    if let Some(repetitions) = quick.repetitions {
        config.repetitions = repetitions;
    }
    if let Some(warmup) = quick.warmup {
        config.warmup = warmup;
    }
    if let Some(variants) = quick.variants {
        config.variants = variants;
    }
    if let Some(claims) = quick.claims {
        config.claims = claims;
    }
    config
}

// ---------------------------------------------------------------------------------------------
// The parsed file: deserialization and, for errors found after it, the position of any key.
// ---------------------------------------------------------------------------------------------

/// One step of a path into the YAML document: a mapping key or a list index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// A 1-based (line, column) position in the YAML text (columns count characters).
pub type Position = (usize, usize);

/// An experiment file parsed once: its text and its YAML tree, every node and key with its
/// position. [`Document::config`] deserializes the tree; [`Document::locate`] finds where a
/// value was written, for the errors validation finds later (serde keeps no positions).
#[derive(Clone, Debug)]
pub struct Document {
    path: PathBuf,
    text: String,
    root: marked_yaml::Node,
}

impl Document {
    /// Parses `text`; `path` labels the errors (here and in [`Document::config`]).
    pub fn parse(text: &str, path: &Path) -> Result<Document, ConfigError> {
        let root = yaml::parse(text).map_err(|err| yaml_error(path, &err))?;
        Ok(Document {
            path: path.to_path_buf(),
            text: text.to_string(),
            root,
        })
    }

    /// The text parsed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file the text came from (as given to [`Document::parse`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The experiment as written (no `quick` overrides applied); unknown keys are refused.
    pub fn config(&self) -> Result<ExperimentConfig, ConfigError> {
        self.typed()
    }

    /// The document read as `T`, with the errors' positions as for an experiment (the
    /// registry of paper claims is read this way).
    pub fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        yaml::from_node(&self.root).map_err(|err| yaml_error(&self.path, &err))
    }

    /// The node at `path`, or at its deepest prefix found, with the position that names it: a
    /// key's own position for [`Seg::Key`], the item's for [`Seg::Index`]. `None` if not even the
    /// first segment is there.
    fn walk(&self, path: &[Seg]) -> Option<(&marked_yaml::Node, Position)> {
        let mut node = &self.root;
        let mut found = None;
        for seg in path {
            let next = match *seg {
                Seg::Key(key) => node.as_mapping().and_then(|map| {
                    let (k, v) = map.iter().find(|(k, _)| k.as_str() == key)?;
                    Some((v, yaml::start(k.span())?))
                }),
                Seg::Index(index) => node
                    .as_sequence()
                    .and_then(|seq| seq.get(index))
                    .and_then(|item| Some((item, yaml::position(item)?))),
            };
            let Some((child, at)) = next else { break };
            node = child;
            found = Some((child, at));
        }
        found
    }

    /// Where `path` is written: the position of the deepest segment that could be found (so a
    /// missing key points at its parent), or `None` if not even the first one was. A key's
    /// position is the key's own; a list item's, its first character (its first key for a
    /// mapping).
    pub fn locate(&self, path: &[Seg]) -> Option<Position> {
        self.walk(path).map(|(_, at)| at)
    }

    /// The first scalar inside the node at `path` (found as by [`Document::locate`]) that is
    /// `token` (e.g. a variant name inside `variants: [a, b]`, or a value equal to it as a
    /// number: `1e-9` for "0.000000001"), falling back to the node's own position; when not even
    /// the first segment exists, the first such scalar anywhere.
    pub fn locate_token(&self, path: &[Seg], token: &str) -> Option<Position> {
        match self.walk(path) {
            Some((node, at)) => Some(find_scalar(node, token).unwrap_or(at)),
            None => find_scalar(&self.root, token),
        }
    }

    /// The order in which sweep keys are written (`sweep:`, then keys only `quick: sweep:`
    /// adds), which fixes the order of the expanded grid; the `BTreeMap` of
    /// [`ExperimentConfig::sweep`] forgets it, the tree keeps mappings in written order.
    pub fn sweep_key_order(&self) -> Vec<String> {
        let mut order: Vec<String> = Vec::new();
        for path in [
            &[Seg::Key("sweep")][..],
            &[Seg::Key("quick"), Seg::Key("sweep")],
        ] {
            let Some(map) = self.node(path).and_then(|n| n.as_mapping()) else {
                continue;
            };
            for key in map.keys() {
                if !order.iter().any(|k| k == key.as_str()) {
                    order.push(key.to_string());
                }
            }
        }
        order
    }

    /// The node at exactly `path`.
    fn node(&self, path: &[Seg]) -> Option<&marked_yaml::Node> {
        path.iter().try_fold(&self.root, |node, seg| match *seg {
            Seg::Key(key) => node.as_mapping()?.get_node(key),
            Seg::Index(index) => node.as_sequence()?.get(index),
        })
    }
}

/// Depth-first, in written order: the position of the first scalar value (not key) that is
/// `token` as written or as a number.
fn find_scalar(node: &marked_yaml::Node, token: &str) -> Option<Position> {
    use marked_yaml::Node;
    match node {
        Node::Scalar(scalar) => {
            let same = scalar.as_str() == token
                || matches!(
                    (yaml::number(scalar), token.parse::<f64>()),
                    (Some(a), Ok(b)) if a == b
                );
            if same {
                yaml::start(scalar.span())
            } else {
                None
            }
        }
        Node::Sequence(items) => items.iter().find_map(|item| find_scalar(item, token)),
        Node::Mapping(map) => map.values().find_map(|value| find_scalar(value, token)),
    }
}

/// [`Document::locate`] on `text` (`None` if it does not parse).
pub fn locate(text: &str, path: &[Seg]) -> Option<Position> {
    Document::parse(text, Path::new("")).ok()?.locate(path)
}

/// [`Document::locate_token`] on `text` (`None` if it does not parse).
pub fn locate_token(text: &str, path: &[Seg], token: &str) -> Option<Position> {
    Document::parse(text, Path::new(""))
        .ok()?
        .locate_token(path, token)
}

/// [`Document::sweep_key_order`] of `text` (empty if it does not parse).
pub fn sweep_key_order(text: &str) -> Vec<String> {
    Document::parse(text, Path::new(""))
        .map(|doc| doc.sweep_key_order())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
name: demo
family: mock
# a comment with params: inside
params:
  size: 10    # a comment after the value
  work: 1.5
sweep:
  threads: [1, 2]
  size:
    - 100
    - 200
variants: [slow, fast]
claims:
  - name: first
    kind: ratio
    numerator: slow
  - kind: slope
    name: second
    x: size
quick:
  sweep: {size: [5], extra: [1]}
  claims:
    - kind: ratio  # comment
      numerator: fast
";

    fn doc() -> Document {
        Document::parse(DOC, Path::new("doc.yaml")).unwrap()
    }

    #[test]
    fn locates_block_keys_nested_keys_and_keys_followed_by_comments() {
        let doc = doc();
        assert_eq!(doc.locate(&[Seg::Key("family")]), Some((2, 1)));
        // The comment line mentioning `params:` is not the key.
        assert_eq!(doc.locate(&[Seg::Key("params")]), Some((4, 1)));
        assert_eq!(
            doc.locate(&[Seg::Key("params"), Seg::Key("size")]),
            Some((5, 3))
        );
        assert_eq!(
            doc.locate(&[Seg::Key("params"), Seg::Key("work")]),
            Some((6, 3))
        );
        assert_eq!(
            doc.locate(&[Seg::Key("sweep"), Seg::Key("size")]),
            Some((9, 3))
        );
        // The free functions parse and answer the same.
        assert_eq!(
            locate(DOC, &[Seg::Key("sweep"), Seg::Key("size")]),
            Some((9, 3))
        );
    }

    #[test]
    fn locates_list_items_in_flow_and_block_style() {
        let doc = doc();
        let flow = [Seg::Key("variants"), Seg::Index(1)];
        assert_eq!(doc.locate(&flow), Some((12, 18)));
        let block = [Seg::Key("sweep"), Seg::Key("size"), Seg::Index(1)];
        assert_eq!(doc.locate(&block), Some((11, 7)));
        // Past the end: the list's key.
        let past = [Seg::Key("variants"), Seg::Index(5)];
        assert_eq!(doc.locate(&past), Some((12, 1)));
        assert_eq!(
            doc.locate_token(&[Seg::Key("variants")], "fast"),
            Some((12, 18))
        );
        assert_eq!(
            locate_token(DOC, &[Seg::Key("sweep"), Seg::Key("size")], "200"),
            Some((11, 7))
        );
        assert_eq!(
            doc.locate_token(&[Seg::Key("sweep"), Seg::Key("threads")], "2"),
            Some((8, 16))
        );
    }

    #[test]
    fn locates_claims_and_their_keys() {
        let doc = doc();
        // A list item that is a mapping is where its first key is.
        assert_eq!(
            doc.locate(&[Seg::Key("claims"), Seg::Index(0)]),
            Some((14, 5))
        );
        assert_eq!(
            doc.locate(&[Seg::Key("claims"), Seg::Index(1)]),
            Some((17, 5))
        );
        let first_name = [Seg::Key("claims"), Seg::Index(0), Seg::Key("name")];
        assert_eq!(doc.locate(&first_name), Some((14, 5)));
        let numerator = [Seg::Key("claims"), Seg::Index(0), Seg::Key("numerator")];
        assert_eq!(doc.locate(&numerator), Some((16, 5)));
        assert_eq!(doc.locate_token(&numerator, "slow"), Some((16, 16)));
        let second_x = [Seg::Key("claims"), Seg::Index(1), Seg::Key("x")];
        assert_eq!(doc.locate(&second_x), Some((19, 5)));
        // `x: size` is found by value, not by the `size` keys elsewhere.
        assert_eq!(doc.locate_token(&second_x, "size"), Some((19, 8)));
    }

    #[test]
    fn locates_inside_quick() {
        let doc = doc();
        let quick_size = [Seg::Key("quick"), Seg::Key("sweep"), Seg::Key("size")];
        assert_eq!(doc.locate(&quick_size), Some((21, 11)));
        assert_eq!(doc.locate_token(&quick_size, "5"), Some((21, 18)));
        let extra = [Seg::Key("quick"), Seg::Key("sweep"), Seg::Key("extra")];
        assert_eq!(doc.locate(&extra), Some((21, 22)));
        let claim = [Seg::Key("quick"), Seg::Key("claims"), Seg::Index(0)];
        assert_eq!(doc.locate(&claim), Some((23, 7)));
        let numerator = [
            Seg::Key("quick"),
            Seg::Key("claims"),
            Seg::Index(0),
            Seg::Key("numerator"),
        ];
        assert_eq!(doc.locate(&numerator), Some((24, 7)));
        assert_eq!(doc.locate_token(&numerator, "fast"), Some((24, 18)));
    }

    #[test]
    fn a_missing_key_points_at_its_parent_and_a_missing_token_at_the_node() {
        let doc = doc();
        assert_eq!(
            doc.locate(&[Seg::Key("params"), Seg::Key("nope")]),
            Some((4, 1))
        );
        assert_eq!(doc.locate(&[Seg::Key("nope")]), None);
        assert_eq!(
            doc.locate_token(&[Seg::Key("variants")], "medium"),
            Some((12, 1))
        );
        // Not even the first key: the token anywhere in the file.
        assert_eq!(
            doc.locate_token(&[Seg::Key("nope")], "fast"),
            Some((12, 18))
        );
        assert_eq!(locate("{unclosed: [", &[Seg::Key("unclosed")]), None);
    }

    #[test]
    fn tokens_match_numbers_however_written() {
        let text =
            "equivalence:\n  reference: slow\n  rel_tol: 1e-9\nsweep:\n  work: [1.0, 2.50]\n";
        let tol = [Seg::Key("equivalence"), Seg::Key("rel_tol")];
        assert_eq!(
            locate_token(text, &tol, &Value::Float(1e-9).to_string()),
            Some((3, 12))
        );
        let work = [Seg::Key("sweep"), Seg::Key("work")];
        assert_eq!(
            locate_token(text, &work, &Value::Float(2.5).to_string()),
            Some((5, 15))
        );
    }

    #[test]
    fn sweep_order_is_the_written_one_then_quick_additions() {
        assert_eq!(doc().sweep_key_order(), vec!["threads", "size", "extra"]);
        assert_eq!(sweep_key_order(DOC), vec!["threads", "size", "extra"]);
        let reversed = "sweep:\n  size: [1]\n  threads: [1] # last\nquick:\n  sweep:\n    b: [1]\n    a: [2]\n";
        assert_eq!(sweep_key_order(reversed), vec!["size", "threads", "b", "a"]);
        assert!(sweep_key_order("name: x\n").is_empty());
        assert!(sweep_key_order("sweep: [").is_empty());
    }

    const HEAD: &str = "name: n\npaper: p\nreproduces: r\nfamily: mock\ndata: {source: synthetic}\nvariants: [slow, fast]\n";

    fn parse(rest: &str) -> Result<ExperimentConfig, ConfigError> {
        parse_str(&format!("{HEAD}{rest}"), Path::new("t.yaml"))
    }

    /// `(line, column, message)` of a parse error.
    fn error(rest: &str) -> (Option<usize>, Option<usize>, String) {
        match parse(rest) {
            Err(ConfigError::Parse {
                line,
                column,
                message,
                ..
            }) => (line, column, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn scalars_are_typed_as_serde_yaml_typed_them() {
        let config = parse(
            "params:\n  threads: 2\n  lambda: 1.5\n  mu: 1\n  kernel: sddmm\n  permute: true\n  quoted: \"2\"\n  single: '1.5'\n  yes_: yes\n  no_: no\n  on_: on\n  off_: Off\n  capital: True\n  octal_like: 007\n  hex: 0x10\n  negative: -3\n  tiny: 1e-9\n  inf: .inf\n  neg_inf: -.inf\n  word_inf: inf\n  plus: +5\n",
        )
        .unwrap();
        let p = &config.params;
        assert_eq!(p["threads"], Value::Int(2));
        assert_eq!(p["lambda"], Value::Float(1.5));
        assert_eq!(p["mu"], Value::Int(1));
        assert_eq!(p["kernel"], Value::Str("sddmm".into()));
        assert_eq!(p["permute"], Value::Bool(true));
        assert_eq!(p["quoted"], Value::Str("2".into()));
        assert_eq!(p["single"], Value::Str("1.5".into()));
        // YAML 1.1 booleans are strings in YAML 1.2 (and were with serde_yaml 0.9).
        for key in ["yes_", "no_", "on_", "off_"] {
            assert!(matches!(p[key], Value::Str(_)), "{key}: {:?}", p[key]);
        }
        assert_eq!(p["capital"], Value::Bool(true));
        assert_eq!(p["octal_like"], Value::Str("007".into()));
        assert_eq!(p["hex"], Value::Int(16));
        assert_eq!(p["negative"], Value::Int(-3));
        assert_eq!(p["tiny"], Value::Float(1e-9));
        assert_eq!(p["inf"], Value::Float(f64::INFINITY));
        assert_eq!(p["neg_inf"], Value::Float(f64::NEG_INFINITY));
        assert_eq!(p["word_inf"], Value::Str("inf".into()));
        assert_eq!(p["plus"], Value::Int(5));
        assert!(matches!(
            parse("params: {x: .nan}\n").unwrap().params["x"],
            Value::Float(f) if f.is_nan()
        ));
    }

    #[test]
    fn strings_keep_their_text_and_empty_values_take_defaults() {
        let text = "name: 2024\npaper: 1.50\nreproduces: true\nfamily: mock\ndescription:\ndata: {source: dataset, file: '007.bin', seed: 0x10}\nvariants: [1, \"2\"]\nparams:\nsweep:\nquick:\nfigures:\n  - {name: f, title: t, x: size, y: wall_time_s, x_label: ~}\n";
        let config = parse_str(text, Path::new("t.yaml")).unwrap();
        assert_eq!(config.name, "2024");
        assert_eq!(config.paper, "1.50");
        assert_eq!(config.reproduces, "true");
        assert_eq!(config.description, "");
        assert_eq!(config.data.source, DataSource::Dataset);
        assert_eq!(config.data.file.as_deref(), Some("007.bin"));
        assert_eq!(config.data.seed, 16);
        assert_eq!(config.variants, vec!["1", "2"]);
        assert!(config.params.is_empty() && config.sweep.is_empty());
        assert_eq!(config.quick, None);
        assert_eq!(config.figures[0].x_label, None);
        assert_eq!(config.repetitions, 3);
    }

    #[test]
    fn claims_read_numbers_through_the_kind_tag() {
        let config = parse(
            "claims:\n  - kind: ratio\n    name: r\n    numerator: slow\n    denominator: fast\n    at_least: 50\n    at: {size: max, threads: 2}\n  - {kind: scaling, name: s, variant: fast, from: 1, to: max, at_least: 1.5}\n",
        )
        .unwrap();
        match &config.claims[0] {
            ClaimConfig::Ratio { at_least, at, .. } => {
                assert_eq!(*at_least, Some(50.0));
                assert_eq!(at["size"], Value::Str("max".into()));
                assert_eq!(at["threads"], Value::Int(2));
            }
            other => panic!("{other:?}"),
        }
        match &config.claims[1] {
            ClaimConfig::Scaling { from, to, .. } => {
                assert_eq!(*from, Value::Int(1));
                assert_eq!(*to, Value::Str("max".into()));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_keys_point_at_the_key_and_suggest_the_fix() {
        let (line, column, message) = error("reptitions: 2\n");
        assert_eq!((line, column), (Some(7), Some(1)));
        assert!(
            message.starts_with("unknown field `reptitions`"),
            "{message}"
        );
        assert!(
            message.ends_with("(did you mean `repetitions`?)"),
            "{message}"
        );

        let (line, column, message) = error("quick:\n  sweep: {}\n  warmpu: 1\n");
        assert_eq!((line, column), (Some(9), Some(3)));
        assert!(
            message.starts_with("quick: unknown field `warmpu`"),
            "{message}"
        );
        assert!(message.contains("did you mean `warmup`?"), "{message}");

        // Inside a claim (buffered by serde for the `kind` tag): still the key's own position.
        let (line, column, message) = error(
            "claims:\n  - name: r\n    kind: ratio\n    numerator: slow\n    denominator: fast\n    at_leats: 50\n",
        );
        assert_eq!((line, column), (Some(12), Some(5)));
        assert!(
            message.starts_with("claims[0]: unknown field `at_leats`"),
            "{message}"
        );
        assert!(message.contains("did you mean `at_least`?"), "{message}");

        let (line, column, message) = error("claims:\n  - {name: r, kind: ratios}\n");
        assert_eq!((line, column), (Some(8), Some(21)));
        assert!(message.contains("unknown variant `ratios`"), "{message}");
    }

    #[test]
    fn wrong_types_and_missing_fields_name_the_path_and_the_value() {
        let (line, column, message) = error("repetitions: many\n");
        assert_eq!((line, column), (Some(7), Some(14)));
        assert_eq!(
            message,
            "repetitions: invalid type: string \"many\", expected a non-negative integer"
        );
        // A quoted number is a string.
        let (line, column, message) = error("warmup: \"2\"\n");
        assert_eq!((line, column), (Some(7), Some(9)));
        assert!(message.contains("invalid type: string \"2\""), "{message}");

        let (line, column, message) = error("sweep:\n  size: 5\n");
        assert_eq!((line, column), (Some(8), Some(9)));
        assert!(
            message.starts_with("sweep.size: invalid type: integer `5`"),
            "{message}"
        );
        assert!(message.contains("expected a list"), "{message}");

        let (line, column, message) = error("equivalence:\n  reference: slow\n  rel_tol: [1]\n");
        assert_eq!((line, column), (Some(9), Some(12)));
        assert!(
            message.starts_with("equivalence.rel_tol: invalid type: sequence"),
            "{message}"
        );

        let (line, column, message) = error("equivalence:\n  reference: slow\n");
        assert_eq!((line, column), (Some(8), Some(3)));
        assert_eq!(message, "equivalence: missing field `rel_tol`");

        let text = HEAD.replace("paper: p\n", "");
        let err = parse_str(&text, Path::new("t.yaml")).unwrap_err();
        assert_eq!(err.to_string(), "t.yaml:1:1: missing field `paper`");
    }

    #[test]
    fn syntax_errors_duplicates_and_unsupported_yaml_are_positioned() {
        let (line, column, message) = error("sweep:\n  size: [1, 2\n");
        assert_eq!(line, Some(9), "{message}");
        assert!(column.is_some());

        let (line, column, message) = error("variants: [fast]\n");
        assert_eq!((line, column), (Some(7), Some(1)));
        assert_eq!(
            message,
            "duplicate key `variants` (first written at line 6 column 1)"
        );

        let (line, _, message) = error("params: &p {size: 1}\n");
        assert_eq!(line, Some(7));
        assert!(message.contains("anchors"), "{message}");

        let err = parse_str("- a\n- b\n", Path::new("t.yaml")).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("t.yaml:1:1: an experiment file must be a mapping"));
    }

    #[test]
    fn a_document_is_parsed_once_for_the_config_and_the_positions() {
        let text = format!("{HEAD}params: {{size: 10}}\n");
        let doc = Document::parse(&text, Path::new("one.yaml")).unwrap();
        assert_eq!(doc.text(), text);
        assert_eq!(doc.path(), Path::new("one.yaml"));
        let config = doc.config().unwrap();
        assert_eq!(config.params["size"], Value::Int(10));
        assert_eq!(
            doc.locate(&[Seg::Key("params"), Seg::Key("size")]),
            Some((7, 10))
        );
    }

    #[test]
    fn typos_get_a_suggestion() {
        let m = "unknown field `reptitions`, expected one of `name`, `repetitions`, `warmup`";
        assert_eq!(did_you_mean(m).as_deref(), Some("repetitions"));
        let m = "unknown field `zzz`, expected one of `name`, `repetitions`";
        assert_eq!(did_you_mean(m), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn quick_overrides_key_by_key_and_moves_keys_between_params_and_sweep() {
        let text = "name: n\npaper: p\nreproduces: r\nfamily: mock\ndata: {source: synthetic}\nvariants: [slow, fast]\nparams: {size: 10, work: 2}\nsweep: {threads: [1, 2, 4]}\nrepetitions: 5\nquick:\n  params: {threads: 1}\n  sweep: {size: [1, 2]}\n  repetitions: 1\n  variants: [fast]\n  claims:\n    - {kind: equivalence, name: e, max_rel_error: 0.1}\n";
        let config = parse_str(text, Path::new("q.yaml")).unwrap();
        let quick = apply_quick(config.clone());
        assert_eq!(quick.params.get("threads"), Some(&Value::Int(1)));
        assert!(!quick.sweep.contains_key("threads"));
        assert_eq!(
            quick.sweep.get("size"),
            Some(&vec![Value::Int(1), Value::Int(2)])
        );
        assert!(!quick.params.contains_key("size"));
        assert_eq!(quick.params.get("work"), Some(&Value::Int(2)));
        assert_eq!(quick.repetitions, 1);
        assert_eq!(quick.variants, vec!["fast"]);
        assert_eq!(quick.claims.len(), 1);
        assert_eq!(config.repetitions, 5);
        assert!(config.claims.is_empty());
    }
}
