//! The loop of the document-major solve with one document per vector lane, where the CPU has
//! AVX-512F: 8 documents at once in f64, 16 in f32 (one 64-byte vector of either). Elsewhere
//! (AVX2, or a query of more than 32 words) the row kernels run it.
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
//! registers (value by value, the copy cost more than the lanes saved), with the next block's
//! rows prefetched into L2 while this one iterates. Each iteration takes the quotients of every slot (the query's `u` held in registers),
//! then the axpys (the sums held in registers). They use `K` itself and multiply by `1 / r`
//! afterwards (`x_new = (sum_j q_j K_j) / r` is `sum_j q_j (K_j / r)`, rounded differently), so
//! `(K / r)^T` is not read. Documents with fewer words than the block's longest get empty slots
//! (weight 0 and `K` 1: they add exactly 0), and a thread takes its documents in order of length
//! so that blocks waste few slots.
//!
//! **Results.** Every lane computes from its own document's values only, so a distance does not
//! depend on which documents share its block, nor on the thread count, and sequential runs repeat
//! bit for bit. The sums run in another order than the row kernels', so the distances agree with
//! the other variants' to rounding, not bit for bit. Each document stops on its own tolerance as
//! in the other variants: its lane is then no longer updated.

use crate::buffer::ZeroedBuf;
use crate::distance_avx512::{available, Avx512Real};
use crate::doc_major::{PartStats, SolveDocs};
use crate::problem::WmdError;
use crate::real::Real;

/// Most lanes of any element type (f32 in 64 bytes).
const MAX_LANES: usize = 16;

/// The lanes loop for `task`'s documents, or `None` where it does not apply (no AVX-512F, or a
/// query of more than 32 words, whose sums would not fit in the registers).
pub(crate) fn solve_docs<E: Avx512Real>(
    task: &mut SolveDocs<'_, E>,
) -> Option<Result<PartStats, WmdError>> {
    if !available() {
        return None;
    }
    // SAFETY (every arm): the CPU has AVX-512F (checked above), all `run` needs.
    let done = unsafe {
        match task.kernels.vs.div_ceil(4) * 4 {
            4 => run::<E, 4>(task),
            8 => run::<E, 8>(task),
            12 => run::<E, 12>(task),
            16 => run::<E, 16>(task),
            20 => run::<E, 20>(task),
            24 => run::<E, 24>(task),
            28 => run::<E, 28>(task),
            32 => run::<E, 32>(task),
            _ => return None,
        }
    };
    Some(done)
}

/// One block's documents in lanes (buffers sized for a thread's longest document).
struct Block<E: Avx512Real> {
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

impl<E: Avx512Real> Block<E> {
    fn with_room(slots: usize, vp: usize) -> Block<E> {
        Block {
            k: ZeroedBuf::for_overwrite(slots * vp * E::VL),
            km: ZeroedBuf::for_overwrite(slots * vp * E::VL),
            c: ZeroedBuf::for_overwrite(slots * E::VL),
            q: ZeroedBuf::for_overwrite(slots * E::VL),
            slots: 0,
        }
    }

