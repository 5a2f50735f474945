//! Pieces that more than one parbench algorithm family needs.
//!
//! - [`csr`]: a compressed-sparse-row matrix with validation and an explicit transpose.
//! - [`partition`]: the nnz-balanced split of a CSR (each part finds its start by binary search).
//! - [`rng`]: a small seeded generator, so every random choice in parbench repeats bit for bit.
//! - [`par`]: how a kernel is told its parallelism (`Par::Seq` or `Par::Rayon(n)`).
//! - [`text`]: tokenizing, stop words and a vocabulary, for document and corpus inputs.
//! - [`embeddings`]: word vectors in word2vec text and binary formats, and a parsed cache.
//! - [`memory`]: large buffers on 2 MB pages.
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
pub mod memory;
pub mod par;
pub mod partition;
pub mod rng;
pub mod text;
pub mod work;

pub use csr::{Csr, CsrError};

/// parbench's cache folder `sub`: under `$XDG_CACHE_HOME/parbench`, else `~/.cache/parbench`;
/// `None` when neither variable is set.
pub fn cache_dir(sub: &str) -> Option<std::path::PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let base = match env("XDG_CACHE_HOME") {
        Some(cache) => std::path::PathBuf::from(cache),
        None => std::path::PathBuf::from(env("HOME")?).join(".cache"),
    };
    Some(base.join("parbench").join(sub))
}
pub use par::Par;
pub use rng::Rng;
pub use work::{Precision, Work};
