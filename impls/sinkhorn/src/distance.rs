//! The steps every variant shares: the query's distance matrix, the word-major kernel arrays, the
//! per-document `x`/`u` update with the tolerance rule, the iteration driver, and flop counting.
//!
//! Layout: every per-query array is *word-major* ("on-the-fly transpose" in the paper): row `k`
//! holds the `v_s` values of one vocabulary word, padded with zeros to `stride` (a multiple of
//! [`LANES`]), so a kernel touching one nonzero `(word, doc)` reads two unit-stride rows of
//! `stride` values and never a column. `x` and `u` are stored document-major (`N x stride`) for
//! the same reason. The padding entries of `K` are 0 and those of `u` stay 0, so padded lanes add
//! exact zeros to every dot product and the results do not depend on the padding.
//!
//! Cost of the shared phases for `n_w` selected words and embedding dimension `d`:
//! - distance: `2 n_w v_s d` flops plus `2 n_w d` for the norms. With AVX-512 an in-place
//!   microkernel ([`crate::distance_avx512`]) reads each embedding row once (91 MB at the paper's
//!   shape) instead of gathering the rows and letting a GEMM pack them again (three passes); at
//!   the paper's shape it runs at ~100 GFLOP/s on 2 threads (bandwidth-bound), ~60 on one.
//!   Elsewhere, one GEMM per block of words.
//! - precompute: `n_w v_s` exponentials, vectorized ([`crate::fast_exp`], within 1 ulp of std's),
//!   plus two products each; the four `n_w x stride` arrays come from [`ZeroedBuf`] (2 MB pages,
//!   already zero) since page faults on fresh 4 KB pages cost more than the arithmetic.
//! - update: `O(v_s)` per active document and iteration (its reciprocals vectorized).

pub use crate::buffer::ZeroedBuf;
use crate::fast_exp;
use crate::problem::{Control, IterationReport, PhaseTimes, SinkhornParams, WmdError, WmdProblem};
use parbench_common::{Csr, Par};
use rayon::prelude::*;

/// The threads of one solve: a rayon pool built once (parallel regions then cost an `install`,
/// not a pool construction each), or nothing for a sequential run.
pub struct Pool {
    pool: Option<rayon::ThreadPool>,
    threads: usize,
}

impl Pool {
    /// A pool of `par.degree()` threads; a pool that cannot be built falls back to the caller's
    /// thread (still correct, only slower).
    pub fn new(par: Par) -> Pool {
        let threads = par.degree();
        let pool = if threads > 1 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()
        } else {
            None
        };
        let threads = if pool.is_some() { threads } else { 1 };
        Pool { pool, threads }
    }

    /// Threads available (1 when sequential).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `op` on the calling thread with a scope whose spawned tasks run on the pool's threads
    /// (rayon's global pool when sequential, so a sequential caller should spawn nothing and not
    /// call this): for a persistent parallel region where the caller is one of the workers.
    pub fn in_place_scope<'s, R>(&self, op: impl FnOnce(&rayon::Scope<'s>) -> R) -> R {
        match &self.pool {
            Some(pool) => pool.in_place_scope(op),
            None => rayon::in_place_scope(op),
        }
    }

    /// Runs `f` inside the pool (or directly when sequential).
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// Width of the fixed-size chunks in the dot products and updates (one AVX2 vector of f64).
pub const LANES: usize = 4;

/// Words per GEMM block of the distance computation: 256 embeddings of d = 300 are 600 KB, so a
/// gathered block stays in L2 while the GEMM reads it.
const DISTANCE_BLOCK: usize = 256;

/// Below this fraction of `|a|^2 + |b|^2`, the GEMM form `|a|^2 + |b|^2 - 2 a.b` has lost too many
/// digits to cancellation (its absolute error is about `1e-16 (|a|^2 + |b|^2)`), so the squared
/// distance is recomputed directly. At 1e-4 the GEMM form keeps a relative error below ~1e-12,
/// enough for the 1e-10 agreement the tests demand; real embeddings almost never come this close
/// except for identical words, which then get exactly 0.
const CANCELLATION_RATIO: f64 = 1e-4;

/// `v_s` rounded up to a multiple of [`LANES`].
pub fn padded_stride(vs: usize) -> usize {
    vs.div_ceil(LANES) * LANES
}

/// Dot product of two padded rows (portable kernel); the reduction order is fixed (lane-wise,
/// then a fixed tree), so every caller on the same rows gets the same bits.
#[inline(always)]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    Dynamic.dot(a, b)
}

/// `y += alpha * x` over padded rows (portable kernel).
#[inline(always)]
pub fn axpy(y: &mut [f64], alpha: f64, x: &[f64]) {
    Dynamic.axpy(y, alpha, x)
}

