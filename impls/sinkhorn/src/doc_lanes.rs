//! The loop of the document-major solve with one document per vector lane: with AVX-512F, 8
//! documents at once in f64 and 16 in f32 (one 64-byte vector of either, [`Zmm`]); with AVX2
//! and FMA, 4 and 8 ([`Ymm`]). Elsewhere (neither, or a query of more than 32 words) the row
//! kernels run it.
//!
//! **Why lanes.** One document at a time, each nonzero's step is a dot product over the query's
//! words, its horizontal reduction, a division and a broadcast before its axpy can start: a chain
//! of some 50 cycles a nonzero, which the core overlaps too little (a one-document
//! microbenchmark measured about 11 cycles a nonzero whatever the grouping of the dot products,
//! divisions or accumulators; `docs/results.md`). Across documents every step is vertical: lane
//! `l` of the vector for (nonzero slot `j`, query word `s`) holds document `l`'s value, so the dot
//! products of a block's documents are `v_s` vector FMAs, their quotients one vector division,
//! and the axpys `v_s` vector FMAs, with no reduction and no broadcast.
//!
//! **Layout.** A block's `K` values are copied once, transposed: `slots x VP` vectors, slot `j`
//! holding each document's `j`-th word, `VP` the query's `v_s` rounded up to 4 (zeros past
//! `v_s`): 44 KB for 8 documents of 35 words at `v_s = 19` in f64, so the iterations read them
//! from L1. The copy loads the block's rows of a slot a vector at a time and transposes them in
//! registers (value by value, the copy cost more than the lanes saved). Nothing is prefetched:
//! asking for the next block's thousand-odd lines at once, as this loop did, made it slower
//! (Intel Xeon, one thread: 13.2-13.4 ms against 11.3-12.0 without, five alternated rounds; the
//! AMD EPYC Zen 3 kind read level or faster without; `docs/results.md`, 2026-12-03, fourth
//! session). Without hardware counters the cause is not pinned down; the likely one is that a
//! burst of prefetches holds the line-fill buffers the copy's own loads then wait for. Each
//! iteration takes the quotients of every slot (the query's `u` in registers, as many as fit),
//! then the axpys (the sums in registers:
//! all of them with AVX-512's 32 registers, 12 at a time with AVX2's 16, a pass over the block's
//! slots each). They use `K` itself and multiply by `1 / r`
//! afterwards (`x_new = (sum_j q_j K_j) / r` is `sum_j q_j (K_j / r)`, rounded differently), as
//! the row kernels' `fused_doc` does, so `doc-major` never makes `(K / r)^T`. Documents with fewer words than the block's longest get empty slots
//! (weight 0 and `K` 1: they add exactly 0), and a thread takes its documents in order of length
//! so that blocks waste few slots.
//!
//! **Results.** Every lane computes from its own document's values only, so a distance does not
//! depend on which documents share its block, nor on the thread count, and sequential runs repeat
//! bit for bit. The sums run in another order than the row kernels', so the distances agree with
//! the other variants' to rounding, not bit for bit. Each document stops on its own tolerance as
//! in the other variants: its lane is then no longer updated.
//!
//! **Measured** (paper shape, one thread, against the row kernels in the same session,
//! interleaved): on an Intel Xeon (AVX-512) `doc-major`'s loop 13.5 ms against 18.8-19.5 and
//! `doc-major-f32`'s 9.7 against 15.3-16.0; on an AMD EPYC Zen 3 (AVX2) 16.3-26.8 ms against
//! 26.7-41.9 and 11.2-17.5 against 21.1-35.1 (a noisy host: each pair ran back to back). With
//! AVX-512's sums and block copy in registers (they had spilled to the stack), the Intel Xeon's
//! loops read 10.7-11.3 ms and 6.3-6.6 ms (`docs/results.md`, 2026-12-02).

use crate::buffer::ZeroedBuf;
use crate::doc_major::{PartStats, SolveDocs};
use crate::problem::WmdError;
use crate::real::Real;
use crate::simd::{has_avx2_fma, has_avx512f, Avx512Real, Vector, Ymm, Zmm};
use std::arch::x86_64::*;

/// Most lanes of any vector (f32 in 64 bytes).
const MAX_LANES: usize = 16;

/// The lanes loop for `task`'s documents, or `None` where it does not apply (neither AVX-512F
/// nor AVX2 with FMA, or a query of more than 32 words, whose sums would not fit in registers).
pub(crate) fn solve_docs<E: Real>(
    task: &mut SolveDocs<'_, E>,
) -> Option<Result<PartStats, WmdError>>
where
    Zmm<E>: LaneVec<E = E>,
    Ymm<E>: LaneVec<E = E>,
{
    let vp = task.kernels.vs.div_ceil(4) * 4;
    if vp == 0 || vp > 32 {
        return None;
    }
    if has_avx512f() && !narrow_only() {
        // SAFETY: the CPU has AVX-512F (checked), all `Zmm` needs.
        Some(unsafe { by_width::<Zmm<E>>(task, vp) })
    } else if has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (checked), all `Ymm` needs.
        Some(unsafe { by_width::<Ymm<E>>(task, vp) })
    } else {
        None
    }
}

