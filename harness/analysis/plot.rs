//! Figures from stored result rows: one PNG (1024 x 640) and one SVG per [`FigureConfig`].
//!
//! A figure selects the rows matching its `filter`, splits them into series (one per variant, or
//! per value of a parameter), and groups each series by x. Each group becomes one marker on a
//! line through the median over its repetitions, with a translucent min-max band (error bars
//! where a series has a single x). With `speedup_over`, each point's value is
//! `median(base) / median(value)`, the base being another variant at the same point or the
//! series' own point with x at a given value, and the band spans the per-repetition ratios
//! (repetition r of the base over repetition r of the value).
//!
//! A string (or boolean) x parameter is categorical: its values sit at evenly spaced positions,
//! in the order they first appear in the rows (the sweep's order), and `log_x` is ignored.
//! Rows sharing a series and an x but differing in another swept parameter are pooled: filter
//! them apart. Cost: linear in the rows, plus rendering (tens of milliseconds per figure).
//!
//! A `kind: trace` figure reads the trace table (`traces.parquet`: one row per progress step of
//! each recorded run) instead: rows pass the same `filter`, split into the same series, and each
//! series has one marker per `step`, at the median x (`step`, `time_s` or a `metric_<name>`) and
//! median y over the runs it pools (its repetitions, and the points it spans unless filtered
//! apart), with the min-max band of y. A convergence curve thus comes from one run, not one run
//! per iteration count; a step that lacks y (a log-likelihood evaluated every N iterations) has
//! no marker.
//!
//! A figure is drawn to be printed one column wide (3.3 in): text sizes are set for that scale,
//! the title and the machine footnote wrap, ticks are round (1-2-5 steps, 1-2-5 per log decade,
//! powers of two where every value is one) and short (`20k`, `2.5M`, `5e-4`), and an axis in
//! seconds or bytes is drawn in ms, µs, kB, MB or GB when that keeps its numbers short. The
//! legend sits in a corner of the plot that no marker, band or line passes through, or above the
//! plot when there is none. A filter value `max` or `min` on a numeric parameter stands for the
//! largest or smallest value the selected rows hold (the same figure fits quick and full runs).

use crate::experiment::config::{FigureConfig, FigureKind, FilterValue, SpeedupBase};
use crate::family::{Params, ResultRow, TraceRow, Value};
use crate::util::column::{Column, PARAM_PREFIX};
use crate::util::stats::median;
use anyhow::{bail, Context};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const WIDTH: u32 = 1024;
const HEIGHT: u32 = 640;
const FONT: &str = "sans-serif";
/// Sizes in pixels of a 1024 x 640 figure, chosen for print: scaled to one column of a paper
/// (3.3 in, about 520 px), tick labels and legend are about 6 pt and axis titles 6.5 pt.
const TITLE_PX: u32 = 30;
const AXIS_TITLE_PX: u32 = 28;
const TICK_PX: u32 = 25;
const LEGEND_PX: u32 = 24;
const FOOTNOTE_PX: u32 = 17;
/// Space around the parts of a figure.
const MARGIN: u32 = 16;
const LINE_WIDTH: u32 = 3;
/// Marker radius.
const MARKER: i32 = 7;
/// Width of the line-and-marker sample before a legend label, and the legend's inner margin.
const LEGEND_ICON: u32 = 48;
const LEGEND_MARGIN: u32 = 10;
/// At most this many labelled ticks on a linear axis.
const MAX_TICKS: usize = 7;

/// A line with more points than this is drawn without markers.
const MAX_MARKERS: usize = 60;

/// Tableau 10: distinguishable, colour-blind friendly in its first few entries.
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws every figure into `out_dir`; a figure that fails does not stop the others, and the
/// error lists every failure.
pub fn plot_all(
    figs: &[FigureConfig],
    rows: &[ResultRow],
    out_dir: &Path,
    footnote: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut failures = Vec::new();
    for fig in figs {
        match plot_figure(fig, rows, out_dir, footnote) {
            Ok(paths) => written.extend(paths),
            Err(err) => failures.push(format!("{err:#}")),
        }
    }
    if failures.is_empty() {
        Ok(written)
    } else {
        bail!(
            "{} of {} figures failed:\n  {}",
            failures.len(),
            figs.len(),
            failures.join("\n  ")
        )
    }
}

/// Draws the figures of a run into `run_dir/figures` from its stored configuration and rows
/// (what `parbench run` does at the end and `parbench plot` redoes). A figure that cannot be
/// drawn is reported on stderr and skipped, so one bad figure does not lose the others.
pub fn draw_run_figures(
    figs: &[FigureConfig],
    rows: &[ResultRow],
    run_dir: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let dir = crate::results::figures_dir(run_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::new();
    let meta = crate::results::read_meta(run_dir).ok();
    let footnote = meta.as_ref().map(machine_footnote).unwrap_or_default();
    let peers: BTreeSet<String> = meta
        .map(|m| m.peers.into_keys().collect())
        .unwrap_or_default();
    // Read once, and only when a figure needs it.
    let mut traces: Option<anyhow::Result<Vec<TraceRow>>> = None;
    for fig in figs {
        let drawn = match fig.kind {
            FigureKind::Results => plot_figure_with_peers(fig, rows, &dir, &footnote, &peers),
            FigureKind::Trace => {
                match traces.get_or_insert_with(|| crate::results::read_traces(run_dir)) {
                    Ok(traces) => plot_trace_figure(fig, traces, &dir, &footnote),
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                }
            }
        };
        match drawn {
            Ok(paths) => out.extend(paths),
            Err(e) => eprintln!("warning: figure {} not drawn: {e:#}", fig.name),
        }
    }
    Ok(out)
}

/// The line under every figure of a run: the machine it was measured on (its kind, measured
/// triad and FMA peak), when, and the commit, so a figure read on its own says where its
/// numbers come from.
pub fn machine_footnote(meta: &crate::results::RunMeta) -> String {
    let m = &meta.machine;
    let date = meta.started.get(..10).unwrap_or(&meta.started);
    let commit = m
        .git_commit
        .as_deref()
        .map(|c| format!(", commit {}", c.get(..12).unwrap_or(c)))
        .unwrap_or_default();
    format!(
        "Measured on {} (triad {:.1} GB/s, FMA {:.0} GFLOP/s on {} threads), {date}, parbench {}{commit}",
        m.fingerprint,
        m.limits.triad_gb_per_s_all,
        m.limits.fma_gflop_per_s_all,
        m.limits.threads_all,
        meta.parbench_version
    )
}

/// Draws one figure of the results as `<name>.png` and `<name>.svg` in `out_dir`, with
/// `footnote` (none when empty) under it; returns both paths. A `kind: trace` figure is an
/// error here: see [`plot_trace_figure`].
pub fn plot_figure(
    fig: &FigureConfig,
    rows: &[ResultRow],
    out_dir: &Path,
    footnote: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    plot_figure_with_peers(fig, rows, out_dir, footnote, &BTreeSet::new())
}

/// [`plot_figure`], with the variants in `peers` (programs outside parbench) drawn dashed and
/// labelled "(peer)".
pub fn plot_figure_with_peers(
    fig: &FigureConfig,
    rows: &[ResultRow],
    out_dir: &Path,
    footnote: &str,
    peers: &BTreeSet<String>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut data =
        FigureData::build(fig, rows).with_context(|| format!("figure `{}`", fig.name))?;
    data.peers = peers.clone();
    write_figure(fig, &data, out_dir, footnote)
}

/// Draws one `kind: trace` figure from the trace table's rows, as [`plot_figure`] does.
pub fn plot_trace_figure(
    fig: &FigureConfig,
    traces: &[TraceRow],
    out_dir: &Path,
    footnote: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    let data =
        FigureData::from_trace(fig, traces).with_context(|| format!("figure `{}`", fig.name))?;
    write_figure(fig, &data, out_dir, footnote)
}

/// Renders `data` as `<name>.png` and `<name>.svg` in `out_dir`.
fn write_figure(
    fig: &FigureConfig,
    data: &FigureData,
    out_dir: &Path,
    footnote: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let png = out_dir.join(format!("{}.png", fig.name));
    let svg = out_dir.join(format!("{}.svg", fig.name));
    let data = &data.in_display_units();

    // Rendered into memory and encoded here, so the PNG reaches the directory through the same
    // atomic write as every other file of a run.
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    let png_bytes = (|| {
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
            render(&root, fig, data, footnote)?;
            root.present()?;
        }
        let mut bytes = Vec::new();
        image::ImageEncoder::write_image(
            image::codecs::png::PngEncoder::new(&mut bytes),
            &pixels,
            WIDTH,
            HEIGHT,
            image::ColorType::Rgb8,
        )?;
        anyhow::Ok(bytes)
    })()
    .with_context(|| format!("figure `{}`: cannot draw {}", fig.name, png.display()))?;
    crate::results::write_atomic(&png, &png_bytes)?;

    let mut svg_text = String::new();
    {
        let root = SVGBackend::with_string(&mut svg_text, (WIDTH, HEIGHT)).into_drawing_area();
        render(&root, fig, data, footnote)
            .and_then(|()| Ok(root.present()?))
            .with_context(|| format!("figure `{}`: cannot draw the SVG", fig.name))?;
    }
    crate::results::write_atomic(&svg, svg_text.as_bytes())?;
    Ok(vec![png, svg])
}

