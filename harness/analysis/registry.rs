//! The registry of the five papers' claims (`docs/paper_claims.yaml`): every figure, table and
//! quantitative claim, with its source, the paper's number, whether the number depends on the
//! machine, and what parbench does with it: reproduced at the paper's number, asserted more
//! weakly (and why), missing, or not reproducible on a machine like this one (and why).
//!
//! The registry is data, compiled into the binary and read by `parbench claims`. [`verify`]
//! holds it to the experiments: a claim it says parbench asserts must exist in the named
//! experiment, and where the quick run evaluates it, the committed quick baseline must record
//! it passing. So the registry cannot say "reproduced" of a claim no run checks.

use crate::analysis::check::{Baseline, RecordedClaim};
use crate::experiment::config::{self, ConfigError, Document, ExperimentConfig, Seg};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The registry as committed, compiled in so that `parbench claims` works from any directory.
pub const EMBEDDED: &str = include_str!("../../docs/paper_claims.yaml");
/// Where the embedded registry lives in the repository (labels its errors).
pub const EMBEDDED_PATH: &str = "docs/paper_claims.yaml";

/// The whole registry file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    pub papers: Vec<Paper>,
    pub claims: Vec<PaperClaim>,
}

/// One of the papers under `../shared/papers/`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    /// The number its file starts with (`000`).
    pub id: String,
    /// Authors and subject.
    pub title: String,
}

/// One claim of a paper.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaperClaim {
    /// Short and stable (`S2`, `D14`): the inventory's names.
    pub id: String,
    /// The [`Paper::id`] it comes from.
    pub paper: String,
    /// Where in the paper (section, figure, table).
    pub source: String,
    /// What the paper says.
    pub claim: String,
    /// The paper's number (or "none" when it gives only a direction).
    pub number: String,
    /// Whether the number depends on the machine.
    pub machine: Dependence,
    pub status: Status,
    /// The experiment whose claims assert it (for `reproduced` and `weaker`; for the others, an
    /// experiment with a proxy, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
    /// The names of that experiment's claims that assert it (full or quick run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asserts: Vec<String>,
    /// Why it is weaker, missing or not reproducible here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dependence {
    /// Counts, traffic ratios, quality parity, slopes: the same on every machine.
    Independent,
    /// Speedups and throughput.
    Dependent,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum Status {
    /// Asserted at the paper's number (or the exact model the paper states).
    Reproduced,
    /// Asserted, but more weakly than the paper states it.
    Weaker,
    /// Testable on a machine like this one, with no claim yet.
    Missing,
    /// Needs what this machine lacks (a GPU, a cluster, PIUMA, 56 cores, a dataset).
    NotHere,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Reproduced => "reproduced",
            Status::Weaker => "weaker",
            Status::Missing => "missing",
            Status::NotHere => "not-here",
        }
    }
}

impl PaperClaim {
    /// Every verdict `baseline` records of the claims that assert this one: (claim, machine
    /// kind, verdict), in the order of `asserts`.
    pub fn verdicts<'a>(
        &'a self,
        baseline: Option<&'a Baseline>,
    ) -> Vec<(&'a str, &'a str, &'a RecordedClaim)> {
        let (Some(exp), Some(baseline)) = (&self.experiment, baseline) else {
            return Vec::new();
        };
        self.asserts
            .iter()
            .flat_map(|claim| {
                recorded(baseline, exp, claim)
                    .into_iter()
                    .map(move |(kind, r)| (claim.as_str(), kind, r))
            })
            .collect()
    }
}

/// Reads a registry file; errors name the file, the line and what was expected.
pub fn parse(text: &str, path: &Path) -> Result<Registry, ConfigError> {
    let doc = Document::parse(text, path)?;
    let registry: Registry = doc.typed()?;
    let problems = registry.problems();
    if let Some((index, message)) = problems.into_iter().next() {
        let (line, column) = doc
            .locate(&[Seg::Key("claims"), Seg::Index(index)])
            .map_or((None, None), |(l, c)| (Some(l), Some(c)));
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message,
        });
    }
    Ok(registry)
}

