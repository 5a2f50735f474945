//! Seeded synthetic problems with the paper's shape.
//!
//! - Embeddings: `V x d` entries `N(0, 1/d)` (norms ~1, distances between words ~1.4), drawn with
//!   a fast normal approximation (Irwin-Hall sum of four uniforms, scaled to unit variance) from an
//!   independent stream per block of words, in parallel: the paper shape's 30 M values take tens
//!   of milliseconds, and the values do not depend on the thread count. Each is rounded to six
//!   decimals, as word2vec.c writes its vectors (`%lf`), so the file a peer reads has a real
//!   file's digits and size (about 9 bytes a number, not the 20 of a full-precision double) and
//!   reads back to exactly these values.
//! - Documents: `words_per_doc` *distinct* words each, drawn from a Zipf law over the vocabulary
//!   (rank = word id, as in frequency-sorted word2vec vocabularies); a word's weight is the count
//!   of its draws, normalized, so frequent words weigh more, like term frequencies.
//! - Query: `query_words` distinct words drawn the same way.

use crate::problem::{WmdError, WmdProblem};
use parbench_common::rng::{Rng, Zipf};
use parbench_common::Csr;
use rayon::prelude::*;

/// Shape and seed of a synthetic problem.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticSpec {
    /// Vocabulary size V.
    pub vocab: usize,
    /// Embedding dimension d.
    pub dim: usize,
    /// Target documents N.
    pub docs: usize,
    /// Distinct words per target document (capped at V).
    pub words_per_doc: usize,
    /// Distinct words of the query v_s (capped at V).
    pub query_words: usize,
    /// Exponent of the Zipf law words are drawn from (0 is uniform).
    pub zipf_exponent: f64,
    /// Seed of the generator: the same spec and seed give the same problem, bit for bit.
    pub seed: u64,
}

impl SyntheticSpec {
    /// The paper's experiment: V = 100,000, d = 300, N = 5,000 documents of 35 distinct words
    /// (175,000 nonzeros, the paper had 173,087), a 19-word query.
    pub fn paper() -> SyntheticSpec {
        SyntheticSpec {
            vocab: 100_000,
            dim: 300,
            docs: 5_000,
            words_per_doc: 35,
            query_words: 19,
            zipf_exponent: 1.0,
            seed: 2021,
        }
    }
}

/// Words per independently seeded block of embeddings.
const EMBEDDING_BLOCK: usize = 1024;

/// A standard normal approximation: the sum of four 16-bit uniforms (Irwin-Hall, variance 1/3)
/// centred and scaled to variance 1. Tails are cut at +-3.46, irrelevant for synthetic embeddings.
#[inline]
fn fast_normal(rng: &mut Rng) -> f64 {
    let bits = rng.next_u64();
    let sum = (bits & 0xFFFF) + ((bits >> 16) & 0xFFFF) + ((bits >> 32) & 0xFFFF) + (bits >> 48);
    let uniform_sum = (sum as f64 + 2.0) / 65536.0; // four uniforms in (0, 1)
    (uniform_sum - 2.0) * 3f64.sqrt()
}

/// `k` distinct words from the Zipf law with their draw counts, sorted by word.
fn distinct_words(zipf: &Zipf, vocab: usize, k: usize, rng: &mut Rng) -> Vec<(u32, f64)> {
    let k = k.min(vocab);
    let mut counts: Vec<(u32, f64)> = Vec::with_capacity(k);
    let mut draws = 0;
    // Rejection on repeats; a Zipf tail can make the last distinct words rare, so after enough
    // draws the remaining words are taken uniformly.
    while counts.len() < k {
        let w = if draws < 16 * k + 64 {
            zipf.sample(rng)
        } else {
            rng.below(vocab as u64) as usize
        } as u32;
        draws += 1;
        match counts.iter_mut().find(|(x, _)| *x == w) {
            Some((_, c)) => *c += 1.0,
            None => counts.push((w, 1.0)),
        }
    }
    counts.sort_by_key(|&(w, _)| w);
    let total: f64 = counts.iter().map(|&(_, c)| c).sum();
    for (_, c) in &mut counts {
        *c /= total;
    }
    counts
}

