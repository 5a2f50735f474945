//! The in-process backend: `p` ranks are `p` OS threads (`std::thread::scope`) that share nothing
//! mutable; they talk only through one unbounded channel per rank (its inbox).
//!
//! Every message carries its communicator's context id, the sequence number of the collective
//! call on that communicator, a step within the call and the sender, so a rank can match
//! messages that arrive early (from a faster peer already in a later call) by parking them.
//! Sends never block, so send-receive pairs and ring steps cannot deadlock.
//!
//! Failure: a rank whose closure returns an error or panics sends `Abort` to every rank; a rank
//! blocked on a receive then fails with [`CommError::PeerFailed`] instead of hanging. A rank that
//! finishes sends `Done`, so a peer still waiting for its message fails with
//! [`CommError::PeerExited`] (mismatched collectives are a bug, reported rather than hung on).
//! [`run_threads`] returns the error of the rank that failed first.

use super::{check, even_counts, CommError, CommStats, Communicator, Phase};
use crate::par::PoolError;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::time::Instant;

enum Payload {
    F64(Vec<f64>),
    U32(Vec<u32>),
    Usize(Vec<usize>),
    /// A point-to-point message ([`Communicator::send_bytes`]).
    Bytes(Vec<u8>),
    /// The sender failed.
    Abort,
    /// The sender finished and will send nothing more.
    Done,
}

struct Envelope {
    ctx: u64,
    seq: u64,
    step: u64,
    /// World rank of the sender.
    src: usize,
    payload: Payload,
}

