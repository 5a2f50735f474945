//! Every user error in an experiment file is reported before anything runs, all of them at
//! once, each at the file, line and column of its cause, with a fix.

use crate::support::{parbench, stderr};
use std::path::Path;

/// The plan's report on `text` (read as the file `name`), which must refuse it.
fn plan_errors(text: &str, name: &str) -> String {
    match parbench::experiment::plan::build_from_str(text, Path::new(name), false, None) {
        Ok(_) => panic!("the plan is accepted:\n{text}"),
        Err(err) => err.to_string(),
    }
}

/// Whether `text` (read as the file `name`) is a plan.
fn plans(text: &str, name: &str) -> bool {
    parbench::experiment::plan::build_from_str(text, Path::new(name), false, None).is_ok()
}

/// A FusedMM sweep with three mistakes: an unknown parameter (line 10), a misspelled kernel
/// inside a swept list (line 14, column 19) and a 2.5D grid that 6 ranks with c = 1 cannot form
/// (p/c is not a square: the `ranks` entry, line 11).
const THREE_MISTAKES: &str = "\
name: three_mistakes
paper: mock
reproduces: none
family: fusedmm
data:
  source: synthetic
  seed: 1
params:
  rows: 64
  rowz: 64
  ranks: 6
  replication: 1
sweep:
  kernel: [sddmm, fusedmz, spmma]
variants: [local, 2.5d-dense-replicate]
repetitions: 1
";

