//! `--chain-mode none` (Multus, OpenShift) through SIGTERM: every NAD points at the plugin binary and
//! the kubeconfig, and SIGTERM comes with every rolling update of the DaemonSet, so the installer
//! leaves both in place. Drill 7 of the reliability drills: a CNI ADD through a NAD's config in the
//! gap between the old installer's SIGTERM and the new one's start succeeds.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use linkerd_multus_e2e::cni::{Network, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{binary, client, TestNamespace};
use serde_json::{json, Value};
use std::fs;
use std::time::Instant;
use support::*;

fn installed(node: &Node) -> Option<()> {
    (node.binary().exists() && node.kubeconfig().is_some()).then_some(())
}

/// SIGTERM in `none` mode leaves the binary, the kubeconfig and the net dir exactly as they were,
/// `--uninstall-binary` included (it applies to `append` mode), and exits 0.
#[test]
fn none_mode_sigterm_leaves_the_node_installed() {
    for extra in [&[][..], &["--uninstall-binary"][..]] {
        let node = Node::with(&["00-multus.conf"]);
        let running = node.spawn(&[&["--chain-mode", "none"], extra].concat());
        wait_for("binary and kubeconfig installed", || installed(&node));
        let kubeconfig = identity(&node.kubeconfig_path());
        let binary = identity(&node.binary());

        let (status, log) = running.terminate();
        assert!(status.success(), "{extra:?}: {status:?}\n{log}");
        assert_eq!(
            node.names(),
            vec!["00-multus.conf", KUBECONFIG],
            "{extra:?}"
        );
        assert_eq!(
            node.read("00-multus.conf"),
            fixture("00-multus.conf"),
            "{extra:?}"
        );
        assert_eq!(identity(&node.kubeconfig_path()), kubeconfig, "{extra:?}");
        assert_eq!(identity(&node.binary()), binary, "{extra:?}");
        assert!(
            log.contains("leaving the plugin binary"),
            "{extra:?}: {log}"
        );
    }
}

/// Drill 7: the installer (real binary, real plugin, the testbed's apiserver as the cluster) gets
/// SIGTERM in `none` mode; before any new installer starts, meshed pods get their CNI ADD through a
/// NAD's config the way Multus runs it (the operator's config, interface `net1`, no prevResult) in
/// real network namespaces: every ADD succeeds and installs the redirect rules.
#[tokio::test]
#[ignore = "needs root (netns, iptables), the testbed (kube-apiserver) and the built linkerd-cni: run by e2e/test-all"]
async fn drill7_cni_add_between_sigterm_and_the_next_installer_succeeds() {
    const PODS: usize = 5;
    let mut node = Node::new();
    node.plugin = binary("linkerd-cni");
    node.use_testbed_service_account();
    let running = node.spawn(&["--chain-mode", "none", "--cni-log-level", "debug"]);
    wait_for("binary and kubeconfig installed", || installed(&node));
    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");

    // The NAD's config exactly as the operator builds it from Linkerd's ConfigMap template.
    let template = fs::read_to_string(
        linkerd_multus_e2e::workspace_root().join("fixtures/linkerd2-cni-network-config.json"),
    )
    .expect("template fixture");
    let kubeconfig = node.kubeconfig_path();
    let nad_config: Value = serde_json::from_str(
        &rules::cni_template::for_nad(&template, &kubeconfig.to_string_lossy())
            .expect("NAD config"),
    )
    .expect("NAD config JSON");
    let network = Network::from_config(nad_config, vec![node.bin.clone()]);

    let client = client().await;
    let ns = TestNamespace::create(&client, "drill7").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns.name);
    let (mut ok, mut took_ms) = (0, Vec::new());
    for i in 0..PODS {
        let name = format!("meshed-{i}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns.name},
            "spec": {"automountServiceAccountToken": false, "containers": [
                {"name": "app", "image": "app:1"},
                {"name": vocab::PROXY_CONTAINER, "image": "proxy:1"}
            ]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        let netns = NetNs::create("drill7");
        let mut rt = Runtime::new(&netns.path()).with_pod(&ns.name, &name);
        rt.ifname = "net1".into();
        let start = Instant::now();
        let result = network.add(&rt);
        took_ms.push(start.elapsed().as_millis());
        if let Err(e) = result {
            eprintln!("drill 7: ADD of {name} failed: {e}");
            continue;
        }
        ok += 1;
        // Whichever backend `iptables-mode: auto` (the default) picked on this machine.
        let rules: String = ["iptables-legacy-save", "iptables-nft-save"]
            .iter()
            .map(|save| {
                String::from_utf8_lossy(&netns.exec(&[save, "-t", "nat"]).stdout).into_owned()
            })
            .collect();
        assert!(
            rules.contains("PROXY_INIT_REDIRECT") && rules.contains("--to-ports 4143"),
            "{name}: no redirect rules after ADD:\n{rules}"
        );
        let _ = network.del(&rt, None);
    }
    eprintln!(
        "drill 7: {ok}/{PODS} CNI ADDs through the NAD config succeeded after the installer's SIGTERM (none mode); ADD took {took_ms:?} ms"
    );
    assert_eq!(ok, PODS, "every ADD in the gap succeeds");
}
