//! Points that run across MPI processes (`backend: mpi`): the harness starts the experiment's
//! launcher once per (point, variant) and reads back what rank 0 measured.
//!
//! ```text
//! parbench run exp.yaml                        mpirun [args] -np P parbench launched RUN/experiment.yaml
//!   point i, variant v, warm-ups + repetitions ─▶   every rank: plan, prepare point i
//!                                                   N times: family.run_on_ranks(v) (collective)
//!   rows  ◀── stdout lines "parbench-measurement {json}" from rank 0
//! ```
//!
//! The child rebuilds the plan from the run directory's copy of the experiment file, so the
//! point it runs is the one the parent expanded. Floating-point values cross as their bit
//! patterns, so a measurement arrives exactly as taken (NaN included), its progress trace
//! with it (one measurement per line, trace included). A launch that fails
//! (no `mpirun`, a rank's error, a killed job) is an error naming the command and showing the
//! end of its output; nothing is recorded for that point.

use crate::exec::ranks::Ranks;
use crate::experiment::config::LauncherConfig;
use crate::experiment::plan::{self, Plan};
use crate::family::{Measurement, TraceStep};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The prefix of rank 0's measurement lines (anything else on stdout is ignored).
const PREFIX: &str = "parbench-measurement ";

/// A [`Measurement`] with every `f64` as its bits.
#[derive(Serialize, Deserialize)]
struct WireMeasurement {
    wall_time_s: u64,
    phases_s: BTreeMap<String, u64>,
    metrics: BTreeMap<String, u64>,
    output: Vec<u64>,
    /// Absent in lines of a parbench without traces: no trace.
    #[serde(default)]
    trace: Vec<WireTraceStep>,
}

/// A [`TraceStep`] with every `f64` as its bits.
#[derive(Serialize, Deserialize)]
struct WireTraceStep {
    step: usize,
    time_s: u64,
    metrics: BTreeMap<String, u64>,
}

fn to_bits(map: &BTreeMap<String, f64>) -> BTreeMap<String, u64> {
    map.iter().map(|(k, v)| (k.clone(), v.to_bits())).collect()
}

fn from_bits(map: BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    map.into_iter()
        .map(|(k, v)| (k, f64::from_bits(v)))
        .collect()
}

impl From<&Measurement> for WireMeasurement {
    fn from(m: &Measurement) -> Self {
        WireMeasurement {
            wall_time_s: m.wall_time_s.to_bits(),
            phases_s: to_bits(&m.phases_s),
            metrics: to_bits(&m.metrics),
            output: m.output.iter().map(|x| x.to_bits()).collect(),
            trace: m
                .trace
                .iter()
                .map(|t| WireTraceStep {
                    step: t.step,
                    time_s: t.time_s.to_bits(),
                    metrics: to_bits(&t.metrics),
                })
                .collect(),
        }
    }
}

impl From<WireMeasurement> for Measurement {
    fn from(w: WireMeasurement) -> Self {
        Measurement {
            wall_time_s: f64::from_bits(w.wall_time_s),
            phases_s: from_bits(w.phases_s),
            metrics: from_bits(w.metrics),
            output: w.output.into_iter().map(f64::from_bits).collect(),
            trace: w
                .trace
                .into_iter()
                .map(|t| TraceStep {
                    step: t.step,
                    time_s: f64::from_bits(t.time_s),
                    metrics: from_bits(t.metrics),
                })
                .collect(),
        }
    }
}

/// Why an MPI point cannot run on this machine, if it cannot: the binary lacks the `mpi`
/// feature, or the launcher program is not on the PATH.
pub fn unavailable(launcher: &LauncherConfig) -> Option<String> {
    unavailable_to(cfg!(feature = "mpi"), launcher)
}

/// [`unavailable`] for a parbench built with the `mpi` feature or without it, so that one test
/// build sees both answers.
fn unavailable_to(built_with_mpi: bool, launcher: &LauncherConfig) -> Option<String> {
    if !built_with_mpi {
        return Some(
            "this parbench was built without MPI (cargo build --release --features mpi)".into(),
        );
    }
    let on_path = |dir: &Path| dir.join(&launcher.command).is_file();
    let found = Path::new(&launcher.command).is_file()
        || std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| on_path(&d)));
    (!found).then(|| {
        format!(
            "the launcher `{}` is not on the PATH (install OpenMPI: apt-get install openmpi-bin)",
            launcher.command
        )
    })
}

