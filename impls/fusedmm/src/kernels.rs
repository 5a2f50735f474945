//! Shared-memory SDDMM, SpMM and fused kernels on one CSR block (paper Section II, III-A).
//!
//! With `S` an `m x n` CSR, `A` `m x r`, `B` `n x r` (row-major):
//! - [`sddmm`]: `R = S .* (A B^T)` at the pattern of `S`; one dot product of length `r` per
//!   nonzero, parallel over nonzeros (nnz-balanced split, every part writes its own range of `R`).
//! - [`spmm_a`]: `out += R B`; each output row summed over its nonzeros in registers, a block of
//!   lanes at a time, parallel over whole rows with about equal nonzeros per part (rows never
//!   shared, so no write conflicts).
//! - `R^T A` (SpMMB) is [`spmm_a`] on the transposed copy ([`Transposed`]): a CSC of `R` would
//!   scatter into rows of the output that other threads also write.
//! - [`fusedmm_a`]: `out += (S .* (A B^T)) B`, row by row: a row's `R_ij` live in a buffer of
//!   that row's length while its output row is summed, and `R` is never stored. `FusedMMB(S, A, B) = FusedMMA(S^T, B, A)`, so the same kernel on the
//!   transposed copy gives `out += (S .* (A B^T))^T A` with no conflicts and no `R`.
//!
//! Cost: every kernel streams the sparse block once and reads two rows of length `r` per
//! nonzero; [`flops`] counts `2 r` per nonzero for SDDMM and SpMM and `4 r` for the fused kernels
//! (the multiplication by `S_ij` is not counted). They are memory bound for small `r`.
//!
//! Determinism: each output entry is summed by one thread in a fixed order, so results do not
//! depend on the number of threads.

use crate::dense::Dense;
use parbench_common::partition::{nnz_balanced, rows_balanced};
use parbench_common::{Csr, CsrError, Par, Precision, Work};
use rayon::prelude::*;

/// Parts per thread in the parallel splits: a few, so a thread that got slow rows is helped.
const PARTS_PER_THREAD: usize = 4;

/// A borrowed CSR block: the pattern of a [`Csr`] with possibly different values (an SDDMM
/// output shares its input's pattern, so distributed code keeps one pattern and swaps values).
#[derive(Clone, Copy, Debug)]
pub struct CsrRef<'a> {
    /// Rows.
    pub nrows: usize,
    /// Columns; every index is below it.
    pub ncols: usize,
    /// Row pointers (`nrows + 1`): row `i` is `indptr[i]..indptr[i + 1]` of `indices` and `values`.
    pub indptr: &'a [usize],
    /// Column of every nonzero, sorted within a row.
    pub indices: &'a [u32],
    /// Value of every nonzero, aligned with `indices`.
    pub values: &'a [f64],
}

impl<'a> CsrRef<'a> {
    /// The same pattern with other values (`values.len()` must equal the nonzero count).
    pub fn with_values(self, values: &'a [f64]) -> CsrRef<'a> {
        assert_eq!(values.len(), self.indices.len(), "values for a CSR pattern");
        CsrRef { values, ..self }
    }
    /// Number of nonzeros.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
}

impl<'a> From<&'a Csr> for CsrRef<'a> {
    fn from(s: &'a Csr) -> CsrRef<'a> {
        CsrRef {
            nrows: s.nrows(),
            ncols: s.ncols(),
            indptr: s.indptr(),
            indices: s.indices(),
            values: s.values(),
        }
    }
}

/// A CSR block together with its transpose and where each transposed nonzero came from, so that
/// values computed in the order of the original (an SDDMM output) can be laid out for the
/// transposed kernels without another sort.
#[derive(Clone, Debug, PartialEq)]
pub struct Transposed {
    /// `S^T` with the values of `S`.
    pub t: Csr,
    /// `t.values()[k] == s.values()[source[k]]`.
    pub source: Vec<usize>,
}

impl Transposed {
    /// Counting-sort transpose, O(nnz + ncols); rows of the result are sorted because rows of
    /// `s` are visited in order.
    pub fn new(s: &Csr) -> Transposed {
        let (m, n, nnz) = (s.nrows(), s.ncols(), s.nnz());
        let mut indptr = vec![0usize; n + 1];
        for &c in s.indices() {
            indptr[c as usize + 1] += 1;
        }
        for j in 0..n {
            indptr[j + 1] += indptr[j];
        }
        let mut next = indptr.clone();
        let mut indices = vec![0u32; nnz];
        let mut values = vec![0f64; nnz];
        let mut source = vec![0usize; nnz];
        for i in 0..m {
            for k in s.indptr()[i]..s.indptr()[i + 1] {
                let c = s.indices()[k] as usize;
                let slot = next[c];
                indices[slot] = i as u32;
                values[slot] = s.values()[k];
                source[slot] = k;
                next[c] += 1;
            }
        }
        // Proven invariants: counts sum to nnz, rows come out sorted and unique, values copied
        // from a valid matrix are finite.
        let t = Csr::new(n, m, indptr, indices, values).expect("transpose of a valid CSR");
        Transposed { t, source }
    }

    /// Values given in the order of the original, laid out in the order of the transpose.
    pub fn gather_values(&self, original_order: &[f64]) -> Vec<f64> {
        self.source.iter().map(|&k| original_order[k]).collect()
    }
}

/// Which kernel, for flop counts and for naming.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `R = S .* (A B^T)`.
    Sddmm,
    /// `R B` (the sparse input is taken as `R`).
    SpmmA,
    /// `R^T A`.
    SpmmB,
    /// `SpMMA(SDDMM(A, B, S), B)`.
    FusedMmA,
    /// `SpMMB(SDDMM(A, B, S), A)`.
    FusedMmB,
}

