//! `parbench check`: re-evaluates an experiment's claims on stored rows and gates the run
//! against a committed baseline, in three tiers, per variant, references included:
//!
//! - **Exact counters**: the metrics a family counts rather than times
//!   ([`crate::family::Family::exact_metrics`]: words and messages sent, flops, model bytes,
//!   tokens) must equal the baseline's exactly, on any machine.
//! - **Instructions**: a run made by `parbench gate count` carries each run's instruction
//!   count under callgrind (the `instructions` metric), which may grow by at most
//!   [`CheckOptions::max_instruction_growth`]; the count depends on the vector path the
//!   kernels dispatched to, so the baseline records the path and a run on another path is not
//!   compared but reported.
//! - **Time**: each repetition's wall time is divided by the calibration timed before its
//!   point's runs on the same threads (`calibration_s`, see [`crate::exec::calibration`]), so a slower
//!   host does not read as a regression and "everything 10x slower" does. Baselines of time
//!   are kept per machine kind ([`crate::exec::machine::fingerprint`]). Two ratios are taken,
//!   each a percentile-bootstrap interval of a ratio of medians (now / baseline): the time per
//!   calibration, and the same-run ratio (a variant's time over its point's reference
//!   variant's in the same repetition, the reference's over the median of the point's other
//!   variants' in that repetition). Repetitions are interleaved, so the same-run ratio does not
//!   move when a whole run, or part of one, is slower and sees one variant slower, the
//!   reference included, through the noise of a shared host; the time per
//!   calibration sees everything slower, but on a shared host it also moves by itself (one
//!   memory-bound variant read 1.6x per calibration in an unchanged run: the calibration stays
//!   in L2 and does not see another tenant's memory traffic). So an entry is a regression when
//!   - its same-run ratio's lower end exceeds [`CheckOptions::max_slowdown`] and its time per
//!     calibration is up by at least [`CORROBORATING_SLOWDOWN`] (it is slower itself, not its
//!     reference faster), or
//!   - its time per calibration's lower end exceeds [`CheckOptions::max_uniform_slowdown`]
//!     (everything slower, which no same-run ratio can see), or
//!   - it is alone at its point (no same-run ratio) and its time per calibration's lower end
//!     exceeds [`CheckOptions::max_slowdown`].
//!
//!   An entry whose working set and its reference's sit in different levels of cache
//!   ([`unprotected_same_run_ratios`]) is judged by the uniform rule alone when the baseline
//!   has its times: another tenant's traffic in the shared last-level cache moves its same-run
//!   ratio by itself. The check says how many were. The gate's own workloads stay within a
//!   core's share of that cache ([`beyond_cache_share`], held by a test on `gate.json`),
//!   beyond which the neighbours' use of it moves an entry's time and its same-run ratios.
//!
//!   On a machine kind the baseline has no times for (the check says so), the same-run ratio is
//!   compared alone.
//!
//! Coverage is part of the verdict: every entry of the baseline must be present in the run
//! and, unless its experiment states why it is exempt (`gate: {untimed: ..., optional: ...}`),
//! long enough to time. The report counts the gated entries and prints every note.

use crate::analysis::claims::{self, fmt_num, ClaimOutcome};
use crate::exec::executor::CALIBRATION_METRIC;
use crate::experiment::config::ExperimentConfig;
use crate::experiment::plan::point_key;
use crate::family::{matches_metric, ResultRow};
use crate::results::StoredMachine;
use crate::util::stats::{median, ratio_of_medians, RatioInterval};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// Default factor the lower end of a time ratio's interval must exceed to be a regression.
pub const DEFAULT_MAX_SLOWDOWN: f64 = 1.5;
/// The time per calibration's lower end that flags an entry by itself, as a multiple of the
/// max slowdown (1.5x gives 3x): unchanged runs on CI's shared 2-vCPU host read up to 1.6x
/// per calibration in one variant, and "everything 10x slower" reads 10x.
pub const UNIFORM_SLOWDOWN_FACTOR: f64 = 2.0;
/// How much slower per calibration (the ratio, not its interval) an entry must be for its
/// same-run ratio to count: when a reference variant gets faster, every other variant's ratio
/// to it grows while their own times do not.
pub const CORROBORATING_SLOWDOWN: f64 = 1.2;
/// Default confidence of the time ratio's interval.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// Default allowed growth of an instruction count (a fraction: 0.02 is 2%): counts of an
/// unchanged build repeat to within 0.4% (hash seeds and the allocator vary per process).
pub const DEFAULT_MAX_INSTRUCTION_GROWTH: f64 = 0.02;
/// Shortest median time that is timed: below it, one scheduling hiccup on a shared machine is
/// a large fraction of the run. At 5 ms one of the gate's entries fell under the limit in CI
/// now and then; the committed ones are held to [`MIN_TIME_MARGIN`] times it.
pub const DEFAULT_MIN_TIME_S: f64 = 0.002;
/// How far above [`DEFAULT_MIN_TIME_S`] every timed entry of a committed baseline must be: a run
/// on the same kind of machine reads a median some tens of percent off the recorded one.
/// `gate_fusedmm`'s `local`, recorded at 2.23 ms, read 2.0 ms in an unchanged CI run (exit 5).
pub const MIN_TIME_MARGIN: f64 = 1.5;
/// The metric `parbench gate count` stores each run's instruction count in.
pub const INSTRUCTIONS_METRIC: &str = "instructions";
/// Version of the baseline file format (3: same-run ratios paired by repetition).
pub const BASELINE_VERSION: u32 = 3;
/// The oldest format read (version 2's same-run ratios are converted on reading).
pub const OLDEST_READ_VERSION: u32 = 2;

/// What the gate compares against, committed to the repository.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub version: u32,
    /// Machine kind (fingerprint) -> where its times were recorded.
    #[serde(default)]
    pub machines: BTreeMap<String, MachineRecord>,
    /// Experiment name -> its baseline.
    pub experiments: BTreeMap<String, ExperimentBaseline>,
}

/// An empty baseline of the current format (what `check --write-baseline` starts from).
impl Default for Baseline {
    fn default() -> Self {
        Baseline {
            version: BASELINE_VERSION,
            machines: BTreeMap::new(),
            experiments: BTreeMap::new(),
        }
    }
}

/// The machine a baseline's times were taken on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineRecord {
    pub cpu_model: String,
    /// The commit the runs were made from.
    pub commit: Option<String>,
    /// When the runs were made (RFC 3339).
    pub recorded: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentBaseline {
    /// The variant same-run ratios are taken against.
    pub reference_variant: String,
    /// Why a run may lack this experiment (its `gate.optional`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<String>,
    /// Point key -> variant -> entry.
    pub points: BTreeMap<String, BTreeMap<String, BaselineEntry>>,
    /// Machine kind -> claim name -> how the claim fared in the timed runs recorded on that
    /// kind (what `parbench claims` shows as the last measured value; counted runs, whose
    /// times are valgrind's, record none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<String, BTreeMap<String, RecordedClaim>>,
}

/// A claim's verdict in a recorded run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedClaim {
    pub passed: bool,
    /// What it measured against its bound, as the run printed it.
    pub detail: String,
}

/// One variant at one point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineEntry {
    /// The family's exact counters, compared exactly.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
    /// Instructions of one run under callgrind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
    /// The vector path the instructions were counted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_path: Option<String>,
    /// Per repetition, its wall time over the point's reference variant's in the same
    /// repetition (which ran just before or after it: repetitions are interleaved), from
    /// whichever kind of machine last recorded it: the form of baselines written before each
    /// kind kept its own ([`Timing::relative`]), used where this kind has none of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relative: Vec<f64>,
    /// Machine kind -> times on that kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub timings: BTreeMap<String, Timing>,
}

impl BaselineEntry {
    /// The same-run ratios to compare a run on `kind` with: the kind's own, else the kind-less
    /// ones of an older baseline (empty when neither is there).
    pub fn relative_on(&self, kind: &str) -> &[f64] {
        match self.timings.get(kind) {
            Some(t) if !t.relative.is_empty() => &t.relative,
            _ => &self.relative,
        }
    }
}

/// Times of one variant at one point on one kind of machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Per repetition, wall time over the calibration of its point.
    pub normalized: Vec<f64>,
    pub median_wall_time_s: f64,
    /// Per repetition, wall time over the point's reference variant's in the same repetition,
    /// on this kind. Same-run ratios are the kind's own: its vector paths and caches set them
    /// (`doc-major` over `sparse` in gate_sinkhorn read 0.34 on the AMD EPYC AVX-512 kind and
    /// 0.62 on the AVX2-only one, the same code), so one kind's are not another's baseline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relative: Vec<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("{}: cannot read or write baseline: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a parbench baseline file: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: baseline format version {found}, this parbench reads version {expected}; regenerate it with `parbench check RUN --write-baseline {}`", path.display(), path.display())]
    Version {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
}

