//! Experiment files: the serde schema. Loading with file/line errors and the `quick` merge live
//! in `load`; the checked, expanded form is [`crate::plan::Plan`].

use crate::model::Value;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One experiment file, as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Short identifier, used for the run directory (`fig8_dense_vs_fused_par`).
    pub name: String,
    /// One-line description shown by `parbench list` and in the summary.
    #[serde(default)]
    pub description: String,
    /// The paper reproduced (file under ../shared/papers or a citation).
    pub paper: String,
    /// The figure or table of the paper this reproduces ("Fig. 8", "Table I").
    pub reproduces: String,
    /// Algorithm family (`sinkhorn`).
    pub family: String,
    pub data: DataConfig,
    /// Variants to run at every point.
    pub variants: Vec<String>,
    /// Fixed parameters of every point.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Grid: every combination of these lists is a point (`threads` may appear here).
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<Value>>,
    #[serde(default = "default_repetitions")]
    pub repetitions: usize,
    #[serde(default)]
    pub warmup: usize,
    /// Overrides applied by `--quick` (CI-sized runs).
    #[serde(default)]
    pub quick: Option<QuickConfig>,
    #[serde(default)]
    pub equivalence: Option<EquivalenceConfig>,
    #[serde(default)]
    pub figures: Vec<FigureConfig>,
    #[serde(default)]
    pub claims: Vec<ClaimConfig>,
    /// How the points whose `backend` is `mpi` start their processes; required when any is.
    #[serde(default)]
    pub launcher: Option<LauncherConfig>,
}

/// The MPI launcher: for every variant of an MPI point the harness runs
/// `command args... -np P parbench launched ...` (P from the family: the ranks, or LDA's
/// workers + 1) and reads the measurements rank 0 prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LauncherConfig {
    /// The program that starts an MPI job (`mpirun`, `srun`, a wrapper script).
    #[serde(default = "default_launcher_command")]
    pub command: String,
    /// Arguments given before `-np P` (`--oversubscribe` to run more ranks than cores).
    #[serde(default)]
    pub args: Vec<String>,
}

fn default_launcher_command() -> String {
    "mpirun".to_string()
}

fn default_repetitions() -> usize {
    3
}

/// Where a point's input comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// `synthetic` (the family's seeded generator, shaped by the point's parameters) or
    /// `dataset` (a file of the data dir).
    pub source: DataSource,
    /// File name inside the data dir, for `source: dataset`.
    #[serde(default)]
    pub file: Option<String>,
    /// Seed of every random choice in data generation.
    #[serde(default)]
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSource {
    Synthetic,
    Dataset,
}

/// What `--quick` replaces: parameters and sweep lists key by key, the rest whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickConfig {
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<Value>>,
    #[serde(default)]
    pub repetitions: Option<usize>,
    #[serde(default)]
    pub warmup: Option<usize>,
    #[serde(default)]
    pub variants: Option<Vec<String>>,
    /// Claims sized for the quick shapes, checked instead of `claims` on a quick run: where a
    /// paper's margin only holds at full size (quality after full training, say), the full run
    /// asserts it and the quick run a looser statement of the same result.
    #[serde(default)]
    pub claims: Option<Vec<ClaimConfig>>,
}

/// Variants are compared with the reference variant's output at the same point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EquivalenceConfig {
    pub reference: String,
    /// Largest allowed relative difference, max_i |a_i - b_i| / max(|b_i|, tiny).
    pub rel_tol: f64,
}

/// One figure: a line per series, min-max band (or error bars) over repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureConfig {
    /// File stem of the PNG and SVG.
    pub name: String,
    /// Title, naming the paper's figure ("Fig. 8: dense vs fused-par over threads").
    pub title: String,
    /// A parameter name, or a metric column (`metric_nnz_x_query`).
    pub x: String,
    /// A column: `wall_time_s`, `phase_<name>_s`, `metric_<name>`.
    pub y: String,
    /// `variant` (default) or a parameter name (one line per value of it).
    #[serde(default = "default_series")]
    pub series: String,
    /// Keep only rows whose parameters (or `variant`) equal these values.
    #[serde(default)]
    pub filter: BTreeMap<String, Value>,
    /// Plot `reference / value` instead of the value: a speedup over another variant at the same
    /// point (`speedup_over: {variant: sparse}`) or over the series' own point with x at a given
    /// value (`speedup_over: {x: 1}`, strong scaling).
    #[serde(default)]
    pub speedup_over: Option<SpeedupBase>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
    /// Axis labels; defaults are derived from the column names, with units.
    #[serde(default)]
    pub x_label: Option<String>,
    #[serde(default)]
    pub y_label: Option<String>,
}