/// The numeric value of a column (or a bare parameter name) for one row: the same rule claims
/// use ([`Column::reference`]).
fn column_value(row: &ResultRow, name: &str) -> Option<f64> {
    Column::reference(name).value(row)
}

fn param_of<'r>(row: &'r ResultRow, name: &str) -> Option<&'r Value> {
    param_in(&row.params, name)
}

/// A parameter by its bare or `param_` name.
fn param_in<'p>(params: &'p Params, name: &str) -> Option<&'p Value> {
    params
        .get(name)
        .or_else(|| name.strip_prefix(PARAM_PREFIX).and_then(|p| params.get(p)))
}

/// `fig` with `max` and `min` in its filter (on a numeric parameter) replaced by the largest or
/// smallest value of that parameter among the rows that pass the rest of the filter, as in a
/// claim's `at`: one figure spec then shows "the largest matrix" of the quick and the full sweep
/// alike. A parameter whose values are not numbers keeps the word (compared as a string).
fn with_resolved_filter<'r>(
    fig: &FigureConfig,
    rows: impl Iterator<Item = (&'r str, &'r Params)> + Clone,
) -> FigureConfig {
    let extremes: Vec<(&str, bool)> = fig
        .filter
        .iter()
        .filter(|(key, _)| *key != "variant")
        .filter_map(|(key, v)| Some((key.as_str(), v.extreme()?)))
        .collect();
    let keys: Vec<&str> = extremes.iter().map(|(key, _)| *key).collect();
    let mut resolved = fig.clone();
    for &(key, largest) in &extremes {
        let best = rows
            .clone()
            .filter(|(variant, params)| passes_filter_on(variant, params, &fig.filter, &keys))
            .filter_map(|(_, params)| param_in(params, key))
            .filter_map(|v| v.as_f64().map(|f| (f, v)))
            .reduce(|a, b| {
                if (b.0 > a.0) == largest && b.0 != a.0 {
                    b
                } else {
                    a
                }
            });
        if let Some((_, value)) = best {
            resolved
                .filter
                .insert(key.to_string(), FilterValue::One(value.clone()));
        }
    }
    resolved
}

/// Whether a row passes a figure's filter (`variant` or parameters, each equal to the value or
/// to one of the list), skipping `except`.
fn passes_filter(row: &ResultRow, filter: &BTreeMap<String, FilterValue>, except: &[&str]) -> bool {
    passes_filter_on(&row.variant, &row.params, filter, except)
}

/// [`passes_filter`] for any row with a variant and parameters (a trace row).
fn passes_filter_on(
    variant: &str,
    params: &Params,
    filter: &BTreeMap<String, FilterValue>,
    except: &[&str],
) -> bool {
    filter
        .iter()
        .filter(|(key, _)| !except.contains(&key.as_str()))
        .all(|(key, wanted)| {
            wanted.values().iter().any(|want| {
                if key == "variant" {
                    want.as_str() == Some(variant) || want.to_string() == variant
                } else {
                    param_in(params, key).is_some_and(|have| have.same_as(want))
                }
            })
        })
}

/// The series a row belongs to: its variant, or `name=value` of the figure's series parameter
/// ("query_words=5" in the legend: a bare "5" does not say what varies).
fn series_name(fig: &FigureConfig, variant: &str, params: &Params) -> String {
    if fig.series == "variant" {
        variant.to_string()
    } else {
        let value = param_in(params, &fig.series)
            .map(Value::to_string)
            .unwrap_or_else(|| "(unset)".to_string());
        format!("{}={value}", fig.series)
    }
}

/// Parameters equal except the one named `skip`.
fn same_params_except(a: &Params, b: &Params, skip: &str) -> bool {
    let without = |p: &Params| {
        p.iter()
            .filter(|(k, _)| k.as_str() != skip)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    let (a, b) = (without(a), without(b));
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|((ka, va), (kb, vb))| ka == kb && va.same_as(vb))
}

/// One marker: the median and the min-max band of a (series, x) group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlotPoint {
    /// The x value (a categorical x: the category's position, 0, 1, ...).
    pub x: f64,
    /// Median over repetitions (a speedup: median(base) / median(value)).
    pub mid: f64,
    pub low: f64,
    pub high: f64,
}

/// One line of a figure, its points sorted by x.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<PlotPoint>,
}

/// The lines a figure draws, without drawing them (for tests and text summaries).
pub fn figure_series(fig: &FigureConfig, rows: &[ResultRow]) -> anyhow::Result<Vec<Series>> {
    FigureData::build(fig, rows)
        .map(|data| data.series)
        .with_context(|| format!("figure `{}`", fig.name))
}

/// The lines a `kind: trace` figure draws from the trace rows, without drawing them.
pub fn trace_figure_series(fig: &FigureConfig, traces: &[TraceRow]) -> anyhow::Result<Vec<Series>> {
    FigureData::from_trace(fig, traces)
        .map(|data| data.series)
        .with_context(|| format!("figure `{}`", fig.name))
}

/// Everything needed to draw a figure, computed before any drawing.
#[derive(Debug)]
struct FigureData {
    series: Vec<Series>,
    /// Every series the selected rows hold, dropped ones included, so that a series keeps its
    /// colour and marker whatever else a figure leaves out (the base of a speedup).
    style_order: Vec<String>,
    /// Labels of a categorical x, indexed by position.
    categories: Option<Vec<String>>,
    x_label: String,
    y_label: String,
    /// The series that are peers (programs outside parbench): drawn dashed, labelled so.
    peers: BTreeSet<String>,
}

/// Repetition -> y of one point of one variant.
type Repetitions = BTreeMap<usize, f64>;

