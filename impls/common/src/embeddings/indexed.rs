//! The hot path of reading text embeddings, in two passes over a chunk: first every field's
//! start and end and every line's end, found 64 bytes at a time as bit masks, then the numbers
//! of each line converted with the places of all its fields at hand, four at once in AVX2
//! lanes where the processor has them. The split alone (done before with the separators
//! found field by field) measured no faster; what made the reader 1.7x faster on two threads
//! was counting and finding bits in one instruction each, by run-time dispatch, and the
//! four-lane conversion it makes possible.
//!
//! Anything out of the ordinary sends the chunk back to the general reader ([`super`]'s
//! `parse_lines`), which finds and reports what is wrong: text outside ASCII, a line with the
//! wrong number of fields, a field that is not a number. Numbers the short form does not cover
//! (more digits, exponents, `inf`) are read here by the general number parser, a line at a time.

use super::{
    divide_row, finish_line, masks16, parse_fields, short_decimal_parts, LineShape, ParsedChunk,
};

/// Where a chunk's fields start and end (byte offsets, a field's end exclusive), and for each
/// line end, how many fields come before it.
struct FieldIndex {
    starts: Vec<u32>,
    ends: Vec<u32>,
    line_ends: Vec<u32>,
}

impl FieldIndex {
    const fn new() -> FieldIndex {
        FieldIndex {
            starts: Vec::new(),
            ends: Vec::new(),
            line_ends: Vec::new(),
        }
    }
}

/// Bit j set where `block[j]` is a separator (a blank or a newline), where it is a newline,
/// and whether any byte is outside ASCII.
#[inline(always)]
pub(super) fn masks64(block: &[u8; 64]) -> (u64, u64, bool) {
    let (mut separators, mut newlines, mut high) = (0u64, 0u64, 0u8);
    for (k, part) in block.chunks_exact(16).enumerate() {
        let (s, n) = masks16(part);
        separators |= u64::from(s) << (16 * k);
        newlines |= u64::from(n) << (16 * k);
        high |= part.iter().fold(0, |acc, &c| acc | c);
    }
    (separators, newlines, high >= 0x80)
}

/// Appends `base + j` for every set bit j of `bits`, in order.
#[inline(always)]
fn push_bits(out: &mut Vec<u32>, mut bits: u64, base: u32) {
    let count = bits.count_ones() as usize;
    out.extend(
        std::iter::repeat_with(|| {
            let j = bits.trailing_zeros();
            bits &= bits.wrapping_sub(1);
            base + j
        })
        .take(count),
    );
}

thread_local! {
    /// Each thread's index, kept from chunk to chunk: with a new one per chunk (some 2 MB)
    /// the allocator's malloc and free were about 5% of a profile of the read.
    static INDEX: std::cell::RefCell<FieldIndex> =
        const { std::cell::RefCell::new(FieldIndex::new()) };
}

/// One 64-byte block's fields and line ends into `index`, its first byte at `base`; `carry` is
/// 1 where the byte before the block is inside a field (and is set for the next block).
#[inline(always)]
fn index_block(
    block: &[u8; 64],
    base: u32,
    carry: &mut u64,
    non_ascii: &mut bool,
    index: &mut FieldIndex,
) {
    let (separators, newlines, high) = masks64(block);
    *non_ascii |= high;
    let inside = !separators;
    let before = (inside << 1) | *carry;
    let starts = inside & !before;
    // A separator right after a field's byte is where that field ends.
    let ends = separators & before;
    *carry = inside >> 63;
    let fields_before = index.starts.len();
    push_bits(&mut index.starts, starts, base);
    push_bits(&mut index.ends, ends, base);
    let mut lines = newlines;
    while lines != 0 {
        let at = lines.trailing_zeros();
        let below = (1u64 << at) - 1;
        index
            .line_ends
            .push((fields_before + (starts & below).count_ones() as usize) as u32);
        lines &= lines - 1;
    }
}