/// Whether a test asked for the AVX2 loop on a CPU with AVX-512F (never outside tests).
fn narrow_only() -> bool {
    #[cfg(test)]
    return tests::NARROW_ONLY.with(std::cell::Cell::get);
    #[cfg(not(test))]
    false
}

/// [`LaneVec::run`] for the query's padded width `vp` (a multiple of 4 up to 32).
///
/// # Safety
/// The CPU has `L`'s instruction set.
unsafe fn by_width<L: LaneVec>(
    task: &mut SolveDocs<'_, L::E>,
    vp: usize,
) -> Result<PartStats, WmdError> {
    // SAFETY (every arm): the caller's contract.
    unsafe {
        match vp {
            4 => L::run::<4>(task),
            8 => L::run::<8>(task),
            12 => L::run::<12>(task),
            16 => L::run::<16>(task),
            20 => L::run::<20>(task),
            24 => L::run::<24>(task),
            28 => L::run::<28>(task),
            32 => L::run::<32>(task),
            _ => unreachable!("a query's width is a multiple of 4 up to 32 here"),
        }
    }
}

/// What the lanes loop needs of a vector beyond its arithmetic: the transposing copy, and the
/// loop itself compiled for the vector's instruction set.
pub(crate) trait LaneVec: Vector {
    /// For each group of `VL` of the first `VP` columns of the `VL` rows at `rows` (one per
    /// lane): the group's columns as vectors (lane `l` from row `l`), column `c` stored at
    /// `dst + c VL`.
    ///
    /// # Safety
    /// The type's instruction set; `rows` holds `VL` pointers, each to a row of at least `VP`
    /// values readable up to the next multiple of `E::LANES` (the padded kernel rows are);
    /// `VP VL` values writable at `dst`.
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const Self::E], dst: *mut Self::E);
    /// The lanes loop of `task`'s documents at a query width of `VP`, compiled for this
    /// instruction set.
    ///
    /// # Safety
    /// The type's instruction set.
    unsafe fn run<const VP: usize>(
        task: &mut SolveDocs<'_, Self::E>,
    ) -> Result<PartStats, WmdError>;
}

/// Sums of the axpys held in registers at once with AVX2 (16 registers): 12, leaving room for
/// the quotient and the loads, so a 20-word query's axpys take two passes over the block
/// instead of spilling every sum. AVX-512's 32 registers hold every word's sum (`VP` of them).
const YMM_SUMS: usize = 12;

/// [`run_lanes`] with AVX2's sums in registers: every word's where they fit, else passes of
/// [`YMM_SUMS`].
///
/// # Safety
/// `L`'s instruction set.
#[inline(always)]
unsafe fn run_lanes_ymm<L: LaneVec, const VP: usize>(
    task: &mut SolveDocs<'_, L::E>,
) -> Result<PartStats, WmdError> {
    // SAFETY: the caller's contract.
    unsafe {
        if VP <= YMM_SUMS {
            run_lanes::<L, VP, VP>(task)
        } else {
            run_lanes::<L, VP, YMM_SUMS>(task)
        }
    }
}

impl<E: ZmmTranspose> LaneVec for Zmm<E> {
    #[inline(always)]
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const E], dst: *mut E) {
        unsafe { E::transpose_rows::<VP>(rows, dst) }
    }
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn run<const VP: usize>(task: &mut SolveDocs<'_, E>) -> Result<PartStats, WmdError> {
        // SAFETY: AVX-512F (the caller's contract).
        unsafe { run_lanes::<Self, VP, VP>(task) }
    }
}

/// The in-register transposes of [`LaneVec::transpose_rows`] for AVX-512F (see there).
pub(crate) trait ZmmTranspose: Avx512Real {
    /// # Safety
    /// As for [`LaneVec::transpose_rows`], with AVX-512F.
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const Self], dst: *mut Self);
}

