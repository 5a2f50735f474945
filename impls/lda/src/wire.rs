//! The master-worker messages as bytes, and the links that carry them over a [`Communicator`]'s
//! point-to-point messages (MPI between processes, or the in-process ranks).
//!
//! Little-endian, length-prefixed; each message starts with a kind byte. What only recycles
//! buffers between threads (a table's spare buffers, a used delta) stays home: over a wire the
//! receiver allocates. A message that does not decode is a bug or a mismatched build on the
//! other side; it is reported as that peer's failure, never guessed at.

use crate::parallel::{
    Delta, DeltaMap, Disconnected, FromMaster, Incoming, MasterLink, ToMaster, Update, WorkerFinal,
    WorkerLink,
};
use crate::problem::{LdaError, WorkerStats};
pub(crate) use parbench_common::comm::CommError;
use parbench_common::comm::Communicator;

const CHECKPOINT: u8 = 0;
const FINAL: u8 = 1;
const FAILED: u8 = 2;
const TABLE: u8 = 3;
const STOP: u8 = 4;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;

/// Why bytes did not decode.
#[derive(Debug, PartialEq)]
pub(crate) struct Garbled(&'static str);

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn f64(&mut self, x: f64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    /// A length, then the 4-byte words (the counterpart of [`Reader::words`]).
    fn words(&mut self, words: impl ExactSizeIterator<Item = [u8; 4]>) {
        self.u64(words.len() as u64);
        self.0.reserve(4 * words.len());
        for w in words {
            self.0.extend_from_slice(&w);
        }
    }
    fn u32s(&mut self, xs: &[u32]) {
        self.words(xs.iter().map(|x| x.to_le_bytes()));
    }
    fn i32s(&mut self, xs: &[i32]) {
        self.words(xs.iter().map(|x| x.to_le_bytes()));
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Garbled> {
        let (head, rest) = self.bytes.split_first_chunk::<N>().ok_or(Garbled(what))?;
        self.bytes = rest;
        Ok(*head)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, Garbled> {
        Ok(self.take::<1>(what)?[0])
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, Garbled> {
        Ok(u64::from_le_bytes(self.take(what)?))
    }
    fn usize(&mut self, what: &'static str) -> Result<usize, Garbled> {
        usize::try_from(self.u64(what)?).map_err(|_| Garbled(what))
    }
    fn f64(&mut self, what: &'static str) -> Result<f64, Garbled> {
        Ok(f64::from_le_bytes(self.take(what)?))
    }
    /// A length that `width`-byte items must fit in the rest of the message.
    fn len(&mut self, width: usize, what: &'static str) -> Result<usize, Garbled> {
        let n = self.usize(what)?;
        if n.checked_mul(width).is_none_or(|b| b > self.bytes.len()) {
            return Err(Garbled(what));
        }
        Ok(n)
    }
    fn words(&mut self, what: &'static str) -> Result<impl Iterator<Item = [u8; 4]> + 'a, Garbled> {
        let n = self.len(4, what)?;
        let (head, rest) = self.bytes.split_at(4 * n);
        self.bytes = rest;
        Ok(head.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]))
    }
    fn u32s(&mut self, what: &'static str) -> Result<Vec<u32>, Garbled> {
        Ok(self.words(what)?.map(u32::from_le_bytes).collect())
    }
    fn i32s(&mut self, what: &'static str) -> Result<Vec<i32>, Garbled> {
        Ok(self.words(what)?.map(i32::from_le_bytes).collect())
    }
    fn string(&mut self, what: &'static str) -> Result<String, Garbled> {
        let n = self.len(1, what)?;
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        String::from_utf8(head.to_vec()).map_err(|_| Garbled(what))
    }
    fn end(&self) -> Result<(), Garbled> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(Garbled("bytes after the end of the message"))
        }
    }
}

fn write_update(w: &mut Writer, u: &Update) {
    w.u64(u.worker as u64);
    match &u.delta {
        Delta::Dense(d) => {
            w.u8(DENSE);
            w.i32s(d);
        }
        Delta::Sparse(map) => {
            w.u8(SPARSE);
            w.u64(map.len() as u64);
            for (&key, &change) in map {
                w.u64(key);
                w.0.extend_from_slice(&change.to_le_bytes());
            }
        }
    }
    w.u64(u.docs_done);
    w.u64(u.doc_loglik.len() as u64);
    for &(iteration, ll, seconds) in &u.doc_loglik {
        w.u64(iteration as u64);
        w.f64(ll);
        w.f64(seconds);
    }
    match &u.snapshot {
        None => w.u8(0),
        Some(docs) => {
            w.u8(1);
            w.u64(docs.len() as u64);
            for z in docs {
                w.u32s(z);
            }
        }
    }
}

fn read_update(r: &mut Reader<'_>) -> Result<Update, Garbled> {
    let worker = r.usize("worker")?;
    let delta = match r.u8("delta kind")? {
        DENSE => Delta::Dense(r.i32s("dense delta")?),
        SPARSE => {
            let n = r.len(12, "sparse delta")?;
            let mut map = DeltaMap::default();
            map.reserve(n);
            for _ in 0..n {
                let key = r.u64("sparse key")?;
                let change = i32::from_le_bytes(r.take("sparse change")?);
                map.insert(key, change);
            }
            Delta::Sparse(map)
        }
        _ => return Err(Garbled("delta kind")),
    };
    let docs_done = r.u64("documents done")?;
    let n = r.len(24, "log-likelihood parts")?;
    let mut doc_loglik = Vec::with_capacity(n);
    for _ in 0..n {
        doc_loglik.push((
            r.usize("iteration")?,
            r.f64("log-likelihood")?,
            r.f64("seconds")?,
        ));
    }
    let snapshot = match r.u8("snapshot flag")? {
        0 => None,
        1 => {
            let n = r.len(8, "snapshot")?;
            let mut docs = Vec::with_capacity(n);
            for _ in 0..n {
                docs.push(r.u32s("snapshot document")?);
            }
            Some(docs)
        }
        _ => return Err(Garbled("snapshot flag")),
    };
    Ok(Update {
        worker,
        delta,
        docs_done,
        doc_loglik,
        snapshot,
        spare: None,
    })
}

fn write_stats(w: &mut Writer, s: &WorkerStats) {
    w.u64(s.tokens_sampled);
    for x in [
        s.sampling_seconds,
        s.sending_seconds,
        s.waiting_seconds,
        s.applying_seconds,
    ] {
        w.f64(x);
    }
    for x in [s.exchanges, s.bytes_sent, s.bytes_received] {
        w.u64(x);
    }
}

fn read_stats(r: &mut Reader<'_>) -> Result<WorkerStats, Garbled> {
    Ok(WorkerStats {
        tokens_sampled: r.u64("tokens")?,
        sampling_seconds: r.f64("seconds")?,
        sending_seconds: r.f64("seconds")?,
        waiting_seconds: r.f64("seconds")?,
        applying_seconds: r.f64("seconds")?,
        exchanges: r.u64("exchanges")?,
        bytes_sent: r.u64("bytes")?,
        bytes_received: r.u64("bytes")?,
    })
}

pub(crate) fn encode_to_master(message: &ToMaster) -> Vec<u8> {
    let mut w = Writer::default();
    match message {
        ToMaster::Checkpoint(u) => {
            w.u8(CHECKPOINT);
            write_update(&mut w, u);
        }
        ToMaster::Final(u, fin) => {
            w.u8(FINAL);
            write_update(&mut w, u);
            w.u64(fin.assignments.len() as u64);
            for z in &fin.assignments {
                w.u32s(z);
            }
            w.u32s(&fin.doc_topic);
            write_stats(&mut w, &fin.stats);
            w.u64(fin.local_violations.len() as u64);
            for v in &fin.local_violations {
                w.str(v);
            }
        }
        ToMaster::Failed { worker, reason } => {
            w.u8(FAILED);
            w.u64(*worker as u64);
            w.str(reason);
        }
    }
    w.0
}

pub(crate) fn decode_to_master(bytes: &[u8]) -> Result<ToMaster, Garbled> {
    let mut r = Reader { bytes };
    let message = match r.u8("message kind")? {
        CHECKPOINT => ToMaster::Checkpoint(read_update(&mut r)?),
        FINAL => {
            let update = read_update(&mut r)?;
            let n = r.len(8, "assignments")?;
            let mut assignments = Vec::with_capacity(n);
            for _ in 0..n {
                assignments.push(r.u32s("document assignments")?);
            }
            let doc_topic = r.u32s("document-topic counts")?;
            let stats = read_stats(&mut r)?;
            let n = r.len(8, "violations")?;
            let mut local_violations = Vec::with_capacity(n);
            for _ in 0..n {
                local_violations.push(r.string("violation")?);
            }
            ToMaster::Final(
                update,
                Box::new(WorkerFinal {
                    assignments,
                    doc_topic,
                    stats,
                    local_violations,
                }),
            )
        }
        FAILED => ToMaster::Failed {
            worker: r.usize("worker")?,
            reason: r.string("reason")?,
        },
        _ => return Err(Garbled("message kind")),
    };
    r.end()?;
    Ok(message)
}

pub(crate) fn encode_from_master(message: &FromMaster) -> Vec<u8> {
    let mut w = Writer::default();
    match message {
        FromMaster::Table {
            word_topic,
            topic_totals,
            ..
        } => {
            w.u8(TABLE);
            w.u32s(word_topic);
            w.u32s(topic_totals);
        }
        FromMaster::Stop => w.u8(STOP),
    }
    w.0
}

pub(crate) fn decode_from_master(bytes: &[u8]) -> Result<FromMaster, Garbled> {
    let mut r = Reader { bytes };
    let message = match r.u8("message kind")? {
        TABLE => FromMaster::Table {
            word_topic: r.u32s("word-topic table")?,
            topic_totals: r.u32s("topic totals")?,
            used_delta: None,
        },
        STOP => FromMaster::Stop,
        _ => return Err(Garbled("message kind")),
    };
    r.end()?;
    Ok(message)
}

/// The master's rank.
const MASTER: usize = 0;

/// Worker `worker` on rank `worker + 1` of `comm`.
pub(crate) struct CommWorkerLink<'c> {
    comm: &'c dyn Communicator,
    worker: usize,
}

