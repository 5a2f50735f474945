//! The regression gate's workloads (by default `experiments/gate/`: every variant of every
//! family on a small seeded point, one thread), run two ways:
//!
//! - [`time`] (`parbench gate time`): the timing tier's runs, repetitions interleaved across
//!   variants, with a calibration timed before each point (see [`crate::exec::executor`]).
//! - [`count`] (`parbench gate count`): the deterministic tier, below.
//!
//! `parbench gate count`: the regression gate's deterministic tier. Runs the gate workloads
//! (by default `experiments/gate/`) once each, after one warm-up, with every run's instructions
//! counted by valgrind's callgrind ([`crate::exec::callgrind`]), and stores them as the
//! `instructions` metric of each row. `parbench check` then compares them, and the families'
//! exact counters, with a committed baseline.
//!
//! The command starts itself again under valgrind (the child sees [`callgrind::COUNT_ENV`]),
//! so planning, parsing and generation run uninstrumented and only the variants' own runs are
//! counted; afterwards it reads callgrind's labelled dumps and writes the counts into the run
//! directories the child made. Every plan is built, and so every experiment file checked,
//! before valgrind starts.

use crate::exec::callgrind;
use crate::exec::executor::count_label;
use crate::exec::runner::{self, ProgressMode};
use crate::experiment::plan;
use crate::results;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The metric the counts are stored in (what `parbench check` reads).
pub use crate::analysis::check::INSTRUCTIONS_METRIC;

/// Where callgrind's dumps go inside the output directory while the child runs.
const DUMP_DIR: &str = ".callgrind";
use callgrind::DUMP_PREFIX;

/// The experiment files named by `paths` (files, or directories whose `*.yaml` are taken).
pub fn experiment_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                bail!("{} holds no experiment file (*.yaml)", p.display());
            }
            files.extend(in_dir);
        } else if p.exists() {
            files.push(p.clone());
        } else {
            bail!("{}: no such experiment file or directory", p.display());
        }
    }
    Ok(files)
}

/// The experiment files in `paths` and their plans; every file's problems are reported
/// together, before anything runs.
fn build_plans(
    paths: &[PathBuf],
    data_dir: Option<&Path>,
) -> Result<(Vec<PathBuf>, Vec<plan::Plan>)> {
    let files = experiment_files(paths)?;
    let mut plans = Vec::new();
    let mut problems = Vec::new();
    for file in &files {
        match plan::build(file, false, data_dir) {
            Ok(plan) => plans.push(plan),
            Err(e) => problems.push(format!("{e:#}")),
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("\n"));
    }
    Ok((files, plans))
}

/// Runs the experiments in `paths` natively, each into `out/<experiment>` (every plan is built
/// first, so a bad file stops the command before anything runs), with `repetitions` in place of
/// each experiment's own when given. Returns whether every experiment's claims held.
pub fn time(
    paths: &[PathBuf],
    out: &Path,
    data_dir: Option<&Path>,
    repetitions: Option<usize>,
) -> Result<bool> {
    let (_, mut plans) = build_plans(paths, data_dir)?;
    if let Some(n) = repetitions {
        for plan in &mut plans {
            plan.config.repetitions = n;
        }
    }
    let mut passed = true;
    for (i, plan) in plans.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, plans.len(), plan.config.name);
        let summary = runner::run(
            plan,
            &out.join(&plan.config.name),
            false,
            ProgressMode::Auto,
        )?;
        print!(
            "{}",
            runner::summary_table(&plan.config.name, &summary.rows, &summary.claims)
        );
        passed &= summary.passed();
    }
    println!("timed runs: {}", out.display());
    Ok(passed)
}

