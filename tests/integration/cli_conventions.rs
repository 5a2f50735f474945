//! The conventions of cargo tools: `--version` with the commit, shell completions and man
//! pages from the same definitions as `--help`, and `--json` where a command prints results.

use crate::support::{parbench, stderr, stdout};

#[test]
fn version_names_the_commit() {
    let out = parbench(&["--version"]);
    assert!(out.status.success());
    let v = stdout(&out);
    assert!(v.starts_with("parbench ") && v.contains("(commit "), "{v}");
}

#[test]
fn completions_and_man_pages_cover_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = parbench(&["completions", shell]);
        assert!(out.status.success(), "{}", stderr(&out));
        let script = stdout(&out);
        for command in ["compare", "report", "reproduce", "check"] {
            assert!(
                script.contains(command),
                "{shell} completions lack {command}"
            );
        }
    }
    assert!(!parbench(&["completions", "tcsh"]).status.success());
    let dir = tempfile::tempdir().unwrap();
    let out = parbench(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let main = std::fs::read_to_string(dir.path().join("parbench.1")).unwrap();
    assert!(main.contains(".TH") && main.contains("compare"), "{main}");
    let compare = std::fs::read_to_string(dir.path().join("parbench-compare.1")).unwrap();
    assert!(compare.contains("\\-\\-variants"), "{compare}");
    // The internal command has no page.
    assert!(!dir.path().join("parbench-launched.1").exists());
}

#[test]
fn list_and_check_print_json() {
    let out = parbench(&["list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let families = list["families"].as_array().unwrap();
    let sinkhorn = families.iter().find(|f| f["name"] == "sinkhorn").unwrap();
    assert!(sinkhorn["variants"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "fused-par"));
    assert!(sinkhorn["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "docs" && p["default"].is_string()));
    let w2v = families.iter().find(|f| f["name"] == "word2vec").unwrap();
    assert_eq!(w2v["outputs_agree"], false);

    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("cmp");
    let out = parbench(&[
        "compare",
        "mock",
        "--variants",
        "slow,wrong",
        "--repetitions",
        "1",
        "--no-progress-bar",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let out = parbench(&["check", run.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["exit_code"], 3);
    let claims = doc["runs"][0]["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["passed"], false);
    assert!(doc["coverage"].is_null(), "no baseline, no coverage");
}
