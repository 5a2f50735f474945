//! `parbench lda train`: a topic model of the user's own corpus with any LDA variant.
//!
//! Pipeline: read the corpus (UCI bag of words, or plain text with one document per line);
//! train with the chosen variant while a progress bar (plain lines when stderr is not a
//! terminal) shows the iteration and the log-likelihood, evaluated every `--likelihood-every`
//! iterations; print the top words of every topic and the time split per worker, or with
//! `--json` one JSON object on stdout; with `--out DIR` write the word-topic and document-topic
//! count tables as CSV, the top words and the JSON summary, each atomically (temporary file in
//! the same folder, then a rename).

use crate::exec::ranks::Ranks;
use crate::families::params::Named;
use crate::util::progress::{Progress, ProgressMode};
use crate::util::{csv, datadir};
use anyhow::{bail, Context, Result};
use lda::{Control, Corpus, DeltaEncoding, InnerSampler, LdaOutput, LdaParams, Par, TextOptions};
use serde_json::{json, Value as Json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// LDA subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum LdaCommand {
    /// Train a topic model by collapsed Gibbs sampling and print its topics.
    #[command(
        long_about = "Trains latent Dirichlet allocation by collapsed Gibbs sampling on your corpus and \
    prints the top words of every topic.\n\n\
    Input (one of):\n  \
    --uci DOCWORD [--vocab VOCAB]  UCI bag of words: header lines D, W, NNZ, then `docID wordID count` \
    lines (1-based ids); VOCAB has word i on line i. .gz files are decompressed.\n  \
    --text FILE                    one document per line; split on whitespace and lowercased, English \
    stop words and words seen fewer than --min-count times removed.\n\
    A file name that does not exist here is looked up in the data dir (--data-dir, $PARBENCH_DATA).\n\n\
    Variants: sequential (the standard sampler), sparse (SparseLDA buckets: same distribution, faster \
    for large K), mh (Metropolis-Hastings with word and document proposals: O(1) per token), sync \
    (AD-LDA: P workers merge at every checkpoint and wait for each other), async \
    (the paper's master-worker: each worker exchanges its delta with the master on its own).\n\n\
    Output: the topics on stdout (or one JSON object with --json: final log-likelihood, tokens per \
    second, time split per worker, merges, parameters, top words); progress and timings on stderr. \
    --out DIR writes word_topic.csv (W rows: word_id, word, then K counts), doc_topic.csv (D rows: doc, \
    then K counts; doc is the 1-based UCI docID or line number), top_words.txt and summary.json.\n\n\
    Example:  parbench lda train --uci docword.kos.txt --vocab vocab.kos.txt --topics 20 --iters 200 \
    --variant async --workers 4 --out kos-topics"
    )]
    Train(TrainArgs),
}

