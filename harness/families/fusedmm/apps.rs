//! The FusedMM applications (`../shared/papers/001_*`, Section VI-E and Fig. 9): collaborative
//! filtering by ALS with batched CG, and a multi-head graph attention forward pass, with their
//! sparse work on the serial kernels or on one distributed algorithm of the `fusedmm` crate, and
//! the time split into the sparse kernels' compute, communication and setup and the rest.
//!
//! Variants are the backends: `serial` (the local kernels on the whole matrix: the equivalence
//! reference) and every distributed algorithm of the `fusedmm` family (`1d`,
//! `1.5d-dense-shift`, ...) with its option `strategy` (`1.5d-dense-shift strategy=fusion`), on
//! `ranks` in-process ranks with replication `replication` (`1d` always uses 1). The
//! application is the parameter `app` (`als` or `gat`), so one experiment compares every
//! backend on both, and a figure can put `app` on a categorical x. The strategy matters only to
//! FusedMM calls: GAT has none (its softmax sits between the SDDMM and the SpMM), so there
//! `strategy=reuse` and `strategy=fusion` run as `strategy=none`.
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

use crate::exec::bound::work_metrics;
use crate::families::fusedmm::{grid_issues, strategy_issues, strategy_of, with_words_sent};
use crate::families::params::{positive, Choice, PointIssue};
use crate::family::{Measurement, PreparedInput, TypedFamily};
use anyhow::{anyhow, Context, Result};
use fusedmm::apps::als::{self, AlsConfig};
use fusedmm::apps::gat::{self, GatLayer, HeadCombine};
use fusedmm::apps::{KernelExecution, KernelTimes};
use fusedmm::distributed::replication_for;
use fusedmm::generate::{erdos_renyi, permute, random_permutation, rmat, RmatSpec};
use fusedmm::kernels::{kernel_work, KernelShape};
use fusedmm::{flops, Csr, Dense, Kernel, Par, Strategy};
use parbench_common::Work;
use std::collections::BTreeMap;
use std::path::Path;

pub struct FusedmmAppsFamily;

/// The backend running the local kernels on the whole matrix (equivalence reference).
pub const SERIAL: &str = "serial";

/// `serial`, then the distributed variants of the `fusedmm` family.
pub fn variants() -> Vec<&'static str> {
    std::iter::once(SERIAL)
        .chain(
            fusedmm::variant_names()
                .into_iter()
                .filter(|v| fusedmm::distributed_variant(v).is_some()),
        )
        .collect()
}

crate::named_enum! {
    /// The application a point runs.
    pub enum App as "app" {
        /// Collaborative filtering by ALS with batched CG.
        Als = "als",
        /// A multi-head graph attention forward pass.
        Gat = "gat",
    }
}

crate::named_enum! {
    /// How GAT's graph is generated.
    pub enum GraphGenerator as "generator" {
        /// Erdős-Rényi, `rows` nodes with `nnz_per_row` edges each.
        Er = "er",
        /// R-MAT, `2^rmat_scale` nodes, edge factor `nnz_per_row`.
        Rmat = "rmat",
    }
}

crate::point_params! {
    /// A FusedMM application point: the application, its input's shape, its settings, and the
    /// grid of the distributed variants.
    pub struct FusedmmAppsPoint {
        /// als (ALS with batched CG) or gat (graph attention forward pass)
        app: Choice<App> = Choice(App::Als),
        /// p, in-process ranks of the distributed variants
        ranks: usize = 4,
        /// c, replication factor (1d always uses 1)
        replication: usize = 1,
        /// ALS rank (factor width) or GAT head width
        r: usize = 16,
        /// ALS users (rows of the ratings) or GAT nodes with generator er
        rows: usize = 1024,
        /// ALS items (unset: as many as rows)
        cols: Option<usize> = None,
        /// ratings per user, or edges per node (ER) / R-MAT edge factor
        nnz_per_row: usize = 16,
        /// GAT graph: er or rmat (2^rmat_scale nodes)
        generator: Choice<GraphGenerator> = Choice(GraphGenerator::Er),
        /// log2 of the R-MAT node count
        rmat_scale: usize = 10,
        /// randomly permute rows and columns
        permute: bool = true,
        /// ALS regularization
        lambda: f64 = 0.1,
        /// ALS CG iterations per half step (the paper's: 10)
        cg_iterations: usize = 10,
        /// ALS outer iterations, each solving for A then B
        outer_iterations: usize = 3,
        /// ALS relative residual at which a row's CG stops
        cg_tolerance: f64 = 1e-12,
        /// GAT attention heads, concatenated
        heads: usize = 4,
        /// GAT input features per node
        features: usize = 32,
        /// how the fused kernels treat the replicated matrix: none, reuse or fusion, where the
        /// algorithm offers it
        strategy for ["1.5d-dense-shift", "1.5d-sparse-shift", "2.5d-dense-replicate"]:
            Choice<Strategy> = Choice(Strategy::NoElision),
    }
}