    /// The block of `docs` (at most `VL` of them; missing lanes are empty documents).
    fn gather<const VP: usize>(&mut self, task: &SolveDocs<'_, E>, docs: &[usize]) {
        let vl = E::VL;
        let slots = docs
            .iter()
            .map(|&d| task.by_doc.row(d).0.len())
            .max()
            .unwrap_or(0);
        self.slots = slots;
        let k = &mut self.k[..slots * VP * vl];
        let km = &mut self.km[..slots * VP * vl];
        self.c[..slots * vl].fill(E::ZERO);
        match (vl, std::mem::size_of::<E>()) {
            // SAFETY: E is f64 (8 lanes of 8 bytes); the CPU has AVX-512F (the lanes loop runs
            // only there).
            (8, 8) => unsafe { gather_f64::<E, VP>(task, docs, k, km, slots) },
            // SAFETY: E is f32 (16 lanes of 4 bytes); AVX-512F as above.
            (16, 4) => unsafe { gather_f32::<E, VP>(task, docs, k, km, slots) },
            _ => unreachable!("the lanes loop runs in f64 or f32"),
        }
        for (l, &d) in docs.iter().enumerate() {
            for (j, &c) in task.by_doc.row(d).1.iter().enumerate() {
                self.c[j * vl + l] = E::from_f64(c);
            }
        }
    }
}

/// The 8x8 transpose of `v` (rows to columns), in three rounds of shuffles.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose8(
    v: [std::arch::x86_64::__m512d; 8],
    lo: std::arch::x86_64::__m512i,
    hi: std::arch::x86_64::__m512i,
    lo4: std::arch::x86_64::__m512i,
    hi4: std::arch::x86_64::__m512i,
) -> [std::arch::x86_64::__m512d; 8] {
    use std::arch::x86_64::*;
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

/// The f32 gather: for each slot, the 16 documents' rows (or a row of ones / zeros for an empty
/// slot) loaded 16 words at a time and transposed in registers, in four butterfly rounds (rows
/// `i` and `i + b` exchange their `b`-wide blocks, `b` = 8, 4, 2, 1).
///
/// # Safety
/// `E` is f32; AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn gather_f32<E: Real, const VP: usize>(
    task: &SolveDocs<'_, E>,
    docs: &[usize],
    k: &mut [E],
    km: &mut [E],
    slots: usize,
) {
    use std::arch::x86_64::*;
    let vs = task.kernels.vs;
    let mut ones = [0.0f32; 32];
    ones[..vs].fill(1.0);
    let zeros = [0.0f32; 32];
    assert!(k.len() >= slots * VP * 16 && km.len() >= slots * VP * 16 && VP <= 32);
    let rows: Vec<&[u32]> = docs.iter().map(|&d| task.by_doc.row(d).0).collect();
    // The butterfly's index vectors, for `permutex2var(row_i, idx, row_{i+b})`.
    let mut idx = [[0i32; 16]; 8];
    for (level, b) in [8usize, 4, 2, 1].into_iter().enumerate() {
        let (first, second) = idx.split_at_mut(2 * level + 1);
        let (lo, hi) = (&mut first[2 * level], &mut second[0]);
        for (c, (lo, hi)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
            let low = c & b == 0;
            *lo = if low { c } else { 16 + c - b } as i32;
            *hi = if low { c + b } else { 16 + c } as i32;
        }
    }
    // SAFETY: E is f32 (the caller's contract), so the casts keep the layout; every load reads
    // the lanes of its mask inside a row of at least VP values (kernel rows hold `stride >= VP`
    // values; `ones` and `zeros` 32), and every store writes 16 values inside `k` or `km`
    // (asserted above); `idx` rows hold 16 values.
    unsafe {
        let idx: Vec<__m512i> = idx
            .iter()
            .map(|i| _mm512_loadu_si512(i.as_ptr() as *const __m512i))
            .collect();
        for j in 0..slots {
            let mut kt_rows = [ones.as_ptr(); 16];
            let mut km_rows = [zeros.as_ptr(); 16];
            for (l, words) in rows.iter().enumerate() {
                if let Some(&w) = words.get(j) {
                    let row = task.position[w as usize] as usize;
                    kt_rows[l] = task.kernels.kt_row(row).as_ptr() as *const f32;
                    km_rows[l] = task.kernels.km_row(row).as_ptr() as *const f32;
                }
            }
            for g in 0..VP.div_ceil(16) {
                let n = (VP - 16 * g).min(16);
                let mask = ((1u32 << n) - 1) as __mmask16;
                for (src, dst) in [(&kt_rows, &mut *k), (&km_rows, &mut *km)] {
                    let mut v = [_mm512_setzero_ps(); 16];
                    for l in 0..16 {
                        v[l] = _mm512_maskz_loadu_ps(mask, src[l].add(16 * g));
                    }
                    for (level, b) in [8usize, 4, 2, 1].into_iter().enumerate() {
                        for i in (0..16).filter(|i| i & b == 0) {
                            let (a, c) = (v[i], v[i + b]);
                            v[i] = _mm512_permutex2var_ps(a, idx[2 * level], c);
                            v[i + b] = _mm512_permutex2var_ps(a, idx[2 * level + 1], c);
                        }
                    }
                    let base = dst.as_mut_ptr() as *mut f32;
                    for (s, o) in v.iter().enumerate().take(n) {
                        _mm512_storeu_ps(base.add((j * VP + 16 * g + s) * 16), *o);
                    }
                }
            }
        }
    }
}