impl ZmmTranspose for f64 {
    /// 8 columns at a time: masked loads (rows hold `VP`, not always a multiple of 8), an 8x8
    /// transpose in three rounds of shuffles.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const f64], dst: *mut f64) {
        assert_eq!(rows.len(), 8);
        // SAFETY: each load reads the lanes of its mask, inside the first `VP` values of a row;
        // each store writes 8 values of the first `8 VP` at `dst` (the caller's contract).
        unsafe {
            let lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
            let hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
            let lo4 = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
            let hi4 = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
            for g in 0..VP.div_ceil(8) {
                let n = (VP - 8 * g).min(8);
                let mask = ((1u32 << n) - 1) as __mmask8;
                let mut v = [_mm512_setzero_pd(); 8];
                for (v, row) in v.iter_mut().zip(rows) {
                    *v = _mm512_maskz_loadu_pd(mask, row.add(8 * g));
                }
                let out = transpose8(v, lo, hi, lo4, hi4);
                for (s, o) in out.iter().enumerate().take(n) {
                    _mm512_storeu_pd(dst.add((8 * g + s) * 8), *o);
                }
            }
        }
    }
}

/// The index vectors of the 16x16 butterfly, for `permutex2var(row_i, idx, row_{i+b})`: per
/// round (`b` = 8, 4, 2, 1) the new row `i` then the new row `i + b`.
const BUTTERFLY: [[i32; 16]; 8] = butterfly_indices();

const fn butterfly_indices() -> [[i32; 16]; 8] {
    let mut idx = [[0i32; 16]; 8];
    let widths = [8usize, 4, 2, 1];
    let mut level = 0;
    while level < 4 {
        let b = widths[level];
        let mut c = 0;
        while c < 16 {
            let low = c & b == 0;
            idx[2 * level][c] = (if low { c } else { 16 + c - b }) as i32;
            idx[2 * level + 1][c] = (if low { c + b } else { 16 + c }) as i32;
            c += 1;
        }
        level += 1;
    }
    idx
}

impl ZmmTranspose for f32 {
    /// 16 columns at a time: masked loads, a 16x16 transpose in four butterfly rounds (rows
    /// `i` and `i + b` exchange their `b`-wide blocks, `b` = 8, 4, 2, 1).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const f32], dst: *mut f32) {
        assert_eq!(rows.len(), 16);
        // SAFETY: as for f64; the index rows hold 16 values.
        unsafe {
            let mut idx = [_mm512_setzero_si512(); 8];
            for (v, i) in idx.iter_mut().zip(&BUTTERFLY) {
                *v = _mm512_loadu_si512(i.as_ptr() as *const __m512i);
            }
            for g in 0..VP.div_ceil(16) {
                let n = (VP - 16 * g).min(16);
                let mask = ((1u32 << n) - 1) as __mmask16;
                let mut v = [_mm512_setzero_ps(); 16];
                for (v, row) in v.iter_mut().zip(rows) {
                    *v = _mm512_maskz_loadu_ps(mask, row.add(16 * g));
                }
                butterfly_round::<8>(&mut v, idx[0], idx[1]);
                butterfly_round::<4>(&mut v, idx[2], idx[3]);
                butterfly_round::<2>(&mut v, idx[4], idx[5]);
                butterfly_round::<1>(&mut v, idx[6], idx[7]);
                for (s, o) in v.iter().enumerate().take(n) {
                    _mm512_storeu_ps(dst.add((16 * g + s) * 16), *o);
                }
            }
        }
    }
}

/// One round of the 16x16 butterfly: rows `i` and `i + B` (`i & B == 0`) exchange their
/// `B`-wide blocks. A round of its own, with `B` a constant and a fixed count of pairs, is
/// unrolled with the rows in registers, where a loop over the rounds kept them on the stack (a
/// store and a load around every shuffle: the f32 block copy ran slower than AVX2's).
#[inline]
#[target_feature(enable = "avx512f")]
fn butterfly_round<const B: usize>(v: &mut [__m512; 16], lo: __m512i, hi: __m512i) {
    for k in 0..8 {
        let i = (k / B) * 2 * B + k % B;
        let (a, c) = (v[i], v[i + B]);
        v[i] = _mm512_permutex2var_ps(a, lo, c);
        v[i + B] = _mm512_permutex2var_ps(a, hi, c);
    }
}

