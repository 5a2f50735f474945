//! Runs a [`Plan`]: every point, every variant, warm-up then repetitions, equivalence against the
//! reference variant, results written after each point so an interrupted sweep can resume.
//!
//! The runner knows families only through [`Family`], so the scripted mock family drives this whole
//! pipeline in tests without any real timing.

use crate::analysis::claims::{self, ClaimOutcome};
use crate::experiment::plan::Plan;
use crate::family::{Measurement, Params, ResultRow};
use crate::results;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// How a run reports its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A progress bar on a terminal, plain lines otherwise.
    Auto,
    /// Plain lines on stderr.
    Lines,
    /// Nothing (tests).
    Silent,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct RunSummary {
    pub run_dir: PathBuf,
    pub rows: Vec<ResultRow>,
    pub claims: Vec<ClaimOutcome>,
    pub figures: Vec<PathBuf>,
    /// Points skipped because a resumed run already had them.
    pub resumed_points: usize,
}

impl RunSummary {
    /// Every claim held.
    pub fn passed(&self) -> bool {
        self.claims.iter().all(|c| c.passed)
    }
}

/// Largest difference from the reference output, relative to the reference's largest magnitude
/// (a normwise error: element-wise ratios would explode on distances that are exactly 0).
pub fn relative_error(output: &[f64], reference: &[f64]) -> f64 {
    if output.len() != reference.len() {
        return f64::INFINITY;
    }
    let scale = reference.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let diff = output.iter().zip(reference).fold(0.0f64, |m, (a, b)| {
        if (a - b).is_nan() {
            f64::INFINITY
        } else {
            m.max((a - b).abs())
        }
    });
    if scale > 0.0 {
        diff / scale
    } else {
        diff
    }
}

/// Variants in run order: the equivalence reference first, so every other variant can be compared
/// as soon as it finishes.
fn run_order(plan: &Plan) -> Vec<String> {
    let mut order = plan.config.variants.clone();
    if let Some(eq) = &plan.config.equivalence {
        if let Some(i) = order.iter().position(|v| *v == eq.reference) {
            let r = order.remove(i);
            order.insert(0, r);
        }
    }
    order
}

fn describe(point: &Params) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `plan` into `run_dir`. With `resume`, rows already stored there are kept and their points
/// skipped (a point counts as done when every variant has every repetition).
pub fn run(plan: &Plan, run_dir: &Path, resume: bool, mode: ProgressMode) -> Result<RunSummary> {
    std::fs::create_dir_all(run_dir)
        .with_context(|| format!("creating run directory {}", run_dir.display()))?;
    let cfg = &plan.config;
    let mut rows: Vec<ResultRow> = Vec::new();
    if resume {
        if run_dir.join(results::RESULTS_PARQUET).exists() {
            rows = results::read_rows(run_dir)
                .with_context(|| format!("reading stored results in {}", run_dir.display()))?;
            rows.retain(|r| r.experiment == cfg.name);
        }
    } else if run_dir.join(results::RESULTS_PARQUET).exists() {
        bail!(
            "{} already holds results; pass --resume to continue that run or choose another --out",
            run_dir.display()
        );
    }
    // A run killed while saving leaves hidden temporary files (the real files are intact).
    results::remove_stale_temp_files(run_dir);
    results::remove_stale_temp_files(&results::figures_dir(run_dir));
    let started = results::now_rfc3339();
    let machine = crate::exec::machine::collect(plan.quick);
    let mut meta = results::RunMeta::new(plan, machine, started);
    results::write_atomic(
        &run_dir.join(results::EXPERIMENT_YAML),
        plan.yaml_text.as_bytes(),
    )?;
    results::write_meta(run_dir, &meta)?;

    let order = run_order(plan);
    let reps = cfg.repetitions.max(1);
    let runs_per_point = order.len() * (cfg.warmup + reps);
    let total = (plan.points.len() * runs_per_point) as u64;
    let bar = make_bar(mode, total, &cfg.name);
    let mut resumed_points = 0;

    for (index, point) in plan.points.iter().enumerate() {
        let done: BTreeSet<(String, usize)> = rows
            .iter()
            .filter(|r| r.point == index && r.params == *point)
            .map(|r| (r.variant.clone(), r.repetition))
            .collect();
        if order
            .iter()
            .all(|v| (0..reps).all(|k| done.contains(&(v.clone(), k))))
        {
            resumed_points += 1;
            bar.inc(runs_per_point as u64);
            continue;
        }
        // A partially recorded point is rerun whole, so its repetitions come from one session.
        rows.retain(|r| r.point != index);
        let label = describe(point);
        bar.set_message(format!(
            "point {}/{} {label}: preparing",
            index + 1,
            plan.points.len()
        ));
        // An MPI point's processes prepare their own input.
        let mpi = crate::experiment::plan::is_mpi_point(point);
        let typed = &plan.typed[index];
        let input = if mpi {
            None
        } else {
            Some(
                plan.family
                    .prepare(typed, plan.dataset.as_deref(), cfg.data.seed)
                    .with_context(|| {
                        format!("preparing the input of point {} ({label})", index + 1)
                    })?,
            )
        };
        let threads = crate::experiment::plan::threads_of(point);
        let mut reference: Option<Vec<f64>> = None;
        for variant in &order {
            bar.set_message(format!(
                "point {}/{} {label}: {variant}",
                index + 1,
                plan.points.len()
            ));
            let context = || format!("running variant {variant} at point {} ({label})", index + 1);
            // Under MPI one launch makes every run of the variant (warm-ups first).
            let mut launched = match &input {
                None => {
                    crate::exec::launch::run_point(plan, run_dir, index, variant, cfg.warmup + reps)
                        .with_context(context)?
                }
                Some(_) => Vec::new(),
            }
            .into_iter();
            let mut run_once = || -> Result<Measurement> {
                match &input {
                    Some(input) => plan
                        .family
                        .run(variant, input, typed, threads)
                        .with_context(context),
                    None => launched.next().context("internal: too few launched runs"),
                }
            };
            for _ in 0..cfg.warmup {
                run_once()?;
                bar.inc(1);
            }
            for repetition in 0..reps {
                let m = run_once()?;
                bar.inc(1);
                let is_reference = cfg
                    .equivalence
                    .as_ref()
                    .is_some_and(|e| e.reference == *variant);
                let equiv_rel_error = match (&cfg.equivalence, &reference) {
                    (Some(_), Some(r)) if !is_reference => Some(relative_error(&m.output, r)),
                    (Some(_), _) if is_reference && repetition > 0 => {
                        reference.as_ref().map(|r| relative_error(&m.output, r))
                    }
                    _ => None,
                };
                if is_reference && repetition == 0 {
                    reference = Some(m.output.clone());
                }
                rows.push(ResultRow {
                    experiment: cfg.name.clone(),
                    point: index,
                    params: point.clone(),
                    variant: variant.clone(),
                    repetition,
                    wall_time_s: m.wall_time_s,
                    phases_s: m.phases_s,
                    metrics: m.metrics,
                    equiv_rel_error,
                });
            }
            if mode == ProgressMode::Lines || (mode == ProgressMode::Auto && bar.is_hidden()) {
                let times: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.point == index && r.variant == *variant)
                    .map(|r| r.wall_time_s)
                    .collect();
                eprintln!(
                    "[{}] point {}/{} {label} {variant}: median {:.4} s over {} runs",
                    cfg.name,
                    index + 1,
                    plan.points.len(),
                    median(&times),
                    times.len()
                );
            }
        }
        rows.sort_by(|a, b| {
            (a.point, &a.variant, a.repetition).cmp(&(b.point, &b.variant, b.repetition))
        });
        results::write_rows(run_dir, &rows)?;
    }
    bar.finish_and_clear();

    let figures = crate::analysis::plot::draw_run_figures(&cfg.figures, &rows, run_dir)?;
    let claims = claims::evaluate(cfg, &rows);
    meta.finished = Some(results::now_rfc3339());
    results::write_meta(run_dir, &meta)?;
    let summary = RunSummary {
        run_dir: run_dir.to_path_buf(),
        rows,
        claims,
        figures,
        resumed_points,
    };
    results::write_atomic(
        &run_dir.join(results::SUMMARY_TXT),
        summary_table(&plan.config.name, &summary.rows, &summary.claims).as_bytes(),
    )?;
    Ok(summary)
}

