//! Experiment files mangled every way a hand edit or a bad copy can: truncated, bytes flipped,
//! junk lines inserted, non-UTF-8, absurd numbers. Building the plan never panics; it either
//! succeeds or says what is wrong, naming the file (and the line, where the problem has one).

use parbench::experiment::plan;
use proptest::prelude::*;
use std::path::Path;

const VALID: &str = "name: props
paper: none
reproduces: none
family: mock
data: { source: synthetic, seed: 1 }
params:
  work: 1.5
sweep:
  size: [10, 100]
  threads: [1, 2]
variants: [slow, fast]
repetitions: 2
equivalence: { reference: slow, rel_tol: 1.0e-10 }
figures:
  - { name: t, title: T, x: size, y: wall_time_s }
claims:
  - { kind: ratio, name: r, numerator: slow, denominator: fast, at_least: 50, at: { size: max } }
";

const JUNK: &[&str] = &[
    "size: [",
    "  - - -",
    "threads: -1",
    "repetitions: 0",
    "size: 1000000000000",
    "work: .nan",
    "work: -.inf",
    "variants: []",
    "\t\tkey: value",
    "claims: 7",
    "family: mock\nfamily: mock",
    "? complex key",
    "&anchor x: 1",
    "%YAML 9.9",
];

/// Builds the plan from `bytes` written to a file, the way `parbench run` reads it.
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.yaml");
    std::fs::write(&path, bytes).unwrap();
    let built = std::panic::catch_unwind(|| plan::build(&path, false, None));
    let Ok(built) = built else {
        return Err(TestCaseError::fail(format!(
            "building the plan panicked on {:?}",
            String::from_utf8_lossy(bytes)
        )));
    };
    if let Err(err) = built {
        let text = err.to_string();
        prop_assert!(
            text.contains(&path.display().to_string()),
            "the error does not name the file: {text}"
        );
        prop_assert!(!text.trim().is_empty());
    }
    Ok(())
}

fn named_line(text: &str, path: &Path) -> bool {
    let prefix = format!("{}:", path.display());
    text.lines().any(|l| {
        l.strip_prefix(&prefix)
            .and_then(|rest| rest.split(':').next())
            .is_some_and(|n| n.parse::<usize>().is_ok())
    })
}

#[test]
fn the_valid_file_builds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.yaml");
    std::fs::write(&path, VALID).unwrap();
    let plan = plan::build(&path, false, None).expect("the unmangled file is valid");
    assert_eq!(plan.points.len(), 4);
}

#[test]
fn a_junk_line_is_reported_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exp.yaml");
    std::fs::write(&path, VALID.replace("repetitions: 2", "repetitions: [2")).unwrap();
    let err = plan::build(&path, false, None).unwrap_err().to_string();
    assert!(named_line(&err, &path), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn truncated_files_build_or_are_refused_naming_the_file(cut in 0..VALID.len()) {
        check(&VALID.as_bytes()[..cut])?;
    }

    #[test]
    fn flipped_bytes_build_or_are_refused_naming_the_file(
        flips in prop::collection::vec((0..VALID.len(), any::<u8>()), 1..4)
    ) {
        let mut bytes = VALID.as_bytes().to_vec();
        for (at, byte) in flips {
            bytes[at] = byte;
        }
        check(&bytes)?;
    }

    #[test]
    fn junk_lines_build_or_are_refused_naming_the_file(
        line in 0..VALID.lines().count(),
        junk in prop::sample::select(JUNK),
    ) {
        let mut lines: Vec<&str> = VALID.lines().collect();
        lines.insert(line, junk);
        check(lines.join("\n").as_bytes())?;
    }

    #[test]
    fn absurd_numbers_build_or_are_refused_naming_the_file(
        setting in prop::sample::select(
            &["seed: 1", "repetitions: 2", "at_least: 50", "rel_tol: 1.0e-10", "work: 1.5"][..]
        ),
        value in prop::sample::select(
            &["-1", "0", "1e308", "-1e308", "18446744073709551616", ".nan", "1e-400"][..]
        ),
    ) {
        let key = setting.split(':').next().unwrap_or_default();
        check(VALID.replace(setting, &format!("{key}: {value}")).as_bytes())?;
    }
}
