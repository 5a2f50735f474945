//! The in-place microkernel for the query's distance matrix, used by
//! [`crate::distance::query_distances`] where the CPU has AVX-512F or AVX2 with FMA.
//!
//! The distances need `a . q_s` for every selected word `a` and query word `q_s`: a
//! `n_w x d` times `d x v_s` product whose left operand (the embeddings, 91 MB at the paper's shape
//! for the 37.9k used words) is read once and whose right operand is tiny (`v_s x d`, 46 KB). A
//! general GEMM would gather the scattered word rows into a buffer and then pack that buffer again:
//! three passes over the big operand. This kernel reads every embedding row once, in place: the
//! query is packed once, transposed into panels of three vectors' columns (`d x 24` doubles with
//! AVX-512, 58 KB, L2-resident), and `MR` words at a time each dimension `t` broadcasts `a_i[t]`
//! and adds `a_i[t] * Q[t, panel]` into `MR x 3` vector accumulators, so every query load serves
//! `MR` words and every embedding value is loaded once per panel. With AVX-512 (32 registers)
//! `MR` is 8, 24 accumulators; with AVX2 (16 registers) 3, 9 accumulators and a panel of 12
//! doubles (at 4 words the 12 accumulators, 3 query vectors and the broadcasts did not fit: an
//! accumulator spilled, and its chain through memory held the kernel to 27-31 GFLOP/s on two
//! Zen 3 threads with the rows in cache, against 39-41 at 3 words). The squared norm of each word row is taken right after, while the rows are still in
//! L1, and the distances `sqrt(|a|^2 + |q|^2 - 2 a.q)` are finished a vector at a time with the
//! same cancellation fallback as the portable path (a direct `||a - q||` when the difference is
//! below `CANCELLATION_RATIO (|a|^2 + |q|^2)`, so identical words give exactly 0).
//!
//! Cost: `2 n_w ceil(v_s / VL) VL d` flops in the FMA units (`v_s = 19` pads to 24 lanes with
//! AVX-512, 79% useful; to 20 with AVX2's 12-double panels) plus `2 n_w d` for the norms;
//! memory: each embedding row once. With AVX-512, a panel's last vector that holds at most half
//! a vector of query words (19 words: 8 + 8 + 3 f64, 16 + 3 f32) takes 256-bit FMAs: a core that
//! runs a 512-bit FMA as two 256-bit halves (AMD's Zen 4) then does 2.5 units of FMA work a word
//! and dimension instead of 3 in f64, 1.5 instead of 2 in f32, with the same lanes' values bit
//! for bit. On the AMD EPYC AVX-512 kind, `prep_bench` on one thread, runs interleaved: the f64
//! distance phase 15.2-16.6 -> 12.8-12.9 ms, f32 8.5-8.7 -> 8.2 ms (`docs/results.md`,
//! 2026-12-02, third session). Tried and dropped there: the words in the lanes instead (each
//! block's rows transposed in registers into an L1 buffer, the query values broadcast; 20 FMAs
//! where 24 were): the transposes, the norms and the scatter of the results back to word rows
//! cost more than the padding saved (f64 15.3 ms, f32 10.2 ms); and 12 words a block in f32
//! (9.6-10.4 ms).
//!
//! The kernel is generic over the vector ([`Vector`]: f64 or f32, for `doc-major-f32`, in either
//! instruction set). Every column's sum runs over the dimensions in order in its own lane, so a
//! query word's distances do not depend on the other query words (a batch's union gives each
//! query its own distances bit for bit).

use crate::real::Real;
use crate::simd::{has_avx2_fma, has_avx512f, Avx512Real, Vector, Ymm, Zmm};
use std::arch::x86_64::*;

/// Vectors per panel.
const PANEL_VECTORS: usize = 3;

/// The instruction set a [`QueryPack`] was packed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2,
}

/// The query packed for the kernel: `panels` of `d x PANEL` values (column `c` of panel `p` is
/// query word `p * PANEL + c`, zero beyond `v_s`; `PANEL` three vectors of the instruction set
/// packed for), 64-byte aligned so that a panel row is whole vectors on whole cache lines; the
/// query's squared norms padded with zeros to whole panels; the query rows themselves for the
/// direct recomputation.
pub struct QueryPack<E> {
    isa: Isa,
    panel_width: usize,
    dim: usize,
    vs: usize,
    storage: Vec<E>,
    offset: usize,
    norms: Vec<E>,
    query: Vec<E>,
    cancellation_ratio: E,
}

impl<E: Real> QueryPack<E> {
    /// Query words packed.
    pub(crate) fn vs(&self) -> usize {
        self.vs
    }

