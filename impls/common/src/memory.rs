//! Large buffers backed by 2 MB pages.
//!
//! Kernels that gather rows at random miss the TLB on nearly every gather with 4 KB pages, and
//! every 4 KB page a buffer first writes costs a page fault. Transparent huge pages fix both
//! where the kernel offers them (`madvise` mode, as on these machines): the buffer must be
//! advised before its pages are first written. They have a price: with `defrag` at `madvise`
//! the kernel compacts memory to find each huge page, which on a host whose memory is
//! fragmented made reading a 240 MB embeddings table twice as slow, so the embeddings reader
//! does not use them; FusedMM's gathered matrices do.

/// Bytes from which a buffer asks for 2 MB pages: below, a huge page would be mostly empty.
pub const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An empty vector with room for `len` values, none written yet, advised to be backed by
/// 2 MB pages from [`HUGE_PAGE_MIN_BYTES`] on.
pub fn unwritten<T>(len: usize) -> Vec<T> {
    let data = Vec::with_capacity(len);
    advise_huge_pages(&data);
    data
}

/// Advises the whole allocation of `data` (its capacity, written or not) to be backed by 2 MB
/// pages, when it is at least [`HUGE_PAGE_MIN_BYTES`]; a no-op off Linux or where the kernel
/// refuses. Pages already written keep their size until the kernel merges them.
pub fn advise_huge_pages<T>(data: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        let bytes = data.capacity() * std::mem::size_of::<T>();
        if bytes < HUGE_PAGE_MIN_BYTES {
            return;
        }
        const PAGE: usize = 4096;
        let base = data.as_ptr() as usize;
        let start = base.next_multiple_of(PAGE);
        let end = (base + bytes) / PAGE * PAGE;
        if end > start {
            // SAFETY: madvise with MADV_HUGEPAGE only tells the kernel how to back pages; it
            // reads and writes no memory, and the page-aligned range lies inside this vector's
            // own allocation. A refusal (no THP support) leaves 4 KB pages, so it is ignored.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = data;
}