/// The 8x8 transpose of `v` (rows to columns), in three rounds of shuffles.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose8(
    v: [__m512d; 8],
    lo: __m512i,
    hi: __m512i,
    lo4: __m512i,
    hi4: __m512i,
) -> [__m512d; 8] {
    let t: [__m512d; 8] = [
        _mm512_unpacklo_pd(v[0], v[1]),
        _mm512_unpackhi_pd(v[0], v[1]),
        _mm512_unpacklo_pd(v[2], v[3]),
        _mm512_unpackhi_pd(v[2], v[3]),
        _mm512_unpacklo_pd(v[4], v[5]),
        _mm512_unpackhi_pd(v[4], v[5]),
        _mm512_unpacklo_pd(v[6], v[7]),
        _mm512_unpackhi_pd(v[6], v[7]),
    ];
    let u0 = _mm512_permutex2var_pd(t[0], lo, t[2]);
    let u1 = _mm512_permutex2var_pd(t[0], hi, t[2]);
    let u2 = _mm512_permutex2var_pd(t[4], lo, t[6]);
    let u3 = _mm512_permutex2var_pd(t[4], hi, t[6]);
    let u4 = _mm512_permutex2var_pd(t[1], lo, t[3]);
    let u5 = _mm512_permutex2var_pd(t[1], hi, t[3]);
    let u6 = _mm512_permutex2var_pd(t[5], lo, t[7]);
    let u7 = _mm512_permutex2var_pd(t[5], hi, t[7]);
    [
        _mm512_permutex2var_pd(u0, lo4, u2),
        _mm512_permutex2var_pd(u4, lo4, u6),
        _mm512_permutex2var_pd(u1, lo4, u3),
        _mm512_permutex2var_pd(u5, lo4, u7),
        _mm512_permutex2var_pd(u0, hi4, u2),
        _mm512_permutex2var_pd(u4, hi4, u6),
        _mm512_permutex2var_pd(u1, hi4, u3),
        _mm512_permutex2var_pd(u5, hi4, u7),
    ]
}

impl LaneVec for Ymm<f64> {
    /// 4 columns at a time: a 4x4 transpose in two rounds (pairs, then 128-bit halves).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const f64], dst: *mut f64) {
        assert_eq!(rows.len(), 4);
        // SAFETY: each load reads 4 values of a row inside `VP` rounded up to 4 (readable, the
        // caller's contract); each store writes 4 values of the first `4 VP` at `dst`.
        unsafe {
            for g in 0..VP.div_ceil(4) {
                let r = |l: usize| rows[l].add(4 * g);
                let (r0, r1) = (_mm256_loadu_pd(r(0)), _mm256_loadu_pd(r(1)));
                let (r2, r3) = (_mm256_loadu_pd(r(2)), _mm256_loadu_pd(r(3)));
                let (t0, t1) = (_mm256_unpacklo_pd(r0, r1), _mm256_unpackhi_pd(r0, r1));
                let (t2, t3) = (_mm256_unpacklo_pd(r2, r3), _mm256_unpackhi_pd(r2, r3));
                let out = [
                    _mm256_permute2f128_pd::<0x20>(t0, t2),
                    _mm256_permute2f128_pd::<0x20>(t1, t3),
                    _mm256_permute2f128_pd::<0x31>(t0, t2),
                    _mm256_permute2f128_pd::<0x31>(t1, t3),
                ];
                for (s, o) in out.iter().enumerate().take((VP - 4 * g).min(4)) {
                    _mm256_storeu_pd(dst.add((4 * g + s) * 4), *o);
                }
            }
        }
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run<const VP: usize>(task: &mut SolveDocs<'_, f64>) -> Result<PartStats, WmdError> {
        // SAFETY: AVX2 and FMA (the caller's contract).
        unsafe { run_lanes_ymm::<Self, VP>(task) }
    }
}

impl LaneVec for Ymm<f32> {
    /// 8 columns at a time: an 8x8 transpose in three rounds (pairs, quadruples, then 128-bit
    /// halves).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transpose_rows<const VP: usize>(rows: &[*const f32], dst: *mut f32) {
        assert_eq!(rows.len(), 8);
        // SAFETY: each load reads 8 values of a row inside `VP` rounded up to 8 (readable, the
        // caller's contract); each store writes 8 values of the first `8 VP` at `dst`.
        unsafe {
            for g in 0..VP.div_ceil(8) {
                let mut r = [_mm256_setzero_ps(); 8];
                for (r, row) in r.iter_mut().zip(rows) {
                    *r = _mm256_loadu_ps(row.add(8 * g));
                }
                let mut t = [_mm256_setzero_ps(); 8];
                for i in 0..4 {
                    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                // Rows 0-3 then rows 4-7: columns (0, 4), (1, 5), (2, 6), (3, 7) in the halves.
                let mut u = [_mm256_setzero_ps(); 8];
                for h in 0..2 {
                    let (a, b, c, d) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
                    u[4 * h] = _mm256_shuffle_ps::<0x44>(a, c);
                    u[4 * h + 1] = _mm256_shuffle_ps::<0xEE>(a, c);
                    u[4 * h + 2] = _mm256_shuffle_ps::<0x44>(b, d);
                    u[4 * h + 3] = _mm256_shuffle_ps::<0xEE>(b, d);
                }
                let mut out = [_mm256_setzero_ps(); 8];
                for c in 0..4 {
                    out[c] = _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c]);
                    out[4 + c] = _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c]);
                }
                for (s, o) in out.iter().enumerate().take((VP - 8 * g).min(8)) {
                    _mm256_storeu_ps(dst.add((8 * g + s) * 8), *o);
                }
            }
        }
    }
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run<const VP: usize>(task: &mut SolveDocs<'_, f32>) -> Result<PartStats, WmdError> {
        // SAFETY: AVX2 and FMA (the caller's contract).
        unsafe { run_lanes_ymm::<Self, VP>(task) }
    }
}