/// Element types that travel in messages.
trait Word: Copy + Send + 'static {
    fn wrap(v: Vec<Self>) -> Payload;
    fn unwrap(p: Payload) -> Option<Vec<Self>>;
}
/// `impl Word for $t` carried by `Payload::$variant`.
macro_rules! word {
    ($t:ty, $variant:ident) => {
        impl Word for $t {
            fn wrap(v: Vec<$t>) -> Payload {
                Payload::$variant(v)
            }
            fn unwrap(p: Payload) -> Option<Vec<$t>> {
                match p {
                    Payload::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
word!(f64, F64);
word!(u32, U32);
word!(usize, Usize);
word!(u8, Bytes);

/// The `seq` of point-to-point messages: no collective call reaches it, so they never match one.
const POINT_TO_POINT: u64 = u64::MAX;

/// What one world rank owns: its inbox, the senders to every inbox, messages that arrived before
/// they were asked for, and its counters. Shared (single-threaded) by the rank's communicators.
struct RankCore {
    world_rank: usize,
    outboxes: Vec<Sender<Envelope>>,
    inbox: Receiver<Envelope>,
    parked: RefCell<Vec<Envelope>>,
    finished: RefCell<HashSet<usize>>,
    stats: RefCell<CommStats>,
}

/// Context id of the world communicator.
const WORLD_CONTEXT: u64 = 0;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One rank's view of one communicator of the in-process backend.
pub struct ThreadComm {
    core: Rc<RankCore>,
    ctx: u64,
    /// World ranks of the members, by rank in this communicator.
    members: Vec<usize>,
    rank: usize,
    /// Collective calls made on this communicator (the same on every member).
    calls: Cell<u64>,
}

impl ThreadComm {
    fn next_call(&self) -> u64 {
        let c = self.calls.get();
        self.calls.set(c + 1);
        c
    }

    fn post<T: Word>(
        &self,
        phase: Option<Phase>,
        dest: usize,
        seq: u64,
        step: u64,
        data: Vec<T>,
    ) -> Result<(), CommError> {
        let world_dest = self.members[dest];
        if let (Some(phase), true) = (phase, world_dest != self.core.world_rank) {
            self.core.stats.borrow_mut().record_send(phase, data.len());
        }
        let env = Envelope {
            ctx: self.ctx,
            seq,
            step,
            src: self.core.world_rank,
            payload: T::wrap(data),
        };
        // A closed inbox means that rank's thread has ended; if it is waited for, the receive
        // side reports it.
        let _ = self.core.outboxes[world_dest].send(env);
        Ok(())
    }

    fn take<T: Word>(
        &self,
        phase: Option<Phase>,
        source: usize,
        seq: u64,
        step: u64,
    ) -> Result<Vec<T>, CommError> {
        let world_src = self.members[source];
        let matches = |e: &Envelope| {
            e.ctx == self.ctx && e.seq == seq && e.step == step && e.src == world_src
        };
        let env =
            self.find_envelope(matches, Some(world_src), true)?
                .ok_or(CommError::PeerExited {
                    rank: world_src,
                    waiting: self.core.world_rank,
                })?;
        let data = T::unwrap(env.payload).ok_or(CommError::Usage {
            call: "receive",
            message: "message of another element type (ranks called different collectives)".into(),
        })?;
        if let (Some(phase), true) = (phase, world_src != self.core.world_rank) {
            self.core
                .stats
                .borrow_mut()
                .record_receive(phase, data.len());
        }
        Ok(data)
    }

    /// The first envelope that `matches`, parked or from the inbox (parking the others), in
    /// arrival order. `sender` is the world rank it must come from (any member when `None`): when
    /// that rank (or every other member) has finished, waiting is an error. Without `block`,
    /// `None` when no such envelope has arrived yet.
    fn find_envelope(
        &self,
        matches: impl Fn(&Envelope) -> bool,
        sender: Option<usize>,
        block: bool,
    ) -> Result<Option<Envelope>, CommError> {
        {
            let mut parked = self.core.parked.borrow_mut();
            // `remove`, not `swap_remove`: messages from one sender keep their order.
            if let Some(k) = parked.iter().position(&matches) {
                return Ok(Some(parked.remove(k)));
            }
        }
        let gone = CommError::PeerExited {
            rank: sender.unwrap_or(usize::MAX),
            waiting: self.core.world_rank,
        };
        loop {
            let exited = {
                let finished = self.core.finished.borrow();
                match sender {
                    Some(w) => finished.contains(&w),
                    None => self
                        .members
                        .iter()
                        .all(|m| *m == self.core.world_rank || finished.contains(m)),
                }
            };
            if exited {
                return Err(gone);
            }
            let e = if block {
                self.core.inbox.recv().map_err(|_| gone.clone())?
            } else {
                match self.core.inbox.try_recv() {
                    Ok(e) => e,
                    Err(TryRecvError::Empty) => return Ok(None),
                    Err(TryRecvError::Disconnected) => return Err(gone),
                }
            };
            match e.payload {
                Payload::Abort => return Err(CommError::PeerFailed { rank: e.src }),
                Payload::Done => {
                    self.core.finished.borrow_mut().insert(e.src);
                }
                _ if matches(&e) => return Ok(Some(e)),
                _ => self.core.parked.borrow_mut().push(e),
            }
        }
    }

    fn send_recv<T: Word>(
        &self,
        phase: Phase,
        send: &[T],
        dest: usize,
        source: usize,
    ) -> Result<Vec<T>, CommError> {
        check::peers(dest, source, self.size())?;
        self.timed(phase, || {
            let seq = self.next_call();
            self.post(Some(phase), dest, seq, 0, send.to_vec())?;
            self.take(Some(phase), source, seq, 0)
        })
    }

    fn timed<R>(&self, phase: Phase, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.core.stats.borrow_mut().record_time(phase, t.elapsed());
        r
    }

    fn ring_all_gather<T: Word + Default>(
        &self,
        phase: Phase,
        send: &[T],
        counts: &[usize],
    ) -> Result<Vec<T>, CommError> {
        let (q, i) = (self.size(), self.rank);
        check::all_gather(i, send.len(), counts, q)?;
        let seq = self.next_call();
        let mut offsets = vec![0usize; q + 1];
        for k in 0..q {
            offsets[k + 1] = offsets[k] + counts[k];
        }
        let mut out = vec![T::default(); offsets[q]];
        out[offsets[i]..offsets[i + 1]].copy_from_slice(send);
        let (next, prev) = ((i + 1) % q, (i + q - 1) % q);
        for s in 0..q.saturating_sub(1) {
            let give = (i + q - s) % q;
            let get = (i + 2 * q - s - 1) % q;
            let block = out[offsets[give]..offsets[give + 1]].to_vec();
            self.post(Some(phase), next, seq, s as u64, block)?;
            let got: Vec<T> = self.take(Some(phase), prev, seq, s as u64)?;
            if got.len() != counts[get] {
                return Err(CommError::Usage {
                    call: "all-gather",
                    message: format!(
                        "block {get} has {} values, counts say {}",
                        got.len(),
                        counts[get]
                    ),
                });
            }
            out[offsets[get]..offsets[get + 1]].copy_from_slice(&got);
        }
        Ok(out)
    }

    fn ring_reduce_scatter(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError> {
        let (q, i) = (self.size(), self.rank);
        check::reduce_scatter(send.len(), counts, q)?;
        let mut offsets = vec![0usize; q + 1];
        for k in 0..q {
            offsets[k + 1] = offsets[k] + counts[k];
        }
        let seq = self.next_call();
        let block = |k: usize| &send[offsets[k]..offsets[k + 1]];
        if q == 1 {
            return Ok(send.to_vec());
        }
        let (next, prev) = ((i + 1) % q, (i + q - 1) % q);
        // The partial sum in flight: starts as this rank's contribution to block i - 1.
        let mut partial = block((i + q - 1) % q).to_vec();
        for s in 0..q - 1 {
            self.post(Some(phase), next, seq, s as u64, partial)?;
            let get = (i + 2 * q - s - 2) % q;
            let mut got: Vec<f64> = self.take(Some(phase), prev, seq, s as u64)?;
            if got.len() != counts[get] {
                return Err(CommError::Usage {
                    call: "reduce-scatter",
                    message: format!(
                        "block {get} has {} values, counts say {}",
                        got.len(),
                        counts[get]
                    ),
                });
            }
            for (g, &x) in got.iter_mut().zip(block(get)) {
                *g += x;
            }
            partial = got;
        }
        // After q - 1 steps the block in hand is block i, fully summed.
        Ok(partial)
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.members.len()
    }

    fn split(&self, color: usize, key: usize) -> Result<Box<dyn Communicator>, CommError> {
        let seq = self.next_call();
        let q = self.size();
        // Everyone tells everyone its (color, key); not counted (setup).
        for dest in 0..q {
            self.post(None, dest, seq, 0, vec![color, key])?;
        }
        let mut group: Vec<(usize, usize)> = Vec::new(); // (key, parent rank)
        for src in 0..q {
            let ck: Vec<usize> = self.take(None, src, seq, 0)?;
            if ck.len() == 2 && ck[0] == color {
                group.push((ck[1], src));
            }
        }
        group.sort_unstable();
        let members: Vec<usize> = group.iter().map(|&(_, r)| self.members[r]).collect();
        let rank = group
            .iter()
            .position(|&(_, r)| r == self.rank)
            .ok_or(CommError::Usage {
                call: "split",
                message: "this rank is missing from its own color".into(),
            })?;
        let ctx = mix(mix(self.ctx ^ mix(seq)) ^ color as u64);
        Ok(Box::new(ThreadComm {
            core: Rc::clone(&self.core),
            ctx,
            members,
            rank,
            calls: Cell::new(0),
        }))
    }

    fn all_gather_f64(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError> {
        self.timed(phase, || self.ring_all_gather(phase, send, counts))
    }

    fn all_gather_u32(
        &self,
        phase: Phase,
        send: &[u32],
        counts: &[usize],
    ) -> Result<Vec<u32>, CommError> {
        self.timed(phase, || self.ring_all_gather(phase, send, counts))
    }

    fn reduce_scatter_sum(
        &self,
        phase: Phase,
        send: &[f64],
        counts: &[usize],
    ) -> Result<Vec<f64>, CommError> {
        self.timed(phase, || self.ring_reduce_scatter(phase, send, counts))
    }

    fn all_reduce_sum(&self, phase: Phase, buf: &mut [f64]) -> Result<(), CommError> {
        self.timed(phase, || {
            let q = self.size();
            let counts = even_counts(buf.len(), q);
            let mine = self.ring_reduce_scatter(phase, buf, &counts)?;
            let all = self.ring_all_gather(phase, &mine, &counts)?;
            buf.copy_from_slice(&all);
            Ok(())
        })
    }

    fn broadcast_f64(&self, phase: Phase, root: usize, buf: &mut [f64]) -> Result<(), CommError> {
        self.timed(phase, || {
            let q = self.size();
            check::broadcast(root, q)?;
            let seq = self.next_call();
            let v = (self.rank + q - root) % q; // rank relative to the root
            let mut mask = 1usize;
            while mask < q {
                if v & mask != 0 {
                    let got: Vec<f64> = self.take(Some(phase), (v - mask + root) % q, seq, 0)?;
                    if got.len() != buf.len() {
                        return Err(CommError::Usage {
                            call: "broadcast",
                            message: format!(
                                "root sent {} values, buffer holds {}",
                                got.len(),
                                buf.len()
                            ),
                        });
                    }
                    buf.copy_from_slice(&got);
                    break;
                }
                mask <<= 1;
            }
            mask >>= 1;
            while mask > 0 {
                if v + mask < q {
                    self.post(Some(phase), (v + mask + root) % q, seq, 0, buf.to_vec())?;
                }
                mask >>= 1;
            }
            Ok(())
        })
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
        // Dissemination barrier, uncounted: round k signals rank + 2^k and waits for rank - 2^k.
        let seq = self.next_call();
        let (q, i) = (self.size(), self.rank);
        let mut dist = 1usize;
        let mut round = 0u64;
        while dist < q {
            self.post::<usize>(None, (i + dist) % q, seq, round, Vec::new())?;
            let _: Vec<usize> = self.take(None, (i + q - dist) % q, seq, round)?;
            dist <<= 1;
            round += 1;
        }
        Ok(())
    }

    fn post_bytes(&self, dest: usize, bytes: &[u8]) -> Result<(), CommError> {
        self.post(None, dest, POINT_TO_POINT, 0, bytes.to_vec())
    }

    fn take_bytes(
        &self,
        source: Option<usize>,
        block: bool,
    ) -> Result<Option<(usize, Vec<u8>)>, CommError> {
        let world_src = source.map(|s| self.members[s]);
        let matches = |e: &Envelope| {
            e.ctx == self.ctx
                && e.seq == POINT_TO_POINT
                && world_src.is_none_or(|w| e.src == w)
                && self.members.contains(&e.src)
        };
        let Some(env) = self.find_envelope(matches, world_src, block)? else {
            return Ok(None);
        };
        let sender = self
            .members
            .iter()
            .position(|&m| m == env.src)
            .unwrap_or(usize::MAX);
        let bytes = u8::unwrap(env.payload).ok_or(CommError::Usage {
            call: "receive",
            message: "a point-to-point message that is not bytes".into(),
        })?;
        Ok(Some((sender, bytes)))
    }

    fn stats(&self) -> CommStats {
        *self.core.stats.borrow()
    }
}

/// What one rank returned and what it communicated.
#[derive(Clone, Debug, PartialEq)]
pub struct RankRun<R> {
    /// What the rank's body returned.
    pub value: R,
    /// What the rank sent and received, by phase, over the whole body.
    pub stats: CommStats,
}

/// The first failure of a run: which rank and its error.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFailure<E> {
    /// The rank whose body failed first.
    pub rank: usize,
    /// The error that rank's body returned.
    pub error: E,
}

/// Runs `body` on `ranks` threads, each with a world communicator of that size, and returns each
/// rank's value and counters, or the error of the rank that failed first (the others then fail
/// with [`CommError::PeerFailed`], which is not returned). A panic in a rank is re-raised here
/// after every thread has stopped.
///
/// A rank whose thread the system refuses fails with the [`PoolError`] (as its error type), and
/// the ranks already started are aborted as after any failure: the run returns an error, never
/// hangs and never runs on fewer ranks.
pub fn run_threads<R, E, F>(ranks: usize, body: F) -> Result<Vec<RankRun<R>>, RankFailure<E>>
where
    R: Send,
    E: Send + From<PoolError>,
    F: Fn(&dyn Communicator) -> Result<R, E> + Sync,
{
    run_threads_with(ranks, |_| std::thread::Builder::new(), body)
}

/// [`run_threads`] with each rank's thread made by `builder(rank)`, so a test can make the
/// system refuse one.
fn run_threads_with<R, E, F>(
    ranks: usize,
    builder: impl Fn(usize) -> std::thread::Builder,
    body: F,
) -> Result<Vec<RankRun<R>>, RankFailure<E>>
where
    R: Send,
    E: Send + From<PoolError>,
    F: Fn(&dyn Communicator) -> Result<R, E> + Sync,
{
    let ranks = ranks.max(1);
    let (outboxes, inboxes): (Vec<Sender<Envelope>>, Vec<Receiver<Envelope>>) =
        (0..ranks).map(|_| channel()).unzip();
    // The only state the threads share, and only to report which failure came first.
    let first_failure = AtomicUsize::new(usize::MAX);
    let results: Vec<std::thread::Result<Result<RankRun<R>, E>>> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(ranks);
        let mut refused = None;
        for (world_rank, inbox) in inboxes.into_iter().enumerate() {
            let outboxes = outboxes.clone();
            let body = &body;
            let first_failure = &first_failure;
            let started = builder(world_rank).spawn_scoped(scope, move || {
                let core = Rc::new(RankCore {
                    world_rank,
                    outboxes,
                    inbox,
                    parked: RefCell::new(Vec::new()),
                    finished: RefCell::new(HashSet::new()),
                    stats: RefCell::new(CommStats::default()),
                });
                let world = ThreadComm {
                    core: Rc::clone(&core),
                    ctx: WORLD_CONTEXT,
                    members: (0..ranks).collect(),
                    rank: world_rank,
                    calls: Cell::new(0),
                };
                let outcome = catch_unwind(AssertUnwindSafe(|| body(&world)));
                let failed = !matches!(outcome, Ok(Ok(_)));
                if failed {
                    let _ = first_failure.compare_exchange(
                        usize::MAX,
                        world_rank,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                }
                for (dest, out) in core.outboxes.iter().enumerate() {
                    if dest != world_rank {
                        let _ = out.send(Envelope {
                            ctx: u64::MAX,
                            seq: 0,
                            step: 0,
                            src: world_rank,
                            payload: if failed {
                                Payload::Abort
                            } else {
                                Payload::Done
                            },
                        });
                    }
                }
                let stats = *core.stats.borrow();
                outcome.map(|r| r.map(|value| RankRun { value, stats }))
            });
            match started.map_err(|e| PoolError::refused(ranks, e)) {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    refused = Some((world_rank, e));
                    break;
                }
            }
        }
        if let Some((rank, _)) = &refused {
            // The ranks already started may wait for this one: abort them, as a failed rank
            // would. The ranks after it were never started and have no thread to stop.
            let _ = first_failure.compare_exchange(
                usize::MAX,
                *rank,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
            for out in &outboxes[..*rank] {
                let _ = out.send(Envelope {
                    ctx: u64::MAX,
                    seq: 0,
                    step: 0,
                    src: *rank,
                    payload: Payload::Abort,
                });
            }
        }
        drop(outboxes);
        let mut results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(Err))
            .collect();
        if let Some((_, e)) = refused {
            results.push(Ok(Err(E::from(e))));
        }
        results
    });
    let mut runs = Vec::with_capacity(ranks);
    let mut errors: Vec<Option<E>> = Vec::new();
    let mut panic = None;
    for (rank, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok(run)) => runs.push(run),
            Ok(Err(e)) => {
                errors.resize_with(rank + 1, || None);
                errors[rank] = Some(e);
            }
            Err(p) => {
                if panic.is_none() {
                    panic = Some(p);
                }
            }
        }
    }
    if let Some(p) = panic {
        resume_unwind(p);
    }
    if runs.len() == ranks {
        return Ok(runs);
    }
    let first = first_failure.load(Ordering::SeqCst);
    let rank = if errors.get(first).is_some_and(Option::is_some) {
        first
    } else {
        errors.iter().position(Option::is_some).unwrap_or(0)
    };
    match errors.get_mut(rank).and_then(Option::take) {
        Some(error) => Err(RankFailure { rank, error }),
        // Unreachable: a missing run is either a panic (re-raised above) or an error.
        None => panic!("a rank failed without an error or a panic"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 2 of 4 cannot get a thread (a stack no system grants): the run is that rank's
    /// error, and ranks 0 and 1, already waiting in a collective that needs rank 2, are aborted
    /// rather than left hanging.
    #[test]
    fn a_rank_whose_thread_is_refused_fails_the_run_and_stops_the_started_ranks() {
        let builder = |rank: usize| {
            let b = std::thread::Builder::new();
            if rank == 2 {
                b.stack_size(1 << 62)
            } else {
                b
            }
        };
        let out = run_threads_with(4, builder, |c| -> Result<(), CommError> {
            c.all_gather_f64(Phase::Replication, &[1.0], &[1, 1, 1, 1])?;
            Ok(())
        });
        let failure = out.unwrap_err();
        assert_eq!(failure.rank, 2);
        match failure.error {
            CommError::Threads(e) => assert_eq!(e.threads, 4),
            other => panic!("expected the refused thread, got {other}"),
        }
        // The same body with every thread granted runs on all four ranks.
        let runs = run_threads(4, |c| -> Result<(), CommError> {
            c.all_gather_f64(Phase::Replication, &[1.0], &[1, 1, 1, 1])?;
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.len(), 4);
    }

    /// The first rank refused: nothing started, the run is still an error and not a panic.
    #[test]
    fn a_refused_first_rank_is_an_error() {
        let out = run_threads_with(
            2,
            |_| std::thread::Builder::new().stack_size(1 << 62),
            |c| -> Result<usize, String> { Ok(c.rank()) },
        );
        let failure = out.unwrap_err();
        assert_eq!(failure.rank, 0);
        assert!(failure.error.contains("cannot start"), "{}", failure.error);
    }
}
