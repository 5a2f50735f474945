//! Intrinsic quality of word vectors: word similarity, analogies, nearest neighbours.
//!
//! - Word similarity (WordSim-353, SimLex-999): the Spearman rank correlation, ties given their
//!   average rank, between the cosine similarity of each covered pair and the human score. A
//!   pair is covered when both words are in the model.
//! - Analogies (Mikolov et al.'s `questions-words.txt`): for `a : b :: c : ?`, the answer is the
//!   candidate `x` maximizing 3CosAdd `cos(x, b) - cos(x, a) + cos(x, c)` or 3CosMul
//!   `cos'(x, b) cos'(x, c) / (cos'(x, a) + 1e-3)` with `cos' = (cos + 1) / 2` (Levy &
//!   Goldberg), among the 30,000 most frequent words (the model's first rows: word2vec files
//!   are sorted by frequency), the three question words excluded. As gensim's
//!   `evaluate_word_analogies`, a question counts only when all four words are among the
//!   candidates; accuracy is correct / covered, coverage covered / total. The first five
//!   sections are semantic, the rest syntactic.
//! - Lookups are case-insensitive: a word maps to the most frequent model row that lowercases to
//!   it, and answers compare lowercased.
//!
//! Cost: an analogy section computes one cosine row (`candidates x d`) per distinct question
//! word and scores every question from those rows: O(distinct words x 30,000 x d) in all,
//! parallel over rayon's current pool (wrap the call in `pool.install` to bound it).

use crate::model::Model;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Candidates searched for analogy answers.
pub const ANALOGY_CANDIDATES: usize = 30_000;
/// Sections of `questions-words.txt` that are semantic (the rest are syntactic).
pub const SEMANTIC_SECTIONS: usize = 5;

/// What can be wrong with an evaluation data file.
#[derive(Debug, Error)]
pub enum EvalError {
    /// The data file could not be read.
    #[error("cannot read evaluation data {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the data file is malformed.
    #[error("{path}:{line}: {problem}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
}

/// One scored word pair.
#[derive(Clone, Debug, PartialEq)]
pub struct SimilarityPair {
    /// First word of the pair, as in the file.
    pub first: String,
    /// Second word of the pair.
    pub second: String,
    /// The human similarity score (the benchmark's own scale).
    pub human: f64,
}

/// Reads a similarity file: `#` comment lines, then `word<TAB>word<TAB>score` lines.
pub fn read_similarity(path: &Path) -> Result<Vec<SimilarityPair>, EvalError> {
    parse_similarity(&read_utf8(path)?, path)
}

/// The text of `path`. Bytes that are not UTF-8 are an error naming their line (the I/O error of
/// `read_to_string` names none).
fn read_utf8(path: &Path) -> Result<String, EvalError> {
    let bytes = std::fs::read(path).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let invalid = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..invalid];
        EvalError::BadLine {
            path: path.to_path_buf(),
            line: 1 + before.iter().filter(|&&b| b == b'\n').count(),
            problem: format!("byte {invalid} is not valid UTF-8"),
        }
    })
}

/// Parses the text of a similarity file; `path` only names it in errors.
pub fn parse_similarity(text: &str, path: &Path) -> Result<Vec<SimilarityPair>, EvalError> {
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |problem: String| EvalError::BadLine {
            path: path.to_path_buf(),
            line: i + 1,
            problem,
        };
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        if fields.len() != 3 {
            return Err(bad(format!(
                "expected 3 tab-separated fields (word, word, score), found {}",
                fields.len()
            )));
        }
        let human: f64 = fields[2]
            .parse()
            .map_err(|_| bad(format!("score {:?} is not a number", fields[2])))?;
        // "nan" and "inf" parse, and would turn the rank correlation into NaN.
        if !human.is_finite() {
            return Err(bad(format!("score {:?} is not a finite number", fields[2])));
        }
        pairs.push(SimilarityPair {
            first: fields[0].to_owned(),
            second: fields[1].to_owned(),
            human,
        });
    }
    Ok(pairs)
}

/// One section of the analogy questions.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalogySection {
    /// The section's name, from its `: name` line.
    pub name: String,
    /// Whether it is one of the first [`SEMANTIC_SECTIONS`] (semantic) sections.
    pub semantic: bool,
    /// `[a, b, c, expected]`.
    pub questions: Vec<[String; 4]>,
}

