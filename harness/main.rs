//! `parbench`: run experiments reproducing the papers, plot and check their results, and apply the
//! algorithms to your own data.

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
use parbench::analysis::{check, claims};
use parbench::exec::machine;
use parbench::exec::runner::{self, ProgressMode};
use parbench::experiment::{compare, plan};
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
/// Exit code when `check` finds baseline entries it could not gate (missing from the run, or
/// too short to time without an exemption).
const EXIT_NOT_GATED: u8 = 5;

/// `parbench --version`: the crate's version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PARBENCH_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "parbench",
    version = VERSION,
    about = "Reproduce and compare parallel ML kernels: Sinkhorn-WMD, FusedMM, word2vec and LDA",
    long_about = "parbench runs YAML-described experiments that reproduce the figures and tables of five papers on \
parallel machine-learning kernels, checks that the variants agree numerically, records tidy results with machine \
metadata (results/), draws the figures and evaluates the papers' claims.\n\n\
Quick start:  parbench reproduce --quick     (CI-sized runs of every experiment)\n\
              parbench list                  (families, variants, experiments)\n\
              parbench compare sinkhorn --variants fused-par,doc-major --sweep threads=1,2\n\
                                             (a head-to-head without writing YAML)\n\
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
        /// Families to run (default: all), or `peers` for every experiment that runs peers
        /// (an error when they are not installed; a run of everything skips those
        /// experiments with a note when peers were never installed).
        families: Vec<String>,
        #[arg(long)]
        quick: bool,
        /// Directory for the runs (default results/reproduce-<timestamp>).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Where the experiment files are.
        #[arg(long, value_name = "DIR", default_value = "experiments")]
        experiments: PathBuf,
        /// Show the regression gate's verdict against this baseline in the report page
        /// (e.g. results/baselines/quick.json for a quick run).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// The gate's thresholds on the report page.
        #[command(flatten)]
        thresholds: GateThresholds,
    },
    // No doc comment: it would replace the about/long_about that `CompareArgs` carries.
    Compare(compare::CompareArgs),
    /// Write the runs as one self-contained HTML page (claims, figures, tables, machine): to open, attach or publish.
    Report {
        /// Run directories, or reproduce directories holding several.
        #[arg(required = true)]
        run_dirs: Vec<PathBuf>,
        /// The page to write (default RUN_DIR/report.html for one directory).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Also show the regression gate's verdict against this baseline.
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        #[command(flatten)]
        thresholds: GateThresholds,
    },
    /// Redraw the figures of a run (or of every run under a reproduce directory) from stored results.
    Plot {
        run_dir: PathBuf,
    },
    /// Re-evaluate the claims of stored runs and gate them against a baseline: exact counters,
    /// instruction counts (runs of `parbench gate count`) and calibrated times, every variant.
    /// Exit 3 on a failed claim, 4 on a regression, 5 when a baseline entry could not be gated.
    #[command(
        long_about = "Re-evaluate the claims of stored runs and gate them against a baseline.\n\n\
Three tiers, per variant, reference variants included: the family's exact counters (words and messages \
sent, flops, model bytes, tokens) must not change; instruction counts (in runs made by `parbench gate \
count`) may grow by at most --max-instruction-growth; times must not grow. Each ratio (now / baseline) is a bootstrap interval of a ratio of medians, \
taken two ways: the time per calibration (a fixed kernel timed before each point's runs), against the \
baseline's for this kind of machine (CPU model, ISA extensions, CPUs), and the same-run ratio (a \
variant's time over its point's reference variant's in the same repetition, the reference's over the \
median of the point's other variants' in that repetition), which a run slower throughout, or for a \
while, does not move. Runs of one experiment are pooled, each run's repetitions paired within it. A variant regressed when its same-run \
ratio's lower end is above --max-slowdown and its time per calibration is up 1.2x or more (slower \
itself, not its reference faster), when its time per calibration's lower end is above \
--max-uniform-slowdown (everything slower), or, alone at its point, when its time per calibration's \
lower end is above --max-slowdown. On a kind the baseline lacks, only same-run ratios are compared. Every baseline entry must be in the runs and long enough to time unless its experiment says \
why not (`gate: {untimed: ..., optional: ...}`).\n\n\
Exit codes: 0 all gated and passed; 3 a claim failed; 4 a regression; 5 an entry not gated; 1 an error \
(unreadable run or baseline).\n\n\
Accept an intended change by regenerating the baseline in the same commit: `parbench check RUN... \
--write-baseline FILE` updates FILE with the runs' counts and this machine's times, keeping other \
machines' times."
    )]
    Check {
        /// Run directories, or reproduce directories holding several; runs of one experiment
        /// are pooled (more repetitions, a truer spread).
        #[arg(required = true)]
        run_dirs: Vec<PathBuf>,
        /// Baseline JSON to compare against (e.g. results/baselines/quick.json).
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// Record the runs into FILE (created, or updated keeping other machines' times)
        /// instead of comparing.
        #[arg(long, value_name = "FILE", conflicts_with = "baseline")]
        write_baseline: Option<PathBuf>,
        #[command(flatten)]
        thresholds: GateThresholds,
        /// Print the verdicts as JSON (per run: claims, regressions, gaps, notes, coverage).
        #[arg(long)]
        json: bool,
    },
    /// The regression gate's deterministic tier: run the gate workloads with each run's
    /// instructions counted under valgrind's callgrind.
    #[command(subcommand)]
    Gate(GateCommand),
    /// List families, their variants and parameters, and the experiment files.
    List {
        #[arg(long, value_name = "DIR", default_value = "experiments")]
        experiments: PathBuf,
        /// Print JSON (families with variants, parameters and datasets; experiment files).
        #[arg(long)]
        json: bool,
    },
    /// Peers, the programs users pick instead of parbench (gensim, POT, the `lda` package,
    /// tomotopy, scipy), run as variants beside parbench's: install them, list them.
    #[command(subcommand)]
    Peers(parbench::peers::cli::PeersCommand),
    /// The five papers' claims (docs/paper_claims.yaml): each one's source and number, and
    /// whether parbench reproduces it at that number (with the experiment's claim and its last
    /// measured value), asserts it more weakly, lacks it, or cannot test it here, and why.
    /// `--verify` holds the registry to the experiments and the quick baseline.
    Claims(parbench::analysis::registry::ClaimsArgs),
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
    // No doc comment: it would replace the about/long_about that `HistoryArgs` carries.
    History(parbench::analysis::history::HistoryArgs),
    /// One FusedMM/SDDMM/SpMM kernel on one distributed algorithm, with exact communication counts.
    Fusedmm(fusedmm_cmd::FusedmmArgs),
    /// Latent Dirichlet allocation on your corpus: train, print topics, write the tables.
    #[command(subcommand)]
    Lda(lda_cmd::LdaCommand),
    /// word2vec on your corpus: train, evaluate, nearest neighbours.
    #[command(subcommand)]
    W2v(w2v_cmd::W2vCommand),
    /// Shell completions (bash, zsh, fish, elvish, powershell) on stdout, e.g.
    /// `parbench completions bash > ~/.local/share/bash-completion/completions/parbench`.
    Completions {
        shell: clap_complete::Shell,
    },
    /// Man pages generated from the same definitions as --help: OUT/parbench.1 and one
    /// parbench-COMMAND.1 per command (view one with `man -l OUT/parbench.1`).
    Man {
        /// Directory to write the pages into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// (internal) Runs a parbench variant as a peer on a request's files (the peer protocol of
    /// docs/peers.md), so its whole-process time stands beside the other peers'.
    #[command(hide = true)]
    PeerServe {
        /// The variant of the request's family.
        #[arg(long)]
        variant: String,
        /// Keep the parsed input (embeddings) in this folder, and load it from there when the
        /// files have not changed.
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// The request file.
        request: PathBuf,
    },
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

/// The gate's thresholds, as `check`, `report` and `reproduce` take them.
#[derive(clap::Args, Clone, Copy, Debug)]
struct GateThresholds {
    /// A variant's same-run time ratio (to its point's reference; the reference's to the
    /// others') now over the baseline's is a regression when the lower end of its interval
    /// exceeds this factor and its time per calibration is up by 1.2x or more; so is the time
    /// per calibration of a variant alone at its point.
    #[arg(long, default_value_t = check::DEFAULT_MAX_SLOWDOWN)]
    max_slowdown: f64,
    /// The time per calibration (now / baseline) of any variant is a regression when the lower
    /// end of its interval exceeds this factor (everything slower). Default: twice
    /// --max-slowdown.
    #[arg(long)]
    max_uniform_slowdown: Option<f64>,
    /// Confidence of the time ratio's bootstrap interval.
    #[arg(long, default_value_t = check::DEFAULT_CONFIDENCE)]
    confidence: f64,
    /// Allowed growth of an instruction count, as a fraction (0.02 = 2%).
    #[arg(long, default_value_t = check::DEFAULT_MAX_INSTRUCTION_GROWTH)]
    max_instruction_growth: f64,
    /// Entries whose median time is shorter are not timed (and fail unless exempt).
    #[arg(long, default_value_t = check::DEFAULT_MIN_TIME_S)]
    min_time: f64,
}

impl GateThresholds {
    /// The check's options, or why the flags are out of range.
    fn options(self) -> Result<check::CheckOptions> {
        if !(self.max_slowdown >= 1.0 && (0.5..1.0).contains(&self.confidence)) {
            bail!("--max-slowdown must be at least 1 and --confidence in [0.5, 1)");
        }
        if !(0.0..1.0).contains(&self.max_instruction_growth) || self.min_time < 0.0 {
            bail!("--max-instruction-growth must be in [0, 1) and --min-time not negative");
        }
        let max_uniform_slowdown = self
            .max_uniform_slowdown
            .unwrap_or(check::UNIFORM_SLOWDOWN_FACTOR * self.max_slowdown);
        if max_uniform_slowdown.is_nan() || max_uniform_slowdown < self.max_slowdown {
            bail!(
                "--max-uniform-slowdown ({max_uniform_slowdown}) must be at least --max-slowdown ({})",
                self.max_slowdown
            );
        }
        Ok(check::CheckOptions {
            max_slowdown: self.max_slowdown,
            max_uniform_slowdown,
            confidence: self.confidence,
            max_instruction_growth: self.max_instruction_growth,
            min_time_s: self.min_time,
        })
    }
}

/// The regression gate's commands.
#[derive(Subcommand)]
enum GateCommand {
    /// Run gate workloads once each (after a warm-up) with every run's instructions counted
    /// under valgrind's callgrind, into OUT/<experiment>; compare them with `parbench check
    /// OUT --baseline FILE`. Only the variants' own runs are counted (not parsing or
    /// generation). Valgrind presents a CPU without AVX-512, so the kernels take their AVX2
    /// path there; the path counted is recorded with the counts.
    Count {
        /// Experiment files or directories of them.
        #[arg(default_value = "experiments/gate")]
        experiments: Vec<PathBuf>,
        /// Directory for the counted runs.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The valgrind program.
        #[arg(long, default_value = "valgrind")]
        valgrind: String,
        /// Experiments counted at once, one valgrind process each (valgrind runs a process on
        /// one core, however many threads it starts; counts do not depend on this). Default:
        /// the machine's cores.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        jobs: Option<u32>,
    },
    /// Run gate workloads natively, repetitions of the variants interleaved and each followed
    /// by a calibration, into OUT/<experiment>; compare them with `parbench check OUT
    /// --baseline FILE` (the timing tier).
    Time {
        /// Experiment files or directories of them.
        #[arg(default_value = "experiments/gate")]
        experiments: Vec<PathBuf>,
        /// Directory for the runs.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Repetitions of every variant in every experiment, in place of each experiment's
        /// own (7 to 15): fewer make a quicker run whose verdicts rest on less evidence, so
        /// they see only larger regressions.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        repetitions: Option<u32>,
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
            baseline,
            thresholds,
        } => reproduce(
            &wanted,
            quick,
            out,
            &experiments,
            baseline.as_deref(),
            &thresholds.options()?,
            data_dir.as_deref(),
        ),
        Command::Compare(args) => {
            let plan = compare::build_plan(&args, data_dir.as_deref())?;
            let dir = args
                .out
                .clone()
                .unwrap_or_else(|| timestamp_dir(&compare::experiment_name(&args.family)));
            Ok(if compare::run(&args, &plan, &dir)? {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_CLAIM_FAILED)
            })
        }
        Command::Report {
            run_dirs: roots,
            out,
            baseline,
            thresholds,
        } => {
            let options = thresholds.options()?;
            let out = match (out, &roots[..]) {
                (Some(o), _) => o,
                (None, [one]) => one.join(REPORT_HTML),
                (None, _) => bail!("several directories given: name the page with --out FILE"),
            };
            let mut dirs = Vec::new();
            for root in &roots {
                dirs.extend(run_dirs(root)?);
            }
            let base = baseline.as_deref().map(check::Baseline::load).transpose()?;
            let (n, ok) = parbench::analysis::report::write(&dirs, base.as_ref(), &options, &out)?;
            println!(
                "report: {} ({n} run(s){})",
                out.display(),
                if ok {
                    ""
                } else {
                    "; some claims or gate checks failed"
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "parbench",
                &mut std::io::stdout(),
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out } => {
            let n = write_man_pages(&out)?;
            println!("{n} man pages in {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
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
            run_dirs,
            baseline,
            write_baseline,
            thresholds,
            json,
        } => {
            let options = thresholds.options()?;
            check_runs(
                &run_dirs,
                baseline.as_deref(),
                write_baseline.as_deref(),
                &options,
                json,
            )
        }
        Command::Gate(GateCommand::Count {
            experiments,
            out,
            valgrind,
            jobs,
        }) => {
            let jobs = jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, |n| n.get()),
                |j| j as usize,
            );
            parbench::exec::gate::count(&experiments, &out, &valgrind, jobs, data_dir.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::History(args) => {
            print!("{}", parbench::analysis::history::run(&args)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Claims(args) => Ok(if parbench::analysis::registry::run(&args)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }),
        Command::Gate(GateCommand::Time {
            experiments,
            out,
            repetitions,
        }) => Ok(
            if parbench::exec::gate::time(
                &experiments,
                &out,
                data_dir.as_deref(),
                repetitions.map(|n| n as usize),
            )? {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_CLAIM_FAILED)
            },
        ),
        Command::List { experiments, json } => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&list_json(&experiments))?
                );
            } else {
                list(&experiments);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Peers(cmd) => parbench::peers::cli::run(cmd),
        Command::PeerServe {
            variant,
            cache,
            request,
        } => {
            let request = parbench::peers::protocol::Request::read(&request)?;
            let family = families::find(&request.family).with_context(|| {
                format!(
                    "the request names no family of parbench: {}",
                    request.family
                )
            })?;
            family.serve_peer(
                &variant,
                &request,
                &parbench::family::ServeOptions { cache },
            )?;
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

/// `parbench reproduce peers`: the experiments that run peers, whatever their family.
const PEERS_GROUP: &str = "peers";

fn reproduce(
    wanted: &[String],
    quick: bool,
    out: Option<PathBuf>,
    experiments: &Path,
    baseline: Option<&Path>,
    gate_options: &check::CheckOptions,
    data_dir: Option<&Path>,
) -> Result<ExitCode> {
    // Read before anything runs: a bad path fails now, not after the last experiment.
    let baseline = baseline.map(check::Baseline::load).transpose()?;
    for w in wanted {
        if w != PEERS_GROUP && families::find(w).is_none() {
            let names: Vec<&str> = families::registry().iter().map(|f| f.name()).collect();
            bail!(
                "unknown family {w}; known families: {}, or `{PEERS_GROUP}` for the experiments that run peers",
                names.join(", ")
            );
        }
    }
    let peers_asked = wanted.iter().any(|w| w == PEERS_GROUP);
    let never_installed = parbench::peers::install::cache_dir().is_ok_and(|d| {
        parbench::peers::install::availability(&d)
            == parbench::peers::install::Availability::NeverInstalled
    });
    let mut skipped_for_peers = Vec::new();
    // Validate every plan before running any, so a typo in the last file is found at once.
    let mut plans = Vec::new();
    for file in experiment_files(experiments)? {
        let config = parbench::experiment::config::load(&file, quick)?;
        // The one rule of what a peer is, as the plan will resolve it.
        let dir = file.parent().unwrap_or(Path::new("."));
        let runs_peers = config
            .variants
            .iter()
            .any(|v| parbench::peers::resolve(v, &config.family, &config.peers, dir).is_some());
        let selected =
            wanted.is_empty() || wanted.contains(&config.family) || (peers_asked && runs_peers);
        if !selected {
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
        // Peers never installed: skipped with a note unless asked for by name; installed
        // for other pins: an error either way (the runner says how to fix it).
        if let Some(why) = parbench::peers::not_ready(plan.peers.values()) {
            if peers_asked || !never_installed {
                bail!("{}: {why}", plan.config.name);
            }
            eprintln!("skipping {}: {why}", plan.config.name);
            skipped_for_peers.push(plan.config.name.clone());
            continue;
        }
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
    // Every failed claim again at the end, with its experiment: a long reproduction's log is read
    // from its tail (CI keeps only the last lines), far below the table that first printed it.
    let mut failed: Vec<String> = Vec::new();
    // Earlier runs of the same size under the results folder tell how long the rest will take.
    let recorded = parbench::exec::eta::recorded_durations(
        root.parent().unwrap_or(Path::new("results")),
        quick,
    );
    for (i, plan) in plans.iter().enumerate() {
        let left: Vec<&str> = plans[i..].iter().map(|p| p.config.name.as_str()).collect();
        let eta = parbench::exec::eta::estimate(&left, &recorded)
            .map(|(s, known)| format!("; {}", parbench::exec::eta::describe(s, known, left.len())))
            .unwrap_or_default();
        eprintln!(
            "[{}/{}] {} ({} of {}; {} points{eta})",
            i + 1,
            plans.len(),
            plan.config.name,
            plan.config.reproduces,
            plan.config.paper,
            plan.points.len()
        );
        let dir = root.join(&plan.config.name);
        let resuming = dir.join(results::RESULTS_PARQUET).exists();
        let summary = runner::run(plan, &dir, resuming, ProgressMode::Auto)?;
        print!(
            "{}",
            runner::summary_table(&plan.config.name, &summary.rows, &summary.claims)
        );
        failed.extend(failed_claims(&plan.config.name, &summary.claims));
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
    let dirs: Vec<PathBuf> = plans.iter().map(|p| root.join(&p.config.name)).collect();
    let page = root.join(REPORT_HTML);
    parbench::analysis::report::write(&dirs, baseline.as_ref(), gate_options, &page)?;
    if !skipped_for_peers.is_empty() {
        println!(
            "skipped {} experiment(s) that run peers, never installed here ({}): `parbench peers install`, then `parbench reproduce {PEERS_GROUP}`",
            skipped_for_peers.len(),
            skipped_for_peers.join(", ")
        );
    }
    println!("results: {}  figures: figures/", root.display());
    println!("report: {} (open it in a browser)", page.display());
    if !failed.is_empty() {
        println!("{} claim(s) failed:", failed.len());
        for f in &failed {
            println!("  {f}");
        }
    }
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CLAIM_FAILED)
    })
}

/// The page `parbench report` and `reproduce` write into a run or reproduce directory.
const REPORT_HTML: &str = "report.html";

use parbench::experiment::experiment_files;
use results::run_dirs;

fn check_runs(
    roots: &[PathBuf],
    baseline: Option<&Path>,
    write_baseline: Option<&Path>,
    options: &check::CheckOptions,
    json: bool,
) -> Result<ExitCode> {
    // Runs of one experiment (from several roots) are pooled, counted runs (valgrind's, whose
    // times mean nothing) apart from timed ones.
    let mut runs: Vec<results::StoredRun> = Vec::new();
    for root in roots {
        for dir in run_dirs(root)? {
            let mut run = results::load_run(&dir)?;
            check::use_run_calibration(&mut run.rows);
            let counted = check::is_counted(&run.rows);
            match runs
                .iter_mut()
                .find(|r| r.config.name == run.config.name && check::is_counted(&r.rows) == counted)
            {
                Some(first) => check::pool_runs(&mut first.rows, run.rows),
                None => runs.push(run),
            }
        }
    }
    if let Some(path) = write_baseline {
        let mut all = if path.exists() {
            check::Baseline::load(path)?
        } else {
            check::Baseline::default()
        };
        for run in &runs {
            all.update(check::make_baseline(&run.rows, &run.config, &run.machine));
        }
        all.save(path)?;
        let mut names: Vec<&str> = runs.iter().map(|r| r.config.name.as_str()).collect();
        names.dedup();
        println!(
            "baseline {} updated with {} experiment(s) from {} run group(s) (counted and timed runs apart)",
            path.display(),
            names.len(),
            runs.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let base = match baseline {
        Some(p) => Some(check::Baseline::load(p)?),
        None => None,
    };
    let (mut claims_ok, mut perf_ok, mut gated_ok) = (true, true, true);
    // With --json, everything printed goes into one document at the end.
    let (mut json_runs, mut json_notes, mut json_gaps) = (Vec::new(), Vec::new(), Vec::new());
    let mut coverage = check::Coverage::default();
    // Every failing line again at the end, with its experiment: CI keeps a long check's tail,
    // and the one regression among hundreds of verdicts would otherwise scroll out of it.
    let mut recap: Vec<String> = Vec::new();
    for run in &runs {
        let report = check::check(
            &check::RunView {
                rows: &run.rows,
                config: &run.config,
                machine: &run.machine,
            },
            base.as_ref(),
            options,
        );
        if json {
            json_runs.push(serde_json::json!({
                "experiment": run.config.name,
                "dir": run.dir.display().to_string(),
                "claims": report.claims.iter().map(|c| serde_json::json!({
                    "name": c.name, "passed": c.passed, "detail": c.detail,
                })).collect::<Vec<_>>(),
                "regressions": report.regressions,
                "not_gated": report.gaps,
                "notes": report.notes,
                "coverage": base.is_some().then(|| coverage_json(&report.coverage)),
            }));
        } else {
            println!("== {} ({}) ==", run.config.name, run.dir.display());
            print_claims(&report.claims);
            for r in &report.regressions {
                println!("  REGRESSION: {r}");
            }
            for g in &report.gaps {
                println!("  NOT GATED: {g}");
            }
            for n in &report.notes {
                println!("  note: {n}");
            }
            if base.is_some() {
                println!("  {}", report.coverage);
            }
        }
        let name = &run.config.name;
        recap.extend(failed_claims(name, &report.claims));
        recap.extend(
            report
                .regressions
                .iter()
                .map(|r| format!("REGRESSION {name}: {r}")),
        );
        recap.extend(report.gaps.iter().map(|g| format!("NOT GATED {name}: {g}")));
        coverage.add(&report.coverage);
        claims_ok &= report.claims_passed();
        perf_ok &= report.regressions.is_empty();
        gated_ok &= report.gaps.is_empty();
    }
    if let Some(base) = &base {
        for name in base.experiments.keys() {
            if runs.iter().any(|r| &r.config.name == name) {
                continue;
            }
            match check::missing_experiment(base, name) {
                Some(Ok(note)) if json => json_notes.push(note),
                Some(Ok(note)) => println!("note: {note}"),
                Some(Err(gap)) => {
                    if json {
                        json_gaps.push(gap);
                    } else {
                        println!("NOT GATED: {gap}");
                        recap.push(format!("NOT GATED {gap}"));
                    }
                    let entries: usize = base.experiments[name]
                        .points
                        .values()
                        .map(|v| v.len())
                        .sum();
                    coverage.entries += entries;
                    gated_ok = false;
                }
                None => {}
            }
        }
        if !json {
            println!(
                "gate: {coverage}; time regression when the {}% interval's lower end exceeds {}x (same-run ratio, the time per calibration up 1.2x or more) or {}x (time per calibration), instructions +{}%, counters exact",
                claims::fmt_num(100.0 * options.confidence),
                options.max_slowdown,
                options.max_uniform_slowdown,
                claims::fmt_num(100.0 * options.max_instruction_growth)
            );
        }
    }
    if !json && !recap.is_empty() {
        println!("{} failing verdict(s):", recap.len());
        for line in &recap {
            println!("  {line}");
        }
    }
    let code = if !claims_ok {
        EXIT_CLAIM_FAILED
    } else if !perf_ok {
        EXIT_REGRESSION
    } else if !gated_ok {
        EXIT_NOT_GATED
    } else {
        0
    };
    if json {
        let doc = serde_json::json!({
            "runs": json_runs,
            "not_gated": json_gaps,
            "notes": json_notes,
            "coverage": base.is_some().then(|| coverage_json(&coverage)),
            "thresholds": {
                "max_slowdown": options.max_slowdown,
                "max_uniform_slowdown": options.max_uniform_slowdown,
                "confidence": options.confidence,
                "max_instruction_growth": options.max_instruction_growth,
                "min_time_s": options.min_time_s,
            },
            "exit_code": code,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(ExitCode::from(code))
}

/// A coverage count as `check --json` prints it.
fn coverage_json(c: &check::Coverage) -> serde_json::Value {
    serde_json::json!({
        "entries": c.entries,
        "gated": c.gated,
        "timed": c.timed,
        "timed_by_same_run_ratio_only": c.timed_by_ratio,
        "exact_counters": c.counted,
        "instructions": c.instructions,
    })
}

/// The failed claims of `experiment`, a line each, as a long command's closing recap lists
/// them (`reproduce`'s and `check`'s).
fn failed_claims<'a>(
    experiment: &'a str,
    outcomes: &'a [claims::ClaimOutcome],
) -> impl Iterator<Item = String> + 'a {
    outcomes
        .iter()
        .filter(|c| !c.passed)
        .map(move |c| format!("[FAIL] {experiment}: {}: {}", c.name, c.detail))
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

/// Writes parbench.1 and parbench-COMMAND.1 for every visible command into `dir`; how many.
fn write_man_pages(dir: &Path) -> Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let root = Cli::command().version(VERSION);
    let mut pages = vec![("parbench".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("parbench-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name).version(VERSION)));
    }
    for (name, cmd) in &pages {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
        results::write_atomic(&dir.join(format!("{name}.1")), &page)?;
    }
    Ok(pages.len())
}

/// What `list` prints, as JSON.
fn list_json(experiments: &Path) -> serde_json::Value {
    let families: Vec<serde_json::Value> = families::registry()
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name(),
                "variants": f.variants(),
                "peers": parbench::peers::shipped_for(f.name()),
                "outputs_agree": f.outputs_agree(),
                "parameters": f.params().iter().map(|p| serde_json::json!({
                    "name": p.name,
                    "kind": p.kind,
                    "choices": p.choices,
                    "default": p.default,
                    "help": p.help,
                    "read_by": p.read_by,
                })).collect::<Vec<_>>(),
                "datasets": f.datasets().iter().map(|(file, what)| serde_json::json!({
                    "file": file, "what": what,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let files: Vec<serde_json::Value> = match experiment_files(experiments) {
        Ok(files) => files
            .iter()
            .map(
                |file| match parbench::experiment::config::load(file, false) {
                    Ok(c) => serde_json::json!({
                        "file": file.display().to_string(),
                        "name": c.name,
                        "family": c.family,
                        "reproduces": c.reproduces,
                        "description": c.description,
                    }),
                    Err(e) => serde_json::json!({
                        "file": file.display().to_string(),
                        "error": e.to_string(),
                    }),
                },
            )
            .collect(),
        Err(_) => Vec::new(),
    };
    serde_json::json!({ "families": families, "experiments": files })
}

fn list(experiments: &Path) {
    for f in families::registry() {
        println!("family {}", f.name());
        println!("  variants: {}", f.variants().join(", "));
        let params = f.params();
        if let Some(option) = params.iter().find(|p| p.read_by.is_some()) {
            let reader = option.read_by.as_ref().and_then(|r| r.first()).copied();
            println!(
                "  options (parameters read by the variants named before their help): set for \
                 every variant in params/sweep, or for one listed variant, `{} {}=VALUE`",
                reader.unwrap_or("VARIANT"),
                option.name
            );
        }
        let peers = parbench::peers::shipped_for(f.name());
        if !peers.is_empty() {
            println!("  peers (parbench peers list): {}", peers.join(", "));
        }
        println!("  parameters:");
        for p in params {
            let kind = match &p.choices {
                Some(c) => c.join("|"),
                None => p.kind.to_string(),
            };
            let readers = match &p.read_by {
                Some(r) => format!("{}: ", r.join(", ")),
                None => String::new(),
            };
            println!(
                "    {:<20} {:<24} {readers}{} (default {})",
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
