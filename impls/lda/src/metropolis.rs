//! `mh`: an O(1)-per-token Metropolis-Hastings sampler in the LightLDA / WarpLDA family (Yuan et
//! al., "LightLDA: Big topic models on modest computer clusters", WWW 2015; Chen et al.,
//! "WarpLDA: a cache efficient O(1) algorithm for latent Dirichlet allocation", VLDB 2016).
//!
//! # Algorithm
//!
//! Each token (document d, word w, current topic s) is taken out of the counts, then `steps`
//! Metropolis-Hastings steps move it, alternating two proposals (LightLDA's cycle proposal):
//!
//! ```text
//! word proposal  q_w(k) ∝ n_kw + beta     acceptance min(1, (n_dt + alpha)(n_s + W beta)
//!                                                           / ((n_ds + alpha)(n_t + W beta)))
//! doc proposal   q_d(k) ∝ n_dk + alpha    acceptance min(1, (n_tw + beta)(n_s + W beta)
//!                                                           / ((n_sw + beta)(n_t + W beta)))
//! ```
//!
//! against the collapsed conditional `p(k) ∝ (n_dk + alpha)(n_kw + beta) / (n_k + W beta)`; all
//! counts exclude the token itself (the `-di` counts), so each step leaves that conditional
//! invariant exactly (detailed balance; `tests/conformance.rs` checks the chain's visits with a
//! chi-square test). The token's final topic is put back into the counts.
//!
//! Both proposals are drawn in O(1) with no table at all, from the topics of other tokens:
//! - document proposal: with probability `(L_d - 1) / (L_d - 1 + K alpha)` the topic of a
//!   uniformly random other token of the document, else a uniform topic. One uniform `u` in
//!   `[0, L_d - 1 + K alpha)` picks both the branch and the token (or topic).
//! - word proposal (WarpLDA's trick): the same over the word's tokens, read from a word-major copy
//!   of the topics (`word_z`, the corpus's tokens grouped by word, kept current: a token that
//!   moves is written there too, through a precomputed position `word_pos`).
//!
//! # Why no alias tables
//!
//! LightLDA's word proposal is `(n_kw + beta) / (n_k + W beta)` from a per-word alias table built
//! from stale counts. Built densely that is O(K) per word per sweep: on KOS (W = 6,906, N = 467k
//! tokens) 15 entries per token at K = 1000 and 148 at K = 10,000, more than the sampling
//! itself, and the acceptance then needs the stale table's probabilities of both topics (two
//! more random reads). Splitting it into a sparse per-word part and one shared dense part makes
//! the build O(nnz + K) but still costs two alias lookups and a branch per draw. Dropping the
//! `1 / (n_k + W beta)` factor from the proposal (WarpLDA) makes the word terms of the acceptance
//! cancel, so a word step reads only the document row (hot in L1/L2 during the document) and
//! n_k, and the proposal is drawn from the current topics of the word's tokens, so nothing is
//! stale and nothing is built per sweep (the chain is exact, not delayed-update).
//!
//! # Memory layout and cost per token
//!
//! The sweep is document-major, so the document's topics and n_d· row stay in cache. The cold
//! reads of a token are: its word's row of the dense word-major `W x K` table n_kw at the
//! current topic (prefetched one token ahead: it is known in advance) and at every proposed
//! topic (read by every step, branch-free: a word step needs it only if it accepts), and one
//! entry of `word_z` per word step (4 N bytes: 1.9 MB on KOS, L2/L3-resident, where the `W x K`
//! table is 28 MB at K = 1000 and 276 MB at K = 10,000). `word_pos` and the corpus stream
//! sequentially. Nothing depends on K except which lines of the row are touched, so the cost
//! per token is O(steps); what grows with K is the chance that those lines miss the cache. The
//! dense n_kw (rather than a hash per word) keeps the remove, the add and the `n_tw` lookup one
//! indexed access each, and it is the table the shared driver, the invariant checks and the
//! output already use. The accept / reject and the proposal's two branches are selects, not
//! branches: both are coin flips that a branch predictor cannot learn.
//!
//! # Measured
//!
//! KOS, one thread, `cargo run --release -p lda --example sampler_speed` (Intel Xeon, 4 steps):
//! 5.6M tokens/s at K = 1000 over 30 iterations (`sparse` 3.1M, `sequential` 0.62M), 3.4M at
//! K = 10,000 over 10 (`sparse` 0.30M: 11.6x); at K = 20 `sequential` is faster. Per iteration
//! it converges more slowly than the Gibbs samplers: at K = 1000 `sparse` came within 1% of
//! its 60-iteration log-likelihood after 5.0 s of sampling, while `mh` was still 1.6% below that
//! value after its own 60 iterations (4.8 s); after 100 iterations `mh` was 0.65% below
//! `sparse`'s 100-iteration value, in 7.9 s against 13.8 s.
//!
//! Steps per token: [`MetropolisHastings::steps`], default [`DEFAULT_STEPS`] (measured on KOS;
//! see there). The 1st, 3rd, ... steps use the word proposal, the 2nd, 4th, ... the document
//! proposal.
//!
//! # Determinism
//!
//! One random stream seeded from `params.seed` (the stream `sequential` uses), documents and
//! tokens in corpus order: the same seed repeats the run bit for bit. The draws differ from
//! `sequential`'s; the distribution of the chain is the same collapsed Gibbs target.

