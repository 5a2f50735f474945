//! Support for the malformed-input property tests of the family crates, which include this file
//! with `#[path = "<...>/common/tests/support/malformed.rs"] mod malformed;`:
//!
//! - [`config`]: a fixed number of cases from a fixed seed, no failure files, so a run is the
//!   same on every machine;
//! - [`Mutation`], [`mutations`] and [`apply_all`]: what is done to a valid file (truncation,
//!   flipped bytes, junk, deleted or repeated lines, bytes that are not UTF-8, numbers replaced
//!   by NaN, infinities, negatives, zero or absurdly large values);
//! - [`largest_allocation`]: the largest single allocation a closure asked for on this thread,
//!   seen by the counting global allocator this module installs in the test binary;
//! - [`assert_names_file_and_line`]: an error message names the file and a line of it.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngSeed};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

/// `cases` cases from the fixed `seed`; failures are not persisted (the regression cases are
/// kept as plain tests instead).
pub fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Texts a number in a file is replaced with.
pub const ODD_NUMBERS: &[&str] = &[
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "-0",
    "0",
    "0.0",
    "1e-320",
    "1e308",
    "1e400",
    "1e12",
    "1000000000000",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999",
    "+7",
    "0x1F",
    "1,5",
    "",
];

/// Absurd counts for headers: far more than any test file can hold, but each of them more than
/// `u32::MAX`, which is as far as the readers' own limits go (a header at exactly such a limit
/// describes a result that is legitimately that large).
pub const ABSURD_COUNTS: &[&str] = &[
    "1000000000000",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
];

/// Byte sequences that are not UTF-8 wherever they are inserted.
const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xfe\xff",
    b"\x80",
    b"\xc3",
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
];

/// One change to a file.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Keep only the bytes before a position.
    Truncate(Index),
    /// XOR the byte at a position with a non-zero mask.
    FlipByte(Index, u8),
    /// Insert a line at the start of a line (or at the end of the file).
    InsertLine(Index, String),
    /// Remove a line.
    DeleteLine(Index),
    /// Repeat a line.
    DuplicateLine(Index),
    /// Insert bytes that are not UTF-8 at any position.
    InsertNotUtf8(Index, &'static [u8]),
    /// Replace a number (a whitespace-separated token that parses as `f64`) with another text.
    ReplaceNumber(Index, &'static str),
}

fn junk_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,24}",
        "[0-9 .e-]{1,16}",
        prop::sample::select(vec![
            "",
            "   ",
            "\t",
            "\r",
            "%",
            "% comment",
            "# comment",
            ": section",
            "1",
            "1 2",
            "1 2 3",
            "1 1 1 1",
            "word",
            "word 1",
            "word 1 2 3",
            "a\tb\t1",
            "%%MatrixMarket matrix coordinate real general",
            "ünïcödé wörds 1.5",
        ])
        .prop_map(String::from),
    ]
}

/// Any one [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 1u8..=255).prop_map(|(i, m)| Mutation::FlipByte(i, m)),
        (any::<Index>(), junk_line()).prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        any::<Index>().prop_map(Mutation::DeleteLine),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        (any::<Index>(), prop::sample::select(NOT_UTF8))
            .prop_map(|(i, b)| Mutation::InsertNotUtf8(i, b)),
        (any::<Index>(), prop::sample::select(ODD_NUMBERS))
            .prop_map(|(i, n)| Mutation::ReplaceNumber(i, n)),
    ]
}

/// One to three mutations, applied in order by [`apply_all`].
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..=3)
}

/// Byte ranges of the lines of `bytes`, each with its newline.
fn line_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            ranges.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < bytes.len() {
        ranges.push(start..bytes.len());
    }
    ranges
}

/// Byte ranges of the whitespace-separated tokens of `bytes` that parse as `f64`.
pub fn number_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let is_number =
            std::str::from_utf8(&bytes[start..i]).is_ok_and(|token| token.parse::<f64>().is_ok());
        if is_number {
            ranges.push(start..i);
        }
    }
    ranges
}

