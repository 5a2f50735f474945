//! `parbench compare`: a head-to-head of variants of one family on any point, without writing
//! YAML. The command line becomes an experiment file (kept in the run directory, so the
//! comparison can be rerun with `parbench run` or committed), validated like any other before
//! anything runs, and run with the variants' repetitions interleaved; the table gives each
//! variant's time as a ratio to the first variant's with a bootstrap interval, and its
//! agreement with the first variant's output where the family's variants compute the same
//! numbers.

use crate::analysis::summary::percent;
use crate::exec::runner;
use crate::experiment::plan::{self, Plan, PlanError};
use crate::families;
use crate::family::ResultRow;
use crate::util::stats::ratio_of_medians;
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What `parbench compare` is asked.
#[derive(clap::Args, Clone, Debug)]
#[command(
    about = "Head-to-head of any variants of a family on any point, without writing YAML",
    long_about = "Head-to-head of any variants of a family on any point, without writing YAML.\n\n\
The command line becomes an experiment (written to the run directory as experiment.yaml, so \
`parbench run DIR/experiment.yaml` reruns it), validated like an experiment file before anything runs: \
every unknown parameter, misspelled variant or impossible point is reported at once. The variants' \
repetitions are interleaved (ABAB...), so drift on a shared machine hits them alike. The table gives \
each variant's median time, its spread, its time over the first variant's with a bootstrap interval, \
and, for families whose variants compute the same numbers (sinkhorn, fusedmm, fusedmm-apps), the \
largest relative difference of its output from the first variant's.\n\n\
Example: parbench compare sinkhorn --variants fused-par,doc-major --sweep threads=1,2\n\n\
`parbench list` shows each family's variants and parameters with their defaults. Exit code 3 when a \
variant's output does not agree with the first variant's to --rel-tol."
)]
pub struct CompareArgs {
    /// The family (`parbench list` names them).
    pub family: String,
    /// Variants to compare, comma-separated; the others are compared with the first. A variant
    /// may set options of its own after its name: `--variants "sync,async non_blocking=true"`.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "A,B[,C...]"
    )]
    pub variants: Vec<String>,
    /// A parameter of every point (repeatable), e.g. `--set docs=5000`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// A parameter to sweep (repeatable; every combination is a point), e.g. `--sweep threads=1,2`.
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Timed runs of each variant at each point.
    #[arg(long, default_value_t = 5)]
    pub repetitions: usize,
    /// Untimed runs of each variant at each point before the timed ones.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// A dataset of the data dir (`parbench list` names each family's) instead of synthetic data.
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<String>,
    /// Seed of the synthetic data and of the runs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Largest relative difference from the first variant's output that agrees.
    #[arg(long, default_value_t = 1e-9)]
    pub rel_tol: f64,
    /// Confidence of the ratios' bootstrap intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Run directory to write (default results/compare_<family>-<timestamp>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the table as JSON (one object per point and variant).
    #[arg(long)]
    pub json: bool,
    /// Plain progress lines instead of a progress bar.
    #[arg(long)]
    pub no_progress_bar: bool,
}

/// The experiment name a comparison of `family` runs under (its run directory's prefix).
pub fn experiment_name(family: &str) -> String {
    format!("compare_{}", family.replace('-', "_"))
}

/// One value of the command line as it would be written in an experiment file: as typed
/// when it is a plain word or number (so `5` is an integer, `0.5` a float, `sparse` a string,
/// exactly as the same text in a file), quoted otherwise.
fn scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.+-/".contains(c))
        && !text.starts_with(['-', '.', '/'])
        || text.parse::<f64>().is_ok();
    if plain {
        text.to_string()
    } else {
        quoted(text)
    }
}

/// `text` as a double-quoted YAML string (JSON's escapes are YAML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

/// `KEY=VALUE` split, or what is wrong with it.
fn key_value<'a>(flag: &str, item: &'a str) -> Result<(&'a str, &'a str), String> {
    match item.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => Ok((k.trim(), v.trim())),
        _ => Err(format!(
            "{flag} `{item}`: expected KEY=VALUE{}",
            if flag == "--sweep" {
                "S (V1,V2,...)"
            } else {
                ""
            }
        )),
    }
}

