//! The real `linkerd-multus-operator` binary as a process: it serves the admin endpoints, runs the
//! controller next to the webhook, logs JSON when asked, and exits 0 on SIGTERM; without a cluster it
//! says so in one plain line.

mod support;

use std::process::{Command, Stdio};
use std::time::Instant;

use linkerd_multus_e2e::{free_port, kubeconfig_path, TestNamespace};
use support::*;

/// Kills the operator process (by its pid) if the test fails before stopping it.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// No cluster to reach: one error line naming what it tried, exit 1, and no colour codes (stderr is
/// a container log or a file, not a terminal). Needs only the built binary.
#[test]
fn without_a_cluster_it_says_so_in_plain_text() {
    let out = Command::new(env!("CARGO_BIN_EXE_linkerd-multus-operator"))
        .env("KUBECONFIG", "/nonexistent/linkerd-multus-kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NO_COLOR")
        .args([
            "--admin-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run the operator binary");
    let logs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{logs}");
    assert!(
        logs.contains("cannot build a Kubernetes client") && logs.contains("KUBECONFIG"),
        "{logs}"
    );
    assert!(
        !logs.contains('\u{1b}'),
        "colour codes in a log that is not a terminal: {logs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn binary_runs_and_stops_on_sigterm() {
    let h = Harness::new("op-proc").await;
    let home = TestNamespace::create(&h.client, "op-proc-home").await;
    let ns = h.namespace("op-proc", Some(vocab::MULTUS_ENABLED)).await;
    let admin = format!("127.0.0.1:{}", free_port());
    let webhook = format!("127.0.0.1:{}", free_port());
    let selector = format!("{RUN_LABEL}={}", h.run_id);
    let child = Command::new(env!("CARGO_BIN_EXE_linkerd-multus-operator"))
        .env("KUBECONFIG", kubeconfig_path())
        .env("RUST_LOG", "info")
        .env("CNI_NAMESPACE", &h.cni_ns.name)
        .env("CNI_CONFIGMAP", &h.cm_name)
        .args([
            "--linkerd-namespace",
            &h.linkerd_ns,
            "--nad-name",
            &h.nad_name,
        ])
        .args(["--namespace", &home.name, "--namespace-selector", &selector])
        // A policy is cluster-wide: only operator/tests/admission_mode.rs runs one.
        .args(["--admission", "webhook"])
        .args(["--admin-addr", &admin, "--webhook-addr", &webhook])
        .args([
            "--webhook-cert-secret",
            "op-proc-webhook-cert",
            "--log-format",
            "json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the operator binary");

    let client = reqwest::Client::new();
    let mut guard = KillOnDrop(Some(child));
    eventually("the process answers /ready 200", || async {
        let r = client
            .get(format!("http://{admin}/ready"))
            .send()
            .await
            .ok()?;
        (r.status().as_u16() == 200).then_some(())
    })
    .await;
    h.wait_nad_config(&ns.name, &expected_config("info", "nft"))
        .await;
    let live = client
        .get(format!("http://{admin}/live"))
        .send()
        .await
        .expect("/live");
    assert_eq!(live.status().as_u16(), 200);
    let metrics = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("body");
    assert!(
        metrics.contains("linkerd_multus_controller_nad_writes_total{op=\"create\"} 1"),
        "{metrics}"
    );

    let mut child = guard.0.take().expect("child");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -TERM: {status}");
    let started = Instant::now();
    let exit = eventually("the operator stops after SIGTERM", || {
        let exit = child.try_wait().expect("wait");
        async move { exit }
    })
    .await;
    eprintln!("MEASURE SIGTERM -> exit: {:?}", started.elapsed());
    let mut logs = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut logs)
        .expect("read logs");
    assert!(exit.success(), "exit {exit:?}; logs:\n{logs}");
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("--log-format json wrote a non-JSON line ({e}): {line}"));
    }
    assert!(logs.contains("SIGTERM"), "{logs}");
}
