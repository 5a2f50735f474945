//! `parbench peers`: install the shipped peers and list them.

use super::install::{self, Availability};
use super::registry;
use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

/// The peers' commands.
#[derive(Subcommand)]
pub enum PeersCommand {
    /// Make the peers' virtual environment in the peers cache dir ($PARBENCH_PEERS_DIR, else
    /// $XDG_CACHE_HOME/parbench/peers, else ~/.cache/parbench/peers) and pip-install their pinned
    /// packages from PyPI into it (about a minute; needs python3 with venv, and PyPI). An
    /// environment already installed for these pins is kept (unless --force); any other is
    /// replaced once the new one is complete.
    Install {
        /// The Python that makes the environment.
        #[arg(long, default_value = "python3")]
        python: String,
        /// Reinstall even when the environment is already installed for these pins.
        #[arg(long)]
        force: bool,
    },
    /// The side-by-side tables (Markdown) of runs that ran peers: each variant's compute and
    /// whole-process time, its time over the fastest parbench variant's, agreement or quality,
    /// with the date, machine and versions of the run.
    Table {
        /// Run directories, or reproduce directories holding them.
        #[arg(required = true)]
        runs: Vec<std::path::PathBuf>,
        /// Put the tables into FILE between its `<!-- parbench peers table: begin -->` and
        /// `<!-- parbench peers table: end -->` lines (the README's), instead of printing them.
        #[arg(long, value_name = "FILE")]
        update: Option<std::path::PathBuf>,
    },
    /// The shipped peers: family, program, what each is, and whether and which versions are installed.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `parbench peers` command.
pub fn run(command: PeersCommand) -> Result<ExitCode> {
    match command {
        PeersCommand::Table { runs, update } => {
            let mut dirs = Vec::new();
            for r in &runs {
                dirs.extend(crate::results::run_dirs(r)?);
            }
            let tables = super::table::markdown(&dirs)?;
            match update {
                Some(file) => {
                    super::table::update(&file, &tables)?;
                    println!(
                        "tables of {} run(s) written into {}",
                        dirs.len(),
                        file.display()
                    );
                }
                None => print!("{tables}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        PeersCommand::Install { python, force } => {
            let dir = install::cache_dir()?;
            if let (Availability::Ready(i), false) = (install::availability(&dir), force) {
                println!(
                    "peers already installed in {} on {} (Python {}); --force reinstalls",
                    dir.display(),
                    i.installed,
                    i.python
                );
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!(
                "installing {} into {}",
                registry().requirements.join(" "),
                dir.display()
            );
            let installed = install::install(&dir, &python)?;
            println!(
                "peers installed in {} (Python {}):",
                dir.display(),
                installed.python
            );
            for (name, version) in &installed.versions {
                println!("  {name} {version}");
            }
            Ok(ExitCode::SUCCESS)
        }
        PeersCommand::List { json } => {
            let dir = install::cache_dir()?;
            let availability = install::availability(&dir);
            let installed = match &availability {
                Availability::Ready(i) => Some(i),
                _ => None,
            };
            let version_of = |package: &str| -> Option<String> {
                installed.and_then(|i| i.versions.get(package).cloned())
            };
            if json {
                let peers: Vec<serde_json::Value> = registry()
                    .peers
                    .iter()
                    .map(|(name, p)| {
                        let versions: serde_json::Map<String, serde_json::Value> = p
                            .packages
                            .iter()
                            .filter_map(|k| version_of(k).map(|v| (k.clone(), v.into())))
                            .collect();
                        serde_json::json!({
                            "name": name,
                            "family": p.family,
                            "program": p.command(),
                            "about": p.about,
                            "installed": installed.is_some(),
                            "versions": versions,
                        })
                    })
                    .collect();
                let doc = serde_json::json!({
                    "cache_dir": dir,
                    "installed": installed,
                    "problem": install::not_ready(&dir, &availability),
                    "peers": peers,
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
                return Ok(ExitCode::SUCCESS);
            }
            match install::not_ready(&dir, &availability) {
                None => println!(
                    "peers cache dir: {} (installed {}, Python {})",
                    dir.display(),
                    installed.map_or("", |i| i.installed.as_str()),
                    installed.map_or("", |i| i.python.as_str())
                ),
                Some(why) => println!("{why}"),
            }
            for (name, p) in &registry().peers {
                let versions: Vec<String> = p
                    .packages
                    .iter()
                    .map(|k| match version_of(k) {
                        Some(v) => format!("{k} {v}"),
                        None => format!("{k} (not installed)"),
                    })
                    .collect();
                println!(
                    "{name:<18} {:<9} {}\n{:<29}{}\n{:<29}{}",
                    p.family,
                    p.command(),
                    "",
                    p.about,
                    "",
                    if versions.is_empty() {
                        format!("parbench {}", crate::results::PARBENCH_VERSION)
                    } else {
                        versions.join(", ")
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