impl Baseline {
    /// Writes pretty JSON (stable key order, so diffs of committed baselines are readable).
    pub fn save(&self, path: &Path) -> Result<(), BaselineError> {
        let json = serde_json::to_string_pretty(self).map_err(|source| BaselineError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        crate::results::write_atomic(path, (json + "\n").as_bytes()).map_err(|err| {
            BaselineError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!("{err:#}")),
            }
        })
    }

    pub fn load(path: &Path) -> Result<Self, BaselineError> {
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// A baseline from its JSON text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, BaselineError> {
        #[derive(Deserialize)]
        struct Version {
            version: u32,
        }
        let version: Version =
            serde_json::from_str(text).map_err(|source| BaselineError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        if !(OLDEST_READ_VERSION..=BASELINE_VERSION).contains(&version.version) {
            return Err(BaselineError::Version {
                path: path.to_path_buf(),
                found: version.version,
                expected: BASELINE_VERSION,
            });
        }
        let mut baseline: Baseline =
            serde_json::from_str(text).map_err(|source| BaselineError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        if baseline.version == 2 {
            baseline.pair_relative_times();
        }
        Ok(baseline)
    }

    /// Version 2 kept each repetition's time over the median of the reference's over the run;
    /// version 3 over the reference's in the same repetition. Both share the median, so the
    /// ratio of a variant's entry to the reference's, repetition by repetition, is version 3's
    /// (where the two lists are not of one length, the entry keeps none).
    fn pair_relative_times(&mut self) {
        for exp in self.experiments.values_mut() {
            for variants in exp.points.values_mut() {
                let reference = variants
                    .get(&exp.reference_variant)
                    .map(|e| e.relative.clone())
                    .unwrap_or_default();
                for (variant, entry) in variants.iter_mut() {
                    entry.relative = if *variant == exp.reference_variant {
                        Vec::new()
                    } else if entry.relative.len() == reference.len()
                        && reference.iter().all(|&r| r > 0.0)
                    {
                        entry
                            .relative
                            .iter()
                            .zip(&reference)
                            .map(|(x, r)| x / r)
                            .collect()
                    } else {
                        Vec::new()
                    };
                }
            }
        }
        self.version = BASELINE_VERSION;
    }

    /// Takes the experiments of `new` (a baseline made from runs), keeping the times and claim
    /// verdicts this baseline holds for other machine kinds (times at entries both have; verdicts
    /// of the claims `new`'s run still has, so a renamed or removed claim leaves no stale
    /// verdict behind), and its times and counts where `new` has none (a counting run has no
    /// times nor verdicts; a timing run no instructions).
    pub fn update(&mut self, new: Baseline) {
        self.machines.extend(new.machines);
        for (name, mut exp) in new.experiments {
            if let Some(old) = self.experiments.get(&name) {
                let current: Option<BTreeSet<String>> = exp
                    .claims
                    .values()
                    .next()
                    .map(|c| c.keys().cloned().collect());
                for (kind, recorded) in &old.claims {
                    let mut kept = recorded.clone();
                    if let Some(current) = &current {
                        kept.retain(|claim, _| current.contains(claim));
                    }
                    if !kept.is_empty() {
                        exp.claims.entry(kind.clone()).or_insert(kept);
                    }
                }
                for (key, variants) in &mut exp.points {
                    for (variant, entry) in variants {
                        let Some(was) = old.points.get(key).and_then(|v| v.get(variant)) else {
                            continue;
                        };
                        for (kind, t) in &was.timings {
                            entry
                                .timings
                                .entry(kind.clone())
                                .or_insert_with(|| t.clone());
                        }
                        if entry.instructions.is_none() {
                            entry.instructions = was.instructions;
                            entry.counted_path.clone_from(&was.counted_path);
                        }
                        // The kind-less ratios of an older baseline stay for the kinds that have
                        // none of their own yet.
                        if entry.relative.is_empty() {
                            entry.relative.clone_from(&was.relative);
                        }
                    }
                }
            }
            self.experiments.insert(name, exp);
        }
    }
}

/// The counter a variant's working set is stored in (`parbench_common::work`'s
/// `reuse_footprint_bytes`).
const FOOTPRINT_METRIC: &str = "work_reuse_footprint_bytes";

/// A core's L2 on the smallest of the machines parbench runs on (Zen 3: 512 KiB). A working set
/// beyond it lives in the last-level cache, which the other tenants of a shared host use too.
pub const PRIVATE_CACHE_BYTES: f64 = 512.0 * 1024.0;
/// How much larger than its reference's a timed entry's working set may be, when either is
/// beyond [`PRIVATE_CACHE_BYTES`], for the same-run ratio still to cancel the host's state.
pub const MAX_FOOTPRINT_RATIO: f64 = 4.0;

/// The timed entries of `exp` whose same-run ratio does not protect them from the shared cache:
/// the variant's working set (`work_reuse_footprint_bytes`) or its reference's is beyond a
/// core's L2, and one is more than [`MAX_FOOTPRINT_RATIO`] times the other. Another tenant's
/// streaming then slows the one in the last-level cache and not the other, and the ratio moves
/// with the host, not the code: the gate's `dense` (9.6 MB against `sparse`'s 0.5 MB) read 1.7x
/// its baseline between unchanged runs on CI's host. Each is described in a line.
pub fn unprotected_same_run_ratios(name: &str, exp: &ExperimentBaseline) -> Vec<String> {
    footprint_mismatches(exp)
        .into_iter()
        .map(|m| {
            format!(
                "{name} at {}: `{}` works in {:.2} MB, its reference `{}` in {:.2} MB ({:.1}x; beyond a core's L2 of {:.0} KiB, one of them shares the last-level cache with the host's other tenants and the other does not)",
                m.point,
                m.variant,
                m.own / 1e6,
                exp.reference_variant,
                m.reference / 1e6,
                m.own.max(m.reference) / m.own.min(m.reference).max(1.0),
                PRIVATE_CACHE_BYTES / 1024.0
            )
        })
        .collect()
}

/// The largest working set a timed gate entry may have: one core's share of a 32 MiB
/// last-level cache shared by 8 cores (Zen 3's and Zen 4's core complexes alike). Beyond it an
/// entry's time depends on how much of that cache the host's other tenants hold at the moment,
/// and entries of one workload depend on it by different amounts, so not even the same-run
/// ratio cancels it: `gate_sinkhorn` at 3.3-7.9 MiB read doc-major / `sparse` over 1.31x and
/// `fused` / `sparse` over 1.32x in six back-to-back unchanged runs (a CI drill missed `sparse`
/// made 2x slower), within 1.11x once resized to 3.2 MiB at most.
pub const CACHE_SHARE_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

/// The timed entries of `exp` whose working set (`work_reuse_footprint_bytes`) is beyond
/// [`CACHE_SHARE_BYTES`], each described in a line.
pub fn beyond_cache_share(name: &str, exp: &ExperimentBaseline) -> Vec<String> {
    entries(exp)
        .filter_map(|(point, variant, entry)| {
            let own = *entry.counters.get(FOOTPRINT_METRIC)?;
            (!entry.timings.is_empty() && own > CACHE_SHARE_BYTES).then(|| {
                format!(
                    "{name} at {point}: `{variant}` works in {:.2} MiB, beyond a core's {:.0} MiB share of the last-level cache (make the workload longer by iterations, not larger)",
                    own / 1048576.0,
                    CACHE_SHARE_BYTES / 1048576.0
                )
            })
        })
        .collect()
}

/// The timed entries of `exp` whose median on some kind is under [`MIN_TIME_MARGIN`] times
/// [`DEFAULT_MIN_TIME_S`], each described in a line: a run a little faster than the baseline's
/// would fall under the shortest time the check times, and the entry would go ungated.
pub fn near_time_floor(name: &str, exp: &ExperimentBaseline) -> Vec<String> {
    let floor = MIN_TIME_MARGIN * DEFAULT_MIN_TIME_S;
    entries(exp)
        .flat_map(|(point, variant, entry)| {
            entry
                .timings
                .iter()
                .filter(|(_, timing)| timing.median_wall_time_s < floor)
                .map(move |(kind, timing)| {
                    format!(
                        "{name} at {point}: `{variant}` has a median of {} ms on {kind}, under {MIN_TIME_MARGIN}x the {} ms the check times (make the workload longer)",
                        fmt_num(1e3 * timing.median_wall_time_s),
                        fmt_num(1e3 * DEFAULT_MIN_TIME_S)
                    )
                })
        })
        .collect()
}

/// Every entry of `exp`: its point, its variant and the entry.
fn entries(exp: &ExperimentBaseline) -> impl Iterator<Item = (&str, &str, &BaselineEntry)> {
    exp.points.iter().flat_map(|(point, variants)| {
        variants
            .iter()
            .map(move |(variant, entry)| (point.as_str(), variant.as_str(), entry))
    })
}

/// A timed entry of [`unprotected_same_run_ratios`]: its point, variant, and its and its
/// reference's working sets in bytes.
struct FootprintMismatch<'a> {
    point: &'a str,
    variant: &'a str,
    own: f64,
    reference: f64,
}