/// The two row operations of every Sinkhorn kernel, on rows of `stride` values (a multiple of
/// [`LANES`]). Implementations differ only in how they are compiled: [`Fixed`] knows the stride
/// at compile time (fully unrolled), [`Dynamic`] does not, and `Avx2` (x86-64 only, built only
/// by [`dispatch`] after checking the CPU) uses AVX2 vectors with fused multiply-adds. All use the
/// same lane-wise order, so results differ between the portable and the FMA kernels only by the
/// fused roundings, and are identical for every variant on one machine.
pub trait RowKernel: Copy + Send + Sync {
    fn dot(self, a: &[f64], b: &[f64]) -> f64;
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]);
}

/// Portable kernel for rows of exactly `S` values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fixed<const S: usize>;

/// Portable kernel for rows of any multiple of [`LANES`] values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dynamic;

#[inline(always)]
fn dot_lanes(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; LANES];
    for (ca, cb) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += ca[l] * cb[l];
        }
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3])
}

#[inline(always)]
fn axpy_lanes(y: &mut [f64], alpha: f64, x: &[f64]) {
    for (cy, cx) in y.chunks_exact_mut(LANES).zip(x.chunks_exact(LANES)) {
        for l in 0..LANES {
            cy[l] += alpha * cx[l];
        }
    }
}

impl RowKernel for Dynamic {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        dot_lanes(a, b)
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        axpy_lanes(y, alpha, x)
    }
}

impl<const S: usize> RowKernel for Fixed<S> {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        dot_lanes(&a[..S], &b[..S])
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        axpy_lanes(&mut y[..S], alpha, &x[..S])
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{RowKernel, LANES};
    use std::arch::x86_64::*;

    /// AVX2 + FMA kernel for rows of `S` values (`S = 0`: any multiple of 4, read from the slice).
    /// The private field keeps it from being built outside [`super::dispatch`], which checks the
    /// CPU first; that is what makes the intrinsics below sound.
    #[derive(Clone, Copy, Debug)]
    pub struct Avx2<const S: usize>(());

    impl<const S: usize> Avx2<S> {
        /// # Safety
        /// The CPU must support AVX2 and FMA.
        #[inline(always)]
        pub(super) unsafe fn new() -> Self {
            Avx2(())
        }
    }

    impl<const S: usize> RowKernel for Avx2<S> {
        #[inline(always)]
        fn dot(self, a: &[f64], b: &[f64]) -> f64 {
            let n = if S == 0 { a.len() } else { S };
            assert!(a.len() >= n && b.len() >= n && n % LANES == 0);
            // SAFETY: an `Avx2` exists only after the AVX2 + FMA check (see `new`); every load
            // reads 4 values at `4 c + 4 <= n`, inside both slices (asserted above).
            unsafe {
                let mut acc = _mm256_setzero_pd();
                for c in 0..n / LANES {
                    let x = _mm256_loadu_pd(a.as_ptr().add(c * LANES));
                    let y = _mm256_loadu_pd(b.as_ptr().add(c * LANES));
                    acc = _mm256_fmadd_pd(x, y, acc);
                }
                // (a0 + a2) + (a1 + a3), the portable kernel's order.
                let pair = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
                _mm_cvtsd_f64(pair) + _mm_cvtsd_f64(_mm_unpackhi_pd(pair, pair))
            }
        }

        #[inline(always)]
        fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
            let n = if S == 0 { y.len() } else { S };
            assert!(y.len() >= n && x.len() >= n && n % LANES == 0);
            // SAFETY: as in `dot`; loads and stores stay inside the asserted lengths.
            unsafe {
                let a = _mm256_set1_pd(alpha);
                for c in 0..n / LANES {
                    let py = y.as_mut_ptr().add(c * LANES);
                    let v = _mm256_fmadd_pd(
                        a,
                        _mm256_loadu_pd(x.as_ptr().add(c * LANES)),
                        _mm256_loadu_pd(py),
                    );
                    _mm256_storeu_pd(py, v);
                }
            }
        }
    }
}

/// A kernel body generic over the row kernel, so that [`dispatch`] can compile it once per
/// instruction set and stride.
pub trait KernelTask {
    type Output;
    fn run<K: RowKernel>(self, kernel: K) -> Self::Output;
}

/// Whether the AVX2 + FMA kernels can run here (checked once, then cached by std).
#[cfg(target_arch = "x86_64")]
fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

macro_rules! by_stride {
    ($stride:expr, $task:expr, $kernel:ident) => {
        match $stride {
            4 => $task.run($kernel::<4>()),
            8 => $task.run($kernel::<8>()),
            12 => $task.run($kernel::<12>()),
            16 => $task.run($kernel::<16>()),
            20 => $task.run($kernel::<20>()),
            24 => $task.run($kernel::<24>()),
            28 => $task.run($kernel::<28>()),
            32 => $task.run($kernel::<32>()),
            _ => $task.run($kernel::<0>()),
        }
    };
}

