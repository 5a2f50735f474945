//! The sampler state: topic assignments and the three count tables, their recount, random
//! initialization, and the joint log-likelihood.
//!
//! Layouts: `doc_topic` is `D x K` (row `d` is n_d·), `word_topic` is word-major `W x K` (row `w`
//! is n_·w, so the K counts a token's draw reads are contiguous), `topic_totals` is n_k.
//!
//! Joint log-likelihood (Griffiths & Steyvers 2004; the issue's formula), O(W K + D K) lnΓ calls:
//!
//! ```text
//! log p(w, z) = K [lnΓ(W β) - W lnΓ(β)] + Σ_k [Σ_w lnΓ(n_kw + β) - lnΓ(n_k + W β)]
//!             + D [lnΓ(K α) - K lnΓ(α)] + Σ_d [Σ_k lnΓ(n_dk + α) - lnΓ(n_d + K α)]
//! ```
//!
//! Zero counts are frequent, so `lnΓ(β)` and `lnΓ(α)` are computed once.

use crate::corpus::Corpus;
use crate::math::ln_gamma;
use crate::problem::LdaError;
use parbench_common::Rng;

/// The random stream of the initial assignments; every variant starts from the same state.
const INIT_STREAM: u64 = 0x1_417;

/// Topic assignments of every token with the counts they imply.
#[derive(Clone, Debug, PartialEq)]
pub struct LdaState {
    pub(crate) topics: usize,
    pub(crate) num_words: usize,
    pub(crate) assignments: Vec<Vec<u32>>,
    pub(crate) doc_topic: Vec<u32>,
    pub(crate) word_topic: Vec<u32>,
    pub(crate) topic_totals: Vec<u32>,
}

impl LdaState {
    /// Every token gets a uniformly random topic from a stream derived from `seed`.
    pub fn random(corpus: &Corpus, topics: usize, seed: u64) -> LdaState {
        let mut rng = Rng::stream(seed, INIT_STREAM);
        let assignments = corpus
            .docs()
            .iter()
            .map(|d| d.iter().map(|_| rng.below(topics as u64) as u32).collect())
            .collect();
        LdaState::counted(corpus, topics, assignments)
    }

    /// The state of the given assignments, checked against the corpus.
    pub fn from_assignments(
        corpus: &Corpus,
        topics: usize,
        assignments: Vec<Vec<u32>>,
    ) -> Result<LdaState, LdaError> {
        if assignments.len() != corpus.num_docs() {
            return Err(LdaError::DocumentCount {
                docs: corpus.num_docs(),
                found: assignments.len(),
            });
        }
        for (doc, (z, words)) in assignments.iter().zip(corpus.docs()).enumerate() {
            if z.len() != words.len() {
                return Err(LdaError::AssignmentShape {
                    doc,
                    expected: words.len(),
                    found: z.len(),
                });
            }
            if let Some(position) = z.iter().position(|&t| t as usize >= topics) {
                return Err(LdaError::TopicOutOfRange {
                    doc,
                    position,
                    topic: z[position],
                    topics,
                });
            }
        }
        Ok(LdaState::counted(corpus, topics, assignments))
    }

    /// Assembles the state, counting `assignments` (which must fit the corpus).
    pub(crate) fn counted(corpus: &Corpus, topics: usize, assignments: Vec<Vec<u32>>) -> LdaState {
        let mut state = LdaState {
            topics,
            num_words: corpus.num_words(),
            assignments,
            doc_topic: Vec::new(),
            word_topic: Vec::new(),
            topic_totals: Vec::new(),
        };
        state.recount(corpus);
        state
    }

    /// Rebuilds every count table from the assignments: O(N + (D + W) K).
    pub fn recount(&mut self, corpus: &Corpus) {
        let k = self.topics;
        let (doc_topic, word_topic, topic_totals) =
            count_tables(corpus, &self.assignments, k, corpus.num_words());
        self.doc_topic = doc_topic;
        self.word_topic = word_topic;
        self.topic_totals = topic_totals;
    }

