//! Pieces that more than one parbench algorithm family needs.
//!
//! - [`csr`]: a compressed-sparse-row matrix with validation and an explicit transpose.
//! - [`partition`]: the nnz-balanced split of a CSR (each part finds its start by binary search).
//! - [`rng`]: a small seeded generator, so every random choice in parbench repeats bit for bit.
//! - [`par`]: how a kernel is told its parallelism (`Par::Seq` or `Par::Rayon(n)`).
//! - [`text`]: tokenizing, stop words and a vocabulary, for document and corpus inputs.
//! - [`embeddings`]: word vectors in word2vec text format.
//! - [`corpora`]: readers of labeled document collections (R8 lines, tar archives of one file
//!   per document such as 20 Newsgroups).
//! - [`work`]: the flops and bytes a run cannot avoid, from which the harness bounds its time.
//! - [`comm`]: the MPI-shaped communicator distributed variants run on (in-process threads, or MPI
//!   with the `mpi` feature), with exact word and message counts.

#![warn(missing_docs)]

pub mod atomic;
pub mod bench;
pub mod comm;
pub mod corpora;
pub mod csr;
pub mod embeddings;
pub mod par;
pub mod partition;
pub mod rng;
pub mod text;
pub mod work;

pub use csr::{Csr, CsrError};
pub use par::Par;
pub use rng::Rng;
pub use work::{Precision, Work};
