//! `parbench w2v`: word2vec (skip-gram with negative sampling) on the user's own corpus.
//!
//! - `train`: read the corpus (plain or gzip text, whitespace-tokenized, a newline ends a
//!   sentence, sentences cut at 1000 words as word2vec.c does), train with one of the `word2vec`
//!   crate's variants while a progress bar (plain lines when stderr is not a terminal) shows the
//!   progress, words/s and the current learning rate, then write the embeddings in word2vec text
//!   or binary format atomically (a temporary file in the same folder, then a rename) and print
//!   words/s, GFLOP/s and the model traffic per epoch. Cost: one streaming pass over the corpus,
//!   then O(epochs x words x window x (negative + 1) x dim) for training, O(V d) to write.
//! - `eval`: WordSim-353 and SimLex-999 Spearman correlations (with the pairs covered) and the
//!   Google analogies by 3CosAdd and 3CosMul (overall, semantic, syntactic, with coverage) from
//!   the data dir; `--json` prints one JSON object. Cost: O(pairs d) for similarity,
//!   O(distinct question words x candidates x d) for analogies.
//! - `neighbors`: the k nearest words by cosine of each word asked, O(V d) per word.
//!
//! A corpus or model name that does not exist here is looked up in the data dir, so
//! `--corpus wiki17m.txt.gz` finds the shared corpus.

use crate::exec::ranks::Ranks;
use crate::families::params::Named;
use crate::families::word2vec::InnerVariant;
use crate::util::datadir;
use crate::util::progress::{Progress, ProgressMode};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value as Json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use word2vec::eval::{self, AnalogyAccuracy, AnalogyResult, Evaluator, SimilarityResult};
use word2vec::{
    io, Control, Corpus, CorpusOptions, Distributed, EpochReport, Model, Par, SyncOptions,
    TrainOutput, TrainParams, Trainer,
};

/// File names of the evaluation sets in the data dir (the crate's, which its suite reads).
pub use word2vec::eval::{ANALOGY_FILE, SIMLEX999_FILE, WORDSIM353_FILE};

/// word2vec subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum W2vCommand {
    /// Train skip-gram embeddings with negative sampling and write them in word2vec format.
    #[command(
        long_about = "Trains skip-gram word embeddings with negative sampling (word2vec.c's \
    algorithm) on your corpus and writes them in word2vec text format, or binary with --binary; both \
    read by gensim's KeyedVectors.load_word2vec_format and by `parbench w2v eval`.\n\n\
    Corpus: plain or .gz text split on whitespace; a newline ends a sentence and sentences are cut at \
    1000 words (a corpus that is one line, like text8, trains in 1000-word sentences). Words are \
    not lowercased. A name that does not exist here is looked up in the data dir (--data-dir, \
    $PARBENCH_DATA), e.g. --corpus wiki17m.txt.gz.\n\n\
    Variants (every one Hogwild across threads): hogwild (word2vec.c, pair by pair), gemm (pWord2Vec: \
    a center word's context against the center and K shared negatives as small matrix products), \
    full (FULL-W2V: fixed window ceil(W/2), negatives held locally, context vectors kept in a ring \
    buffer for their lifetime in the window), full-register (FULL-W2V's ablation: full without the \
    ring buffer, context vectors read from and written to the model every window).\n\n\
    Defaults are word2vec.c's skip-gram settings (-size 100 -window 5 -negative 5 -min-count 5 \
    -sample 1e-4 -alpha 0.025 -iter 5). Progress and the final words/s, GFLOP/s and model bytes per \
    epoch go to stderr and stdout.\n\n\
    Example:  parbench w2v train --corpus wiki17m.txt.gz --variant gemm --dim 300 --epochs 1 \
    --threads 2 --out vectors.bin --binary"
    )]
    Train(Box<TrainArgs>),
    /// Word similarity (WS-353, SimLex-999) and analogies (3CosAdd, 3CosMul) of a model.
    #[command(
        long_about = "Evaluates word vectors in word2vec text or binary format (.gz allowed) on \
    the data dir's wordsim353.tsv, simlex999.txt (Spearman correlation of cosine with the human \
    scores, ties averaged, over the pairs whose words are both in the model) and questions-words.txt \
    (Google analogies: answers searched among the 30,000 most frequent words with the three question \
    words excluded, case-insensitive; accuracy among covered questions, overall, semantic and \
    syntactic). A missing benchmark file is skipped with a note.\n\n\
    Example:  parbench w2v eval --model vectors.bin --json"
    )]
    Eval(EvalArgs),
    /// The nearest words of each given word by cosine similarity.
    Neighbors(NeighborsArgs),
}

