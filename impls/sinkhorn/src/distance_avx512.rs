//! AVX-512 microkernel for the query's distance matrix, used by
//! [`crate::distance::query_distances`] when the CPU has AVX-512F.
//!
//! The distances need `a . q_s` for every selected word `a` and query word `q_s`: a
//! `n_w x d` times `d x v_s` product whose left operand (the embeddings, 91 MB at the paper's shape
//! for the 37.9k used words) is read once and whose right operand is tiny (`v_s x d`, 46 KB). A
//! general GEMM would gather the scattered word rows into a buffer and then pack that buffer again:
//! three passes over the big operand. This kernel reads every embedding row once, in place: the
//! query is packed once, transposed into panels of [`PANEL`] columns (`d x 24` doubles, 58 KB,
//! L2-resident), and [`MR`] words at a time each dimension `t` broadcasts `a_i[t]` and adds
//! `a_i[t] * Q[t, 0..24]` into `MR x 3` vector accumulators (24 of the 32 zmm registers), so every
//! query load serves 8 words and every embedding value is loaded once per panel. The squared norm
//! of each word row is taken right after, while the 8 rows (19 KB) are still in L1, and the
//! distances `sqrt(|a|^2 + |q|^2 - 2 a.q)` are finished 8 lanes at a time with the same
//! cancellation fallback as the portable path (a direct `||a - q||` when the difference is below
//! `CANCELLATION_RATIO (|a|^2 + |q|^2)`, so identical words give exactly 0).
//!
//! Cost: `2 n_w ceil(v_s / 8) 8 d` flops in the FMA units (`v_s = 19` pads to 24 lanes, 79% useful)
//! plus `2 n_w d` for the norms; memory: each embedding row once.
//!
//! The kernel is generic over the element ([`Avx512Real`]: f64 in 8-lane vectors, f32 in 16-lane
//! ones, for `doc-major-f32`); a panel is three vectors of either, 192 bytes a row. In f32 a
//! 19-word query takes two vectors a row (16 FMAs per dimension and block against f64's 24) and
//! the embeddings are half the bytes.

use crate::real::Real;
use std::arch::x86_64::*;

/// Words per microkernel call.
const MR: usize = 8;
/// Vectors per panel.
const PANEL_VECTORS: usize = 3;

