//! `parbench report`: the runs as one self-contained HTML page (no network, no scripts, no
//! external fonts: styles inline, figures inlined as the SVG the run drew), to open, attach or
//! publish.
//!
//! The page reads only stored results (like `plot` and `check`): per experiment the paper and
//! figure it reproduces, every claim with its verdict and measured value (re-evaluated from the
//! rows), the gate's verdict against a baseline when one is given, the figures, the table of
//! medians with their spread, GFLOP/s and the share of this machine's measured FMA peak, the
//! equivalence errors, and the machine and provenance from `meta.json`. An index at the top
//! lists every experiment with its verdicts; failed claims are listed before it.
//!
//! Elements carry stable classes and data attributes (`section.experiment[data-experiment]`,
//! `figure.figure[data-figure]`, `tr.claim.pass|fail`), which the browser test in CI counts.

use crate::analysis::check::{self, Baseline, CheckOptions, CheckReport, RunView};
use crate::analysis::claims::ClaimOutcome;
use crate::exec::machine::Limits;
use crate::experiment::plan::threads_of;
use crate::family::ResultRow;
use crate::results::{self, RunMeta, StoredRun};
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// One run as the page shows it.
pub struct ReportRun {
    pub run: StoredRun,
    pub meta: RunMeta,
    pub claims: Vec<ClaimOutcome>,
    /// The gate's verdict, when a baseline was given.
    pub check: Option<CheckReport>,
    /// (figure name, title, SVG markup), in the experiment's order.
    pub figures: Vec<(String, String, String)>,
}

/// Loads the run in `dir` and evaluates what the page shows; `baseline` adds the gate, with
/// `options`' thresholds.
pub fn load(dir: &Path, baseline: Option<&Baseline>, options: &CheckOptions) -> Result<ReportRun> {
    let mut run = results::load_run(dir)?;
    let meta = results::read_meta(dir)?;
    check::use_run_calibration(&mut run.rows);
    let report = check::check(
        &RunView {
            rows: &run.rows,
            config: &run.config,
            machine: &run.machine,
        },
        baseline,
        options,
    );
    let claims = report.claims.clone();
    let figures_dir = results::figures_dir(dir);
    let mut figures = Vec::new();
    for fig in &run.config.figures {
        let path = figures_dir.join(format!("{}.svg", fig.name));
        // A figure with no data is not drawn; the page lists only what exists.
        let Ok(svg) = std::fs::read_to_string(&path) else {
            continue;
        };
        let start = svg
            .find("<svg")
            .with_context(|| format!("{} holds no <svg> element", path.display()))?;
        figures.push((
            fig.name.clone(),
            fig.title.clone(),
            svg[start..].to_string(),
        ));
    }
    Ok(ReportRun {
        run,
        meta,
        claims,
        check: baseline.map(|_| report),
        figures,
    })
}

