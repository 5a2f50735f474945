//! Instruction counts of the runs themselves, under valgrind's callgrind tool.
//!
//! `parbench gate count` starts a run under `valgrind --tool=callgrind --instr-atstart=no`: the
//! process runs uninstrumented (parsing, generation, the plan) until the in-process executor
//! brackets one variant's run with [`Region`], which switches instrumentation on, and off again
//! after the run, then asks callgrind to write the count under the region's label. Counting is
//! global across threads, so rayon workers and in-process ranks are counted too. After the
//! process ends, [`read_counts`] collects the labelled totals from callgrind's dump files.
//!
//! The requests are valgrind's "client requests": a fixed sequence of rotate instructions that
//! does nothing on a real CPU and that valgrind's JIT recognises. Outside valgrind they cost a
//! few cycles, so the executor only issues them when [`counting`] says a count was asked for.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Environment variable that tells a process started under callgrind to bracket its runs; its
/// value is the directory callgrind dumps into.
pub const COUNT_ENV: &str = "PARBENCH_CALLGRIND";
/// The file name callgrind's dumps start with (`--callgrind-out-file=DIR/cg.out`).
pub const DUMP_PREFIX: &str = "cg.out";

/// Callgrind's request codes (valgrind's `callgrind.h`: the tool base `'C','T'` and the order
/// of its request enumeration).
const TOOL_BASE: u64 = ((b'C' as u64) << 24) | ((b'T' as u64) << 16);
const ZERO_STATS: u64 = TOOL_BASE + 1;
const DUMP_STATS_AT: u64 = TOOL_BASE + 3;
const START_INSTRUMENTATION: u64 = TOOL_BASE + 4;
const STOP_INSTRUMENTATION: u64 = TOOL_BASE + 5;

/// Whether this process was asked to bracket its runs for callgrind.
pub fn counting() -> bool {
    std::env::var_os(COUNT_ENV).is_some()
}

/// Issues one client request with one argument; returns valgrind's answer (0 outside valgrind).
#[cfg(target_arch = "x86_64")]
fn request(code: u64, arg: u64) -> u64 {
    let args: [u64; 6] = [code, arg, 0, 0, 0, 0];
    let mut answer: u64 = 0;
    // SAFETY: the rotations of rdi by 3+13+61+51 = 128 bits leave it unchanged and `xchg rbx,
    // rbx` is a no-op, so on a real CPU the block only clobbers flags (declared by default) and
    // rdi (declared). Under valgrind the sequence makes the JIT read the six-word array at rax,
    // which lives until the block ends, and write its answer to rdx.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") answer,
            in("rax") args.as_ptr(),
            out("rdi") _,
            options(nostack),
        );
    }
    answer
}

#[cfg(not(target_arch = "x86_64"))]
fn request(_code: u64, _arg: u64) -> u64 {
    0
}

/// One counted stretch of work: instrumentation is on from [`Region::start`] until
/// [`Region::finish`] writes its count under `label`.
pub struct Region {
    label: std::ffi::CString,
}

impl Region {
    /// Zeroes callgrind's counters and starts instrumenting. `label` names the dump; it must
    /// not contain NUL or newline.
    pub fn start(label: &str) -> Result<Region> {
        if label.contains('\n') {
            bail!("internal: a callgrind label may not contain a newline: {label:?}");
        }
        let label = std::ffi::CString::new(label)
            .with_context(|| format!("internal: a callgrind label holds a NUL: {label:?}"))?;
        request(ZERO_STATS, 0);
        request(START_INSTRUMENTATION, 0);
        Ok(Region { label })
    }

    /// Stops instrumenting and writes the count since [`Region::start`] under the label.
    pub fn finish(self) {
        self.dump();
    }

    /// Writes the count so far under the label (callgrind zeroes its counters when it dumps)
    /// and stops instrumenting; [`Region::resume`] counts on. The label's counts add up.
    pub fn dump(&self) {
        request(STOP_INSTRUMENTATION, 0);
        request(DUMP_STATS_AT, self.label.as_ptr() as u64);
    }

