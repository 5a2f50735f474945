//! The wire decoders against any bytes: valid encodings of random messages, mutated (truncated,
//! bytes flipped or inserted, length fields overwritten with absurd values), and plain random
//! bytes. Decoding must never panic, must refuse what it cannot read, and must never allocate
//! more than the message itself could describe: every length is checked against the bytes left
//! before anything is reserved for it.

#[path = "../../../common/tests/support/malformed.rs"]
mod malformed;

use super::*;
use crate::parallel::{Delta, DeltaMap, FromMaster, ToMaster, Update, WorkerFinal};
use crate::problem::WorkerStats;
use malformed::{apply_all, config, largest_allocation, mutations};
use proptest::prelude::*;
use proptest::sample::Index;

/// The most a decoder may allocate at once for `len` bytes: the widest in-memory form of an
/// item per byte of its encoding is a sparse delta's hash map (under 4x), so 8x with a small
/// allowance.
fn bound(len: usize) -> usize {
    8 * len + 1024
}

/// The parts of an [`Update`] (the message types are not `Debug`, which proptest needs).
type UpdateParts = (
    usize,
    Result<Vec<i32>, Vec<(u64, i32)>>,
    u64,
    Vec<(usize, f64, f64)>,
    Option<Vec<Vec<u32>>>,
);

fn build_update((worker, delta, docs_done, doc_loglik, snapshot): UpdateParts) -> Update {
    Update {
        worker,
        delta: match delta {
            Ok(dense) => Delta::Dense(dense),
            Err(sparse) => Delta::Sparse(sparse.into_iter().collect::<DeltaMap>()),
        },
        docs_done,
        doc_loglik,
        snapshot,
        spare: None,
    }
}

fn update() -> impl Strategy<Value = UpdateParts> {
    let delta = prop_oneof![
        prop::collection::vec(any::<i32>(), 0..6).prop_map(Ok),
        prop::collection::vec((any::<u64>(), any::<i32>()), 0..5).prop_map(Err),
    ];
    let loglik = prop::collection::vec((0usize..100, any::<f64>(), any::<f64>()), 0..3);
    let snapshot = prop::option::of(prop::collection::vec(
        prop::collection::vec(any::<u32>(), 0..4),
        0..3,
    ));
    (0usize..8, delta, any::<u64>(), loglik, snapshot)
}

/// The encoding of a random message to the master.
fn to_master() -> impl Strategy<Value = Vec<u8>> {
    let assignments = prop::collection::vec(prop::collection::vec(any::<u32>(), 0..4), 0..3);
    let violations = prop::collection::vec(".{0,12}", 0..2);
    prop_oneof![
        update().prop_map(|u| encode_to_master(&ToMaster::Checkpoint(build_update(u)))),
        (
            update(),
            assignments,
            prop::collection::vec(any::<u32>(), 0..5),
            violations,
            any::<u64>(),
        )
            .prop_map(|(u, assignments, doc_topic, local_violations, tokens)| {
                let last = WorkerFinal {
                    assignments,
                    doc_topic,
                    stats: WorkerStats {
                        tokens_sampled: tokens,
                        ..WorkerStats::default()
                    },
                    local_violations,
                };
                encode_to_master(&ToMaster::Final(build_update(u), Box::new(last)))
            }),
        (0usize..8, ".{0,16}").prop_map(|(worker, reason)| {
            encode_to_master(&ToMaster::Failed { worker, reason })
        }),
    ]
}

/// The encoding of a random message from the master.
fn from_master() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (
            prop::collection::vec(any::<u32>(), 0..8),
            prop::collection::vec(any::<u32>(), 0..4),
        )
            .prop_map(|(word_topic, topic_totals)| {
                encode_from_master(&FromMaster::Table {
                    word_topic,
                    topic_totals,
                    used_delta: None,
                })
            }),
        Just(encode_from_master(&FromMaster::Stop)),
    ]
}

/// Eight bytes at a position (a length field, often) overwritten with a value.
fn overwrite() -> impl Strategy<Value = (Index, u64)> {
    let value = prop_oneof![
        prop::sample::select(vec![
            u64::MAX,
            u64::MAX / 4 + 1,
            u32::MAX as u64,
            1 << 40,
            1 << 20,
            0,
            1,
        ]),
        any::<u64>(),
    ];
    (any::<Index>(), value)
}

fn overwritten(bytes: &[u8], (at, value): &(Index, u64)) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.len() >= 8 {
        let i = at.index(out.len() - 7);
        out[i..i + 8].copy_from_slice(&value.to_le_bytes());
    }
    out
}

/// Decodes `bytes` both ways: no panic, allocation bounded by the input.
fn check_decode(bytes: &[u8]) {
    let (_, largest) = largest_allocation(|| decode_to_master(bytes).is_ok());
    assert!(
        largest <= bound(bytes.len()),
        "{largest} bytes for {} bytes",
        bytes.len()
    );
    let (_, largest) = largest_allocation(|| decode_from_master(bytes).is_ok());
    assert!(
        largest <= bound(bytes.len()),
        "{largest} bytes for {} bytes",
        bytes.len()
    );
}

proptest! {
    #![proptest_config(config(256, 0x3172_0001))]

    #[test]
    fn valid_messages_decode(to in to_master(), from in from_master()) {
        let (decoded, largest) = largest_allocation(|| decode_to_master(&to).is_ok());
        prop_assert!(decoded);
        prop_assert!(largest <= bound(to.len()));
        prop_assert!(decode_from_master(&from).is_ok());
    }

    #[test]
    fn mutated_messages_decode_or_are_refused(
        to in to_master(),
        from in from_master(),
        changes in mutations(),
        lengths in prop::collection::vec(overwrite(), 0..3),
    ) {
        for bytes in [to, from] {
            let bytes = lengths.iter().fold(apply_all(&bytes, &changes), |b, o| overwritten(&b, o));
            check_decode(&bytes);
        }
    }

    #[test]
    fn any_bytes_decode_or_are_refused(
        kind in 0u8..6,
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&body);
        check_decode(&bytes);
        check_decode(&body);
    }
}

#[test]
fn the_allocation_probe_sees_allocations() {
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert!(largest >= v.len(), "{largest}");
}