/// Arguments of `parbench lda train`.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["uci", "text"])))]
pub struct TrainArgs {
    /// UCI docword file (`docword.kos.txt`).
    #[arg(long, value_name = "DOCWORD")]
    pub uci: Option<PathBuf>,
    /// UCI vocabulary file for --uci (without it words are shown as #id).
    #[arg(long, value_name = "VOCAB", requires = "uci")]
    pub vocab: Option<PathBuf>,
    /// Plain-text corpus, one document per line (.gz allowed).
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Sampler variant.
    #[arg(
        long,
        default_value = "sync",
        value_parser = clap::builder::PossibleValuesParser::new(lda::variant_names())
    )]
    pub variant: String,
    /// Number of topics K.
    #[arg(long, short = 'k', default_value_t = LdaParams::default().topics)]
    pub topics: usize,
    /// Symmetric document-topic prior (> 0).
    #[arg(long, default_value_t = LdaParams::default().alpha, allow_negative_numbers = true)]
    pub alpha: f64,
    /// Symmetric topic-word prior (> 0).
    #[arg(long, default_value_t = LdaParams::default().beta, allow_negative_numbers = true)]
    pub beta: f64,
    /// Gibbs sweeps over the corpus.
    #[arg(long, default_value_t = LdaParams::default().iterations)]
    pub iters: usize,
    /// Worker threads of sync and async (default: every core); sequential and sparse use one.
    /// With `--backend mpi` the workers are the job's processes but the first (give none, or
    /// the job's size minus one).
    #[arg(long, short = 'p', value_name = "P")]
    pub workers: Option<usize>,
    /// Where sync's and async's master and workers run: `local` (threads of this process) or
    /// `mpi` (the master on rank 0 and one worker per other rank, exchanging real MPI messages:
    /// `mpirun -np P+1 parbench lda train --backend mpi ...`; needs a parbench built with
    /// `--features mpi`). Every rank reads the corpus; rank 0 prints and writes the results.
    #[arg(long, default_value = "local", value_parser = ["local", "mpi"])]
    pub backend: String,
    /// Recount the global tables from every worker's assignments after every merge and report
    /// any difference (slow: O(tokens) per merge; the final state is always recounted).
    #[arg(long)]
    pub verify_invariants: bool,
    /// Documents a worker samples between two exchanges with the master (default: a tenth of
    /// its share, D / P / 10).
    #[arg(long, value_name = "DOCS")]
    pub checkpoint: Option<usize>,
    /// Seed of the initial topics, the document shares and every draw.
    #[arg(long, default_value_t = LdaParams::default().seed)]
    pub seed: u64,
    /// async: how a worker encodes its changes: the whole W x K table of differences, or a hash
    /// map of the entries that changed.
    #[arg(
        long,
        default_value = DeltaEncoding::default().name(),
        value_parser = clap::builder::PossibleValuesParser::new(<DeltaEncoding as Named>::names())
    )]
    pub delta: String,
    /// async: keep sampling while the master's reply is in flight (double buffer).
    #[arg(long)]
    pub non_blocking: bool,
    /// Per-token sampler of the sync and async workers.
    #[arg(
        long,
        default_value = InnerSampler::default().name(),
        value_parser = clap::builder::PossibleValuesParser::new(<InnerSampler as Named>::names())
    )]
    pub inner: String,
    /// --text: drop words seen fewer times than this.
    #[arg(long, value_name = "N", default_value_t = crate::families::lda::DEFAULT_MIN_COUNT)]
    pub min_count: u64,
    /// --text: read at most this many documents (lines).
    #[arg(long, value_name = "N")]
    pub max_docs: Option<usize>,
    /// Evaluate the log-likelihood every N iterations for the progress display (0: only at the
    /// end). The evaluation costs about O(W K + D K) and is part of the reported time.
    #[arg(long, value_name = "N", default_value_t = LdaParams::default().likelihood_every)]
    pub likelihood_every: usize,
    /// Words shown per topic.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top_words: usize,
    /// Print one JSON object on stdout instead of the topics.
    #[arg(long)]
    pub json: bool,
    /// Write word_topic.csv, doc_topic.csv, top_words.txt and summary.json into this folder
    /// (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs an LDA subcommand; `data_dir` is where input names not found here are looked up.
pub fn run(cmd: &LdaCommand, data_dir: Option<&Path>) -> Result<()> {
    match cmd {
        LdaCommand::Train(args) => train(args, data_dir),
    }
}

/// Reads the corpus named by the arguments; returns it with a description for the output.
fn read_corpus(args: &TrainArgs, data_dir: Option<&Path>) -> Result<(Corpus, String)> {
    if let Some(docword) = &args.uci {
        let docword = datadir::locate_input(docword, data_dir);
        let vocab = args
            .vocab
            .as_ref()
            .map(|v| datadir::locate_input(v, data_dir));
        let corpus = Corpus::read_uci(&docword, vocab.as_deref())
            .with_context(|| format!("reading the UCI corpus {}", docword.display()))?;
        return Ok((corpus, docword.display().to_string()));
    }
    let Some(text) = &args.text else {
        bail!("give the corpus with --uci DOCWORD or --text FILE");
    };
    let text = datadir::locate_input(text, data_dir);
    let options = TextOptions {
        min_count: args.min_count,
        max_docs: args.max_docs,
    };
    let corpus = Corpus::read_text(&text, &options)
        .with_context(|| format!("reading the text corpus {}", text.display()))?;
    Ok((corpus, text.display().to_string()))
}

