//! The Multus stand-in (`multus-stand-in`) run the way a container runtime runs Multus, in a network
//! namespace of the test's own: Debian's bridge + host-local as the cluster network, the project's
//! `linkerd-cni` (and Debian's macvlan) from NADs on the testbed's apiserver, pods read from it too.
//! Its auxiliary CNI chain with Debian's `tuning`, the `cni-recorder` test plugin and `linkerd-cni`.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
use linkerd_multus_e2e::cni::{exec_plugin_logged, PluginFailure, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::pod_network::linkerd_cni_nad_config;
use linkerd_multus_e2e::recorder::{read_log, LOG_ENV};
use linkerd_multus_e2e::{binary, client, ensure_nad_crd, kubeconfig_path, TestNamespace};
use serde_json::{json, Value};

async fn create_pod(client: &Client, namespace: &str, name: &str, networks: &str) -> Pod {
    create_pod_with(client, namespace, name, networks, true).await
}

/// A pod with an app container and, when `meshed`, a `linkerd-proxy` one.
async fn create_pod_with(
    client: &Client,
    namespace: &str,
    name: &str,
    networks: &str,
    meshed: bool,
) -> Pod {
    let mut containers = vec![json!({"name": "app", "image": "example.com/app:1"})];
    if meshed {
        containers
            .push(json!({"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:stable"}));
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"k8s.v1.cni.cncf.io/networks": networks}},
        "spec": {"automountServiceAccountToken": false, "containers": containers}
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

/// The NAD `linkerd-cni` in `namespace`: linkerd-cni with the testbed's kubeconfig.
async fn create_linkerd_cni_nad(client: &Client, namespace: &str) {
    let config = linkerd_cni_nad_config(&kubeconfig_path());
    create_nad(client, namespace, "linkerd-cni", &config).await;
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
        self.run_as(&self.runtime, command, prev_result)
    }

    /// [`Self::run`] for another sandbox (`rt`) of the same node: same config, bridge and cache.
    fn run_as(
        &self,
        rt: &Runtime,
        command: &str,
        prev_result: Option<&Value>,
    ) -> (Result<Option<Value>, PluginFailure>, String) {
        let mut conf = self.conf.clone();
        if let Some(prev) = prev_result {
            conf["prevResult"] = prev.clone();
        }
        // Multus hands a chain plugin a stripped config on DEL: the recorder then logs where this says.
        let mut rt = rt.clone();
        let log = self.dir.join("calls.log");
        rt.env.push((LOG_ENV.into(), log.display().to_string()));
        exec_plugin_logged(&plugin_dirs(), command, &conf, &rt)
    }

    /// Moves the cluster network into a file that `clusterNetwork` names (as on a Multus node) and
    /// sets `auxiliaryCNIChainName`; returns the chain's directory (not created).
    fn with_aux_chain(&mut self, name: &str) -> PathBuf {
        let net_d = self.dir.join("net.d");
        std::fs::create_dir_all(&net_d).expect("net.d");
        let file = net_d.join("10-k8s-pod-network.conflist");
        let cluster = self.conf["delegates"][0].clone();
        std::fs::write(&file, cluster.to_string()).expect("cluster network file");
        let conf = self.conf.as_object_mut().expect("conf");
        conf.remove("delegates");
        conf.insert("clusterNetwork".into(), json!(file));
        conf.insert("auxiliaryCNIChainName".into(), json!(name));
        net_d.join(name)
    }

    fn links(&self) -> String {
        links(&self.netns)
    }

    fn nat(&self) -> String {
        nat(&self.netns)
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

/// The stand-in's directory (it and the test plugins are built there), then Debian's plugins.
fn plugin_dirs() -> Vec<PathBuf> {
    vec![
        binary("multus-stand-in")
            .parent()
            .expect("bin dir")
            .to_path_buf(),
        PathBuf::from("/usr/lib/cni"),
    ]
}

fn links(netns: &NetNs) -> String {
    let out = netns.exec(&["ip", "-o", "addr"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nat(netns: &NetNs) -> String {
    let out = netns.exec(&["iptables-legacy-save", "-t", "nat"]);
    String::from_utf8_lossy(&out.stdout).into_owned()
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
    create_linkerd_cni_nad(&client, &ns.name).await;
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
    create_linkerd_cni_nad(&client, &ns.name).await;
    let broken = json!({"cniVersion": "0.3.1", "type": "no-such-plugin"});
    create_nad(&client, &ns.name, "broken", &broken).await;
    create_pod(&client, &ns.name, "web", "linkerd-cni,broken").await;
    let sandbox = Sandbox::new(2, &ns.name, "web");

    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    let msg = failure.msg().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "[{}/web/:broken]: error adding container to network \"broken\"",
            ns.name
        )) && msg.contains("no-such-plugin"),
        "{failure}"
    );
    // The delegates stay cached (as by Multus) for the runtime's DEL of the failed sandbox.
    assert_eq!(sandbox.cache_files(), 1);
    sandbox
        .run("DEL", None)
        .0
        .expect_err("the broken NAD's DEL fails too");
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
    create_linkerd_cni_nad(&client, &ns.name).await;
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
    create_linkerd_cni_nad(&client, &shared.name).await;
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

// === The auxiliary CNI chain ===

const CHAIN: &str = "vendor-cni-chain";

fn recorder(log: &Path, tag: &str) -> Value {
    assert!(binary("cni-recorder").is_file());
    json!({"type": "cni-recorder", "log": log, "tag": tag})
}

fn write_conf(dir: &Path, name: &str, config: &Value) {
    std::fs::create_dir_all(dir).expect("chain dir");
    std::fs::write(dir.join(name), config.to_string()).expect("write chain config");
}

/// `(tag, command, ifname)` of each recorded call.
fn calls(log: &Path) -> Vec<(String, String, String)> {
    read_log(log)
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("tag"), s("command"), s("ifname"))
        })
        .collect()
}

