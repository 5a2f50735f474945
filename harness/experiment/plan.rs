//! The checked, expanded form of an experiment file: parse, then validate everything that can
//! be validated without running (family, variants, parameter names and kinds, sweep lists,
//! figures, claims, dataset files), then expand the sweep grid into points.
//!
//! Every problem found is collected and reported together, each as `file:line:column: what is
//! wrong` followed by how to fix it. serde gives no positions after deserialization, so lines
//! are found by searching the YAML text for the key ([`crate::experiment::config::locate`]).
//!
//! Expansion: the Cartesian product of the sweep lists, keys in the order written in the file
//! (`sweep:` first, then keys only `quick: sweep:` adds), the last key varying fastest; each
//! point is the fixed `params` plus one combination, with `threads` defaulting to 1. Cost:
//! O(points x keys).

use crate::analysis::claims::is_result_column;
use crate::experiment::config::{
    self, ClaimConfig, ConfigError, DataSource, ExperimentConfig, Located, Position, Seg,
};
use crate::experiment::variant::{base_of, ListedVariant};
use crate::families;
use crate::family::{Family, ParamSpec, Params, TypedPoint, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// A validated experiment, ready to run.
pub struct Plan {
    /// The configuration, with the `quick` overrides applied when `quick` is set.
    pub config: ExperimentConfig,
    /// The experiment file.
    pub source: PathBuf,
    /// The file's text, kept so results can store exactly what produced them.
    pub yaml_text: String,
    pub family: Box<dyn Family>,
    /// Every point of the expanded sweep, in run order; `threads` is always present.
    pub points: Vec<Params>,
    /// The family's typed form of each point (same order), checked when the plan was built.
    pub typed: Vec<TypedPoint>,
    /// For each listed variant that sets options of its own (`1.5d-dense-shift
    /// strategy=fusion`), its typed form of each point, those options set.
    pub variant_typed: BTreeMap<String, Vec<TypedPoint>>,
    /// The dataset file resolved in the data dir, for `source: dataset`.
    pub dataset: Option<PathBuf>,
    pub quick: bool,
    /// The variants that are peers (programs outside parbench), by name.
    pub peers: BTreeMap<String, crate::peers::Peer>,
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("source", &self.source)
            .field("family", &self.family.name())
            .field("points", &self.points.len())
            .field("variants", &self.config.variants)
            .field("dataset", &self.dataset)
            .field("quick", &self.quick)
            .finish()
    }
}

impl Plan {
    /// The family variant the listed variant `listed` runs, and the typed point it runs at
    /// point `index` (its own options set: see [`variant`](super::variant)).
    pub fn run_of<'a>(&'a self, index: usize, listed: &'a str) -> (&'a str, &'a TypedPoint) {
        let typed = match self.variant_typed.get(listed) {
            Some(points) => &points[index],
            None => &self.typed[index],
        };
        (super::variant::base_of(listed), typed)
    }

    /// Timed runs the plan will make (warm-ups excluded).
    pub fn total_runs(&self) -> usize {
        self.points.len() * self.config.variants.len() * self.config.repetitions
    }
}

/// Parameters the runner itself understands, valid in every experiment: `threads`, and
/// `backend` (`local`, the default: in this process; `mpi`: under the experiment's launcher).
pub const RUNNER_PARAMS: [&str; 2] = ["threads", "backend"];

/// Whether a point runs under the experiment's MPI launcher (`backend: mpi`).
pub fn is_mpi_point(point: &Params) -> bool {
    point.get("backend").and_then(Value::as_str) == Some("mpi")
}

/// The `threads` of a point (1 when absent or not a positive integer; plans always set it).
pub fn threads_of(point: &Params) -> usize {
    point
        .get("threads")
        .and_then(Value::as_usize)
        .filter(|&t| t >= 1)
        .unwrap_or(1)
}

/// A stable text key of a point: `name=value` pairs in name order, comma-separated. Used to
/// match points across runs (baselines), where point indices may shift.
pub fn point_key(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// One thing wrong with an experiment file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// 1-based position, when the key could be found in the text.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

/// Why an experiment file cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read or parsed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The file parsed but is inconsistent with the family, the data dir or itself.
    #[error("{}", render_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

fn render_problems(path: &Path, problems: &[Problem]) -> String {
    let mut out = String::new();
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let at = Located {
            path,
            line: p.line,
            column: p.column,
        };
        out.push_str(&format!("{at}: {}", p.message));
        if let Some(help) = &p.help {
            out.push_str(&format!("\n  help: {help}"));
        }
    }
    if problems.len() > 1 {
        out.push_str(&format!(
            "\n{} problems in {}",
            problems.len(),
            path.display()
        ));
    }
    out
}

/// Reads, validates and expands an experiment file. `data_dir` is where `source: dataset`
/// files are looked up (the caller resolves `--data-dir` / `PARBENCH_DATA`).
pub fn build(path: &Path, quick: bool, data_dir: Option<&Path>) -> Result<Plan, PlanError> {
    let yaml_text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    build_from_str(&yaml_text, path, quick, data_dir)
}

