//! The statistics every stage of the harness shares, so a summary, a figure and a claim computed
//! from the same rows agree.

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

#[cfg(test)]
mod tests {
    use super::*;

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
