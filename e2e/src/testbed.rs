//! Finding the running testbed: its kubeconfig, a client for it, kubectl against it.

use std::path::PathBuf;
use std::process::{Command, Output};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// How to start the control plane, repeated in every failure message.
const HOW_TO_START: &str = "start the local control plane with `e2e/testbed up` \
     (or run the whole suite with the README's test command)";

/// The workspace root (the directory holding the top-level Cargo.toml).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ has a parent")
        .to_path_buf()
}

/// Where `e2e/testbed` keeps its state; `LINKERD_MULTUS_TESTBED_DIR` overrides it, as for the script.
pub fn testbed_dir() -> PathBuf {
    std::env::var_os("LINKERD_MULTUS_TESTBED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".testbed"))
}

/// The testbed's admin kubeconfig. Panics, saying how to start it, when the testbed is not up.
pub fn kubeconfig_path() -> PathBuf {
    let path = testbed_dir().join("kubeconfig");
    assert!(
        path.is_file(),
        "no control plane: {} does not exist; {HOW_TO_START}",
        path.display()
    );
    path
}

/// A kube client for the testbed's apiserver, checked with a `/readyz`-style version call.
pub async fn client() -> Client {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; {HOW_TO_START}", path.display()));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("bad kubeconfig {}: {e}; {HOW_TO_START}", path.display()));
    let client = Client::try_from(config).expect("building a kube client");
    if let Err(e) = client.apiserver_version().await {
        panic!("the control plane in {} does not answer: {e}; {HOW_TO_START}", path.display());
    }
    client
}

/// Runs `kubectl` against the testbed and returns its output (whatever the exit status).
pub fn kubectl(args: &[&str]) -> Output {
    Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(kubeconfig_path())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl: {e}; {HOW_TO_START}"))
}

/// The kubectl the testbed chose (it records it in `$TESTBED/kubectl-path`), else the one on PATH.
fn kubectl_binary() -> PathBuf {
    std::fs::read_to_string(testbed_dir().join("kubectl-path"))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|_| PathBuf::from("kubectl"))
}
