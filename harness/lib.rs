//! parbench's harness: experiment files, sweeps, results, figures, claims and the CLI commands.
//!
//! The pipeline, one folder a stage:
//! - [`experiment`]: the experiment file (one YAML parse that keeps positions), its typed
//!   configuration, and the plan: every point of the sweep in its family's typed form, with every
//!   problem found before anything runs.
//! - [`exec`]: running the plan's points (in this process or across MPI processes through the
//!   experiment's launcher), and the machine's measured limits.
//! - [`results`]: tidy rows (Parquet + CSV) and `meta.json`, written atomically.
//! - [`analysis`]: figures, claims and the baseline check, which read only stored results.
//! - [`families`]: one folder per algorithm family: its experiment adapter (`mod.rs`) and its CLI
//!   command (`cli.rs`), over the algorithm crates under `impls/`.
//! - [`family`]: the contract between the runner and a family (parameter values, measurements).
//! - [`util`]: small shared pieces (the data dir).

pub mod analysis;
pub mod exec;
pub mod experiment;
pub mod families;
pub mod family;
pub mod peers;
pub mod results;
pub mod util;
