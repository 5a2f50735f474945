//! The corpus readers against malformed input: UCI docword and vocabulary files and plain-text
//! corpora (plain and `.gz`), made valid by the test and then mutated (truncated, bytes flipped,
//! junk or non-UTF-8 inserted, numbers replaced by NaN, infinities, negatives, zero or absurd
//! values, absurd headers, damaged gzip streams). The readers must never panic, never allocate
//! what a header announces before the file shows it, and either read the file or refuse it with
//! an error naming the file and the line.
//!
//! The wire decoder's properties are unit tests (its functions are crate-private):
//! `src/wire/malformed_input.rs`.

#[path = "../../common/tests/support/malformed.rs"]
mod malformed;

use lda::corpus::{parse_uci_docword, parse_uci_vocab, Corpus, CorpusError, TextOptions};
use malformed::{
    allocation_bound, apply_all, assert_names_file_and_line, config, largest_allocation, mutations,
    named_line, replace_number, TempDir, ABSURD_COUNTS,
};
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;

/// A small valid docword file and the documents it describes.
#[derive(Clone, Debug)]
struct Docword {
    text: String,
    docs: Vec<Vec<u32>>,
    words: usize,
}

fn docword() -> impl Strategy<Value = Docword> {
    (1usize..=4, 1usize..=5).prop_flat_map(|(d, w)| {
        let entry = (1..=d, 1..=w, 1u32..=3, prop::bool::weighted(0.1));
        prop::collection::vec(entry, 0..8).prop_map(move |entries| {
            let mut docs = vec![Vec::new(); d];
            let mut text = format!("{d}\n{w}\n{}\n", entries.len());
            for &(doc, word, count, blank) in &entries {
                docs[doc - 1].extend(std::iter::repeat_n(word as u32 - 1, count as usize));
                text.push_str(&format!("{doc} {word} {count}\n"));
                if blank {
                    text.push('\n');
                }
            }
            Docword {
                text,
                docs,
                words: w,
            }
        })
    })
}

fn vocab(words: usize) -> impl Strategy<Value = String> {
    prop::collection::vec("[a-zé]{1,6}", words..=words + 1)
        .prop_map(|names| names.iter().map(|n| format!("{n}\n")).collect())
}

fn text_corpus() -> impl Strategy<Value = String> {
    let word = prop::sample::select(vec![
        "oil", "price", "bank", "The", "of", "and", "RATES", "école", "cut", "1.5", "-3", "nan",
    ]);
    let line = prop::collection::vec(word, 0..6).prop_map(|w| w.join(" "));
    prop::collection::vec(line, 0..6)
        .prop_map(|lines| lines.iter().map(|l| format!("{l}\n")).collect::<String>())
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("compress in memory");
    enc.finish().expect("compress in memory")
}

fn tokens(docs: &[Vec<u32>]) -> usize {
    docs.iter().map(Vec::len).sum()
}

/// Parses docword bytes: no panic; allocation bounded by the input plus the result (the counts
/// expand into tokens, and D documents are allocated); errors name the file and the line.
fn check_docword(bytes: &[u8]) -> Result<(Vec<Vec<u32>>, usize), CorpusError> {
    let path = Path::new("corpus/docword.test.txt");
    let (result, largest) = largest_allocation(|| parse_uci_docword(bytes, path));
    let result_bytes = result
        .as_ref()
        .map_or(0, |(docs, _)| 24 * docs.len() + 8 * tokens(docs));
    assert!(
        largest <= allocation_bound(bytes.len()) + result_bytes,
        "{largest} bytes allocated at once for {} bytes of input",
        bytes.len()
    );
    if let Err(e) = &result {
        assert_names_file_and_line(&e.to_string(), path, bytes);
    }
    result
}

