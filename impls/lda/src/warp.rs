//! `warp`: WarpLDA's delayed-update Metropolis-Hastings sampler (Chen et al., "WarpLDA: a cache
//! efficient O(1) algorithm for latent Dirichlet allocation", VLDB 2016), one thread.
//!
//! # Algorithm
//!
//! `mh` moves each token with word and document proposals one token at a time, so every step
//! reads its word's row of the `W x K` table n_kw at a random topic: a cache miss per step once
//! the table outgrows the caches (28 MB on KOS at K = 1000). WarpLDA splits each iteration into
//! two phases that each need the counts of one document or one word only:
//!
//! - **Document phase**, documents in turn. The document's counts `c_d` are built from its
//!   tokens' topics into a K-entry scratch row (L1 at K = 1000). Each token accepts or rejects
//!   the `steps` word proposals drawn for it in the last word phase, with ratio
//!   `min(1, (c_dt + alpha)(n_s + W beta) / ((c_ds + alpha)(n_t + W beta)))` (the word terms
//!   cancel against the proposal `q_w(k) ∝ n_kw + beta`), then draws `steps` document
//!   proposals (`q_d(k) ∝ c_dk + alpha`: the topic of a random other token of the document, or
//!   a uniform topic) for the next word phase.
//! - **Word phase**, words in turn, the same with the word's counts `c_w` built from its tokens:
//!   each token accepts the document proposals with `min(1, (c_wt + beta)(n_s + W beta) /
//!   ((c_ws + beta)(n_t + W beta)))` and draws word proposals (`q_w(k) ∝ c_wk + beta`).
//!
//! Within a phase the counts it uses (`c_d` or `c_w`, and n_k) are exact and kept current, the
//! token itself taken out (the `-di` counts). What is delayed is the proposal: it was drawn
//! from counts half an iteration old. So the chain is not exactly the collapsed Gibbs chain
//! (`mh` is); it is WarpLDA's approximation, and the conformance tests hold it to
//! `sequential`'s log-likelihood instead of a stationary-distribution test.
//!
//! # Memory layout
//!
//! Every token has a record of `1 + steps` u32s, its topic and the proposals waiting for it,
//! held twice: in document-major order (read by the document phase, with word proposals) and in
//! word-major order (read by the word phase, with document proposals). A phase reads its
//! records sequentially, and writes each token's new topic and fresh proposals into the other
//! order's record (one random write of `4 (1 + steps)` bytes, within a cache line), so neither
//! n_kw nor the document-topic table is touched while sampling: the working set is the two
//! record arrays (`8 (1 + steps) N` bytes), the two position maps, n_k and one scratch row.
//! The tables the contract exposes (n_kw, n_dk, the assignments) are rebuilt from the records
//! only when something reads them ([`CorpusSweep::settle`]): before a likelihood evaluation or an
//! invariant check, and once at the end (timed).
//!
//! # Determinism
//!
//! One random stream (`sequential`'s), documents then words in order: a seed repeats the run bit
//! for bit. The first document phase's word proposals are drawn from the initial state with a
//! stream of their own.

use crate::corpus::Corpus;
use crate::kernel::{train_single_with, CorpusSweep, Tables};
use crate::metropolis::{prefetch_for_write, Priors, WordMajor};
use crate::problem::{Control, IterationReport, LdaError, LdaOutput, LdaParams};
use crate::{LdaSampler, Par};
use parbench_common::Rng;
use std::hint::select_unpredictable;

/// Metropolis-Hastings steps per token and phase when not set (`steps` proposals accepted in
/// each of the two phases of an iteration).
pub const DEFAULT_WARP_STEPS: usize = 2;

/// The stream the initial word proposals are drawn from (the sweeps use `sequential`'s).
const INITIAL_PROPOSALS_STREAM: u64 = 0x3A9;

/// WarpLDA's two-phase, delayed-update Metropolis-Hastings sampler (`warp`).
#[derive(Clone, Copy, Debug)]
pub struct WarpMetropolisHastings {
    /// Proposals accepted or rejected per token in each phase (0 counts as 1).
    pub steps: usize,
}