/// [`build`] on text already read; `path` labels errors and is recorded as the source.
pub fn build_from_str(
    yaml_text: &str,
    path: &Path,
    quick: bool,
    data_dir: Option<&Path>,
) -> Result<Plan, PlanError> {
    let base = config::parse_str(yaml_text, path)?;
    let config = if quick {
        config::apply_quick(base.clone())
    } else {
        base.clone()
    };
    let family = families::find(&config.family);
    let mut v = Validator {
        text: yaml_text,
        quick,
        quick_cfg: base.quick.as_ref(),
        has_launcher: config.launcher.is_some(),
        problems: Vec::new(),
    };
    v.check(&config, family.as_deref());
    let dataset = v.check_data(&config, data_dir);
    let order = config::sweep_key_order(yaml_text);
    let points = expand(&config.params, &config.sweep, &order);
    // Every point in its typed form, before anything runs: what a family finds wrong with a
    // point's parameters taken together is a problem of the plan like any other.
    let (typed, variant_typed) = match &family {
        Some(f) => v.check_points(&config, f.as_ref(), &points),
        None => (Vec::new(), BTreeMap::new()),
    };
    if let (Some(f), Some(dataset)) = (&family, &dataset) {
        if typed.len() == points.len() {
            v.check_dataset_points(&config, f.as_ref(), &points, &typed);
            v.check_data_files(&config, f.as_ref(), &points, &typed, dataset);
        }
    }
    let experiment_dir = path.parent().unwrap_or(Path::new("."));
    let peers: BTreeMap<String, crate::peers::Peer> = config
        .variants
        .iter()
        .filter_map(|name| {
            crate::peers::resolve(name, &config.family, &config.peers, experiment_dir)
                .map(|p| (name.clone(), p))
        })
        .collect();
    if !peers.is_empty() && points.iter().any(is_mpi_point) {
        let at = v.at(&v.variants_path());
        v.push(
            at,
            format!(
                "peers ({}) run in this process's point, not across MPI processes",
                peers.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            Some("put the peers in an experiment without `backend: mpi` points".to_string()),
        );
    }
    if config.interleave_points && points.iter().any(is_mpi_point) {
        let at = v.at(&top("interleave_points"));
        v.push(
            at,
            "`interleave_points` runs every point in this process, round by round, but some \
             points have `backend: mpi`"
                .to_string(),
            Some("leave `interleave_points` out of experiments with MPI points".to_string()),
        );
    }
    // Reading order: by line, problems without a line last.
    v.problems
        .sort_by_key(|p| (p.line.is_none(), p.line, p.column));
    let (Some(family), true) = (family, v.problems.is_empty()) else {
        return Err(PlanError::Invalid {
            path: path.to_path_buf(),
            problems: v.problems,
        });
    };
    Ok(Plan {
        config,
        source: path.to_path_buf(),
        yaml_text: yaml_text.to_string(),
        family,
        points,
        typed,
        variant_typed,
        dataset,
        quick,
        peers,
    })
}

/// The sweep grid: Cartesian product in `order` (keys not in `order` follow, sorted), the last
/// key varying fastest, each combination merged into `params`, `threads` defaulting to 1.
pub fn expand(
    params: &BTreeMap<String, Value>,
    sweep: &BTreeMap<String, Vec<Value>>,
    order: &[String],
) -> Vec<Params> {
    let mut keys: Vec<&str> = order
        .iter()
        .map(String::as_str)
        .filter(|k| sweep.contains_key(*k))
        .collect();
    for k in sweep.keys() {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    let mut points: Vec<Params> = vec![params.clone()];
    for key in keys {
        let values = &sweep[key];
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.insert(key.to_string(), v.clone());
                    q
                })
            })
            .collect();
    }
    for p in &mut points {
        p.entry("threads".to_string()).or_insert(Value::Int(1));
    }
    points
}

/// The name in `names` closest to `word` by edit distance, when it is close enough to be a typo.
fn nearest<'n>(word: &str, names: &[&'n str]) -> Option<&'n str> {
    names
        .iter()
        .map(|n| (config::edit_distance(word, n), *n))
        .filter(|(d, n)| *d <= 2.max(n.len() / 3))
        .min()
        .map(|(_, n)| n)
}

/// The family's variants the listed ones run, each once however many settings of it are
/// listed (`1.5d-dense-shift strategy=fusion` runs `1.5d-dense-shift`): what an option's
/// `for [..]` readers name and what a family checks a point for.
fn bases_of(listed: &[String]) -> Vec<&str> {
    let mut bases: Vec<&str> = Vec::new();
    for base in listed.iter().map(|v| base_of(v)) {
        if !bases.contains(&base) {
            bases.push(base);
        }
    }
    bases
}

/// How to fix an invalid value of a parameter: its choices (and the one `value` is likely a
/// typo of), else its help and default.
fn value_help(spec: &ParamSpec, value: &Value) -> String {
    let key = spec.name;
    match &spec.choices {
        Some(choices) => {
            let mut help = format!("valid `{key}` values: {}", list(choices));
            if let Some(near) = value.as_str().and_then(|s| nearest(s, choices)) {
                help.push_str(&format!("; did you mean `{near}`?"));
            }
            help
        }
        None => format!("`{key}`: {} (default {})", spec.help, spec.default),
    }
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

struct Validator<'a> {
    text: &'a str,
    quick: bool,
    quick_cfg: Option<&'a config::QuickConfig>,
    /// The experiment has a `launcher` (so `backend: mpi` points can run).
    has_launcher: bool,
    problems: Vec<Problem>,
}

/// Where a value of the merged config came from, for locating it in the text.
fn top<'s>(key: &'s str) -> Vec<Seg<'s>> {
    vec![Seg::Key(key)]
}