/// Reads `questions-words.txt`: `: section` lines, then lines of four words.
pub fn read_analogies(path: &Path) -> Result<Vec<AnalogySection>, EvalError> {
    parse_analogies(&read_utf8(path)?, path)
}

/// Parses the text of an analogy file; `path` only names it in errors.
pub fn parse_analogies(text: &str, path: &Path) -> Result<Vec<AnalogySection>, EvalError> {
    let mut sections: Vec<AnalogySection> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix(':') {
            sections.push(AnalogySection {
                name: name.trim().to_owned(),
                semantic: sections.len() < SEMANTIC_SECTIONS,
                questions: Vec::new(),
            });
            continue;
        }
        let bad = |problem: &str| EvalError::BadLine {
            path: path.to_path_buf(),
            line: i + 1,
            problem: problem.to_owned(),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let [a, b, c, d] = words[..] else {
            return Err(bad("expected four words"));
        };
        let section = sections
            .last_mut()
            .ok_or_else(|| bad("a question before the first \": section\" line"))?;
        section
            .questions
            .push([a.into(), b.into(), c.into(), d.into()]);
    }
    Ok(sections)
}

/// Ranks of `x` (1-based), tied values given the average of the ranks they span.
pub fn ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let average = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = average;
        }
        i = j + 1;
    }
    r
}

/// Pearson correlation; NaN when fewer than two values or one side is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return f64::NAN;
    }
    let mx = x[..n].iter().sum::<f64>() / n as f64;
    let my = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (dx, dy) = (x[i] - mx, y[i] - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    sxy / (sxx * syy).sqrt()
}

/// Spearman rank correlation with ties averaged.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

/// A similarity benchmark's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimilarityResult {
    /// NaN when fewer than two pairs are covered.
    pub spearman: f64,
    /// Pairs with both words in the model.
    pub pairs_covered: usize,
    /// Pairs in the benchmark.
    pub pairs_total: usize,
}

/// Accuracy of one analogy method.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AnalogyAccuracy {
    /// Fractions correct among the covered questions (NaN when none is covered).
    pub overall: f64,
    /// Fraction correct among the covered semantic questions.
    pub semantic: f64,
    /// Fraction correct among the covered syntactic questions.
    pub syntactic: f64,
    /// Questions answered correctly.
    pub correct: usize,
    /// Semantic questions answered correctly.
    pub semantic_correct: usize,
    /// Syntactic questions answered correctly.
    pub syntactic_correct: usize,
}

/// Both analogy methods and the coverage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AnalogyResult {
    /// Accuracy of 3CosAdd.
    pub add: AnalogyAccuracy,
    /// Accuracy of 3CosMul.
    pub mul: AnalogyAccuracy,
    /// Questions whose four words are all among the candidates searched.
    pub covered: usize,
    /// Questions in the benchmark.
    pub total: usize,
    /// Covered semantic questions.
    pub semantic_covered: usize,
    /// Semantic questions.
    pub semantic_total: usize,
    /// Covered syntactic questions.
    pub syntactic_covered: usize,
    /// Syntactic questions.
    pub syntactic_total: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

/// Unit-length vectors and case-insensitive lookups over a model.
pub struct Evaluator<'a> {
    model: &'a Model,
    unit: Vec<f32>,
    lower: Vec<String>,
    /// Lowercased word -> most frequent row.
    index: HashMap<String, u32>,
}

