//! The data model every part of the harness shares: parameter values, tidy result rows, and the
//! contract between the runner and an algorithm family.

use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::path::Path;

/// A parameter value from an experiment file (an integer, a float, a string or a boolean).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl Value {
    /// The one equality of parameter values, used by figure filters, claim selections and the
    /// baseline check alike: integers and floats compare by value (`threads: 2` is `threads:
    /// 2.0`), exactly, since every value comes from the same YAML parse and is stored losslessly;
    /// other kinds compare as they are.
    pub fn same_as(&self, other: &Value) -> bool {
        match (self.as_f64(), other.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => self == other,
        }
    }

    /// Numeric view (integers widen; booleans and strings are not numbers).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    /// The value as a point on an axis a claim can order and compare along: numbers as
    /// themselves, `false` as 0 and `true` as 1 (a switch swept off and on, `full_model:
    /// [false, true]`), strings not at all. Not a numeric parameter's check: `alpha: true` is
    /// still not a number ([`Value::as_f64`]).
    pub fn as_ordinal(&self) -> Option<f64> {
        match self {
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => self.as_f64(),
        }
    }
    /// Non-negative integer view.
    pub fn as_usize(&self) -> Option<usize> {
        match self {
            Value::Int(i) if *i >= 0 => Some(*i as usize),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The name of the type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s}"),
        }
    }
}

/// All parameters of one point of a sweep (fixed ones and swept ones, `threads` included).
pub type Params = BTreeMap<String, Value>;

/// One tidy result row: one point, one variant, one repetition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    pub experiment: String,
    /// Index of the point in the expanded sweep (stable for a given experiment file).
    pub point: usize,
    pub params: Params,
    pub variant: String,
    /// 0-based; warm-up runs are not recorded.
    pub repetition: usize,
    pub wall_time_s: f64,
    /// Seconds per phase, stored as columns `phase_<name>_s`.
    pub phases_s: BTreeMap<String, f64>,
    /// Other measurements, stored as columns `metric_<name>` (names carry their unit, e.g.
    /// `gflop_per_s`, `iterations`, `nnz`).
    pub metrics: BTreeMap<String, f64>,
    /// Largest relative difference from the reference variant's output at the same point
    /// (None for the reference itself or when the experiment has no equivalence rule).
    pub equiv_rel_error: Option<f64>,
}

/// What one run of one variant produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    pub wall_time_s: f64,
    pub phases_s: BTreeMap<String, f64>,
    pub metrics: BTreeMap<String, f64>,
    /// The numbers compared across variants for equivalence (e.g. the N distances).
    pub output: Vec<f64>,
    /// What the run's progress callback heard, one entry per report in order (LDA iterations,
    /// Sinkhorn iterations, word2vec reports); empty for families without progress. Stored as
    /// `traces.parquet` (see [`crate::results`]) for the repetitions, not the warm-ups.
    pub trace: Vec<TraceStep>,
}

/// One progress report of a run, as the trace table stores it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceStep {
    /// 1-based index of the report within the run (an LDA or Sinkhorn iteration, the n-th
    /// word2vec report).
    pub step: usize,
    /// Wall seconds from the start of the run to the report (the family says which clock: the
    /// solver's own where it reports one).
    pub time_s: f64,
    /// What the report carried, stored as columns `metric_<name>` (names carry their unit). A
    /// step may lack a metric other steps have (LDA's log-likelihood every N iterations).
    pub metrics: BTreeMap<String, f64>,
}

/// One stored trace row: one progress step of one repetition of one variant at one point.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRow {
    pub experiment: String,
    /// Index of the point in the expanded sweep, as in [`ResultRow::point`].
    pub point: usize,
    pub params: Params,
    pub variant: String,
    pub repetition: usize,
    pub step: usize,
    pub time_s: f64,
    pub metrics: BTreeMap<String, f64>,
}

