//! The drivers of the distributed algorithms ([`crate::DistAlgorithm`], in `lib.rs`), the grid
//! questions the harness asks of them, and the block helpers they share.
//!
//! An algorithm runs on one rank at a time: [`DistAlgorithm::run_rank`] takes the rank's
//! communicator and the global problem, takes its own blocks out of it (setup, no
//! communication), runs the kernel and returns its piece of the output in global coordinates.
//! Taking the blocks from the global problem keeps the contract the same for the MPI backend,
//! where every process reads the input and keeps its part. [`run_in_process`] runs all ranks as
//! threads and assembles the pieces; `run_mpi` (feature `mpi`) runs them as the processes of an
//! MPI job and assembles the pieces on rank 0.
//!
//! Blocks: `x` items split into `parts` blocks give block `k` the items
//! `floor(x k / parts) .. floor(x (k + 1) / parts)` ([`crate::comm::block_start`]), so uneven
//! sizes differ by at most one item.

use crate::comm::threads::run_threads;
use crate::comm::{block_start, CommError, Communicator, Phase};
use crate::kernels::Kernel;
use crate::problem::{DistRun, FusedMmError, KernelOutput, Problem, RankPiece, Strategy};
use crate::{Dense, DistAlgorithm};
use parbench_common::{Csr, Par};
use std::ops::Range;
use std::time::Instant;

/// Checks that `strategy` is one the algorithm offers, for fused kernels.
pub fn check_strategy(
    alg: &dyn DistAlgorithm,
    kernel: Kernel,
    strategy: Strategy,
) -> Result<(), FusedMmError> {
    if kernel.is_fused() && !alg.strategies().contains(&strategy) {
        return Err(FusedMmError::Unsupported {
            algorithm: alg.name(),
            kernel: kernel.name(),
            strategy: strategy.name(),
            supported: alg.strategies().iter().map(|s| s.name()).collect(),
        });
    }
    Ok(())
}

/// Runs `kernel` with `alg` on `p` in-process ranks and assembles the global result.
pub fn run_in_process(
    alg: &dyn DistAlgorithm,
    problem: &Problem,
    kernel: Kernel,
    strategy: Strategy,
    p: usize,
    c: usize,
    par: Par,
) -> Result<DistRun, FusedMmError> {
    alg.check_grid(p, c)?;
    check_strategy(alg, kernel, strategy)?;
    let start = Instant::now();
    let runs = run_threads(p, |comm| {
        alg.run_rank(comm, problem, kernel, strategy, c, par)
    })
    .map_err(|f| FusedMmError::Rank {
        rank: f.rank,
        message: f.error.to_string(),
    })?;
    let wall_seconds = start.elapsed().as_secs_f64();
    let mut stats = Vec::with_capacity(p);
    let mut compute_seconds = Vec::with_capacity(p);
    let mut pieces = Vec::with_capacity(p);
    for run in runs {
        stats.push(run.stats);
        compute_seconds.push(run.value.compute_seconds);
        pieces.push(run.value.piece);
    }
    let output = assemble(problem, kernel, pieces)?;
    Ok(DistRun {
        output,
        stats,
        compute_seconds,
        wall_seconds,
    })
}