/// Arguments of `parbench w2v train`.
#[derive(clap::Args, Clone, Debug)]
pub struct TrainArgs {
    /// Text corpus (.gz allowed); a name not found here is looked up in the data dir.
    #[arg(long, value_name = "FILE")]
    pub corpus: PathBuf,
    /// Training variant.
    #[arg(
        long,
        default_value = "hogwild",
        value_parser = clap::builder::PossibleValuesParser::new(train_variant_names())
    )]
    pub variant: String,
    /// distributed: ranks (in-process with --backend local; the mpirun job's with mpi).
    #[arg(long, value_name = "P")]
    pub ranks: Option<u64>,
    /// distributed: the variant every rank trains its shard with.
    #[arg(
        long,
        value_name = "V",
        default_value = InnerVariant::DEFAULT.name(),
        value_parser = clap::builder::PossibleValuesParser::new(word2vec::variant_names())
    )]
    pub inner: String,
    /// distributed: corpus words each rank trains between two model exchanges.
    #[arg(long, value_name = "N", default_value_t = SyncOptions::default().sync_words)]
    pub sync_words: u64,
    /// distributed: rows of the N most frequent words are exchanged at every exchange.
    #[arg(long, value_name = "N", default_value_t = SyncOptions::default().hot_words)]
    pub hot_words: usize,
    /// distributed: the other rows are exchanged every N exchanges (and at the end).
    #[arg(long, value_name = "N", default_value_t = SyncOptions::default().rare_every)]
    pub rare_every: usize,
    /// distributed: keep alpha as given instead of multiplying it by the number of ranks.
    #[arg(long)]
    pub no_scale_alpha: bool,
    /// distributed: exchange every row of the model at every exchange (full-model sync, the
    /// baseline that exchanging only the changed rows, hot ones more often, saves on).
    #[arg(long)]
    pub full_model: bool,
    /// distributed: where the ranks run, `local` (threads) or `mpi` (`mpirun -np P parbench
    /// w2v train --variant distributed --backend mpi ...`; needs `--features mpi`).
    #[arg(long, default_value = "local", value_parser = ["local", "mpi"])]
    pub backend: String,
    /// Embedding dimension.
    #[arg(long, value_name = "D", default_value_t = TrainParams::default().dim)]
    pub dim: usize,
    /// Maximum window (hogwild and gemm draw a window in [1, W] per word; full and
    /// full-register use ceil(W/2)).
    #[arg(long, value_name = "W", default_value_t = TrainParams::default().window)]
    pub window: usize,
    /// Negative samples per positive pair (per center word for gemm, full and
    /// full-register).
    #[arg(long, value_name = "K", default_value_t = TrainParams::default().negative)]
    pub negative: usize,
    /// Drop words seen fewer times than this from the vocabulary.
    #[arg(long, value_name = "N", default_value_t = CorpusOptions::default().min_count)]
    pub min_count: u64,
    /// Keep only the N most frequent words (pWord2Vec Table II).
    #[arg(long, value_name = "N")]
    pub max_vocab: Option<usize>,
    /// Train on the first N words of the corpus only.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Subsampling threshold of frequent words (0 keeps every word).
    #[arg(long, value_name = "S", default_value_t = TrainParams::default().sample)]
    pub sample: f64,
    /// Starting learning rate, decayed linearly to alpha * 1e-4 over all epochs.
    #[arg(
        long,
        value_name = "A",
        default_value_t = TrainParams::default().alpha,
        allow_negative_numbers = true
    )]
    pub alpha: f64,
    /// Passes over the corpus.
    #[arg(long, value_name = "E", default_value_t = TrainParams::default().epochs)]
    pub epochs: usize,
    /// Worker threads (default: every core).
    #[arg(long, value_name = "T")]
    pub threads: Option<usize>,
    /// Seed of the initial vectors and of every thread's random stream.
    #[arg(long, default_value_t = TrainParams::default().seed)]
    pub seed: u64,
    /// Where to write the embeddings (word2vec text format, binary with --binary).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Write word2vec's binary format instead of text.
    #[arg(long)]
    pub binary: bool,
}