/// The sampler settings of the arguments (validated) and the workers of `sync` and `async`.
pub fn params_of(args: &TrainArgs, corpus: &Corpus, backend: &Ranks) -> Result<(LdaParams, usize)> {
    let workers = match (args.workers, backend.job_size()) {
        (Some(0), _) => bail!("--workers must be at least 1"),
        (_, Some(1)) => bail!(
            "--backend mpi runs a master and at least one worker: start at least 2 processes (mpirun -np P+1 for P workers)"
        ),
        (Some(n), Some(size)) if n + 1 != size => bail!(
            "--workers {n}, but mpirun started {size} processes (a master and {} workers): drop --workers or run mpirun -np {}",
            size - 1,
            n + 1
        ),
        (_, Some(size)) => size - 1,
        (Some(n), None) => n,
        (None, None) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let checkpoint = match args.checkpoint {
        Some(0) => bail!("--checkpoint must be at least 1 document"),
        Some(n) => n,
        None => crate::families::lda::checkpoint_docs(
            corpus.num_docs(),
            workers,
            None,
            crate::families::lda::DEFAULT_CHECKPOINT_FRACTION,
        ),
    };
    let params = LdaParams {
        topics: args.topics,
        alpha: args.alpha,
        beta: args.beta,
        iterations: args.iters,
        seed: args.seed,
        checkpoint_docs: checkpoint,
        likelihood_every: args.likelihood_every,
        delta: DeltaEncoding::from_name(&args.delta).unwrap_or_default(),
        non_blocking: args.non_blocking,
        inner: InnerSampler::from_name(&args.inner).unwrap_or_default(),
        verify_invariants: args.verify_invariants,
    };
    params.validate().context("invalid LDA settings")?;
    Ok((params, workers))
}

fn train(args: &TrainArgs, data_dir: Option<&Path>) -> Result<()> {
    let backend = Ranks::start(&args.backend)?;
    backend.finish(train_on(&backend, args, data_dir))
}

fn train_on(backend: &Ranks, args: &TrainArgs, data_dir: Option<&Path>) -> Result<()> {
    let root = backend.is_root();
    let sampler = lda::variant(&args.variant).with_context(|| {
        format!(
            "unknown variant {:?}; choose one of: {}",
            args.variant,
            lda::variant_names().join(", ")
        )
    })?;
    if args.iters == 0 {
        bail!("--iters must be at least 1");
    }
    if backend.communicator().is_some() && !sampler.is_parallel() {
        bail!(
            "--backend mpi runs the master-worker variants (sync, async), not {}",
            sampler.name()
        );
    }
    let t = Instant::now();
    let (corpus, source) = read_corpus(args, data_dir)?;
    if corpus.num_tokens() == 0 {
        bail!("the corpus {source} has no tokens (after stop words and --min-count)");
    }
    // Validate before creating the output folder, so a typo leaves nothing behind.
    let (params, workers) = params_of(args, &corpus, backend)?;
    // Under MPI the workers are the job's ranks after the master, `workers` of them.
    let par = Par::threads(workers);
    if !root {
        // A worker rank: its part of the run, nothing printed or written.
        sampler
            .train_on(&corpus, &params, par, backend.communicator(), &mut |_| {
                Control::Continue
            })
            .with_context(|| format!("training with variant {}", sampler.name()))?;
        return Ok(());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output folder {}", dir.display()))?;
    }
    eprintln!(
        "corpus: {} documents, {} words, {} tokens ({:.2} s)",
        corpus.num_docs(),
        corpus.num_words(),
        corpus.num_tokens(),
        t.elapsed().as_secs_f64()
    );
    let parallel = sampler.is_parallel();
    eprintln!(
        "training: {}, K = {}, alpha = {}, beta = {}, {} iterations{}",
        sampler.name(),
        params.topics,
        params.alpha,
        params.beta,
        params.iterations,
        if parallel {
            format!(
                ", {} workers{}, checkpoint every {} documents",
                workers,
                if backend.communicator().is_some() {
                    " (MPI processes 1.., the master on rank 0)"
                } else {
                    ""
                },
                params.checkpoint_docs
            )
        } else {
            String::new()
        }
    );

    let out = {
        let mut display = IterationDisplay::new(params.iterations as u64, corpus.num_tokens());
        let mut report = |r: &lda::IterationReport| {
            display.update(r);
            Control::Continue
        };
        let result = sampler.train_on(&corpus, &params, par, backend.communicator(), &mut report);
        display.finish();
        result
            .with_context(|| format!("training with variant {}", sampler.name()))?
            .context("rank 0 runs the master and holds the output")?
    };
    if !out.invariants.holds() {
        bail!(
            "the counts are inconsistent after training ({} of {} checks failed): {}",
            out.invariants.violations.len(),
            out.invariants.checks,
            out.invariants
                .violations
                .iter()
                .take(3)
                .map(|v| v.detail.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }

    let topics = top_words(&corpus, &out, params.topics, args.top_words);
    let summary = summary_json(args, &params, &corpus, &source, &out, &topics);
    print_time_split(&out, parallel);
    if args.json {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        serde_json::to_writer(&mut w, &summary)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(w))
            .context("writing the JSON summary to stdout")?;
    } else {
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        write_top_words(&mut w, &topics).context("writing the topics to stdout")?;
    }
    if let Some(dir) = &args.out {
        write_outputs(dir, &corpus, &out, &topics, &summary)?;
        eprintln!(
            "wrote word_topic.csv, doc_topic.csv, top_words.txt and summary.json to {}",
            dir.display()
        );
    }
    Ok(())
}

/// The iteration display: a bar on a terminal, a plain line per log-likelihood evaluation
/// otherwise (logs and CI keep them).
struct IterationDisplay {
    progress: Progress,
    tokens: f64,
}

impl IterationDisplay {
    fn new(iterations: u64, tokens: usize) -> IterationDisplay {
        IterationDisplay {
            progress: Progress::new(ProgressMode::Auto, iterations, "iterations", ""),
            tokens: tokens as f64,
        }
    }

    fn update(&mut self, r: &lda::IterationReport) {
        self.progress.set_position(r.iteration as u64);
        let Some(ll) = r.loglik else {
            return;
        };
        let text = format!(
            "log-likelihood {ll:.6e} ({:.4} per token)",
            ll / self.tokens.max(1.0)
        );
        self.progress.line(|| {
            format!(
                "iteration {}/{}: {text}, {:.2} s",
                r.iteration, r.iterations, r.elapsed_seconds
            )
        });
        self.progress.message(|| text);
    }

    fn finish(&self) {
        self.progress.finish();
    }
}

/// For every topic, its top words as (name, count).
fn top_words(corpus: &Corpus, out: &LdaOutput, topics: usize, n: usize) -> Vec<Vec<(String, u32)>> {
    (0..topics)
        .map(|k| {
            out.state
                .top_words(k, n)
                .into_iter()
                .map(|(w, c)| (corpus.word_name(w), c))
                .collect()
        })
        .collect()
}

fn write_top_words(w: &mut impl Write, topics: &[Vec<(String, u32)>]) -> std::io::Result<()> {
    let width = topics.len().saturating_sub(1).to_string().len();
    for (k, words) in topics.iter().enumerate() {
        let names: Vec<&str> = words.iter().map(|(name, _)| name.as_str()).collect();
        writeln!(w, "topic {k:>width$}: {}", names.join(" "))?;
    }
    Ok(())
}

fn print_time_split(out: &LdaOutput, parallel: bool) {
    eprintln!(
        "done: {} iterations in {:.3} s, {:.3e} tokens/s, final log-likelihood {:.6e}{}",
        out.iterations,
        out.train_seconds,
        out.tokens_per_second,
        out.final_loglik,
        if parallel {
            format!(
                ", {} merges (master busy {:.3} s)",
                out.merges, out.master_seconds
            )
        } else {
            String::new()
        }
    );
    if parallel {
        eprintln!("  worker  sampling s  sending s  waiting s  applying s  exchanges");
        for (i, w) in out.workers.iter().enumerate() {
            eprintln!(
                "  {i:>6}  {:>10.3}  {:>9.3}  {:>9.3}  {:>10.3}  {:>9}",
                w.sampling_seconds,
                w.sending_seconds,
                w.waiting_seconds,
                w.applying_seconds,
                w.exchanges
            );
        }
    }
}

/// The `--json` object (also `summary.json` of `--out`).
fn summary_json(
    args: &TrainArgs,
    params: &LdaParams,
    corpus: &Corpus,
    source: &str,
    out: &LdaOutput,
    topics: &[Vec<(String, u32)>],
) -> Json {
    let workers: Vec<Json> = out
        .workers
        .iter()
        .map(|w| {
            json!({
                "tokens_sampled": w.tokens_sampled,
                "sampling_s": w.sampling_seconds,
                "sending_s": w.sending_seconds,
                "waiting_s": w.waiting_seconds,
                "applying_s": w.applying_seconds,
                "exchanges": w.exchanges,
                "bytes_sent": w.bytes_sent,
                "bytes_received": w.bytes_received,
            })
        })
        .collect();
    let trace: Vec<Json> = out
        .loglik_trace
        .iter()
        .map(|p| json!({"iteration": p.iteration, "elapsed_s": p.elapsed_seconds, "loglik": p.loglik}))
        .collect();
    let tokens = corpus.num_tokens();
    json!({
        "variant": args.variant,
        "corpus": {
            "source": source,
            "docs": corpus.num_docs(),
            "words": corpus.num_words(),
            "tokens": tokens,
        },
        "params": {
            "topics": params.topics,
            "alpha": params.alpha,
            "beta": params.beta,
            "iterations": params.iterations,
            "seed": params.seed,
            // The sequential variants report their one thread as one worker.
            "workers": out.workers.len(),
            "checkpoint_docs": params.checkpoint_docs,
            "likelihood_every": params.likelihood_every,
            "delta": params.delta.name(),
            "non_blocking": params.non_blocking,
            "inner": params.inner.name(),
        },
        "iterations": out.iterations,
        "final_loglik": out.final_loglik,
        "loglik_per_token": out.final_loglik / tokens.max(1) as f64,
        "tokens_sampled": out.tokens_sampled,
        "train_s": out.train_seconds,
        "tokens_per_second": out.tokens_per_second,
        "merges": out.merges,
        "master_s": out.master_seconds,
        "backend": args.backend,
        "invariant_checks": out.invariants.checks,
        "invariant_violations": out.invariants.violations.len(),
        "workers": workers,
        "loglik_trace": trace,
        "top_words": topics
            .iter()
            .map(|words| words.iter().map(|(name, _)| name.clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
    })
}

fn write_outputs(
    dir: &Path,
    corpus: &Corpus,
    out: &LdaOutput,
    topics: &[Vec<(String, u32)>],
    summary: &Json,
) -> Result<()> {
    let k = out.state.topics();
    let header = |first: &str| {
        let mut h = first.to_string();
        for t in 0..k {
            h.push_str(&format!(",topic_{t}"));
        }
        h
    };
    let path = dir.join("word_topic.csv");
    crate::results::write_atomic_with(&path, |w| {
        writeln!(w, "{}", header("word_id,word"))?;
        for (word, row) in out.state.word_topic().chunks(k).enumerate() {
            write!(w, "{word},{}", csv::field(&corpus.word_name(word as u32)))?;
            write_counts(w, row)?;
        }
        Ok(())
    })
    .with_context(|| format!("writing {}", path.display()))?;
    let path = dir.join("doc_topic.csv");
    crate::results::write_atomic_with(&path, |w| {
        writeln!(w, "{}", header("doc"))?;
        for (doc, row) in out.state.doc_topic().chunks(k).enumerate() {
            write!(w, "{}", doc + 1)?;
            write_counts(w, row)?;
        }
        Ok(())
    })
    .with_context(|| format!("writing {}", path.display()))?;
    let path = dir.join("top_words.txt");
    crate::results::write_atomic_with(&path, |w| write_top_words(w, topics))
        .with_context(|| format!("writing {}", path.display()))?;
    let path = dir.join("summary.json");
    crate::results::write_atomic_with(&path, |w| {
        serde_json::to_writer_pretty(&mut *w, summary)?;
        writeln!(w)
    })
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn write_counts(w: &mut impl Write, row: &[u32]) -> std::io::Result<()> {
    for c in row {
        write!(w, ",{c}")?;
    }
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_words_lines_are_aligned() {
        let topics = vec![vec![("a".to_string(), 3)]; 11];
        let mut buf = Vec::new();
        write_top_words(&mut buf, &topics).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("topic  0: a\n"), "{text}");
        assert!(text.ends_with("topic 10: a\n"), "{text}");
    }
}
