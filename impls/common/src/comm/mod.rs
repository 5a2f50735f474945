//! The communicator the distributed algorithms run on, and the accounting of what it sends.
//!
//! [`Communicator`] is an MPI-shaped contract: a rank and a size, sub-communicators by
//! [`Communicator::split`] (as `MPI_Comm_split`: the 1.5D/2.5D fibers, layers, rows and columns
//! are all splits), the collectives the paper's algorithms use, on `f64` buffers (and `u32`
//! for sparse coordinates), and point-to-point byte messages for protocols that are not
//! collectives (LDA's master and workers). It is object safe and free of generics, so the
//! algorithms, which only see `&dyn Communicator`, run unchanged on either backend: [`threads`],
//! in process (one OS thread per rank, message passing over channels only), or `mpi` (cargo
//! feature `mpi`: rsmpi on OpenMPI, one process per rank under `mpirun`).
//!
//! # Counting convention
//!
//! Every data-moving call is tagged with a [`Phase`]. Per rank and per phase the backend counts
//! words and messages sent and received, and the wall time spent inside the calls.
//! - A *word* is one element of a buffer: an `f64` value or a `u32` index alike (the paper counts
//!   a COO nonzero as three words).
//! - A *message* is one point-to-point transfer between two different ranks, whatever its length
//!   (a zero-length block is still a message). Transfers from a rank to itself are local copies
//!   and are not counted.
//! - Each collective uses one fixed algorithm, and the counts are what that algorithm really
//!   sends. For a communicator of `q` ranks, rank `i`, block lengths `n_0 .. n_{q-1}` summing to
//!   `N`:
//!   - [`Communicator::all_gather_f64`] (ring): `q - 1` steps; step `s` sends block `i - s` to rank
//!     `i + 1` and receives block `i - s - 1` from rank `i - 1` (indices mod `q`). Rank `i` sends
//!     `N - n_{i+1}` words and receives `N - n_i` words, in `q - 1` messages each way. With even
//!     blocks that is `(q - 1) / q * N` words.
//!   - [`Communicator::reduce_scatter_sum`] (ring): `q - 1` steps; step `s` sends the partial sum
//!     of block `i - s - 1` to rank `i + 1` and adds the received partial sum of block `i - s - 2`.
//!     Rank `i` sends `N - n_i` and receives `N - n_{i-1}` words in `q - 1` messages each way.
//!   - [`Communicator::all_reduce_sum`]: ring reduce-scatter then ring all-gather over the split
//!     `n_k = floor(N (k + 1) / q) - floor(N k / q)`: `2 (q - 1)` messages each way.
//!   - [`Communicator::broadcast_f64`] (binomial tree from the root): every non-root rank receives
//!     `N` words in one message; a rank sends `N` words to each of its children.
//!   - [`Communicator::send_recv_f64`]: one message of the sent length to `dest`, one of the
//!     received length from `source` (cyclic shifts are send-receives).
//!   - [`Communicator::split`] and [`Communicator::barrier`] move no data for the algorithms and
//!     are not counted (they are setup and synchronization, as `MPI_Comm_split` and `MPI_Barrier`
//!     would be outside the kernels' communication volume).

pub mod convention;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod threads;

use std::time::Duration;
use thiserror::Error;

/// What a communication call is for (paper Section IV-B): replicating an input along the fiber,
/// propagating blocks within a layer (shifts), or reducing a replicated output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Copying data to more ranks: FusedMM's all-gathers of an input along the fiber, which
    /// build a rank's replicated block.
    Replication,
    /// Moving blocks between ranks without combining them: FusedMM's shifts within a layer.
    Propagation,
    /// Summing the contributions of several ranks: reduce-scatters and all-reduces (FusedMM's
    /// replicated outputs, word2vec's model averages).
    Reduction,
}

impl Phase {
    /// Every phase, in the order the counters store them and reports print them.
    pub const ALL: [Phase; 3] = [Phase::Replication, Phase::Propagation, Phase::Reduction];
    /// Lowercase name used in reports and JSON keys (`"replication"`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Replication => "replication",
            Phase::Propagation => "propagation",
            Phase::Reduction => "reduction",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Words, messages and time of one rank in one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseCounts {
    /// Buffer elements sent (an `f64` or a `u32` is one word each), to other ranks only.
    pub words_sent: u64,
    /// Buffer elements received from other ranks.
    pub words_received: u64,
    /// Point-to-point transfers to other ranks, whatever their length (empty ones included).
    pub messages_sent: u64,
    /// Point-to-point transfers received from other ranks.
    pub messages_received: u64,
    /// Wall time inside communication calls of this phase.
    pub seconds: f64,
}

impl PhaseCounts {
    /// The counts without the time (for exact comparisons).
    pub fn volume(&self) -> [u64; 4] {
        [
            self.words_sent,
            self.words_received,
            self.messages_sent,
            self.messages_received,
        ]
    }
    fn add(&mut self, other: &PhaseCounts) {
        self.words_sent += other.words_sent;
        self.words_received += other.words_received;
        self.messages_sent += other.messages_sent;
        self.messages_received += other.messages_received;
        self.seconds += other.seconds;
    }
}

/// What one rank communicated, by phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommStats {
    phases: [PhaseCounts; 3],
}