impl<'a> Validator<'a> {
    fn push(&mut self, at: Option<Position>, message: String, help: Option<String>) {
        self.problems.push(Problem {
            line: at.map(|p| p.0),
            column: at.map(|p| p.1),
            message,
            help,
        });
    }

    fn at(&self, path: &[Seg]) -> Option<Position> {
        config::locate(self.text, path)
    }

    fn at_token(&self, path: &[Seg], token: &str) -> Option<Position> {
        config::locate_token(self.text, path, token)
    }

    /// Path of a `params`/`sweep` key of the merged config: inside `quick:` when the quick
    /// override supplied it.
    fn merged_path<'k>(&self, section: &'k str, key: &'k str) -> Vec<Seg<'k>> {
        let from_quick = self.quick
            && self.quick_cfg.is_some_and(|q| match section {
                "params" => q.params.contains_key(key),
                _ => q.sweep.contains_key(key),
            });
        if from_quick {
            vec![Seg::Key("quick"), Seg::Key(section), Seg::Key(key)]
        } else {
            vec![Seg::Key(section), Seg::Key(key)]
        }
    }

    fn variants_path(&self) -> Vec<Seg<'static>> {
        if self.quick && self.quick_cfg.is_some_and(|q| q.variants.is_some()) {
            vec![Seg::Key("quick"), Seg::Key("variants")]
        } else {
            top("variants")
        }
    }

    fn check(&mut self, config: &ExperimentConfig, family: Option<&dyn Family>) {
        let family_names: Vec<&str> = families::registry()
            .iter()
            .map(|f| f.name())
            .chain([families::mock::MockFamily::NAME])
            .collect();
        if family.is_none() {
            let at = self.at(&top("family"));
            self.push(
                at,
                format!("unknown family `{}`", config.family),
                Some(format!("valid families: {}", list(&family_names))),
            );
        }
        let specs: Option<Vec<ParamSpec>> = family.map(|f| f.params());
        // A family's own variants, its shipped peers and the experiment's declared ones.
        let family_variants: Option<Vec<&str>> = family.map(|f| {
            let mut names = f.variants();
            names.extend(crate::peers::shipped_for(f.name()));
            for declared in config.peers.keys() {
                if !names.contains(&declared.as_str()) {
                    names.push(declared);
                }
            }
            names
        });
        self.check_peer_decls(config, family);
        let variants: Vec<&str> = config.variants.iter().map(String::as_str).collect();
        let bases = bases_of(&config.variants);

        let path = self.variants_path();
        self.check_variants(&config.variants, &path, family_variants.as_deref());
        self.check_variant_options(
            config,
            &config.variants,
            &path,
            specs.as_deref(),
            family,
            family_variants.as_deref(),
        );
        if !self.quick {
            if let Some(qv) = self.quick_cfg.and_then(|q| q.variants.as_ref()) {
                let path = vec![Seg::Key("quick"), Seg::Key("variants")];
                self.check_variants(qv, &path, family_variants.as_deref());
                self.check_variant_options(
                    config,
                    qv,
                    &path,
                    specs.as_deref(),
                    family,
                    family_variants.as_deref(),
                );
            }
        }

        let param_names: Option<Vec<&str>> = specs.as_ref().map(|s| {
            RUNNER_PARAMS
                .into_iter()
                .chain(s.iter().map(|p| p.name))
                .collect()
        });
        for (key, value) in &config.params {
            let path = self.merged_path("params", key);
            self.check_param(
                key,
                std::slice::from_ref(value),
                &path,
                specs.as_deref(),
                family,
                &bases,
            );
        }
        for (key, values) in &config.sweep {
            let path = self.merged_path("sweep", key);
            if values.is_empty() {
                let at = self.at(&path);
                self.push(
                    at,
                    format!("sweep list `{key}` is empty, so the experiment has no points"),
                    Some(format!(
                        "give `{key}` at least one value, or move a single value to `params:`"
                    )),
                );
            }
            self.check_param(key, values, &path, specs.as_deref(), family, &bases);
            if config.params.contains_key(key) {
                let at = self.at(&path);
                self.push(
                    at,
                    format!("`{key}` is set both in `params` and in `sweep`"),
                    Some(format!("keep `{key}` in one of them")),
                );
            }
        }
        if !self.quick {
            if let Some(q) = self.quick_cfg {
                let quick_variants: Vec<&str> = match &q.variants {
                    Some(v) => bases_of(v),
                    None => bases.clone(),
                };
                for (key, value) in &q.params {
                    let path = vec![Seg::Key("quick"), Seg::Key("params"), Seg::Key(key)];
                    self.check_param(
                        key,
                        std::slice::from_ref(value),
                        &path,
                        specs.as_deref(),
                        family,
                        &quick_variants,
                    );
                }
                for (key, values) in &q.sweep {
                    let path = vec![Seg::Key("quick"), Seg::Key("sweep"), Seg::Key(key)];
                    if values.is_empty() {
                        let at = self.at(&path);
                        self.push(
                            at,
                            format!("quick sweep list `{key}` is empty"),
                            Some(format!("give `{key}` at least one value")),
                        );
                    }
                    self.check_param(
                        key,
                        values,
                        &path,
                        specs.as_deref(),
                        family,
                        &quick_variants,
                    );
                }
                if q.repetitions == Some(0) {
                    let at = self.at(&[Seg::Key("quick"), Seg::Key("repetitions")]);
                    self.push(
                        at,
                        "quick `repetitions` is 0".to_string(),
                        Some("set repetitions to 1 or more".to_string()),
                    );
                }
            }
        }
        if config.repetitions == 0 {
            let in_quick = self.quick && self.quick_cfg.is_some_and(|q| q.repetitions.is_some());
            let path = if in_quick {
                vec![Seg::Key("quick"), Seg::Key("repetitions")]
            } else {
                top("repetitions")
            };
            let at = self.at(&path);
            self.push(
                at,
                "`repetitions` is 0, so nothing would be measured".to_string(),
                Some("set repetitions to 1 or more".to_string()),
            );
        }

        if let Some(eq) = &config.equivalence {
            if let Some(f) = family.filter(|f| !f.outputs_agree()) {
                let at = self.at(&top("equivalence"));
                self.push(
                    at,
                    format!(
                        "the {} family's variants do not compute the same numbers (their outputs are quality figures of stochastic training), so `equivalence` cannot hold",
                        f.name()
                    ),
                    Some("remove `equivalence`; compare quality metrics with `ratio` claims".to_string()),
                );
            }
            if !variants.contains(&eq.reference.as_str()) {
                let at = self.at_token(
                    &[Seg::Key("equivalence"), Seg::Key("reference")],
                    &eq.reference,
                );
                self.push(
                    at,
                    format!(
                        "equivalence reference `{}` is not among the variants run",
                        eq.reference
                    ),
                    Some(format!("use one of: {}", list(&variants))),
                );
            }
            if !(eq.rel_tol >= 0.0 && eq.rel_tol.is_finite()) {
                let at = self.at(&[Seg::Key("equivalence"), Seg::Key("rel_tol")]);
                self.push(
                    at,
                    format!("equivalence rel_tol is {}", eq.rel_tol),
                    Some("use a finite tolerance >= 0, e.g. 1e-9".to_string()),
                );
            }
        }

        let params_known = param_names.clone();
        self.check_figures(config, &variants, params_known.as_deref());
        // `config` is the merged one: on a quick run its claims are `quick.claims` when given.
        let quick_claims = self.quick_cfg.and_then(|q| q.claims.as_ref());
        let claims_path = if self.quick && quick_claims.is_some() {
            vec![Seg::Key("quick"), Seg::Key("claims")]
        } else {
            top("claims")
        };
        self.check_claims(
            config,
            &config.claims,
            &claims_path,
            &variants,
            params_known.as_deref(),
        );
        if let (false, Some(qc)) = (self.quick, quick_claims) {
            let path = vec![Seg::Key("quick"), Seg::Key("claims")];
            self.check_claims(config, qc, &path, &variants, params_known.as_deref());
        }
    }

    /// The typed form of every point, and of every point for each listed variant that sets
    /// options of its own, collecting what the family finds wrong with any of them (each
    /// distinct problem once, located at the responsible key: its value in a sweep list, else
    /// its `params` entry, or the listed variant whose setting it is). Values already reported
    /// as invalid are left out, so the family's defaults stand in for them and the other
    /// problems are still found.
    fn check_points(
        &mut self,
        config: &ExperimentConfig,
        family: &dyn Family,
        points: &[Params],
    ) -> (Vec<TypedPoint>, BTreeMap<String, Vec<TypedPoint>>) {
        let valid_only = |params: &Params| -> Params {
            params
                .iter()
                .filter(|(k, v)| {
                    RUNNER_PARAMS.contains(&k.as_str()) || family.check_value(k, v) == Some(Ok(()))
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let bases: Vec<String> = bases_of(&config.variants)
            .into_iter()
            .map(str::to_string)
            .collect();
        let with_options: Vec<(&String, Params)> = config
            .variants
            .iter()
            .filter_map(|listed| {
                let parsed = ListedVariant::parse(listed).ok()?;
                let options: Params = parsed
                    .options
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                (!options.is_empty()).then_some((listed, options))
            })
            .collect();
        let mut typed = Vec::with_capacity(points.len());
        let mut variant_typed: BTreeMap<String, Vec<TypedPoint>> = BTreeMap::new();
        let mut reported = BTreeSet::new();
        for point in points {
            let valid = valid_only(point);
            match family.typed_point(&valid, &bases) {
                Ok(t) => typed.push(t),
                Err(issues) => self.report_point_issues(config, point, issues, &mut reported),
            }
            for (listed, options) in &with_options {
                let mut own = point.clone();
                own.extend(options.iter().map(|(k, v)| (k.clone(), v.clone())));
                let base = [base_of(listed).to_string()];
                match family.typed_point(&valid_only(&own), &base) {
                    Ok(t) => variant_typed.entry(listed.to_string()).or_default().push(t),
                    Err(issues) => {
                        // A problem with one of the variant's own settings is located there.
                        let (own_issues, others): (Vec<_>, Vec<_>) = issues
                            .into_iter()
                            .partition(|i| i.keys.iter().any(|k| options.contains_key(*k)));
                        for issue in own_issues {
                            if reported.insert(issue.message.clone()) {
                                let at = self.at_token(&self.variants_path(), listed);
                                let message = format!("variant `{listed}`: {}", issue.message);
                                self.push(at, message, Some(issue.help));
                            }
                        }
                        self.report_point_issues(config, point, others, &mut reported);
                    }
                }
            }
        }
        (typed, variant_typed)
    }

    /// Reports what a family found wrong with a point, each message once (`reported` holds those
    /// already given), at the key it names, with the point's swept values.
    fn report_point_issues(
        &mut self,
        config: &ExperimentConfig,
        point: &Params,
        issues: Vec<crate::families::params::PointIssue>,
        reported: &mut BTreeSet<String>,
    ) {
        for issue in issues {
            if !reported.insert(issue.message.clone()) {
                continue;
            }
            let at = self.locate_point_key(config, point, &issue.keys);
            let swept: Vec<String> = config
                .sweep
                .keys()
                .filter_map(|k| point.get(k).map(|v| format!("{k}={v}")))
                .collect();
            let message = if swept.is_empty() {
                issue.message
            } else {
                format!("{} (at the point {})", issue.message, swept.join(", "))
            };
            self.push(at, message, Some(issue.help));
        }
    }

    /// What the family finds wrong with each point given that it reads a dataset
    /// ([`Family::dataset_issues`]).
    fn check_dataset_points(
        &mut self,
        config: &ExperimentConfig,
        family: &dyn Family,
        points: &[Params],
        typed: &[TypedPoint],
    ) {
        let mut reported = BTreeSet::new();
        for (point, typed) in points.iter().zip(typed) {
            match family.dataset_issues(typed) {
                Ok(issues) => self.report_point_issues(config, point, issues, &mut reported),
                Err(e) => {
                    let at = self.at(&top("family"));
                    self.push(at, e.to_string(), None);
                    return;
                }
            }
        }
    }

    /// Checks that the files every point reads beside its dataset ([`Family::data_files`]) are
    /// there, each reported once, at the parameter naming it.
    fn check_data_files(
        &mut self,
        config: &ExperimentConfig,
        family: &dyn Family,
        points: &[Params],
        typed: &[TypedPoint],
        dataset: &Path,
    ) {
        let dir = dataset.parent().unwrap_or(Path::new("."));
        let mut reported = BTreeSet::new();
        for (point, typed) in points.iter().zip(typed) {
            let files = match family.data_files(typed) {
                Ok(files) => files,
                Err(e) => {
                    let at = self.at(&top("family"));
                    self.push(at, e.to_string(), None);
                    return;
                }
            };
            for (key, file) in files {
                let path = dir.join(&file);
                if path.is_file() || !reported.insert(file.clone()) {
                    continue;
                }
                let at = self.locate_point_key(config, point, &[key]);
                self.push(
                    at,
                    format!(
                        "`{key}`: file `{file}` is missing beside the dataset: searched {}",
                        path.display()
                    ),
                    Some(format!(
                        "the files are described in MANIFEST.md of the data dir ({}); name one that is there",
                        dir.display()
                    )),
                );
            }
        }
    }

    /// Where the first of `keys` that the file sets gets its value at `point`.
    fn locate_point_key(
        &self,
        config: &ExperimentConfig,
        point: &Params,
        keys: &[&str],
    ) -> Option<Position> {
        for key in keys {
            if config.sweep.contains_key(*key) {
                let path = self.merged_path("sweep", key);
                let token = point.get(*key).map(|v| v.to_string()).unwrap_or_default();
                return self.at_token(&path, &token).or_else(|| self.at(&path));
            }
            if config.params.contains_key(*key) {
                return self.at(&self.merged_path("params", key));
            }
        }
        self.at(&top("family"))
    }

    /// Each declared peer has a command, a time limit that is a positive number, and a name
    /// no variant or shipped peer of the family already has.
    fn check_peer_decls(&mut self, config: &ExperimentConfig, family: Option<&dyn Family>) {
        for (name, decl) in &config.peers {
            let path = [Seg::Key("peers"), Seg::Key(name)];
            let taken = family.is_some_and(|f| {
                f.variants().contains(&name.as_str())
                    || crate::peers::shipped_for(f.name()).contains(&name.as_str())
            });
            if taken {
                let at = self.at(&path);
                self.push(
                    at,
                    format!(
                        "peer `{name}` has the name of a {} variant or shipped peer",
                        config.family
                    ),
                    Some("give the declared peer another name".to_string()),
                );
            }
            if decl.command.is_empty() {
                let at = self.at(&[Seg::Key("peers"), Seg::Key(name), Seg::Key("command")]);
                self.push(
                    at,
                    format!("peer `{name}` has an empty command"),
                    Some(
                        "give the program and its arguments, e.g. [python3, my_peer.py]"
                            .to_string(),
                    ),
                );
            }
            if let Some(t) = decl.timeout_s.filter(|t| !(t.is_finite() && *t > 0.0)) {
                let at = self.at(&[Seg::Key("peers"), Seg::Key(name), Seg::Key("timeout_s")]);
                self.push(
                    at,
                    format!("peer `{name}` has timeout_s {t}"),
                    Some("give a positive number of seconds".to_string()),
                );
            }
        }
    }

    fn check_variants(&mut self, listed: &[String], path: &[Seg], valid: Option<&[&str]>) {
        if listed.is_empty() {
            let at = self.at(path);
            self.push(
                at,
                "no variants listed".to_string(),
                valid.map(|v| format!("list at least one of: {}", list(v))),
            );
        }
        let mut seen = BTreeSet::new();
        for name in listed {
            if !seen.insert(name) {
                let at = self.at_token(path, name);
                self.push(
                    at,
                    format!("variant `{name}` is listed twice"),
                    Some("list each variant once".to_string()),
                );
            }
            if let Some(valid) = valid {
                let base = base_of(name);
                if !valid.contains(&base) {
                    let at = self.at_token(path, name);
                    let mut help = format!("valid variants: {}", list(valid));
                    if let Some(near) = nearest(base, valid) {
                        help.push_str(&format!("; did you mean `{near}`?"));
                    }
                    self.push(at, format!("unknown variant `{base}`"), Some(help));
                }
            }
        }
    }

    /// The settings a listed variant makes of its own options (`1.5d-dense-shift
    /// strategy=fusion`): each an option of that variant (a parameter whose readers include
    /// it), with a valid value, and not also set for every variant in `params` or `sweep`.
    fn check_variant_options(
        &mut self,
        config: &ExperimentConfig,
        listed: &[String],
        path: &[Seg],
        specs: Option<&[ParamSpec]>,
        family: Option<&dyn Family>,
        valid: Option<&[&str]>,
    ) {
        for name in listed {
            let parsed = match ListedVariant::parse(name) {
                Ok(parsed) => parsed,
                Err(e) => {
                    let at = self.at_token(path, name);
                    self.push(
                        at,
                        e,
                        Some(
                            "write a variant, then its options as name=value separated by \
                             spaces (`1.5d-dense-shift strategy=fusion`)"
                                .to_string(),
                        ),
                    );
                    continue;
                }
            };
            // An unknown variant is reported once, by `check_variants`.
            let (Some(specs), Some(valid)) = (specs, valid) else {
                continue;
            };
            if !valid.contains(&parsed.base) {
                continue;
            }
            let own: Vec<&str> = specs
                .iter()
                .filter(|s| s.read_by.as_ref().is_some_and(|r| r.contains(&parsed.base)))
                .map(|s| s.name)
                .collect();
            for (key, value) in &parsed.options {
                let at = self.at_token(path, name);
                if !own.contains(key) {
                    let help = if own.is_empty() {
                        format!("`{}` has no options of its own", parsed.base)
                    } else {
                        format!("options of `{}`: {}", parsed.base, list(&own))
                    };
                    let read = match specs.iter().find(|s| s.name == *key) {
                        Some(_) => "is not an option of",
                        None => "is no parameter, let alone an option of",
                    };
                    self.push(at, format!("`{key}` {read} `{}`", parsed.base), Some(help));
                    continue;
                }
                if let Some(Err(why)) = family.and_then(|f| f.check_value(key, value)) {
                    let help = specs
                        .iter()
                        .find(|s| s.name == *key)
                        .map(|s| value_help(s, value));
                    self.push(
                        at,
                        format!("variant `{name}`: parameter `{key}` {why}"),
                        help,
                    );
                    continue;
                }
                if config.params.contains_key(*key) || config.sweep.contains_key(*key) {
                    self.push(
                        at,
                        format!(
                            "`{key}` is set for every variant (in `params` or `sweep`) and for `{name}`"
                        ),
                        Some(format!(
                            "set `{key}` in one place: for every variant, or on the variants listed"
                        )),
                    );
                }
            }
        }
    }

    fn check_param(
        &mut self,
        key: &str,
        values: &[Value],
        path: &[Seg],
        specs: Option<&[ParamSpec]>,
        family: Option<&dyn Family>,
        variants: &[&str],
    ) {
        if key == "threads" {
            for v in values {
                if v.as_usize().is_none_or(|t| t == 0) {
                    let at = self.at_token(path, &v.to_string());
                    self.push(
                        at,
                        format!("`threads` must be an integer >= 1, got {v}"),
                        Some(
                            "use 1, 2, ... (at most the cores of the machine is sensible)"
                                .to_string(),
                        ),
                    );
                }
            }
            return;
        }
        if key == "backend" {
            for v in values {
                let mpi = v.as_str() == Some("mpi");
                if !(mpi || v.as_str() == Some("local")) {
                    let at = self.at_token(path, &v.to_string());
                    self.push(
                        at,
                        format!("`backend` must be `local` or `mpi`, got {v}"),
                        Some(
                            "local runs in this process; mpi under the experiment's `launcher`"
                                .to_string(),
                        ),
                    );
                } else if mpi && !self.has_launcher {
                    let at = self.at_token(path, "mpi");
                    self.push(
                        at,
                        "`backend: mpi` needs a `launcher` entry saying how to start the processes"
                            .to_string(),
                        Some(
                            "add `launcher: {command: mpirun, args: [--oversubscribe]}`"
                                .to_string(),
                        ),
                    );
                }
            }
            return;
        }
        let Some(specs) = specs else { return };
        let Some(spec) = specs.iter().find(|s| s.name == key) else {
            let names: Vec<&str> = RUNNER_PARAMS
                .into_iter()
                .chain(specs.iter().map(|s| s.name))
                .collect();
            let at = self.at(path);
            self.push(
                at,
                format!("unknown parameter `{key}`"),
                Some(format!("valid parameters: {}", list(&names))),
            );
            return;
        };
        // A variant's option where none of the variants run reads it: a user who sets `delta`
        // for an experiment of `sync` alone expects it to matter, and it would not.
        if let Some(readers) = &spec.read_by {
            if !variants.iter().any(|v| readers.contains(v)) {
                let at = self.at(path);
                let add: Vec<String> = readers.iter().map(|r| format!("`{r}`")).collect();
                self.push(
                    at,
                    format!(
                        "`{key}` is read only by {}, and this experiment runs {}",
                        list(readers),
                        list(variants)
                    ),
                    Some(format!(
                        "remove `{key}`, or add {} to the variants",
                        add.join(" or ")
                    )),
                );
            }
        }
        for v in values {
            let Some(Err(why)) = family.and_then(|f| f.check_value(key, v)) else {
                continue;
            };
            let at = self.at_token(path, &v.to_string());
            self.push(
                at,
                format!("parameter `{key}` {why}"),
                Some(value_help(spec, v)),
            );
        }
    }

    /// A parameter, or `threads` (unknown family: any name, to avoid cascades of errors).
    fn known_param(name: &str, params: Option<&[&str]>) -> bool {
        params.is_none_or(|p| p.contains(&name))
    }

    fn column_help(params: Option<&[&str]>) -> String {
        let mut help =
            "use `wall_time_s`, `equiv_rel_error`, `phase_<name>_s`, `metric_<name>`".to_string();
        if let Some(p) = params {
            help.push_str(&format!(" or a parameter ({})", list(p)));
        }
        help
    }

    fn check_figures(
        &mut self,
        config: &ExperimentConfig,
        variants: &[&str],
        params: Option<&[&str]>,
    ) {
        let mut names = BTreeSet::new();
        for (i, fig) in config.figures.iter().enumerate() {
            let base = [Seg::Key("figures"), Seg::Index(i)];
            let path_of = |key: &'static str| {
                let mut p = base.to_vec();
                p.push(Seg::Key(key));
                p
            };
            if !names.insert(&fig.name) {
                let at = self.at(&path_of("name"));
                self.push(
                    at,
                    format!("figure name `{}` is used twice", fig.name),
                    Some("figure names are file names: make them unique".to_string()),
                );
            }
            if fig.kind == config::FigureKind::Trace {
                self.check_trace_figure(fig, &path_of);
            } else if !(is_result_column(&fig.x) || Self::known_param(&fig.x, params)) {
                let at = self.at(&path_of("x"));
                self.push(
                    at,
                    format!("figure `{}`: unknown x `{}`", fig.name, fig.x),
                    Some(Self::column_help(params)),
                );
            }
            if fig.kind != config::FigureKind::Trace && !is_result_column(&fig.y) {
                let at = self.at(&path_of("y"));
                self.push(
                    at,
                    format!("figure `{}`: unknown y column `{}`", fig.name, fig.y),
                    Some(
                        "use `wall_time_s`, `equiv_rel_error`, `phase_<name>_s` or `metric_<name>`"
                            .to_string(),
                    ),
                );
            }
            if fig.series != "variant" && !Self::known_param(&fig.series, params) {
                let at = self.at(&path_of("series"));
                self.push(
                    at,
                    format!("figure `{}`: unknown series `{}`", fig.name, fig.series),
                    Some(format!(
                        "use `variant` or a parameter{}",
                        params
                            .map(|p| format!(" ({})", list(p)))
                            .unwrap_or_default()
                    )),
                );
            }
            for (key, value) in &fig.filter {
                let mut path = path_of("filter");
                path.push(Seg::Key(key));
                if let Some((what, help)) = value.list_problem() {
                    let at = self.at(&path);
                    self.push(
                        at,
                        format!("figure `{}`: filter on `{key}` has {what}", fig.name),
                        Some(help.to_string()),
                    );
                }
                if key == "variant" {
                    for name in value.values().iter().filter_map(Value::as_str) {
                        if !variants.contains(&name) {
                            let at = self.at_token(&path, name);
                            self.push(
                                at,
                                format!(
                                    "figure `{}`: filter on variant `{name}`, which is not run",
                                    fig.name
                                ),
                                Some(format!("use one of: {}", list(variants))),
                            );
                        }
                    }
                } else if !Self::known_param(key, params) {
                    let at = self.at(&path);
                    self.push(
                        at,
                        format!("figure `{}`: filter on unknown parameter `{key}`", fig.name),
                        Some(format!(
                            "filter on `variant` or a parameter{}",
                            params
                                .map(|p| format!(" ({})", list(p)))
                                .unwrap_or_default()
                        )),
                    );
                }
            }
            if let Some(base_cfg) = &fig.speedup_over {
                let path = path_of("speedup_over");
                match (&base_cfg.variant, &base_cfg.x) {
                    (Some(_), Some(_)) | (None, None) => {
                        let at = self.at(&path);
                        self.push(
                            at,
                            format!(
                                "figure `{}`: speedup_over needs exactly one of `variant` and `x`",
                                fig.name
                            ),
                            Some(
                                "`speedup_over: {variant: NAME}` or `speedup_over: {x: VALUE}`"
                                    .to_string(),
                            ),
                        );
                    }
                    (Some(name), None) if !variants.contains(&name.as_str()) => {
                        let at = self.at_token(&path, name);
                        self.push(
                            at,
                            format!(
                                "figure `{}`: speedup over variant `{name}`, which is not run",
                                fig.name
                            ),
                            Some(format!("use one of: {}", list(variants))),
                        );
                    }
                    _ => {}
                }
            }
        }
    }

    /// The columns of a `kind: trace` figure are those of the trace table: x `step`, `time_s`
    /// or `metric_<name>`, y `time_s` or `metric_<name>`; and it has no speedup base.
    fn check_trace_figure(
        &mut self,
        fig: &config::FigureConfig,
        path_of: &dyn Fn(&'static str) -> Vec<Seg<'static>>,
    ) {
        let metric = |name: &str| name.starts_with("metric_") && name.len() > "metric_".len();
        let help = "a trace figure reads traces.parquet: use `step`, `time_s` or `metric_<name>` \
                    (what the family's progress reports carry)";
        if !(fig.x == "step" || fig.x == "time_s" || metric(&fig.x)) {
            let at = self.at(&path_of("x"));
            self.push(
                at,
                format!("figure `{}`: unknown trace x `{}`", fig.name, fig.x),
                Some(help.to_string()),
            );
        }
        if !(fig.y == "time_s" || metric(&fig.y)) {
            let at = self.at(&path_of("y"));
            self.push(
                at,
                format!("figure `{}`: unknown trace y column `{}`", fig.name, fig.y),
                Some(help.replace("`step`, ", "")),
            );
        }
        if fig.speedup_over.is_some() {
            let at = self.at(&path_of("speedup_over"));
            self.push(
                at,
                format!("figure `{}`: a trace figure has no speedup_over", fig.name),
                Some(
                    "drop `speedup_over`, or draw the figure from the results (no `kind: trace`)"
                        .to_string(),
                ),
            );
        }
    }

    /// Resolves the claims ([`crate::analysis::claims::resolve`] does every check) and locates what is
    /// wrong with them. `claims_path` is where the list is written (`claims`, `quick.claims`);
    /// quick claims on a full build are checked against the quick run they are for.
    fn check_claims(
        &mut self,
        config: &ExperimentConfig,
        claims: &[ClaimConfig],
        claims_path: &[Seg],
        variants: &[&str],
        params: Option<&[&str]>,
    ) {
        let for_quick = claims_path.first() == Some(&Seg::Key("quick"));
        let quick_config;
        let (config, variants): (&ExperimentConfig, Vec<&str>) = if for_quick && !self.quick {
            quick_config = config::apply_quick(config.clone());
            let v = quick_config.variants.iter().map(String::as_str).collect();
            (&quick_config, v)
        } else {
            (config, variants.to_vec())
        };
        let points = expand(&config.params, &config.sweep, &[]);
        let scope = crate::analysis::claims::Scope {
            variants: &variants,
            params,
            equivalence: config.equivalence.as_ref(),
            grid: Some(crate::analysis::claims::Grid {
                points: &points,
                // The full claims on a quick run may miss values of the smaller grid.
                exact: !self.quick || for_quick,
                quick: self.quick || for_quick,
            }),
        };
        let Err(problems) = crate::analysis::claims::resolve(claims, &scope) else {
            return;
        };
        for p in problems {
            let mut path = claims_path.to_vec();
            path.push(Seg::Index(p.claim));
            path.extend(p.path.iter().map(|k| Seg::Key(k)));
            let at = match &p.token {
                Some(token) => self.at_token(&path, token),
                None => self.at(&path),
            };
            self.push(at, p.message, p.help);
        }
    }

    /// Checks `data:` and resolves the dataset path.
    fn check_data(
        &mut self,
        config: &ExperimentConfig,
        data_dir: Option<&Path>,
    ) -> Option<PathBuf> {
        if config.data.source != DataSource::Dataset {
            return None;
        }
        let Some(file) = &config.data.file else {
            let at = self.at(&[Seg::Key("data"), Seg::Key("source")]);
            self.push(
                at,
                "`source: dataset` needs `file:`, the name of a file in the data dir".to_string(),
                Some(
                    "add `file: NAME` under `data:` (the data dir's MANIFEST.md lists the files)"
                        .to_string(),
                ),
            );
            return None;
        };
        let at = self.at(&[Seg::Key("data"), Seg::Key("file")]);
        let Some(dir) = data_dir else {
            self.push(
                at,
                format!("dataset `{file}` is read from the data dir, and no data dir is set"),
                Some("pass --data-dir DIR or set PARBENCH_DATA=DIR".to_string()),
            );
            return None;
        };
        let resolved = dir.join(file);
        if resolved.is_file() {
            Some(resolved)
        } else {
            self.push(
                at,
                format!(
                    "dataset file `{file}` is missing: searched {}",
                    resolved.display()
                ),
                Some(format!(
                    "the files are described in MANIFEST.md of the data dir ({}); fetch it there, or point --data-dir / PARBENCH_DATA at the dir that has it",
                    dir.display()
                )),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(i: i64) -> Value {
        Value::Int(i)
    }

    #[test]
    fn expand_follows_written_order_last_key_fastest() {
        let params = BTreeMap::from([("work".to_string(), Value::Float(1.5))]);
        let sweep = BTreeMap::from([
            ("threads".to_string(), vec![v(1), v(2)]),
            ("size".to_string(), vec![v(10), v(20), v(30)]),
        ]);
        let order = vec!["threads".to_string(), "size".to_string()];
        let points = expand(&params, &sweep, &order);
        let got: Vec<(i64, i64)> = points
            .iter()
            .map(|p| match (&p["threads"], &p["size"]) {
                (Value::Int(t), Value::Int(s)) => (*t, *s),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            got,
            vec![(1, 10), (1, 20), (1, 30), (2, 10), (2, 20), (2, 30)]
        );
        assert!(points.iter().all(|p| p["work"] == Value::Float(1.5)));
    }

    #[test]
    fn expand_without_sweep_is_one_point_with_one_thread() {
        let points = expand(&BTreeMap::new(), &BTreeMap::new(), &[]);
        assert_eq!(points.len(), 1);
        assert_eq!(points[0]["threads"], v(1));
    }

    #[test]
    fn point_key_is_sorted_and_stable() {
        let p = Params::from([("threads".to_string(), v(2)), ("size".to_string(), v(5))]);
        assert_eq!(point_key(&p), "size=5,threads=2");
    }
}