/// The fields and line ends of an ASCII chunk into `index`; `false` for a chunk with other
/// bytes (or one of 4 GB or more), which the general reader takes.
#[inline(always)]
fn index_fields(b: &[u8], index: &mut FieldIndex) -> bool {
    if u32::try_from(b.len()).is_err() {
        return false;
    }
    index.starts.clear();
    index.ends.clear();
    index.line_ends.clear();
    // About a field per 9 bytes and a line per few thousand at the shapes embeddings come in;
    // the vectors grow past these if a file is denser.
    index.starts.reserve(b.len() / 8 + 16);
    index.ends.reserve(b.len() / 8 + 16);
    index.line_ends.reserve(b.len() / 1024 + 16);
    // 1 where the byte before the current block is inside a field.
    let mut carry = 0u64;
    let mut non_ascii = false;
    let (blocks, tail) = b.as_chunks::<64>();
    let mut base = 0u32;
    for block in blocks {
        index_block(block, base, &mut carry, &mut non_ascii, index);
        base += 64;
    }
    // The last bytes padded with blanks: they end its last field and start none.
    if !tail.is_empty() {
        let mut padded = [b' '; 64];
        padded[..tail.len()].copy_from_slice(tail);
        index_block(&padded, base, &mut carry, &mut non_ascii, index);
    }
    if non_ascii {
        return false;
    }
    // A field running to the end of a chunk whose length is a multiple of 64.
    if carry == 1 {
        index.ends.push(b.len() as u32);
    }
    // A last line without its newline.
    if b.last().is_some_and(|&c| c != b'\n') {
        index.line_ends.push(index.starts.len() as u32);
    }
    true
}

/// Whether this processor counts bits and finds them in one instruction each (POPCNT, BMI1)
/// and has AVX2: the build's baseline x86_64 has neither instruction, and counting a mask's
/// bits in software was a fifth of the parse.
#[cfg(target_arch = "x86_64")]
fn has_bit_instructions() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("popcnt") && has!("bmi1") && has!("bmi2") && has!("avx2")
}

/// The path the reader's run-time dispatch takes on this processor, as the family crates
/// report theirs.
pub fn simd_path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if has_bit_instructions() {
        return "avx2+bmi2";
    }
    if cfg!(target_arch = "x86_64") {
        "sse2"
    } else {
        "scalar"
    }
}

/// Parses the whole lines of `b` into `rows` as the general reader would, or `None` where that
/// reader must look (see the module's notes); the rows written before are then overwritten.
pub(super) fn parse_lines_indexed(
    b: &[u8],
    shape: &LineShape,
    rows: &mut [f64],
) -> Option<ParsedChunk> {
    // The thread's index is taken here, outside the functions compiled for the processor: a
    // closure inside them would be compiled without their target features.
    INDEX.with_borrow_mut(|index| {
        #[cfg(target_arch = "x86_64")]
        if has_bit_instructions() {
            // SAFETY: the function's target features were just found on this processor.
            return unsafe { parse_lines_indexed_bits(b, index, shape, rows) };
        }
        parse_lines_indexed_any::<false>(b, index, shape, rows)
    })
}

/// [`parse_lines_indexed`] compiled for processors with the bit instructions, its numbers
/// converted four at once where they have the short forms embedding files hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,bmi2,avx2")]
unsafe fn parse_lines_indexed_bits(
    b: &[u8],
    index: &mut FieldIndex,
    shape: &LineShape,
    rows: &mut [f64],
) -> Option<ParsedChunk> {
    parse_lines_indexed_any::<true>(b, index, shape, rows)
}

