//! Where a distributed command's ranks run: threads of this process (`--backend local`) or the
//! processes of an MPI job (`--backend mpi`, under `mpirun`, in a parbench built with
//! `--features mpi`). The commands share this: start MPI once, know the job's size, and stop the
//! whole job when one rank fails, so that no rank is left waiting in a collective.

use anyhow::{bail, Result};

/// The ranks' engine for one command.
pub enum Ranks {
    Local,
    #[cfg(feature = "mpi")]
    Mpi {
        // Finalizes MPI when dropped, after the command.
        _mpi: parbench_common::comm::mpi::Environment,
        world: parbench_common::comm::mpi::MpiComm,
    },
}

impl Ranks {
    /// `local` or `mpi` (initializes MPI).
    pub fn start(name: &str) -> Result<Ranks> {
        match name {
            "local" => Ok(Ranks::Local),
            #[cfg(feature = "mpi")]
            "mpi" => {
                use anyhow::Context;
                let env = parbench_common::comm::mpi::initialize()
                    .context("MPI could not be initialized (was it initialized twice?)")?;
                Ok(Ranks::Mpi {
                    _mpi: env,
                    world: parbench_common::comm::mpi::MpiComm::world(),
                })
            }
            #[cfg(not(feature = "mpi"))]
            "mpi" => bail!(
                "this parbench was built without MPI: rebuild with `cargo build --release --features mpi` (needs OpenMPI and libclang)"
            ),
            other => bail!("unknown backend {other}: use local or mpi"),
        }
    }

    /// The MPI job's world communicator, `None` for the local backend.
    #[cfg(feature = "mpi")]
    pub fn world(&self) -> Option<&parbench_common::comm::mpi::MpiComm> {
        match self {
            Ranks::Local => None,
            Ranks::Mpi { world, .. } => Some(world),
        }
    }

    /// The MPI job's world as the algorithms' communicator, `None` for the local backend.
    pub fn communicator(&self) -> Option<&dyn parbench_common::comm::Communicator> {
        match self {
            Ranks::Local => None,
            #[cfg(feature = "mpi")]
            Ranks::Mpi { world, .. } => Some(world),
        }
    }

    /// The number of ranks of the MPI job, `None` for the local backend.
    pub fn job_size(&self) -> Option<usize> {
        match self {
            Ranks::Local => None,
            #[cfg(feature = "mpi")]
            Ranks::Mpi { world, .. } => {
                use parbench_common::comm::Communicator;
                Some(world.size())
            }
        }
    }

    /// The number of ranks to use: the job's under MPI (`asked`, if given, must agree), else
    /// `asked` or `default`.
    pub fn ranks(&self, asked: Option<u64>, default: usize) -> Result<usize> {
        match (self.job_size(), asked) {
            (Some(world), Some(asked)) if asked as usize != world => bail!(
                "--ranks {asked}, but mpirun started {world} processes: drop --ranks or run mpirun -np {asked}"
            ),
            (Some(world), _) => Ok(world),
            (None, Some(0)) => bail!("--ranks must be at least 1"),
            (None, asked) => Ok(asked.map_or(default, |n| n as usize)),
        }
    }

    /// Whether this process prints and writes the results (rank 0, or the local process).
    pub fn is_root(&self) -> bool {
        match self {
            Ranks::Local => true,
            #[cfg(feature = "mpi")]
            Ranks::Mpi { world, .. } => {
                use parbench_common::comm::Communicator;
                world.rank() == 0
            }
        }
    }

    /// Passes `outcome` through; under MPI a failed rank prints its error and stops the whole
    /// job (`MPI_Abort`), since the other ranks may be waiting for it in a collective.
    pub fn finish(&self, outcome: Result<()>) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let (Err(e), Ranks::Mpi { world, .. }) = (&outcome, self) {
            use parbench_common::comm::Communicator;
            eprintln!("error: rank {}: {e:#}", world.rank());
            parbench_common::comm::mpi::abort(1);
        }
        outcome
    }
}