/// Arguments of `parbench w2v eval`.
#[derive(clap::Args, Clone, Debug)]
pub struct EvalArgs {
    /// Word vectors in word2vec text or binary format (.gz allowed).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Analogy answers are searched among this many most frequent words.
    #[arg(long, value_name = "N", default_value_t = eval::ANALOGY_CANDIDATES)]
    pub candidates: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `parbench w2v neighbors`.
#[derive(clap::Args, Clone, Debug)]
pub struct NeighborsArgs {
    /// Word vectors in word2vec text or binary format (.gz allowed).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Words to look up (case-insensitive).
    #[arg(required = true, value_name = "WORD")]
    pub words: Vec<String>,
    /// Neighbours shown per word.
    #[arg(short = 'k', long, default_value_t = 10)]
    pub k: usize,
}

/// Runs a word2vec subcommand; `data_dir` is where names not found here are looked up and where
/// the evaluation sets are.
pub fn run(cmd: &W2vCommand, data_dir: Option<&Path>) -> Result<()> {
    match cmd {
        W2vCommand::Train(args) => train(args, data_dir),
        W2vCommand::Eval(args) => evaluate(args, data_dir),
        W2vCommand::Neighbors(args) => neighbors(args, data_dir),
    }
}

/// The training settings of the arguments (validated) and the training threads.
pub fn params_of(args: &TrainArgs) -> Result<(TrainParams, usize)> {
    let threads = match args.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let params = TrainParams {
        dim: args.dim,
        window: args.window,
        negative: args.negative,
        sample: args.sample,
        alpha: args.alpha,
        epochs: args.epochs,
        seed: args.seed,
        min_count: args.min_count,
        ..TrainParams::default()
    };
    params.validate().context("invalid word2vec settings")?;
    Ok((params, threads))
}

/// The shared-memory variants and `distributed`.
fn train_variant_names() -> Vec<&'static str> {
    let mut v = word2vec::variant_names();
    v.push("distributed");
    v
}

fn train(args: &TrainArgs, data_dir: Option<&Path>) -> Result<()> {
    if args.variant != "distributed" && (args.backend != "local" || args.ranks.is_some()) {
        bail!("--backend and --ranks apply to --variant distributed");
    }
    let backend = Ranks::start(&args.backend)?;
    backend.finish(train_on(&backend, args, data_dir))
}

fn train_on(backend: &Ranks, args: &TrainArgs, data_dir: Option<&Path>) -> Result<()> {
    let sync = SyncOptions {
        sync_words: args.sync_words,
        hot_words: args.hot_words,
        rare_every: args.rare_every,
        scale_alpha: !args.no_scale_alpha,
        full_model: args.full_model,
    };
    let trainer: Box<dyn Trainer> = if args.variant == "distributed" {
        if args.sync_words == 0 || args.rare_every == 0 {
            bail!("--sync-words and --rare-every must be at least 1");
        }
        Box::new(Distributed {
            inner: args.inner.clone(),
            ranks: backend.ranks(args.ranks, 2)?,
            sync: sync.clone(),
        })
    } else {
        word2vec::variant(&args.variant).with_context(|| {
            format!(
                "unknown variant {:?}; choose one of: {}",
                args.variant,
                train_variant_names().join(", ")
            )
        })?
    };
    // Everything that can be checked before a long run is checked first.
    let (params, threads) = params_of(args)?;
    let par = Par::threads(threads);
    if args.max_vocab == Some(0) {
        bail!("--max-vocab must be at least 1");
    }
    if args.max_tokens == Some(0) {
        bail!("--max-tokens must be at least 1");
    }
    check_output_folder(&args.out)?;
    let corpus_path = datadir::locate_input(&args.corpus, data_dir);
    let t = Instant::now();
    let corpus = Corpus::read(
        &corpus_path,
        &CorpusOptions {
            min_count: args.min_count,
            max_vocab: args.max_vocab,
            max_tokens: args.max_tokens,
        },
    )
    .with_context(|| format!("reading the corpus {}", corpus_path.display()))?;
    eprintln!(
        "corpus: {} words in the vocabulary's {} types, {} sentence breaks ({:.2} s)",
        corpus.num_words(),
        corpus.vocab().len(),
        corpus.line_ends().len(),
        t.elapsed().as_secs_f64()
    );
    eprintln!(
        "training: {}, d = {}, window {}, {} negatives, sample {}, alpha {}, {} epoch(s), {} thread(s), seed {}",
        trainer.name(),
        params.dim,
        params.window,
        params.negative,
        params.sample,
        params.alpha,
        params.epochs,
        threads,
        params.seed
    );
    let out = {
        let mut display = TrainingDisplay::new(corpus.num_words() * params.epochs as u64);
        let root = backend.is_root();
        let mut show = |r: &EpochReport| {
            if root {
                display.update(r);
            }
            Control::Continue
        };
        let result = match backend.communicator() {
            // Under MPI this process is one rank; every rank ends with the same model and the
            // whole job's counters.
            Some(world) => word2vec::distributed::train_job(
                world,
                world.size(),
                &args.inner,
                &corpus,
                &params,
                par,
                &sync,
                &mut show,
            )
            .map(|job| job.train),
            None => trainer.train(&corpus, &params, par, &mut show),
        };
        display.finish();
        result.with_context(|| format!("training with variant {}", trainer.name()))?
    };
    if !backend.is_root() {
        return Ok(());
    }
    let t = Instant::now();
    // Both writers replace the file atomically: a reader never sees half a model.
    if args.binary {
        io::write_binary(&out.model, &args.out)?;
    } else {
        io::write_text(&out.model, &args.out)?;
    }
    eprintln!(
        "wrote {} vectors of dimension {} to {} ({}, {:.2} s)",
        out.model.len(),
        out.model.dim(),
        args.out.display(),
        if args.binary { "binary" } else { "text" },
        t.elapsed().as_secs_f64()
    );
    print_train_summary(trainer.name(), &params, threads, &out);
    Ok(())
}

