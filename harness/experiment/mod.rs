//! The experiment file and its plan: parse, validate, expand; nothing here runs a point.

pub mod compare;
pub mod config;
pub mod plan;
pub mod variant;

use anyhow::Context;
use std::path::{Path, PathBuf};

/// Experiment files under `dir`, sorted, grouped by family folder.
pub fn experiment_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the experiments directory {}", dir.display()))?;
    for family in entries {
        let family = family?.path();
        // experiments/gate/ holds the regression gate's workloads, run by `parbench gate`
        // and CI, not paper reproductions.
        if family.is_dir() && !family.ends_with("gate") {
            for f in std::fs::read_dir(&family)? {
                let f = f?.path();
                if f.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    files.push(f);
                }
            }
        }
    }
    files.sort();
    Ok(files)
}
