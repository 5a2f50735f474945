//! The master-worker machinery `sync` and `async` share: the document partition, the messages,
//! the worker loop, the master's global tables and its progress bookkeeping.
//!
//! Workers and the master communicate only through messages that own their data (a delta, a
//! copy of the global table), never through shared mutable memory. In one process they are
//! threads linked by `std::sync::mpsc` channels; across the ranks of a communicator (MPI
//! processes) the same protocol runs over point-to-point messages, the messages encoded as bytes
//! by `wire` ([`crate::LdaSampler::train_on_ranks`]):
//!
//! ```text
//! worker i                                   master (the calling thread)
//!   sample checkpoint_docs documents
//!   Checkpoint { delta since last send } ──▶ global += delta          (sync: after all p arrived)
//!   wait (or keep sampling: non-blocking) ◀── Table { n_kw, n_k } | Stop
//!   ... until its share of iterations is done or Stop arrives
//!   Final { last delta, assignments, n_dk } ──▶ assemble the final state
//! ```
//!
//! A worker's local table is always `last table received + its own changes since`. With the
//! dense encoding it keeps a copy `base` of the last table received and sends `local - base`
//! (O(W K)); with the sparse encoding it records every topic move in a hash map keyed by
//! `word * K + topic` and sends the map. When a reply `G` arrives, `local = G + (changes not yet
//! in G)`: with blocking exchange that is `G` itself; with non-blocking exchange the changes
//! made while the reply was in flight are kept (`local - base` after the send, or the map),
//! which is the paper's double buffer. At most one reply is outstanding: a worker reaching its
//! next checkpoint first waits for the previous reply.
//!
//! Counts are conserved: the master's table is always the sum of every worker's tokens as of its
//! last send, which [`crate::LdaParams::verify_invariants`] checks after every merge.

use crate::corpus::Corpus;
use crate::kernel::{make_kernel, KernelSweep, MoveLogDyn, Tables};
use crate::model::{compare_tables, doc_log_likelihood, word_log_likelihood, LdaState};
use crate::problem::{
    Control, DeltaEncoding, InvariantRecord, IterationReport, LdaError, LdaOutput, LdaParams,
    LoglikPoint, WorkerStats, DENSE_DELTA_ENTRY_BYTES, SPARSE_DELTA_ENTRY_BYTES,
};
use crate::{LdaSampler, Par};
use parbench_common::comm::Communicator;
use parbench_common::par::spawn_scoped;
use parbench_common::Rng;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::time::Instant;

/// Worker `i` samples from stream `WORKER_STREAM + i`.
const WORKER_STREAM: u64 = 0x3000;
/// The stream that shuffles documents into shares.
const PARTITION_STREAM: u64 = 0x9A7;

/// A multiplicative hash for the sparse delta's integer keys (SipHash would dominate the cost of
/// recording a move).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type DeltaMap = HashMap<u64, i32, BuildHasherDefault<KeyHasher>>;

/// Net change of n_kw since the last send, keyed by `word * K + topic`.
struct SparseLog {
    topics: u64,
    map: DeltaMap,
}

impl MoveLogDyn for SparseLog {
    #[inline]
    fn moved_dyn(&mut self, w: u32, old: u32, new: u32) {
        let row = w as u64 * self.topics;
        *self.map.entry(row + old as u64).or_insert(0) -= 1;
        *self.map.entry(row + new as u64).or_insert(0) += 1;
    }
}

/// A worker's change of n_kw since its last send (n_k follows from it).
pub(crate) enum Delta {
    /// `W x K` differences.
    Dense(Vec<i32>),
    /// Nonzero differences by `word * K + topic`.
    Sparse(DeltaMap),
}

/// What a worker tells the master at a checkpoint or at the end.
pub(crate) struct Update {
    pub worker: usize,
    pub delta: Delta,
    /// Documents sampled so far, over all iterations.
    pub docs_done: u64,
    /// (iteration, document part of the log-likelihood of this worker's documents, seconds it
    /// took) for iterations finished since the last send.
    pub doc_loglik: Vec<(usize, f64, f64)>,
    /// The assignments the delta brings the master up to, when invariants are verified.
    pub snapshot: Option<Vec<Vec<u32>>>,
    /// The buffers of a table the worker no longer needs, for the master to fill with its next
    /// reply instead of allocating (ownership travels with the message, as it would over MPI
    /// with preposted buffers).
    pub spare: Option<(Vec<u32>, Vec<u32>)>,
}

/// A worker's part of the final state.
pub(crate) struct WorkerFinal {
    pub assignments: Vec<Vec<u32>>,
    pub doc_topic: Vec<u32>,
    pub stats: WorkerStats,
    /// Counts that would have gone negative when folding a reply into the local table.
    pub local_violations: Vec<String>,
}

