//! The statistics every stage of the harness shares, so a summary, a figure and a claim computed
//! from the same rows agree.

/// `amount` per second of `seconds`, 0 when no time was measured (a rate column never holds an
/// infinity).
pub fn per_second(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

/// Median of `values` (the mean of the two middle ones for an even count); `None` when empty.
/// NaNs sort last (`f64::total_cmp`), so they move the median only when they are the majority.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        0.5 * (sorted[mid - 1] + sorted[mid])
    })
}

/// A bootstrap confidence interval of the ratio of medians `median(now) / median(then)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioInterval {
    /// The ratio of the two samples' medians.
    pub ratio: f64,
    /// Two-sided `confidence` interval: `lower` is exceeded by the true ratio with probability
    /// about (1 + confidence) / 2.
    pub lower: f64,
    pub upper: f64,
    pub confidence: f64,
}

/// Resamples of [`ratio_of_medians`]: enough for stable 2.5% and 97.5% quantiles.
pub const BOOTSTRAP_RESAMPLES: usize = 4000;

/// Percentile-bootstrap interval of `median(now) / median(then)`: both samples are resampled
/// with replacement [`BOOTSTRAP_RESAMPLES`] times with a fixed seed, so the same numbers always
/// give the same interval (a verdict must be repeatable). With a handful of values per side
/// the interval is wide, as it should be: few repetitions cannot support a tight verdict.
/// `None` when either side is empty or holds a non-positive or non-finite value.
pub fn ratio_of_medians(now: &[f64], then: &[f64], confidence: f64) -> Option<RatioInterval> {
    let valid = |xs: &[f64]| !xs.is_empty() && xs.iter().all(|x| x.is_finite() && *x > 0.0);
    if !valid(now) || !valid(then) || !(0.0..1.0).contains(&confidence) {
        return None;
    }
    let ratio = median(now)? / median(then)?;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        // splitmix64: a fixed, dependency-free stream.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut resample = |xs: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..xs.len()).map(|_| xs[(next() % xs.len() as u64) as usize]));
        median(buf).unwrap_or(f64::NAN)
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut ratios: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| resample(now, &mut a) / resample(then, &mut b))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    let at =
        |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some(RatioInterval {
        ratio,
        lower: at(tail),
        upper: at(1.0 - tail),
        confidence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_interval_holds_the_ratio_and_narrows_with_agreeing_samples() {
        let then = [1.0, 1.02, 0.98, 1.01, 0.99];
        let now: Vec<f64> = then.iter().map(|x| 2.0 * x).collect();
        let i = ratio_of_medians(&now, &then, 0.95).unwrap();
        assert!((i.ratio - 2.0).abs() < 1e-12);
        assert!(i.lower <= i.ratio && i.ratio <= i.upper);
        // Every resample's median lies within the samples' ranges.
        assert!(i.lower >= 1.96 / 1.02 - 1e-12 && i.upper <= 2.04 / 0.98 + 1e-12);
        // Repeatable: the same numbers give the same interval.
        assert_eq!(ratio_of_medians(&now, &then, 0.95), Some(i));
        // Noisy samples give a wider interval around the same ratio.
        let noisy_then = [0.6, 1.4, 1.0, 0.7, 1.3];
        let noisy_now: Vec<f64> = noisy_then.iter().map(|x| 2.0 * x).collect();
        let w = ratio_of_medians(&noisy_now, &noisy_then, 0.95).unwrap();
        assert!(w.upper - w.lower > 2.0 * (i.upper - i.lower));
        // One value per side: the interval is the one ratio there is.
        let one = ratio_of_medians(&[3.0], &[1.5], 0.95).unwrap();
        assert_eq!((one.lower, one.ratio, one.upper), (2.0, 2.0, 2.0));
        assert!(ratio_of_medians(&[], &then, 0.95).is_none());
        assert!(ratio_of_medians(&[0.0], &then, 0.95).is_none());
        assert!(ratio_of_medians(&now, &then, 1.0).is_none());
    }

    #[test]
    fn odd_counts_take_the_middle_and_even_counts_average_the_middle_pair() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 1000.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn a_minority_of_nans_does_not_move_the_median() {
        assert_eq!(median(&[f64::NAN, 1.0, 2.0]), Some(2.0));
        assert!(median(&[f64::NAN, f64::NAN, 1.0]).unwrap().is_nan());
    }
}
