//! The registry of the papers' claims (docs/paper_claims.yaml) held to what parbench runs: every
//! claim it says an experiment asserts exists, and passed in the committed quick baseline's
//! recorded runs; the README's counts are the registry's; `parbench claims` reports bad input
//! and failed verification as a user needs them.

use crate::support::{stderr, stdout};
use parbench::analysis::check::Baseline;
use parbench::analysis::registry;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_registry_holds_against_the_experiments_and_the_quick_baseline() {
    let reg = registry::embedded().unwrap();
    let experiments = registry::experiment_claims(&repo().join("experiments")).unwrap();
    let baseline = Baseline::load(&repo().join("results/baselines/quick.json")).unwrap();
    let problems = registry::verify(&reg, &experiments, &baseline);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let counts = registry::Counts::of(&reg.claims);
    assert_eq!(
        counts.claims, 75,
        "the inventory of ../shared/paper-claims.md"
    );
}

#[test]
fn the_readme_counts_are_the_registrys() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let begin = "<!-- paper-claims:begin -->\n";
    let start = readme.find(begin).expect("the README's claims block") + begin.len();
    let end = readme.find("<!-- paper-claims:end -->").unwrap();
    let reg = registry::embedded().unwrap();
    assert_eq!(
        &readme[start..end],
        registry::markdown_counts(&reg),
        "regenerate the block with `parbench claims --markdown`"
    );
}

fn parbench_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_parbench"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_claims_command_reports_bad_input_before_anything_else() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("reg.yaml"),
        "papers:\n  - { id: \"000\", title: Sinkhorn }\nclaims:\n  - id: S1\n    paper: \"000\"\n    source: Fig. 8\n    claim: fast\n    number: 100x\n    machine: sometimes\n    status: weaker\n",
    )
    .unwrap();
    let out = parbench_in(tmp.path(), &["claims", "--registry", "reg.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("reg.yaml:9") && err.contains("independent"),
        "{err}"
    );
    let out = parbench_in(tmp.path(), &["claims", "nosuchpaper"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no paper `nosuchpaper`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_fails_on_a_claim_the_baseline_records_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("experiments/mock")).unwrap();
    std::fs::write(
        dir.join("experiments/mock/m.yaml"),
        "name: m\npaper: none\nreproduces: Fig. 0\nfamily: mock\ndata: { source: synthetic, seed: 1 }\nvariants: [slow, fast]\nparams: { work: 1.0 }\nsweep: { size: [10, 100] }\nrepetitions: 1\nclaims:\n  - { kind: ratio, name: fast is 100x faster, numerator: slow, denominator: fast, at_least: 1000 }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("reg.yaml"),
        "papers:\n  - { id: \"000\", title: Sinkhorn }\nclaims:\n  - id: S2\n    paper: \"000\"\n    source: Fig. 8\n    claim: fast\n    number: 1000x\n    machine: dependent\n    status: reproduced\n    experiment: m\n    asserts: [fast is 100x faster]\n",
    )
    .unwrap();
    // A run of the experiment, recorded into a baseline: the claim fails (1000x is not met).
    let run = parbench_in(
        dir,
        &[
            "run",
            "experiments/mock/m.yaml",
            "--out",
            "run",
            "--no-progress-bar",
        ],
    );
    assert_eq!(run.status.code(), Some(3), "{}", stderr(&run));
    let write = parbench_in(dir, &["check", "run", "--write-baseline", "base.json"]);
    assert!(write.status.success(), "{}", stderr(&write));
    let verify = |args: &[&str]| {
        let mut all = vec![
            "claims",
            "--registry",
            "reg.yaml",
            "--baseline",
            "base.json",
        ];
        all.extend_from_slice(args);
        parbench_in(dir, &all)
    };
    let out = verify(&["--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "S2: `m`'s claim \"fast is 100x faster\" failed in the quick baseline's run on"
        ),
        "{}",
        stdout(&out)
    );
    // The listing shows the recorded verdict beside the entry.
    let out = verify(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("asserts: m: \"fast is 100x faster\"")
            && stdout(&out).contains("[FAIL] slow/fast = "),
        "{}",
        stdout(&out)
    );
    // A registry naming a claim the experiment does not have.
    let renamed = std::fs::read_to_string(dir.join("reg.yaml"))
        .unwrap()
        .replace("[fast is 100x faster]", "[fast is 10x faster]");
    std::fs::write(dir.join("reg.yaml"), renamed).unwrap();
    let out = verify(&["--verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("S2: experiment `m` has no claim \"fast is 10x faster\""),
        "{}",
        stdout(&out)
    );
}
