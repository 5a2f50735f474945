//! The embeddings reader, the document-collection readers and the tokenizer against malformed
//! input: word2vec/GloVe text files (plain and `.gz`) made valid by the test and then mutated
//! (truncated, bytes flipped, junk or non-UTF-8 inserted, numbers replaced by NaN, infinities,
//! negatives, zero or absurd values, absurd headers, damaged gzip streams); R8 files mutated the
//! same way; gzipped tar archives truncated, with bytes flipped or absurd sizes in a header. A
//! reader must never panic, never allocate what a header announces before the file shows it,
//! and either read the file or refuse it with an error naming the file (and the line, for the
//! line-based formats). The tokenizer takes any text.

#[path = "support/malformed.rs"]
mod malformed;

use malformed::{
    allocation_bound, apply_all, assert_bounded_allocation, assert_names_file_and_line, config,
    largest_allocation, mutations, named_line, replace_number, TempDir, ABSURD_COUNTS,
};
use parbench_common::corpora::{read_labeled_tar_gz, read_r8, LabeledDoc};
use parbench_common::embeddings::{
    read_word2vec_text_from, read_word2vec_text_with_stats, write_word2vec_text, Embeddings,
    EmbeddingsError,
};
use parbench_common::text::{content_tokens, tokenize, Vocab};
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("compress in memory");
    enc.finish().expect("compress in memory")
}

/// A small valid embeddings file (with or without its header) and the table it describes.
#[derive(Clone, Debug)]
struct Case {
    text: String,
    embeddings: Embeddings,
    header: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=4, 1usize..=4, any::<bool>(), any::<bool>()).prop_flat_map(
        |(n, dim, header, trailing_space)| {
            let words = prop::collection::btree_set("[a-zé]{1,5}", n);
            let values = prop::collection::vec((-16i32..=16).prop_map(|k| k as f64 / 8.0), n * dim);
            (words, values).prop_map(move |(words, values)| {
                let words: Vec<String> = words.into_iter().collect();
                let mut text = if header {
                    format!("{n} {dim}\n")
                } else {
                    String::new()
                };
                for (i, w) in words.iter().enumerate() {
                    text.push_str(w);
                    for x in &values[i * dim..(i + 1) * dim] {
                        text.push_str(&format!(" {x}"));
                    }
                    text.push_str(if trailing_space { " \n" } else { "\n" });
                }
                Case {
                    text,
                    embeddings: Embeddings::new(words, dim, values).expect("a valid table"),
                    header,
                }
            })
        },
    )
}

/// Reads embeddings bytes: no panic, allocation bounded by the input, errors naming the file
/// and the line.
fn check_read(bytes: &[u8]) -> Result<Embeddings, EmbeddingsError> {
    let path = Path::new("vectors/e.test.txt");
    let result = assert_bounded_allocation(bytes.len(), || read_word2vec_text_from(bytes, path));
    match result {
        Ok((e, _)) => Ok(e),
        Err(e) => {
            assert_names_file_and_line(&e.to_string(), path, bytes);
            Err(e)
        }
    }
}