/// Fails early, before a long training run, when the output could not be written.
fn check_output_folder(out: &Path) -> Result<()> {
    if out.file_name().is_none() || out.is_dir() {
        bail!("--out {} must name a file, not a folder", out.display());
    }
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        bail!(
            "the folder {} of --out does not exist; create it first",
            parent.display()
        );
    }
    Ok(())
}

fn print_train_summary(variant: &str, params: &TrainParams, threads: usize, out: &TrainOutput) {
    let gflops = if out.seconds > 0.0 {
        out.flops / out.seconds / 1e9
    } else {
        0.0
    };
    println!(
        "{variant}: {} words in {:.3} s: {:.0} words/sec, {:.2} GFLOP/s ({} epoch(s), {} thread(s))",
        out.words_processed,
        out.seconds,
        out.words_per_second,
        gflops,
        out.epochs_completed,
        threads
    );
    for (e, stats) in out.epochs.iter().enumerate() {
        println!(
            "  epoch {}: {} words ({} kept after subsampling), {:.3} s, model traffic {:.1} MB read, {:.1} MB written",
            e + 1,
            stats.words,
            stats.kept_words,
            stats.seconds,
            stats.traffic.bytes_read(params.dim) as f64 / 1e6,
            stats.traffic.bytes_written(params.dim) as f64 / 1e6
        );
    }
}

/// The training display: a bar over corpus words on a terminal; otherwise a plain line at every
/// epoch end and every [`TrainingDisplay::LINE_INTERVAL_S`] seconds (logs keep them).
struct TrainingDisplay {
    progress: Progress,
    last_line_s: f64,
}

impl TrainingDisplay {
    const LINE_INTERVAL_S: f64 = 10.0;

    fn new(words_total: u64) -> TrainingDisplay {
        TrainingDisplay {
            progress: Progress::new(ProgressMode::Auto, words_total, "words", ""),
            last_line_s: 0.0,
        }
    }

    fn update(&mut self, r: &EpochReport) {
        let text = format!(
            "epoch {}/{}  {:.0} words/sec  alpha {:.6}",
            (r.epoch + 1).min(r.epochs),
            r.epochs,
            r.words_per_second,
            r.alpha
        );
        self.progress.set_position(r.words_processed);
        let due = r.epoch_finished || r.elapsed_seconds - self.last_line_s >= Self::LINE_INTERVAL_S;
        if self.progress.lines() && due {
            self.last_line_s = r.elapsed_seconds;
            let share = r.words_processed as f64 / r.words_total.max(1) as f64;
            let done = if r.epoch_finished {
                " (epoch done)"
            } else {
                ""
            };
            eprintln!("{:5.1}% {text}{done}", 100.0 * share);
        }
        self.progress.message(|| text);
    }

