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
    /// Numeric view (integers widen; booleans and strings are not numbers).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
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
}

/// A parameter a family understands, for validating experiment files.
#[derive(Clone, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    /// "integer", "float", "string" or "boolean" (an integer is accepted for a float).
    pub kind: &'static str,
    pub help: &'static str,
}

/// Input built once per point and shared by every variant and repetition of that point.
pub type PreparedInput = Box<dyn Any + Send + Sync>;

/// An algorithm family as the harness sees it. The runner never knows more than this, so a mock
/// family can drive the whole pipeline in tests.
pub trait Family: Send + Sync {
    /// Name used in experiment files (`family: sinkhorn`).
    fn name(&self) -> &'static str;
    /// Variant names this family offers.
    fn variants(&self) -> Vec<&'static str>;
    /// Parameters a point may set (besides `threads`, which every family takes).
    fn params(&self) -> Vec<ParamSpec>;
    /// Data sources this family can read from the data dir: (file name, what it is).
    fn datasets(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
    /// Builds the input for one point: generates synthetic data from the point's parameters and
    /// `seed`, or loads `dataset` from `data_dir`.
    fn prepare(
        &self,
        point: &Params,
        dataset: Option<&Path>,
        seed: u64,
    ) -> anyhow::Result<PreparedInput>;
    /// Runs `variant` once on a prepared input with `threads` threads.
    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
    ) -> anyhow::Result<Measurement>;
    /// How many MPI processes a `backend: mpi` point needs (the experiment's launcher starts
    /// that many); families without variants that run across processes refuse.
    fn processes(&self, point: &Params, threads: usize) -> anyhow::Result<usize> {
        let _ = (point, threads);
        anyhow::bail!(
            "the {} family has no variant that runs across MPI processes",
            self.name()
        )
    }
    /// Runs `variant` once across the processes of the MPI job `comm` (every rank calls this
    /// with the same point); rank 0 returns the measurement, the others `None`.
    fn run_on_ranks(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
        backend: &crate::backend::Backend,
    ) -> anyhow::Result<Option<Measurement>> {
        let _ = (variant, input, point, threads, backend);
        anyhow::bail!(
            "the {} family has no variant that runs across MPI processes",
            self.name()
        )
    }
}