proptest! {
    #![proptest_config(config(256, 0xc0_0001))]

    #[test]
    fn valid_files_read_as_the_table_they_describe(case in case()) {
        prop_assert_eq!(check_read(case.text.as_bytes()).expect("a valid file"), case.embeddings);
    }

    #[test]
    fn mutated_files_are_read_or_refused_with_file_and_line(
        case in case(),
        changes in mutations(),
    ) {
        let bytes = apply_all(case.text.as_bytes(), &changes);
        if let Ok(e) = check_read(&bytes) {
            prop_assert!(e.vecs.iter().all(|x| x.is_finite()));
            prop_assert_eq!(e.vecs.len(), e.words.len() * e.dim);
        }
    }

    #[test]
    fn absurd_headers_are_refused_without_allocating_them(
        case in case(),
        field in 0usize..2,
        absurd in prop::sample::select(ABSURD_COUNTS),
    ) {
        let bytes = replace_number(case.text.as_bytes(), field, absurd);
        let result = check_read(&bytes);
        // Without a header the numbers replaced are a vector's, and 10^12 is a fine value.
        prop_assert!(result.is_err() || !case.header);
    }

    #[test]
    fn files_plain_and_gzip_are_read_or_refused_with_file_and_line(
        case in case(),
        changes in mutations(),
        damage_gzip in any::<bool>(),
    ) {
        let dir = TempDir::new("emb-files");
        let bytes = apply_all(case.text.as_bytes(), &changes);
        let plain = dir.join("e.txt");
        let zipped = dir.join("e.txt.gz");
        std::fs::write(&plain, &bytes).unwrap();
        let gz = gzip(&bytes);
        std::fs::write(&zipped, if damage_gzip { apply_all(&gz, &changes) } else { gz }).unwrap();
        let (from_plain, largest) = largest_allocation(|| read_word2vec_text_with_stats(&plain));
        prop_assert!(largest <= allocation_bound(bytes.len()), "{} bytes", largest);
        if let Err(e) = &from_plain {
            assert_names_file_and_line(&e.to_string(), &plain, &bytes);
        }
        match read_word2vec_text_with_stats(&zipped) {
            Ok(z) if !damage_gzip => {
                prop_assert_eq!(Some(&z), from_plain.as_ref().ok());
            }
            Ok(_) => {}
            Err(e) if damage_gzip => {
                let message = e.to_string();
                let name = zipped.display().to_string();
                prop_assert!(message.contains(&name), "{}", message);
                prop_assert!(named_line(&message, &name).is_some(), "{}", message);
            }
            Err(e) => {
                prop_assert!(from_plain.is_err(), "only the gzip file failed: {}", e);
                assert_names_file_and_line(&e.to_string(), &zipped, &bytes);
            }
        }
    }

    #[test]
    fn any_text_tokenizes_into_lowercase_whitespace_free_tokens(
        text in prop_oneof![
            any::<String>(),
            (any::<Vec<u8>>(), mutations())
                .prop_map(|(b, m)| String::from_utf8_lossy(&apply_all(&b, &m)).into_owned()),
            "[a-zA-ZÉé \t\n]{0,40}",
        ],
    ) {
        let tokens: Vec<String> = tokenize(&text).map(|t| t.into_owned()).collect();
        prop_assert_eq!(tokens.len(), text.split_whitespace().count());
        for t in &tokens {
            prop_assert!(!t.is_empty() && !t.chars().any(char::is_whitespace), "{:?}", t);
        }
        let content: Vec<String> = content_tokens(&text).map(|t| t.into_owned()).collect();
        prop_assert!(content.iter().all(|t| tokens.contains(t)));
        let vocab = Vocab::build(&tokens, 1);
        prop_assert_eq!(vocab.total_count(), tokens.len() as u64);
        for (id, w) in vocab.words().iter().enumerate() {
            prop_assert_eq!(vocab.id(w), Some(id as u32));
        }
        prop_assert_eq!(vocab.encode(&tokens).count(), tokens.len());
    }
}

#[test]
fn the_allocation_probe_sees_allocations() {
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert!(largest >= v.len(), "{largest}");
}

fn read_err(bytes: &[u8]) -> String {
    check_read(bytes).unwrap_err().to_string()
}

#[test]
fn a_header_announcing_10e12_words_allocates_little_up_front() {
    // Found by absurd_headers...: a header's count reserved up to 4M words and 64M values
    // (over 700 MB) before the first vector line was read.
    let err = read_err(b"1000000000000 2\nking 1 2\n");
    assert!(err.starts_with("vectors/e.test.txt:1:"), "{err}");
    let err = read_err(b"4 1000000000000\nking 1 2\n");
    assert!(err.starts_with("vectors/e.test.txt:2:"), "{err}");
}

#[test]
fn count_mismatch_and_empty_files_name_a_line() {
    // Found by mutated_files...: these errors named the file only.
    let err = read_err(b"3 1\na 1\nb 2\n");
    assert!(err.starts_with("vectors/e.test.txt:1:"), "{err}");
    let err = read_err(b"");
    assert!(err.starts_with("vectors/e.test.txt:1:"), "{err}");
    let err = read_err(b"\n2 1\n");
    assert!(err.starts_with("vectors/e.test.txt:1:"), "{err}");
}

#[test]
fn a_damaged_gzip_stream_names_the_line() {
    // Found by files_plain_and_gzip...: the I/O error of a damaged stream named no line.
    let dir = TempDir::new("emb-gz");
    let path = dir.join("e.txt.gz");
    let mut gz = gzip(b"2 2\nking 1 2\nqueen 3 4\n");
    gz.truncate(gz.len() - 10);
    std::fs::write(&path, &gz).unwrap();
    let err = read_word2vec_text_with_stats(&path).unwrap_err();
    let message = err.to_string();
    assert!(
        named_line(&message, &path.display().to_string()).is_some(),
        "{message}"
    );
}