/// Runs `kernel` with `alg` on the ranks of an MPI job (every process calls this with the same
/// arguments; `comm` is the world) and assembles the result on rank 0, which gets `Some`; the
/// other ranks get `None`. The grid is checked before any work, on every rank alike, so a bad
/// launch is the same error everywhere rather than a hang. Collecting the pieces at the end is
/// not counted: it is output, not part of the algorithm.
#[cfg(feature = "mpi")]
pub fn run_mpi(
    alg: &dyn DistAlgorithm,
    problem: &Problem,
    kernel: Kernel,
    strategy: Strategy,
    c: usize,
    par: Par,
    comm: &crate::comm::mpi::MpiComm,
) -> Result<Option<DistRun>, FusedMmError> {
    let p = comm.size();
    alg.check_grid(p, c)?;
    check_strategy(alg, kernel, strategy)?;
    comm.barrier().map_err(|e| rank_error(comm.rank(), e))?;
    // The world's counters run over the whole job; this run's are the difference.
    let before = wire::encode_stats(&comm.stats());
    let start = Instant::now();
    let out = alg.run_rank(comm, problem, kernel, strategy, c, par)?;
    comm.barrier().map_err(|e| rank_error(comm.rank(), e))?;
    let wall_seconds = start.elapsed().as_secs_f64();
    let mut record = wire::encode_stats(&comm.stats());
    for (now, then) in record.iter_mut().zip(&before) {
        *now -= then;
    }
    record.push(out.compute_seconds);
    wire::encode_piece(&out.piece, &mut record);
    let Some(records) = comm.gather_uncounted(&record) else {
        return Ok(None);
    };
    let mut stats = Vec::with_capacity(p);
    let mut compute_seconds = Vec::with_capacity(p);
    let mut pieces = Vec::with_capacity(p);
    for (rank, rec) in records.iter().enumerate() {
        let (s, rest) = wire::decode_stats(rec).ok_or_else(|| wire::garbled(rank))?;
        let (&secs, rest) = rest.split_first().ok_or_else(|| wire::garbled(rank))?;
        stats.push(s);
        compute_seconds.push(secs);
        pieces.push(wire::decode_piece(rest).ok_or_else(|| wire::garbled(rank))?);
    }
    let output = assemble(problem, kernel, pieces)?;
    Ok(Some(DistRun {
        output,
        stats,
        compute_seconds,
        wall_seconds,
    }))
}

#[cfg(feature = "mpi")]
fn rank_error(rank: usize, e: crate::comm::CommError) -> FusedMmError {
    FusedMmError::Rank {
        rank,
        message: e.to_string(),
    }
}

/// Flat `f64` records of what a rank returns, to gather them over MPI (indices are exact in an
/// `f64` below 2^53).
#[cfg(feature = "mpi")]
mod wire {
    use crate::comm::{CommStats, Phase};
    use crate::problem::{FusedMmError, RankPiece};
    use crate::Dense;

    const PHASES: [Phase; 3] = [Phase::Replication, Phase::Propagation, Phase::Reduction];

    pub fn garbled(rank: usize) -> FusedMmError {
        FusedMmError::Rank {
            rank,
            message: "its gathered result record is malformed".to_string(),
        }
    }

    pub fn encode_stats(stats: &CommStats) -> Vec<f64> {
        let mut v = Vec::with_capacity(15);
        for phase in PHASES {
            let p = stats.phase(phase);
            v.extend(p.volume().iter().map(|&x| x as f64));
            v.push(p.seconds);
        }
        v
    }

    pub fn decode_stats(v: &[f64]) -> Option<(CommStats, &[f64])> {
        if v.len() < 15 {
            return None;
        }
        let mut stats = CommStats::default();
        for (k, phase) in PHASES.into_iter().enumerate() {
            let f = &v[5 * k..5 * k + 5];
            let p = stats.phase_mut(phase);
            p.words_sent = f[0] as u64;
            p.words_received = f[1] as u64;
            p.messages_sent = f[2] as u64;
            p.messages_received = f[3] as u64;
            p.seconds = f[4];
        }
        Some((stats, &v[15..]))
    }

    pub fn encode_piece(piece: &RankPiece, v: &mut Vec<f64>) {
        match piece {
            RankPiece::Sparse(t) => {
                v.push(0.0);
                for &(i, j, x) in t {
                    v.extend([i as f64, j as f64, x]);
                }
            }
            RankPiece::DenseRows { first_row, block } => {
                v.extend([1.0, *first_row as f64, 0.0]);
                encode_dense(block, v);
            }
            RankPiece::DenseBlock {
                first_row,
                first_col,
                block,
            } => {
                v.extend([2.0, *first_row as f64, *first_col as f64]);
                encode_dense(block, v);
            }
        }
    }

    fn encode_dense(block: &Dense, v: &mut Vec<f64>) {
        v.extend([block.rows() as f64, block.cols() as f64]);
        v.extend_from_slice(block.data());
    }

    pub fn decode_piece(v: &[f64]) -> Option<RankPiece> {
        let (&tag, rest) = v.split_first()?;
        if tag == 0.0 {
            if rest.len() % 3 != 0 {
                return None;
            }
            let t = rest
                .chunks_exact(3)
                .map(|c| (c[0] as usize, c[1] as usize, c[2]))
                .collect();
            return Some(RankPiece::Sparse(t));
        }
        let [first_row, first_col, rows, cols] =
            [*rest.first()?, *rest.get(1)?, *rest.get(2)?, *rest.get(3)?];
        let block = Dense::from_vec(rows as usize, cols as usize, rest[4..].to_vec())?;
        let (first_row, first_col) = (first_row as usize, first_col as usize);
        match tag {
            1.0 => Some(RankPiece::DenseRows { first_row, block }),
            2.0 => Some(RankPiece::DenseBlock {
                first_row,
                first_col,
                block,
            }),
            _ => None,
        }
    }
}

