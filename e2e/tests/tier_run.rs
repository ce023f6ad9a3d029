//! `e2e/lib/tier.py run --executables`: a tier's test executables taken from a build's JSON list
//! (no cargo run, so no wait on the target directory's lock), each run from its package's directory
//! with the tier's arguments, counted; the beside lane fenced from the shared apiserver. Pure
//! (python3 and sh; the "executables" are scripts).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// A fake test executable in `pkg`: records its arguments, directory and KUBECONFIG in `pkg/NAME.seen`,
/// and prints a libtest summary with `passed` and `failed`.
fn executable(pkg: &Path, name: &str, passed: u32, failed: u32) -> String {
    let path = pkg.join(name);
    let status = if failed > 0 { 101 } else { 0 };
    let script = format!(
        "#!/bin/sh\necho \"$* | $(pwd) | ${{KUBECONFIG:-none}}\" >{name}.seen\n\
         echo 'test result: ok. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out'\n\
         exit {status}\n"
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// One line of `cargo test --no-run --message-format=json` for a test executable.
fn artifact(name: &str, exe: &str, pkg: &Path, test: bool) -> String {
    serde_json::json!({
        "reason": "compiler-artifact",
        "target": {"name": name},
        "profile": {"test": test},
        "executable": exe,
        "manifest_path": pkg.join("Cargo.toml"),
    })
    .to_string()
}

/// `tier.py run` in `dir`: its output and summary. Its exit status is also in `dir/status`, which
/// e2e/test-all reads when its `wait` has lost the tier's ([`status`]).
fn run(dir: &Path, args: &[&str]) -> (Output, String) {
    let summary = dir.join("tiers");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lib/tier.py");
    let out = Command::new("python3")
        .arg(script)
        .args(["run", "a tier"])
        .arg(&summary)
        .args(args)
        .env("KUBECONFIG", "/shared/kubeconfig")
        .env("LINKERD_MULTUS_TESTBED_DIR", dir.join("no-testbed"))
        .env_remove("LINKERD_MULTUS_NOT_RUN_FILE")
        .env("LINKERD_MULTUS_TIER_STATUS_FILE", dir.join("status"))
        .output()
        .expect("python3");
    (out, fs::read_to_string(summary).unwrap_or_default())
}

fn status(dir: &Path) -> String {
    fs::read_to_string(dir.join("status")).unwrap_or_default()
}

/// The listed test executables run, but the skipped target and what is not a test (a binary, a
/// line that is not JSON); their counts summed; the arguments after `--` passed on, from the
/// package's directory; the beside lane without the shared KUBECONFIG.
#[test]
fn the_listed_executables_run_counted_from_their_package() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    let listing = [
        "   Compiling something (not JSON)".to_string(),
        artifact("one", &executable(&pkg, "one", 2, 0), &pkg, true),
        artifact("two", &executable(&pkg, "two", 3, 0), &pkg, true),
        artifact("skipped", &executable(&pkg, "skipped", 5, 0), &pkg, true),
        artifact("a-binary", &executable(&pkg, "a-binary", 7, 0), &pkg, false),
    ]
    .join("\n");
    let list = dir.path().join("executables.json");
    fs::write(&list, listing).unwrap();

    let (out, summary) = run(
        dir.path(),
        &[
            "--skip-target",
            "skipped",
            "--beside-target",
            "two",
            "--executables",
            list.to_str().unwrap(),
            "--",
            "--include-ignored",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(status(dir.path()), "0\n");
    assert!(summary.starts_with("a tier\t5\t0\t"), "{summary}");
    let seen = |name: &str| fs::read_to_string(pkg.join(format!("{name}.seen"))).ok();
    let pkg_dir = pkg.display().to_string();
    assert_eq!(
        seen("one").as_deref(),
        Some(format!("--include-ignored | {pkg_dir} | /shared/kubeconfig\n").as_str())
    );
    assert_eq!(
        seen("two").as_deref(),
        Some(format!("--include-ignored | {pkg_dir} | none\n").as_str()),
        "the beside lane is fenced from the shared apiserver"
    );
    assert_eq!(seen("skipped"), None);
    assert_eq!(seen("a-binary"), None);
}

/// A failed test fails the tier; a listing with nothing to run fails it too (it proves nothing).
#[test]
fn a_failure_or_nothing_run_fails_the_tier() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    fs::create_dir(&pkg).unwrap();
    let list = dir.path().join("executables.json");
    fs::write(
        &list,
        artifact("bad", &executable(&pkg, "bad", 1, 1), &pkg, true),
    )
    .unwrap();
    let (out, summary) = run(dir.path(), &["--executables", list.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(status(dir.path()), "1\n");
    assert!(summary.starts_with("a tier\t1\t1\t"), "{summary}");

    fs::write(&list, "").unwrap();
    fs::remove_file(dir.path().join("tiers")).unwrap();
    let (out, summary) = run(dir.path(), &["--executables", list.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(summary.starts_with("a tier\t0\t0\t"), "{summary}");
}
