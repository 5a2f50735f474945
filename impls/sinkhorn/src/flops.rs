//! The work model: flops counted per phase and kernel, for the GFLOP/s the variants report, and
//! the bytes each variant must move, for the time bound of a solve.

use crate::problem::{WmdOutput, WmdProblem};
use crate::real::Real;
use parbench_common::{Precision, Work};

/// Flops of the distance GEMM and the norms.
pub fn distance_flops(words: usize, vs: usize, dim: usize) -> f64 {
    (2 * words * vs * dim + 2 * words * dim + 3 * words * vs) as f64
}

/// Flops of the precompute (an exponential counted as one): per entry the exponential, its
/// scaling, `K .* M` and, `with_kr`, `K / r`.
pub fn precompute_flops(words: usize, vs: usize, with_kr: bool) -> f64 {
    ((if with_kr { 4 } else { 3 }) * words * vs) as f64
}

/// Flops of one fused SDDMM + SpMM over `nnz` nonzeros: a dot, a division and an axpy each.
pub fn sddmm_spmm_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 1)) as f64
}

/// Flops of the final step over `nnz` nonzeros (two dots, a division, a product) and the sums.
pub fn final_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 2)) as f64
}

/// Flops of the `x`/`u` update of `docs` documents (change, copy, reciprocal).
pub fn update_flops(docs: usize, vs: usize) -> f64 {
    (docs * 4 * vs) as f64
}

/// Bytes of one stored nonzero of `c` (an f64 weight and a u32 index).
const NONZERO_BYTES: f64 = 12.0;

/// The work of a solve the word-major variants cannot avoid, for its time bound: the flops the
/// variant counted; streamed once, the embeddings of the query and of every word some document
/// holds (the distance phase) and the N distances; and every iteration plus the final step, a
/// pass over the nonzeros of `c`, the rows of `K` of those words, and the `u` and `x` columns
/// (the final step adds the rows of `K .* M`). The working set is `c`, both kernels and `u`, `x`.
pub fn word_major_work(problem: &WmdProblem, out: &WmdOutput, threads: usize) -> Work {
    let shape = Shape::of(problem);
    let passes = (out.iterations + 1) as f64;
    let per_pass = shape.nnz * NONZERO_BYTES + shape.kernel_bytes + 2.0 * shape.column_bytes;
    Work {
        reuse_bytes: passes * per_pass + shape.kernel_bytes,
        reuse_footprint_bytes: shape.nnz * NONZERO_BYTES
            + 2.0 * shape.kernel_bytes
            + 2.0 * shape.column_bytes,
        ..shape.base(out, threads)
    }
}

/// The work of the document-major solve: each document runs every iteration on its own rows of
/// `K` held in L1, so beyond the streamed inputs it gathers, once per document, the kernel rows
/// of its words (`K` and `K .* M`) and reads its nonzeros of `c` once; the working set it
/// gathers from is both kernels.
/// `E` is what the solve ran in: `doc-major-f32` moves embeddings, kernels, `u` and `x` of
/// half the size and counts its flops as f32.
pub fn doc_major_work<E: Real>(problem: &WmdProblem, out: &WmdOutput, threads: usize) -> Work {
    let shape = Shape::of_in::<E>(problem);
    let row_bytes = shape.value_bytes * shape.vs;
    Work {
        reuse_bytes: shape.nnz * (NONZERO_BYTES + 2.0 * row_bytes) + 2.0 * shape.column_bytes,
        reuse_footprint_bytes: 2.0 * shape.kernel_bytes,
        ..shape.base(out, threads)
    }
}

/// The work of the dense solve: the word-major passes, plus every iteration and the final step
/// the `V x N` dense product written and read back by the mask, in blocks of `block_docs`
/// documents (the working set is one block and `K`).
pub fn dense_work(
    problem: &WmdProblem,
    out: &WmdOutput,
    threads: usize,
    block_docs: usize,
) -> Work {
    let sparse = word_major_work(problem, out, threads);
    let vocab = problem.vocab() as f64;
    let dense_bytes = 2.0 * 8.0 * vocab * problem.num_docs() as f64;
    let block_bytes = 8.0 * vocab * block_docs as f64;
    Work {
        reuse_bytes: sparse.reuse_bytes + (out.iterations + 1) as f64 * dense_bytes,
        reuse_footprint_bytes: block_bytes + 8.0 * vocab * problem.query().len() as f64,
        ..sparse
    }
}

/// The sizes the work models share.
struct Shape {
    vs: f64,
    nnz: f64,
    /// Distinct words some document holds.
    words: f64,
    /// One kernel's rows of those words (`words x v_s` f64).
    kernel_bytes: f64,
    /// One `N x v_s` column block (`u` or `x`).
    column_bytes: f64,
    dim: f64,
    docs: f64,
    /// Bytes of one value (embeddings, kernels, `u`, `x`).
    value_bytes: f64,
    precision: Precision,
}

impl Shape {
    fn of(problem: &WmdProblem) -> Shape {
        Shape::of_in::<f64>(problem)
    }