/// The points pooled into one (series, x) marker: point index -> (its repetitions, one of its
/// rows, whose parameters locate the speedup base).
type PointsOfCell<'r> = BTreeMap<usize, (Repetitions, &'r ResultRow)>;

impl FigureData {
    fn build(fig: &FigureConfig, rows: &[ResultRow]) -> anyhow::Result<Self> {
        if fig.kind == FigureKind::Trace {
            bail!("a `kind: trace` figure is drawn from the trace table, not the results");
        }
        let fig = &with_resolved_filter(fig, rows.iter().map(|r| (r.variant.as_str(), &r.params)));
        let selected: Vec<&ResultRow> = rows
            .iter()
            .filter(|row| passes_filter(row, &fig.filter, &[]))
            .collect();
        if selected.is_empty() {
            let variants: Vec<&str> = unique(rows.iter().map(|r| r.variant.as_str()));
            bail!(
                "no stored row matches the filter {} ({} rows in all, variants: {})",
                describe_filter(&fig.filter),
                rows.len(),
                if variants.is_empty() {
                    "none".to_string()
                } else {
                    variants.join(", ")
                }
            );
        }

        // A string or boolean x is categorical; its positions follow first appearance.
        let categories: Option<Vec<String>> = selected
            .iter()
            .any(|row| matches!(param_of(row, &fig.x), Some(Value::Str(_) | Value::Bool(_))))
            .then(|| {
                unique(
                    selected
                        .iter()
                        .filter_map(|r| param_of(r, &fig.x).map(|v| v.to_string())),
                )
            });
        let x_of = |row: &ResultRow| -> Option<f64> {
            match &categories {
                Some(labels) => {
                    let label = param_of(row, &fig.x)?.to_string();
                    labels.iter().position(|l| *l == label).map(|i| i as f64)
                }
                None => column_value(row, &fig.x),
            }
        };
        let series_of = |row: &ResultRow| series_name(fig, &row.variant, &row.params);

        // series -> x -> point -> repetitions, keeping series in first-appearance order.
        let mut series_names: Vec<String> = Vec::new();
        let mut cells: BTreeMap<(usize, OrderedX), PointsOfCell> = BTreeMap::new();
        let (mut missing_x, mut missing_y) = (0usize, 0usize);
        for row in &selected {
            let Some(x) = x_of(row) else {
                missing_x += 1;
                continue;
            };
            let Some(y) = column_value(row, &fig.y) else {
                missing_y += 1;
                continue;
            };
            let name = series_of(row);
            let series_index = match series_names.iter().position(|s| *s == name) {
                Some(i) => i,
                None => {
                    series_names.push(name);
                    series_names.len() - 1
                }
            };
            cells
                .entry((series_index, OrderedX(x)))
                .or_default()
                .entry(row.point)
                .or_insert_with(|| (Repetitions::new(), row))
                .0
                .insert(row.repetition, y);
        }
        if cells.is_empty() {
            if missing_x > 0 {
                bail!(
                    "x column `{}` is absent from the {} selected rows (a parameter, \
                     `metric_<name>` or `phase_<name>_s`)",
                    fig.x,
                    missing_x
                );
            }
            bail!(
                "y column `{}` is absent from the {} selected rows (use `wall_time_s`, \
                 `phase_<name>_s` or `metric_<name>`)",
                fig.y,
                missing_y
            );
        }

        let mut series: Vec<Series> = series_names
            .iter()
            .map(|name| Series {
                name: name.clone(),
                points: Vec::new(),
            })
            .collect();
        for ((series_index, OrderedX(x)), points) in &cells {
            let point = match &fig.speedup_over {
                None => {
                    let ys: Vec<f64> = points
                        .values()
                        .flat_map(|(r, _)| r.values().copied())
                        .collect();
                    let (low, high) = min_max(&ys);
                    median(&ys).map(|mid| PlotPoint {
                        x: *x,
                        mid,
                        low,
                        high,
                    })
                }
                Some(base) => speedup_point(fig, base, rows, *x, points)?,
            };
            if let Some(point) = point {
                series[*series_index].points.push(point);
            }
        }
        // The base variant's speedup over itself is 1 everywhere: not worth a line.
        if let Some(SpeedupBase {
            variant: Some(base),
            ..
        }) = &fig.speedup_over
        {
            if fig.series == "variant" {
                series.retain(|s| s.name != *base);
            }
        }
        series.retain(|s| !s.points.is_empty());
        if series.is_empty() {
            bail!(
                "no point has a base for speedup_over {} (is the base in the stored rows?)",
                describe_base(fig.speedup_over.as_ref())
            );
        }
        Self::finish(fig, series, series_names, categories)
    }