impl<'a> Evaluator<'a> {
    /// Normalizes every vector (a zero vector stays zero): O(V d).
    pub fn new(model: &'a Model) -> Evaluator<'a> {
        let d = model.dim();
        let mut unit = model.vectors().to_vec();
        for row in unit.chunks_exact_mut(d) {
            let norm = row.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            if norm > 0.0 {
                for x in row.iter_mut() {
                    *x = (*x as f64 / norm) as f32;
                }
            }
        }
        let lower: Vec<String> = model.words().iter().map(|w| w.to_lowercase()).collect();
        let mut index = HashMap::with_capacity(lower.len());
        for (i, w) in lower.iter().enumerate() {
            index.entry(w.clone()).or_insert(i as u32);
        }
        Evaluator {
            model,
            unit,
            lower,
            index,
        }
    }

    /// The most frequent row whose word lowercases to `word` lowercased.
    pub fn lookup(&self, word: &str) -> Option<u32> {
        self.index.get(&word.to_lowercase()).copied()
    }

    fn unit(&self, i: u32) -> &[f32] {
        let d = self.model.dim();
        &self.unit[i as usize * d..(i as usize + 1) * d]
    }

    /// Cosine similarity of two rows.
    pub fn cosine(&self, a: u32, b: u32) -> f64 {
        self.unit(a)
            .iter()
            .zip(self.unit(b))
            .map(|(x, y)| *x as f64 * *y as f64)
            .sum()
    }

    /// Spearman correlation of cosine similarity with the human scores over covered pairs.
    pub fn similarity(&self, pairs: &[SimilarityPair]) -> SimilarityResult {
        let (mut model, mut human) = (Vec::new(), Vec::new());
        for p in pairs {
            if let (Some(a), Some(b)) = (self.lookup(&p.first), self.lookup(&p.second)) {
                model.push(self.cosine(a, b));
                human.push(p.human);
            }
        }
        SimilarityResult {
            spearman: spearman(&model, &human),
            pairs_covered: model.len(),
            pairs_total: pairs.len(),
        }
    }

    /// Cosine of row `w` with each of the first `n` rows.
    fn cosine_row(&self, w: u32, n: usize) -> Vec<f32> {
        let d = self.model.dim();
        let q = self.unit(w);
        self.unit[..n * d]
            .chunks_exact(d)
            .map(|r| crate::vecops::dot::<false>(q, r))
            .collect()
    }

    /// Both analogy methods over `sections`, answers among the `candidates` most frequent rows.
    pub fn analogy(&self, sections: &[AnalogySection], candidates: usize) -> AnalogyResult {
        let n = candidates.min(self.model.len());
        let mut restricted: HashMap<&str, u32> = HashMap::new();
        for (i, w) in self.lower[..n].iter().enumerate() {
            restricted.entry(w.as_str()).or_insert(i as u32);
        }
        let mut result = AnalogyResult::default();
        for section in sections {
            let total = section.questions.len();
            result.total += total;
            if section.semantic {
                result.semantic_total += total;
            } else {
                result.syntactic_total += total;
            }
            let covered: Vec<([u32; 3], String)> = section
                .questions
                .iter()
                .filter_map(|q| {
                    let lq: Vec<String> = q.iter().map(|w| w.to_lowercase()).collect();
                    let ids: Vec<u32> = lq
                        .iter()
                        .map(|w| restricted.get(w.as_str()).copied())
                        .collect::<Option<_>>()?;
                    Some(([ids[0], ids[1], ids[2]], lq[3].clone()))
                })
                .collect();
            let mut words: Vec<u32> = covered.iter().flat_map(|(ids, _)| *ids).collect();
            words.sort_unstable();
            words.dedup();
            let rows: HashMap<u32, Vec<f32>> = words
                .par_iter()
                .map(|&w| (w, self.cosine_row(w, n)))
                .collect();
            let (add_ok, mul_ok) = covered
                .par_iter()
                .map(|([a, b, c], expected)| {
                    let (ra, rb, rc) = (&rows[a], &rows[b], &rows[c]);
                    let excluded = [
                        self.lower[*a as usize].as_str(),
                        self.lower[*b as usize].as_str(),
                        self.lower[*c as usize].as_str(),
                    ];
                    let (mut best_add, mut arg_add) = (f32::NEG_INFINITY, usize::MAX);
                    let (mut best_mul, mut arg_mul) = (f32::NEG_INFINITY, usize::MAX);
                    for x in 0..n {
                        let add = rb[x] - ra[x] + rc[x];
                        let mul = (rb[x] + 1.0) * 0.5 * ((rc[x] + 1.0) * 0.5)
                            / ((ra[x] + 1.0) * 0.5 + 1e-3);
                        if add > best_add || mul > best_mul {
                            // Only candidates that could win pay for the exclusion check.
                            if excluded.contains(&self.lower[x].as_str()) {
                                continue;
                            }
                            if add > best_add {
                                best_add = add;
                                arg_add = x;
                            }
                            if mul > best_mul {
                                best_mul = mul;
                                arg_mul = x;
                            }
                        }
                    }
                    let hit = |x: usize| x < n && self.lower[x] == *expected;
                    (hit(arg_add) as usize, hit(arg_mul) as usize)
                })
                .reduce(|| (0, 0), |p, q| (p.0 + q.0, p.1 + q.1));
            result.covered += covered.len();
            result.add.correct += add_ok;
            result.mul.correct += mul_ok;
            if section.semantic {
                result.semantic_covered += covered.len();
                result.add.semantic_correct += add_ok;
                result.mul.semantic_correct += mul_ok;
            } else {
                result.syntactic_covered += covered.len();
                result.add.syntactic_correct += add_ok;
                result.mul.syntactic_correct += mul_ok;
            }
        }
        for acc in [&mut result.add, &mut result.mul] {
            acc.overall = ratio(acc.correct, result.covered);
            acc.semantic = ratio(acc.semantic_correct, result.semantic_covered);
            acc.syntactic = ratio(acc.syntactic_correct, result.syntactic_covered);
        }
        result
    }

    /// The `k` rows most similar to `word` by cosine (itself excluded), best first; empty when
    /// `word` is not in the model.
    pub fn neighbors(&self, word: &str, k: usize) -> Vec<(String, f64)> {
        let Some(w) = self.lookup(word) else {
            return Vec::new();
        };
        let sims = self.cosine_row(w, self.model.len());
        let mut order: Vec<usize> = (0..sims.len()).filter(|&i| i != w as usize).collect();
        let k = k.min(order.len());
        if k == 0 {
            return Vec::new();
        }
        order.select_nth_unstable_by(k - 1, |&a, &b| sims[b].total_cmp(&sims[a]));
        order.truncate(k);
        order.sort_by(|&a, &b| sims[b].total_cmp(&sims[a]).then(a.cmp(&b)));
        order
            .into_iter()
            .map(|i| (self.model.words()[i].clone(), sims[i] as f64))
            .collect()
    }
}

/// The standard benchmarks, loaded once.
#[derive(Clone, Debug)]
pub struct EvalSuite {
    /// WordSim-353 pairs.
    pub wordsim353: Vec<SimilarityPair>,
    /// SimLex-999 pairs.
    pub simlex999: Vec<SimilarityPair>,
    /// Google analogy questions, by section.
    pub analogies: Vec<AnalogySection>,
}

/// Every metric of [`EvalSuite::evaluate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalReport {
    /// WordSim-353 Spearman and coverage.
    pub wordsim353: SimilarityResult,
    /// SimLex-999 Spearman and coverage.
    pub simlex999: SimilarityResult,
    /// Google analogies, by 3CosAdd and 3CosMul.
    pub analogy: AnalogyResult,
}

