//! The embedding table a run produces, and the shared matrices the threads train in place.
//!
//! [`Model`] is what leaves the crate: words in vocabulary order (most frequent first) and their
//! row-major `f32` vectors. [`HogwildMatrix`] is how the threads see the two `V x d` matrices
//! while training: a raw pointer, with rows read and updated by every thread without locks.

use crate::problem::W2vError;
use parbench_common::rng::Rng;
use std::collections::HashMap;

/// Word vectors: `words[i]` has `vectors[i * dim..(i + 1) * dim]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    words: Vec<String>,
    dim: usize,
    vectors: Vec<f32>,
    index: HashMap<String, u32>,
}

impl Model {
    /// Checks the shape (`vectors.len() == words.len() * dim`, `dim > 0`) and indexes the words
    /// (a repeated word keeps its first row).
    pub fn new(words: Vec<String>, dim: usize, vectors: Vec<f32>) -> Result<Model, W2vError> {
        if dim == 0 || vectors.len() != words.len() * dim {
            return Err(W2vError::BadDimension {
                dim,
                max: crate::problem::MAX_DIM,
            });
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            index.entry(w.clone()).or_insert(i as u32);
        }
        Ok(Model {
            words,
            dim,
            vectors,
            index,
        })
    }

    /// The words, in row order.
    pub fn words(&self) -> &[String] {
        &self.words
    }
    /// The dimension d of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// Row-major `len() x dim()`.
    pub fn vectors(&self) -> &[f32] {
        &self.vectors
    }
    /// Number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }
    /// Whether the model has no words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
    /// Row of `word` (exact match).
    pub fn id(&self, word: &str) -> Option<u32> {
        self.index.get(word).copied()
    }
    /// The vector of row `i`.
    ///
    /// # Panics
    /// When `i >= len()`.
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }
}

/// word2vec.c's initial input vectors: uniform in `[-0.5, 0.5) / dim`, seeded.
pub fn initial_input_vectors(vocab: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..vocab * dim)
        .map(|_| ((rng.next_f64() - 0.5) / dim as f64) as f32)
        .collect()
}

/// A `rows x dim` `f32` matrix that every training thread reads and updates without locks.
///
/// # The Hogwild contract
/// Threads load and store rows through raw pointers with plain (non-atomic) `f32` accesses, so
/// two threads can update the same row at the same time and one of the updates can be lost or
/// a read can see a row half updated. That is Hogwild SGD (Niu et al.), the design of
/// word2vec.c and of both papers: conflicts are rare (rows are words, drawn from a large
/// vocabulary) and a lost update is just noise in a stochastic gradient. What keeps it sound
/// in practice: every access is a naturally aligned 4-byte load or store, which x86-64 and
/// AArch64 perform untorn, so a value read is always one some thread wrote; no thread ever
/// holds a reference to a row across a point where it expects the row not to change, and no
/// control flow, index or allocation depends on a value read from the matrix (only
/// arithmetic does), so a stale or racing value cannot cause out-of-bounds access. Within one
/// thread the rows it holds are never aliased mutably (callers make sure of it, see each
/// use). Atomics would make the races defined but forbid vectorizing the row arithmetic,
/// which is all the work (measured: several times slower).
pub(crate) struct HogwildMatrix {
    ptr: *mut f32,
    rows: usize,
    dim: usize,
}

// SAFETY: see the Hogwild contract above: concurrent access is the design, every access is in
// bounds (rows are checked against `rows`), and the matrix outlives the threads (it borrows a
// `Vec` the driver keeps alive until every scoped thread has joined).
unsafe impl Send for HogwildMatrix {}
unsafe impl Sync for HogwildMatrix {}

impl HogwildMatrix {
    /// Shares `data` (`rows x dim`); the borrow ends when the driver's thread scope ends.
    pub(crate) fn new(data: &mut [f32], dim: usize) -> HogwildMatrix {
        assert_eq!(data.len() % dim, 0);
        HogwildMatrix {
            ptr: data.as_mut_ptr(),
            rows: data.len() / dim,
            dim,
        }
    }

    pub(crate) fn dim(&self) -> usize {
        self.dim
    }

    /// The whole matrix.
    ///
    /// # Safety
    /// No other reference to any row exists while the slice lives, on any thread (the driver
    /// calls it between segments, when no training thread runs).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn all_mut(&self) -> &mut [f32] {
        // SAFETY: `ptr` covers `rows * dim` values (from `new`); exclusivity per the contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.rows * self.dim) }
    }

    /// Row `row` for reading.
    ///
    /// # Safety
    /// The caller holds no `&mut` to the same row on this thread while the slice lives (other
    /// threads may write it: the Hogwild contract).
    #[inline(always)]
    pub(crate) unsafe fn row(&self, row: u32) -> &[f32] {
        assert!((row as usize) < self.rows);
        // SAFETY: in bounds by the assert; aliasing per the contract above.
        unsafe { std::slice::from_raw_parts(self.ptr.add(row as usize * self.dim), self.dim) }
    }

    /// Copies the rows `ids`, one after another, to the front of `dst`: a snapshot of them that
    /// later writes by other threads do not reach (the batched kernels' gather step).
    #[inline(always)]
    pub(crate) fn gather(&self, ids: &[u32], dst: &mut [f32]) {
        for (&r, out) in ids.iter().zip(dst.chunks_exact_mut(self.dim)) {
            // SAFETY: the shared view lives for this copy only; a `&mut` to the same row held on
            // this thread meanwhile would already break `row_mut`'s contract.
            out.copy_from_slice(unsafe { self.row(r) });
        }
    }

    /// Asks the CPU to bring the rows `ids` into its caches, so that their misses overlap
    /// other work: a hint, with no effect on any value.
    #[inline(always)]
    pub(crate) fn prefetch(&self, ids: &[u32]) {
        #[cfg(target_arch = "x86_64")]
        {
            let lines = (self.dim * std::mem::size_of::<f32>()).div_ceil(64);
            for &r in ids {
                // Only an address: a prefetch of any address neither faults nor reads into
                // the program, so it needs no bounds check.
                let row = self
                    .ptr
                    .cast::<i8>()
                    .wrapping_add(r as usize * self.dim * std::mem::size_of::<f32>());
                for line in 0..lines {
                    // SAFETY: a prefetch never faults and reads nothing into the program.
                    unsafe {
                        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(line * 64));
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = ids;
    }

    /// Row `row` for updating.
    ///
    /// # Safety
    /// The caller holds no other reference to the same row on this thread while the slice
    /// lives (other threads may: the Hogwild contract).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn row_mut(&self, row: u32) -> &mut [f32] {
        assert!((row as usize) < self.rows);
        // SAFETY: in bounds by the assert; aliasing per the contract above.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(row as usize * self.dim), self.dim) }
    }
}