#[inline(always)]
fn portable<const S: usize>() -> impl RowKernel {
    PortableKernel::<S>
}

/// `Fixed<S>`, or `Dynamic` behaviour for `S = 0`.
#[derive(Clone, Copy, Debug)]
struct PortableKernel<const S: usize>;

impl<const S: usize> RowKernel for PortableKernel<S> {
    #[inline(always)]
    fn dot(self, a: &[f64], b: &[f64]) -> f64 {
        if S == 0 {
            Dynamic.dot(a, b)
        } else {
            Fixed::<S>.dot(a, b)
        }
    }
    #[inline(always)]
    fn axpy(self, y: &mut [f64], alpha: f64, x: &[f64]) {
        if S == 0 {
            Dynamic.axpy(y, alpha, x)
        } else {
            Fixed::<S>.axpy(y, alpha, x)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dispatch_fma<T: KernelTask>(stride: usize, task: T) -> T::Output {
    #[inline(always)]
    fn fma<const S: usize>() -> avx2::Avx2<S> {
        // SAFETY: only reached from `dispatch_fma`, which runs only after `has_fma()`.
        unsafe { avx2::Avx2::<S>::new() }
    }
    by_stride!(stride, task, fma)
}

/// Runs `task` with the best row kernel for this CPU and `stride`: AVX2 + FMA vectors when
/// available (the crate is built for baseline x86-64, where the compiler would emit scalar SSE2
/// code for these short rows), specialized for strides up to 32 (queries of up to 32 words).
/// Call it inside each thread's work: target features do not cross into rayon closures.
#[inline]
pub fn dispatch<T: KernelTask>(stride: usize, task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above), all `dispatch_fma` needs.
        return unsafe { dispatch_fma(stride, task) };
    }
    by_stride!(stride, task, portable)
}

/// The words a variant needs kernel rows for, with the row pointers of `c` restricted to them.
#[derive(Clone, Debug)]
pub struct WordSet {
    /// Selected vocabulary words, increasing.
    pub words: Vec<u32>,
    /// `row_ptr[k]..row_ptr[k + 1]` are the nonzeros of `c` in word `words[k]` (indices into
    /// `c.indices()` / `c.values()`); length `words.len() + 1`.
    pub row_ptr: Vec<usize>,
}

impl WordSet {
    /// Every word of the vocabulary (the dense baseline).
    pub fn all(c: &Csr) -> WordSet {
        WordSet {
            words: (0..c.nrows() as u32).collect(),
            row_ptr: c.indptr().to_vec(),
        }
    }

    /// Only the words that occur in at least one target document: rows of `M`, `K` for the other
    /// words are never read by a sparse variant, so parbench does not compute them.
    pub fn used(c: &Csr) -> WordSet {
        let indptr = c.indptr();
        let mut words = Vec::new();
        let mut row_ptr = vec![0];
        for w in 0..c.nrows() {
            if indptr[w + 1] > indptr[w] {
                words.push(w as u32);
                row_ptr.push(indptr[w + 1]);
            }
        }
        WordSet { words, row_ptr }
    }