use crate::corpus::Corpus;
use crate::kernel::{train_single_with, CorpusSweep, Tables, TokenProbe};
use crate::model::LdaState;
use crate::problem::{Control, IterationReport, LdaError, LdaOutput, LdaParams};
use crate::{LdaSampler, Par};
use parbench_common::Rng;
use std::hint::select_unpredictable;

/// Metropolis-Hastings steps per token when not set: two word and two document proposals.
/// Measured on KOS at K = 1000 (one thread): 2 steps sample 1.4-1.8x the tokens per second of 4
/// but converge more slowly per iteration, and at equal time 4 are ahead (60 iterations of 4
/// steps, 4.8 s: log-likelihood -5.242e6; 100 iterations of 2 steps, about as long: -5.262e6).
pub const DEFAULT_STEPS: usize = 4;

/// The O(1)-per-token Metropolis-Hastings sampler (`mh`).
#[derive(Clone, Copy, Debug)]
pub struct MetropolisHastings {
    /// Metropolis-Hastings steps per token, alternating word and document proposals (0 counts
    /// as 1). More steps mix each token further per sweep at a proportional cost per token.
    pub steps: usize,
}

impl Default for MetropolisHastings {
    fn default() -> Self {
        MetropolisHastings {
            steps: DEFAULT_STEPS,
        }
    }
}

impl LdaSampler for MetropolisHastings {
    fn name(&self) -> &'static str {
        "mh"
    }

    fn token_cost(&self, _params: &LdaParams) -> crate::TokenCost {
        crate::TokenCost::MetropolisHastings { steps: self.steps }
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        _par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError> {
        train_single_with(corpus, params, progress, |tables, assignments| {
            MhSweep::new(params, self.steps, corpus, tables, assignments)
        })
    }
}

/// The constants of the acceptance ratios and proposals (shared with `warp`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Priors {
    pub topics: usize,
    pub steps: usize,
    pub alpha: f64,
    pub beta: f64,
    pub w_beta: f64,
    pub k_alpha: f64,
    pub k_beta: f64,
    pub inv_alpha: f64,
    pub inv_beta: f64,
}

impl Priors {
    pub(crate) fn new(params: &LdaParams, steps: usize, num_words: usize) -> Priors {
        let k = params.topics as f64;
        Priors {
            topics: params.topics,
            steps: steps.max(1),
            alpha: params.alpha,
            beta: params.beta,
            w_beta: num_words as f64 * params.beta,
            k_alpha: k * params.alpha,
            k_beta: k * params.beta,
            inv_alpha: 1.0 / params.alpha,
            inv_beta: 1.0 / params.beta,
        }
    }

