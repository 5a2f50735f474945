//! A seeded synthetic corpus drawn from LDA's generative model, with its true topics, for
//! recovery tests and scaling runs:
//!
//! ```text
//! phi_k   ~ Dirichlet(beta)   over W words, k = 1..K
//! theta_d ~ Dirichlet(alpha)  over K topics, d = 1..D
//! n_d     ~ Uniform{min_len..=max_len}
//! each token: z ~ theta_d, w ~ phi_z
//! ```
//!
//! Cost O(K W + D K + N K) (each token draws from two discrete distributions by a linear scan).

use crate::corpus::Corpus;
use crate::math::{dirichlet, sample_discrete};
use crate::problem::LdaError;
use parbench_common::Rng;

/// The generative model's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Documents D.
    pub docs: usize,
    /// Vocabulary size W.
    pub words: usize,
    /// Topics K of the generating model.
    pub topics: usize,
    /// Document lengths are uniform in `min_len..=max_len`.
    pub min_len: usize,
    /// Longest document, in tokens (at least `min_len`).
    pub max_len: usize,
    /// Dirichlet concentration of the document-topic mixtures.
    pub alpha: f64,
    /// Dirichlet concentration of the topic-word distributions.
    pub beta: f64,
    /// Seed of every draw: a spec and seed give the same corpus and truth, bit for bit.
    pub seed: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            docs: 300,
            words: 60,
            topics: 5,
            min_len: 40,
            max_len: 80,
            alpha: 0.1,
            beta: 0.1,
            seed: 1,
        }
    }
}

/// A synthetic corpus and the parameters that generated it.
#[derive(Clone, Debug)]
pub struct SyntheticCorpus {
    /// The sampled documents (no word names).
    pub corpus: Corpus,
    /// True phi, `K x W` row-major.
    pub topic_word: Vec<f64>,
    /// True theta, `D x K` row-major.
    pub doc_topic: Vec<f64>,
    /// The topic each token was generated from.
    pub assignments: Vec<Vec<u32>>,
}

impl SyntheticSpec {
    /// Rejects settings [`generate`] cannot draw from (it calls this first), without drawing
    /// anything: O(1).
    pub fn validate(&self) -> Result<(), LdaError> {
        if self.words == 0 || self.topics == 0 {
            return Err(LdaError::BadSpec(
                "words and topics must be at least 1".to_owned(),
            ));
        }
        if self.min_len > self.max_len {
            return Err(LdaError::BadSpec(format!(
                "min_len {} exceeds max_len {}",
                self.min_len, self.max_len
            )));
        }
        for (name, v) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(LdaError::BadSpec(format!(
                    "{name} must be finite and positive, got {v}"
                )));
            }
        }
        Ok(())
    }
}

/// Draws a corpus from the generative model; word names are `w0`, `w1`, ...
pub fn generate(spec: &SyntheticSpec) -> Result<SyntheticCorpus, LdaError> {
    spec.validate()?;
    let mut rng = Rng::new(spec.seed);
    let topic_word: Vec<f64> = (0..spec.topics)
        .flat_map(|_| dirichlet(&mut rng, spec.beta, spec.words))
        .collect();
    let mut doc_topic = Vec::with_capacity(spec.docs * spec.topics);
    let mut docs = Vec::with_capacity(spec.docs);
    let mut assignments = Vec::with_capacity(spec.docs);
    for _ in 0..spec.docs {
        let theta = dirichlet(&mut rng, spec.alpha, spec.topics);
        let len = spec.min_len + rng.below((spec.max_len - spec.min_len + 1) as u64) as usize;
        let mut words = Vec::with_capacity(len);
        let mut z = Vec::with_capacity(len);
        for _ in 0..len {
            let t = sample_discrete(&mut rng, &theta);
            let phi = &topic_word[t * spec.words..(t + 1) * spec.words];
            words.push(sample_discrete(&mut rng, phi) as u32);
            z.push(t as u32);
        }
        doc_topic.extend_from_slice(&theta);
        docs.push(words);
        assignments.push(z);
    }
    let vocab = (0..spec.words).map(|w| format!("w{w}")).collect();
    let corpus = Corpus::new(docs, vocab, spec.words)?;
    Ok(SyntheticCorpus {
        corpus,
        topic_word,
        doc_topic,
        assignments,
    })
}