/// One block's documents in lanes (buffers sized for a thread's longest document).
struct Block<E: Real> {
    /// `K`: slot `j`, word `s`, lane `l` at `(j VP + s) VL + l`.
    k: ZeroedBuf<E>,
    /// `K .* M`, the same way (read by the final step only).
    km: ZeroedBuf<E>,
    /// Weights: slot `j`, lane `l` at `j VL + l` (0 for an empty slot).
    c: ZeroedBuf<E>,
    /// Each slot's quotients, the same way.
    q: ZeroedBuf<E>,
    slots: usize,
}

impl<E: Real> Block<E> {
    fn with_room(slots: usize, vp: usize, vl: usize) -> Block<E> {
        Block {
            k: ZeroedBuf::for_overwrite(slots * vp * vl),
            km: ZeroedBuf::for_overwrite(slots * vp * vl),
            c: ZeroedBuf::for_overwrite(slots * vl),
            q: ZeroedBuf::for_overwrite(slots * vl),
            slots: 0,
        }
    }

    /// The block of `docs` (at most `VL` of them; missing lanes are empty documents): each
    /// slot's rows loaded a vector at a time and transposed in registers (value by value, the
    /// copy cost more than the lanes saved).
    ///
    /// # Safety
    /// `L`'s instruction set.
    #[inline(always)]
    unsafe fn gather<L: LaneVec<E = E>, const VP: usize>(
        &mut self,
        task: &SolveDocs<'_, E>,
        docs: &[usize],
    ) {
        let vl = L::VL;
        let lanes = LaneRows::new(task, docs);
        let slots = docs
            .iter()
            .map(|&d| task.by_doc.row(d).0.len())
            .max()
            .unwrap_or(0);
        self.slots = slots;
        assert!(docs.len() <= vl && vl <= MAX_LANES && VP <= 32);
        assert!(self.k.len() >= slots * VP * vl && self.km.len() >= slots * VP * vl);
        // The transposes read up to `VP` rounded up to `E::LANES` values of each row.
        assert!(task.kernels.stride >= VP.next_multiple_of(E::LANES) && E::LANES <= 32);
        for j in 0..slots {
            let (kt_rows, km_rows) = lanes.slot(task, j, vl);
            // SAFETY: `L`'s instruction set (the caller's contract); the rows are kernel rows
            // of `stride` values or the 32-value rows of `lanes`, readable as far as asserted;
            // slot `j`'s `VP VL` values are inside `k` and `km` (asserted).
            unsafe {
                L::transpose_rows::<VP>(&kt_rows[..vl], self.k.as_mut_ptr().add(j * VP * vl));
                L::transpose_rows::<VP>(&km_rows[..vl], self.km.as_mut_ptr().add(j * VP * vl));
            }
        }
        self.c[..slots * vl].fill(E::ZERO);
        for (l, &d) in docs.iter().enumerate() {
            for (j, &c) in task.by_doc.row(d).1.iter().enumerate() {
                self.c[j * vl + l] = E::from_f64(c);
            }
        }
    }
}

/// The documents of one block of lanes, and the rows an empty slot reads instead of a word's:
/// ones for `K^T` and zeros for `K .* M` (with weight 0 the slot then adds exactly 0).
struct LaneRows<'a, E> {
    words: Vec<&'a [u32]>,
    ones: [E; 32],
    zeros: [E; 32],
}

impl<'a, E: Real> LaneRows<'a, E> {
    fn new(task: &SolveDocs<'a, E>, docs: &[usize]) -> Self {
        let mut ones = [E::ZERO; 32];
        ones[..task.kernels.vs].fill(E::ONE);
        LaneRows {
            words: docs.iter().map(|&d| task.by_doc.row(d).0).collect(),
            ones,
            zeros: [E::ZERO; 32],
        }
    }

    /// The `K^T` and `(K .* M)^T` rows of slot `j` in each of the first `vl` lanes (lanes past
    /// the last document read the empty rows too).
    #[inline(always)]
    fn slot(
        &self,
        task: &SolveDocs<'_, E>,
        j: usize,
        vl: usize,
    ) -> ([*const E; MAX_LANES], [*const E; MAX_LANES]) {
        let mut kt_rows = [self.ones.as_ptr(); MAX_LANES];
        let mut km_rows = [self.zeros.as_ptr(); MAX_LANES];
        for (l, words) in self.words.iter().enumerate().take(vl) {
            if let Some(&w) = words.get(j) {
                let row = task.position[w as usize] as usize;
                kt_rows[l] = task.kernels.kt_row(row).as_ptr();
                km_rows[l] = task.kernels.km_row(row).as_ptr();
            }
        }
        (kt_rows, km_rows)
    }
}

