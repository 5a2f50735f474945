//! Claims: checkable statements about stored results (`claims:` in an experiment file).
//!
//! A claim is resolved once, by [`resolve`], from its [`ClaimConfig`] into a [`ResolvedClaim`]:
//! names checked against the variants and parameters, bounds in one shape, `at` split into fixed
//! values and extremes, the equivalence tolerance taken from `equivalence.rel_tol`. The plan's
//! validation reports what [`resolve`] finds wrong ([`ClaimProblem`]s, each with the YAML path of
//! the offending key), and [`evaluate`] checks the same typed claims against the rows.
//!
//! Every claim works on medians over repetitions: rows are grouped by (`point`, `variant`) and
//! the median of the claimed column is taken in each group, so one noisy repetition cannot make
//! or break a claim. Kinds:
//!
//! - `equivalence`: every recorded `equiv_rel_error` is at most `equivalence.rel_tol` (the one
//!   tolerance of the experiment), and every variant but the reference carries one at every point.
//! - `ratio`: median(numerator) / median(denominator) at the same point, at every point
//!   selected by `at`, lies within `[at_least, at_most]`; `difference` likewise for
//!   median(minuend) - median(subtrahend).
//! - `bound`: median(column of one variant) lies within `[at_least, at_most]` at every selected
//!   point: a column against a constant (`metric_model_exact` equal to 1, say).
//! - `slope`: ordinary least squares of ln(median column) on ln(x) over the selected points,
//!   per variant; the slope must lie in `[min, max]` (1 = linear scaling, -1 = perfect strong
//!   scaling in threads).
//! - `scaling`: for one variant, median(column at `param` = `from`) / median(column at
//!   `param` = `to`) with all other parameters equal (a speedup when `param` is `threads`), at
//!   least `at_least` for every such pair of points.
//! - `share`: the median over repetitions of `phase / wall time` lies within bounds.
//!
//! `at` keeps rows whose parameter equals a value; `max`/`min` keep the rows at the largest or
//! smallest value of that parameter (applied after the fixed values, in key order). Nothing is
//! skipped: a claim fails, saying what is missing, when its selection matches no row, when a
//! variant it names has no rows at a selected point, or when those rows lack the column, because
//! a claim that passed on whatever was left would hide a renamed variant, an emptied sweep or a
//! metric a variant stopped reporting. Cost: O(rows log rows) per claim.

use crate::experiment::config::{
    ClaimConfig, EquivalenceConfig, EquivalenceTest, ExperimentConfig,
};
use crate::family::{Params, ResultRow, Value};
use crate::util::column::Column;
use crate::util::stats::median;
use std::collections::{BTreeMap, BTreeSet};

/// The verdict on one claim, with measured and required values side by side in `detail`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimOutcome {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// Number of failing points listed in a detail before the rest are counted.
const MAX_LISTED: usize = 5;

// ---------------------------------------------------------------------------------------------
// The typed form.
// ---------------------------------------------------------------------------------------------

/// A claim resolved from its [`ClaimConfig`]; only [`resolve`] makes them (or tests, by hand).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedClaim {
    pub name: String,
    pub check: Check,
}

/// What a resolved claim checks. Variant names are ones the experiment runs, columns are result
/// columns (or parameters where noted), bounds are non-empty and ordered.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// Every `equiv_rel_error` is at most `max_rel_error`; with a `reference`, every other
    /// variant carries one at every point.
    Equivalence {
        max_rel_error: f64,
        reference: Option<String>,
    },
    /// `how`(median `column` of `left`, median `column` of `right`) at every selected point
    /// (`left` differs from `right`; `column` may be a parameter).
    Compare {
        how: Comparison,
        column: String,
        left: String,
        right: String,
        bounds: Bounds,
        at: Selection,
    },
    /// Paired differences of `variant` and `reference` over the values of `over`, per group
    /// of points equal but for `over`: their mean's 90% interval inside (-margin, margin).
    EquivalentOver {
        column: String,
        variant: String,
        reference: String,
        over: String,
        margin: f64,
        test: EquivalenceTest,
        at: Selection,
    },
    /// Median `column` of `variant` at every selected point.
    Bound {
        variant: String,
        column: String,
        bounds: Bounds,
        at: Selection,
    },
    /// Log-log slope of `column` against `x` per variant, within `range`.
    Slope {
        x: String,
        column: String,
        variants: Vec<String>,
        range: Bounds,
        at: Selection,
    },
    /// Median `column` at `param` = `from` over the one at `param` = `to`, per group of points
    /// equal but for `param`; with `over`, per group equal but for `param` and `over`, the
    /// lower end of the 90% interval of the mean of the ratios at each value of `over`. With
    /// `relative_to`, each median is first divided by that variant's at the same point.
    Scaling {
        variant: String,
        relative_to: Option<String>,
        column: String,
        param: String,
        from: End,
        to: End,
        over: Option<String>,
        bounds: Bounds,
        at: Selection,
    },
    /// Median share of `phase` in the wall time of `variant` at every selected point.
    Share {
        variant: String,
        phase: String,
        bounds: Bounds,
        at: Selection,
    },
}

/// How two variants' medians at one point are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Ratio,
    Difference,
}

/// One end of a `scaling` claim: a value of the parameter (a number, a switch or a name:
/// `delta: sparse`), or its numeric extreme in each group.
#[derive(Clone, Debug, PartialEq)]
pub enum End {
    Value(Value),
    Min,
    Max,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extreme {
    Min,
    Max,
}

/// An `at` selection: fixed values first, then extremes, each in key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    pub fixed: Vec<(String, Value)>,
    pub extremes: Vec<(String, Extreme)>,
}

/// `[at_least, at_most]`, either side open; never both open in a resolved claim.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub at_least: Option<f64>,
    pub at_most: Option<f64>,
}

/// One thing wrong with a claim, found by [`resolve`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimProblem {
    /// Index of the claim in the list given to [`resolve`].
    pub claim: usize,
    /// Keys below the claim's list item leading to the offending value (`["at", "size"]`);
    /// empty for the claim as a whole.
    pub path: Vec<String>,
    /// A word to point at inside that node (a variant name inside a list), when there is one.
    pub token: Option<String>,
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

/// What claims are resolved against.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The variants the experiment runs.
    pub variants: &'a [&'a str],
    /// Parameter names the family knows (`threads` and `backend` included); `None` accepts any.
    pub params: Option<&'a [&'a str]>,
    /// The experiment's `equivalence:` section (its `rel_tol` is the equivalence tolerance).
    pub equivalence: Option<&'a EquivalenceConfig>,
    /// The points the claims will be evaluated on; `None` skips the checks against the grid.
    pub grid: Option<Grid<'a>>,
}

/// The expanded points of a run, for the checks of claims against the grid.
#[derive(Clone, Copy, Debug)]
pub struct Grid<'a> {
    pub points: &'a [Params],
    /// Whether a fixed value (`at`, scaling `from`/`to`) absent from the grid, or a slope over
    /// one x value, is an error. False where the full claims are checked on a quick run's
    /// smaller grid: they may then fail at evaluation, saying so. A check that would let a claim
    /// pass vacuously (a scaling `from` and `to` on the same value) is made either way.
    pub exact: bool,
    /// The grid is a quick run's (for the messages).
    pub quick: bool,
}

