//! A sweep killed with SIGKILL at several moments and resumed each time ends with the rows of
//! an uninterrupted run, and no reader ever finds a torn file in the run directory.
//!
//! The mock family's `delay_ms` makes every run sleep, so the sweep takes a few seconds. Kill
//! points come from a fixed seed: one early, while the run is starting (machine metadata,
//! `experiment.yaml`, `meta.json`), then several at a seeded random instant after the run
//! stored its next point (so they land while points run and while results are written).
//! While each process runs, a reader thread keeps validating every file of the run directory;
//! after each kill the directory is validated again.

use parbench::family::ResultRow;
use parbench::results;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const EXPERIMENT: &str = r#"name: mock_kill
description: a sweep slow enough to be killed half-way
paper: none
reproduces: Fig. 0
family: mock
data: { source: synthetic, seed: 1 }
variants: [slow, fast]
params: { delay_ms: 15 }
sweep:
  size: [10, 20, 50, 100, 200, 500]
  threads: [1, 2, 3, 4]
repetitions: 2
warmup: 1
equivalence: { reference: slow, rel_tol: 1.0e-10 }
figures:
  - { name: mock_time, title: "Mock time", x: size, y: wall_time_s, log_x: true, log_y: true }
claims:
  - { kind: equivalence, name: variants agree, max_rel_error: 1.0e-10 }
  - { kind: ratio, name: fast is 100x faster, numerator: slow, denominator: fast, at_least: 99 }
"#;
const POINTS: usize = 6 * 4;
const ROWS: usize = POINTS * 2 * 2;
/// Seconds one point takes at least: 2 variants x (1 warm-up + 2 repetitions) x 15 ms.
const POINT_S: f64 = 2.0 * 3.0 * 0.015;
/// Trace steps of every mock run.
const TRACE_STEPS: usize = parbench::families::mock::MockFamily::TRACE_STEPS;

/// xorshift64*: the kill schedule is the same on every machine and every run.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn spawn(cwd: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_parbench"))
        .args(args)
        .current_dir(cwd)
        .env_remove("PARBENCH_DATA")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the parbench binary starts")
}

/// Checks that every file of the run directory is complete: it parses as what it should be.
/// Temporary files of the atomic writer are skipped (they are never renamed half-written).
/// Returns the number of stored rows (0 when results.parquet is absent).
fn assert_complete(dir: &Path) -> usize {
    let mut stored_rows = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if results::is_temp_file(&name) {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                assert_eq!(name, "figures", "unexpected folder {}", path.display());
                pending.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let what = path.display();
            match name.as_str() {
                "results.parquet" => {
                    let rows =
                        results::read_rows(dir).unwrap_or_else(|e| panic!("torn {what}: {e:#}"));
                    assert!(
                        !rows.is_empty() && rows.len() <= ROWS,
                        "{what}: {}",
                        rows.len()
                    );
                    stored_rows = rows.len();
                }
                "results.csv" => {
                    let text = String::from_utf8(bytes).unwrap();
                    assert!(text.ends_with('\n'), "torn {what}");
                    let mut lines = text.lines();
                    let header = lines.next().unwrap();
                    assert!(
                        header.starts_with("experiment,point,variant,repetition,")
                            && header.ends_with(",equiv_rel_error"),
                        "torn {what}: header {header}"
                    );
                    let fields = header.split(',').count();
                    let mut n = 0;
                    for line in lines {
                        assert_eq!(line.split(',').count(), fields, "torn {what}: {line}");
                        assert!(line.starts_with("mock_kill,"), "torn {what}: {line}");
                        n += 1;
                    }
                    assert!(n > 0 && n <= ROWS, "{what}: {n} rows");
                }
                "traces.parquet" => {
                    let traces =
                        results::read_traces(dir).unwrap_or_else(|e| panic!("torn {what}: {e:#}"));
                    assert!(
                        traces.len() <= ROWS * TRACE_STEPS,
                        "{what}: {}",
                        traces.len()
                    );
                    assert!(traces.iter().all(|t| t.experiment == "mock_kill"), "{what}");
                }
                "meta.json" => {
                    results::read_meta(dir).unwrap_or_else(|e| panic!("torn {what}: {e:#}"));
                }
                "experiment.yaml" => {
                    assert_eq!(String::from_utf8(bytes).unwrap(), EXPERIMENT, "torn {what}");
                }
                "summary.txt" => {
                    let text = String::from_utf8(bytes).unwrap();
                    assert!(text.starts_with("== mock_kill =="), "torn {what}");
                    assert!(
                        text.contains("\nclaims:\n") && text.ends_with('\n'),
                        "torn {what}"
                    );
                }
                _ if name.ends_with(".png") => {
                    let image = image::load_from_memory(&bytes)
                        .unwrap_or_else(|e| panic!("torn {what}: {e}"));
                    assert_eq!((image.width(), image.height()), (1024, 640), "{what}");
                }
                _ if name.ends_with(".svg") => {
                    let text = String::from_utf8(bytes).unwrap();
                    assert!(
                        text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
                        "torn {what}"
                    );
                }
                _ => panic!("unexpected file {what}"),
            }
        }
    }
    stored_rows
}