#[test]
fn a_failed_write_leaves_no_file_behind() {
    // The writer is atomic: it writes a temporary file and renames it. Here the rename fails
    // (the target is a non-empty directory), and neither a partial file nor the temporary one
    // may remain.
    let dir = TempDir::new("emb-write");
    let target = dir.join("out.txt");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"x").unwrap();
    let e = Embeddings::new(vec!["a".into(), "b".into()], 1, vec![1.0, 2.0]).unwrap();
    let err = write_word2vec_text(&target, &e).unwrap_err();
    assert!(matches!(err, EmbeddingsError::Write { .. }), "{err}");
    assert!(
        err.to_string().contains(&target.display().to_string()),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(left, ["out.txt"], "{left:?}");
    let missing = dir.join("no/such/dir/out.txt");
    assert!(write_word2vec_text(&missing, &e).is_err());
    assert!(!missing.exists());
}

/// R8 lines, labeled (`label<TAB>text`, the label possibly empty) or plain, each ending in a
/// newline, and the documents they hold.
fn r8_case() -> impl Strategy<Value = (String, Vec<(String, String)>)> {
    prop::collection::vec(("[a-z.]{0,6}", "[a-zé ]{0,24}", any::<bool>()), 0..6).prop_map(|lines| {
        let mut text = String::new();
        let mut docs = Vec::new();
        for (label, body, labeled) in lines {
            if labeled {
                text.push_str(&format!("{label}\t{body}\n"));
                docs.push((label, body));
            } else {
                text.push_str(&format!("{body}\n"));
                docs.push((String::new(), body));
            }
        }
        (text, docs)
    })
}

/// Reads R8 bytes from a file: no panic, allocation bounded by the input, errors naming the
/// file and the line.
fn check_r8(dir: &TempDir, bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let path = dir.join("r8-test.txt");
    std::fs::write(&path, bytes).unwrap();
    match assert_bounded_allocation(bytes.len(), || read_r8(&path)) {
        Ok(docs) => Some(docs),
        Err(e) => {
            assert_names_file_and_line(&e.to_string(), &path, bytes);
            None
        }
    }
}

/// Tar block size.
const BLOCK: usize = 512;

/// Sets the checksum field of a tar header to the sum of its bytes.
fn fix_checksum(h: &mut [u8]) {
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h[..BLOCK].iter().map(|&b| b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
}

/// A ustar header for an entry of `size` bytes.
fn tar_header(name: &str, size: usize, typeflag: u8) -> Vec<u8> {
    let mut h = vec![0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    fix_checksum(&mut h);
    h
}

/// A tar archive of labeled documents (some behind a GNU long name), the offsets of its
/// headers, and the documents it holds.
#[derive(Clone, Debug)]
struct TarCase {
    bytes: Vec<u8>,
    headers: Vec<usize>,
    docs: Vec<LabeledDoc>,
}

fn tar_case() -> impl Strategy<Value = TarCase> {
    let entry = (
        "[a-z]{1,6}",
        "[a-z.]{1,8}",
        0u32..1000,
        prop::collection::vec(any::<u8>(), 0..700),
        any::<bool>(),
    );
    prop::collection::vec(entry, 1..5).prop_map(|entries| {
        let mut bytes = Vec::new();
        let mut headers = Vec::new();
        let mut docs = Vec::new();
        for (split, label, id, data, long) in entries {
            // A long name is `split/label/xxx.../id`: the folders above the file, which give
            // the document's split and label, are then `label` and `xxx...`.
            let (path, split, label) = if long {
                let folder = "x".repeat(100);
                (format!("{split}/{label}/{folder}/{id}"), label, folder)
            } else {
                (format!("{split}/{label}/{id}"), split, label)
            };
            let mut add = |name: &str, flag: u8, data: &[u8]| {
                headers.push(bytes.len());
                bytes.extend_from_slice(&tar_header(name, data.len(), flag));
                bytes.extend_from_slice(data);
                bytes.resize(bytes.len().div_ceil(BLOCK) * BLOCK, 0);
            };
            if long {
                add("././@LongLink", b'L', path.as_bytes());
                add("long", b'0', &data);
            } else {
                add(&path, b'0', &data);
            }
            docs.push(LabeledDoc {
                split,
                label,
                path,
                text: String::from_utf8_lossy(&data).into_owned(),
            });
        }
        bytes.resize(bytes.len() + 2 * BLOCK, 0);
        TarCase {
            bytes,
            headers,
            docs,
        }
    })
}

/// Reads a gzipped tar archive from a file: no panic, allocation bounded by the uncompressed
/// archive, errors naming the file.
fn check_tar_gz(dir: &TempDir, gz: &[u8], tar_len: usize) -> Option<Vec<LabeledDoc>> {
    let path = dir.join("docs.tar.gz");
    std::fs::write(&path, gz).unwrap();
    let bound = tar_len.max(gz.len());
    match assert_bounded_allocation(bound, || read_labeled_tar_gz(&path, None)) {
        Ok(docs) => Some(docs),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains(&path.display().to_string()),
                "the error does not name the archive: {message}"
            );
            None
        }
    }
}

