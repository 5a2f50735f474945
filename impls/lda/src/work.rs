//! The work a training run cannot avoid, per token sampled, for its time bound (see
//! [`parbench_common::work`]). What a token costs depends on the sampler, so each states its own:
//!
//! - every sampler streams the token's word and reads and writes its topic (12 bytes);
//! - the standard O(K) sampler forms K probabilities, three multiply-adds each (6 K flops), from
//!   its word's row of the word-major `W x K` table n_kw (4 K bytes; the document's row and
//!   n_k stay in L1 across a document's tokens);
//! - SparseLDA reads at least its word's row at the topic it leaves and the one it takes (two
//!   cache lines; what its buckets walk beyond that depends on the counts, and is not counted);
//! - Metropolis-Hastings with `s` steps reads the word's row at the current topic and at every
//!   proposed one, and one entry of the word-major topics per word step (`1 + s + s/2` lines;
//!   `metropolis`'s docs);
//! - WarpLDA's delayed Metropolis-Hastings writes the token's record into the other order's
//!   array in each of its two phases (two lines; `warp`'s docs).
//!
//! The reused working set is n_kw (`W x K` u32), plus the word-major topics for `mh`.

use crate::corpus::Corpus;
use crate::problem::{InnerSampler, LdaOutput, LdaParams};
use parbench_common::{Precision, Work};

/// Bytes of a cache line, the unit a random read moves.
const LINE_BYTES: f64 = 64.0;

/// What one token costs a sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenCost {
    /// The standard sampler: O(K) per token.
    Standard,
    /// SparseLDA's buckets.
    Sparse,
    /// Metropolis-Hastings with this many steps per token.
    MetropolisHastings {
        /// Steps per token.
        steps: usize,
    },
    /// WarpLDA's two phases, each accepting this many delayed proposals per token.
    DelayedMetropolisHastings {
        /// Proposals per token and phase.
        steps: usize,
    },
}

impl From<InnerSampler> for TokenCost {
    fn from(inner: InnerSampler) -> TokenCost {
        match inner {
            InnerSampler::Standard => TokenCost::Standard,
            InnerSampler::Sparse => TokenCost::Sparse,
        }
    }
}

/// The work of a run that sampled `out.tokens_sampled` tokens at `cost` each, on `threads`.
pub fn sampling_work(
    cost: TokenCost,
    corpus: &Corpus,
    params: &LdaParams,
    out: &LdaOutput,
    threads: usize,
) -> Work {
    let tokens = out.tokens_sampled as f64;
    let topics = params.topics as f64;
    let table_bytes = 4.0 * corpus.num_words() as f64 * topics;
    let (flops, reuse_per_token, footprint) = match cost {
        TokenCost::Standard => (6.0 * topics, 4.0 * topics, table_bytes),
        TokenCost::Sparse => (0.0, 2.0 * LINE_BYTES, table_bytes),
        TokenCost::MetropolisHastings { steps } => {
            let steps = steps.max(1) as f64;
            let lines = 1.0 + steps + (steps / 2.0).floor();
            let word_topics = 4.0 * corpus.num_tokens() as f64;
            (0.0, lines * LINE_BYTES, table_bytes + word_topics)
        }
        TokenCost::DelayedMetropolisHastings { steps } => {
            // Each phase writes the token's record in the other order: one line each; the
            // records (twice `1 + steps` u32s a token) and the two position maps are the
            // working set, n_kw is not touched while sampling.
            let record = 4.0 * (1 + steps.max(1)) as f64;
            let tokens_held = corpus.num_tokens() as f64;
            (0.0, 2.0 * LINE_BYTES, tokens_held * (2.0 * record + 8.0))
        }
    };
    Work {
        flops: flops * tokens,
        precision: Precision::F64,
        stream_bytes: 12.0 * tokens,
        reuse_bytes: reuse_per_token * tokens,
        reuse_footprint_bytes: footprint,
        threads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LdaSampler, Par};

    /// Two documents, 5 tokens over 3 words.
    fn corpus() -> Corpus {
        Corpus::new(vec![vec![0, 1, 1], vec![2, 0]], Vec::new(), 3).unwrap()
    }

    fn trained(sampler: &dyn LdaSampler, params: &LdaParams) -> LdaOutput {
        sampler
            .train(&corpus(), params, Par::Seq, &mut |_| {
                crate::Control::Continue
            })
            .unwrap()
    }

    #[test]
    fn each_sampler_states_its_cost_per_token_sampled() {
        let params = LdaParams {
            topics: 4,
            iterations: 3,
            ..LdaParams::default()
        };
        let corpus = corpus();
        let table = 4.0 * 3.0 * 4.0;
        let out = trained(&crate::Sequential, &params);
        assert_eq!(out.tokens_sampled, 15);
        let w = crate::Sequential.work(&corpus, &params, &out, Par::threads(8));
        assert_eq!((w.flops, w.stream_bytes), (15.0 * 24.0, 15.0 * 12.0));
        assert_eq!(
            (w.reuse_bytes, w.reuse_footprint_bytes, w.threads),
            (15.0 * 16.0, table, 1)
        );

        let w = crate::Sparse.work(&corpus, &params, &out, Par::Seq);
        assert_eq!((w.flops, w.reuse_bytes), (0.0, 15.0 * 128.0));

        let mh = crate::MetropolisHastings { steps: 4 };
        let w = mh.work(&corpus, &params, &out, Par::Seq);
        // 1 + 4 + 2 lines a token; the word-major topics (4 B a token) join the working set.
        assert_eq!(w.reuse_bytes, 15.0 * 7.0 * 64.0);
        assert_eq!(w.reuse_footprint_bytes, table + 4.0 * 5.0);

        let warp = crate::WarpMetropolisHastings { steps: 2 };
        let w = warp.work(&corpus, &params, &out, Par::Seq);
        // Two record writes a token; records of 3 u32s in two orders and two u32 positions
        // for each of the 5 tokens, no n_kw.
        assert_eq!((w.flops, w.reuse_bytes), (0.0, 15.0 * 2.0 * 64.0));
        assert_eq!(w.reuse_footprint_bytes, 5.0 * (2.0 * 12.0 + 8.0));
    }

    #[test]
    fn master_worker_variants_cost_what_their_inner_sampler_does_on_their_workers() {
        let sparse_inner = LdaParams {
            topics: 4,
            inner: InnerSampler::Sparse,
            ..LdaParams::default()
        };
        let sync = crate::SyncMasterWorker;
        assert_eq!(sync.token_cost(&sparse_inner), TokenCost::Sparse);
        assert_eq!(
            crate::AsyncMasterWorker.token_cost(&LdaParams::default()),
            TokenCost::Standard
        );
        let out = trained(&crate::Sequential, &sparse_inner);
        assert_eq!(
            sync.work(&corpus(), &sparse_inner, &out, Par::threads(3))
                .threads,
            3
        );
    }
}