    /// `map[word]` = position of `word` in `words`, `u32::MAX` for words not selected.
    pub fn position_map(&self, vocab: usize) -> Vec<u32> {
        let mut map = vec![u32::MAX; vocab];
        for (k, &w) in self.words.iter().enumerate() {
            map[w as usize] = k as u32;
        }
        map
    }
}

/// The query's kernel arrays, word-major, for a [`WordSet`].
#[derive(Clone, Debug)]
pub struct QueryKernels {
    /// Query words `v_s`.
    pub vs: usize,
    /// Row length of every array (`v_s` padded).
    pub stride: usize,
    /// `K^T`: row `k` is `exp(-lambda M[:, words[k]])`.
    pub kt: ZeroedBuf,
    /// `(K / r)^T`: row `k` is `K[s, words[k]] / r[s]`.
    pub kr: ZeroedBuf,
    /// `(K .* M)^T`.
    pub km: ZeroedBuf,
}

impl QueryKernels {
    #[inline(always)]
    pub fn kt_row(&self, k: usize) -> &[f64] {
        &self.kt[k * self.stride..(k + 1) * self.stride]
    }
    #[inline(always)]
    pub fn kr_row(&self, k: usize) -> &[f64] {
        &self.kr[k * self.stride..(k + 1) * self.stride]
    }
    #[inline(always)]
    pub fn km_row(&self, k: usize) -> &[f64] {
        &self.km[k * self.stride..(k + 1) * self.stride]
    }
}

/// Words per parallel task of the distance computation.
const DISTANCE_TASK_WORDS: usize = 256;

/// Distances between the query words and `words`, as an `words.len() x stride` word-major matrix
/// (padding 0). With AVX-512 the in-place microkernel of [`crate::distance_avx512`] reads each
/// embedding row once; elsewhere a GEMM per block of [`DISTANCE_BLOCK`] words (gathered first when
/// not consecutive). Tasks of words are spread over the pool's threads.
pub fn query_distances(problem: &WmdProblem, words: &[u32], pool: &Pool) -> ZeroedBuf {
    #[cfg(target_arch = "x86_64")]
    if crate::distance_avx512::available() {
        return query_distances_avx512(problem, words, pool);
    }
    query_distances_gemm(problem, words, pool)
}

/// The query's embeddings (`v_s x d` row-major) and their squared norms.
fn query_vectors(problem: &WmdProblem) -> (Vec<f64>, Vec<f64>) {
    let d = problem.dim();
    let query_vecs: Vec<f64> = problem
        .query()
        .iter()
        .flat_map(|&(w, _)| problem.vec(w as usize).iter().copied())
        .collect();
    let query_norms: Vec<f64> = query_vecs.chunks_exact(d).map(squared_norm).collect();
    (query_vecs, query_norms)
}

#[cfg(target_arch = "x86_64")]
fn query_distances_avx512(problem: &WmdProblem, words: &[u32], pool: &Pool) -> ZeroedBuf {
    use crate::distance_avx512::{distances, QueryPack};
    let stride = padded_stride(problem.query().len());
    let (query_vecs, query_norms) = query_vectors(problem);
    let pack = QueryPack::new(&query_vecs, &query_norms, problem.dim(), CANCELLATION_RATIO);
    let vecs = problem.vecs();
    let mut out = ZeroedBuf::zeroed(words.len() * stride);
    let task = |(words, out): (&[u32], &mut [f64])| {
        // SAFETY: `available()` said the CPU has AVX-512F (checked by the caller); the target
        // feature does not cross into rayon's closure, hence the call in each task.
        unsafe { distances(&pack, vecs, words, stride, out) }
    };
    let tasks = words
        .chunks(DISTANCE_TASK_WORDS)
        .zip(out.chunks_mut(DISTANCE_TASK_WORDS * stride));
    if pool.threads() > 1 && words.len() > DISTANCE_TASK_WORDS {
        let tasks: Vec<_> = tasks.collect();
        pool.run(|| tasks.into_par_iter().for_each(task));
    } else {
        tasks.for_each(task);
    }
    out
}

/// The portable path of [`query_distances`]: one GEMM per block of words.
pub(crate) fn query_distances_gemm(problem: &WmdProblem, words: &[u32], pool: &Pool) -> ZeroedBuf {
    let d = problem.dim();
    let vs = problem.query().len();
    let stride = padded_stride(vs);
    let vecs = problem.vecs();
    let (query_vecs, query_norms) = query_vectors(problem);
    let mut out = ZeroedBuf::zeroed(words.len() * stride);

    // `gathered` is reused across the blocks one thread runs: a fresh 600 KB buffer per block
    // would be a fresh mmap, and its page faults cost as much as the copy.
    let block = |gathered: &mut Vec<f64>, (words, out): (&[u32], &mut [f64])| {
        let m = words.len();
        let first = words[0] as usize;
        let contiguous = words[m - 1] as usize - first + 1 == m;
        let lhs: &[f64] = if contiguous {
            &vecs[first * d..(first + m) * d]
        } else {
            gathered.clear();
            for &w in words {
                gathered.extend_from_slice(problem.vec(w as usize));
            }
            gathered
        };
        // SAFETY: dst is `m x vs` inside `out` (m rows of `stride >= vs`), lhs is `m x d`
        // row-major, rhs is `d x vs` read from the `vs x d` row-major query block; all pointers
        // are valid for the extents gemm reads and writes, and `out` is exclusively borrowed.
        unsafe {
            gemm::gemm(
                m,
                vs,
                d,
                out.as_mut_ptr(),
                1,
                stride as isize,
                false,
                lhs.as_ptr(),
                1,
                d as isize,
                query_vecs.as_ptr(),
                d as isize,
                1,
                0.0,
                -2.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        for (row, a) in out.chunks_exact_mut(stride).zip(lhs.chunks_exact(d)) {
            let na = squared_norm(a);
            for s in 0..vs {
                let scale = na + query_norms[s];
                let d2 = scale + row[s];
                row[s] = if d2 <= CANCELLATION_RATIO * scale {
                    direct_distance(a, &query_vecs[s * d..(s + 1) * d])
                } else {
                    d2.sqrt()
                };
            }
        }
    };
    let blocks = words
        .chunks(DISTANCE_BLOCK)
        .zip(out.chunks_mut(DISTANCE_BLOCK * stride));
    if pool.threads() > 1 && words.len() > DISTANCE_BLOCK {
        let blocks: Vec<_> = blocks.collect();
        pool.run(|| blocks.into_par_iter().for_each_init(Vec::new, block));
    } else {
        let mut gathered = Vec::new();
        blocks.for_each(|b| block(&mut gathered, b));
    }
    out
}

/// `|a|^2` with four independent partial sums (vectorizable, unlike a single running sum).
fn squared_norm(a: &[f64]) -> f64 {
    let mut acc = [0.0f64; LANES];
    let chunks = a.chunks_exact(LANES);
    let tail: f64 = chunks.remainder().iter().map(|x| x * x).sum();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l] * c[l];
        }
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail
}

/// `||a - b||` summed term by term (no cancellation): exactly 0 for identical vectors.
pub fn direct_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// `K^T`, `(K / r)^T` and `(K .* M)^T` from the word-major distances (in parallel over words).
pub fn precompute(m: &[f64], query: &[(u32, f64)], lambda: f64, pool: &Pool) -> QueryKernels {
    precompute_arrays(m, query, lambda, pool, true)
}

/// [`precompute`], leaving `kr` empty unless `with_kr` (a variant that divides by `r` itself
/// saves writing a 6 MB array).
fn precompute_arrays(
    m: &[f64],
    query: &[(u32, f64)],
    lambda: f64,
    pool: &Pool,
    with_kr: bool,
) -> QueryKernels {
    let vs = query.len();
    let stride = padded_stride(vs);
    let mut kt = ZeroedBuf::zeroed(m.len());
    let mut kr = ZeroedBuf::zeroed(if with_kr { m.len() } else { 0 });
    let mut km = ZeroedBuf::zeroed(m.len());
    const ROWS: usize = 1024;
    let chunk = ROWS * stride;
    type Rows<'a> = (
        ((&'a [f64], &'a mut [f64]), &'a mut [f64]),
        Option<&'a mut [f64]>,
    );
    let work = |(((m, kt), km), mut kr): Rows| {
        // The exponentials of a whole chunk at once (vectorized, padding included), then the
        // products row by row while the chunk (160 KB) is still in L2.
        for (k, &d) in kt.iter_mut().zip(m) {
            *k = -lambda * d;
        }
        fast_exp::exp_in_place(kt);
        for (row, ((mrow, ktrow), kmrow)) in m
            .chunks_exact(stride)
            .zip(kt.chunks_exact_mut(stride))
            .zip(km.chunks_exact_mut(stride))
            .enumerate()
        {
            for s in 0..vs {
                kmrow[s] = ktrow[s] * mrow[s];
            }
            if let Some(kr) = kr.as_deref_mut() {
                let krrow = &mut kr[row * stride..(row + 1) * stride];
                for s in 0..vs {
                    krrow[s] = ktrow[s] / query[s].1;
                }
            }
            ktrow[vs..].fill(0.0);
        }
    };
    let kr_chunks = kr
        .chunks_mut(chunk)
        .map(Some)
        .chain(std::iter::repeat_with(|| None));
    let chunks = m
        .chunks(chunk)
        .zip(kt.chunks_mut(chunk))
        .zip(km.chunks_mut(chunk))
        .zip(kr_chunks);
    if pool.threads() > 1 && m.len() > chunk {
        let chunks: Vec<_> = chunks.collect();
        pool.run(|| chunks.into_par_iter().for_each(work));
    } else {
        chunks.for_each(work);
    }
    QueryKernels {
        vs,
        stride,
        kt,
        kr,
        km,
    }
}

/// The `distance` and `precompute` phases for a word set, with their flops added to `flops`.
pub fn prepare(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
) -> QueryKernels {
    prepare_arrays(problem, params, words, pool, phases, flops, true)
}

/// [`prepare`] without `(K / r)^T` (left empty) for a variant that multiplies by `K` and divides
/// by `r` afterwards; one product fewer per entry.
pub fn prepare_without_kr(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
) -> QueryKernels {
    prepare_arrays(problem, params, words, pool, phases, flops, false)
}

fn prepare_arrays(
    problem: &WmdProblem,
    params: &SinkhornParams,
    words: &WordSet,
    pool: &Pool,
    phases: &mut PhaseTimes,
    flops: &mut f64,
    with_kr: bool,
) -> QueryKernels {
    let vs = problem.query().len();
    let m = phases.time("distance", || query_distances(problem, &words.words, pool));
    *flops += distance_flops(words.words.len(), vs, problem.dim());
    let kernels = phases.time("precompute", || {
        precompute_arrays(&m, problem.query(), params.lambda, pool, with_kr)
    });
    *flops += precompute_flops(words.words.len(), vs)
        - if with_kr {
            0.0
        } else {
            (words.words.len() * vs) as f64
        };
    kernels
}

/// Flops of the distance GEMM and the norms.
pub fn distance_flops(words: usize, vs: usize, dim: usize) -> f64 {
    (2 * words * vs * dim + 2 * words * dim + 3 * words * vs) as f64
}

/// Flops of the precompute (an exponential counted as one).
pub fn precompute_flops(words: usize, vs: usize) -> f64 {
    (4 * words * vs) as f64
}

/// Flops of one fused SDDMM + SpMM over `nnz` nonzeros: a dot, a division and an axpy each.
pub fn sddmm_spmm_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 1)) as f64
}