/// Whether metric `name` is one of `patterns` (a pattern ending in `*` matches every name it
/// begins, one starting with `*` every name it ends), as [`Family::exact_metrics`] lists them.
pub fn matches_metric(patterns: &[&str], name: &str) -> bool {
    patterns.iter().any(|p| {
        if let Some(prefix) = p.strip_suffix('*') {
            name.starts_with(prefix)
        } else if let Some(suffix) = p.strip_prefix('*') {
            name.ends_with(suffix)
        } else {
            *p == name
        }
    })
}

/// A parameter a family understands, for validation messages, `parbench list` and help texts.
/// Made from the family's [`crate::point_params!`] declaration, never written by hand.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    /// "integer", "number", "string" or "boolean" (an integer is accepted for a number).
    pub kind: &'static str,
    /// The names an option accepts.
    pub choices: Option<Vec<&'static str>>,
    /// The value used when a point does not set it, as a file would write it.
    pub default: String,
    pub help: String,
    /// The variants that read it (`None`: every variant). A parameterised variant's options
    /// (LDA `async`'s `delta`, word2vec `distributed`'s `ranks`) are declared this way in every
    /// family, so an experiment that sets an option none of its variants reads is refused.
    pub read_by: Option<Vec<&'static str>>,
}

/// A point's parameters in the family's typed form, made once when the plan is built.
pub type TypedPoint = std::sync::Arc<dyn Any + Send + Sync>;

/// Input built once per point and shared by every variant and repetition of that point.
pub type PreparedInput = Box<dyn Any + Send + Sync>;

