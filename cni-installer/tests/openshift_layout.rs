//! The real binary on a node laid out as OpenShift 4.18+ lays it out (issue 35), its root mapped by
//! `--host-prefix`: CRI-O's CNI configs in /etc/kubernetes/cni/net.d holding thick Multus' generated
//! 00-multus.conf (the daemon's container paths under /host), the cluster network's config in
//! /run/multus/cni/net.d, an empty /etc/cni/net.d nothing reads, plugins in /var/lib/cni/bin.

mod support;

use linkerd_multus_e2e::{client, eventually, node_multus};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::*;

const CRIO_NET_DIR: &str = "/etc/kubernetes/cni/net.d";
const OPENSHIFT_GLOBALS: &str =
    "default,openshift-multus,openshift-sriov-network-operator,openshift-cnv";

/// Thick Multus' generated config as the network operator's daemon writes it, its paths under `prefix`.
fn thick_multus(prefix: &str) -> String {
    json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus-shim",
        "logLevel": "verbose", "logToStderr": true,
        "clusterNetwork": format!("{prefix}/run/multus/cni/net.d/10-ovn-kubernetes.conf"),
        "namespaceIsolation": true,
        "globalNamespaces": OPENSHIFT_GLOBALS,
        "auxiliaryCNIChainName": "vendor-cni-chain",
        "daemonSocketDir": "/run/multus/socket",
    })
    .to_string()
}

/// An OpenShift node's root (in the [`Node`]'s temp dir), its daemon's paths under `prefix`.
fn openshift_root(node: &Node, prefix: &str) -> PathBuf {
    let root = node.net.parent().expect("temp dir").join("root");
    for dir in [
        "etc/kubernetes/cni/net.d",
        "run/multus/cni/net.d",
        "etc/cni/net.d",
        "var/lib/cni/bin",
    ] {
        fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    fs::write(
        root.join("etc/kubernetes/cni/net.d/00-multus.conf"),
        thick_multus(prefix),
    )
    .expect("00-multus.conf");
    fs::write(
        root.join("run/multus/cni/net.d/10-ovn-kubernetes.conf"),
        r#"{"cniVersion":"0.4.0","name":"ovn-kubernetes","type":"ovn-k8s-cni-overlay"}"#,
    )
    .expect("ovn");
    root
}

/// The chart's OpenShift flags (values-openshift.yaml, attach=auxChain), the node's root at `root`.
fn openshift_flags(root: &Path, net_dir: &str) -> Vec<String> {
    [
        format!("--host-prefix={}", root.display()),
        format!("--dest-cni-net-dir={net_dir}"),
        "--dest-cni-bin-dir=/var/lib/cni/bin".into(),
        "--chain-mode=none".into(),
        "--attach=aux-chain".into(),
        "--aux-chain-name=vendor-cni-chain".into(),
        "--aux-chain-dir=/run/multus/cni/net.d".into(),
    ]
    .into()
}

fn once(node: &Node, flags: &[String]) -> Output {
    let out = node
        .bare_command()
        .args(flags)
        .arg("--once")
        .output()
        .expect("run installer");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

const CHAIN_FILE: &str = "run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf";

/// The chain file lands where Multus runs the chain (the node's path of clusterNetwork's directory),
/// naming the kubeconfig written where CRI-O reads configs; nothing goes to /etc/cni/net.d. Another
/// daemon prefix is understood when configured, and refused (nothing written) when not.
#[test]
fn thick_multus_of_openshift_is_found_where_crio_reads_it() {
    let node = Node::new();
    let root = openshift_root(&node, "/host");
    let out = once(&node, &openshift_flags(&root, CRIO_NET_DIR));
    assert!(out.status.success(), "{out:?}");
    let entry: Value =
        serde_json::from_slice(&fs::read(root.join(CHAIN_FILE)).expect("chain file"))
            .expect("json");
    assert_eq!(
        entry["kubernetes"]["kubeconfig"],
        json!(format!("{CRIO_NET_DIR}/{KUBECONFIG}"))
    );
    assert!(root
        .join("etc/kubernetes/cni/net.d")
        .join(KUBECONFIG)
        .is_file());
    assert!(root.join("var/lib/cni/bin/linkerd-cni").is_file());
    assert_eq!(
        fs::read_dir(root.join("etc/cni/net.d"))
            .expect("dir")
            .count(),
        0
    );

    // A daemon that sees the node under /hostroot: refused with the default prefix, and the reason
    // names where Multus reads the chain as the daemon wrote it; installed once the prefix is given.
    let node = Node::new();
    let root = openshift_root(&node, "/hostroot");
    let flags = openshift_flags(&root, CRIO_NET_DIR);
    let out = once(&node, &flags);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!root.join(CHAIN_FILE).exists(), "{log}");
    assert!(
        log.contains(
            "Multus reads the chain from /hostroot/run/multus/cni/net.d/vendor-cni-chain/"
        ),
        "{log}"
    );
    let flags = [flags, vec!["--multus-host-prefix=/hostroot".into()]].concat();
    let out = once(&node, &flags);
    assert!(out.status.success(), "{out:?}");
    assert!(root.join(CHAIN_FILE).is_file());
}

/// Looking where CRI-O on OpenShift reads nothing (/etc/cni/net.d, the values before issue 35): the
/// installer says there is no network config there and which directory to set; it writes no chain
/// file and is not installed.
#[test]
fn no_network_config_where_it_looks_is_said() {
    let node = Node::new();
    let root = openshift_root(&node, "/host");
    let out = once(&node, &openshift_flags(&root, "/etc/cni/net.d"));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("not installed")
            && log.contains("no network config in /etc/cni/net.d")
            && log.contains("OpenShift: /etc/kubernetes/cni/net.d"),
        "{log}"
    );
    assert!(!root.join(CHAIN_FILE).exists());
    // NAD mode: a warning, not silence.
    let flags: Vec<String> = openshift_flags(&root, "/etc/cni/net.d")
        .into_iter()
        .map(|f| {
            if f == "--attach=aux-chain" {
                "--attach=nad".into()
            } else {
                f
            }
        })
        .collect();
    let out = once(&node, &flags);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("no network config in /etc/cni/net.d"), "{log}");
}

