//! The forward pass of one multi-head graph attention layer, its sparse work done by SDDMM and
//! SpMM (paper Section VI-E).
//!
//! Graph: the pattern of `adjacency` (`n x n`; values ignored, so weighted or unweighted inputs
//! behave alike; add self-loops with [`with_self_loops`] for GAT's usual "attend to yourself").
//! Features `H` (`n x f`); head `h` has weights `W_h` (`f x r`). For every head:
//! 1. projection `Z = H W_h` (dense, `2 n f r` flops);
//! 2. scores on the edges `e_ij = LeakyReLU(<z_i, z_j> / sqrt(r))`: one SDDMM of `Z` with itself
//!    on the pattern whose values are all `1 / sqrt(r)` (`2 r nnz` flops);
//! 3. edge softmax per row `alpha_ij = exp(e_ij - max_k e_ik) / sum_k exp(e_ik - max_k e_ik)`,
//!    the row maximum subtracted so no exponential overflows (`O(nnz)`);
//! 4. aggregation `out_i = sum_j alpha_ij z_j`: one SpMMA with `alpha` on the pattern
//!    (`2 r nnz` flops).
//!
//! Heads are concatenated (`n x (heads r)`) or averaged (`n x r`); no output nonlinearity.
//!
//! Choice of score. The original GAT (Veličković et al.) scores an edge by
//! `LeakyReLU(<a_src, z_i> + <a_dst, z_j>)`, a sum of two per-node terms that needs no SDDMM at
//! all (two dense mat-vecs and a gather per edge). To make the scores the SDDMM-shaped kernel the
//! paper's application uses, this layer uses the scaled dot-product form of attention (as in
//! transformers and AGNN), `<z_i, z_j> / sqrt(r)`, keeping GAT's LeakyReLU (slope
//! [`GatLayer::negative_slope`], GAT's 0.2 by default; slope 1 gives plain dot-product
//! attention). Steps 2 and 4 cannot be fused into one FusedMM, because the softmax between them
//! needs every score of a row before any `alpha_ij` is known: a distributed backend runs two
//! calls, SDDMM then SpMM (the paper's "no elision" sequence).
//!
//! Softmax and distributions. The softmax needs a whole row's scores. With the serial backend
//! and the 1D algorithm a row's nonzeros live on one rank, so it is local. The 1.5D and 2.5D
//! algorithms split a row's nonzeros over column blocks (the ranks of a fiber, or of a grid
//! row); there a real distributed run would all-reduce each row's maximum and then each row's
//! sum over those ranks (two all-reduces of one word per local row) before scaling. The
//! in-process driver returns the assembled SDDMM output, so this layer computes the softmax on
//! the gathered scores and the counted communication is the two kernels' only.

use super::{matmul, pattern_with_value, AppError, KernelExecution, KernelTimes, SparseOp};
use crate::Dense;
use parbench_common::{Csr, CsrError, Par};
use rayon::prelude::*;
use std::time::Instant;

/// How the heads' outputs are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadCombine {
    /// Side by side: `n x (heads r)`, head `h` in columns `h r .. (h + 1) r`.
    Concat,
    /// The average of the heads: `n x r`.
    Mean,
}

/// One graph attention layer.
#[derive(Clone, Debug, PartialEq)]
pub struct GatLayer {
    /// Per head, `W_h` (`f x r`); every head has the same shape.
    pub weights: Vec<Dense>,
    /// How the heads' outputs are combined.
    pub combine: HeadCombine,
    /// Slope of LeakyReLU for negative scores.
    pub negative_slope: f64,
}

impl GatLayer {
    /// `heads` heads of Glorot-uniform weights (`f x r`, uniform in `+-sqrt(6 / (f + r))`),
    /// head `h` from stream `h` of `seed`; slope 0.2.
    pub fn random(f: usize, r: usize, heads: usize, combine: HeadCombine, seed: u64) -> GatLayer {
        let scale = (6.0 / (f + r).max(1) as f64).sqrt();
        let weights = (0..heads)
            .map(|h| {
                let mut w = Dense::random(f, r, seed.wrapping_add(h as u64));
                w.data_mut().iter_mut().for_each(|x| *x *= scale);
                w
            })
            .collect();
        GatLayer {
            weights,
            combine,
            negative_slope: 0.2,
        }
    }

