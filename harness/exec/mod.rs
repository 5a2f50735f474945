//! Running a plan: the runner, the MPI launcher, the ranks' backend of the distributed commands,
//! and the machine's measured limits.

pub mod executor;
pub mod launch;
pub mod machine;
pub mod ranks;
pub mod runner;
