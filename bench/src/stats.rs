//! The arithmetic the figures share: the median of a few runs, a duration in milliseconds.

use std::cmp::Ordering;

/// The middle of `values` under `order` (the upper middle of an even count); `None` for none,
/// so each figure says itself what no runs read as.
pub fn median<T: Copy>(values: &[T], order: impl FnMut(&T, &T) -> Ordering) -> Option<T> {
    let mut sorted = values.to_vec();
    sorted.sort_by(order);
    sorted.get(sorted.len() / 2).copied()
}

/// `d` in milliseconds, as the figures print them.
pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::none(&[], None)]
    #[case::one(&[4.0], Some(4.0))]
    #[case::odd_count_the_middle(&[12.2, 9.0, 10.1], Some(10.1))]
    #[case::even_count_the_upper_middle(&[4.0, 1.0, 3.0, 2.0], Some(3.0))]
    #[case::a_run_without_steps_sorts_last(&[f64::NAN, 2.0, 1.0], Some(2.0))]
    fn the_median_of_figures(#[case] values: &[f64], #[case] want: Option<f64>) {
        assert_eq!(median(values, f64::total_cmp), want);
    }

    #[rstest]
    #[case::none(&[], None)]
    #[case::odd_count_the_middle(&[9, 1, 5, 3, 7], Some(5))]
    #[case::even_count_the_upper_middle(&[30, 2], Some(30))]
    fn the_median_of_times(#[case] millis: &[u64], #[case] want: Option<u64>) {
        let times: Vec<Duration> = millis.iter().map(|m| Duration::from_millis(*m)).collect();
        assert_eq!(
            median(&times, Duration::cmp),
            want.map(Duration::from_millis)
        );
    }
}