/// An algorithm family as the harness sees it. The runner never knows more than this, so a mock
/// family can drive the whole pipeline in tests. Families implement [`TypedFamily`]; this
/// object-safe form is derived from it.
pub trait Family: Send + Sync {
    /// Name used in experiment files (`family: sinkhorn`).
    fn name(&self) -> &'static str;
    /// Variant names this family offers.
    fn variants(&self) -> Vec<&'static str>;
    /// Parameters a point may set (besides the runner's `threads` and `backend`).
    fn params(&self) -> Vec<ParamSpec>;
    /// Data sources this family can read from the data dir: (file name, what it is).
    fn datasets(&self) -> Vec<(&'static str, &'static str)>;
    /// The metrics this family counts rather than times (words sent, flops, model bytes):
    /// the same on every machine, thread schedule and repetition for a given point, so the
    /// regression gate compares them exactly. A name ending in `*` stands for every metric it
    /// begins, one starting with `*` every metric it ends.
    fn exact_metrics(&self) -> &'static [&'static str];
    /// Whether the variants compute the same numbers, so their outputs can be compared for
    /// equivalence (false where the outputs are quality figures of stochastic training).
    fn outputs_agree(&self) -> bool;
    /// Why `value` cannot be parameter `key`'s (`None`: the family has no parameter `key`).
    fn check_value(&self, key: &str, value: &Value) -> Option<Result<(), String>>;
    /// The typed form of a point whose every value passed [`Family::check_value`], or what is
    /// wrong with its parameters taken together (for the `variants` the experiment runs).
    fn typed_point(
        &self,
        point: &Params,
        variants: &[String],
    ) -> Result<TypedPoint, Vec<crate::families::params::PointIssue>>;
    /// The family whose gate workloads count and time this family's variants, where they are
    /// another family's algorithms run in a larger pipeline (`wmd_knn` runs the Sinkhorn
    /// solvers); `None`: this family's own workloads must.
    fn variants_gated_by(&self) -> Option<&'static str>;
    /// Files a point reads from the data dir beside its dataset, besides the dataset itself:
    /// (the parameter naming it, the file name), checked by the plan before anything runs.
    fn data_files(&self, point: &TypedPoint) -> anyhow::Result<Vec<(&'static str, String)>>;
    /// What is wrong with a point's parameters when it reads a dataset rather than generating
    /// its data (a parameter only synthetic data can honour), checked by the plan before
    /// anything runs.
    fn dataset_issues(
        &self,
        point: &TypedPoint,
    ) -> anyhow::Result<Vec<crate::families::params::PointIssue>>;
    /// Builds the input for one point: generates synthetic data from the point's parameters and
    /// `seed`, or loads `dataset`. The input is built once per point and shared by every listed
    /// variant, so it must depend only on parameters every variant sees alike: an option a
    /// listed variant sets for itself (`async non_blocking=true`) reaches `run` through its own
    /// typed point, never the input.
    fn prepare(
        &self,
        point: &TypedPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> anyhow::Result<PreparedInput>;
    /// A name for everything [`Family::prepare`] reads from `point`, where the family can give
    /// one: consecutive points of a plan with the same name share one input (a seed sweep over
    /// one corpus reads it once). `None`: points share an input only when their parameters are
    /// the same but for the runner's (`threads`).
    fn input_key(&self, point: &TypedPoint) -> anyhow::Result<Option<String>>;
    /// Runs `variant` once on a prepared input with `threads` threads.
    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &TypedPoint,
        threads: usize,
    ) -> anyhow::Result<Measurement>;
    /// How many MPI processes a `backend: mpi` point needs.
    fn processes(&self, point: &TypedPoint, threads: usize) -> anyhow::Result<usize>;
    /// Runs `variant` once across the processes of the MPI job (every rank calls this with the
    /// same point); rank 0 returns the measurement, the others `None`.
    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &TypedPoint,
        threads: usize,
        backend: &crate::exec::ranks::Ranks,
    ) -> anyhow::Result<Option<Measurement>>;
    /// Writes a prepared input as the files of the peer protocol (`docs/peers.md`) into `dir`,
    /// and says which file plays which role and what parameters the peer gets.
    fn peer_input(
        &self,
        input: &PreparedInput,
        point: &TypedPoint,
        dir: &Path,
    ) -> anyhow::Result<PeerInput>;
    /// Reads what a peer wrote into `dir` (its output files, not `timing.json`) as a
    /// measurement: the output compared for equivalence, and the metrics parbench computes
    /// itself (sizes, quality scores, rates over the peer's `compute_s`). Times are the runner's.
    fn peer_output(
        &self,
        input: &PreparedInput,
        point: &TypedPoint,
        dir: &Path,
        compute_s: f64,
    ) -> anyhow::Result<Measurement>;
    /// Runs this family's `variant` as a peer would (`parbench peer-serve`): reads the files of
    /// `request`, computes, and writes the output files and `timing.json`.
    fn serve_peer(
        &self,
        variant: &str,
        request: &crate::peers::protocol::Request,
        options: &ServeOptions,
    ) -> anyhow::Result<()>;
}

/// How `parbench peer-serve` runs a variant, beyond the request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServeOptions {
    /// A folder for the parsed cache of the request's input files (embeddings): with it, a
    /// process after the first on unchanged files loads the parsed table instead of the text.
    pub cache: Option<std::path::PathBuf>,
}

