//! Zero-initialized `f64` buffers for the large per-query arrays (`M`, `K^T`, `(K .* M)^T`: 6 MB
//! each at the paper's shape, 16 MB for the dense baseline; `x`, `u` and the per-thread
//! accumulators: 800 KB each).
//!
//! These arrays once lived in their own 2 MB-aligned mappings with `MADV_HUGEPAGE`: in a fresh
//! process that saved ~2 ms of page faults per 6 MB array. In a long process (`parbench
//! reproduce` runs every experiment in one), memory becomes fragmented and, with THP's `defrag`
//! in its usual `madvise` mode, a fault in such a mapping compacts memory synchronously: solves on
//! two threads then stalled 10-25 ms in `precompute` and `loop`, and the two-thread loop of
//! `fused-par` measured 1.23x its one-thread speed instead of 1.86x. An ordinary zeroed `Vec`
//! (calloc: fresh zero pages from the kernel, no memset) has steady costs, so the type is now a
//! thin wrapper kept as the one place to change this policy.

use std::ops::{Deref, DerefMut};

/// A zero-initialized, fixed-length `f64` buffer; see the module docs.
#[derive(Clone)]
pub struct ZeroedBuf {
    storage: Vec<f64>,
}

impl ZeroedBuf {
    /// `len` zeros.
    pub fn zeroed(len: usize) -> ZeroedBuf {
        ZeroedBuf {
            storage: vec![0.0; len],
        }
    }
}

impl Deref for ZeroedBuf {
    type Target = [f64];
    #[inline]
    fn deref(&self) -> &[f64] {
        &self.storage
    }
}

impl DerefMut for ZeroedBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [f64] {
        &mut self.storage
    }
}

impl std::fmt::Debug for ZeroedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeroedBuf")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_start_zeroed_and_keep_writes() {
        for len in [0, 3, 100_005] {
            let mut b = ZeroedBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0.0));
            for (i, x) in b.iter_mut().enumerate() {
                *x = i as f64;
            }
            let c = b.clone();
            assert!(c.iter().enumerate().all(|(i, &x)| x == i as f64));
        }
    }
}