    fn finish(&self) {
        self.progress.finish();
    }
}

fn read_model(path: &Path, data_dir: Option<&Path>) -> Result<Model> {
    let path = datadir::locate_input(path, data_dir);
    let model =
        io::read_model(&path).with_context(|| format!("reading the model {}", path.display()))?;
    if model.is_empty() {
        bail!("the model {} has no words", path.display());
    }
    Ok(model)
}

/// What `eval` measured; a benchmark whose file was missing is `None`.
#[derive(Clone, Debug)]
pub struct EvalOutcome {
    pub wordsim353: Option<SimilarityResult>,
    pub simlex999: Option<SimilarityResult>,
    pub analogy: Option<AnalogyResult>,
}

/// Evaluates `model` on the benchmark files found in `dir`; errors when none is there or one is
/// malformed.
pub fn evaluate_in(model: &Model, dir: &Path, candidates: usize) -> Result<EvalOutcome> {
    let existing = |name: &str| {
        let p = dir.join(name);
        p.is_file().then_some(p)
    };
    let (ws, sl, an) = (
        existing(WORDSIM353_FILE),
        existing(SIMLEX999_FILE),
        existing(ANALOGY_FILE),
    );
    if ws.is_none() && sl.is_none() && an.is_none() {
        bail!(
            "none of {WORDSIM353_FILE}, {SIMLEX999_FILE}, {ANALOGY_FILE} is in {}; pass the folder \
             that holds them with --data-dir (or set {})",
            dir.display(),
            crate::util::datadir::DATA_ENV
        );
    }
    let evaluator = Evaluator::new(model);
    let similarity = |p: Option<PathBuf>| -> Result<Option<SimilarityResult>> {
        p.map(|p| {
            let pairs = eval::read_similarity(&p)?;
            Ok(evaluator.similarity(&pairs))
        })
        .transpose()
    };
    let wordsim353 = similarity(ws)?;
    let simlex999 = similarity(sl)?;
    let analogy = an
        .map(|p| -> Result<AnalogyResult> {
            let sections = eval::read_analogies(&p)?;
            Ok(evaluator.analogy(&sections, candidates))
        })
        .transpose()?;
    Ok(EvalOutcome {
        wordsim353,
        simlex999,
        analogy,
    })
}

fn evaluate(args: &EvalArgs, data_dir: Option<&Path>) -> Result<()> {
    if args.candidates == 0 {
        bail!("--candidates must be at least 1");
    }
    let model = read_model(&args.model, data_dir)?;
    let Some(dir) = data_dir else {
        // Names the places looked at and how to fix it.
        crate::util::datadir::require(None, WORDSIM353_FILE)?;
        bail!("no data dir with the evaluation sets was found");
    };
    if !dir.is_dir() {
        bail!(
            "the data dir {} does not exist; pass the folder holding {WORDSIM353_FILE}, \
             {SIMLEX999_FILE} and {ANALOGY_FILE} with --data-dir",
            dir.display()
        );
    }
    let t = Instant::now();
    let outcome = evaluate_in(&model, dir, args.candidates)?;
    let seconds = t.elapsed().as_secs_f64();
    if args.json {
        let v = eval_json(&args.model, &model, &outcome, args.candidates, seconds);
        let stdout = std::io::stdout();
        let mut w = stdout.lock();
        serde_json::to_writer(&mut w, &v)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(w))
            .context("writing the JSON report to stdout")?;
    } else {
        print_eval(&model, &outcome, dir, seconds);
    }
    Ok(())
}

/// NaN (nothing covered) as JSON null.
fn num(x: f64) -> Json {
    if x.is_finite() {
        json!(x)
    } else {
        Json::Null
    }
}

fn similarity_json(r: &Option<SimilarityResult>) -> Json {
    match r {
        None => Json::Null,
        Some(r) => json!({
            "spearman": num(r.spearman),
            "pairs_covered": r.pairs_covered,
            "pairs_total": r.pairs_total,
        }),
    }
}