    /// `Err` describing the first difference between the stored counts and a recount.
    pub fn check_counts(&self, corpus: &Corpus) -> Result<(), String> {
        let (doc_topic, word_topic, topic_totals) =
            count_tables(corpus, &self.assignments, self.topics, self.num_words);
        compare_tables("n_kw", &self.word_topic, &word_topic, self.topics)?;
        compare_tables("n_k", &self.topic_totals, &topic_totals, self.topics)?;
        compare_tables("n_dk", &self.doc_topic, &doc_topic, self.topics)
    }

    /// The joint log-likelihood log p(w, z).
    pub fn log_likelihood(&self, corpus: &Corpus, alpha: f64, beta: f64) -> f64 {
        let lengths: Vec<usize> = corpus.docs().iter().map(Vec::len).collect();
        word_log_likelihood(&self.word_topic, &self.topic_totals, self.topics, beta)
            + doc_log_likelihood(&self.doc_topic, &lengths, self.topics, alpha)
    }

    /// K.
    pub fn topics(&self) -> usize {
        self.topics
    }
    /// W.
    pub fn num_words(&self) -> usize {
        self.num_words
    }
    /// Topic of every token, per document.
    pub fn assignments(&self) -> &[Vec<u32>] {
        &self.assignments
    }
    /// n_dk, `D x K` row-major.
    pub fn doc_topic(&self) -> &[u32] {
        &self.doc_topic
    }
    /// n_kw stored word-major, `W x K`: entry `w * K + k`.
    pub fn word_topic(&self) -> &[u32] {
        &self.word_topic
    }
    /// n_k.
    pub fn topic_totals(&self) -> &[u32] {
        &self.topic_totals
    }

    /// Posterior mean topic-word distributions phi, `K x W` row-major:
    /// `(n_kw + beta) / (n_k + W beta)`.
    pub fn topic_word_distributions(&self, beta: f64) -> Vec<f64> {
        let (k, w) = (self.topics, self.num_words);
        let mut phi = vec![0.0; k * w];
        for t in 0..k {
            let denom = self.topic_totals[t] as f64 + w as f64 * beta;
            for word in 0..w {
                phi[t * w + word] = (self.word_topic[word * k + t] as f64 + beta) / denom;
            }
        }
        phi
    }

    /// Posterior mean document-topic distributions theta, `D x K` row-major:
    /// `(n_dk + alpha) / (n_d + K alpha)`.
    pub fn doc_topic_distributions(&self, alpha: f64) -> Vec<f64> {
        let k = self.topics;
        let mut theta = vec![0.0; self.doc_topic.len()];
        for (row, out) in self.doc_topic.chunks(k).zip(theta.chunks_mut(k)) {
            let n: u64 = row.iter().map(|&c| c as u64).sum();
            let denom = n as f64 + k as f64 * alpha;
            for (o, &c) in out.iter_mut().zip(row) {
                *o = (c as f64 + alpha) / denom;
            }
        }
        theta
    }

    /// The `n` words with the largest count in `topic`, as (word id, count), largest first (ties
    /// by word id).
    pub fn top_words(&self, topic: usize, n: usize) -> Vec<(u32, u32)> {
        let k = self.topics;
        let mut words: Vec<(u32, u32)> = (0..self.num_words)
            .map(|w| (w as u32, self.word_topic[w * k + topic]))
            .filter(|&(_, c)| c > 0)
            .collect();
        words.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        words.truncate(n);
        words
    }
}

/// (n_dk, n_kw word-major, n_k) of `assignments`.
pub(crate) fn count_tables(
    corpus: &Corpus,
    assignments: &[Vec<u32>],
    topics: usize,
    num_words: usize,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let mut doc_topic = vec![0u32; corpus.num_docs() * topics];
    let mut word_topic = vec![0u32; num_words * topics];
    let mut topic_totals = vec![0u32; topics];
    for (d, (words, z)) in corpus.docs().iter().zip(assignments).enumerate() {
        for (&w, &t) in words.iter().zip(z) {
            doc_topic[d * topics + t as usize] += 1;
            word_topic[w as usize * topics + t as usize] += 1;
            topic_totals[t as usize] += 1;
        }
    }
    (doc_topic, word_topic, topic_totals)
}

