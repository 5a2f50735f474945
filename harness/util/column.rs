//! The column-name grammar of results, in one place: the stored tables' column names, the names
//! experiment files use in claims and figures, the values they pick from a row, and their units.
//!
//! A result row has the fixed columns `wall_time_s` and `equiv_rel_error`, one `phase_<name>_s`
//! per timed phase, one `metric_<name>` per metric and one `param_<name>` per parameter (the
//! stored tables prefix parameters; experiment files may name a parameter bare, `threads`).

use crate::family::{ResultRow, Value};

/// Prefix of parameter columns in stored tables.
pub const PARAM_PREFIX: &str = "param_";
/// Prefix of phase-time columns.
pub const PHASE_PREFIX: &str = "phase_";
/// Suffix of phase-time columns (seconds).
pub const PHASE_SUFFIX: &str = "_s";
/// Prefix of metric columns.
pub const METRIC_PREFIX: &str = "metric_";
/// The wall time of a run, seconds.
pub const WALL_TIME: &str = "wall_time_s";
/// The largest relative difference from the reference variant at the point.
pub const EQUIV_REL_ERROR: &str = "equiv_rel_error";

/// A column of the results, by what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column<'a> {
    /// `wall_time_s`.
    WallTime,
    /// `equiv_rel_error`.
    EquivRelError,
    /// `phase_<name>_s`: the seconds of one phase.
    Phase(&'a str),
    /// `metric_<name>`: a counter or rate the family reports.
    Metric(&'a str),
    /// `param_<name>` (or a bare parameter name, in experiment files).
    Param(&'a str),
}

impl<'a> Column<'a> {
    /// A stored column name; `None` for a name outside the grammar (or an empty inner name).
    pub fn parse(name: &'a str) -> Option<Self> {
        let nonempty = |s: &'a str| (!s.is_empty()).then_some(s);
        match name {
            WALL_TIME => Some(Column::WallTime),
            EQUIV_REL_ERROR => Some(Column::EquivRelError),
            _ => {
                if let Some(p) = name.strip_prefix(PARAM_PREFIX) {
                    return nonempty(p).map(Column::Param);
                }
                if let Some(rest) = name.strip_prefix(PHASE_PREFIX) {
                    if let Some(phase) = rest.strip_suffix(PHASE_SUFFIX) {
                        return nonempty(phase).map(Column::Phase);
                    }
                }
                name.strip_prefix(METRIC_PREFIX)
                    .and_then(nonempty)
                    .map(Column::Metric)
            }
        }
    }

    /// A name as an experiment file writes it: a column, or else a bare parameter name.
    pub fn reference(name: &'a str) -> Self {
        Column::parse(name).unwrap_or(Column::Param(name))
    }

    /// Whether this is a measured result (not a parameter).
    pub fn is_result(&self) -> bool {
        !matches!(self, Column::Param(_))
    }

    /// The stored column name.
    pub fn name(&self) -> String {
        match self {
            Column::WallTime => WALL_TIME.to_string(),
            Column::EquivRelError => EQUIV_REL_ERROR.to_string(),
            Column::Phase(p) => format!("{PHASE_PREFIX}{p}{PHASE_SUFFIX}"),
            Column::Metric(m) => format!("{METRIC_PREFIX}{m}"),
            Column::Param(p) => format!("{PARAM_PREFIX}{p}"),
        }
    }

    /// The numeric value of this column in `row`; `None` when the row has none (a phase or
    /// metric it does not report, a parameter that is absent or not a number).
    pub fn value(&self, row: &ResultRow) -> Option<f64> {
        match self {
            Column::WallTime => Some(row.wall_time_s),
            Column::EquivRelError => row.equiv_rel_error,
            Column::Phase(p) => row.phases_s.get(*p).copied(),
            Column::Metric(m) => row.metrics.get(*m).copied(),
            Column::Param(p) => row.params.get(*p).and_then(Value::as_ordinal),
        }
    }

    /// A readable axis label with the unit (`metric_gflop_per_s` -> `GFLOP/s`).
    pub fn label(&self) -> String {
        let name = match self {
            Column::WallTime => return "wall time (s)".to_string(),
            Column::EquivRelError => return "relative error vs reference".to_string(),
            Column::Phase(p) => return format!("{} phase time (s)", words(p)),
            Column::Metric(name) | Column::Param(name) => name,
        };
        if let Some((what, per)) = name.split_once("_per_") {
            return format!("{}/{}", unit_words(what), unit_words(per));
        }
        if let Some(seconds) = name.strip_suffix("_s") {
            return format!("{} (s)", words(seconds));
        }
        if let Some(bytes) = name.strip_suffix("_bytes") {
            return format!("{} (bytes)", words(bytes));
        }
        words(name)
    }
}

fn words(name: &str) -> String {
    name.replace('_', " ")
}

/// Unit tokens upper-cased the way they are written (`gflop` -> `GFLOP`, `s` stays `s`).
fn unit_words(name: &str) -> String {
    name.split('_')
        .map(|token| match token {
            "flop" | "kflop" | "mflop" | "gflop" | "tflop" | "kb" | "mb" | "gb" | "tb" => {
                token.to_uppercase()
            }
            "kib" | "mib" | "gib" => {
                let upper = token.to_uppercase();
                format!("{}i{}", &upper[..1], &upper[2..])
            }
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_parse_to_their_kind_and_back() {
        for (name, column) in [
            ("wall_time_s", Column::WallTime),
            ("equiv_rel_error", Column::EquivRelError),
            ("phase_loop_s", Column::Phase("loop")),
            ("metric_gflop_per_s", Column::Metric("gflop_per_s")),
            ("param_threads", Column::Param("threads")),
        ] {
            assert_eq!(Column::parse(name), Some(column), "{name}");
            assert_eq!(column.name(), name);
        }
    }

    #[test]
    fn names_outside_the_grammar_or_with_empty_parts_are_not_columns() {
        for name in ["phase__s", "metric_", "param_", "phase_loop", "threads", ""] {
            assert_eq!(Column::parse(name), None, "{name}");
        }
        assert_eq!(Column::reference("threads"), Column::Param("threads"));
        assert!(!Column::reference("threads").is_result());
        assert!(Column::reference("metric_x").is_result());
    }

    #[test]
    fn labels_carry_units() {
        let label = |n| Column::reference(n).label();
        assert_eq!(label("wall_time_s"), "wall time (s)");
        assert_eq!(label("phase_loop_s"), "loop phase time (s)");
        assert_eq!(label("metric_gflop_per_s"), "GFLOP/s");
        assert_eq!(label("metric_gb_per_s"), "GB/s");
        assert_eq!(label("threads"), "threads");
        assert_eq!(label("param_threads"), "threads");
        assert_eq!(label("metric_nnz_x_query"), "nnz x query");
        assert_eq!(label("metric_solve_time_s"), "solve time (s)");
        assert_eq!(label("metric_model_bytes"), "model (bytes)");
    }
}