/// The lanes loop of `task`'s documents, `SUMS` sums of the axpys in registers at once.
///
/// # Safety
/// `L`'s instruction set.
#[inline(always)]
unsafe fn run_lanes<L: LaneVec, const VP: usize, const SUMS: usize>(
    task: &mut SolveDocs<'_, L::E>,
) -> Result<PartStats, WmdError> {
    let (vs, vl) = (task.kernels.vs, L::VL);
    let params = task.params;
    let mut stats = PartStats::default();
    let len = |d: usize| task.by_doc.row(d).0.len();
    // Shortest documents first, so that a block's documents have about as many words.
    let mut order: Vec<usize> = task.docs.clone().collect();
    order.sort_by_key(|&d| len(d));
    let longest = order.last().map_or(0, |&d| len(d));
    let mut block = Block::<L::E>::with_room(longest, VP, vl);
    // The kernel arrays' rows (and `inv_r`) are `VP` rounded up to the element's lanes.
    let mut inv_r = [L::E::ZERO; VP];
    inv_r.copy_from_slice(&task.kernels.inv_r[..VP]);
    let start = L::E::from_f64(1.0 / vs as f64);
    let mut x = ZeroedBuf::<L::E>::zeroed(VP * vl);
    let mut u = ZeroedBuf::<L::E>::zeroed(VP * vl);
    let mut x_new = ZeroedBuf::<L::E>::zeroed(VP * vl);
    for docs in order.chunks(vl) {
        // SAFETY: `L`'s instruction set (this function's contract).
        unsafe { block.gather::<L, VP>(task, docs) };
        // Words past `v_s` stay 0 in `x` and `u`.
        x[..vs * vl].fill(start);
        u[..vs * vl].fill(L::E::ONE / start);
        let mut active = [false; MAX_LANES];
        active[..docs.len()].fill(true);
        for iteration_index in 0..params.max_iter {
            if !active.contains(&true) {
                break;
            }
            // SAFETY: `L`'s instruction set; the buffers hold `slots` slots of `VP` words and
            // `VP` words of `VL` lanes.
            unsafe { iteration::<L, VP, SUMS>(&mut block, &u, &inv_r, &mut x_new) };
            let mask = active_mask(&active[..vl]);
            let (mut diff, mut scale) = ([L::E::ZERO; MAX_LANES], [L::E::ZERO; MAX_LANES]);
            // SAFETY: as for `iteration`.
            let valid =
                unsafe { update::<L>(vs, mask, &mut x, &mut u, &x_new, &mut diff, &mut scale) };
            if valid != mask {
                return Err(WmdError::Underflow {
                    lambda: params.lambda,
                });
            }
            for (l, &d) in docs.iter().enumerate() {
                if !active[l] {
                    continue;
                }
                let change = (diff[l] / scale[l]).to_f64();
                stats.loop_nnz += len(d);
                let converged = params.tol.is_some_and(|t| change <= t);
                stats.record(iteration_index, change, !converged);
                active[l] = !converged;
            }
        }
        let mut wmd = [0.0f64; MAX_LANES];
        // SAFETY: as for `iteration`.
        unsafe { final_step::<L, VP>(&block, &u, &mut wmd) };
        for (&d, &wmd) in docs.iter().zip(&wmd) {
            if !wmd.is_finite() {
                return Err(WmdError::Underflow {
                    lambda: params.lambda,
                });
            }
            task.out[d - task.docs.start] = wmd;
        }
    }
    Ok(stats)
}

/// The lanes where `active` is true, as a mask.
fn active_mask(active: &[bool]) -> u32 {
    active
        .iter()
        .enumerate()
        .fold(0, |m, (l, &a)| m | (u32::from(a) << l))
}