#[test]
fn an_unknown_parameter_a_typo_in_a_swept_list_and_an_infeasible_grid_are_all_reported_before_anything_runs(
) {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("bad.yaml");
    std::fs::write(&yaml, THREE_MISTAKES).unwrap();
    let out_dir = dir.path().join("run");
    let out = parbench(&[
        "run",
        yaml.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at = |line: usize, col: usize| format!("{}:{line}:{col}:", yaml.display());
    // 1. the unknown parameter, with the valid names and the likely one.
    assert!(err.contains(&at(10, 3)), "{err}");
    assert!(err.contains("unknown parameter `rowz`"), "{err}");
    // 2. the typo inside the swept list, at the item, with the valid kernels.
    assert!(err.contains(&at(14, 19)), "{err}");
    assert!(
        err.contains("parameter `kernel` must be a known kernel, got `fusedmz`"),
        "{err}"
    );
    assert!(err.contains("did you mean `fusedmma`?"), "{err}");
    // 3. the grid, at the parameter that cannot form it, with a fix.
    let grid_line = err
        .lines()
        .find(|l| l.contains("2.5d-dense-replicate"))
        .unwrap_or_else(|| panic!("no grid problem reported:\n{err}"));
    assert!(
        grid_line.starts_with(&at(12, 3)) || grid_line.starts_with(&at(11, 3)),
        "{err}"
    );
    assert!(err.contains("3 problems in"), "{err}");
    // Nothing ran: no run directory, no machine calibration.
    assert!(!out_dir.exists(), "the run directory was created");
    assert!(!err.to_lowercase().contains("calibrat"), "{err}");
}

#[test]
fn equivalence_on_a_family_whose_variants_differ_by_design_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("w2v.yaml");
    std::fs::write(
        &yaml,
        "name: w2v_equivalence\npaper: mock\nreproduces: none\nfamily: word2vec\n\
data: { source: synthetic, seed: 1 }\nvariants: [hogwild, gemm]\nrepetitions: 1\n\
equivalence: { reference: hogwild, rel_tol: 1.0e-9 }\n",
    )
    .unwrap();
    let out = parbench(&[
        "run",
        yaml.to_str().unwrap(),
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("w2v.yaml:8:"), "{err}");
    assert!(err.contains("do not compute the same numbers"), "{err}");
    // The same file without `equivalence` is a valid plan: only that line was wrong.
    let text = std::fs::read_to_string(&yaml).unwrap();
    let ok = dir.path().join("ok.yaml");
    std::fs::write(&ok, text.lines().take(7).collect::<Vec<_>>().join("\n")).unwrap();
    assert!(parbench::experiment::plan::build(&ok, false, None).is_ok());
}

/// An LDA experiment of `sequential` and `sync` that sets `async`'s delta encoding (line 8) and
/// sweeps `sync`'s inner sampler (read by `sync`, so fine); its quick section sets the inner
/// sampler for a quick run of `sequential` alone (line 13).
const OPTION_NO_VARIANT_READS: &str = "\
name: unread_option
paper: mock
reproduces: none
family: lda
data: { source: synthetic, seed: 1 }
params:
  iters: 2
  delta: sparse
sweep:
  inner: [standard, sparse]
quick:
  variants: [sequential]
  params: { inner: sparse }
variants: [sequential, sync]
repetitions: 1
";

#[test]
fn an_option_that_none_of_the_experiments_variants_reads_is_refused_where_it_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("unread.yaml");
    std::fs::write(&yaml, OPTION_NO_VARIANT_READS).unwrap();
    let Err(err) = parbench::experiment::plan::build(&yaml, false, None) else {
        panic!("the plan is accepted, though no variant reads `delta`");
    };
    let err = err.to_string();
    let at = |line: usize, col: usize| format!("{}:{line}:{col}:", yaml.display());
    let delta = err
        .lines()
        .find(|l| l.contains("`delta` is read only by async"))
        .unwrap_or_else(|| panic!("delta not reported:\n{err}"));
    assert!(delta.starts_with(&at(8, 3)), "{err}");
    assert!(
        delta.contains("this experiment runs sequential, sync"),
        "{err}"
    );
    assert!(
        err.contains("remove `delta`, or add `async` to the variants"),
        "{err}"
    );
    let quick = err
        .lines()
        .find(|l| l.contains("`inner` is read only by sync, async"))
        .unwrap_or_else(|| panic!("the quick section's inner not reported:\n{err}"));
    assert!(quick.starts_with(&at(13, 13)), "{err}");
    assert!(err.contains("2 problems in"), "{err}");
    // Without `delta` and with the quick run keeping `sync`, the same experiment is a plan.
    let fixed = OPTION_NO_VARIANT_READS
        .replace("  delta: sparse\n", "")
        .replace("variants: [sequential]\n", "variants: [sequential, sync]\n");
    let ok = dir.path().join("ok.yaml");
    std::fs::write(&ok, fixed).unwrap();
    assert!(parbench::experiment::plan::build(&ok, false, None).is_ok());
}

/// A mock sweep whose listed variants set options of their own (`fast speedup=4`), with one
/// mistake on each line of the list but the first.
const VARIANT_OPTION_MISTAKES: &str = "\
name: variant_options
paper: mock
reproduces: none
family: mock
data: { source: synthetic, seed: 1 }
params:
  size: 10
variants:
  - fast speedup=4
  - slow speedup=2
  - fast sped=2
  - fast speedup=x
  - fast speedup=0
  - fsat speedup=2
  - fast 2
repetitions: 1
";

#[test]
fn every_mistake_in_a_variants_own_options_is_reported_at_its_list_item() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("options.yaml");
    std::fs::write(&yaml, VARIANT_OPTION_MISTAKES).unwrap();
    let Err(err) = parbench::experiment::plan::build(&yaml, false, None) else {
        panic!("the plan is accepted despite six mistakes");
    };
    let err = err.to_string();
    let at = |line: usize| format!("{}:{line}:5:", yaml.display());
    let reported = |line: usize, says: &str| {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&at(line)) && l.contains(says)),
            "line {line} should say {says:?}:\n{err}"
        );
    };
    reported(10, "`speedup` is not an option of `slow`");
    reported(11, "`sped` is no parameter, let alone an option of `fast`");
    reported(12, "variant `fast speedup=x`: parameter `speedup`");
    reported(
        13,
        "variant `fast speedup=0`: speedup must be positive, got 0",
    );
    reported(14, "unknown variant `fsat`");
    reported(
        15,
        "`2` in variant `fast 2` is not an option setting `name=value`",
    );
    assert!(err.contains("options of `fast`: speedup"), "{err}");
    assert!(err.contains("did you mean `fast`?"), "{err}");
    assert!(err.contains("6 problems in"), "{err}");
    assert!(!err.contains(&at(9)), "the valid item is reported:\n{err}");
}

