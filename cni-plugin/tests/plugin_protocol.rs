//! The `linkerd-cni` binary's protocol behaviour, run as a runtime runs it: VERSION, errors as CNI
//! error objects on stdout (and nothing else there), pass-through for non-pods, an unreachable
//! apiserver. Needs no apiserver and no root.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_linkerd-cni");

/// Runs the binary with `env` (plus nothing inherited but PATH) and `stdin`.
fn run(env: &[(&str, &str)], stdin: &Value) -> Output {
    let mut child = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run linkerd-cni");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.to_string().as_bytes())
        .expect("write config");
    child.wait_with_output().expect("wait")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {:?}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

const ADD_ENV: [(&str, &str); 4] = [
    ("CNI_COMMAND", "ADD"),
    ("CNI_CONTAINERID", "c1"),
    ("CNI_NETNS", "/run/netns/linkerd-cni-protocol-test-absent"),
    ("CNI_IFNAME", "eth0"),
];

/// A runtime decides from this answer whether it may call us with its version.
#[test]
fn version_lists_the_supported_versions() {
    let out = run(
        &[("CNI_COMMAND", "VERSION")],
        &json!({"cniVersion": "0.4.0"}),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout_json(&out),
        json!({"cniVersion": "0.4.0", "supportedVersions": ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]})
    );
}

/// Multus calls an extra attachment without prevResult; a non-pod caller gets the result back
/// untouched (converted to the config's version) and no pod lookup happens (the kubeconfig here
/// does not even exist).
#[test]
fn not_a_pod_passes_through() {
    let cfg = json!({"cniVersion": "1.0.0", "name": "n", "type": "linkerd-cni",
        "kubernetes": {"kubeconfig": "/nonexistent/kubeconfig"}});
    let out = run(&ADD_ENV, &cfg);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout_json(&out), json!({"cniVersion": "1.0.0", "dns": {}}));

    let mut with_prev = cfg.clone();
    with_prev["prevResult"] = json!({"cniVersion": "0.3.1",
        "ips": [{"version": "4", "address": "10.1.2.3/24", "interface": 0}],
        "interfaces": [{"name": "eth0"}], "dns": {}});
    let out = run(&ADD_ENV, &with_prev);
    assert_eq!(
        stdout_json(&out),
        json!({"cniVersion": "1.0.0", "ips": [{"address": "10.1.2.3/24", "interface": 0}],
               "interfaces": [{"name": "eth0"}], "dns": {}})
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("linkerd-cni: INFO") && stderr.contains("not a pod"),
        "{stderr}"
    );
}