    /// The width `r` of a head (0 without heads).
    pub fn head_width(&self) -> usize {
        self.weights.first().map_or(0, |w| w.cols())
    }

    fn validate(&self, features: &Dense) -> Result<(), AppError> {
        let Some(first) = self.weights.first() else {
            return Err(AppError::Parameter(
                "a GAT layer needs at least one head".into(),
            ));
        };
        if first.cols() == 0 {
            return Err(AppError::Parameter(
                "GAT head width must be at least 1".into(),
            ));
        }
        for (h, w) in self.weights.iter().enumerate() {
            if w.rows() != features.cols() || w.cols() != first.cols() {
                return Err(AppError::Parameter(format!(
                    "head {h} weights are {} x {}, expected {} x {} (features have {} columns)",
                    w.rows(),
                    w.cols(),
                    features.cols(),
                    first.cols(),
                    features.cols()
                )));
            }
        }
        if !self.negative_slope.is_finite() {
            return Err(AppError::Parameter(format!(
                "LeakyReLU slope must be finite, got {}",
                self.negative_slope
            )));
        }
        Ok(())
    }

    /// The width of the layer's output.
    pub fn output_width(&self) -> usize {
        match self.combine {
            HeadCombine::Concat => self.weights.len() * self.head_width(),
            HeadCombine::Mean => self.head_width(),
        }
    }
}

/// Where a forward pass spent its time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GatTimes {
    /// `Z = H W_h` for every head.
    pub projection_seconds: f64,
    /// Scores (SDDMM).
    pub sddmm: KernelTimes,
    /// LeakyReLU and edge softmax.
    pub softmax_seconds: f64,
    /// Aggregation (SpMM).
    pub spmm: KernelTimes,
    /// Everything else (combining heads, setup).
    pub other_seconds: f64,
    /// Wall time of the whole forward pass.
    pub total_seconds: f64,
}

/// The result of a forward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct GatOutput {
    /// `n x output_width`.
    pub out: Dense,
    /// Per head, `alpha` in the order of the adjacency's nonzeros.
    pub attention: Vec<Vec<f64>>,
    /// Where the time went.
    pub times: GatTimes,
}

/// The adjacency pattern with the diagonal added (value 1 where it was missing).
pub fn with_self_loops(adjacency: &Csr) -> Result<Csr, CsrError> {
    let n = adjacency.nrows().min(adjacency.ncols());
    let mut triplets = Vec::with_capacity(adjacency.nnz() + n);
    for i in 0..adjacency.nrows() {
        let (cols, vals) = adjacency.row(i);
        triplets.extend(cols.iter().zip(vals).map(|(&j, &v)| (i, j as usize, v)));
        if i < n && cols.binary_search(&(i as u32)).is_err() {
            triplets.push((i, i, 1.0));
        }
    }
    Csr::from_triplets(adjacency.nrows(), adjacency.ncols(), &triplets)
}

/// The forward pass of `layer` on the graph `adjacency` with node features `features`.
pub fn gat_forward(
    adjacency: &Csr,
    features: &Dense,
    layer: &GatLayer,
    backend: KernelExecution,
) -> Result<GatOutput, AppError> {
    let start = Instant::now();
    layer.validate(features)?;
    let n = adjacency.nrows();
    if adjacency.ncols() != n || features.rows() != n {
        return Err(AppError::Parameter(format!(
            "adjacency is {} x {} and features have {} rows: need n x n and n rows",
            adjacency.nrows(),
            adjacency.ncols(),
            features.rows()
        )));
    }
    let par = match backend {
        KernelExecution::Serial(par) | KernelExecution::Distributed { par, .. } => par,
    };
    let r = layer.head_width();
    let op = SparseOp::new(
        backend,
        pattern_with_value(adjacency, 1.0 / (r as f64).sqrt())?,
    )?;
    let mut times = GatTimes::default();
    let mut out = Dense::zeros(n, layer.output_width());
    let mut attention = Vec::with_capacity(layer.weights.len());
    let heads = layer.weights.len();
    for (h, w) in layer.weights.iter().enumerate() {
        let t = Instant::now();
        let z = matmul(features, w, par);
        times.projection_seconds += t.elapsed().as_secs_f64();

        let mut scores = op.sddmm(&z, &z, &mut times.sddmm)?;

        let t = Instant::now();
        edge_softmax(adjacency.indptr(), &mut scores, layer.negative_slope, par);
        times.softmax_seconds += t.elapsed().as_secs_f64();

        let head_out = op.spmm_a(Some(&scores), &z, &mut times.spmm)?;

        let t = Instant::now();
        for i in 0..n {
            let src = head_out.row(i);
            match layer.combine {
                HeadCombine::Concat => out.row_mut(i)[h * r..(h + 1) * r].copy_from_slice(src),
                HeadCombine::Mean => {
                    for (o, s) in out.row_mut(i).iter_mut().zip(src) {
                        *o += s / heads as f64;
                    }
                }
            }
        }
        attention.push(scores);
        times.other_seconds += t.elapsed().as_secs_f64();
    }
    times.total_seconds = start.elapsed().as_secs_f64();
    times.other_seconds = times.total_seconds
        - times.projection_seconds
        - times.sddmm.seconds
        - times.softmax_seconds
        - times.spmm.seconds;
    Ok(GatOutput {
        out,
        attention,
        times,
    })
}

