//! Runs a [`Plan`]: every point, every variant, warm-up then repetitions, equivalence against the
//! reference variant, results written after each point so an interrupted sweep can resume.
//!
//! The progress trace of every recorded run ([`Measurement::trace`]) goes to `traces.parquet`
//! with the point's parameters, variant and repetition; it is written before the results table
//! after each point, so a point the results table holds always has its trace (a run killed in
//! between leaves trace rows of a point the results lack, which the resumed run replaces).
//!
//! The runner knows families only through [`Family`], so the scripted mock family drives this whole
//! pipeline in tests without any real timing.

use crate::analysis::claims::{self, ClaimOutcome};
use crate::exec::executor::{Executor, OpenPoint, PerPoint};
use crate::experiment::plan::Plan;
use crate::family::{Measurement, Params, ResultRow, TraceRow};
use crate::results;
use crate::util::progress::Progress;
use crate::util::stats::median;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use crate::util::progress::ProgressMode;

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

/// Consecutive runs of one variant the runner asks the executor for.
#[derive(Clone, Debug, PartialEq)]
struct Batch {
    variant: String,
    warmups: usize,
    /// The repetitions recorded, in order.
    repetitions: std::ops::Range<usize>,
}

/// The order of a point's runs. Interleaved: every variant's warm-ups, then round `k` runs
/// repetition `k` of every variant in `order` (ABAB...), so a drift of the machine during the
/// point (another tenant, a clock change) falls on every variant alike and the variants' times
/// stay comparable. Otherwise each variant's runs at once, as a launch needs them.
fn schedule(order: &[String], warmup: usize, reps: usize, interleave: bool) -> Vec<Batch> {
    if !interleave {
        return order
            .iter()
            .map(|v| Batch {
                variant: v.clone(),
                warmups: warmup,
                repetitions: 0..reps,
            })
            .collect();
    }
    let warmups = order.iter().filter(|_| warmup > 0).map(|v| Batch {
        variant: v.clone(),
        warmups: warmup,
        repetitions: 0..0,
    });
    let rounds = (0..reps).flat_map(|k| {
        order.iter().map(move |v| Batch {
            variant: v.clone(),
            warmups: 0,
            repetitions: k..k + 1,
        })
    });
    warmups.chain(rounds).collect()
}

/// The runs of `points` points (numbered from 0 in the group) run together, each batch with its
/// point. One point: its [`schedule`]. Several (interleaved, `interleave_points`): every point's
/// warm-ups, then round `k` runs repetition `k` of every variant at every point, so a claim that
/// compares points (a `scaling` over a parameter) sees a drift of the machine fall on them alike.
fn group_schedule(
    points: usize,
    order: &[String],
    warmup: usize,
    reps: usize,
    interleave: bool,
) -> Vec<(usize, Batch)> {
    if points == 1 {
        return schedule(order, warmup, reps, interleave)
            .into_iter()
            .map(|b| (0, b))
            .collect();
    }
    let per_point: Vec<Vec<Batch>> = (0..points)
        .map(|_| schedule(order, warmup, reps, true))
        .collect();
    let warmups = per_point.iter().enumerate().flat_map(|(p, bs)| {
        bs.iter()
            .filter(|b| b.warmups > 0)
            .map(move |b| (p, b.clone()))
    });
    let rounds = (0..reps).flat_map(|k| {
        per_point.iter().enumerate().flat_map(move |(p, bs)| {
            bs.iter()
                .filter(move |b| b.repetitions.start == k && !b.repetitions.is_empty())
                .map(move |b| (p, b.clone()))
        })
    });
    warmups.chain(rounds).collect()
}

/// A point of the group being run: its executor's open point and the reference's output.
struct Running<'a> {
    index: usize,
    label: String,
    open: Box<dyn OpenPoint + 'a>,
    reference: Option<Vec<f64>>,
}

fn describe(point: &Params) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `plan` into `run_dir`. With `resume`, rows already stored there are kept and their points
/// skipped (a point counts as done when every variant has every repetition). Points run where
/// they say ([`PerPoint`]: across MPI processes for `backend: mpi`, in this process otherwise).
pub fn run(plan: &Plan, run_dir: &Path, resume: bool, mode: ProgressMode) -> Result<RunSummary> {
    run_with(plan, run_dir, resume, mode, &PerPoint::new(run_dir))
}