proptest! {
    #![proptest_config(config(256, 0x1da_0001))]

    #[test]
    fn valid_docword_files_read_as_the_documents_they_describe(case in docword()) {
        let (docs, words) = check_docword(case.text.as_bytes()).expect("a valid file");
        prop_assert_eq!(docs, case.docs);
        prop_assert_eq!(words, case.words);
    }

    #[test]
    fn mutated_docword_files_are_read_or_refused_with_file_and_line(
        case in docword(),
        changes in mutations(),
    ) {
        let bytes = apply_all(case.text.as_bytes(), &changes);
        let _ = check_docword(&bytes);
    }

    #[test]
    fn absurd_docword_headers_are_refused_without_allocating_them(
        case in docword(),
        field in 0usize..3,
        absurd in prop::sample::select(ABSURD_COUNTS),
    ) {
        let bytes = replace_number(case.text.as_bytes(), field, absurd);
        prop_assert!(check_docword(&bytes).is_err());
    }

    #[test]
    fn mutated_vocabularies_are_read_or_refused_with_file_and_line(
        (words, text) in (1usize..=5).prop_flat_map(|w| (Just(w), vocab(w))),
        changes in mutations(),
        absurd_words in prop::option::weighted(0.2, prop::sample::select(vec![
            1usize << 40, u32::MAX as usize, usize::MAX,
        ])),
    ) {
        let path = Path::new("corpus/vocab.test.txt");
        let bytes = apply_all(text.as_bytes(), &changes);
        let words = absurd_words.unwrap_or(words);
        let (result, largest) = largest_allocation(|| parse_uci_vocab(&bytes[..], path, words));
        prop_assert!(largest <= allocation_bound(bytes.len()), "{} bytes", largest);
        match result {
            Ok(names) => prop_assert_eq!(names.len(), words),
            Err(e) => assert_names_file_and_line(&e.to_string(), path, &bytes),
        }
    }

    #[test]
    fn uci_files_on_disk_plain_and_gzip_are_read_or_refused_with_file_and_line(
        case in docword(),
        vocab_text in (1usize..=6).prop_flat_map(vocab),
        changes in mutations(),
        damage in 0usize..4,
    ) {
        let dir = TempDir::new("lda-uci");
        let mut docword_bytes = case.text.into_bytes();
        let mut vocab_bytes = vocab_text.into_bytes();
        // Mutate one of the two files, or the compressed docword stream itself.
        match damage {
            0 => docword_bytes = apply_all(&docword_bytes, &changes),
            1 => vocab_bytes = apply_all(&vocab_bytes, &changes),
            _ => {}
        }
        let gz = gzip(&docword_bytes);
        let gz = if damage == 3 { apply_all(&gz, &changes) } else { gz };
        let plain = dir.join("docword.t.txt");
        let zipped = dir.join("docword.t.txt.gz");
        let names = dir.join("vocab.t.txt");
        std::fs::write(&plain, &docword_bytes).unwrap();
        std::fs::write(&zipped, &gz).unwrap();
        std::fs::write(&names, &vocab_bytes).unwrap();
        for docword in [&plain, &zipped] {
            let Err(e) = Corpus::read_uci(docword, Some(&names)) else {
                continue;
            };
            let message = e.to_string();
            let (path, bytes) = if message.contains(&names.display().to_string()) {
                (&names, &vocab_bytes)
            } else {
                (docword, &docword_bytes)
            };
            if damage == 3 && docword == &zipped {
                // A damaged stream decompresses to anything: the line cannot be bounded.
                prop_assert!(message.contains(&path.display().to_string()), "{}", message);
                prop_assert!(named_line(&message, &path.display().to_string()).is_some(), "{}", message);
            } else {
                assert_names_file_and_line(&message, path, bytes);
            }
        }
    }

    #[test]
    fn text_corpora_plain_and_gzip_are_read_or_refused_with_file_and_line(
        text in text_corpus(),
        changes in mutations(),
        damage_gzip in any::<bool>(),
        max_docs in prop::option::of(0usize..4),
    ) {
        let dir = TempDir::new("lda-text");
        let bytes = apply_all(text.as_bytes(), &changes);
        let plain = dir.join("corpus.txt");
        let zipped = dir.join("corpus.txt.gz");
        std::fs::write(&plain, &bytes).unwrap();
        let gz = gzip(&bytes);
        std::fs::write(&zipped, if damage_gzip { apply_all(&gz, &changes) } else { gz }).unwrap();
        let options = TextOptions { min_count: 1, max_docs };
        let (from_plain, largest) = largest_allocation(|| Corpus::read_text(&plain, &options));
        prop_assert!(largest <= allocation_bound(bytes.len()), "{} bytes", largest);
        if let Err(e) = &from_plain {
            assert_names_file_and_line(&e.to_string(), &plain, &bytes);
        }
        match Corpus::read_text(&zipped, &options) {
            Ok(c) if !damage_gzip => {
                prop_assert_eq!(Some(&c), from_plain.as_ref().ok(), "plain and gzip differ");
            }
            Ok(_) => {}
            Err(e) if damage_gzip => {
                let message = e.to_string();
                let path = zipped.display().to_string();
                prop_assert!(message.contains(&path), "{}", message);
                prop_assert!(named_line(&message, &path).is_some(), "{}", message);
            }
            Err(e) => {
                prop_assert!(from_plain.is_err(), "only the gzip file failed: {}", e);
                assert_names_file_and_line(&e.to_string(), &zipped, &bytes);
            }
        }
    }
}

