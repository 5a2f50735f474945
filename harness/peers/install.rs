//! The peers' virtual environment: `parbench peers install` makes it in the peers cache dir
//! and pip-installs the registry's pinned requirements into it; `installed.json` beside it
//! records what was installed (the requirements, each package's version, the Python), and is
//! written last, so an install that failed or was killed leaves no environment that looks
//! ready.

use super::registry;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The record of a finished install.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Installed {
    /// The registry's requirements it was made from.
    pub requirements: Vec<String>,
    /// Distribution -> installed version.
    pub versions: BTreeMap<String, String>,
    /// `python --version` of the environment.
    pub python: String,
    /// RFC 3339 UTC.
    pub installed: String,
}

/// What the cache dir holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Availability {
    /// Nothing was ever installed there.
    NeverInstalled,
    /// An environment made for other pins, or one whose record cannot be read.
    Stale(String),
    Ready(Installed),
}

const INSTALLED_JSON: &str = "installed.json";
const VENV: &str = "venv";

/// The peers cache dir: `$PARBENCH_PEERS_DIR`, else parbench's cache folder `peers`
/// ([`parbench_common::cache_dir`]: under `$XDG_CACHE_HOME/parbench`, else `~/.cache/parbench`).
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("PARBENCH_PEERS_DIR").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    parbench_common::cache_dir("peers")
        .ok_or_else(|| anyhow::anyhow!("no peers cache dir: set PARBENCH_PEERS_DIR (or HOME)"))
}

/// The Python of the environment in `dir`.
pub fn python(dir: &Path) -> PathBuf {
    dir.join(VENV).join("bin").join("python")
}

/// What `dir` holds, against the registry compiled into this parbench.
pub fn availability(dir: &Path) -> Availability {
    let record = dir.join(INSTALLED_JSON);
    let text = match std::fs::read_to_string(&record) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Availability::NeverInstalled,
        Err(e) => return Availability::Stale(format!("cannot read {}: {e}", record.display())),
    };
    let installed: Installed = match serde_json::from_str(&text) {
        Ok(i) => i,
        Err(e) => return Availability::Stale(format!("{} is damaged: {e}", record.display())),
    };
    if installed.requirements != registry().requirements {
        return Availability::Stale(format!(
            "it was installed for {}, this parbench pins {}",
            installed.requirements.join(" "),
            registry().requirements.join(" ")
        ));
    }
    if !python(dir).exists() {
        return Availability::Stale(format!("{} is missing", python(dir).display()));
    }
    Availability::Ready(installed)
}

/// The error a run gives when the shipped peers cannot run, and how to fix it.
pub fn not_ready(dir: &Path, availability: &Availability) -> Option<String> {
    match availability {
        Availability::Ready(_) => None,
        Availability::NeverInstalled => Some(format!(
            "the peers are not installed (nothing in {}): run `parbench peers install`",
            dir.display()
        )),
        Availability::Stale(why) => Some(format!(
            "the peers in {} cannot be used ({why}): run `parbench peers install` again",
            dir.display()
        )),
    }
}

/// Makes the environment in `dir` with `base_python`, installs the requirements and records
/// them. pip's output goes to standard error. A previous environment is replaced only once the
/// new one is complete.
pub fn install(dir: &Path, base_python: &str) -> Result<Installed> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let partial = dir.join("venv.partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .with_context(|| format!("cannot remove {}", partial.display()))?;
    }
    run_step(
        Command::new(base_python).args(["-m", "venv"]).arg(&partial),
        &format!("{base_python} -m venv (is python3 with its venv module installed?)"),
    )?;
    let py = partial.join("bin").join("python");
    let requirements = &registry().requirements;
    run_step(
        Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(requirements),
        "pip install of the peers' pinned packages",
    )?;
    let names: Vec<&str> = requirements
        .iter()
        .filter_map(|r| r.split("==").next())
        .collect();
    let probe = format!(
        "import json, sys, importlib.metadata as m; print(json.dumps({{'python': sys.version.split()[0], 'versions': {{n: m.version(n) for n in {names:?}}}}}))"
    );
    let out = Command::new(&py)
        .args(["-c", &probe])
        .output()
        .with_context(|| format!("cannot run {}", py.display()))?;
    if !out.status.success() {
        bail!(
            "the new environment cannot report its packages: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    #[derive(Deserialize)]
    struct Probe {
        python: String,
        versions: BTreeMap<String, String>,
    }
    let probe: Probe = serde_json::from_slice(&out.stdout)
        .context("the new environment's package report is not JSON")?;
    // The old environment goes only now; its record first, so no moment has a record
    // without its environment.
    let record = dir.join(INSTALLED_JSON);
    let _ = std::fs::remove_file(&record);
    let venv = dir.join(VENV);
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("cannot remove the old {}", venv.display()))?;
    }
    std::fs::rename(&partial, &venv)
        .with_context(|| format!("cannot move {} to {}", partial.display(), venv.display()))?;
    let installed = Installed {
        requirements: requirements.clone(),
        versions: probe.versions,
        python: probe.python,
        installed: crate::results::now_rfc3339(),
    };
    crate::results::write_atomic(&record, &serde_json::to_vec_pretty(&installed)?)?;
    Ok(installed)
}

fn run_step(command: &mut Command, what: &str) -> Result<()> {
    // pip's progress on standard error, so `--json` on standard output stays parseable.
    let status = command
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot start {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_dir_was_never_installed_and_a_record_for_other_pins_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(availability(dir.path()), Availability::NeverInstalled);
        assert!(not_ready(dir.path(), &Availability::NeverInstalled)
            .unwrap()
            .contains("parbench peers install"));
        let old = Installed {
            requirements: vec!["numpy==1.0".to_string()],
            versions: BTreeMap::new(),
            python: "3.11".to_string(),
            installed: "2026-01-01T00:00:00Z".to_string(),
        };
        std::fs::write(
            dir.path().join(INSTALLED_JSON),
            serde_json::to_vec(&old).unwrap(),
        )
        .unwrap();
        match availability(dir.path()) {
            Availability::Stale(why) => assert!(why.contains("numpy==1.0"), "{why}"),
            other => panic!("{other:?}"),
        }
        std::fs::write(dir.path().join(INSTALLED_JSON), "{").unwrap();
        assert!(matches!(availability(dir.path()), Availability::Stale(_)));
    }
}
