//! The word2vec readers against malformed input: model files (text and binary, plain and `.gz`),
//! corpora (plain and `.gz`) and evaluation data, made valid by the test and then mutated
//! (truncated, bytes flipped, junk or non-UTF-8 inserted, numbers replaced by NaN, infinities,
//! negatives, zero or absurd values, absurd headers, damaged gzip streams). The readers must
//! never panic, never allocate what a header announces before the file shows it, and either
//! read the file or refuse it with an error naming the file and the line (for binary models: the
//! word and its byte offset).

#[path = "../../common/tests/support/malformed.rs"]
mod malformed;

use malformed::{
    allocation_bound, apply_all, assert_bounded_allocation, assert_names_file_and_line, config,
    largest_allocation, mutations, named_line, replace_number, TempDir, ABSURD_COUNTS,
};
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;
use word2vec::corpus::{Corpus, CorpusError, CorpusOptions};
use word2vec::eval::{read_analogies, read_similarity};
use word2vec::io::{self, Format, ModelIoError};
use word2vec::model::Model;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("compress in memory");
    enc.finish().expect("compress in memory")
}

/// A small model with distinct words (so it reads back equal) and exact values.
fn model() -> impl Strategy<Value = Model> {
    (1usize..=4, 1usize..=4).prop_flat_map(|(n, dim)| {
        let words = prop::collection::btree_set("[a-zé]{1,5}", n);
        let values = prop::collection::vec((-16i32..=16).prop_map(|k| k as f32 / 8.0), n * dim);
        (words, values).prop_map(move |(words, values)| {
            Model::new(words.into_iter().collect(), dim, values).expect("a consistent model")
        })
    })
}