fn default_series() -> String {
    "variant".to_string()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedupBase {
    #[serde(default)]
    pub variant: Option<String>,
    #[serde(default)]
    pub x: Option<Value>,
}

/// A checkable statement about the results. Every kind fails when no row matches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClaimConfig {
    /// Every recorded equivalence error is at most `max_rel_error`.
    Equivalence { name: String, max_rel_error: f64 },
    /// median(column of `numerator`) / median(column of `denominator`) at the same point is at
    /// least `at_least` (and at most `at_most`), at every point selected by `at`.
    Ratio {
        name: String,
        #[serde(default = "default_column")]
        column: String,
        numerator: String,
        denominator: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        /// Parameter -> value, or "max"/"min" to take the largest/smallest value swept.
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// median(column of `minuend`) - median(column of `subtrahend`) at the same point lies within
    /// the bounds at every point selected by `at`: for quality metrics, where the papers state
    /// absolute gaps ("within 0.03 Spearman").
    Difference {
        name: String,
        column: String,
        minuend: String,
        subtrahend: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// The log-log slope of `column` (median per point) against `x` lies in [min, max] for each
    /// listed variant, over the points selected by `at` (`x` a parameter or a metric column).
    Slope {
        name: String,
        x: String,
        #[serde(default = "default_column")]
        column: String,
        variants: Vec<String>,
        min: f64,
        max: f64,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// Parallel scaling of one variant: median(column at `param` = `from`) / median(column at
    /// `param` = `to`) is at least `at_least`, at every point selected by `at` (the other
    /// parameters equal). `from`/`to` may be values or "min"/"max".
    Scaling {
        name: String,
        variant: String,
        #[serde(default = "default_column")]
        column: String,
        #[serde(default = "default_scaling_param")]
        param: String,
        from: Value,
        to: Value,
        at_least: f64,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
    /// Phase `phase` takes at least `at_least` (and at most `at_most`) of the variant's wall
    /// time (median over repetitions), at every point selected by `at`.
    Share {
        name: String,
        variant: String,
        phase: String,
        #[serde(default)]
        at_least: Option<f64>,
        #[serde(default)]
        at_most: Option<f64>,
        #[serde(default)]
        at: BTreeMap<String, Value>,
    },
}

fn default_scaling_param() -> String {
    "threads".to_string()
}

fn default_column() -> String {
    "wall_time_s".to_string()
}

impl ClaimConfig {
    pub fn name(&self) -> &str {
        match self {
            ClaimConfig::Equivalence { name, .. }
            | ClaimConfig::Ratio { name, .. }
            | ClaimConfig::Difference { name, .. }
            | ClaimConfig::Slope { name, .. }
            | ClaimConfig::Scaling { name, .. }
            | ClaimConfig::Share { name, .. } => name,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Loading: file -> ExperimentConfig, with errors that name the file, the line and the column.
// ---------------------------------------------------------------------------------------------

use std::fmt;
use std::path::{Path, PathBuf};

/// Why an experiment file could not be read into an [`ExperimentConfig`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("{}: cannot read experiment file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or does not match the schema (unknown key, wrong type, missing
    /// field); `line`/`column` are 1-based when serde_yaml knows them.
    #[error("{}: {message}", Located { path, line: *line, column: *column })]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        message: String,
    },
}

impl ConfigError {
    /// The 1-based line the error points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Parse { line, .. } => *line,
        }
    }
}

/// `path:line:column` (or as much of it as is known), the prefix compilers use, so editors and
/// terminals can jump to the spot.
pub struct Located<'a> {
    pub path: &'a Path,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// Reads and parses an experiment file; with `quick`, applies its `quick:` overrides (see
/// [`apply_quick`]). Validation against the family happens later, in [`crate::plan::build`].
pub fn load(path: &Path, quick: bool) -> Result<ExperimentConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = parse_str(&text, path)?;
    Ok(if quick { apply_quick(config) } else { config })
}

/// Parses YAML text of an experiment file; `path` only labels the errors.
pub fn parse_str(text: &str, path: &Path) -> Result<ExperimentConfig, ConfigError> {
    serde_yaml::from_str(text).map_err(|err| yaml_error(path, text, &err))
}

/// Turns a serde_yaml error into a [`ConfigError::Parse`], moving its " at line L column C"
/// suffix into the structured position so the message reads `file:L:C: what went wrong`.
fn yaml_error(path: &Path, text: &str, err: &serde_yaml::Error) -> ConfigError {
    let location = err.location();
    let mut message = err.to_string();
    if let Some(loc) = &location {
        let suffix = format!(" at line {} column {}", loc.line(), loc.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
    }
    // Inside internally tagged enums (claims) serde_yaml only knows where the item starts; the
    // misspelt key itself is on a later line, found by searching the text from there.
    let mut position = location.as_ref().map(|l| (l.line(), l.column()));
    if let (Some((line, _)), Some(unknown)) = (position, unknown_field(&message)) {
        position = text
            .lines()
            .enumerate()
            .skip(line.saturating_sub(1))
            .find_map(|(i, l)| {
                let col = content_col(l);
                starts_with_key(&l[col..], unknown).then_some((i + 1, col + 1))
            })
            .or(position);
    }
    message = plain_types(&message);
    if let Some(suggestion) = did_you_mean(&message) {
        message.push_str(&format!(" (did you mean `{suggestion}`?)"));
    }
    ConfigError::Parse {
        path: path.to_path_buf(),
        line: position.map(|p| p.0),
        column: position.map(|p| p.1),
        message,
    }
}

/// Rust type names in serde's messages, said the way an experiment file's author thinks of them.
fn plain_types(message: &str) -> String {
    [
        ("expected usize", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected f64", "expected a number"),
        (
            "expected a sequence",
            "expected a list (`[a, b]` or lines starting with `- `)",
        ),
    ]
    .iter()
    .fold(message.to_string(), |m, (from, to)| m.replace(from, to))
}

/// For "unknown field `x`, expected one of `a`, `b`": the expected name closest to `x`, when it
/// is close enough to be a typo (edit distance at most a third of the name, at least 1).
fn did_you_mean(message: &str) -> Option<String> {
    let unknown = unknown_field(message)?;
    let rest = message.split_once("expected one of")?.1;
    let expected: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let limit = (unknown.chars().count() / 3).max(1);
    expected
        .into_iter()
        .map(|name| (edit_distance(unknown, name), name))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, name)| name.to_string())
}

/// The name in serde's "unknown field `x`" message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    Some(rest.split_once('`')?.0)
}

/// Levenshtein distance, O(|a| |b|); names are short.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

/// Applies the `quick:` overrides: each parameter or sweep key it names replaces that key (a key
/// moved between `params` and `sweep` leaves the other map, so a quick run never sees the same
/// key twice); `repetitions`, `warmup`, `variants` and `claims` are replaced whole. The `quick` section
/// itself is kept, so the result still records what was overridden.
pub fn apply_quick(mut config: ExperimentConfig) -> ExperimentConfig {
    let Some(quick) = config.quick.clone() else {
        return config;
    };
    for (key, value) in quick.params {
        config.sweep.remove(&key);
        config.params.insert(key, value);
    }
    for (key, values) in quick.sweep {
        config.params.remove(&key);
        config.sweep.insert(key, values);
    }
    if let Some(repetitions) = quick.repetitions {
        config.repetitions = repetitions;
    }
    if let Some(warmup) = quick.warmup {
        config.warmup = warmup;
    }
    if let Some(variants) = quick.variants {
        config.variants = variants;
    }
    if let Some(claims) = quick.claims {
        config.claims = claims;
    }
    config
}

// ---------------------------------------------------------------------------------------------
// Finding keys in the YAML text, for errors found after deserialization (which has no spans).
// ---------------------------------------------------------------------------------------------

/// One step of a path into the YAML document: a mapping key or a list index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// A 1-based (line, column) position in the YAML text.
pub type Position = (usize, usize);

/// The lines `start..end` that hold the children of a node, and the column children must be
/// indented past.
#[derive(Clone, Copy, Debug)]
struct Region {
    anchor: Option<Position>,
    anchor_line: usize,
    start: usize,
    end: usize,
    indent: isize,
}

/// Finds where `path` is written in `text`: the position of the deepest segment that could be
/// found (so a missing key points at its parent), or `None` if not even the first one was.
///
/// This is a line scanner, not a YAML parser: it understands block mappings and lists by their
/// indentation and falls back to a textual search for flow style (`{a: 1}`, `[x, y]`), which is
/// all experiment files use. A wrong guess only costs a less precise line in an error message.
pub fn locate(text: &str, path: &[Seg]) -> Option<Position> {
    locate_region(&text.lines().collect::<Vec<_>>(), path).anchor
}

/// Like [`locate`], then looks for `token` as a whole word inside the node found (e.g. a variant
/// name inside `variants: [a, b]`), falling back to the node's own position.
pub fn locate_token(text: &str, path: &[Seg], token: &str) -> Option<Position> {
    let lines: Vec<&str> = text.lines().collect();
    let region = locate_region(&lines, path);
    let from = if region.anchor.is_some() {
        region.anchor_line
    } else {
        0
    };
    for (i, line) in lines.iter().enumerate().take(region.end).skip(from) {
        if let Some(col) = find_word(strip_comment(line), token) {
            return Some((i + 1, col + 1));
        }
    }
    region.anchor
}

fn locate_region(lines: &[&str], path: &[Seg]) -> Region {
    let mut region = Region {
        anchor: None,
        anchor_line: 0,
        start: 0,
        end: lines.len(),
        indent: -1,
    };
    for seg in path {
        let next = match seg {
            Seg::Key(key) => find_key(lines, &region, key),
            Seg::Index(index) => find_item(lines, &region, *index),
        };
        match next {
            Some(found) => region = found,
            None => break,
        }
    }
    region
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn strip_comment(line: &str) -> &str {
    // A `#` starts a comment at the line start or after whitespace (not inside `a#b`).
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'#' && (i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t') {
            return &line[..i];
        }
    }
    line
}

fn is_blank(line: &str) -> bool {
    strip_comment(line).trim().is_empty()
}

/// Column (0-based) where the content of a line starts once list dashes (`- - key`) are skipped.
fn content_col(line: &str) -> usize {
    let mut col = indent_of(line);
    let bytes = line.as_bytes();
    while col < bytes.len()
        && bytes[col] == b'-'
        && (col + 1 == bytes.len() || bytes[col + 1] == b' ')
    {
        col += 1;
        while col < bytes.len() && bytes[col] == b' ' {
            col += 1;
        }
    }
    col
}

fn starts_with_key(content: &str, key: &str) -> bool {
    [key.to_string(), format!("\"{key}\""), format!("'{key}'")]
        .iter()
        .any(|k| {
            content
                .strip_prefix(k.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
}

/// End (exclusive) of the block that belongs to a node at `line` whose children are indented
/// past `col` (a list may sit at the key's own indentation, YAML allows it).
fn block_end(lines: &[&str], line: usize, col: usize, limit: usize) -> usize {
    for (i, l) in lines.iter().enumerate().take(limit).skip(line + 1) {
        if is_blank(l) {
            continue;
        }
        let ind = indent_of(l);
        let dash = l.trim_start().starts_with("- ") || l.trim() == "-";
        if ind < col || (ind == col && !dash) {
            return i;
        }
    }
    limit
}

fn find_key(lines: &[&str], region: &Region, key: &str) -> Option<Region> {
    let first = if region.anchor.is_some() {
        region.anchor_line
    } else {
        0
    };
    // Block style: `key:` as the content of a line (or of the first line of a list item),
    // indented past the parent.
    for i in region.start..region.end {
        let line = strip_comment(lines[i]);
        if is_blank(line) {
            continue;
        }
        let col = content_col(line);
        if (col as isize) <= region.indent {
            continue;
        }
        // The anchor line itself only counts for a list item (`- key: v`), where the item's
        // first key shares the dash's line.
        if region.anchor.is_some()
            && i == region.anchor_line
            && region.anchor.map(|a| a.1 - 1) != Some(col)
        {
            continue;
        }
        if starts_with_key(&line[col..], key) {
            return Some(Region {
                anchor: Some((i + 1, col + 1)),
                anchor_line: i,
                start: i + 1,
                end: block_end(lines, i, col, region.end),
                indent: col as isize,
            });
        }
    }
    // Flow style: `key:` anywhere in the node's text.
    for (i, raw) in lines.iter().enumerate().take(region.end).skip(first) {
        let line = strip_comment(raw);
        let mut from = 0;
        while let Some(col) = find_word(&line[from..], key).map(|c| c + from) {
            if line[col + key.len()..].trim_start().starts_with(':') {
                return Some(Region {
                    anchor: Some((i + 1, col + 1)),
                    anchor_line: i,
                    start: i + 1,
                    end: i + 1,
                    indent: col as isize,
                });
            }
            from = col + key.len();
        }
    }
    None
}

fn find_item(lines: &[&str], region: &Region, index: usize) -> Option<Region> {
    // Block style: the index-th `- ` line at the shallowest dash indentation in the region.
    let dash_lines: Vec<usize> = (region.start..region.end)
        .filter(|&i| {
            let t = lines[i].trim_start();
            (t.starts_with("- ") || t == "-") && indent_of(lines[i]) as isize >= region.indent
        })
        .collect();
    if let Some(min_indent) = dash_lines.iter().map(|&i| indent_of(lines[i])).min() {
        let items: Vec<usize> = dash_lines
            .into_iter()
            .filter(|&i| indent_of(lines[i]) == min_indent)
            .collect();
        let &line = items.get(index)?;
        let col = content_col(lines[line]);
        let end = items.get(index + 1).copied().unwrap_or(region.end);
        // The item's first key shares the dash's line, so the item's lines start there.
        return Some(Region {
            anchor: Some((line + 1, col + 1)),
            anchor_line: line,
            start: line,
            end,
            indent: min_indent as isize,
        });
    }
    // Flow style on the anchor line: `[a, b, c]`.
    let line = strip_comment(lines.get(region.anchor_line)?);
    let open = line.find('[')?;
    let mut col = open + 1;
    for (i, part) in line[open + 1..].split(',').enumerate() {
        if i == index {
            let lead = part.len() - part.trim_start().len();
            return Some(Region {
                anchor: Some((region.anchor_line + 1, col + lead + 1)),
                anchor_line: region.anchor_line,
                start: region.anchor_line + 1,
                end: region.anchor_line + 1,
                indent: (col + lead) as isize,
            });
        }
        col += part.len() + 1;
    }
    None
}

/// First 0-based byte column where `word` occurs in `line` not inside a longer identifier.
fn find_word(line: &str, word: &str) -> Option<usize> {
    if word.is_empty() {
        return None;
    }
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut from = 0;
    while let Some(found) = line[from..].find(word) {
        let start = from + found;
        let end = start + word.len();
        let before_ok = line[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident(c));
        let after_ok = line[end..].chars().next().is_none_or(|c| !is_ident(c));
        if before_ok && after_ok {
            return Some(start);
        }
        from = start + word[..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The order in which sweep keys are written in the file (`sweep:` then new keys of
/// `quick: sweep:`), which fixes the order of the expanded grid. BTreeMap forgets it, so it is
/// read again from the text through serde_yaml's order-preserving `Mapping`.
pub fn sweep_key_order(text: &str) -> Vec<String> {
    let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let mut order: Vec<String> = Vec::new();
    let mut push_keys = |node: Option<&serde_yaml::Value>| {
        if let Some(serde_yaml::Value::Mapping(map)) = node {
            for key in map.keys() {
                if let Some(name) = key.as_str() {
                    if !order.iter().any(|k| k == name) {
                        order.push(name.to_string());
                    }
                }
            }
        }
    };
    push_keys(doc.get("sweep"));
    push_keys(doc.get("quick").and_then(|q| q.get("sweep")));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
name: demo
family: mock
# a comment with params: inside
params:
  size: 10
  work: 1.5
sweep:
  threads: [1, 2]
  size:
    - 100
    - 200
variants: [slow, fast]
claims:
  - name: first
    kind: ratio
    numerator: slow
  - kind: slope
    name: second
    x: size
quick:
  sweep: {size: [5], extra: [1]}
";

    #[test]
    fn locates_block_keys_nested_keys_and_list_items() {
        assert_eq!(locate(DOC, &[Seg::Key("family")]), Some((2, 1)));
        assert_eq!(
            locate(DOC, &[Seg::Key("params"), Seg::Key("work")]),
            Some((6, 3))
        );
        assert_eq!(
            locate(DOC, &[Seg::Key("sweep"), Seg::Key("size")]),
            Some((9, 3))
        );
        let second_x = [Seg::Key("claims"), Seg::Index(1), Seg::Key("x")];
        assert_eq!(locate(DOC, &second_x), Some((19, 5)));
        let first_name = [Seg::Key("claims"), Seg::Index(0), Seg::Key("name")];
        assert_eq!(locate(DOC, &first_name), Some((14, 5)));
    }

    #[test]
    fn locates_flow_style_and_tokens() {
        let quick_size = [Seg::Key("quick"), Seg::Key("sweep"), Seg::Key("size")];
        assert_eq!(locate(DOC, &quick_size), Some((21, 11)));
        assert_eq!(
            locate_token(DOC, &[Seg::Key("variants")], "fast"),
            Some((12, 18))
        );
        assert_eq!(
            locate_token(DOC, &[Seg::Key("sweep"), Seg::Key("size")], "200"),
            Some((11, 7))
        );
    }

    #[test]
    fn a_missing_key_points_at_its_parent() {
        assert_eq!(
            locate(DOC, &[Seg::Key("params"), Seg::Key("nope")]),
            Some((4, 1))
        );
        assert_eq!(locate(DOC, &[Seg::Key("nope")]), None);
    }

    #[test]
    fn typos_get_a_suggestion() {
        let m = "unknown field `reptitions`, expected one of `name`, `repetitions`, `warmup`";
        assert_eq!(did_you_mean(m).as_deref(), Some("repetitions"));
        let m = "unknown field `zzz`, expected one of `name`, `repetitions`";
        assert_eq!(did_you_mean(m), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn sweep_order_is_the_written_one_then_quick_additions() {
        assert_eq!(sweep_key_order(DOC), vec!["threads", "size", "extra"]);
    }

    #[test]
    fn quick_overrides_key_by_key_and_moves_keys_between_params_and_sweep() {
        let text = "name: n\npaper: p\nreproduces: r\nfamily: mock\ndata: {source: synthetic}\nvariants: [slow, fast]\nparams: {size: 10, work: 2}\nsweep: {threads: [1, 2, 4]}\nrepetitions: 5\nquick:\n  params: {threads: 1}\n  sweep: {size: [1, 2]}\n  repetitions: 1\n  variants: [fast]\n  claims:\n    - {kind: equivalence, name: e, max_rel_error: 0.1}\n";
        let config = parse_str(text, Path::new("q.yaml")).unwrap();
        let quick = apply_quick(config.clone());
        assert_eq!(quick.params.get("threads"), Some(&Value::Int(1)));
        assert!(!quick.sweep.contains_key("threads"));
        assert_eq!(
            quick.sweep.get("size"),
            Some(&vec![Value::Int(1), Value::Int(2)])
        );
        assert!(!quick.params.contains_key("size"));
        assert_eq!(quick.params.get("work"), Some(&Value::Int(2)));
        assert_eq!(quick.repetitions, 1);
        assert_eq!(quick.variants, vec!["fast"]);
        assert_eq!(quick.claims.len(), 1);
        assert_eq!(config.repetitions, 5);
        assert!(config.claims.is_empty());
    }
}