/// For the lanes of `mask`: `max_s |x_new - x|` into `diff` and `max_s x_new` into `scale`,
/// then `x = x_new` and `u = 1 / x_new`; returns the lanes of `mask` where every `x_new` is
/// finite and positive (where not, `exp(-lambda M)` underflowed upstream). The other lanes are
/// left as they were.
///
/// # Safety
/// `L`'s instruction set; `x`, `u` and `x_new` hold `vs` aligned vectors.
#[inline(always)]
unsafe fn update<L: LaneVec>(
    vs: usize,
    mask: u32,
    x: &mut [L::E],
    u: &mut [L::E],
    x_new: &[L::E],
    diff: &mut [L::E; MAX_LANES],
    scale: &mut [L::E; MAX_LANES],
) -> u32 {
    let vl = L::VL;
    assert!(x.len() >= vs * vl && u.len() >= vs * vl && x_new.len() >= vs * vl && vl <= MAX_LANES);
    // SAFETY: every load and store is one aligned vector inside the asserted lengths; `diff`
    // and `scale` hold `VL` values.
    unsafe {
        let (zero, inf, one) = (L::zero(), L::splat(L::E::INFINITY), L::splat(L::E::ONE));
        let (mut d, mut m, mut valid) = (zero, zero, mask);
        // A blend stored back where it was loaded becomes a masked store (LLVM folds the two),
        // which Zen 3 runs in microcode and which the next iteration's loads of `x` and `u`
        // cannot take from the store buffer: with every lane active, as in all but the last
        // iterations of most blocks, plain stores. The loop is unswitched on it.
        let every_lane = mask == (1u32 << vl) - 1;
        for s in 0..vs {
            let (px, pu) = (x.as_mut_ptr().add(s * vl), u.as_mut_ptr().add(s * vl));
            let xn = L::load(x_new.as_ptr().add(s * vl));
            let xo = L::load(px);
            valid &= L::mask_lt(mask, zero, xn) & L::mask_lt(mask, xn, inf);
            d = L::vmax(d, L::vabs(L::vsub(xn, xo)));
            m = L::vmax(m, xn);
            let un = L::vdiv(one, xn);
            if every_lane {
                L::store(px, xn);
                L::store(pu, un);
            } else {
                L::store(px, L::blend(mask, xo, xn));
                L::store(pu, L::blend(mask, L::load(pu), un));
            }
        }
        L::storeu(diff.as_mut_ptr(), d);
        L::storeu(scale.as_mut_ptr(), m);
        valid
    }
}

/// `u`'s `VP` vectors, in registers (as many as fit).
///
/// # Safety
/// `L`'s instruction set; `u` holds `VP` aligned vectors.
#[inline(always)]
unsafe fn load_u<L: LaneVec, const VP: usize>(u: &[L::E]) -> [L::V; VP] {
    assert!(u.len() >= VP * L::VL);
    // SAFETY: `L`'s instruction set (the caller's contract); the loads are inside `u`
    // (asserted) and aligned (the caller's contract).
    unsafe {
        let mut uv = [L::zero(); VP];
        for (s, v) in uv.iter_mut().enumerate() {
            *v = L::load(u.as_ptr().add(s * L::VL));
        }
        uv
    }
}

/// `sum_s k_s u_s` per lane over the `VP` vectors at `k`, in four interleaved sums (word `s`
/// into sum `s mod 4`, so that four FMA chains run at once) added as `(p0 + p1) + (p2 + p3)`.
///
/// # Safety
/// `L`'s instruction set; `VP` aligned vectors readable at `k`.
#[inline(always)]
unsafe fn dot<L: LaneVec, const VP: usize>(k: *const L::E, uv: &[L::V; VP]) -> L::V {
    // SAFETY: the caller's contract.
    unsafe {
        let mut p = [L::zero(); 4];
        for (s, u) in uv.iter().enumerate() {
            p[s % 4] = L::fmadd(L::load(k.add(s * L::VL)), *u, p[s % 4]);
        }
        L::vadd(L::vadd(p[0], p[1]), L::vadd(p[2], p[3]))
    }
}

/// One iteration of every lane: `q_j = c_j / (K_j . u)` for each slot, then
/// `x_new_s = (sum_j q_j K_js) / r_s`, the sums `SUMS` words at a time (one pass over the
/// block's slots each).
///
/// # Safety
/// `L`'s instruction set; `block` holds `block.slots` slots; `u` and `x_new` hold `VP` aligned
/// vectors.
#[inline(always)]
unsafe fn iteration<L: LaneVec, const VP: usize, const SUMS: usize>(
    block: &mut Block<L::E>,
    u: &[L::E],
    inv_r: &[L::E; VP],
    x_new: &mut [L::E],
) {
    let vl = L::VL;
    let slots = block.slots;
    assert!(block.k.len() >= slots * VP * vl && block.c.len() >= slots * vl);
    assert!(block.q.len() >= slots * vl && x_new.len() >= VP * vl);
    assert!(0 < SUMS && SUMS <= VP);
    // SAFETY (all loads and stores below): inside the buffers (asserted above; `load_u`
    // asserts its own), every offset a multiple of `VL` values from a 64-byte aligned start.
    unsafe {
        let uv = load_u::<L, VP>(u);
        let (k, c, q) = (block.k.as_ptr(), block.c.as_ptr(), block.q.as_mut_ptr());
        for j in 0..slots {
            let d = dot::<L, VP>(k.add(j * VP * vl), &uv);
            L::store(q.add(j * vl), L::vdiv(L::load(c.add(j * vl)), d));
        }
        // Passes of exactly `SUMS` words, the last one moved back to end at `VP` (it then
        // recomputes some of the previous pass's sums, the same values in the same order): a
        // pass of fixed width is unrolled with its sums in registers, where one cut short at
        // `VP` kept them on the stack (an FMA, a load and a store per slot and word).
        for first in (0..VP).step_by(SUMS) {
            let first = first.min(VP - SUMS);
            let mut acc = [L::zero(); SUMS];
            for j in 0..slots {
                let qj = L::load(q.add(j * vl));
                let kj = k.add((j * VP + first) * vl);
                for (i, acc) in acc.iter_mut().enumerate() {
                    *acc = L::fmadd(qj, L::load(kj.add(i * vl)), *acc);
                }
            }
            for (i, acc) in acc.iter().enumerate() {
                let s = first + i;
                L::store(
                    x_new.as_mut_ptr().add(s * vl),
                    L::vmul(*acc, L::splat(inv_r[s])),
                );
            }
        }
    }
}

