//! Comparing learned topics with true ones: Jensen-Shannon divergence between distributions and
//! a minimum-cost one-to-one matching of topics (the Hungarian algorithm).
//!
//! LDA's topics are identifiable only up to a permutation, so recovered topics are matched to
//! the true ones by the assignment that minimizes the total divergence, O(K^3) with the
//! Hungarian algorithm (Kuhn-Munkres with potentials, as in Jonker-Volgenant's shortest
//! augmenting paths), then summarized by the mean divergence of matched pairs.

/// Jensen-Shannon divergence in nats (between 0 and ln 2) of two distributions over the same
/// outcomes.
pub fn jensen_shannon(p: &[f64], q: &[f64]) -> f64 {
    let kl_to_mid = |a: &[f64], b: &[f64]| -> f64 {
        a.iter()
            .zip(b)
            .filter(|(&x, _)| x > 0.0)
            .map(|(&x, &y)| x * (2.0 * x / (x + y)).ln())
            .sum()
    };
    (0.5 * (kl_to_mid(p, q) + kl_to_mid(q, p))).max(0.0)
}

/// The assignment `row -> column` of an `n x n` cost matrix (row-major) with the smallest total
/// cost. O(n^3).
pub fn hungarian(cost: &[f64], n: usize) -> Vec<usize> {
    assert_eq!(cost.len(), n * n, "hungarian: cost must be n x n");
    // 1-based potentials u (rows), v (columns); way[j] is the previous column on the augmenting
    // path; matched[j] is the row matched to column j (0 = none).
    let mut u = vec![0.0; n + 1];
    let mut v = vec![0.0; n + 1];
    let mut matched = vec![0usize; n + 1];
    let mut way = vec![0usize; n + 1];
    for row in 1..=n {
        matched[0] = row;
        let mut j0 = 0;
        let mut min_to = vec![f64::INFINITY; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = matched[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0;
            for j in 1..=n {
                if !used[j] {
                    let reduced = cost[(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
                    if reduced < min_to[j] {
                        min_to[j] = reduced;
                        way[j] = j0;
                    }
                    if min_to[j] < delta {
                        delta = min_to[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[matched[j]] += delta;
                    v[j] -= delta;
                } else {
                    min_to[j] -= delta;
                }
            }
            j0 = j1;
            if matched[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            matched[j0] = matched[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    let mut assignment = vec![0; n];
    for j in 1..=n {
        if matched[j] > 0 {
            assignment[matched[j] - 1] = j - 1;
        }
    }
    assignment
}

/// How well learned topics match true ones.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicMatch {
    /// `matching[t]` is the learned topic paired with true topic `t`.
    pub matching: Vec<usize>,
    /// Jensen-Shannon divergence of each pair, by true topic.
    pub divergences: Vec<f64>,
    /// Mean of `divergences` over the true topics.
    pub mean_divergence: f64,
}

/// Matches learned topics to true ones (both `K x W` row-major distributions) by minimum total
/// Jensen-Shannon divergence.
pub fn match_topics(truth: &[f64], learned: &[f64], topics: usize) -> TopicMatch {
    assert_eq!(truth.len(), learned.len(), "match_topics: shapes differ");
    let words = truth.len() / topics.max(1);
    let row = |m: &'_ [f64], t: usize| -> Vec<f64> { m[t * words..(t + 1) * words].to_vec() };
    let mut cost = vec![0.0; topics * topics];
    for a in 0..topics {
        for b in 0..topics {
            cost[a * topics + b] = jensen_shannon(&row(truth, a), &row(learned, b));
        }
    }
    let matching = hungarian(&cost, topics);
    let divergences: Vec<f64> = (0..topics)
        .map(|a| cost[a * topics + matching[a]])
        .collect();
    let mean_divergence = divergences.iter().sum::<f64>() / topics.max(1) as f64;
    TopicMatch {
        matching,
        divergences,
        mean_divergence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parbench_common::Rng;

    fn brute_force(cost: &[f64], n: usize) -> f64 {
        fn go(cost: &[f64], n: usize, row: usize, used: &mut Vec<bool>) -> f64 {
            if row == n {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for j in 0..n {
                if !used[j] {
                    used[j] = true;
                    best = best.min(cost[row * n + j] + go(cost, n, row + 1, used));
                    used[j] = false;
                }
            }
            best
        }
        go(cost, n, 0, &mut vec![false; n])
    }

    #[test]
    fn hungarian_finds_the_optimum_that_brute_force_finds() {
        let mut rng = Rng::new(3);
        for n in 1..=6 {
            for _ in 0..20 {
                let cost: Vec<f64> = (0..n * n).map(|_| rng.next_f64()).collect();
                let assignment = hungarian(&cost, n);
                let mut seen = assignment.clone();
                seen.sort();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "not a permutation");
                let total: f64 = (0..n).map(|i| cost[i * n + assignment[i]]).sum();
                let best = brute_force(&cost, n);
                assert!(
                    (total - best).abs() < 1e-12,
                    "n = {n}: expected {best}, actual {total}"
                );
            }
        }
    }

    #[test]
    fn jensen_shannon_bounds() {
        let p = [0.5, 0.5, 0.0];
        let q = [0.0, 0.0, 1.0];
        assert!(jensen_shannon(&p, &p).abs() < 1e-15);
        assert!((jensen_shannon(&p, &q) - std::f64::consts::LN_2).abs() < 1e-12);
        let r = [0.2, 0.3, 0.5];
        assert!((jensen_shannon(&p, &r) - jensen_shannon(&r, &p)).abs() < 1e-15);
    }

    #[test]
    fn match_topics_undoes_a_permutation() {
        let truth = [0.7, 0.2, 0.1, 0.1, 0.1, 0.8, 0.3, 0.4, 0.3];
        let learned = [0.1, 0.1, 0.8, 0.3, 0.4, 0.3, 0.7, 0.2, 0.1];
        let m = match_topics(&truth, &learned, 3);
        assert_eq!(m.matching, [2, 0, 1]);
        assert!(m.mean_divergence < 1e-12);
    }
}