/// The f64 gather by in-register 8x8 transposes: for each slot, the 8 documents' rows (or a
/// row of ones / zeros for an empty slot) loaded 8 words at a time and transposed.
///
/// # Safety
/// `E` is f64; AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn gather_f64<E: Real, const VP: usize>(
    task: &SolveDocs<'_, E>,
    docs: &[usize],
    k: &mut [E],
    km: &mut [E],
    slots: usize,
) {
    use std::arch::x86_64::*;
    let vs = task.kernels.vs;
    let mut ones = [0.0f64; 32];
    ones[..vs].fill(1.0);
    let zeros = [0.0f64; 32];
    assert!(k.len() >= slots * VP * 8 && km.len() >= slots * VP * 8 && VP <= 32);
    let rows: Vec<(&[u32], usize)> = docs.iter().map(|&d| (task.by_doc.row(d).0, d)).collect();
    // SAFETY: E is f64 (the caller's contract), so the casts keep the layout; every load reads
    // the lanes of its mask inside a row of at least VP values (kernel rows hold `stride >= VP`
    // values; `ones` and `zeros` 32), and every store writes 8 values inside `k` or `km`
    // (asserted above).
    unsafe {
        let lo: __m512i = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
        let hi: __m512i = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
        let lo4: __m512i = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
        let hi4: __m512i = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
        for j in 0..slots {
            let mut kt_rows = [ones.as_ptr(); 8];
            let mut km_rows = [zeros.as_ptr(); 8];
            for (l, (words, _)) in rows.iter().enumerate() {
                if let Some(&w) = words.get(j) {
                    let row = task.position[w as usize] as usize;
                    kt_rows[l] = task.kernels.kt_row(row).as_ptr() as *const f64;
                    km_rows[l] = task.kernels.km_row(row).as_ptr() as *const f64;
                }
            }
            for g in 0..VP.div_ceil(8) {
                let n = (VP - 8 * g).min(8);
                let mask = ((1u32 << n) - 1) as __mmask8;
                for (src, dst) in [(&kt_rows, &mut *k), (&km_rows, &mut *km)] {
                    let mut v = [_mm512_setzero_pd(); 8];
                    for l in 0..8 {
                        v[l] = _mm512_maskz_loadu_pd(mask, src[l].add(8 * g));
                    }
                    let out = transpose8(v, lo, hi, lo4, hi4);
                    let base = dst.as_mut_ptr() as *mut f64;
                    for (s, o) in out.iter().enumerate().take(n) {
                        _mm512_storeu_pd(base.add((j * VP + 8 * g + s) * 8), *o);
                    }
                }
            }
        }
    }
}