fn make_bar(mode: ProgressMode, total: u64, name: &str) -> ProgressBar {
    if mode != ProgressMode::Auto || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{prefix:.bold} [{elapsed_precise}] {wide_bar} {pos}/{len} runs (eta {eta}) {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(name.to_string());
    bar
}

/// Median of a non-empty slice (NaN for an empty one).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The table printed at the end of a run: one line per point and variant (median time, spread,
/// GFLOP/s where reported, equivalence error), then the claims.
pub fn summary_table(name: &str, rows: &[ResultRow], claims: &[ClaimOutcome]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "== {name} ==");
    let _ = writeln!(
        s,
        "{:<48} {:<12} {:>12} {:>12} {:>10} {:>10}",
        "point", "variant", "median s", "min-max s", "GFLOP/s", "rel err"
    );
    let mut keys: Vec<(usize, String)> =
        rows.iter().map(|r| (r.point, r.variant.clone())).collect();
    keys.sort();
    keys.dedup();
    for (point, variant) in keys {
        let sel: Vec<&ResultRow> = rows
            .iter()
            .filter(|r| r.point == point && r.variant == variant)
            .collect();
        let times: Vec<f64> = sel.iter().map(|r| r.wall_time_s).collect();
        let lo = times.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = times.iter().cloned().fold(0.0, f64::max);
        let gf: Vec<f64> = sel
            .iter()
            .filter_map(|r| r.metrics.get("gflop_per_s").copied())
            .collect();
        let err = sel
            .iter()
            .filter_map(|r| r.equiv_rel_error)
            .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
        let label = describe(&sel[0].params);
        let _ = writeln!(
            s,
            "{:<48} {:<12} {:>12.6} {:>12} {:>10} {:>10}",
            truncate(&label, 48),
            variant,
            median(&times),
            format!("{:.4}-{:.4}", lo, hi),
            if gf.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", median(&gf))
            },
            err.map_or("-".to_string(), |e| format!("{e:.1e}")),
        );
    }
    if !claims.is_empty() {
        let _ = writeln!(s, "claims:");
        for c in claims {
            let _ = writeln!(
                s,
                "  [{}] {}: {}",
                if c.passed { "PASS" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n - 1).collect();
        format!("{t}…")
    }
}
