//! The counting convention of [`super`] as formulas: what the fixed algorithm of each collective
//! sends and receives at one rank. A backend that hands the data to a library collective (the
//! MPI backend: OpenMPI picks its own algorithm per message size) records these counts, so
//! that every backend reports the same machine-independent volume; the in-process backend,
//! which runs the algorithms message by message, is checked against them in the tests.

use super::{even_counts, CommStats, Phase};

/// Ring all-gather at rank `i` of `counts.len()` ranks: blocks `i, i - 1, ..., i + 2` go to
/// `i + 1` and the other `q - 1` blocks arrive from `i - 1`, one message per step.
pub fn all_gather(stats: &mut CommStats, phase: Phase, i: usize, counts: &[usize]) {
    let q = counts.len();
    for s in 0..q.saturating_sub(1) {
        stats.record_send(phase, counts[(i + q - s) % q]);
        stats.record_receive(phase, counts[(i + 2 * q - s - 1) % q]);
    }
}

/// Ring reduce-scatter at rank `i`: step `s` sends the partial sum of block `i - s - 1` to
/// `i + 1` and receives the partial sum of block `i - s - 2` from `i - 1`.
pub fn reduce_scatter(stats: &mut CommStats, phase: Phase, i: usize, counts: &[usize]) {
    let q = counts.len();
    for s in 0..q.saturating_sub(1) {
        stats.record_send(phase, counts[(i + 2 * q - s - 1) % q]);
        stats.record_receive(phase, counts[(i + 2 * q - s - 2) % q]);
    }
}

/// All-reduce of `n` values over `q` ranks: ring reduce-scatter then ring all-gather over the
/// even split.
pub fn all_reduce(stats: &mut CommStats, phase: Phase, i: usize, q: usize, n: usize) {
    let counts = even_counts(n, q);
    reduce_scatter(stats, phase, i, &counts);
    all_gather(stats, phase, i, &counts);
}

/// Binomial-tree broadcast of `n` values from `root` over `q` ranks, at rank `i`: a non-root
/// rank receives once from its parent, and every rank sends to each of its children.
pub fn broadcast(stats: &mut CommStats, phase: Phase, i: usize, q: usize, root: usize, n: usize) {
    let v = (i + q - root) % q;
    let mut mask = 1usize;
    while mask < q {
        if v & mask != 0 {
            stats.record_receive(phase, n);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if v + mask < q {
            stats.record_send(phase, n);
        }
        mask >>= 1;
    }
}

/// A send-receive at rank `i`: transfers to or from the rank itself are local copies.
pub fn send_recv(
    stats: &mut CommStats,
    phase: Phase,
    i: usize,
    (dest, sent): (usize, usize),
    (source, received): (usize, usize),
) {
    if dest != i {
        stats.record_send(phase, sent);
    }
    if source != i {
        stats.record_receive(phase, received);
    }
}
