//! The conflist `linkerd-cni-install` writes is one a runtime can use: Debian's `bridge` (with
//! `host-local`) and then the installed `linkerd-cni` run as a chain in a real netns, for a non-pod
//! container (linkerd-cni passes through) and for a meshed pod on the testbed apiserver (linkerd-cni
//! looks it up through the kubeconfig the installer wrote and installs the redirect rules).

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use linkerd_multus_e2e::cni::{Network, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{binary, client, TestNamespace};
use serde_json::{json, Value};
use std::fs;
use std::path::PathBuf;
use support::*;
use vocab::PLUGIN_TYPE;

/// Deletes the test's bridge from the host when the test ends, however it ends.
struct BridgeGuard(String);

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.0])
            .output();
    }
}

/// The pod's nat rules, whichever backend `iptables-mode: auto` (the default) picked on this machine.
fn nat_rules(ns: &NetNs) -> String {
    ["iptables-legacy-save", "iptables-nft-save"]
        .iter()
        .map(|save| String::from_utf8_lossy(&ns.exec(&[save, "-t", "nat"]).stdout).into_owned())
        .collect()
}

fn addresses(ns: &NetNs) -> String {
    String::from_utf8_lossy(
        &ns.exec(&["ip", "-o", "-4", "addr", "show", "dev", "eth0"])
            .stdout,
    )
    .into_owned()
}

#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and the built linkerd-cni: run by e2e/test-all"]
async fn installed_conflist_runs_as_a_real_chain() {
    let mut node = Node::new();
    node.plugin = binary("linkerd-cni");
    node.use_testbed_service_account();

    // A single-plugin bridge `.conf` as the primary: the installer converts it, so the chain below
    // also proves the conversion is something the runtime reads.
    let pid = std::process::id();
    let bridge = format!("lkci{}", pid % 100_000);
    let _guard = BridgeGuard(bridge.clone());
    let subnet = format!("10.231.{}.0/24", pid % 250);
    let conf = json!({
        "cniVersion": "0.3.1", "name": "install-chain", "type": "bridge", "bridge": bridge,
        "isGateway": false, "ipMasq": false,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                 "dataDir": node.sa.parent().expect("tmp").join("ipam")}
    });
    fs::write(
        node.net.join("10-bridge.conf"),
        serde_json::to_vec_pretty(&conf).expect("json"),
    )
    .expect("conf");
    let out = node.once(&["--cni-log-level", "debug"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conflist: Value = json(&node.read("10-bridge.conflist"));
    assert_eq!(
        plugin_types(&node.read("10-bridge.conflist")),
        vec!["bridge", PLUGIN_TYPE]
    );
    let network = Network::new(
        conflist,
        vec![node.bin.clone(), PathBuf::from("/usr/lib/cni")],
    );

    // A container that is not a pod: bridge gives it an address, linkerd-cni passes it through.
    let plain = NetNs::create("ich");
    let rt = Runtime::new(&plain.path());
    let result = network
        .add(&rt)
        .unwrap_or_else(|e| panic!("ADD (no pod): {e}"));
    let ip = result["ips"][0]["address"]
        .as_str()
        .expect("an address in the chain's result")
        .to_string();
    assert!(
        ip.starts_with(&subnet[..subnet.len() - 4]),
        "{ip} in {subnet}"
    );
    assert!(
        addresses(&plain).contains(&ip),
        "eth0 holds {ip}: {}",
        addresses(&plain)
    );
    assert!(
        !nat_rules(&plain).contains("PROXY_INIT"),
        "no pod, no rules"
    );
    network
        .del(&rt, Some(&result))
        .unwrap_or_else(|e| panic!("DEL (no pod): {e}"));

    // A meshed pod on the testbed: linkerd-cni reads it with the installer's kubeconfig.
    let client = client().await;
    let ns = TestNamespace::create(&client, "install-chain").await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "meshed", "namespace": ns.name},
        "spec": {"automountServiceAccountToken": false, "containers": [
            {"name": "app", "image": "app:1"},
            {"name": vocab::PROXY_CONTAINER, "image": "proxy:1"}
        ]}
    }))
    .expect("pod");
    Api::<Pod>::namespaced(client.clone(), &ns.name)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    let pod_ns = NetNs::create("icp");
    let rt = Runtime::new(&pod_ns.path()).with_pod(&ns.name, "meshed");
    let result = network
        .add(&rt)
        .unwrap_or_else(|e| panic!("ADD (meshed pod): {e}"));
    assert!(result["ips"][0]["address"].is_string(), "{result}");
    let rules = nat_rules(&pod_ns);
    assert!(
        rules.contains("PROXY_INIT_REDIRECT") && rules.contains("--to-ports 4143"),
        "{rules}"
    );
    // No CHECK: the primary is cniVersion 0.3.1, which has none (bridge refuses it).
    network
        .del(&rt, Some(&result))
        .unwrap_or_else(|e| panic!("DEL (meshed pod): {e}"));
}