/// The experiment file the command line describes, or every problem with the flags themselves
/// (the rest is the plan's to find).
pub fn experiment_yaml(args: &CompareArgs) -> Result<String, Vec<String>> {
    use std::fmt::Write;
    let mut problems = Vec::new();
    let mut params: Vec<(String, String)> = Vec::new();
    let mut sweep: Vec<(String, String)> = Vec::new();
    for item in &args.set {
        match key_value("--set", item) {
            Ok((k, _)) if params.iter().any(|(p, _)| p == k) => {
                problems.push(format!("--set `{k}` is given twice"));
            }
            Ok((k, v)) => params.push((k.to_string(), scalar(v))),
            Err(e) => problems.push(e),
        }
    }
    for item in &args.sweep {
        match key_value("--sweep", item) {
            Ok((k, _)) if sweep.iter().any(|(p, _)| p == k) => {
                problems.push(format!("--sweep `{k}` is given twice"));
            }
            Ok((k, _)) if params.iter().any(|(p, _)| p == k) => {
                problems.push(format!("`{k}` is both set (--set) and swept (--sweep)"));
            }
            Ok((k, v)) => {
                let values: Vec<String> = v.split(',').map(|x| scalar(x.trim())).collect();
                sweep.push((k.to_string(), format!("[{}]", values.join(", "))));
            }
            Err(e) => problems.push(e),
        }
    }
    let variants: Vec<String> = args
        .variants
        .iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if variants.is_empty() {
        problems.push("--variants names no variant".to_string());
    }
    for (i, v) in variants.iter().enumerate() {
        if variants[..i].contains(v) {
            problems.push(format!("--variants names `{v}` twice"));
        }
    }
    if args.repetitions == 0 {
        problems.push("--repetitions must be at least 1".to_string());
    }
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        problems.push(format!("--confidence {} is not in (0, 1)", args.confidence));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut y = String::new();
    let _ = writeln!(
        y,
        "# Written by: parbench compare; rerun with: parbench run <this file>"
    );
    let _ = writeln!(y, "name: {}", experiment_name(&args.family));
    let _ = writeln!(
        y,
        "description: {}",
        quoted(&format!(
            "parbench compare {}: {} head to head",
            args.family,
            variants.join(" vs ")
        ))
    );
    let _ = writeln!(y, "paper: \"none: a head-to-head from the command line\"");
    let _ = writeln!(y, "reproduces: \"-\"");
    let _ = writeln!(y, "family: {}", quoted(&args.family));
    match &args.dataset {
        Some(file) => {
            let _ = writeln!(
                y,
                "data: {{ source: dataset, file: {}, seed: {} }}",
                quoted(file),
                args.seed
            );
        }
        None => {
            let _ = writeln!(y, "data: {{ source: synthetic, seed: {} }}", args.seed);
        }
    }
    let names: Vec<String> = variants.iter().map(|v| quoted(v)).collect();
    let _ = writeln!(y, "variants: [{}]", names.join(", "));
    for (section, entries) in [("params", &params), ("sweep", &sweep)] {
        if !entries.is_empty() {
            let _ = writeln!(y, "{section}:");
            for (k, v) in entries {
                let _ = writeln!(y, "  {}: {v}", scalar(k));
            }
        }
    }
    let _ = writeln!(y, "repetitions: {}", args.repetitions);
    let _ = writeln!(y, "warmup: {}", args.warmup);
    let agree = families::find(&args.family).is_some_and(|f| f.outputs_agree());
    if agree && variants.len() > 1 {
        let _ = writeln!(
            y,
            "equivalence: {{ reference: {}, rel_tol: {:e} }}",
            names[0], args.rel_tol
        );
        let _ = writeln!(y, "claims:");
        let _ = writeln!(y, "  - kind: equivalence");
        let _ = writeln!(
            y,
            "    name: {}",
            quoted(&format!(
                "every variant agrees with {} to {:e}",
                variants[0], args.rel_tol
            ))
        );
    }
    Ok(y)
}

/// The validated plan of the comparison, or every problem, phrased for the command line (the
/// generated file's lines and columns would mean nothing to its user).
pub fn build_plan(args: &CompareArgs, data_dir: Option<&Path>) -> Result<Plan> {
    let text = experiment_yaml(args).map_err(|problems| {
        anyhow!(
            "parbench compare: {}",
            problems.join("\nparbench compare: ")
        )
    })?;
    let label = Path::new("parbench compare");
    match plan::build_from_str(&text, label, false, data_dir) {
        Ok(plan) => Ok(plan),
        Err(PlanError::Invalid { problems, .. }) => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| match &p.help {
                    Some(help) => format!("parbench compare: {}\n  help: {help}", p.message),
                    None => format!("parbench compare: {}", p.message),
                })
                .collect();
            bail!("{}", lines.join("\n"))
        }
        Err(e) => Err(e.into()),
    }
}