    /// A trace figure's data: per series, one marker per step (see the module docs).
    fn from_trace(fig: &FigureConfig, traces: &[TraceRow]) -> anyhow::Result<Self> {
        if traces.is_empty() {
            bail!(
                "the run has no trace rows (traces.parquet is missing or empty: the family's \
                 runs report no progress, or the run was made before traces were recorded)"
            );
        }
        let fig =
            &with_resolved_filter(fig, traces.iter().map(|t| (t.variant.as_str(), &t.params)));
        let selected: Vec<&TraceRow> = traces
            .iter()
            .filter(|t| passes_filter_on(&t.variant, &t.params, &fig.filter, &[]))
            .collect();
        if selected.is_empty() {
            let variants: Vec<&str> = unique(traces.iter().map(|t| t.variant.as_str()));
            bail!(
                "no trace row matches the filter {} ({} trace rows in all, variants: {})",
                describe_filter(&fig.filter),
                traces.len(),
                variants.join(", ")
            );
        }
        let value = |t: &TraceRow, name: &str| -> Option<f64> {
            match name {
                "step" => Some(t.step as f64),
                "time_s" => Some(t.time_s),
                _ => name
                    .strip_prefix("metric_")
                    .and_then(|m| t.metrics.get(m).copied()),
            }
        };
        // (series, step) -> the x and y of every run that reported the step.
        let mut series_names: Vec<String> = Vec::new();
        let mut cells: BTreeMap<(usize, usize), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for t in &selected {
            let (Some(x), Some(y)) = (value(t, &fig.x), value(t, &fig.y)) else {
                continue;
            };
            let name = series_name(fig, &t.variant, &t.params);
            let index = match series_names.iter().position(|s| *s == name) {
                Some(i) => i,
                None => {
                    series_names.push(name);
                    series_names.len() - 1
                }
            };
            let cell = cells.entry((index, t.step)).or_default();
            cell.0.push(x);
            cell.1.push(y);
        }
        if cells.is_empty() {
            let mut names: Vec<String> = vec!["step".into(), "time_s".into()];
            names.extend(unique(
                selected
                    .iter()
                    .flat_map(|t| t.metrics.keys().map(|m| format!("metric_{m}"))),
            ));
            bail!(
                "no selected trace row has both x `{}` and y `{}` (the trace has: {})",
                fig.x,
                fig.y,
                names.join(", ")
            );
        }
        let mut series: Vec<Series> = series_names
            .iter()
            .map(|name| Series {
                name: name.clone(),
                points: Vec::new(),
            })
            .collect();
        for ((index, _step), (xs, ys)) in &cells {
            let (low, high) = min_max(ys);
            if let (Some(x), Some(mid)) = (median(xs), median(ys)) {
                series[*index].points.push(PlotPoint { x, mid, low, high });
            }
        }
        for s in &mut series {
            // Steps are in order; a time or metric x may not be monotone in them.
            s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        Self::finish(fig, series, series_names, None)
    }

    /// The common end of both kinds: markers a log axis cannot show dropped, axis labels.
    fn finish(
        fig: &FigureConfig,
        mut series: Vec<Series>,
        series_names: Vec<String>,
        categories: Option<Vec<String>>,
    ) -> anyhow::Result<Self> {
        // A log axis cannot show zero or negative values: drop such markers, and clip band
        // edges to the marker.
        let log_x = fig.log_x && categories.is_none();
        if log_x || fig.log_y {
            for s in &mut series {
                s.points
                    .retain(|p| (!log_x || p.x > 0.0) && (!fig.log_y || p.mid > 0.0));
                if fig.log_y {
                    for p in &mut s.points {
                        if p.low <= 0.0 {
                            p.low = p.mid;
                        }
                    }
                }
            }
            series.retain(|s| !s.points.is_empty());
            if series.is_empty() {
                bail!(
                    "every value is zero or negative, which a log axis cannot show \
                     (drop log_x/log_y)"
                );
            }
        }

        let x_label = fig.x_label.clone().unwrap_or_else(|| axis_label(&fig.x));
        let y_label = fig
            .y_label
            .clone()
            .unwrap_or_else(|| match &fig.speedup_over {
                // "speedup over threads = 1", not "over x = 1": the axis says what x is.
                Some(SpeedupBase {
                    variant: None,
                    x: Some(base),
                }) => format!("speedup over {x_label} = {base} (x)"),
                Some(base) => format!("speedup over {} (x)", describe_base(Some(base))),
                None => axis_label(&fig.y),
            });
        Ok(FigureData {
            series,
            style_order: series_names,
            categories,
            x_label,
            y_label,
            peers: BTreeSet::new(),
        })
    }
}

/// The speedup marker of one (series, x) group: median over its points of
/// median(base)/median(value), band from per-repetition ratios. None when no point has a base.
fn speedup_point(
    fig: &FigureConfig,
    base: &SpeedupBase,
    rows: &[ResultRow],
    x: f64,
    points: &PointsOfCell,
) -> anyhow::Result<Option<PlotPoint>> {
    let mut speedups = Vec::new();
    let mut ratios = Vec::new();
    for (point, (values, sample)) in points {
        let base_rows: Vec<&ResultRow> = match base {
            SpeedupBase {
                variant: Some(variant),
                x: None,
            } => rows
                .iter()
                .filter(|r| r.point == *point && r.variant == *variant)
                .filter(|r| passes_filter(r, &fig.filter, &["variant"]))
                .collect(),
            SpeedupBase {
                variant: None,
                x: Some(base_x),
            } => rows
                .iter()
                .filter(|r| r.variant == sample.variant)
                .filter(|r| same_params_except(&r.params, &sample.params, &fig.x))
                .filter(|r| passes_filter(r, &fig.filter, &[fig.x.as_str()]))
                .filter(|r| match param_of(r, &fig.x) {
                    Some(v) => v.same_as(base_x),
                    None => base_x
                        .as_f64()
                        .is_some_and(|b| column_value(r, &fig.x) == Some(b)),
                })
                .collect(),
            _ => bail!("speedup_over needs exactly one of `variant` or `x`"),
        };
        let base_values: Repetitions = base_rows
            .iter()
            .filter_map(|r| column_value(r, &fig.y).map(|y| (r.repetition, y)))
            .collect();
        let base_ys: Vec<f64> = base_values.values().copied().collect();
        let ys: Vec<f64> = values.values().copied().collect();
        let (Some(base_mid), Some(mid)) = (median(&base_ys), median(&ys)) else {
            continue;
        };
        speedups.push(base_mid / mid);
        ratios.extend(
            values
                .iter()
                .filter_map(|(rep, y)| base_values.get(rep).map(|b| b / y)),
        );
    }
    let Some(mid) = median(&speedups) else {
        return Ok(None);
    };
    let (low, high) = if ratios.is_empty() {
        (mid, mid)
    } else {
        let (low, high) = min_max(&ratios);
        (low.min(mid), high.max(mid))
    };
    Ok(Some(PlotPoint { x, mid, low, high }))
}

/// An f64 usable as a map key (x positions are finite numbers from the rows).
#[derive(Clone, Copy, Debug, PartialEq)]
struct OrderedX(f64);
impl Eq for OrderedX {}
impl PartialOrd for OrderedX {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedX {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

fn unique<'a, T: PartialEq + 'a>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn describe_filter(filter: &BTreeMap<String, FilterValue>) -> String {
    if filter.is_empty() {
        return "{} (no filter)".to_string();
    }
    let parts: Vec<String> = filter.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

fn describe_base(base: Option<&SpeedupBase>) -> String {
    match base {
        Some(SpeedupBase {
            variant: Some(v), ..
        }) => v.clone(),
        Some(SpeedupBase { x: Some(x), .. }) => format!("x = {x}"),
        _ => "(unset)".to_string(),
    }
}

/// A readable axis label with the unit, derived from a column or parameter name.
pub fn axis_label(column: &str) -> String {
    Column::reference(column).label()
}

/// A tick label: integers plainly, other values with 3 significant digits; from 10^4 up with
/// an SI suffix (`20k`, `2.5M`, `1G`: seven-digit ticks do not fit a printed axis), below 10^-3
/// in short scientific form (`5e-4`).
fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let magnitude = v.abs();
    if magnitude >= 1e4 {
        let (scale, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M")]
            .into_iter()
            .find(|(scale, _)| magnitude >= *scale)
            .unwrap_or((1e3, "k"));
        return format!("{}{suffix}", significant(v / scale));
    }
    if magnitude < 1e-3 {
        let exponent = magnitude.log10().floor() as i32;
        return format!("{}e{exponent}", significant(v / 10f64.powi(exponent)));
    }
    significant(v)
}

/// `v` with at most 3 significant digits (integers whole), trailing zeros trimmed.
fn significant(v: f64) -> String {
    let magnitude = v.abs();
    if (magnitude - magnitude.round()).abs() < 1e-9 * magnitude.max(1.0) {
        return format!("{v:.0}");
    }
    let decimals = (2 - magnitude.log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// The unit an axis is drawn in: a label ending in `(s)` switches to ms or µs when its largest
/// value is under a second (under a millisecond), one ending in `(bytes)` to kB, MB, GB or TB,
/// so that the ticks read `20` rather than `0.02` or `2e10`. Returns the label and the factor
/// the axis' values are multiplied by.
fn display_unit(label: &str, largest: f64) -> (String, f64) {
    if !(largest.is_finite() && largest > 0.0) {
        return (label.to_string(), 1.0);
    }
    if let Some(stem) = label.strip_suffix("(s)") {
        if largest < 1e-3 {
            return (format!("{stem}(µs)"), 1e6);
        }
        if largest < 1.0 {
            return (format!("{stem}(ms)"), 1e3);
        }
    }
    if let Some(stem) = label.strip_suffix("(bytes)") {
        for (unit, scale) in [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)] {
            if largest >= scale {
                return (format!("{stem}({unit})"), 1.0 / scale);
            }
        }
    }
    (label.to_string(), 1.0)
}

impl FigureData {
    /// A series' name in the legend: a peer's says so.
    fn label(&self, name: &str) -> String {
        if self.peers.contains(name) {
            format!("{name} (peer)")
        } else {
            name.to_string()
        }
    }

    /// The data in the units its axes are drawn in ([`display_unit`]); a categorical x stays.
    fn in_display_units(&self) -> FigureData {
        let largest = |values: &mut dyn Iterator<Item = f64>| {
            values
                .map(f64::abs)
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        };
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let (x_label, x_factor) = if self.categories.is_some() {
            (self.x_label.clone(), 1.0)
        } else {
            display_unit(&self.x_label, largest(&mut points().map(|p| p.x)))
        };
        let (y_label, y_factor) = display_unit(
            &self.y_label,
            largest(&mut points().flat_map(|p| [p.low, p.mid, p.high])),
        );
        FigureData {
            series: self
                .series
                .iter()
                .map(|s| Series {
                    name: s.name.clone(),
                    points: s
                        .points
                        .iter()
                        .map(|p| PlotPoint {
                            x: p.x * x_factor,
                            mid: p.mid * y_factor,
                            low: p.low * y_factor,
                            high: p.high * y_factor,
                        })
                        .collect(),
                })
                .collect(),
            style_order: self.style_order.clone(),
            categories: self.categories.clone(),
            x_label,
            y_label,
            peers: self.peers.clone(),
        }
    }
}

/// Axis extents: (low, high) covering every band, padded, positive on a log axis.
fn extent(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        if hi / lo < 1.01 {
            return (lo / 2.0, hi * 2.0);
        }
        let ratio = (hi / lo).powf(0.06);
        return (lo / ratio, hi * ratio);
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let span = hi - lo;
    if span <= f64::EPSILON * hi.abs().max(1.0) {
        let half = if hi == 0.0 { 1.0 } else { 0.5 * hi.abs() };
        return (lo - half, hi + half);
    }
    let pad = 0.06 * span;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

/// Whether every value is a power of two (threads, sizes): a base-2 log axis reads better.
fn all_powers_of_two(values: impl Iterator<Item = f64>) -> bool {
    let mut any = false;
    for v in values {
        any = true;
        if !(v >= 1.0 && v.fract() == 0.0 && (v as u64).is_power_of_two()) {
            return false;
        }
    }
    any
}

/// The height of one line of text of `px` pixels.
fn line_height(px: u32) -> u32 {
    (f64::from(px) * 1.25).ceil() as u32
}

/// Greedy word wrap of `text` into lines no wider than `max` by `width_of`; a word wider than
/// `max` gets a line of its own.
fn wrap(text: &str, max: u32, width_of: impl Fn(&str) -> u32) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if line.is_empty() {
            line = word.to_string();
            continue;
        }
        let candidate = format!("{line} {word}");
        if width_of(&candidate) <= max {
            line = candidate;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// One axis: its range, linear or logarithmic, the ticks that are labelled (with bold
/// gridlines) and the minor gridlines. Plotters' own key points are sparse within a log decade
/// and blind to the label font; these are chosen here, for every axis kind alike.
#[derive(Clone, Debug)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl Axis {
    /// The axis through `values`: `categories` evenly spaced positions, or the padded extent
    /// of the values ([`extent`]) with 1-2-5 ticks (powers of two where every value is one).
    /// `integer`: a linear axis of whole numbers (threads) gets no fractional tick.
    fn new(
        values: &[f64],
        log: bool,
        from_zero: bool,
        categories: Option<usize>,
        integer: bool,
    ) -> Self {
        if let Some(n) = categories {
            return Axis {
                lo: -0.5,
                hi: n as f64 - 0.5,
                log: false,
                ticks: (0..n).map(|i| i as f64).collect(),
                minor: Vec::new(),
            };
        }
        let (lo, hi) = extent(values.iter().copied(), log, from_zero);
        let (mut ticks, minor) = if !log {
            (linear_ticks(lo, hi, MAX_TICKS, integer), Vec::new())
        } else if all_powers_of_two(values.iter().copied().filter(|v| *v > 0.0)) {
            (powers_of_two_ticks(lo, hi), Vec::new())
        } else {
            (log_ticks(lo, hi), log_minor_ticks(lo, hi))
        };
        if integer {
            ticks.retain(|t| t.fract() == 0.0);
        }
        // A log axis within less than a factor of two may hold a single 1-2-5 tick: label it
        // linearly instead.
        let ticks = if log && ticks.len() < 2 {
            linear_ticks(lo, hi, MAX_TICKS, integer)
                .into_iter()
                .filter(|t| *t > 0.0)
                .collect()
        } else {
            ticks
        };
        Axis {
            lo,
            hi,
            log,
            ticks,
            minor,
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let to = |v: f64| {
            if self.log {
                v.max(f64::MIN_POSITIVE).ln()
            } else {
                v
            }
        };
        let (a, b) = (to(self.lo), to(self.hi));
        let fraction = if b > a {
            (to(*value) - a) / (b - a)
        } else {
            0.5
        };
        let pixels = (fraction * f64::from(limit.1 - limit.0)).clamp(-1e6, 1e6);
        limit.0 + pixels.round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Ticks k x step inside [lo, hi], step 1, 2, 2.5 or 5 x 10^n giving at most `max` ticks
/// (`integer`: a whole step, and no 2.5).
fn linear_ticks(lo: f64, hi: f64, max: usize, integer: bool) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        return Vec::new();
    }
    let raw = (hi - lo) / (max.max(2) - 1) as f64;
    let base = 10f64.powf(raw.log10().floor());
    let mantissas: &[f64] = if integer {
        &[1.0, 2.0, 5.0, 10.0]
    } else {
        &[1.0, 2.0, 2.5, 5.0, 10.0]
    };
    let mut step = mantissas
        .iter()
        .map(|m| m * base)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * base);
    if integer {
        step = step.max(1.0).round();
    }
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    // k x step rounded to the step's digits: 3 x 0.2 is 0.6, not 0.6000000000000001.
    let digits = (1 - step.log10().floor() as i32).max(0) as usize;
    (first..=last)
        .map(|k| {
            format!("{:.digits$}", k as f64 * step)
                .parse()
                .unwrap_or(k as f64 * step)
        })
        .collect()
}

/// Ticks m x 10^k inside [lo, hi] (lo > 0): m in {1, 2, 5} over up to three decades, {1, 10^k}
/// beyond; {1, 1.5, 2, 3, 5, 7} when the range is within one decade.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades <= 1.2 {
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
    } else if decades <= 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let step = if decades > 8.0 {
        (decades / 6.0).ceil() as i32
    } else {
        1
    };
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let mut ticks = Vec::new();
    let mut exponent = first;
    while exponent <= last {
        for m in mantissas {
            let t = m * 10f64.powi(exponent);
            if t >= lo && t <= hi {
                ticks.push(t);
            }
        }
        exponent += step;
    }
    ticks
}

/// Minor gridlines of a log axis: m x 10^k, m = 1..9, over up to six decades.
fn log_minor_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) || (hi / lo).log10() > 6.0 {
        return Vec::new();
    }
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (first..=last)
        .flat_map(|e| (1..=9).map(move |m| f64::from(m) * 10f64.powi(e)))
        .filter(|t| *t >= lo && *t <= hi)
        .collect()
}

/// Powers of two inside [lo, hi], thinned to at most about 8 labels.
fn powers_of_two_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let first = lo.log2().ceil() as i32;
    let last = hi.log2().floor() as i32;
    let step = ((last - first) / 8 + 1).max(1) as usize;
    (first..=last).step_by(step).map(|e| 2f64.powi(e)).collect()
}

/// A series' colour and its marker shape (one of four), by its place in the figure's style
/// order.
fn style_of(data: &FigureData, name: &str) -> (usize, RGBColor) {
    let index = data.style_order.iter().position(|n| n == name).unwrap_or(0);
    (index, PALETTE[index % PALETTE.len()])
}

/// Draws a series' legend sample on `area`: a line from `(x, y)` with the marker in its middle.
fn draw_legend_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    index: usize,
    color: RGBColor,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let width = LEGEND_ICON as i32 - 12;
    area.draw(&PathElement::new(
        vec![(x, y), (x + width, y)],
        color.stroke_width(LINE_WIDTH),
    ))?;
    let c = (x + width / 2, y);
    let style = color.filled();
    match index % 4 {
        0 => area.draw(&Circle::new(c, MARKER, style))?,
        1 => area.draw(&TriangleMarker::new(c, MARKER + 1, style))?,
        2 => area.draw(&Rectangle::new(
            [
                (c.0 - MARKER + 1, c.1 - MARKER + 1),
                (c.0 + MARKER - 1, c.1 + MARKER - 1),
            ],
            style,
        ))?,
        _ => area.draw(&Cross::new(c, MARKER, color.stroke_width(LINE_WIDTH + 1)))?,
    }
    Ok(())
}