/// What the installer publishes on OpenShift's layout: thick Multus in CRI-O's directory with
/// OpenShift's isolation, four globals and chain, the chain file installed; and, looking in a
/// directory with no config at all, `multus: none` without a config file (what `check` fails).
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn publishes_openshifts_multus_from_crios_directory() {
    let client = client().await;
    let group = node_multus::test_group("nm-ocp");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    for (net_dir, multus) in [(CRIO_NET_DIR, "thick"), ("/etc/cni/net.d", "none")] {
        let node_name = linkerd_multus_e2e::unique_name("node");
        let mut node = Node::new();
        let root = openshift_root(&node, "/host");
        node.use_testbed_service_account();
        node.env.extend([
            ("NODE_NAME".to_string(), node_name.clone()),
            ("NODE_MULTUS_API_GROUP".to_string(), group.clone()),
        ]);
        let mut cmd = node.bare_command();
        cmd.args(openshift_flags(&root, net_dir)).arg("--resync=1s");
        let running = node.spawn_command(cmd);
        let obj = eventually("the node's Multus is published", || async {
            objects.get_opt(&node_name).await.ok().flatten()
        })
        .await;
        let spec = &obj.data["spec"];
        assert_eq!(spec["multus"], multus, "{spec}\n{}", running.log());
        assert_eq!(spec["netDir"], net_dir);
        if multus == "thick" {
            assert_eq!(spec["configFile"], format!("{CRIO_NET_DIR}/00-multus.conf"));
            assert_eq!(spec["namespaceIsolation"], true);
            assert_eq!(spec["globalNamespaces"], OPENSHIFT_GLOBALS);
            assert_eq!(spec["auxiliaryCNIChainName"], "vendor-cni-chain");
            assert_eq!(spec["auxChain"]["installed"], true, "{spec}");
            assert_eq!(
                spec["auxChain"]["file"],
                "/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf"
            );
        } else {
            assert_eq!(spec.get("configFile"), None, "{spec}");
            assert_eq!(spec["auxChain"]["installed"], false, "{spec}");
            let reason = spec["auxChain"]["reason"].as_str().unwrap_or_default();
            assert!(reason.contains("/etc/kubernetes/cni/net.d"), "{reason}");
        }
        let (status, log) = running.terminate();
        assert!(status.success(), "{status:?}\n{log}");
    }
}