/// Puts the ranks' pieces together.
fn assemble(
    problem: &Problem,
    kernel: Kernel,
    pieces: Vec<RankPiece>,
) -> Result<KernelOutput, FusedMmError> {
    let rows = match kernel {
        Kernel::Sddmm => {
            let mut triplets = Vec::with_capacity(problem.nnz());
            for piece in pieces {
                if let RankPiece::Sparse(t) = piece {
                    triplets.extend(t);
                }
            }
            return Ok(KernelOutput::Sparse(Csr::from_triplets(
                problem.m(),
                problem.n(),
                &triplets,
            )?));
        }
        Kernel::SpmmA | Kernel::FusedMmA => problem.m(),
        Kernel::SpmmB | Kernel::FusedMmB => problem.n(),
    };
    let mut out = Dense::zeros(rows, problem.r());
    let w = problem.r();
    for piece in pieces {
        match piece {
            RankPiece::DenseRows { first_row, block } => {
                out.data_mut()[first_row * w..(first_row + block.rows()) * w]
                    .copy_from_slice(block.data());
            }
            RankPiece::DenseBlock {
                first_row,
                first_col,
                block,
            } => {
                for i in 0..block.rows() {
                    out.row_mut(first_row + i)[first_col..first_col + block.cols()]
                        .copy_from_slice(block.row(i));
                }
            }
            RankPiece::Sparse(_) => {}
        }
    }
    Ok(KernelOutput::Dense(out))
}

/// Rows of block `k` when `x` rows are split into `parts` blocks.
pub fn block_range(x: usize, parts: usize, k: usize) -> Range<usize> {
    block_start(x, parts, k)..block_start(x, parts, k + 1)
}

/// Lengths in words of `blocks` (ranges of rows) of width `r`.
pub fn word_counts(blocks: impl Iterator<Item = Range<usize>>, r: usize) -> Vec<usize> {
    blocks.map(|b| b.len() * r).collect()
}

/// Splits the rows `rows` of `t` by column block: column `col` belongs to block `b` of the even
/// split of `t.ncols()` into `parts`; every block `b` with `keep(b) = Some(k)` becomes output `k`
/// (of `outputs`), with local row and column indices.
pub fn extract_blocks(
    t: &Csr,
    rows: Range<usize>,
    parts: usize,
    outputs: usize,
    keep: impl Fn(usize) -> Option<usize>,
) -> Result<Vec<Csr>, FusedMmError> {
    let n = t.ncols();
    let starts: Vec<usize> = (0..=parts).map(|b| block_start(n, parts, b)).collect();
    let mut triplets: Vec<Vec<(usize, usize, f64)>> = vec![Vec::new(); outputs];
    let mut widths = vec![0usize; outputs];
    for b in 0..parts {
        if let Some(k) = keep(b) {
            widths[k] = starts[b + 1] - starts[b];
        }
    }
    for (li, i) in rows.clone().enumerate() {
        let (cols, vals) = t.row(i);
        for (&col, &v) in cols.iter().zip(vals) {
            let col = col as usize;
            let b = starts.partition_point(|&s| s <= col) - 1;
            if let Some(k) = keep(b) {
                triplets[k].push((li, col - starts[b], v));
            }
        }
    }
    triplets
        .iter()
        .zip(&widths)
        .map(|(t, &w)| Csr::from_triplets(rows.len(), w, t).map_err(FusedMmError::from))
        .collect()
}

/// Appends the nonzeros of `t` with values `vals` (in `t`'s order) as global
/// `(row0 + row, col0 + col, value)` triplets.
pub fn push_triplets(
    t: &Csr,
    vals: &[f64],
    row0: usize,
    col0: usize,
    out: &mut Vec<(usize, usize, f64)>,
) {
    for (li, w) in t.indptr().windows(2).enumerate() {
        let cols = &t.indices()[w[0]..w[1]];
        for (&col, &v) in cols.iter().zip(&vals[w[0]..w[1]]) {
            out.push((row0 + li, col0 + col as usize, v));
        }
    }
}