/// The registry compiled into this binary.
pub fn embedded() -> Result<Registry> {
    parse(EMBEDDED, Path::new(EMBEDDED_PATH)).map_err(anyhow::Error::from)
}

impl Registry {
    /// What makes an entry unusable, with the entry's index: a repeated id, an unknown paper, a
    /// status without the fields it needs.
    fn problems(&self) -> Vec<(usize, String)> {
        let papers: BTreeSet<&str> = self.papers.iter().map(|p| p.id.as_str()).collect();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (i, c) in self.claims.iter().enumerate() {
            let mut problem = |m: String| out.push((i, format!("claim {}: {m}", c.id)));
            if !seen.insert(c.id.as_str()) {
                problem("the id is used twice".into());
            }
            if !papers.contains(c.paper.as_str()) {
                let known: Vec<&str> = papers.iter().copied().collect();
                problem(format!(
                    "paper `{}` is not listed under `papers` ({})",
                    c.paper,
                    known.join(", ")
                ));
            }
            let asserted = matches!(c.status, Status::Reproduced | Status::Weaker);
            if asserted && (c.experiment.is_none() || c.asserts.is_empty()) {
                problem(format!(
                    "status `{}` needs `experiment` and `asserts` (the claims that assert it)",
                    c.status.name()
                ));
            }
            if !c.asserts.is_empty() && c.experiment.is_none() {
                problem("`asserts` needs the `experiment` they belong to".into());
            }
            if c.status != Status::Reproduced && c.why.as_deref().is_none_or(str::is_empty) {
                problem(format!("status `{}` needs `why`", c.status.name()));
            }
        }
        out
    }

    /// The claims of `paper`, in the file's order.
    pub fn of_paper<'a>(&'a self, paper: &'a str) -> impl Iterator<Item = &'a PaperClaim> + 'a {
        self.claims.iter().filter(move |c| c.paper == paper)
    }

    /// The claims of `paper` with `status` (every one when `None`).
    pub fn listed<'a>(
        &'a self,
        paper: &'a str,
        status: Option<Status>,
    ) -> impl Iterator<Item = &'a PaperClaim> + 'a {
        self.of_paper(paper)
            .filter(move |c| status.is_none_or(|s| s == c.status))
    }

    /// The papers named by `wanted` (an id such as `001`, or words of a title), all when empty.
    pub fn select_papers(&self, wanted: &[String]) -> Result<Vec<&Paper>> {
        if wanted.is_empty() {
            return Ok(self.papers.iter().collect());
        }
        let mut out: Vec<&Paper> = Vec::new();
        for w in wanted {
            let lower = w.to_lowercase();
            let found: Vec<&Paper> = self
                .papers
                .iter()
                .filter(|p| p.id == *w || p.title.to_lowercase().contains(&lower))
                .collect();
            if found.is_empty() {
                let known: Vec<String> = self
                    .papers
                    .iter()
                    .map(|p| format!("{} ({})", p.id, p.title))
                    .collect();
                bail!(
                    "no paper `{w}`; the papers are: {} (an id, or a word of the title)",
                    known.join("; ")
                );
            }
            for p in found {
                if !out.iter().any(|q| q.id == p.id) {
                    out.push(p);
                }
            }
        }
        Ok(out)
    }
}

/// Counts by status of some claims.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub claims: usize,
    pub testable: usize,
    pub reproduced: usize,
    pub weaker: usize,
    pub missing: usize,
    pub not_here: usize,
}

impl Counts {
    pub fn of<'a>(claims: impl IntoIterator<Item = &'a PaperClaim>) -> Counts {
        let mut n = Counts::default();
        for c in claims {
            n.claims += 1;
            match c.status {
                Status::Reproduced => n.reproduced += 1,
                Status::Weaker => n.weaker += 1,
                Status::Missing => n.missing += 1,
                Status::NotHere => n.not_here += 1,
            }
        }
        n.testable = n.claims - n.not_here;
        n
    }
}

// ---------------------------------------------------------------------------------------------
// The registry held to the experiments and the committed quick baseline.
// ---------------------------------------------------------------------------------------------