fn render<DB: DrawingBackend>(
    whole: &DrawingArea<DB, Shift>,
    fig: &FigureConfig,
    data: &FigureData,
    footnote: &str,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    whole.fill(&WHITE)?;
    let width_of = |text: &str, px: u32| -> u32 {
        whole
            .estimate_text_size(text, &TextStyle::from((FONT, px)))
            .map(|(w, _)| w)
            .unwrap_or((text.chars().count() as f64 * 0.6 * f64::from(px)) as u32)
    };
    let text_width = WIDTH - 2 * MARGIN;

    // The footnote under everything, wrapped.
    let mut area = whole.clone();
    if !footnote.is_empty() {
        let lines = wrap(footnote, text_width, |t| width_of(t, FOOTNOTE_PX));
        let step = line_height(FOOTNOTE_PX);
        let height = lines.len() as u32 * step + 8;
        let (above, foot) = area.split_vertically(HEIGHT - height);
        let grey = BLACK.mix(0.65);
        let style = TextStyle::from((FONT, FOOTNOTE_PX)).color(&grey);
        for (i, line) in lines.iter().enumerate() {
            foot.draw_text(line, &style, (MARGIN as i32, 2 + (i as u32 * step) as i32))?;
        }
        area = above;
    }

    // The title on top, wrapped and centred.
    let lines = wrap(&fig.title, text_width, |t| width_of(t, TITLE_PX));
    let step = line_height(TITLE_PX);
    let (title, mut area) = area.split_vertically(MARGIN / 2 + lines.len() as u32 * step + 2);
    let style = TextStyle::from((FONT, TITLE_PX)).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in lines.iter().enumerate() {
        title.draw_text(
            line,
            &style,
            ((WIDTH / 2) as i32, (MARGIN / 2 + i as u32 * step) as i32),
        )?;
    }

    let points = || data.series.iter().flat_map(|s| s.points.iter());
    let integer_x = data.categories.is_none() && points().all(|p| p.x.fract() == 0.0);
    let x = Axis::new(
        &points().map(|p| p.x).collect::<Vec<_>>(),
        fig.log_x && data.categories.is_none(),
        false,
        data.categories.as_ref().map(Vec::len),
        integer_x,
    );
    let y = Axis::new(
        &points()
            .flat_map(|p| [p.low, p.mid, p.high])
            .collect::<Vec<_>>(),
        fig.log_y,
        true,
        None,
        false,
    );
    let x_area = line_height(TICK_PX) + line_height(AXIS_TITLE_PX) + 14;
    let widest_y_tick = y
        .ticks
        .iter()
        .map(|t| width_of(&tick(*t), TICK_PX))
        .max()
        .unwrap_or(0);
    let y_area = widest_y_tick + line_height(AXIS_TITLE_PX) + 24;

    // The legend: in a corner of the plot where it hides no data, else above the plot.
    let (area_w, area_h) = area.dim_in_pixel();
    let plot_w = f64::from(area_w.saturating_sub(2 * MARGIN + y_area).max(1));
    let plot_h = f64::from(area_h.saturating_sub(MARGIN + 8 + x_area).max(1));
    let label_w = data
        .series
        .iter()
        .map(|s| width_of(&data.label(&s.name), LEGEND_PX))
        .max()
        .unwrap_or(0);
    let rows = data.series.len() as u32;
    let box_w = label_w + LEGEND_ICON + 2 * LEGEND_MARGIN;
    let box_h = rows.saturating_sub(1) * line_height(LEGEND_PX) + LEGEND_PX + 2 * LEGEND_MARGIN;
    // Plotters sets the box 5 px in from the corner; a marker reaches MARKER px around its point.
    let pad = 5 + MARKER as u32;
    let corner = place_legend(
        data,
        (x.lo, x.hi, x.log),
        (y.lo, y.hi, y.log),
        (
            f64::from(box_w + pad) / plot_w,
            f64::from(box_h + pad) / plot_h,
        ),
    );
    if corner.is_none() {
        // As many columns as fit the width, each as wide as its longest label.
        let widths: Vec<u32> = data
            .series
            .iter()
            .map(|s| LEGEND_ICON + width_of(&data.label(&s.name), LEGEND_PX) + 20)
            .collect();
        let layout = |columns: usize| -> Vec<u32> {
            (0..columns)
                .map(|c| {
                    widths
                        .iter()
                        .skip(c)
                        .step_by(columns)
                        .copied()
                        .max()
                        .unwrap_or(0)
                })
                .collect()
        };
        let columns = (1..=widths.len())
            .rev()
            .find(|&c| layout(c).iter().sum::<u32>() <= text_width)
            .unwrap_or(1);
        let column_w = layout(columns);
        let rows = widths.len().div_ceil(columns);
        let step = line_height(LEGEND_PX) + 2;
        let (band, rest) = area.split_vertically(rows as u32 * step + 8);
        let left = WIDTH.saturating_sub(column_w.iter().sum::<u32>()) / 2;
        let style = TextStyle::from((FONT, LEGEND_PX)).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, s) in data.series.iter().enumerate() {
            let (index, color) = style_of(data, &s.name);
            let x0 = (left + column_w[..i % columns].iter().sum::<u32>()) as i32;
            let y0 = (4 + (i / columns) as u32 * step + step / 2) as i32;
            draw_legend_sample(&band, (x0, y0), index, color)?;
            band.draw_text(&data.label(&s.name), &style, (x0 + LEGEND_ICON as i32, y0))?;
        }
        area = rest;
    }

    // An axis title longer than its axis is set smaller (down to 18 px) rather than cut off.
    let (area_w, area_h) = area.dim_in_pixel();
    let room_y = f64::from(area_h.saturating_sub(MARGIN + 8 + x_area));
    let room_x = f64::from(area_w.saturating_sub(2 * MARGIN + y_area));
    let fit = |label: &str, room: f64| {
        let width = f64::from(width_of(label, AXIS_TITLE_PX).max(1));
        (f64::from(AXIS_TITLE_PX) * (0.95 * room / width).min(1.0)).max(18.0)
    };
    let axis_title_px = fit(&data.y_label, room_y).min(fit(&data.x_label, room_x));

    let mut chart = ChartBuilder::on(&area)
        .margin(MARGIN)
        .margin_top(8)
        .x_label_area_size(x_area)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x, y)?;

    let categories = data.categories.clone();
    let x_formatter = move |v: &f64| match &categories {
        Some(labels) => {
            let index = v.round();
            if (v - index).abs() < 1e-6 && index >= 0.0 && (index as usize) < labels.len() {
                labels[index as usize].clone()
            } else {
                String::new()
            }
        }
        None => tick(*v),
    };
    let y_formatter = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .x_desc(data.x_label.as_str())
        .y_desc(data.y_label.as_str())
        .axis_desc_style((FONT, axis_title_px))
        .label_style((FONT, TICK_PX))
        .x_label_formatter(&x_formatter)
        .y_label_formatter(&y_formatter)
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.06))
        .axis_style(BLACK.mix(0.8).stroke_width(2))
        .draw()?;

    for series in &data.series {
        let (index, color) = style_of(data, &series.name);
        let points = &series.points;
        if points.len() >= 2 {
            let band: Vec<(f64, f64)> = points
                .iter()
                .map(|p| (p.x, p.high))
                .chain(points.iter().rev().map(|p| (p.x, p.low)))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(
                band,
                color.mix(0.18).filled(),
            )))?;
        } else {
            chart.draw_series(points.iter().map(|p| {
                ErrorBar::new_vertical(
                    p.x,
                    p.low,
                    p.mid,
                    p.high,
                    color.stroke_width(LINE_WIDTH),
                    16,
                )
            }))?;
        }
        let line_points = points.iter().map(|p| (p.x, p.mid));
        let anno = if data.peers.contains(&series.name) {
            chart.draw_series(DashedLineSeries::new(
                line_points,
                14,
                8,
                color.stroke_width(LINE_WIDTH),
            ))?
        } else {
            chart.draw_series(LineSeries::new(line_points, color.stroke_width(LINE_WIDTH)))?
        };
        anno.label(data.label(&series.name));
        // The legend shows a line segment with the series' marker on it. Each shape is its own
        // type (plotters' dynamic elements would force a 'static backend), hence the match.
        let style = color.filled();
        let half = (LEGEND_ICON as i32 - 12) / 2;
        let line = move |x: i32, y: i32| {
            EmptyElement::at((x + half, y))
                + PathElement::new(vec![(-half, 0), (half, 0)], color.stroke_width(LINE_WIDTH))
        };
        let square = [(-MARKER + 1, -MARKER + 1), (MARKER - 1, MARKER - 1)];
        match index % 4 {
            0 => anno.legend(move |(x, y)| line(x, y) + Circle::new((0, 0), MARKER, style)),
            1 => anno
                .legend(move |(x, y)| line(x, y) + TriangleMarker::new((0, 0), MARKER + 1, style)),
            2 => anno.legend(move |(x, y)| line(x, y) + Rectangle::new(square, style)),
            _ => anno.legend(move |(x, y)| {
                line(x, y) + Cross::new((0, 0), MARKER, color.stroke_width(LINE_WIDTH + 1))
            }),
        };
        // A trace's hundreds of steps would bury the line under markers: the legend tells the
        // series apart there.
        if points.len() > MAX_MARKERS {
            continue;
        }
        let coords = points.iter().map(|p| (p.x, p.mid));
        match index % 4 {
            0 => chart.draw_series(coords.map(|c| Circle::new(c, MARKER, style)))?,
            1 => chart.draw_series(coords.map(|c| TriangleMarker::new(c, MARKER + 1, style)))?,
            2 => chart
                .draw_series(coords.map(|c| EmptyElement::at(c) + Rectangle::new(square, style)))?,
            _ => chart.draw_series(
                coords.map(|c| Cross::new(c, MARKER, color.stroke_width(LINE_WIDTH + 1))),
            )?,
        };
    }

    if let Some(position) = corner {
        chart
            .configure_series_labels()
            .position(position)
            .margin(LEGEND_MARGIN)
            .legend_area_size(LEGEND_ICON)
            .label_font((FONT, LEGEND_PX))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()?;
    }
    Ok(())
}