/// Runs the experiments in `paths` with their instructions counted, into `out/<experiment>`,
/// `jobs` valgrind processes at a time.
pub fn count(
    paths: &[PathBuf],
    out: &Path,
    valgrind: &str,
    jobs: usize,
    data_dir: Option<&Path>,
) -> Result<()> {
    let (files, mut plans) = build_plans(paths, data_dir)?;
    for plan in &mut plans {
        // One warm-up (first-call work: lazy tables, the allocator's first pages), one counted
        // run: counts repeat to within a fraction of a percent, so more runs would only cost
        // valgrind's time.
        plan.config.warmup = 1;
        plan.config.repetitions = 1;
    }
    if callgrind::counting() {
        for plan in &plans {
            runner::run(
                plan,
                &out.join(&plan.config.name),
                false,
                ProgressMode::Lines,
            )?;
        }
        return Ok(());
    }
    for plan in &plans {
        let dir = out.join(&plan.config.name);
        if dir.join(results::RESULTS_PARQUET).exists() {
            bail!(
                "{} already holds results; choose another --out",
                dir.display()
            );
        }
    }
    let dumps = out.join(DUMP_DIR);
    if dumps.exists() {
        std::fs::remove_dir_all(&dumps)
            .with_context(|| format!("removing the stale {}", dumps.display()))?;
    }
    std::fs::create_dir_all(&dumps).with_context(|| format!("creating {}", dumps.display()))?;
    let exe = std::env::current_exe().context("finding parbench's own executable")?;
    let jobs = jobs.clamp(1, plans.len().max(1));
    eprintln!(
        "counting instructions under {valgrind} --tool=callgrind ({} experiment(s), one process each, {jobs} at a time; valgrind runs the counted code ~50x slower)",
        plans.len()
    );
    // One process per experiment: a count must not depend on what ran before it in the same
    // process (glibc's malloc raises its mmap threshold as large blocks are freed, after which
    // zeroed allocations are memset instead of fresh pages: 4% more instructions measured).
    // Valgrind serialises a process's threads onto one core, so `jobs` processes share the
    // machine's cores; each one's output is kept in a log and printed whole when it ends.
    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let failed = first_error.lock().map_or(true, |e| e.is_some());
                if i >= files.len() || failed {
                    break;
                }
                if let Err(e) =
                    count_one(valgrind, &exe, data_dir, &files[i], &plans[i], out, &dumps)
                {
                    if let Ok(mut slot) = first_error.lock() {
                        slot.get_or_insert(e);
                    }
                    break;
                }
            });
        }
    });
    if let Some(e) = first_error
        .into_inner()
        .map_err(|_| anyhow::anyhow!("internal: a counting thread panicked"))?
    {
        return Err(e);
    }
    let counts = callgrind::read_counts(&dumps, DUMP_PREFIX)?;
    for plan in &plans {
        let dir = out.join(&plan.config.name);
        let run = results::load_run(&dir)
            .with_context(|| format!("reading the counted run in {}", dir.display()))?;
        let path = crate::analysis::check::dispatch_path(&run.machine, &plan.config.family)
            .unwrap_or_else(|| "an unknown vector path".to_string());
        let mut rows = run.rows;
        for row in &mut rows {
            let label = count_label(
                &plan.config.name,
                row.point,
                &row.variant,
                plan.config.warmup + row.repetition,
            );
            let n = counts.get(&label).with_context(|| {
                format!("callgrind wrote no count for {label} (was the run counted?)")
            })?;
            row.metrics
                .insert(INSTRUCTIONS_METRIC.to_string(), *n as f64);
            println!(
                "{:<22} {:<28} {:>14} instructions ({})",
                plan.config.name, row.variant, n, path
            );
        }
        results::write_rows(&dir, &rows)?;
    }
    std::fs::remove_dir_all(&dumps).with_context(|| format!("removing {}", dumps.display()))?;
    println!("counted runs: {}", out.display());
    Ok(())
}

const GLIBC_TUNABLES: &str = "GLIBC_TUNABLES";

/// The counted process's glibc tunables: `user`'s, with every thread allocating from one malloc
/// arena. A thread's first allocation otherwise takes an arena that another thread's exit may or
/// may not have freed yet, so the heap a run found, and with it how often `realloc` must copy,
/// changed with the scheduler: the binary embeddings reader's count moved by 2% between
/// unchanged runs (a fresh arena or a reused one), and one arena holds it to 0.5% on a loaded
/// host. Valgrind runs one thread at a time, so the arenas' lock is never contended.
fn one_malloc_arena(user: Option<String>) -> String {
    const ONE_ARENA: &str = "glibc.malloc.arena_max=1";
    match user {
        Some(user) if !user.is_empty() => format!("{user}:{ONE_ARENA}"),
        _ => ONE_ARENA.to_string(),
    }
}

/// Counts one experiment: `file` run by this executable under callgrind, its output kept in a
/// log beside the dumps and printed whole once the process ends (so that processes counted at
/// once do not interleave their lines); a failure shows the log's tail.
fn count_one(
    valgrind: &str,
    exe: &Path,
    data_dir: Option<&Path>,
    file: &Path,
    plan: &plan::Plan,
    out: &Path,
    dumps: &Path,
) -> Result<()> {
    let name = &plan.config.name;
    let log_path = dumps.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .with_context(|| format!("opening {} twice", log_path.display()))?;
    let mut cmd = Command::new(valgrind);
    cmd.arg("--tool=callgrind")
        .arg("--instr-atstart=no")
        .arg(format!(
            "--callgrind-out-file={}",
            dumps.join(format!("{DUMP_PREFIX}-{name}")).display()
        ))
        .arg("--dump-instr=no")
        .arg("--dump-line=no")
        .arg(exe);
    if let Some(d) = data_dir {
        cmd.arg("--data-dir").arg(d);
    }
    cmd.args(["gate", "count"])
        .arg(file)
        .arg("--out")
        .arg(out)
        .env(callgrind::COUNT_ENV, dumps)
        .env(
            GLIBC_TUNABLES,
            one_malloc_arena(std::env::var(GLIBC_TUNABLES).ok()),
        )
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    let status = cmd.status().map_err(|e| {
        anyhow::anyhow!("cannot start `{valgrind}` ({e}): install valgrind (Debian: apt-get install valgrind) or name it with --valgrind")
    })?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    if !status.success() {
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        bail!(
            "the counted run of {} under valgrind failed ({status}); the end of its output:\n{tail}",
            file.display()
        );
    }
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "-- counted {name} ({})", file.display())?;
    stdout.write_all(text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::one_malloc_arena;

    #[test]
    fn the_counted_process_allocates_from_one_arena_and_keeps_the_users_tunables() {
        assert_eq!(one_malloc_arena(None), "glibc.malloc.arena_max=1");
        assert_eq!(
            one_malloc_arena(Some(String::new())),
            "glibc.malloc.arena_max=1"
        );
        assert_eq!(
            one_malloc_arena(Some("glibc.malloc.tcache_count=0".into())),
            "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"
        );
    }
}