/// Octal sizes far beyond any test archive (up to 12 digits without a terminator, the most
/// the field holds: about 6.9e10 bytes).
const ABSURD_TAR_SIZES: &[&str] = &["77777777777", "40000000000", "1000000000", "777777777777"];

proptest! {
    #![proptest_config(config(256, 0xc0_0002))]

    #[test]
    fn valid_r8_files_read_as_their_lines((text, docs) in r8_case()) {
        let dir = TempDir::new("r8-valid");
        prop_assert_eq!(check_r8(&dir, text.as_bytes()).expect("a valid file"), docs);
    }

    #[test]
    fn mutated_r8_files_are_read_or_refused_with_file_and_line(
        (text, _) in r8_case(),
        changes in mutations(),
    ) {
        let dir = TempDir::new("r8-mutated");
        let bytes = apply_all(text.as_bytes(), &changes);
        if let Some(docs) = check_r8(&dir, &bytes) {
            let lines = bytes.split(|&b| b == b'\n').count() - usize::from(bytes.ends_with(b"\n") || bytes.is_empty());
            prop_assert_eq!(docs.len(), lines);
        }
    }

    #[test]
    fn valid_tar_archives_read_as_their_documents(case in tar_case()) {
        let dir = TempDir::new("tar-valid");
        let docs = check_tar_gz(&dir, &gzip(&case.bytes), case.bytes.len());
        prop_assert_eq!(docs.expect("a valid archive"), case.docs);
    }

    #[test]
    fn mutated_tar_archives_are_read_or_refused_naming_the_file(
        case in tar_case(),
        changes in mutations(),
        damage_gzip in any::<bool>(),
    ) {
        let dir = TempDir::new("tar-mutated");
        let bytes = apply_all(&case.bytes, &changes);
        let gz = gzip(&bytes);
        let gz = if damage_gzip { apply_all(&gz, &changes) } else { gz };
        if let Some(docs) = check_tar_gz(&dir, &gz, bytes.len()) {
            prop_assert!(docs.len() <= bytes.len() / BLOCK);
        }
    }

    #[test]
    fn absurd_sizes_in_a_tar_header_are_refused_without_allocating_them(
        case in tar_case(),
        which in any::<prop::sample::Index>(),
        absurd in prop::sample::select(ABSURD_TAR_SIZES),
        fix in any::<bool>(),
    ) {
        let dir = TempDir::new("tar-absurd");
        let mut bytes = case.bytes.clone();
        let at = case.headers[which.index(case.headers.len())];
        let field = &mut bytes[at + 124..at + 136];
        field.fill(0);
        field[..absurd.len()].copy_from_slice(absurd.as_bytes());
        if fix {
            fix_checksum(&mut bytes[at..at + BLOCK]);
        }
        prop_assert!(check_tar_gz(&dir, &gzip(&bytes), bytes.len()).is_none());
    }
}

#[test]
fn a_cut_short_tar_archive_names_the_file_and_the_entry() {
    let dir = TempDir::new("tar-cut");
    let mut bytes = tar_header("train/a/1", 600, b'0');
    bytes.extend_from_slice(&[b'x'; 100]);
    let path = dir.join("cut.tar.gz");
    std::fs::write(&path, gzip(&bytes)).unwrap();
    let message = read_labeled_tar_gz(&path, None).unwrap_err().to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(
        message.contains("at byte 0 is cut short: expected 600 bytes, found 100"),
        "{message}"
    );
}