impl Grid<'_> {
    fn name(&self) -> &'static str {
        if self.quick {
            "the quick grid"
        } else {
            "the grid"
        }
    }
}

impl<'a> Scope<'a> {
    /// The scope of a stored or finished run of `config` (`variants` holds its variants): no
    /// parameter list and no grid, which the plan already checked.
    pub fn of_run(config: &'a ExperimentConfig, variants: &'a [&'a str]) -> Self {
        Scope {
            variants,
            params: None,
            equivalence: config.equivalence.as_ref(),
            grid: None,
        }
    }
}

/// Resolves `claims` into their typed form, or says everything that is wrong with them.
pub fn resolve(
    claims: &[ClaimConfig],
    scope: &Scope,
) -> Result<Vec<ResolvedClaim>, Vec<ClaimProblem>> {
    let mut resolved = Vec::with_capacity(claims.len());
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for (i, claim) in claims.iter().enumerate() {
        if !names.insert(claim.name()) {
            problems.push(ClaimProblem {
                claim: i,
                path: vec!["name".to_string()],
                token: None,
                message: format!("claim name `{}` is used twice", claim.name()),
                help: Some("give each claim its own name".to_string()),
            });
        }
        match resolve_one(i, claim, scope) {
            Ok(r) => resolved.push(r),
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(resolved)
    } else {
        Err(problems)
    }
}

/// Whether `name` is a result column (not a parameter): see [`Column`].
pub fn is_result_column(name: &str) -> bool {
    Column::parse(name).is_some_and(|c| c.is_result())
}

/// Collects the problems of one claim while resolving it.
struct Resolver<'s, 'a> {
    scope: &'s Scope<'a>,
    index: usize,
    name: &'s str,
    problems: Vec<ClaimProblem>,
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

fn is_extreme(v: &Value) -> Option<Extreme> {
    match v.as_str() {
        Some("max") => Some(Extreme::Max),
        Some("min") => Some(Extreme::Min),
        _ => None,
    }
}

impl Resolver<'_, '_> {
    fn problem(
        &mut self,
        path: &[&str],
        token: Option<&str>,
        message: String,
        help: Option<String>,
    ) {
        self.problems.push(ClaimProblem {
            claim: self.index,
            path: path.iter().map(|k| k.to_string()).collect(),
            token: token.map(str::to_string),
            message: format!("claim `{}`{message}", self.name),
            help,
        });
    }

    fn params_help(&self, what: &str) -> String {
        format!(
            "{what}{}",
            self.scope
                .params
                .map(|p| format!(" ({})", list(p)))
                .unwrap_or_default()
        )
    }

    fn known_param(&self, name: &str) -> bool {
        self.scope.params.is_none_or(|p| p.contains(&name))
    }

    fn variant(&mut self, key: &str, name: &str) -> String {
        if !self.scope.variants.contains(&name) {
            let help = format!("use one of: {}", list(self.scope.variants));
            self.problem(
                &[key],
                Some(name),
                format!(": variant `{name}` is not among the variants run"),
                Some(help),
            );
        }
        name.to_string()
    }

    /// A result column, or (with `params_too`) a parameter.
    fn column(&mut self, column: &str, params_too: bool) -> String {
        let ok = is_result_column(column) || (params_too && self.known_param(column));
        if !ok {
            let mut help =
                "use `wall_time_s`, `equiv_rel_error`, `phase_<name>_s`, `metric_<name>`"
                    .to_string();
            if params_too {
                if let Some(p) = self.scope.params {
                    help.push_str(&format!(" or a parameter ({})", list(p)));
                }
            }
            self.problem(
                &["column"],
                None,
                format!(": unknown column `{column}`"),
                Some(help),
            );
        }
        column.to_string()
    }

    fn param(&mut self, key: &str, name: &str) {
        if !self.known_param(name) {
            let help = self.params_help("use a parameter");
            self.problem(
                &[key],
                None,
                format!(": unknown parameter `{name}`"),
                Some(help),
            );
        }
    }

    fn bounds(&mut self, at_least: Option<f64>, at_most: Option<f64>) -> Bounds {
        let bounds = Bounds { at_least, at_most };
        if bounds.is_empty() {
            self.problem(
                &[],
                None,
                " sets no bound".to_string(),
                Some("add `at_least:` and/or `at_most:`".to_string()),
            );
        }
        for (key, v) in [("at_least", at_least), ("at_most", at_most)] {
            if v.is_some_and(f64::is_nan) {
                self.problem(
                    &[key],
                    None,
                    format!(": `{key}` is NaN"),
                    Some("give a number".to_string()),
                );
            }
        }
        if let (Some(lo), Some(hi)) = (at_least, at_most) {
            if lo > hi {
                self.problem(
                    &["at_least"],
                    None,
                    format!(": at_least {lo} is above at_most {hi}, so nothing can pass"),
                    Some("swap them".to_string()),
                );
            }
        }
        bounds
    }

    /// Two operands of a ratio or difference must differ: a variant against itself is 1 (or 0)
    /// at every point, whatever was measured.
    fn distinct(&mut self, how: Comparison, keys: (&str, &str), left: &str, right: &str) {
        if left == right {
            let result = match how {
                Comparison::Ratio => "the ratio is 1",
                Comparison::Difference => "the difference is 0",
            };
            self.problem(
                &[keys.1],
                Some(right),
                format!(
                    ": {} and {} are both `{left}`, so {result} at every point whatever was measured",
                    keys.0, keys.1
                ),
                Some(
                    "compare two different variants, or a column with a constant: `kind: bound`"
                        .to_string(),
                ),
            );
        }
    }

    fn selection(&mut self, at: &BTreeMap<String, Value>) -> Selection {
        let mut sel = Selection::default();
        for (key, value) in at {
            if !self.known_param(key) {
                let help = self.params_help("use a parameter");
                self.problem(
                    &["at", key],
                    None,
                    format!(": `at` names unknown parameter `{key}`"),
                    Some(help),
                );
                continue;
            }
            match is_extreme(value) {
                Some(e) => sel.extremes.push((key.clone(), e)),
                None => sel.fixed.push((key.clone(), value.clone())),
            }
        }
        if let Some(grid) = self.scope.grid {
            self.selection_on_grid(&sel, grid);
        }
        sel
    }

    fn selection_on_grid(&mut self, sel: &Selection, grid: Grid) {
        let on = |p: &Params, key: &str| p.get(key).cloned();
        for (key, value) in &sel.fixed {
            let in_grid = grid
                .points
                .iter()
                .any(|p| p.get(key).is_some_and(|v| v.same_as(value)));
            if grid.exact && !in_grid {
                self.problem(
                    &["at", key],
                    None,
                    format!(
                        ": `at: {{{key}: {value}}}` matches no point of {}",
                        grid.name()
                    ),
                    Some(format!(
                        "use a value `{key}` takes in `params`/`sweep`, or `max` / `min`"
                    )),
                );
            }
        }
        for (key, e) in &sel.extremes {
            let numeric = grid
                .points
                .iter()
                .any(|p| on(p, key).and_then(|v| v.as_ordinal()).is_some());
            if !numeric {
                let word = if *e == Extreme::Max { "max" } else { "min" };
                self.problem(
                    &["at", key],
                    None,
                    format!(
                        ": `at: {{{key}: {word}}}` needs numeric values of `{key}`, and {} has none",
                        grid.name()
                    ),
                    Some(format!(
                        "set `{key}` in `params`/`sweep` to numbers, or select a fixed value"
                    )),
                );
            }
        }
    }
}

fn resolve_one(
    index: usize,
    claim: &ClaimConfig,
    scope: &Scope,
) -> Result<ResolvedClaim, Vec<ClaimProblem>> {
    let mut r = Resolver {
        scope,
        index,
        name: claim.name(),
        problems: Vec::new(),
    };
    let check = match claim {
        ClaimConfig::Equivalence { max_rel_error, .. } => {
            let eq = scope.equivalence;
            if eq.is_none() {
                r.problem(
                    &[],
                    None,
                    " checks equivalence, but the experiment has no `equivalence:` section"
                        .to_string(),
                    Some("add `equivalence: {reference: VARIANT, rel_tol: TOL}`".to_string()),
                );
            }
            let tolerance = match (max_rel_error, eq) {
                (Some(m), _) if m.is_nan() || *m < 0.0 => {
                    r.problem(
                        &["max_rel_error"],
                        None,
                        format!(": max_rel_error is {m}"),
                        Some("leave it out: the claim uses `equivalence.rel_tol`".to_string()),
                    );
                    *m
                }
                (Some(m), Some(eq)) if *m != eq.rel_tol => {
                    r.problem(
                        &["max_rel_error"],
                        None,
                        format!(
                            ": max_rel_error {m} differs from `equivalence.rel_tol` {}, the experiment's one equivalence tolerance",
                            eq.rel_tol
                        ),
                        Some(
                            "leave max_rel_error out (the claim uses rel_tol), or change rel_tol"
                                .to_string(),
                        ),
                    );
                    *m
                }
                (Some(m), _) => *m,
                (None, Some(eq)) => eq.rel_tol,
                (None, None) => f64::NAN,
            };
            Check::Equivalence {
                max_rel_error: tolerance,
                reference: eq.map(|e| e.reference.clone()),
            }
        }
        ClaimConfig::Ratio {
            column,
            numerator,
            denominator,
            at_least,
            at_most,
            at,
            ..
        } => {
            let left = r.variant("numerator", numerator);
            let right = r.variant("denominator", denominator);
            r.distinct(
                Comparison::Ratio,
                ("numerator", "denominator"),
                &left,
                &right,
            );
            Check::Compare {
                how: Comparison::Ratio,
                column: r.column(column, true),
                left,
                right,
                bounds: r.bounds(*at_least, *at_most),
                at: r.selection(at),
            }
        }
        ClaimConfig::Difference {
            column,
            minuend,
            subtrahend,
            at_least,
            at_most,
            at,
            ..
        } => {
            let left = r.variant("minuend", minuend);
            let right = r.variant("subtrahend", subtrahend);
            r.distinct(
                Comparison::Difference,
                ("minuend", "subtrahend"),
                &left,
                &right,
            );
            Check::Compare {
                how: Comparison::Difference,
                column: r.column(column, true),
                left,
                right,
                bounds: r.bounds(*at_least, *at_most),
                at: r.selection(at),
            }
        }
        ClaimConfig::EquivalentOver {
            column,
            variant,
            reference,
            over,
            margin,
            test,
            at,
            ..
        } => {
            let left = r.variant("variant", variant);
            let right = r.variant("reference", reference);
            r.distinct(
                Comparison::Difference,
                ("variant", "reference"),
                &left,
                &right,
            );
            r.param("over", over);
            if !(margin.is_finite() && *margin > 0.0) {
                r.problem(
                    &["margin"],
                    None,
                    format!(": `margin: {margin}` must be a positive number"),
                    Some("give the largest difference that still counts as equivalent".to_string()),
                );
            }
            let at = r.selection(at);
            across_on_grid(&mut r, over, &at);
            Check::EquivalentOver {
                column: r.column(column, false),
                variant: left,
                reference: right,
                over: over.clone(),
                margin: *margin,
                test: *test,
                at,
            }
        }
        ClaimConfig::Bound {
            variant,
            column,
            at_least,
            at_most,
            at,
            ..
        } => Check::Bound {
            variant: r.variant("variant", variant),
            column: r.column(column, false),
            bounds: r.bounds(*at_least, *at_most),
            at: r.selection(at),
        },
        ClaimConfig::Slope {
            x,
            column,
            variants,
            min,
            max,
            at,
            ..
        } => {
            if variants.is_empty() {
                let help = format!("list some of: {}", list(scope.variants));
                r.problem(
                    &["variants"],
                    None,
                    ": no variants listed".to_string(),
                    Some(help),
                );
            }
            let variants: Vec<String> = variants.iter().map(|v| r.variant("variants", v)).collect();
            if !(x.starts_with("metric_") || r.known_param(x)) {
                let help = r.params_help("use a parameter");
                r.problem(
                    &["x"],
                    None,
                    format!(": unknown x `{x}`"),
                    Some(format!("{help} or a `metric_<name>` column")),
                );
            }
            if min.is_nan() || max.is_nan() || min > max {
                r.problem(
                    &["min"],
                    None,
                    format!(": min {min} is above max {max}"),
                    Some("swap them".to_string()),
                );
            }
            let at = r.selection(at);
            if !x.starts_with("metric_") {
                slope_on_grid(&mut r, x, &at);
            }
            Check::Slope {
                x: x.clone(),
                column: r.column(column, false),
                variants,
                range: Bounds {
                    at_least: Some(*min),
                    at_most: Some(*max),
                },
                at,
            }
        }
        ClaimConfig::Scaling {
            variant,
            column,
            param,
            from,
            to,
            at_least,
            over,
            relative_to,
            at,
            ..
        } => {
            let variant = r.variant("variant", variant);
            let relative_to = relative_to.as_ref().map(|other| {
                let other = r.variant("relative_to", other);
                r.distinct(
                    Comparison::Ratio,
                    ("variant", "relative_to"),
                    &variant,
                    &other,
                );
                other
            });
            r.param("param", param);
            if let Some(over) = over {
                r.param("over", over);
                if over == param {
                    r.problem(
                        &["over"],
                        Some(over),
                        format!(": `over: {over}` is the parameter the claim scales over"),
                        Some("test across another swept parameter (seeds, say)".to_string()),
                    );
                }
            }
            let column = r.column(column, false);
            let end = |v: &Value| match is_extreme(v) {
                Some(Extreme::Max) => End::Max,
                Some(Extreme::Min) => End::Min,
                None => End::Value(v.clone()),
            };
            let (from, to) = (end(from), end(to));
            let bounds = r.bounds(Some(*at_least), None);
            let at = r.selection(at);
            if from == to {
                let what = match &from {
                    End::Value(v) => format!("are both {param}={}", fmt_param(v)),
                    End::Min => "are both `min`".to_string(),
                    End::Max => "are both `max`".to_string(),
                };
                r.problem(
                    &["to"],
                    None,
                    format!(": `from` and `to` {what}, so the claim compares a point with itself (a ratio of 1 whatever was measured)"),
                    Some(format!("give two different values of `{param}`, or `min` and `max`")),
                );
            } else {
                scaling_on_grid(&mut r, param, (&from, &to), &at);
            }
            if let Some(over) = over.as_deref().filter(|&o| o != param) {
                across_on_grid(&mut r, over, &at);
            }
            Check::Scaling {
                variant,
                relative_to,
                column,
                param: param.clone(),
                from,
                to,
                over: over.clone(),
                bounds,
                at,
            }
        }
        ClaimConfig::Share {
            variant,
            phase,
            at_least,
            at_most,
            at,
            ..
        } => Check::Share {
            variant: r.variant("variant", variant),
            phase: phase.clone(),
            bounds: r.bounds(*at_least, *at_most),
            at: r.selection(at),
        },
    };
    if r.problems.is_empty() {
        Ok(ResolvedClaim {
            name: claim.name().to_string(),
            check,
        })
    } else {
        Err(r.problems)
    }
}

/// The grid's points that `at` selects, or `None` (no grid, or an empty selection, which the
/// `at` checks or the evaluation report).
fn grid_selection<'g>(
    grid: Option<Grid<'g>>,
    at: &Selection,
) -> Option<(Vec<&'g Params>, Grid<'g>)> {
    let grid = grid?;
    let points = at.apply(grid.points, |p, k| p.get(k).cloned()).ok()?;
    Some((points, grid))
}

/// A slope over a parameter needs two values of it among the selected points.
fn slope_on_grid(r: &mut Resolver, x: &str, at: &Selection) {
    let Some((points, grid)) = grid_selection(r.scope.grid, at) else {
        return;
    };
    let values = distinct_numbers(points.iter().filter_map(|p| p.get(x)?.as_f64()));
    if grid.exact && values.len() < 2 {
        let shown: Vec<String> = values.iter().map(|v| fmt_value(*v)).collect();
        r.problem(
            &["x"],
            None,
            format!(
                ": `{x}` takes {} value(s) ({}) at the points selected on {}, so no slope can be fitted",
                values.len(),
                shown.join(", "),
                grid.name()
            ),
            Some(format!(
                "sweep two or more values of `{x}`, or select more points with `at`"
            )),
        );
    }
}

/// The parameter a claim tests across (`equivalent_over`'s `over`, a `scaling` claim's) on the
/// grid: every group of selected points equal but for `over` must have two or more of its values
/// (a mean's interval needs two).
fn across_on_grid(r: &mut Resolver, over: &str, at: &Selection) {
    let Some((points, grid)) = grid_selection(r.scope.grid, at) else {
        return;
    };
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for p in &points {
        *groups.entry(key_but(p, &[over])).or_default() += 1;
    }
    if let Some((key, _)) = groups.iter().find(|(_, &n)| n < 2) {
        let place = if key.is_empty() {
            String::new()
        } else {
            format!(" (at {key})")
        };
        r.problem(
            &["over"],
            None,
            format!(
                ": `{over}` takes one value on {}{place}, and a test across it needs two or more",
                grid.name()
            ),
            Some(format!(
                "sweep two or more values of `{over}` (five seeds, say)"
            )),
        );
    }
}

/// `from` and `to` of a scaling claim on the grid: in every group of selected points equal but
/// for `param`, both must exist and differ.
fn scaling_on_grid(r: &mut Resolver, param: &str, (from, to): (&End, &End), at: &Selection) {
    let Some((points, grid)) = grid_selection(r.scope.grid, at) else {
        return;
    };
    let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for p in &points {
        let x = p.get(param).cloned();
        groups.entry(key_but(p, &[param])).or_default().extend(x);
    }
    let mut absent: BTreeSet<&str> = BTreeSet::new();
    for (key, values) in &groups {
        let values = distinct_values(values.iter());
        let shown: Vec<String> = values.iter().map(|v| fmt_param(v)).collect();
        let place = if key.is_empty() {
            String::new()
        } else {
            format!(" (at {key})")
        };
        if values.is_empty() {
            r.problem(
                &["param"],
                None,
                format!(
                    ": `{param}` has no value at the points selected on {}{place}",
                    grid.name()
                ),
                Some("scale over a parameter set in `params`/`sweep`".to_string()),
            );
            return;
        }
        let (x_from, x_to) = (from.resolve(&values), to.resolve(&values));
        if let (Some(a), Some(b)) = (x_from, x_to) {
            if a.same_as(b) {
                r.problem(
                    &["to"],
                    None,
                    format!(
                        ": `from` and `to` both resolve to {param}={} on {}{place}, where `{param}` takes only {}, so the claim compares a point with itself (a ratio of 1 whatever was measured)",
                        fmt_param(a),
                        grid.name(),
                        shown.join(", ")
                    ),
                    Some(format!(
                        "sweep two or more values of `{param}` there, or give two values it takes"
                    )),
                );
                return;
            }
        }
        for (key, end, x) in [("from", from, x_from), ("to", to, x_to)] {
            if x.is_some() || !grid.exact || !absent.insert(key) {
                continue;
            }
            let what = match end {
                End::Value(v) => format!("`{key}: {}` matches no point", fmt_param(v)),
                _ => format!("`{key}: {end}` has no numeric value to pick"),
            };
            r.problem(
                &[key],
                None,
                format!(
                    ": {what} of {}{place}, where `{param}` takes {}",
                    grid.name(),
                    shown.join(", ")
                ),
                Some(format!(
                    "use a value `{param}` takes, or `max` / `min` of a numeric one"
                )),
            );
        }
    }
}

/// The distinct values of a parameter (by [`Value::same_as`]), numbers and switches in
/// ascending order first, then names in theirs.
fn distinct_values<'v>(values: impl Iterator<Item = &'v Value>) -> Vec<&'v Value> {
    let mut v: Vec<&Value> = Vec::new();
    for x in values {
        if !x.as_ordinal().is_some_and(f64::is_nan) && !v.iter().any(|y| y.same_as(x)) {
            v.push(x);
        }
    }
    v.sort_by(|a, b| match (a.as_ordinal(), b.as_ordinal()) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.to_string().cmp(&b.to_string()),
    });
    v
}