pub(crate) enum ToMaster {
    Checkpoint(Update),
    Final(Update, Box<WorkerFinal>),
    Failed { worker: usize, reason: String },
}

pub(crate) enum FromMaster {
    Table {
        word_topic: Vec<u32>,
        topic_totals: Vec<u32>,
        /// The worker's last delta, applied and handed back for reuse as the next one's buffer.
        used_delta: Option<Delta>,
    },
    Stop,
}

/// How a worker schedules its exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// Exactly this many blocking exchanges (all workers the same), then the final flush.
    Rounds(u64),
    /// Exchange after every `checkpoint_docs` documents of its own until its share of the
    /// iterations is done.
    Own { non_blocking: bool },
}

/// Shuffles the documents with a seeded stream and cuts the shuffled order into `workers`
/// contiguous pieces of about N / workers tokens each; each share is returned sorted.
pub(crate) fn partition_docs(corpus: &Corpus, workers: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..corpus.num_docs()).collect();
    let mut rng = Rng::stream(seed, PARTITION_STREAM);
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let total = corpus.num_tokens() as u64;
    let mut shares = vec![Vec::new(); workers];
    let mut cumulative = 0u64;
    for d in order {
        // The share whose token range [i N / p, (i+1) N / p) holds this document's midpoint.
        let len = corpus.doc(d).len() as u64;
        let mid = cumulative * 2 + len;
        let share = if total == 0 {
            d % workers
        } else {
            ((mid as u128 * workers as u128) / (2 * total as u128)).min(workers as u128 - 1)
                as usize
        };
        shares[share].push(d);
        cumulative += len;
    }
    for s in &mut shares {
        s.sort_unstable();
    }
    shares
}

/// How a worker reaches the master: channels between threads ([`ChannelWorkerLink`]) or
/// point-to-point messages of a [`Communicator`] ([`crate::wire::CommWorkerLink`]).
pub(crate) trait WorkerLink {
    /// Sends a message; a failure means the master is gone, which the next receive reports.
    fn send(&mut self, message: ToMaster);
    /// Blocks for the master's next message.
    fn receive(&mut self) -> Result<FromMaster, Disconnected>;
    /// The master's next message if it has arrived.
    fn try_receive(&mut self) -> Result<Option<FromMaster>, Disconnected>;
}

/// How the master reaches its workers (numbered `0..workers()`).
pub(crate) trait MasterLink {
    fn workers(&self) -> usize;
    /// The next worker message; a worker's failure (or losing every worker) is an error.
    fn receive(&mut self) -> Result<Incoming, LdaError>;
    /// Sends `message` to `worker`; a worker that is gone has sent (or will be reported by) its
    /// `Failed` message, which the next receive returns.
    fn reply(&mut self, worker: usize, message: FromMaster);
}

pub(crate) struct ChannelWorkerLink {
    to_master: Sender<ToMaster>,
    from_master: Receiver<FromMaster>,
}

impl WorkerLink for ChannelWorkerLink {
    fn send(&mut self, message: ToMaster) {
        let _ = self.to_master.send(message);
    }
    fn receive(&mut self) -> Result<FromMaster, Disconnected> {
        self.from_master.recv().map_err(|_| Disconnected)
    }
    fn try_receive(&mut self) -> Result<Option<FromMaster>, Disconnected> {
        match self.from_master.try_recv() {
            Ok(m) => Ok(Some(m)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(Disconnected),
        }
    }
}

pub(crate) struct ChannelMasterLink {
    from_workers: Receiver<ToMaster>,
    replies: Vec<Sender<FromMaster>>,
}

impl MasterLink for ChannelMasterLink {
    fn workers(&self) -> usize {
        self.replies.len()
    }
    fn receive(&mut self) -> Result<Incoming, LdaError> {
        match self.from_workers.recv() {
            Ok(message) => Incoming::from_message(message),
            Err(_) => Err(LdaError::WorkerFailed {
                worker: usize::MAX,
                reason: "every worker hung up before sending its final state".to_owned(),
            }),
        }
    }
    fn reply(&mut self, worker: usize, message: FromMaster) {
        let _ = self.replies[worker].send(message);
    }
}

/// One worker's data.
pub(crate) struct Worker<'a> {
    pub id: usize,
    pub corpus: &'a Corpus,
    pub params: LdaParams,
    pub docs: Vec<usize>,
    pub assignments: Vec<Vec<u32>>,
    pub doc_topic: Vec<u32>,
    pub tables: Tables,
    pub schedule: Schedule,
    pub encoding: DeltaEncoding,
}

