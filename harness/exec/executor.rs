//! Where the runs of a point happen, behind one trait, so the runner (resume, equivalence,
//! results, traces, progress) is the same whichever executes them:
//!
//! - [`InProcess`]: the family prepares the point's input once and runs each variant in this
//!   process (threads as the point says). Consecutive points share one input where it would
//!   be made again: their parameters differ only in the runner's (`threads`, which the typed
//!   point a family prepares from leaves out), or the family names both inputs alike
//!   ([`crate::family::Family::input_key`]). Preparing the 300 MB of text and its gzip of
//!   `embeddings_loading` once per thread count was most of that experiment's time. Before the
//!   point's first run it times the fixed calibration work ([`crate::exec::calibration`]) on
//!   the point's threads, stored as every run's `calibration_s` (not between runs: its arrays
//!   would evict the caches a run warmed, and a sub-millisecond kernel would be timed cold:
//!   measured, 0.9x where it was 1.1x);
//!   under `parbench gate count` it brackets each run for callgrind
//!   ([`crate::exec::callgrind`]); built with the `drill` feature it slows the variants the
//!   drill names ([`crate::exec::drill`]).
//! - [`Launcher`]: every run of a variant in one launch of the experiment's MPI launcher
//!   ([`crate::exec::launch`]); the processes prepare their own input.
//! - [`PerPoint`], the runner's default: the launcher for points with `backend: mpi`, in-process
//!   for the others.
//! - [`Scripted`]: measurements from a function, no family involved, for testing the runner
//!   itself (a failure at a chosen run, say).

use crate::exec::calibration::Calibration;
use crate::exec::{callgrind, drill, launch};
use crate::experiment::plan::{self, Plan};
use crate::family::{Measurement, Params, PreparedInput};
use anyhow::{Context, Result};
use parbench_common::Par;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The runs of `variant`, in order: warm-ups first, then repetitions.
pub type Runs<'s> = Box<dyn Iterator<Item = Result<Measurement>> + 's>;

/// Runs the points of a plan.
pub trait Executor {
    /// Gets point `index` of `plan` ready to run (an in-process executor prepares its input
    /// here, once for every variant).
    fn open<'a>(&'a self, plan: &'a Plan, index: usize) -> Result<Box<dyn OpenPoint + 'a>>;
}

/// A point ready to run.
pub trait OpenPoint {
    /// The next `count` runs of `variant` (warm-ups first), each taken when the iterator is
    /// advanced where the executor can (in-process), or all at once (a launch).
    fn runs(&mut self, variant: &str, count: usize) -> Result<Runs<'_>>;
    /// Whether runs can be asked for one at a time at no extra cost, so the runner can
    /// interleave the variants' repetitions (ABAB...) and drift hits them alike. A launch
    /// starts processes per call, so it takes a variant's runs at once.
    fn interleaves(&self) -> bool {
        true
    }
}

/// The label of the `k`-th run (counted from 0, warm-ups included) of `variant` at point
/// `index` of `experiment`, under which `parbench gate count` finds its instruction count.
pub fn count_label(experiment: &str, index: usize, variant: &str, k: usize) -> String {
    format!("{experiment}|{index}|{variant}|{k}")
}

/// Runs points in this process.
#[derive(Default)]
pub struct InProcess {
    /// The last point's input, under what it is made from.
    last: std::sync::Mutex<Option<(InputKey, Arc<PreparedInput>)>>,
}

/// What a prepared input is made from.
#[derive(PartialEq)]
enum InputKey {
    /// The family's name for it.
    Named(String),
    /// The point's parameters, the runner's left out.
    Params(Params),
}

