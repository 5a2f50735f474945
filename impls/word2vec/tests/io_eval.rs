//! The word2vec file formats and the evaluation metrics, on hand-made models with known answers.

use std::path::Path;
use word2vec::eval::{
    parse_analogies, parse_similarity, ranks, spearman, Evaluator, SimilarityPair,
};
use word2vec::io::{self, Format, ModelIoError};
use word2vec::Model;

fn tiny_model() -> Model {
    Model::new(
        vec!["ab".into(), "é".into()],
        2,
        vec![1.0, -2.5, 0.5, f32::MIN_POSITIVE],
    )
    .unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("w2v-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn binary_format_is_byte_for_byte_word2vec_c() {
    let bytes = io::binary_bytes(&tiny_model()).unwrap();
    let mut want: Vec<u8> = b"2 2\n".to_vec();
    want.extend_from_slice(b"ab ");
    want.extend_from_slice(&[0x00, 0x00, 0x80, 0x3f]); // 1.0
    want.extend_from_slice(&[0x00, 0x00, 0x20, 0xc0]); // -2.5
    want.push(b'\n');
    want.extend_from_slice(&[0xc3, 0xa9, b' ']); // "é" in UTF-8
    want.extend_from_slice(&[0x00, 0x00, 0x00, 0x3f]); // 0.5
    want.extend_from_slice(&[0x00, 0x00, 0x80, 0x00]); // f32::MIN_POSITIVE
    want.push(b'\n');
    assert_eq!(bytes, want);
}

#[test]
fn both_formats_round_trip_exactly_and_are_detected() {
    let dir = temp_dir("io");
    let model = Model::new(
        vec!["the".into(), "of".into(), "Paris".into()],
        3,
        vec![0.1, -0.2, 1e-7, 3.0, 0.0, -0.0, 1.0 / 3.0, 2.5e10, -7.25],
    )
    .unwrap();
    let (text, bin) = (dir.join("m.txt"), dir.join("m.bin"));
    io::write_text(&model, &text).unwrap();
    io::write_binary(&model, &bin).unwrap();
    let first_line = std::fs::read_to_string(&text).unwrap();
    assert!(
        first_line.starts_with("3 3\nthe 0.1 -0.2 0.0000001\n"),
        "{first_line}"
    );
    for (path, format) in [(&text, Format::Text), (&bin, Format::Binary)] {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(io::detect(&bytes, path).unwrap(), format);
        let back = io::read_model(path).unwrap();
        assert_eq!(back, model, "{format:?}");
        assert_eq!(io::read_format(path, format).unwrap(), model);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_model_files_give_errors_that_say_where() {
    let p = Path::new("bad.txt");
    let header = io::parse(b"two 3\n", p, Format::Text).unwrap_err();
    assert!(matches!(header, ModelIoError::BadHeader { .. }), "{header}");
    let short = io::parse(b"2 2\na 1 2\nb 3\n", p, Format::Text).unwrap_err();
    assert!(
        short.to_string().contains("has 1 numbers, expected 2"),
        "{short}"
    );
    let missing = io::parse(b"3 1\na 1\n", p, Format::Text).unwrap_err();
    assert!(
        missing.to_string().contains("ends after 1 of 3"),
        "{missing}"
    );
    let truncated = io::parse(b"1 2\nab \x00\x00\x80", p, Format::Binary).unwrap_err();
    assert!(
        truncated.to_string().contains("ends inside the vector"),
        "{truncated}"
    );
    let bad_word = Model::new(vec!["a b".into()], 1, vec![0.0]).unwrap();
    assert!(matches!(
        io::binary_bytes(&bad_word),
        Err(ModelIoError::BadWord { index: 0, .. })
    ));
}

#[test]
fn spearman_averages_ties_as_computed_by_hand() {
    assert_eq!(ranks(&[10.0, 20.0, 20.0, 30.0]), [1.0, 2.5, 2.5, 4.0]);
    assert_eq!(ranks(&[5.0, 5.0, 5.0]), [2.0, 2.0, 2.0]);
    // ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: r = 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
    let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]);
    assert!((r - 3.0 / 10f64.sqrt()).abs() < 1e-12, "{r}");
    assert!((spearman(&[1.0, 2.0, 3.0], &[30.0, 20.0, 10.0]) + 1.0).abs() < 1e-12);
    assert!(spearman(&[1.0], &[2.0]).is_nan());
}

/// Words on four axes: royalty, femininity, personhood, fruitiness. (Fruit is orthogonal to
/// people rather than opposite: 3CosMul divides by `cos'(x, a)`, which an antipodal candidate
/// drives to zero.)
fn analogy_model() -> Model {
    let rows: [(&str, [f32; 4]); 7] = [
        ("man", [0.0, 0.0, 1.0, 0.0]),
        ("woman", [0.0, 1.0, 1.0, 0.0]),
        ("king", [1.0, 0.0, 1.0, 0.0]),
        ("queen", [1.0, 1.0, 1.0, 0.0]),
        ("apple", [0.1, 0.0, 0.0, 1.0]),
        ("Queen", [0.2, 0.2, 0.0, 1.0]), // a rarer case variant: lookups must not pick it
        ("pear", [0.0, 0.1, 0.0, 1.0]),
    ];
    Model::new(
        rows.iter().map(|(w, _)| w.to_string()).collect(),
        4,
        rows.iter().flat_map(|(_, v)| *v).collect(),
    )
    .unwrap()
}

#[test]
fn similarity_uses_cosine_case_insensitively_and_counts_coverage() {
    let model = analogy_model();
    let e = Evaluator::new(&model);
    assert_eq!(e.lookup("QUEEN"), Some(3));
    let pairs = parse_similarity(
        "# comment\n# Word 1\tWord 2\tHuman\nking\tqueen\t9\nKing\tapple\t1\napple\tpear\t8\nking\tunicorn\t5\n",
        Path::new("sim.tsv"),
    )
    .unwrap();
    assert_eq!(pairs.len(), 4);
    assert_eq!(
        pairs[0],
        SimilarityPair {
            first: "king".into(),
            second: "queen".into(),
            human: 9.0
        }
    );
    let r = e.similarity(&pairs);
    assert_eq!((r.pairs_covered, r.pairs_total), (3, 4));
    // cosines: king-queen 0.816, king-apple 0.07, apple-pear 0.99: ranks 2, 1, 3 vs 3, 1, 2.
    assert!((r.spearman - 0.5).abs() < 1e-12, "{}", r.spearman);
    let err = parse_similarity("a\tb\n", Path::new("sim.tsv")).unwrap_err();
    assert!(err.to_string().starts_with("sim.tsv:1:"), "{err}");
}

#[test]
fn analogies_find_the_planted_answers_and_split_semantic_from_syntactic() {
    let model = analogy_model();
    let e = Evaluator::new(&model);
    let text = ": s1\nMan Woman King Queen\n: s2\nman king woman queen\n: s3\n: s4\n: s5\nking queen man unicorn\n: syntactic\nwoman man queen king\nking man queen apple\n";
    let sections = parse_analogies(text, Path::new("q.txt")).unwrap();
    assert_eq!(sections.len(), 6);
    assert!(sections[4].semantic && !sections[5].semantic);
    let r = e.analogy(&sections, 30_000);
    assert_eq!((r.covered, r.total), (4, 5));
    assert_eq!((r.semantic_covered, r.semantic_total), (2, 3));
    assert_eq!((r.syntactic_covered, r.syntactic_total), (2, 2));
    for acc in [r.add, r.mul] {
        assert_eq!(acc.semantic_correct, 2);
        assert_eq!(acc.syntactic_correct, 1, "king:man::queen:woman, not apple");
        assert!((acc.overall - 0.75).abs() < 1e-12);
        assert!((acc.semantic - 1.0).abs() < 1e-12);
        assert!((acc.syntactic - 0.5).abs() < 1e-12);
    }
    // Only the first three words are candidates: no question has all four among them.
    let r = e.analogy(&sections, 3);
    assert_eq!(r.covered, 0);
    assert!(r.add.overall.is_nan());
    let err = parse_analogies("a b c d\n", Path::new("q.txt")).unwrap_err();
    assert!(err.to_string().contains("before the first"), "{err}");
}

#[test]
fn neighbors_are_sorted_by_cosine_and_exclude_the_word() {
    let model = analogy_model();
    let e = Evaluator::new(&model);
    let n = e.neighbors("apple", 2);
    assert_eq!(n.len(), 2);
    assert_eq!(n[0].0, "pear");
    assert!(n[0].1 > n[1].1);
    assert!(n.iter().all(|(w, _)| w != "apple"));
    assert_eq!(e.neighbors("apple", 100).len(), 6);
    assert!(e.neighbors("unicorn", 3).is_empty());
}