/// `Err` naming the first entry where `actual` differs from `expected` (`row x topics` tables).
pub(crate) fn compare_tables(
    name: &str,
    actual: &[u32],
    expected: &[u32],
    topics: usize,
) -> Result<(), String> {
    if actual.len() != expected.len() {
        return Err(format!(
            "{name}: {} entries, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    match actual.iter().zip(expected).position(|(a, e)| a != e) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{name}[{}][{}] = {}, a recount gives {}",
            i / topics,
            i % topics,
            actual[i],
            expected[i]
        )),
    }
}

/// The joint log-likelihood log p(w, z) of a state known only by its count tables (a peer's
/// final state: `word_topic` `W x K` word-major, `doc_topic` `D x K`), after checking that they
/// are counts of this corpus: every word's row adds up to its frequency and every document's to
/// its length. The same sum as [`LdaState::log_likelihood`].
pub fn log_likelihood_of_counts(
    corpus: &Corpus,
    word_topic: &[u32],
    doc_topic: &[u32],
    topics: usize,
    alpha: f64,
    beta: f64,
) -> Result<f64, String> {
    let (w, d) = (corpus.num_words(), corpus.num_docs());
    if topics == 0 || word_topic.len() != w * topics || doc_topic.len() != d * topics {
        return Err(format!(
            "the tables are {} and {} entries, expected {w} x {topics} and {d} x {topics}",
            word_topic.len(),
            doc_topic.len()
        ));
    }
    let mut frequency = vec![0u64; w];
    for doc in corpus.docs() {
        for &word in doc {
            frequency[word as usize] += 1;
        }
    }
    let row_sum = |row: &[u32]| row.iter().map(|&c| c as u64).sum::<u64>();
    for (word, row) in word_topic.chunks(topics).enumerate() {
        if row_sum(row) != frequency[word] {
            return Err(format!(
                "word {word}'s counts add up to {}, the corpus has it {} times",
                row_sum(row),
                frequency[word]
            ));
        }
    }
    let lengths: Vec<usize> = corpus.docs().iter().map(Vec::len).collect();
    for (doc, row) in doc_topic.chunks(topics).enumerate() {
        if row_sum(row) != lengths[doc] as u64 {
            return Err(format!(
                "document {doc}'s counts add up to {}, it has {} tokens",
                row_sum(row),
                lengths[doc]
            ));
        }
    }
    let mut topic_totals = vec![0u32; topics];
    for row in word_topic.chunks(topics) {
        for (total, &c) in topic_totals.iter_mut().zip(row) {
            *total += c;
        }
    }
    // The two tables must also agree topic by topic (the same tokens counted both ways).
    for (k, &total) in topic_totals.iter().enumerate() {
        let by_docs: u64 = doc_topic.chunks(topics).map(|row| row[k] as u64).sum();
        if by_docs != total as u64 {
            return Err(format!(
                "topic {k} has {total} tokens by words and {by_docs} by documents"
            ));
        }
    }
    Ok(word_log_likelihood(word_topic, &topic_totals, topics, beta)
        + doc_log_likelihood(doc_topic, &lengths, topics, alpha))
}

/// The word half of the log-likelihood, constants included:
/// `K [lnΓ(Wβ) - W lnΓ(β)] + Σ_k [Σ_w lnΓ(n_kw + β) - lnΓ(n_k + Wβ)]`.
pub(crate) fn word_log_likelihood(
    word_topic: &[u32],
    topic_totals: &[u32],
    topics: usize,
    beta: f64,
) -> f64 {
    let num_words = word_topic.len() / topics;
    let w_beta = num_words as f64 * beta;
    let ln_gamma_beta = ln_gamma(beta);
    let mut sum = 0.0;
    let mut zeros = 0usize;
    for &c in word_topic {
        if c == 0 {
            zeros += 1;
        } else {
            sum += ln_gamma(c as f64 + beta);
        }
    }
    sum += zeros as f64 * ln_gamma_beta;
    for &n in topic_totals {
        sum -= ln_gamma(n as f64 + w_beta);
    }
    sum + topics as f64 * (ln_gamma(w_beta) - num_words as f64 * ln_gamma_beta)
}

