//! The whole product as a cluster runs it: `linkerd-multus-operator` as a real process on a control
//! plane of this test's own, its webhook called by the real apiserver, and the node's part played by
//! hand the way Multus does it — Debian's `bridge` for the primary network, then `linkerd-cni` with
//! the NAD's `spec.config` and the pod's CNI_ARGS — in a real network namespace, with real traffic.
//! Then `check` on the same cluster, healthy and broken.
//!
//! A dedicated control plane (not the shared testbed) because the operator and `check` look at every
//! namespace and every webhook of the cluster: other tests running in parallel would change what they
//! see.

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

const UID_RANGE: &str = "1000650000/10000";
const PROXY_UID: u32 = 1_000_650_000 + 2102;
const WEBHOOK_CONFIG: &str = "linkerd-multus-e2e";

/// Linkerd's `linkerd2-cni` chart ConfigMap value, placeholders and all (the repository's one copy),
/// with the plugin logging at debug and these inbound ports ignored.
fn cni_network_config(inbound_ports_to_ignore: &[&str]) -> String {
    let mut v: Value = serde_json::from_str(include_str!(
        "../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    v["log_level"] = json!("debug");
    v["linkerd"]["inbound-ports-to-ignore"] = json!(inbound_ports_to_ignore);
    v.to_string()
}

// === the pieces of the scenario ===

/// The operator as a real process (the kit's): killed and reaped when dropped.
fn start_operator(bed: &Cluster, webhook_port: u16) -> OperatorProcess {
    start_operator_with(bed, webhook_port, &[])
}

/// Started with `flags` added to the ones every scenario uses; returns once `/ready` answers.
fn start_operator_with(bed: &Cluster, webhook_port: u16, flags: &[&str]) -> OperatorProcess {
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
    .args(flags)
    .spawn()
    .expect("starting linkerd-multus-operator");
    op.wait_ready_blocking(Duration::from_secs(60));
    op
}

/// The dedicated control plane and a scratch directory for the node's files.
struct Cluster {
    testbed: DedicatedTestbed,
    dir: PathBuf,
}

impl Cluster {
    fn up() -> Self {
        let testbed = DedicatedTestbed::up("e2e-scenario");
        let dir = std::env::temp_dir().join(linkerd_multus_e2e::unique_name("e2e-node"));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        // On a node the installer writes the plugin's kubeconfig; here it is the test cluster's.
        std::fs::copy(testbed.kubeconfig(), dir.join("linkerd-cni-kubeconfig"))
            .expect("plugin kubeconfig");
        Self { testbed, dir }
    }

    fn plugin_kubeconfig(&self) -> PathBuf {
        self.dir.join("linkerd-cni-kubeconfig")
    }

    /// kubectl that must succeed; returns stdout.
    fn kubectl(&self, args: &[&str]) -> String {
        self.testbed.kubectl_ok(args)
    }

    /// `kubectl apply` of `manifest` (through a file, so it goes through the same kubectl as the rest).
    fn apply(&self, manifest: &str) {
        let file = self.dir.join(linkerd_multus_e2e::unique_name("manifest"));
        std::fs::write(&file, manifest).expect("writing the manifest");
        self.kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    }

    /// `kubectl get ... -o json`, or None when it is not found.
    fn get(&self, args: &[&str]) -> Option<Value> {
        self.testbed.get_json(args)
    }

    /// Every NAD named linkerd-cni, as `namespace` names (sorted).
    fn nad_namespaces(&self) -> Vec<String> {
        let list = self
            .get(&["--all-namespaces", "network-attachment-definitions"])
            .expect("a list");
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

    fn nad(&self, namespace: &str) -> Option<Value> {
        self.get(&[
            "-n",
            namespace,
            "network-attachment-definitions",
            "linkerd-cni",
        ])
    }

    fn nad_config(&self, namespace: &str) -> Option<Value> {
        let nad = self.nad(namespace)?;
        Some(serde_json::from_str(nad["spec"]["config"].as_str()?).expect("NAD config is JSON"))
    }

    fn set_cni_config(&self, config: &str) {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "linkerd-cni-config", "namespace": "linkerd-cni"},
            "data": {"cni_network_config": config},
        });
        self.apply(&cm.to_string());
    }

    fn create_pod(&self, namespace: &str, name: &str) -> Value {
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
    fn check(&self) -> (bool, Value) {
        self.check_with(&[])
    }

    /// `check` given the operator's `flags` too.
    fn check_with(&self, flags: &[&str]) -> (bool, Value) {
        let out = Command::new(binary("linkerd-multus-operator"))
            .env("KUBECONFIG", self.testbed.kubeconfig())
            .args(["check", "-o", "json", "--cni-kubeconfig"])
            .arg(self.plugin_kubeconfig())
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
struct Node {
    netns: NetNs,
    primary: Network,
    runtime: Runtime,
    pod_ip: String,
    gateway: String,
    bridge: String,
}

impl Node {
    /// Sets up the pod's primary network (bridge + host-local), as the cluster's CNI would; `n` tells
    /// the test's pods apart (bridge name, subnet).
    fn start_pod(cluster: &Cluster, namespace: &str, pod: &str, n: u32) -> Self {
        let bridge = format!("lme2e{n}");
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
    fn attach_linkerd_cni(&self, nad_config: &Value) -> Result<Value, String> {
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
    fn assert_redirects(&self) -> (Answerer, Answerer) {
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

    fn nat_rules(&self) -> String {
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
fn wait_until<T>(
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

fn annotations(obj: &Value) -> serde_json::Map<String, Value> {
    obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn expected_nad_config(kubeconfig: &Path, inbound_ignored: &[&str]) -> Value {
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

fn failed_checks(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The items of one check of a `check -o json` report.
fn check_items(report: &Value, check: &str) -> Value {
    report["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["check"] == check))
        .unwrap_or_else(|| panic!("no {check} check: {report:#}"))["items"]
        .clone()
}

/// The operator's self-managed CA lands in the webhook configuration.
fn wait_for_ca_bundle(c: &Cluster, operator: &OperatorProcess) {
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
fn before_the_operator(c: &Cluster) -> u16 {
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

// === the scenarios ===

/// If this breaks, some link of the chain namespace → NAD → webhook → Multus → linkerd-cni → iptables is
/// broken for real clusters, even when every part passes its own tests.
#[test]
#[ignore = "needs root (netns, iptables), a testbed of its own (kube-apiserver) and built binaries: run by e2e/test-all"]
fn whole_product_on_a_real_control_plane_and_real_netns() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    let operator = start_operator(c, webhook_port);
    let expected = step_control_plane_nad(c, &operator);
    let config = step_openshift_namespace_nad(c, &operator, &expected);
    step_meshed_pod_admitted(c);
    let first = step_node_redirects(c, &config);
    let (updated, node2) = step_configmap_edit_followed(c, &operator);
    step_check_healthy_then_failing(c, &operator);
    let operator = step_operator_restarted_converges(c, operator, webhook_port);
    step_configmap_deleted_keeps_nads(c, &updated);
    drop(operator);
    drop(node2);
    drop(first);
}

/// Step 2: The operator (started, as a process); its self-managed CA lands in the webhook configuration, and
/// the control-plane namespace gets its NAD without an annotation. Returns that NAD's config.
fn step_control_plane_nad(c: &Cluster, operator: &OperatorProcess) -> Value {
    wait_for_ca_bundle(c, operator);
    let expected = expected_nad_config(&c.plugin_kubeconfig(), &["4191", "4190"]);
    let cp = wait_until(
        "the control plane's NAD",
        Duration::from_secs(30),
        || c.nad_config("linkerd"),
        || operator.log_report(),
    );
    assert_eq!(
        cp, expected,
        "the control-plane namespace gets the NAD without any annotation"
    );
    expected
}

/// Step 3: Annotate an OpenShift-style namespace → its NAD, with exactly the expected config (returned).
fn step_openshift_namespace_nad(
    c: &Cluster,
    operator: &OperatorProcess,
    expected: &Value,
) -> Value {
    c.kubectl(&["create", "namespace", "app"]);
    c.kubectl(&[
        "label",
        "namespace",
        "app",
        "kubernetes.io/metadata.name=app",
    ]);
    c.kubectl(&[
        "annotate",
        "namespace",
        "app",
        &format!("openshift.io/sa.scc.uid-range={UID_RANGE}"),
    ]);
    c.kubectl(&["annotate", "namespace", "app", "linkerd.io/multus=enabled"]);
    let config = wait_until(
        "the app NAD",
        Duration::from_secs(30),
        || c.nad_config("app"),
        || operator.log_report(),
    );
    assert_eq!(&config, expected);
    let nad = c.nad("app").expect("NAD");
    assert_eq!(
        nad["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "linkerd-multus-operator"
    );
    config
}

/// Step 4: A meshed pod: the apiserver calls the webhook, which attaches it and picks the proxy uid.
fn step_meshed_pod_admitted(c: &Cluster) {
    let pod = c.create_pod("app", "web");
    let a = annotations(&pod);
    assert_eq!(
        a.get("k8s.v1.cni.cncf.io/networks"),
        Some(&json!("linkerd-cni")),
        "{a:?}"
    );
    assert_eq!(a.get("linkerd.io/multus"), Some(&json!("enabled")), "{a:?}");
    assert_eq!(
        a.get("config.linkerd.io/proxy-uid"),
        Some(&json!(PROXY_UID.to_string())),
        "{a:?}"
    );
}

/// The first pod's node and its proxy stand-ins, kept until the scenario ends.
struct FirstPod {
    _node: Node,
    _proxy: (Answerer, Answerer),
}

/// Step 5: The node: bridge, then linkerd-cni from the NAD; the rules carry the pod's proxy uid and real
/// traffic goes where they say.
fn step_node_redirects(c: &Cluster, config: &Value) -> FirstPod {
    let node = Node::start_pod(c, "app", "web", 0);
    node.attach_linkerd_cni(config)
        .unwrap_or_else(|e| panic!("linkerd-cni ADD: {e}"));
    let rules = node.nat_rules();
    assert!(
        rules.contains(&format!("--uid-owner {PROXY_UID}")),
        "{rules}"
    );
    assert!(
        rules.contains("-j PROXY_INIT_REDIRECT") && rules.contains("-j PROXY_INIT_OUTPUT"),
        "{rules}"
    );
    let proxy = node.assert_redirects();
    let bypass = node
        .netns
        .command("setpriv")
        .args([
            &format!("--reuid={PROXY_UID}"),
            &format!("--regid={PROXY_UID}"),
            "--clear-groups",
        ])
        // bash's /dev/tcp: a binary every uid may run (a per-user python shim may not be).
        .args([
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{}/9", node.gateway),
        ])
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&bypass.stderr);
    assert!(
        !bypass.status.success() && stderr.contains("Connection refused"),
        "as the proxy uid the connection must reach the real (closed) port, not the proxy: {stderr}"
    );
    FirstPod {
        _node: node,
        _proxy: proxy,
    }
}

/// Step 6: Edit the ConfigMap: every NAD follows (the new config returned), and a new pod's rules show the
/// change (its node returned).
fn step_configmap_edit_followed(c: &Cluster, operator: &OperatorProcess) -> (Value, Node) {
    c.set_cni_config(&cni_network_config(&["4191", "4190", "9999"]));
    let updated = expected_nad_config(&c.plugin_kubeconfig(), &["4191", "4190", "9999"]);
    for ns in ["app", "linkerd"] {
        wait_until(
            &format!("the {ns} NAD to follow the ConfigMap"),
            Duration::from_secs(30),
            || (c.nad_config(ns).as_ref() == Some(&updated)).then_some(()),
            || operator.log_report(),
        );
    }
    c.create_pod("app", "web2");
    let node2 = Node::start_pod(c, "app", "web2", 1);
    node2
        .attach_linkerd_cni(&c.nad_config("app").expect("NAD"))
        .unwrap_or_else(|e| panic!("ADD web2: {e}"));
    let rules2 = node2.nat_rules();
    assert!(
        rules2.contains("9999"),
        "the skipped port must reach the new pod's rules: {rules2}"
    );
    (updated, node2)
}

/// Step 7: check on a healthy cluster, then on a pod created before its namespace was enabled.
fn step_check_healthy_then_failing(c: &Cluster, operator: &OperatorProcess) {
    let (ok, report) = c.check();
    assert!(ok, "check on a healthy cluster failed: {report:#}");
    // Someone else's NAD of the same name, in an enabled namespace: left alone from here on.
    // Its NAD exists first, then the namespace is enabled (the other order races with the operator).
    c.kubectl(&["create", "namespace", "foreign"]);
    c.apply(
        &json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "linkerd-cni", "namespace": "foreign"}, "spec": {"config": "{\"mine\": true}"}})
        .to_string(),
    );
    c.kubectl(&[
        "annotate",
        "namespace",
        "foreign",
        "linkerd.io/multus=enabled",
    ]);
    c.kubectl(&["create", "namespace", "late"]);
    c.kubectl(&[
        "label",
        "namespace",
        "late",
        "kubernetes.io/metadata.name=late",
    ]);
    c.create_pod("late", "early-bird");
    c.kubectl(&["annotate", "namespace", "late", "linkerd.io/multus=enabled"]);
    wait_until(
        "the late NAD",
        Duration::from_secs(30),
        || c.nad("late"),
        || operator.log_report(),
    );
    let (ok, report) = c.check();
    assert!(!ok, "check must fail: {report:#}");
    assert_eq!(
        failed_checks(&report),
        ["foreign-nads", "pods"].map(String::from),
        "{report:#}"
    );
    assert_eq!(
        check_items(&report, "pods"),
        json!([
            "late/early-bird: not attached to linkerd-cni (no k8s.v1.cni.cncf.io/networks entry; \
             created before its namespace was set up): restart it"
        ])
    );
}

/// Step 8: Operator killed mid-way; the namespace disabled while it is down; restarted → converges (the
/// NAD goes once no pod uses it). Returns the restarted operator.
fn step_operator_restarted_converges(
    c: &Cluster,
    operator: OperatorProcess,
    webhook_port: u16,
) -> OperatorProcess {
    let mut operator = operator;
    operator.kill();
    for ns in ["app", "foreign"] {
        c.kubectl(&[
            "annotate",
            "namespace",
            ns,
            "linkerd.io/multus=disabled",
            "--overwrite",
        ]);
    }
    operator = start_operator(c, webhook_port);
    // Its pods still list the NAD, so it stays (their next sandbox needs it) and check names them;
    // once they are gone, so is the NAD.
    let listed = |pod: &str| format!("app/{pod}: its namespace opted out");
    wait_until(
        "check to list app's pods that still use the NAD",
        Duration::from_secs(30),
        || {
            let (_, report) = c.check();
            let pods = report["checks"]
                .as_array()?
                .iter()
                .find(|c| c["check"] == "pods")?
                .clone();
            let items: Vec<String> = pods["items"]
                .as_array()?
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect();
            ["web", "web2"]
                .iter()
                .all(|p| items.iter().any(|i| i.starts_with(&listed(p))))
                .then_some(())
        },
        || operator.log_report(),
    );
    assert!(
        c.nad("app").is_some(),
        "the app NAD stays while pods use it"
    );
    for pod in ["web", "web2"] {
        c.kubectl(&["-n", "app", "delete", "pod", pod]);
    }
    wait_until(
        "the app NAD to go",
        Duration::from_secs(30),
        || c.nad("app").is_none().then_some(()),
        || operator.log_report(),
    );
    assert!(c.nad("linkerd").is_some(), "the control-plane NAD stays");
    let foreign = c.nad("foreign").expect("the foreign NAD survives");
    assert_eq!(foreign["spec"]["config"], "{\"mine\": true}");
    assert!(foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"].is_null());
    operator
}

/// Step 9: Broken input: the ConfigMap deleted → NADs kept, check says why.
fn step_configmap_deleted_keeps_nads(c: &Cluster, updated: &Value) {
    c.kubectl(&[
        "-n",
        "linkerd-cni",
        "delete",
        "configmap",
        "linkerd-cni-config",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        c.nad_config("linkerd").as_ref(),
        Some(updated),
        "a broken input must not delete NADs"
    );
    let (ok, report) = c.check();
    assert!(!ok);
    assert!(
        failed_checks(&report).contains(&"cni-configmap".to_string()),
        "{report:#}"
    );
}

/// Resolves a networks annotation of one `ns/name` entry to that NAD's config, as Multus would.
fn referenced_nad_config(c: &Cluster, networks: &str) -> Value {
    let (namespace, name) = networks.split_once('/').expect("a namespace/name entry");
    assert_eq!(name, "linkerd-cni");
    c.nad_config(namespace)
        .unwrap_or_else(|| panic!("no NAD {networks}"))
}

/// `--nad-namespace default`: three enabled namespaces share one NAD in `default` (Multus' global
/// namespace when `globalNamespaces` is unset); their pods are attached as `default/linkerd-cni`, and
/// the chain run from that NAD's config redirects real traffic. Switched back to one NAD per namespace
/// while a pod still lists `default/linkerd-cni`: the per-namespace NADs come back and the shared one
/// stays until that pod is gone.
#[test]
#[ignore = "needs root (netns, iptables), a testbed of its own (kube-apiserver) and built binaries: run by e2e/test-all"]
fn shared_nad_then_back_to_one_per_namespace() {
    let cluster = Cluster::up();
    let c = &cluster;
    let webhook_port = before_the_operator(c);
    let shared = ["--nad-namespace", "default"];
    let operator = start_operator_with(c, webhook_port, &shared);
    wait_for_ca_bundle(c, &operator);

    // 1. Three enabled namespaces → one NAD, in `default`, marked shared, with the ConfigMap's config.
    let enabled = ["team-a", "team-b", "team-c"];
    for ns in enabled {
        c.kubectl(&["create", "namespace", ns]);
        c.kubectl(&["annotate", "namespace", ns, "linkerd.io/multus=enabled"]);
    }
    let kubeconfig = c.plugin_kubeconfig();
    let expected = expected_nad_config(&kubeconfig, &["4191", "4190"]);
    let config = wait_until(
        "the shared NAD",
        Duration::from_secs(30),
        || c.nad_config("default"),
        || operator.log_report(),
    );
    assert_eq!(config, expected);
    let nad = c.nad("default").expect("NAD");
    assert_eq!(
        nad["metadata"]["annotations"]["linkerd.io/multus-shared-nad"],
        "true"
    );

    // 2. Their pods are attached to it across namespaces; no namespace got a NAD of its own.
    for ns in enabled {
        let pod = c.create_pod(ns, "web");
        assert_eq!(
            annotations(&pod).get("k8s.v1.cni.cncf.io/networks"),
            Some(&json!("default/linkerd-cni")),
            "{pod}"
        );
    }
    assert_eq!(c.nad_namespaces(), ["default"]);
    let (ok, report) = c.check_with(&shared);
    assert!(ok, "check in shared mode: {report:#}");

    // 3. The node: the chain from the NAD the annotation names redirects real traffic.
    let pod = c.get(&["-n", "team-a", "pod", "web"]).expect("pod");
    let networks = annotations(&pod)["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .expect("networks")
        .to_string();
    let node = Node::start_pod(c, "team-a", "web", 2);
    node.attach_linkerd_cni(&referenced_nad_config(c, &networks))
        .unwrap_or_else(|e| panic!("linkerd-cni ADD: {e}"));
    let _proxy = node.assert_redirects();

    // 4. Back to one NAD per namespace, the pods still listing `default/linkerd-cni`: each enabled
    // namespace (and the control plane's) gets its NAD, the shared one stays while they run.
    drop(operator);
    let operator = start_operator(c, webhook_port);
    let mut all = vec!["default", "linkerd"];
    all.extend(enabled);
    all.sort();
    wait_until(
        "one NAD per enabled namespace",
        Duration::from_secs(30),
        || (c.nad_namespaces() == all).then_some(()),
        || operator.log_report(),
    );
    // `check` names the NAD each pod still lists, and why it is kept.
    let (ok, report) = c.check();
    assert!(!ok, "{report:#}");
    let expected: Vec<String> = enabled
        .iter()
        .map(|ns| {
            format!(
                "{ns}/web: attached to default/linkerd-cni, not linkerd-cni: a NAD from before a \
                 --nad-namespace switch, kept only while pods list it: restart it to move it"
            )
        })
        .collect();
    assert_eq!(check_items(&report, "pods"), json!(expected), "{report:#}");
    // The operator says why it keeps it (an Event naming the pods of every namespace that list it);
    // each time the list changes it says so again (the Event's series count: kube's recorder files a
    // repeat of the same reason into one series, keeping the first note).
    let kept = |reports: u64| {
        wait_until(
            &format!("the shared NAD reported kept {reports} time(s)"),
            Duration::from_secs(30),
            || {
                let events = c.get(&["-n", "default", "events"])?;
                events["items"]
                    .as_array()?
                    .iter()
                    .filter(|e| e["reason"] == "NetworkAttachmentDefinitionInUse")
                    .find(|e| {
                        let series = e["series"]["count"].as_u64().unwrap_or(0);
                        e["count"].as_u64().unwrap_or(0).max(series).max(1) >= reports
                    })
                    .cloned()
            },
            || operator.log_report(),
        )
    };
    let first = kept(1);
    let note = first["message"].as_str().unwrap_or_default();
    assert!(
        note.contains("(team-a/web, team-b/web, team-c/web)"),
        "{first:#}"
    );
    assert!(
        c.nad("default").is_some(),
        "the shared NAD stays while used"
    );
    for ns in ["team-a", "team-b"] {
        c.kubectl(&["-n", ns, "delete", "pod", "web"]);
    }
    kept(2);
    assert!(
        c.nad("default").is_some(),
        "team-c/web still lists it: the shared NAD stays"
    );
    c.kubectl(&["-n", "team-c", "delete", "pod", "web"]);
    wait_until(
        "the shared NAD to go",
        Duration::from_secs(30),
        || c.nad("default").is_none().then_some(()),
        || operator.log_report(),
    );
    all.retain(|ns| *ns != "default");
    assert_eq!(c.nad_namespaces(), all);
    drop(operator);
    drop(node);
}