/// Flops of the final step over `nnz` nonzeros (two dots, a division, a product) and the sums.
pub fn final_flops(nnz: usize, vs: usize) -> f64 {
    (nnz * (4 * vs + 2)) as f64
}

/// Flops of the `x`/`u` update of `docs` documents (change, copy, reciprocal).
pub fn update_flops(docs: usize, vs: usize) -> f64 {
    (docs * 4 * vs) as f64
}

/// Updates one document after an iteration: checks the new column, measures its change
/// `max_s |x_new - x| / max_s |x_new|`, then `x = x_new`, `u = 1 / x`. Only the first `vs` entries
/// are touched, so the padding of `u` stays 0. A zero or non-finite `x` means `exp(-lambda M)`
/// underflowed somewhere upstream.
///
/// The reciprocals get a loop of their own so that it vectorizes: `v_s` scalar divisions were
/// most of the cost of an update (~50 ns per document). Maxima and quotients are exact, so the
/// results do not depend on how the loops are split.
#[inline]
pub fn update_doc(
    x: &mut [f64],
    u: &mut [f64],
    x_new: &[f64],
    vs: usize,
    lambda: f64,
) -> Result<f64, WmdError> {
    let (x, u, x_new) = (&mut x[..vs], &mut u[..vs], &x_new[..vs]);
    let mut diff = 0.0f64;
    let mut scale = 0.0f64;
    for (&xn, &xo) in x_new.iter().zip(x.iter()) {
        if !(xn.is_finite() && xn > 0.0) {
            return Err(WmdError::Underflow { lambda });
        }
        diff = diff.max((xn - xo).abs());
        scale = scale.max(xn);
    }
    x.copy_from_slice(x_new);
    for (u, &xn) in u.iter_mut().zip(x_new) {
        *u = 1.0 / xn;
    }
    Ok(diff / scale)
}