impl Default for WarpMetropolisHastings {
    fn default() -> Self {
        WarpMetropolisHastings {
            steps: DEFAULT_WARP_STEPS,
        }
    }
}

impl LdaSampler for WarpMetropolisHastings {
    fn name(&self) -> &'static str {
        "warp"
    }

    fn token_cost(&self, _params: &LdaParams) -> crate::TokenCost {
        crate::TokenCost::DelayedMetropolisHastings {
            steps: self.steps.max(1),
        }
    }

    fn train(
        &self,
        corpus: &Corpus,
        params: &LdaParams,
        _par: Par,
        progress: &mut dyn FnMut(&IterationReport) -> Control,
    ) -> Result<LdaOutput, LdaError> {
        train_single_with(corpus, params, progress, |tables, assignments| {
            WarpSweep::new(params, self.steps, corpus, tables, assignments)
        })
    }
}

/// One phase's view: its records (in its own order), where its groups (documents or words)
/// start, and the prior of its counts.
struct Phase<'a> {
    /// Records of this order, `stride` u32s each: topic, then the proposals to accept.
    records: &'a [u32],
    /// Group `g`'s tokens are `starts[g]..starts[g + 1]` in this order.
    starts: &'a [usize],
    /// For each token in this order, its index in the other order.
    other_pos: &'a [u32],
    /// The prior of this phase's counts (alpha for documents, beta for words), `K` times it,
    /// and its inverse (the proposal's uniform branch).
    prior: f64,
    mass: f64,
    inv_prior: f64,
}

/// The sweeper's state: both record arrays, the position maps and the scratch buffers.
struct WarpSweep {
    priors: Priors,
    stride: usize,
    doc_start: Vec<usize>,
    word_start: Vec<usize>,
    /// Token `n` in document-major order is at `word_pos[n]` in word-major order, and back.
    word_pos: Vec<u32>,
    doc_pos: Vec<u32>,
    doc_records: Vec<u32>,
    word_records: Vec<u32>,
    /// One group's counts (K entries, all zero between groups) and topics.
    counts: Vec<u32>,
    topics: Vec<u32>,
}

impl WarpSweep {
    fn new(
        params: &LdaParams,
        steps: usize,
        corpus: &Corpus,
        tables: &Tables,
        assignments: &[Vec<u32>],
    ) -> WarpSweep {
        let priors = Priors::new(params, steps, corpus.num_words());
        let stride = 1 + priors.steps;
        let n = corpus.num_tokens();
        let mut doc_start = Vec::with_capacity(corpus.num_docs() + 1);
        doc_start.push(0);
        for words in corpus.docs() {
            doc_start.push(doc_start.last().copied().unwrap_or(0) + words.len());
        }
        let WordMajor {
            start: word_start,
            position,
        } = WordMajor::of(corpus);
        let mut word_pos = vec![0u32; n];
        let mut doc_pos = vec![0u32; n];
        let mut doc_records = vec![0u32; n * stride];
        let mut word_records = vec![0u32; n * stride];
        let topics = assignments.iter().flatten();
        for (token, (&p, &t)) in position.iter().zip(topics).enumerate() {
            // Positions fit in u32: a corpus holds fewer than 2^32 tokens (`Corpus` checks).
            word_pos[token] = p as u32;
            doc_pos[p] = token as u32;
            doc_records[token * stride] = t;
            word_records[p * stride] = t;
        }
        let mut sweep = WarpSweep {
            priors,
            stride,
            doc_start,
            word_start,
            word_pos,
            doc_pos,
            doc_records,
            word_records,
            counts: vec![0; params.topics],
            topics: Vec::new(),
        };
        // The first document phase's word proposals, drawn from the initial state: a word
        // phase that accepts nothing.
        let mut nk = tables.topic_totals.clone();
        let mut rng = Rng::stream(params.seed, INITIAL_PROPOSALS_STREAM);
        sweep.phase(false, &mut nk, &mut rng, false);
        sweep
    }