/// The model in the text format, as `io::write_text` writes it.
fn text_bytes(m: &Model) -> Vec<u8> {
    let mut out = format!("{} {}\n", m.len(), m.dim());
    for (i, w) in m.words().iter().enumerate() {
        out.push_str(w);
        for x in m.vector(i) {
            out.push_str(&format!(" {x}"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

fn bytes_of(m: &Model, format: Format) -> Vec<u8> {
    match format {
        Format::Text => text_bytes(m),
        Format::Binary => io::binary_bytes(m).expect("valid words"),
    }
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![Just(Format::Text), Just(Format::Binary)]
}

/// Checks a model error: it names the file, and the line (text) or the word's byte offset or
/// the header line (binary).
fn check_model_error(e: &ModelIoError, path: &Path, bytes: &[u8], format: Format) {
    let message = e.to_string();
    match (format, e) {
        (Format::Binary, ModelIoError::BadRecord { offset, .. }) => {
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(*offset <= bytes.len(), "{message}");
        }
        _ => assert_names_file_and_line(&message, path, bytes),
    }
}

/// Parses model bytes in `format`: no panic, allocation bounded by the input, errors that say
/// where; `detect` never panics either.
fn check_model(bytes: &[u8], format: Format) -> Result<Model, ModelIoError> {
    let path = Path::new("models/m.test");
    let result = assert_bounded_allocation(bytes.len(), || io::parse(bytes, path, format));
    let _ = io::detect(bytes, path);
    if let Err(e) = &result {
        check_model_error(e, path, bytes, format);
    }
    result
}

fn corpus_case() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec!["the", "cat", "sat", "école", "1.5", "-2", "nan", "a"]);
    let sep = prop::sample::select(vec![" ", "  ", "\t", "\n", "\r\n", " \n"]);
    prop::collection::vec((word, sep), 0..16)
        .prop_map(|ws| ws.iter().map(|(w, s)| format!("{w}{s}")).collect())
}

/// Checks a corpus error: it names the file, and the line unless it is about the whole file.
fn check_corpus_error(e: &CorpusError, path: &Path, bytes: &[u8]) {
    let message = e.to_string();
    match e {
        CorpusError::Empty { .. } | CorpusError::EmptyVocabulary { .. } => {
            assert!(message.contains(&path.display().to_string()), "{message}");
        }
        _ => assert_names_file_and_line(&message, path, bytes),
    }
}

fn similarity_case() -> impl Strategy<Value = String> {
    let pair = ("[a-z]{1,5}", "[a-z]{1,5}", 0u32..=40);
    prop::collection::vec(pair, 0..5).prop_map(|pairs| {
        let rows: String = pairs
            .iter()
            .map(|(a, b, s)| format!("{a}\t{b}\t{}\n", *s as f64 / 4.0))
            .collect();
        format!("# Word 1\tWord 2\tHuman (mean)\n{rows}")
    })
}

fn analogy_case() -> impl Strategy<Value = String> {
    let question = prop::collection::vec("[a-z]{1,4}", 4).prop_map(|w| w.join(" "));
    let section = ("[a-z-]{1,8}", prop::collection::vec(question, 0..3));
    prop::collection::vec(section, 0..3).prop_map(|sections| {
        sections
            .iter()
            .map(|(name, qs)| {
                format!(
                    ": {name}\n{}",
                    qs.iter().map(|q| format!("{q}\n")).collect::<String>()
                )
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(config(256, 0x2bec_0001))]

    #[test]
    fn valid_models_read_back_in_both_formats(m in model(), format in format()) {
        let bytes = bytes_of(&m, format);
        prop_assert_eq!(check_model(&bytes, format).expect("a valid file"), m);
    }

    #[test]
    fn mutated_models_are_read_or_refused_saying_where(
        m in model(),
        format in format(),
        changes in mutations(),
    ) {
        let bytes = apply_all(&bytes_of(&m, format), &changes);
        let _ = check_model(&bytes, format);
    }

    #[test]
    fn absurd_model_headers_are_refused_without_allocating_them(
        m in model(),
        format in format(),
        field in 0usize..2,
        absurd in prop::sample::select(ABSURD_COUNTS),
    ) {
        let bytes = replace_number(&bytes_of(&m, format), field, absurd);
        prop_assert!(check_model(&bytes, format).is_err());
    }

    #[test]
    fn model_files_plain_and_gzip_are_read_or_refused_naming_the_file(
        m in model(),
        format in format(),
        changes in mutations(),
        damage_gzip in any::<bool>(),
    ) {
        let dir = TempDir::new("w2v-model");
        let bytes = apply_all(&bytes_of(&m, format), &changes);
        let plain = dir.join("m.bin");
        let zipped = dir.join("m.bin.gz");
        std::fs::write(&plain, &bytes).unwrap();
        let gz = gzip(&bytes);
        std::fs::write(&zipped, if damage_gzip { apply_all(&gz, &changes) } else { gz }).unwrap();
        for path in [&plain, &zipped] {
            let (result, largest) = largest_allocation(|| io::read_model(path));
            // A damaged gzip stream may inflate to anything; the input is then the inflated size.
            if !(damage_gzip && path == &zipped) {
                prop_assert!(largest <= allocation_bound(bytes.len()), "{} bytes", largest);
            }
            if let Err(e) = result {
                prop_assert!(
                    e.to_string().contains(&path.display().to_string()),
                    "{}", e
                );
            }
        }
    }

    #[test]
    fn mutated_corpora_are_read_or_refused_with_file_and_line(
        text in corpus_case(),
        changes in mutations(),
        damage_gzip in any::<bool>(),
        max_tokens in prop::option::of(1u64..6),
    ) {
        let dir = TempDir::new("w2v-corpus");
        let bytes = apply_all(text.as_bytes(), &changes);
        let options = CorpusOptions { min_count: 1, max_vocab: Some(3), max_tokens };
        let path = Path::new("corpora/c.txt");
        let result = assert_bounded_allocation(bytes.len(), || {
            Corpus::from_reader(&bytes[..], path, &options)
        });
        if let Err(e) = &result {
            check_corpus_error(e, path, &bytes);
        }
        let plain = dir.join("c.txt");
        std::fs::write(&plain, &bytes).unwrap();
        match Corpus::read(&plain, &options) {
            Ok(c) => prop_assert_eq!(Some(c.ids()), result.as_ref().ok().map(Corpus::ids)),
            Err(e) => check_corpus_error(&e, &plain, &bytes),
        }
        let zipped = dir.join("c.txt.gz");
        let gz = gzip(&bytes);
        std::fs::write(&zipped, if damage_gzip { apply_all(&gz, &changes) } else { gz }).unwrap();
        match Corpus::read(&zipped, &options) {
            Err(e) if damage_gzip => {
                let message = e.to_string();
                let name = zipped.display().to_string();
                prop_assert!(message.contains(&name), "{}", message);
                let whole_file = matches!(
                    e,
                    CorpusError::Empty { .. } | CorpusError::EmptyVocabulary { .. }
                );
                prop_assert!(whole_file || named_line(&message, &name).is_some(), "{}", message);
            }
            Err(e) => check_corpus_error(&e, &zipped, &bytes),
            Ok(_) => {}
        }
    }

    #[test]
    fn mutated_evaluation_data_is_read_or_refused_with_file_and_line(
        similarity in similarity_case(),
        analogies in analogy_case(),
        changes in mutations(),
    ) {
        let dir = TempDir::new("w2v-eval");
        let sim = apply_all(similarity.as_bytes(), &changes);
        let ana = apply_all(analogies.as_bytes(), &changes);
        let (sim_path, ana_path) = (dir.join("wordsim353.tsv"), dir.join("questions-words.txt"));
        std::fs::write(&sim_path, &sim).unwrap();
        std::fs::write(&ana_path, &ana).unwrap();
        match assert_bounded_allocation(sim.len(), || read_similarity(&sim_path)) {
            Ok(pairs) => prop_assert!(pairs.iter().all(|p| p.human.is_finite())),
            Err(e) => assert_names_file_and_line(&e.to_string(), &sim_path, &sim),
        }
        if let Err(e) = assert_bounded_allocation(ana.len(), || read_analogies(&ana_path)) {
            assert_names_file_and_line(&e.to_string(), &ana_path, &ana);
        }
    }
}

#[test]
fn the_allocation_probe_sees_allocations() {
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert!(largest >= v.len(), "{largest}");
}

fn model_err(text: &[u8], format: Format) -> String {
    check_model(text, format).unwrap_err().to_string()
}

#[test]
fn a_header_announcing_10e12_words_allocates_nothing_up_front() {
    // Found by absurd_model_headers...: V words (and V d floats) were reserved up front (an
    // abort; V d could also overflow, a panic).
    for format in [Format::Text, Format::Binary] {
        let err = model_err(b"1000000000000 3\n", format);
        assert!(err.contains("word 0 of 1000000000000"), "{err}");
    }
    let err = model_err(
        b"3 4611686018427387904\nab \x00\x00\x80\x3f",
        Format::Binary,
    );
    assert!(err.contains("at byte"), "{err}");
    let err = model_err(b"4611686018427387904 3\na 1 2 3\n", Format::Text);
    assert!(err.starts_with("models/m.test:3:"), "{err}");
}

#[test]
fn text_model_errors_name_the_line() {
    // Found by mutated_models...: errors named the word's index but not the line.
    let err = model_err(b"2 2\na 1 2\n\nb 3\n", Format::Text);
    assert!(err.starts_with("models/m.test:4:"), "{err}");
    assert!(err.contains("has 1 numbers, expected 2"), "{err}");
    let err = model_err(b"2 1\na 1\nb \xff\n", Format::Text);
    assert!(err.starts_with("models/m.test:3:"), "{err}");
    let err = model_err(b"x 1\n", Format::Text);
    assert!(err.starts_with("models/m.test:1:"), "{err}");
}

#[test]
fn non_finite_components_are_refused() {
    // Found by mutated_models...: "nan", "inf" and "1e39" (an f32 infinity) were read as values.
    for bad in ["nan", "inf", "-inf", "1e39"] {
        let text = format!("1 2\na 1 {bad}\n");
        let err = model_err(text.as_bytes(), Format::Text);
        assert!(err.starts_with("models/m.test:2:"), "{err}");
    }
    let mut binary = b"1 2\nab ".to_vec();
    binary.extend_from_slice(&1f32.to_le_bytes());
    binary.extend_from_slice(&f32::NAN.to_le_bytes());
    let err = model_err(&binary, Format::Binary);
    assert!(
        err.contains("at byte 4") && err.contains("not finite"),
        "{err}"
    );
}

#[test]
fn a_corpus_word_that_is_not_utf8_names_its_line() {
    // Found by mutated_corpora...: the error gave the byte offset only.
    let err = Corpus::from_reader(
        &b"ok fine\nand \xff bad\n"[..],
        Path::new("c.txt"),
        &CorpusOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CorpusError::NotUtf8 {
                line: 2,
                offset: 12,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("c.txt:2:"), "{err}");
}

#[test]
fn a_damaged_gzip_corpus_names_the_line() {
    // Found by mutated_corpora...: a damaged stream gave an I/O error without a line.
    let dir = TempDir::new("w2v-gz");
    let path = dir.join("c.txt.gz");
    let mut gz = gzip(b"the cat\nsat on the mat\n");
    gz.truncate(gz.len() - 10);
    std::fs::write(&path, &gz).unwrap();
    let err = Corpus::read(&path, &CorpusOptions::default()).unwrap_err();
    assert!(matches!(err, CorpusError::Read { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        named_line(&message, &path.display().to_string()).is_some(),
        "{message}"
    );
}

#[test]
fn evaluation_data_that_is_not_utf8_or_not_finite_names_the_line() {
    // Found by mutated_evaluation_data...: non-UTF-8 bytes gave an I/O error without a line, and
    // a score of "nan" was read.
    let dir = TempDir::new("w2v-eval-regression");
    let path = dir.join("s.tsv");
    std::fs::write(&path, b"# header\na\tb\t1.5\nc\t\xffd\t2\n").unwrap();
    let err = read_similarity(&path).unwrap_err().to_string();
    assert!(err.contains(&format!("{}:3:", path.display())), "{err}");
    std::fs::write(&path, b"a\tb\tnan\n").unwrap();
    let err = read_similarity(&path).unwrap_err().to_string();
    assert!(err.contains(&format!("{}:1:", path.display())), "{err}");
    let path = dir.join("q.txt");
    std::fs::write(&path, b": capital\na b c d\n\xc3\n").unwrap();
    let err = read_analogies(&path).unwrap_err().to_string();
    assert!(err.contains(&format!("{}:3:", path.display())), "{err}");
}

#[test]
fn model_writers_that_fail_leave_no_file() {
    // The writers check every word before they create the file; an I/O error part-way through
    // can still leave a partial file (they do not write atomically).
    let dir = TempDir::new("w2v-writers");
    let bad = Model::new(vec!["a b".into()], 1, vec![0.5]).unwrap();
    let (text, binary) = (dir.join("bad.txt"), dir.join("bad.bin"));
    assert!(matches!(
        io::write_text(&bad, &text),
        Err(ModelIoError::BadWord { .. })
    ));
    assert!(matches!(
        io::write_binary(&bad, &binary),
        Err(ModelIoError::BadWord { .. })
    ));
    assert!(!text.exists() && !binary.exists());
    let good = Model::new(vec!["a".into()], 1, vec![0.5]).unwrap();
    let missing = dir.join("no/such/dir/m.txt");
    let err = io::write_text(&good, &missing).unwrap_err().to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!missing.exists());
}
