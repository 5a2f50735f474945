//! `sync`: approximate distributed LDA (AD-LDA, Newman, Asuncion, Smyth & Welling, "Distributed
//! algorithms for topic models", JMLR 2009), the paper's synchronized master-worker variant.
//!
//! `p` workers each own a seeded random share of the documents (about N / p tokens) with their
//! assignments and n_dk, and a local copy of n_kw and n_k. Every worker samples
//! `checkpoint_docs` documents of its share (cycling through iterations, so a checkpoint may fall
//! within an iteration or span several), sends its delta and blocks; when all `p` deltas have
//! arrived the master adds them to the global tables and sends every worker a copy of the new
//! table. Everyone waits for the slowest worker at every checkpoint (barrier semantics). All
//! workers take part in the same number of rounds, `ceil(max share * iterations /
//! checkpoint_docs)`; a worker whose smaller share is done sends empty deltas.
//!
//! Cost per round: O(checkpoint_docs tokens K / p) sampling on each worker in parallel, plus
//! O(p W K) on the master (merge, p table copies) and O(W K) per worker (delta, fold-in), all
//! serialized behind the barrier.
//!
//! Determinism: each worker's draws come from its own stream (seed, worker id) and depend only on
//! its share and the merged tables, and integer merges do not depend on arrival order, so a seed
//! and a worker count fix the result bit for bit. It differs from `sequential`'s result (other
//! streams, stale counts between checkpoints).

use crate::parallel::{Incoming, Master, MasterLink, MasterWorker, Schedule, Update};
use crate::problem::{Control, DeltaEncoding, IterationReport, LdaError, LdaParams};

/// AD-LDA with a barrier at every checkpoint.
#[derive(Clone, Copy, Debug, Default)]
pub struct SyncMasterWorker;

impl MasterWorker for SyncMasterWorker {
    const NAME: &'static str = "sync";

    /// Every worker takes part in as many rounds as the largest share needs.
    fn schedule(params: &LdaParams, shares: &[Vec<usize>]) -> Schedule {
        let largest = shares.iter().map(Vec::len).max().unwrap_or(0) as u64;
        let checkpoint = params.checkpoint_docs.max(1) as u64;
        Schedule::Rounds((largest * params.iterations as u64).div_ceil(checkpoint))
    }

    fn encoding(_params: &LdaParams) -> DeltaEncoding {
        DeltaEncoding::Dense
    }

    /// Every round: all `p` deltas, merged in worker order, then a reply to each.
    fn master_loop(
        master: &mut Master<'_>,
        link: &mut dyn MasterLink,
        callback: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<(), LdaError> {
        let p = link.workers();
        let Schedule::Rounds(rounds) = master.schedule else {
            unreachable!("sync schedules rounds")
        };
        for _ in 0..rounds {
            let mut updates: Vec<Update> = Vec::with_capacity(p);
            for _ in 0..p {
                match link.receive()? {
                    Incoming::Checkpoint(update) => updates.push(update),
                    Incoming::Final(update, _) => {
                        return Err(LdaError::WorkerFailed {
                            worker: update.worker,
                            reason: "finished before the last round".to_owned(),
                        })
                    }
                }
            }
            // Workers report in any order; merges and replies go by worker id.
            updates.sort_by_key(|u| u.worker);
            for update in &mut updates {
                master.apply(update);
            }
            master.merged();
            for update in &updates {
                master.record_progress(update, callback);
            }
            for update in updates {
                let worker = update.worker;
                let reply = master.reply(update);
                link.reply(worker, reply);
            }
            if master.stopped {
                break;
            }
        }
        for _ in 0..p {
            match link.receive()? {
                Incoming::Final(mut update, fin) => {
                    master.apply(&mut update);
                    master.record_progress(&update, callback);
                    master.finals[update.worker] = Some(fin);
                }
                Incoming::Checkpoint(update) => {
                    return Err(LdaError::WorkerFailed {
                        worker: update.worker,
                        reason: "sent a checkpoint after the last round".to_owned(),
                    })
                }
            }
        }
        Ok(())
    }
}