/// One line of the comparison: a variant at a point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    /// The point's parameters that the sweep varies (all of them when nothing is swept).
    pub point: BTreeMap<String, String>,
    pub variant: String,
    pub repetitions: usize,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Median GFLOP/s, for families that report it.
    pub gflop_per_s: Option<f64>,
    /// Median share of the machine's bound (its least time over the measured one).
    pub fraction_of_bound: Option<f64>,
    /// Median time over the first variant's at the point (1 for the first).
    pub ratio: Option<f64>,
    /// Bootstrap interval of the ratio.
    pub ratio_lower: Option<f64>,
    pub ratio_upper: Option<f64>,
    /// Largest relative difference of the output from the first variant's (for families whose
    /// variants compute the same numbers).
    pub rel_error: Option<f64>,
}

/// The comparison of `rows` (a run of `variants`, the first the baseline), point by point in
/// run order, `swept` naming the parameters that tell the points apart.
pub fn lines(
    rows: &[ResultRow],
    variants: &[String],
    swept: &[String],
    confidence: f64,
) -> Vec<Line> {
    let all = crate::analysis::summary::summarize(rows);
    let mut out = Vec::new();
    for first in all.iter().filter(|v| Some(&v.variant) == variants.first()) {
        // The point's summaries in the order the variants were named.
        for variant in variants {
            let Some(v) = all
                .iter()
                .find(|v| v.point == first.point && &v.variant == variant)
            else {
                continue;
            };
            let interval = ratio_of_medians(&v.times, &first.times, confidence);
            out.push(Line {
                point: v
                    .params
                    .iter()
                    .filter(|(k, _)| swept.is_empty() || swept.contains(k))
                    .map(|(k, x)| (k.clone(), x.to_string()))
                    .collect(),
                variant: v.variant.clone(),
                repetitions: v.times.len(),
                median_s: v.median_s,
                min_s: v.min_s,
                max_s: v.max_s,
                gflop_per_s: v.gflop_per_s,
                fraction_of_bound: v.fraction_of_bound,
                ratio: interval.as_ref().map(|i| i.ratio),
                ratio_lower: interval.as_ref().map(|i| i.lower),
                ratio_upper: interval.as_ref().map(|i| i.upper),
                rel_error: v.max_rel_error,
            });
        }
    }
    out
}

/// The comparison as a table, the first variant's line at each point reading `1 (baseline)`.
pub fn table(lines: &[Line], first: &str, confidence: f64) -> String {
    use std::fmt::Write;
    let point_text = |l: &Line| {
        let s: Vec<String> = l.point.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if s.is_empty() {
            "-".to_string()
        } else {
            s.join(" ")
        }
    };
    let pw = lines
        .iter()
        .map(|l| point_text(l).len())
        .max()
        .unwrap_or(5)
        .clamp(5, 48);
    let vw = lines
        .iter()
        .map(|l| l.variant.len())
        .max()
        .unwrap_or(7)
        .max(7);
    // f64's Display prints 95.0 as "95" and 99.5 as "99.5".
    let ratio_head = format!("time / {first} ({}% interval)", 100.0 * confidence);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<pw$} {:<vw$} {:>10} {:>17} {:>8} {:>7} {:<34} {:>9}",
        "point", "variant", "median s", "min-max s", "GFLOP/s", "% bound", ratio_head, "rel err"
    );
    for l in lines {
        let ratio = match (l.ratio, l.ratio_lower, l.ratio_upper) {
            _ if l.variant == first => "1 (baseline)".to_string(),
            (Some(r), Some(lo), Some(hi)) => format!("{r:.3}x ({lo:.3}-{hi:.3})"),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<pw$} {:<vw$} {:>10.6} {:>17} {:>8} {:>7} {:<34} {:>9}",
            point_text(l),
            l.variant,
            l.median_s,
            format!("{:.4}-{:.4}", l.min_s, l.max_s),
            l.gflop_per_s.map_or("-".to_string(), |g| format!("{g:.2}")),
            percent(l.fraction_of_bound),
            ratio,
            l.rel_error.map_or("-".to_string(), |e| format!("{e:.1e}")),
        );
    }
    s
}