/// The entries [`unprotected_same_run_ratios`] describes.
fn footprint_mismatches(exp: &ExperimentBaseline) -> Vec<FootprintMismatch<'_>> {
    let mut found = Vec::new();
    for (point, variants) in &exp.points {
        let Some(reference) = variants
            .get(&exp.reference_variant)
            .and_then(|e| e.counters.get(FOOTPRINT_METRIC))
        else {
            continue;
        };
        for (variant, entry) in variants {
            let Some(&own) = entry.counters.get(FOOTPRINT_METRIC) else {
                continue;
            };
            if *variant == exp.reference_variant || entry.timings.is_empty() {
                continue;
            }
            let (small, large) = (own.min(*reference), own.max(*reference));
            if large > PRIVATE_CACHE_BYTES && large > MAX_FOOTPRINT_RATIO * small {
                found.push(FootprintMismatch {
                    point,
                    variant,
                    own,
                    reference: *reference,
                });
            }
        }
    }
    found
}

/// The variant same-run ratios are taken against: the equivalence reference, else the first
/// listed variant that has rows, else the first variant found in the rows.
pub fn reference_variant(rows: &[ResultRow], config: &ExperimentConfig) -> Option<String> {
    let has_rows = |v: &str| rows.iter().any(|r| r.variant == v);
    config
        .equivalence
        .as_ref()
        .map(|e| e.reference.clone())
        .filter(|v| has_rows(v))
        .or_else(|| config.variants.iter().find(|v| has_rows(v)).cloned())
        .or_else(|| rows.iter().map(|r| r.variant.clone()).min())
}

/// The exact-counter patterns of `config`'s family (none for a family this parbench lacks).
fn exact_patterns(config: &ExperimentConfig) -> &'static [&'static str] {
    crate::families::find(&config.family).map_or(&[], |f| f.exact_metrics())
}

/// The vector path `family`'s crate dispatched to on `machine` (the crate whose name begins
/// the family's: `fusedmm-apps` runs fusedmm's kernels).
pub fn dispatch_path(machine: &StoredMachine, family: &str) -> Option<String> {
    machine
        .dispatch
        .iter()
        .filter(|(krate, _)| family.starts_with(krate.as_str()))
        .max_by_key(|(krate, _)| krate.len())
        .map(|(krate, path)| format!("{krate} {path}"))
}

/// The rows of one variant at one point.
struct Group<'r> {
    rows: Vec<&'r ResultRow>,
}

impl Group<'_> {
    fn times(&self) -> Vec<f64> {
        self.rows.iter().map(|r| r.wall_time_s).collect()
    }
    /// Wall time over calibration per repetition (empty when any repetition lacks one).
    fn normalized(&self) -> Vec<f64> {
        let v: Vec<f64> = self
            .rows
            .iter()
            .filter_map(|r| {
                let c = *r.metrics.get(CALIBRATION_METRIC)?;
                (c > 0.0).then(|| r.wall_time_s / c)
            })
            .collect();
        if v.len() == self.rows.len() {
            v
        } else {
            Vec::new()
        }
    }
    /// The one value every repetition gives `metric`, or every distinct value it takes.
    fn values_of(&self, metric: &str) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .rows
            .iter()
            .filter_map(|r| r.metrics.get(metric).copied())
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }
}

/// Rows grouped by point key and variant.
fn groups<'r>(rows: &'r [ResultRow]) -> BTreeMap<String, BTreeMap<String, Group<'r>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Group<'r>>> = BTreeMap::new();
    for row in rows {
        out.entry(point_key(&row.params))
            .or_default()
            .entry(row.variant.clone())
            .or_insert_with(|| Group { rows: Vec::new() })
            .rows
            .push(row);
    }
    out
}

/// Per repetition of `group`, its time over `reference`'s in the same repetition: the two ran
/// one after the other (repetitions are interleaved), so whatever the host did to that moment
/// (another tenant, a clock change: whole runs and halves of runs move by 1.5x on a shared
/// 2-vCPU host) divides out, where a ratio to the reference's median over the run keeps it.
/// Empty when a repetition has no reference time to pair with.
fn paired_with(group: &Group, reference: &Group) -> Vec<f64> {
    let at: BTreeMap<usize, f64> = reference
        .rows
        .iter()
        .map(|r| (r.repetition, r.wall_time_s))
        .collect();
    let v: Vec<f64> = group
        .rows
        .iter()
        .filter_map(|r| {
            let t = *at.get(&r.repetition)?;
            (t > 0.0).then(|| r.wall_time_s / t)
        })
        .collect();
    if v.len() == group.rows.len() {
        v
    } else {
        Vec::new()
    }
}

/// Per repetition, the reference's time over the median of the other variants' in that
/// repetition, from each other variant's times over the reference's (`relative`, one vector
/// per variant, repetitions in the same order): `1 / median(relative[..][i])`. Empty unless
/// every vector has the same length.
fn reference_over_others(relative: &[&[f64]]) -> Vec<f64> {
    let Some(n) = relative.first().map(|r| r.len()) else {
        return Vec::new();
    };
    if relative.iter().any(|r| r.len() != n) {
        return Vec::new();
    }
    (0..n)
        .filter_map(|i| {
            let at: Vec<f64> = relative.iter().map(|r| r[i]).collect();
            median(&at).filter(|&m| m > 0.0).map(|m| 1.0 / m)
        })
        .collect()
}

/// Pools the rows of a later run of the same experiment into `rows`: its repetitions are
/// numbered on from the last of `rows`, so a repetition still names one interleaved round of
/// one run (what [`paired_with`] pairs by).
pub fn pool_runs(rows: &mut Vec<ResultRow>, later: Vec<ResultRow>) {
    let next = rows.iter().map(|r| r.repetition + 1).max().unwrap_or(0);
    rows.extend(later.into_iter().map(|mut r| {
        r.repetition += next;
        r
    }));
}

/// Gives every row of one run the median of the run's calibrations (each point's is timed
/// before its runs, see [`crate::exec::executor`]): one point's calibration moves by 10-20% on
/// a shared host, the median over a run's points much less. Apply it to each run before rows of
/// several runs are pooled.
pub fn use_run_calibration(rows: &mut [ResultRow]) {
    let all: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.metrics.get(CALIBRATION_METRIC).copied())
        .collect();
    if let Some(c) = median(&all) {
        for r in rows.iter_mut() {
            if let Some(v) = r.metrics.get_mut(CALIBRATION_METRIC) {
                *v = c;
            }
        }
    }
}

/// Whether `rows` come from a counted run (`parbench gate count`: instructions under valgrind,
/// whose times mean nothing).
pub fn is_counted(rows: &[ResultRow]) -> bool {
    rows.iter()
        .any(|r| r.metrics.contains_key(INSTRUCTIONS_METRIC))
}