/// Physical lines of `chunk` (a last one without its newline included), dispatched as
/// [`parse_lines_indexed`] is.
pub(super) fn line_count(chunk: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if has_bit_instructions() {
        // SAFETY: as in parse_lines_indexed.
        return unsafe { line_count_bits(chunk) };
    }
    line_count_any(chunk)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,bmi2,avx2")]
unsafe fn line_count_bits(chunk: &[u8]) -> usize {
    line_count_any(chunk)
}

#[inline(always)]
fn line_count_any(chunk: &[u8]) -> usize {
    let mut blocks = chunk.chunks_exact(16);
    let mut newlines: usize = (&mut blocks)
        .map(|part| masks16(part).1.count_ones() as usize)
        .sum();
    newlines += blocks.remainder().iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(chunk.last().is_some_and(|&b| b != b'\n'))
}

/// The parse; `AVX2` only where the processor has it (see [`short_decimals_x4`]).
#[inline(always)]
fn parse_lines_indexed_any<const AVX2: bool>(
    b: &[u8],
    index: &mut FieldIndex,
    shape: &LineShape,
    rows: &mut [f64],
) -> Option<ParsedChunk> {
    if index_fields(b, index) {
        convert_lines::<AVX2>(b, index, shape, rows)
    } else {
        None
    }
}

/// The lines of `b`, whose fields `index` holds, parsed into `rows`.
#[inline(always)]
fn convert_lines<const AVX2: bool>(
    b: &[u8],
    index: &FieldIndex,
    shape: &LineShape,
    rows: &mut [f64],
) -> Option<ParsedChunk> {
    let dim = shape.dim;
    let mut out = ParsedChunk::new();
    // No more than `rows` holds, however large the dimension a header claims.
    let mut divisors = vec![1.0; dim.min(rows.len())];
    let mut first = 0usize;
    for &line_end in &index.line_ends {
        let fields = first..line_end as usize;
        first = line_end as usize;
        out.lines += 1;
        if fields.is_empty() {
            continue;
        }
        if fields.len() - 1 != dim {
            return None;
        }
        // A line whose row would not fit is one past the values the chunk can hold.
        let row_start = out.word_ends.len() * dim;
        if row_start + dim > rows.len() {
            return None;
        }
        let field = |f: usize| &b[index.starts[f] as usize..index.ends[f] as usize];
        let numbers = fields.start + 1..fields.end;
        let row = &mut rows[row_start..row_start + dim];
        let (starts, ends) = (&index.starts[numbers.clone()], &index.ends[numbers.clone()]);
        let mut short = true;
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            while done + 4 <= dim {
                let four = done..done + 4;
                // SAFETY: AVX2 is true only in parse_lines_indexed_bits, which runs where the
                // processor has AVX2.
                let converted = unsafe {
                    short_decimals_x4(
                        b,
                        &starts[four.clone()],
                        &ends[four.clone()],
                        &mut row[four.clone()],
                    )
                };
                short &= if converted {
                    divisors[four].fill(1e6);
                    true
                } else {
                    short_parts(
                        b,
                        &starts[four.clone()],
                        &ends[four.clone()],
                        &mut row[four.clone()],
                        &mut divisors[four],
                    )
                };
                done += 4;
            }
        }
        short &= short_parts(
            b,
            &starts[done..],
            &ends[done..],
            &mut row[done..],
            &mut divisors[done..dim],
        );
        // ASCII, so every field is a str.
        let text = |f: usize| std::str::from_utf8(field(f)).unwrap_or_default();
        if short {
            divide_row(row, &divisors);
            finish_line(text(fields.start), dim, shape, &mut out).ok()?;
        } else {
            // The general reading of the line, as the general reader's.
            parse_fields(fields.map(text), shape, rows, &mut out).ok()?;
        }
    }
    Some(out)
}

/// The fields `b[starts[k]..ends[k]]` as numerators and divisors by [`short_decimal_parts`];
/// `false` where any has another form (its values are then unspecified).
#[inline(always)]
fn short_parts(
    b: &[u8],
    starts: &[u32],
    ends: &[u32],
    values: &mut [f64],
    divisors: &mut [f64],
) -> bool {
    let mut short = true;
    for (((value, divisor), &start), &end) in values.iter_mut().zip(divisors).zip(starts).zip(ends)
    {
        let (numerator, d) =
            short_decimal_parts(b, start as usize, end as usize).unwrap_or_else(|| {
                short = false;
                (0.0, 1.0)
            });
        *value = numerator;
        *divisor = d;
    }
    short
}

