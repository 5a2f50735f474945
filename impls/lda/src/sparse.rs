//! `sparse`: SparseLDA (Yao, Mimno & McCallum, "Efficient methods for topic model inference on
//! streaming document collections", KDD 2009), sequential, and the optional inner sampler of
//! `sync` and `async`.
//!
//! The conditional splits into three buckets with the same denominator `D_k = n_k + W beta`:
//!
//! ```text
//! (n_dk + alpha)(n_kw + beta) / D_k
//!   = alpha beta / D_k                 s: smoothing, over all topics
//!   + n_dk beta / D_k                  r: document, over the topics present in the document
//!   + (n_dk + alpha) n_kw / D_k        q: topic-word, over the topics the word has
//! ```
//!
//! `s` is kept as a running sum (recomputed at every document start, O(K), to stop drift), `r`
//! as a running sum per document, and `q` is summed per token with the cached coefficients
//! `c_k = (n_dk + alpha) / D_k` (equal to `alpha / D_k` outside the document's topics). One
//! uniform `u` in `[0, s + r + q)` picks the bucket and then the topic within it, walking the
//! word's nonzero topics (q, the common case), the document's (r) or all K (s, rare when alpha
//! beta is small). Per token the cost is O(nonzero topics of the word + of the document) instead
//! of O(K). The nonzero lists are unordered vectors with swap-remove; the word lists are rebuilt
//! by `Kernel::prepare` in O(W K).
//!
//! It samples exactly the distribution `sequential` samples (the same products, regrouped), up
//! to floating-point rounding; the conformance suite checks this with a chi-square test. The
//! draws themselves differ from `sequential`'s for the same seed.

use crate::corpus::Corpus;
use crate::kernel::{train_single, Kernel, Tables};
use crate::problem::{Control, InnerSampler, IterationReport, LdaError, LdaOutput, LdaParams};
use crate::{LdaSampler, Par};
use parbench_common::Rng;

/// SparseLDA, sequential.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sparse;

impl LdaSampler for Sparse {
    fn name(&self) -> &'static str {
        "sparse"
    }

    fn token_cost(&self, _params: &LdaParams) -> crate::TokenCost {
        crate::TokenCost::Sparse
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        _par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError> {
        train_single(InnerSampler::Sparse, corpus, params, progress)
    }
}

/// SparseLDA's caches.
pub(crate) struct SparseKernel {
    topics: usize,
    alpha: f64,
    beta: f64,
    w_beta: f64,
    /// `1 / (n_k + W beta)`.
    inv_denominator: Vec<f64>,
    /// `(n_dk + alpha) / (n_k + W beta)` for the current document.
    coefficient: Vec<f64>,
    /// Smoothing bucket mass `sum_k alpha beta / D_k`.
    smoothing: f64,
    /// Document bucket mass `sum_k n_dk beta / D_k`.
    document: f64,
    /// Topics with `n_dk > 0` in the current document.
    doc_topics: Vec<u32>,
    /// Per word, the topics with `n_kw > 0`.
    word_topics: Vec<Vec<u32>>,
    /// Cumulative q-bucket terms of the current draw, aligned with the word's topic list.
    cumulative: Vec<f64>,
}

impl SparseKernel {
    pub(crate) fn new(params: &LdaParams, num_words: usize) -> SparseKernel {
        SparseKernel {
            topics: params.topics,
            alpha: params.alpha,
            beta: params.beta,
            w_beta: num_words as f64 * params.beta,
            inv_denominator: vec![0.0; params.topics],
            coefficient: vec![0.0; params.topics],
            smoothing: 0.0,
            document: 0.0,
            doc_topics: Vec::with_capacity(params.topics),
            word_topics: vec![Vec::new(); num_words],
            cumulative: vec![0.0; params.topics],
        }
    }

    /// Moves topic `k`'s contributions from the old to the new counts; `ndk_new` and
    /// `total_new` are its document and global counts after the change.
    #[inline(always)]
    fn refresh_topic(&mut self, k: usize, ndk_old: u32, ndk_new: u32, total_new: u32) {
        let inv_old = self.inv_denominator[k];
        let inv_new = 1.0 / (total_new as f64 + self.w_beta);
        let ab = self.alpha * self.beta;
        self.smoothing += ab * (inv_new - inv_old);
        self.document += self.beta * (ndk_new as f64 * inv_new - ndk_old as f64 * inv_old);
        self.inv_denominator[k] = inv_new;
        self.coefficient[k] = (ndk_new as f64 + self.alpha) * inv_new;
    }
}

