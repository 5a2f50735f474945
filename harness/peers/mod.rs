//! Peers: programs outside parbench run as variants of a family, through the file protocol of
//! `docs/peers.md`. The registry of the peers parbench ships (`peers/peers.yaml`) and their
//! programs are compiled into the binary, so a run writes exactly the programs this parbench was
//! built with; an experiment may declare more under `peers:`.
//!
//! - [`install`]: the virtual environment of the shipped peers (`parbench peers install`).
//! - [`protocol`]: one run of a peer: request, process, output, measurement.
//! - [`files`]: the standard files the families write for a peer and read back.

pub mod cli;
pub mod files;
pub mod install;
pub mod protocol;
pub mod table;

use crate::experiment::config::PeerDecl;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The registry of shipped peers, as written in `peers/peers.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// The pinned packages of the one virtual environment all shipped peers run in.
    pub requirements: Vec<String>,
    pub peers: BTreeMap<String, ShippedPeer>,
}

/// One shipped peer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShippedPeer {
    /// The family whose variants it stands beside.
    pub family: String,
    /// Its program among [`PROGRAMS`] (or `parbench`).
    #[serde(default)]
    pub program: Option<String>,
    /// A parbench variant run as its own process on the peer files (`parbench peer-serve`),
    /// so its whole-process time, loading included, stands beside the peers'.
    #[serde(default)]
    pub parbench: Option<String>,
    /// With `parbench`: keep the parsed input in a cache in the peer's work directory
    /// (`peer-serve --cache`), so every run after the point's first loads the parsed table.
    #[serde(default)]
    pub cache: bool,
    /// The distributions it imports (their versions go into the run's `meta.json`).
    #[serde(default)]
    pub packages: Vec<String>,
    /// What it is, for `parbench peers list` and the report.
    pub about: String,
    #[serde(default)]
    pub timeout_s: Option<f64>,
}

impl ShippedPeer {
    /// What starts it, as `parbench peers list` shows it.
    pub fn command(&self) -> String {
        match (&self.program, &self.parbench) {
            (_, Some(variant)) => parbench_command(variant, self.cache),
            (Some(file), None) => format!("peers/{file}"),
            (None, None) => String::new(),
        }
    }
}

/// How a parbench peer is started, as `peers list` and `meta.json` show it.
fn parbench_command(variant: &str, cache: bool) -> String {
    let cache = if cache {
        format!(" --cache <work dir>/{PARSED_CACHE_DIR}")
    } else {
        String::new()
    };
    format!("parbench peer-serve --variant {variant}{cache}")
}

/// The folder of a peer's work directory that a cached parbench peer keeps its parsed input in.
pub const PARSED_CACHE_DIR: &str = "parsed-cache";

const REGISTRY_YAML: &str = include_str!("../../peers/peers.yaml");

/// The shipped programs and the module they share, written into every peer work directory.
pub const PROGRAMS: &[(&str, &str)] = &[
    (
        "parbench_peer.py",
        include_str!("../../peers/parbench_peer.py"),
    ),
    (
        "sinkhorn_paper.py",
        include_str!("../../peers/sinkhorn_paper.py"),
    ),
    (
        "sinkhorn_numpy_sparse.py",
        include_str!("../../peers/sinkhorn_numpy_sparse.py"),
    ),
    (
        "sinkhorn_pot.py",
        include_str!("../../peers/sinkhorn_pot.py"),
    ),
    (
        "fusedmm_scipy.py",
        include_str!("../../peers/fusedmm_scipy.py"),
    ),
    ("lda_package.py", include_str!("../../peers/lda_package.py")),
    (
        "lda_tomotopy.py",
        include_str!("../../peers/lda_tomotopy.py"),
    ),
    (
        "word2vec_gensim.py",
        include_str!("../../peers/word2vec_gensim.py"),
    ),
];

/// A run's time limit when neither the registry nor the declaration gives one.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;

/// The shipped registry (compiled in; a test parses it).
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        use crate::experiment::config::yaml;
        yaml::parse(REGISTRY_YAML)
            .and_then(|node| yaml::from_node::<Registry>(&node))
            .unwrap_or_else(|e| panic!("internal: peers/peers.yaml does not parse: {e}"))
    })
}

/// A peer as an experiment runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Peer {
    pub name: String,
    pub about: String,
    pub timeout: Duration,
    pub program: Program,
}

/// How a peer is started.
#[derive(Clone, Debug, PartialEq)]
pub enum Program {
    /// A shipped program, run by the peers' virtual environment's Python.
    Shipped { file: String, packages: Vec<String> },
    /// An experiment's own command; relative paths in it are taken from `dir`, the experiment
    /// file's folder.
    Declared { argv: Vec<String>, dir: PathBuf },
    /// This parbench's variant `variant`, as its own process reading the peer files, with or
    /// without the parsed cache.
    Parbench { variant: String, cache: bool },
}

impl Peer {
    /// Whether this peer needs the shipped virtual environment.
    pub fn needs_env(&self) -> bool {
        matches!(self.program, Program::Shipped { .. })
    }
}

/// The peer `name` of `family`: declared by the experiment, or shipped for that family.
/// `experiment_dir` anchors a declared command's relative paths.
pub fn resolve(
    name: &str,
    family: &str,
    declared: &BTreeMap<String, PeerDecl>,
    experiment_dir: &Path,
) -> Option<Peer> {
    if let Some(d) = declared.get(name) {
        return Some(Peer {
            name: name.to_string(),
            about: d.about.clone(),
            timeout: timeout(d.timeout_s),
            program: Program::Declared {
                argv: d.command.clone(),
                dir: experiment_dir.to_path_buf(),
            },
        });
    }
    let shipped = registry().peers.get(name).filter(|p| p.family == family)?;
    let program = match (&shipped.program, &shipped.parbench) {
        (_, Some(variant)) => Program::Parbench {
            variant: variant.clone(),
            cache: shipped.cache,
        },
        (Some(file), None) => Program::Shipped {
            file: file.clone(),
            packages: shipped.packages.clone(),
        },
        // The registry test proves every entry has one of the two.
        (None, None) => return None,
    };
    Some(Peer {
        name: name.to_string(),
        about: shipped.about.clone(),
        timeout: timeout(shipped.timeout_s),
        program,
    })
}

/// The names of the shipped peers of `family`.
pub fn shipped_for(family: &str) -> Vec<&'static str> {
    registry()
        .peers
        .iter()
        .filter(|(_, p)| p.family == family)
        .map(|(n, _)| n.as_str())
        .collect()
}

/// Why the shipped peers among `peers` cannot run now (not installed, or installed for other
/// pins), with how to fix it; `None` when they can, or when there are none.
pub fn not_ready<'p>(peers: impl IntoIterator<Item = &'p Peer>) -> Option<String> {
    let shipped: Vec<&str> = peers
        .into_iter()
        .filter(|p| p.needs_env())
        .map(|p| p.name.as_str())
        .collect();
    if shipped.is_empty() {
        return None;
    }
    let why = match install::cache_dir() {
        Ok(dir) => install::not_ready(&dir, &install::availability(&dir))?,
        Err(e) => e.to_string(),
    };
    Some(format!(
        "it runs the peers {}, and {why}",
        shipped.join(", ")
    ))
}

/// What a run records of each peer it ran (`meta.json`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct PeerRecord {
    pub about: String,
    /// The shipped program, or the declared command.
    pub program: String,
    /// Its packages' versions and the Python's (`python`), for a shipped peer.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
}

/// The records of `peers` for `meta.json`, versions read from the install record.
pub fn records(peers: &BTreeMap<String, Peer>) -> BTreeMap<String, PeerRecord> {
    let installed = install::cache_dir()
        .ok()
        .and_then(|dir| match install::availability(&dir) {
            install::Availability::Ready(i) => Some(i),
            _ => None,
        });
    peers
        .iter()
        .map(|(name, peer)| {
            let (program, versions) = match &peer.program {
                Program::Shipped { file, packages } => {
                    let mut versions: BTreeMap<String, String> = installed
                        .iter()
                        .flat_map(|i| &i.versions)
                        .filter(|(n, _)| packages.contains(n))
                        .map(|(n, v)| (n.clone(), v.clone()))
                        .collect();
                    if let Some(i) = &installed {
                        versions.insert("python".to_string(), i.python.clone());
                    }
                    (format!("peers/{file}"), versions)
                }
                Program::Declared { argv, .. } => (argv.join(" "), BTreeMap::new()),
                Program::Parbench { variant, cache } => (
                    parbench_command(variant, *cache),
                    BTreeMap::from([(
                        "parbench".to_string(),
                        crate::results::PARBENCH_VERSION.to_string(),
                    )]),
                ),
            };
            let record = PeerRecord {
                about: peer.about.clone(),
                program,
                versions,
            };
            (name.clone(), record)
        })
        .collect()
}

/// A run's time limit; a limit that is no duration (the plan refuses it) counts as the default.
fn timeout(seconds: Option<f64>) -> Duration {
    seconds
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(Duration::from_secs_f64(DEFAULT_TIMEOUT_S))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_parses_and_every_program_it_names_is_compiled_in() {
        let reg = registry();
        assert!(!reg.peers.is_empty());
        for (name, peer) in &reg.peers {
            match (&peer.program, &peer.parbench) {
                (Some(program), None) => assert!(
                    PROGRAMS.iter().any(|(f, _)| f == program),
                    "peer {name}: program {program} is not in PROGRAMS"
                ),
                (None, Some(variant)) => {
                    let family = crate::families::find(&peer.family).unwrap();
                    assert!(
                        family.variants().contains(&variant.as_str()),
                        "peer {name}: no {} variant {variant}",
                        peer.family
                    );
                    assert!(peer.packages.is_empty(), "peer {name} runs no Python");
                }
                _ => panic!("peer {name} needs exactly one of program and parbench"),
            }
            assert!(
                !peer.cache || peer.parbench.is_some(),
                "peer {name}: only a parbench peer has a parsed cache"
            );
            assert!(
                crate::families::find(&peer.family).is_some(),
                "peer {name}: no family {}",
                peer.family
            );
            assert!(
                !crate::families::find(&peer.family)
                    .unwrap()
                    .variants()
                    .contains(&name.as_str()),
                "peer {name} has the name of a {} variant",
                peer.family
            );
            for package in &peer.packages {
                assert!(
                    reg.requirements
                        .iter()
                        .any(|r| r.split("==").next() == Some(package.as_str())),
                    "peer {name}: package {package} is not pinned in requirements"
                );
            }
        }
        // Every requirement is pinned to one version.
        for r in &reg.requirements {
            assert!(
                r.split_once("==").is_some_and(|(_, v)| !v.is_empty()),
                "{r}"
            );
        }
    }

    #[test]
    fn every_python_file_in_peers_is_compiled_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") && !name.starts_with("test_") {
                assert!(
                    PROGRAMS.iter().any(|(f, _)| *f == name),
                    "peers/{name} is not in PROGRAMS"
                );
            }
        }
    }

    #[test]
    fn a_shipped_peer_resolves_only_for_its_family() {
        let none = BTreeMap::new();
        let pot = resolve("pot", "sinkhorn", &none, Path::new(".")).unwrap();
        assert!(pot.needs_env());
        assert!(resolve("pot", "lda", &none, Path::new(".")).is_none());
        assert!(resolve("nope", "sinkhorn", &none, Path::new(".")).is_none());
    }
}