    /// One phase: over the documents (accepting word proposals, drawing document ones) or
    /// over the words (the other way round).
    fn phase(&mut self, documents: bool, nk: &mut [u32], rng: &mut Rng, accept: bool) {
        let p = &self.priors;
        let (phase, other) = if documents {
            let phase = Phase {
                records: &self.doc_records,
                starts: &self.doc_start,
                other_pos: &self.word_pos,
                prior: p.alpha,
                mass: p.k_alpha,
                inv_prior: p.inv_alpha,
            };
            (phase, &mut self.word_records)
        } else {
            let phase = Phase {
                records: &self.word_records,
                starts: &self.word_start,
                other_pos: &self.doc_pos,
                prior: p.beta,
                mass: p.k_beta,
                inv_prior: p.inv_beta,
            };
            (phase, &mut self.doc_records)
        };
        let scratch = (self.counts.as_mut_slice(), &mut self.topics);
        run_phase(&phase, other, scratch, nk, p, accept, rng);
    }
}

/// One phase over every group of `phase`: each token accepts or rejects its waiting proposals
/// (none when `accept` is false) against its group's counts and `nk`, both kept current, then
/// draws `steps` proposals from its group's topics; its topic and the new proposals are written
/// to its record in `other` (the other order's records).
fn run_phase(
    phase: &Phase<'_>,
    other: &mut [u32],
    scratch: (&mut [u32], &mut Vec<u32>),
    nk: &mut [u32],
    priors: &Priors,
    accept: bool,
    rng: &mut Rng,
) {
    // The usual step counts get a copy of the loop each with the count a constant: the steps
    // and proposals unroll and the spare half of each random draw is placed at compile time.
    match priors.steps {
        1 => phase_with_steps::<1>(phase, other, scratch, nk, priors, accept, rng),
        2 => phase_with_steps::<2>(phase, other, scratch, nk, priors, accept, rng),
        3 => phase_with_steps::<3>(phase, other, scratch, nk, priors, accept, rng),
        4 => phase_with_steps::<4>(phase, other, scratch, nk, priors, accept, rng),
        steps => phase_loop(steps, phase, other, scratch, nk, priors, accept, rng),
    }
}

/// [`phase_loop`] at `STEPS` steps.
fn phase_with_steps<const STEPS: usize>(
    phase: &Phase<'_>,
    other: &mut [u32],
    scratch: (&mut [u32], &mut Vec<u32>),
    nk: &mut [u32],
    priors: &Priors,
    accept: bool,
    rng: &mut Rng,
) {
    phase_loop(STEPS, phase, other, scratch, nk, priors, accept, rng);
}

