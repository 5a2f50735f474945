//! `parbench wmd`: the Sinkhorn Word Mover's Distance of one document against every document of a
//! file, with word vectors from a word2vec text or binary file (through the parsed cache).
//!
//! Pipeline: read the embeddings; read the documents (one per line); tokenize, remove stop words
//! and out-of-vocabulary words ([`sinkhorn::corpus`]); take line `--query` as the query; solve
//! with the chosen variant; write `doc,distance` as CSV. Progress, per-phase times and the
//! achieved GFLOP/s go to stderr so that stdout can carry the CSV.

use crate::util::{csv, datadir};
use anyhow::{bail, Context, Result};
use parbench_common::embeddings::{read_maybe_cached, EmbeddingsCache};
use parbench_common::Par;
use sinkhorn::corpus::{query_problem, CorpusVocab, DocCorpus};
use sinkhorn::{Control, SinkhornParams};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `parbench wmd`.
#[derive(clap::Args, Clone, Debug)]
#[command(
    about = "Sinkhorn Word Mover's Distance of one document against every document of a file",
    long_about = "Computes the entropic (Sinkhorn) Word Mover's Distance between one query document and \
every document of DOCS (the query included), using the word vectors of EMBEDDINGS.\n\n\
Documents: one per line, split on whitespace and lowercased; English stop words are removed and \
words without a vector are dropped (counted on stderr). A document left with no word is an error \
naming its line.\n\n\
Output: CSV `doc,distance` (doc = 0-based line index), to --out or stdout. Timings per phase and \
GFLOP/s go to stderr.\n\n\
Example:  parbench wmd --embeddings vecs.txt --docs docs.txt --query 0 --out dist.csv"
)]
pub struct WmdArgs {
    /// Word vectors in word2vec text format: a header line "V d", then V lines "word x1 .. xd"
    /// (a file without the header, as GloVe writes them, also works); a name ending in .bin is
    /// word2vec's binary format; .gz is decompressed. A name not found here is looked up in the
    /// data dir. The parsed table is kept in parbench's cache ($XDG_CACHE_HOME/parbench/
    /// embeddings, else ~/.cache/parbench/embeddings) and read from there while the file is
    /// unchanged.
    #[arg(long, value_name = "FILE")]
    pub embeddings: PathBuf,
    /// Parse EMBEDDINGS even when the parsed cache holds it, and store nothing.
    #[arg(long)]
    pub no_cache: bool,
    /// Documents, one per line (whitespace-separated words); a name not found here is looked up
    /// in the data dir.
    #[arg(long, value_name = "FILE")]
    pub docs: PathBuf,
    /// The query document: 0-based line index into DOCS.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub query: usize,
    /// Lines are "label<TAB>text" (R8 format): the label is ignored for the distance and
    /// written as a `label` column of the CSV.
    #[arg(long)]
    pub labeled: bool,
    /// Entropic regularization: K = exp(-lambda * M). Larger is closer to the exact WMD, but
    /// exp underflows when lambda times the word distances is large (about 700).
    #[arg(long, default_value_t = SinkhornParams::default().lambda, allow_negative_numbers = true)]
    pub lambda: f64,
    /// Sinkhorn iterations (the cap per document when --tol is given).
    #[arg(long, default_value_t = SinkhornParams::default().max_iter)]
    pub iters: usize,
    /// Stop each document once the largest relative change of its scaling vector is at most TOL.
    #[arg(long, value_name = "TOL", allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// Solver variant: `dense` is the paper's baseline, `fused-par` the paper's parallel fused
    /// kernels, `doc-major` parbench's document-parallel version of them.
    #[arg(
        long,
        default_value = "doc-major",
        value_parser = clap::builder::PossibleValuesParser::new(sinkhorn::variant_names())
    )]
    pub variant: String,
    /// Threads for the parallel variants (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Use only the words that occur in DOCS as the vocabulary V (same distances, less work for
    /// the distance matrix and the dense variant); by default V is every embedding word, as in
    /// the paper.
    #[arg(long)]
    pub corpus_vocab: bool,
    /// Write the CSV here (atomically: a temporary file in the same folder, then a rename)
    /// instead of stdout.
    #[arg(long, value_name = "CSV")]
    pub out: Option<PathBuf>,
}