/// Runs the comparison into `dir` and prints its table (or JSON); whether every claim (the
/// agreement of the outputs) passed.
pub fn run(args: &CompareArgs, plan: &Plan, dir: &Path) -> Result<bool> {
    let mode = if args.no_progress_bar {
        runner::ProgressMode::Lines
    } else {
        runner::ProgressMode::Auto
    };
    let summary = runner::run(plan, dir, false, mode)?;
    let swept: Vec<String> = plan.config.sweep.keys().cloned().collect();
    let lines = lines(
        &summary.rows,
        &plan.config.variants,
        &swept,
        args.confidence,
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else {
        println!(
            "== parbench compare {}: {} repetitions each, interleaved ==",
            args.family, args.repetitions
        );
        print!(
            "{}",
            table(&lines, &plan.config.variants[0], args.confidence)
        );
        for c in &summary.claims {
            println!(
                "[{}] {}: {}",
                if c.passed { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        println!(
            "results: {} (rerun: parbench run {})",
            summary.run_dir.display(),
            summary
                .run_dir
                .join(crate::results::EXPERIMENT_YAML)
                .display()
        );
    }
    Ok(summary.passed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{Params, Value};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CompareArgs,
    }

    fn args(line: &[&str]) -> CompareArgs {
        let mut v = vec!["compare"];
        v.extend_from_slice(line);
        Cli::try_parse_from(v).unwrap().args
    }

    #[test]
    fn the_command_line_becomes_an_experiment_that_validates() {
        let a = args(&[
            "mock",
            "--variants",
            "slow,fast",
            "--set",
            "work=2.5",
            "--sweep",
            "size=100,1000",
            "--repetitions",
            "3",
        ]);
        let text = experiment_yaml(&a).unwrap();
        let plan = plan::build_from_str(&text, Path::new("x"), false, None).unwrap();
        assert_eq!(plan.config.variants, ["slow", "fast"]);
        assert_eq!(plan.points.len(), 2);
        assert_eq!(plan.points[0].get("size"), Some(&Value::Int(100)));
        assert_eq!(plan.points[0].get("work"), Some(&Value::Float(2.5)));
        assert_eq!(plan.config.repetitions, 3);
        let eq = plan.config.equivalence.as_ref().unwrap();
        assert_eq!(eq.reference, "slow");
        assert_eq!(plan.config.claims.len(), 1);
    }

    #[test]
    fn bad_flags_are_all_reported_and_bad_names_by_the_plan() {
        let a = args(&[
            "mock",
            "--variants",
            "slow,slow",
            "--set",
            "size",
            "--sweep",
            "=1,2",
            "--repetitions",
            "0",
        ]);
        let problems = experiment_yaml(&a).unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        let a = args(&[
            "mock",
            "--variants",
            "slow,fsat",
            "--set",
            "sise=10",
            "--sweep",
            "size=0,10",
        ]);
        let err = build_plan(&a, None).unwrap_err().to_string();
        for needle in ["fsat", "sise", "size"] {
            assert!(err.contains(needle), "{needle} missing from: {err}");
        }
        assert!(
            err.lines()
                .filter(|l| l.starts_with("parbench compare:"))
                .count()
                >= 3,
            "{err}"
        );
    }

    #[test]
    fn lines_give_ratios_to_the_first_variant_and_agreement() {
        let row = |point: usize, variant: &str, t: f64, err: Option<f64>| ResultRow {
            experiment: "compare_mock".to_string(),
            point,
            params: Params::from([("size".to_string(), Value::Int(point as i64 + 1))]),
            variant: variant.to_string(),
            repetition: 0,
            wall_time_s: t,
            phases_s: BTreeMap::new(),
            metrics: BTreeMap::new(),
            equiv_rel_error: err,
        };
        let mut rows = Vec::new();
        for k in 0..5 {
            let noise = 1.0 + 0.01 * k as f64;
            rows.push(row(0, "a", 2.0 * noise, None));
            rows.push(row(0, "b", 1.0 * noise, Some(1e-12)));
        }
        let variants = ["a".to_string(), "b".to_string()];
        let l = lines(&rows, &variants, &["size".to_string()], 0.95);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].ratio, Some(1.0));
        let b = &l[1];
        assert_eq!(b.ratio, Some(0.5));
        assert!(b.ratio_lower.unwrap() <= 0.5 && b.ratio_upper.unwrap() >= 0.5);
        assert_eq!(b.rel_error, Some(1e-12));
        assert_eq!(b.repetitions, 5);
        let t = table(&l, "a", 0.95);
        assert!(t.contains("1 (baseline)") && t.contains("0.500x"), "{t}");
    }
}
