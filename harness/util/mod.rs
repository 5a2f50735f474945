//! Small pieces the rest of the harness shares: one copy of each.

pub mod column;
pub mod csv;
pub mod datadir;
pub mod progress;
pub mod stats;
