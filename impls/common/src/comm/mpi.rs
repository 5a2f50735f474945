//! The MPI backend (cargo feature `mpi`): [`Communicator`] over rsmpi on OpenMPI, one process
//! per rank under `mpirun`.
//!
//! Sub-communicators are `MPI_Comm_split`; all-gather, reduce-scatter, all-reduce and broadcast
//! are the MPI collectives (`MPI_Allgatherv`, `MPI_Reduce_scatter`, `MPI_Allreduce`,
//! `MPI_Bcast`); a send-receive is a non-blocking send and a receive of any length, so cyclic
//! shifts cannot deadlock. OpenMPI chooses its own algorithm per call, so the words and messages
//! recorded are those of the convention's fixed algorithms ([`super::convention`]), the same
//! numbers the in-process backend counts; the time recorded is the real time inside the call.
//!
//! Errors: the MPI library's default handler aborts the whole job on a communication error, so
//! no call here returns one; a rank whose own work fails should call [`abort`], which stops
//! every rank (`MPI_Abort`) instead of leaving the others waiting.

use super::{check, convention, CommError, CommStats, Communicator, Phase};
use mpi::datatype::PartitionMut;
use mpi::raw::AsRaw;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
// rsmpi's communicator trait, under another name than ours.
use mpi::traits::Communicator as _;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// The tag of the collectives' send-receive pairs.
const SHIFT_TAG: i32 = 0;
/// The tag of [`Communicator::send_bytes`] messages, so they never match a shift's receive.
const POINT_TO_POINT_TAG: i32 = 1;

/// One rank's view of one MPI communicator.
pub struct MpiComm {
    comm: SimpleCommunicator,
    /// Shared by every communicator split from the same world on this rank.
    stats: Rc<RefCell<CommStats>>,
}

/// The MPI environment: started by [`initialize`], finalized (`MPI_Finalize`) when dropped.
pub struct Environment {
    _universe: mpi::environment::Universe,
}

/// Starts MPI (`MPI_Init`); `None` if it was already started in this process.
pub fn initialize() -> Option<Environment> {
    mpi::initialize().map(|universe| Environment {
        _universe: universe,
    })
}

/// Stops every rank of the job with `code` (`MPI_Abort` on the world).
pub fn abort(code: i32) -> ! {
    SimpleCommunicator::world().abort(code)
}

impl MpiComm {
    /// The world communicator of an initialized MPI environment (keep the [`Environment`]
    /// alive while this is used).
    pub fn world() -> MpiComm {
        MpiComm {
            comm: SimpleCommunicator::world(),
            stats: Rc::new(RefCell::new(CommStats::default())),
        }
    }

    /// Rank 0 receives every rank's `data` (any lengths), in rank order; the others get `None`.
    /// Not counted: for collecting results outside the algorithms.
    pub fn gather_uncounted(&self, data: &[f64]) -> Option<Vec<Vec<f64>>> {
        let root = self.comm.process_at_rank(0);
        let len = data.len() as u64;
        if self.comm.rank() != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(data);
            return None;
        }
        let mut lens = vec![0u64; self.size()];
        root.gather_into_root(&len, &mut lens[..]);
        let counts: Vec<usize> = lens.iter().map(|&n| n as usize).collect();
        let (c, displs) = mpi_counts(&counts).ok()?;
        let mut all = vec![0.0f64; counts.iter().sum()];
        {
            let mut part = PartitionMut::new(&mut all[..], c, &displs[..]);
            root.gather_varcount_into_root(data, &mut part);
        }
        let mut out = Vec::with_capacity(counts.len());
        let mut at = 0;
        for n in counts {
            out.push(all[at..at + n].to_vec());
            at += n;
        }
        Some(out)
    }

    fn timed<R>(&self, phase: Phase, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.stats.borrow_mut().record_time(phase, t.elapsed());
        r
    }

    fn record(&self, f: impl FnOnce(&mut CommStats)) {
        f(&mut self.stats.borrow_mut())
    }

    fn all_gather<T: Equivalence + Default + Clone>(
        &self,
        phase: Phase,
        send: &[T],
        counts: &[usize],
    ) -> Result<Vec<T>, CommError> {
        let i = self.rank();
        check::all_gather(i, send.len(), counts, self.size())?;
        let (c, displs) = mpi_counts(counts)?;
        let mut out = vec![T::default(); counts.iter().sum()];
        self.timed(phase, || {
            let mut part = PartitionMut::new(&mut out[..], c, &displs[..]);
            self.comm.all_gather_varcount_into(send, &mut part);
        });
        self.record(|s| convention::all_gather(s, phase, i, counts));
        Ok(out)
    }

    fn send_recv<T: Equivalence>(
        &self,
        phase: Phase,
        send: &[T],
        dest: usize,
        source: usize,
    ) -> Result<Vec<T>, CommError> {
        check::peers(dest, source, self.size())?;
        let got = self.timed(phase, || {
            mpi::request::scope(|scope| {
                let sent = self
                    .comm
                    .process_at_rank(dest as i32)
                    .immediate_send_with_tag(scope, send, SHIFT_TAG);
                let (got, _) = self
                    .comm
                    .process_at_rank(source as i32)
                    .receive_vec_with_tag::<T>(SHIFT_TAG);
                sent.wait();
                got
            })
        });
        let i = self.rank();
        self.record(|s| {
            convention::send_recv(s, phase, i, (dest, send.len()), (source, got.len()))
        });
        Ok(got)
    }
}