    /// Counts on, after [`Region::dump`].
    pub fn resume(&self) {
        request(ZERO_STATS, 0);
        request(START_INSTRUMENTATION, 0);
    }

    /// The label's count so far, read back from the dumps (after [`Region::dump`]).
    pub fn counted_so_far(&self) -> Result<u64> {
        let dir = std::env::var_os(COUNT_ENV)
            .map(std::path::PathBuf::from)
            .context("internal: not counting under callgrind")?;
        let label = self.label.to_string_lossy();
        read_counts(&dir, DUMP_PREFIX)?
            .remove(label.as_ref())
            .with_context(|| format!("callgrind wrote no dump for {label}"))
    }
}

/// The instruction counts of every labelled dump in `dir` whose file name starts with
/// `prefix` (callgrind numbers the dumps `prefix.1`, `prefix.2`, ...). The dumps of one label
/// add up (a region dumped in parts).
pub fn read_counts(dir: &Path, prefix: &str) -> Result<BTreeMap<String, u64>> {
    let mut counts = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading callgrind dump {}", path.display()))?;
        if let Some((label, total)) =
            parse_dump(&text).with_context(|| format!("callgrind dump {}", path.display()))?
        {
            *counts.entry(label).or_insert(0) += total;
        }
    }
    Ok(counts)
}

/// The label and total of one dump, `None` for a dump not made by [`Region::finish`] (the one
/// callgrind writes when the program ends).
fn parse_dump(text: &str) -> Result<Option<(String, u64)>> {
    const TRIGGER: &str = "desc: Trigger: Client Request: ";
    let mut label = None;
    let mut total = None;
    for line in text.lines() {
        if let Some(l) = line.strip_prefix(TRIGGER) {
            label = Some(l.to_string());
        } else if let Some(t) = line.strip_prefix("totals:") {
            // The first event is Ir (instructions), the only one collected by default.
            let first = t.split_whitespace().next().unwrap_or("");
            total = Some(
                first
                    .parse::<u64>()
                    .with_context(|| format!("unreadable totals line {line:?}"))?,
            );
        }
    }
    match (label, total) {
        (Some(label), Some(total)) => Ok(Some((label, total))),
        (Some(label), None) => bail!("the dump of {label:?} has no totals line"),
        (None, _) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_harmless_outside_valgrind() {
        let region = Region::start("outside").unwrap();
        let x: u64 = (0..1000u64).map(std::hint::black_box).sum();
        region.finish();
        assert_eq!(x, 499_500);
        assert!(Region::start("two\nlines").is_err());
    }

    #[test]
    fn dumps_are_read_by_label() {
        let dir = tempfile::tempdir().unwrap();
        let dump = |label: &str, total: u64| {
            format!("version: 1\ncreator: callgrind-3.19.0\ndesc: I1 cache: \ndesc: Trigger: Client Request: {label}\nevents: Ir\nsummary: 0\ntotals: {total}\n")
        };
        std::fs::write(dir.path().join("cg.out.1"), dump("a|p|v#0", 800_007)).unwrap();
        std::fs::write(dir.path().join("cg.out.2"), dump("a|p|w#0", 40)).unwrap();
        std::fs::write(dir.path().join("cg.out.4"), dump("a|p|w#0", 2)).unwrap();
        std::fs::write(
            dir.path().join("cg.out"),
            "desc: Trigger: Program termination\ntotals: 0\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("other.txt"), "x").unwrap();
        let counts = read_counts(dir.path(), "cg.out").unwrap();
        assert_eq!(counts.len(), 2);
        assert_eq!(counts["a|p|v#0"], 800_007);
        assert_eq!(counts["a|p|w#0"], 42);
        std::fs::write(
            dir.path().join("cg.out.3"),
            "desc: Trigger: Client Request: broken\ntotals: x\n",
        )
        .unwrap();
        assert!(read_counts(dir.path(), "cg.out").is_err());
    }
}