    /// Packs the `vs x dim` row-major query vectors with their squared norms for the widest
    /// vectors this CPU has, or gives the query back where it has neither AVX-512F nor AVX2
    /// with FMA.
    pub(crate) fn for_this_cpu(
        query: Vec<E>,
        norms: &[E],
        dim: usize,
    ) -> Result<QueryPack<E>, Vec<E>> {
        let (isa, vector_bytes) = if has_avx512f() {
            (Isa::Avx512, 64)
        } else if has_avx2_fma() {
            (Isa::Avx2, 32)
        } else {
            return Err(query);
        };
        let vs = norms.len();
        let panel = PANEL_VECTORS * vector_bytes / E::BYTES;
        let panels = vs.div_ceil(panel);
        // One extra cache line lets the panels start on a 64-byte boundary.
        let line = 64 / E::BYTES;
        let mut storage = vec![E::ZERO; panels * dim * panel + line];
        let offset = storage.as_ptr().align_offset(64).min(line - 1);
        for s in 0..vs {
            let (p, c) = (s / panel, s % panel);
            for t in 0..dim {
                storage[offset + (p * dim + t) * panel + c] = query[s * dim + t];
            }
        }
        let mut padded_norms = vec![E::ZERO; panels * panel];
        padded_norms[..vs].copy_from_slice(norms);
        Ok(QueryPack {
            isa,
            panel_width: panel,
            dim,
            vs,
            storage,
            offset,
            norms: padded_norms,
            query,
            cancellation_ratio: E::from_f64(E::CANCELLATION_RATIO),
        })
    }

    fn panel(&self, p: usize) -> &[E] {
        let start = self.offset + p * self.dim * self.panel_width;
        &self.storage[start..start + self.dim * self.panel_width]
    }
}

/// Distances of the words `words` (rows of the `V x dim` row-major `vecs`) to the query, written
/// to `out` (`words.len()` rows of `stride >= v_s` values; only the first `v_s` of each row are
/// written), by the kernel for the instruction set `pack` was packed for.
pub(crate) fn distances<E: Real>(
    pack: &QueryPack<E>,
    vecs: &[E],
    words: &[u32],
    stride: usize,
    out: &mut [E],
) where
    Zmm<E>: PackedDistances<E = E>,
    Ymm<E>: PackedDistances<E = E>,
{
    match pack.isa {
        Isa::Avx512 => {
            assert!(has_avx512f());
            // SAFETY: the CPU has AVX-512F (asserted).
            unsafe { Zmm::<E>::distances(pack, vecs, words, stride, out) }
        }
        Isa::Avx2 => {
            assert!(has_avx2_fma());
            // SAFETY: the CPU has AVX2 and FMA (asserted).
            unsafe { Ymm::<E>::distances(pack, vecs, words, stride, out) }
        }
    }
}

/// [`distances`] compiled for one instruction set.
pub(crate) trait PackedDistances: Vector {
    /// # Safety
    /// The type's instruction set.
    unsafe fn distances(
        pack: &QueryPack<Self::E>,
        vecs: &[Self::E],
        words: &[u32],
        stride: usize,
        out: &mut [Self::E],
    );
}

impl<E: Avx512Real> PackedDistances for Zmm<E> {
    #[target_feature(enable = "avx512f")]
    unsafe fn distances(
        pack: &QueryPack<E>,
        vecs: &[E],
        words: &[u32],
        stride: usize,
        out: &mut [E],
    ) {
        // SAFETY: AVX-512F (the caller's contract).
        unsafe { distances_in::<Self, 8>(pack, vecs, words, stride, out) }
    }
}

impl<E: Real> PackedDistances for Ymm<E>
where
    Ymm<E>: Vector<E = E>,
{
    #[target_feature(enable = "avx2,fma")]
    unsafe fn distances(
        pack: &QueryPack<E>,
        vecs: &[E],
        words: &[u32],
        stride: usize,
        out: &mut [E],
    ) {
        // SAFETY: AVX2 and FMA (the caller's contract).
        unsafe { distances_in::<Self, 3>(pack, vecs, words, stride, out) }
    }
}

