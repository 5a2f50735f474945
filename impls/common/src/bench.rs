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