/// The AVX-512F vector of an element type, and the operations the kernel takes from it. Every
/// method requires AVX-512F, which the kernel's entry point [`distances`] has checked
/// ([`available`]).
pub trait Avx512Real: Real {
    /// The 512-bit vector.
    type V: Copy;
    /// Lanes per vector.
    const VL: usize;
    /// Query columns per panel.
    const PANEL: usize = PANEL_VECTORS * Self::VL;
    /// # Safety
    /// AVX-512F.
    unsafe fn zero() -> Self::V;
    /// # Safety
    /// AVX-512F; `p` 64-byte aligned with `VL` readable values.
    unsafe fn load(p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; `VL` readable values at `p`.
    unsafe fn loadu(p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; the lanes of `mask` readable at `p`.
    unsafe fn maskz_loadu(mask: u32, p: *const Self) -> Self::V;
    /// # Safety
    /// AVX-512F; the lanes of `mask` writable at `p`.
    unsafe fn mask_storeu(p: *mut Self, mask: u32, v: Self::V);
    /// # Safety
    /// AVX-512F.
    unsafe fn splat(x: Self) -> Self::V;
    /// `a b + c` with one rounding.
    /// # Safety
    /// AVX-512F.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vadd(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vmul(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vsqrt(a: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vdiv(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vsub(a: Self::V, b: Self::V) -> Self::V;
    /// The larger of each pair (`b` where either is NaN).
    /// # Safety
    /// AVX-512F.
    unsafe fn vmax(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F.
    unsafe fn vabs(a: Self::V) -> Self::V;
    /// The lanes of `mask` where `a < b` (false where either is NaN).
    /// # Safety
    /// AVX-512F.
    unsafe fn mask_lt(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// `b` in the lanes of `mask`, `a` elsewhere.
    /// # Safety
    /// AVX-512F.
    unsafe fn blend(mask: u32, a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX-512F; `p` 64-byte aligned with `VL` writable values.
    unsafe fn store(p: *mut Self, v: Self::V);
    /// # Safety
    /// AVX-512F; `VL` writable values at `p`.
    unsafe fn storeu(p: *mut Self, v: Self::V);
    /// The lanes of `mask` where `a <= b`.
    /// # Safety
    /// AVX-512F.
    unsafe fn mask_le(mask: u32, a: Self::V, b: Self::V) -> u32;
    /// # Safety
    /// AVX-512F.
    unsafe fn reduce_add(a: Self::V) -> Self;
}

impl Avx512Real for f64 {
    type V = __m512d;
    const VL: usize = 8;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> __m512d {
        _mm512_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_load_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn loadu(p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn maskz_loadu(mask: u32, p: *const f64) -> __m512d {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_pd(mask as __mmask8, p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_storeu(p: *mut f64, mask: u32, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_pd(p, mask as __mmask8, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splat(x: f64) -> __m512d {
        _mm512_set1_pd(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fmadd(a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        _mm512_fmadd_pd(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vadd(a: __m512d, b: __m512d) -> __m512d {
        _mm512_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmul(a: __m512d, b: __m512d) -> __m512d {
        _mm512_mul_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsqrt(a: __m512d) -> __m512d {
        _mm512_sqrt_pd(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vdiv(a: __m512d, b: __m512d) -> __m512d {
        _mm512_div_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsub(a: __m512d, b: __m512d) -> __m512d {
        _mm512_sub_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmax(a: __m512d, b: __m512d) -> __m512d {
        _mm512_max_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vabs(a: __m512d) -> __m512d {
        _mm512_abs_pd(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_lt(mask: u32, a: __m512d, b: __m512d) -> u32 {
        _mm512_mask_cmp_pd_mask(mask as __mmask8, a, b, _CMP_LT_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn blend(mask: u32, a: __m512d, b: __m512d) -> __m512d {
        _mm512_mask_blend_pd(mask as __mmask8, a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f64, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_store_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn storeu(p: *mut f64, v: __m512d) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_le(mask: u32, a: __m512d, b: __m512d) -> u32 {
        _mm512_mask_cmp_pd_mask(mask as __mmask8, a, b, _CMP_LE_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce_add(a: __m512d) -> f64 {
        _mm512_reduce_add_pd(a)
    }
}

impl Avx512Real for f32 {
    type V = __m512;
    const VL: usize = 16;
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_load_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn loadu(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn maskz_loadu(mask: u32, p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { _mm512_maskz_loadu_ps(mask as __mmask16, p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_storeu(p: *mut f32, mask: u32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_mask_storeu_ps(p, mask as __mmask16, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vadd(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmul(a: __m512, b: __m512) -> __m512 {
        _mm512_mul_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsqrt(a: __m512) -> __m512 {
        _mm512_sqrt_ps(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vdiv(a: __m512, b: __m512) -> __m512 {
        _mm512_div_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vsub(a: __m512, b: __m512) -> __m512 {
        _mm512_sub_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vmax(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn vabs(a: __m512) -> __m512 {
        _mm512_abs_ps(a)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_lt(mask: u32, a: __m512, b: __m512) -> u32 {
        _mm512_mask_cmp_ps_mask(mask as __mmask16, a, b, _CMP_LT_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn blend(mask: u32, a: __m512, b: __m512) -> __m512 {
        _mm512_mask_blend_ps(mask as __mmask16, a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_store_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn storeu(p: *mut f32, v: __m512) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn mask_le(mask: u32, a: __m512, b: __m512) -> u32 {
        _mm512_mask_cmp_ps_mask(mask as __mmask16, a, b, _CMP_LE_OQ) as u32
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce_add(a: __m512) -> f32 {
        _mm512_reduce_add_ps(a)
    }
}

/// Whether this CPU can run the kernel (checked once, then cached by std).
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// The query packed for the kernel: `panels` of `d x PANEL` values (column `c` of panel `p` is
/// query word `p * PANEL + c`, zero beyond `v_s`), 64-byte aligned so that a panel row is three
/// whole cache lines; the query's squared norms padded with zeros to whole panels; the query rows
/// themselves for the direct recomputation.
pub struct QueryPack<E> {
    dim: usize,
    vs: usize,
    storage: Vec<E>,
    offset: usize,
    norms: Vec<E>,
    query: Vec<E>,
    cancellation_ratio: E,
}

impl<E> QueryPack<E> {
    /// Query words packed.
    pub(crate) fn vs(&self) -> usize {
        self.vs
    }
}

impl<E: Avx512Real> QueryPack<E> {
    /// Packs the `vs x dim` row-major query vectors with their squared norms.
    pub(crate) fn new(query: Vec<E>, norms: &[E], dim: usize) -> QueryPack<E> {
        let vs = norms.len();
        let panel = E::PANEL;
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
        QueryPack {
            dim,
            vs,
            storage,
            offset,
            norms: padded_norms,
            query,
            cancellation_ratio: E::from_f64(E::CANCELLATION_RATIO),
        }
    }

    fn panel(&self, p: usize) -> &[E] {
        let start = self.offset + p * self.dim * E::PANEL;
        &self.storage[start..start + self.dim * E::PANEL]
    }
}

/// Distances of the words `words` (rows of the `V x dim` row-major `vecs`) to the query, written
/// to `out` (`words.len()` rows of `stride >= v_s` values; only the first `v_s` of each row are
/// written).
///
/// # Safety
/// The CPU must support AVX-512F ([`available`]).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn distances<E: Avx512Real>(
    pack: &QueryPack<E>,
    vecs: &[E],
    words: &[u32],
    stride: usize,
    out: &mut [E],
) {
    let d = pack.dim;
    assert!(stride >= pack.vs && out.len() >= words.len() * stride);
    assert!(words.iter().all(|&w| (w as usize + 1) * d <= vecs.len()));
    // A short block repeats its first word (a valid row); those results are not stored.
    let row_pointers = |block: &[u32]| -> [*const E; MR] {
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
        // The next block's rows are prefetched while this one computes: 8 rows are fetched at
        // once instead of waiting for the hardware prefetcher to pick up each new stream.
        let next = blocks.peek().map(|b| row_pointers(b)).unwrap_or(rows);
        let mut norms = [E::ZERO; MR];
        for (n, &row) in norms.iter_mut().zip(&rows) {
            // SAFETY: `row` points at `d` values of `vecs` (above); the CPU has AVX-512F (this
            // function's contract), all `squared_norm` needs.
            *n = unsafe { squared_norm(std::slice::from_raw_parts(row, d)) };
        }
        let mut col = 0;
        for p in 0..pack.vs.div_ceil(E::PANEL) {
            let cols = (pack.vs - col).min(E::PANEL);
            // SAFETY: AVX-512F by this function's contract; as above for `rows`; the panel
            // holds `d x PANEL` values; `out` holds `block.len()` rows of `stride >= col + cols`
            // values.
            unsafe {
                match cols.div_ceil(E::VL) {
                    1 => panel_block::<E, 1>(
                        pack,
                        p,
                        &rows,
                        &next,
                        &norms,
                        block.len(),
                        col,
                        cols,
                        stride,
                        out,
                    ),
                    2 => panel_block::<E, 2>(
                        pack,
                        p,
                        &rows,
                        &next,
                        &norms,
                        block.len(),
                        col,
                        cols,
                        stride,
                        out,
                    ),
                    _ => panel_block::<E, 3>(
                        pack,
                        p,
                        &rows,
                        &next,
                        &norms,
                        block.len(),
                        col,
                        cols,
                        stride,
                        out,
                    ),
                }
            }
            col += cols;
        }
    }
}

/// One panel of query columns `col .. col + cols` (`cols <= VL NV`) for one block of rows.
///
/// # Safety
/// AVX-512F; every `rows[i]` points at `pack.dim` readable values; `out` holds `m` rows of
/// `stride >= col + cols` values.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn panel_block<E: Avx512Real, const NV: usize>(
    pack: &QueryPack<E>,
    p: usize,
    rows: &[*const E; MR],
    next: &[*const E; MR],
    norms: &[E; MR],
    m: usize,
    col: usize,
    cols: usize,
    stride: usize,
    out: &mut [E],
) {
    let (vl, panel_width) = (E::VL, E::PANEL);
    debug_assert!(NV <= PANEL_VECTORS && cols <= vl * NV);
    let d = pack.dim;
    let panel = pack.panel(p).as_ptr();
    // SAFETY (every vector operation below): AVX-512F, this function's contract.
    let mut acc = [[unsafe { E::zero() }; NV]; MR];
    for t in 0..d {
        if t % 8 == 0 {
            for &row in next {
                // A prefetch never faults; `wrapping_add` keeps the address computation defined
                // even past the row (it stays inside it for `t < d`).
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(t) as *const i8);
            }
        }
        // SAFETY: `t < d` and `v < NV <= PANEL_VECTORS`, so `panel + t PANEL + VL v + VL <=
        // d PANEL`, inside the panel, and the panel rows are 64-byte aligned (`QueryPack`) as
        // the aligned load requires.
        let q: [E::V; NV] =
            std::array::from_fn(|v| unsafe { E::load(panel.add(t * panel_width + vl * v)) });
        for i in 0..MR {
            // SAFETY: `rows[i]` points at `d` readable values (caller's contract) and `t < d`.
            let a = unsafe { E::splat(*rows[i].add(t)) };
            for v in 0..NV {
                acc[i][v] = unsafe { E::fmadd(a, q[v], acc[i][v]) };
            }
        }
    }
    let ratio = unsafe { E::splat(pack.cancellation_ratio) };
    let minus_two = unsafe { E::splat(-(E::ONE + E::ONE)) };
    for i in 0..m {
        let na = unsafe { E::splat(norms[i]) };
        // SAFETY: `i < m` and `col + cols <= stride`, so the offset is inside `out` (caller's
        // contract: `m` rows of `stride` values).
        let out_row = unsafe { out.as_mut_ptr().add(i * stride + col) };
        for (v, &dot) in acc[i].iter().enumerate() {
            let lanes = cols.saturating_sub(vl * v).min(vl);
            let mask = ((1u64 << lanes) - 1) as u32;
            // SAFETY: the norms are padded to whole panels, so the VL values at
            // `p PANEL + VL v` (`v < NV <= PANEL_VECTORS`) exist.
            let nq = unsafe { E::loadu(pack.norms.as_ptr().add(p * panel_width + vl * v)) };
            let scale = unsafe { E::vadd(na, nq) };
            // `-2 a.q` is exact, so this is `scale + (-2 a.q)` with one rounding, as in the
            // portable path.
            let d2 = unsafe { E::fmadd(minus_two, dot, scale) };
            let cancelled = unsafe { E::mask_le(mask, d2, E::vmul(ratio, scale)) };
            // SAFETY: the mask keeps lanes `VL v + l < cols` of row `i`, inside `out` (caller's
            // contract); masked-off lanes are not accessed.
            unsafe { E::mask_storeu(out_row.add(vl * v), mask, E::vsqrt(d2)) };
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

/// `|a|^2` with `VL`-lane partial sums.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn squared_norm<E: Avx512Real>(a: &[E]) -> E {
    // SAFETY (the vector operations): AVX-512F, this function's contract.
    let mut acc = unsafe { E::zero() };
    let mut chunks = a.chunks_exact(E::VL);
    for c in &mut chunks {
        // SAFETY: `c` holds VL values.
        let x = unsafe { E::loadu(c.as_ptr()) };
        acc = unsafe { E::fmadd(x, x, acc) };
    }
    let tail = chunks.remainder();
    let mask = ((1u64 << tail.len()) - 1) as u32;
    // SAFETY: the masked load reads only the `tail.len()` values of `tail`.
    let x = unsafe { E::maskz_loadu(mask, tail.as_ptr()) };
    acc = unsafe { E::fmadd(x, x, acc) };
    unsafe { E::reduce_add(acc) }
}
