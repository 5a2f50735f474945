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

use crate::real::Real;
use std::ops::{Deref, DerefMut};

/// A zero-initialized, fixed-length `f64` (or `f32`) buffer; see the module docs.
#[derive(Clone)]
pub struct ZeroedBuf<E = f64> {
    storage: Vec<E>,
}

impl<E: Real> ZeroedBuf<E> {
    /// This buffer at `len` values, for a caller that overwrites all of them: kept in place when
    /// it is long enough (its pages already touched), grown otherwise. Values are not cleared.
    pub fn reused(mut self, len: usize) -> ZeroedBuf<E> {
        self.storage.resize(len, E::ZERO);
        self
    }

    /// `len` zeros (`vec!` of a zero float is calloc's fresh pages, for either type).
    pub fn zeroed(len: usize) -> ZeroedBuf<E> {
        ZeroedBuf {
            storage: vec![E::ZERO; len],
        }
    }
}

impl<E> Deref for ZeroedBuf<E> {
    type Target = [E];
    #[inline]
    fn deref(&self) -> &[E] {
        &self.storage
    }
}

impl<E> DerefMut for ZeroedBuf<E> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [E] {
        &mut self.storage
    }
}

impl<E> std::fmt::Debug for ZeroedBuf<E> {
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
            let mut b = ZeroedBuf::<f64>::zeroed(len);
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