impl CommStats {
    /// The counts of one phase.
    pub fn phase(&self, phase: Phase) -> &PhaseCounts {
        &self.phases[phase.index()]
    }
    /// The counts of one phase, for a backend to add to.
    pub fn phase_mut(&mut self, phase: Phase) -> &mut PhaseCounts {
        &mut self.phases[phase.index()]
    }
    /// Sum over phases.
    pub fn total(&self) -> PhaseCounts {
        let mut t = PhaseCounts::default();
        for p in &self.phases {
            t.add(p);
        }
        t
    }
    pub(crate) fn record_send(&mut self, phase: Phase, words: usize) {
        let p = self.phase_mut(phase);
        p.words_sent += words as u64;
        p.messages_sent += 1;
    }
    pub(crate) fn record_receive(&mut self, phase: Phase, words: usize) {
        let p = self.phase_mut(phase);
        p.words_received += words as u64;
        p.messages_received += 1;
    }
    pub(crate) fn record_time(&mut self, phase: Phase, elapsed: Duration) {
        self.phase_mut(phase).seconds += elapsed.as_secs_f64();
    }
}

/// Why a communication call failed.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum CommError {
    /// Another rank failed first; this rank's collective was abandoned instead of hanging.
    #[error("rank {rank} failed, so the collective cannot complete")]
    PeerFailed {
        /// The rank that failed.
        rank: usize,
    },
    /// A peer returned from its body while this rank still waited for a message from it.
    #[error("rank {rank} finished without sending the message rank {waiting} waits for (the ranks called different collectives)")]
    PeerExited {
        /// The rank that exited.
        rank: usize,
        /// The rank left waiting.
        waiting: usize,
    },
    /// The system refused a rank's thread (in-process ranks only).
    #[error(transparent)]
    Threads(#[from] crate::par::PoolError),
    /// A call's arguments break its contract (mismatched block counts, a rank out of range...).
    #[error("{call}: {message}")]
    Usage {
        /// The communicator method that refused (`"all_gather_f64"`).
        call: &'static str,
        /// What was wrong with the arguments.
        message: String,
    },
}

