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

use std::arch::x86_64::*;

/// Words per microkernel call.
const MR: usize = 8;
/// Query columns per panel: three 8-lane vectors.
const PANEL: usize = 24;
/// Vectors per panel.
const PANEL_VECTORS: usize = PANEL / 8;

/// Whether this CPU can run the kernel (checked once, then cached by std).
pub(crate) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// The query packed for the kernel: `panels` of `d x PANEL` values (column `c` of panel `p` is
/// query word `p * PANEL + c`, zero beyond `v_s`), 64-byte aligned so that a panel row is three
/// whole cache lines; the query's squared norms padded with zeros to whole panels; the query rows
/// themselves for the direct recomputation.
pub(crate) struct QueryPack<'a> {
    dim: usize,
    vs: usize,
    storage: Vec<f64>,
    offset: usize,
    norms: Vec<f64>,
    query: &'a [f64],
    cancellation_ratio: f64,
}

impl<'a> QueryPack<'a> {
    /// Packs the `vs x dim` row-major query vectors with their squared norms.
    pub(crate) fn new(
        query: &'a [f64],
        norms: &[f64],
        dim: usize,
        cancellation_ratio: f64,
    ) -> QueryPack<'a> {
        let vs = norms.len();
        let panels = vs.div_ceil(PANEL);
        // One extra cache line lets the panels start on a 64-byte boundary.
        let mut storage = vec![0.0; panels * dim * PANEL + 8];
        let offset = storage.as_ptr().align_offset(64).min(7);
        for s in 0..vs {
            let (p, c) = (s / PANEL, s % PANEL);
            for t in 0..dim {
                storage[offset + (p * dim + t) * PANEL + c] = query[s * dim + t];
            }
        }
        let mut padded_norms = vec![0.0; panels * PANEL];
        padded_norms[..vs].copy_from_slice(norms);
        QueryPack {
            dim,
            vs,
            storage,
            offset,
            norms: padded_norms,
            query,
            cancellation_ratio,
        }
    }

    fn panel(&self, p: usize) -> &[f64] {
        let start = self.offset + p * self.dim * PANEL;
        &self.storage[start..start + self.dim * PANEL]
    }
}