/// `iptables-mode: auto` (the default): the installer publishes the backend the plugin picks on this
/// node, from the node's binaries under `--node-root`: none (RHEL 10) gives nftables; with iptables
/// binaries an iptables flavour. A configured mode is published as configured.
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn publishes_each_nodes_rules_backend() {
    let client = client().await;
    let group = node_multus::test_group("nm-ipt");
    let _crd = node_multus::install_crd_in(&client, &group).await;
    let objects = node_multus::api(&client, &group);
    let template = |mode: &str| {
        json!({"name": "linkerd-cni", "type": "linkerd-cni",
            "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"},
            "linkerd": {"iptables-mode": mode}})
        .to_string()
    };
    // This machine's legacy tables count too (the installer reads its own network namespace's).
    let legacy_here = fs::read_to_string(rules::backend_choice::IP_TABLES_NAMES)
        .is_ok_and(|t| !rules::backend_choice::parse_ip_tables_names(&t).is_empty());
    let (with_binaries, why) = match legacy_here {
        true => ("legacy", "iptables-legacy"),
        false => ("nft", "nf_tables"),
    };
    // (binaries under the node's root, iptables-mode, backend, reason words)
    let cases: [(&[&str], &str, &str, Option<&str>); 3] = [
        (&[], "auto", "nftables", Some("no iptables binaries")),
        (
            &["iptables-nft-restore", "iptables-nft-save"],
            "auto",
            with_binaries,
            Some(why),
        ),
        (&[], "legacy", "legacy", None),
    ];
    for (binaries, mode, backend, words) in cases {
        let node_name = linkerd_multus_e2e::unique_name("node");
        let mut node = Node::new();
        let root = openshift_root(&node, "/host");
        fs::create_dir_all(root.join("usr/sbin")).expect("usr/sbin");
        for b in binaries {
            fs::write(root.join("usr/sbin").join(b), "").expect("binary");
        }
        node.use_testbed_service_account();
        node.env.extend([
            ("NODE_NAME".to_string(), node_name.clone()),
            ("NODE_MULTUS_API_GROUP".to_string(), group.clone()),
            ("CNI_NETWORK_CONFIG".to_string(), template(mode)),
        ]);
        let mut cmd = node.bare_command();
        cmd.args(openshift_flags(&root, CRIO_NET_DIR))
            .arg(format!("--node-root={}", root.display()))
            .arg("--resync=1s");
        let running = node.spawn_command(cmd);
        let obj = eventually("the node's backend is published", || async {
            let obj = objects.get_opt(&node_name).await.ok().flatten()?;
            obj.data["spec"].get("iptables").is_some().then_some(obj)
        })
        .await;
        let ipt = &obj.data["spec"]["iptables"];
        assert_eq!(ipt["configured"], mode, "{ipt}\n{}", running.log());
        assert_eq!(ipt["backend"], backend, "{ipt}");
        match words {
            Some(words) => {
                let reason = ipt["reason"].as_str().unwrap_or_default();
                assert!(reason.contains(words), "{reason}");
            }
            None => assert_eq!(ipt.get("reason"), None, "{ipt}"),
        }
        let (status, log) = running.terminate();
        assert!(status.success(), "{status:?}\n{log}");
    }
}
