//! The Multus stand-in (`multus-stand-in`) run the way a container runtime runs Multus, in a network
//! namespace of the test's own: Debian's bridge + host-local as the cluster network, the project's
//! `linkerd-cni` (and Debian's macvlan) from NADs on the testbed's apiserver, pods read from it too.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
use linkerd_multus_e2e::cni::{exec_plugin_logged, PluginFailure, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{binary, client, ensure_nad_crd, kubeconfig_path, TestNamespace};
use serde_json::{json, Value};

async fn create_pod(client: &Client, namespace: &str, name: &str, networks: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [
                {"name": "app", "image": "example.com/app:1"},
                {"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:stable"}
            ]
        }
    }))
    .expect("pod");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod")
}

async fn create_nad(client: &Client, namespace: &str, name: &str, config: &Value) {
    let nad = NetworkAttachmentDefinition::new(
        name,
        NetworkAttachmentDefinitionSpec {
            config: Some(config.to_string()),
        },
    );
    Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &nad)
        .await
        .expect("create NAD");
}

fn linkerd_cni_config() -> Value {
    json!({
        "cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni", "log_level": "info",
        "kubernetes": {"kubeconfig": kubeconfig_path()},
        "linkerd": {
            "incoming-proxy-port": 4143, "outgoing-proxy-port": 4140, "proxy-uid": 2102,
            "ports-to-redirect": [], "inbound-ports-to-ignore": ["4191", "4190"],
            "simulate": false, "use-wait-flag": false, "iptables-mode": "legacy", "ipv6": false
        }
    })
}

/// A macvlan on the pod's eth0: shows which interface name the stand-in gave a delegate.
fn macvlan_config() -> Value {
    json!({"cniVersion": "0.4.0", "type": "macvlan", "master": "eth0", "mode": "bridge", "ipam": {}})
}

/// One pod sandbox: its netns, the cluster network's bridge and IPAM, the stand-in's config.
struct Sandbox {
    netns: NetNs,
    dir: PathBuf,
    bridge: String,
    subnet_prefix: String,
    conf: Value,
    runtime: Runtime,
}

impl Sandbox {
    fn new(n: u32, namespace: &str, pod: &str) -> Self {
        let id = std::process::id();
        let bridge = format!("lmsi{}{n}", id % 100_000);
        let subnet_prefix = format!("10.{}.{}.", 244 + n, id % 250);
        let dir = std::env::temp_dir().join(linkerd_multus_e2e::unique_name("multus-stand-in"));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let netns = NetNs::create("e2e-msi");
        let conf = json!({
            "cniVersion": "0.4.0", "name": "multus-cni-network", "type": "multus-stand-in",
            "kubeconfig": kubeconfig_path(), "cniDir": dir.join("cache"),
            "delegates": [{
                "cniVersion": "0.4.0", "name": "k8s-pod-network",
                "plugins": [{
                    "type": "bridge", "bridge": &bridge, "isGateway": false, "ipMasq": false,
                    "ipam": {"type": "host-local", "subnet": format!("{subnet_prefix}0/24"),
                             "dataDir": dir.join("ipam")}
                }]
            }]
        });
        let runtime = Runtime::new(&netns.path()).with_pod(namespace, pod);
        Self {
            netns,
            dir,
            bridge,
            subnet_prefix,
            conf,
            runtime,
        }
    }

    /// Runs the stand-in as the runtime would: `(result, its stderr)`.
    fn run(
        &self,
        command: &str,
        prev_result: Option<&Value>,
    ) -> (Result<Option<Value>, PluginFailure>, String) {
        let mut conf = self.conf.clone();
        if let Some(prev) = prev_result {
            conf["prevResult"] = prev.clone();
        }
        let dirs = vec![
            binary("multus-stand-in")
                .parent()
                .expect("bin dir")
                .to_path_buf(),
            PathBuf::from("/usr/lib/cni"),
        ];
        exec_plugin_logged(&dirs, command, &conf, &self.runtime)
    }