impl InProcess {
    /// Point `index`'s input: the last point's when the family names both inputs alike
    /// ([`crate::family::Family::input_key`]) or, where it names none, when their parameters
    /// differ only in the runner's; else prepared now (the last one dropped first, so two are
    /// never held).
    fn input(&self, plan: &Plan, index: usize) -> Result<Arc<PreparedInput>> {
        let key = match plan.family.input_key(&plan.typed[index])? {
            Some(name) => InputKey::Named(name),
            None => InputKey::Params(
                plan.points[index]
                    .iter()
                    .filter(|(k, _)| !plan::RUNNER_PARAMS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
        };
        let mut last = self
            .last
            .lock()
            .map_err(|_| anyhow::anyhow!("internal: a point's preparation panicked"))?;
        if let Some((last_key, input)) = last.as_ref() {
            if *last_key == key {
                return Ok(Arc::clone(input));
            }
        }
        *last = None;
        let input = Arc::new(
            plan.family
                .prepare(
                    &plan.typed[index],
                    plan.dataset.as_deref(),
                    plan.config.data.seed,
                )
                .context("preparing the point's input")?,
        );
        *last = Some((key, Arc::clone(&input)));
        Ok(input)
    }
}

struct InProcessPoint<'a> {
    plan: &'a Plan,
    index: usize,
    input: Arc<PreparedInput>,
    /// Seconds of the calibration timed when the point opened; `None` while counting
    /// instructions (the count does not need it, and valgrind is slow).
    calibration_s: Option<f64>,
    counting: bool,
    slowdowns: Vec<drill::Slowdown>,
    /// Runs taken so far per variant (the `k` of [`count_label`]).
    taken: std::collections::BTreeMap<String, usize>,
    /// The point's input as peer files, written at the first run of a peer.
    peer_work: Option<crate::peers::protocol::PeerWork>,
}

impl Executor for InProcess {
    fn open<'a>(&'a self, plan: &'a Plan, index: usize) -> Result<Box<dyn OpenPoint + 'a>> {
        // The point's threads must start, or the point is an error (never a quiet single
        // thread that would make its timings lie).
        let threads = plan::threads_of(&plan.points[index]);
        Par::threads(threads).pool()?;
        let counting = callgrind::counting();
        let calibration_s = if counting {
            None
        } else {
            let mut calibration = Calibration::new(threads)?;
            // One unrecorded (the arrays' first touch, the threads' start), then the fastest of
            // nine: another tenant or a thread of the last point only ever adds time, and the
            // median of five once read one point 2.2x slow (both runs of a drill scenario on
            // the Intel Xeon kind), which every time of its experiment was divided by.
            calibration.measure();
            (0..CALIBRATION_SAMPLES)
                .map(|_| calibration.measure())
                .reduce(f64::min)
        };
        let slowdowns = drill::requested()?;
        let input = self.input(plan, index)?;
        Ok(Box::new(InProcessPoint {
            plan,
            index,
            input,
            calibration_s,
            counting,
            slowdowns,
            taken: Default::default(),
            peer_work: None,
        }))
    }
}

impl InProcessPoint<'_> {
    /// One run of `variant`: counted when asked, slowed by the drill when asked, with the
    /// point's calibration.
    fn run_once(&mut self, variant: &str) -> Result<Measurement> {
        let (plan, index) = (self.plan, self.index);
        let threads = plan::threads_of(&plan.points[index]);
        let k = self.taken.entry(variant.to_string()).or_insert(0);
        let label = count_label(&plan.config.name, index, variant, *k);
        *k += 1;
        let factor = drill::factor_for(&self.slowdowns, &plan.config.name, variant);
        let region = if self.counting {
            Some(callgrind::Region::start(&label)?)
        } else {
            None
        };
        let result = match plan.peers.get(variant) {
            Some(peer) => self.run_peer(peer, threads),
            None => {
                let (base, typed) = plan.run_of(index, variant);
                plan.family.run(base, &self.input, typed, threads)
            }
        };
        let result = result.and_then(|mut m| {
            match &region {
                Some(region) if factor > 1.0 => drill::spin_counted(region, factor)?,
                None if factor > 1.0 => {
                    m.wall_time_s += drill::busy((factor - 1.0) * m.wall_time_s);
                }
                _ => {}
            }
            Ok(m)
        });
        if let Some(region) = region {
            region.finish();
        }
        let mut m = result?;
        if let Some(cal) = self.calibration_s {
            m.metrics.insert(CALIBRATION_METRIC.to_string(), cal);
        }
        Ok(m)
    }

    /// One run of a peer: its process, timed by itself and as a whole.
    fn run_peer(&mut self, peer: &crate::peers::Peer, threads: usize) -> Result<Measurement> {
        use crate::peers::protocol::{self, PeerWork};
        let (plan, index) = (self.plan, self.index);
        if self.peer_work.is_none() {
            self.peer_work = Some(PeerWork::prepare(
                plan.family.as_ref(),
                &self.input,
                &plan.typed[index],
            )?);
        }
        let work = self
            .peer_work
            .as_mut()
            .context("internal: no peer work directory")?;
        protocol::run(
            peer,
            work,
            plan.family.as_ref(),
            &self.input,
            &plan.typed[index],
            threads,
            plan.config.data.seed,
        )
    }
}

/// Calibrations timed when a point opens; the fastest is the point's.
const CALIBRATION_SAMPLES: usize = 9;

/// The metric holding the seconds of the calibration timed when the run's point opened.
pub const CALIBRATION_METRIC: &str = "calibration_s";

impl OpenPoint for InProcessPoint<'_> {
    fn runs(&mut self, variant: &str, count: usize) -> Result<Runs<'_>> {
        let variant = variant.to_string();
        Ok(Box::new((0..count).map(move |_| self.run_once(&variant))))
    }
}

/// Runs points across the processes of the experiment's launcher; the run directory holds the
/// copy of the experiment file the processes rebuild the plan from.
pub struct Launcher {
    run_dir: PathBuf,
}

impl Launcher {
    /// A launcher for the runs of `run_dir`.
    pub fn new(run_dir: &Path) -> Launcher {
        Launcher {
            run_dir: run_dir.to_path_buf(),
        }
    }
}