/// Builds the problem described by `spec` (the same spec always gives the same problem).
/// Degenerate sizes are rejected by [`WmdProblem::new`] (no documents, an empty query, ...).
pub fn generate(spec: &SyntheticSpec) -> Result<WmdProblem, WmdError> {
    let (vocab, dim) = (spec.vocab, spec.dim);
    let mut vecs = vec![0.0; vocab * dim];
    let scale = 1.0 / (dim.max(1) as f64).sqrt();
    if dim > 0 {
        vecs.par_chunks_mut(EMBEDDING_BLOCK * dim)
            .enumerate()
            .for_each(|(b, block)| {
                let mut rng = Rng::stream(spec.seed, b as u64);
                for v in block {
                    // The nearest double to the six-decimal text, as a reader of it gets.
                    *v = (fast_normal(&mut rng) * scale * 1e6).round() / 1e6;
                }
            });
    }
    let zipf = Zipf::new(vocab.max(1), spec.zipf_exponent);
    let mut rng = Rng::stream(spec.seed, u64::MAX);
    let query = if vocab > 0 {
        distinct_words(&zipf, vocab, spec.query_words, &mut rng)
    } else {
        Vec::new()
    };

    let docs: Vec<Vec<(u32, f64)>> = (0..spec.docs)
        .into_par_iter()
        .map(|j| {
            let mut rng = Rng::stream(spec.seed ^ 0x5EED_D0C5, j as u64);
            if vocab > 0 {
                distinct_words(&zipf, vocab, spec.words_per_doc, &mut rng)
            } else {
                Vec::new()
            }
        })
        .collect();
    let mut indptr = Vec::with_capacity(spec.docs + 1);
    indptr.push(0);
    let mut indices = Vec::new();
    let mut values = Vec::new();
    for doc in &docs {
        indices.extend(doc.iter().map(|&(w, _)| w));
        values.extend(doc.iter().map(|&(_, c)| c));
        indptr.push(indices.len());
    }
    let by_doc = Csr::new(spec.docs, vocab, indptr, indices, values)
        .expect("generated rows are sorted, distinct, in range and finite");
    WmdProblem::new(vecs, dim, query, by_doc.transpose())
}

/// `count` queries against the collection `spec` describes, each drawn as its query is (distinct
/// words from the same Zipf law, weighted by their draw counts): the first is [`generate`]'s own query, the
/// others come from their own seeded streams, so a batch of any size starts with the same ones.
pub fn queries(spec: &SyntheticSpec, count: usize) -> Vec<Vec<(u32, f64)>> {
    if spec.vocab == 0 {
        return vec![Vec::new(); count];
    }
    let zipf = Zipf::new(spec.vocab, spec.zipf_exponent);
    (0..count as u64)
        .map(|i| {
            let mut rng = Rng::stream(spec.seed, u64::MAX - i);
            distinct_words(&zipf, spec.vocab, spec.query_words, &mut rng)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SyntheticSpec {
        SyntheticSpec {
            vocab: 500,
            dim: 16,
            docs: 40,
            words_per_doc: 7,
            query_words: 5,
            zipf_exponent: 1.0,
            seed: 9,
        }
    }

    #[test]
    fn same_seed_same_problem_and_shape_is_respected() {
        let a = generate(&small()).unwrap();
        let b = generate(&small()).unwrap();
        assert_eq!(a.vecs(), b.vecs());
        assert_eq!(a.docs_by_word(), b.docs_by_word());
        assert_eq!(a.query(), b.query());
        assert_eq!(a.query().len(), 5);
        assert_eq!(a.nnz(), 40 * 7);
        let c = generate(&SyntheticSpec {
            seed: 10,
            ..small()
        })
        .unwrap();
        assert_ne!(a.vecs(), c.vecs());
    }

    #[test]
    fn embeddings_have_variance_one_over_d() {
        let p = generate(&SyntheticSpec {
            vocab: 2000,
            dim: 50,
            ..small()
        })
        .unwrap();
        let n = p.vecs().len() as f64;
        let mean = p.vecs().iter().sum::<f64>() / n;
        let var = p.vecs().iter().map(|x| x * x).sum::<f64>() / n;
        assert!(mean.abs() < 0.005, "mean {mean}");
        assert!((var * 50.0 - 1.0).abs() < 0.03, "var * d = {}", var * 50.0);
    }

    #[test]
    fn embeddings_are_six_decimal_numbers_that_read_back_exactly() {
        let p = generate(&small()).unwrap();
        for &x in p.vecs() {
            let text = format!("{x:.6}");
            assert_eq!(text.parse::<f64>().unwrap().to_bits(), x.to_bits(), "{x}");
        }
    }

    #[test]
    fn the_first_of_the_queries_is_the_problems_and_the_others_differ() {
        let spec = small();
        let problem = generate(&spec).unwrap();
        let qs = queries(&spec, 4);
        assert_eq!(qs[0], problem.query());
        assert_eq!(queries(&spec, 2), qs[..2]);
        for q in &qs {
            assert_eq!(q.len(), spec.query_words);
            let mut p = problem.clone();
            p.set_query(q.clone()).expect("a valid query");
        }
        assert!(qs[1..].iter().all(|q| q != &qs[0]));
    }

    #[test]
    fn degenerate_specs_are_errors() {
        assert_eq!(
            generate(&SyntheticSpec { docs: 0, ..small() }).unwrap_err(),
            WmdError::NoDocuments
        );
        assert_eq!(
            generate(&SyntheticSpec {
                query_words: 0,
                ..small()
            })
            .unwrap_err(),
            WmdError::EmptyQuery
        );
        assert!(generate(&SyntheticSpec { dim: 0, ..small() }).is_err());
        assert!(generate(&SyntheticSpec {
            words_per_doc: 0,
            ..small()
        })
        .is_err());
    }
}
