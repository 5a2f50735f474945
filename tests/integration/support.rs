//! Running the `parbench` binary and reading what it printed, for the CLI tests.

use std::process::{Command, Output};

/// Runs `parbench` with `args` and waits for it.
pub fn parbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parbench"))
        .args(args)
        .output()
        .expect("the parbench binary runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