    /// A topic from `q(k) ∝ (count of k among `others` but position `own`) + prior`: the topic of
    /// a uniformly random other entry with probability `(len - 1) / (len - 1 + K prior)`, else a
    /// uniform topic. `mass` is `K prior`, `inv_prior` its `1 / prior`.
    #[inline(always)]
    pub(crate) fn propose(
        &self,
        others: &[u32],
        own: usize,
        mass: f64,
        inv_prior: f64,
        rng: &mut Rng,
    ) -> usize {
        self.propose_at(rng.next_f64(), others, own, mass, inv_prior)
    }

    /// [`Priors::propose`] with its uniform draw `unit` in `[0, 1)` given.
    #[inline(always)]
    pub(crate) fn propose_at(
        &self,
        unit: f64,
        others: &[u32],
        own: usize,
        mass: f64,
        inv_prior: f64,
    ) -> usize {
        // Branch-free: both candidates are computed and one is selected, since which branch
        // is taken is random (at K = 1000, alpha = 0.1 a document of 100 tokens takes the
        // uniform one half the time) and a mispredicted branch costs more than the other
        // candidate. `others` holds at least the token itself, so the clamped index is valid.
        let last = others.len() - 1;
        let n = last as f64;
        let u = unit * (n + mass);
        // Conversions through i64, not usize: x86-64 converts to signed integers in one
        // instruction, to unsigned ones in about six (`u` is not negative, so the value is the
        // same).
        let j = truncate(u) as usize;
        // Past `last` in the uniform branch, a coin flip: a select, not a branch (as `min` it
        // was compiled to a branch once the conversions lost their saturation).
        let index = j + usize::from(j >= own);
        let from_token = others[select_unpredictable(index > last, last, index)] as usize;
        // Negative for the token branch, where it is not used; rounding can put it a hair
        // above K. The clamp below fixes that and keeps the result below K whatever the topics
        // given (one instruction), which the unchecked reads in `resample` rely on.
        let uniform = truncate((u - n) * inv_prior) as usize;
        let t = select_unpredictable(u < n, from_token, uniform);
        t.min(self.topics - 1)
    }

    /// The token's new topic after `steps` Metropolis-Hastings steps from `s`, with the token
    /// already removed from `ndk` (its document's row), `row` (its word's row of n_kw) and `nk`.
    /// `doc_z` are its document's topics (the token at `i`), `word_z` its word's (at `own`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn resample(
        &self,
        s: u32,
        (doc_z, i): (&[u32], usize),
        (word_z, own): (&[u32], usize),
        ndk: &[u32],
        row: &[u32],
        nk: &[u32],
        rng: &mut Rng,
    ) -> u32 {
        let (alpha, beta, w_beta) = (self.alpha, self.beta, self.w_beta);
        let k = self.topics;
        // Once per token, well predicted; the steps' reads below rely on it.
        assert!(ndk.len() >= k && row.len() >= k && nk.len() >= k);
        let mut s = s as usize;
        // The target's three factors at the current topic, shifted by their priors.
        let mut nds = ndk[s] as f64 + alpha;
        let mut nsw = row[s] as f64 + beta;
        let mut ns = nk[s] as f64 + w_beta;
        // A proposal equal to s is accepted with ratio 1 and changes nothing, so it needs no
        // test of its own (a branch on it mispredicts about as often as it is taken).
        let mut step = |word_step: bool, rng: &mut Rng| {
            let t = if word_step {
                self.propose(word_z, own, self.k_beta, self.inv_beta, rng)
            } else {
                self.propose(doc_z, i, self.k_alpha, self.inv_alpha, rng)
            };
            debug_assert!(t < self.topics);
            // SAFETY: `propose` returns a topic below K (it clamps), and `ndk`, `row` and `nk`
            // have at least K entries (asserted above). Measured on KOS, 10 iterations of 4 steps:
            // with the bounds checks this unrolled loop ran at 7.6M tokens/s at K = 20 and 4.5M
            // at K = 1000, without them 10.0M and 6.2M (the rolled loop with checks: 9.9M, 5.6M).
            let (ndt, ntw, nt) = unsafe {
                (
                    *ndk.get_unchecked(t) as f64 + alpha,
                    *row.get_unchecked(t) as f64 + beta,
                    *nk.get_unchecked(t) as f64 + w_beta,
                )
            };
            // Word step: accept with min(1, ndt ns / (nds nt)); document step: with
            // min(1, ntw ns / (nsw nt)); both without the division.
            let (num, den) = if word_step { (ndt, nds) } else { (ntw, nsw) };
            let accept = rng.next_f64() * den * nt < num * ns;
            s = if accept { t } else { s };
            nds = if accept { ndt } else { nds };
            nsw = if accept { ntw } else { nsw };
            ns = if accept { nt } else { ns };
        };
        // Word, document, word, ... unrolled by pairs so that each step's kind is static.
        for _ in 0..self.steps / 2 {
            step(true, rng);
            step(false, rng);
        }
        if self.steps % 2 == 1 {
            step(true, rng);
        }
        s as u32
    }
}

