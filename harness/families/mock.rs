//! A scripted family for testing the pipeline (plan, runner, results, plots, claims, check)
//! without real kernels or real clocks.
//!
//! Every number is a pure function of the point: `wall_time_s = size * factor / threads` with
//! `factor` 1e-3 for `slow` and 1e-5 for `fast` and `wrong`, so `slow` is exactly 100x `fast`
//! and the time scales as `size^1` and `threads^-1`; `fast` divides it by its own option
//! `speedup` (1 by default). Phases split the time 80/20 into
//! `compute`/`setup`. The output of `slow` and `fast` is the same vector; `wrong` differs by 1e-3
//! relative, so equivalence checks have something to catch. The "times" are reported, not
//! measured; a run sleeps only when `delay_ms` asks (tests that interrupt a sweep). Every run
//! reports a scripted trace of [`MockFamily::TRACE_STEPS`] steps: step k at `k/4` of the wall
//! time, with `metric_residual = size / 2^k`. Cost: O(min(size, 16)) per run plus `delay_ms`.

use crate::families::params::{positive, Choice, PointIssue};
use crate::family::{Measurement, PreparedInput, TraceStep, TypedFamily};
use anyhow::{anyhow, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// The scripted family (`family: mock` in an experiment file).
pub struct MockFamily;

crate::named_enum! {
    /// A named option that changes nothing (tests claims and filters over names).
    pub enum MockLayout as "layout" {
        Dense = "dense",
        Sparse = "sparse",
    }
}

crate::point_params! {
    /// A mock point.
    pub struct MockPoint {
        /// problem size; wall time is proportional to it
        size: usize = MockFamily::DEFAULT_SIZE,
        /// accepted and recorded, otherwise unused (tests float parameters)
        work: f64 = 0.0,
        /// milliseconds every run sleeps (the reported time ignores it): a sweep slow enough
        /// to interrupt
        delay_ms: u64 = 0,
        /// accepted and recorded, otherwise unused (tests named parameters)
        layout: Choice<MockLayout> = Choice(MockLayout::Dense),
        /// how many times faster `fast` runs (an option of `fast` alone: tests variant options)
        speedup for ["fast"]: f64 = 1.0,
    }
}

impl MockFamily {
    pub const NAME: &'static str = "mock";
    /// `size` when a point does not set it.
    pub const DEFAULT_SIZE: usize = 1000;
    /// Length cap of the output vector, enough to exercise element-wise comparison.
    const OUTPUT_LEN: usize = 16;
    /// Relative error `wrong` injects into its output.
    pub const WRONG_REL_ERROR: f64 = 1e-3;
    /// Progress steps of every run's scripted trace.
    pub const TRACE_STEPS: usize = 4;

    /// Seconds per unit of `size` at one thread.
    pub fn factor(variant: &str) -> Option<f64> {
        match variant {
            "slow" => Some(1e-3),
            "fast" | "wrong" => Some(1e-5),
            _ => None,
        }
    }
}

impl TypedFamily for MockFamily {
    type Point = MockPoint;
    const NAME: &'static str = MockFamily::NAME;

    // Exact: the scripted size.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &["size"]
    }
    fn variants(&self) -> Vec<&'static str> {
        vec!["slow", "fast", "wrong"]
    }

    fn check(&self, point: &MockPoint, _variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        positive(&mut issues, "size", point.size);
        if point.speedup.is_nan() || point.speedup <= 0.0 {
            issues.push(PointIssue::new(
                &["speedup"],
                format!("speedup must be positive, got {}", point.speedup),
                "set speedup above 0 (1: as scripted)",
            ));
        }
        issues
    }

    fn prepare(
        &self,
        point: &MockPoint,
        _dataset: Option<&Path>,
        _seed: u64,
    ) -> anyhow::Result<PreparedInput> {
        Ok(Box::new(point.clone()))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &MockPoint,
        threads: usize,
    ) -> anyhow::Result<Measurement> {
        let factor = Self::factor(variant).ok_or_else(|| {
            anyhow!("mock family has no variant `{variant}` (valid: slow, fast, wrong)")
        })?;
        if threads == 0 {
            bail!("mock family needs threads >= 1");
        }
        // The variant's own option comes with the point it runs at, not with the input, which
        // every variant of the point shares.
        let speedup = if variant == "fast" {
            point.speedup
        } else {
            1.0
        };
        // The prepared input is the point itself; prefer it, so a runner that hands the wrong
        // input to a point is caught by the numbers.
        let point = input.downcast_ref::<MockPoint>().unwrap_or(point);
        std::thread::sleep(std::time::Duration::from_millis(point.delay_ms));
        let size = point.size;
        let wall_time_s = size as f64 * factor / threads as f64 / speedup;
        let phases_s = BTreeMap::from([
            ("compute".to_string(), 0.8 * wall_time_s),
            ("setup".to_string(), 0.2 * wall_time_s),
        ]);
        let metrics = BTreeMap::from([("size".to_string(), size as f64)]);
        let scale = if variant == "wrong" {
            1.0 + Self::WRONG_REL_ERROR
        } else {
            1.0
        };
        let output = (0..size.min(Self::OUTPUT_LEN))
            .map(|i| (1.0 + i as f64) * scale)
            .collect();
        let trace = (1..=Self::TRACE_STEPS)
            .map(|k| TraceStep {
                step: k,
                time_s: wall_time_s * k as f64 / Self::TRACE_STEPS as f64,
                metrics: BTreeMap::from([(
                    "residual".to_string(),
                    size as f64 / 2f64.powi(k as i32),
                )]),
            })
            .collect();
        Ok(Measurement {
            wall_time_s,
            phases_s,
            metrics,
            output,
            trace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size: usize) -> MockPoint {
        MockPoint {
            size,
            ..MockPoint::default()
        }
    }

    #[test]
    fn times_follow_the_script() {
        let family = MockFamily;
        let p = point(2000);
        let input = family.prepare(&p, None, 0).unwrap();
        let slow = family.run("slow", &input, &p, 4).unwrap();
        let fast = family.run("fast", &input, &p, 4).unwrap();
        assert!(
            (slow.wall_time_s - 2000.0 * 1e-3 / 4.0).abs() < 1e-12,
            "{}",
            slow.wall_time_s
        );
        assert!((slow.wall_time_s / fast.wall_time_s - 100.0).abs() < 1e-9);
        let phase_sum: f64 = slow.phases_s.values().sum();
        assert!((phase_sum - slow.wall_time_s).abs() < 1e-12);
        assert_eq!(slow.metrics["size"], 2000.0);
        let last = slow.trace.last().unwrap();
        assert_eq!(slow.trace.len(), MockFamily::TRACE_STEPS);
        assert_eq!((last.step, last.time_s), (4, slow.wall_time_s));
        assert_eq!(last.metrics["residual"], 2000.0 / 16.0);
    }

    #[test]
    fn wrong_differs_by_the_injected_error_and_fast_matches_slow() {
        let family = MockFamily;
        let p = point(50);
        let input = family.prepare(&p, None, 0).unwrap();
        let slow = family.run("slow", &input, &p, 1).unwrap();
        let fast = family.run("fast", &input, &p, 1).unwrap();
        let wrong = family.run("wrong", &input, &p, 1).unwrap();
        assert_eq!(slow.output, fast.output);
        assert_eq!(slow.output.len(), MockFamily::OUTPUT_LEN);
        for (w, s) in wrong.output.iter().zip(&slow.output) {
            let rel = (w - s).abs() / s.abs();
            assert!(
                (rel - MockFamily::WRONG_REL_ERROR).abs() < 1e-9,
                "rel {rel}"
            );
        }
    }

    #[test]
    fn unknown_variant_and_zero_threads_are_errors() {
        let family = MockFamily;
        let p = point(10);
        let input = family.prepare(&p, None, 0).unwrap();
        let err = family.run("medium", &input, &p, 1).unwrap_err().to_string();
        assert!(err.contains("medium") && err.contains("slow"), "{err}");
        assert!(family.run("fast", &input, &p, 0).is_err());
    }
}