impl<'c> CommWorkerLink<'c> {
    pub fn new(comm: &'c dyn Communicator, worker: usize) -> Self {
        CommWorkerLink { comm, worker }
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<FromMaster, Disconnected> {
        decode_from_master(bytes).map_err(|Garbled(what)| {
            self.send(ToMaster::Failed {
                worker: self.worker,
                reason: format!("the master's message is malformed ({what})"),
            });
            Disconnected
        })
    }
}

impl WorkerLink for CommWorkerLink<'_> {
    fn send(&mut self, message: ToMaster) {
        // A failed send means the master is gone; the next receive reports it.
        let _ = self.comm.send_bytes(MASTER, &encode_to_master(&message));
    }
    fn receive(&mut self) -> Result<FromMaster, Disconnected> {
        let (_, bytes) = self
            .comm
            .receive_bytes(Some(MASTER))
            .map_err(|_| Disconnected)?;
        self.decode(&bytes)
    }
    fn try_receive(&mut self) -> Result<Option<FromMaster>, Disconnected> {
        match self.comm.try_receive_bytes(Some(MASTER)) {
            Ok(Some((_, bytes))) => self.decode(&bytes).map(Some),
            Ok(None) => Ok(None),
            Err(_) => Err(Disconnected),
        }
    }
}