/// A parameter value as a claim's text shows it: numbers and switches as numbers (`full=1`),
/// names as written.
fn fmt_param(v: &Value) -> String {
    v.as_ordinal().map_or_else(|| v.to_string(), fmt_value)
}

/// Sorted distinct values (parameter values are stored exactly, so exact equality, as
/// [`Value::same_as`]).
fn distinct_numbers(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// A parameter value as written: integers without a decimal point.
fn fmt_value(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

impl End {
    /// The value this end picks among `values` (as [`distinct_values`] orders them); `None` for
    /// a fixed value not among them, or an extreme where no value is a number.
    fn resolve<'v>(&self, values: &[&'v Value]) -> Option<&'v Value> {
        let mut numeric = values.iter().copied().filter(|v| v.as_ordinal().is_some());
        match self {
            End::Min => numeric.next(),
            End::Max => numeric.next_back(),
            End::Value(v) => values.iter().copied().find(|x| x.same_as(v)),
        }
    }
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Min => write!(f, "min"),
            End::Max => write!(f, "max"),
            End::Value(v) => write!(f, "{}", fmt_param(v)),
        }
    }
}

impl Selection {
    /// The items whose values (`get(item, key)`) match: fixed values first, then extremes over
    /// what is left. `Err` explains why nothing is left.
    fn apply<'t, T>(
        &self,
        items: &'t [T],
        get: impl Fn(&T, &str) -> Option<Value>,
    ) -> Result<Vec<&'t T>, String> {
        let mut selected: Vec<&T> = items.iter().collect();
        if selected.is_empty() {
            return Err("no rows".to_string());
        }
        for (key, wanted) in &self.fixed {
            selected.retain(|item| get(item, key).is_some_and(|v| v.same_as(wanted)));
            if selected.is_empty() {
                return Err(format!("no rows with {key}={wanted}"));
            }
        }
        for (key, extreme) in &self.extremes {
            let number = |item: &T| get(item, key).and_then(|v| v.as_ordinal());
            let values: Vec<f64> = selected.iter().filter_map(|i| number(i)).collect();
            let word = if *extreme == Extreme::Max {
                "max"
            } else {
                "min"
            };
            let target = match extreme {
                Extreme::Max => values.iter().copied().reduce(f64::max),
                Extreme::Min => values.iter().copied().reduce(f64::min),
            };
            let Some(target) = target else {
                return Err(format!(
                    "no rows with a numeric `{key}` (at: {key}: {word})"
                ));
            };
            selected.retain(|item| number(item) == Some(target));
        }
        Ok(selected)
    }

    fn rows<'r>(&self, rows: &'r [ResultRow]) -> Result<Vec<&'r ResultRow>, String> {
        self.apply(rows, row_value)
    }
}