/// Runs `parbench wmd`.
pub fn run(args: &WmdArgs, data_dir: Option<&Path>) -> Result<()> {
    let docs_path = datadir::locate_input(&args.docs, data_dir);
    let embeddings_path = datadir::locate_input(&args.embeddings, data_dir);
    let solver = sinkhorn::variant(&args.variant).with_context(|| {
        format!(
            "unknown variant {:?}; choose one of: {}",
            args.variant,
            sinkhorn::variant_names().join(", ")
        )
    })?;
    let params = SinkhornParams {
        lambda: args.lambda,
        max_iter: args.iters,
        tol: args.tol,
    };
    params.validate().context("invalid solver settings")?;
    let threads = match args.threads {
        Some(n) => usize::try_from(n).context("--threads is too large")?,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };

    let start = Instant::now();
    // Documents first: a bad --query or a missing file fails before a large embeddings file is
    // parsed.
    let t = Instant::now();
    let lines = parbench_common::corpora::read_r8(&docs_path)
        .with_context(|| format!("reading documents from {}", docs_path.display()))?;
    let (labels, texts): (Vec<String>, Vec<String>) = if args.labeled {
        lines.into_iter().unzip()
    } else {
        // Without --labeled a tab is just whitespace inside the text.
        lines
            .into_iter()
            .map(|(label, text)| {
                let whole = if label.is_empty() {
                    text
                } else {
                    format!("{label}\t{text}")
                };
                (String::new(), whole)
            })
            .unzip()
    };
    if args.query >= texts.len() {
        bail!(
            "--query {} is out of range: {} has {} documents (lines), numbered from 0",
            args.query,
            docs_path.display(),
            texts.len()
        );
    }
    let read_docs_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let cache = if args.no_cache {
        None
    } else {
        EmbeddingsCache::default_location()
    };
    let (embeddings, emb_stats, cache_use) = read_maybe_cached(&embeddings_path, cache.as_ref())
        .with_context(|| format!("reading embeddings from {}", embeddings_path.display()))?;
    eprintln!(
        "embeddings: {} words, dimension {}{} ({:.3} s{})",
        embeddings.len(),
        embeddings.dim,
        if emb_stats.duplicate_words > 0 {
            format!(
                ", {} duplicate words skipped (first vector kept)",
                emb_stats.duplicate_words
            )
        } else {
            String::new()
        },
        t.elapsed().as_secs_f64(),
        cache_use.map_or(String::new(), |u| format!(", {}", u.describe()))
    );

    let t = Instant::now();
    let vocab = if args.corpus_vocab {
        CorpusVocab::Used
    } else {
        CorpusVocab::Embeddings
    };
    let corpus = DocCorpus::build_with_vocab(
        texts
            .iter()
            .enumerate()
            .map(|(i, text)| (i + 1, text.as_str())),
        &embeddings,
        vocab,
    )
    .with_context(|| format!("building document histograms from {}", docs_path.display()))?;
    let s = corpus.stats;
    eprintln!(
        "documents: {} ({} tokens: {} stop words removed, {} out-of-vocabulary tokens ({} distinct \
         words) dropped, {} kept) ({:.3} s)",
        s.documents,
        s.tokens,
        s.stop_words_removed,
        s.oov_tokens,
        s.oov_types,
        s.kept_tokens,
        read_docs_s + t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let problem = query_problem(&corpus, &embeddings, args.query)
        .with_context(|| format!("setting up document {} as the query", args.query))?;
    drop(embeddings);
    solver.prepare(&problem);
    eprintln!(
        "problem: V = {} words, d = {}, N = {} documents, nnz = {}, query has {} distinct words ({:.3} s)",
        problem.vocab(),
        problem.dim(),
        problem.num_docs(),
        problem.nnz(),
        problem.query().len(),
        t.elapsed().as_secs_f64()
    );

    let t = Instant::now();
    let out = solver
        .solve(&problem, &params, Par::threads(threads), &mut |_| {
            Control::Continue
        })
        .with_context(|| format!("solving with variant {}", args.variant))?;
    let solve_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    match &args.out {
        Some(path) => crate::results::write_atomic_with(path, |w| {
            write_csv(w, &out.distances, &labels, args.labeled)
        })
        .with_context(|| format!("writing {}", path.display()))?,
        None => {
            let stdout = std::io::stdout();
            let mut w = BufWriter::new(stdout.lock());
            write_csv(&mut w, &out.distances, &labels, args.labeled)
                .and_then(|()| w.flush())
                .context("writing the CSV to stdout")?;
        }
    }
    let write_s = t.elapsed().as_secs_f64();

    let shown_threads = if solver.is_parallel() { threads } else { 1 };
    eprintln!(
        "solve: variant {}, {} thread(s), {} iterations, {:.3} s",
        solver.name(),
        shown_threads,
        out.iterations,
        solve_s
    );
    for (phase, seconds) in &out.phases.0 {
        eprintln!("  {phase:<12} {seconds:.4} s");
    }
    eprintln!(
        "  {:.2} GFLOP in the solve, {:.2} GFLOP/s",
        out.flops / 1e9,
        if solve_s > 0.0 {
            out.flops / solve_s / 1e9
        } else {
            0.0
        }
    );
    eprintln!(
        "write: {write_s:.3} s; total {:.3} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `doc,distance` (or `doc,label,distance`) rows; distances printed to full round-trip precision.
fn write_csv(
    w: &mut impl Write,
    distances: &[f64],
    labels: &[String],
    labeled: bool,
) -> std::io::Result<()> {
    if labeled {
        writeln!(w, "doc,label,distance")?;
        for (doc, (d, label)) in distances.iter().zip(labels).enumerate() {
            writeln!(w, "{doc},{},{d}", csv::field(label))?;
        }
    } else {
        writeln!(w, "doc,distance")?;
        for (doc, d) in distances.iter().enumerate() {
            writeln!(w, "{doc},{d}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_header_and_one_row_per_document() {
        let mut buf = Vec::new();
        write_csv(&mut buf, &[0.5, 0.1], &[], false).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "doc,distance\n0,0.5\n1,0.1\n"
        );
        let mut buf = Vec::new();
        let labels = vec!["earn".to_string(), "a,b".to_string()];
        write_csv(&mut buf, &[1.0, 2.0], &labels, true).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "doc,label,distance\n0,earn,1\n1,\"a,b\",2\n"
        );
    }

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        std::fs::write(&path, "old").unwrap();
        crate::results::write_atomic_with(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let err = crate::results::write_atomic_with(&path, |_| Err(std::io::Error::other("boom")));
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
