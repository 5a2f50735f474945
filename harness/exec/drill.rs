//! The regression drill: proof that the gate catches what it exists to catch.
//!
//! Built with the `drill` cargo feature (CI's build carries it, a user's does not), parbench reads
//! `PARBENCH_DRILL`, a comma-separated list of `[EXPERIMENT:]VARIANT=FACTOR` (`*` for every
//! variant), and makes each named variant's runs do FACTOR times the work:
//!
//! - Timed runs: after the run, the thread keeps the CPU busy with arithmetic for (FACTOR - 1)
//!   times the run's own time, added to the run's wall time.
//! - Counted runs (under callgrind): after the run, the thread spins through (FACTOR - 1) times
//!   the run's instruction count, read back from callgrind's dump of the run
//!   ([`spin_counted`]), so the count grows by FACTOR to within a few instructions.

use anyhow::{bail, Result};

/// The variable the drill reads.
pub const DRILL_ENV: &str = "PARBENCH_DRILL";

/// One slowdown the drill applies.
#[derive(Clone, Debug, PartialEq)]
pub struct Slowdown {
    /// Experiment it applies to (`None`: every experiment).
    pub experiment: Option<String>,
    /// Variant name, or `*` for every variant.
    pub variant: String,
    pub factor: f64,
}

/// Parses a drill specification (the value of [`DRILL_ENV`]).
pub fn parse(spec: &str) -> Result<Vec<Slowdown>> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((target, factor)) = item.rsplit_once('=') else {
            bail!("{DRILL_ENV}: `{item}` is not [EXPERIMENT:]VARIANT=FACTOR");
        };
        let factor: f64 = match factor.trim().parse() {
            Ok(f) if (1.0..=1000.0).contains(&f) => f,
            _ => bail!("{DRILL_ENV}: the factor of `{item}` must be a number from 1 to 1000"),
        };
        let (experiment, variant) = match target.split_once(':') {
            Some((e, v)) => (Some(e.trim().to_string()), v.trim().to_string()),
            None => (None, target.trim().to_string()),
        };
        if variant.is_empty() {
            bail!("{DRILL_ENV}: `{item}` names no variant");
        }
        out.push(Slowdown {
            experiment,
            variant,
            factor,
        });
    }
    Ok(out)
}

/// The factor the drill applies to `variant` of `experiment` (1 when none applies; the
/// largest when several do).
pub fn factor_for(slowdowns: &[Slowdown], experiment: &str, variant: &str) -> f64 {
    slowdowns
        .iter()
        .filter(|s| s.experiment.as_deref().is_none_or(|e| e == experiment))
        .filter(|s| s.variant == "*" || s.variant == variant)
        .map(|s| s.factor)
        .fold(1.0, f64::max)
}

/// The slowdowns this process was asked for.
#[cfg(feature = "drill")]
pub fn requested() -> Result<Vec<Slowdown>> {
    match std::env::var(DRILL_ENV) {
        Ok(spec) => {
            let slowdowns = parse(&spec)?;
            if !slowdowns.is_empty() {
                eprintln!("drill: {DRILL_ENV}={spec}: runs of the named variants are made slower");
            }
            Ok(slowdowns)
        }
        Err(_) => Ok(Vec::new()),
    }
}

/// The slowdowns this process was asked for: none, since it was built without the drill.
#[cfg(not(feature = "drill"))]
pub fn requested() -> Result<Vec<Slowdown>> {
    if std::env::var_os(DRILL_ENV).is_some() {
        bail!("{DRILL_ENV} is set, but this parbench was built without the `drill` feature (cargo build --features drill)");
    }
    Ok(Vec::new())
}

/// The spin loop of [`spin_counted`]: `iterations` rounds of one dependent multiply-add.
#[inline(never)]
fn spin(iterations: u64) -> f64 {
    let mut x = 1.0f64;
    for _ in 0..iterations {
        x = std::hint::black_box(x * 0.999_999 + 1e-7);
    }
    x
}

/// Under callgrind: adds (`factor` - 1) times the instructions `region` counted so far, by
/// spinning. The spin's cost per round is measured first in a probe region of its own.
pub fn spin_counted(region: &crate::exec::callgrind::Region, factor: f64) -> Result<()> {
    use crate::exec::callgrind::Region;
    region.dump();
    let counted = region.counted_so_far()?;
    const PROBE: u64 = 1_000_000;
    // Dumps of one label add up: each probe needs its own (the dumps of every process go
    // to one directory).
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = Region::start(&format!("drill-probe-{}-{n}", std::process::id()))?;
    std::hint::black_box(spin(PROBE));
    probe.dump();
    let per_round = probe.counted_so_far()? as f64 / PROBE as f64;
    let rounds = ((factor - 1.0) * counted as f64 / per_round.max(1.0)).round() as u64;
    region.resume();
    std::hint::black_box(spin(rounds));
    Ok(())
}

/// Keeps the thread busy for `seconds` of arithmetic; returns the seconds it took.
pub fn busy(seconds: f64) -> f64 {
    let start = std::time::Instant::now();
    let mut x = 1.0f64;
    while start.elapsed().as_secs_f64() < seconds {
        for _ in 0..1000 {
            x = std::hint::black_box(x * 0.999_999 + 1e-7);
        }
    }
    std::hint::black_box(x);
    start.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifications_parse_and_select() {
        let s =
            parse("fusedmm_gate:1.5d-dense-shift strategy=fusion=2, *=10 ,hogwild=1.3").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].experiment.as_deref(), Some("fusedmm_gate"));
        assert_eq!(s[0].variant, "1.5d-dense-shift strategy=fusion");
        assert_eq!(
            factor_for(&s[..1], "fusedmm_gate", "1.5d-dense-shift strategy=fusion"),
            2.0
        );
        assert_eq!(
            factor_for(&s[..1], "other", "1.5d-dense-shift strategy=fusion"),
            1.0
        );
        assert_eq!(factor_for(&s, "w2v", "hogwild"), 10.0);
        assert_eq!(factor_for(&s[2..], "w2v", "hogwild"), 1.3);
        assert_eq!(factor_for(&s[2..], "w2v", "gemm"), 1.0);
        for bad in ["x", "x=0.5", "x=abc", "=2", "e:=2"] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn busy_work_lasts_as_long_as_asked() {
        assert!(busy(0.002) >= 0.002);
    }
}