/// # Safety
/// The CPU must support AVX-512F (which has FMA).
#[target_feature(enable = "avx512f,fma")]
unsafe fn run<E: Avx512Real, const VP: usize>(
    task: &mut SolveDocs<'_, E>,
) -> Result<PartStats, WmdError> {
    let (vs, vl) = (task.kernels.vs, E::VL);
    let params = task.params;
    let mut stats = PartStats::default();
    let len = |d: usize| task.by_doc.row(d).0.len();
    // Shortest documents first, so that a block's documents have about as many words.
    let mut order: Vec<usize> = task.docs.clone().collect();
    order.sort_by_key(|&d| len(d));
    let longest = order.last().map_or(0, |&d| len(d));
    let mut block = Block::<E>::with_room(longest, VP);
    let mut inv_r = [E::ZERO; VP];
    inv_r[..vs].copy_from_slice(task.inv_r);
    let start = E::from_f64(1.0 / vs as f64);
    let mut x = ZeroedBuf::<E>::zeroed(VP * vl);
    let mut u = ZeroedBuf::<E>::zeroed(VP * vl);
    let mut x_new = ZeroedBuf::<E>::zeroed(VP * vl);
    let blocks: Vec<&[usize]> = order.chunks(vl).collect();
    for (b, &docs) in blocks.iter().enumerate() {
        block.gather::<VP>(task, docs);
        // The next block's rows are random lines of the kernel arrays: asked for now, they
        // arrive in L2 while this block iterates.
        if let Some(next) = blocks.get(b + 1) {
            prefetch_rows(task, next);
        }
        // Words past `v_s` stay 0 in `x` and `u`.
        x[..vs * vl].fill(start);
        u[..vs * vl].fill(E::ONE / start);
        let mut active = [false; MAX_LANES];
        active[..docs.len()].fill(true);
        for iteration_index in 0..params.max_iter {
            if !active.contains(&true) {
                break;
            }
            // SAFETY: AVX-512F (this function's contract); the buffers hold `slots` slots of
            // `VP` words and `VP` words of `VL` lanes.
            unsafe { iteration::<E, VP>(&mut block, &u, &inv_r, &mut x_new) };
            let mask = active_mask(&active[..vl]);
            let (mut diff, mut scale) = ([E::ZERO; MAX_LANES], [E::ZERO; MAX_LANES]);
            // SAFETY: as for `iteration`.
            let valid =
                unsafe { update::<E>(vs, mask, &mut x, &mut u, &x_new, &mut diff, &mut scale) };
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
        unsafe { final_step::<E, VP>(&block, &u, &mut wmd) };
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

/// Asks for the rows of `K` and `K .* M` that `docs`' words will read, into L2.
fn prefetch_rows<E: Real>(task: &SolveDocs<'_, E>, docs: &[usize]) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
    let bytes = task.kernels.vs * std::mem::size_of::<E>();
    for &d in docs {
        for &w in task.by_doc.row(d).0 {
            let row = task.position[w as usize] as usize;
            for r in [task.kernels.kt_row(row), task.kernels.km_row(row)] {
                let p = r.as_ptr() as *const i8;
                for offset in (0..bytes).step_by(64).chain([bytes - 1]) {
                    // SAFETY: a prefetch reads nothing and faults on no address; the address
                    // is inside the row anyway (`offset < bytes`).
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(offset)) };
                }
            }
        }
    }
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
/// AVX-512F; `x`, `u` and `x_new` hold `vs` aligned vectors.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn update<E: Avx512Real>(
    vs: usize,
    mask: u32,
    x: &mut [E],
    u: &mut [E],
    x_new: &[E],
    diff: &mut [E; MAX_LANES],
    scale: &mut [E; MAX_LANES],
) -> u32 {
    let vl = E::VL;
    assert!(x.len() >= vs * vl && u.len() >= vs * vl && x_new.len() >= vs * vl && vl <= MAX_LANES);
    // SAFETY: every load and store is one aligned vector inside the asserted lengths; `diff`
    // and `scale` hold `VL` values.
    unsafe {
        let (zero, inf, one) = (E::zero(), E::splat(E::INFINITY), E::splat(E::ONE));
        let (mut d, mut m, mut valid) = (zero, zero, mask);
        for s in 0..vs {
            let (px, pu) = (x.as_mut_ptr().add(s * vl), u.as_mut_ptr().add(s * vl));
            let xn = E::load(x_new.as_ptr().add(s * vl));
            let xo = E::load(px);
            valid &= E::mask_lt(mask, zero, xn) & E::mask_lt(mask, xn, inf);
            d = E::vmax(d, E::vabs(E::vsub(xn, xo)));
            m = E::vmax(m, xn);
            E::store(px, E::blend(mask, xo, xn));
            E::store(pu, E::blend(mask, E::load(pu), E::vdiv(one, xn)));
        }
        E::storeu(diff.as_mut_ptr(), d);
        E::storeu(scale.as_mut_ptr(), m);
        valid
    }
}

/// `u`'s `VP` vectors, in registers.
///
/// # Safety
/// AVX-512F; `u` holds `VP` vectors of `VL` lanes, 64-byte aligned.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load_u<E: Avx512Real, const VP: usize>(u: &[E]) -> [E::V; VP] {
    assert!(u.len() >= VP * E::VL);
    // SAFETY: AVX-512F (the caller's contract); the loads are inside `u` (asserted) and
    // aligned (the caller's contract).
    unsafe {
        let mut uv = [E::zero(); VP];
        for (s, v) in uv.iter_mut().enumerate() {
            *v = E::load(u.as_ptr().add(s * E::VL));
        }
        uv
    }
}