/// An experiment's claims by name: those of its full run and those its quick run evaluates.
pub struct ExperimentClaims {
    pub full: BTreeSet<String>,
    pub quick: BTreeSet<String>,
}

/// The claims of every experiment under `dir` (experiments/<family>/*.yaml), by experiment name.
pub fn experiment_claims(dir: &Path) -> Result<BTreeMap<String, ExperimentClaims>> {
    let mut out = BTreeMap::new();
    for file in crate::experiment::experiment_files(dir)? {
        let config: ExperimentConfig = config::load(&file, false)?;
        let quick = config::apply_quick(config.clone());
        let names = |c: &ExperimentConfig| -> BTreeSet<String> {
            c.claims.iter().map(|c| c.name().to_string()).collect()
        };
        out.insert(
            config.name.clone(),
            ExperimentClaims {
                full: names(&config),
                quick: names(&quick),
            },
        );
    }
    Ok(out)
}

/// Everything in `registry` that the experiments or the quick baseline contradict: an
/// experiment or claim that does not exist, a claim the quick run evaluates that the baseline
/// does not record, or records failing on some machine kind. Empty when all holds.
pub fn verify(
    registry: &Registry,
    experiments: &BTreeMap<String, ExperimentClaims>,
    quick_baseline: &Baseline,
) -> Vec<String> {
    let mut problems = Vec::new();
    for c in &registry.claims {
        let Some(name) = &c.experiment else { continue };
        let Some(exp) = experiments.get(name) else {
            problems.push(format!("{}: no experiment named `{name}`", c.id));
            continue;
        };
        for claim in &c.asserts {
            if !exp.full.contains(claim) && !exp.quick.contains(claim) {
                problems.push(format!(
                    "{}: experiment `{name}` has no claim \"{claim}\"",
                    c.id
                ));
                continue;
            }
            if !exp.quick.contains(claim) {
                continue;
            }
            let records = recorded(quick_baseline, name, claim);
            if records.is_empty() {
                problems.push(format!(
                    "{}: the quick baseline records no verdict of `{name}`'s claim \"{claim}\" (rewrite it from a quick reproduction: parbench check RUNS --write-baseline results/baselines/quick.json)",
                    c.id
                ));
            }
            for (kind, r) in records.iter().filter(|(_, r)| !r.passed) {
                problems.push(format!(
                    "{}: `{name}`'s claim \"{claim}\" failed in the quick baseline's run on {kind}: {}",
                    c.id, r.detail
                ));
            }
        }
    }
    problems
}

