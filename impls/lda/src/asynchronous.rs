//! `async`: the paper's asynchronous master-worker LDA (its "Asynchronized LDA" section).
//!
//! Documents are shared out as in `sync`. Each worker, at its own checkpoint (every
//! `checkpoint_docs` documents of its share), sends the delta since its last exchange; the master
//! applies it at once and replies with a copy of the current global table. Nobody waits for the
//! other workers: a worker only waits for its own reply, and with
//! [`crate::LdaParams::non_blocking`] not even that; it keeps sampling with its current table
//! while the reply is in flight and folds it in at the next document boundary after it arrives
//! (double buffer; at most one reply outstanding). Each worker finishes its own share of the
//! iterations and flushes a final delta.
//!
//! Options from the paper: [`crate::DeltaEncoding::Dense`] (a `W x K` difference against a copy
//! of the last table received) or [`crate::DeltaEncoding::Sparse`] (a hash map keyed by `word *
//! K + topic`, recorded as topics move); blocking or non-blocking exchange.
//!
//! Cost: sampling as in `sync`, but the master's O(W K) merge and copy for one worker overlap the
//! others' sampling instead of stopping everyone.
//!
//! Determinism: NOT reproducible run to run. Which deltas a reply contains depends on the order
//! in which messages reach the master, i.e. on thread timing; counts are still conserved exactly
//! (checked by the invariants), and with one worker and blocking exchange the run is
//! deterministic.

use crate::parallel::{Incoming, Master, MasterLink, MasterWorker, Schedule};
use crate::problem::{Control, DeltaEncoding, IterationReport, LdaError, LdaParams};

/// The asynchronous master-worker sampler.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncMasterWorker;

impl MasterWorker for AsyncMasterWorker {
    const NAME: &'static str = "async";

    fn schedule(params: &LdaParams, _shares: &[Vec<usize>]) -> Schedule {
        Schedule::Own {
            non_blocking: params.non_blocking,
        }
    }

    fn encoding(params: &LdaParams) -> DeltaEncoding {
        params.delta
    }

    /// Each delta merged as it arrives and answered at once; done when every worker has sent its
    /// final state.
    fn master_loop(
        master: &mut Master<'_>,
        link: &mut dyn MasterLink,
        callback: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<(), LdaError> {
        let mut finished = 0;
        while finished < link.workers() {
            match link.receive()? {
                Incoming::Checkpoint(mut update) => {
                    master.apply(&mut update);
                    master.merged();
                    master.record_progress(&update, callback);
                    let worker = update.worker;
                    let reply = master.reply(update);
                    link.reply(worker, reply);
                }
                Incoming::Final(mut update, fin) => {
                    master.apply(&mut update);
                    master.merged();
                    master.record_progress(&update, callback);
                    master.finals[update.worker] = Some(fin);
                    finished += 1;
                }
            }
        }
        Ok(())
    }
}