/// A baseline of `config`'s rows, made on `machine`. Several runs of one experiment (pooled
/// rows, from repeated runs) give each entry more repetitions and so a truer spread.
pub fn make_baseline(
    rows: &[ResultRow],
    config: &ExperimentConfig,
    machine: &StoredMachine,
) -> Baseline {
    let reference = reference_variant(rows, config).unwrap_or_default();
    let patterns = exact_patterns(config);
    let path = dispatch_path(machine, &config.family);
    let counted = is_counted(rows);
    let by_point = groups(rows);
    let mut points = BTreeMap::new();
    for (key, variants) in &by_point {
        let reference_group = variants.get(&reference);
        let mut entries = BTreeMap::new();
        for (variant, group) in variants {
            let mut entry = BaselineEntry::default();
            let names: std::collections::BTreeSet<&String> =
                group.rows.iter().flat_map(|r| r.metrics.keys()).collect();
            for name in names {
                if matches_metric(patterns, name) {
                    if let [value] = group.values_of(name)[..] {
                        entry.counters.insert(name.clone(), value);
                    }
                }
            }
            if let [count] = group.values_of(INSTRUCTIONS_METRIC)[..] {
                entry.instructions = Some(count as u64);
                entry.counted_path.clone_from(&path);
            }
            if counted {
                entries.insert(variant.clone(), entry);
                continue;
            }
            // The reference's own would be all ones: it is compared with the others instead.
            let relative = reference_group
                .filter(|_| *variant != reference)
                .map(|with| paired_with(group, with))
                .unwrap_or_default();
            let normalized = group.normalized();
            if !normalized.is_empty() && !machine.fingerprint.is_empty() {
                entry.timings.insert(
                    machine.fingerprint.clone(),
                    Timing {
                        normalized,
                        median_wall_time_s: median(&group.times()).unwrap_or(0.0),
                        relative,
                    },
                );
            }
            entries.insert(variant.clone(), entry);
        }
        points.insert(key.clone(), entries);
    }
    let mut claims = BTreeMap::new();
    if !counted && !machine.fingerprint.is_empty() {
        let outcomes = claims::evaluate(config, rows)
            .into_iter()
            .map(|c| {
                let record = RecordedClaim {
                    passed: c.passed,
                    detail: c.detail,
                };
                (c.name, record)
            })
            .collect::<BTreeMap<_, _>>();
        if !outcomes.is_empty() {
            claims.insert(machine.fingerprint.clone(), outcomes);
        }
    }
    let mut machines = BTreeMap::new();
    if !machine.fingerprint.is_empty()
        && rows
            .iter()
            .any(|r| r.metrics.contains_key(CALIBRATION_METRIC))
    {
        machines.insert(
            machine.fingerprint.clone(),
            MachineRecord {
                cpu_model: machine.cpu_model.clone(),
                commit: machine.git_commit.clone(),
                recorded: machine.timestamp.clone(),
            },
        );
    }
    Baseline {
        version: BASELINE_VERSION,
        machines,
        experiments: BTreeMap::from([(
            config.name.clone(),
            ExperimentBaseline {
                reference_variant: reference,
                optional: config.gate.optional.clone(),
                points,
                claims,
            },
        )]),
    }
}

/// Thresholds of the baseline comparison.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CheckOptions {
    /// A same-run time ratio (now / baseline) is a regression when the lower end of its
    /// interval exceeds this factor (and the time per calibration agrees, see the module's
    /// notes); so is the time per calibration of an entry alone at its point.
    pub max_slowdown: f64,
    /// The time per calibration of any entry is a regression when the lower end of its
    /// interval exceeds this factor.
    pub max_uniform_slowdown: f64,
    /// Confidence of the time ratio's bootstrap interval.
    pub confidence: f64,
    /// Allowed growth of an instruction count, as a fraction.
    pub max_instruction_growth: f64,
    /// Entries whose median time (now or in the baseline) is shorter are not timed, and fail
    /// the check unless their experiment is `untimed`.
    pub min_time_s: f64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_slowdown: DEFAULT_MAX_SLOWDOWN,
            max_uniform_slowdown: UNIFORM_SLOWDOWN_FACTOR * DEFAULT_MAX_SLOWDOWN,
            confidence: DEFAULT_CONFIDENCE,
            max_instruction_growth: DEFAULT_MAX_INSTRUCTION_GROWTH,
            min_time_s: DEFAULT_MIN_TIME_S,
        }
    }
}

/// How many baseline entries each tier compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Entries (point x variant) in the baseline for the experiments checked.
    pub entries: usize,
    /// Entries at least one tier compared.
    pub gated: usize,
    pub timed: usize,
    /// Of the timed, those compared by same-run ratio (no times for this machine kind).
    pub timed_by_ratio: usize,
    pub counted: usize,
    pub instructions: usize,
}

impl Coverage {
    pub fn add(&mut self, other: &Coverage) {
        self.entries += other.entries;
        self.gated += other.gated;
        self.timed += other.timed;
        self.timed_by_ratio += other.timed_by_ratio;
        self.counted += other.counted;
        self.instructions += other.instructions;
    }
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gated {} of {} entries (time: {}, of them {} by same-run ratio only; exact counters: {}; instructions: {})",
            self.gated,
            self.entries,
            self.timed,
            self.timed_by_ratio,
            self.counted,
            self.instructions
        )
    }
}

/// What `parbench check` found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckReport {
    pub claims: Vec<ClaimOutcome>,
    /// Slower times, more instructions, changed counters (fail the check).
    pub regressions: Vec<String>,
    /// Baseline entries the run lacks or could not time, without an exemption (fail the check).
    pub gaps: Vec<String>,
    /// What was not compared and why, exemptions, and improvements worth a new baseline.
    pub notes: Vec<String>,
    pub coverage: Coverage,
}

impl CheckReport {
    pub fn claims_passed(&self) -> bool {
        self.claims.iter().all(|c| c.passed)
    }
    pub fn passed(&self) -> bool {
        self.claims_passed() && self.regressions.is_empty() && self.gaps.is_empty()
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.claims {
            let mark = if c.passed { "PASS" } else { "FAIL" };
            writeln!(f, "{mark} claim {}: {}", c.name, c.detail)?;
        }
        for r in &self.regressions {
            writeln!(f, "REGRESSION {r}")?;
        }
        for g in &self.gaps {
            writeln!(f, "NOT GATED {g}")?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// The run being checked: its rows, experiment and machine.
pub struct RunView<'a> {
    pub rows: &'a [ResultRow],
    pub config: &'a ExperimentConfig,
    pub machine: &'a StoredMachine,
}

/// Re-evaluates the run's claims and compares it with `baseline` (when given).
pub fn check(run: &RunView, baseline: Option<&Baseline>, options: &CheckOptions) -> CheckReport {
    let mut report = CheckReport {
        claims: claims::evaluate(run.config, run.rows),
        ..CheckReport::default()
    };
    let Some(baseline) = baseline else {
        return report;
    };
    let name = &run.config.name;
    let Some(old) = baseline.experiments.get(name) else {
        report.notes.push(format!(
            "the baseline has no entry for experiment `{name}`; nothing compared (add it with `parbench check RUN --write-baseline FILE`)"
        ));
        return report;
    };
    let now = groups(run.rows);
    let kind = &run.machine.fingerprint;
    let reference = &old.reference_variant;
    let mut gate = Gate {
        options,
        kind,
        has_machine: baseline.machines.contains_key(kind),
        path_now: dispatch_path(run.machine, &run.config.family),
        reference,
        others: others_at_points(&now, old, kind),
        report,
        coverage: Coverage::default(),
        short: 0,
        untimed_references: 0,
        mismatched: footprint_mismatches(old)
            .into_iter()
            .map(|m| (m.point, m.variant))
            .collect(),
        by_calibration_only: 0,
        timed_elsewhere: 0,
    };
    let counting_run = is_counted(run.rows);
    let untimed = run.config.gate.untimed.as_deref();
    if !counting_run && !gate.has_machine {
        gate.report.notes.push(format!(
            "the baseline has no times for this kind of machine ({kind}); times compared only as same-run ratios to `{reference}`, where the baseline keeps kind-less ones from before each kind kept its own (record this machine's with --write-baseline)"
        ));
    }
    if let Some(why) = untimed {
        gate.report.notes.push(format!("times not gated: {why}"));
    }
    for (key, variants) in &old.points {
        for (variant, then) in variants {
            gate.coverage.entries += 1;
            let entry = Entry {
                who: format!("`{variant}` at {key}"),
                key,
                variant,
                then,
            };
            let at_point = now.get(key);
            let Some(group) = at_point.and_then(|v| v.get(variant)) else {
                let gap = format!("{}: in the baseline, not in this run", entry.who);
                gate.report.gaps.push(gap);
                continue;
            };
            let mut gated = gate.counters(&entry, group);
            if counting_run {
                // Valgrind's times mean nothing: counted runs are gated by their counts.
                gated |= gate.instructions(&entry, group);
            } else if untimed.is_none() {
                gated |= at_point.is_some_and(|vs| gate.time(&entry, group, vs));
            }
            if gated {
                gate.coverage.gated += 1;
            }
        }
    }
    let extra: usize = now
        .iter()
        .map(|(key, vs)| {
            vs.keys()
                .filter(|v| !old.points.get(key).is_some_and(|o| o.contains_key(*v)))
                .count()
        })
        .sum();
    gate.finish(extra)
}

/// For each point: per repetition, the reference's time over the median of the other
/// variants' (present in both the run and the baseline), now and in the baseline.
fn others_at_points(
    now: &BTreeMap<String, BTreeMap<String, Group>>,
    old: &ExperimentBaseline,
    kind: &str,
) -> BTreeMap<String, (Vec<f64>, Vec<f64>)> {
    let mut out = BTreeMap::new();
    for (key, variants) in &old.points {
        let Some(run) = now.get(key) else { continue };
        let Some(reference) = run.get(&old.reference_variant) else {
            continue;
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (variant, then) in variants {
            let relative = then.relative_on(kind);
            if *variant == old.reference_variant || relative.is_empty() {
                continue;
            }
            if let Some(group) = run.get(variant) {
                a.push(paired_with(group, reference));
                b.push(relative);
            }
        }
        let a: Vec<&[f64]> = a.iter().map(Vec::as_slice).collect();
        let (x, y) = (reference_over_others(&a), reference_over_others(&b));
        if !x.is_empty() && !y.is_empty() {
            out.insert(key.clone(), (x, y));
        }
    }
    out
}

/// One baseline entry being compared.
struct Entry<'a> {
    /// "`variant` at point", as the report names it.
    who: String,
    key: &'a str,
    variant: &'a str,
    then: &'a BaselineEntry,
}

/// One experiment's comparison in progress: the three tiers add to its report and coverage.
struct Gate<'a> {
    options: &'a CheckOptions,
    kind: &'a str,
    /// Whether the baseline has times for this kind of machine.
    has_machine: bool,
    /// The vector path this run's counts were taken on.
    path_now: Option<String>,
    reference: &'a str,
    /// Point key -> per repetition, the reference's time over the median of the point's
    /// other variants' (those in both the run and the baseline): now, and in the baseline.
    others: BTreeMap<String, (Vec<f64>, Vec<f64>)>,
    report: CheckReport,
    coverage: Coverage,
    /// Entries too short to time.
    short: usize,
    /// Entries of the reference variant with no calibrated times to compare and no other
    /// variant at their point.
    untimed_references: usize,
    /// (point, variant) of the baseline's timed entries whose working set and their
    /// reference's sit in different levels of cache ([`unprotected_same_run_ratios`]).
    mismatched: BTreeSet<(&'a str, &'a str)>,
    /// Of them, the entries judged by their time per calibration alone.
    by_calibration_only: usize,
    /// Entries with times for other kinds of machine only.
    timed_elsewhere: usize,
}

impl Gate<'_> {
    /// Exact counters: equal, or a regression. Whether any was compared.
    fn counters(&mut self, e: &Entry, group: &Group) -> bool {
        let mut compared = false;
        for (counter, &want) in &e.then.counters {
            let got = group.values_of(counter);
            match got[..] {
                [] => self.report.gaps.push(format!(
                    "{}: counter `{counter}` is in the baseline, not in this run",
                    e.who
                )),
                [one] if one == want => compared = true,
                _ => {
                    compared = true;
                    let shown: Vec<String> = got.iter().map(|g| fmt_count(*g)).collect();
                    self.report.regressions.push(format!(
                        "{}: counter `{counter}` {} -> {} ({}; exact counters must not change)",
                        e.who,
                        fmt_count(want),
                        shown.join(" / "),
                        percent_change(got[0], want)
                    ));
                }
            }
        }
        if compared {
            self.coverage.counted += 1;
        }
        compared
    }

