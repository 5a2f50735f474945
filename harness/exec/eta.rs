//! How long a `reproduce` has left, from the recorded times of earlier runs: every finished run
//! directory under the results folder (`results/<reproduce-dir>/<experiment>/meta.json`, or a
//! run directly under it) records when it started and finished, so the experiments still to run
//! have a typical duration on this machine once they have run before (quick and full runs
//! apart).

use crate::exec::machine::unix_from_rfc3339;
use crate::util::stats::median;
use std::collections::BTreeMap;
use std::path::Path;

/// Experiment name -> durations in seconds of its finished earlier runs (quick or full as
/// asked) found under `results`, down to two levels.
pub fn recorded_durations(results: &Path, quick: bool) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut metas = Vec::new();
    let Ok(top) = std::fs::read_dir(results) else {
        return out;
    };
    for entry in top.flatten() {
        let dir = entry.path();
        metas.push(dir.join(crate::results::META_JSON));
        if let Ok(inner) = std::fs::read_dir(&dir) {
            metas.extend(
                inner
                    .flatten()
                    .map(|e| e.path().join(crate::results::META_JSON)),
            );
        }
    }
    for path in metas {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if meta["quick"].as_bool() != Some(quick) {
            continue;
        }
        let time = |key: &str| meta[key].as_str().and_then(unix_from_rfc3339);
        let (Some(name), Some(start), Some(end)) = (
            meta["experiment"].as_str(),
            time("started"),
            time("finished"),
        ) else {
            continue;
        };
        if end >= start {
            out.entry(name.to_string())
                .or_default()
                .push((end - start) as f64);
        }
    }
    out
}

/// The time left for `remaining` experiments: the sum of their median recorded durations, and
/// how many of them have a record; `None` when none has.
pub fn estimate(remaining: &[&str], recorded: &BTreeMap<String, Vec<f64>>) -> Option<(f64, usize)> {
    let known: Vec<f64> = remaining
        .iter()
        .filter_map(|name| median(recorded.get(*name)?))
        .collect();
    (!known.is_empty()).then(|| (known.iter().sum(), known.len()))
}

/// "about 3 min 20 s left (recorded runs of 18 of 20 experiments)".
pub fn describe(seconds: f64, known: usize, remaining: usize) -> String {
    let s = seconds.round() as u64;
    let time = if s >= 3600 {
        format!("{} h {} min", s / 3600, s / 60 % 60)
    } else if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    };
    let basis = if known == remaining {
        format!("from earlier runs of all {remaining}")
    } else {
        format!("from earlier runs of {known} of the {remaining}")
    };
    format!("about {time} left ({basis} experiments still to run)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(dir: &Path, name: &str, quick: bool, started: &str, finished: Option<&str>) {
        std::fs::create_dir_all(dir).unwrap();
        let doc = serde_json::json!({
            "experiment": name, "quick": quick, "started": started, "finished": finished,
        });
        std::fs::write(dir.join("meta.json"), doc.to_string()).unwrap();
    }

    #[test]
    fn earlier_finished_runs_of_the_same_size_give_the_estimate() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        meta(
            &r.join("reproduce-quick-1/a"),
            "a",
            true,
            "2026-11-25T10:00:00Z",
            Some("2026-11-25T10:01:00Z"),
        );
        meta(
            &r.join("reproduce-quick-2/a"),
            "a",
            true,
            "2026-11-25T11:00:00Z",
            Some("2026-11-25T11:03:00Z"),
        );
        meta(
            &r.join("reproduce-quick-2/b"),
            "b",
            true,
            "2026-11-25T11:03:00Z",
            Some("2026-11-25T11:03:30Z"),
        );
        // An interrupted run, a full-size run and a run directly under results/.
        meta(
            &r.join("reproduce-quick-3/b"),
            "b",
            true,
            "2026-11-25T12:00:00Z",
            None,
        );
        meta(
            &r.join("reproduce-1/b"),
            "b",
            false,
            "2026-11-25T12:00:00Z",
            Some("2026-11-25T14:00:00Z"),
        );
        meta(
            &r.join("c-run"),
            "c",
            true,
            "2026-11-25T12:00:00Z",
            Some("2026-11-25T12:00:10Z"),
        );
        let rec = recorded_durations(r, true);
        let mut a = rec["a"].clone();
        a.sort_by(f64::total_cmp);
        assert_eq!(a, [60.0, 180.0]);
        assert_eq!(rec["b"], [30.0]);
        assert_eq!(rec["c"], [10.0]);
        // a: median 120 s; b: 30 s; d: never ran.
        assert_eq!(estimate(&["a", "b", "d"], &rec), Some((150.0, 2)));
        assert_eq!(estimate(&["d"], &rec), None);
        assert_eq!(
            describe(150.0, 2, 3),
            "about 2 min 30 s left (from earlier runs of 2 of the 3 experiments still to run)"
        );
        assert!(recorded_durations(&r.join("missing"), true).is_empty());
    }
}