    fn of_in<E: Real>(problem: &WmdProblem) -> Shape {
        // The words the sparse variants select, by the rule that selects them.
        let words = crate::precompute::WordSet::used(problem.docs_by_word())
            .words
            .len() as f64;
        let vs = problem.query().len() as f64;
        let docs = problem.num_docs() as f64;
        Shape {
            vs,
            nnz: problem.nnz() as f64,
            words,
            kernel_bytes: E::BYTES as f64 * words * vs,
            column_bytes: E::BYTES as f64 * docs * vs,
            dim: problem.dim() as f64,
            docs,
            value_bytes: E::BYTES as f64,
            precision: E::PRECISION,
        }
    }

    /// The flops and streamed bytes every variant shares.
    fn base(&self, out: &WmdOutput, threads: usize) -> Work {
        Work {
            flops: out.flops,
            precision: self.precision,
            // The distances returned are f64 whatever the solve ran in.
            stream_bytes: self.value_bytes * (self.words + self.vs) * self.dim + 8.0 * self.docs,
            reuse_bytes: 0.0,
            reuse_footprint_bytes: 0.0,
            threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::PhaseTimes;
    use parbench_common::Csr;

    /// V = 5 words of dimension 2, a 2-word query, 3 documents holding words {0, 1}, {1} and
    /// {3}: 4 nonzeros, 3 distinct words (2 and 4 occur in no document).
    fn problem() -> WmdProblem {
        let vecs: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let triplets = [(0, 0, 0.5), (1, 0, 0.5), (1, 1, 1.0), (3, 2, 1.0)];
        let c = Csr::from_triplets(5, 3, &triplets).unwrap();
        WmdProblem::new(vecs, 2, vec![(0, 0.25), (2, 0.75)], c).unwrap()
    }

    fn output(iterations: usize) -> WmdOutput {
        WmdOutput {
            distances: vec![0.0; 3],
            iterations,
            phases: PhaseTimes::default(),
            flops: 1234.0,
            thread_kernel_s: Vec::new(),
        }
    }

    #[test]
    fn word_major_work_counts_the_passes_by_hand() {
        let w = word_major_work(&problem(), &output(4), 2);
        // Embeddings of 3 document words and 2 query words (2 f64 each), 3 distances.
        assert_eq!(w.stream_bytes, 8.0 * 5.0 * 2.0 + 8.0 * 3.0);
        // A pass: 4 nonzeros (12 B), K rows of 3 words x 2 query words, u and x (3 docs x 2).
        let pass = 4.0 * 12.0 + 8.0 * 3.0 * 2.0 + 2.0 * 8.0 * 3.0 * 2.0;
        // 4 iterations and the final step, plus the rows of K .* M once.
        assert_eq!(w.reuse_bytes, 5.0 * pass + 8.0 * 6.0);
        assert_eq!(w.reuse_footprint_bytes, 48.0 + 2.0 * 48.0 + 2.0 * 48.0);
        assert_eq!(
            (w.flops, w.precision, w.threads),
            (1234.0, Precision::F64, 2)
        );
    }

    #[test]
    fn doc_major_gathers_each_documents_rows_once_whatever_the_iterations() {
        let (p, threads) = (problem(), 1);
        let few = doc_major_work::<f64>(&p, &output(1), threads);
        let many = doc_major_work::<f64>(&p, &output(50), threads);
        assert_eq!(few.reuse_bytes, many.reuse_bytes);
        // Every nonzero: its 12 bytes and the K and K .* M rows of its word (2 x 16 B); u, x.
        assert_eq!(few.reuse_bytes, 4.0 * (12.0 + 32.0) + 2.0 * 48.0);
        assert_eq!(few.reuse_footprint_bytes, 2.0 * 48.0);
    }

    #[test]
    fn doc_major_in_f32_moves_half_the_values_and_counts_f32_flops() {
        let (p, out) = (problem(), output(3));
        let (wide, narrow) = (
            doc_major_work::<f64>(&p, &out, 2),
            doc_major_work::<f32>(&p, &out, 2),
        );
        // Embeddings of 3 document words and 2 query words (2 values each) at 4 bytes; the 3
        // distances returned stay f64.
        assert_eq!(narrow.stream_bytes, 4.0 * 5.0 * 2.0 + 8.0 * 3.0);
        // Every nonzero: its 12 bytes (c stays f64) and 2 rows of 2 f32; u and x of 3 x 2 f32.
        assert_eq!(narrow.reuse_bytes, 4.0 * (12.0 + 16.0) + 2.0 * 24.0);
        assert_eq!(
            narrow.reuse_footprint_bytes,
            wide.reuse_footprint_bytes / 2.0
        );
        assert_eq!(
            (narrow.precision, wide.precision),
            (Precision::F32, Precision::F64)
        );
        assert_eq!(narrow.flops, wide.flops);
    }

    #[test]
    fn dense_adds_its_dense_product_every_pass() {
        let p = problem();
        let sparse = word_major_work(&p, &output(2), 1);
        let dense = dense_work(&p, &output(2), 1, 3);
        // 3 passes of the V x N product (5 x 3 f64) written and read back.
        assert_eq!(
            dense.reuse_bytes - sparse.reuse_bytes,
            3.0 * 2.0 * 8.0 * 15.0
        );
        assert_eq!(
            dense.reuse_footprint_bytes,
            8.0 * 5.0 * 3.0 + 8.0 * 5.0 * 2.0
        );
        assert_eq!(dense.stream_bytes, sparse.stream_bytes);
    }
}