/// The mutable state of a running worker.
struct Running<'a, 'l> {
    w: Worker<'a>,
    link: &'l mut dyn WorkerLink,
    kernel: Box<dyn KernelSweep>,
    rng: Rng,
    base: Option<Tables>,
    log: Option<SparseLog>,
    stats: WorkerStats,
    docs_done: u64,
    doc_loglik: Vec<(usize, f64, f64)>,
    local_violations: Vec<String>,
    lengths: Vec<usize>,
    spare: Option<(Vec<u32>, Vec<u32>)>,
    used_delta: Option<Delta>,
}

/// Runs a worker, turning a panic into a `Failed` message so the master never waits forever.
/// `Err` when the worker panicked (its reason) or lost the master.
pub(crate) fn spawn_body(worker: Worker<'_>, link: &mut dyn WorkerLink) -> Result<(), String> {
    let id = worker.id;
    match catch_unwind(AssertUnwindSafe(|| run_worker(worker, &mut *link))) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Disconnected)) => Err("the master is gone".to_owned()),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".to_owned());
            link.send(ToMaster::Failed {
                worker: id,
                reason: reason.clone(),
            });
            Err(reason)
        }
    }
}

/// The reply could not be received: the master is gone (it failed).
pub(crate) struct Disconnected;

fn run_worker(w: Worker<'_>, link: &mut dyn WorkerLink) -> Result<(), Disconnected> {
    let kernel = make_kernel(w.params.inner, &w.params, w.corpus.num_words(), &w.tables);
    let base = (w.encoding == DeltaEncoding::Dense).then(|| w.tables.clone());
    let log = (w.encoding == DeltaEncoding::Sparse).then(|| SparseLog {
        topics: w.params.topics as u64,
        map: DeltaMap::default(),
    });
    let lengths = w.docs.iter().map(|&d| w.corpus.doc(d).len()).collect();
    let mut r = Running {
        rng: Rng::stream(w.params.seed, WORKER_STREAM + w.id as u64),
        kernel,
        base,
        log,
        stats: WorkerStats::default(),
        docs_done: 0,
        doc_loglik: Vec::new(),
        local_violations: Vec::new(),
        lengths,
        spare: None,
        used_delta: None,
        w,
        link,
    };
    r.run()
}

impl Running<'_, '_> {
    fn run(&mut self) -> Result<(), Disconnected> {
        let share = self.w.docs.len() as u64;
        let total = share * self.w.params.iterations as u64;
        let checkpoint = self.w.params.checkpoint_docs as u64;
        let mut outstanding = false;
        let mut stopped = false;
        let mut round = 0u64;
        loop {
            let more = match self.w.schedule {
                Schedule::Rounds(rounds) => round < rounds,
                Schedule::Own { .. } => self.docs_done < total,
            };
            if !more {
                break;
            }
            round += 1;
            let end = (self.docs_done + checkpoint).min(total);
            while self.docs_done < end {
                self.sample_next_doc();
                if outstanding {
                    if let Some(reply) = self.link.try_receive()? {
                        outstanding = false;
                        if !self.apply(reply) {
                            stopped = true;
                            break;
                        }
                    }
                }
            }
            if stopped {
                break;
            }
            if outstanding {
                outstanding = false;
                if !self.wait_and_apply()? {
                    break;
                }
            }
            let update = self.make_update();
            self.send(ToMaster::Checkpoint(update));
            match self.w.schedule {
                Schedule::Own { non_blocking: true } => outstanding = true,
                _ => {
                    if !self.wait_and_apply()? {
                        break;
                    }
                }
            }
        }
        if outstanding {
            self.wait_and_apply()?;
        }
        let update = self.make_update();
        let fin = Box::new(WorkerFinal {
            assignments: std::mem::take(&mut self.w.assignments),
            doc_topic: std::mem::take(&mut self.w.doc_topic),
            stats: self.stats.clone(),
            local_violations: std::mem::take(&mut self.local_violations),
        });
        self.link.send(ToMaster::Final(update, fin));
        Ok(())
    }