    /// Instruction counts: at most `max_instruction_growth` more, on the baseline's vector
    /// path. Whether compared.
    fn instructions(&mut self, e: &Entry, group: &Group) -> bool {
        let got = group.values_of(INSTRUCTIONS_METRIC);
        let Some(want) = e.then.instructions else {
            let note = format!("{}: no instruction count in the baseline", e.who);
            self.report.notes.push(note);
            return false;
        };
        if got.is_empty() {
            let gap = format!("{}: no instruction count in this run", e.who);
            self.report.gaps.push(gap);
            return false;
        }
        let path = self.path_now.as_deref().unwrap_or("an unknown path");
        if e.then.counted_path != self.path_now {
            self.report.gaps.push(format!(
                "{}: instructions counted on {path} but the baseline's on {}: not comparable (regenerate the baseline under valgrind)",
                e.who,
                e.then.counted_path.as_deref().unwrap_or("an unknown path")
            ));
            return false;
        }
        let got = got.iter().copied().fold(0.0f64, f64::max);
        let growth = got / want as f64 - 1.0;
        let limit = self.options.max_instruction_growth;
        if growth > limit {
            self.report.regressions.push(format!(
                "{}: instructions {want} -> {} ({}; allowed +{}%; counted on {path})",
                e.who,
                got as u64,
                percent_change(got, want as f64),
                fmt_num(100.0 * limit)
            ));
        } else if growth < -limit {
            self.report.notes.push(format!(
                "{}: instructions {want} -> {} ({}): an improvement; record it with --write-baseline",
                e.who,
                got as u64,
                percent_change(got, want as f64)
            ));
        }
        self.coverage.instructions += 1;
        true
    }

    /// Times, by the rules of the module's notes: the same-run ratio against the baseline's
    /// where the time per calibration agrees that the entry is slower, the time per calibration
    /// alone above the uniform threshold (or above the plain one where the entry is alone at
    /// its point). Whether compared.
    fn time(&mut self, e: &Entry, group: &Group, now: &BTreeMap<String, Group>) -> bool {
        let options = self.options;
        let median_now = median(&group.times()).unwrap_or(0.0);
        let then_kind = e.then.timings.get(self.kind).filter(|_| self.has_machine);
        if median_now < options.min_time_s
            || then_kind.is_some_and(|t| t.median_wall_time_s < options.min_time_s)
        {
            self.short += 1;
            self.report.gaps.push(format!(
                "{}: median {} s, under the {} s that can be timed (exempt the experiment with `gate: {{untimed: why}}` if it cannot be longer)",
                e.who,
                fmt_num(median_now),
                fmt_num(options.min_time_s)
            ));
            return false;
        }
        let calibrated = then_kind.and_then(|t| {
            ratio_of_medians(&group.normalized(), &t.normalized, options.confidence).map(|i| (t, i))
        });
        let same_run = self.same_run_ratio(e, group, now);
        if calibrated.is_none() && same_run.is_none() {
            if then_kind.is_none() && !e.then.timings.is_empty() {
                // Timed on other kinds only, whose same-run ratios are not this kind's.
                self.timed_elsewhere += 1;
            } else if e.variant == self.reference {
                // Alone at its point (no other variant to compare with) and no calibrated
                // times for this machine kind.
                self.untimed_references += 1;
            } else {
                self.report.gaps.push(format!(
                    "{}: no times to compare (neither calibrated times for this machine kind nor a same-run ratio to `{}`)",
                    e.who, self.reference
                ));
            }
            return false;
        }
        self.coverage.timed += 1;
        if calibrated.is_none() {
            self.coverage.timed_by_ratio += 1;
        }
        let per_calibration = |i: &RatioInterval| {
            format!(
                "{}x the baseline's time per calibration ({})",
                fmt_num(i.ratio),
                fmt_interval(i)
            )
        };
        let relative = |anchor: &str, i: &RatioInterval| {
            format!(
                "{}x slower relative to {anchor} than in the baseline ({})",
                fmt_num(i.ratio),
                fmt_interval(i)
            )
        };
        let cal = calibrated.as_ref().map(|(_, i)| i);
        // Where the entry and its reference work in different levels of cache, another
        // tenant moves the same-run ratio by itself: with calibrated times it is not used, and
        // only the uniform rule judges the entry (without them it is all there is).
        let mismatched = cal.is_some() && self.mismatched.contains(&(e.key, e.variant));
        if mismatched {
            self.by_calibration_only += 1;
        }
        let relative_regressed = !mismatched
            && same_run.as_ref().is_some_and(|(_, s)| {
                s.lower > options.max_slowdown
                    && cal.is_none_or(|c| c.ratio >= CORROBORATING_SLOWDOWN)
            });
        let uniform_regressed = cal.is_some_and(|c| c.lower > options.max_uniform_slowdown);
        let alone_regressed =
            same_run.is_none() && cal.is_some_and(|c| c.lower > options.max_slowdown);
        // The first rule that holds is the one named (the same-run ratio's first: scripted
        // ratios are exact, the calibrations real).
        let why = if relative_regressed {
            match cal {
                Some(_) => format!(
                    "above the allowed {}x relative, the time per calibration up {}x or more",
                    options.max_slowdown, CORROBORATING_SLOWDOWN
                ),
                None => format!(
                    "above the allowed {}x relative; no times for this machine kind",
                    options.max_slowdown
                ),
            }
        } else if uniform_regressed {
            format!(
                "above the allowed {}x per calibration",
                options.max_uniform_slowdown
            )
        } else if alone_regressed {
            format!(
                "above the allowed {}x per calibration for a variant alone at its point",
                options.max_slowdown
            )
        } else {
            return true;
        };
        let mut found: Vec<String> = cal.map(per_calibration).into_iter().collect();
        if let Some((anchor, s)) = same_run.as_ref().filter(|_| relative_regressed) {
            found.push(relative(anchor, s));
        }
        let medians = calibrated
            .map(|(t, _)| {
                format!(
                    "; median {} s -> {} s",
                    fmt_num(t.median_wall_time_s),
                    fmt_num(median_now)
                )
            })
            .unwrap_or_default();
        self.report
            .regressions
            .push(format!("{}: {} ({why}{medians})", e.who, found.join("; ")));
        true
    }