fn call(tag: &str, command: &str, ifname: &str) -> (String, String, String) {
    (tag.into(), command.into(), ifname.into())
}

fn arp_filter(netns: &NetNs) -> String {
    let out = netns.exec(&["cat", "/proc/sys/net/ipv4/conf/eth0/arp_filter"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The chain runs for every pod, after its networks (the cluster network's eth0, then its NADs): its
/// `*.conf` files in name order behind passthru, each with the chain's name and cniVersion, the
/// previous plugin's result (passthru's empty one first), `net<N>` and Multus' delegate CNI_ARGS.
/// Other files are not read. DEL runs it first and in reverse, with its ADD result; a second DEL
/// (no cache left) does not run it.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn the_aux_chain_runs_for_every_pod_after_its_networks_in_name_order() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi-aux").await;
    let mut sandbox = Sandbox::new(5, &ns.name, "web");
    let chain_dir = sandbox.with_aux_chain(CHAIN);
    let log = sandbox.dir.join("calls.log");
    let mut nad = recorder(&log, "nad");
    nad["cniVersion"] = json!("0.4.0");
    nad["standalone"] = json!(true);
    create_linkerd_cni_nad(&client, &ns.name).await;
    create_nad(&client, &ns.name, "rec", &nad).await;
    let web = create_pod(&client, &ns.name, "web", "linkerd-cni,rec").await;
    let bare = create_pod_with(&client, &ns.name, "bare", "", false).await;
    write_conf(&chain_dir, "30-last.conf", &recorder(&log, "last"));
    write_conf(&chain_dir, "10-first.conf", &recorder(&log, "first"));
    let tuning = json!({"type": "tuning", "sysctl": {"net.ipv4.conf.eth0.arp_filter": "1"}});
    write_conf(&chain_dir, "20-tuning.conf", &tuning);
    write_conf(
        &chain_dir,
        "05-not-read.conflist",
        &recorder(&log, "conflist"),
    );
    write_conf(&chain_dir, "40-not-read.json", &recorder(&log, "json"));
    std::fs::create_dir(chain_dir.join("50-dir.conf")).expect("a subdirectory");

    let result = sandbox
        .run("ADD", None)
        .0
        .unwrap_or_else(|e| panic!("ADD web: {e}"))
        .expect("a result");
    assert!(
        result["ips"][0]["address"]
            .as_str()
            .is_some_and(|a| a.starts_with(&sandbox.subnet_prefix)),
        "the pod's result is the cluster network's: {result}"
    );
    assert!(sandbox.nat().contains("-j PROXY_INIT_REDIRECT"));
    assert_eq!(arp_filter(&sandbox.netns), "1", "tuning ran on eth0");
    assert_eq!(
        calls(&log),
        [
            call("nad", "ADD", "net2"),
            call("first", "ADD", "net3"),
            call("last", "ADD", "net3")
        ]
    );
    let recorded = read_log(&log);
    let passthru_result = json!({"cniVersion": "0.4.0", "dns": {}});
    let uid = web.metadata.uid.clone().expect("uid");
    // Multus' five, then the runtime's own.
    let args = format!(
        "IgnoreUnknown=true;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID={ctr};\
         K8S_POD_UID={uid};IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=web;\
         K8S_POD_INFRA_CONTAINER_ID={ctr}",
        ns = ns.name,
        ctr = sandbox.runtime.container_id
    );
    for c in &recorded[1..] {
        assert_eq!(c["config"]["name"], CHAIN, "{c}");
        assert_eq!(c["config"]["cniVersion"], "0.4.0", "{c}");
        assert_eq!(c["args"], args.as_str(), "{c}");
        assert_eq!(c["containerId"], sandbox.runtime.container_id.as_str());
        assert_eq!(
            c["config"]["prevResult"]["cniVersion"], "0.4.0",
            "passthru's result, through tuning for the last: {c}"
        );
    }
    assert_eq!(recorded[1]["config"]["prevResult"], passthru_result);
    assert!(
        recorded[0]["config"].get("prevResult").is_none(),
        "a NAD gets none"
    );

    // Another pod, without networks and without a proxy: the chain runs for it too, on net1.
    let other_ns = NetNs::create("e2e-msi");
    let other = Runtime::new(&other_ns.path()).with_pod(&ns.name, "bare");
    let other_result = sandbox
        .run_as(&other, "ADD", None)
        .0
        .unwrap_or_else(|e| panic!("ADD bare: {e}"))
        .expect("a result");
    assert_eq!(arp_filter(&other_ns), "1");
    assert!(!nat(&other_ns).contains("PROXY_INIT"));
    let bare_calls: Vec<_> = read_log(&log)[3..].to_vec();
    assert_eq!(bare_calls.len(), 2, "{bare_calls:?}");
    for c in &bare_calls {
        assert_eq!(c["ifname"], "net1");
        let uid = bare.metadata.uid.as_deref().expect("uid");
        assert!(
            c["args"].as_str().unwrap_or_default().contains(&format!(
                "K8S_POD_NAME=bare;K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={uid}",
                other.container_id
            )),
            "{c}"
        );
    }

    sandbox.run("DEL", Some(&result)).0.expect("DEL web");
    let after_del = calls(&log)[5..].to_vec();
    // The chain's plugins get a stripped config on DEL (no tag): the chain first, then the NADs.
    assert_eq!(
        after_del,
        [
            call("", "DEL", "net3"),
            call("", "DEL", "net3"),
            call("nad", "DEL", "net2")
        ],
        "the chain first, then the NADs"
    );
    let dels = read_log(&log);
    for c in &dels[5..7] {
        assert_eq!(
            c["config"],
            json!({"type": "cni-recorder", "ipam": {}, "name": CHAIN, "cniVersion": "0.4.0",
                   "prevResult": passthru_result}),
            "stripped, with the chain's ADD result (0.4.0): {c}"
        );
    }
    assert!(!sandbox.nat().contains("PROXY_INIT"));
    // Without the cache the NADs come from the pod again; the chain is not among them.
    sandbox.run("DEL", Some(&result)).0.expect("second DEL");
    assert_eq!(calls(&log)[8..], [call("nad", "DEL", "net2")]);
    sandbox
        .run_as(&other, "DEL", Some(&other_result))
        .0
        .expect("DEL bare");
    assert_eq!(
        calls(&log)[9..],
        [call("", "DEL", "net1"), call("", "DEL", "net1")]
    );
    assert!(!links(&other_ns).contains("eth0"));
    sandbox.assert_nothing_left();
}

/// Read from disk at each ADD: no directory, then an empty one, run nothing (not even passthru); a
/// file written counts from the next ADD, and so does a change to it; DEL runs the chain as it was at
/// ADD even after its file is gone.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn the_aux_chain_is_read_at_each_add_and_absent_when_its_directory_is() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi-aux").await;
    create_pod_with(&client, &ns.name, "web", "", false).await;
    let mut sandbox = Sandbox::new(6, &ns.name, "web");
    let chain_dir = sandbox.with_aux_chain(CHAIN);
    let log = sandbox.dir.join("calls.log");
    let cache = sandbox.dir.join("cache");
    // One sandbox (netns + container id) per ADD, as the kubelet makes them.
    let add = |sandbox: &Sandbox| {
        let netns = NetNs::create("e2e-msi");
        let rt = Runtime::new(&netns.path()).with_pod(&ns.name, "web");
        let result = sandbox
            .run_as(&rt, "ADD", None)
            .0
            .unwrap_or_else(|e| panic!("ADD: {e}"))
            .expect("a result");
        let cached: Value = serde_json::from_slice(
            &std::fs::read(cache.join(format!("{}-eth0", rt.container_id))).expect("cache"),
        )
        .expect("cache JSON");
        (netns, rt, result, cached)
    };

    let (_n1, rt1, r1, cached) = add(&sandbox);
    assert!(cached["aux_chain"].is_null(), "no directory: {cached}");
    std::fs::create_dir_all(&chain_dir).expect("chain dir");
    let (_n2, rt2, r2, cached) = add(&sandbox);
    assert!(
        cached["aux_chain"].is_null(),
        "an empty directory: {cached}"
    );
    assert!(calls(&log).is_empty());

    write_conf(&chain_dir, "10-rec.conf", &recorder(&log, "v1"));
    let (_n3, rt3, r3, cached) = add(&sandbox);
    assert_eq!(
        cached["aux_chain"]["chain"]["plugins"][0],
        json!({"type": "passthru", "name": "passthru-cni"})
    );
    write_conf(&chain_dir, "10-rec.conf", &recorder(&log, "v2"));
    let (_n4, rt4, r4, _) = add(&sandbox);
    assert_eq!(
        calls(&log),
        [call("v1", "ADD", "net1"), call("v2", "ADD", "net1")]
    );

    std::fs::remove_file(chain_dir.join("10-rec.conf")).expect("remove");
    sandbox.run_as(&rt3, "DEL", Some(&r3)).0.expect("DEL 3");
    assert_eq!(
        calls(&log)[2],
        call("", "DEL", "net1"),
        "the chain of its ADD (stripped, so untagged)"
    );
    let (_n5, rt5, r5, cached) = add(&sandbox);
    assert!(cached["aux_chain"].is_null(), "gone again: {cached}");
    assert_eq!(calls(&log).len(), 3);
    for (rt, r) in [(&rt1, &r1), (&rt2, &r2), (&rt4, &r4), (&rt5, &r5)] {
        sandbox.run_as(rt, "DEL", Some(r)).0.expect("DEL");
    }
    assert_eq!(calls(&log)[3], call("", "DEL", "net1"));
    assert_eq!(calls(&log).len(), 4);
    assert_eq!(sandbox.leases(), Vec::<String>::new());
}

/// A chain plugin that fails fails the sandbox: the error names the chain, the chain is DELeted
/// (in reverse, no ADD result) with the NADs and the cluster network, nothing is left.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn a_failing_aux_chain_fails_the_pod_and_rolls_everything_back() {
    ensure_nad_crd();
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi-aux").await;
    create_linkerd_cni_nad(&client, &ns.name).await;
    create_pod(&client, &ns.name, "web", "linkerd-cni").await;
    let mut sandbox = Sandbox::new(7, &ns.name, "web");
    let chain_dir = sandbox.with_aux_chain(CHAIN);
    let log = sandbox.dir.join("calls.log");
    write_conf(&chain_dir, "10-ok.conf", &recorder(&log, "ok"));
    let mut failing = recorder(&log, "fails");
    failing["failOn"] = json!("ADD");
    write_conf(&chain_dir, "20-fails.conf", &failing);

    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    let msg = failure.msg().unwrap_or_default();
    assert!(
        msg.ends_with(&format!(
            ":{CHAIN}]: error adding container to network \"{CHAIN}\": plugin \
             type=\"cni-recorder\" failed (add): cni-recorder: failing ADD as told"
        )),
        "{failure}"
    );
    // Rolled back with stripped configs (untagged), no ADD result.
    assert_eq!(
        calls(&log),
        [
            call("ok", "ADD", "net2"),
            call("fails", "ADD", "net2"),
            call("", "DEL", "net2"),
            call("", "DEL", "net2"),
        ]
    );
    assert!(read_log(&log)[2]["config"].get("prevResult").is_none());
    // The runtime's DEL of the failed sandbox runs the cached chain again.
    sandbox.run("DEL", None).0.expect("DEL");
    assert_eq!(
        calls(&log)[4..],
        [call("", "DEL", "net2"), call("", "DEL", "net2")]
    );
    sandbox.assert_nothing_left();
}

/// Multus runs the chain only beside a cluster network it has as a file: with `delegates` alone the
/// chain makes every ADD fail, before anything runs.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn the_aux_chain_needs_the_cluster_network_as_a_path() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi-aux").await;
    create_pod_with(&client, &ns.name, "web", "", false).await;
    let mut sandbox = Sandbox::new(8, &ns.name, "web");
    sandbox.conf["auxiliaryCNIChainName"] = json!(CHAIN);
    let failure = sandbox.run("ADD", None).0.expect_err("ADD must fail");
    assert!(
        failure
            .msg()
            .is_some_and(|m| m.contains("ClusterNetwork must be a path")),
        "{failure}"
    );
    assert_eq!(failure.code(), Some(999), "Multus' plain error");
    sandbox.assert_nothing_left();
}