/// The kernel, `MR` words at a time.
///
/// # Safety
/// `V`'s instruction set.
#[inline(always)]
unsafe fn distances_in<V: Vector, const MR: usize>(
    pack: &QueryPack<V::E>,
    vecs: &[V::E],
    words: &[u32],
    stride: usize,
    out: &mut [V::E],
) {
    let d = pack.dim;
    let panel_width = PANEL_VECTORS * V::VL;
    assert_eq!(pack.panel_width, panel_width);
    assert!(stride >= pack.vs && out.len() >= words.len() * stride);
    assert!(words.iter().all(|&w| (w as usize + 1) * d <= vecs.len()));
    // A short block repeats its first word (a valid row); those results are not stored.
    let row_pointers = |block: &[u32]| -> [*const V::E; MR] {
        std::array::from_fn(|i| {
            let w = block[if i < block.len() { i } else { 0 }] as usize;
            // SAFETY: `(w + 1) d <= vecs.len()` (asserted above), so the row is inside `vecs`.
            unsafe { vecs.as_ptr().add(w * d) }
        })
    };
    let mut blocks = words.chunks(MR).peekable();
    let mut outs = out.chunks_mut(MR * stride);
    while let (Some(block), Some(out)) = (blocks.next(), outs.next()) {
        let rows = row_pointers(block);
        // The next block's rows are prefetched while this one computes: `MR` rows are fetched
        // at once instead of waiting for the hardware prefetcher to pick up each new stream.
        let next = blocks.peek().map(|b| row_pointers(b)).unwrap_or(rows);
        let mut norms = [V::E::ZERO; MR];
        for (n, &row) in norms.iter_mut().zip(&rows) {
            // SAFETY: `row` points at `d` values of `vecs` (above); `V`'s instruction set (this
            // function's contract), all `squared_norm` needs.
            *n = unsafe { squared_norm::<V>(std::slice::from_raw_parts(row, d)) };
        }
        let mut col = 0;
        for p in 0..pack.vs.div_ceil(panel_width) {
            let cols = (pack.vs - col).min(panel_width);
            let block = Block {
                rows: &rows,
                next: &next,
                norms: &norms,
                m: block.len(),
            };
            // A last vector at most half full takes half-width FMAs where they cost less.
            let nv = cols.div_ceil(V::VL);
            let half = V::HALF_FMA && 2 * (cols - V::VL * (nv - 1)) <= V::VL;
            // SAFETY: `V`'s instruction set by this function's contract; as above for `rows`;
            // the panel holds `d x PANEL` values; `out` holds `block.len()` rows of
            // `stride >= col + cols` values.
            unsafe {
                if half {
                    panel_of_width::<V, MR, true>(nv, pack, p, &block, col, cols, stride, out)
                } else {
                    panel_of_width::<V, MR, false>(nv, pack, p, &block, col, cols, stride, out)
                }
            }
            col += cols;
        }
    }
}

/// [`panel_block`] for a panel of `nv` vectors (1 to [`PANEL_VECTORS`]).
///
/// # Safety
/// As for [`panel_block`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn panel_of_width<V: Vector, const MR: usize, const HALF: bool>(
    nv: usize,
    pack: &QueryPack<V::E>,
    p: usize,
    block: &Block<'_, V::E, MR>,
    col: usize,
    cols: usize,
    stride: usize,
    out: &mut [V::E],
) {
    // SAFETY (every arm): the caller's contract.
    unsafe {
        match nv {
            1 => panel_block::<V, MR, 1, HALF>(pack, p, block, col, cols, stride, out),
            2 => panel_block::<V, MR, 2, HALF>(pack, p, block, col, cols, stride, out),
            _ => panel_block::<V, MR, 3, HALF>(pack, p, block, col, cols, stride, out),
        }
    }
}

/// One block of `MR` word rows: the rows (the first `m` real, the rest repeats), the next
/// block's (to prefetch), and their squared norms.
struct Block<'a, E, const MR: usize> {
    rows: &'a [*const E; MR],
    next: &'a [*const E; MR],
    norms: &'a [E; MR],
    m: usize,
}