/// What `at` compares for a row: its parameter, `variant`, or a numeric column.
fn row_value(row: &ResultRow, key: &str) -> Option<Value> {
    if let Some(v) = row.params.get(key) {
        return Some(v.clone());
    }
    if key == "variant" {
        return Some(Value::Str(row.variant.clone()));
    }
    column(row, key).map(Value::Float)
}

// ---------------------------------------------------------------------------------------------
// Evaluation.
// ---------------------------------------------------------------------------------------------

/// The value of a named column of a row, or of a bare numeric parameter: see
/// [`Column::reference`]. `None` when the row has no such (numeric) value.
pub fn column(row: &ResultRow, name: &str) -> Option<f64> {
    Column::reference(name).value(row)
}

/// Evaluates every claim of `config` (the merged configuration of the run: on a quick run, the
/// quick claims where given) against `rows`, all rows of one run. A claim that does not
/// resolve (a stored experiment file from before a rule was added, say) fails and says why.
pub fn evaluate(config: &ExperimentConfig, rows: &[ResultRow]) -> Vec<ClaimOutcome> {
    let variants: Vec<&str> = config.variants.iter().map(String::as_str).collect();
    let scope = Scope::of_run(config, &variants);
    let labels = PointLabels::new(rows);
    config
        .claims
        .iter()
        .enumerate()
        .map(|(i, claim)| match resolve_one(i, claim, &scope) {
            Ok(resolved) => evaluate_one(&resolved, rows, &labels),
            Err(problems) => ClaimOutcome {
                name: claim.name().to_string(),
                passed: false,
                detail: format!(
                    "invalid claim: {}",
                    problems
                        .iter()
                        .map(|p| p.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            },
        })
        .collect()
}

/// Evaluates resolved claims against `rows` (all rows of one run).
pub fn evaluate_resolved(claims: &[ResolvedClaim], rows: &[ResultRow]) -> Vec<ClaimOutcome> {
    let labels = PointLabels::new(rows);
    claims
        .iter()
        .map(|c| evaluate_one(c, rows, &labels))
        .collect()
}

fn evaluate_one(claim: &ResolvedClaim, rows: &[ResultRow], labels: &PointLabels) -> ClaimOutcome {
    let (passed, detail) = match &claim.check {
        Check::Equivalence {
            max_rel_error,
            reference,
        } => equivalence(rows, *max_rel_error, reference.as_deref(), labels),
        Check::Compare {
            how,
            column,
            left,
            right,
            bounds,
            at,
        } => compare(rows, column, (left, right), *how, *bounds, at, labels),
        Check::Bound {
            variant,
            column,
            bounds,
            at,
        } => bound(rows, variant, column, *bounds, at, labels),
        Check::EquivalentOver {
            column,
            variant,
            reference,
            over,
            margin,
            test,
            at,
        } => equivalent_over(
            rows,
            column,
            (variant, reference),
            over,
            (*margin, *test),
            at,
            labels,
        ),
        Check::Slope {
            x,
            column,
            variants,
            range,
            at,
        } => slope(rows, x, column, variants, *range, at, labels),
        Check::Scaling {
            variant,
            relative_to,
            column,
            param,
            from,
            to,
            over,
            bounds,
            at,
        } => scaling(
            rows,
            (variant, relative_to.as_deref(), column),
            param,
            (from, to),
            over.as_deref(),
            *bounds,
            at,
            labels,
        ),
        Check::Share {
            variant,
            phase,
            bounds,
            at,
        } => share(rows, variant, phase, *bounds, at, labels),
    };
    ClaimOutcome {
        name: claim.name.clone(),
        passed,
        detail,
    }
}

/// Renders a point by the parameters that vary across the run (`docs=5000, threads=2`), which
/// are the ones a reader needs to tell points apart.
struct PointLabels {
    varying: Vec<String>,
}

impl PointLabels {
    fn new(rows: &[ResultRow]) -> Self {
        let mut values: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for row in rows {
            for (k, v) in &row.params {
                let seen = values.entry(k).or_default();
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
        }
        let varying = values
            .into_iter()
            .filter(|(k, vs)| vs.len() > 1 || rows.iter().any(|r| !r.params.contains_key(*k)))
            .map(|(k, _)| k.to_string())
            .collect();
        PointLabels { varying }
    }

    fn label(&self, row: &ResultRow) -> String {
        let parts: Vec<String> = self
            .varying
            .iter()
            .filter_map(|k| row.params.get(k).map(|v| format!("{k}={v}")))
            .collect();
        if parts.is_empty() {
            "the only point".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// Formats a measured number for a detail line: enough digits to compare with a bound, no more.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 {
        "0".to_string()
    } else if !x.is_finite() {
        format!("{x}")
    } else if !(1e-3..1e4).contains(&a) {
        format!("{x:.3e}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

impl Bounds {
    fn is_empty(&self) -> bool {
        self.at_least.is_none() && self.at_most.is_none()
    }
    fn holds(&self, x: f64) -> bool {
        // NaN fails both comparisons, so a NaN measurement never passes; neither does anything
        // against no bound at all.
        !self.is_empty()
            && self.at_least.is_none_or(|lo| x >= lo)
            && self.at_most.is_none_or(|hi| x <= hi)
            && !x.is_nan()
    }
    /// How far inside the bounds `x` is (negative when outside), to pick the point to show.
    fn margin(&self, x: f64) -> f64 {
        let lo = self.at_least.map_or(f64::INFINITY, |lo| x - lo);
        let hi = self.at_most.map_or(f64::INFINITY, |hi| hi - x);
        lo.min(hi)
    }
    fn required(&self) -> String {
        match (self.at_least, self.at_most) {
            (Some(lo), Some(hi)) => format!("required >= {lo} and <= {hi}"),
            (Some(lo), None) => format!("required >= {lo}"),
            (None, Some(hi)) => format!("required <= {hi}"),
            (None, None) => "no bound given: set at_least and/or at_most".to_string(),
        }
    }
}

/// One finding of a claim at one point: passed, margin (to pick the tightest), text.
type Finding = (bool, f64, String);

/// A finding for something missing: it fails, and sorts before every measured failure.
fn missing(text: String) -> Finding {
    (false, f64::NEG_INFINITY, text)
}

/// The selected rows grouped by point, in point order.
fn by_point<'r>(rows: &[&'r ResultRow]) -> BTreeMap<usize, Vec<&'r ResultRow>> {
    let mut points: BTreeMap<usize, Vec<&ResultRow>> = BTreeMap::new();
    for &row in rows {
        points.entry(row.point).or_default().push(row);
    }
    points
}

/// Median of `col` over the rows of `variant` among `rows` (one point), or what is missing.
fn median_of(rows: &[&ResultRow], variant: &str, col: &str) -> Result<f64, String> {
    let of_variant: Vec<&&ResultRow> = rows.iter().filter(|r| r.variant == variant).collect();
    if of_variant.is_empty() {
        return Err(format!("no rows of `{variant}`"));
    }
    let values: Vec<f64> = of_variant.iter().filter_map(|r| column(r, col)).collect();
    median(&values)
        .ok_or_else(|| format!("`{variant}` reports no `{col}` ({} rows)", of_variant.len()))
}

/// Joins per-point findings, listing failures first and counting what is not listed.
fn summarize(mut findings: Vec<Finding>, bounds: &Bounds) -> (bool, String) {
    let total = findings.len();
    if total == 0 {
        return (false, format!("no points ({})", bounds.required()));
    }
    let failed = findings.iter().filter(|f| !f.0).count();
    if failed == 0 {
        // Show the tightest point: the one a regression would break first.
        findings.sort_by(|a, b| a.1.total_cmp(&b.1));
        let text = &findings[0].2;
        let scope = if total == 1 {
            String::new()
        } else {
            format!("; tightest of {total} points, all pass")
        };
        (true, format!("{text} ({}){scope}", bounds.required()))
    } else {
        // Missing points first (their margin is -inf), then in point order.
        findings.sort_by(|a, b| (a.1 > f64::NEG_INFINITY).cmp(&(b.1 > f64::NEG_INFINITY)));
        let listed: Vec<&str> = findings
            .iter()
            .filter(|f| !f.0)
            .take(MAX_LISTED)
            .map(|f| f.2.as_str())
            .collect();
        let more = if failed > MAX_LISTED {
            format!(", and {} more", failed - MAX_LISTED)
        } else {
            String::new()
        };
        (
            false,
            format!(
                "{}{more} ({}); {failed} of {total} points fail",
                listed.join("; "),
                bounds.required()
            ),
        )
    }
}

fn equivalence(
    rows: &[ResultRow],
    max_rel_error: f64,
    reference: Option<&str>,
    labels: &PointLabels,
) -> (bool, String) {
    let required = format!("required <= {max_rel_error}");
    let mut worst_by_variant: BTreeMap<&str, (f64, &ResultRow)> = BTreeMap::new();
    for row in rows {
        if let Some(err) = row.equiv_rel_error {
            let entry = worst_by_variant.entry(&row.variant).or_insert((err, row));
            // total_cmp puts NaN above every number, so a NaN error is the worst.
            if err.total_cmp(&entry.0).is_gt() {
                *entry = (err, row);
            }
        }
    }
    if worst_by_variant.is_empty() {
        return (
            false,
            format!("no rows carry an equivalence error (is `equivalence:` set, with more than one variant?) ({required})"),
        );
    }
    // Every variant but the reference is compared at every point; one that was not is missing,
    // not agreeing.
    let mut uncompared: Vec<String> = Vec::new();
    if let Some(reference) = reference {
        let mut groups: BTreeMap<(usize, &str), (bool, &ResultRow)> = BTreeMap::new();
        for row in rows.iter().filter(|r| r.variant != reference) {
            let entry = groups
                .entry((row.point, &row.variant))
                .or_insert((false, row));
            entry.0 |= row.equiv_rel_error.is_some();
        }
        uncompared = groups
            .iter()
            .filter(|(_, (has, _))| !has)
            .map(|((_, v), (_, row))| {
                format!("`{v}` has no equivalence error at {}", labels.label(row))
            })
            .collect();
    }
    let passed = uncompared.is_empty()
        && worst_by_variant
            .values()
            .all(|(err, _)| *err <= max_rel_error);
    let mut parts: Vec<String> = Vec::new();
    let n_uncompared = uncompared.len();
    parts.extend(uncompared.into_iter().take(MAX_LISTED));
    if n_uncompared > MAX_LISTED {
        parts.push(format!("and {} more uncompared", n_uncompared - MAX_LISTED));
    }
    parts.extend(worst_by_variant.iter().map(|(variant, (err, row))| {
        format!(
            "{variant}: max rel error {} at {}",
            fmt_num(*err),
            labels.label(row)
        )
    }));
    (passed, format!("{} ({required})", parts.join("; ")))
}

impl Comparison {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Comparison::Ratio => a / b,
            Comparison::Difference => a - b,
        }
    }
    fn pair(self, a: &str, b: &str) -> String {
        match self {
            Comparison::Ratio => format!("{a}/{b}"),
            Comparison::Difference => format!("{a} - {b}"),
        }
    }
    fn describe(self, a: &str, b: &str, value: f64) -> String {
        match self {
            Comparison::Ratio => format!("{a}/{b} = {}x", fmt_num(value)),
            Comparison::Difference => format!("{a} - {b} = {}", fmt_num(value)),
        }
    }
}

/// Compares variant `a` with variant `b` on `col` at every selected point.
fn compare(
    rows: &[ResultRow],
    col: &str,
    (a, b): (&str, &str),
    how: Comparison,
    bounds: Bounds,
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    let pair = how.pair(a, b);
    let selected = match at.rows(rows) {
        Ok(s) => s,
        Err(why) => return (false, format!("{pair}: {why} ({})", bounds.required())),
    };
    let findings = by_point(&selected)
        .values()
        .map(|at_point| {
            let label = labels.label(at_point[0]);
            match (median_of(at_point, a, col), median_of(at_point, b, col)) {
                (Ok(x), Ok(y)) => {
                    let v = how.apply(x, y);
                    (
                        bounds.holds(v),
                        bounds.margin(v),
                        format!("{} at {label}", how.describe(a, b, v)),
                    )
                }
                (Err(why), _) | (_, Err(why)) => missing(format!("{pair}: {why} at {label}")),
            }
        })
        .collect();
    summarize(findings, &bounds)
}

/// The point's key without `excluded`: equal for points that differ only in those parameters.
fn key_but(params: &Params, excluded: &[&str]) -> String {
    let mut others = params.clone();
    for param in excluded {
        others.remove(*param);
    }
    crate::experiment::plan::point_key(&others)
}

/// The rows grouped into points that differ only in the parameters `excluded` (in key order),
/// each group with where it is (" at k=v, ..." over the parameters that vary in the run,
/// `excluded` aside).
fn groups_but<'r>(
    rows: &[&'r ResultRow],
    excluded: &[&str],
    labels: &PointLabels,
) -> Vec<(String, Vec<&'r ResultRow>)> {
    let mut groups: BTreeMap<String, Vec<&ResultRow>> = BTreeMap::new();
    for &row in rows {
        groups
            .entry(key_but(&row.params, excluded))
            .or_default()
            .push(row);
    }
    groups
        .into_values()
        .map(|group| {
            let others: Vec<String> = labels
                .varying
                .iter()
                .filter(|k| !excluded.contains(&k.as_str()))
                .filter_map(|k| group[0].params.get(k).map(|v| format!("{k}={v}")))
                .collect();
            let place = if others.is_empty() {
                String::new()
            } else {
                format!(" at {}", others.join(", "))
            };
            (place, group)
        })
        .collect()
}

/// Student's t quantile at 0.95 (one-sided) for `df` degrees of freedom: 1 to 30 from the
/// table, the normal's 1.645 beyond (where the table's 30 is 1.697).
fn t95(df: usize) -> f64 {
    const T95: [f64; 30] = [
        6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771,
        1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706,
        1.703, 1.701, 1.699, 1.697,
    ];
    T95.get(df.wrapping_sub(1)).copied().unwrap_or(1.645)
}

/// The mean of `values` and its 90% interval (Student's t: each end a one-sided test at the
/// 5% level); `None` for fewer than two values.
fn mean_interval(values: &[f64]) -> Option<(f64, f64, f64)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t95(n - 1) * (var / n as f64).sqrt();
    Some((mean, mean - half, mean + half))
}

/// An interval's end: a digit more than `fmt_num` where the ends sit near a bound a few
/// hundredths away.
fn fmt_end(x: f64) -> String {
    if x.abs() < 10.0 {
        format!("{x:.4}")
    } else {
        fmt_num(x)
    }
}

/// Two one-sided tests of `a` against `b` in `col` over the values of `over`: per group of
/// selected points equal but for `over`, the differences of the two variants' medians at each
/// value, their mean and its 90% interval, which must lie inside (-margin, margin) (above
/// -margin for non-inferiority).
fn equivalent_over(
    rows: &[ResultRow],
    col: &str,
    (a, b): (&str, &str),
    over: &str,
    (margin, test): (f64, EquivalenceTest),
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    let bounds = Bounds {
        at_least: Some(-margin),
        at_most: (test == EquivalenceTest::Equivalence).then_some(margin),
    };
    let pair = format!("{a} - {b}");
    let selected = match at.rows(rows) {
        Ok(s) => s,
        Err(why) => return (false, format!("{pair}: {why} ({})", bounds.required())),
    };
    let findings = groups_but(&selected, &[over], labels)
        .into_iter()
        .map(|(place, group)| {
            let mut diffs = Vec::new();
            for at_value in by_point(&group).values() {
                let value = at_value[0]
                    .params
                    .get(over)
                    .map_or_else(|| "?".to_string(), ToString::to_string);
                match (median_of(at_value, a, col), median_of(at_value, b, col)) {
                    (Ok(x), Ok(y)) => diffs.push(x - y),
                    (Err(why), _) | (_, Err(why)) => {
                        return missing(format!("{pair}: {why} at {over}={value}{place}"))
                    }
                }
            }
            let n = diffs.len();
            let Some((mean, lo, hi)) = mean_interval(&diffs) else {
                return missing(format!(
                    "{pair}: {n} value(s) of `{over}`{place}, and a mean's interval needs two or more"
                ));
            };
            let passed = lo > -margin
                && (test == EquivalenceTest::NonInferiority || hi < margin)
                && !mean.is_nan();
            (
                passed,
                bounds.margin(lo).min(bounds.margin(hi)),
                format!(
                    "{pair} in `{col}`: mean {} over {n} values of `{over}`{place}, 90% interval [{}, {}]",
                    fmt_num(mean),
                    fmt_end(lo),
                    fmt_end(hi)
                ),
            )
        })
        .collect();
    summarize(findings, &bounds)
}

/// The median of one variant's column against constant bounds at every selected point.
fn bound(
    rows: &[ResultRow],
    variant: &str,
    col: &str,
    bounds: Bounds,
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    bounded_per_point(rows, variant, bounds, at, labels, |at_point, label| {
        median_of(at_point, variant, col)
            .map(|v| (v, format!("{variant}: {col} = {} at {label}", fmt_num(v))))
            .map_err(|why| format!("{variant}: {why} at {label}"))
    })
}

/// The skeleton of the claims that hold one value per selected point within constant bounds
/// (`bound`, `share`): `value(rows at the point, its label)` gives the value and its text, or
/// what is missing there (a failure, never a skipped point).
fn bounded_per_point(
    rows: &[ResultRow],
    variant: &str,
    bounds: Bounds,
    at: &Selection,
    labels: &PointLabels,
    value: impl Fn(&[&ResultRow], &str) -> Result<(f64, String), String>,
) -> (bool, String) {
    let selected = match at.rows(rows) {
        Ok(s) => s,
        Err(why) => return (false, format!("{variant}: {why} ({})", bounds.required())),
    };
    let findings = by_point(&selected)
        .values()
        .map(
            |at_point| match value(at_point, &labels.label(at_point[0])) {
                Ok((v, text)) => (bounds.holds(v), bounds.margin(v), text),
                Err(why) => missing(why),
            },
        )
        .collect();
    summarize(findings, &bounds)
}

fn slope(
    rows: &[ResultRow],
    x: &str,
    col: &str,
    variants: &[String],
    range: Bounds,
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    let (min, max) = (
        range.at_least.unwrap_or(f64::NEG_INFINITY),
        range.at_most.unwrap_or(f64::INFINITY),
    );
    let required = format!("required in [{min}, {max}]");
    let selected = match at.rows(rows) {
        Ok(s) => s,
        Err(why) => return (false, format!("{why} ({required})")),
    };
    if variants.is_empty() {
        return (false, format!("no variants listed ({required})"));
    }
    let points = by_point(&selected);
    let mut passed = true;
    let mut parts = Vec::new();
    for variant in variants {
        // Every selected point must give a positive x and y: a point left out would bend the
        // fit without a word.
        let mut usable: Vec<(f64, f64)> = Vec::new();
        let mut gaps: Vec<String> = Vec::new();
        for at_point in points.values() {
            let label = labels.label(at_point[0]);
            match (median_of(at_point, variant, x), median_of(at_point, variant, col)) {
                (Ok(xv), Ok(y)) if xv > 0.0 && y > 0.0 && xv.is_finite() && y.is_finite() => {
                    usable.push((xv, y))
                }
                (Ok(xv), Ok(y)) => gaps.push(format!(
                    "{x} = {}, {col} = {} at {label} (a log-log slope needs positive finite values)",
                    fmt_num(xv),
                    fmt_num(y)
                )),
                (Err(why), _) | (_, Err(why)) => gaps.push(format!("{why} at {label}")),
            }
        }
        if !gaps.is_empty() {
            passed = false;
            let more = if gaps.len() > MAX_LISTED {
                format!(", and {} more", gaps.len() - MAX_LISTED)
            } else {
                String::new()
            };
            gaps.truncate(MAX_LISTED);
            parts.push(format!("{variant}: {}{more}", gaps.join("; ")));
            continue;
        }
        let distinct_x: BTreeSet<u64> = usable.iter().map(|(xv, _)| xv.to_bits()).collect();
        if distinct_x.len() < 2 {
            passed = false;
            parts.push(format!(
                "{variant}: needs points at 2 or more distinct positive `{x}` with positive `{col}`, found {} ({} points with rows)",
                distinct_x.len(),
                usable.len()
            ));
            continue;
        }
        let logs: Vec<(f64, f64)> = usable.iter().map(|(a, b)| (a.ln(), b.ln())).collect();
        let s = least_squares_slope(&logs);
        let ok = s >= min && s <= max;
        passed &= ok;
        let (lo, hi) = usable
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (xv, _)| {
                (lo.min(*xv), hi.max(*xv))
            });
        let shared = if distinct_x.len() < usable.len() {
            " (several points share an x value: fix the other parameters with `at`)"
        } else {
            ""
        };
        parts.push(format!(
            "{variant}: slope {:.3} over {} points, {x} from {} to {}{shared}",
            s,
            usable.len(),
            fmt_num(lo),
            fmt_num(hi)
        ));
    }
    (passed, format!("{} ({required})", parts.join("; ")))
}

