//! The readiness probe, `linkerd-cni-install --ready-check` (the real binary), against the real
//! installer watching a temp node: unready before the first pass and while a step fails or waits,
//! ready once the node is installed, unready again after SIGTERM.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::*;

/// The probe as the kubelet runs it in the container: only the status file's path.
fn probe(ready_file: &Path) -> Output {
    std::process::Command::new(INSTALLER)
        .env_remove("READY_FILE")
        .arg("--ready-check")
        .arg("--ready-file")
        .arg(ready_file)
        .output()
        .expect("run the probe")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until the probe fails saying `why`.
fn wait_unready(ready_file: &Path, why: &str) {
    wait_for(&format!("the probe to fail with {why:?}"), || {
        let out = probe(ready_file);
        (!out.status.success() && stdout(&out).contains(why)).then_some(())
    });
}

fn wait_ready(ready_file: &Path) {
    wait_for("the probe to pass", || {
        probe(ready_file).status.success().then_some(())
    });
}

/// The container's /tmp: a dir apart from the node's.
fn container_tmp() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("linkerd-cni-install.ready");
    (tmp, file)
}

#[test]
#[ignore = "needs the installer running for seconds as a process: run by e2e/test-all"]
fn probe_follows_the_installer_from_start_to_sigterm() {
    let node = Node::new();
    let (_tmp, ready) = container_tmp();
    let ready_arg = ready.to_str().expect("utf-8 path");

    let before = probe(&ready);
    assert_eq!(before.status.code(), Some(1), "{}", stdout(&before));
    assert!(
        stdout(&before).contains("has not finished its first pass"),
        "{}",
        stdout(&before)
    );

    let running = node.spawn(&["--resync", "1s", "--ready-file", ready_arg]);
    // Binary and kubeconfig in place, but append mode has nothing to chain onto yet.
    wait_unready(&ready, "no primary network config");
    assert!(node.kubeconfig().is_some() && node.binary().exists());

    let name = "10-flannel.conflist";
    fs::write(node.net.join(name), fixture(name)).expect("the primary network appears");
    wait_ready(&ready);
    assert!(plugin_types(&node.read(name)).contains(&vocab::PLUGIN_TYPE.to_string()));

    // A repair that fails: the token the kubeconfig is written from turns empty.
    fs::write(node.sa.join("token"), "").expect("empty token");
    wait_unready(&ready, "service-account token");
    fs::write(node.sa.join("token"), "token-2\n").expect("token back");
    wait_ready(&ready);

    // The installed binary removed out from under the installer: it is put back, and ready stays.
    fs::remove_file(node.binary()).expect("remove the binary");
    wait_for("the binary reinstalled", || {
        node.binary().exists().then_some(())
    });
    wait_ready(&ready);

    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(!ready.exists(), "SIGTERM removes the status file");
    let after = probe(&ready);
    assert_eq!(after.status.code(), Some(1), "{}", stdout(&after));
}

/// A restarted container finds the previous run's status file in its emptyDir: it does not count.
#[test]
#[ignore = "needs the installer running for seconds as a process: run by e2e/test-all"]
fn a_previous_runs_status_does_not_count() {
    let node = Node::with(&["10-flannel.conflist"]);
    let (_tmp, ready) = container_tmp();
    let ready_arg = ready.to_str().expect("utf-8 path");
    let first = node.spawn(&["--ready-file", ready_arg]);
    wait_ready(&ready);
    first.kill(); // SIGKILL: no cleanup, the file stays
    assert!(
        probe(&ready).status.success(),
        "the old file is still there"
    );

    fs::remove_file(node.sa.join("token")).expect("no token this time");
    let _second = node.spawn(&["--ready-file", ready_arg]);
    wait_unready(&ready, "cannot read the service-account file");
}

/// `--ready-check` is refused without the file to read, and the status file is no network config:
/// nothing of it lands in the node's directories.
#[test]
#[ignore = "needs the installer running for seconds as a process: run by e2e/test-all"]
fn the_status_file_stays_out_of_the_node() {
    let out = std::process::Command::new(INSTALLER)
        .env_remove("READY_FILE")
        .arg("--ready-check")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--ready-file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let node = Node::with(&["10-flannel.conflist"]);
    let (_tmp, ready) = container_tmp();
    let running = node.spawn(&["--ready-file", ready.to_str().expect("utf-8")]);
    wait_ready(&ready);
    assert_eq!(
        node.names(),
        vec!["10-flannel.conflist".to_string(), KUBECONFIG.to_string()]
    );
    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
}
