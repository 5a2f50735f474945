//! Records the git commit parbench is built from, for `parbench --version` (a run's meta.json
//! records the commit it ran at separately, at run time).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=PARBENCH_GIT_COMMIT={commit}");
    // A new commit moves a branch ref (or HEAD itself when detached); outside a repository
    // these paths do not exist and the script runs once.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
