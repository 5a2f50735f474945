//! The least time a run could take on this machine, from the work its variant states
//! ([`Work`]) and the machine's measured limits ([`Limits`]): a roofline bound.
//!
//! - Compute: the flops at the FMA peak of the run's threads (the one-thread peak times the
//!   threads, up to the all-threads figure); f32 flops at twice the f64 peak, since the same FMA
//!   units hold twice the lanes.
//! - Memory: bytes come at best from the nearest levels that can hold them (a core's L1, its
//!   L2, the last-level cache, then memory), each at its triad bandwidth at the run's threads.
//!   Of a set of `F` bytes touched evenly, a level of `S` bytes (the caches inclusive, so it
//!   holds the nearer levels' lines too) can serve at most the share `min(1, S / F)`; the next
//!   level out serves the rest ([`through_levels`]). Reused bytes go over their working set;
//!   streamed bytes over all the data the run touches (streamed and reused), since data that
//!   fits a cache can be there from the previous repetition or the setup.
//!
//!   Each level counts. Charged at the last-level cache's speed whatever their size, and
//!   streamed bytes at memory's, the FusedMM kernels ran at 1.1-2.9x their "bound" on the
//!   Intel Xeon kind (256 rows: 0.2 MB streamed in 12 us, from L2), and with only the nearest
//!   level that holds the whole set, a 2.5 MiB set with 2 MiB of it in L2 still beat it.
//!
//! The bound is the larger of the two, and a result's `fraction_of_bound` is the bound over its
//! measured time: 1 would be a run at the machine's limit, and the side that binds
//! (`bound_compute_s` or `bound_memory_s`) says which limit.

use crate::exec::machine::Limits;
use parbench_common::{Precision, Work};
use std::collections::BTreeMap;

/// A run's time bound, split by the limit behind each part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// Flops at the FMA peak.
    pub compute_s: f64,
    /// Bytes at the bandwidths of the levels they live in.
    pub memory_s: f64,
}

impl Bound {
    /// The least time: the larger part.
    pub fn seconds(&self) -> f64 {
        self.compute_s.max(self.memory_s)
    }
}

/// The bound of `work` on a machine with `limits`, or `None` when the limits were not measured
/// (a run counted under valgrind) or the work states nothing.
pub fn bound(work: &Work, limits: &Limits) -> Option<Bound> {
    if limits.threads_all == 0 || limits.fma_gflop_per_s_1t <= 0.0 {
        return None;
    }
    let at = |one: f64, all: f64| -> f64 {
        let scaled = one * work.threads.max(1) as f64;
        if all > 0.0 {
            scaled.min(all)
        } else {
            scaled
        }
    };
    let lanes = match work.precision {
        Precision::F64 => 1.0,
        Precision::F32 => 2.0,
    };
    let peak = lanes * at(limits.fma_gflop_per_s_1t, limits.fma_gflop_per_s_all) * 1e9;
    let memory = at(limits.triad_gb_per_s_1t, limits.triad_gb_per_s_all) * 1e9;
    let threads = work.threads.clamp(1, limits.threads_all) as f64;
    if peak <= 0.0 || memory <= 0.0 {
        return None;
    }
    // Nearest first, the levels measured: capacity in bytes, bandwidth in bytes per second; a
    // core's own levels once per thread of the run.
    let levels: Vec<(f64, f64)> = limits
        .cache_levels()
        .into_iter()
        .filter(|l| l.measured())
        .map(|l| {
            let cores = if l.private { threads } else { 1.0 };
            let bandwidth = at(l.triad_gb_per_s_1t, l.triad_gb_per_s_all) * 1e9;
            (l.bytes as f64 * cores, bandwidth)
        })
        .collect();
    let data = work.stream_bytes + work.reuse_footprint_bytes;
    let b = Bound {
        compute_s: work.flops / peak,
        memory_s: through_levels(work.stream_bytes, data, &levels, memory)
            + through_levels(
                work.reuse_bytes,
                work.reuse_footprint_bytes,
                &levels,
                memory,
            ),
    };
    (b.seconds() > 0.0).then_some(b)
}

