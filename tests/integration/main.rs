//! parbench's integration tests, linked into one binary: each test file of the harness would
//! otherwise link its own copy of polars and plotters (hundreds of MB apiece in a debug build).

mod bounds;
mod claims;
mod cli_conventions;
mod cli_snapshots;
mod compare;
mod config_errors;
mod executor;
mod fusedmm_apps;
mod fusedmm_cli;
mod gate;
mod kill_resume;
mod lda_cli;
mod paper_claims;
mod peers;
mod pipeline;
mod plan_errors;
mod plot;
mod results_io;
mod sinkhorn_family;
mod stored_runs;
mod support;
mod traces;
mod w2v_cli;
mod wmd_cli;
mod wmd_knn_family;
mod yaml_props;