/// One panel of query columns `col .. col + cols` (`cols <= VL NV`) for one block of rows.
///
/// # Safety
/// `V`'s instruction set; every `block.rows[i]` points at `pack.dim` readable values; `out`
/// holds `block.m` rows of `stride >= col + cols` values.
#[inline(always)]
unsafe fn panel_block<V: Vector, const MR: usize, const NV: usize, const HALF: bool>(
    pack: &QueryPack<V::E>,
    p: usize,
    block: &Block<'_, V::E, MR>,
    col: usize,
    cols: usize,
    stride: usize,
    out: &mut [V::E],
) {
    let (vl, panel_width) = (V::VL, PANEL_VECTORS * V::VL);
    debug_assert!(NV <= PANEL_VECTORS && cols <= vl * NV);
    let d = pack.dim;
    let rows = block.rows;
    let panel = pack.panel(p).as_ptr();
    // SAFETY (every vector operation below): `V`'s instruction set, this function's contract.
    let mut acc = [[unsafe { V::zero() }; NV]; MR];
    for t in 0..d {
        if t % 8 == 0 {
            for &row in block.next {
                // SAFETY: a prefetch never faults (SSE, which every x86-64 has); `wrapping_add`
                // keeps the address computation defined even past the row (it stays inside it
                // for `t < d`).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(t) as *const i8) };
            }
        }
        let mut q = [unsafe { V::zero() }; NV];
        for (v, q) in q.iter_mut().enumerate() {
            // SAFETY: `t < d` and `v < NV <= PANEL_VECTORS`, so `panel + t PANEL + VL v + VL
            // <= d PANEL`, inside the panel, and the panel rows are 64-byte aligned
            // (`QueryPack`) as the aligned load requires.
            *q = unsafe { V::load(panel.add(t * panel_width + vl * v)) };
        }
        for i in 0..MR {
            // SAFETY: `rows[i]` points at `d` readable values (caller's contract) and `t < d`.
            let a = unsafe { V::splat(*rows[i].add(t)) };
            for v in 0..NV {
                acc[i][v] = if HALF && v == NV - 1 {
                    unsafe { V::fmadd_low_half(a, q[v], acc[i][v]) }
                } else {
                    unsafe { V::fmadd(a, q[v], acc[i][v]) }
                };
            }
        }
    }
    let ratio = unsafe { V::splat(pack.cancellation_ratio) };
    let minus_two = unsafe { V::splat(-(V::E::ONE + V::E::ONE)) };
    for i in 0..block.m {
        let na = unsafe { V::splat(block.norms[i]) };
        // SAFETY: `i < m` and `col + cols <= stride`, so the offset is inside `out` (caller's
        // contract: `m` rows of `stride` values).
        let out_row = unsafe { out.as_mut_ptr().add(i * stride + col) };
        for (v, &dot) in acc[i].iter().enumerate() {
            let lanes = cols.saturating_sub(vl * v).min(vl);
            let mask = ((1u64 << lanes) - 1) as u32;
            // SAFETY: the norms are padded to whole panels, so the VL values at
            // `p PANEL + VL v` (`v < NV <= PANEL_VECTORS`) exist.
            let nq = unsafe { V::loadu(pack.norms.as_ptr().add(p * panel_width + vl * v)) };
            let scale = unsafe { V::vadd(na, nq) };
            // `-2 a.q` is exact, so this is `scale + (-2 a.q)` with one rounding, as in the
            // portable path.
            let d2 = unsafe { V::fmadd(minus_two, dot, scale) };
            let cancelled = unsafe { V::mask_le(mask, d2, V::vmul(ratio, scale)) };
            // SAFETY: the mask keeps lanes `VL v + l < cols` of row `i`, inside `out` (caller's
            // contract); masked-off lanes are not accessed.
            unsafe { V::mask_storeu(out_row.add(vl * v), mask, V::vsqrt(d2)) };
            if cancelled != 0 {
                for l in 0..vl {
                    if cancelled & (1 << l) != 0 {
                        let s = col + vl * v + l;
                        // SAFETY: `rows[i]` points at `d` readable values (caller's contract),
                        // and lane `VL v + l < cols` (the mask) of row `i` is inside `out`.
                        unsafe {
                            let a = std::slice::from_raw_parts(rows[i], d);
                            let q = &pack.query[s * d..(s + 1) * d];
                            *out_row.add(vl * v + l) = crate::distance::direct_distance(a, q);
                        }
                    }
                }
            }
        }
    }
}

/// `|a|^2` with four independent `VL`-lane partial sums: one running sum was a chain of
/// `d / VL` FMAs at the FMA's latency, about 300 cycles a word at d = 300 with AVX2, a third of
/// the word's whole distance work.
///
/// # Safety
/// `V`'s instruction set.
#[inline(always)]
unsafe fn squared_norm<V: Vector>(a: &[V::E]) -> V::E {
    // SAFETY (the vector operations): `V`'s instruction set, this function's contract.
    let mut acc = [unsafe { V::zero() }; 4];
    let mut quads = a.chunks_exact(4 * V::VL);
    for c in &mut quads {
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `c` holds 4 VL values.
            let x = unsafe { V::loadu(c.as_ptr().add(j * V::VL)) };
            *acc = unsafe { V::fmadd(x, x, *acc) };
        }
    }
    let mut chunks = quads.remainder().chunks_exact(V::VL);
    for c in &mut chunks {
        // SAFETY: `c` holds VL values.
        let x = unsafe { V::loadu(c.as_ptr()) };
        acc[0] = unsafe { V::fmadd(x, x, acc[0]) };
    }
    let tail = chunks.remainder();
    let mask = ((1u64 << tail.len()) - 1) as u32;
    // SAFETY: the masked load reads only the `tail.len()` values of `tail`.
    let x = unsafe { V::maskz_loadu(mask, tail.as_ptr()) };
    acc[1] = unsafe { V::fmadd(x, x, acc[1]) };
    unsafe {
        let sum = V::vadd(V::vadd(acc[0], acc[2]), V::vadd(acc[1], acc[3]));
        V::reduce_add(sum)
    }
}