/// The least seconds to move `bytes` over a set of `set` bytes: each level of `levels`
/// (nearest first, `(capacity, bytes per second)`) serves the share of them it can hold
/// beyond the nearer levels' (`min(1, capacity / set)` in all up to it), `memory` the rest.
fn through_levels(bytes: f64, set: f64, levels: &[(f64, f64)], memory: f64) -> f64 {
    if bytes <= 0.0 {
        return 0.0;
    }
    let (mut seconds, mut served) = (0.0, 0.0);
    for &(capacity, bandwidth) in levels {
        let reach = if set <= capacity { 1.0 } else { capacity / set };
        if reach > served {
            seconds += bytes * (reach - served) / bandwidth;
            served = reach;
        }
        if served >= 1.0 {
            return seconds;
        }
    }
    seconds + bytes * (1.0 - served) / memory
}

/// Adds `bound_s`, `bound_compute_s`, `bound_memory_s` and `fraction_of_bound` to a result's
/// metrics when they state their work (the `work_*` metrics) and the limits allow a bound.
pub fn add_bound_metrics(metrics: &mut BTreeMap<String, f64>, wall_time_s: f64, limits: &Limits) {
    let Some(work) = Work::from_metrics(|k| metrics.get(k).copied()) else {
        return;
    };
    let Some(b) = bound(&work, limits) else {
        return;
    };
    metrics.insert("bound_s".to_string(), b.seconds());
    metrics.insert("bound_compute_s".to_string(), b.compute_s);
    metrics.insert("bound_memory_s".to_string(), b.memory_s);
    if wall_time_s > 0.0 {
        metrics.insert("fraction_of_bound".to_string(), b.seconds() / wall_time_s);
    }
}