    fn links(&self) -> String {
        let out = self.netns.exec(&["ip", "-o", "addr"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn nat(&self) -> String {
        let out = self.netns.exec(&["iptables-legacy-save", "-t", "nat"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Addresses host-local has handed out (one file per address).
    fn leases(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.join("ipam/k8s-pod-network"))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(&self.subnet_prefix))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn cache_files(&self) -> usize {
        std::fs::read_dir(self.dir.join("cache")).map_or(0, |d| d.count())
    }

    fn assert_nothing_left(&self) {
        let links = self.links();
        assert!(!links.contains("eth0"), "{links}");
        assert_eq!(
            self.leases(),
            Vec::<String>::new(),
            "addresses still leased"
        );
        assert!(!self.nat().contains("PROXY_INIT"), "{}", self.nat());
        assert_eq!(self.cache_files(), 0);
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// ADD: eth0 from the bridge (its result is what the stand-in prints), then linkerd-cni from the NAD
/// writes its rules, its log passed through on stderr. CHECK passes. DEL removes all of it.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn add_runs_the_cluster_network_then_the_nad_and_del_cleans_up() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi").await;
    create_nad(&client, &ns.name, "linkerd-cni", &linkerd_cni_config()).await;
    create_pod(&client, &ns.name, "web", "linkerd-cni").await;
    let sandbox = Sandbox::new(0, &ns.name, "web");

    let (added, stderr) = sandbox.run("ADD", None);
    let result = added
        .unwrap_or_else(|e| panic!("ADD: {e}"))
        .expect("a result");
    let address = result["ips"][0]["address"].as_str().expect("an address");
    assert!(address.starts_with(&sandbox.subnet_prefix), "{result}");
    assert_eq!(result["cniVersion"], "0.4.0");
    let links = sandbox.links();
    assert!(
        links.contains(&format!("eth0    inet {address}")),
        "{links}"
    );
    let nat = sandbox.nat();
    assert!(
        nat.contains("-j PROXY_INIT_REDIRECT") && nat.contains("--uid-owner 2102"),
        "{nat}"
    );
    assert!(
        stderr.contains("linkerd-cni:"),
        "delegate log not passed through: {stderr}"
    );
    assert_eq!(sandbox.leases().len(), 1);
    assert_eq!(sandbox.cache_files(), 1);

    let (checked, _) = sandbox.run("CHECK", Some(&result));
    checked.unwrap_or_else(|e| panic!("CHECK: {e}"));

    let (deleted, _) = sandbox.run("DEL", Some(&result));
    deleted.unwrap_or_else(|e| panic!("DEL: {e}"));
    sandbox.assert_nothing_left();
    // DEL again (the runtime retries): still fine.
    sandbox.run("DEL", Some(&result)).0.expect("second DEL");
}

/// A pod naming a NAD that does not exist gets no sandbox: Multus' error, naming it, and nothing added.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn a_missing_nad_fails_naming_it_and_leaves_nothing() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi").await;
    create_pod(&client, &ns.name, "web", "linkerd-cni").await;
    let sandbox = Sandbox::new(1, &ns.name, "web");

    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    let want = format!(
        "cannot find a network-attachment-definition (linkerd-cni) in namespace ({})",
        ns.name
    );
    assert!(
        failure.msg().is_some_and(|m| m.contains(&want)),
        "{failure}"
    );
    assert_eq!(failure.exit_code, Some(1));
    sandbox.assert_nothing_left();
}

/// A delegate that fails after the cluster network ran: everything is rolled back (eth0, its address,
/// the delegates before it) and the error names the NAD.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn a_failing_delegate_rolls_everything_back() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi").await;
    create_nad(&client, &ns.name, "linkerd-cni", &linkerd_cni_config()).await;
    let broken = json!({"cniVersion": "0.3.1", "type": "no-such-plugin"});
    create_nad(&client, &ns.name, "broken", &broken).await;
    create_pod(&client, &ns.name, "web", "linkerd-cni,broken").await;
    let sandbox = Sandbox::new(2, &ns.name, "web");

    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    let msg = failure.msg().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "network-attachment-definition ({}/broken) on net2",
            ns.name
        )) && msg.contains("no-such-plugin"),
        "{failure}"
    );
    sandbox.assert_nothing_left();
}

/// The JSON form, a NAD from another namespace and an interface the pod chose; an unnamed one gets
/// `net<N>` by its position.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn json_selections_pick_namespace_and_interface() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi").await;
    let other = TestNamespace::create(&client, "msi-other").await;
    create_nad(&client, &other.name, "mac", &macvlan_config()).await;
    create_nad(&client, &ns.name, "linkerd-cni", &linkerd_cni_config()).await;
    let networks = json!([
        {"name": "mac", "namespace": other.name, "interface": "mac7"},
        {"name": "linkerd-cni"},
        {"name": "mac", "namespace": other.name},
    ]);
    create_pod(&client, &ns.name, "web", &networks.to_string()).await;
    let sandbox = Sandbox::new(3, &ns.name, "web");

