//! The FusedMM applications (`../shared/papers/001_*`, Section VI-E and Fig. 9): collaborative
//! filtering by ALS with batched CG, and a multi-head graph attention forward pass, with their
//! sparse work on the serial kernels or on one distributed algorithm of the `fusedmm` crate, and
//! the time split into the sparse kernels' compute, communication and setup and the rest.
//!
//! Variants are the backends: `serial` (the local kernels on the whole matrix: the equivalence
//! reference) and every distributed `algorithm/strategy` of the `fusedmm` family (`1d`,
//! `1.5d-dense-shift/fusion`, ...), on `ranks` in-process ranks with replication `replication`
//! (`1d` always uses 1). The application is the parameter `app` (`als` or `gat`), so one
//! experiment compares every backend on both, and a figure can put `app` on a categorical x.
//! The strategy matters only to FusedMM calls: GAT has none (its softmax sits between the SDDMM
//! and the SpMM), so its `/reuse` and `/fusion` variants are its `/none`.
//!
//! Inputs, from the seed: ALS rates an Erdős-Rényi `rows x cols` matrix with `nnz_per_row`
//! ratings a row, values in `(1, 5]`; GAT runs on an Erdős-Rényi (`generator: er`) or R-MAT
//! (`generator: rmat`, `2^rmat_scale` nodes) graph with self-loops added, node features uniform
//! in `[-1, 1)` (`features` columns) and `heads` Glorot-uniform heads of width `r`,
//! concatenated. Rows and columns are randomly permuted unless `permute: false`.
//!
//! Phases (seconds): for each kind of sparse call the application makes (ALS: `fusedmm` for the
//! CG products, `spmm` for the right-hand sides, `sddmm` for the loss; GAT: `sddmm` for the
//! scores, `spmm` for the aggregation), `<kind>_compute` (the busiest rank's time in local
//! kernels, summed over calls), `<kind>_comm` (the longest time a rank spent in communication
//! calls) and `<kind>_setup` (the rest of those calls' wall time: building the problem, starting
//! the ranks, cutting blocks, assembling the result; clamped at zero, since the busiest rank in
//! compute and the one longest in communication can differ); then GAT's `projection` and
//! `softmax`, and `other` (ALS: CG vector updates and loss sums; GAT: combining heads).
//! Metrics: `words_sent` and `messages_sent` (sum over calls of the busiest rank's counts, exact
//! and machine independent), the same per kind, `sparse_compute_s`, `sparse_comm_s`,
//! `sparse_setup_s` and `dense_s` (the phases summed over kinds, the same columns for both
//! apps), ALS's `initial_loss`, `final_loss`, `loss_ratio` and `cg_steps`, and `gflop_per_s` of
//! the sparse calls over their wall time.
//!
//! Output compared across variants: ALS, the final factors `A` and `B` followed by the loss
//! after every half step divided by the initial loss (all of order one, so the max-norm
//! relative error weighs them alike); GAT, the layer's output matrix.
//!
//! Cost of a run: ALS, `outer_iterations x 2 x (cg_iterations + 1)` FusedMMs of `4 r nnz` flops
//! plus `2 outer + 1` SDDMMs and `2 outer` SpMMs; GAT, per head, a projection of `2 n f r`
//! flops, one SDDMM and one SpMM of `2 r nnz` flops each. With a distributed backend every call
//! also starts `ranks` threads and moves the words the cost model states.

use super::params::{get_f64, get_str, get_usize};
use crate::families::fusedmm::{parse_variant, VARIANTS};
use crate::model::{Family, Measurement, ParamSpec, Params, PreparedInput, Value};
use anyhow::{anyhow, bail, Context, Result};
use fusedmm::apps::als::{self, AlsConfig};
use fusedmm::apps::gat::{self, GatLayer, HeadCombine};
use fusedmm::apps::{Backend, KernelTimes};
use fusedmm::generate::{erdos_renyi, permute, random_permutation, rmat, RmatSpec};
use fusedmm::{flops, Csr, Dense, Kernel, Par};
use std::collections::BTreeMap;
use std::path::Path;

pub struct FusedmmAppsFamily;

/// The backend running the local kernels on the whole matrix (equivalence reference).
pub const SERIAL: &str = "serial";

/// `serial`, then the distributed variants of the `fusedmm` family.
pub fn variants() -> Vec<&'static str> {
    std::iter::once(SERIAL)
        .chain(
            VARIANTS
                .iter()
                .copied()
                .filter(|v| parse_variant(v).is_some()),
        )
        .collect()
}

/// What a point runs: the application and its input, built once per point.
pub enum AppInput {
    Als {
        ratings: Csr,
        config: AlsConfig,
    },
    Gat {
        graph: Csr,
        features: Dense,
        layer: GatLayer,
    },
}