/// `sum_s k_s u_s` per lane over the `VP` vectors at `k`, in four interleaved sums (word `s`
/// into sum `s mod 4`, so that four FMA chains run at once) added as `(p0 + p1) + (p2 + p3)`.
///
/// # Safety
/// AVX-512F; `VP` 64-byte aligned vectors readable at `k`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn dot<E: Avx512Real, const VP: usize>(k: *const E, uv: &[E::V; VP]) -> E::V {
    // SAFETY: the caller's contract.
    unsafe {
        let mut p = [E::zero(); 4];
        for (s, u) in uv.iter().enumerate() {
            p[s % 4] = E::fmadd(E::load(k.add(s * E::VL)), *u, p[s % 4]);
        }
        E::vadd(E::vadd(p[0], p[1]), E::vadd(p[2], p[3]))
    }
}

/// One iteration of every lane: `q_j = c_j / (K_j . u)` for each slot, then
/// `x_new_s = (sum_j q_j K_js) / r_s`.
///
/// # Safety
/// AVX-512F; `block` holds `block.slots` slots; `u` and `x_new` hold `VP` aligned vectors.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn iteration<E: Avx512Real, const VP: usize>(
    block: &mut Block<E>,
    u: &[E],
    inv_r: &[E; VP],
    x_new: &mut [E],
) {
    let vl = E::VL;
    let slots = block.slots;
    assert!(block.k.len() >= slots * VP * vl && block.c.len() >= slots * vl);
    assert!(block.q.len() >= slots * vl && x_new.len() >= VP * vl);
    // SAFETY (all loads and stores below): inside the buffers (asserted above; `load_u`
    // asserts its own), every offset a multiple of `VL` values from a 64-byte aligned start.
    unsafe {
        let uv = load_u::<E, VP>(u);
        let (k, c, q) = (block.k.as_ptr(), block.c.as_ptr(), block.q.as_mut_ptr());
        for j in 0..slots {
            let d = dot::<E, VP>(k.add(j * VP * vl), &uv);
            E::store(q.add(j * vl), E::vdiv(E::load(c.add(j * vl)), d));
        }
        let mut acc = [E::zero(); VP];
        for j in 0..slots {
            let qj = E::load(q.add(j * vl));
            let kj = k.add(j * VP * vl);
            for (s, acc) in acc.iter_mut().enumerate() {
                *acc = E::fmadd(qj, E::load(kj.add(s * vl)), *acc);
            }
        }
        for (s, acc) in acc.iter().enumerate() {
            E::store(
                x_new.as_mut_ptr().add(s * vl),
                E::vmul(*acc, E::splat(inv_r[s])),
            );
        }
    }
}

/// Each lane's distance `sum_j (c_j / (K_j . u)) ((K .* M)_j . u)`, accumulated in f64 into
/// `wmd`.
///
/// # Safety
/// As for [`iteration`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn final_step<E: Avx512Real, const VP: usize>(
    block: &Block<E>,
    u: &[E],
    wmd: &mut [f64; MAX_LANES],
) {
    let vl = E::VL;
    let slots = block.slots;
    assert!(block.k.len() >= slots * VP * vl && block.km.len() >= slots * VP * vl);
    assert!(block.c.len() >= slots * vl && vl <= MAX_LANES);
    let mut terms = [E::ZERO; MAX_LANES];
    // SAFETY: as in `iteration`; `terms` holds `VL` values.
    unsafe {
        let uv = load_u::<E, VP>(u);
        for j in 0..slots {
            let dot_k = dot::<E, VP>(block.k.as_ptr().add(j * VP * vl), &uv);
            let dot_km = dot::<E, VP>(block.km.as_ptr().add(j * VP * vl), &uv);
            let w = E::vdiv(E::load(block.c.as_ptr().add(j * vl)), dot_k);
            E::storeu(terms.as_mut_ptr(), E::vmul(w, dot_km));
            for (wmd, t) in wmd.iter_mut().zip(&terms[..vl]) {
                *wmd += t.to_f64();
            }
        }
    }
}