    /// Resamples the next document of the share (cycling through iterations).
    fn sample_next_doc(&mut self) {
        let k = self.w.params.topics;
        let share = self.w.docs.len() as u64;
        let local = (self.docs_done % share) as usize;
        let words = self.w.corpus.doc(self.w.docs[local]);
        let start = Instant::now();
        let log = self.log.as_mut().map(|l| l as &mut dyn MoveLogDyn);
        self.kernel.sweep(
            words,
            &mut self.w.assignments[local],
            &mut self.w.doc_topic[local * k..(local + 1) * k],
            &mut self.w.tables,
            &mut self.rng,
            log,
        );
        self.stats.tokens_sampled += words.len() as u64;
        self.docs_done += 1;
        if self.docs_done.is_multiple_of(share) {
            let iteration = (self.docs_done / share) as usize;
            if self.w.params.likelihood_due(iteration) {
                let eval = Instant::now();
                let ll =
                    doc_log_likelihood(&self.w.doc_topic, &self.lengths, k, self.w.params.alpha);
                self.doc_loglik
                    .push((iteration, ll, eval.elapsed().as_secs_f64()));
            }
        }
        self.stats.sampling_seconds += start.elapsed().as_secs_f64();
    }

    /// The delta since the last send, resetting the record of changes.
    fn make_update(&mut self) -> Update {
        let start = Instant::now();
        let delta = match (&mut self.base, &mut self.log) {
            (Some(base), _) => {
                let mut delta = match self.used_delta.take() {
                    Some(Delta::Dense(buffer)) => buffer,
                    _ => Vec::new(),
                };
                delta.clear();
                delta.extend(
                    self.w
                        .tables
                        .word_topic
                        .iter()
                        .zip(&base.word_topic)
                        .map(|(&l, &b)| (l as i64 - b as i64) as i32),
                );
                base.word_topic.copy_from_slice(&self.w.tables.word_topic);
                base.topic_totals
                    .copy_from_slice(&self.w.tables.topic_totals);
                self.stats.bytes_sent += DENSE_DELTA_ENTRY_BYTES * delta.len() as u64;
                Delta::Dense(delta)
            }
            (None, Some(log)) => {
                let next = match self.used_delta.take() {
                    Some(Delta::Sparse(mut buffer)) => {
                        buffer.clear();
                        buffer
                    }
                    _ => DeltaMap::default(),
                };
                let mut map = std::mem::replace(&mut log.map, next);
                map.retain(|_, v| *v != 0);
                self.stats.bytes_sent += SPARSE_DELTA_ENTRY_BYTES * map.len() as u64;
                Delta::Sparse(map)
            }
            (None, None) => Delta::Sparse(DeltaMap::default()),
        };
        let update = Update {
            worker: self.w.id,
            delta,
            docs_done: self.docs_done,
            doc_loglik: std::mem::take(&mut self.doc_loglik),
            snapshot: self
                .w
                .params
                .verify_invariants
                .then(|| self.w.assignments.clone()),
            spare: self.spare.take(),
        };
        self.stats.exchanges += 1;
        self.stats.sending_seconds += start.elapsed().as_secs_f64();
        update
    }

    fn send(&mut self, message: ToMaster) {
        let start = Instant::now();
        self.link.send(message);
        self.stats.sending_seconds += start.elapsed().as_secs_f64();
    }

    /// Blocks for the master's reply and folds it in; `Ok(false)` on `Stop`.
    fn wait_and_apply(&mut self) -> Result<bool, Disconnected> {
        let start = Instant::now();
        let reply = self.link.receive()?;
        self.stats.waiting_seconds += start.elapsed().as_secs_f64();
        Ok(self.apply(reply))
    }

    /// `local = G + (changes not yet in G)`; `false` on `Stop`.
    fn apply(&mut self, reply: FromMaster) -> bool {
        let (word_topic, topic_totals) = match reply {
            FromMaster::Table {
                word_topic,
                topic_totals,
                used_delta,
            } => {
                self.used_delta = used_delta;
                (word_topic, topic_totals)
            }
            FromMaster::Stop => return false,
        };
        let start = Instant::now();
        self.stats.bytes_received += 4 * (word_topic.len() + topic_totals.len()) as u64;
        let tables = &mut self.w.tables;
        let mut negative = 0usize;
        match (&mut self.base, &mut self.log) {
            (Some(base), _) => {
                fold(
                    &mut tables.word_topic,
                    &mut base.word_topic,
                    &word_topic,
                    &mut negative,
                );
                fold(
                    &mut tables.topic_totals,
                    &mut base.topic_totals,
                    &topic_totals,
                    &mut negative,
                );
                self.spare = Some((word_topic, topic_totals));
            }
            (None, log) => {
                let old_word_topic = std::mem::replace(&mut tables.word_topic, word_topic);
                let old_topic_totals = std::mem::replace(&mut tables.topic_totals, topic_totals);
                self.spare = Some((old_word_topic, old_topic_totals));
                if let Some(log) = log {
                    let k = log.topics;
                    for (&key, &change) in &log.map {
                        let cell = &mut tables.word_topic[key as usize];
                        let total = &mut tables.topic_totals[(key % k) as usize];
                        for c in [cell, total] {
                            let v = *c as i64 + change as i64;
                            if v < 0 {
                                negative += 1;
                            }
                            *c = v.max(0) as u32;
                        }
                    }
                }
            }
        }
        if negative > 0 {
            self.local_violations.push(format!(
                "worker {}: {negative} local counts went negative folding in a reply",
                self.w.id
            ));
        }
        self.kernel.prepare_tables(&self.w.tables);
        self.stats.applying_seconds += start.elapsed().as_secs_f64();
        true
    }
}

