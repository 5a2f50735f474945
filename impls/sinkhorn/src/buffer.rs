//! Buffers for the large per-query arrays (`M`, `K^T`, `(K / r)^T`, `(K .* M)^T`: 6 MB each at
//! the paper's shape in f64, 16 MB for the dense baseline; `x`, `u` and the per-thread
//! accumulators: 800 KB each).
//!
//! **Why not a plain `Vec`.** A fresh zeroed `Vec` of this size is calloc's fresh pages from the
//! kernel: one page fault per 4 KB on first write, about 4,500 per query at the paper's shape.
//! On these VMs a fault costs over a microsecond (memory-cgroup accounting and its locks), so
//! the faults cost more than the arithmetic of the `precompute` phase: with glibc told to keep
//! freed memory, `precompute` measured 3.8-4.3 ms instead of 9.3-10.3 ms and `distance` 12.0
//! instead of 12.5-14.7 ms (one thread). So the buffers of a finished query are kept, per element
//! type, in a small process-wide stash ([`Spares`]) and the next query's arrays are cut from
//! them: a process answering queries (kNN, a batch, an experiment's repetitions) faults each page
//! once. The first query of a process still pays its faults.
//!
//! **Why not huge pages.** These arrays once lived in their own 2 MB-aligned mappings with
//! `MADV_HUGEPAGE`: in a fresh process that saved ~2 ms of page faults per 6 MB array. In a long
//! process (`parbench reproduce` runs every experiment in one), memory becomes fragmented and,
//! with THP's `defrag` in its usual `madvise` mode, a fault in such a mapping compacts memory
//! synchronously: solves on two threads then stalled 10-25 ms in `precompute` and `loop`.

use crate::real::Real;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Buffers below this size are not kept: their faults are few and the allocator reuses them.
const MIN_SPARE_BYTES: usize = 1 << 20;
/// At most this many buffers are kept per element type: a query holds at most five large ones
/// at a time (the dense baseline four), a batch's group of queries three each, up to 16 queries
/// ([`crate::batch::MAX_GROUP`]) within the byte limit, so that the next group finds them all.
const MAX_SPARES: usize = 3 * crate::batch::MAX_GROUP;
/// ... and at most this many bytes, a batch group's budget ([`crate::batch::GROUP_BYTES`]): a
/// larger problem's buffers are then returned to the system (its faults are a smaller share of
/// its work anyway).
const MAX_SPARE_BYTES: usize = crate::batch::GROUP_BYTES;

/// Where a buffer's values start: a cache line. The row kernels read rows of 20 f64 (160 bytes)
/// or 24 f32 (96 bytes) in 32-byte vectors; from a cache-line boundary none of those loads
/// straddles two lines. The allocator's large blocks start 16 bytes into a page, where half of
/// them did: the loop of a one-document microbenchmark ran 10% slower.
const ALIGN: usize = 64;

/// A fixed-length `f64` (or `f32`) buffer, starting on a cache line ([`ALIGN`]), whose storage
/// goes back to [`Spares`] when dropped; see the module docs.
pub struct ZeroedBuf<E: Real = f64> {
    /// Owns the values: `len` of them from `start`, `storage` holding [`ZeroedBuf::pad`] more
    /// than `len` so that an aligned start exists whatever address the allocator gives.
    storage: Vec<E>,
    /// `storage`'s first value on a cache line. A pointer, not an offset: the row kernels
    /// dereference a buffer once a nonzero, and an offset and its bounds check there added 11%
    /// to `fused`'s instructions (the gate's count).
    start: NonNull<E>,
    len: usize,
}

// SAFETY: a `ZeroedBuf` owns its values exactly as the `Vec` in it does (`start` points into that
// `Vec`'s heap block and is only used through `&self` or `&mut self`), so it may move to or be
// shared with other threads whenever a `Vec<E>` may.
unsafe impl<E: Real> Send for ZeroedBuf<E> {}
// SAFETY: as for `Send`.
unsafe impl<E: Real> Sync for ZeroedBuf<E> {}

impl<E: Real> ZeroedBuf<E> {
    /// `len` zeros: a spare buffer cleared, or calloc's fresh pages (`vec!` of a zero float).
    pub fn zeroed(len: usize) -> ZeroedBuf<E> {
        let cleared = E::spares().take(len + Self::pad()).map(|mut spare| {
            spare.clear();
            spare
        });
        ZeroedBuf::from_spare(cleared, len)
    }

