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

use crate::experiment::config::{FigureConfig, FigureKind, SpeedupBase};
use crate::family::{Params, ResultRow, TraceRow, Value};
use crate::util::column::{Column, PARAM_PREFIX};
use crate::util::stats::median;
use anyhow::{bail, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const WIDTH: u32 = 1024;
const HEIGHT: u32 = 640;
const FONT: &str = "sans-serif";
/// Pixels under the plot for the machine footnote.
const FOOTNOTE_HEIGHT: i32 = 22;
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
    let footnote = crate::results::read_meta(run_dir)
        .map(|meta| machine_footnote(&meta))
        .unwrap_or_default();
    // Read once, and only when a figure needs it.
    let mut traces: Option<anyhow::Result<Vec<TraceRow>>> = None;
    for fig in figs {
        let drawn = match fig.kind {
            FigureKind::Results => plot_figure(fig, rows, &dir, &footnote),
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
    let data = FigureData::build(fig, rows).with_context(|| format!("figure `{}`", fig.name))?;
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

/// Whether a row passes a figure's filter (`variant` or parameters), skipping `except`.
fn passes_filter(row: &ResultRow, filter: &BTreeMap<String, Value>, except: &[&str]) -> bool {
    passes_filter_on(&row.variant, &row.params, filter, except)
}

/// [`passes_filter`] for any row with a variant and parameters (a trace row).
fn passes_filter_on(
    variant: &str,
    params: &Params,
    filter: &BTreeMap<String, Value>,
    except: &[&str],
) -> bool {
    filter
        .iter()
        .filter(|(key, _)| !except.contains(&key.as_str()))
        .all(|(key, want)| {
            if key == "variant" {
                want.as_str() == Some(variant) || want.to_string() == variant
            } else {
                param_in(params, key).is_some_and(|have| have.same_as(want))
            }
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
                Some(base) => format!("speedup over {} (x)", describe_base(Some(base))),
                None => axis_label(&fig.y),
            });
        Ok(FigureData {
            series,
            style_order: series_names,
            categories,
            x_label,
            y_label,
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

fn describe_filter(filter: &BTreeMap<String, Value>) -> String {
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

/// A tick label: integers plainly, other values with 3 significant digits.
fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let magnitude = v.abs();
    if (magnitude - magnitude.round()).abs() < 1e-9 * magnitude.max(1.0) && magnitude < 1e7 {
        return format!("{v:.0}");
    }
    if !(1e-3..1e7).contains(&magnitude) {
        return format!("{v:.1e}");
    }
    let decimals = (2 - magnitude.log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
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
    let root = if footnote.is_empty() {
        whole.clone()
    } else {
        let (plot, foot) = whole.split_vertically(HEIGHT as i32 - FOOTNOTE_HEIGHT);
        foot.draw_text(
            footnote,
            &TextStyle::from((FONT, 13)).color(&BLACK.mix(0.65)),
            (14, 2),
        )?;
        plot
    };
    let root = &root;
    let log_x = fig.log_x && data.categories.is_none();
    let log_y = fig.log_y;
    let points = || data.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = match &data.categories {
        Some(labels) => (-0.5, labels.len() as f64 - 0.5),
        None => extent(points().map(|p| p.x), log_x, false),
    };
    let (y0, y1) = extent(points().flat_map(|p| [p.low, p.mid, p.high]), log_y, true);
    let (legend, top) = place_legend(data, (x0, x1, log_x), (y0, y1, log_y));
    let y1 = top.unwrap_or(y1);
    // Plotters' own log ticks are sparse within a decade; explicit 1-2-5 (or powers of two for
    // thread counts) ticks label every gridline.
    let x_ticks = if all_powers_of_two(points().map(|p| p.x)) {
        powers_of_two_ticks(x0, x1)
    } else {
        log_ticks(x0, x1)
    };
    let y_ticks = log_ticks(y0, y1);
    match (log_x, log_y) {
        (false, false) => draw(root, fig, data, legend, x0..x1, y0..y1),
        (true, false) => draw(
            root,
            fig,
            data,
            legend,
            (x0..x1).log_scale().with_key_points(x_ticks),
            y0..y1,
        ),
        (false, true) => draw(
            root,
            fig,
            data,
            legend,
            x0..x1,
            (y0..y1).log_scale().with_key_points(y_ticks),
        ),
        (true, true) => draw(
            root,
            fig,
            data,
            legend,
            (x0..x1).log_scale().with_key_points(x_ticks),
            (y0..y1).log_scale().with_key_points(y_ticks),
        ),
    }
}

/// Ticks m x 10^k inside [lo, hi] (lo > 0): m in {1, 2, 5} over up to four decades, {1, 10^k}
/// beyond; {1, 1.5, 2, 3, 5, 7} when the range is within one decade.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades <= 1.2 {
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
    } else if decades <= 4.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let step = if decades > 12.0 {
        (decades / 8.0).ceil() as i32
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

/// Powers of two inside [lo, hi], thinned to at most about 12 labels.
fn powers_of_two_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let first = lo.log2().ceil() as i32;
    let last = hi.log2().floor() as i32;
    let step = ((last - first) / 12 + 1).max(1) as usize;
    (first..=last).step_by(step).map(|e| 2f64.powi(e)).collect()
}

fn draw<'r, DB, XS, YS>(
    root: &'r DrawingArea<DB, Shift>,
    fig: &FigureConfig,
    data: &FigureData,
    legend: SeriesLabelPosition,
    x_spec: XS,
    y_spec: YS,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'r,
    DB::ErrorType: 'static,
    XS: AsRangedCoord<Value = f64>,
    YS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&fig.title, (FONT, 26))
        .margin(18)
        .x_label_area_size(56)
        .y_label_area_size(84)
        .build_cartesian_2d(x_spec, y_spec)?;

    let categories = data.categories.clone();
    // Integer x values (threads, sizes) get integer ticks only: "1.5 threads" means nothing.
    let integer_x = data.categories.is_none()
        && data
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .all(|p| p.x.fract() == 0.0);
    let x_formatter = move |v: &f64| match &categories {
        Some(labels) => {
            let index = v.round();
            if (v - index).abs() < 1e-6 && index >= 0.0 && (index as usize) < labels.len() {
                labels[index as usize].clone()
            } else {
                String::new()
            }
        }
        None if integer_x && (v - v.round()).abs() > 1e-9 => String::new(),
        None => tick(*v),
    };
    let y_formatter = |v: &f64| tick(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(data.x_label.as_str())
        .y_desc(data.y_label.as_str())
        .axis_desc_style((FONT, 19))
        .label_style((FONT, 15))
        .x_label_formatter(&x_formatter)
        .y_label_formatter(&y_formatter)
        .light_line_style(BLACK.mix(0.04));
    if let Some(labels) = &data.categories {
        mesh.x_labels(labels.len() + 1);
    }
    mesh.draw()?;

    for series in &data.series {
        let index = data
            .style_order
            .iter()
            .position(|name| *name == series.name)
            .unwrap_or(0);
        let color = PALETTE[index % PALETTE.len()];
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
                ErrorBar::new_vertical(p.x, p.low, p.mid, p.high, color.stroke_width(2), 10)
            }))?;
        }
        let anno = chart.draw_series(LineSeries::new(
            points.iter().map(|p| (p.x, p.mid)),
            color.stroke_width(2),
        ))?;
        anno.label(series.name.as_str());
        // The legend shows a line segment with the series' marker on it. Each shape is its own
        // type (plotters' dynamic elements would force a 'static backend), hence the match.
        let style = color.filled();
        let line = move |x: i32, y: i32| {
            EmptyElement::at((x + 10, y))
                + PathElement::new(vec![(-10, 0), (10, 0)], color.stroke_width(2))
        };
        match index % 4 {
            0 => anno.legend(move |(x, y)| line(x, y) + Circle::new((0, 0), 5, style)),
            1 => anno.legend(move |(x, y)| line(x, y) + TriangleMarker::new((0, 0), 6, style)),
            2 => anno.legend(move |(x, y)| line(x, y) + Rectangle::new([(-4, -4), (4, 4)], style)),
            _ => {
                anno.legend(move |(x, y)| line(x, y) + Cross::new((0, 0), 5, color.stroke_width(3)))
            }
        };
        // A trace's hundreds of steps would bury the line under markers: the legend tells the
        // series apart there.
        if points.len() > MAX_MARKERS {
            continue;
        }
        let marker_style = color.filled();
        let coords = points.iter().map(|p| (p.x, p.mid));
        match index % 4 {
            0 => chart.draw_series(coords.map(|c| Circle::new(c, 5, marker_style)))?,
            1 => chart.draw_series(coords.map(|c| TriangleMarker::new(c, 6, marker_style)))?,
            2 => {
                chart.draw_series(coords.map(|c| {
                    EmptyElement::at(c) + Rectangle::new([(-4, -4), (4, 4)], marker_style)
                }))?
            }
            _ => chart.draw_series(coords.map(|c| Cross::new(c, 5, color.stroke_width(3))))?,
        };
    }

    chart
        .configure_series_labels()
        .position(legend)
        .margin(12)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.88))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// Where the legend goes without hiding data: the first corner (upper right, upper left, lower
