//! The lifecycle drill of the node scenario (issue 33): the product is in every pod's path, so each
//! of `helm upgrade` (a rollout of the installer while pods are created), `helm rollback`, `helm
//! uninstall` and a reinstall must leave every other pod able to start. Run once per attach mode, on
//! the release the scenario has installed in that mode.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::{unique_name, wait_for_explained};
use serde_json::json;

use super::*;

/// How long a plain pod may take to be Ready after `helm uninstall` returned (the bound).
const AFTER_UNINSTALL: Duration = Duration::from_secs(60);
/// Pods created during a rollout, one every [`CREATE_EVERY`].
const PODS_PER_ROLLOUT: usize = 6;
const CREATE_EVERY: Duration = Duration::from_millis(700);

/// What the drill needs of the scenario: the node, the release's install settings for this mode, and
/// the files the installer writes on the node in this mode.
pub struct Lifecycle<'a> {
    pub node: &'a Node,
    /// `--set` values the release was installed or upgraded with on top of [`values`].
    pub sets: Vec<String>,
    /// linkerd-cni's file in Multus' auxiliary chain (aux-chain mode), else `None`.
    pub chain_file: Option<PathBuf>,
    /// A short name of the mode for messages and namespace names.
    pub mode: &'static str,
}

impl Lifecycle<'_> {
    /// upgrade → rollback → uninstall → reinstall, each while or just before plain pods start.
    pub fn run(&self, cleanup: &mut Cleanup) {
        self.upgrade_and_rollback(cleanup);
        self.uninstall_and_reinstall(cleanup);
    }

    /// `helm upgrade` (a value of the installer's pod changed, so its DaemonSet rolls) and `helm
    /// rollback`, each while plain pods are created in a namespace of this drill.
    pub fn upgrade_and_rollback(&self, cleanup: &mut Cleanup) {
        let plain = create_namespace(self.node, cleanup, &format!("lc-{}", self.mode));
        self.while_creating_pods(&plain, "helm upgrade (the installer rolls)", || {
            helm_upgrade(self.node, &["cni.logLevel=debug"])
        });
        wait_daemonset_ready(self.node, CNI_NS, CNI_DAEMONSET);
        self.while_creating_pods(&plain, "helm rollback", || {
            self.node
                .helm_ok(&["rollback", RELEASE, "-n", RELEASE_NS, "--wait"]);
        });
        wait_daemonset_ready(self.node, CNI_NS, CNI_DAEMONSET);
    }

    /// `helm uninstall` leaves nothing in the pods' path; the same install afterwards works.
    pub fn uninstall_and_reinstall(&self, cleanup: &mut Cleanup) {
        self.uninstall_leaves_nothing_in_the_path(cleanup);
        self.reinstall();
    }

    /// Runs `action` while [`PODS_PER_ROLLOUT`] plain pods are created in `ns`: every one Running and
    /// Ready, and no `FailedCreatePodSandBox` in `ns` meanwhile.
    fn while_creating_pods(&self, ns: &str, what: &str, action: impl FnOnce() + Send) {
        let node = self.node;
        let before = sandbox_failures(node, ns);
        let start = Instant::now();
        let names: Vec<String> = std::thread::scope(|s| {
            let acting = s.spawn(action);
            let names = (0..PODS_PER_ROLLOUT)
                .map(|_| {
                    let name = unique_name("p");
                    apply(node, &plain_pod(node, ns, &name));
                    std::thread::sleep(CREATE_EVERY);
                    name
                })
                .collect();
            acting
                .join()
                .unwrap_or_else(|_| panic!("{what} failed (see above)"));
            names
        });
        for name in &names {
            wait_ready(node, ns, name, READY_WITHIN);
        }
        let failed = sandbox_failures(node, ns) - before;
        eprintln!(
            "{}: {what} while creating {} pods -> all Ready in {:?}, {failed} failed sandboxes",
            self.mode,
            names.len(),
            start.elapsed()
        );
        assert_eq!(
            failed,
            0,
            "{}: no sandbox fails during {what}: {}",
            self.mode,
            node.describe(ns, "pods")
        );
    }

    /// `helm uninstall`: within [`AFTER_UNINSTALL`] a plain pod in a namespace created after it is
    /// Ready with no failed sandbox, and the installer left none of its files in the pods' path.
    fn uninstall_leaves_nothing_in_the_path(&self, cleanup: &mut Cleanup) {
        let node = self.node;
        node.helm_ok(&["uninstall", RELEASE, "-n", RELEASE_NS, "--wait"]);
        let uninstalled = Instant::now();
        let ns = create_namespace(node, cleanup, &format!("after-uninstall-{}", self.mode));
        let name = "p1";
        apply(node, &plain_pod(node, &ns, name));
        wait_ready(
            node,
            &ns,
            name,
            AFTER_UNINSTALL.saturating_sub(uninstalled.elapsed()),
        );
        eprintln!(
            "{}: helm uninstall -> a plain pod in a new namespace Ready in {:?}",
            self.mode,
            uninstalled.elapsed()
        );
        assert_eq!(
            sandbox_failures(node, &ns),
            0,
            "{}: no failed sandbox after uninstall: {}",
            self.mode,
            node.describe(&ns, "pods")
        );
        wait_for_explained(
            "the installer pods are gone",
            READY_WITHIN,
            || installer_pods(node).is_empty().then_some(()),
            || node.describe(CNI_NS, "pods"),
        );
        let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
        let left: Vec<_> = self
            .chain_file
            .iter()
            .chain([&kubeconfig])
            .filter(|f| f.exists())
            .collect();
        assert!(
            left.is_empty(),
            "{}: helm uninstall leaves none of the installer's files in the pods' path: {left:?}",
            self.mode
        );
    }

    /// The same install again works: the operator and the installer are Ready, and the installer's
    /// files are back.
    fn reinstall(&self) {
        let node = self.node;
        let sets: Vec<&str> = self.sets.iter().map(String::as_str).collect();
        let start = Instant::now();
        helm_install(node, &sets);
        wait_deployment_ready(node, RELEASE_NS, OPERATOR);
        wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
        eprintln!(
            "{}: reinstall -> operator and installer Ready in {:?}",
            self.mode,
            start.elapsed()
        );
        if let Some(file) = &self.chain_file {
            assert!(file.is_file(), "{}: the chain file is back", self.mode);
        }
        let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
        assert!(
            kubeconfig.is_file(),
            "{}: the kubeconfig is back",
            self.mode
        );
    }
}

/// A pod of the test image's app only: no proxy, not meshed.
pub fn plain_pod(node: &Node, ns: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "plain"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "app", "image": image(node, "test"), "imagePullPolicy": "Never", "args": ["app"]}]},
    })
}

/// Waits until pod `ns/name` is Running and Ready, failing with its description after `within`.
pub fn wait_ready(node: &Node, ns: &str, name: &str, within: Duration) {
    wait_for_explained(
        &format!("pod {ns}/{name} Running and Ready"),
        within,
        || {
            let p = node.get_json(&["-n", ns, "pod", name])?;
            (p["status"]["phase"] == "Running" && is_ready(&p)).then_some(())
        },
        || node.describe(ns, &format!("pod/{name}")),
    );
}

/// The `FailedCreatePodSandBox` Events of `ns`, counted with their repeats.
pub fn sandbox_failures(node: &Node, ns: &str) -> i64 {
    events(
        node,
        ns,
        "FailedCreatePodSandBox",
        &["jsonpath={range .items[*]}{.count}{\"\\n\"}{end}"],
    )
    .lines()
    .map(|c| c.trim().parse::<i64>().unwrap_or(1))
    .sum()
}