/// Replaces the scores of every row (rows given by `indptr`) by LeakyReLU then softmax over the
/// row, in place.
fn edge_softmax(indptr: &[usize], values: &mut [f64], negative_slope: f64, par: Par) {
    let mut rows = Vec::with_capacity(indptr.len().saturating_sub(1));
    let mut rest = values;
    for w in indptr.windows(2) {
        let (row, tail) = rest.split_at_mut(w[1] - w[0]);
        rows.push(row);
        rest = tail;
    }
    let softmax_row = |row: &mut &mut [f64]| {
        let mut max = f64::NEG_INFINITY;
        for e in row.iter_mut() {
            if *e < 0.0 {
                *e *= negative_slope;
            }
            max = max.max(*e);
        }
        let mut sum = 0.0;
        for e in row.iter_mut() {
            *e = (*e - max).exp();
            sum += *e;
        }
        // The maximum contributes exp(0) = 1, so sum >= 1.
        for e in row.iter_mut() {
            *e /= sum;
        }
    };
    match par {
        Par::Seq => rows.iter_mut().for_each(softmax_row),
        Par::Rayon(_) => par.install(|| rows.par_iter_mut().for_each(softmax_row)),
    }
}

/// The forward pass on dense arrays, for the tests: the adjacency expanded to an `n x n` mask,
/// every score computed for every masked pair, softmax and aggregation by plain loops. Cost
/// `O(n^2 r + n f r)` per head; only for small graphs.
pub fn reference_forward(adjacency: &Csr, features: &Dense, layer: &GatLayer) -> Dense {
    let n = adjacency.nrows();
    let r = layer.head_width();
    let heads = layer.weights.len();
    let mut mask = vec![false; n * n];
    for i in 0..n {
        for &j in adjacency.row(i).0 {
            mask[i * n + j as usize] = true;
        }
    }
    let width = match layer.combine {
        HeadCombine::Concat => heads * r,
        HeadCombine::Mean => r,
    };
    let mut out = Dense::zeros(n, width);
    for (h, w) in layer.weights.iter().enumerate() {
        let mut z = vec![0.0; n * r];
        for i in 0..n {
            for c in 0..r {
                let mut acc = 0.0;
                for k in 0..features.cols() {
                    acc += features.get(i, k) * w.get(k, c);
                }
                z[i * r + c] = acc;
            }
        }
        for i in 0..n {
            let mut e = vec![f64::NEG_INFINITY; n];
            for j in 0..n {
                if mask[i * n + j] {
                    let dot: f64 = (0..r).map(|c| z[i * r + c] * z[j * r + c]).sum();
                    let s = dot / (r as f64).sqrt();
                    e[j] = if s < 0.0 { layer.negative_slope * s } else { s };
                }
            }
            let max = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue;
            }
            let total: f64 = e.iter().map(|&x| (x - max).exp()).sum();
            for c in 0..r {
                let mut acc = 0.0;
                for j in 0..n {
                    if mask[i * n + j] {
                        acc += (e[j] - max).exp() / total * z[j * r + c];
                    }
                }
                match layer.combine {
                    HeadCombine::Concat => out.row_mut(i)[h * r + c] = acc,
                    HeadCombine::Mean => out.row_mut(i)[c] += acc / heads as f64,
                }
            }
        }
    }
    out
}
