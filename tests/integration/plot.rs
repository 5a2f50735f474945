//! Figures from scripted rows: files appear, text is in them, and the plotted numbers (medians,
//! bands, speedups) are the ones the rows imply.

use parbench::analysis::plot::{figure_series, plot_all, plot_figure, Series};
use parbench::experiment::config::{FigureConfig, FilterValue, SpeedupBase};
use parbench::family::{ResultRow, Value};
use std::collections::BTreeMap;
use std::path::Path;

const THREADS: [i64; 4] = [1, 2, 4, 8];

/// `sparse` takes 1 s at every thread count, `dense` 2/threads s, `fused` 1/threads s; each
/// repetition r adds r x 10 ms, so the median is repetition 1 and the band spans r = 0..2.
fn scripted_rows() -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for (point, &threads) in THREADS.iter().enumerate() {
        for (variant, base) in [("sparse", None), ("dense", Some(2.0)), ("fused", Some(1.0))] {
            for repetition in 0..3 {
                let time = match base {
                    None => 1.0,
                    Some(work) => work / threads as f64,
                } + 0.01 * repetition as f64;
                let mut params = BTreeMap::new();
                params.insert("threads".to_string(), Value::Int(threads));
                params.insert("layout".to_string(), Value::Str("csr".into()));
                rows.push(ResultRow {
                    experiment: "scripted".into(),
                    point,
                    params,
                    variant: variant.into(),
                    repetition,
                    wall_time_s: time,
                    phases_s: BTreeMap::from([("loop".to_string(), 0.5 * time)]),
                    metrics: BTreeMap::from([("gflop_per_s".to_string(), 3.0 / time)]),
                    equiv_rel_error: None,
                });
            }
        }
    }
    rows
}

fn figure(name: &str, y: &str) -> FigureConfig {
    FigureConfig {
        kind: Default::default(),
        name: name.into(),
        title: format!("Fig. 8: {name} over threads"),
        x: "threads".into(),
        y: y.into(),
        series: "variant".into(),
        filter: BTreeMap::new(),
        speedup_over: None,
        log_x: false,
        log_y: false,
        x_label: None,
        y_label: None,
    }
}

fn series<'a>(all: &'a [Series], name: &str) -> &'a Series {
    all.iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no series {name} in {all:?}"))
}

fn assert_close(expected: f64, actual: f64, what: &str) {
    assert!(
        (expected - actual).abs() <= 1e-12 * expected.abs().max(1.0),
        "{what}: expected {expected}, actual {actual}"
    );
}

fn assert_files(paths: &[std::path::PathBuf], dir: &Path, name: &str) -> String {
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    assert_eq!(paths, [png.clone(), svg.clone()]);
    let png_bytes = std::fs::read(&png).unwrap();
    assert!(png_bytes.len() > 1000, "PNG has {} bytes", png_bytes.len());
    assert_eq!(&png_bytes[1..4], b"PNG");
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::read_to_string(&svg).unwrap()
}

#[test]
fn wall_time_figure_writes_png_and_svg_with_title_labels_and_legend() {
    let dir = tempfile::tempdir().unwrap();
    let fig = figure("time", "wall_time_s");
    let paths = plot_figure(
        &fig,
        &scripted_rows(),
        dir.path(),
        "Measured on a test machine",
    )
    .unwrap();
    let svg = assert_files(&paths, dir.path(), "time");
    for text in [
        "Measured on a test machine",
        fig.title.as_str(),
        "wall time (s)",
        "threads",
        "sparse",
        "dense",
        "fused",
    ] {
        assert!(svg.contains(text), "SVG lacks {text:?}");
    }
}

#[test]
fn medians_and_bands_follow_the_repetitions() {
    let all = figure_series(&figure("time", "wall_time_s"), &scripted_rows()).unwrap();
    assert_eq!(
        all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["sparse", "dense", "fused"]
    );
    let dense = series(&all, "dense");
    assert_eq!(dense.points.len(), THREADS.len());
    for (point, &threads) in dense.points.iter().zip(&THREADS) {
        let t = 2.0 / threads as f64;
        assert_close(threads as f64, point.x, "x");
        assert_close(t + 0.01, point.mid, "median");
        assert_close(t, point.low, "band low");
        assert_close(t + 0.02, point.high, "band high");
    }
}

#[test]
fn log_axes_draw() {
    let dir = tempfile::tempdir().unwrap();
    let mut fig = figure("gflops_log", "metric_gflop_per_s");
    fig.log_x = true;
    fig.log_y = true;
    let paths = plot_figure(&fig, &scripted_rows(), dir.path(), "").unwrap();
    let svg = assert_files(&paths, dir.path(), "gflops_log");
    assert!(svg.contains("GFLOP/s"), "SVG lacks the unit label");
}