impl Kernel {
    /// Every kernel, in the order the tables list them.
    pub const ALL: [Kernel; 5] = [
        Kernel::Sddmm,
        Kernel::SpmmA,
        Kernel::SpmmB,
        Kernel::FusedMmA,
        Kernel::FusedMmB,
    ];
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Sddmm => "sddmm",
            Kernel::SpmmA => "spmma",
            Kernel::SpmmB => "spmmb",
            Kernel::FusedMmA => "fusedmma",
            Kernel::FusedMmB => "fusedmmb",
        }
    }
    /// The kernel called `name` on the command line ([`Kernel::name`]), if any.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }
    /// Whether the kernel is an SDDMM followed by an SpMM.
    pub fn is_fused(self) -> bool {
        matches!(self, Kernel::FusedMmA | Kernel::FusedMmB)
    }
}

/// Bytes of the gathered operand one column panel covers: 2-8 MB panels ran FusedMMA 1.3-1.6x
/// faster than none at r = 64-256 on 16k rows (the AVX2 AMD EPYC kind, 32 MB last-level cache
/// shared with other tenants), a quarter of the smallest last-level cache of these machines.
pub const PANEL_BYTES: usize = 4 << 20;

/// `S` cut by columns into panels, each with every row of `S` and the nonzeros of a range of
/// columns, so that the fused kernel gathers from one panel's rows of `B` at a time (a few MB,
/// which stay in the last-level cache) instead of from all of `B` (16 MB at 16k rows and
/// r = 128, which the streamed rows of `A` and of the output push out). Each row of `A` and of
/// the output is then read once per panel; at these sizes that costs far less than the
/// gathers it keeps in cache.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnPanels {
    panels: Vec<Csr>,
}

impl ColumnPanels {
    /// Panels of `s` covering [`PANEL_BYTES`] of a gathered operand with rows `r` wide; `None`
    /// when the whole operand is that small (one panel would be a copy of `s`).
    pub fn new(s: CsrRef, r: usize) -> Option<ColumnPanels> {
        let columns = (PANEL_BYTES / (8 * r.max(1))).max(1);
        (s.ncols > columns).then(|| ColumnPanels::with_width(s, columns))
    }

    /// Panels of `columns` columns each (the last one narrower).
    pub fn with_width(s: CsrRef, columns: usize) -> ColumnPanels {
        let count = s.ncols.div_ceil(columns).max(1);
        let mut parts: Vec<(Vec<usize>, Vec<u32>, Vec<f64>)> = (0..count)
            .map(|_| (Vec::with_capacity(s.nrows + 1), Vec::new(), Vec::new()))
            .collect();
        for i in 0..s.nrows {
            for part in parts.iter_mut() {
                part.0.push(part.1.len());
            }
            for k in s.indptr[i]..s.indptr[i + 1] {
                let part = &mut parts[s.indices[k] as usize / columns];
                part.1.push(s.indices[k]);
                part.2.push(s.values[k]);
            }
        }
        let panels = parts
            .into_iter()
            .map(|(mut indptr, indices, values)| {
                indptr.push(indices.len());
                Csr::new(s.nrows, s.ncols, indptr, indices, values)
                    .expect("a panel keeps the rows, sorted columns and shape of a valid CSR")
            })
            .collect();
        ColumnPanels { panels }
    }

    /// Number of panels.
    pub fn len(&self) -> usize {
        self.panels.len()
    }

    /// Whether there is no panel (never: an empty matrix has one empty panel).
    pub fn is_empty(&self) -> bool {
        self.panels.is_empty()
    }
}

/// [`fusedmm_a`] panel by panel: `out += (S .* (A B^T)) B` summed over the panels of `S` in
/// column order (so each output row is a sum of per-panel sums: equal to the unpaneled kernel
/// to rounding, and bit for bit when there is one panel).
pub fn fusedmm_a_panels(panels: &ColumnPanels, a: &Dense, b: &Dense, out: &mut Dense, par: Par) {
    for panel in &panels.panels {
        fusedmm_a(panel.into(), a, b, out, par);
    }
}

/// [`fusedmm_b`] on the panels of `S^T`: by `FusedMMB(S, A, B) = FusedMMA(S^T, B, A)`.
pub fn fusedmm_b_panels(st_panels: &ColumnPanels, a: &Dense, b: &Dense, out: &mut Dense, par: Par) {
    fusedmm_a_panels(st_panels, b, a, out, par)
}

/// How the kernels that gather a row of `B` per nonzero (SDDMM and the fused FusedMM) are
/// compiled. Both give the same result bit for bit (the same operations in the same order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Codegen {
    /// The dot product written out in AVX2 registers, and each gathered row prefetched a few
    /// nonzeros ahead (the default).
    #[default]
    Tuned,
    /// The kernels as issue 14 found them, kept as the `local-autovec` variant so that the
    /// tuning is measured against them in one run: the dot product left to the compiler's
    /// vectorizer, no prefetch.
    Autovec,
}

/// Floating-point operations of `kernel` on `nnz` nonzeros with embedding width `r`.
pub fn flops(kernel: Kernel, nnz: usize, r: usize) -> f64 {
    let per_nnz = match kernel {
        Kernel::Sddmm | Kernel::SpmmA | Kernel::SpmmB => 2 * r,
        Kernel::FusedMmA | Kernel::FusedMmB => 4 * r,
    };
    per_nnz as f64 * nnz as f64
}

/// The shape a kernel's work depends on: `S` is `m x n` with `nnz` nonzeros, dense rows `r` wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelShape {
    /// Rows of `S` (and of `A`).
    pub m: usize,
    /// Columns of `S` (rows of `B`).
    pub n: usize,
    /// Nonzeros of `S`.
    pub nnz: usize,
    /// Width of the dense rows.
    pub r: usize,
}

/// Bytes of one stored nonzero (an f64 value, a u32 column).
const NONZERO_BYTES: f64 = 12.0;