/// `bytes` with `mutation` applied.
pub fn apply(bytes: &[u8], mutation: &Mutation) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let lines = line_ranges(bytes);
    match mutation {
        Mutation::Truncate(at) => out.truncate(at.index(bytes.len() + 1)),
        Mutation::FlipByte(at, mask) => {
            if !out.is_empty() {
                let i = at.index(out.len());
                out[i] ^= mask;
            }
        }
        Mutation::InsertLine(at, line) => {
            let starts: Vec<usize> = lines.iter().map(|r| r.start).chain([bytes.len()]).collect();
            let pos = starts[at.index(starts.len())];
            let mut inserted = Vec::new();
            if pos == bytes.len() && !bytes.is_empty() && !bytes.ends_with(b"\n") {
                inserted.push(b'\n');
            }
            inserted.extend_from_slice(line.as_bytes());
            inserted.push(b'\n');
            out.splice(pos..pos, inserted);
        }
        Mutation::DeleteLine(at) => {
            if !lines.is_empty() {
                out.drain(lines[at.index(lines.len())].clone());
            }
        }
        Mutation::DuplicateLine(at) => {
            if !lines.is_empty() {
                let r = lines[at.index(lines.len())].clone();
                let mut copy = bytes[r.clone()].to_vec();
                if !copy.ends_with(b"\n") {
                    copy.insert(0, b'\n');
                }
                out.splice(r.end..r.end, copy);
            }
        }
        Mutation::InsertNotUtf8(at, junk) => {
            let pos = at.index(bytes.len() + 1);
            out.splice(pos..pos, junk.iter().copied());
        }
        Mutation::ReplaceNumber(at, text) => {
            let numbers = number_ranges(bytes);
            if !numbers.is_empty() {
                let r = numbers[at.index(numbers.len())].clone();
                out.splice(r, text.bytes());
            }
        }
    }
    out
}

/// `bytes` with every mutation applied in order.
pub fn apply_all(bytes: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    mutations.iter().fold(bytes.to_vec(), |b, m| apply(&b, m))
}

/// `bytes` with the `k`-th number (as [`number_ranges`] finds them) replaced by `text`.
pub fn replace_number(bytes: &[u8], k: usize, text: &str) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if let Some(r) = number_ranges(bytes).get(k).cloned() {
        out.splice(r, text.bytes());
    }
    out
}

/// The line number `message` names: the first `{path}:N` or `line N`.
pub fn named_line(message: &str, path: &str) -> Option<usize> {
    let number = |s: &str| -> Option<usize> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let with_path = format!("{path}:");
    message
        .match_indices(&with_path)
        .find_map(|(i, _)| number(&message[i + with_path.len()..]))
        .or_else(|| {
            message
                .match_indices("line ")
                .find_map(|(i, _)| number(&message[i + "line ".len()..]))
        })
}

/// Asserts that `message` names `path` and a line of `bytes` (1-based, up to the line after the
/// last, where a file that ends too early is reported).
pub fn assert_names_file_and_line(message: &str, path: &Path, bytes: &[u8]) {
    let path = path.display().to_string();
    assert!(
        message.contains(&path),
        "the error does not name the file {path}: {message}"
    );
    assert_names_line(message, &path, bytes);
}

/// Asserts that `message` names a line of `bytes` as `{path}:N` or `line N` (the path itself is
/// not required: for readers that are given no path).
pub fn assert_names_line(message: &str, path: &str, bytes: &[u8]) {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    let line = named_line(message, path);
    assert!(
        line.is_some_and(|l| (1..=newlines + 2).contains(&l)),
        "the error names no line of the {}-line file (found {line:?}): {message}",
        newlines + 1
    );
}

/// Counts the largest single allocation (or reallocation) of the current thread.
pub struct CountingAllocator;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // A const-initialized `Cell` has no destructor: reading it never allocates or fails.
    LARGEST.with(|largest| {
        if size > largest.get() {
            largest.set(size);
        }
    });
}

// SAFETY: every call goes to the system allocator unchanged; only the sizes are noted.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// What `f` returned and the largest single allocation it made on this thread, in bytes.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|largest| largest.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

/// The most a reader may allocate at once for `input_len` bytes of input: a fixed allowance
/// (read buffers, small pre-allocations) plus a constant factor of the input (parsed values are
/// wider than their text, and vectors grow by doubling). A header's announced size must not
/// count.
pub fn allocation_bound(input_len: usize) -> usize {
    (4 << 20) + 64 * input_len
}

/// Asserts that `f` allocated at most [`allocation_bound`] of `input_len` at once.
pub fn assert_bounded_allocation<T>(input_len: usize, f: impl FnOnce() -> T) -> T {
    let (out, largest) = largest_allocation(f);
    assert!(
        largest <= allocation_bound(input_len),
        "{largest} bytes allocated at once for {input_len} bytes of input"
    );
    out
}

/// A fresh directory under the system's temporary directory, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A directory named after `name`, the process and the time.
    pub fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("parbench-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
