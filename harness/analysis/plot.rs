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

use crate::experiment::config::{FigureConfig, SpeedupBase};
use crate::family::{Params, ResultRow, Value};
use anyhow::{bail, Context};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const WIDTH: u32 = 1024;
const HEIGHT: u32 = 640;
const FONT: &str = "sans-serif";

/// Tableau 10: distinguishable, colour-blind friendly in its first few entries.
const PALETTE: [RGBColor; 10] = [
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
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut failures = Vec::new();
    for fig in figs {
        match plot_figure(fig, rows, out_dir) {
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
    for fig in figs {
        match plot_figure(fig, rows, &dir) {
            Ok(paths) => out.extend(paths),
            Err(e) => eprintln!("warning: figure {} not drawn: {e:#}", fig.name),
        }
    }
    Ok(out)
}

/// Draws one figure as `<name>.png` and `<name>.svg` in `out_dir`; returns both paths.
pub fn plot_figure(
    fig: &FigureConfig,
    rows: &[ResultRow],
    out_dir: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let data = FigureData::build(fig, rows).with_context(|| format!("figure `{}`", fig.name))?;
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
            render(&root, fig, &data)?;
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
        render(&root, fig, &data)
            .and_then(|()| Ok(root.present()?))
            .with_context(|| format!("figure `{}`: cannot draw the SVG", fig.name))?;
    }
    crate::results::write_atomic(&svg, svg_text.as_bytes())?;
    Ok(vec![png, svg])
}

/// The numeric value of a column for one row ([`crate::analysis::claims::column`], which claims use too,
/// so a figure and a claim on the same name read the same numbers), also accepting a parameter
/// spelled `param_<name>` as in the stored table.
fn column_value(row: &ResultRow, name: &str) -> Option<f64> {
    crate::analysis::claims::column(row, name).or_else(|| {
        name.strip_prefix("param_")
            .and_then(|p| row.params.get(p))
            .and_then(Value::as_f64)
    })
}

fn param_of<'r>(row: &'r ResultRow, name: &str) -> Option<&'r Value> {
    row.params
        .get(name)
        .or_else(|| name.strip_prefix("param_").and_then(|p| row.params.get(p)))
}