/// The work `kernel` cannot avoid on `shape` (fused: one pass; unfused: SDDMM into a stored `R`,
/// then the SpMM reading it), for its time bound. Each kernel streams the sparse block and its
/// row pointers once, reads the operand whose rows follow the sparse rows once, and writes its
/// output once (the SpMM kernels read their output too: they accumulate into it); per nonzero
/// it gathers one `r`-wide row of the other operand, from a working set of that operand.
/// FusedMMB and SpMMB run on the transpose, so the roles of `m` and `n` swap.
pub fn kernel_work(kernel: Kernel, shape: KernelShape, fused: bool, threads: usize) -> Work {
    let KernelShape { m, n, nnz, r } = shape;
    let row = 8.0 * r as f64;
    let sparse = NONZERO_BYTES * nnz as f64;
    let gathered = nnz as f64 * row;
    let (rows, cols) = match kernel {
        Kernel::SpmmB | Kernel::FusedMmB => (n as f64, m as f64),
        _ => (m as f64, n as f64),
    };
    let pointers = 8.0 * (rows + 1.0);
    let one_pass = |stream_bytes: f64| Work {
        flops: flops(kernel, nnz, r),
        precision: Precision::F64,
        stream_bytes: stream_bytes + pointers,
        reuse_bytes: gathered,
        reuse_footprint_bytes: cols * row,
        threads,
    };
    match kernel {
        // `S` in, the rows of `A` once, `R`'s values out.
        Kernel::Sddmm => one_pass(sparse + rows * row + 8.0 * nnz as f64),
        // `R` in, the output rows read and written.
        Kernel::SpmmA | Kernel::SpmmB => one_pass(sparse + 2.0 * rows * row),
        // `S` in, the rows of the streamed operand once, the output rows read and written.
        Kernel::FusedMmA | Kernel::FusedMmB if fused => one_pass(sparse + 3.0 * rows * row),
        Kernel::FusedMmA | Kernel::FusedMmB => {
            let spmm = if kernel == Kernel::FusedMmA {
                Kernel::SpmmA
            } else {
                Kernel::SpmmB
            };
            let sddmm = kernel_work(Kernel::Sddmm, shape, true, threads);
            // SpMMB's SDDMM runs on `S` as stored; its output then feeds the transposed pass.
            sddmm.then(&kernel_work(spmm, shape, true, threads))
        }
    }
}

fn check_shapes(s: &CsrRef, a_rows: usize, b_rows: usize, a: &Dense, b: &Dense) {
    assert_eq!(a.rows(), a_rows, "dense row count against the sparse block");
    assert_eq!(b.rows(), b_rows, "dense row count against the sparse block");
    assert_eq!(a.cols(), b.cols(), "A and B must have the same width r");
    assert_eq!(s.values.len(), s.indices.len());
}

/// Cuts `data` (rows of width `width`) at row boundaries `bounds` into disjoint mutable parts.
fn split_rows<'a>(data: &'a mut [f64], bounds: &[usize], width: usize) -> Vec<&'a mut [f64]> {
    let mut parts = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut rest = data;
    for w in bounds.windows(2) {
        let (head, tail) = rest.split_at_mut((w[1] - w[0]) * width);
        parts.push(head);
        rest = tail;
    }
    parts
}

/// Runs `work(part_index, part)` over the parts, on the calling thread or on `par`'s pool.
fn for_each_part<T: Send>(par: Par, parts: Vec<T>, work: impl Fn(usize, T) + Sync + Send) {
    match par {
        Par::Seq => parts.into_iter().enumerate().for_each(|(t, p)| work(t, p)),
        Par::Rayon(_) => par.install(|| {
            parts
                .into_par_iter()
                .enumerate()
                .for_each(|(t, p)| work(t, p))
        }),
    }
}

fn parts_for(par: Par) -> usize {
    match par {
        Par::Seq => 1,
        Par::Rayon(n) => n.max(1) * PARTS_PER_THREAD,
    }
}

/// SDDMM: `out[k] = S_k * <A_i, B_j>` for every nonzero `k = (i, j)` of `s` (`s` is `m x n`,
/// `a` is `m x r`, `b` is `n x r`, `out.len() == nnz`).
pub fn sddmm(s: CsrRef, a: &Dense, b: &Dense, out: &mut [f64], par: Par) {
    sddmm_with(Codegen::Tuned, s, a, b, out, par)
}

/// [`sddmm`] compiled as `codegen` says.
pub fn sddmm_with(codegen: Codegen, s: CsrRef, a: &Dense, b: &Dense, out: &mut [f64], par: Par) {
    check_shapes(&s, s.nrows, s.ncols, a, b);
    assert_eq!(out.len(), s.nnz(), "SDDMM output length");
    let points = nnz_balanced(s.indptr, parts_for(par));
    let bounds: Vec<usize> = points.iter().map(|p| p.nnz).collect();
    let parts = split_rows(out, &bounds, 1);
    for_each_part(par, parts, |t, part| {
        let range = (points[t].row, points[t].nnz, points[t + 1].nnz);
        wide::sddmm_range(codegen, &s, a, b, range, part)
    });
}

/// SpMMA: `out += R B` (`r` is `m x n`, `b` is `n x r`, `out` is `m x r`).
pub fn spmm_a(r: CsrRef, b: &Dense, out: &mut Dense, par: Par) {
    assert_eq!(out.rows(), r.nrows, "SpMM output rows");
    assert_eq!(b.rows(), r.ncols, "SpMM dense rows");
    assert_eq!(out.cols(), b.cols(), "SpMM widths");
    let width = b.cols();
    let bounds = rows_balanced(r.indptr, parts_for(par));
    let parts = split_rows(out.data_mut(), &bounds, width);
    for_each_part(par, parts, |t, part| {
        wide::spmm_rows(Codegen::Tuned, &r, None, b, bounds[t]..bounds[t + 1], part)
    });
}

/// SpMMB: `out += R^T A`, given the transpose `rt` of `R` (`rt` is `n x m`, `a` is `m x r`,
/// `out` is `n x r`). This is [`spmm_a`] on the transpose, named for readability.
pub fn spmm_b(rt: CsrRef, a: &Dense, out: &mut Dense, par: Par) {
    spmm_a(rt, a, out, par)
}