/// Runs `runs` measurements of `variant` at point `index` of `plan` under the launcher; the
/// experiment file the child reads is the run directory's copy.
pub fn run_point(
    plan: &Plan,
    run_dir: &Path,
    index: usize,
    variant: &str,
    runs: usize,
) -> Result<Vec<Measurement>> {
    let launcher = plan
        .config
        .launcher
        .as_ref()
        .context("internal: an MPI point in an experiment without a launcher")?;
    if let Some(why) = unavailable(launcher) {
        bail!("cannot run a `backend: mpi` point: {why}");
    }
    let point = &plan.points[index];
    let processes = plan
        .family
        .processes(plan.run_of(index, variant).1, plan::threads_of(point))
        .context("counting the MPI processes of the point")?;
    let experiment = std::fs::canonicalize(run_dir.join(crate::results::EXPERIMENT_YAML))
        .context("locating the run's copy of the experiment file")?;
    let exe = std::env::current_exe().context("locating the parbench executable")?;
    let mut command = Command::new(&launcher.command);
    command
        .args(&launcher.args)
        .arg("-np")
        .arg(processes.to_string())
        .arg(&exe)
        .arg("launched")
        .arg(&experiment)
        .arg("--point")
        .arg(index.to_string())
        .arg("--variant")
        .arg(variant)
        .arg("--runs")
        .arg(runs.to_string());
    if plan.quick {
        command.arg("--quick");
    }
    if let Some(dir) = plan.dataset.as_deref().and_then(Path::parent) {
        command.arg("--data-dir").arg(dir);
    }
    let shown = format!("{command:?}");
    let out = command
        .output()
        .with_context(|| format!("starting {shown}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tail = || {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    if !out.status.success() {
        bail!("{shown} failed ({}):\n{}", out.status, tail());
    }
    let measurements = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(PREFIX))
        .map(|json| serde_json::from_str::<WireMeasurement>(json).map(Measurement::from))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading the measurements of {shown}"))?;
    if measurements.len() != runs {
        bail!(
            "{shown} printed {} measurements, {runs} expected:\n{}",
            measurements.len(),
            tail()
        );
    }
    Ok(measurements)
}

/// The child's side (`parbench launched`), on every rank of the job.
pub struct LaunchedArgs {
    pub experiment: PathBuf,
    pub quick: bool,
    pub point: usize,
    pub variant: String,
    pub runs: usize,
    pub data_dir: Option<PathBuf>,
}

/// Starts MPI, runs the point `runs` times and prints rank 0's measurements; a failing rank
/// stops the whole job.
pub fn launched(args: &LaunchedArgs) -> Result<()> {
    let backend = Ranks::start("mpi")?;
    backend.finish(launched_on(&backend, args))
}

fn launched_on(backend: &Ranks, args: &LaunchedArgs) -> Result<()> {
    let plan = plan::build(&args.experiment, args.quick, args.data_dir.as_deref())?;
    let point = plan.points.get(args.point).with_context(|| {
        format!(
            "point {} of an experiment with {} points",
            args.point,
            plan.points.len()
        )
    })?;
    if !plan.config.variants.contains(&args.variant) {
        bail!(
            "variant {} is not run by {}",
            args.variant,
            plan.config.name
        );
    }
    let threads = plan::threads_of(point);
    let input = plan
        .family
        .prepare(
            &plan.typed[args.point],
            plan.dataset.as_deref(),
            plan.config.data.seed,
        )
        .context("preparing the point's input")?;
    let (base, point) = plan.run_of(args.point, &args.variant);
    for _ in 0..args.runs {
        let m = plan
            .family
            .run_on_ranks(base, &input, point, threads, backend)
            .with_context(|| format!("running {} across the MPI processes", args.variant))?;
        if let Some(m) = m {
            let line = serde_json::to_string(&WireMeasurement::from(&m))?;
            println!("{PREFIX}{line}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_cross_exactly_nan_and_all() {
        let m = Measurement {
            wall_time_s: 0.1 + 0.2,
            phases_s: BTreeMap::from([("sending".into(), 1e-300)]),
            metrics: BTreeMap::from([("x".into(), f64::NAN), ("y".into(), -0.0)]),
            output: vec![f64::INFINITY, 1.0 / 3.0],
            trace: vec![TraceStep {
                step: 1,
                time_s: 0.1 + 0.7,
                metrics: BTreeMap::from([("loglik".into(), -1e300), ("z".into(), f64::NAN)]),
            }],
        };
        let text = serde_json::to_string(&WireMeasurement::from(&m)).unwrap();
        let back: Measurement = serde_json::from_str::<WireMeasurement>(&text)
            .unwrap()
            .into();
        assert_eq!(back.wall_time_s.to_bits(), m.wall_time_s.to_bits());
        assert_eq!(back.phases_s, m.phases_s);
        assert!(back.metrics["x"].is_nan());
        assert_eq!(back.metrics["y"].to_bits(), (-0.0f64).to_bits());
        assert_eq!(back.output[0], f64::INFINITY);
        assert_eq!(back.output[1], 1.0 / 3.0);
        assert_eq!(back.trace.len(), 1);
        assert_eq!(back.trace[0].step, 1);
        assert_eq!(back.trace[0].time_s.to_bits(), (0.1f64 + 0.7).to_bits());
        assert_eq!(back.trace[0].metrics["loglik"], -1e300);
        assert!(back.trace[0].metrics["z"].is_nan());
        // A line from a parbench without traces still reads, with an empty trace.
        let old = r#"{"wall_time_s":0,"phases_s":{},"metrics":{},"output":[]}"#;
        let back: Measurement = serde_json::from_str::<WireMeasurement>(old).unwrap().into();
        assert!(back.trace.is_empty());
    }

    #[test]
    fn a_missing_launcher_program_or_mpi_is_reported_before_any_launch() {
        let missing = LauncherConfig {
            command: "no-such-mpirun-here".into(),
            args: Vec::new(),
        };
        let why = unavailable_to(true, &missing).expect("a launcher that is not there");
        assert!(
            why.contains("`no-such-mpirun-here` is not on the PATH"),
            "{why}"
        );
        let why = unavailable_to(false, &missing).expect("a build without MPI");
        assert!(why.contains("built without MPI"), "{why}");
        // A launcher given by its path is found without the PATH.
        let sh = LauncherConfig {
            command: "/bin/sh".into(),
            args: Vec::new(),
        };
        assert_eq!(unavailable_to(true, &sh), None);
        assert!(unavailable_to(false, &sh).is_some());
    }
}