/// Where the legend goes without hiding data: the first corner of the plot (upper right, upper
/// left, lower right, lower left) whose legend-sized box (`size`: fractions of the plot's width
/// and height) holds no part of the data: no marker, band edge, error bar or line between two
/// markers, in the axes' own (log where log) fractions. None when every corner is taken: the
/// legend then goes above the plot.
fn place_legend(
    data: &FigureData,
    x: (f64, f64, bool),
    y: (f64, f64, bool),
    (box_w, box_h): (f64, f64),
) -> Option<SeriesLabelPosition> {
    let to = |v: f64, log: bool| {
        if log {
            v.max(f64::MIN_POSITIVE).ln()
        } else {
            v
        }
    };
    let fraction = |v: f64, (lo, hi, log): (f64, f64, bool)| {
        let (a, b) = (to(lo, log), to(hi, log));
        if b > a {
            (to(v, log) - a) / (b - a)
        } else {
            0.5
        }
    };
    // Straight in the axes' fractions is straight on screen: sample every drawn segment.
    let mut marks: Vec<(f64, f64)> = Vec::new();
    let mut segment = |a: (f64, f64), b: (f64, f64)| {
        let length = (b.0 - a.0).hypot(b.1 - a.1);
        let steps = ((length / 0.01).ceil() as usize).clamp(1, 200);
        marks.extend((0..=steps).map(|k| {
            let t = k as f64 / steps as f64;
            (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1))
        }));
    };
    for s in &data.series {
        let at: Vec<[(f64, f64); 3]> = s
            .points
            .iter()
            .map(|p| {
                let fx = fraction(p.x, x);
                [p.low, p.mid, p.high].map(|v| (fx, fraction(v, y)))
            })
            .collect();
        for p in &at {
            // The marker, and the error bar or the band's extent at this x.
            segment(p[0], p[2]);
            segment(p[1], p[1]);
        }
        for pair in at.windows(2) {
            for (from, to) in pair[0].iter().zip(&pair[1]) {
                segment(*from, *to);
            }
        }
    }
    let free = |right: bool, upper: bool| {
        !marks.iter().any(|&(fx, fy)| {
            (if right {
                fx >= 1.0 - box_w
            } else {
                fx <= box_w
            }) && (if upper {
                fy >= 1.0 - box_h
            } else {
                fy <= box_h
            })
        })
    };
    if box_w >= 1.0 || box_h >= 1.0 {
        return None;
    }
    [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ]
    .into_iter()
    .find(|&(_, right, upper)| free(right, upper))
    .map(|(corner, _, _)| corner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(8.0), "8");
        assert_eq!(tick(0.125), "0.125");
        assert_eq!(tick(1.5), "1.5");
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(2.5e-5), "2.5e-5");
        assert_eq!(tick(5e-4), "5e-4");
        assert_eq!(tick(5000.0), "5000");
        assert_eq!(tick(20_000.0), "20k");
        assert_eq!(tick(2.5e6), "2.5M");
        assert_eq!(tick(-3_950_000.0), "-3.95M");
        assert_eq!(tick(1e9), "1G");
    }

    #[test]
    fn seconds_and_bytes_are_drawn_in_a_unit_that_keeps_ticks_short() {
        assert_eq!(
            display_unit("wall time (s)", 2.0),
            ("wall time (s)".into(), 1.0)
        );
        assert_eq!(
            display_unit("wall time (s)", 0.05),
            ("wall time (ms)".into(), 1e3)
        );
        assert_eq!(display_unit("loop (s)", 5e-4), ("loop (µs)".into(), 1e6));
        assert_eq!(
            display_unit("model (bytes)", 3e9),
            ("model (GB)".into(), 1e-9)
        );
        assert_eq!(
            display_unit("model (bytes)", 500.0),
            ("model (bytes)".into(), 1.0)
        );
        assert_eq!(display_unit("GFLOP/s", 0.5), ("GFLOP/s".into(), 1.0));
    }

    #[test]
    fn titles_wrap_at_words() {
        let by_chars = |t: &str| t.chars().count() as u32;
        assert_eq!(wrap("a bb ccc dddd", 6, by_chars), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap("short", 60, by_chars), ["short"]);
        assert_eq!(
            wrap("averyverylongword x", 4, by_chars),
            ["averyverylongword", "x"]
        );
        assert!(wrap("", 10, by_chars).is_empty());
    }

    #[test]
    fn linear_ticks_are_round_and_few() {
        assert_eq!(
            linear_ticks(0.0, 1.05, 7, false),
            [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        assert_eq!(linear_ticks(0.9, 2.1, 7, true), [1.0, 2.0]);
        assert_eq!(linear_ticks(0.0, 0.047, 7, false).len(), 5);
        assert!(linear_ticks(0.0, 6.5e-4, 7, false).len() <= 7);
        assert!(linear_ticks(1.0, 1.0, 7, false).is_empty());
    }

    #[test]
    fn log_ticks_label_every_decade_and_stay_in_range() {
        assert_eq!(log_ticks(1.5, 25.0), [2.0, 5.0, 10.0, 20.0]);
        assert_eq!(log_ticks(0.9, 8.0), [1.0, 1.5, 2.0, 3.0, 5.0, 7.0]);
        assert_eq!(log_ticks(1e-3, 1e3).len(), 7);
        assert!(log_ticks(-1.0, 2.0).is_empty());
        assert_eq!(powers_of_two_ticks(0.9, 17.0), [1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(log_minor_ticks(15.0, 45.0), [20.0, 30.0, 40.0]);
        // Within less than a factor of two a log axis still gets labelled ticks.
        let axis = Axis::new(&[1.1, 1.4], true, false, None, false);
        assert!(axis.ticks.len() >= 2, "{axis:?}");
    }

    #[test]
    fn max_and_min_in_a_filter_pick_the_largest_and_smallest_value() {
        let fig = FigureConfig {
            kind: FigureKind::Results,
            name: "f".into(),
            title: "t".into(),
            x: "nnz".into(),
            y: "wall_time_s".into(),
            series: "variant".into(),
            filter: BTreeMap::from([
                (
                    "rows".to_string(),
                    FilterValue::One(Value::Str("max".into())),
                ),
                (
                    "variant".to_string(),
                    FilterValue::One(Value::Str("a".into())),
                ),
            ]),
            speedup_over: None,
            log_x: false,
            log_y: false,
            x_label: None,
            y_label: None,
        };
        let params = |rows: i64| Params::from([("rows".to_string(), Value::Int(rows))]);
        let rows = [("a", params(256)), ("a", params(512)), ("b", params(4096))];
        let resolved = with_resolved_filter(&fig, rows.iter().map(|(v, p)| (*v, p)));
        assert_eq!(resolved.filter["rows"], FilterValue::One(Value::Int(512)));
        let mut smallest = fig.clone();
        smallest.filter.insert(
            "rows".to_string(),
            FilterValue::One(Value::Str("min".into())),
        );
        let resolved = with_resolved_filter(&smallest, rows.iter().map(|(v, p)| (*v, p)));
        assert_eq!(resolved.filter["rows"], FilterValue::One(Value::Int(256)));
        // Over two variants the largest is the other's; in a list `max` is a plain word.
        let mut both = fig.clone();
        both.filter.insert(
            "variant".to_string(),
            FilterValue::AnyOf(vec![Value::Str("a".into()), Value::Str("b".into())]),
        );
        let resolved = with_resolved_filter(&both, rows.iter().map(|(v, p)| (*v, p)));
        assert_eq!(resolved.filter["rows"], FilterValue::One(Value::Int(4096)));
        let listed = FilterValue::AnyOf(vec![Value::Str("max".into())]);
        assert_eq!(listed.extreme(), None);
    }

    #[test]
    fn a_list_in_a_filter_keeps_rows_equal_to_any_of_its_values() {
        let filter = BTreeMap::from([
            (
                "variant".to_string(),
                FilterValue::AnyOf(vec![
                    Value::Str("sync".into()),
                    Value::Str("async non_blocking=true".into()),
                ]),
            ),
            (
                "threads".to_string(),
                FilterValue::AnyOf(vec![Value::Int(1), Value::Float(4.0)]),
            ),
        ]);
        let at = |threads: i64| Params::from([("threads".to_string(), Value::Int(threads))]);
        let passes =
            |variant: &str, threads: i64| passes_filter_on(variant, &at(threads), &filter, &[]);
        assert!(passes("sync", 1));
        assert!(passes("async non_blocking=true", 4));
        assert!(!passes("async non_blocking=false", 1));
        assert!(!passes("sync", 2));
        // An empty list keeps nothing; a key left out by `except` keeps everything.
        let empty = BTreeMap::from([("threads".to_string(), FilterValue::AnyOf(vec![]))]);
        assert!(!passes_filter_on("sync", &at(1), &empty, &[]));
        assert!(passes_filter_on("sync", &at(1), &empty, &["threads"]));
    }

    fn data(points: &[(f64, f64)]) -> FigureData {
        FigureData {
            series: vec![Series {
                name: "a series".to_string(),
                points: points
                    .iter()
                    .map(|&(x, y)| PlotPoint {
                        x,
                        low: y,
                        mid: y,
                        high: y,
                    })
                    .collect(),
            }],
            style_order: vec!["a series".to_string()],
            categories: None,
            x_label: String::new(),
            y_label: String::new(),
            peers: BTreeSet::new(),
        }
    }

    #[test]
    fn the_legend_takes_a_corner_free_of_markers_and_lines_or_goes_above_the_plot() {
        let axes = ((0.0, 11.0, false), (0.0, 11.0, false));
        let size = (0.3, 0.3);
        // A rising line leaves the upper left free.
        let rising: Vec<(f64, f64)> = (1..=10).map(|i| (i as f64, i as f64)).collect();
        let corner = place_legend(&data(&rising), axes.0, axes.1, size);
        assert!(matches!(corner, Some(SeriesLabelPosition::UpperLeft)));
        // A line through the upper right corner with its two markers outside it: the corner is
        // taken all the same.
        let crossing = [(5.0, 11.0), (11.0, 5.0)];
        let corner = place_legend(&data(&crossing), axes.0, axes.1, size);
        assert!(
            matches!(corner, Some(SeriesLabelPosition::UpperLeft)),
            "{corner:?}"
        );
        // Data in every corner: the legend goes above the plot, on a log axis too.
        let corners = [(0.5, 0.5), (0.5, 10.5), (10.5, 0.5), (10.5, 10.5)];
        assert!(place_legend(&data(&corners), axes.0, axes.1, size).is_none());
        let log_y = (0.4, 11.0, true);
        assert!(place_legend(&data(&corners), axes.0, log_y, size).is_none());
        // A legend as large as the plot never fits inside.
        assert!(place_legend(&data(&rising), axes.0, axes.1, (1.0, 0.2)).is_none());
    }

    #[test]
    fn extent_of_a_single_value_is_not_empty() {
        let (lo, hi) = extent([2.0].into_iter(), false, false);
        assert!(lo < 2.0 && hi > 2.0, "{lo}..{hi}");
        let (lo, hi) = extent([2.0].into_iter(), true, false);
        assert!(lo > 0.0 && lo < 2.0 && hi > 2.0, "{lo}..{hi}");
    }
}