/// `local = global + local - base; base = global`, element-wise, counting negatives.
fn fold(local: &mut [u32], base: &mut [u32], global: &[u32], negative: &mut usize) {
    for ((l, b), &g) in local.iter_mut().zip(base.iter_mut()).zip(global) {
        let v = g as i64 + *l as i64 - *b as i64;
        if v < 0 {
            *negative += 1;
        }
        *l = v.max(0) as u32;
        *b = g;
    }
}

/// The master's global tables and what it records.
pub(crate) struct Master<'a> {
    pub corpus: &'a Corpus,
    pub params: &'a LdaParams,
    pub tables: Tables,
    pub shares: Vec<Vec<usize>>,
    /// Latest assignments each worker's sends account for (only when verifying).
    pub snapshots: Vec<Vec<Vec<u32>>>,
    pub finals: Vec<Option<Box<WorkerFinal>>>,
    pub merges: usize,
    pub master_seconds: f64,
    pub invariants: InvariantRecord,
    pub progress: Progress,
    pub stopped: bool,
    /// The workers' exchange schedule.
    pub schedule: Schedule,
}

impl<'a> Master<'a> {
    pub fn new(
        corpus: &'a Corpus,
        params: &'a LdaParams,
        tables: Tables,
        shares: Vec<Vec<usize>>,
        initial: &LdaState,
        schedule: Schedule,
    ) -> Master<'a> {
        let snapshots = if params.verify_invariants {
            shares
                .iter()
                .map(|s| s.iter().map(|&d| initial.assignments[d].clone()).collect())
                .collect()
        } else {
            Vec::new()
        };
        let progress = Progress::new(&shares, params.iterations);
        Master {
            corpus,
            params,
            tables,
            finals: (0..shares.len()).map(|_| None).collect(),
            shares,
            snapshots,
            merges: 0,
            master_seconds: 0.0,
            invariants: InvariantRecord::default(),
            progress,
            stopped: false,
            schedule,
        }
    }

    /// Adds a worker's delta to the global tables (a count driven negative is recorded as a
    /// violation and clamped); the caller counts merges.
    pub fn apply(&mut self, update: &mut Update) {
        let start = Instant::now();
        let k = self.params.topics;
        let mut negative = 0usize;
        let mut add = |cell: &mut u32, change: i64| {
            let v = *cell as i64 + change;
            if v < 0 {
                negative += 1;
            }
            *cell = v.max(0) as u32;
        };
        match &update.delta {
            Delta::Dense(delta) => {
                for (row, drow) in self.tables.word_topic.chunks_mut(k).zip(delta.chunks(k)) {
                    for ((cell, total), &d) in row
                        .iter_mut()
                        .zip(self.tables.topic_totals.iter_mut())
                        .zip(drow)
                    {
                        if d != 0 {
                            add(cell, d as i64);
                            add(total, d as i64);
                        }
                    }
                }
            }
            Delta::Sparse(map) => {
                for (&key, &d) in map {
                    add(&mut self.tables.word_topic[key as usize], d as i64);
                    add(&mut self.tables.topic_totals[key as usize % k], d as i64);
                }
            }
        }
        if negative > 0 {
            self.invariants
                .violations
                .push(crate::problem::InvariantViolation {
                    merge: Some(self.merges + 1),
                    detail: format!(
                        "merging worker {}'s delta drove {negative} global counts negative",
                        update.worker
                    ),
                });
        }
        if let Some(snapshot) = update.snapshot.take() {
            self.snapshots[update.worker] = snapshot;
        }
        self.master_seconds += start.elapsed().as_secs_f64();
    }

    /// Counts a merge and, with verification on, checks the global tables against a recount of
    /// the snapshots.
    pub fn merged(&mut self) {
        self.merges += 1;
        if !self.params.verify_invariants {
            return;
        }
        let k = self.params.topics;
        let mut word_topic = vec![0u32; self.tables.word_topic.len()];
        let mut topic_totals = vec![0u32; k];
        for (share, snapshot) in self.shares.iter().zip(&self.snapshots) {
            for (&d, z) in share.iter().zip(snapshot) {
                for (&w, &t) in self.corpus.doc(d).iter().zip(z) {
                    word_topic[w as usize * k + t as usize] += 1;
                    topic_totals[t as usize] += 1;
                }
            }
        }
        let outcome = compare_tables("global n_kw", &self.tables.word_topic, &word_topic, k)
            .and_then(|_| {
                compare_tables("global n_k", &self.tables.topic_totals, &topic_totals, k)
            });
        self.invariants.check(Some(self.merges), outcome);
    }

    /// A copy of the global tables for the worker that sent `update` (an applied delta),
    /// written into the spare buffers it sent, and its delta buffer back for reuse.
    pub fn reply(&mut self, update: Update) -> FromMaster {
        if self.stopped {
            return FromMaster::Stop;
        }
        let start = Instant::now();
        let (mut word_topic, mut topic_totals) = update.spare.unwrap_or_default();
        word_topic.clear();
        word_topic.extend_from_slice(&self.tables.word_topic);
        topic_totals.clear();
        topic_totals.extend_from_slice(&self.tables.topic_totals);
        let reply = FromMaster::Table {
            word_topic,
            topic_totals,
            used_delta: Some(update.delta),
        };
        self.master_seconds += start.elapsed().as_secs_f64();
        reply
    }

    /// Records a worker's progress and reports every iteration all workers have finished.
    pub fn record_progress(
        &mut self,
        update: &Update,
        callback: &mut dyn FnMut(&IterationReport) -> Control,
    ) {
        self.progress.record(update);
        if self.stopped {
            return;
        }
        while let Some(iteration) = self.progress.next_complete() {
            let loglik = self.progress.loglik_due(iteration, self.params).then(|| {
                let eval = Instant::now();
                let (doc_part, doc_seconds) = self.progress.doc_part(iteration);
                let ll = doc_part
                    + word_log_likelihood(
                        &self.tables.word_topic,
                        &self.tables.topic_totals,
                        self.params.topics,
                        self.params.beta,
                    );
                self.progress.trace.push(LoglikPoint {
                    iteration,
                    elapsed_seconds: self.progress.start.elapsed().as_secs_f64(),
                    loglik: ll,
                    eval_seconds: eval.elapsed().as_secs_f64() + doc_seconds,
                });
                ll
            });
            let report = IterationReport {
                iteration,
                iterations: self.params.iterations,
                loglik,
                elapsed_seconds: self.progress.start.elapsed().as_secs_f64(),
            };
            if callback(&report) == Control::Stop {
                self.stopped = true;
                return;
            }
        }
    }

    /// Assembles the final state from the workers' final messages and the global tables.
    pub fn finish(self) -> Result<LdaOutput, LdaError> {
        let k = self.params.topics;
        let corpus = self.corpus;
        let mut assignments = vec![Vec::new(); corpus.num_docs()];
        let mut doc_topic = vec![0u32; corpus.num_docs() * k];
        let mut workers = Vec::new();
        let mut invariants = self.invariants;
        for (id, (share, fin)) in self.shares.iter().zip(self.finals).enumerate() {
            let fin = fin.ok_or(LdaError::WorkerFailed {
                worker: id,
                reason: "sent no final state".to_owned(),
            })?;
            for (i, (&d, z)) in share.iter().zip(fin.assignments).enumerate() {
                assignments[d] = z;
                doc_topic[d * k..(d + 1) * k].copy_from_slice(&fin.doc_topic[i * k..(i + 1) * k]);
            }
            for detail in fin.local_violations {
                invariants
                    .violations
                    .push(crate::problem::InvariantViolation {
                        merge: None,
                        detail,
                    });
            }
            workers.push(fin.stats);
        }
        let state = LdaState {
            topics: k,
            num_words: corpus.num_words(),
            assignments,
            doc_topic,
            word_topic: self.tables.word_topic,
            topic_totals: self.tables.topic_totals,
        };
        invariants.check(None, state.check_counts(corpus));
        let train_seconds = self.progress.start.elapsed().as_secs_f64();
        let iterations = self.progress.reported;
        Ok(crate::kernel::finish(
            corpus,
            self.params,
            state,
            iterations,
            self.progress.trace,
            train_seconds,
            workers,
            self.merges,
            self.master_seconds,
            invariants,
        ))
    }
}

