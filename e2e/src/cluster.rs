//! A cluster as tests reach it: its admin kubeconfig, and kubectl and a kube client against it. The
//! shared testbed, a [`crate::DedicatedTestbed`] and a [`crate::node::Node`] are each one of these.

use std::path::{Path, PathBuf};
use std::process::Output;

use kube::Client;
use serde_json::Value;

use crate::testbed::{client_from, kubectl_ok_with, kubectl_with};

/// A cluster's admin kubeconfig, and what the tests run against it.
#[derive(Debug, Clone)]
pub struct Cluster {
    kubeconfig: PathBuf,
}

impl Cluster {
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self { kubeconfig }
    }

    /// The shared testbed `e2e/testbed up` started. Panics, saying how to start it, when it is not up.
    pub fn shared() -> Self {
        Self::new(crate::kubeconfig_path())
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig.clone()
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    pub async fn client(&self) -> Client {
        client_from(&self.kubeconfig).await
    }

    /// kubectl whatever its exit status.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl_with(&self.kubeconfig, args)
    }

    /// kubectl that must succeed: its stdout. Panics with the command and its stderr.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        kubectl_ok_with(&self.kubeconfig, args)
    }

    /// Starts deleting `namespaces` (no pod can be created in them then) and removes the pods of those
    /// `force_pods` selects at once, without their grace period: a cleanup that waited for pods whose
    /// sandbox never came up to end took 100 s and more on the v1.20 node (measured). The caller then
    /// waits for the namespaces to be gone.
    pub fn start_deleting_namespaces(
        &self,
        namespaces: &[&str],
        force_pods: impl Fn(&str) -> bool,
    ) {
        let mut args = vec!["delete", "namespace", "--ignore-not-found", "--wait=false"];
        args.extend(namespaces);
        let _ = self.kubectl(&args);
        for ns in namespaces.iter().filter(|ns| force_pods(ns)) {
            let _ = self.kubectl(&[
                "-n",
                ns,
                "delete",
                "pods",
                "--all",
                "--force",
                "--grace-period=0",
            ]);
        }
    }

    /// helm against this cluster whatever its exit status ([`crate::chart::helm`]).
    pub fn helm(&self, args: &[&str]) -> Output {
        crate::chart::helm(&self.helm_args(args))
    }

    /// helm against this cluster that must succeed: its stdout ([`crate::chart::helm_ok`]).
    pub fn helm_ok(&self, args: &[&str]) -> String {
        crate::chart::helm_ok(&self.helm_args(args))
    }

    fn helm_args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let kubeconfig = self.kubeconfig.to_str().expect("a UTF-8 kubeconfig path");
        let mut all = vec!["--kubeconfig", kubeconfig];
        all.extend_from_slice(args);
        all
    }

    /// `kubectl get ARGS -o json`, `None` when not found.
    pub fn get_json(&self, args: &[&str]) -> Option<Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json", "--ignore-not-found"]);
        let out = self.kubectl_ok(&all);
        (!out.trim().is_empty())
            .then(|| serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl json: {e}")))
    }

    /// What the server would store for `object` (`kubectl create --dry-run=server`, in `namespace` when
    /// given): how a test asks whether the server keeps a field it may not know. Panics with kubectl's
    /// stderr when the server refuses it.
    pub fn dry_run_stored(&self, namespace: Option<&str>, object: &Value) -> Value {
        let file = std::env::temp_dir().join(crate::unique_name("dry-run"));
        std::fs::write(&file, object.to_string())
            .unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
        let mut args = namespace.map_or_else(Vec::new, |ns| vec!["-n", ns]);
        // kubectl's own schema (1.20's) would refuse an unknown field before the server is asked.
        args.extend([
            "create",
            "--dry-run=server",
            "--validate=false",
            "-o",
            "json",
            "-f",
        ]);
        args.push(file.to_str().expect("a UTF-8 temp path"));
        let out = self.kubectl_ok(&args);
        let _ = std::fs::remove_file(&file);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("the dry run's object: {e}: {out}"))
    }

    /// `kubectl describe` of `what` in `namespace` plus the namespace's events: what a failure shows.
    pub fn describe(&self, namespace: &str, what: &str) -> String {
        let text = |o: Output| {
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
        };
        format!(
            "--- kubectl describe {what}:\n{}\n--- events in {namespace}:\n{}",
            text(self.kubectl(&["-n", namespace, "describe", what])),
            text(self.kubectl(&["-n", namespace, "get", "events", "--sort-by=.lastTimestamp"]))
        )
    }
}