fn get_positive(point: &Params, key: &str, default: usize) -> Result<usize> {
    let v = get_usize(point, key, default)?;
    if v == 0 {
        bail!("parameter {key} must be at least 1");
    }
    Ok(v)
}

/// The application a point names (`app`, default `als`).
pub fn app_of(point: &Params) -> Result<&str> {
    match get_str(point, "app", "als")? {
        app @ ("als" | "gat") => Ok(app),
        other => bail!("unknown app {other:?}; use als or gat"),
    }
}

/// Rows and columns randomly permuted from the seed (rows and columns alike when `square`, so
/// a graph stays the same graph), unless `permute: false`.
fn maybe_permute(point: &Params, s: Csr, seed: u64, square: bool) -> Result<Csr> {
    match point.get("permute") {
        None | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => return Ok(s),
        Some(v) => bail!("parameter permute must be true or false, got {v}"),
    }
    let rows = random_permutation(s.nrows(), seed ^ 0x5eed_0001);
    let cols = if square {
        rows.clone()
    } else {
        random_permutation(s.ncols(), seed ^ 0x5eed_0002)
    };
    Ok(permute(&s, &rows, &cols)?)
}

/// The input of an ALS point: ratings in `(1, 5]` on an ER pattern, and the configuration.
fn als_input(point: &Params, seed: u64) -> Result<AppInput> {
    let rows = get_positive(point, "rows", 1024)?;
    let cols = get_positive(point, "cols", rows)?;
    let per_row = get_positive(point, "nnz_per_row", 16)?;
    let pattern = erdos_renyi(rows, cols, per_row, seed, Par::Seq)?;
    let ratings = fusedmm::kernels::whole::with_values(
        &pattern,
        pattern.values().iter().map(|v| 1.0 + 4.0 * v).collect(),
    )?;
    let ratings = maybe_permute(point, ratings, seed, false)?;
    let config = AlsConfig {
        rank: get_positive(point, "r", 16)?,
        lambda: get_f64(point, "lambda", 0.1)?,
        cg_iterations: get_usize(point, "cg_iterations", 10)?,
        outer_iterations: get_usize(point, "outer_iterations", 3)?,
        cg_tolerance: get_f64(point, "cg_tolerance", 1e-12)?,
        seed: seed.wrapping_add(1),
    };
    Ok(AppInput::Als { ratings, config })
}

/// The input of a GAT point: the graph with self-loops, features and a random layer.
fn gat_input(point: &Params, seed: u64) -> Result<AppInput> {
    let per_row = get_positive(point, "nnz_per_row", 16)?;
    let graph = match get_str(point, "generator", "er")? {
        "er" => {
            let n = get_positive(point, "rows", 1024)?;
            erdos_renyi(n, n, per_row, seed, Par::Seq)?
        }
        "rmat" => {
            let scale = get_usize(point, "rmat_scale", 10)?;
            let scale = u32::try_from(scale).context("rmat_scale is too large")?;
            rmat(&RmatSpec::new(scale, per_row, seed))?
        }
        other => bail!("unknown generator {other:?}; use er or rmat"),
    };
    let graph = gat::with_self_loops(&maybe_permute(point, graph, seed, true)?)?;
    let f = get_positive(point, "features", 32)?;
    let r = get_positive(point, "r", 16)?;
    let heads = get_positive(point, "heads", 4)?;
    let features = Dense::random(graph.nrows(), f, seed.wrapping_add(1));
    let layer = GatLayer::random(f, r, heads, HeadCombine::Concat, seed.wrapping_add(2));
    Ok(AppInput::Gat {
        graph,
        features,
        layer,
    })
}

/// Adds the phases and metrics of one kind of sparse call.
fn account(
    kind: &str,
    t: &KernelTimes,
    phases: &mut BTreeMap<String, f64>,
    metrics: &mut BTreeMap<String, f64>,
) {
    let setup = (t.seconds - t.compute_seconds - t.comm_seconds).max(0.0);
    phases.insert(format!("{kind}_compute"), t.compute_seconds);
    phases.insert(format!("{kind}_comm"), t.comm_seconds);
    phases.insert(format!("{kind}_setup"), setup);
    metrics.insert(format!("{kind}_calls"), t.calls as f64);
    metrics.insert(format!("{kind}_words_sent"), t.words_sent as f64);
    metrics.insert(format!("{kind}_messages_sent"), t.messages_sent as f64);
    for (key, value) in [
        ("sparse_compute_s", t.compute_seconds),
        ("sparse_comm_s", t.comm_seconds),
        ("sparse_setup_s", setup),
        ("sparse_s", t.seconds),
        ("words_sent", t.words_sent as f64),
        ("messages_sent", t.messages_sent as f64),
    ] {
        *metrics.entry(key.to_string()).or_insert(0.0) += value;
    }
}