/// [`run`] with the runs made by `executor`.
pub fn run_with(
    plan: &Plan,
    run_dir: &Path,
    resume: bool,
    mode: ProgressMode,
    executor: &dyn Executor,
) -> Result<RunSummary> {
    if let Some(why) = crate::peers::not_ready(plan.peers.values()) {
        bail!("{}: {why}", plan.config.name);
    }
    std::fs::create_dir_all(run_dir)
        .with_context(|| format!("creating run directory {}", run_dir.display()))?;
    let cfg = &plan.config;
    let mut rows: Vec<ResultRow> = Vec::new();
    let mut traces: Vec<TraceRow> = Vec::new();
    if resume {
        if run_dir.join(results::RESULTS_PARQUET).exists() {
            rows = results::read_rows(run_dir)
                .with_context(|| format!("reading stored results in {}", run_dir.display()))?;
            rows.retain(|r| r.experiment == cfg.name);
            traces = results::read_traces(run_dir)
                .with_context(|| format!("reading stored traces in {}", run_dir.display()))?;
            traces.retain(|t| t.experiment == cfg.name);
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
    let bar = Progress::new(mode, total, "runs", &cfg.name);
    let mut resumed_points = 0;

    let mut todo = Vec::new();
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
        } else {
            todo.push(index);
        }
    }
    // A partially recorded point is rerun whole, so its repetitions come from one session.
    rows.retain(|r| !todo.contains(&r.point));
    traces.retain(|t| !todo.contains(&t.point));
    // Interleaved points are prepared together and run in rounds; otherwise one at a time, so
    // only one point's input is held.
    let groups: Vec<Vec<usize>> = if cfg.interleave_points {
        vec![todo]
    } else {
        todo.into_iter().map(|i| vec![i]).collect()
    };
    for group in groups.iter().filter(|g| !g.is_empty()) {
        let mut running = Vec::with_capacity(group.len());
        for &index in group {
            let label = describe(&plan.points[index]);
            bar.message(|| {
                format!(
                    "point {}/{} {label}: preparing",
                    index + 1,
                    plan.points.len()
                )
            });
            let open = executor
                .open(plan, index)
                .with_context(|| format!("point {} ({label})", index + 1))?;
            running.push(Running {
                index,
                label,
                open,
                reference: None,
            });
        }
        let interleaves = running.iter().all(|r| r.open.interleaves());
        if running.len() > 1 && !interleaves {
            bail!(
                "`interleave_points` needs every point to run in this process (no `backend: mpi`)"
            );
        }
        for (slot, batch) in group_schedule(running.len(), &order, cfg.warmup, reps, interleaves) {
            let Running {
                index,
                label,
                open,
                reference,
            } = &mut running[slot];
            let (index, point) = (*index, &plan.points[*index]);
            let variant = &batch.variant;
            bar.message(|| {
                format!(
                    "point {}/{} {label}: {variant}",
                    index + 1,
                    plan.points.len()
                )
            });
            let context = || format!("running variant {variant} at point {} ({label})", index + 1);
            let mut runs = open
                .runs(variant, batch.warmups + batch.repetitions.len())
                .with_context(context)?;
            let mut run_once = || -> Result<Measurement> {
                runs.next()
                    .context("internal: the executor made too few runs")?
                    .with_context(context)
            };
            for _ in 0..batch.warmups {
                run_once()?;
                bar.inc(1);
            }
            for repetition in batch.repetitions.clone() {
                let m = run_once()?;
                bar.inc(1);
                let is_reference = cfg
                    .equivalence
                    .as_ref()
                    .is_some_and(|e| e.reference == *variant);
                let equiv_rel_error = match (&cfg.equivalence, &*reference) {
                    (Some(_), Some(r)) if !is_reference => Some(relative_error(&m.output, r)),
                    (Some(_), _) if is_reference && repetition > 0 => {
                        reference.as_ref().map(|r| relative_error(&m.output, r))
                    }
                    _ => None,
                };
                if is_reference && repetition == 0 {
                    *reference = Some(m.output.clone());
                }
                traces.extend(m.trace.into_iter().map(|t| TraceRow {
                    experiment: cfg.name.clone(),
                    point: index,
                    params: point.clone(),
                    variant: variant.clone(),
                    repetition,
                    step: t.step,
                    time_s: t.time_s,
                    metrics: t.metrics,
                }));
                let mut metrics = m.metrics;
                crate::exec::bound::add_bound_metrics(
                    &mut metrics,
                    m.wall_time_s,
                    &meta.machine.limits,
                );
                rows.push(ResultRow {
                    experiment: cfg.name.clone(),
                    point: index,
                    params: point.clone(),
                    variant: variant.clone(),
                    repetition,
                    wall_time_s: m.wall_time_s,
                    phases_s: m.phases_s,
                    metrics,
                    equiv_rel_error,
                });
            }
            if bar.lines() && batch.repetitions.end == reps {
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
                    median(&times).unwrap_or(f64::NAN),
                    times.len()
                );
            }
        }
        rows.sort_by(|a, b| {
            (a.point, &a.variant, a.repetition).cmp(&(b.point, &b.variant, b.repetition))
        });
        results::write_traces(run_dir, &traces)?;
        results::write_rows(run_dir, &rows)?;
    }
    bar.finish();

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

