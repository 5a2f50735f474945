//! Stored results round-trip exactly: rows through Parquet, metadata through JSON.

use parbench::exec::machine::{Limits, MachineInfo};
use parbench::family::{ResultRow, Value};
use parbench::results::{
    read_meta, read_rows, write_atomic, write_meta, write_rows, RunMeta, RESULTS_CSV,
    RESULTS_PARQUET,
};
use std::collections::BTreeMap;

fn row(point: usize, variant: &str, repetition: usize) -> ResultRow {
    ResultRow {
        experiment: "roundtrip".to_string(),
        point,
        params: BTreeMap::new(),
        variant: variant.to_string(),
        repetition,
        wall_time_s: 0.25 + point as f64 * 0.5 + repetition as f64 * 1e-3,
        phases_s: BTreeMap::new(),
        metrics: BTreeMap::new(),
        equiv_rel_error: None,
    }
}

/// Rows where every optional part is present in some rows and absent in others.
fn mixed_rows() -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for point in 0..3 {
        for (v, variant) in ["dense", "fused-par"].iter().enumerate() {
            for repetition in 0..2 {
                let mut r = row(point, variant, repetition);
                r.params.insert("threads".into(), Value::Int(1 << point));
                r.params
                    .insert("gamma".into(), Value::Float(0.1 * (point + 1) as f64));
                r.params
                    .insert("layout".into(), Value::Str(format!("L{point}")));
                r.params.insert("fused".into(), Value::Bool(v == 1));
                if point != 1 {
                    // Absent at point 1: must come back absent, not 0.
                    r.params.insert("block".into(), Value::Int(64));
                }
                r.phases_s
                    .insert("loop".into(), 0.1 * (repetition + 1) as f64);
                if v == 1 {
                    r.phases_s.insert("sddmm".into(), 0.03);
                    r.metrics.insert("gflop_per_s".into(), 12.5 + point as f64);
                    r.equiv_rel_error = Some(1e-14 * (point + 1) as f64);
                }
                r.metrics.insert("iterations".into(), 15.0);
                rows.push(r);
            }
        }
    }
    rows
}

#[test]
fn rows_round_trip_through_parquet_with_types_and_absent_values() {
    let dir = tempfile::tempdir().unwrap();
    let rows = mixed_rows();
    write_rows(dir.path(), &rows).unwrap();
    let back = read_rows(dir.path()).unwrap();
    assert_eq!(back.len(), rows.len());
    for (expected, actual) in rows.iter().zip(&back) {
        assert_eq!(
            expected, actual,
            "\nexpected {expected:#?}\nactual   {actual:#?}"
        );
    }
}

#[test]
fn rewriting_replaces_the_table_and_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let rows = mixed_rows();
    write_rows(dir.path(), &rows[..4]).unwrap();
    write_rows(dir.path(), &rows).unwrap();
    assert_eq!(read_rows(dir.path()).unwrap().len(), rows.len());
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn csv_header_lists_the_columns_in_documented_order() {
    let dir = tempfile::tempdir().unwrap();
    write_rows(dir.path(), &mixed_rows()).unwrap();
    let csv = std::fs::read_to_string(dir.path().join(RESULTS_CSV)).unwrap();
    let header = csv.lines().next().unwrap();
    assert_eq!(
        header,
        "experiment,point,variant,repetition,param_block,param_fused,param_gamma,param_layout,\
         param_threads,wall_time_s,phase_loop_s,phase_sddmm_s,metric_gflop_per_s,\
         metric_iterations,equiv_rel_error"
    );
    assert_eq!(csv.lines().count(), 1 + mixed_rows().len());
}

#[test]
fn ints_and_floats_in_one_parameter_come_back_as_floats() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = row(0, "dense", 0);
    a.params.insert("gamma".into(), Value::Int(1));
    let mut b = row(1, "dense", 0);
    b.params.insert("gamma".into(), Value::Float(0.5));
    write_rows(dir.path(), &[a, b]).unwrap();
    let back = read_rows(dir.path()).unwrap();
    assert_eq!(back[0].params["gamma"], Value::Float(1.0));
    assert_eq!(back[1].params["gamma"], Value::Float(0.5));
}

#[test]
fn an_empty_table_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    write_rows(dir.path(), &[]).unwrap();
    assert!(dir.path().join(RESULTS_PARQUET).exists());
    assert_eq!(read_rows(dir.path()).unwrap(), Vec::<ResultRow>::new());
}

#[test]
fn reading_a_missing_table_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_rows(dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains(RESULTS_PARQUET), "{err:#}");
}

#[test]
fn meta_round_trips_through_json() {
    let dir = tempfile::tempdir().unwrap();
    let meta = RunMeta {
        experiment: "fig8".into(),
        source_file: "experiments/sinkhorn/fig8.yaml".into(),
        quick: true,
        seed: 42,
        data_dir: Some("/data".into()),
        dataset: None,
        machine: MachineInfo {
            hostname: "host".into(),
            os: "Linux".into(),
            kernel: "6.1".into(),
            cpu_model: "cpu".into(),
            physical_cores: 2,
            logical_cpus: 2,
            memory_bytes: 24 << 30,
            rustc_version: "rustc 1.95.0".into(),
            git_commit: Some("abc".into()),
            git_dirty: Some(false),
            timestamp: "2025-01-01T00:00:00Z".into(),
            limits: Limits {
                triad_gb_per_s_1t: 10.5,
                triad_gb_per_s_all: 15.25,
                fma_gflop_per_s_1t: 60.0,
                fma_gflop_per_s_all: 119.5,
                threads_all: 2,
                llc_triad_gb_per_s_1t: 40.0,
                llc_triad_gb_per_s_all: 75.5,
                llc_bytes: 32 << 20,
                llc_triad_bytes: 16 << 20,
                l1_bytes: 48 << 10,
                l1_triad_gb_per_s_1t: 250.0,
                l1_triad_gb_per_s_all: 480.0,
                l2_bytes: 1 << 20,
                l2_triad_gb_per_s_1t: 120.0,
                l2_triad_gb_per_s_all: 230.0,
            },
            fingerprint: String::new(),
            dispatch: Default::default(),
        },
        started: "2025-01-01T00:00:00Z".into(),
        finished: None,
        parbench_version: parbench::results::PARBENCH_VERSION.into(),
        peers: [(
            "pot".to_string(),
            parbench::peers::PeerRecord {
                about: "POT".into(),
                program: "peers/sinkhorn_pot.py".into(),
                versions: [("POT".to_string(), "0.9.7.post1".to_string())].into(),
            },
        )]
        .into(),
    };
    write_meta(dir.path(), &meta).unwrap();
    assert_eq!(read_meta(dir.path()).unwrap(), meta);
}

#[test]
fn write_atomic_replaces_content() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.txt");
    write_atomic(&path, b"first").unwrap();
    write_atomic(&path, b"second").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    // Nothing but the file itself: no temporary sibling left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