#[test]
fn the_allocation_probe_sees_allocations() {
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert!(largest >= v.len(), "{largest}");
}

fn docword_err(text: &[u8]) -> String {
    check_docword(text).unwrap_err().to_string()
}

#[test]
fn a_header_announcing_10e12_documents_allocates_nothing_up_front() {
    // Found by absurd_docword_headers...: D empty documents were allocated at once (an abort).
    let err = docword_err(b"1000000000000\n3\n1\n1 1 1\n");
    assert!(err.starts_with("corpus/docword.test.txt:1:"), "{err}");
    let err = docword_err(b"\n4294967296\n3\n1\n1 1 1\n");
    assert!(err.starts_with("corpus/docword.test.txt:2:"), "{err}");
}

#[test]
fn a_vocabulary_for_a_huge_w_is_not_reserved_up_front() {
    // Found by mutated_vocabularies...: W names were reserved before reading (an abort for W
    // near u32::MAX).
    let path = Path::new("v.txt");
    let (result, largest) =
        largest_allocation(|| parse_uci_vocab(&b"alpha\nbeta\n"[..], path, u32::MAX as usize));
    assert!(largest <= allocation_bound(12), "{largest} bytes");
    let err = result.unwrap_err().to_string();
    assert!(err.starts_with("v.txt:3:"), "{err}");
}

#[test]
fn counts_near_u64_max_do_not_overflow_the_token_total() {
    // Found by mutated_docword...: the token total overflowed (a panic in debug builds).
    let err = docword_err(b"1\n1\n2\n1 1 1\n1 1 18446744073709551615\n");
    assert!(err.starts_with("corpus/docword.test.txt:5:"), "{err}");
}

#[test]
fn too_many_tokens_names_the_file_and_line() {
    // Found by mutated_docword...: the token limit error named neither file nor line.
    let err = docword_err(b"1\n1\n1\n1 1 4294967296\n");
    assert!(err.starts_with("corpus/docword.test.txt:4:"), "{err}");
}

#[test]
fn a_docword_line_that_is_not_utf8_is_named() {
    // Found by mutated_docword...: the I/O error of a non-UTF-8 line had no line number.
    let err = docword_err(b"1\n1\n2\n1 1 1\n1 \xff 1\n");
    assert!(err.starts_with("corpus/docword.test.txt:5:"), "{err}");
}

#[test]
fn a_missing_header_line_is_named_after_the_last_line() {
    // Found by mutated_docword...: a header cut short was reported at line 0.
    let err = docword_err(b"2\n5\n");
    assert!(err.starts_with("corpus/docword.test.txt:3:"), "{err}");
    let err = docword_err(b"");
    assert!(err.starts_with("corpus/docword.test.txt:1:"), "{err}");
}

#[test]
fn entry_count_and_short_vocabulary_errors_name_a_line() {
    // Found by mutated_docword... and mutated_vocabularies...: these named no line.
    let err = docword_err(b"1\n3\n3\n1 1 1\n1 2 1\n");
    assert!(err.starts_with("corpus/docword.test.txt:5:"), "{err}");
    assert!(err.contains("NNZ = 3"), "{err}");
    let err = parse_uci_vocab(&b"a\nb\n"[..], Path::new("v.txt"), 3).unwrap_err();
    assert!(err.to_string().starts_with("v.txt:3:"), "{err}");
}

#[test]
fn text_corpora_name_the_line_that_cannot_be_read() {
    // Found by text_corpora...: non-UTF-8 lines and damaged gzip streams named no line.
    let dir = TempDir::new("lda-text-regression");
    let path = dir.join("c.txt");
    std::fs::write(&path, b"oil price\nbank \xfe rates\n").unwrap();
    let err = Corpus::read_text(&path, &TextOptions::default()).unwrap_err();
    assert!(
        matches!(err, CorpusError::ReadLine { line: 2, .. }),
        "{err}"
    );
    let gz = dir.join("c.txt.gz");
    let mut bytes = gzip(b"oil price\nbank rates\n");
    bytes.truncate(bytes.len() - 12);
    std::fs::write(&gz, &bytes).unwrap();
    let err = Corpus::read_text(&gz, &TextOptions::default()).unwrap_err();
    assert!(matches!(err, CorpusError::ReadLine { .. }), "{err}");
    assert!(err.to_string().contains(&gz.display().to_string()), "{err}");
}