    /// `len` values for a caller that writes every one before reading any: a spare buffer as it
    /// was left (values of an earlier query), or fresh zeros. Saves [`ZeroedBuf::zeroed`]'s
    /// clearing pass over memory the caller overwrites anyway.
    pub fn for_overwrite(len: usize) -> ZeroedBuf<E> {
        ZeroedBuf::from_spare(E::spares().take(len + Self::pad()), len)
    }

    /// Values allocated beyond `len`, room to move the start to a cache line.
    fn pad() -> usize {
        ALIGN / std::mem::size_of::<E>()
    }

    /// `spare` cut or grown (with zeros) to `len` values past its first cache line, or `len`
    /// fresh zeros there.
    fn from_spare(spare: Option<Vec<E>>, len: usize) -> ZeroedBuf<E> {
        let total = len + Self::pad();
        let mut storage = match spare {
            Some(mut spare) => {
                spare.truncate(total);
                spare.resize(total, E::ZERO);
                spare
            }
            None => vec![E::ZERO; total],
        };
        // The allocator aligns a float to its size at least, so the distance to the next cache
        // line is a whole number of values, under `pad()`.
        let offset = storage.as_ptr().align_offset(ALIGN);
        assert!(
            offset < Self::pad(),
            "a buffer of {len} values cannot be aligned"
        );
        // `storage` is never resized again, so its heap block (and this pointer into it) stays
        // put when the `ZeroedBuf` moves; `offset + len <= total`.
        let start = NonNull::from(&mut storage[offset..]).cast::<E>();
        ZeroedBuf {
            storage,
            start,
            len,
        }
    }
}

impl<E: Real> Clone for ZeroedBuf<E> {
    /// A copy in a buffer of its own, aligned as every buffer is.
    fn clone(&self) -> Self {
        let mut copy = ZeroedBuf::for_overwrite(self.len);
        copy.copy_from_slice(self);
        copy
    }
}

impl<E: Real> Drop for ZeroedBuf<E> {
    fn drop(&mut self) {
        E::spares().give(std::mem::take(&mut self.storage));
    }
}

/// A process-wide stash of large buffers of one element type, taken by the next request they
/// fit (the smallest that does) and given back when a [`ZeroedBuf`] is dropped.
pub struct Spares<E> {
    kept: Mutex<Vec<Vec<E>>>,
}

impl<E> Spares<E> {
    /// An empty stash (for a `static`).
    pub const fn new() -> Spares<E> {
        Spares {
            kept: Mutex::new(Vec::new()),
        }
    }

    /// The smallest kept buffer holding at least `len` values, if any (and only for buffers
    /// large enough to be kept).
    fn take(&self, len: usize) -> Option<Vec<E>> {
        if len * std::mem::size_of::<E>() < MIN_SPARE_BYTES {
            return None;
        }
        // A poisoned lock only means a thread panicked while holding it; the list is valid.
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let best = (0..kept.len())
            .filter(|&i| kept[i].capacity() >= len)
            .min_by_key(|&i| kept[i].capacity())?;
        Some(kept.swap_remove(best))
    }

