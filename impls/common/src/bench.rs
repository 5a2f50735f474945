//! What the crates' criterion benches share.

use std::path::{Path, PathBuf};

/// Where a bench writes criterion's reports: `$CRITERION_HOME` when set, else `criterion/` in
/// the target directory cargo built the bench in, given as the bench's `CARGO_TARGET_TMPDIR`
/// (an absolute `<target dir>/tmp`). Criterion's own default joins `$CARGO_TARGET_DIR` as given,
/// and cargo runs a bench in its package's folder, so a relative `CARGO_TARGET_DIR=target-x
/// cargo bench` used to write the reports into the source tree (`impls/<crate>/target-x/`).
pub fn criterion_home(target_tmpdir: &str) -> PathBuf {
    std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let tmp = Path::new(target_tmpdir);
            tmp.parent().unwrap_or(tmp).join("criterion")
        })
}

/// Criterion's settings for a crate's benches: reports where [`criterion_home`] says. Call it
/// with the bench's `env!("CARGO_TARGET_TMPDIR")`.
#[cfg(feature = "criterion")]
pub fn criterion_config(target_tmpdir: &str) -> criterion::Criterion {
    // `output_directory` (hidden from criterion's docs) sets what CRITERION_HOME sets in
    // `Criterion::default`.
    criterion::Criterion::default().output_directory(&criterion_home(target_tmpdir))
}