    let result = sandbox
        .run("ADD", None)
        .0
        .unwrap_or_else(|e| panic!("ADD: {e}"))
        .expect("a result");
    let links = sandbox.netns.exec(&["ip", "-o", "link"]);
    let links = String::from_utf8_lossy(&links.stdout);
    for ifname in ["eth0@", "mac7@", "net3@"] {
        assert!(
            links.contains(&format!(": {ifname}")),
            "no {ifname} in {links}"
        );
    }
    assert!(sandbox.nat().contains("PROXY_INIT_REDIRECT"));
    sandbox.run("DEL", Some(&result)).0.expect("DEL");
    let links = sandbox.netns.exec(&["ip", "-o", "link"]);
    assert_eq!(
        String::from_utf8_lossy(&links.stdout).lines().count(),
        1,
        "only lo left"
    );
    sandbox.assert_nothing_left();
}

/// Multus' namespace isolation: a pod listing a NAD of another namespace (a shared `linkerd-cni`) is
/// refused unless that namespace is one of `globalNamespaces`, and then gets linkerd-cni's rules.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn namespace_isolation_honours_only_global_namespaces() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi").await;
    let shared = TestNamespace::create(&client, "msi-shared").await;
    create_nad(&client, &shared.name, "linkerd-cni", &linkerd_cni_config()).await;
    let reference = format!("{}/linkerd-cni", shared.name);
    create_pod(&client, &ns.name, "web", &reference).await;

    let mut sandbox = Sandbox::new(4, &ns.name, "web");
    sandbox
        .runtime
        .args
        .push(("K8S_POD_UID".into(), "uid-4".into()));
    sandbox.conf["namespaceIsolation"] = json!(true);
    sandbox.conf["globalNamespaces"] = json!("default,openshift-multus");
    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    // Multus' thin plugin (v4) words it so, as a plain error the CNI skeleton reports with code 999.
    assert_eq!(
        failure.msg(),
        Some(
            format!(
                "Multus: [{ns}/web/uid-4]: error loading k8s delegates k8s args: TryLoadPodDelegates: \
                 error in getting k8s network for pod: GetNetworkDelegates: namespace isolation \
                 enabled, annotation violates permission, pod is in namespace {ns} but refers to \
                 target namespace {shared}",
                ns = ns.name,
                shared = shared.name
            )
            .as_str()
        ),
        "{failure}"
    );
    assert_eq!(failure.code(), Some(999), "{failure}");
    sandbox.assert_nothing_left();

    sandbox.conf["globalNamespaces"] = json!(format!("default, {}", shared.name));
    let result = sandbox
        .run("ADD", None)
        .0
        .unwrap_or_else(|e| panic!("ADD: {e}"))
        .expect("a result");
    let nat = sandbox.nat();
    assert!(nat.contains("-j PROXY_INIT_REDIRECT"), "{nat}");
    sandbox.run("DEL", Some(&result)).0.expect("DEL");
    sandbox.assert_nothing_left();
}