/// Ordinary least-squares slope of y on x; the caller guarantees two distinct x values.
pub fn least_squares_slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    sxy / sxx
}

#[allow(clippy::too_many_arguments)]
fn scaling(
    rows: &[ResultRow],
    (variant, relative_to, col): (&str, Option<&str>, &str),
    param: &str,
    (from, to): (&End, &End),
    over: Option<&str>,
    bounds: Bounds,
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    let who = match relative_to {
        Some(other) => format!("{variant} / {other}"),
        None => variant.to_string(),
    };
    let selected = match at.rows(rows) {
        Ok(s) => s,
        Err(why) => return (false, format!("{who}: {why} ({})", bounds.required())),
    };
    // Groups of points that differ only in `param` (and `over`), over the rows of every
    // variant, so a group where `variant` did not run is seen.
    let excluded: Vec<&str> = std::iter::once(param).chain(over).collect();
    let mut findings = Vec::new();
    for (place, group) in groups_but(&selected, &excluded, labels) {
        let Some(over) = over else {
            findings.push(
                match scaling_ratio(&group, (variant, relative_to, col), param, (from, to)) {
                    Ok((r, what)) => (
                        bounds.holds(r),
                        bounds.margin(r),
                        format!("{who}: {what} = {}x{place}", fmt_num(r)),
                    ),
                    Err(why) => missing(format!("{who}: {why}{place}")),
                },
            );
            continue;
        };
        // One ratio per value of `over` (in value order), then their mean's interval.
        let mut by_value: BTreeMap<String, Vec<&ResultRow>> = BTreeMap::new();
        for &row in &group {
            let value = row
                .params
                .get(over)
                .map_or_else(|| "?".to_string(), ToString::to_string);
            by_value.entry(value).or_default().push(row);
        }
        let mut ratios = Vec::new();
        let mut what = String::new();
        for (value, rows_at) in &by_value {
            match scaling_ratio(rows_at, (variant, relative_to, col), param, (from, to)) {
                Ok((r, t)) => {
                    ratios.push(r);
                    what = t;
                }
                Err(why) => {
                    ratios.clear();
                    findings.push(missing(format!("{who}: {why} at {over}={value}{place}")));
                    break;
                }
            }
        }
        if ratios.is_empty() {
            continue;
        }
        let n = ratios.len();
        let Some((mean, lo, hi)) = mean_interval(&ratios) else {
            findings.push(missing(format!(
                "{who}: {n} value(s) of `{over}`{place}, and a mean's interval needs two or more"
            )));
            continue;
        };
        findings.push((
            bounds.holds(lo),
            bounds.margin(lo),
            format!(
                "{who}: {what}: mean {}x over {n} values of `{over}`{place}, 90% interval [{}, {}], lower end held",
                fmt_num(mean),
                fmt_end(lo),
                fmt_end(hi)
            ),
        ));
    }
    summarize(findings, &bounds)
}