/// Validates the directory over and over until told to stop, from another thread: what a
/// concurrent reader (a dashboard, `parbench plot` on a running sweep) would see.
struct Watcher {
    stop: Arc<AtomicBool>,
    checks: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    fn start(dir: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let checks = Arc::new(AtomicUsize::new(0));
        let thread = {
            let (stop, checks) = (stop.clone(), checks.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    assert_complete(&dir);
                    checks.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        };
        Watcher {
            stop,
            checks,
            thread,
        }
    }

    /// Stops the reader; panics with its message if it found a torn file. Returns its checks.
    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Err(panic) = self.thread.join() {
            std::panic::resume_unwind(panic);
        }
        self.checks.load(Ordering::Relaxed)
    }
}

/// Stored rows, sorted, with the measured times removed (everything else must match).
fn rows_without_times(dir: &Path) -> Vec<ResultRow> {
    let mut rows = results::read_rows(dir).unwrap();
    for r in &mut rows {
        r.wall_time_s = 0.0;
        r.phases_s.clear();
        // The calibration timed after each run is a time too.
        r.metrics
            .remove(parbench::exec::executor::CALIBRATION_METRIC);
    }
    rows.sort_by(|a, b| {
        (a.point, &a.variant, a.repetition).cmp(&(b.point, &b.variant, b.repetition))
    });
    rows
}

/// Every stored row has its whole trace (the trace table is written before the results, so a
/// kill between the two leaves trace rows of a point the results lack, never the reverse).
fn assert_traces_cover_rows(dir: &Path) {
    if !dir.join(results::RESULTS_PARQUET).exists() {
        return;
    }
    let traces = results::read_traces(dir).unwrap();
    for r in results::read_rows(dir).unwrap() {
        let steps = traces
            .iter()
            .filter(|t| (t.point, &t.variant, t.repetition) == (r.point, &r.variant, r.repetition))
            .count();
        assert_eq!(steps, TRACE_STEPS, "trace of {r:?}");
    }
}

fn stored_rows_now(dir: &Path) -> usize {
    if dir.join(results::RESULTS_PARQUET).exists() {
        results::read_rows(dir).map_or(0, |r| r.len())
    } else {
        0
    }
}