/// The master on rank 0 of `comm`, worker `i` on rank `i + 1`.
pub(crate) struct CommMasterLink<'c> {
    comm: &'c dyn Communicator,
}

impl<'c> CommMasterLink<'c> {
    pub fn new(comm: &'c dyn Communicator) -> Self {
        CommMasterLink { comm }
    }
}

impl MasterLink for CommMasterLink<'_> {
    fn workers(&self) -> usize {
        self.comm.size() - 1
    }
    fn receive(&mut self) -> Result<Incoming, LdaError> {
        let (source, bytes) =
            self.comm
                .receive_bytes(None)
                .map_err(|e| LdaError::WorkerFailed {
                    worker: usize::MAX,
                    reason: format!("waiting for a worker's message: {e}"),
                })?;
        let worker = source.wrapping_sub(1);
        let message = decode_to_master(&bytes).map_err(|Garbled(what)| LdaError::WorkerFailed {
            worker,
            reason: format!("its message is malformed ({what})"),
        })?;
        let claimed = match &message {
            ToMaster::Checkpoint(u) | ToMaster::Final(u, _) => u.worker,
            ToMaster::Failed { worker, .. } => *worker,
        };
        if claimed != worker {
            return Err(LdaError::WorkerFailed {
                worker,
                reason: format!("its message is signed by worker {claimed}"),
            });
        }
        Incoming::from_message(message)
    }
    fn reply(&mut self, worker: usize, message: FromMaster) {
        // A worker that is gone has failed; its error reaches the master's next receive.
        let _ = self
            .comm
            .send_bytes(worker + 1, &encode_from_master(&message));
    }
}

