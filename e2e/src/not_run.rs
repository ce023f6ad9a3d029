//! Cases a test could not run on this server, reported instead of passed.
//!
//! A test that finds the server lacking what one of its cases needs (an API version, a field the
//! server drops) calls [`not_run`] and goes on with the cases it can run. cargo test swallows the
//! stderr of a passing test, so the case is also appended to the file named by
//! [`NOT_RUN_FILE_ENV`]: `e2e/test-all` points it at a fresh file and prints every line at the end,
//! under `cases not run on this server: N`. Such a case is never counted as passed; that list is its
//! report.

use std::io::Write;
use std::path::Path;

/// The environment variable naming the file [`not_run`] appends to.
pub const NOT_RUN_FILE_ENV: &str = "LINKERD_MULTUS_NOT_RUN_FILE";

/// The marker starting the stderr line [`not_run`] prints.
pub const MARKER: &str = "CASE NOT RUN";

/// Reports that `case` was not run on this server because of `reason`: a `CASE NOT RUN` line on
/// stderr, and `case<TAB>reason<TAB>target` appended to the file `$LINKERD_MULTUS_NOT_RUN_FILE` when
/// that is set (the test target, so `e2e/lib/tier.py` knows whether another tier ran the case).
/// Panics when the file cannot be written: a lost report would read as a pass.
pub fn not_run(case: &str, reason: &str) {
    eprintln!("{MARKER}: {case}: {reason}");
    if let Some(file) = std::env::var_os(NOT_RUN_FILE_ENV) {
        let file = Path::new(&file);
        append(file, case, reason, &test_target()).unwrap_or_else(|e| {
            panic!(
                "cannot record the case not run in {} ({NOT_RUN_FILE_ENV}): {e}",
                file.display()
            )
        });
    }
}

/// The line recorded for a case: one line, tabs between case, reason and target (tabs and line
/// breaks inside them become spaces, so the file stays one case per line).
pub fn record_line(case: &str, reason: &str, target: &str) -> String {
    let flat = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    format!("{}\t{}\t{}\n", flat(case), flat(reason), flat(target))
}

/// The running test's target name: its executable's name without cargo's `-<hash>` suffix.
fn test_target() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    target_of(&exe.file_name().unwrap_or_default().to_string_lossy()).to_string()
}

fn target_of(exe: &str) -> &str {
    match exe.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => exe,
    }
}

/// Appends the case's line to `file` in a single write: test binaries run side by side, and an
/// `O_APPEND` write of one short line is not interleaved with another's.
pub fn append(file: &Path, case: &str, reason: &str, target: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    f.write_all(record_line(case, reason, target).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_line_with_one_tab() {
        assert_eq!(
            record_line("pdb v1beta1", "server serves policy/v1", "repair"),
            "pdb v1beta1\tserver serves policy/v1\trepair\n"
        );
        assert_eq!(record_line("a\tb", "c\nd\r", "t"), "a b\tc d \tt\n");
    }

    #[test]
    fn the_target_is_the_executable_without_cargos_hash() {
        assert_eq!(target_of("node_scenario-0123456789abcdef"), "node_scenario");
        assert_eq!(
            target_of("linkerd_multus_e2e-0123456789abcdef"),
            "linkerd_multus_e2e"
        );
        assert_eq!(target_of("helm-install"), "helm-install");
    }

    #[test]
    fn append_keeps_earlier_cases() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("not-run");
        append(&file, "first", "why 1", "a").expect("append");
        append(&file, "second", "why 2", "b").expect("append");
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            "first\twhy 1\ta\nsecond\twhy 2\tb\n"
        );
    }

    #[test]
    fn append_to_an_unwritable_path_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = append(&dir.path().join("missing/dir/file"), "c", "r", "t");
        assert!(err.is_err(), "{err:?}");
    }
}