/// The metrics a [`Work`] is stored as, for a family's measurement.
pub fn work_metrics(work: &Work) -> impl Iterator<Item = (String, f64)> {
    work.metrics().into_iter().map(|(k, v)| (k.to_string(), v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            triad_gb_per_s_1t: 20.0,
            triad_gb_per_s_all: 25.0,
            fma_gflop_per_s_1t: 50.0,
            fma_gflop_per_s_all: 100.0,
            threads_all: 2,
            llc_triad_gb_per_s_1t: 80.0,
            llc_triad_gb_per_s_all: 150.0,
            llc_bytes: 32 << 20,
            llc_triad_bytes: 16 << 20,
            // No L1 or L2 figures, as in runs recorded before they were measured.
            ..Limits::unmeasured()
        }
    }

    fn work(flops: f64, stream: f64, reuse: f64, footprint: f64, threads: usize) -> Work {
        Work {
            flops,
            precision: Precision::F64,
            stream_bytes: stream,
            reuse_bytes: reuse,
            reuse_footprint_bytes: footprint,
            threads,
        }
    }

    #[test]
    fn compute_bound_work_is_timed_at_the_threads_peak() {
        // 1e11 flops: 2 s at 50 GFLOP/s on one thread, 1 s at 100 on two, still 1 s on eight.
        let b = bound(&work(1e11, 0.0, 0.0, 0.0, 1), &limits()).unwrap();
        assert_eq!((b.compute_s, b.memory_s, b.seconds()), (2.0, 0.0, 2.0));
        assert_eq!(
            bound(&work(1e11, 0.0, 0.0, 0.0, 2), &limits())
                .unwrap()
                .seconds(),
            1.0
        );
        assert_eq!(
            bound(&work(1e11, 0.0, 0.0, 0.0, 8), &limits())
                .unwrap()
                .seconds(),
            1.0
        );
        let f32_work = Work {
            precision: Precision::F32,
            ..work(1e11, 0.0, 0.0, 0.0, 1)
        };
        assert_eq!(bound(&f32_work, &limits()).unwrap().seconds(), 1.0);
    }

    /// `a` equals `b` but for the rounding of a few operations.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs()
    }

    #[test]
    fn each_level_serves_the_share_of_the_set_it_holds() {
        let levels = Limits {
            l1_bytes: 1 << 20,
            l1_triad_gb_per_s_1t: 400.0,
            l1_triad_gb_per_s_all: 800.0,
            l2_bytes: 4 << 20,
            l2_triad_gb_per_s_1t: 160.0,
            l2_triad_gb_per_s_all: 320.0,
            ..limits()
        };
        let memory_s = |footprint: u64, threads: usize, limits: &Limits| {
            bound(&work(0.0, 0.0, 8e10, footprint as f64, threads), limits)
                .unwrap()
                .memory_s
        };
        // 8e10 bytes reused. A 1 MiB set, all from L1 at 400 GB/s: 0.2 s.
        assert!(close(memory_s(1 << 20, 1, &levels), 0.2));
        // 4 MiB: a quarter from L1, the rest from L2: 0.05 + 0.375 s.
        assert!(close(memory_s(4 << 20, 1, &levels), 0.425));
        // 32 MiB: 1/32 from L1, 3/32 from L2, 28/32 from the last-level cache at 80 GB/s.
        assert!(close(
            memory_s(32 << 20, 1, &levels),
            0.00625 + 0.046875 + 0.875
        ));
        // 64 MiB: half of it beyond every cache, at memory's 20 GB/s (2 s).
        let spill = 0.003125 + 0.0234375 + 0.4375 + 2.0;
        assert!(close(memory_s(64 << 20, 1, &levels), spill));
        // Two threads bring two L1s and two L2s, at the levels' all-thread figures.
        assert!(close(memory_s(2 << 20, 2, &levels), 0.1));
        // A level not measured (an older run's limits) is passed over: 1 MiB from L2.
        let no_l1 = Limits {
            l1_triad_gb_per_s_1t: 0.0,
            ..levels
        };
        assert!(close(memory_s(1 << 20, 1, &no_l1), 0.5));
        // Streamed bytes come from the caches as far as all the run's data fits: 1 MiB streamed
        // beside a 1 MiB reused set, half from L1 and half from L2 (2 MiB of data), where
        // memory would take 52 us.
        let fits = bound(
            &work(0.0, (1 << 20) as f64, 0.0, (1 << 20) as f64, 1),
            &levels,
        );
        let half = (1 << 19) as f64;
        assert!(close(fits.unwrap().memory_s, half / 400e9 + half / 160e9));
    }

    #[test]
    fn reused_bytes_use_the_cache_bandwidth_only_as_far_as_their_working_set_fits() {
        // 8e10 bytes reused: 1 s at the cache's 80 GB/s when the 1 MiB set fits in 32 MiB; a
        // 64 MiB set half at the cache's (0.5 s), half at memory's 20 GB/s (2 s).
        let fits = bound(&work(0.0, 0.0, 8e10, (1 << 20) as f64, 1), &limits()).unwrap();
        assert_eq!(fits.memory_s, 1.0);
        let spills = bound(&work(0.0, 0.0, 8e10, (64 << 20) as f64, 1), &limits()).unwrap();
        assert_eq!(spills.memory_s, 2.5);
        // 5e10 bytes streamed on two threads, over a set 1490x the cache: nearly all at
        // memory's 25 GB/s.
        let streamed = bound(&work(0.0, 5e10, 0.0, 0.0, 2), &limits()).unwrap();
        let cached = (32u64 << 20) as f64;
        assert!(close(
            streamed.memory_s,
            cached / 150e9 + (5e10 - cached) / 25e9
        ));
        let unknown_cache = Limits {
            llc_bytes: 0,
            ..limits()
        };
        let b = bound(&work(0.0, 0.0, 8e10, 1.0, 1), &unknown_cache).unwrap();
        assert_eq!(b.memory_s, 4.0);
    }

    #[test]
    fn the_fraction_is_the_bound_over_the_measured_time() {
        let mut m: BTreeMap<String, f64> = work_metrics(&work(1e11, 2e10, 0.0, 0.0, 1)).collect();
        let no_cache = Limits {
            llc_bytes: 0,
            ..limits()
        };
        add_bound_metrics(&mut m, 8.0, &no_cache);
        // compute 2 s, memory 1 s: bound 2 s of a run that took 8 s.
        assert_eq!(m["bound_s"], 2.0);
        assert_eq!((m["bound_compute_s"], m["bound_memory_s"]), (2.0, 1.0));
        assert_eq!(m["fraction_of_bound"], 0.25);
    }

    #[test]
    fn no_bound_without_limits_or_work() {
        let mut m: BTreeMap<String, f64> = work_metrics(&work(1e11, 0.0, 0.0, 0.0, 1)).collect();
        add_bound_metrics(&mut m, 1.0, &Limits::unmeasured());
        assert!(!m.contains_key("fraction_of_bound"));
        let mut none: BTreeMap<String, f64> = BTreeMap::from([("gflop_per_s".to_string(), 1.0)]);
        add_bound_metrics(&mut none, 1.0, &limits());
        assert_eq!(none.len(), 1);
        assert!(bound(&work(0.0, 0.0, 0.0, 0.0, 1), &limits()).is_none());
    }
}