    /// Keeps `buffer` for a later request, unless it is small or alone over the byte limit;
    /// while the stash is over its count or byte limit, its smallest buffer is dropped.
    fn give(&self, buffer: Vec<E>) {
        let bytes = |v: &Vec<E>| v.capacity() * std::mem::size_of::<E>();
        if !(MIN_SPARE_BYTES..=MAX_SPARE_BYTES).contains(&bytes(&buffer)) {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push(buffer);
        while kept.len() > MAX_SPARES || kept.iter().map(bytes).sum::<usize>() > MAX_SPARE_BYTES {
            match (0..kept.len()).min_by_key(|&i| kept[i].capacity()) {
                Some(smallest) => drop(kept.swap_remove(smallest)),
                None => break,
            }
        }
    }
}

impl<E> Default for Spares<E> {
    fn default() -> Self {
        Spares::new()
    }
}

impl<E: Real> Deref for ZeroedBuf<E> {
    type Target = [E];
    #[inline]
    fn deref(&self) -> &[E] {
        // SAFETY: `start` points at `len` initialized values inside `storage`, which this
        // buffer owns and does not resize (see `from_spare`); `&self` keeps them unchanged.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl<E: Real> DerefMut for ZeroedBuf<E> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [E] {
        // SAFETY: as in `deref`; `&mut self` makes this the only access to them.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }
}

impl<E: Real> std::fmt::Debug for ZeroedBuf<E> {
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
        // 300,000 values are above the size kept, so the second round takes buffers the
        // first one dirtied (here or in another test) and must still see zeros.
        for _ in 0..2 {
            for len in [0, 3, 100_005, 300_000] {
                let mut b = ZeroedBuf::<f64>::zeroed(len);
                assert_eq!(b.len(), len);
                assert_eq!(b.as_ptr() as usize % ALIGN, 0, "starts on a cache line");
                assert!(b.iter().all(|&x| x == 0.0));
                for (i, x) in b.iter_mut().enumerate() {
                    *x = i as f64 + 1.0;
                }
                let c = b.clone();
                assert_eq!(c.as_ptr() as usize % ALIGN, 0, "a clone too");
                assert!(c.iter().enumerate().all(|(i, &x)| x == i as f64 + 1.0));
            }
        }
        for len in [10, 300_000, 200_000] {
            let b = ZeroedBuf::<f32>::for_overwrite(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0, "f32 starts on a cache line");
        }
    }

    #[test]
    fn a_stash_hands_out_the_smallest_fitting_buffer_and_keeps_a_bounded_number() {
        let spares = Spares::<f64>::new();
        let mb = MIN_SPARE_BYTES / 8;
        assert!(spares.take(mb).is_none(), "empty");
        spares.give(vec![0.0; 10]);
        assert!(spares.take(5).is_none(), "small buffers are not kept");
        for n in [3, 1, 2] {
            spares.give(Vec::with_capacity(n * mb));
        }
        let got = spares.take(mb + 1).map(|v| v.capacity());
        assert_eq!(got, Some(2 * mb), "the smallest buffer that fits");
        assert!(spares.take(4 * mb).is_none(), "none fits");
        // Twice the count limit, all together (with the 1 and 3 MiB buffers left) well under
        // the byte limit, so only the count limit acts.
        assert!((2 * MAX_SPARES * (mb + 2 * MAX_SPARES) + 4 * mb) * 8 < MAX_SPARE_BYTES);
        for n in 0..2 * MAX_SPARES {
            spares.give(Vec::with_capacity(mb + n));
        }
        let kept = spares.kept.lock().map(|k| k.len()).unwrap_or(0);
        assert_eq!(kept, MAX_SPARES);
        // The largest ones were kept: the request for the largest still finds it.
        let largest = mb + 2 * MAX_SPARES - 1;
        assert_eq!(spares.take(largest).map(|v| v.capacity()), Some(largest));
        // Bytes are bounded too: a buffer over the limit is not kept, and keeping one that
        // brings the total over it drops the smallest until it fits.
        let spares = Spares::<f64>::new();
        spares.give(Vec::with_capacity(MAX_SPARE_BYTES / 8 + 1));
        assert!(spares.take(mb).is_none(), "over the byte limit");
        let half = MAX_SPARE_BYTES / 16;
        for n in [half, mb, half] {
            spares.give(Vec::with_capacity(n));
        }
        let mut kept: Vec<usize> = spares
            .kept
            .lock()
            .map(|k| k.iter().map(Vec::capacity).collect())
            .unwrap_or_default();
        kept.sort_unstable();
        assert_eq!(kept, vec![half, half]);
    }

    #[test]
    fn a_buffer_for_overwrite_reuses_a_spare_without_clearing_it() {
        let mut dirty = vec![7.0f64; 1000];
        dirty.reserve_exact(0);
        let b = ZeroedBuf::<f64>::from_spare(Some(dirty), 600);
        assert_eq!(b.len(), 600);
        assert!(b.iter().all(|&x| x == 7.0));
        // Grown with zeros: the spare's values first, then zeros, from the aligned start.
        let grown = ZeroedBuf::<f64>::from_spare(Some(vec![7.0; 10]), 20);
        let sevens = grown.iter().take_while(|&&x| x == 7.0).count();
        assert!(sevens <= 10 && grown[sevens..].iter().all(|&x| x == 0.0));
        assert!(ZeroedBuf::<f64>::from_spare(None, 5)
            .iter()
            .all(|&x| x == 0.0));
    }
}
