//! Every distributed algorithm, kernel and strategy on the MPI backend against the in-process
//! backend: results equal to 1e-12 (relative to the largest entry) and the words and messages of
//! every rank in every phase identical. Run under MPI on any number of ranks:
//!
//! ```text
//! cargo build -p fusedmm --features mpi --example mpi_conformance
//! mpirun -np 4 target/debug/examples/mpi_conformance [DATA_DIR]
//! ```
//!
//! Problems: Erdős-Rényi with uneven blocks, R-MAT, and the data dir's `blogcatalog.mtx` when
//! DATA_DIR is given and holds it. A mismatch stops the whole job (`MPI_Abort`) with a message.

use fusedmm::comm::mpi::{abort, initialize, MpiComm};
use fusedmm::comm::Communicator;
use fusedmm::distributed::divisors;
use fusedmm::generate::{erdos_renyi, rmat, RmatSpec};
use fusedmm::{
    algorithms, run_in_process, run_mpi, Dense, DistRun, Kernel, KernelOutput, Par, Problem,
    Strategy,
};
use std::io::BufReader;
use std::path::PathBuf;

fn fail(what: &str) -> ! {
    eprintln!("mpi_conformance: {what}");
    abort(1)
}

fn problem(s: fusedmm::Csr, r: usize, seed: u64) -> Problem {
    let (m, n) = (s.nrows(), s.ncols());
    Problem::new(
        s,
        Dense::random(m, r, seed + 1),
        Dense::random(n, r, seed + 2),
    )
    .unwrap_or_else(|e| fail(&e.to_string()))
}

fn values(out: &KernelOutput) -> &[f64] {
    match out {
        KernelOutput::Sparse(s) => s.values(),
        KernelOutput::Dense(d) => d.data(),
    }
}

/// Compares the MPI run with the in-process one; returns a description of the first difference.
fn compare(mpi: &DistRun, local: &DistRun) -> Option<String> {
    if let (KernelOutput::Sparse(a), KernelOutput::Sparse(b)) = (&mpi.output, &local.output) {
        if a.indptr() != b.indptr() || a.indices() != b.indices() {
            return Some("SDDMM patterns differ".to_string());
        }
    }
    let (a, b) = (values(&mpi.output), values(&local.output));
    if a.len() != b.len() {
        return Some(format!("{} values against {}", a.len(), b.len()));
    }
    let scale = b
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        if (x - y).abs() > 1e-12 * scale {
            return Some(format!("entry {k}: MPI {x:e}, in-process {y:e}"));
        }
    }
    for (rank, (s, t)) in mpi.stats.iter().zip(&local.stats).enumerate() {
        for phase in fusedmm::comm::Phase::ALL {
            if s.phase(phase).volume() != t.phase(phase).volume() {
                return Some(format!(
                    "rank {rank} {}: MPI counted {:?}, in-process {:?} (words sent, received, messages sent, received)",
                    phase.name(),
                    s.phase(phase).volume(),
                    t.phase(phase).volume()
                ));
            }
        }
    }
    None
}

fn main() {
    let Some(_mpi) = initialize() else {
        eprintln!("mpi_conformance: MPI could not be initialized");
        std::process::exit(1);
    };
    let world = MpiComm::world();
    let p = world.size();
    let mut problems = vec![
        (
            "ER 37x29 r=3",
            problem(erdos_renyi(37, 29, 4, 1, Par::Seq).unwrap(), 3, 1),
        ),
        (
            "ER 60x17 r=5",
            problem(erdos_renyi(60, 17, 9, 2, Par::Seq).unwrap(), 5, 2),
        ),
        (
            "R-MAT scale 8 r=16",
            problem(rmat(&RmatSpec::new(8, 8, 3)).unwrap(), 16, 3),
        ),
    ];
    if let Some(dir) = std::env::args().nth(1).map(PathBuf::from) {
        let path = dir.join("blogcatalog.mtx");
        if let Ok(file) = std::fs::File::open(&path) {
            let s = fusedmm::mtx::read_sparse(BufReader::new(file))
                .unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
            problems.push(("blogcatalog r=8", problem(s, 8, 4)));
        }
    }
    let mut checked = 0usize;
    for (name, pr) in &problems {
        for &alg in algorithms() {
            for c in divisors(p)
                .into_iter()
                .filter(|&c| alg.check_grid(p, c).is_ok())
            {
                for kernel in Kernel::ALL {
                    let strategies = if kernel.is_fused() {
                        alg.strategies().to_vec()
                    } else {
                        vec![Strategy::NoElision]
                    };
                    for strategy in strategies {
                        let what = format!(
                            "{name}: {} {} {} p={p} c={c}",
                            alg.name(),
                            kernel.name(),
                            strategy.name()
                        );
                        let run = run_mpi(alg, pr, kernel, strategy, c, Par::Seq, &world)
                            .unwrap_or_else(|e| fail(&format!("{what}: {e}")));
                        if let Some(run) = run {
                            let local = run_in_process(alg, pr, kernel, strategy, p, c, Par::Seq)
                                .unwrap_or_else(|e| fail(&format!("{what}: in-process: {e}")));
                            if let Some(diff) = compare(&run, &local) {
                                fail(&format!("{what}: {diff}"));
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    // A grid that cannot be formed is refused on every rank before any work.
    let bad =
        fusedmm::algorithm("2.5d-dense-replicate").unwrap_or_else(|| fail("no 2.5D algorithm"));
    let refused = run_mpi(
        bad,
        &problems[0].1,
        Kernel::Sddmm,
        Strategy::NoElision,
        p + 1,
        Par::Seq,
        &world,
    );
    if refused.is_ok() {
        fail(&format!("replication {} on {p} ranks was accepted", p + 1));
    }
    if world.rank() == 0 {
        println!("mpi_conformance: {checked} runs on {p} ranks match the in-process backend (results to 1e-12, every rank's words and messages exactly)");
    }
}