/// The divisors of `p` (the replication factors of a 1.5D grid).
pub fn divisors(p: usize) -> Vec<usize> {
    (1..=p).filter(|&c| p.is_multiple_of(c)).collect()
}

/// The replication factor `alg` runs with when `replication` is asked for: `replication`,
/// except for an algorithm that does not replicate ([`DistAlgorithm::replicates`], the 1D
/// baseline), which runs at `c = 1` beside the others at every `c` (also for 0, "try every
/// valid `c`").
pub fn replication_for(alg: &dyn DistAlgorithm, replication: usize) -> usize {
    if alg.replicates() {
        replication
    } else {
        1
    }
}

/// The replication factors `alg` accepts on `p` ranks for `kernel` and `strategy`: the `c` that
/// form its grid ([`DistAlgorithm::check_grid`]), none when it does not offer `strategy` for a
/// fused kernel.
pub fn valid_replications(
    alg: &dyn DistAlgorithm,
    kernel: Kernel,
    strategy: Strategy,
    p: usize,
) -> Vec<usize> {
    if check_strategy(alg, kernel, strategy).is_err() {
        return Vec::new();
    }
    divisors(p)
        .into_iter()
        .filter(|&c| alg.check_grid(p, c).is_ok())
        .collect()
}

/// Runs `f`, adding its wall time to `seconds`.
pub(crate) fn timed<R>(seconds: &mut f64, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    *seconds += t.elapsed().as_secs_f64();
    r
}

/// The pattern of `t` with every value one: SDDMM on it gives the plain dot products, which the
/// column-split algorithms sum over column blocks before scaling by `S`.
pub(crate) fn ones_pattern(t: &Csr) -> Result<Csr, FusedMmError> {
    Ok(Csr::new(
        t.nrows(),
        t.ncols(),
        t.indptr().to_vec(),
        t.indices().to_vec(),
        vec![1.0; t.nnz()],
    )?)
}

/// Shifts a sparse block by one position along `comm` (rank `i` gets what rank `i + 1` sent)
/// in coordinate form: one message of `2 nnz` indices (rows, then columns, in CSR order) and one
/// of the `nnz` values that travel with it, so a nonzero costs three words as in the paper. The
/// received block is `nrows x ncols`; its pattern comes back with values one (see
/// [`ones_pattern`]).
pub(crate) fn shift_coo(
    comm: &dyn Communicator,
    phase: Phase,
    pattern: &Csr,
    values: &[f64],
    nrows: usize,
    ncols: usize,
) -> Result<(Csr, Vec<f64>), FusedMmError> {
    let nnz = pattern.nnz();
    let mut coords = Vec::with_capacity(2 * nnz);
    for (i, w) in pattern.indptr().windows(2).enumerate() {
        coords.extend(std::iter::repeat_n(i as u32, w[1] - w[0]));
    }
    coords.extend_from_slice(pattern.indices());
    let coords = comm.shift_u32(phase, &coords, 1)?;
    let values = comm.shift_f64(phase, values, 1)?;
    let nnz = values.len();
    if coords.len() != 2 * nnz {
        return Err(FusedMmError::Comm(CommError::Usage {
            call: "shift_coo",
            message: format!(
                "received {} coordinates for {nnz} values (expected twice as many)",
                coords.len()
            ),
        }));
    }
    let mut indptr = vec![0usize; nrows + 1];
    for &row in &coords[..nnz] {
        let row = row as usize;
        if row >= nrows {
            return Err(FusedMmError::Comm(CommError::Usage {
                call: "shift_coo",
                message: format!("row {row} in a block of {nrows} rows"),
            }));
        }
        indptr[row + 1] += 1;
    }
    for i in 0..nrows {
        indptr[i + 1] += indptr[i];
    }
    let pattern = Csr::new(nrows, ncols, indptr, coords[nnz..].to_vec(), vec![1.0; nnz])?;
    Ok((pattern, values))
}

/// Adds `add` to `acc` entry by entry.
pub(crate) fn add_into(acc: &mut [f64], add: &[f64]) {
    for (a, b) in acc.iter_mut().zip(add) {
        *a += b;
    }
}
