//! Trains every variant (or the ones named) on a corpus prefix and prints words/s, GFLOP/s,
//! model traffic and, with `--eval DIR`, the quality metrics.
//!
//! ```text
//! cargo run --release -p word2vec --example train -- /work/shared/data/wiki17m.txt.gz \
//!     [--tokens 3000000] [--threads 2] [--epochs 1] [--dim 100] [--variants hogwild,gemm,full] \
//!     [--eval /work/shared/data] [--out vectors.bin]
//! ```

use std::path::PathBuf;
use std::time::Instant;
use word2vec::eval::EvalSuite;
use word2vec::{io, variant, variant_names, Control, Corpus, CorpusOptions, Par, TrainParams};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let corpus_path = PathBuf::from(args.next().ok_or("usage: train CORPUS [options]")?);
    let mut tokens: Option<u64> = Some(3_000_000);
    let mut threads: usize = 2;
    let mut params = TrainParams {
        epochs: 1,
        ..TrainParams::default()
    };
    let mut names: Vec<String> = variant_names().iter().map(|s| s.to_string()).collect();
    let mut eval_dir: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tokens" => tokens = (value != "all").then(|| value.parse()).transpose()?,
            "--threads" => threads = value.parse()?,
            "--epochs" => params.epochs = value.parse()?,
            "--dim" => params.dim = value.parse()?,
            "--window" => params.window = value.parse()?,
            "--negative" => params.negative = value.parse()?,
            "--variants" => names = value.split(',').map(str::to_owned).collect(),
            "--eval" => eval_dir = Some(value.into()),
            "--out" => out = Some(value.into()),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    if threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    let t = Instant::now();
    let corpus = Corpus::read(
        &corpus_path,
        &CorpusOptions {
            min_count: params.min_count,
            max_vocab: None,
            max_tokens: tokens,
        },
    )?;
    println!(
        "corpus: {} words, vocabulary {}, read in {:.2} s",
        corpus.num_words(),
        corpus.vocab().len(),
        t.elapsed().as_secs_f64()
    );
    let suite = eval_dir.map(|d| EvalSuite::load(&d)).transpose()?;
    for name in &names {
        let trainer = variant(name).ok_or(format!("unknown variant {name}"))?;
        let result = trainer.train(&corpus, &params, Par::threads(threads), &mut |r| {
            if r.epoch_finished {
                eprintln!(
                    "  {name}: epoch {} done, alpha {:.5}, {:.0} words/s",
                    r.epoch + 1,
                    r.alpha,
                    r.words_per_second
                );
            }
            Control::Continue
        })?;
        let traffic = result.total_traffic();
        let epochs = result.epochs_completed as f64;
        println!(
            "{name:8} d {} threads {}: {:>10.0} words/s  {:6.2} GFLOP/s  {:7.1} s  model MB/epoch read {:8.1} written {:8.1}",
            params.dim,
            threads,
            result.words_per_second,
            result.flops / result.seconds / 1e9,
            result.seconds,
            traffic.bytes_read(params.dim) as f64 / epochs / 1e6,
            traffic.bytes_written(params.dim) as f64 / epochs / 1e6,
        );
        if let Some(suite) = &suite {
            let t = Instant::now();
            let r = suite.evaluate(&result.model);
            println!(
                "         WS-353 {:.3} ({}/{})  SimLex {:.3} ({}/{})  3CosAdd {:.1}% (sem {:.1}%, syn {:.1}%)  3CosMul {:.1}%  coverage {}/{}  [{:.1} s]",
                r.wordsim353.spearman,
                r.wordsim353.pairs_covered,
                r.wordsim353.pairs_total,
                r.simlex999.spearman,
                r.simlex999.pairs_covered,
                r.simlex999.pairs_total,
                100.0 * r.analogy.add.overall,
                100.0 * r.analogy.add.semantic,
                100.0 * r.analogy.add.syntactic,
                100.0 * r.analogy.mul.overall,
                r.analogy.covered,
                r.analogy.total,
                t.elapsed().as_secs_f64()
            );
        }
        if let Some(path) = &out {
            io::write_binary(&result.model, path)?;
        }
    }
    Ok(())
}
