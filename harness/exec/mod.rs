//! Running a plan: the runner, the MPI launcher, the ranks' backend of the distributed commands,
//! the machine's measured limits, and the time bound they set on a run.

pub mod bound;
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
