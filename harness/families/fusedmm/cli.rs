//! `parbench fusedmm`: one SDDMM, SpMM or FusedMM kernel on one distributed algorithm, on your
//! matrix or a seeded Erdős-Rényi one, with the exact words and messages every rank sent.
//!
//! Pipeline: read `S` (MatrixMarket coordinate; a bare name is also looked up in the data dir)
//! or generate it; read `A` and `B` (MatrixMarket array) or draw them from the seed; check the
//! grid; run the kernel on `--ranks` in-process ranks ([`fusedmm::run_in_process`]); write the
//! result atomically (coordinate for SDDMM, array otherwise) and print the counts per phase next
//! to the cost model's prediction, as text on stderr or one JSON object on stdout (`--json`).

use crate::exec::ranks::Ranks;
use crate::families::fusedmm::{self as family, CommSummary, FusedmmPoint};
use crate::families::params::Named;
use crate::util::datadir;
use anyhow::{bail, Context, Result};
use fusedmm::{Dense, FusedMmError, Kernel, KernelOutput, Par, Problem, Strategy};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The options' names and the defaults shared with the `fusedmm` experiment family come from
/// the crate's enums and from [`FusedmmPoint::default`], so each is written once.
fn default_kernel() -> &'static str {
    FusedmmPoint::default().kernel.0.name()
}

fn default_ranks() -> usize {
    FusedmmPoint::default().ranks
}

fn default_replication() -> u64 {
    FusedmmPoint::default().replication as u64
}

fn ranks_help() -> String {
    format!(
        "Number of ranks p: threads with the local backend (default {}); with `--backend mpi` \
the processes mpirun started (giving another number is an error)",
        default_ranks()
    )
}

/// Arguments of `parbench fusedmm`.
#[derive(clap::Args, Clone, Debug)]
#[command(
    about = "One FusedMM/SDDMM/SpMM kernel on one distributed algorithm, with exact communication counts",
    long_about = "Runs one kernel on one distributed algorithm over P in-process ranks (one thread \
each, message passing only) and reports the words and messages every rank sent, per phase \
(replication, propagation, reduction), next to the analytic cost model.\n\n\
With S an m x n sparse matrix, A m x r and B n x r:\n  \
sddmm     R = S .* (A B^T)           (sparse, the pattern of S)\n  \
spmma     R B                        (m x r; the matrix given is R itself)\n  \
spmmb     R^T A                      (n x r; the matrix given is R itself)\n  \
fusedmma  SpMMA(SDDMM(A, B, S), B)   (m x r)\n  \
fusedmmb  SpMMB(SDDMM(A, B, S), A)   (n x r)\n\n\
Grids: 1d needs c = 1; the 1.5D algorithms need c to divide p; the 2.5D ones need p / c to be a \
perfect square. --strategy applies to fusedmma/fusedmmb: none (SDDMM then SpMM), reuse (replicate \
the dense input once), fusion (one propagation with the local fused kernel; 1.5d-dense-shift only).\n\n\
Output: --out gets the result as MatrixMarket (coordinate for sddmm, array otherwise), written \
atomically. The summary goes to stderr, or with --json one JSON object to stdout.\n\n\
Example:  parbench fusedmm --er 4096,16 --r 64 --kernel fusedmma --algorithm 1.5d-dense-shift \
--strategy fusion --ranks 16 --replication 4 --json"
)]
pub struct FusedmmArgs {
    /// Sparse matrix S (or R for spmma/spmmb) as a MatrixMarket coordinate file (real, integer or
    /// pattern; general, symmetric or skew-symmetric). A name not found as given is looked up in
    /// the data dir.
    #[arg(
        long,
        value_name = "FILE.mtx",
        conflicts_with = "er",
        required_unless_present = "er"
    )]
    pub matrix: Option<PathBuf>,
    /// Generate S instead: Erdős-Rényi, ROWS x ROWS with NNZ_PER_ROW nonzeros in every row,
    /// values uniform in (0, 1], from --seed.
    #[arg(long, value_name = "ROWS,NNZ_PER_ROW", value_parser = parse_er)]
    pub er: Option<(usize, usize)>,
    /// Width r of the dense matrices A and B (taken from --dense-a/--dense-b when given).
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..))]
    pub r: Option<u64>,
    /// The kernel to run.
    #[arg(long, default_value = default_kernel(), value_parser = clap::builder::PossibleValuesParser::new(Kernel::names()))]
    pub kernel: String,
    /// The distributed algorithm.
    #[arg(long, default_value = "1.5d-dense-shift", value_parser = clap::builder::PossibleValuesParser::new(fusedmm::algorithm_names()))]
    pub algorithm: String,
    /// How a fused kernel combines its SDDMM and SpMM (ignored by the other kernels).
    #[arg(long, default_value = "none", value_parser = clap::builder::PossibleValuesParser::new(Strategy::names()))]
    pub strategy: String,
    // Help from `ranks_help`, which states the family's default.
    #[arg(long, value_name = "P", help = ranks_help(), value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub ranks: Option<u64>,
    /// Where the ranks run: `local` (threads of this process, message passing only) or `mpi`
    /// (one process per rank: `mpirun -np P parbench fusedmm --backend mpi ...`; needs a
    /// parbench built with `--features mpi`). Both count the same words and messages.
    #[arg(long, default_value = "local", value_parser = ["local", "mpi"])]
    pub backend: String,
    /// Replication factor c.
    #[arg(long, value_name = "C", default_value_t = default_replication(), value_parser = clap::value_parser!(u64).range(1..))]
    pub replication: u64,
    /// A (m x r) as a MatrixMarket array file (random from the seed when absent).
    #[arg(long, value_name = "FILE")]
    pub dense_a: Option<PathBuf>,
    /// B (n x r) as a MatrixMarket array file (random from the seed when absent).
    #[arg(long, value_name = "FILE")]
    pub dense_b: Option<PathBuf>,
    /// Seed of the generated S, A and B, and of the row/column permutation of S.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Randomly permute the rows and columns of S before distributing it (the paper's load
    /// balancing). The output is permuted back, so it refers to your S.
    #[arg(long)]
    pub permute: bool,
    /// Write the result here (MatrixMarket; atomically: a temporary file, then a rename).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one JSON object (counts per phase and rank, model, times) to stdout.
    #[arg(long)]
    pub json: bool,
}

