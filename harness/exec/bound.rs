//! The least time a run could take on this machine, from the work its variant states
//! ([`Work`]) and the machine's measured limits ([`Limits`]): a roofline bound.
//!
//! - Compute: the flops at the FMA peak of the run's threads (the one-thread peak times the
//!   threads, up to the all-threads figure); f32 flops at twice the f64 peak, since the same FMA
//!   units hold twice the lanes.
//! - Memory: the streamed bytes at the triad bandwidth of the run's threads, plus the reused bytes
//!   at the last-level cache's triad bandwidth when their working set fits in that cache, else at
//!   memory's.
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
    let cache = at(limits.llc_triad_gb_per_s_1t, limits.llc_triad_gb_per_s_all) * 1e9;
    let fits = limits.llc_bytes > 0 && work.reuse_footprint_bytes <= limits.llc_bytes as f64;
    let reuse_bandwidth = if fits && cache > 0.0 { cache } else { memory };
    if peak <= 0.0 || memory <= 0.0 {
        return None;
    }
    let b = Bound {
        compute_s: work.flops / peak,
        memory_s: work.stream_bytes / memory + work.reuse_bytes / reuse_bandwidth,
    };
    (b.seconds() > 0.0).then_some(b)
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

    #[test]
    fn reused_bytes_use_the_cache_bandwidth_only_when_their_working_set_fits() {
        // 8e10 bytes reused: 1 s at the cache's 80 GB/s when the 1 MiB set fits in 32 MiB; at
        // memory's 20 GB/s (4 s) when a 64 MiB set does not; streamed bytes always at memory's.
        let fits = bound(&work(0.0, 0.0, 8e10, (1 << 20) as f64, 1), &limits()).unwrap();
        assert_eq!(fits.memory_s, 1.0);
        let spills = bound(&work(0.0, 0.0, 8e10, (64 << 20) as f64, 1), &limits()).unwrap();
        assert_eq!(spills.memory_s, 4.0);
        let streamed = bound(&work(0.0, 5e10, 0.0, 0.0, 2), &limits()).unwrap();
        assert_eq!(streamed.memory_s, 2.0);
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
        add_bound_metrics(&mut m, 8.0, &limits());
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