/// Every failure is a CNI error object on stdout, a non-zero exit, and the key to fix.
#[test]
fn broken_configs_are_cni_errors_naming_the_key() {
    let cases = [
        (
            json!({"cniVersion": "0.3.1", "linkerd": {"proxy-uid": "2102"}}),
            7,
            "linkerd.proxy-uid",
        ),
        (
            json!({"cniVersion": "0.3.1", "linkerd": {"inbound-ports-to-ignore": ["80", "x"]}}),
            7,
            "linkerd.inbound-ports-to-ignore",
        ),
        (
            json!({"cniVersion": "0.3.1", "linkerd": {"iptables-mode": "iptables"}}),
            7,
            "linkerd.iptables-mode",
        ),
        (
            json!({"cniVersion": "0.3.1", "kubernetes": {"kubeconfig": false}}),
            7,
            "kubernetes.kubeconfig",
        ),
        (json!({"cniVersion": "0.2.0"}), 1, ""),
    ];
    for (cfg, code, key) in cases {
        let out = run(&ADD_ENV, &cfg);
        assert_eq!(out.status.code(), Some(1), "{cfg}");
        let err = stdout_json(&out);
        assert_eq!(err["code"], code, "{cfg}: {err}");
        assert_eq!(err["details"], key, "{cfg}: {err}");
        assert!(
            err["msg"].as_str().unwrap_or_default().contains(key),
            "{err}"
        );
        assert!(err.get("cniVersion").is_some(), "{err}");
    }
    // Not JSON at all: decode failure, still a proper error object.
    let out = Command::new(BIN)
        .env_clear()
        .envs(ADD_ENV.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(stdout_json(&out)["code"], 6);
}

#[test]
fn missing_environment_is_code_4() {
    let out = run(&[("CNI_COMMAND", "ADD")], &json!({"cniVersion": "1.0.0"}));
    assert_eq!(out.status.code(), Some(1));
    let err = stdout_json(&out);
    assert_eq!(
        (err["code"].as_u64(), err["cniVersion"].as_str()),
        (Some(4), Some("1.0.0"))
    );
    assert!(
        err["msg"]
            .as_str()
            .unwrap_or_default()
            .contains("CNI_CONTAINERID"),
        "{err}"
    );
}

/// CHECK does not exist before 0.4.0; STATUS (1.1) just answers ready.
#[test]
fn check_needs_0_4_0_and_status_succeeds() {
    let mut env = ADD_ENV;
    env[0] = ("CNI_COMMAND", "CHECK");
    let out = run(&env, &json!({"cniVersion": "0.3.1"}));
    assert_eq!(stdout_json(&out)["code"], 1);
    let out = run(
        &[("CNI_COMMAND", "STATUS")],
        &json!({"cniVersion": "1.1.0"}),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

/// An apiserver that does not answer fails ADD within seconds (through a NAD: no aux-chain marker), as
/// "try again later" (11), naming the URL and the kubeconfig so an operator can fix it; a kubeconfig
/// that is gone passes the pod through (the product uninstalled).
#[test]
fn unreachable_apiserver_is_a_clear_retryable_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on: bind, note, close.
    let port = linkerd_multus_e2e::free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .expect("write kubeconfig");
    let mut env = ADD_ENV.to_vec();
    env.push(("CNI_ARGS", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p"));
    let cfg = json!({"cniVersion": "0.4.0", "kubernetes": {"kubeconfig": kubeconfig}});
    let out = run(&env, &cfg);
    assert_eq!(out.status.code(), Some(1));
    let err = stdout_json(&out);
    assert_eq!(err["code"], 11, "{err}");
    let msg = err["msg"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("127.0.0.1:{port}"))
            && msg.contains(kubeconfig.to_str().unwrap_or("?")),
        "{msg}"
    );

    // A kubeconfig that does not exist is the product's absence (uninstalled): the pod is passed
    // through with the result and no rules, and the log names the file.
    let cfg = json!({"cniVersion": "0.4.0", "kubernetes": {"kubeconfig": "/nonexistent/kc"}});
    let out = run(&env, &cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stdout_json(&out),
        json!({"cniVersion": "0.4.0", "dns": {}}),
        "{stderr}"
    );
    assert!(
        stderr.contains("passing the pod through without rules")
            && stderr.contains("/nonexistent/kc"),
        "{stderr}"
    );
}

/// `log_file` gets the same prefixed lines as stderr.
#[test]
fn logs_go_to_stderr_and_the_log_file_never_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("cni.log");
    let cfg = json!({"cniVersion": "0.3.1", "log_level": "debug", "log_file": log});
    let out = run(&ADD_ENV, &cfg);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout_json(&out), json!({"cniVersion": "0.3.1", "dns": {}}));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = std::fs::read_to_string(&log).expect("log file written");
    assert!(!file.is_empty());
    assert_eq!(file, stderr);
    assert!(
        file.lines().all(|l| l.starts_with("linkerd-cni: ")),
        "{file}"
    );
    assert!(
        file.contains("DEBUG"),
        "log_level debug is honoured: {file}"
    );
    assert!(
        !file.contains('\x1b'),
        "no terminal colour codes in logs: {file:?}"
    );
}