/// Distances of the words `words` (rows of the `V x dim` row-major `vecs`) to the query, written
/// to `out` (`words.len()` rows of `stride >= v_s` values; only the first `v_s` of each row are
/// written).
///
/// # Safety
/// The CPU must support AVX-512F ([`available`]).
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn distances(
    pack: &QueryPack,
    vecs: &[f64],
    words: &[u32],
    stride: usize,
    out: &mut [f64],
) {
    let d = pack.dim;
    assert!(stride >= pack.vs && out.len() >= words.len() * stride);
    assert!(words.iter().all(|&w| (w as usize + 1) * d <= vecs.len()));
    // A short block repeats its first word (a valid row); those results are not stored.
    let row_pointers = |block: &[u32]| -> [*const f64; MR] {
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
        let mut norms = [0.0; MR];
        for (n, &row) in norms.iter_mut().zip(&rows) {
            // SAFETY: `row` points at `d` values of `vecs` (above); the CPU has AVX-512F (this
            // function's contract), all `squared_norm` needs.
            *n = unsafe { squared_norm(std::slice::from_raw_parts(row, d)) };
        }
        let mut col = 0;
        for p in 0..pack.vs.div_ceil(PANEL) {
            let cols = (pack.vs - col).min(PANEL);
            // SAFETY: AVX-512F by this function's contract; as above for `rows`; the panel
            // holds `d x PANEL` values; `out` holds `block.len()` rows of `stride >= col + cols`
            // values.
            unsafe {
                match cols.div_ceil(8) {
                    1 => panel_block::<1>(
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
                    2 => panel_block::<2>(
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
                    _ => panel_block::<3>(
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

/// One panel of query columns `col .. col + cols` (`cols <= 8 NV`) for one block of rows.
///
/// # Safety
/// AVX-512F; every `rows[i]` points at `pack.dim` readable values; `out` holds `m` rows of
/// `stride >= col + cols` values.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn panel_block<const NV: usize>(
    pack: &QueryPack,
    p: usize,
    rows: &[*const f64; MR],
    next: &[*const f64; MR],
    norms: &[f64; MR],
    m: usize,
    col: usize,
    cols: usize,
    stride: usize,
    out: &mut [f64],
) {
    debug_assert!(NV <= PANEL_VECTORS && cols <= 8 * NV);
    let d = pack.dim;
    let panel = pack.panel(p).as_ptr();
    let mut acc = [[_mm512_setzero_pd(); NV]; MR];
    for t in 0..d {
        if t % 8 == 0 {
            for &row in next {
                // A prefetch never faults; `wrapping_add` keeps the address computation defined
                // even past the row (it stays inside it for `t < d`).
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(t) as *const i8);
            }
        }
        // SAFETY: `t < d` and `v < NV <= PANEL_VECTORS`, so `panel + t PANEL + 8 v + 8 <=
        // d PANEL`, inside the panel, and the panel rows are 64-byte aligned (`QueryPack`) as
        // the aligned load requires.
        let q: [__m512d; NV] =
            std::array::from_fn(|v| unsafe { _mm512_load_pd(panel.add(t * PANEL + 8 * v)) });
        for i in 0..MR {
            // SAFETY: `rows[i]` points at `d` readable values (caller's contract) and `t < d`.
            let a = _mm512_set1_pd(unsafe { *rows[i].add(t) });
            for v in 0..NV {
                acc[i][v] = _mm512_fmadd_pd(a, q[v], acc[i][v]);
            }
        }
    }
    let ratio = _mm512_set1_pd(pack.cancellation_ratio);
    let minus_two = _mm512_set1_pd(-2.0);
    for i in 0..m {
        let na = _mm512_set1_pd(norms[i]);
        // SAFETY: `i < m` and `col + cols <= stride`, so the offset is inside `out` (caller's
        // contract: `m` rows of `stride` values).
        let out_row = unsafe { out.as_mut_ptr().add(i * stride + col) };
        for (v, &dot) in acc[i].iter().enumerate() {
            let lanes = cols.saturating_sub(8 * v).min(8);
            let mask: __mmask8 = ((1u32 << lanes) - 1) as __mmask8;
            // SAFETY: the norms are padded to whole panels, so the 8 values at
            // `p PANEL + 8 v` (`v < NV <= PANEL_VECTORS`) exist.
            let nq = unsafe { _mm512_loadu_pd(pack.norms.as_ptr().add(p * PANEL + 8 * v)) };
            let scale = _mm512_add_pd(na, nq);
            // `-2 a.q` is exact, so this is `scale + (-2 a.q)` with one rounding, as in the
            // portable path.
            let d2 = _mm512_fmadd_pd(minus_two, dot, scale);
            let cancelled =
                _mm512_mask_cmp_pd_mask(mask, d2, _mm512_mul_pd(ratio, scale), _CMP_LE_OQ);
            // SAFETY: the mask keeps lanes `8 v + l < cols` of row `i`, inside `out` (caller's
            // contract); masked-off lanes are not accessed.
            unsafe { _mm512_mask_storeu_pd(out_row.add(8 * v), mask, _mm512_sqrt_pd(d2)) };
            if cancelled != 0 {
                for l in 0..8 {
                    if cancelled & (1 << l) != 0 {
                        let s = col + 8 * v + l;
                        // SAFETY: `rows[i]` points at `d` readable values (caller's contract),
                        // and lane `8 v + l < cols` (the mask) of row `i` is inside `out`.
                        unsafe {
                            let a = std::slice::from_raw_parts(rows[i], d);
                            let q = &pack.query[s * d..(s + 1) * d];
                            *out_row.add(8 * v + l) = crate::distance::direct_distance(a, q);
                        }
                    }
                }
            }
        }
    }
}

/// `|a|^2` with 8-lane partial sums.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn squared_norm(a: &[f64]) -> f64 {
    let mut acc = _mm512_setzero_pd();
    let mut chunks = a.chunks_exact(8);
    for c in &mut chunks {
        // SAFETY: `c` holds 8 values.
        let x = unsafe { _mm512_loadu_pd(c.as_ptr()) };
        acc = _mm512_fmadd_pd(x, x, acc);
    }
    let tail = chunks.remainder();
    let mask: __mmask8 = ((1u32 << tail.len()) - 1) as __mmask8;
    // SAFETY: the masked load reads only the `tail.len()` values of `tail`.
    let x = unsafe { _mm512_maskz_loadu_pd(mask, tail.as_ptr()) };
    acc = _mm512_fmadd_pd(x, x, acc);
    _mm512_reduce_add_pd(acc)
}