fn accuracy_json(a: &AnalogyAccuracy) -> Json {
    json!({
        "overall": num(a.overall),
        "semantic": num(a.semantic),
        "syntactic": num(a.syntactic),
        "correct": a.correct,
        "semantic_correct": a.semantic_correct,
        "syntactic_correct": a.syntactic_correct,
    })
}

fn eval_json(
    path: &Path,
    model: &Model,
    outcome: &EvalOutcome,
    candidates: usize,
    seconds: f64,
) -> Json {
    let analogy = match &outcome.analogy {
        None => Json::Null,
        Some(a) => json!({
            "add": accuracy_json(&a.add),
            "mul": accuracy_json(&a.mul),
            "covered": a.covered,
            "total": a.total,
            "coverage": num(a.covered as f64 / a.total as f64),
            "semantic_covered": a.semantic_covered,
            "semantic_total": a.semantic_total,
            "syntactic_covered": a.syntactic_covered,
            "syntactic_total": a.syntactic_total,
            "candidates": candidates,
        }),
    };
    json!({
        "model": {
            "path": path.display().to_string(),
            "words": model.len(),
            "dim": model.dim(),
        },
        "wordsim353": similarity_json(&outcome.wordsim353),
        "simlex999": similarity_json(&outcome.simlex999),
        "analogy": analogy,
        "eval_s": seconds,
    })
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:5.1}%", 100.0 * x)
    } else {
        "    -".to_string()
    }
}

fn print_eval(model: &Model, outcome: &EvalOutcome, dir: &Path, seconds: f64) {
    println!("model: {} words, dimension {}", model.len(), model.dim());
    for (name, r, file) in [
        ("WordSim-353", &outcome.wordsim353, WORDSIM353_FILE),
        ("SimLex-999", &outcome.simlex999, SIMLEX999_FILE),
    ] {
        match r {
            Some(r) => println!(
                "{name:<12} Spearman {:>7}  ({} of {} pairs covered)",
                if r.spearman.is_finite() {
                    format!("{:.4}", r.spearman)
                } else {
                    "-".to_string()
                },
                r.pairs_covered,
                r.pairs_total
            ),
            None => println!("{name:<12} skipped: {file} not in {}", dir.display()),
        }
    }
    match &outcome.analogy {
        Some(a) => {
            println!(
                "analogies    {} of {} questions covered (semantic {}/{}, syntactic {}/{})",
                a.covered,
                a.total,
                a.semantic_covered,
                a.semantic_total,
                a.syntactic_covered,
                a.syntactic_total
            );
            println!("             overall  semantic  syntactic");
            for (name, acc) in [("3CosAdd", &a.add), ("3CosMul", &a.mul)] {
                println!(
                    "  {name:<10} {}    {}     {}",
                    pct(acc.overall),
                    pct(acc.semantic),
                    pct(acc.syntactic)
                );
            }
        }
        None => println!(
            "analogies    skipped: {ANALOGY_FILE} not in {}",
            dir.display()
        ),
    }
    eprintln!("evaluated in {seconds:.2} s");
}

fn neighbors(args: &NeighborsArgs, data_dir: Option<&Path>) -> Result<()> {
    if args.k == 0 {
        bail!("-k must be at least 1");
    }
    let model = read_model(&args.model, data_dir)?;
    let evaluator = Evaluator::new(&model);
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    let mut missing = Vec::new();
    for word in &args.words {
        if evaluator.lookup(word).is_none() {
            missing.push(word.as_str());
            continue;
        }
        let found = evaluator.neighbors(word, args.k);
        let width = found.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        writeln!(w, "{word}:").context("writing to stdout")?;
        for (n, cos) in found {
            writeln!(w, "  {n:<width$}  {cos:.4}").context("writing to stdout")?;
        }
    }
    if !missing.is_empty() {
        bail!(
            "not in the model ({} words): {}",
            model.len(),
            missing.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_turn_nan_into_null() {
        assert_eq!(num(f64::NAN), Json::Null);
        assert_eq!(num(0.5), json!(0.5));
    }

    #[test]
    fn an_output_path_in_a_missing_folder_is_refused_before_training() {
        let err = check_output_folder(Path::new("/no/such/folder/v.bin")).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(check_output_folder(Path::new("vectors.txt")).is_ok());
        assert!(check_output_folder(Path::new("/tmp")).is_err());
    }
}