impl Family for FusedmmAppsFamily {
    fn name(&self) -> &'static str {
        "fusedmm-apps"
    }

    fn variants(&self) -> Vec<&'static str> {
        variants()
    }

    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "app",
                kind: "string",
                help: "als (default: ALS with batched CG) or gat (graph attention forward pass)",
            },
            ParamSpec {
                name: "ranks",
                kind: "integer",
                help: "p, in-process ranks of the distributed variants (default 4)",
            },
            ParamSpec {
                name: "replication",
                kind: "integer",
                help: "c, replication factor (default 1; 1d always uses 1)",
            },
            ParamSpec {
                name: "r",
                kind: "integer",
                help: "ALS rank (factor width) or GAT head width (default 16)",
            },
            ParamSpec {
                name: "rows",
                kind: "integer",
                help:
                    "ALS users (rows of the ratings) or GAT nodes with generator er (default 1024)",
            },
            ParamSpec {
                name: "cols",
                kind: "integer",
                help: "ALS items (default rows)",
            },
            ParamSpec {
                name: "nnz_per_row",
                kind: "integer",
                help: "ratings per user, or edges per node (ER) / R-MAT edge factor (default 16)",
            },
            ParamSpec {
                name: "generator",
                kind: "string",
                help: "GAT graph: er (default) or rmat (2^rmat_scale nodes)",
            },
            ParamSpec {
                name: "rmat_scale",
                kind: "integer",
                help: "log2 of the R-MAT node count (default 10)",
            },
            ParamSpec {
                name: "permute",
                kind: "boolean",
                help: "randomly permute rows and columns (default true)",
            },
            ParamSpec {
                name: "lambda",
                kind: "float",
                help: "ALS regularization (default 0.1)",
            },
            ParamSpec {
                name: "cg_iterations",
                kind: "integer",
                help: "ALS CG iterations per half step (default 10, the paper's)",
            },
            ParamSpec {
                name: "outer_iterations",
                kind: "integer",
                help: "ALS outer iterations, each solving for A then B (default 3)",
            },
            ParamSpec {
                name: "cg_tolerance",
                kind: "float",
                help: "ALS relative residual at which a row's CG stops (default 1e-12)",
            },
            ParamSpec {
                name: "heads",
                kind: "integer",
                help: "GAT attention heads, concatenated (default 4)",
            },
            ParamSpec {
                name: "features",
                kind: "integer",
                help: "GAT input features per node (default 32)",
            },
        ]
    }

    fn prepare(&self, point: &Params, _dataset: Option<&Path>, seed: u64) -> Result<PreparedInput> {
        let input = match app_of(point)? {
            "als" => als_input(point, seed)?,
            _ => gat_input(point, seed)?,
        };
        Ok(Box::new(input))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &Params,
        threads: usize,
    ) -> Result<Measurement> {
        let input = input
            .downcast_ref::<AppInput>()
            .ok_or_else(|| anyhow!("internal: the prepared input is not a FusedMM application"))?;
        let par = Par::threads(threads);
        let parsed = if variant == SERIAL {
            None
        } else {
            Some(
                parse_variant(variant)
                    .ok_or_else(|| anyhow!("unknown fusedmm-apps variant {variant}"))?,
            )
        };
        let backend = match &parsed {
            None => Backend::Serial(par),
            Some((alg, strategy)) => {
                let p = get_positive(point, "ranks", 4)?;
                let c = if alg.name() == "1d" {
                    1
                } else {
                    get_positive(point, "replication", 1)?
                };
                Backend::Distributed {
                    algorithm: &**alg,
                    strategy: *strategy,
                    p,
                    c,
                    par,
                }
            }
        };
        let mut phases = BTreeMap::new();
        let mut metrics = BTreeMap::new();
        let (ranks_used, replication_used) = match backend {
            Backend::Serial(_) => (1, 1),
            Backend::Distributed { p, c, .. } => (p, c),
        };
        metrics.insert("ranks_used".to_string(), ranks_used as f64);
        metrics.insert("replication_used".to_string(), replication_used as f64);
        match input {
            AppInput::Als { ratings, config } => {
                let out = als::als(ratings, config, backend)
                    .with_context(|| format!("ALS on {}", backend.name()))?;
                let t = out.times;
                account("fusedmm", &t.fusedmm, &mut phases, &mut metrics);
                account("spmm", &t.spmm, &mut phases, &mut metrics);
                account("sddmm", &t.sddmm, &mut phases, &mut metrics);
                phases.insert("other".to_string(), t.other_seconds.max(0.0));
                metrics.insert("dense_s".to_string(), t.other_seconds.max(0.0));
                let (nnz, r) = (ratings.nnz(), config.rank);
                let sparse_flops = flops(Kernel::FusedMmA, nnz, r) * t.fusedmm.calls as f64
                    + flops(Kernel::SpmmA, nnz, r) * t.spmm.calls as f64
                    + flops(Kernel::Sddmm, nnz, r) * t.sddmm.calls as f64;
                let sparse_s = t.fusedmm.seconds + t.spmm.seconds + t.sddmm.seconds;
                if sparse_s > 0.0 {
                    metrics.insert("gflop_per_s".to_string(), sparse_flops / sparse_s / 1e9);
                }
                let first = out.loss.first().copied().unwrap_or(0.0);
                let last = out.loss.last().copied().unwrap_or(0.0);
                metrics.insert("nnz".to_string(), nnz as f64);
                metrics.insert("initial_loss".to_string(), first);
                metrics.insert("final_loss".to_string(), last);
                metrics.insert(
                    "loss_ratio".to_string(),
                    if first > 0.0 { last / first } else { 1.0 },
                );
                metrics.insert(
                    "cg_steps".to_string(),
                    out.cg_steps.iter().sum::<usize>() as f64,
                );
                // Losses relative to the first, so that they weigh like the O(1) factors in
                // the max-norm comparison.
                let scale = if first > 0.0 { first } else { 1.0 };
                let output = out
                    .a
                    .data()
                    .iter()
                    .chain(out.b.data())
                    .copied()
                    .chain(out.loss.iter().map(|l| l / scale))
                    .collect();
                Ok(Measurement {
                    wall_time_s: t.total_seconds,
                    phases_s: phases,
                    metrics,
                    output,
                })
            }
            AppInput::Gat {
                graph,
                features,
                layer,
            } => {
                let out = gat::gat_forward(graph, features, layer, backend)
                    .with_context(|| format!("GAT on {}", backend.name()))?;
                let t = out.times;
                account("sddmm", &t.sddmm, &mut phases, &mut metrics);
                account("spmm", &t.spmm, &mut phases, &mut metrics);
                phases.insert("projection".to_string(), t.projection_seconds);
                phases.insert("softmax".to_string(), t.softmax_seconds);
                phases.insert("other".to_string(), t.other_seconds.max(0.0));
                metrics.insert(
                    "dense_s".to_string(),
                    t.projection_seconds + t.softmax_seconds + t.other_seconds.max(0.0),
                );
                let (nnz, r) = (graph.nnz(), layer.head_width());
                let sparse_flops = flops(Kernel::Sddmm, nnz, r) * t.sddmm.calls as f64
                    + flops(Kernel::SpmmA, nnz, r) * t.spmm.calls as f64;
                let sparse_s = t.sddmm.seconds + t.spmm.seconds;
                if sparse_s > 0.0 {
                    metrics.insert("gflop_per_s".to_string(), sparse_flops / sparse_s / 1e9);
                }
                metrics.insert("nnz".to_string(), nnz as f64);
                Ok(Measurement {
                    wall_time_s: t.total_seconds,
                    phases_s: phases,
                    metrics,
                    output: out.out.data().to_vec(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(pairs: &[(&str, Value)]) -> Params {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn variants_are_serial_and_every_distributed_backend() {
        let v = variants();
        assert_eq!(v[0], SERIAL);
        assert!(v.contains(&"1d"));
        assert!(v.contains(&"1.5d-dense-shift/fusion"));
        assert!(!v.contains(&"local") && !v.contains(&"local-unfused"));
        assert_eq!(
            v.len(),
            1 + fusedmm::algorithms()
                .iter()
                .map(|a| a.strategies().len())
                .sum::<usize>()
        );
    }

    #[test]
    fn unknown_app_and_bad_grid_are_errors() {
        let family = FusedmmAppsFamily;
        let bad = point(&[("app", Value::Str("svd".into()))]);
        let err = family.prepare(&bad, None, 1).err().unwrap().to_string();
        assert!(err.contains("als or gat"), "{err}");
        let p = point(&[
            ("app", Value::Str("gat".into())),
            ("rows", Value::Int(20)),
            ("nnz_per_row", Value::Int(3)),
            ("ranks", Value::Int(6)),
            ("replication", Value::Int(4)),
        ]);
        let input = family.prepare(&p, None, 1).unwrap();
        let err = family
            .run("1.5d-dense-shift/none", &input, &p, 1)
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains("1.5d-dense-shift"), "{err:#}");
    }
}