impl FusedmmAppsPoint {
    /// ALS items: `cols`, or `rows` when unset.
    pub fn cols(&self) -> usize {
        self.cols.unwrap_or(self.rows)
    }

    /// The ALS configuration (`seed` for the initial factors).
    pub fn als_config(&self, seed: u64) -> AlsConfig {
        AlsConfig {
            rank: self.r,
            lambda: self.lambda,
            cg_iterations: self.cg_iterations,
            outer_iterations: self.outer_iterations,
            cg_tolerance: self.cg_tolerance,
            seed,
        }
    }
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

/// Rows and columns randomly permuted from the seed (rows and columns alike when `square`, so
/// a graph stays the same graph), unless `permute: false`.
fn maybe_permute(point: &FusedmmAppsPoint, s: Csr, seed: u64, square: bool) -> Result<Csr> {
    if !point.permute {
        return Ok(s);
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
fn als_input(point: &FusedmmAppsPoint, seed: u64) -> Result<AppInput> {
    let pattern = erdos_renyi(point.rows, point.cols(), point.nnz_per_row, seed, Par::Seq)?;
    let ratings = fusedmm::kernels::whole::with_values(
        &pattern,
        pattern.values().iter().map(|v| 1.0 + 4.0 * v).collect(),
    )?;
    let ratings = maybe_permute(point, ratings, seed, false)?;
    let config = point.als_config(seed.wrapping_add(1));
    Ok(AppInput::Als { ratings, config })
}

/// The input of a GAT point: the graph with self-loops, features and a random layer.
fn gat_input(point: &FusedmmAppsPoint, seed: u64) -> Result<AppInput> {
    let per_row = point.nnz_per_row;
    let graph = match *point.generator {
        GraphGenerator::Er => erdos_renyi(point.rows, point.rows, per_row, seed, Par::Seq)?,
        GraphGenerator::Rmat => {
            let scale = u32::try_from(point.rmat_scale).context("rmat_scale is too large")?;
            rmat(&RmatSpec::new(scale, per_row, seed))?
        }
    };
    let graph = gat::with_self_loops(&maybe_permute(point, graph, seed, true)?)?;
    let (f, r, heads) = (point.features, point.r, point.heads);
    let features = Dense::random(graph.nrows(), f, seed.wrapping_add(1));
    let layer = GatLayer::random(f, r, heads, HeadCombine::Concat, seed.wrapping_add(2));
    Ok(AppInput::Gat {
        graph,
        features,
        layer,
    })
}

/// The work of an app's sparse calls, for its time bound: each call's kernel work over the whole
/// matrix, and every word sent copied out of one buffer and into another. The dense steps
/// between the calls are not counted, so the bound is the sparse part's.
fn sparse_work(calls: &[(Kernel, &KernelTimes)], shape: KernelShape, threads: usize) -> Work {
    let mut work = Work::none(threads);
    for &(kernel, t) in calls {
        let run = kernel_work(kernel, shape, true, threads).times(t.calls as f64);
        work = with_words_sent(work.then(&run), t.words_sent);
    }
    work
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

impl TypedFamily for FusedmmAppsFamily {
    type Point = FusedmmAppsPoint;
    const NAME: &'static str = "fusedmm-apps";

    // Exact: kernel calls and the words and messages they send.
    fn exact_metrics(&self) -> &'static [&'static str] {
        &[
            "nnz",
            "ranks_used",
            "replication_used",
            "*_calls",
            "*_words_sent",
            "*_messages_sent",
            "work_*",
        ]
    }
    fn variants(&self) -> Vec<&'static str> {
        variants()
    }

    /// Sizes of at least 1 and ALS settings the solver accepts (for the point's application),
    /// and, for the distributed variants, ranks and replication of at least 1 that form every
    /// algorithm's grid.
    fn check(&self, point: &FusedmmAppsPoint, variants: &[String]) -> Vec<PointIssue> {
        let mut issues = Vec::new();
        match *point.app {
            App::Als => {
                positive(&mut issues, "rows", point.rows);
                if let Some(cols) = point.cols {
                    positive(&mut issues, "cols", cols);
                }
                positive(&mut issues, "nnz_per_row", point.nnz_per_row);
                positive(&mut issues, "r", point.r);
                // The solver's own validation, one setting at a time so the issue names it.
                for (key, config) in [
                    (
                        "lambda",
                        AlsConfig {
                            rank: 1,
                            cg_tolerance: 0.0,
                            ..point.als_config(0)
                        },
                    ),
                    (
                        "cg_tolerance",
                        AlsConfig {
                            rank: 1,
                            lambda: 1.0,
                            ..point.als_config(0)
                        },
                    ),
                ] {
                    if let Err(e) = config.validate() {
                        issues.push(PointIssue::new(
                            &[key],
                            e.to_string(),
                            "lambda must be a positive number, cg_tolerance a non-negative one",
                        ));
                    }
                }
            }
            App::Gat => {
                positive(&mut issues, "nnz_per_row", point.nnz_per_row);
                if *point.generator == GraphGenerator::Er {
                    positive(&mut issues, "rows", point.rows);
                }
                positive(&mut issues, "features", point.features);
                positive(&mut issues, "r", point.r);
                positive(&mut issues, "heads", point.heads);
            }
        }
        let distributed: Vec<_> = variants
            .iter()
            .filter_map(|v| fusedmm::distributed_variant(v))
            .collect();
        if distributed.is_empty() {
            return issues;
        }
        positive(&mut issues, "ranks", point.ranks);
        // Whether a variant uses `replication` (all but 1d).
        let replicated = distributed.iter().any(|&alg| replication_for(alg, 0) == 0);
        if replicated {
            positive(&mut issues, "replication", point.replication);
        }
        if point.ranks > 0 && (point.replication > 0 || !replicated) {
            issues.extend(grid_issues(variants, point.ranks, point.replication, false));
        }
        issues.extend(strategy_issues(variants, *point.strategy));
        issues
    }

    fn prepare(
        &self,
        point: &FusedmmAppsPoint,
        _dataset: Option<&Path>,
        seed: u64,
    ) -> Result<PreparedInput> {
        let input = match *point.app {
            App::Als => als_input(point, seed)?,
            App::Gat => gat_input(point, seed)?,
        };
        Ok(Box::new(input))
    }

    fn run(
        &self,
        variant: &str,
        input: &PreparedInput,
        point: &FusedmmAppsPoint,
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
                fusedmm::distributed_variant(variant)
                    .ok_or_else(|| anyhow!("unknown fusedmm-apps variant {variant}"))?,
            )
        };
        let backend = match &parsed {
            None => KernelExecution::Serial(par),
            Some(alg) => {
                let p = point.ranks;
                let c = replication_for(*alg, point.replication);
                KernelExecution::Distributed {
                    algorithm: *alg,
                    strategy: strategy_of(*alg, *point.strategy),
                    p,
                    c,
                    par,
                }
            }
        };
        let mut phases = BTreeMap::new();
        let mut metrics = BTreeMap::new();
        let (ranks_used, replication_used) = match backend {
            KernelExecution::Serial(_) => (1, 1),
            KernelExecution::Distributed { p, c, .. } => (p, c),
        };
        metrics.insert("ranks_used".to_string(), ranks_used as f64);
        let work_threads = ranks_used * par.degree();
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
                let calls = [
                    (Kernel::FusedMmA, &t.fusedmm),
                    (Kernel::SpmmA, &t.spmm),
                    (Kernel::Sddmm, &t.sddmm),
                ];
                let shape = KernelShape {
                    m: ratings.nrows(),
                    n: ratings.ncols(),
                    nnz,
                    r,
                };
                metrics.extend(work_metrics(&sparse_work(&calls, shape, work_threads)));
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
                    trace: Vec::new(),
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
                let calls = [(Kernel::Sddmm, &t.sddmm), (Kernel::SpmmA, &t.spmm)];
                let shape = KernelShape {
                    m: graph.nrows(),
                    n: graph.ncols(),
                    nnz,
                    r,
                };
                metrics.extend(work_metrics(&sparse_work(&calls, shape, work_threads)));
                if sparse_s > 0.0 {
                    metrics.insert("gflop_per_s".to_string(), sparse_flops / sparse_s / 1e9);
                }
                metrics.insert("nnz".to_string(), nnz as f64);
                Ok(Measurement {
                    wall_time_s: t.total_seconds,
                    phases_s: phases,
                    metrics,
                    output: out.out.data().to_vec(),
                    trace: Vec::new(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::params::PointParams;
    use crate::family::Value;

    fn check(point: &FusedmmAppsPoint, variants: &[&str]) -> Vec<PointIssue> {
        let variants: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
        FusedmmAppsFamily.check(point, &variants)
    }

    #[test]
    fn variants_are_serial_and_every_distributed_backend() {
        let v = variants();
        assert_eq!(v[0], SERIAL);
        assert!(v.contains(&"1d"));
        assert!(v.contains(&"1.5d-dense-shift"));
        assert!(!v.contains(&"local") && !v.contains(&"local-unfused"));
        assert_eq!(v.len(), 1 + fusedmm::algorithms().len());
    }

    #[test]
    fn unknown_app_and_generator_are_refused_per_value_with_the_valid_names() {
        let err = FusedmmAppsPoint::check_value("app", &Value::Str("svd".into()))
            .unwrap()
            .unwrap_err();
        assert!(err.contains("app") && err.contains("`svd`"), "{err}");
        // GAT's generators: no circulant here.
        let err = FusedmmAppsPoint::check_value("generator", &Value::Str("circulant".into()))
            .unwrap()
            .unwrap_err();
        assert!(
            err.contains("generator") && err.contains("`circulant`"),
            "{err}"
        );
        let specs = FusedmmAppsPoint::specs();
        let choices = |name: &str| {
            specs
                .iter()
                .find(|s| s.name == name)
                .unwrap()
                .choices
                .clone()
        };
        assert_eq!(choices("app"), Some(vec!["als", "gat"]));
        assert_eq!(choices("generator"), Some(vec!["er", "rmat"]));
        let params: crate::family::Params = [("app".to_string(), Value::Str("svd".into()))].into();
        let err = FusedmmAppsPoint::from_params(&params).unwrap_err();
        assert!(err.contains("als, gat"), "{err}");
    }

    #[test]
    fn bad_grid_zero_sizes_and_bad_solver_settings_are_refused_with_their_keys() {
        let gat = FusedmmAppsPoint {
            app: Choice(App::Gat),
            rows: 20,
            nnz_per_row: 3,
            ranks: 6,
            replication: 4,
            ..Default::default()
        };
        assert!(check(&gat, &[SERIAL, "1d"]).is_empty());
        let issues = check(&gat, &[SERIAL, "1d", "1.5d-dense-shift"]);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].keys, ["replication", "ranks"]);
        assert!(
            issues[0].message.contains("1.5d-dense-shift"),
            "{}",
            issues[0]
        );
        assert!(
            issues[0].help.contains("one of 1, 2, 3, 6 for"),
            "{}",
            issues[0].help
        );
        let issues = check(
            &FusedmmAppsPoint {
                replication: 0,
                heads: 0,
                ..gat.clone()
            },
            &["1.5d-dense-shift"],
        );
        let keys: Vec<&[&str]> = issues.iter().map(|i| i.keys.as_slice()).collect();
        assert_eq!(keys, [&["heads"][..], &["replication"][..]]);
        // The serial backend uses no grid.
        assert!(check(&FusedmmAppsPoint { ranks: 0, ..gat }, &[SERIAL]).is_empty());
        let als = FusedmmAppsPoint {
            cols: Some(0),
            lambda: 0.0,
            cg_tolerance: -1.0,
            ..Default::default()
        };
        let keys: Vec<Vec<&str>> = check(&als, &[SERIAL]).into_iter().map(|i| i.keys).collect();
        assert_eq!(keys, [["cols"], ["lambda"], ["cg_tolerance"]]);
        assert!(check(&FusedmmAppsPoint::default(), &variants()[..2]).is_empty());
    }

    #[test]
    fn an_impossible_grid_still_fails_at_run_time_naming_the_algorithm() {
        let family = FusedmmAppsFamily;
        let p = FusedmmAppsPoint {
            app: Choice(App::Gat),
            rows: 20,
            nnz_per_row: 3,
            ranks: 6,
            replication: 4,
            ..Default::default()
        };
        let input = family.prepare(&p, None, 1).unwrap();
        let err = family.run("1.5d-dense-shift", &input, &p, 1).err().unwrap();
        assert!(format!("{err:#}").contains("1.5d-dense-shift"), "{err:#}");
    }
}