#[cfg(test)]
mod malformed_input;

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_update(sparse: bool) -> Update {
        let delta = if sparse {
            let mut m = DeltaMap::default();
            m.insert(7, -2);
            m.insert(123_456_789_012, 5);
            Delta::Sparse(m)
        } else {
            Delta::Dense(vec![0, -1, 3, i32::MIN, i32::MAX])
        };
        Update {
            worker: 3,
            delta,
            docs_done: 1 << 40,
            doc_loglik: vec![(2, -123.5, 0.25), (3, f64::MIN_POSITIVE, 1e-9)],
            snapshot: sparse.then(|| vec![vec![1, 2, 3], vec![], vec![u32::MAX]]),
            spare: Some((vec![1], vec![2])),
        }
    }

    fn same_update(a: &Update, b: &Update) {
        assert_eq!(a.worker, b.worker);
        match (&a.delta, &b.delta) {
            (Delta::Dense(x), Delta::Dense(y)) => assert_eq!(x, y),
            (Delta::Sparse(x), Delta::Sparse(y)) => assert_eq!(x, y),
            _ => panic!("delta kind changed"),
        }
        assert_eq!(a.docs_done, b.docs_done);
        assert_eq!(a.doc_loglik, b.doc_loglik);
        assert_eq!(a.snapshot, b.snapshot);
        // Buffers for reuse do not travel.
        assert!(b.spare.is_none());
    }

    #[test]
    fn every_message_survives_the_round_trip() {
        for sparse in [false, true] {
            let u = sample_update(sparse);
            match decode_to_master(&encode_to_master(&ToMaster::Checkpoint(sample_update(
                sparse,
            )))) {
                Ok(ToMaster::Checkpoint(d)) => same_update(&u, &d),
                _ => panic!("checkpoint did not decode"),
            }
        }
        let fin = WorkerFinal {
            assignments: vec![vec![4, 0], vec![]],
            doc_topic: vec![1, 0, 1, 0],
            stats: WorkerStats {
                tokens_sampled: 99,
                sampling_seconds: 1.5,
                sending_seconds: 0.25,
                waiting_seconds: 0.125,
                applying_seconds: 2.0,
                exchanges: 4,
                bytes_sent: 1000,
                bytes_received: 2000,
            },
            local_violations: vec!["worker 3: 1 local counts went negative".into()],
        };
        let message = ToMaster::Final(sample_update(false), Box::new(fin));
        match decode_to_master(&encode_to_master(&message)) {
            Ok(ToMaster::Final(u, f)) => {
                same_update(&sample_update(false), &u);
                assert_eq!(f.assignments, [vec![4, 0], vec![]]);
                assert_eq!(f.doc_topic, [1, 0, 1, 0]);
                assert_eq!(f.stats.tokens_sampled, 99);
                assert_eq!(f.stats.applying_seconds, 2.0);
                assert_eq!(f.stats.bytes_received, 2000);
                assert_eq!(f.local_violations.len(), 1);
            }
            _ => panic!("final did not decode"),
        }
        let failed = ToMaster::Failed {
            worker: 2,
            reason: "out of memory ☹".into(),
        };
        assert!(matches!(
            decode_to_master(&encode_to_master(&failed)),
            Ok(ToMaster::Failed { worker: 2, reason }) if reason == "out of memory ☹"
        ));
        let table = FromMaster::Table {
            word_topic: vec![0, 1, u32::MAX],
            topic_totals: vec![5],
            used_delta: Some(Delta::Dense(vec![1])),
        };
        match decode_from_master(&encode_from_master(&table)) {
            Ok(FromMaster::Table {
                word_topic,
                topic_totals,
                used_delta,
            }) => {
                assert_eq!(word_topic, [0, 1, u32::MAX]);
                assert_eq!(topic_totals, [5]);
                assert!(used_delta.is_none());
            }
            _ => panic!("table did not decode"),
        }
        assert!(matches!(
            decode_from_master(&encode_from_master(&FromMaster::Stop)),
            Ok(FromMaster::Stop)
        ));
    }

    #[test]
    fn truncated_extended_or_unknown_messages_are_refused() {
        let bytes = encode_to_master(&ToMaster::Checkpoint(sample_update(true)));
        for cut in [0, 1, 5, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode_to_master(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_to_master(&longer).is_err());
        assert!(decode_to_master(&[9]).is_err());
        assert!(decode_from_master(&[TABLE]).is_err());
        // A length far beyond the message is refused before anything is allocated.
        let mut huge = vec![TABLE];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_from_master(&huge).is_err());
    }
}