#[inline(always)]
fn remove_from(list: &mut Vec<u32>, k: u32) {
    if let Some(i) = list.iter().position(|&t| t == k) {
        list.swap_remove(i);
    }
}

impl Kernel for SparseKernel {
    fn prepare(&mut self, tables: &Tables) {
        let k = self.topics;
        for (t, &n) in tables.topic_totals.iter().enumerate() {
            self.inv_denominator[t] = 1.0 / (n as f64 + self.w_beta);
            self.coefficient[t] = self.alpha * self.inv_denominator[t];
        }
        for (list, row) in self.word_topics.iter_mut().zip(tables.word_topic.chunks(k)) {
            list.clear();
            list.extend((0..k as u32).filter(|&t| row[t as usize] > 0));
        }
    }

    fn begin_doc(&mut self, ndk: &[u32], _: &Tables) {
        let ab = self.alpha * self.beta;
        self.smoothing = self.inv_denominator.iter().map(|&inv| ab * inv).sum();
        self.doc_topics.clear();
        self.document = 0.0;
        for (t, &n) in ndk.iter().enumerate() {
            if n > 0 {
                self.doc_topics.push(t as u32);
                let inv = self.inv_denominator[t];
                self.document += n as f64 * self.beta * inv;
                self.coefficient[t] = (n as f64 + self.alpha) * inv;
            }
        }
    }

    #[inline(always)]
    fn remove(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables) {
        let t = k as usize;
        let ndk_old = ndk[t];
        ndk[t] -= 1;
        let cell = &mut tables.word_topic[w as usize * self.topics + t];
        *cell -= 1;
        if *cell == 0 {
            remove_from(&mut self.word_topics[w as usize], k);
        }
        tables.topic_totals[t] -= 1;
        self.refresh_topic(t, ndk_old, ndk_old - 1, tables.topic_totals[t]);
        if ndk_old == 1 {
            remove_from(&mut self.doc_topics, k);
        }
    }

    #[inline(always)]
    fn draw(&mut self, w: u32, ndk: &[u32], tables: &Tables, rng: &mut Rng) -> u32 {
        let row = &tables.word_topic[w as usize * self.topics..(w as usize + 1) * self.topics];
        let topics = &self.word_topics[w as usize];
        let mut q = 0.0;
        for (c, &t) in self.cumulative.iter_mut().zip(topics) {
            q += self.coefficient[t as usize] * row[t as usize] as f64;
            *c = q;
        }
        let mut u = rng.next_f64() * (self.smoothing + self.document + q);
        if u < q {
            let n = topics.len();
            let mut i = 0;
            while i + 1 < n && self.cumulative[i] <= u {
                i += 1;
            }
            return topics[i];
        }
        u -= q;
        if u < self.document && !self.doc_topics.is_empty() {
            let mut acc = 0.0;
            for &t in &self.doc_topics {
                acc += ndk[t as usize] as f64 * self.beta * self.inv_denominator[t as usize];
                if acc > u {
                    return t;
                }
            }
            return *self.doc_topics.last().unwrap_or(&0);
        }
        u = (u - self.document).max(0.0);
        let ab = self.alpha * self.beta;
        let mut acc = 0.0;
        for (t, &inv) in self.inv_denominator.iter().enumerate() {
            acc += ab * inv;
            if acc > u {
                return t as u32;
            }
        }
        (self.topics - 1) as u32
    }

    #[inline(always)]
    fn add(&mut self, w: u32, k: u32, ndk: &mut [u32], tables: &mut Tables) {
        let t = k as usize;
        let ndk_old = ndk[t];
        ndk[t] += 1;
        let cell = &mut tables.word_topic[w as usize * self.topics + t];
        if *cell == 0 {
            self.word_topics[w as usize].push(k);
        }
        *cell += 1;
        tables.topic_totals[t] += 1;
        self.refresh_topic(t, ndk_old, ndk_old + 1, tables.topic_totals[t]);
        if ndk_old == 0 {
            self.doc_topics.push(k);
        }
    }

    fn end_doc(&mut self, _: &[u32], _: &Tables) {
        for &t in &self.doc_topics {
            self.coefficient[t as usize] = self.alpha * self.inv_denominator[t as usize];
        }
    }
}