/// A point's input as a peer sees it: its files (role -> path relative to the work directory)
/// and the parameters of the request, as `docs/peers.md` lists them for the family.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerInput {
    pub files: BTreeMap<String, String>,
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// A family written against its own typed point ([`TypedFamily::Point`], declared with
/// [`crate::point_params!`]); the harness sees it as a [`Family`].
pub trait TypedFamily: Send + Sync {
    /// The point's parameters.
    type Point: crate::families::params::PointParams;
    /// Name used in experiment files.
    const NAME: &'static str;
    /// Variant names this family offers.
    fn variants(&self) -> Vec<&'static str>;
    /// Data sources this family can read from the data dir: (file name, what it is).
    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// See [`Family::exact_metrics`].
    fn exact_metrics(&self) -> &'static [&'static str] {
        &[]
    }
    /// See [`Family::outputs_agree`].
    fn outputs_agree(&self) -> bool {
        true
    }
    /// What is wrong with a point's parameters taken together, for these variants (sizes of
    /// zero, grids that cannot be formed). Runs for every point before anything runs.
    fn check(
        &self,
        point: &Self::Point,
        variants: &[String],
    ) -> Vec<crate::families::params::PointIssue> {
        let _ = (point, variants);
        Vec::new()
    }
    /// See [`Family::variants_gated_by`].
    fn variants_gated_by(&self) -> Option<&'static str> {
        None
    }
    /// See [`Family::data_files`].
    fn data_files(&self, point: &Self::Point) -> Vec<(&'static str, String)> {
        let _ = point;
        Vec::new()
    }
    /// See [`Family::dataset_issues`].
    fn dataset_issues(&self, point: &Self::Point) -> Vec<crate::families::params::PointIssue> {
        let _ = point;
        Vec::new()
    }
    /// See [`Family::prepare`].
    fn prepare(
        &self,
        point: &Self::Point,
        dataset: Option<&Path>,
        seed: u64,
    ) -> anyhow::Result<PreparedInput>;
    /// See [`Family::input_key`]. A family that gives one should build its input from a value
    /// the key is the `Debug` form of, so that the key cannot leave out what `prepare` reads.
    fn input_key(&self, point: &Self::Point) -> Option<String> {
        let _ = point;
        None
    }
    /// See [`Family::run`].
    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Self::Point,
        threads: usize,
    ) -> anyhow::Result<Measurement>;
    /// See [`Family::processes`]; families without variants across processes refuse.
    fn processes(&self, point: &Self::Point, threads: usize) -> anyhow::Result<usize> {
        let _ = (point, threads);
        anyhow::bail!(
            "the {} family has no variant that runs across MPI processes",
            Self::NAME
        )
    }
    /// See [`Family::run_on_ranks`].
    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Self::Point,
        threads: usize,
        backend: &crate::exec::ranks::Ranks,
    ) -> anyhow::Result<Option<Measurement>> {
        let _ = (variant, input, point, threads, backend);
        anyhow::bail!(
            "the {} family has no variant that runs across MPI processes",
            Self::NAME
        )
    }
    /// See [`Family::peer_input`]; families without a peer protocol refuse.
    fn peer_input(
        &self,
        input: &PreparedInput,
        point: &Self::Point,
        dir: &Path,
    ) -> anyhow::Result<PeerInput> {
        let _ = (input, point, dir);
        anyhow::bail!("the {} family has no peer protocol", Self::NAME)
    }
    /// See [`Family::peer_output`].
    fn peer_output(
        &self,
        input: &PreparedInput,
        point: &Self::Point,
        dir: &Path,
        compute_s: f64,
    ) -> anyhow::Result<Measurement> {
        let _ = (input, point, dir, compute_s);
        anyhow::bail!("the {} family has no peer protocol", Self::NAME)
    }
    /// See [`Family::serve_peer`].
    fn serve_peer(
        &self,
        variant: &str,
        request: &crate::peers::protocol::Request,
        options: &ServeOptions,
    ) -> anyhow::Result<()> {
        let _ = (request, options);
        anyhow::bail!(
            "the {} family cannot run its variant {variant} as a peer process",
            Self::NAME
        )
    }
}

