//! `parbench`: run experiments reproducing the papers, plot and check their results, and apply the
//! algorithms to your own data.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use parbench::analysis::{check, claims};
use parbench::exec::machine;
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::plan;
use parbench::families::fusedmm::cli as fusedmm_cmd;
use parbench::families::lda::cli as lda_cmd;
use parbench::families::sinkhorn::cli as wmd_cmd;
use parbench::families::word2vec::cli as w2v_cmd;
use parbench::util::datadir;
use parbench::{families, results};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit code when a claim or an equivalence check fails.
const EXIT_CLAIM_FAILED: u8 = 3;
/// Exit code when `check` finds a performance regression against the baseline.
const EXIT_REGRESSION: u8 = 4;

#[derive(Parser)]
#[command(
    name = "parbench",
    version,
    about = "Reproduce and compare parallel ML kernels: Sinkhorn-WMD (and, as they land, FusedMM, word2vec, LDA)",
    long_about = "parbench runs YAML-described experiments that reproduce the figures and tables of five papers on \
parallel machine-learning kernels, checks that the variants agree numerically, records tidy results with machine \
metadata (results/), draws the figures and evaluates the papers' claims.\n\n\
Quick start:  parbench reproduce --quick     (CI-sized runs of every experiment)\n\
              parbench list                  (families, variants, experiments)\n\
              parbench info                  (this machine's bandwidth and FMA limits)"
)]
struct Cli {
    /// Directory of real datasets (default: $PARBENCH_DATA, else ../shared/data if present).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one experiment file: sweep, equivalence, results, figures, claims, summary.
    Run {
        /// Experiment file (experiments/<family>/*.yaml).
        experiment: PathBuf,
        /// Use the file's `quick` overrides (CI-sized).
        #[arg(long)]
        quick: bool,
        /// Run directory to write (default results/<name>-<timestamp>).
        #[arg(long, value_name = "DIR", conflicts_with = "resume")]
        out: Option<PathBuf>,
        /// Continue an interrupted run in RUN_DIR, skipping points already recorded.
        #[arg(long, value_name = "RUN_DIR")]
        resume: Option<PathBuf>,
        /// Plain progress lines instead of a progress bar.
        #[arg(long)]
        no_progress_bar: bool,
    },
    /// Run every experiment (of the given families), results under one directory, figures also
    /// copied to figures/.
    Reproduce {
        /// Families to run (default: all).
        families: Vec<String>,
        #[arg(long)]
        quick: bool,
        /// Directory for the runs (default results/reproduce-<timestamp>).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Where the experiment files are.
        #[arg(long, value_name = "DIR", default_value = "experiments")]
        experiments: PathBuf,
    },
    /// Redraw the figures of a run (or of every run under a reproduce directory) from stored results.
    Plot {
        run_dir: PathBuf,
    },
    /// Re-evaluate the claims of stored runs and compare them with a baseline; exit 3 on a failed
    /// claim, 4 on a regression.
    Check {
        /// A run directory, or a reproduce directory holding several.
        run_dir: PathBuf,
        /// Baseline JSON to compare against (e.g. results/baselines/quick.json).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// Write the runs' medians as a new baseline to FILE instead of comparing.
        #[arg(long, value_name = "FILE")]
        write_baseline: Option<PathBuf>,
        /// A variant's time relative to the reference variant may grow by this factor before it
        /// counts as a regression.
        #[arg(long, default_value_t = 1.5)]
        max_slowdown: f64,
        /// Compare relative times only where every median involved is at least this many
        /// seconds (shorter runs are scheduling noise on a shared machine).
        #[arg(long, default_value_t = check::DEFAULT_MIN_TIME_S)]
        min_time: f64,
    },
    /// List families, their variants and parameters, and the experiment files.
    List {
        #[arg(long, value_name = "DIR", default_value = "experiments")]
        experiments: PathBuf,
    },
    /// Machine metadata and measured limits: STREAM-triad bandwidth and peak FMA throughput.
    Info {
        /// Shorter measurements.
        #[arg(long)]
        quick: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    // No doc comment: it would replace the about/long_about that `WmdArgs` carries.
    Wmd(wmd_cmd::WmdArgs),
    /// One FusedMM/SDDMM/SpMM kernel on one distributed algorithm, with exact communication counts.
    Fusedmm(fusedmm_cmd::FusedmmArgs),
    /// Latent Dirichlet allocation on your corpus: train, print topics, write the tables.
    #[command(subcommand)]
    Lda(lda_cmd::LdaCommand),
    /// word2vec on your corpus: train, evaluate, nearest neighbours.
    #[command(subcommand)]
    W2v(w2v_cmd::W2vCommand),
    /// (internal) One point of an experiment on every process of an MPI job; the harness starts
    /// it through the experiment's `launcher` for `backend: mpi` points.
    #[command(hide = true)]
    Launched {
        /// The run directory's copy of the experiment file.
        experiment: PathBuf,
        #[arg(long)]
        quick: bool,
        /// Index of the point in the expanded sweep.
        #[arg(long)]
        point: usize,
        #[arg(long)]
        variant: String,
        /// Runs to make (warm-ups first); rank 0 prints one measurement line per run.
        #[arg(long)]
        runs: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn timestamp_dir(prefix: &str) -> PathBuf {
    let ts = results::now_rfc3339()
        .replace([':', '-'], "")
        .replace('T', "-");
    let ts = ts
        .trim_end_matches('Z')
        .split('.')
        .next()
        .unwrap_or("run")
        .to_string();
    PathBuf::from("results").join(format!("{prefix}-{ts}"))
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let data_dir = datadir::resolve(cli.data_dir.as_deref());
    match cli.command {
        Command::Run {
            experiment,
            quick,
            out,
            resume,
            no_progress_bar,
        } => {
            let plan = plan::build(&experiment, quick, data_dir.as_deref())?;
            let (dir, resuming) = match (resume, out) {
                (Some(r), _) => (r, true),
                (None, Some(o)) => (o, false),
                (None, None) => (timestamp_dir(&plan.config.name), false),
            };
            let mode = if no_progress_bar {
                ProgressMode::Lines
            } else {
                ProgressMode::Auto
            };
            let summary = runner::run(&plan, &dir, resuming, mode)?;
            print!(
                "{}",
                runner::summary_table(&plan.config.name, &summary.rows, &summary.claims)
            );
            println!("results: {}", summary.run_dir.display());
            Ok(if summary.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_CLAIM_FAILED)
            })
        }
        Command::Reproduce {
            families: wanted,
            quick,
            out,
            experiments,
        } => reproduce(&wanted, quick, out, &experiments, data_dir.as_deref()),
        Command::Plot { run_dir } => {
            for dir in run_dirs(&run_dir)? {
                let run = results::load_run(&dir)?;
                let figs = parbench::analysis::plot::draw_run_figures(
                    &run.config.figures,
                    &run.rows,
                    &dir,
                )?;
                for f in figs {
                    println!("{}", f.display());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            run_dir,
            baseline,
            write_baseline,
            max_slowdown,
            min_time,
        } => check_runs(
            &run_dir,
            baseline.as_deref(),
            write_baseline.as_deref(),
            &check::CheckOptions {
                max_slowdown,
                min_time_s: min_time,
                ..check::CheckOptions::default()
            },
        ),
        Command::List { experiments } => {
            list(&experiments);
            Ok(ExitCode::SUCCESS)
        }
        Command::Info { quick, json } => {
            let info = machine::collect(quick);
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                machine::print_info(&info);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Wmd(args) => {
            wmd_cmd::run(&args, data_dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Fusedmm(args) => {
            fusedmm_cmd::run(&args, data_dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Lda(cmd) => {
            lda_cmd::run(&cmd, data_dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::W2v(cmd) => {
            w2v_cmd::run(&cmd, data_dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Launched {
            experiment,
            quick,
            point,
            variant,
            runs,
        } => {
            parbench::exec::launch::launched(&parbench::exec::launch::LaunchedArgs {
                experiment,
                quick,
                point,
                variant,
                runs,
                data_dir,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Experiment files under `dir`, sorted, grouped by family folder.
fn experiment_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the experiments directory {}", dir.display()))?;
    for family in entries {
        let family = family?.path();
        if family.is_dir() {
            for f in std::fs::read_dir(&family)? {
                let f = f?.path();
                if f.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    files.push(f);
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

fn reproduce(
    wanted: &[String],
    quick: bool,
    out: Option<PathBuf>,
    experiments: &Path,
    data_dir: Option<&Path>,
) -> Result<ExitCode> {
    for w in wanted {
        if families::find(w).is_none() {
            let names: Vec<&str> = families::registry().iter().map(|f| f.name()).collect();
            bail!("unknown family {w}; known families: {}", names.join(", "));
        }
    }
    // Validate every plan before running any, so a typo in the last file is found at once.
    let mut plans = Vec::new();
    for file in experiment_files(experiments)? {
        let config = parbench::experiment::config::load(&file, quick)?;
        if !wanted.is_empty() && !wanted.contains(&config.family) {
            continue;
        }
        if let (parbench::experiment::config::DataSource::Dataset, Some(name)) =
            (config.data.source, config.data.file.as_deref())
        {
            if !data_dir.is_some_and(|d| d.join(name).exists()) {
                eprintln!(
                    "skipping {}: it needs the dataset {name}, not found in {} (see MANIFEST.md of the data dir; set --data-dir or PARBENCH_DATA)",
                    config.name,
                    data_dir.map_or("any data dir".to_string(), |d| d.display().to_string())
                );
                continue;
            }
        }
        let plan = plan::build(&file, quick, data_dir)?;
        let unavailable = plan.config.launcher.as_ref().and_then(|l| {
            plan.points
                .iter()
                .any(plan::is_mpi_point)
                .then(|| parbench::exec::launch::unavailable(l))
                .flatten()
        });
        if let Some(why) = unavailable {
            eprintln!(
                "skipping {}: it runs points across MPI processes, and {why}",
                plan.config.name
            );
            continue;
        }
        plans.push(plan);
    }
    if plans.is_empty() {
        bail!("no experiment matched under {}", experiments.display());
    }
    let root = out.unwrap_or_else(|| {
        timestamp_dir(if quick {
            "reproduce-quick"
        } else {
            "reproduce"
        })
    });
    let mut all_passed = true;
    for (i, plan) in plans.iter().enumerate() {
        eprintln!(
            "[{}/{}] {} ({} of {})",
            i + 1,
            plans.len(),
            plan.config.name,
            plan.config.reproduces,
            plan.config.paper
        );
        let dir = root.join(&plan.config.name);
        let resuming = dir.join(results::RESULTS_PARQUET).exists();
        let summary = runner::run(plan, &dir, resuming, ProgressMode::Auto)?;
        print!(
            "{}",
            runner::summary_table(&plan.config.name, &summary.rows, &summary.claims)
        );
        all_passed &= summary.passed();
        let figures_dir = PathBuf::from("figures").join(&plan.config.name);
        std::fs::create_dir_all(&figures_dir)?;
        for f in &summary.figures {
            if let Some(name) = f.file_name() {
                let bytes =
                    std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
                results::write_atomic(&figures_dir.join(name), &bytes)?;
            }
        }
    }
    println!("results: {}  figures: figures/", root.display());
    Ok(if all_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CLAIM_FAILED)
    })
}

/// The run directories under `dir`: itself if it holds a run, else its subdirectories that do.
fn run_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.join(results::META_JSON).exists() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut dirs = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.join(results::META_JSON).exists() {
            dirs.push(p);
        }
    }
    dirs.sort();
    if dirs.is_empty() {
        bail!(
            "{} holds no run (no meta.json in it or its subdirectories)",
            dir.display()
        );
    }
    Ok(dirs)
}

fn check_runs(
    run_dir: &Path,
    baseline: Option<&Path>,
    write_baseline: Option<&Path>,
    options: &check::CheckOptions,
) -> Result<ExitCode> {
    let dirs = run_dirs(run_dir)?;
    if let Some(path) = write_baseline {
        let mut all = check::Baseline::default();
        for dir in &dirs {
            let run = results::load_run(dir)?;
            all.merge(check::make_baseline(&run.rows, &run.config));
        }
        all.save(path)?;
        println!("baseline written to {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let base = match baseline {
        Some(p) => Some(check::Baseline::load(p)?),
        None => None,
    };
    let (mut claims_ok, mut perf_ok) = (true, true);
    for dir in &dirs {
        let run = results::load_run(dir)?;
        let report = check::check_with(&run.rows, &run.config, base.as_ref(), options);
        println!("== {} ({}) ==", run.config.name, dir.display());
        print_claims(&report.claims);
        for w in &report.warnings {
            println!("  warning: {w}");
        }
        for r in &report.regressions {
            println!("  REGRESSION: {r}");
        }
        for n in &report.notes {
            println!("  note: {n}");
        }
        claims_ok &= report.claims.iter().all(|c| c.passed);
        perf_ok &= report.regressions.is_empty();
    }
    Ok(if !claims_ok {
        ExitCode::from(EXIT_CLAIM_FAILED)
    } else if !perf_ok {
        ExitCode::from(EXIT_REGRESSION)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_claims(outcomes: &[claims::ClaimOutcome]) {
    for c in outcomes {
        println!(
            "  [{}] {}: {}",
            if c.passed { "PASS" } else { "FAIL" },
            c.name,
            c.detail
        );
    }
}

fn list(experiments: &Path) {
    for f in families::registry() {
        println!("family {}", f.name());
        println!("  variants: {}", f.variants().join(", "));
        println!("  parameters:");
        for p in f.params() {
            let kind = match &p.choices {
                Some(c) => c.join("|"),
                None => p.kind.to_string(),
            };
            println!(
                "    {:<20} {:<24} {} (default {})",
                p.name, kind, p.help, p.default
            );
        }
        for (file, what) in f.datasets() {
            println!("  dataset {file}: {what}");
        }
    }
    match experiment_files(experiments) {
        Ok(files) => {
            println!("experiments ({}):", experiments.display());
            for file in files {
                match parbench::experiment::config::load(&file, false) {
                    Ok(c) => println!(
                        "  {:<52} {:<10} {} — {}",
                        file.display(),
                        c.family,
                        c.reproduces,
                        c.description
                    ),
                    Err(e) => println!("  {:<52} (invalid: {e})", file.display()),
                }
            }
        }
        Err(e) => println!("no experiments listed: {e:#}"),
    }
}