#[test]
fn a_sweep_killed_at_several_moments_resumes_to_the_uninterrupted_rows_with_no_torn_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("exp.yaml"), EXPERIMENT).unwrap();

    // The uninterrupted run, watched like the others.
    let reference = root.join("reference");
    let watcher = Watcher::start(reference.clone());
    let started = Instant::now();
    let out = spawn(
        root,
        &[
            "run",
            "exp.yaml",
            "--quick",
            "--out",
            "reference",
            "--no-progress-bar",
        ],
    )
    .wait_with_output()
    .unwrap();
    let full_s = started.elapsed().as_secs_f64();
    watcher.finish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(assert_complete(&reference), ROWS);

    let dir = root.join("killed");
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    // (moment, stored rows after the kill, whether the process was still running)
    let mut log: Vec<(String, usize, bool)> = Vec::new();
    for kill in 0..5 {
        let before = stored_rows_now(&dir);
        let args: Vec<&str> = if kill == 0 {
            vec![
                "run",
                "exp.yaml",
                "--quick",
                "--out",
                "killed",
                "--no-progress-bar",
            ]
        } else {
            vec![
                "run",
                "exp.yaml",
                "--quick",
                "--resume",
                "killed",
                "--no-progress-bar",
            ]
        };
        let watcher = Watcher::start(dir.clone());
        let mut child = spawn(root, &args);
        let spawned = Instant::now();
        let moment = if kill == 0 {
            // While the run starts: a seeded moment in its first 5% (before any point).
            let wait = rng.next_f64() * 0.05 * full_s;
            std::thread::sleep(Duration::from_secs_f64(wait));
            format!("start+{wait:.3}s")
        } else {
            // Once the process stored a new point, at a seeded instant within the next
            // point or two: inside a run, between runs, or inside the write of the results.
            let deadline = spawned + Duration::from_secs_f64(3.0 * full_s + 30.0);
            while stored_rows_now(&dir) <= before
                && child.try_wait().unwrap().is_none()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            let wait = rng.next_f64() * 2.0 * POINT_S;
            std::thread::sleep(Duration::from_secs_f64(wait));
            format!("next point+{wait:.3}s")
        };
        let running = child.try_wait().unwrap().is_none();
        if running {
            child.kill().unwrap(); // SIGKILL
        }
        let status = child.wait().unwrap();
        let checks = watcher.finish();
        assert!(checks > 0);
        let rows = assert_complete(&dir);
        assert_traces_cover_rows(&dir);
        if !running {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert!(status.success(), "resumed run {kill} failed: {err}");
        }
        log.push((moment, rows, running));
    }
    let killed = log.iter().filter(|(_, _, running)| *running).count();
    let mid_sweep = log
        .iter()
        .filter(|(_, rows, running)| *running && *rows > 0 && *rows < ROWS)
        .count();
    assert!(killed >= 3, "too few kills landed: {log:?}");
    assert!(mid_sweep >= 2, "too few kills landed mid-sweep: {log:?}");
    eprintln!("kills (moment, stored rows, killed): {log:?}");

    // Resume to the end.
    let watcher = Watcher::start(dir.clone());
    let out = spawn(
        root,
        &[
            "run",
            "exp.yaml",
            "--quick",
            "--resume",
            "killed",
            "--no-progress-bar",
        ],
    )
    .wait_with_output()
    .unwrap();
    watcher.finish();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(assert_complete(&dir), ROWS);

    // Same rows as the uninterrupted run, times aside; same columns; nothing left over.
    assert_eq!(rows_without_times(&dir), rows_without_times(&reference));
    // The mock's traces are scripted: the resumed run's are exactly the uninterrupted run's.
    assert_eq!(
        results::read_traces(&dir).unwrap(),
        results::read_traces(&reference).unwrap()
    );
    let header = |d: &Path| {
        std::fs::read_to_string(d.join(results::RESULTS_CSV))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(header(&dir), header(&reference));
    let claims = |d: &Path| {
        let text = std::fs::read_to_string(d.join(results::SUMMARY_TXT)).unwrap();
        text.split_once("\nclaims:\n").unwrap().1.to_string()
    };
    assert_eq!(claims(&dir), claims(&reference));
    for d in [dir.clone(), dir.join("figures")] {
        let leftovers: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| results::is_temp_file(n))
            .collect();
        assert!(leftovers.is_empty(), "{}: {leftovers:?}", d.display());
    }
    let meta = results::read_meta(&dir).unwrap();
    assert!(meta.finished.is_some());
}

#[test]
fn atomic_writes_leave_the_old_file_or_the_new_one_and_no_temporary() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("f.txt");
    results::write_atomic(&path, b"first").unwrap();
    results::write_atomic(&path, b"second").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    let failed = results::write_atomic_with(&path, |w| {
        std::io::Write::write_all(w, b"half")?;
        Err(std::io::Error::other("disk full"))
    });
    assert!(failed.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    // What a killed writer leaves behind is recognised and cleared.
    let stale = tmp.path().join(".f.txt.tmp-123-4");
    std::fs::write(&stale, b"hal").unwrap();
    assert!(results::is_temp_file(".f.txt.tmp-123-4"));
    assert!(!results::is_temp_file("f.txt"));
    assert_eq!(results::remove_stale_temp_files(tmp.path()), 1);
    assert!(!stale.exists() && path.exists());
}
