//! Experiment files: the serde schema. Loading with file/line errors and the `quick` merge live
//! in `load`; the checked, expanded form is [`crate::plan::Plan`].

use crate::model::Value;
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
    /// Variants to run at every point.
    pub variants: Vec<String>,
    /// Fixed parameters of every point.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Grid: every combination of these lists is a point (`threads` may appear here).
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<Value>>,
    #[serde(default = "default_repetitions")]
    pub repetitions: usize,
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
}

/// Variants are compared with the reference variant's output at the same point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EquivalenceConfig {
    pub reference: String,
    /// Largest allowed relative difference, max_i |a_i - b_i| / max(|b_i|, tiny).
    pub rel_tol: f64,
}

/// One figure: a line per series, min-max band (or error bars) over repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureConfig {
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
    /// Keep only rows whose parameters (or `variant`) equal these values.
    #[serde(default)]
    pub filter: BTreeMap<String, Value>,
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedupBase {
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub x: Option<Value>,
}

/// A checkable statement about the results. Every kind fails when no row matches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClaimConfig {
    /// Every recorded equivalence error is at most `max_rel_error`.
    Equivalence { name: String, max_rel_error: f64 },
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
    /// Phase `phase` takes at least `at_least` (and at most `at_most`) of the variant's summed
    /// phase time, at every point selected by `at`.
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
}

fn default_column() -> String {
    "wall_time_s".to_string()
}

impl ClaimConfig {
    pub fn name(&self) -> &str {
        match self {
            ClaimConfig::Equivalence { name, .. }
            | ClaimConfig::Ratio { name, .. }
            | ClaimConfig::Slope { name, .. }
            | ClaimConfig::Share { name, .. } => name,
        }
    }
}