/// One `scaling` ratio in a group of points that differ only in `param`: the median of `col`
/// at `param` = `from` over the one at `to` (each divided by `relative_to`'s at its point),
/// with what it is ("col(p=a) / col(p=b)"), or what is missing.
fn scaling_ratio(
    group: &[&ResultRow],
    (variant, relative_to, col): (&str, Option<&str>, &str),
    param: &str,
    (from, to): (&End, &End),
) -> Result<(f64, String), String> {
    let values = distinct_values(group.iter().filter_map(|r| r.params.get(param)));
    let (Some(x_from), Some(x_to)) = (from.resolve(&values), to.resolve(&values)) else {
        let shown: Vec<String> = values.iter().map(|v| fmt_param(v)).collect();
        return Err(format!(
            "no points at both {param}={from} and {param}={to} ({param} takes {})",
            if shown.is_empty() {
                "no value".to_string()
            } else {
                shown.join(", ")
            }
        ));
    };
    if x_from.same_as(x_to) {
        return Err(format!(
            "{param}={from} and {param}={to} are the same point ({param}={}), nothing to compare",
            fmt_param(x_from)
        ));
    }
    let median_at = |x: &Value| -> Result<f64, String> {
        let rows_at: Vec<&ResultRow> = group
            .iter()
            .copied()
            .filter(|r| r.params.get(param).is_some_and(|v| v.same_as(x)))
            .collect();
        let at_x = |name: &str| {
            median_of(&rows_at, name, col)
                .map_err(|why| format!("{why} at {param}={}", fmt_param(x)))
        };
        match relative_to {
            Some(other) => Ok(at_x(variant)? / at_x(other)?),
            None => at_x(variant),
        }
    };
    let r = median_at(x_from)? / median_at(x_to)?;
    Ok((
        r,
        format!(
            "{col}({param}={}) / {col}({param}={})",
            fmt_param(x_from),
            fmt_param(x_to)
        ),
    ))
}