/// The corpus's tokens grouped by word, a counting sort in which a word's tokens keep corpus
/// order (`mh` and `warp` both keep a word-major copy of the topics).
pub(crate) struct WordMajor {
    /// Word `w`'s tokens are `start[w]..start[w + 1]`.
    pub start: Vec<usize>,
    /// The n-th token in corpus (document-major) order is at `position[n]`.
    pub position: Vec<usize>,
}

impl WordMajor {
    pub(crate) fn of(corpus: &Corpus) -> WordMajor {
        let num_words = corpus.num_words();
        let mut start = vec![0usize; num_words + 1];
        for &w in corpus.docs().iter().flatten() {
            start[w as usize + 1] += 1;
        }
        for w in 0..num_words {
            start[w + 1] += start[w];
        }
        let mut next = start.clone();
        let position = corpus
            .docs()
            .iter()
            .flatten()
            .map(|&w| {
                let p = next[w as usize];
                next[w as usize] += 1;
                p
            })
            .collect();
        WordMajor { start, position }
    }
}

/// The sweeper: the priors, and the word-major copy of the topics with each token's place in it.
struct MhSweep {
    priors: Priors,
    /// Word `w`'s tokens are `word_z[word_start[w]..word_start[w + 1]]`.
    word_start: Vec<usize>,
    /// For the n-th token in corpus (document-major) order, its index in `word_z`.
    word_pos: Vec<usize>,
    /// The topics of the corpus's tokens grouped by word, kept equal to the assignments.
    word_z: Vec<u32>,
}

impl MhSweep {
    fn new(
        params: &LdaParams,
        steps: usize,
        corpus: &Corpus,
        tables: &Tables,
        assignments: &[Vec<u32>],
    ) -> MhSweep {
        let num_words = corpus.num_words();
        debug_assert_eq!(tables.word_topic.len(), num_words * params.topics);
        let WordMajor { start, position } = WordMajor::of(corpus);
        let mut word_z = vec![0u32; corpus.num_tokens()];
        for (&p, &t) in position.iter().zip(assignments.iter().flatten()) {
            word_z[p] = t;
        }
        MhSweep {
            priors: Priors::new(params, steps, num_words),
            word_start: start,
            word_pos: position,
            word_z,
        }
    }
}

impl CorpusSweep for MhSweep {
    fn sweep_corpus(
        &mut self,
        corpus: &Corpus,
        assignments: &mut [Vec<u32>],
        doc_topic: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
    ) {
        let k = self.priors.topics;
        let mut token = 0;
        for ((words, z), ndk) in corpus
            .docs()
            .iter()
            .zip(assignments.iter_mut())
            .zip(doc_topic.chunks_mut(k))
        {
            let positions = &self.word_pos[token..token + words.len()];
            token += words.len();
            for (i, (&w, &pos)) in words.iter().zip(positions).enumerate() {
                // The next token's n_kw cell (its remove, add and current-topic factor) is the
                // one miss that is known in advance: start it now.
                if let (Some(&w_next), Some(&z_next)) = (words.get(i + 1), z.get(i + 1)) {
                    prefetch(&tables.word_topic, w_next as usize * k + z_next as usize);
                }
                let w = w as usize;
                let s = z[i] as usize;
                let (start, end) = (self.word_start[w], self.word_start[w + 1]);
                let row = &mut tables.word_topic[w * k..(w + 1) * k];
                ndk[s] -= 1;
                row[s] -= 1;
                tables.topic_totals[s] -= 1;
                let t = self.priors.resample(
                    s as u32,
                    (z, i),
                    (&self.word_z[start..end], pos - start),
                    ndk,
                    row,
                    &tables.topic_totals,
                    rng,
                );
                let t_us = t as usize;
                ndk[t_us] += 1;
                row[t_us] += 1;
                tables.topic_totals[t_us] += 1;
                if t_us != s {
                    z[i] = t;
                    self.word_z[pos] = t;
                }
            }
        }
    }
}