/// The table printed at the end of a run: one line per point and variant (median time, spread,
/// GFLOP/s where reported, share of the machine's bound, equivalence error), then the claims.
pub fn summary_table(name: &str, rows: &[ResultRow], claims: &[ClaimOutcome]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "== {name} ==");
    // As wide as the longest variant: a listed one carries its settings (`async delta=sparse`).
    let width = rows
        .iter()
        .map(|r| r.variant.chars().count())
        .max()
        .unwrap_or(0)
        .max(12);
    let _ = writeln!(
        s,
        "{:<48} {:<width$} {:>12} {:>12} {:>10} {:>8} {:>10}",
        "point", "variant", "median s", "min-max s", "GFLOP/s", "% bound", "rel err"
    );
    let summarized = crate::analysis::summary::summarize(rows);
    for v in &summarized {
        let _ = writeln!(
            s,
            "{:<48} {:<width$} {:>12.6} {:>12} {:>10} {:>8} {:>10}",
            truncate(&describe(&v.params), 48),
            v.variant,
            v.median_s,
            format!("{:.4}-{:.4}", v.min_s, v.max_s),
            v.gflop_per_s.map_or("-".to_string(), |g| format!("{g:.2}")),
            crate::analysis::summary::percent(v.fraction_of_bound),
            v.max_rel_error
                .map_or("-".to_string(), |e| format!("{e:.1e}")),
        );
    }
    // A bound is a least time: a median past it says the bound is wrong, not the run fast.
    let past: Vec<String> = summarized
        .iter()
        .filter(|v| v.fraction_of_bound.is_some_and(|f| f > 1.0))
        .map(|v| format!("{} at point {}", v.variant, v.point))
        .collect();
    if !past.is_empty() {
        let _ = writeln!(
            s,
            "note: {} row(s) ran past their bound ({}): the machine's limits or the variant's \
             stated work (metric_work_*) are wrong there",
            past.len(),
            past.join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_row_that_ran_past_its_bound() {
        let row = |point: usize, variant: &str, fraction: f64| ResultRow {
            experiment: "e".to_string(),
            point,
            params: Params::new(),
            variant: variant.to_string(),
            repetition: 0,
            wall_time_s: 1.0,
            phases_s: Default::default(),
            metrics: [("fraction_of_bound".to_string(), fraction)].into(),
            equiv_rel_error: None,
        };
        let within = summary_table("e", &[row(0, "a", 0.4), row(0, "b", 1.0)], &[]);
        assert!(!within.contains("past their bound"), "{within}");
        let past = summary_table("e", &[row(0, "a", 0.4), row(1, "b", 1.6)], &[]);
        assert!(
            past.contains("note: 1 row(s) ran past their bound (b at point 1)"),
            "{past}"
        );
    }

    fn flat(batches: &[Batch]) -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                (0..b.warmups)
                    .map(move |_| format!("{}:w", b.variant))
                    .chain(
                        b.repetitions
                            .clone()
                            .map(move |k| format!("{}:{k}", b.variant)),
                    )
            })
            .collect()
    }

    #[test]
    fn repetitions_are_interleaved_after_the_warmups() {
        let order = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            flat(&schedule(&order, 1, 3, true)),
            ["a:w", "b:w", "a:0", "b:0", "a:1", "b:1", "a:2", "b:2"]
        );
        assert_eq!(
            flat(&schedule(&order, 0, 2, true)),
            ["a:0", "b:0", "a:1", "b:1"]
        );
        // Several points interleaved: every warm-up, then each round across the points.
        let flat_group = |points| {
            group_schedule(points, &order, 1, 2, true)
                .into_iter()
                .flat_map(|(p, b)| flat(&[b]).into_iter().map(move |r| format!("{p}{r}")))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            flat_group(2),
            [
                "0a:w", "0b:w", "1a:w", "1b:w", "0a:0", "0b:0", "1a:0", "1b:0", "0a:1", "0b:1",
                "1a:1", "1b:1"
            ]
        );
        assert_eq!(flat_group(1)[..3], ["0a:w", "0b:w", "0a:0"]);
        // A launch takes each variant's runs at once.
        assert_eq!(
            flat(&schedule(&order, 1, 2, false)),
            ["a:w", "a:0", "a:1", "b:w", "b:0", "b:1"]
        );
    }
}