#[test]
fn speedup_over_a_variant_divides_medians_at_the_same_point() {
    let mut fig = figure("speedup_variant", "wall_time_s");
    fig.speedup_over = Some(SpeedupBase {
        variant: Some("sparse".into()),
        x: None,
    });
    let all = figure_series(&fig, &scripted_rows()).unwrap();
    assert!(
        all.iter().all(|s| s.name != "sparse"),
        "base drawn: {all:?}"
    );
    let dense = series(&all, "dense");
    for (point, &threads) in dense.points.iter().zip(&THREADS) {
        let t = 2.0 / threads as f64;
        assert_close(1.01 / (t + 0.01), point.mid, "speedup");
        // Per-repetition ratios (1 + 0.01 r) / (t + 0.01 r), r = 0..2.
        let ratios = [1.0 / t, 1.01 / (t + 0.01), 1.02 / (t + 0.02)];
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        assert_close(lo, point.low, "band low");
        assert_close(hi, point.high, "band high");
    }

    let dir = tempfile::tempdir().unwrap();
    let paths = plot_figure(&fig, &scripted_rows(), dir.path(), "").unwrap();
    let svg = assert_files(&paths, dir.path(), "speedup_variant");
    assert!(svg.contains("speedup over sparse (x)"));
}

#[test]
fn speedup_over_x_is_strong_scaling_of_each_series() {
    let mut fig = figure("strong_scaling", "wall_time_s");
    fig.speedup_over = Some(SpeedupBase {
        variant: None,
        x: Some(Value::Int(1)),
    });
    fig.log_x = true;
    let all = figure_series(&fig, &scripted_rows()).unwrap();
    let fused = series(&all, "fused");
    for (point, &threads) in fused.points.iter().zip(&THREADS) {
        let expected = 1.01 / (1.0 / threads as f64 + 0.01);
        assert_close(expected, point.mid, "strong-scaling speedup");
    }
    let sparse = series(&all, "sparse");
    assert!(sparse.points.iter().all(|p| (p.mid - 1.0).abs() < 1e-12));

    let dir = tempfile::tempdir().unwrap();
    plot_figure(&fig, &scripted_rows(), dir.path(), "").unwrap();
}

#[test]
fn filter_selects_rows_and_series_can_be_a_parameter() {
    let mut fig = figure("phase_by_threads", "phase_loop_s");
    fig.x = "layout".into();
    fig.series = "threads".into();
    fig.filter = BTreeMap::from([(
        "variant".to_string(),
        FilterValue::One(Value::Str("dense".into())),
    )]);
    let all = figure_series(&fig, &scripted_rows()).unwrap();
    assert_eq!(
        all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["threads=1", "threads=2", "threads=4", "threads=8"]
    );
    // A categorical x ("csr") sits at position 0; one point per series.
    assert!(all
        .iter()
        .all(|s| s.points.len() == 1 && s.points[0].x == 0.0));
    assert_close(
        0.5 * (2.0 + 0.01),
        all[0].points[0].mid,
        "loop phase at 1 thread",
    );

    let dir = tempfile::tempdir().unwrap();
    let paths = plot_figure(&fig, &scripted_rows(), dir.path(), "").unwrap();
    let svg = assert_files(&paths, dir.path(), "phase_by_threads");
    assert!(svg.contains("loop phase time (s)") && svg.contains("csr"));
}

#[test]
fn a_single_point_draws() {
    let rows: Vec<ResultRow> = scripted_rows().into_iter().take(1).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut fig = figure("single", "wall_time_s");
    fig.log_y = true;
    plot_figure(&fig, &rows, dir.path(), "").unwrap();
}

#[test]
fn an_empty_selection_is_an_error_naming_the_figure() {
    let dir = tempfile::tempdir().unwrap();
    let mut fig = figure("nothing", "wall_time_s");
    fig.filter = BTreeMap::from([(
        "variant".to_string(),
        FilterValue::One(Value::Str("missing".into())),
    )]);
    let err = plot_figure(&fig, &scripted_rows(), dir.path(), "").unwrap_err();
    let message = format!("{err:#}");
    assert!(
        message.contains("`nothing`") && message.contains("missing"),
        "{message}"
    );
    assert!(!dir.path().join("nothing.png").exists());

    let err = plot_figure(&figure("no_rows", "wall_time_s"), &[], dir.path(), "").unwrap_err();
    assert!(format!("{err:#}").contains("`no_rows`"), "{err:#}");
}

#[test]
fn an_unknown_y_column_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = plot_figure(
        &figure("bad_y", "metric_nope"),
        &scripted_rows(),
        dir.path(),
        "",
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("metric_nope"), "{err:#}");
}

#[test]
fn plot_all_draws_the_good_figures_and_reports_the_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let figs = [figure("good", "wall_time_s"), figure("bad", "metric_nope")];
    let err = plot_all(&figs, &scripted_rows(), dir.path(), "").unwrap_err();
    assert!(format!("{err:#}").contains("`bad`"), "{err:#}");
    assert!(dir.path().join("good.png").exists());
}
