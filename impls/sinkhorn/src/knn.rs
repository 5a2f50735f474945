//! k-nearest-neighbour classification by distance, the use Kusner et al. (2015) put the Word
//! Mover's Distance to: a test document takes the class most common among the k training
//! documents nearest to it.
//!
//! Neighbours are ranked by (distance, index), so equal distances rank the same way on every
//! run. A tie for the most votes is broken by voting again with one neighbour fewer, until one
//! class leads (with one neighbour, one always does): the nearer neighbours decide.

/// The class each `k` of `ks` predicts for one query, given its `distances` to the training
/// documents and their `labels` (class ids); in the order of `ks`. A `k` larger than the number
/// of training documents votes with all of them.
///
/// # Panics
/// When `distances` and `labels` differ in length, there is no training document, a `k` is 0,
/// or a distance is NaN.
pub fn predict(distances: &[f64], labels: &[u32], ks: &[usize]) -> Vec<u32> {
    assert_eq!(
        distances.len(),
        labels.len(),
        "one distance per training document"
    );
    assert!(!labels.is_empty(), "no training documents");
    assert!(ks.iter().all(|&k| k > 0), "k must be positive");
    assert!(distances.iter().all(|d| !d.is_nan()), "a distance is NaN");
    let largest = ks.iter().copied().max().unwrap_or(1).min(labels.len());
    let mut order: Vec<usize> = (0..distances.len()).collect();
    let by_rank = |&a: &usize, &b: &usize| distances[a].total_cmp(&distances[b]).then(a.cmp(&b));
    if largest < order.len() {
        order.select_nth_unstable_by(largest - 1, by_rank);
        order.truncate(largest);
    }
    order.sort_unstable_by(by_rank);
    let classes = labels.iter().copied().max().map_or(0, |c| c as usize + 1);
    ks.iter()
        .map(|&k| {
            let mut votes = vec![0usize; classes];
            for &n in &order[..k.min(order.len())] {
                votes[labels[n] as usize] += 1;
            }
            // Drop the farthest neighbour while two classes share the most votes.
            let mut last = k.min(order.len());
            loop {
                let most = votes.iter().copied().max().unwrap_or(0);
                let mut leaders = (0..classes).filter(|&c| votes[c] == most);
                let first = leaders.next().unwrap_or(0);
                if leaders.next().is_none() {
                    break first as u32;
                }
                last -= 1;
                votes[labels[order[last]] as usize] -= 1;
            }
        })
        .collect()
}

/// The bag-of-words baseline WMD is measured against (Kusner et al.'s "BOW"): one minus the
/// cosine of a query's histogram with each target document's column of `c`. Embeddings play
/// no part: documents without a word in common are at distance 1 however close their words
/// are in meaning. The targets' norms are computed once, for every query.
pub struct CosineTargets<'a> {
    docs_by_word: &'a parbench_common::Csr,
    norms: Vec<f64>,
}