/// Fused SDDMM + SpMMA: `out += (S .* (A B^T)) B` without storing the SDDMM output (a row's
/// values live in a buffer of that row's length while its output row is summed).
pub fn fusedmm_a(s: CsrRef, a: &Dense, b: &Dense, out: &mut Dense, par: Par) {
    fusedmm_a_with(Codegen::Tuned, s, a, b, out, par)
}

/// [`fusedmm_a`] compiled as `codegen` says.
pub fn fusedmm_a_with(
    codegen: Codegen,
    s: CsrRef,
    a: &Dense,
    b: &Dense,
    out: &mut Dense,
    par: Par,
) {
    check_shapes(&s, s.nrows, s.ncols, a, b);
    assert_eq!(out.rows(), s.nrows, "FusedMM output rows");
    assert_eq!(out.cols(), b.cols(), "FusedMM widths");
    let width = b.cols();
    let bounds = rows_balanced(s.indptr, parts_for(par));
    let parts = split_rows(out.data_mut(), &bounds, width);
    for_each_part(par, parts, |t, part| {
        wide::spmm_rows(codegen, &s, Some(a), b, bounds[t]..bounds[t + 1], part)
    });
}

/// Fused SDDMM + SpMMB: `out += (S .* (A B^T))^T A`, given `st = S^T` (`n x m`), by the
/// identity `FusedMMB(S, A, B) = FusedMMA(S^T, B, A)`.
pub fn fusedmm_b(st: CsrRef, a: &Dense, b: &Dense, out: &mut Dense, par: Par) {
    fusedmm_a(st, b, a, out, par)
}

/// [`fusedmm_b`] compiled as `codegen` says.
pub fn fusedmm_b_with(
    codegen: Codegen,
    st: CsrRef,
    a: &Dense,
    b: &Dense,
    out: &mut Dense,
    par: Par,
) {
    fusedmm_a_with(codegen, st, b, a, out, par)
}

/// The kernels' loops over one part, compiled twice: for the baseline target and with AVX2
/// enabled, chosen at run time. The default x86-64 target allows only SSE2 (2 lanes of f64);
/// the loops are written for LLVM to vectorize, and with AVX2 they run 4 lanes per
/// instruction. Results are the same bit for bit either way: Rust never contracts `a * b + c`
/// into a fused multiply-add, and every sum has a fixed order.
/// See [`crate::simd_path`].
pub(crate) fn simd_path() -> &'static str {
    if wide::has_avx2() {
        "avx2"
    } else {
        "baseline"
    }
}

mod wide {
    use super::{Codegen, CsrRef};
    use crate::dense::Dense;
    use std::ops::Range;

    /// How many nonzeros ahead the gathered row is prefetched.
    const GATHER_AHEAD: usize = 8;