/// Each lane's distance `sum_j (c_j / (K_j . u)) ((K .* M)_j . u)`, accumulated in f64 into
/// `wmd`.
///
/// # Safety
/// As for [`iteration`].
#[inline(always)]
unsafe fn final_step<L: LaneVec, const VP: usize>(
    block: &Block<L::E>,
    u: &[L::E],
    wmd: &mut [f64; MAX_LANES],
) {
    let vl = L::VL;
    let slots = block.slots;
    assert!(block.k.len() >= slots * VP * vl && block.km.len() >= slots * VP * vl);
    assert!(block.c.len() >= slots * vl && vl <= MAX_LANES);
    let mut terms = [L::E::ZERO; MAX_LANES];
    // SAFETY: as in `iteration`; `terms` holds `VL` values.
    unsafe {
        let uv = load_u::<L, VP>(u);
        for j in 0..slots {
            let dot_k = dot::<L, VP>(block.k.as_ptr().add(j * VP * vl), &uv);
            let dot_km = dot::<L, VP>(block.km.as_ptr().add(j * VP * vl), &uv);
            let w = L::vdiv(L::load(block.c.as_ptr().add(j * vl)), dot_k);
            L::storeu(terms.as_mut_ptr(), L::vmul(w, dot_km));
            for (wmd, t) in wmd.iter_mut().zip(&terms[..vl]) {
                *wmd += t.to_f64();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::has_avx2_fma;
    use crate::generate::{generate, SyntheticSpec};
    use crate::reference::reference_wmd;
    use crate::{variant, Control, Par, SinkhornParams};
    use std::cell::Cell;

    thread_local! {
        /// Set by a test to run the AVX2 loop on a CPU that has AVX-512F too, so that both
        /// widths are checked on every machine with AVX-512 (one solve thread runs inline).
        pub(super) static NARROW_ONLY: Cell<bool> = const { Cell::new(false) };
    }

    /// Every padded query width (4 to 32 words: one pass of sums or several, the last moved back
    /// over the one before), both vector widths, both precisions, against the reference.
    #[test]
    fn both_vector_widths_agree_with_the_reference_at_every_query_width() {
        if !has_avx2_fma() {
            return;
        }
        let params = SinkhornParams {
            lambda: 2.0,
            max_iter: 12,
            tol: None,
        };
        for query_words in [1, 4, 5, 8, 12, 13, 17, 19, 24, 25, 29, 32] {
            let problem = generate(&SyntheticSpec {
                vocab: 300,
                dim: 12,
                docs: 41,
                words_per_doc: 11,
                query_words,
                zipf_exponent: 1.0,
                seed: 17 + query_words as u64,
            })
            .unwrap();
            let expected = reference_wmd(&problem, &params).unwrap();
            let largest = expected.iter().fold(0.0f64, |m, &d| m.max(d.abs()));
            for (name, tol) in [("doc-major", 1e-12), ("doc-major-f32", 1e-5)] {
                let solver = variant(name).unwrap();
                for narrow in [false, true] {
                    NARROW_ONLY.with(|n| n.set(narrow));
                    let out = solver
                        .solve(&problem, &params, Par::threads(1), &mut |_| {
                            Control::Continue
                        })
                        .unwrap();
                    NARROW_ONLY.with(|n| n.set(false));
                    for (d, (got, want)) in out.distances.iter().zip(&expected).enumerate() {
                        assert!(
                            (got - want).abs() <= tol * largest,
                            "{name}, {query_words} query words, AVX2 only {narrow}, document \
                             {d}: {got} against {want}"
                        );
                    }
                }
            }
        }
    }
}
