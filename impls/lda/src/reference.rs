//! Deliberately plain versions of what the samplers compute, written from the definitions with
//! none of the variants' machinery (no cached reciprocals, buckets or word-major tables), for the
//! tests:
//!
//! - [`reference_counts`]: n_dk, n_kw (topic-major, `K x W`), n_k by counting the assignments.
//! - [`reference_conditional`]: the normalized full conditional of one token,
//!   `p(z = k | rest) ∝ (n_dk + alpha)(n_kw + beta) / (n_k + W beta)`, counts taken over every
//!   other token (O(N)).
//! - [`reference_log_likelihood`]: the joint log-likelihood term by term from the issue's
//!   formula with those counts.

use crate::corpus::Corpus;
use crate::math::ln_gamma;

/// Counts of `assignments`, topic-major: (n_dk as `D x K`, n_kw as `K x W`, n_k).
pub fn reference_counts(
    corpus: &Corpus,
    assignments: &[Vec<u32>],
    topics: usize,
) -> (Vec<Vec<u64>>, Vec<Vec<u64>>, Vec<u64>) {
    let mut ndk = vec![vec![0u64; topics]; corpus.num_docs()];
    let mut nkw = vec![vec![0u64; corpus.num_words()]; topics];
    let mut nk = vec![0u64; topics];
    for (d, doc) in corpus.docs().iter().enumerate() {
        for (i, &w) in doc.iter().enumerate() {
            let k = assignments[d][i] as usize;
            ndk[d][k] += 1;
            nkw[k][w as usize] += 1;
            nk[k] += 1;
        }
    }
    (ndk, nkw, nk)
}

/// The full conditional of token `position` of document `doc`, normalized to sum to 1.
pub fn reference_conditional(
    corpus: &Corpus,
    assignments: &[Vec<u32>],
    topics: usize,
    alpha: f64,
    beta: f64,
    doc: usize,
    position: usize,
) -> Vec<f64> {
    let mut others: Vec<Vec<u32>> = assignments.to_vec();
    // Count every token but this one: give it a topic, count, then subtract it.
    let (mut ndk, mut nkw, mut nk) = reference_counts(corpus, &others, topics);
    let own = others[doc][position] as usize;
    let w = corpus.doc(doc)[position] as usize;
    ndk[doc][own] -= 1;
    nkw[own][w] -= 1;
    nk[own] -= 1;
    others.clear();
    let vocab = corpus.num_words() as f64;
    let weights: Vec<f64> = (0..topics)
        .map(|k| {
            (ndk[doc][k] as f64 + alpha) * (nkw[k][w] as f64 + beta) / (nk[k] as f64 + vocab * beta)
        })
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|x| x / total).collect()
}

/// log p(w, z) of `assignments`, term by term.
pub fn reference_log_likelihood(
    corpus: &Corpus,
    assignments: &[Vec<u32>],
    topics: usize,
    alpha: f64,
    beta: f64,
) -> f64 {
    let (ndk, nkw, nk) = reference_counts(corpus, assignments, topics);
    let k = topics as f64;
    let w = corpus.num_words() as f64;
    let d = corpus.num_docs() as f64;
    let mut ll = k * (ln_gamma(w * beta) - w * ln_gamma(beta));
    for t in 0..topics {
        for &c in &nkw[t] {
            ll += ln_gamma(c as f64 + beta);
        }
        ll -= ln_gamma(nk[t] as f64 + w * beta);
    }
    ll += d * (ln_gamma(k * alpha) - k * ln_gamma(alpha));
    for row in &ndk {
        let n: u64 = row.iter().sum();
        for &c in row {
            ll += ln_gamma(c as f64 + alpha);
        }
        ll -= ln_gamma(n as f64 + k * alpha);
    }
    ll
}
