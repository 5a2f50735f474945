//! One run of a peer (`docs/peers.md`): the point's input is written once into a work directory
//! ([`PeerWork`]), each run gets an empty output directory and a request, the process is
//! started and timed as a whole, and its `timing.json` and output files become a
//! [`Measurement`]. Every way a peer can fail (exit status, time limit, missing or malformed
//! output) is an error naming the peer, with the last lines of its standard error.

use super::{install, Peer, Program, PROGRAMS};
use crate::family::{Family, Measurement, PeerInput, PreparedInput, TypedPoint};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The protocol version parbench speaks.
pub const PROTOCOL: u32 = 1;

/// The metric holding the seconds of the whole peer process (start to exit).
pub const PROCESS_METRIC: &str = "process_s";

/// What the metrics a peer reports in `timing.json` are stored under: `metric_peer_<name>`.
pub const PEER_METRIC_PREFIX: &str = "peer_";

/// How many lines of a failed peer's standard error an error shows.
const STDERR_TAIL_LINES: usize = 15;

/// A point's input as peer files, written once and shared by every run of every peer at the
/// point; removed with the value.
pub struct PeerWork {
    family: &'static str,
    dir: tempfile::TempDir,
    input: PeerInput,
    runs: usize,
}

impl PeerWork {
    /// Writes the point's input, and the shipped programs, into a fresh work directory.
    pub fn prepare(
        family: &dyn Family,
        input: &PreparedInput,
        point: &TypedPoint,
    ) -> Result<PeerWork> {
        let dir = tempfile::Builder::new()
            .prefix("parbench-peer-")
            .tempdir()
            .context("cannot make a work directory for the peers")?;
        let input_dir = dir.path().join("input");
        let programs = dir.path().join("programs");
        for d in [&input_dir, &programs] {
            std::fs::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let mut peer_input = family
            .peer_input(input, point, &input_dir)
            .context("writing the point's input for the peers")?;
        for path in peer_input.files.values_mut() {
            *path = format!("input/{path}");
        }
        for (file, text) in PROGRAMS {
            std::fs::write(programs.join(file), text)
                .with_context(|| format!("cannot write the peer program {file}"))?;
        }
        Ok(PeerWork {
            family: family.name(),
            dir,
            input: peer_input,
            runs: 0,
        })
    }

    /// The work directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// What a peer reports of itself in `timing.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub compute_s: f64,
    #[serde(default)]
    pub phases_s: BTreeMap<String, f64>,
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
}

impl Timing {
    /// Writes `timing.json` into `output_dir`, atomically: the peer's last write.
    pub fn write(&self, output_dir: &Path) -> Result<()> {
        let path = output_dir.join("timing.json");
        crate::results::write_atomic(&path, &serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// A run's request (`request-<k>.json`): what the peer runs on and where it writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    pub protocol: u32,
    pub family: String,
    pub peer: String,
    pub threads: usize,
    pub seed: u64,
    pub params: serde_json::Map<String, serde_json::Value>,
    /// Role -> path relative to the request's folder.
    pub input: BTreeMap<String, String>,
    /// The output folder, relative to the request's folder.
    pub output: String,
    /// The request's folder, which the paths are relative to (not in the file).
    #[serde(skip)]
    pub base: PathBuf,
}

impl Request {
    /// Reads a request file.
    pub fn read(path: &Path) -> Result<Request> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut request: Request = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a peer request", path.display()))?;
        if request.protocol != PROTOCOL {
            bail!(
                "{}: protocol {}, this parbench speaks {PROTOCOL}",
                path.display(),
                request.protocol
            );
        }
        request.base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(request)
    }

    /// The file playing `role`.
    pub fn input(&self, role: &str) -> Result<PathBuf> {
        self.input
            .get(role)
            .map(|p| self.base.join(p))
            .ok_or_else(|| anyhow!("the request has no `{role}` input"))
    }

    /// The output folder.
    pub fn output_dir(&self) -> PathBuf {
        self.base.join(&self.output)
    }

    /// Parameter `key` as a number (`None` for null or absent).
    pub fn number(&self, key: &str) -> Result<Option<f64>> {
        match self.params.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| anyhow!("parameter `{key}` is {v}, expected a number")),
        }
    }

    /// Parameter `key`, which must be given.
    pub fn required(&self, key: &str) -> Result<f64> {
        self.number(key)?
            .ok_or_else(|| anyhow!("the request has no parameter `{key}`"))
    }
}

/// Runs `peer` once at the point `work` was prepared for, with `threads` threads.
pub fn run(
    peer: &Peer,
    work: &mut PeerWork,
    family: &dyn Family,
    input: &PreparedInput,
    point: &TypedPoint,
    threads: usize,
    seed: u64,
) -> Result<Measurement> {
    run_with(peer, work, threads, seed, |output_dir, compute_s| {
        family.peer_output(input, point, output_dir, compute_s)
    })
    .with_context(|| format!("peer `{}`", peer.name))
}

