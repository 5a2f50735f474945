//! parbench's harness: experiment files, sweeps, results, figures, claims and the CLI commands.
//!
//! Flow: `config` (serde schema) -> `plan` (validated, expanded) -> `runner` (runs every point
//! through a [`model::Family`]) -> `results` (tidy rows, Parquet + CSV, meta.json) -> `plot`
//! and `claims` (which read only stored results) -> `check` (claims + baseline regression).

pub mod backend;
pub mod check;
pub mod claims;
pub mod config;
pub mod datadir;
pub mod families;
pub mod fusedmm_cmd;
pub mod launch;
pub mod lda_cmd;
pub mod machine;
pub mod model;
pub mod plan;
pub mod plot;
pub mod results;
pub mod runner;
pub mod w2v_cmd;
pub mod wmd_cmd;