fn parse_er(s: &str) -> std::result::Result<(usize, usize), String> {
    let (rows, per_row) = s
        .split_once(',')
        .ok_or_else(|| format!("expected ROWS,NNZ_PER_ROW (e.g. 4096,16), got {s:?}"))?;
    let rows: usize = rows
        .trim()
        .parse()
        .map_err(|_| format!("ROWS must be a positive integer, got {rows:?}"))?;
    let per_row: usize = per_row
        .trim()
        .parse()
        .map_err(|_| format!("NNZ_PER_ROW must be a non-negative integer, got {per_row:?}"))?;
    if rows == 0 {
        return Err("ROWS must be at least 1".to_string());
    }
    if per_row > rows {
        return Err(format!(
            "NNZ_PER_ROW ({per_row}) cannot exceed ROWS ({rows}): a row has {rows} columns"
        ));
    }
    Ok((rows, per_row))
}

fn read_dense(path: &Path, what: &str, rows: usize) -> Result<Dense> {
    let file = File::open(path).with_context(|| format!("opening {what} {}", path.display()))?;
    let d = fusedmm::mtx::read_dense(BufReader::new(file))
        .with_context(|| format!("reading {what} from {}", path.display()))?;
    if d.rows() != rows {
        bail!(
            "{what} in {} has {} rows, but S needs {rows}",
            path.display(),
            d.rows()
        );
    }
    Ok(d)
}

/// Runs `parbench fusedmm`.
pub fn run(args: &FusedmmArgs, data_dir: Option<&Path>) -> Result<()> {
    let backend = Ranks::start(&args.backend)?;
    backend.finish(run_on(&backend, args, data_dir))
}

