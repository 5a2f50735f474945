//! Zero-initialized `f64` buffers for the large per-query arrays (`M`, `K^T`, `(K / r)^T`,
//! `(K .* M)^T`: 6 MB each at the paper's shape, 16 MB for the dense baseline; `x`, `u` and the
//! per-thread accumulators: 800 KB each).
//!
//! Why not `vec![0.0; n]`: each solve allocates these afresh, and glibc hands back large freed
//! blocks to the kernel (mmap threshold, heap trimming), so every solve touches fresh memory:
//! one page fault per 4 KB page, ~1500 per array, measured at ~2.6 ms per 6 MB array against
//! ~0.3 ms for the same array in 2 MB transparent huge pages. THP is usually in `madvise` mode, so
//! the buffer is its own 2 MB-aligned anonymous mapping with `MADV_HUGEPAGE`. Anonymous mappings
//! are zero-filled by the kernel, so no memset is needed either. Small buffers (and other
//! platforms, or a failed `mmap`) use an ordinary `Vec`.

use std::ops::{Deref, DerefMut};

/// Below this many bytes a plain `Vec` is used: a mapping's system calls would cost more than the
/// faults they save. Above it, the mapping is rounded up to whole 2 MB pages (an 800 KB array
/// takes one huge page: one fault instead of 200).
const MAP_MIN_BYTES: usize = 512 << 10;

/// A zero-initialized, fixed-length `f64` buffer; see the module docs.
pub struct ZeroedBuf {
    storage: Storage,
}

enum Storage {
    Heap(Vec<f64>),
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    Mapped(mapped::Mapping),
}

impl ZeroedBuf {
    /// `len` zeros.
    pub fn zeroed(len: usize) -> ZeroedBuf {
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        if len.saturating_mul(8) >= MAP_MIN_BYTES {
            if let Some(m) = mapped::Mapping::new(len) {
                return ZeroedBuf {
                    storage: Storage::Mapped(m),
                };
            }
        }
        ZeroedBuf {
            storage: Storage::Heap(vec![0.0; len]),
        }
    }
}

impl Deref for ZeroedBuf {
    type Target = [f64];
    #[inline]
    fn deref(&self) -> &[f64] {
        match &self.storage {
            Storage::Heap(v) => v,
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Storage::Mapped(m) => m.as_slice(),
        }
    }
}

impl DerefMut for ZeroedBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [f64] {
        match &mut self.storage {
            Storage::Heap(v) => v,
            #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
            Storage::Mapped(m) => m.as_mut_slice(),
        }
    }
}

impl Clone for ZeroedBuf {
    fn clone(&self) -> ZeroedBuf {
        let mut b = ZeroedBuf::zeroed(self.len());
        b.copy_from_slice(self);
        b
    }
}

impl std::fmt::Debug for ZeroedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeroedBuf")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod mapped {
    use std::ffi::c_void;

    const PROT_READ: i32 = 1;
    const PROT_WRITE: i32 = 2;
    const MAP_PRIVATE: i32 = 2;
    const MAP_ANONYMOUS: i32 = 0x20;
    const MADV_HUGEPAGE: i32 = 14;
    const HUGE_PAGE: usize = 2 << 20;

    extern "C" {
        fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: i32,
            flags: i32,
            fd: i32,
            off: i64,
        ) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: usize) -> i32;
        fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
    }

    /// An anonymous private mapping of `len` f64 starting on a 2 MB boundary.
    pub(super) struct Mapping {
        ptr: *mut f64,
        len: usize,
        map_len: usize,
    }

    // SAFETY: the mapping is owned exclusively by this value (like a `Vec`'s buffer); shared
    // access only reads through `&self`, mutation needs `&mut self`.
    unsafe impl Send for Mapping {}
    // SAFETY: as above.
    unsafe impl Sync for Mapping {}

    impl Mapping {
        pub(super) fn new(len: usize) -> Option<Mapping> {
            let bytes = len.checked_mul(8)?;
            let map_len = bytes.div_ceil(HUGE_PAGE).checked_mul(HUGE_PAGE)?;
            let over = map_len.checked_add(HUGE_PAGE)?;
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
            let raw = unsafe {
                mmap(
                    std::ptr::null_mut(),
                    over,
                    PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if raw as isize == -1 || raw.is_null() {
                return None;
            }
            let start = raw as usize;
            let aligned = start.div_ceil(HUGE_PAGE) * HUGE_PAGE;
            let head = aligned - start;
            let tail = over - head - map_len;
            // SAFETY: `[start, start + over)` is our mapping; the head and tail trimmed here lie
            // inside it, page-aligned (mmap returns page-aligned addresses, sizes are multiples of
            // 2 MB or of the distance between two page-aligned addresses), and are never used.
            // The advice is only a hint: failure leaves ordinary pages, still correct.
            unsafe {
                if head > 0 {
                    munmap(raw, head);
                }
                if tail > 0 {
                    munmap((aligned + map_len) as *mut c_void, tail);
                }
                madvise(aligned as *mut c_void, map_len, MADV_HUGEPAGE);
            }
            Some(Mapping {
                ptr: aligned as *mut f64,
                len,
                map_len,
            })
        }

        #[inline]
        pub(super) fn as_slice(&self) -> &[f64] {
            // SAFETY: `ptr` is valid for `len` f64 (zero-filled by the kernel, so initialized),
            // aligned, and owned by `self`.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }

        #[inline]
        pub(super) fn as_mut_slice(&mut self) -> &mut [f64] {
            // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `[ptr, ptr + map_len)` is the part of the mapping kept in `new`, unmapped
            // exactly once; no slice into it outlives `self`.
            unsafe {
                munmap(self.ptr as *mut c_void, self.map_len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_buffers_start_zeroed_and_keep_writes() {
        for len in [0, 3, MAP_MIN_BYTES / 8 + 5] {
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