/// right, lower left) whose legend-sized box holds no marker or band edge, in the axes' own
/// (log where log) fractions; when every corner is taken, the upper right after raising the top
/// of the y axis so the data keep below the legend's height. Returns the corner and the new top
/// (`None`: unchanged).
fn place_legend(
    data: &FigureData,
    x: (f64, f64, bool),
    y: (f64, f64, bool),
) -> (SeriesLabelPosition, Option<f64>) {
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
    // The legend's box in axis fractions, from its rows and longest label (16 px text, 12 px
    // inset), over the plot area of a WIDTH x HEIGHT figure.
    let rows = data.series.len() as f64;
    let longest = data
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let plot_w = WIDTH as f64 - 36.0 - 84.0;
    let plot_h = HEIGHT as f64 - FOOTNOTE_HEIGHT as f64 - 36.0 - 40.0 - 56.0;
    let box_w = ((9.0 * longest + 60.0 + 12.0) / plot_w).min(1.0);
    let box_h = ((20.0 * rows + 24.0 + 12.0) / plot_h).min(0.9);
    let marks: Vec<(f64, f64)> = data
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .flat_map(|p| [(p.x, p.high), (p.x, p.mid), (p.x, p.low)])
        .map(|(px, py)| (fraction(px, x), fraction(py, y)))
        .collect();
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
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    if let Some((corner, _, _)) = corners.into_iter().find(|&(_, r, u)| free(r, u)) {
        return (corner, None);
    }
    let (lo, hi, log) = y;
    let (a, b) = (to(lo, log), to(hi, log));
    let top = a + (b - a) / (1.0 - box_h);
    (
        SeriesLabelPosition::UpperRight,
        Some(if log { top.exp() } else { top }),
    )
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
    }

    #[test]
    fn log_ticks_label_every_decade_and_stay_in_range() {
        assert_eq!(log_ticks(1.5, 25.0), [2.0, 5.0, 10.0, 20.0]);
        assert_eq!(log_ticks(0.9, 8.0), [1.0, 1.5, 2.0, 3.0, 5.0, 7.0]);
        assert_eq!(log_ticks(1e-3, 1e3).len(), 7);
        assert!(log_ticks(-1.0, 2.0).is_empty());
        assert_eq!(powers_of_two_ticks(0.9, 17.0), [1.0, 2.0, 4.0, 8.0, 16.0]);
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
        }
    }

    #[test]
    fn the_legend_takes_a_free_corner_or_makes_room_above_the_data() {
        // A rising line leaves the upper left free.
        let rising: Vec<(f64, f64)> = (1..=10).map(|i| (i as f64, i as f64)).collect();
        let (corner, top) = place_legend(&data(&rising), (0.0, 11.0, false), (0.0, 11.0, false));
        assert!(matches!(corner, SeriesLabelPosition::UpperLeft) && top.is_none());
        // Data in every corner: the top is raised, on a log axis too, and the data then leave
        // the upper band free.
        let corners = [(0.5, 0.5), (0.5, 10.5), (10.5, 0.5), (10.5, 10.5)];
        let (corner, top) = place_legend(&data(&corners), (0.0, 11.0, false), (0.0, 11.0, false));
        assert!(matches!(corner, SeriesLabelPosition::UpperRight));
        let top = top.unwrap();
        assert!(top > 11.0);
        let (again, none) = place_legend(&data(&corners), (0.0, 11.0, false), (0.0, top, false));
        assert!(matches!(again, SeriesLabelPosition::UpperRight) && none.is_none());
        let (_, log_top) = place_legend(&data(&corners), (0.0, 11.0, false), (0.4, 11.0, true));
        assert!(log_top.unwrap() > 11.0);
    }

    #[test]
    fn extent_of_a_single_value_is_not_empty() {
        let (lo, hi) = extent([2.0].into_iter(), false, false);
        assert!(lo < 2.0 && hi > 2.0, "{lo}..{hi}");
        let (lo, hi) = extent([2.0].into_iter(), true, false);
        assert!(lo > 0.0 && lo < 2.0 && hi > 2.0, "{lo}..{hi}");
    }
}