/// Four numbers of at most eight bytes after an optional `-`, of one digit, then (when more
/// follow) a dot and digits: `-0.123456` as word2vec.c's `%lf` writes it, `0.41242` as GloVe
/// and shortest round-trip printing do. Their fields are `b[starts[k]..ends[k]]`; each is
/// written to `out` as a numerator over 10^6, which with the field's digits padded by zeros
/// to six decimals is the quotient [`short_decimal_parts`] gives bit for bit (both are exact,
/// and the correctly rounded quotient of one rational is one f64). `false`, with `out`
/// unspecified, where any of the four has another form. The eight bytes after each sign are
/// converted in one 64-bit lane (digits weighted by pairs, then by fours, then joined) with
/// no per-number branch, where the general short form takes some 75 instructions a number.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn short_decimals_x4(b: &[u8], starts: &[u32], ends: &[u32], out: &mut [f64]) -> bool {
    use std::arch::x86_64::*;
    // '0' in every byte but the second, where '.' is: a digit then becomes at most 9, the dot
    // exactly 0, and so do the bytes past a field's end once masked off.
    const FORM: u64 = 0x3030_3030_3030_2e30;
    let (starts, ends, out) = (&starts[..4], &ends[..4], &mut out[..4]);
    // Starts rise, so every eight-byte read below is inside `b` once the last one's is.
    if starts[3] as usize + 9 > b.len() {
        return false;
    }
    let mut words = [0u64; 4];
    let mut lengths = [0u64; 4];
    let mut signs = [0u64; 4];
    let mut too_long_or_empty = false;
    for k in 0..4 {
        let negative = b[starts[k] as usize] == b'-';
        let from = starts[k] as usize + usize::from(negative);
        let len = (ends[k] as usize).wrapping_sub(from);
        too_long_or_empty |= len.wrapping_sub(1) >= 8;
        words[k] = u64::from_le_bytes(b[from..from + 8].try_into().unwrap_or_default());
        lengths[k] = len as u64;
        signs[k] = u64::from(negative) << 63;
    }
    if too_long_or_empty {
        return false;
    }
    // SAFETY: AVX2 is this function's target feature; the loads and stores are unaligned ones
    // of four-element arrays and of `out`, which has four elements.
    unsafe {
        let v = _mm256_loadu_si256(words.as_ptr().cast());
        // Each lane's length in each of its bytes, against the bytes' places 0..7: the bytes
        // of the field are those whose place is below its length.
        let length_bytes = _mm256_shuffle_epi8(
            _mm256_loadu_si256(lengths.as_ptr().cast()),
            // Byte 0 of its 128 bits to the first lane of each half, byte 8 to the second.
            _mm256_set_epi64x(0x0808_0808_0808_0808, 0, 0x0808_0808_0808_0808, 0),
        );
        let places = _mm256_set1_epi64x(0x0706_0504_0302_0100);
        let kept = _mm256_cmpgt_epi8(length_bytes, places);
        let d = _mm256_and_si256(_mm256_xor_si256(v, _mm256_set1_epi64x(FORM as i64)), kept);
        let limits = _mm256_set1_epi64x(0x0909_0909_0909_0009);
        let within = _mm256_cmpeq_epi8(_mm256_max_epu8(d, limits), limits);
        if _mm256_movemask_epi8(within) != -1 {
            return false;
        }
        // Bytes d0 . d2 d3 d4 d5 d6 d7: pairs (d0), (d2 d3), (d4 d5), (d6 d7) ...
        let pairs = _mm256_maddubs_epi16(d, _mm256_set1_epi64x(0x010a_010a_010a_0001));
        // ... then (d0 d2 d3) and (d4 d5 d6 d7) in the lane's two 32-bit halves ...
        let fours = _mm256_madd_epi16(pairs, _mm256_set1_epi64x(0x0001_0064_0001_0064));
        // ... joined: the high half plus 10^4 times the low one.
        let joined = _mm256_add_epi64(
            _mm256_mul_epu32(fours, _mm256_set1_epi64x(10_000)),
            _mm256_srli_epi64(fours, 32),
        );
        // An integer under 2^52 as an f64, exactly: its bits under 2^52's exponent, less 2^52.
        let two52 = _mm256_set1_pd(4_503_599_627_370_496.0);
        let as_f64 = _mm256_sub_pd(
            _mm256_castsi256_pd(_mm256_or_si256(joined, _mm256_castpd_si256(two52))),
            two52,
        );
        let sign = _mm256_loadu_si256(signs.as_ptr().cast());
        let signed = _mm256_or_pd(as_f64, _mm256_castsi256_pd(sign));
        _mm256_storeu_pd(out.as_mut_ptr(), signed);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows and words a path gives for `text`, or `None` where it hands the chunk over.
    fn run<const AVX2: bool>(text: &str, dim: usize) -> Option<(Vec<u64>, String)> {
        let shape = LineShape {
            dim,
            source_of_dim: "test",
        };
        let mut rows = vec![0.0; text.len()];
        let mut index = FieldIndex::new();
        #[cfg(target_arch = "x86_64")]
        let out = if AVX2 {
            if !has_bit_instructions() {
                return None;
            }
            // SAFETY: the features were just found on this processor.
            unsafe { parse_lines_indexed_bits(text.as_bytes(), &mut index, &shape, &mut rows) }
        } else {
            parse_lines_indexed_any::<false>(text.as_bytes(), &mut index, &shape, &mut rows)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let out = parse_lines_indexed_any::<false>(text.as_bytes(), &mut index, &shape, &mut rows);
        let out = out?;
        rows.truncate(out.word_ends.len() * dim);
        Some((rows.iter().map(|v| v.to_bits()).collect(), out.text))
    }

    #[test]
    fn the_portable_path_and_the_processors_path_agree_and_hand_over_the_same_chunks() {
        let cases = [
            (
                "a -0.123456 0.000000 -0.000000 9.999999 1.5\nb 1 2 3 4 5\n",
                5,
            ),
            (
                "a 0.100000 0.200000 0.300000 0.400000\n\n  b 1e2 -0.5 7 0.25",
                4,
            ),
            // Wrong counts, words outside ASCII, numbers that are not: the general reader's.
            ("a 0.100000 0.200000\n", 4),
            ("\u{e9} 0.100000 0.200000 0.300000 0.400000\n", 4),
            ("a 0.100000 x 0.300000 0.400000\n", 4),
        ];
        for (text, dim) in cases {
            let portable = run::<false>(text, dim);
            if let Some(fast) = run::<true>(text, dim) {
                assert_eq!(Some(fast), portable.clone(), "{text:?}");
            }
            let general = text.lines().all(|l| {
                let f: Vec<&str> = l.split_ascii_whitespace().collect();
                l.is_ascii()
                    && (f.is_empty()
                        || (f.len() == dim + 1 && f[1..].iter().all(|x| x.parse::<f64>().is_ok())))
            });
            assert_eq!(portable.is_some(), general, "{text:?}");
        }
    }

    #[test]
    fn fields_and_line_ends_are_found_across_block_edges() {
        // Fields straddling the 64-byte edges, runs of blanks, a last line without newline.
        let text = format!("{}x\n\n{} yy zzz\t w", " ".repeat(63), "a".repeat(70));
        let mut index = FieldIndex::new();
        assert!(index_fields(text.as_bytes(), &mut index));
        let fields: Vec<&str> = index
            .starts
            .iter()
            .zip(&index.ends)
            .map(|(&s, &e)| &text[s as usize..e as usize])
            .collect();
        let want: Vec<&str> = text.split_ascii_whitespace().collect();
        assert_eq!(fields, want);
        assert_eq!(index.line_ends, [1, 1, 5]);
        assert!(!index_fields("caf\u{e9} 1\n".as_bytes(), &mut index));
    }
}