/// Which iterations every worker has finished, and the document parts of their likelihoods.
pub(crate) struct Progress {
    share_sizes: Vec<u64>,
    docs_done: Vec<u64>,
    iterations: usize,
    pub reported: usize,
    doc_parts: HashMap<usize, (f64, f64)>,
    pub trace: Vec<LoglikPoint>,
    pub start: Instant,
}

impl Progress {
    fn new(shares: &[Vec<usize>], iterations: usize) -> Progress {
        Progress {
            share_sizes: shares.iter().map(|s| s.len() as u64).collect(),
            docs_done: vec![0; shares.len()],
            iterations,
            reported: 0,
            doc_parts: HashMap::new(),
            trace: Vec::new(),
            start: Instant::now(),
        }
    }

    fn record(&mut self, update: &Update) {
        self.docs_done[update.worker] = update.docs_done;
        for &(iteration, ll, seconds) in &update.doc_loglik {
            let e = self.doc_parts.entry(iteration).or_insert((0.0, 0.0));
            e.0 += ll;
            e.1 = e.1.max(seconds);
        }
    }

    /// Iterations every worker (with documents) has finished.
    fn completed(&self) -> usize {
        self.share_sizes
            .iter()
            .zip(&self.docs_done)
            .filter(|(&n, _)| n > 0)
            .map(|(&n, &done)| (done / n) as usize)
            .min()
            .unwrap_or(self.iterations)
            .min(self.iterations)
    }