    /// The entry's same-run ratio now against the baseline's, and what it is relative to;
    /// `None` when the point has nothing to compare with.
    fn same_run_ratio(
        &self,
        e: &Entry,
        group: &Group,
        now: &BTreeMap<String, Group>,
    ) -> Option<(String, RatioInterval)> {
        let confidence = self.options.confidence;
        if e.variant != self.reference {
            let paired = paired_with(group, now.get(self.reference)?);
            let i = ratio_of_medians(&paired, e.then.relative_on(self.kind), confidence)?;
            return Some((format!("`{}`", self.reference), i));
        }
        let (others_now, others_then) = self.others.get(e.key)?;
        let i = ratio_of_medians(others_now, others_then, confidence)?;
        Some(("the median of the point's other variants".to_string(), i))
    }

    /// The report, with the notes that sum up the comparison (`extra`: entries of the run
    /// the baseline lacks).
    fn finish(mut self, extra: usize) -> CheckReport {
        if extra > 0 {
            self.report.notes.push(format!(
                "{extra} point(s) x variant(s) of this run are not in the baseline: not compared (record them with --write-baseline)"
            ));
        }
        if self.untimed_references > 0 {
            self.report.notes.push(format!(
                "{} entries of the reference variant `{}` not timed: without calibrated times for this machine kind only same-run ratios are compared, and their points have no other variant",
                self.untimed_references, self.reference
            ));
        }
        if self.timed_elsewhere > 0 {
            self.report.notes.push(format!(
                "{} entries not timed: the baseline times them on other kinds of machine only, whose same-run ratios are not this kind's (vector paths and caches set them); their counts are gated (record this kind's times with --write-baseline)",
                self.timed_elsewhere
            ));
        }
        if self.by_calibration_only > 0 {
            self.report.notes.push(format!(
                "{} entries judged by their time per calibration alone (above {}x): each works in a different level of cache from its reference `{}` (one beyond a core's L2 of {:.0} KiB and more than {}x the other), where the host's other tenants slow one and not the other, so their same-run ratios are not used (a reference of the same working set would gate them closer)",
                self.by_calibration_only,
                self.options.max_uniform_slowdown,
                self.reference,
                PRIVATE_CACHE_BYTES / 1024.0,
                MAX_FOOTPRINT_RATIO
            ));
        }
        if self.short > 0 {
            self.report.notes.push(format!(
                "{} entries ran under {} s",
                self.short,
                fmt_num(self.options.min_time_s)
            ));
        }
        self.report.coverage = self.coverage;
        self.report
    }
}

/// "95% interval 1.6-1.9x".
fn fmt_interval(i: &crate::util::stats::RatioInterval) -> String {
    format!(
        "{}% interval {}-{}x",
        fmt_num(100.0 * i.confidence),
        fmt_num(i.lower),
        fmt_num(i.upper)
    )
}

/// An experiment of the baseline that no run checked: a gap unless it is optional.
pub fn missing_experiment(baseline: &Baseline, name: &str) -> Option<Result<String, String>> {
    let exp = baseline.experiments.get(name)?;
    let entries: usize = exp.points.values().map(|v| v.len()).sum();
    Some(match &exp.optional {
        Some(why) => Ok(format!(
            "experiment `{name}` ({entries} entries) is not in this run; it is optional: {why}"
        )),
        None => Err(format!(
            "experiment `{name}` ({entries} entries) is in the baseline, not in this run"
        )),
    })
}

