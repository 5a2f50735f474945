//! Small pieces the rest of the harness shares.

pub mod datadir;