    fn next_complete(&mut self) -> Option<usize> {
        (self.reported < self.completed()).then(|| {
            self.reported += 1;
            self.reported
        })
    }

    fn loglik_due(&self, iteration: usize, params: &LdaParams) -> bool {
        params.likelihood_due(iteration)
    }

    /// The summed document parts of `iteration` (and the slowest worker's evaluation time).
    fn doc_part(&mut self, iteration: usize) -> (f64, f64) {
        self.doc_parts.remove(&iteration).unwrap_or((0.0, 0.0))
    }
}

/// Where the master and the workers run.
#[derive(Clone, Copy)]
pub(crate) enum Transport<'c> {
    /// This many workers on scoped threads of this process, the master on the calling thread;
    /// messages over channels.
    Threads(usize),
    /// Every rank of `comm` calls in: the master on rank 0, worker `i` on rank `i + 1`;
    /// messages are the communicator's point-to-point bytes ([`crate::wire`]).
    Ranks(&'c dyn Communicator),
}

/// Sets up the initial state and the shares, runs the workers and `master` where `transport`
/// says, and assembles the output (`None` on the ranks other than the master's).
fn train_master_worker<V: MasterWorker>(
    corpus: &Corpus,
    params: &LdaParams,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
    transport: Transport<'_>,
) -> Result<Option<LdaOutput>, LdaError> {
    params.validate()?;
    let workers = match transport {
        Transport::Threads(workers) => workers,
        Transport::Ranks(comm) if comm.size() >= 2 => comm.size() - 1,
        Transport::Ranks(comm) => return Err(LdaError::BadLaunch { ranks: comm.size() }),
    };
    let k = params.topics;
    let initial = LdaState::random(corpus, k, params.seed);
    let shares = partition_docs(corpus, workers, params.seed);
    let schedule = V::schedule(params, &shares);
    let encoding = V::encoding(params);
    let tables = Tables {
        topics: k,
        word_topic: initial.word_topic.clone(),
        topic_totals: initial.topic_totals.clone(),
    };
    let worker = |id: usize| {
        let share = &shares[id];
        let mut doc_topic = Vec::with_capacity(share.len() * k);
        for &d in share {
            doc_topic.extend_from_slice(&initial.doc_topic[d * k..(d + 1) * k]);
        }
        Worker {
            id,
            corpus,
            params: params.clone(),
            docs: share.clone(),
            assignments: share
                .iter()
                .map(|&d| initial.assignments[d].clone())
                .collect(),
            doc_topic,
            tables: tables.clone(),
            schedule,
            encoding,
        }
    };
    match transport {
        Transport::Threads(_) => {
            let (to_master, from_workers) = channel();
            let mut replies = Vec::new();
            let mut starts = Vec::new();
            for id in 0..workers {
                let (reply, from_master) = channel();
                replies.push(reply);
                let link = ChannelWorkerLink {
                    to_master: to_master.clone(),
                    from_master,
                };
                starts.push((worker(id), link));
            }
            drop(to_master);
            let mut state = Master::new(corpus, params, tables, shares, &initial, schedule);
            drop(initial);
            let outcome = std::thread::scope(|scope| -> Result<(), LdaError> {
                // The link moves into this scope and is dropped when the master returns (or a
                // worker could not start), so workers still waiting see a closed channel and
                // exit before the scope joins them.
                let mut link = ChannelMasterLink {
                    from_workers,
                    replies,
                };
                for (worker, mut to_master) in starts {
                    spawn_scoped(scope, workers, move || spawn_body(worker, &mut to_master))?;
                }
                V::master_loop(&mut state, &mut link, progress)
            });
            outcome?;
            state.finish().map(Some)
        }
        Transport::Ranks(comm) => {
            let rank = comm.rank();
            let ready = |e: crate::wire::CommError| LdaError::WorkerFailed {
                worker: rank.wrapping_sub(1),
                reason: format!("could not start: {e}"),
            };
            if rank == 0 {
                let mut state = Master::new(corpus, params, tables, shares, &initial, schedule);
                drop(initial);
                // The clock starts when every rank has its corpus and initial state.
                comm.barrier().map_err(ready)?;
                state.progress.start = Instant::now();
                let mut link = crate::wire::CommMasterLink::new(comm);
                V::master_loop(&mut state, &mut link, progress)?;
                state.finish().map(Some)
            } else {
                let worker = worker(rank - 1);
                drop(initial);
                comm.barrier().map_err(ready)?;
                let mut link = crate::wire::CommWorkerLink::new(comm, rank - 1);
                spawn_body(worker, &mut link)
                    .map_err(|reason| LdaError::WorkerFailed {
                        worker: rank - 1,
                        reason,
                    })
                    .map(|()| None)
            }
        }
    }
}