fn run_with(
    peer: &Peer,
    work: &mut PeerWork,
    threads: usize,
    seed: u64,
    read_output: impl FnOnce(&Path, f64) -> Result<Measurement>,
) -> Result<Measurement> {
    let k = work.runs;
    work.runs += 1;
    let output_rel = format!("output-{k}");
    let output_dir = work.path().join(&output_rel);
    std::fs::create_dir(&output_dir)
        .with_context(|| format!("cannot create {}", output_dir.display()))?;
    let request = Request {
        protocol: PROTOCOL,
        family: work.family.to_string(),
        peer: peer.name.clone(),
        threads,
        seed,
        params: work.input.params.clone(),
        input: work.input.files.clone(),
        output: output_rel,
        base: PathBuf::new(),
    };
    let request_path = work.path().join(format!("request-{k}.json"));
    std::fs::write(&request_path, serde_json::to_vec_pretty(&request)?)
        .with_context(|| format!("cannot write {}", request_path.display()))?;

    let argv = argv(peer, work.path())?;
    let stderr_path = work.path().join(format!("stderr-{k}.txt"));
    let stdout_path = work.path().join(format!("stdout-{k}.txt"));
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .arg(&request_path)
        .current_dir(work.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path)?)
        .stderr(std::fs::File::create(&stderr_path)?);
    let start = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {}", show(&argv)))?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > peer.timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "ran past its time limit of {:.0} s and was stopped{}",
                peer.timeout.as_secs_f64(),
                stderr_tail(&stderr_path)
            );
        }
        // Python alone takes tens of milliseconds to start; a millisecond's latency in
        // noticing the exit is within the process time's noise.
        std::thread::sleep(Duration::from_millis(1));
    };
    let process_s = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!(
            "{} exited with {status}{}",
            show(&argv),
            stderr_tail(&stderr_path)
        );
    }
    let timing_path = output_dir.join("timing.json");
    let timing: Timing = std::fs::read(&timing_path)
        .map_err(|e| anyhow!("wrote no {} ({e})", timing_path.display()))
        .and_then(|bytes| {
            serde_json::from_slice(&bytes)
                .map_err(|e| anyhow!("{} is malformed: {e}", timing_path.display()))
        })
        .map_err(|e| anyhow!("{e}{}", stderr_tail(&stderr_path)))?;
    if !(timing.compute_s.is_finite() && timing.compute_s >= 0.0) {
        bail!(
            "{}: compute_s is {}, expected seconds >= 0",
            timing_path.display(),
            timing.compute_s
        );
    }
    for (name, x) in timing.phases_s.iter().chain(&timing.metrics) {
        if !x.is_finite() {
            bail!(
                "{}: `{name}` is {x}, not a finite number",
                timing_path.display()
            );
        }
    }
    let mut m = read_output(&output_dir, timing.compute_s)
        .map_err(|e| anyhow!("{e:#}{}", stderr_tail(&stderr_path)))?;
    m.wall_time_s = timing.compute_s;
    m.phases_s.extend(timing.phases_s);
    // What a peer says of itself is kept apart from what parbench computes from its output
    // (and from the family's exact counters, which the gate compares exactly: a Hogwild
    // peer's own count of kept words is not reproducible).
    m.metrics.extend(
        timing
            .metrics
            .into_iter()
            .map(|(name, x)| (format!("{PEER_METRIC_PREFIX}{name}"), x)),
    );
    m.metrics.insert(PROCESS_METRIC.to_string(), process_s);
    // The outputs of a finished run are read; the input stays for the next run.
    let _ = std::fs::remove_dir_all(&output_dir);
    Ok(m)
}

/// The command line that starts `peer`, without the request path.
fn argv(peer: &Peer, work_dir: &Path) -> Result<Vec<OsString>> {
    match &peer.program {
        Program::Shipped { file, .. } => {
            let dir = install::cache_dir()?;
            if let Some(why) = install::not_ready(&dir, &install::availability(&dir)) {
                bail!("{why}");
            }
            Ok(vec![
                install::python(&dir).into_os_string(),
                work_dir.join("programs").join(file).into_os_string(),
            ])
        }
        Program::Parbench { variant, cache } => {
            let exe = std::env::current_exe()
                .context("cannot find this parbench's own executable to start it as a peer")?;
            let mut argv = vec![
                exe.into_os_string(),
                "peer-serve".into(),
                "--variant".into(),
                variant.into(),
            ];
            if *cache {
                argv.push("--cache".into());
                argv.push(work_dir.join(super::PARSED_CACHE_DIR).into_os_string());
            }
            Ok(argv)
        }
        Program::Declared { argv, dir } => {
            let Some((program, args)) = argv.split_first() else {
                bail!("its command is empty");
            };
            // `./x` and `sub/x` are the experiment folder's; a bare name is looked up on PATH.
            let program: OsString = if program.contains('/') && Path::new(program).is_relative() {
                dir.join(program).into_os_string()
            } else {
                program.into()
            };
            let args = args.iter().map(|a| {
                let p = dir.join(a);
                if a.contains('/') && Path::new(a).is_relative() && p.exists() {
                    p.into_os_string()
                } else {
                    a.into()
                }
            });
            Ok(std::iter::once(program).chain(args).collect())
        }
    }
}

fn show(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `; its standard error ended with:` and the last lines, or nothing when it printed nothing.
fn stderr_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "; it printed nothing on standard error".to_string();
    }
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    format!(
        "; its standard error ended with:\n    {}",
        tail.join("\n    ")
    )
}