/// Text made safe for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The id of an experiment's section.
fn anchor(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("exp-{slug}")
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;\
padding:1em 2em;color:#1d1d1f;line-height:1.4}\
h1{margin-bottom:0.2em}h2{border-bottom:2px solid #ddd;padding-bottom:0.2em;margin-top:2em}\
table{border-collapse:collapse;margin:0.5em 0;font-size:0.9em}\
th,td{border:1px solid #ddd;padding:0.25em 0.6em;text-align:left;vertical-align:top}\
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.pass .verdict{color:#116611;font-weight:bold}.fail .verdict{color:#b00020;font-weight:bold}\
tr.fail{background:#fff0f0}section.failed{border:2px solid #b00020;background:#fff5f5;\
padding:0.5em 1em;margin:1em 0}section.failed h2{border:none;margin-top:0.3em;color:#b00020}\
.figures{display:flex;flex-wrap:wrap;gap:1em}figure.figure{margin:0;border:1px solid #eee;\
padding:0.5em;max-width:100%}figure.figure svg{max-width:100%;height:auto;display:block}\
figcaption{font-size:0.85em;color:#444;margin-top:0.3em}pre{background:#f7f7f9;padding:0.6em;\
overflow-x:auto;font-size:0.85em}dl{display:grid;grid-template-columns:max-content auto;\
gap:0.2em 1em;font-size:0.9em}dt{font-weight:bold}dd{margin:0}.muted{color:#666}";

/// The page of `runs` (in the order given).
pub fn render(runs: &[ReportRun], generated: &str) -> String {
    let mut h = String::new();
    let passed: usize = runs
        .iter()
        .map(|r| r.claims.iter().filter(|c| c.passed).count())
        .sum();
    let total: usize = runs.iter().map(|r| r.claims.len()).sum();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>parbench report: {} experiment(s)</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        runs.len()
    );
    let _ = writeln!(
        h,
        "<header><h1>parbench report</h1><p class=\"summary\">{} experiment(s), {passed} of {total} claims pass. Generated {} by parbench {}.</p>",
        runs.len(),
        escape(generated),
        escape(results::PARBENCH_VERSION)
    );
    if let Some(first) = runs.first() {
        let m = &first.meta.machine;
        let _ = writeln!(
            h,
            "<p class=\"machine\">Machine: {}; triad {:.1} GB/s, FMA peak {:.1} GFLOP/s on all threads.</p>",
            escape(&m.fingerprint),
            m.limits.triad_gb_per_s_all,
            m.limits.fma_gflop_per_s_all
        );
    }
    h.push_str("</header>\n");
    failed_claims(&mut h, runs);
    index(&mut h, runs);
    for r in runs {
        section(&mut h, r);
    }
    let _ = writeln!(
        h,
        "<footer class=\"muted\"><p>Every number on this page was read from the run directories listed in each section's provenance.</p></footer>\n</body>\n</html>"
    );
    h
}

fn failed_claims(h: &mut String, runs: &[ReportRun]) {
    let failed: Vec<(&ReportRun, &ClaimOutcome)> = runs
        .iter()
        .flat_map(|r| r.claims.iter().filter(|c| !c.passed).map(move |c| (r, c)))
        .collect();
    let regressions: usize = runs
        .iter()
        .filter_map(|r| r.check.as_ref())
        .map(|c| c.regressions.len() + c.gaps.len())
        .sum();
    if failed.is_empty() && regressions == 0 {
        return;
    }
    h.push_str("<section class=\"failed\" id=\"failed\">\n<h2>Failed</h2>\n<ul>\n");
    for (r, c) in failed {
        let name = &r.run.config.name;
        let _ = writeln!(
            h,
            "<li class=\"failed-claim\"><a href=\"#{}\">{}</a>: {}: {}</li>",
            anchor(name),
            escape(name),
            escape(&c.name),
            escape(&c.detail)
        );
    }
    for r in runs {
        let Some(check) = &r.check else { continue };
        let name = &r.run.config.name;
        for line in check.regressions.iter().chain(&check.gaps) {
            let _ = writeln!(
                h,
                "<li class=\"failed-gate\"><a href=\"#{}\">{}</a>: {}</li>",
                anchor(name),
                escape(name),
                escape(line)
            );
        }
    }
    h.push_str("</ul>\n</section>\n");
}

fn index(h: &mut String, runs: &[ReportRun]) {
    h.push_str("<nav id=\"index\">\n<h2>Experiments</h2>\n<table class=\"index\">\n<tr><th>experiment</th><th>reproduces</th><th>paper</th><th>claims</th><th>gate</th></tr>\n");
    for r in runs {
        let c = &r.run.config;
        let pass = r.claims.iter().filter(|c| c.passed).count();
        let ok = pass == r.claims.len();
        let gate = match &r.check {
            Some(check) if check.passed() => "pass".to_string(),
            Some(check) => format!(
                "{} regression(s), {} not gated",
                check.regressions.len(),
                check.gaps.len()
            ),
            None => "-".to_string(),
        };
        let verdict = if r.claims.is_empty() {
            "no claims".to_string()
        } else {
            format!("{pass} of {} pass", r.claims.len())
        };
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"verdict\">{verdict}</td><td>{}</td></tr>",
            if ok { "pass" } else { "fail" },
            anchor(&c.name),
            escape(&c.name),
            escape(&c.reproduces),
            escape(&c.paper),
            escape(&gate)
        );
    }
    h.push_str("</table>\n</nav>\n");
}

fn section(h: &mut String, r: &ReportRun) {
    let c = &r.run.config;
    let _ = writeln!(
        h,
        "<section class=\"experiment\" id=\"{}\" data-experiment=\"{}\">\n<h2>{}</h2>",
        anchor(&c.name),
        escape(&c.name),
        escape(&c.name)
    );
    let _ = writeln!(
        h,
        "<p class=\"reproduces\">Reproduces <b>{}</b> of {}{}.</p>",
        escape(&c.reproduces),
        escape(&c.paper),
        if r.run.quick {
            " (quick, CI-sized run)"
        } else {
            ""
        }
    );
    if !c.description.is_empty() {
        let _ = writeln!(h, "<p class=\"description\">{}</p>", escape(&c.description));
    }
    h.push_str("<h3>Claims</h3>\n");
    if r.claims.is_empty() {
        h.push_str("<p class=\"muted\">No claims.</p>\n");
    } else {
        h.push_str(
            "<table class=\"claims\">\n<tr><th>verdict</th><th>claim</th><th>measured</th></tr>\n",
        );
        for claim in &r.claims {
            let (class, word) = if claim.passed {
                ("pass", "PASS")
            } else {
                ("fail", "FAIL")
            };
            let _ = writeln!(
                h,
                "<tr class=\"claim {class}\"><td class=\"verdict\">{word}</td><td>{}</td><td>{}</td></tr>",
                escape(&claim.name),
                escape(&claim.detail)
            );
        }
        h.push_str("</table>\n");
    }
    if let Some(check) = &r.check {
        h.push_str("<h3>Regression gate</h3>\n");
        let _ = writeln!(
            h,
            "<p class=\"gate {}\">{}</p>",
            if check.passed() { "pass" } else { "fail" },
            escape(&check.coverage.to_string())
        );
        let lines: Vec<String> = check
            .regressions
            .iter()
            .map(|x| format!("REGRESSION: {x}"))
            .chain(check.gaps.iter().map(|x| format!("NOT GATED: {x}")))
            .chain(check.notes.iter().map(|x| format!("note: {x}")))
            .collect();
        if !lines.is_empty() {
            let _ = writeln!(
                h,
                "<pre class=\"gate-report\">{}</pre>",
                escape(&lines.join("\n"))
            );
        }
    }
    if !r.figures.is_empty() {
        h.push_str("<h3>Figures</h3>\n<div class=\"figures\">\n");
        for (name, title, svg) in &r.figures {
            let _ = writeln!(
                h,
                "<figure class=\"figure\" data-figure=\"{}\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
                escape(name),
                escape(title)
            );
        }
        h.push_str("</div>\n");
    }
    h.push_str("<h3>Results</h3>\n");
    results_table(h, &r.run.rows, &r.meta.machine.limits);
    provenance(h, r);
    h.push_str("</section>\n");
}

/// Medians per point and variant, with the share of the measured FMA peak at the point's
/// threads (the one-thread peak times the threads, up to the all-threads figure).
fn results_table(h: &mut String, rows: &[ResultRow], limits: &Limits) {
    h.push_str("<table class=\"results\">\n<tr><th>point</th><th>variant</th><th>runs</th><th>median s</th><th>min-max s</th><th>GFLOP/s</th><th title=\"GFLOP/s over this machine's measured f64 FMA peak at the point's threads\">% of FMA peak</th><th title=\"the least time this machine allows for the work the variant states (flops at the FMA peak, bytes at the triad bandwidth of the level they fit in) over the measured time\">% of bound</th><th>rel err</th></tr>\n");
    for v in crate::analysis::summary::summarize(rows) {
        let threads = threads_of(&v.params);
        let peak = if threads >= limits.threads_all.max(1) {
            limits.fma_gflop_per_s_all
        } else {
            limits.fma_gflop_per_s_1t * threads as f64
        };
        let share = v
            .gflop_per_s
            .filter(|_| peak > 0.0)
            .map_or("-".to_string(), |g| format!("{:.1}", 100.0 * g / peak));
        let point_text: Vec<String> = v.params.iter().map(|(k, x)| format!("{k}={x}")).collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.6}</td><td class=\"num\">{:.4}-{:.4}</td><td class=\"num\">{}</td><td class=\"num\">{share}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&point_text.join(" ")),
            escape(&v.variant),
            v.times.len(),
            v.median_s,
            v.min_s,
            v.max_s,
            v.gflop_per_s.map_or("-".to_string(), |g| format!("{g:.2}")),
            crate::analysis::summary::percent(v.fraction_of_bound),
            v.max_rel_error.map_or("-".to_string(), |e| format!("{e:.1e}"))
        );
    }
    h.push_str("</table>\n");
}

fn provenance(h: &mut String, r: &ReportRun) {
    let m = &r.meta.machine;
    let commit = match (&m.git_commit, m.git_dirty) {
        (Some(c), Some(true)) => format!("{c} (with uncommitted changes)"),
        (Some(c), _) => c.clone(),
        (None, _) => "not in a git repository".to_string(),
    };
    let dispatch: Vec<String> = m
        .dispatch
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let items = [
        ("run directory", r.run.dir.display().to_string()),
        ("experiment file", r.meta.source_file.clone()),
        (
            "data",
            match &r.meta.dataset {
                Some(d) => format!("dataset {d}"),
                None => format!("synthetic, seed {}", r.meta.seed),
            },
        ),
        (
            "run",
            format!(
                "{} to {}",
                r.meta.started,
                r.meta.finished.as_deref().unwrap_or("(unfinished)")
            ),
        ),
        ("commit", commit),
        ("parbench", r.meta.parbench_version.clone()),
        ("rustc", m.rustc_version.clone()),
        (
            "CPU",
            format!(
                "{}, {} cores, {} logical CPUs, {:.1} GiB",
                m.cpu_model,
                m.physical_cores,
                m.logical_cpus,
                m.memory_bytes as f64 / (1u64 << 30) as f64
            ),
        ),
        ("machine kind", m.fingerprint.clone()),
        ("vector paths", dispatch.join(", ")),
        (
            "measured limits",
            format!(
                "triad {:.1} GB/s (1 thread) / {:.1} GB/s ({} threads); FMA {:.1} / {:.1} GFLOP/s; {}",
                m.limits.triad_gb_per_s_1t,
                m.limits.triad_gb_per_s_all,
                m.limits.threads_all,
                m.limits.fma_gflop_per_s_1t,
                m.limits.fma_gflop_per_s_all,
                m.limits.cache_triads()
            ),
        ),
        ("OS", format!("{}, kernel {}", m.os, m.kernel)),
    ];
    h.push_str("<h3>Machine and provenance</h3>\n<dl class=\"provenance\">\n");
    for (k, v) in items {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    }
    h.push_str("</dl>\n");
}

/// Writes the page of the runs in `run_dirs` to `out`; returns how many runs it shows and
/// whether every claim (and gate check) passed.
pub fn write(
    run_dirs: &[PathBuf],
    baseline: Option<&Baseline>,
    options: &CheckOptions,
    out: &Path,
) -> Result<(usize, bool)> {
    let mut runs = Vec::new();
    for dir in run_dirs {
        runs.push(
            load(dir, baseline, options).with_context(|| format!("reporting {}", dir.display()))?,
        );
    }
    let html = render(&runs, &results::now_rfc3339());
    results::write_atomic(out, html.as_bytes())?;
    let ok = runs
        .iter()
        .all(|r| r.claims.iter().all(|c| c.passed) && r.check.as_ref().is_none_or(|c| c.passed()));
    Ok((runs.len(), ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(anchor("fig 8/dense"), "exp-fig-8-dense");
    }
}
