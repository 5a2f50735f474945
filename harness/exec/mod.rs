//! Running a plan: the runner, the MPI launcher, the ranks' backend of the distributed commands,
//! and the machine's measured limits.

pub mod calibration;
pub mod callgrind;
pub mod drill;
pub mod eta;
pub mod executor;
pub mod gate;
pub mod launch;
pub mod machine;
pub mod ranks;
pub mod runner;