/// [`run_phase`]'s loop, `steps` being `priors.steps`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn phase_loop(
    steps: usize,
    phase: &Phase<'_>,
    other: &mut [u32],
    (counts, topics): (&mut [u32], &mut Vec<u32>),
    nk: &mut [u32],
    priors: &Priors,
    accept: bool,
    rng: &mut Rng,
) {
    let k = priors.topics;
    debug_assert_eq!(steps, priors.steps);
    let stride = 1 + steps;
    let (prior, w_beta) = (phase.prior, priors.w_beta);
    // The unchecked reads below rely on these (topics in records are below K: the initial state
    // draws them so, accepted proposals come from `propose`, which clamps below K).
    assert!(counts.len() == k && nk.len() == k);
    assert!(phase.records.len() == other.len() && phase.other_pos.len() * stride == other.len());
    // A local copy, given back at the end: through `&mut` the generator's state went back to
    // memory at every draw.
    let mut stream = rng.clone();
    for group in phase.starts.windows(2) {
        let (start, end) = (group[0], group[1]);
        if start == end {
            continue;
        }
        topics.clear();
        topics.extend(
            phase.records[start * stride..end * stride]
                .iter()
                .step_by(stride),
        );
        for &t in topics.iter() {
            counts[t as usize] += 1;
        }
        for i in 0..end - start {
            let token = start + i;
            let record = &phase.records[token * stride..(token + 1) * stride];
            let mut s = topics[i] as usize;
            let mut units = Units::default();
            if accept {
                counts[s] -= 1;
                nk[s] -= 1;
                // SAFETY: `s` and every proposal are topics below K (see the assert above), and
                // `counts` and `nk` have K entries.
                let weight = |t: usize| unsafe {
                    (*counts.get_unchecked(t) as f64 + prior)
                        / (*nk.get_unchecked(t) as f64 + w_beta)
                };
                // The acceptance min(1, ct ns / (cs nt)) compares the proposal's weight ct / nt
                // with the current one's: only the current weight carries over from step to
                // step, and each proposal's division is off that chain. The selects are selects:
                // the outcome is a coin flip no predictor learns (as a branch, 3.9% of the
                // phase's samples sat on the jump after it), and on the weight one keeps the
                // chain in vector registers (through integer masks it moved each weight to a
                // general register and back, about a third of the phase's samples).
                let mut ws = weight(s);
                for &t in &record[1..] {
                    let t = t as usize;
                    let wt = weight(t);
                    let accepted = units.next(&mut stream) * ws < wt;
                    s = select_unpredictable(accepted, t, s);
                    ws = select_unpredictable(accepted, wt, ws);
                }
                counts[s] += 1;
                nk[s] += 1;
                topics[i] = s as u32;
            }
            // The record this token writes is a random line of the other order's array
            // (5.6 MB on KOS at two steps): ask for a later token's line now, so the write
            // does not wait for it.
            if let Some(&ahead) = phase.other_pos.get(token + PREFETCH_AHEAD) {
                prefetch_for_write(other, ahead as usize * stride);
            }
            let at = phase.other_pos[token] as usize * stride;
            let out = &mut other[at..at + stride];
            out[0] = s as u32;
            for slot in &mut out[1..] {
                let unit = units.next(&mut stream);
                *slot = priors.propose_at(unit, topics, i, phase.mass, phase.inv_prior) as u32;
            }
        }
        for &t in topics.iter() {
            counts[t as usize] = 0;
        }
    }
    *rng = stream;
}

/// How many tokens ahead the other order's record is prefetched.
const PREFETCH_AHEAD: usize = 16;

/// Uniform draws in `[0, 1)`, two from each 64-bit draw of the stream: 32 bits are plenty for
/// an acceptance test or a proposal (a token index below 2^32 / 10^4 at the corpora's sizes),
/// and the stream is a third of a token's cost.
#[derive(Default)]
struct Units {
    /// The unused low half of the last draw, if any.
    spare: Option<u32>,
}

impl Units {
    #[inline(always)]
    fn next(&mut self, rng: &mut Rng) -> f64 {
        const SCALE: f64 = 1.0 / 4_294_967_296.0;
        let bits = match self.spare.take() {
            Some(low) => low,
            None => {
                let bits = rng.next_u64();
                self.spare = Some(bits as u32);
                (bits >> 32) as u32
            }
        };
        f64::from(bits) * SCALE
    }
}

impl CorpusSweep for WarpSweep {
    fn sweep_corpus(
        &mut self,
        _corpus: &Corpus,
        _assignments: &mut [Vec<u32>],
        _doc_topic: &mut [u32],
        tables: &mut Tables,
        rng: &mut Rng,
    ) {
        self.phase(true, &mut tables.topic_totals, rng, true);
        self.phase(false, &mut tables.topic_totals, rng, true);
    }

    fn settle(
        &mut self,
        corpus: &Corpus,
        assignments: &mut [Vec<u32>],
        doc_topic: &mut [u32],
        tables: &mut Tables,
    ) {
        let k = self.priors.topics;
        doc_topic.fill(0);
        tables.word_topic.fill(0);
        let mut records = self.doc_records.iter().step_by(self.stride);
        for ((words, z), ndk) in corpus
            .docs()
            .iter()
            .zip(assignments.iter_mut())
            .zip(doc_topic.chunks_mut(k))
        {
            for (&w, zi) in words.iter().zip(z.iter_mut()) {
                let t = records.next().copied().unwrap_or(*zi);
                *zi = t;
                ndk[t as usize] += 1;
                tables.word_topic[w as usize * k + t as usize] += 1;
            }
        }
    }
}