impl<'a> CosineTargets<'a> {
    /// The targets of `docs_by_word` (words x documents).
    pub fn new(docs_by_word: &'a parbench_common::Csr) -> CosineTargets<'a> {
        let mut norm_sq = vec![0.0; docs_by_word.ncols()];
        for (&doc, &value) in docs_by_word.indices().iter().zip(docs_by_word.values()) {
            norm_sq[doc as usize] += value * value;
        }
        CosineTargets {
            docs_by_word,
            norms: norm_sq.into_iter().map(f64::sqrt).collect(),
        }
    }

    /// The distance of `query` (a histogram as [`crate::WmdProblem::query`] holds one) to every
    /// target.
    ///
    /// # Panics
    /// When a query word is not a row of the targets' matrix.
    pub fn distances(&self, query: &[(u32, f64)]) -> Vec<f64> {
        let mut dot = vec![0.0; self.norms.len()];
        for &(word, weight) in query {
            let (targets, values) = self.docs_by_word.row(word as usize);
            for (&doc, &value) in targets.iter().zip(values) {
                dot[doc as usize] += weight * value;
            }
        }
        let query_norm = query.iter().map(|&(_, w)| w * w).sum::<f64>().sqrt();
        dot.iter()
            .zip(&self.norms)
            .map(|(&d, &n)| 1.0 - d / (query_norm * n))
            .collect()
    }
}

/// The share of `predicted` that differs from `truth`, in percent.
///
/// # Panics
/// When the two differ in length or are empty.
pub fn error_percent(predicted: &[u32], truth: &[u32]) -> f64 {
    assert_eq!(predicted.len(), truth.len(), "one prediction per query");
    assert!(!truth.is_empty(), "no queries");
    let wrong = predicted.iter().zip(truth).filter(|(p, t)| p != t).count();
    100.0 * wrong as f64 / truth.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_neighbour_decides_at_k_1() {
        let d = [3.0, 0.5, 2.0, 0.7];
        let labels = [0, 1, 0, 2];
        assert_eq!(predict(&d, &labels, &[1]), vec![1]);
    }

    #[test]
    fn the_majority_of_k_neighbours_decides() {
        // Nearest first: 1 (class 1), 3 (class 0), 4 (class 0), 0 (class 1), 2 (class 2).
        let d = [0.9, 0.1, 1.5, 0.2, 0.3];
        let labels = [1, 1, 2, 0, 0];
        assert_eq!(predict(&d, &labels, &[1, 3, 5]), vec![1, 0, 0]);
    }

    #[test]
    fn a_tie_is_broken_by_the_nearer_neighbours() {
        // Nearest first: classes 3, 0, 0, 3. k = 2 ties, and the nearest alone says 3; k = 4
        // ties, and the nearest three say 0.
        let d = [0.2, 0.9, 0.4, 0.3];
        let labels = [3, 3, 0, 0];
        assert_eq!(predict(&d, &labels, &[2, 4]), vec![3, 0]);
        let d = [0.5, 0.9, 0.1, 0.3];
        assert_eq!(predict(&d, &labels, &[2, 4]), vec![0, 0]);
    }

    #[test]
    fn equal_distances_rank_by_index_so_order_of_ks_does_not_matter() {
        let d = [1.0, 1.0, 1.0];
        let labels = [2, 1, 1];
        assert_eq!(predict(&d, &labels, &[3, 1, 2]), vec![1, 2, 2]);
    }

    #[test]
    fn a_k_beyond_the_training_set_votes_with_all_of_it() {
        let d = [0.1, 0.2, 0.3];
        let labels = [0, 1, 1];
        assert_eq!(predict(&d, &labels, &[10]), vec![1]);
    }

    #[test]
    fn agrees_with_a_full_sort_and_count_on_random_inputs() {
        let mut rng = parbench_common::Rng::new(7);
        for _ in 0..200 {
            let n = 1 + (rng.next_u64() % 40) as usize;
            // Few distinct distances, so ties are common.
            let d: Vec<f64> = (0..n).map(|_| (rng.next_u64() % 6) as f64).collect();
            let labels: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 4) as u32).collect();
            let ks = [1, 2, 3, 5, 8, 50];
            let got = predict(&d, &labels, &ks);
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| d[a].partial_cmp(&d[b]).unwrap().then(a.cmp(&b)));
            for (i, &k) in ks.iter().enumerate() {
                // Vote again with one neighbour fewer until a single class leads.
                let mut kk = k.min(n);
                let expected = loop {
                    let mut votes = [0; 4];
                    for &j in &order[..kk] {
                        votes[labels[j] as usize] += 1;
                    }
                    let most = *votes.iter().max().unwrap();
                    let leaders: Vec<usize> = (0..4).filter(|&c| votes[c] == most).collect();
                    if leaders.len() == 1 {
                        break leaders[0] as u32;
                    }
                    kk -= 1;
                };
                assert_eq!(got[i], expected, "d {d:?} labels {labels:?} k {k}");
            }
        }
    }

    #[test]
    fn cosine_distance_is_zero_for_the_same_words_and_one_for_none_in_common() {
        // Words x documents: doc 0 = {0: 0.5, 1: 0.5}, doc 1 = {2: 1}, doc 2 = {0: 0.25, 1: 0.75}.
        let c = parbench_common::Csr::from_triplets(
            3,
            3,
            &[
                (0, 0, 0.5),
                (1, 0, 0.5),
                (2, 1, 1.0),
                (0, 2, 0.25),
                (1, 2, 0.75),
            ],
        )
        .unwrap();
        let d = CosineTargets::new(&c).distances(&[(0, 0.5), (1, 0.5)]);
        assert!(d[0].abs() < 1e-15, "{d:?}");
        assert_eq!(d[1], 1.0);
        // cos = (0.125 + 0.375) / (sqrt(0.5) sqrt(0.625))
        let expected = 1.0 - 0.5 / (0.5f64.sqrt() * 0.625f64.sqrt());
        assert!((d[2] - expected).abs() < 1e-15, "{d:?}");
    }

    #[test]
    fn error_counts_the_wrong_predictions() {
        assert_eq!(error_percent(&[0, 1, 2, 2], &[0, 1, 1, 0]), 50.0);
        assert_eq!(error_percent(&[4], &[4]), 0.0);
    }
}