/// linkerd-cni as the chain's plugin, with no NAD anywhere: a meshed pod gets its redirect rules, a
/// pod without a proxy gets none; both get the cluster network's result; DEL removes the rules.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and built binaries: run by e2e/test-all"]
async fn linkerd_cni_in_the_aux_chain_meshes_only_meshed_pods_without_a_nad() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "msi-aux").await;
    create_pod_with(&client, &ns.name, "web", "", true).await;
    create_pod_with(&client, &ns.name, "bare", "", false).await;
    let mut sandbox = Sandbox::new(9, &ns.name, "web");
    let chain_dir = sandbox.with_aux_chain(CHAIN);
    write_conf(
        &chain_dir,
        "10-linkerd-cni.conf",
        &linkerd_cni_nad_config(&kubeconfig_path()),
    );

    let (added, stderr) = sandbox.run("ADD", None);
    let result = added
        .unwrap_or_else(|e| panic!("ADD web: {e}"))
        .expect("a result");
    assert!(result["ips"][0]["address"].is_string(), "{result}");
    let rules = sandbox.nat();
    assert!(
        rules.contains("-j PROXY_INIT_REDIRECT")
            && rules.contains("--uid-owner 2102")
            && rules.contains("--to-ports 4140"),
        "{rules}"
    );
    assert!(stderr.contains("linkerd-cni:"), "{stderr}");

    let bare_ns = NetNs::create("e2e-msi");
    let bare = Runtime::new(&bare_ns.path()).with_pod(&ns.name, "bare");
    let (added, stderr) = sandbox.run_as(&bare, "ADD", None);
    let bare_result = added
        .unwrap_or_else(|e| panic!("ADD bare: {e}"))
        .expect("a result");
    assert!(bare_result["ips"][0]["address"].is_string());
    assert!(!nat(&bare_ns).contains("PROXY_INIT"), "{}", nat(&bare_ns));
    assert!(
        stderr.contains("skipping: the pod has no linkerd-proxy container"),
        "{stderr}"
    );

    sandbox.run("DEL", Some(&result)).0.expect("DEL web");
    sandbox
        .run_as(&bare, "DEL", Some(&bare_result))
        .0
        .expect("DEL bare");
    assert!(!links(&bare_ns).contains("eth0"));
    sandbox.assert_nothing_left();
}