/// The document half of the log-likelihood for the documents whose `D' x K` rows are given,
/// constants included: `Σ_d [lnΓ(Kα) - K lnΓ(α) + Σ_k lnΓ(n_dk + α) - lnΓ(n_d + Kα)]`.
pub(crate) fn doc_log_likelihood(
    doc_topic: &[u32],
    doc_lengths: &[usize],
    topics: usize,
    alpha: f64,
) -> f64 {
    let k_alpha = topics as f64 * alpha;
    let ln_gamma_alpha = ln_gamma(alpha);
    let per_doc_constant = ln_gamma(k_alpha) - topics as f64 * ln_gamma_alpha;
    let mut sum = 0.0;
    for (row, &len) in doc_topic.chunks(topics).zip(doc_lengths) {
        let mut doc = per_doc_constant - ln_gamma(len as f64 + k_alpha);
        for &c in row {
            doc += if c == 0 {
                ln_gamma_alpha
            } else {
                ln_gamma(c as f64 + alpha)
            };
        }
        sum += doc;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Corpus {
        Corpus::new(vec![vec![0, 1, 2, 1], vec![], vec![2, 2]], Vec::new(), 3).unwrap()
    }

    #[test]
    fn the_log_likelihood_of_a_states_counts_is_the_states_and_foreign_counts_are_refused() {
        let c = corpus();
        let state = LdaState::random(&c, 4, 9);
        let ll = log_likelihood_of_counts(&c, state.word_topic(), state.doc_topic(), 4, 0.1, 0.01);
        assert_eq!(ll, Ok(state.log_likelihood(&c, 0.1, 0.01)));
        // A token moved to another topic in one table only.
        let mut doc_topic = state.doc_topic().to_vec();
        let t = state.assignments()[0][0] as usize;
        doc_topic[t] -= 1;
        doc_topic[(t + 1) % 4] += 1;
        let e = log_likelihood_of_counts(&c, state.word_topic(), &doc_topic, 4, 0.1, 0.01);
        assert!(e.unwrap_err().contains("tokens by words"));
        // A word counted once too often.
        let mut word_topic = state.word_topic().to_vec();
        word_topic[0] += 1;
        let e = log_likelihood_of_counts(&c, &word_topic, state.doc_topic(), 4, 0.1, 0.01);
        assert!(e.unwrap_err().contains("word 0's counts add up to 2"));
        let e = log_likelihood_of_counts(&c, &word_topic[1..], state.doc_topic(), 4, 0.1, 0.01);
        assert!(e.unwrap_err().contains("expected 3 x 4"));
    }

    #[test]
    fn check_counts_catches_a_lost_or_doubled_count_and_recount_repairs_it() {
        let c = corpus();
        let mut state = LdaState::random(&c, 4, 9);
        assert_eq!(state.check_counts(&c), Ok(()));
        let t = state.assignments[0][1] as usize;
        state.word_topic[4 + t] += 1; // word 1 counted twice
        let err = state.check_counts(&c).unwrap_err();
        assert!(err.starts_with(&format!("n_kw[1][{t}]")), "{err}");
        state.recount(&c);
        assert_eq!(state.check_counts(&c), Ok(()));
        state.topic_totals[0] = state.topic_totals[0].wrapping_sub(1);
        assert!(state.check_counts(&c).unwrap_err().starts_with("n_k"));
    }

    #[test]
    fn random_state_depends_only_on_the_seed() {
        let c = corpus();
        assert_eq!(LdaState::random(&c, 5, 1), LdaState::random(&c, 5, 1));
        let big = Corpus::new(vec![vec![0; 200]], Vec::new(), 1).unwrap();
        assert_ne!(
            LdaState::random(&big, 5, 1).assignments,
            LdaState::random(&big, 5, 2).assignments
        );
    }

    #[test]
    fn distributions_are_normalized_and_top_words_sorted() {
        let c = corpus();
        let state =
            LdaState::from_assignments(&c, 2, vec![vec![0, 0, 1, 0], vec![], vec![1, 1]]).unwrap();
        let phi = state.topic_word_distributions(0.1);
        for row in phi.chunks(3) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        let theta = state.doc_topic_distributions(0.5);
        for row in theta.chunks(2) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        // The empty document gets the prior mean.
        assert_eq!(&theta[2..4], &[0.5, 0.5]);
        assert_eq!(state.top_words(0, 5), [(1, 2), (0, 1)]);
        assert_eq!(state.top_words(1, 1), [(2, 3)]);
    }
}
