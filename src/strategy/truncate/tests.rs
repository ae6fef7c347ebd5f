//! Tests of the cut search.

use super::drop::earliest_fitting;
use proptest::prelude::*;

proptest! {
    /// With a monotone fit (none, then all), the search finds the first that fits, or the
    /// last when none does, in O(log n) probes.
    #[test]
    fn the_search_finds_the_first_fit_in_log_probes(
        n in 1usize..3_000,
        first in 0usize..3_100,
    ) {
        // Candidates 1, 4, 7 …; those past `first * 3` fit.
        let candidates: Vec<usize> = (0..n).map(|i| i * 3 + 1).collect();
        let mut probes = 0usize;
        let got = earliest_fitting(&candidates, |k| {
            probes += 1;
            (k > first * 3, k)
        });
        let want = candidates
            .iter()
            .copied()
            .find(|&k| k > first * 3)
            .unwrap_or(candidates[n - 1]);
        prop_assert_eq!(got, Some(want));
        let log = usize::BITS - n.leading_zeros();
        prop_assert!(probes <= 2 * log as usize + 3, "{} probes for {} candidates", probes, n);
        // None fits: the first and the last are probed, nothing else.
        if candidates[n - 1] <= first * 3 {
            prop_assert!(probes <= 2, "{} probes when none fits", probes);
        }
    }
}

#[test]
fn no_candidate_no_cut() {
    assert_eq!(earliest_fitting(&[], |k| (true, k)), None);
}