/// An exact counter in full (integers without a fraction or exponent).
fn fmt_count(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// `now` against `then` in percent, with its sign.
fn percent_change(now: f64, then: f64) -> String {
    if then == 0.0 {
        return if now == 0.0 { "+0%" } else { "from 0" }.to_string();
    }
    let p = 100.0 * (now / then - 1.0);
    format!("{}{}%", if p >= 0.0 { "+" } else { "" }, fmt_num(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::config::{DataConfig, DataSource, EquivalenceConfig};
    use crate::family::{Params, Value};

    const KIND: &str = "cpu | avx2 | 2 cpus";

    fn config() -> ExperimentConfig {
        ExperimentConfig {
            name: "exp".to_string(),
            description: String::new(),
            paper: "p".to_string(),
            reproduces: "r".to_string(),
            family: "mock".to_string(),
            data: DataConfig {
                source: DataSource::Synthetic,
                file: None,
                seed: 0,
            },
            variants: vec!["slow".to_string(), "fast".to_string()],
            peers: BTreeMap::new(),
            params: BTreeMap::new(),
            sweep: BTreeMap::new(),
            repetitions: 5,
            interleave_points: false,
            warmup: 0,
            quick: None,
            equivalence: Some(EquivalenceConfig {
                reference: "slow".to_string(),
                rel_tol: 1e-9,
            }),
            figures: Vec::new(),
            launcher: None,
            gate: Default::default(),
            claims: Vec::new(),
        }
    }

    fn machine(kind: &str) -> StoredMachine {
        StoredMachine {
            cpu_model: "cpu".to_string(),
            fingerprint: kind.to_string(),
            dispatch: BTreeMap::from([("mock".to_string(), "scalar".to_string())]),
            git_commit: None,
            timestamp: String::new(),
        }
    }

    /// Rows at sizes 10 and 20, 5 repetitions: `slow` takes `slow_s`, `fast` `fast_s` times a
    /// small spread, each followed by a calibration of `cal_s`; `size` is an exact counter.
    fn rows(slow_s: f64, fast_s: f64, cal_s: f64) -> Vec<ResultRow> {
        let mut out = Vec::new();
        for (point, size) in [10i64, 20].into_iter().enumerate() {
            let params = Params::from([
                ("size".to_string(), Value::Int(size)),
                ("threads".to_string(), Value::Int(1)),
            ]);
            for (variant, t) in [("slow", slow_s), ("fast", fast_s)] {
                for (repetition, noise) in [1.0, 1.03, 0.98, 1.01, 0.99].into_iter().enumerate() {
                    out.push(ResultRow {
                        experiment: "exp".to_string(),
                        point,
                        params: params.clone(),
                        variant: variant.to_string(),
                        repetition,
                        wall_time_s: t * noise,
                        phases_s: BTreeMap::new(),
                        metrics: BTreeMap::from([
                            ("size".to_string(), size as f64),
                            (CALIBRATION_METRIC.to_string(), cal_s),
                        ]),
                        equiv_rel_error: None,
                    });
                }
            }
        }
        out
    }

    fn report(rows: &[ResultRow], base: &Baseline, kind: &str) -> CheckReport {
        let config = config();
        let machine = machine(kind);
        check(
            &RunView {
                rows,
                config: &config,
                machine: &machine,
            },
            Some(base),
            &CheckOptions::default(),
        )
    }

    fn baseline() -> Baseline {
        make_baseline(&rows(1.0, 0.1, 0.01), &config(), &machine(KIND))
    }

    #[test]
    fn a_baseline_round_trips_and_an_old_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        let b = baseline();
        b.save(&path).unwrap();
        assert_eq!(Baseline::load(&path).unwrap(), b);
        std::fs::write(&path, r#"{"version": 1, "experiments": {}}"#).unwrap();
        let err = Baseline::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("version 1") && err.contains("--write-baseline"),
            "{err}"
        );
    }

    #[test]
    fn an_unchanged_run_passes_with_every_entry_gated() {
        let r = report(&rows(1.0, 0.1, 0.01), &baseline(), KIND);
        assert!(r.passed(), "{r}");
        assert_eq!(r.coverage.entries, 4);
        assert_eq!(r.coverage.gated, 4);
        assert_eq!(r.coverage.timed, 4);
        assert_eq!(r.coverage.counted, 4);
        assert_eq!(r.coverage.timed_by_ratio, 0);
    }

    #[test]
    fn a_reference_slower_and_everything_slower_are_regressions() {
        let r = report(&rows(2.0, 0.1, 0.01), &baseline(), KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(r.regressions.iter().all(|x| x.contains("`slow`")), "{r}");
        let r = report(&rows(10.0, 1.0, 0.01), &baseline(), KIND);
        assert_eq!(r.regressions.len(), 4, "{r}");
    }

    #[test]
    fn one_variant_slower_is_seen_when_the_baseline_run_was_slow_throughout() {
        // The baseline's run was 1.5x slower throughout with its calibration unmoved (as a
        // shared host now and then gives): per calibration, 2x reads as 1.33x; the same-run
        // ratio sees the 2x.
        let slow_baseline = make_baseline(&rows(1.5, 0.15, 0.01), &config(), &machine(KIND));
        let r = report(&rows(1.0, 0.2, 0.01), &slow_baseline, KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions
                .iter()
                .all(|x| x.contains("`fast`") && x.contains("relative to `slow`")),
            "{r}"
        );
        let r = report(&rows(2.0, 0.1, 0.01), &slow_baseline, KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions
                .iter()
                .all(|x| x.contains("`slow`") && x.contains("other variants")),
            "{r}"
        );
        assert!(report(&rows(1.0, 0.1, 0.01), &slow_baseline, KIND).passed());
    }

    #[test]
    fn per_calibration_alone_flags_only_above_the_uniform_threshold() {
        // Every variant 2.5x slower per calibration, the same-run ratios unmoved: under the
        // uniform 3x (a shared host moves one run's times by 1.6x); 3.5x is flagged, each entry.
        assert!(report(&rows(2.5, 0.25, 0.01), &baseline(), KIND).passed());
        let r = report(&rows(3.5, 0.35, 0.01), &baseline(), KIND);
        assert_eq!(r.regressions.len(), 4, "{r}");
        assert!(
            r.regressions
                .iter()
                .all(|x| x.contains("above the allowed 3x per calibration")),
            "{r}"
        );
        // One variant 1.6x per calibration but only 1.23x relative to its reference: noise
        // of the kind an unchanged run on CI's host showed, not a regression.
        assert!(report(&rows(1.3, 0.16, 0.01), &baseline(), KIND).passed());
    }

    /// `fast` working in the last-level cache (9.6 MB) against its reference's 0.5 MB: judged
    /// by its time per calibration alone. Twice as slow relative to `slow` and 1.33x per
    /// calibration, a regression when both fit in one level, passes with the note that says
    /// why; everything 10x slower is still flagged, each entry.
    #[test]
    fn an_entry_in_another_cache_level_than_its_reference_is_judged_per_calibration_alone() {
        let bytes = |variant: &str| if variant == "slow" { 0.5e6 } else { 9.6e6 };
        let with_footprints = |mut rows: Vec<ResultRow>| {
            for r in &mut rows {
                r.metrics
                    .insert(FOOTPRINT_METRIC.to_string(), bytes(&r.variant));
            }
            rows
        };
        let same_level = make_baseline(&rows(1.5, 0.15, 0.01), &config(), &machine(KIND));
        let mut base = make_baseline(
            &with_footprints(rows(1.5, 0.15, 0.01)),
            &config(),
            &machine(KIND),
        );
        for variants in base.experiments.get_mut("exp").unwrap().points.values_mut() {
            for (variant, entry) in variants.iter_mut() {
                entry
                    .counters
                    .insert(FOOTPRINT_METRIC.to_string(), bytes(variant));
            }
        }
        assert_eq!(footprint_mismatches(&base.experiments["exp"]).len(), 2);
        assert!(!report(&rows(1.0, 0.2, 0.01), &same_level, KIND).passed());
        let r = report(&with_footprints(rows(1.0, 0.2, 0.01)), &base, KIND);
        assert!(r.passed(), "{r}");
        assert_eq!(r.coverage.timed, 4, "{r}");
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("2 entries judged by their time per calibration alone")),
            "{r}"
        );
        let r = report(&with_footprints(rows(15.0, 1.5, 0.01)), &base, KIND);
        assert_eq!(r.regressions.len(), 4, "{r}");
    }

    #[test]
    fn a_faster_reference_is_not_a_regression_of_the_others() {
        // `fast` is 2.5x slower relative to `slow`, and not slower itself.
        let r = report(&rows(0.4, 0.1, 0.01), &baseline(), KIND);
        assert!(r.passed(), "{r}");
    }

    #[test]
    fn a_variant_alone_at_its_point_is_gated_per_calibration_at_the_plain_threshold() {
        let alone = |slow_s| -> Vec<ResultRow> {
            rows(slow_s, 0.1, 0.01)
                .into_iter()
                .filter(|r| r.variant == "slow")
                .collect()
        };
        let base = make_baseline(&alone(1.0), &config(), &machine(KIND));
        assert!(report(&alone(1.0), &base, KIND).passed());
        let r = report(&alone(2.0), &base, KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(r.regressions[0].contains("alone at its point"), "{r}");
    }

    #[test]
    fn a_version_2_baseline_is_read_with_its_same_run_ratios_paired() {
        // Version 2: times over the reference's median over the run (here 1.0).
        let v2 = r#"{"version": 2, "experiments": {"exp": {"reference_variant": "slow",
            "points": {"size=10": {
                "slow": {"relative": [0.8, 1.0, 1.25]},
                "fast": {"relative": [0.08, 0.1, 0.125]},
                "short": {"relative": [0.1]}}}}}}"#;
        let b = Baseline::parse(v2, Path::new("v2.json")).unwrap();
        assert_eq!(b.version, BASELINE_VERSION);
        let point = &b.experiments["exp"].points["size=10"];
        let close = |v: &[f64], x: f64| v.len() == 3 && v.iter().all(|y| (y - x).abs() < 1e-12);
        assert!(close(&point["fast"].relative, 0.1), "{point:?}");
        assert!(point["slow"].relative.is_empty(), "{point:?}");
        assert!(point["short"].relative.is_empty());
    }

    #[test]
    fn pooled_runs_pair_repetitions_within_each_run() {
        // Two runs of the baseline, the second 1.5x slower throughout: paired within its run,
        // `fast` is 0.1 of `slow` at every repetition of both.
        let mut pooled = rows(1.0, 0.1, 0.01);
        pool_runs(&mut pooled, rows(1.5, 0.15, 0.01));
        let base = make_baseline(&pooled, &config(), &machine(KIND));
        for entries in base.experiments["exp"].points.values() {
            let relative = entries["fast"].relative_on(KIND);
            assert_eq!(relative.len(), 10);
            assert!(
                relative.iter().all(|&x| (x - 0.1).abs() < 1e-12),
                "{relative:?}"
            );
        }
    }

    #[test]
    fn drift_within_a_run_divides_out_of_the_same_run_ratio() {
        // From the third repetition on, the host makes both variants 1.5x slower.
        let drift = |rows: Vec<ResultRow>| -> Vec<ResultRow> {
            rows.into_iter()
                .map(|mut r| {
                    if r.repetition >= 2 {
                        r.wall_time_s *= 1.5;
                    }
                    r
                })
                .collect()
        };
        assert!(report(&drift(rows(1.0, 0.1, 0.01)), &baseline(), KIND).passed());
        // `fast` 1.6x slower in such a run: paired, 1.6x at every repetition.
        let r = report(&drift(rows(1.0, 0.16, 0.01)), &baseline(), KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions
                .iter()
                .all(|x| x.contains("1.600x slower relative to `slow`")),
            "{r}"
        );
        // The reference 1.6x slower: 1.6x over the other variant at every repetition.
        let r = report(&drift(rows(1.6, 0.1, 0.01)), &baseline(), KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions
                .iter()
                .all(|x| x.contains("`slow`") && x.contains("1.600x slower relative to the median")),
            "{r}"
        );
    }

    #[test]
    fn a_slower_host_is_not_a_regression() {
        // Everything 3x slower, the calibration too.
        let r = report(&rows(3.0, 0.3, 0.03), &baseline(), KIND);
        assert!(r.passed(), "{r}");
    }

    /// A baseline from before each kind kept its own same-run ratios: one kind-less list per
    /// entry (here `KIND`'s).
    fn kind_less_baseline() -> Baseline {
        let mut b = baseline();
        for variants in b.experiments.get_mut("exp").unwrap().points.values_mut() {
            for entry in variants.values_mut() {
                let t = entry.timings.get_mut(KIND).unwrap();
                entry.relative = std::mem::take(&mut t.relative);
            }
        }
        b
    }

    #[test]
    fn another_kinds_same_run_ratios_are_not_this_kinds_baseline() {
        // `fast` twice as slow relative to `slow` on a kind the baseline has no times for:
        // the ratios it holds are `KIND`'s, so nothing is timed, and the run says why.
        let other = "other | avx512f | 8 cpus";
        let r = report(&rows(1.0, 0.2, 0.01), &baseline(), other);
        assert!(r.passed(), "{r}");
        assert_eq!(r.coverage.timed, 0, "{r}");
        assert_eq!(r.coverage.gated, 4, "{r}");
        assert!(
            r.notes.iter().any(|n| n.starts_with("4 entries not timed")),
            "{r}"
        );
        // Recorded on that kind too, each kind is held to its own.
        let mut both = baseline();
        both.update(make_baseline(
            &rows(1.0, 0.2, 0.01),
            &config(),
            &machine(other),
        ));
        assert!(report(&rows(1.0, 0.2, 0.01), &both, other).passed());
        assert!(report(&rows(1.0, 0.1, 0.01), &both, KIND).passed());
        let r = report(&rows(1.0, 0.4, 0.01), &both, other);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(r.regressions.iter().all(|x| x.contains("`fast`")), "{r}");
    }

    #[test]
    fn this_kinds_times_with_nothing_to_compare_are_a_gap_not_another_kinds() {
        // `fast` timed on `KIND`, but with neither its times per calibration nor its
        // same-run ratios kept: the entry is not gated, and the run fails for it.
        let mut b = baseline();
        for variants in b.experiments.get_mut("exp").unwrap().points.values_mut() {
            let t = variants
                .get_mut("fast")
                .unwrap()
                .timings
                .get_mut(KIND)
                .unwrap();
            t.normalized.clear();
            t.relative.clear();
        }
        let r = report(&rows(1.0, 0.1, 0.01), &b, KIND);
        assert!(!r.passed(), "{r}");
        assert!(
            r.gaps
                .iter()
                .any(|g| g.contains("`fast`") && g.contains("no times to compare")),
            "{r}"
        );
        assert!(!r.notes.iter().any(|n| n.contains("not timed")), "{r}");
    }

    #[test]
    fn another_machine_kind_falls_back_to_kind_less_same_run_ratios() {
        let other = "other | avx512f | 8 cpus";
        let r = report(&rows(1.0, 0.2, 0.01), &kind_less_baseline(), other);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.notes.iter().any(|n| n.contains("no times for this kind")),
            "{r}"
        );
        // The reference is compared with the other variant of its point.
        assert_eq!(r.coverage.timed_by_ratio, 4);
        let r = report(&rows(2.0, 0.1, 0.01), &kind_less_baseline(), other);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(r.regressions.iter().all(|x| x.contains("`slow`")), "{r}");
        // Everything 10x slower cannot be seen by ratios; the counters still gate the entries.
        let r = report(&rows(10.0, 1.0, 0.01), &kind_less_baseline(), other);
        assert!(r.passed(), "{r}");
        assert_eq!(r.coverage.gated, 4);
    }

    #[test]
    fn changed_counters_missing_entries_and_short_runs_fail() {
        let mut changed = rows(1.0, 0.1, 0.01);
        for row in changed.iter_mut().filter(|r| r.variant == "fast") {
            *row.metrics.get_mut("size").unwrap() += 1.0;
        }
        let r = report(&changed, &baseline(), KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions[0].contains("counter `size` 10 -> 11 (+10.00%"),
            "{r}"
        );

        let fewer: Vec<ResultRow> = rows(1.0, 0.1, 0.01)
            .into_iter()
            .filter(|r| !(r.variant == "fast" && r.point == 1))
            .collect();
        let r = report(&fewer, &baseline(), KIND);
        assert_eq!(r.gaps.len(), 1, "{r}");
        assert!(!r.passed());

        let short = make_baseline(&rows(1.0, 0.001, 0.01), &config(), &machine(KIND));
        let r = report(&rows(1.0, 0.001, 0.01), &short, KIND);
        assert_eq!(r.gaps.len(), 2, "{r}");
        let mut exempt = config();
        exempt.gate.untimed = Some("sub-millisecond by design".to_string());
        let machine = machine(KIND);
        let rows = rows(1.0, 0.001, 0.01);
        let r = check(
            &RunView {
                rows: &rows,
                config: &exempt,
                machine: &machine,
            },
            Some(&short),
            &CheckOptions::default(),
        );
        assert!(r.passed(), "{r}");
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("sub-millisecond by design")));
    }

    #[test]
    fn instruction_counts_gate_on_their_path() {
        let counted = |factor: f64| -> Vec<ResultRow> {
            rows(1.0, 0.1, 0.01)
                .into_iter()
                .filter(|r| r.repetition == 0)
                .map(|mut r| {
                    r.metrics.remove(CALIBRATION_METRIC);
                    let n = if r.variant == "fast" {
                        1000.0 * factor
                    } else {
                        5000.0
                    };
                    r.metrics.insert(INSTRUCTIONS_METRIC.to_string(), n.round());
                    r
                })
                .collect()
        };
        let base = make_baseline(&counted(1.0), &config(), &machine(KIND));
        assert_eq!(
            base.experiments["exp"].points["size=10,threads=1"]["fast"]
                .counted_path
                .as_deref(),
            Some("mock scalar")
        );
        let r = report(&counted(1.015), &base, KIND);
        assert!(r.passed(), "{r}");
        assert_eq!(r.coverage.instructions, 4);
        let r = report(&counted(1.3), &base, KIND);
        assert_eq!(r.regressions.len(), 2, "{r}");
        assert!(
            r.regressions[0].contains("instructions 1000 -> 1300 (+30.00%"),
            "{r}"
        );
        // Counted on another vector path: not comparable, and said so.
        let mut other = machine(KIND);
        other
            .dispatch
            .insert("mock".to_string(), "avx512f".to_string());
        let config = config();
        let rows = counted(1.0);
        let r = check(
            &RunView {
                rows: &rows,
                config: &config,
                machine: &other,
            },
            Some(&base),
            &CheckOptions::default(),
        );
        assert_eq!(r.gaps.len(), 4, "{r}");
    }

    #[test]
    fn updating_keeps_other_machines_times_and_earlier_counts() {
        let mut b = baseline();
        let other = make_baseline(&rows(2.0, 0.2, 0.01), &config(), &machine("other"));
        b.update(other);
        let entry = &b.experiments["exp"].points["size=10,threads=1"]["fast"];
        assert_eq!(entry.timings.len(), 2);
        assert_eq!(b.machines.len(), 2);
    }

    #[test]
    fn updating_drops_other_machines_verdicts_of_claims_the_run_no_longer_has() {
        let verdict = |detail: &str| RecordedClaim {
            passed: true,
            detail: detail.to_string(),
        };
        let claims = |names: &[&str]| -> BTreeMap<String, RecordedClaim> {
            names.iter().map(|n| (n.to_string(), verdict(n))).collect()
        };
        let mut b = baseline();
        let exp = b.experiments.get_mut("exp").unwrap();
        exp.claims
            .insert("other".to_string(), claims(&["kept", "renamed before"]));
        let mut new = make_baseline(&rows(1.0, 0.1, 0.01), &config(), &machine(KIND));
        let ran = new.experiments.get_mut("exp").unwrap();
        ran.claims = BTreeMap::from([(KIND.to_string(), claims(&["kept", "renamed after"]))]);
        let mut counted = new.clone();
        b.update(new);
        let got = &b.experiments["exp"].claims;
        assert_eq!(got["other"].keys().collect::<Vec<_>>(), ["kept"]);
        assert_eq!(
            got[KIND].keys().collect::<Vec<_>>(),
            ["kept", "renamed after"]
        );
        // A counting run evaluates no claims: every kind's verdicts stay as they were.
        counted.experiments.get_mut("exp").unwrap().claims.clear();
        let before = b.experiments["exp"].claims.clone();
        b.update(counted);
        assert_eq!(b.experiments["exp"].claims, before);
    }

    #[test]
    fn a_missing_experiment_is_a_gap_unless_optional() {
        let mut b = baseline();
        assert!(missing_experiment(&b, "exp").unwrap().is_err());
        assert!(missing_experiment(&b, "nope").is_none());
        b.experiments.get_mut("exp").unwrap().optional = Some("needs a dataset".to_string());
        assert!(missing_experiment(&b, "exp").unwrap().is_ok());
    }
}