/// `x` rounded toward zero, as `x as i64` for every `x` in i64's range. Out of range or NaN it
/// is some other value in range (i64::MIN on x86-64), where `as` saturates: the proposals clamp
/// their result below K afterwards, so they need no saturation, and on x86-64 it cost six
/// instructions and two branches around each of a proposal's two conversions.
#[inline(always)]
pub(crate) fn truncate(x: f64) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cvttsd_si64, _mm_set_sd};
        // SAFETY: CVTTSD2SI is SSE2, part of the x86-64 baseline; it reads a register only.
        unsafe { _mm_cvttsd_si64(_mm_set_sd(x)) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        x as i64
    }
}

/// Asks the cache for `table[index]`, to write it soon (nothing if out of range or not on
/// x86-64).
#[inline(always)]
pub(crate) fn prefetch_for_write(table: &[u32], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(cell) = table.get(index) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        // SAFETY: as `prefetch`'s: a hint that never faults or changes memory (PREFETCHW, a
        // no-op where the CPU lacks it).
        unsafe { _mm_prefetch::<_MM_HINT_ET0>((cell as *const u32).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (table, index);
}

/// Asks the cache for `table[index]` (nothing if out of range or not on x86-64).
#[inline(always)]
fn prefetch(table: &[u32], index: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(cell) = table.get(index) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that never faults or changes memory, and `cell` is a
        // valid reference; SSE, which it needs, is part of the x86-64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((cell as *const u32).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (table, index);
}

/// Test hook: the topics visited by token `(doc, position)` of `state` when only that token is
/// resampled, `transitions` times in a row by [`MetropolisHastings`] with `steps` steps each,
/// every other token's topic fixed (the token is removed once and its chain starts from its
/// topic in `state`). Returns K counts of the topic after every `thin`-th transition. The
/// chain's stationary distribution is the token's collapsed conditional, so for many
/// transitions these counts follow it (thinning makes them nearly independent).
#[allow(clippy::too_many_arguments)]
pub fn mh_chain_visits(
    corpus: &Corpus,
    state: &LdaState,
    params: &LdaParams,
    steps: usize,
    (doc, position): (usize, usize),
    transitions: usize,
    thin: usize,
    seed: u64,
) -> Result<Vec<u64>, LdaError> {
    let TokenProbe {
        word,
        topic,
        params,
        mut tables,
        mut ndk,
    } = TokenProbe::new(corpus, state, params, (doc, position))?;
    let k = params.topics;
    let sweep = MhSweep::new(&params, steps, corpus, &tables, state.assignments());
    let w = word as usize;
    let token: usize = corpus.docs()[..doc].iter().map(Vec::len).sum::<usize>() + position;
    let (start, end) = (sweep.word_start[w], sweep.word_start[w + 1]);
    let own = sweep.word_pos[token] - start;
    let doc_z = &state.assignments()[doc];
    let mut s = topic;
    ndk[s as usize] -= 1;
    tables.word_topic[w * k + s as usize] -= 1;
    tables.topic_totals[s as usize] -= 1;
    let row = &tables.word_topic[w * k..(w + 1) * k];
    let mut rng = Rng::new(seed);
    let mut counts = vec![0u64; k];
    let thin = thin.max(1);
    for n in 1..=transitions {
        s = sweep.priors.resample(
            s,
            (doc_z, position),
            (&sweep.word_z[start..end], own),
            &ndk,
            row,
            &tables.topic_totals,
            &mut rng,
        );
        if n.is_multiple_of(thin) {
            counts[s as usize] += 1;
        }
    }
    Ok(counts)
}