struct LaunchedPoint<'a> {
    plan: &'a Plan,
    run_dir: &'a Path,
    index: usize,
}

impl Executor for Launcher {
    fn open<'a>(&'a self, plan: &'a Plan, index: usize) -> Result<Box<dyn OpenPoint + 'a>> {
        Ok(Box::new(LaunchedPoint {
            plan,
            run_dir: &self.run_dir,
            index,
        }))
    }
}

impl OpenPoint for LaunchedPoint<'_> {
    fn interleaves(&self) -> bool {
        false
    }
    fn runs(&mut self, variant: &str, count: usize) -> Result<Runs<'_>> {
        let measurements = launch::run_point(self.plan, self.run_dir, self.index, variant, count)?;
        if measurements.len() != count {
            anyhow::bail!(
                "the launch returned {} measurements for {count} runs",
                measurements.len()
            );
        }
        Ok(Box::new(measurements.into_iter().map(Ok)))
    }
}

/// The runner's default: [`Launcher`] for `backend: mpi` points, [`InProcess`] for the rest.
pub struct PerPoint {
    launcher: Launcher,
    in_process: InProcess,
}

impl PerPoint {
    /// The default executor for the runs of `run_dir`.
    pub fn new(run_dir: &Path) -> PerPoint {
        PerPoint {
            launcher: Launcher::new(run_dir),
            in_process: InProcess::default(),
        }
    }
}

impl Executor for PerPoint {
    fn open<'a>(&'a self, plan: &'a Plan, index: usize) -> Result<Box<dyn OpenPoint + 'a>> {
        if plan::is_mpi_point(&plan.points[index]) {
            self.launcher.open(plan, index)
        } else {
            self.in_process.open(plan, index)
        }
    }
}

/// Measurements from a function of (point, variant, run number counted over the whole
/// execution), for tests of the runner: an `Err` stands for a failed run.
pub struct Scripted<F> {
    measure: F,
    runs: std::cell::Cell<usize>,
}

impl<F: Fn(usize, &str, usize) -> Result<Measurement>> Scripted<F> {
    /// An executor whose every run is `measure(point, variant, run)`.
    pub fn new(measure: F) -> Scripted<F> {
        Scripted {
            measure,
            runs: std::cell::Cell::new(0),
        }
    }

    /// How many runs were asked for so far.
    pub fn runs_taken(&self) -> usize {
        self.runs.get()
    }
}

struct ScriptedPoint<'a, F> {
    executor: &'a Scripted<F>,
    index: usize,
}

impl<F: Fn(usize, &str, usize) -> Result<Measurement>> Executor for Scripted<F> {
    fn open<'a>(&'a self, _plan: &'a Plan, index: usize) -> Result<Box<dyn OpenPoint + 'a>> {
        Ok(Box::new(ScriptedPoint {
            executor: self,
            index,
        }))
    }
}

impl<F: Fn(usize, &str, usize) -> Result<Measurement>> OpenPoint for ScriptedPoint<'_, F> {
    fn runs(&mut self, variant: &str, count: usize) -> Result<Runs<'_>> {
        let (executor, index) = (self.executor, self.index);
        let variant = variant.to_string();
        Ok(Box::new((0..count).map(move |_| {
            let run = executor.runs.get();
            executor.runs.set(run + 1);
            (executor.measure)(index, &variant, run)
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_points_apart_only_in_threads_share_their_input() {
        let yaml = "name: shared_inputs
paper: none
reproduces: none
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow]
sweep:
  size: [10, 20]
  threads: [1, 2]
";
        let plan = plan::build_from_str(yaml, Path::new("shared_inputs.yaml"), false, None)
            .expect("a valid plan");
        let sizes: Vec<_> = plan.points.iter().map(|p| p["size"].clone()).collect();
        assert_eq!(sizes.len(), 4, "{sizes:?}");
        let executor = InProcess::default();
        let inputs: Vec<_> = (0..4)
            .map(|i| executor.input(&plan, i).expect("prepared"))
            .collect();
        // Points 0-1 are size 10 on one and two threads, 2-3 size 20.
        assert!(Arc::ptr_eq(&inputs[0], &inputs[1]));
        assert!(Arc::ptr_eq(&inputs[2], &inputs[3]));
        assert!(!Arc::ptr_eq(&inputs[1], &inputs[2]));
        let size = |i: usize| inputs[i].downcast_ref::<crate::families::mock::MockPoint>();
        assert_eq!(size(1).map(|p| p.size), Some(10));
        assert_eq!(size(2).map(|p| p.size), Some(20));
        // Back at a point whose input was dropped: prepared again, not handed a stale one.
        let again = executor.input(&plan, 0).expect("prepared");
        assert!(!Arc::ptr_eq(&again, &inputs[0]));
        assert_eq!(
            again
                .downcast_ref::<crate::families::mock::MockPoint>()
                .map(|p| p.size),
            Some(10)
        );
    }
}