/// The verdicts `baseline` records of `experiment`'s claim `claim`, by machine kind.
pub fn recorded<'a>(
    baseline: &'a Baseline,
    experiment: &str,
    claim: &str,
) -> Vec<(&'a str, &'a RecordedClaim)> {
    baseline
        .experiments
        .get(experiment)
        .map(|e| {
            e.claims
                .iter()
                .filter_map(|(kind, by_name)| by_name.get(claim).map(|r| (kind.as_str(), r)))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// `parbench claims`.
// ---------------------------------------------------------------------------------------------

/// `parbench claims`: the papers' claims and what parbench does with each.
#[derive(Args, Debug)]
pub struct ClaimsArgs {
    /// Papers to show: an id (`000` to `004`) or a word of the title (`sinkhorn`, `lda`);
    /// default every paper.
    pub papers: Vec<String>,
    /// Only claims with this status.
    #[arg(long, value_enum)]
    pub status: Option<Status>,
    /// The baseline whose recorded runs give each asserted claim's last measured value.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "results/baselines/quick.json"
    )]
    pub baseline: PathBuf,
    /// Read this registry file instead of the one compiled in (docs/paper_claims.yaml).
    #[arg(long, value_name = "FILE")]
    pub registry: Option<PathBuf>,
    /// Hold the registry to the experiments and to --baseline: every claim it says parbench
    /// asserts must exist, and pass in the baseline's recorded quick runs. Exit 1 otherwise.
    #[arg(long)]
    pub verify: bool,
    /// Where the experiment files are (for --verify).
    #[arg(long, value_name = "DIR", default_value = "experiments")]
    pub experiments: PathBuf,
    /// Print only the counts per paper, as a Markdown table (the README's summary).
    #[arg(long, conflicts_with_all = ["json", "verify"])]
    pub markdown: bool,
    /// Print JSON: every claim with its recorded verdicts, and the counts per paper.
    #[arg(long, conflicts_with = "verify")]
    pub json: bool,
}

/// Runs `parbench claims`; `Ok(false)` when --verify found problems.
pub fn run(args: &ClaimsArgs) -> Result<bool> {
    let registry = match &args.registry {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read the claims registry", path.display()))?;
            parse(&text, path)?
        }
        None => embedded()?,
    };
    if args.markdown {
        print!("{}", markdown_counts(&registry));
        return Ok(true);
    }
    // A missing baseline only hides the last values, except for --verify, which needs it.
    let baseline = if args.baseline.exists() || args.verify {
        Some(Baseline::load(&args.baseline)?)
    } else {
        None
    };
    if args.verify {
        let experiments = experiment_claims(&args.experiments)?;
        let baseline = baseline.unwrap_or_default();
        let problems = verify(&registry, &experiments, &baseline);
        for p in &problems {
            println!("{p}");
        }
        let asserted = registry
            .claims
            .iter()
            .filter(|c| !c.asserts.is_empty())
            .count();
        if problems.is_empty() {
            println!(
                "the registry's {} claims hold: the {asserted} with asserting claims name claims that exist, and every one the quick run evaluates passed in {}",
                registry.claims.len(),
                args.baseline.display()
            );
        } else {
            println!("{} problem(s) in the registry", problems.len());
        }
        return Ok(problems.is_empty());
    }
    let status = args.status;
    let papers = registry.select_papers(&args.papers)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json(&registry, &papers, status, baseline.as_ref()))?
        );
    } else {
        print!("{}", text(&registry, &papers, status, baseline.as_ref()));
    }
    Ok(true)
}

/// The claims of `papers` (with `status` only, if given) as the terminal shows them.
pub fn text(
    registry: &Registry,
    papers: &[&Paper],
    status: Option<Status>,
    baseline: Option<&Baseline>,
) -> String {
    let mut out = String::new();
    for paper in papers {
        let counts = Counts::of(registry.of_paper(&paper.id));
        let _ = writeln!(
            out,
            "== {} {}: {} claims, {} testable on a machine like this: {} reproduced, {} weaker, {} missing; {} not here",
            paper.id,
            paper.title,
            counts.claims,
            counts.testable,
            counts.reproduced,
            counts.weaker,
            counts.missing,
            counts.not_here
        );
        for c in registry.listed(&paper.id, status) {
            let dep = match c.machine {
                Dependence::Independent => "machine-independent",
                Dependence::Dependent => "machine-dependent",
            };
            let _ = writeln!(
                out,
                "{:<4} {:<10} {}: {}",
                c.id,
                c.status.name(),
                c.source,
                c.claim
            );
            let _ = writeln!(out, "     paper: {} ({dep})", c.number);
            if let Some(exp) = &c.experiment {
                let verdicts = c.verdicts(baseline);
                for claim in &c.asserts {
                    let _ = writeln!(out, "     asserts: {exp}: \"{claim}\"");
                    for (_, kind, r) in verdicts.iter().filter(|(of, _, _)| of == claim) {
                        let mark = if r.passed { "PASS" } else { "FAIL" };
                        let _ = writeln!(
                            out,
                            "       last quick run on {kind}: [{mark}] {}",
                            r.detail
                        );
                    }
                }
            }
            if let Some(why) = &c.why {
                let _ = writeln!(out, "     why: {why}");
            }
        }
        out.push('\n');
    }
    let all = Counts::of(
        registry
            .claims
            .iter()
            .filter(|c| papers.iter().any(|p| p.id == c.paper)),
    );
    let _ = writeln!(
        out,
        "total: {} claims, {} testable here: {} reproduced, {} weaker, {} missing; {} not here",
        all.claims, all.testable, all.reproduced, all.weaker, all.missing, all.not_here
    );
    out
}