/// Equality of parameter values across integer/float spellings (`threads: 1` vs `1.0`).
fn values_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Whether a row passes a figure's filter (`variant` or parameters), skipping `except`.
fn passes_filter(row: &ResultRow, filter: &BTreeMap<String, Value>, except: &[&str]) -> bool {
    filter
        .iter()
        .filter(|(key, _)| !except.contains(&key.as_str()))
        .all(|(key, want)| {
            if key == "variant" {
                want.as_str() == Some(row.variant.as_str()) || want.to_string() == row.variant
            } else {
                param_of(row, key).is_some_and(|have| values_equal(have, want))
            }
        })
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
            .all(|((ka, va), (kb, vb))| ka == kb && values_equal(va, vb))
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        0.5 * (values[n / 2 - 1] + values[n / 2])
    })
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
        let series_of = |row: &ResultRow| -> String {
            if fig.series == "variant" {
                row.variant.clone()
            } else {
                // "query_words=5" in the legend: a bare "5" does not say what varies.
                let value = param_of(row, &fig.series)
                    .map(Value::to_string)
                    .unwrap_or_else(|| "(unset)".to_string());
                format!("{}={value}", fig.series)
            }
        };

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
                    let mut ys: Vec<f64> = points
                        .values()
                        .flat_map(|(r, _)| r.values().copied())
                        .collect();
                    let (low, high) = min_max(&ys);
                    median(&mut ys).map(|mid| PlotPoint {
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
                    Some(v) => values_equal(v, base_x),
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
        let mut base_ys: Vec<f64> = base_values.values().copied().collect();
        let mut ys: Vec<f64> = values.values().copied().collect();
        let (Some(base_mid), Some(mid)) = (median(&mut base_ys), median(&mut ys)) else {
            continue;
        };
        speedups.push(base_mid / mid);
        ratios.extend(
            values
                .iter()
                .filter_map(|(rep, y)| base_values.get(rep).map(|b| b / y)),
        );
    }
    let Some(mid) = median(&mut speedups) else {
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
    if column == "wall_time_s" {
        return "wall time (s)".to_string();
    }
    if column == "threads" || column == "param_threads" {
        return "threads".to_string();
    }
    if column == "equiv_rel_error" {
        return "relative error vs reference".to_string();
    }
    if let Some(phase) = column
        .strip_prefix("phase_")
        .and_then(|rest| rest.strip_suffix("_s"))
    {
        return format!("{} phase time (s)", words(phase));
    }
    let name = column
        .strip_prefix("metric_")
        .or_else(|| column.strip_prefix("param_"))
        .unwrap_or(column);
    if let Some((what, per)) = name.split_once("_per_") {
        return format!("{}/{}", unit_words(what), unit_words(per));
    }
    if let Some(seconds) = name.strip_suffix("_s") {
        return format!("{} (s)", words(seconds));
    }
    if let Some(bytes) = name.strip_suffix("_bytes") {
        return format!("{} (bytes)", words(bytes));
    }
    words(name)
}

fn words(name: &str) -> String {
    name.replace('_', " ")
}

/// Unit tokens upper-cased the way they are written (`gflop` -> `GFLOP`, `s` stays `s`).
fn unit_words(name: &str) -> String {
    name.split('_')
        .map(|token| match token {
            "flop" | "kflop" | "mflop" | "gflop" | "tflop" | "kb" | "mb" | "gb" | "tb" => {
                token.to_uppercase()
            }
            "kib" | "mib" | "gib" => {
                let upper = token.to_uppercase();
                format!("{}i{}", &upper[..1], &upper[2..])
            }
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    root: &DrawingArea<DB, Shift>,
    fig: &FigureConfig,
    data: &FigureData,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let log_x = fig.log_x && data.categories.is_none();
    let log_y = fig.log_y;
    let points = || data.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = match &data.categories {
        Some(labels) => (-0.5, labels.len() as f64 - 0.5),
        None => extent(points().map(|p| p.x), log_x, false),
    };
    let (y0, y1) = extent(points().flat_map(|p| [p.low, p.mid, p.high]), log_y, true);
    // Plotters' own log ticks are sparse within a decade; explicit 1-2-5 (or powers of two for
    // thread counts) ticks label every gridline.
    let x_ticks = if all_powers_of_two(points().map(|p| p.x)) {
        powers_of_two_ticks(x0, x1)
    } else {
        log_ticks(x0, x1)
    };
    let y_ticks = log_ticks(y0, y1);
    match (log_x, log_y) {
        (false, false) => draw(root, fig, data, x0..x1, y0..y1),
        (true, false) => draw(
            root,
            fig,
            data,
            (x0..x1).log_scale().with_key_points(x_ticks),
            y0..y1,
        ),
        (false, true) => draw(
            root,
            fig,
            data,
            x0..x1,
            (y0..y1).log_scale().with_key_points(y_ticks),
        ),
        (true, true) => draw(
            root,
            fig,
            data,
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
        .position(legend_position(data))
        .margin(12)
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.88))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// The corner of the plot with the fewest data (markers and band edges), in axis fractions.
fn legend_position(data: &FigureData) -> SeriesLabelPosition {
    let points: Vec<&PlotPoint> = data.series.iter().flat_map(|s| s.points.iter()).collect();
    let fraction = |v: f64, lo: f64, hi: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    let (x_lo, x_hi) = min_max(&points.iter().map(|p| p.x).collect::<Vec<_>>());
    let (y_lo, y_hi) = min_max(
        &points
            .iter()
            .flat_map(|p| [p.low, p.high])
            .collect::<Vec<_>>(),
    );
    let candidates = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let crowding = |right: bool, upper: bool| {
        points
            .iter()
            .flat_map(|p| [(p.x, p.high), (p.x, p.mid), (p.x, p.low)])
            .filter(|&(x, y)| {
                let fx = fraction(x, x_lo, x_hi);
                let fy = fraction(y, y_lo, y_hi);
                (if right { fx >= 0.6 } else { fx <= 0.4 })
                    && (if upper { fy >= 0.6 } else { fy <= 0.4 })
            })
            .count()
    };
    candidates
        .into_iter()
        .min_by_key(|&(_, right, upper)| crowding(right, upper))
        .map(|(position, _, _)| position)
        .unwrap_or(SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_carry_units() {
        assert_eq!(axis_label("wall_time_s"), "wall time (s)");
        assert_eq!(axis_label("phase_loop_s"), "loop phase time (s)");
        assert_eq!(axis_label("metric_gflop_per_s"), "GFLOP/s");
        assert_eq!(axis_label("metric_gb_per_s"), "GB/s");
        assert_eq!(axis_label("threads"), "threads");
        assert_eq!(axis_label("metric_nnz_x_query"), "nnz x query");
        assert_eq!(axis_label("metric_solve_time_s"), "solve time (s)");
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(8.0), "8");
        assert_eq!(tick(0.125), "0.125");
        assert_eq!(tick(1.5), "1.5");
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(2.5e-5), "2.5e-5");
    }

    #[test]
    fn median_of_even_count_averages_the_middle_pair() {
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn log_ticks_label_every_decade_and_stay_in_range() {
        assert_eq!(log_ticks(1.5, 25.0), [2.0, 5.0, 10.0, 20.0]);
        assert_eq!(log_ticks(0.9, 8.0), [1.0, 1.5, 2.0, 3.0, 5.0, 7.0]);
        assert_eq!(log_ticks(1e-3, 1e3).len(), 7);
        assert!(log_ticks(-1.0, 2.0).is_empty());
        assert_eq!(powers_of_two_ticks(0.9, 17.0), [1.0, 2.0, 4.0, 8.0, 16.0]);
    }

    #[test]
    fn extent_of_a_single_value_is_not_empty() {
        let (lo, hi) = extent([2.0].into_iter(), false, false);
        assert!(lo < 2.0 && hi > 2.0, "{lo}..{hi}");
        let (lo, hi) = extent([2.0].into_iter(), true, false);
        assert!(lo > 0.0 && lo < 2.0 && hi > 2.0, "{lo}..{hi}");
    }
}