/// File name of the WordSim-353 pairs in a data dir.
pub const WORDSIM353_FILE: &str = "wordsim353.tsv";
/// File name of the SimLex-999 pairs in a data dir.
pub const SIMLEX999_FILE: &str = "simlex999.txt";
/// File name of the Google analogies in a data dir.
pub const ANALOGY_FILE: &str = "questions-words.txt";

impl EvalSuite {
    /// Reads [`WORDSIM353_FILE`], [`SIMLEX999_FILE`] and [`ANALOGY_FILE`] from `dir`.
    pub fn load(dir: &Path) -> Result<EvalSuite, EvalError> {
        Ok(EvalSuite {
            wordsim353: read_similarity(&dir.join(WORDSIM353_FILE))?,
            simlex999: read_similarity(&dir.join(SIMLEX999_FILE))?,
            analogies: read_analogies(&dir.join(ANALOGY_FILE))?,
        })
    }

    /// Similarity on both benchmarks and analogies among [`ANALOGY_CANDIDATES`] words.
    pub fn evaluate(&self, model: &Model) -> EvalReport {
        let e = Evaluator::new(model);
        EvalReport {
            wordsim353: e.similarity(&self.wordsim353),
            simlex999: e.similarity(&self.simlex999),
            analogy: e.analogy(&self.analogies, ANALOGY_CANDIDATES),
        }
    }
}