/// Block counts and displacements as MPI's `int`s.
fn mpi_counts(counts: &[usize]) -> Result<(Vec<i32>, Vec<i32>), CommError> {
    let too_big = || CommError::Usage {
        call: "collective",
        message: "more than 2^31 - 1 values in one call (MPI counts are int)".to_string(),
    };
    let c: Vec<i32> = counts
        .iter()
        .map(|&n| i32::try_from(n).map_err(|_| too_big()))
        .collect::<Result<_, _>>()?;
    let mut displs = Vec::with_capacity(c.len());
    let mut at = 0i32;
    for &n in &c {
        displs.push(at);
        at = at.checked_add(n).ok_or_else(too_big)?;
    }
    Ok((c, displs))
}

impl Communicator for MpiComm {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }
    fn size(&self) -> usize {
        self.comm.size() as usize
    }

    fn split(&self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let usage = |what: &str| CommError::Usage {
            call: "split",
            message: format!("{what} does not fit MPI's int"),
        };
        let color = i32::try_from(color).map_err(|_| usage("color"))?;
        let key = i32::try_from(key).map_err(|_| usage("key"))?;
        let comm = self
            .comm
            .split_by_color_with_key(Color::with_value(color), key)
            .ok_or(CommError::Usage {
                call: "split",
                message: "MPI_Comm_split returned no communicator".to_string(),
            })?;
        Ok(Box::new(MpiComm {
            comm,
            stats: Rc::clone(&self.stats),
        }))
    }

    fn all_gather_f64(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError> {
        self.all_gather(phase, send, counts)
    }

    fn all_gather_u32(
        &self,
        phase: Phase,
        send: &[u32],
        counts: &[usize],
    ) -> Result<Vec<u32>, CommError> {
        self.all_gather(phase, send, counts)
    }

    fn reduce_scatter_sum(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError> {
        check::reduce_scatter(send.len(), counts, self.size())?;
        let i = self.rank();
        let (c, _) = mpi_counts(counts)?;
        let mut out = vec![0.0f64; counts[i]];
        self.timed(phase, || {
            // SAFETY: `send` holds sum(counts) f64s and `out` counts[rank] of them, as
            // MPI_Reduce_scatter reads and writes; `c` has one count per rank of the
            // communicator; the datatype, operation and communicator handles are live.
            let rc = unsafe {
                mpi::ffi::MPI_Reduce_scatter(
                    send.as_ptr().cast(),
                    out.as_mut_ptr().cast(),
                    c.as_ptr(),
                    f64::equivalent_datatype().as_raw(),
                    mpi::collective::SystemOperation::sum().as_raw(),
                    self.comm.as_raw(),
                )
            };
            debug_assert_eq!(rc, 0, "MPI_Reduce_scatter failed");
        });
        self.record(|s| convention::reduce_scatter(s, phase, i, counts));
        Ok(out)
    }

    fn all_reduce_sum(&self, phase: Phase, buf: &mut [f64]) -> Result<(), CommError> {
        let send = buf.to_vec();
        self.timed(phase, || {
            self.comm
                .all_reduce_into(&send[..], buf, mpi::collective::SystemOperation::sum())
        });
        let (i, q) = (self.rank(), self.size());
        self.record(|s| convention::all_reduce(s, phase, i, q, buf.len()));
        Ok(())
    }

    fn broadcast_f64(&self, phase: Phase, root: usize, buf: &mut [f64]) -> Result<(), CommError> {
        let (i, q) = (self.rank(), self.size());
        check::broadcast(root, q)?;
        self.timed(phase, || {
            self.comm.process_at_rank(root as i32).broadcast_into(buf)
        });
        self.record(|s| convention::broadcast(s, phase, i, q, root, buf.len()));
        Ok(())
    }

    fn send_recv_f64(
        &self,
        phase: Phase,
        send: &[f64],
        dest: usize,
        source: usize,
    ) -> Result<Vec<f64>, CommError> {
        self.send_recv(phase, send, dest, source)
    }

    fn send_recv_u32(
        &self,
        phase: Phase,
        send: &[u32],
        dest: usize,
        source: usize,
    ) -> Result<Vec<u32>, CommError> {
        self.send_recv(phase, send, dest, source)
    }

    fn barrier(&self) -> Result<(), CommError> {
        self.comm.barrier();
        Ok(())
    }

    fn post_bytes(&self, dest: usize, bytes: &[u8]) -> Result<(), CommError> {
        self.comm
            .process_at_rank(dest as i32)
            .send_with_tag(bytes, POINT_TO_POINT_TAG);
        Ok(())
    }

    fn take_bytes(
        &self,
        source: Option<usize>,
        block: bool,
    ) -> Result<Option<(usize, Vec<u8>)>, CommError> {
        let tag = POINT_TO_POINT_TAG;
        let probed = match (source, block) {
            (Some(s), true) => Some(
                self.comm
                    .process_at_rank(s as i32)
                    .matched_probe_with_tag(tag),
            ),
            (Some(s), false) => self
                .comm
                .process_at_rank(s as i32)
                .immediate_matched_probe_with_tag(tag),
            (None, true) => Some(self.comm.any_process().matched_probe_with_tag(tag)),
            (None, false) => self
                .comm
                .any_process()
                .immediate_matched_probe_with_tag(tag),
        };
        Ok(probed.map(|probed| {
            let sender = probed.1.source_rank() as usize;
            let (bytes, _) = probed.matched_receive_vec::<u8>();
            (sender, bytes)
        }))
    }

    fn stats(&self) -> CommStats {
        *self.stats.borrow()
    }
}
