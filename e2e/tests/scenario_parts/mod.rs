//! The pieces of the whole-product scenarios (`scenario.rs`, `scenario_shared_nad.rs`): the operator as
//! a process, a dedicated control plane, a node played by hand the way Multus does it.

#![allow(dead_code)] // each scenario uses its own subset

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use linkerd_multus_e2e::cni::{Network, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::operator_process::OperatorProcess;
use linkerd_multus_e2e::traffic::{ask, Answerer};
use linkerd_multus_e2e::{apply_nad_crd, binary, free_port, wait_for_within, DedicatedTestbed};
use serde_json::{json, Value};

pub const UID_RANGE: &str = "1000650000/10000";
pub const PROXY_UID: u32 = 1_000_650_000 + 2102;
pub const WEBHOOK_CONFIG: &str = "linkerd-multus-e2e";

/// Linkerd's `linkerd2-cni` chart ConfigMap value, placeholders and all (the repository's one copy),
/// with the plugin logging at debug and these inbound ports ignored.
pub fn cni_network_config(inbound_ports_to_ignore: &[&str]) -> String {
    let mut v: Value = serde_json::from_str(include_str!(
        "../../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    v["log_level"] = json!("debug");
    v["linkerd"]["inbound-ports-to-ignore"] = json!(inbound_ports_to_ignore);
    v.to_string()
}

// === the pieces of the scenario ===

/// The operator as a real process (the kit's): killed and reaped when dropped.
pub fn start_operator(bed: &Cluster, webhook_port: u16) -> OperatorProcess {
    start_operator_with(bed, webhook_port, &[])
}

/// Started with `flags` added to the ones every scenario uses; returns once `/ready` answers.
pub fn start_operator_with(bed: &Cluster, webhook_port: u16, flags: &[&str]) -> OperatorProcess {
    let log = bed.dir.join(format!(
        "{}.log",
        linkerd_multus_e2e::unique_name("operator")
    ));
    let op = OperatorProcess::command(
        &binary("linkerd-multus-operator"),
        &bed.testbed.kubeconfig(),
        log,
    )
    .env("RUST_LOG", "info")
    .args(["--namespace", "linkerd-multus", "--cni-kubeconfig"])
    .arg(bed.plugin_kubeconfig())
    .args(["--webhook-addr", &format!("127.0.0.1:{webhook_port}")])
    .args(["--webhook-cert-secret", "linkerd-multus-webhook-cert"])
    .args(["--webhook-config-name", WEBHOOK_CONFIG])
    // The scenarios exercise the webhook; on a server with MutatingAdmissionPolicy `auto` would
    // take the policy path (operator/tests/admission_mode.rs tests that one).
    .args(["--admission", "webhook"])
    .args(flags)
    .spawn()
    .expect("starting linkerd-multus-operator");
    op.wait_ready_blocking(Duration::from_secs(60));
    op
}

/// The dedicated control plane and a scratch directory for the node's files.
pub struct Cluster {
    pub testbed: DedicatedTestbed,
    pub dir: PathBuf,
}

impl Cluster {
    pub fn up() -> Self {
        let testbed = DedicatedTestbed::up("e2e-scenario");
        let dir = std::env::temp_dir().join(linkerd_multus_e2e::unique_name("e2e-node"));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        // On a node the installer writes the plugin's kubeconfig; here it is the test cluster's.
        std::fs::copy(testbed.kubeconfig(), dir.join("linkerd-cni-kubeconfig"))
            .expect("plugin kubeconfig");
        Self { testbed, dir }
    }

    pub fn plugin_kubeconfig(&self) -> PathBuf {
        self.dir.join("linkerd-cni-kubeconfig")
    }

    /// kubectl that must succeed; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.testbed.kubectl_ok(args)
    }

    /// `kubectl apply` of `manifest` (through a file, so it goes through the same kubectl as the rest).
    pub fn apply(&self, manifest: &str) {
        let file = self.dir.join(linkerd_multus_e2e::unique_name("manifest"));
        std::fs::write(&file, manifest).expect("writing the manifest");
        self.kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    }

    /// `kubectl get ... -o json`, or None when it is not found.
    pub fn get(&self, args: &[&str]) -> Option<Value> {
        self.testbed.get_json(args)
    }

    /// The first Event of `namespace` with `reason`.
    pub fn event(&self, namespace: &str, reason: &str) -> Option<Value> {
        self.get(&["-n", namespace, "events"])?["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == reason)
            .cloned()
    }

    /// Every NAD named linkerd-cni, as `namespace` names (sorted).
    pub fn nad_namespaces(&self) -> Vec<String> {
        // With --ignore-not-found, kubectl prints nothing at all for an empty list.
        let Some(list) = self.get(&["--all-namespaces", "network-attachment-definitions"]) else {
            return Vec::new();
        };
        let mut names: Vec<String> = list["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|n| n["metadata"]["name"] == "linkerd-cni")
            .filter_map(|n| n["metadata"]["namespace"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    }

    pub fn nad(&self, namespace: &str) -> Option<Value> {
        self.get(&[
            "-n",
            namespace,
            "network-attachment-definitions",
            "linkerd-cni",
        ])
    }

    pub fn nad_config(&self, namespace: &str) -> Option<Value> {
        let nad = self.nad(namespace)?;
        Some(serde_json::from_str(nad["spec"]["config"].as_str()?).expect("NAD config is JSON"))
    }

    pub fn set_cni_config(&self, config: &str) {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "linkerd-cni-config", "namespace": "linkerd-cni"},
            "data": {"cni_network_config": config},
        });
        self.apply(&cm.to_string());
    }

    pub fn create_pod(&self, namespace: &str, name: &str) -> Value {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "automountServiceAccountToken": false,
                "containers": [
                    {"name": "app", "image": "example.com/app:1"},
                    {"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:stable"}
                ]
            }
        });
        self.apply(&pod.to_string());
        self.get(&["-n", namespace, "pod", name])
            .expect("the pod was stored")
    }

    /// `linkerd-multus-operator check -o json` against this cluster: (exit success, report).
    pub fn check(&self) -> (bool, Value) {
        self.check_with(&[])
    }

    /// `check` given the operator's `flags` too.
    pub fn check_with(&self, flags: &[&str]) -> (bool, Value) {
        let out = Command::new(binary("linkerd-multus-operator"))
            .env("KUBECONFIG", self.testbed.kubeconfig())
            .args(["check", "-o", "json", "--cni-kubeconfig"])
            .arg(self.plugin_kubeconfig())
            // As the scenario's operator runs (`start_operator_with`).
            .args(["--admission", "webhook"])
            .args(flags)
            .output()
            .expect("running check");
        let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "check printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.success(), report)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The node: a pod network namespace on a bridge, with linkerd-cni run from the NAD like Multus would.
pub struct Node {
    pub netns: NetNs,
    pub primary: Network,
    pub runtime: Runtime,
    pub pod_ip: String,
    pub gateway: String,
    pub bridge: String,
}

impl Node {
    /// Sets up the pod's primary network (bridge + host-local), as the cluster's CNI would; `n` tells
    /// the test's pods apart (bridge name, subnet).
    pub fn start_pod(cluster: &Cluster, namespace: &str, pod: &str, n: u32) -> Self {
        // Unique per process (the host's netns is shared with the other tiers' scenarios, which ran
        // into each other's `lme2e0` on 2026-11-29): at most 15 characters, "lm" + pid + "b" + n.
        let bridge = format!("lm{}b{n}", std::process::id());
        // Unique per process, away from the ranges the plugin's own tests draw from.
        let subnet = format!("10.{}.{}.0/24", 252 + n, std::process::id() % 250);
        let netns = NetNs::create("e2e-pod");
        let primary = Network::new(
            json!({
                "cniVersion": "0.4.0", "name": "e2e-primary",
                "plugins": [{
                    "type": "bridge", "bridge": &bridge, "isGateway": true, "ipMasq": false,
                    "ipam": {"type": "host-local", "subnet": subnet, "dataDir": cluster.dir.join("ipam")}
                }]
            }),
            vec![PathBuf::from("/usr/lib/cni")],
        );
        let runtime = Runtime::new(&netns.path()).with_pod(namespace, pod);
        let result = primary
            .add(&runtime)
            .unwrap_or_else(|e| panic!("bridge ADD: {e}"));
        let ip = &result["ips"][0];
        let pod_ip = ip["address"]
            .as_str()
            .expect("address")
            .split('/')
            .next()
            .expect("ip")
            .to_string();
        let gateway = ip["gateway"].as_str().expect("gateway").to_string();
        Self {
            netns,
            primary,
            runtime,
            pod_ip,
            gateway,
            bridge,
        }
    }

    /// Multus' part: run the NAD's plugin as an extra attachment (no prevResult, its own interface).
    pub fn attach_linkerd_cni(&self, nad_config: &Value) -> Result<Value, String> {
        let mut rt = self.runtime.clone();
        rt.ifname = "net1".into();
        let net = Network::new(
            json!({"cniVersion": nad_config["cniVersion"], "name": nad_config["name"], "plugins": [nad_config]}),
            vec![binary("linkerd-cni")
                .parent()
                .expect("bin dir")
                .to_path_buf()],
        );
        net.add(&rt).map_err(|e| e.to_string())
    }

    /// Real traffic takes the proxy's ports: a connection to the pod's 8080 lands on 4143, the pod's
    /// own connection out on 4140. The answerers standing in for the proxy live as long as the guard.
    pub fn assert_redirects(&self) -> (Answerer, Answerer) {
        let listen = |port: u16| {
            self.netns
                .run(|| TcpListener::bind(("0.0.0.0", port)))
                .unwrap_or_else(|e| panic!("bind {port}: {e}"))
        };
        let proxy = (
            Answerer::start(listen(4143), "inbound-proxy"),
            Answerer::start(listen(4140), "outbound-proxy"),
        );
        let pod_addr: SocketAddr = format!("{}:8080", self.pod_ip).parse().expect("pod addr");
        assert_eq!(ask(pod_addr).expect("host → pod:8080"), "inbound-proxy");
        let elsewhere: SocketAddr = format!("{}:9", self.gateway).parse().expect("gateway addr");
        assert_eq!(
            self.netns.run(|| ask(elsewhere)).expect("pod → gateway:9"),
            "outbound-proxy"
        );
        proxy
    }

    pub fn nat_rules(&self) -> String {
        let out = self.netns.exec(&["iptables-legacy-save", "-t", "nat"]);
        assert!(out.status.success(), "iptables-legacy-save");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Node {
    // DEL releases the address and the veth; the bridge itself is the test's to remove.
    fn drop(&mut self) {
        let _ = self.primary.del(&self.runtime, None);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

// === small utilities ===

/// The kit's [`wait_for_within`], printing `context()` (e.g. a log tail) when it fails.
pub fn wait_until<T>(
    what: &str,
    timeout: Duration,
    f: impl FnMut() -> Option<T>,
    context: impl Fn() -> String,
) -> T {
    struct OnFailure<C: Fn() -> String>(C);
    impl<C: Fn() -> String> Drop for OnFailure<C> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!("{}", (self.0)());
            }
        }
    }
    let _context = OnFailure(context);
    wait_for_within(what, timeout, f)
}

pub fn annotations(obj: &Value) -> serde_json::Map<String, Value> {
    obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

pub fn expected_nad_config(kubeconfig: &Path, inbound_ignored: &[&str]) -> Value {
    json!({
        "cniVersion": "0.3.1",
        "name": "linkerd-cni",
        "type": "linkerd-cni",
        "log_level": "debug",
        "kubernetes": {"kubeconfig": kubeconfig},
        "linkerd": {
            "incoming-proxy-port": 4143,
            "outgoing-proxy-port": 4140,
            "proxy-uid": 2102,
            "ports-to-redirect": [],
            "inbound-ports-to-ignore": inbound_ignored,
            "simulate": false,
            "use-wait-flag": false,
            "iptables-mode": "legacy",
            "ipv6": false
        }
    })
}

pub fn failed_checks(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The items of one check of a `check -o json` report.
pub fn check_items(report: &Value, check: &str) -> Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["check"] == check))
        .unwrap_or_else(|| panic!("no {check} check: {report:#}"))["items"]
        .clone()
}

/// The operator's self-managed CA lands in the webhook configuration.
pub fn wait_for_ca_bundle(c: &Cluster, operator: &OperatorProcess) {
    wait_until(
        "the caBundle",
        Duration::from_secs(30),
        || {
            let mwc = c.get(&["mutatingwebhookconfiguration", WEBHOOK_CONFIG])?;
            mwc["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .filter(|b| !b.is_empty())
                .map(|_| ())
        },
        || operator.log_report(),
    );
}

/// What the cluster has before the operator: Multus' CRD, linkerd-cni's ConfigMap, the namespaces,
/// and the webhook configuration (calling the returned port; the operator fills in its caBundle).
pub fn before_the_operator(c: &Cluster) -> u16 {
    apply_nad_crd(&c.testbed.kubeconfig());
    for ns in ["linkerd-cni", "linkerd", "linkerd-multus"] {
        c.kubectl(&["create", "namespace", ns]);
    }
    c.set_cni_config(&cni_network_config(&["4191", "4190"]));
    let webhook_port = free_port();
    c.apply(&format!(
        r#"{{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {{"name": "{WEBHOOK_CONFIG}"}},
        "webhooks": [{{"name": "attach.multus.linkerd.io",
          "clientConfig": {{"url": "https://127.0.0.1:{webhook_port}/annotate-multus-v1-pod"}},
          "rules": [{{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}}],
          "namespaceSelector": {{"matchExpressions": [{{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["kube-system", "kube-public", "kube-node-lease", "linkerd-multus", "linkerd-cni"]}}]}},
          "sideEffects": "None", "admissionReviewVersions": ["v1"], "reinvocationPolicy": "IfNeeded",
          "failurePolicy": "Fail", "timeoutSeconds": 10}}]}}"#
    ));
    webhook_port
}

/// A sample of the operator's /metrics, `name` with its labels; None when absent or unanswered.
pub fn metric(
    op: &linkerd_multus_e2e::operator_process::OperatorProcess,
    name: &str,
) -> Option<f64> {
    let (_, body) = op.get_blocking("/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