/// The prepared input of type `T` behind a [`PreparedInput`] (an internal error naming `what`
/// when the plan gave another family's).
pub fn prepared<'i, T: 'static>(input: &'i PreparedInput, what: &str) -> anyhow::Result<&'i T> {
    input
        .downcast_ref::<T>()
        .ok_or_else(|| anyhow::anyhow!("internal: the prepared input is not {what}"))
}

/// The typed point behind a [`TypedPoint`] (an internal error if the plan gave another
/// family's point).
fn downcast<'p, P: 'static>(point: &'p TypedPoint, family: &str) -> anyhow::Result<&'p P> {
    point
        .downcast_ref::<P>()
        .ok_or_else(|| anyhow::anyhow!("internal: a point of another family reached {family}"))
}

impl<F: TypedFamily> Family for F {
    fn name(&self) -> &'static str {
        F::NAME
    }
    fn variants(&self) -> Vec<&'static str> {
        TypedFamily::variants(self)
    }
    fn params(&self) -> Vec<ParamSpec> {
        <F::Point as crate::families::params::PointParams>::specs()
    }
    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        TypedFamily::datasets(self)
    }
    fn exact_metrics(&self) -> &'static [&'static str] {
        TypedFamily::exact_metrics(self)
    }
    fn outputs_agree(&self) -> bool {
        TypedFamily::outputs_agree(self)
    }
    fn check_value(&self, key: &str, value: &Value) -> Option<Result<(), String>> {
        <F::Point as crate::families::params::PointParams>::check_value(key, value)
    }
    fn typed_point(
        &self,
        point: &Params,
        variants: &[String],
    ) -> Result<TypedPoint, Vec<crate::families::params::PointIssue>> {
        let typed = <F::Point as crate::families::params::PointParams>::from_params(point)
            .map_err(|e| {
                vec![crate::families::params::PointIssue::new(
                    &[],
                    e,
                    "check the point's parameters",
                )]
            })?;
        let issues = TypedFamily::check(self, &typed, variants);
        if issues.is_empty() {
            Ok(std::sync::Arc::new(typed))
        } else {
            Err(issues)
        }
    }
    fn variants_gated_by(&self) -> Option<&'static str> {
        TypedFamily::variants_gated_by(self)
    }
    fn data_files(&self, point: &TypedPoint) -> anyhow::Result<Vec<(&'static str, String)>> {
        Ok(TypedFamily::data_files(self, downcast(point, F::NAME)?))
    }
    fn dataset_issues(
        &self,
        point: &TypedPoint,
    ) -> anyhow::Result<Vec<crate::families::params::PointIssue>> {
        Ok(TypedFamily::dataset_issues(self, downcast(point, F::NAME)?))
    }
    fn prepare(
        &self,
        point: &TypedPoint,
        dataset: Option<&Path>,
        seed: u64,
    ) -> anyhow::Result<PreparedInput> {
        TypedFamily::prepare(self, downcast(point, F::NAME)?, dataset, seed)
    }
    fn input_key(&self, point: &TypedPoint) -> anyhow::Result<Option<String>> {
        Ok(TypedFamily::input_key(self, downcast(point, F::NAME)?))
    }
    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &TypedPoint,
        threads: usize,
    ) -> anyhow::Result<Measurement> {
        TypedFamily::run(self, variant, input, downcast(point, F::NAME)?, threads)
    }
    fn processes(&self, point: &TypedPoint, threads: usize) -> anyhow::Result<usize> {
        TypedFamily::processes(self, downcast(point, F::NAME)?, threads)
    }
    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &TypedPoint,
        threads: usize,
        backend: &crate::exec::ranks::Ranks,
    ) -> anyhow::Result<Option<Measurement>> {
        TypedFamily::run_on_ranks(
            self,
            variant,
            input,
            downcast(point, F::NAME)?,
            threads,
            backend,
        )
    }
    fn peer_input(
        &self,
        input: &PreparedInput,
        point: &TypedPoint,
        dir: &Path,
    ) -> anyhow::Result<PeerInput> {
        TypedFamily::peer_input(self, input, downcast(point, F::NAME)?, dir)
    }
    fn peer_output(
        &self,
        input: &PreparedInput,
        point: &TypedPoint,
        dir: &Path,
        compute_s: f64,
    ) -> anyhow::Result<Measurement> {
        TypedFamily::peer_output(self, input, downcast(point, F::NAME)?, dir, compute_s)
    }
    fn serve_peer(
        &self,
        variant: &str,
        request: &crate::peers::protocol::Request,
        options: &ServeOptions,
    ) -> anyhow::Result<()> {
        TypedFamily::serve_peer(self, variant, request, options)
    }
}