fn run_on(backend: &Ranks, args: &FusedmmArgs, data_dir: Option<&Path>) -> Result<()> {
    let kernel = Kernel::from_name(&args.kernel)
        .with_context(|| format!("unknown kernel {}", args.kernel))?;
    let strategy = Strategy::from_name(&args.strategy)
        .with_context(|| format!("unknown strategy {}", args.strategy))?;
    let alg = fusedmm::algorithm(&args.algorithm)
        .with_context(|| format!("unknown algorithm {}", args.algorithm))?;
    let c = usize::try_from(args.replication).context("--replication is too large")?;
    let p = backend.ranks(args.ranks, default_ranks())?;
    // Grid and strategy first: they need no input, and a wrong choice should not wait for a
    // large file to be parsed.
    alg.check_grid(p, c).map_err(grid_help)?;
    fusedmm::distributed::check_strategy(alg, kernel, strategy)?;

    let t = Instant::now();
    let s = match (&args.matrix, args.er) {
        (Some(path), _) => {
            let path = datadir::locate_input(path, data_dir);
            let file = File::open(&path)
                .with_context(|| format!("opening the matrix {}", path.display()))?;
            fusedmm::mtx::read_sparse(BufReader::new(file))
                .with_context(|| format!("reading the matrix {}", path.display()))?
        }
        (None, Some((rows, per_row))) => {
            fusedmm::generate::erdos_renyi(rows, rows, per_row, args.seed, Par::Seq)
                .context("generating the Erdős-Rényi matrix")?
        }
        (None, None) => {
            bail!("give the sparse matrix with --matrix FILE.mtx or --er ROWS,NNZ_PER_ROW")
        }
    };
    let (m, n) = (s.nrows(), s.ncols());
    let a = match &args.dense_a {
        Some(path) => Some(read_dense(path, "A (--dense-a)", m)?),
        None => None,
    };
    let b = match &args.dense_b {
        Some(path) => Some(read_dense(path, "B (--dense-b)", n)?),
        None => None,
    };
    let r = match (&a, &b, args.r) {
        (Some(a), _, _) => a.cols(),
        (None, Some(b), _) => b.cols(),
        (None, None, Some(r)) => usize::try_from(r).context("--r is too large")?,
        (None, None, None) => {
            bail!("give the width of A and B with --r R (or pass --dense-a/--dense-b)")
        }
    };
    if let Some(given) = args.r.and_then(|x| usize::try_from(x).ok()) {
        if given != r {
            bail!("--r {given} disagrees with the dense input files, which have {r} columns");
        }
    }
    let a = a.unwrap_or_else(|| Dense::random(m, r, args.seed.wrapping_add(1)));
    let b = b.unwrap_or_else(|| Dense::random(n, r, args.seed.wrapping_add(2)));
    let read_s = t.elapsed().as_secs_f64();

    // Optional load-balancing permutation; undone on the output so it refers to the input S.
    let perms = args.permute.then(|| {
        (
            fusedmm::generate::random_permutation(m, args.seed ^ 0x5eed_0001),
            fusedmm::generate::random_permutation(n, args.seed ^ 0x5eed_0002),
        )
    });
    let problem = match &perms {
        Some((pr, pc)) => Problem::new(
            fusedmm::generate::permute(&s, pr, pc)?,
            a.permute_rows(pr),
            b.permute_rows(pc),
        )?,
        None => Problem::new(s, a, b)?,
    };
    let run = crate::families::fusedmm::run_on_backend(
        backend,
        alg,
        &problem,
        kernel,
        strategy,
        p,
        c,
        Par::Seq,
    )
    .with_context(|| format!("running {} {} on {p} ranks", args.algorithm, args.kernel))?;
    // Under MPI only rank 0 holds the assembled result; the other ranks are done.
    let Some(run) = run else {
        return Ok(());
    };
    let summary = family::summarize(alg, strategy, kernel, &problem, p, c, &run);
    let output = match &perms {
        Some((pr, pc)) => unpermute(run.output, kernel, pr, pc)?,
        None => run.output,
    };

    let t = Instant::now();
    if let Some(path) = &args.out {
        crate::results::write_atomic_with(path, |w| match &output {
            KernelOutput::Sparse(s) => fusedmm::mtx::write_coordinate(w, s),
            KernelOutput::Dense(d) => fusedmm::mtx::write_array(w, d),
        })
        .with_context(|| format!("writing {}", path.display()))?;
    }
    let write_s = t.elapsed().as_secs_f64();

    if args.json {
        let report = serde_json::json!({
            "algorithm": summary.algorithm,
            "strategy": summary.strategy,
            "kernel": summary.kernel,
            "m": summary.m,
            "n": summary.n,
            "r": summary.r,
            "nnz": summary.nnz,
            "phi": family::phi(&problem),
            "ranks": p,
            "replication": c,
            "phases": summary.phases,
            "words_sent_per_rank": summary.words_sent_per_rank,
            "messages_sent_per_rank": summary.messages_sent_per_rank,
            "model_exact": summary.model_exact,
            "best_c_model": summary.best_c_model,
            "times_s": {
                "read": read_s,
                "run": summary.wall_s,
                "compute_max": summary.compute_s_max,
                "write": write_s,
            },
            "gflop_per_s": summary.gflop_per_s,
            "out": args.out.as_ref().map(|p| p.display().to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&summary, read_s, write_s);
    }
    Ok(())
}

/// Adds the list of working values to a grid error (the error itself already names them).
fn grid_help(e: FusedMmError) -> anyhow::Error {
    match &e {
        FusedMmError::Grid { valid, p, .. } if valid.is_empty() => {
            anyhow::anyhow!("{e}; no c works for p = {p}: choose --ranks so that it has one")
        }
        _ => anyhow::Error::new(e),
    }
}

/// Maps a result of the permuted problem back to the caller's row and column order.
fn unpermute(out: KernelOutput, kernel: Kernel, pr: &[u32], pc: &[u32]) -> Result<KernelOutput> {
    let inverse = |p: &[u32]| {
        let mut inv = vec![0u32; p.len()];
        for (i, &to) in p.iter().enumerate() {
            inv[to as usize] = i as u32;
        }
        inv
    };
    let (ir, ic) = (inverse(pr), inverse(pc));
    Ok(match out {
        KernelOutput::Sparse(s) => KernelOutput::Sparse(fusedmm::generate::permute(&s, &ir, &ic)?),
        KernelOutput::Dense(d) => {
            let rows_inv = match kernel {
                Kernel::SpmmB | Kernel::FusedMmB => &ic,
                _ => &ir,
            };
            KernelOutput::Dense(d.permute_rows(rows_inv))
        }
    })
}

fn print_summary(s: &CommSummary, read_s: f64, write_s: f64) {
    eprintln!(
        "{} {} (strategy {}) on p = {} ranks, c = {}: S {} x {}, {} nonzeros, r = {}",
        s.algorithm, s.kernel, s.strategy, s.ranks, s.replication, s.m, s.n, s.nnz, s.r
    );
    eprintln!(
        "  {:<12} {:>14} {:>14} {:>14} {:>10} {:>10} {:>10}",
        "phase", "words max", "words mean", "model words", "msgs max", "model msgs", "seconds"
    );
    let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1}"));
    for phase in ["replication", "propagation", "reduction", "total"] {
        if let Some(ph) = s.phases.get(phase) {
            eprintln!(
                "  {:<12} {:>14} {:>14.1} {:>14} {:>10} {:>10} {:>10.4}",
                phase,
                ph.words_max,
                ph.words_mean,
                fmt(ph.model_words),
                ph.messages_max,
                fmt(ph.model_messages),
                ph.seconds_mean
            );
        }
    }
    eprintln!(
        "  every rank matches the model exactly: {}; model's best c: {}",
        if s.model_exact {
            "yes"
        } else {
            "no (uneven blocks or nonzeros)"
        },
        s.best_c_model.map_or("-".to_string(), |c| c.to_string())
    );
    eprintln!(
        "  read {read_s:.3} s, run {:.4} s (local kernels {:.4} s on the busiest rank), {:.2} GFLOP/s, write {write_s:.3} s",
        s.wall_s, s.compute_s_max, s.gflop_per_s
    );
}