/// [`update_doc`] for an active document followed by the tolerance rule: returns the change and
/// whether the document stays active (`active` is cleared when it converged).
#[inline]
pub fn settle_doc(
    x: &mut [f64],
    u: &mut [f64],
    x_new: &[f64],
    active: &mut bool,
    vs: usize,
    tol: Option<f64>,
    lambda: f64,
) -> Result<(f64, bool), WmdError> {
    let change = update_doc(x, u, x_new, vs, lambda)?;
    let converged = tol.is_some_and(|t| change <= t);
    if converged {
        *active = false;
    }
    Ok((change, !converged))
}

/// Runs `f` compiled for AVX-512F (or AVX2) when the CPU has it, so that the plain loops it
/// inlines (the updates, the gathers) use the wide vectors; the crate itself targets baseline
/// x86-64. `f` must not rely on anything but ordinary arithmetic: results are the same either way.
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { avx512(f) };
        }
        if has_fma() {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// The starting point `x = 1 / v_s`, `u = 1 / x` for one document.
#[inline]
pub fn init_doc(x: &mut [f64], u: &mut [f64], vs: usize) {
    for s in 0..vs {
        x[s] = 1.0 / vs as f64;
        u[s] = 1.0 / x[s];
    }
}

/// `x`, `u` and the scratch `x_new` of every document, document-major (`N x stride`), with the
/// tolerance bookkeeping.
#[derive(Clone, Debug)]
pub struct DocState {
    pub vs: usize,
    pub stride: usize,
    pub x: ZeroedBuf,
    pub u: ZeroedBuf,
    /// Where an iteration accumulates the new `x` of active documents.
    pub x_new: ZeroedBuf,
    /// Documents still iterating.
    pub active: Vec<bool>,
    pub num_active: usize,
    /// Nonzeros of the active documents (the work of one iteration).
    pub active_nnz: usize,
    doc_len: Vec<usize>,
    tol: Option<f64>,
    lambda: f64,
}

impl DocState {
    pub fn new(problem: &WmdProblem, params: &SinkhornParams) -> DocState {
        let n = problem.num_docs();
        let vs = problem.query().len();
        let stride = padded_stride(vs);
        let mut x = ZeroedBuf::zeroed(n * stride);
        let mut u = ZeroedBuf::zeroed(n * stride);
        for (x, u) in x.chunks_exact_mut(stride).zip(u.chunks_exact_mut(stride)) {
            init_doc(x, u, vs);
        }
        let doc_len: Vec<usize> = problem
            .docs_by_doc()
            .indptr()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        DocState {
            vs,
            stride,
            x,
            u,
            x_new: ZeroedBuf::zeroed(n * stride),
            active: vec![true; n],
            num_active: n,
            active_nnz: problem.nnz(),
            doc_len,
            tol: params.tol,
            lambda: params.lambda,
        }
    }

    /// Sets `x_new` of the active documents to 0 (inactive ones are left alone).
    pub fn clear_new(&mut self) {
        for (xn, &a) in self.x_new.chunks_exact_mut(self.stride).zip(&self.active) {
            if a {
                xn.fill(0.0);
            }
        }
    }

    /// Moves `x_new` into `x` and `u` for every active document and freezes the converged ones.
    /// Returns the largest change over the documents that ran this iteration.
    pub fn finish_iteration(&mut self, pool: &Pool) -> Result<f64, WmdError> {
        let (vs, stride, tol, lambda) = (self.vs, self.stride, self.tol, self.lambda);
        const DOCS: usize = 256;
        type Docs<'a> = (
            (((&'a mut [f64], &'a mut [f64]), &'a [f64]), &'a mut [bool]),
            &'a [usize],
        );
        let work = |((((x, u), xn), active), len): Docs| -> Result<(f64, usize, usize), WmdError> {
            vectorized(
                #[inline(always)]
                || -> Result<(f64, usize, usize), WmdError> {
                    let mut max_change = 0.0f64;
                    let (mut still, mut nnz) = (0, 0);
                    for ((((x, u), xn), a), &len) in x
                        .chunks_exact_mut(stride)
                        .zip(u.chunks_exact_mut(stride))
                        .zip(xn.chunks_exact(stride))
                        .zip(active.iter_mut())
                        .zip(len)
                    {
                        if !*a {
                            continue;
                        }
                        let change = update_doc(x, u, xn, vs, lambda)?;
                        max_change = max_change.max(change);
                        if tol.is_some_and(|t| change <= t) {
                            *a = false;
                        } else {
                            still += 1;
                            nnz += len;
                        }
                    }
                    Ok((max_change, still, nnz))
                },
            )
        };
        let many = self.active.len() > DOCS;
        let chunks = self
            .x
            .chunks_mut(DOCS * stride)
            .zip(self.u.chunks_mut(DOCS * stride))
            .zip(self.x_new.chunks(DOCS * stride))
            .zip(self.active.chunks_mut(DOCS))
            .zip(self.doc_len.chunks(DOCS));
        let parts: Vec<(f64, usize, usize)> = if pool.threads() > 1 && many {
            let chunks: Vec<_> = chunks.collect();
            pool.run(|| chunks.into_par_iter().map(work).collect::<Result<_, _>>())?
        } else {
            chunks.map(work).collect::<Result<_, _>>()?
        };
        self.num_active = parts.iter().map(|p| p.1).sum();
        self.active_nnz = parts.iter().map(|p| p.2).sum();
        Ok(parts.iter().fold(0.0, |m, p| m.max(p.0)))
    }

    /// Per-document nonzero counts.
    pub fn doc_lens(&self) -> &[usize] {
        &self.doc_len
    }

    /// The stopping tolerance and lambda (for [`settle_doc`]).
    pub fn tol_and_lambda(&self) -> (Option<f64>, f64) {
        (self.tol, self.lambda)
    }
}

/// The Sinkhorn loop shared by the variants that sweep all documents once per iteration: `step`
/// fills `x_new` of the active documents, then the driver updates `x`, `u`, applies the tolerance,
/// reports, and stops after `max_iter` iterations, when every document has converged, or when the
/// callback says so. Returns the iterations run. `step` returns the flops it did; they and the
/// update's are added to `flops`.
pub fn run_loop(
    params: &SinkhornParams,
    state: &mut DocState,
    pool: &Pool,
    progress: &mut dyn FnMut(&IterationReport) -> Control,
    flops: &mut f64,
    mut step: impl FnMut(&mut DocState) -> Result<f64, WmdError>,
) -> Result<usize, WmdError> {
    let mut iterations = 0;
    while iterations < params.max_iter && state.num_active > 0 {
        *flops += step(state)?;
        *flops += update_flops(state.num_active, state.vs);
        let max_change = state.finish_iteration(pool)?;
        iterations += 1;
        let report = IterationReport {
            iteration: iterations,
            max_iter: params.max_iter,
            active_docs: state.num_active,
            max_change,
        };
        if progress(&report) == Control::Stop {
            break;
        }
    }
    Ok(iterations)
}

/// Rejects a non-finite distance (the final step's own underflow check).
pub fn check_distances(distances: &[f64], lambda: f64) -> Result<(), WmdError> {
    if distances.iter().all(|d| d.is_finite()) {
        Ok(())
    } else {
        Err(WmdError::Underflow { lambda })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parbench_common::Rng;

    /// A problem over `vocab` random words of dimension `dim` with a `vs`-word query (words
    /// `0, 3, 6, ...`) and one document per word, so every word is used; word `vocab - 1` is a
    /// copy of query word 0 (distance exactly 0 by the cancellation fallback).
    fn random_problem(seed: u64, vocab: usize, dim: usize, vs: usize) -> WmdProblem {
        let mut rng = Rng::new(seed);
        let mut vecs: Vec<f64> = (0..vocab * dim).map(|_| rng.normal()).collect();
        let copy = vecs[..dim].to_vec();
        vecs[(vocab - 1) * dim..].copy_from_slice(&copy);
        let query: Vec<(u32, f64)> = (0..vs).map(|s| (3 * s as u32, 1.0 / vs as f64)).collect();
        let triplets: Vec<(usize, usize, f64)> = (0..vocab).map(|w| (w, w, 1.0)).collect();
        let c = Csr::from_triplets(vocab, vocab, &triplets).unwrap();
        WmdProblem::new(vecs, dim, query, c).unwrap()
    }

    #[test]
    fn distance_kernels_agree_with_direct_distances() {
        // Strides below, at and above one 24-column panel; dimensions not multiples of 8; word
        // counts that leave short blocks; both sequential and threaded.
        for (vs, dim, vocab) in [(1, 5, 9), (19, 37, 301), (24, 16, 77), (30, 300, 90)] {
            let p = random_problem(vs as u64, vocab, dim, vs);
            let stride = padded_stride(vs);
            let used = WordSet::used(p.docs_by_word());
            let scattered: Vec<u32> = used.words.iter().copied().filter(|w| w % 4 != 1).collect();
            for threads in [1, 2] {
                let pool = Pool::new(Par::threads(threads));
                for words in [&used.words, &scattered] {
                    let fast = query_distances(&p, words, &pool);
                    let gemm = query_distances_gemm(&p, words, &pool);
                    for (k, &w) in words.iter().enumerate() {
                        for s in 0..stride {
                            let (f, g) = (fast[k * stride + s], gemm[k * stride + s]);
                            if s >= vs {
                                assert_eq!((f, g), (0.0, 0.0), "padding");
                                continue;
                            }
                            let q = p.query()[s].0 as usize;
                            let exact = direct_distance(p.vec(w as usize), p.vec(q));
                            if exact == 0.0 {
                                assert_eq!((f, g), (0.0, 0.0), "word {w} = query word {q}");
                            }
                            assert!((f - exact).abs() <= 1e-12 * exact, "{f} vs {exact}");
                            assert!((g - exact).abs() <= 1e-12 * exact, "{g} vs {exact}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn precompute_matches_std_exp_and_keeps_padding_zero() {
        let p = random_problem(7, 400, 12, 5);
        let words = WordSet::used(p.docs_by_word());
        let pool = Pool::new(Par::Seq);
        let m = query_distances(&p, &words.words, &pool);
        let lambda = 3.0;
        let k = precompute(&m, p.query(), lambda, &pool);
        let stride = k.stride;
        for (i, &d) in m.iter().enumerate() {
            let s = i % stride;
            if s >= k.vs {
                assert_eq!((k.kt[i], k.kr[i], k.km[i]), (0.0, 0.0, 0.0));
                continue;
            }
            let e = (-lambda * d).exp();
            assert!((k.kt[i] - e).abs() <= 4.0 * f64::EPSILON * e);
            assert!((k.kr[i] - e / p.query()[s].1).abs() <= 8.0 * f64::EPSILON * k.kr[i]);
            assert!((k.km[i] - e * d).abs() <= 8.0 * f64::EPSILON * k.km[i]);
        }
    }

    #[test]
    fn padded_dot_and_axpy_ignore_zero_padding() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0];
        let b = [2.0, 2.0, 2.0, 2.0, 2.0, 7.0, 7.0, 7.0];
        assert_eq!(dot(&a, &b), 30.0);
        let mut y = [1.0; 8];
        axpy(&mut y, 2.0, &a);
        assert_eq!(y, [3.0, 5.0, 7.0, 9.0, 11.0, 1.0, 1.0, 1.0]);
        assert_eq!(padded_stride(19), 20);
        assert_eq!(padded_stride(1), 4);
    }

    #[test]
    fn update_reports_relative_change_and_underflow() {
        let mut x = vec![0.5, 0.5, 0.0, 0.0];
        let mut u = vec![2.0, 2.0, 0.0, 0.0];
        let change = update_doc(&mut x, &mut u, &[0.25, 1.0, 0.0, 0.0], 2, 1.0).unwrap();
        assert_eq!(change, 0.5);
        assert_eq!(u, vec![4.0, 1.0, 0.0, 0.0]);
        assert_eq!(
            update_doc(&mut x, &mut u, &[0.0, 1.0, 0.0, 0.0], 2, 3.0),
            Err(WmdError::Underflow { lambda: 3.0 })
        );
    }
}