    /// Asks for every cache line of the row of `b` that nonzero `k + GATHER_AHEAD` gathers: the
    /// rows follow the sparse pattern, which no hardware prefetcher predicts.
    #[inline(always)]
    fn prefetch_ahead(s: &CsrRef, b: &Dense, k: usize) {
        let Some(&ahead) = s.indices.get(k + GATHER_AHEAD) else {
            return;
        };
        #[cfg(target_arch = "x86_64")]
        for line in b.row(ahead as usize).chunks(8) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch is a hint that never faults, and the address is in `row`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
        }
    }

    /// `<x, y>` in one fixed order on every path: eight partial sums (lane `l` takes elements
    /// `l`, `l + 8`, ...), each a multiply then an add (never fused), folded as
    /// `((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))`, then the tail in order.
    /// `in_avx2_registers` (a constant where the bodies are inlined) takes [`dot_avx2`].
    #[inline(always)]
    fn dot(x: &[f64], y: &[f64], in_avx2_registers: bool) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if in_avx2_registers {
            // SAFETY: the bodies pass true only when instantiated with `AVX2`, which only the
            // `_avx2` entry points do, and they run after `has_avx2()` said the CPU has it.
            return unsafe { dot_avx2(x, y) };
        }
        let mut acc = [0.0f64; 8];
        let (xc, xr) = x.split_at(x.len() - x.len() % 8);
        let (yc, yr) = y.split_at(xc.len());
        for (a, b) in xc.chunks_exact(8).zip(yc.chunks_exact(8)) {
            for l in 0..8 {
                acc[l] += a[l] * b[l];
            }
        }
        let mut s = (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (a, b) in xr.iter().zip(yr) {
            s += a * b;
        }
        s
    }

    /// [`dot`]'s arithmetic in AVX2 registers, written out: left to the compiler, the eight
    /// partial sums were vectorized across loop iterations in 2-lane registers with a shuffle
    /// per multiply, and SDDMM ran at a third of SpMM's speed on the same gathers.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn dot_avx2(x: &[f64], y: &[f64]) -> f64 {
        use std::arch::x86_64::*;
        let n = x.len().min(y.len());
        let body = n - n % 8;
        let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut i = 0;
        while i < body {
            // SAFETY: i + 8 <= body <= n, within both slices.
            unsafe {
                lo = _mm256_add_pd(
                    lo,
                    _mm256_mul_pd(_mm256_loadu_pd(xp.add(i)), _mm256_loadu_pd(yp.add(i))),
                );
                hi = _mm256_add_pd(
                    hi,
                    _mm256_mul_pd(
                        _mm256_loadu_pd(xp.add(i + 4)),
                        _mm256_loadu_pd(yp.add(i + 4)),
                    ),
                );
            }
            i += 8;
        }
        let mut s = fold_partial_sums(lo, hi);
        for (a, b) in x[body..n].iter().zip(&y[body..n]) {
            s += a * b;
        }
        s
    }

    /// [`dot`]'s eight partial sums, held as lanes 0-3 (`lo`) and 4-7 (`hi`), folded in its
    /// order: lanes `(s0 + s4, s1 + s5, s2 + s6, s3 + s7)`, then the pairs, then the halves.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn fold_partial_sums(lo: std::arch::x86_64::__m256d, hi: std::arch::x86_64::__m256d) -> f64 {
        use std::arch::x86_64::*;
        let p = _mm256_add_pd(lo, hi);
        let low = _mm256_castpd256_pd128(p);
        let high = _mm256_extractf128_pd::<1>(p);
        let first = _mm_add_sd(low, _mm_unpackhi_pd(low, low));
        let second = _mm_add_sd(high, _mm_unpackhi_pd(high, high));
        _mm_cvtsd_f64(_mm_add_sd(first, second))
    }

    /// One output row of the fused kernel for rows of `4 V` values, `V` even and at most 8
    /// (r = 8, 16, 24, 32): the row of `A` and the `V` sums of the output stay in registers, and
    /// each nonzero's row of `B` is loaded once for its dot product and its term. The same
    /// operations in the same order as [`dot`] then [`accumulate`] (bit for bit), without the
    /// list of terms and its second pass over the rows.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn fused_row_in_registers<const V: usize>(
        s: &CsrRef,
        ai: &[f64],
        b: &Dense,
        nonzeros: Range<usize>,
        y: &mut [f64],
    ) {
        use std::arch::x86_64::*;
        let width = 4 * V;
        const { assert!(V.is_multiple_of(2) && V <= 8) };
        assert!(ai.len() == width && y.len() == width && b.cols() == width);
        let load = |row: &[f64]| -> [__m256d; V] {
            // SAFETY: every row here is `width = 4 V` values (asserted above and by
            // `Dense::row`), and lane block `v < V` reads values `4 v..4 v + 4`.
            std::array::from_fn(|v| unsafe { _mm256_loadu_pd(row.as_ptr().add(4 * v)) })
        };
        let a = load(ai);
        let mut acc = [_mm256_setzero_pd(); V];
        for k in nonzeros {
            prefetch_ahead(s, b, k);
            let row = load(b.row(s.indices[k] as usize));
            let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
            for c in 0..V / 2 {
                lo = _mm256_add_pd(lo, _mm256_mul_pd(a[2 * c], row[2 * c]));
                hi = _mm256_add_pd(hi, _mm256_mul_pd(a[2 * c + 1], row[2 * c + 1]));
            }
            let term = _mm256_set1_pd(s.values[k] * fold_partial_sums(lo, hi));
            for v in 0..V {
                acc[v] = _mm256_add_pd(acc[v], _mm256_mul_pd(term, row[v]));
            }
        }
        for (v, sum) in acc.into_iter().enumerate() {
            // SAFETY: as in `load`, inside `y`'s `4 V` values.
            unsafe {
                let py = y.as_mut_ptr().add(4 * v);
                _mm256_storeu_pd(py, _mm256_add_pd(_mm256_loadu_pd(py), sum));
            }
        }
    }

    /// Lanes of an output row summed in registers at once (8 AVX2 registers of 4).
    const BLOCK: usize = 32;
    /// The narrower block for the rest of the row (and for small widths such as r = 8).
    const NARROW: usize = 8;

    pub(super) fn has_avx2() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx2")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// SDDMM of nonzeros `start..end` (starting in row `row`) into `out[..end - start]`.
    pub(super) fn sddmm_range(
        codegen: Codegen,
        s: &CsrRef,
        a: &Dense,
        b: &Dense,
        range: (usize, usize, usize),
        out: &mut [f64],
    ) {
        sddmm_range_on(has_avx2(), codegen, s, a, b, range, out)
    }

    /// [`sddmm_range`] on the AVX2 bodies when `avx2` and the CPU has it, else on the
    /// portable ones (what a CPU without AVX2 runs; the tests pass false to compare).
    pub(super) fn sddmm_range_on(
        avx2: bool,
        codegen: Codegen,
        s: &CsrRef,
        a: &Dense,
        b: &Dense,
        range: (usize, usize, usize),
        out: &mut [f64],
    ) {
        let tuned = codegen == Codegen::Tuned;
        #[cfg(target_arch = "x86_64")]
        if avx2 && has_avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe {
                if tuned {
                    sddmm_range_avx2::<true>(s, a, b, range, out)
                } else {
                    sddmm_range_avx2::<false>(s, a, b, range, out)
                }
            };
        }
        if tuned {
            sddmm_range_body::<false, true>(s, a, b, range, out)
        } else {
            sddmm_range_body::<false, false>(s, a, b, range, out)
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sddmm_range_avx2<const TUNED: bool>(
        s: &CsrRef,
        a: &Dense,
        b: &Dense,
        range: (usize, usize, usize),
        out: &mut [f64],
    ) {
        sddmm_range_body::<true, TUNED>(s, a, b, range, out)
    }

    #[inline(always)]
    fn sddmm_range_body<const AVX2: bool, const TUNED: bool>(
        s: &CsrRef,
        a: &Dense,
        b: &Dense,
        (mut row, start, end): (usize, usize, usize),
        out: &mut [f64],
    ) {
        for k in start..end {
            // Skip rows (possibly empty) that end before nonzero k.
            while s.indptr[row + 1] <= k {
                row += 1;
            }
            if TUNED {
                prefetch_ahead(s, b, k);
            }
            let j = s.indices[k] as usize;
            out[k - start] = s.values[k] * dot(a.row(row), b.row(j), AVX2 && TUNED);
        }
    }

    /// Output rows `rows` (stored in `out` from its start): `out_i += sum_k R_ik b_{j_k}`
    /// where `R_ik` is the stored value, or, with `fuse_a`, the SDDMM value
    /// `S_ik <a_i, b_{j_k}>` computed on the spot (the fused kernel).
    pub(super) fn spmm_rows(
        codegen: Codegen,
        s: &CsrRef,
        fuse_a: Option<&Dense>,
        b: &Dense,
        rows: Range<usize>,
        out: &mut [f64],
    ) {
        spmm_rows_on(has_avx2(), codegen, s, fuse_a, b, rows, out)
    }

    /// [`spmm_rows`] on the AVX2 or the portable bodies, as [`sddmm_range_on`].
    pub(super) fn spmm_rows_on(
        avx2: bool,
        codegen: Codegen,
        s: &CsrRef,
        fuse_a: Option<&Dense>,
        b: &Dense,
        rows: Range<usize>,
        out: &mut [f64],
    ) {
        let tuned = codegen == Codegen::Tuned;
        #[cfg(target_arch = "x86_64")]
        if avx2 && has_avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe {
                if tuned {
                    spmm_rows_avx2::<true>(s, fuse_a, b, rows, out)
                } else {
                    spmm_rows_avx2::<false>(s, fuse_a, b, rows, out)
                }
            };
        }
        if tuned {
            spmm_rows_body::<false, true>(s, fuse_a, b, rows, out)
        } else {
            spmm_rows_body::<false, false>(s, fuse_a, b, rows, out)
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn spmm_rows_avx2<const TUNED: bool>(
        s: &CsrRef,
        fuse_a: Option<&Dense>,
        b: &Dense,
        rows: Range<usize>,
        out: &mut [f64],
    ) {
        spmm_rows_body::<true, TUNED>(s, fuse_a, b, rows, out)
    }

    #[inline(always)]
    fn spmm_rows_body<const AVX2: bool, const TUNED: bool>(
        s: &CsrRef,
        fuse_a: Option<&Dense>,
        b: &Dense,
        rows: Range<usize>,
        out: &mut [f64],
    ) {
        let width = b.cols();
        let first = rows.start;
        let mut terms: Vec<(f64, &[f64])> = Vec::new();
        for i in rows {
            terms.clear();
            let nonzeros = s.indptr[i]..s.indptr[i + 1];
            #[cfg(target_arch = "x86_64")]
            if let (true, true, Some(a)) = (AVX2, TUNED, fuse_a) {
                let y = &mut out[(i - first) * width..(i - first + 1) * width];
                // SAFETY (each call): `AVX2` is true only in the bodies the `_avx2` entry
                // points instantiate, which run after `has_avx2()` said the CPU has it.
                let done = match width {
                    8 => unsafe {
                        fused_row_in_registers::<2>(s, a.row(i), b, nonzeros.clone(), y);
                        true
                    },
                    16 => unsafe {
                        fused_row_in_registers::<4>(s, a.row(i), b, nonzeros.clone(), y);
                        true
                    },
                    24 => unsafe {
                        fused_row_in_registers::<6>(s, a.row(i), b, nonzeros.clone(), y);
                        true
                    },
                    32 => unsafe {
                        fused_row_in_registers::<8>(s, a.row(i), b, nonzeros.clone(), y);
                        true
                    },
                    _ => false,
                };
                if done {
                    continue;
                }
            }
            match fuse_a {
                Some(a) => {
                    let ai = a.row(i);
                    terms.extend(nonzeros.map(|k| {
                        if TUNED {
                            prefetch_ahead(s, b, k);
                        }
                        let bj = b.row(s.indices[k] as usize);
                        (s.values[k] * dot(ai, bj, AVX2 && TUNED), bj)
                    }));
                }
                None => terms.extend(nonzeros.map(|k| (s.values[k], b.row(s.indices[k] as usize)))),
            }
            let y = &mut out[(i - first) * width..(i - first + 1) * width];
            let mut c = 0;
            while c + BLOCK <= width {
                accumulate::<BLOCK>(&terms, c, y);
                c += BLOCK;
            }
            while c + NARROW <= width {
                accumulate::<NARROW>(&terms, c, y);
                c += NARROW;
            }
            while c < width {
                accumulate::<1>(&terms, c, y);
                c += 1;
            }
        }
    }

    /// `y[c..c + L] += sum_k v_k row_k[c..c + L]` with the sum held in `L` accumulators: the
    /// output is loaded and stored once per block instead of once per nonzero. The terms are
    /// added in order from zero, so on a zero output this is exactly a sequence of axpys.
    #[inline(always)]
    fn accumulate<const L: usize>(terms: &[(f64, &[f64])], c: usize, y: &mut [f64]) {
        let mut acc = [0.0f64; L];
        for &(v, row) in terms {
            let row: &[f64; L] = row[c..c + L].try_into().expect("a block of L lanes");
            for l in 0..L {
                acc[l] += v * row[l];
            }
        }
        let y: &mut [f64; L] = (&mut y[c..c + L]).try_into().expect("a block of L lanes");
        for l in 0..L {
            y[l] += acc[l];
        }
    }
}

/// The whole-matrix kernels in one call, allocating their outputs: what the distributed
/// algorithms are checked against and what the local benchmarks time.
pub mod whole {
    use super::*;

    /// `S .* (A B^T)` as a CSR with the pattern of `s`; an error only when a product
    /// overflows to infinity.
    pub fn sddmm(s: &Csr, a: &Dense, b: &Dense, par: Par) -> Result<Csr, CsrError> {
        let mut vals = vec![0.0; s.nnz()];
        super::sddmm(s.into(), a, b, &mut vals, par);
        with_values(s, vals)
    }
    /// `R B`.
    pub fn spmm_a(r: &Csr, b: &Dense, par: Par) -> Dense {
        let mut out = Dense::zeros(r.nrows(), b.cols());
        super::spmm_a(r.into(), b, &mut out, par);
        out
    }
    /// `R^T A` (transposes `r` first; callers with a stored transpose use [`super::spmm_b`]).
    pub fn spmm_b(r: &Csr, a: &Dense, par: Par) -> Dense {
        let rt = r.transpose();
        let mut out = Dense::zeros(r.ncols(), a.cols());
        super::spmm_b((&rt).into(), a, &mut out, par);
        out
    }
    /// `(S .* (A B^T)) B`, fused.
    pub fn fusedmm_a(s: &Csr, a: &Dense, b: &Dense, par: Par) -> Dense {
        let mut out = Dense::zeros(s.nrows(), b.cols());
        super::fusedmm_a(s.into(), a, b, &mut out, par);
        out
    }
    /// `(S .* (A B^T))^T A`, fused on the transpose of `s`.
    pub fn fusedmm_b(s: &Csr, a: &Dense, b: &Dense, par: Par) -> Dense {
        let st = s.transpose();
        let mut out = Dense::zeros(s.ncols(), a.cols());
        super::fusedmm_b((&st).into(), a, b, &mut out, par);
        out
    }

    /// A matrix with the pattern of `s` and the given values (rejected when not finite).
    pub fn with_values(s: &Csr, values: Vec<f64>) -> Result<Csr, CsrError> {
        Csr::new(
            s.nrows(),
            s.ncols(),
            s.indptr().to_vec(),
            s.indices().to_vec(),
            values,
        )
    }
}

#[cfg(test)]
mod work_tests {
    use super::*;

    const SHAPE: KernelShape = KernelShape {
        m: 2,
        n: 3,
        nnz: 4,
        r: 2,
    };

    #[test]
    fn fused_kernels_stream_once_and_gather_one_row_per_nonzero() {
        let w = kernel_work(Kernel::FusedMmA, SHAPE, true, 1);
        // S (4 x 12 B), 3 row pointers, A's 2 rows read, the output's 2 rows read and written.
        assert_eq!(w.stream_bytes, 48.0 + 24.0 + 3.0 * 2.0 * 16.0);
        // One 16-byte row of B per nonzero, from B's 3 rows.
        assert_eq!((w.reuse_bytes, w.reuse_footprint_bytes), (64.0, 48.0));
        assert_eq!(w.flops, 4.0 * 2.0 * 4.0);
        // FusedMMB runs on the transpose: 4 row pointers, B's 3 rows streamed, A's 2 gathered.
        let b = kernel_work(Kernel::FusedMmB, SHAPE, true, 1);
        assert_eq!(b.stream_bytes, 48.0 + 32.0 + 3.0 * 3.0 * 16.0);
        assert_eq!((b.reuse_bytes, b.reuse_footprint_bytes), (64.0, 32.0));
    }

    #[test]
    fn unfused_is_the_sddmm_then_the_spmm() {
        let sddmm = kernel_work(Kernel::Sddmm, SHAPE, true, 2);
        // S, pointers, A's rows, R's 4 values written.
        assert_eq!(sddmm.stream_bytes, 48.0 + 24.0 + 32.0 + 32.0);
        let spmm = kernel_work(Kernel::SpmmA, SHAPE, true, 2);
        assert_eq!(spmm.stream_bytes, 48.0 + 24.0 + 64.0);
        let unfused = kernel_work(Kernel::FusedMmA, SHAPE, false, 2);
        assert_eq!(unfused.stream_bytes, sddmm.stream_bytes + spmm.stream_bytes);
        assert_eq!(unfused.reuse_bytes, 128.0);
        assert_eq!(
            unfused.flops,
            kernel_work(Kernel::FusedMmA, SHAPE, true, 2).flops
        );
        assert_eq!(unfused.threads, 2);
        // The fused pass moves less than the two calls.
        let fused = kernel_work(Kernel::FusedMmA, SHAPE, true, 2);
        assert!(
            fused.stream_bytes + fused.reuse_bytes < unfused.stream_bytes + unfused.reuse_bytes
        );
    }
}

#[cfg(test)]
mod codegen_tests {
    use super::*;
    use crate::generate::erdos_renyi;

    /// The tuned kernels do the autovectorized ones' operations in the same order: their
    /// outputs are equal bit for bit, at widths with and without a tail of the 8-lane blocks,
    /// with empty rows, on one thread and several.
    #[test]
    fn tuned_and_autovec_kernels_agree_bit_for_bit() {
        for r in [1, 3, 8, 13, 16, 24, 32, 45, 128] {
            // 5 nonzeros a row on 40 columns, row 0's dropped to have an empty row.
            let mut s = erdos_renyi(33, 40, 5, r as u64, Par::Seq).unwrap();
            let first = s.indptr()[1];
            s = Csr::new(
                s.nrows(),
                s.ncols(),
                std::iter::once(0)
                    .chain(s.indptr()[1..].iter().map(|&p| p - first))
                    .collect(),
                s.indices()[first..].to_vec(),
                s.values()[first..].to_vec(),
            )
            .unwrap();
            let st = Transposed::new(&s).t;
            let a = Dense::random(33, r, 7);
            let b = Dense::random(40, r, 8);
            for par in [Par::Seq, Par::threads(3)] {
                let mut tuned = vec![0.0; s.nnz()];
                let mut plain = vec![0.0; s.nnz()];
                sddmm_with(Codegen::Tuned, (&s).into(), &a, &b, &mut tuned, par);
                sddmm_with(Codegen::Autovec, (&s).into(), &a, &b, &mut plain, par);
                assert_eq!(bits(&tuned), bits(&plain), "SDDMM r = {r}");
                assert!(tuned.iter().any(|&x| x != 0.0));
                let run = |codegen| {
                    let mut out_a = Dense::zeros(33, r);
                    fusedmm_a_with(codegen, (&s).into(), &a, &b, &mut out_a, par);
                    let mut out_b = Dense::zeros(40, r);
                    fusedmm_b_with(codegen, (&st).into(), &a, &b, &mut out_b, par);
                    (out_a, out_b)
                };
                let (ta, tb) = run(Codegen::Tuned);
                let (pa, pb) = run(Codegen::Autovec);
                assert_eq!(bits(ta.data()), bits(pa.data()), "FusedMMA r = {r}");
                assert_eq!(bits(tb.data()), bits(pb.data()), "FusedMMB r = {r}");
                assert!(ta.row(0).iter().all(|&x| x == 0.0), "row 0 has no nonzeros");
            }
        }
    }

    /// The portable bodies (what a CPU without AVX2 runs) give the bits the dispatched ones
    /// give here, tuned and as found, SDDMM and fused, at every width the AVX2 code special-
    /// cases and between them. On a host without AVX2 both sides are the portable path (the
    /// test says so).
    #[test]
    fn the_portable_path_gives_the_bits_of_the_dispatched_one() {
        eprintln!(
            "fusedmm kernels dispatch to {} here; compared with the portable bodies",
            simd_path()
        );
        for r in [3, 8, 16, 24, 32, 40, 128] {
            let s = erdos_renyi(21, 50, 7, r as u64, Par::Seq).unwrap();
            let sr: CsrRef = (&s).into();
            let (a, b) = (Dense::random(21, r, 3), Dense::random(50, r, 4));
            for codegen in [Codegen::Tuned, Codegen::Autovec] {
                let (mut got, mut want) = (vec![0.0; s.nnz()], vec![0.0; s.nnz()]);
                wide::sddmm_range(codegen, &sr, &a, &b, (0, 0, s.nnz()), &mut got);
                wide::sddmm_range_on(false, codegen, &sr, &a, &b, (0, 0, s.nnz()), &mut want);
                assert_eq!(bits(&got), bits(&want), "SDDMM r = {r} {codegen:?}");
                for fuse in [Some(&a), None] {
                    let (mut got, mut want) = (vec![0.5; 21 * r], vec![0.5; 21 * r]);
                    wide::spmm_rows(codegen, &sr, fuse, &b, 0..21, &mut got);
                    wide::spmm_rows_on(false, codegen, &sr, fuse, &b, 0..21, &mut want);
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "r = {r} {codegen:?} fused {}",
                        fuse.is_some()
                    );
                }
            }
        }
    }

    /// SDDMM's value at a nonzero is `S_ij <a_i, b_j>` summed in the documented order, checked
    /// on a case small enough to write out: 10 lanes, so eight partial sums and a tail of two.
    #[test]
    fn the_dot_product_folds_its_partial_sums_in_the_documented_order() {
        let x: Vec<f64> = (0..10).map(|i| 1.0 + i as f64 * 1e-3).collect();
        let y: Vec<f64> = (0..10).map(|i| 1.0 / (3.0 + i as f64)).collect();
        let p: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
        let want = ((p[0] + p[4]) + (p[1] + p[5]) + ((p[2] + p[6]) + (p[3] + p[7]))) + p[8] + p[9];
        let s = Csr::new(1, 1, vec![0, 1], vec![0], vec![1.0]).unwrap();
        let a = Dense::from_vec(1, 10, x).unwrap();
        let b = Dense::from_vec(1, 10, y).unwrap();
        for codegen in [Codegen::Tuned, Codegen::Autovec] {
            let mut out = [0.0];
            sddmm_with(codegen, (&s).into(), &a, &b, &mut out, Par::Seq);
            assert_eq!(out[0].to_bits(), want.to_bits(), "{codegen:?}");
        }
    }

    /// Panels split the nonzeros by column range without losing or moving any, and the fused
    /// kernels over them equal the kernels on the whole matrix to rounding (bit for bit with
    /// one panel), for panels of one column, of a few, of every column and wider.
    #[test]
    fn column_panels_partition_the_nonzeros_and_the_fused_kernels_agree_over_them() {
        let s = erdos_renyi(31, 45, 6, 11, Par::Seq).unwrap();
        let st = Transposed::new(&s).t;
        let (a, b) = (Dense::random(31, 9, 1), Dense::random(45, 9, 2));
        let mut want_a = Dense::zeros(31, 9);
        fusedmm_a((&s).into(), &a, &b, &mut want_a, Par::Seq);
        let mut want_b = Dense::zeros(45, 9);
        fusedmm_b((&st).into(), &a, &b, &mut want_b, Par::Seq);
        for width in [1, 4, 16, 45, 100] {
            let panels = ColumnPanels::with_width((&s).into(), width);
            assert_eq!(panels.len(), 45usize.div_ceil(width));
            let mut seen = Vec::new();
            for (p, panel) in panels.panels.iter().enumerate() {
                assert_eq!((panel.nrows(), panel.ncols()), (31, 45));
                for i in 0..31 {
                    let (cols, vals) = panel.row(i);
                    for (&c, &v) in cols.iter().zip(vals) {
                        assert_eq!(c as usize / width, p, "column {c} in panel {p}");
                        seen.push((i, c, v.to_bits()));
                    }
                }
            }
            seen.sort_unstable();
            let mut all: Vec<_> = (0..31)
                .flat_map(|i| {
                    let (cols, vals) = s.row(i);
                    cols.iter()
                        .zip(vals)
                        .map(move |(&c, &v)| (i, c, v.to_bits()))
                        .collect::<Vec<_>>()
                })
                .collect();
            all.sort_unstable();
            assert_eq!(seen, all, "width {width}");
            let st_panels = ColumnPanels::with_width((&st).into(), width);
            for par in [Par::Seq, Par::threads(2)] {
                let mut got_a = Dense::zeros(31, 9);
                fusedmm_a_panels(&panels, &a, &b, &mut got_a, par);
                let mut got_b = Dense::zeros(45, 9);
                fusedmm_b_panels(&st_panels, &a, &b, &mut got_b, par);
                for (got, want) in [(&got_a, &want_a), (&got_b, &want_b)] {
                    if width >= 45 {
                        assert_eq!(bits(got.data()), bits(want.data()), "one panel");
                    }
                    for (g, w) in got.data().iter().zip(want.data()) {
                        assert!((g - w).abs() <= 1e-13 * w.abs().max(1.0), "width {width}");
                    }
                }
            }
        }
        // An empty matrix has one empty panel; an operand within a panel is not cut; a wide one
        // gets several.
        let empty = Csr::new(0, 0, vec![0], vec![], vec![]).unwrap();
        assert_eq!(ColumnPanels::with_width((&empty).into(), 8).len(), 1);
        assert!(ColumnPanels::new((&empty).into(), 8).is_none());
        assert!(ColumnPanels::new((&s).into(), PANEL_BYTES / 8 / 45).is_none());
        let wide = ColumnPanels::new((&s).into(), PANEL_BYTES / 8 / 10).unwrap();
        assert_eq!(wide.len(), 5, "45 columns, 10 to a panel");
    }

    fn bits(x: &[f64]) -> Vec<u64> {
        x.iter().map(|v| v.to_bits()).collect()
    }
}