/// An MPI-like communicator. Every rank of the communicator must make the same sequence of
/// collective calls with consistent arguments (block counts, root), as in MPI.
pub trait Communicator {
    /// This rank's index in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Collective: the ranks that pass the same `color` form a new communicator, ordered by
    /// `key` then by rank here (`MPI_Comm_split`).
    fn split(&self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError>;
    /// Collective: concatenation, in rank order, of every rank's `send`; rank `k` sends
    /// `counts[k]` values.
    fn all_gather_f64(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError>;
    /// [`Communicator::all_gather_f64`] for indices.
    fn all_gather_u32(
        &self,
        phase: Phase,
        send: &[u32],
        counts: &[usize],
    ) -> Result<Vec<u32>, CommError>;
    /// Collective: `send` (length `sum(counts)`) is summed over ranks and rank `k` gets its block
    /// of `counts[k]` values.
    fn reduce_scatter_sum(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError>;
    /// Collective: `buf` becomes its sum over ranks.
    fn all_reduce_sum(&self, phase: Phase, buf: &mut [f64]) -> Result<(), CommError>;
    /// Collective: every rank's `buf` becomes the root's.
    fn broadcast_f64(&self, phase: Phase, root: usize, buf: &mut [f64]) -> Result<(), CommError>;
    /// Sends `send` to `dest` and returns what `source` sent to this rank (any length).
    fn send_recv_f64(
        &self,
        phase: Phase,
        send: &[f64],
        dest: usize,
        source: usize,
    ) -> Result<Vec<f64>, CommError>;
    /// [`Communicator::send_recv_f64`] for indices.
    fn send_recv_u32(
        &self,
        phase: Phase,
        send: &[u32],
        dest: usize,
        source: usize,
    ) -> Result<Vec<u32>, CommError>;
    /// Collective: returns once every rank has entered it.
    fn barrier(&self) -> Result<(), CommError>;
    /// Backend part of [`Communicator::send_bytes`], called with `dest` already checked.
    fn post_bytes(&self, dest: usize, bytes: &[u8]) -> Result<(), CommError>;
    /// Backend part of the receives: the next [`Communicator::send_bytes`] message from `source`
    /// (any rank when `None`, already checked), waiting for it when `block`, else `None` when it
    /// has not arrived.
    fn take_bytes(
        &self,
        source: Option<usize>,
        block: bool,
    ) -> Result<Option<(usize, Vec<u8>)>, CommError>;
    /// What this rank has communicated so far, over all communicators split from the same world.
    fn stats(&self) -> CommStats;

    /// Cyclic shift by `offset`: sends `send` to rank `rank - offset` and returns the block of
    /// rank `rank + offset` (mod size), so that after the call rank `i` holds what rank
    /// `i + offset` held.
    fn shift_f64(&self, phase: Phase, send: &[f64], offset: usize) -> Result<Vec<f64>, CommError> {
        let (q, i) = (self.size(), self.rank());
        let o = offset % q;
        self.send_recv_f64(phase, send, (i + q - o) % q, (i + o) % q)
    }
    /// Sends `bytes` to rank `dest` as one point-to-point message, for protocols that are not
    /// collectives (LDA's master and workers). Messages from one rank to another arrive in the
    /// order sent, as in MPI, and never match a collective's. Not counted in [`CommStats`]: the
    /// protocols that use them keep their own byte counts.
    fn send_bytes(&self, dest: usize, bytes: &[u8]) -> Result<(), CommError> {
        check::peer("send", dest, self.size())?;
        self.post_bytes(dest, bytes)
    }
    /// Blocks for the next message of [`Communicator::send_bytes`] from `source` (from any rank
    /// when `None`); returns its sender and bytes.
    fn receive_bytes(&self, source: Option<usize>) -> Result<(usize, Vec<u8>), CommError> {
        check::source("receive", source, self.size())?;
        self.take_bytes(source, true)?.ok_or(CommError::PeerExited {
            rank: source.unwrap_or(usize::MAX),
            waiting: self.rank(),
        })
    }
    /// [`Communicator::receive_bytes`] without blocking: `None` when no such message is there.
    fn try_receive_bytes(
        &self,
        source: Option<usize>,
    ) -> Result<Option<(usize, Vec<u8>)>, CommError> {
        check::source("receive", source, self.size())?;
        self.take_bytes(source, false)
    }
    /// [`Communicator::shift_f64`] for indices.
    fn shift_u32(&self, phase: Phase, send: &[u32], offset: usize) -> Result<Vec<u32>, CommError> {
        let (q, i) = (self.size(), self.rank());
        let o = offset % q;
        self.send_recv_u32(phase, send, (i + q - o) % q, (i + o) % q)
    }
}

/// Argument checks every backend makes before a collective, so that both report misuse alike.
pub(crate) mod check {
    use super::CommError;

    fn counts(call: &'static str, counts: &[usize], size: usize) -> Result<(), CommError> {
        if counts.len() != size {
            return Err(CommError::Usage {
                call,
                message: format!(
                    "{} block counts for a communicator of {size} ranks",
                    counts.len()
                ),
            });
        }
        Ok(())
    }

    /// An all-gather where rank `rank` sends `sent` values.
    pub fn all_gather(
        rank: usize,
        sent: usize,
        block_counts: &[usize],
        size: usize,
    ) -> Result<(), CommError> {
        counts("all-gather", block_counts, size)?;
        if sent != block_counts[rank] {
            return Err(CommError::Usage {
                call: "all-gather",
                message: format!(
                    "rank {rank} sends {sent} values, counts say {}",
                    block_counts[rank]
                ),
            });
        }
        Ok(())
    }

    /// A reduce-scatter of a buffer of `sent` values.
    pub fn reduce_scatter(
        sent: usize,
        block_counts: &[usize],
        size: usize,
    ) -> Result<(), CommError> {
        counts("reduce-scatter", block_counts, size)?;
        let total: usize = block_counts.iter().sum();
        if sent != total {
            return Err(CommError::Usage {
                call: "reduce-scatter",
                message: format!("buffer of {sent} values, counts sum to {total}"),
            });
        }
        Ok(())
    }

    /// A point-to-point message to or from `peer`.
    pub fn peer(call: &'static str, peer: usize, size: usize) -> Result<(), CommError> {
        if peer >= size {
            return Err(CommError::Usage {
                call,
                message: format!("rank {peer} in a communicator of {size} ranks"),
            });
        }
        Ok(())
    }

    /// A send-receive to `dest` and from `source`.
    pub fn peers(dest: usize, source: usize, size: usize) -> Result<(), CommError> {
        if dest >= size || source >= size {
            return Err(CommError::Usage {
                call: "send-receive",
                message: format!("peers {dest} and {source} in a communicator of {size} ranks"),
            });
        }
        Ok(())
    }

    /// A receive from `source`, or from anyone.
    pub fn source(call: &'static str, source: Option<usize>, size: usize) -> Result<(), CommError> {
        source.map_or(Ok(()), |s| peer(call, s, size))
    }

    /// A broadcast from `root`.
    pub fn broadcast(root: usize, size: usize) -> Result<(), CommError> {
        if root >= size {
            return Err(CommError::Usage {
                call: "broadcast",
                message: format!("root {root} in a communicator of {size} ranks"),
            });
        }
        Ok(())
    }
}

/// Block lengths of an even split of `n` items over `parts`: `floor(n (k+1) / parts) -
/// floor(n k / parts)` (the split every algorithm and the all-reduce use).
pub fn even_counts(n: usize, parts: usize) -> Vec<usize> {
    (0..parts)
        .map(|k| block_start(n, parts, k + 1) - block_start(n, parts, k))
        .collect()
}

/// First item of block `k` of an even split of `n` items into `parts`.
pub fn block_start(n: usize, parts: usize, k: usize) -> usize {
    (n as u128 * k as u128 / parts as u128) as usize
}