/// A master-worker variant: what differs between `sync` and `async` (the workers' exchange
/// schedule, their delta encoding, the master's loop); the setup, the workers and both
/// transports are [`train_master_worker`]'s, and [`LdaSampler`] follows.
pub(crate) trait MasterWorker {
    const NAME: &'static str;
    /// The workers' exchange schedule for these document shares.
    fn schedule(params: &LdaParams, shares: &[Vec<usize>]) -> Schedule;
    /// How a worker encodes its change.
    fn encoding(params: &LdaParams) -> DeltaEncoding;
    /// The master's loop over worker messages.
    fn master_loop(
        master: &mut Master<'_>,
        link: &mut dyn MasterLink,
        callback: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<(), LdaError>;
}

impl<T: MasterWorker + Send + std::marker::Sync> LdaSampler for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError> {
        train_master_worker::<T>(corpus, params, progress, Transport::Threads(par.degree()))
            .map(|out| out.expect("the threads transport runs the master here"))
    }

    fn train_on_ranks(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        comm: &dyn Communicator,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<Option<LdaOutput>, LdaError> {
        train_master_worker::<T>(corpus, params, progress, Transport::Ranks(comm))
    }

    fn is_parallel(&self) -> bool {
        true
    }
}

/// A worker message that is not a failure.
pub(crate) enum Incoming {
    Checkpoint(Update),
    Final(Update, Box<WorkerFinal>),
}

impl Incoming {
    /// A `Failed` message becomes the worker's error.
    pub(crate) fn from_message(message: ToMaster) -> Result<Incoming, LdaError> {
        match message {
            ToMaster::Failed { worker, reason } => Err(LdaError::WorkerFailed { worker, reason }),
            ToMaster::Checkpoint(update) => Ok(Incoming::Checkpoint(update)),
            ToMaster::Final(update, fin) => Ok(Incoming::Final(update, fin)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_gives_every_document_once_with_balanced_tokens() {
        let docs: Vec<Vec<u32>> = (0..101).map(|d| vec![0; 1 + (d * 7) % 23]).collect();
        let corpus = Corpus::new(docs, Vec::new(), 1).unwrap();
        for workers in 1..=5 {
            let shares = partition_docs(&corpus, workers, 4);
            let mut all: Vec<usize> = shares.concat();
            all.sort_unstable();
            assert_eq!(all, (0..101).collect::<Vec<_>>(), "workers {workers}");
            let tokens: Vec<usize> = shares
                .iter()
                .map(|s| s.iter().map(|&d| corpus.doc(d).len()).sum())
                .collect();
            let ideal = corpus.num_tokens() as f64 / workers as f64;
            for &t in &tokens {
                // Off by at most about one document (23 tokens at most).
                assert!(
                    (t as f64 - ideal).abs() <= 23.0,
                    "{tokens:?}, ideal {ideal}"
                );
            }
            assert_eq!(shares, partition_docs(&corpus, workers, 4));
        }
    }

    #[test]
    fn folding_a_reply_keeps_the_changes_made_while_it_was_in_flight() {
        // base = table at the last send; local = base + 2 new tokens of entry 1, - 1 of entry 0;
        // the reply adds another worker's +3 on entry 2.
        let mut base = vec![5, 1, 0];
        let mut local = vec![4, 3, 0];
        let global = vec![5, 1, 3];
        let mut negative = 0;
        fold(&mut local, &mut base, &global, &mut negative);
        assert_eq!(local, [4, 3, 3]);
        assert_eq!(base, global);
        assert_eq!(negative, 0);
    }
}