#[test]
fn an_option_set_for_every_variant_and_for_one_listed_variant_is_refused() {
    let text = VARIANT_OPTION_MISTAKES
        .split("  - slow")
        .next()
        .unwrap()
        .replace("  size: 10\n", "  size: 10\n  speedup: 2\n")
        + "repetitions: 1\n";
    let err = plan_errors(&text, "both.yaml");
    assert!(
        err.contains("both.yaml:10:5: `speedup` is set for every variant (in `params` or `sweep`) and for `fast speedup=4`"),
        "{err}"
    );
    // Set in one place, it is a plan.
    let once = text.replace("  speedup: 2\n", "");
    assert!(plans(&once, "once.yaml"));
}

#[test]
fn a_fusedmm_strategy_an_algorithm_does_not_offer_is_refused_at_its_variant() {
    let text = "\
name: strategies
paper: mock
reproduces: none
family: fusedmm
data: { source: synthetic, seed: 1 }
params: { rows: 64, ranks: 4, kernel: fusedmma }
variants:
  - 1.5d-dense-shift strategy=fusion
  - 1.5d-sparse-shift strategy=fusion
  - 1d strategy=reuse
repetitions: 1
";
    let err = plan_errors(text, "s.yaml");
    assert!(
        err.contains("s.yaml:9:5: variant `1.5d-sparse-shift strategy=fusion`: 1.5d-sparse-shift offers the strategies none, reuse, not fusion"),
        "{err}"
    );
    assert!(
        err.contains("s.yaml:10:5: `strategy` is not an option of `1d`"),
        "{err}"
    );
    assert!(err.contains("2 problems in"), "{err}");
    let fixed = text
        .replace(
            "shift strategy=fusion\n  - 1d",
            "shift strategy=reuse\n  - 1d",
        )
        .replace("1d strategy=reuse", "1d");
    assert!(plans(&fixed, "ok.yaml"), "{fixed}");
}

/// Figure filters may list values; a list naming a variant not run, an empty list and `max`
/// inside a list are each reported at their place.
const FILTER_LIST_MISTAKES: &str = "\
name: filter_lists
paper: mock
reproduces: none
family: mock
data: { source: synthetic, seed: 1 }
sweep:
  size: [10, 20]
variants: [slow, fast, fast speedup=4]
repetitions: 1
figures:
  - name: good
    title: two of three variants
    x: size
    y: wall_time_s
    filter: { variant: [slow, fast speedup=4], size: [10, 20] }
  - name: bad
    title: three mistakes
    x: size
    y: wall_time_s
    filter: { variant: [slow, fats], size: [], threads: [max, 1] }
";

#[test]
fn a_figure_filter_list_with_an_unknown_variant_no_value_or_max_is_refused() {
    let err = plan_errors(FILTER_LIST_MISTAKES, "lists.yaml");
    let reported = |at: &str, says: &str| {
        assert!(
            err.lines().any(|l| l.starts_with(at) && l.contains(says)),
            "{at} should say {says:?}:\n{err}"
        );
    };
    reported(
        "lists.yaml:20:31:",
        "figure `bad`: filter on variant `fats`, which is not run",
    );
    reported(
        "lists.yaml:20:38:",
        "figure `bad`: filter on `size` has an empty list, which keeps no row",
    );
    reported(
        "lists.yaml:20:48:",
        "figure `bad`: filter on `threads` has `max` or `min` inside a list",
    );
    assert!(err.contains("3 problems in"), "{err}");
    assert!(!err.contains("figure `good`"), "{err}");
    // Without the bad figure, the lists are a plan.
    let good = FILTER_LIST_MISTAKES
        .split("  - name: bad")
        .next()
        .unwrap()
        .to_string();
    assert!(plans(&good, "good.yaml"));
}