fn share(
    rows: &[ResultRow],
    variant: &str,
    phase: &str,
    bounds: Bounds,
    at: &Selection,
    labels: &PointLabels,
) -> (bool, String) {
    bounded_per_point(rows, variant, bounds, at, labels, |at_point, label| {
        // Phases may nest (a variant can report `loop` and its parts), so the share is taken
        // of the measured wall time, never of a sum over phases.
        let shares: Vec<f64> = at_point
            .iter()
            .filter(|r| r.variant == variant && r.wall_time_s > 0.0)
            .filter_map(|r| r.phases_s.get(phase).map(|t| t / r.wall_time_s))
            .collect();
        let text = |s: f64| {
            format!(
                "{variant}: phase `{phase}` = {} of wall time at {label}",
                fmt_num(s)
            )
        };
        median(&shares).map(|s| (s, text(s))).ok_or_else(|| {
            format!(
                "no rows of `{variant}` with phase `{phase}` and a positive wall time at {label}"
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        let pts: Vec<(f64, f64)> = (1..6).map(|i| (i as f64, 3.0 * i as f64 - 1.0)).collect();
        assert!((least_squares_slope(&pts) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn fmt_num_keeps_a_few_digits() {
        assert_eq!(fmt_num(143.217), "143.2");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(1e-5), "1.000e-5");
    }
}