/// The counts per paper as a Markdown table.
pub fn markdown_counts(registry: &Registry) -> String {
    let mut out = String::from(
        "| Paper | Claims | Testable here | Reproduced | Weaker | Missing | Not here |\n|---|---|---|---|---|---|---|\n",
    );
    for p in &registry.papers {
        let n = Counts::of(registry.of_paper(&p.id));
        let _ = writeln!(
            out,
            "| {} {} | {} | {} | {} | {} | {} | {} |",
            p.id, p.title, n.claims, n.testable, n.reproduced, n.weaker, n.missing, n.not_here
        );
    }
    let n = Counts::of(&registry.claims);
    let _ = writeln!(
        out,
        "| **Total** | **{}** | **{}** | **{}** | **{}** | **{}** | **{}** |",
        n.claims, n.testable, n.reproduced, n.weaker, n.missing, n.not_here
    );
    out
}

/// The claims of `papers` with their recorded verdicts, and the counts per paper.
pub fn json(
    registry: &Registry,
    papers: &[&Paper],
    status: Option<Status>,
    baseline: Option<&Baseline>,
) -> serde_json::Value {
    let papers: Vec<serde_json::Value> = papers
        .iter()
        .map(|p| {
            let claims: Vec<serde_json::Value> = registry
                .listed(&p.id, status)
                .map(|c| {
                    let mut value = serde_json::to_value(c).unwrap_or_default();
                    let verdicts: Vec<serde_json::Value> = c
                        .verdicts(baseline)
                        .into_iter()
                        .map(|(claim, kind, r)| {
                            serde_json::json!({
                                "claim": claim,
                                "machine": kind,
                                "passed": r.passed,
                                "detail": r.detail,
                            })
                        })
                        .collect();
                    value["recorded"] = serde_json::Value::Array(verdicts);
                    value
                })
                .collect();
            serde_json::json!({
                "id": p.id,
                "title": p.title,
                "counts": Counts::of(registry.of_paper(&p.id)),
                "claims": claims,
            })
        })
        .collect();
    serde_json::json!({ "papers": papers, "counts": Counts::of(&registry.claims) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "papers:\n  - { id: \"000\", title: Sinkhorn }\nclaims:\n  - id: S1\n    paper: \"000\"\n    source: Fig. 8\n    claim: fast\n    number: 100x\n    machine: dependent\n    status: reproduced\n    experiment: fig8\n    asserts: [fused is 100x faster]\n  - id: S2\n    paper: \"000\"\n    source: Fig. 5\n    claim: PIUMA scales\n    number: none\n    machine: dependent\n    status: not-here\n    why: PIUMA\n";

    fn small() -> Registry {
        parse(SMALL, Path::new("r.yaml")).unwrap()
    }

    #[test]
    fn the_committed_registry_reads() {
        let r = embedded().unwrap();
        assert_eq!(r.papers.len(), 5);
        assert!(r.claims.len() >= 70, "{}", r.claims.len());
    }

    #[test]
    fn a_status_without_its_fields_is_an_error_at_its_entry() {
        let text = SMALL.replace("    why: PIUMA\n", "");
        let err = parse(&text, Path::new("r.yaml")).unwrap_err().to_string();
        assert!(
            err.starts_with("r.yaml:13:")
                && err.contains("claim S2: status `not-here` needs `why`"),
            "{err}"
        );
        let text = SMALL.replace("    asserts: [fused is 100x faster]\n", "");
        let err = parse(&text, Path::new("r.yaml")).unwrap_err().to_string();
        assert!(
            err.contains("r.yaml:4:") && err.contains("needs `experiment` and `asserts`"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_values_papers_and_repeated_ids_are_refused() {
        let err = parse(
            &SMALL.replace("status: reproduced", "status: done"),
            Path::new("r.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("r.yaml:10") && err.contains("reproduced"),
            "{err}"
        );
        let err = parse(
            &SMALL.replace("    number: 100x", "    numbr: 100x"),
            Path::new("r.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("r.yaml:8") && err.contains("unknown field `numbr`"),
            "{err}"
        );
        let err = parse(&SMALL.replace("id: S2", "id: S1"), Path::new("r.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("claim S1: the id is used twice"), "{err}");
        let err = parse(
            &SMALL.replacen("paper: \"000\"", "paper: \"009\"", 1),
            Path::new("r.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("paper `009` is not listed"), "{err}");
    }

    fn experiments(full: &[&str], quick: &[&str]) -> BTreeMap<String, ExperimentClaims> {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        BTreeMap::from([(
            "fig8".to_string(),
            ExperimentClaims {
                full: set(full),
                quick: set(quick),
            },
        )])
    }

    fn baseline_with(passed: Option<bool>) -> Baseline {
        let mut b = Baseline::default();
        let mut exp = crate::analysis::check::ExperimentBaseline::default();
        if let Some(passed) = passed {
            exp.claims.insert(
                "kind A".into(),
                BTreeMap::from([(
                    "fused is 100x faster".to_string(),
                    RecordedClaim {
                        passed,
                        detail: "dense/fused = 150x".into(),
                    },
                )]),
            );
        }
        b.experiments.insert("fig8".into(), exp);
        b
    }

    #[test]
    fn verify_holds_the_registry_to_the_experiments_and_the_baseline() {
        let r = small();
        let claim = ["fused is 100x faster"];
        assert!(verify(&r, &experiments(&claim, &claim), &baseline_with(Some(true))).is_empty());
        // A full-run claim the quick run does not evaluate needs no recorded verdict.
        assert!(verify(&r, &experiments(&claim, &[]), &baseline_with(None)).is_empty());
        let failed = verify(
            &r,
            &experiments(&claim, &claim),
            &baseline_with(Some(false)),
        );
        assert!(
            failed.len() == 1
                && failed[0]
                    .contains("failed in the quick baseline's run on kind A: dense/fused = 150x"),
            "{failed:?}"
        );
        let unrecorded = verify(&r, &experiments(&claim, &claim), &baseline_with(None));
        assert!(
            unrecorded[0].contains("records no verdict"),
            "{unrecorded:?}"
        );
        let renamed = verify(
            &r,
            &experiments(&["fused is 99x faster"], &[]),
            &baseline_with(None),
        );
        assert!(
            renamed[0].contains("has no claim \"fused is 100x faster\""),
            "{renamed:?}"
        );
        let gone = verify(&r, &BTreeMap::new(), &baseline_with(None));
        assert!(gone[0].contains("no experiment named `fig8`"), "{gone:?}");
    }

    #[test]
    fn counts_and_paper_selection() {
        let r = small();
        let n = Counts::of(&r.claims);
        assert_eq!(
            (n.claims, n.testable, n.reproduced, n.not_here),
            (2, 1, 1, 1)
        );
        assert_eq!(r.select_papers(&["sinkhorn".into()]).unwrap().len(), 1);
        assert_eq!(r.select_papers(&["000".into()]).unwrap().len(), 1);
        let err = r.select_papers(&["lda".into()]).unwrap_err().to_string();
        assert!(
            err.contains("no paper `lda`") && err.contains("000 (Sinkhorn)"),
            "{err}"
        );
        let table = markdown_counts(&r);
        assert!(
            table.contains("| 000 Sinkhorn | 2 | 1 | 1 | 0 | 0 | 1 |"),
            "{table}"
        );
    }

    #[test]
    fn the_text_shows_each_claims_last_recorded_verdict() {
        let r = small();
        let papers = r.select_papers(&[]).unwrap();
        let shown = text(&r, &papers, None, Some(&baseline_with(Some(true))));
        assert!(
            shown.contains("asserts: fig8: \"fused is 100x faster\"\n       last quick run on kind A: [PASS] dense/fused = 150x"),
            "{shown}"
        );
        let only = text(&r, &papers, Some(Status::NotHere), None);
        assert!(only.contains("S2") && !only.contains("S1 "), "{only}");
    }
}
