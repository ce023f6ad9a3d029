//! The OpenShift values (`helm/values-openshift.yaml`) against OpenShift's node layout (issue 35): the
//! installer, run with exactly the arguments the chart renders (the node's root aside, `--host-prefix`),
//! on a temp node laid out as an OpenShift 4.18+ node is: CRI-O's CNI configs in
//! /etc/kubernetes/cni/net.d holding thick Multus' generated 00-multus.conf (the daemon's container
//! paths under /host, OpenShift's isolation, globals and chain), the cluster network's config in
//! /run/multus/cni/net.d, an empty /etc/cni/net.d that nothing reads, plugins in /var/lib/cni/bin.
//! With the values of before issue 35 (destCNINetDir /etc/cni/net.d) the installer sees no Multus.

mod support;

use clap::Parser;
use linkerd_cni_installer::{Args, Installer, Settings};
use linkerd_multus_crds::node_multus::{MultusKind, NodeMultusSpec};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use support::*;

const OPENSHIFT_GLOBALS: &str =
    "default,openshift-multus,openshift-sriov-network-operator,openshift-cnv";

/// What the network operator's thick daemon writes (Multus v4.2 `generator.go`, its daemon config).
const THICK_00_MULTUS: &str = r#"{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim","logLevel":"verbose","logToStderr":true,"clusterNetwork":"/host/run/multus/cni/net.d/10-ovn-kubernetes.conf","namespaceIsolation":true,"globalNamespaces":"default,openshift-multus,openshift-sriov-network-operator,openshift-cnv","auxiliaryCNIChainName":"vendor-cni-chain","daemonSocketDir":"/run/multus/socket"}"#;

/// An OpenShift node's CNI directories under a temp root, and a service-account dir beside it.
struct OpenShiftNode {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    sa: PathBuf,
    plugin: PathBuf,
}

impl OpenShiftNode {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("node");
        let mk = |p: &str| {
            let dir = root.join(p);
            fs::create_dir_all(&dir).expect("mkdir");
            dir
        };
        fs::write(
            mk("etc/kubernetes/cni/net.d").join("00-multus.conf"),
            THICK_00_MULTUS,
        )
        .expect("00-multus.conf");
        fs::write(
            mk("run/multus/cni/net.d").join("10-ovn-kubernetes.conf"),
            r#"{"cniVersion":"0.4.0","name":"ovn-kubernetes","type":"ovn-k8s-cni-overlay"}"#,
        )
        .expect("ovn config");
        mk("etc/cni/net.d");
        mk("var/lib/cni/bin");
        let sa = tmp.path().join("sa");
        fs::create_dir_all(&sa).expect("sa");
        fs::write(sa.join("token"), "a-token").expect("token");
        fs::write(sa.join("ca.crt"), "-----BEGIN CERTIFICATE-----\n").expect("ca");
        let plugin = tmp.path().join("linkerd-cni");
        fs::write(&plugin, "#!/bin/sh\n").expect("plugin");
        OpenShiftNode {
            _tmp: tmp,
            root,
            sa,
            plugin,
        }
    }

    fn on_node(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }
}

/// The installer's args as the chart renders them, and the operator's CNI_KUBECONFIG.
fn rendered(values: &Path, extra: &[&str]) -> (Vec<String>, String) {
    let mut args = vec!["-f", path_str(values), "--set", "cni.enabled=true"];
    args.extend_from_slice(extra);
    let docs = parse_docs(&helm_template(TEMPLATE_RELEASE, TEMPLATE_NAMESPACE, &args));
    let ds = find(&docs, "DaemonSet", None);
    let installer = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect();
    let kubeconfig = operator_env(&docs)["CNI_KUBECONFIG"]
        .as_str()
        .expect("CNI_KUBECONFIG")
        .to_string();
    (installer, kubeconfig)
}

/// One pass of the installer on `node` with the chart's args; the node's root mapped by
/// `--host-prefix` (the chart mounts node paths at their own paths), the pod's account by ours.
fn pass(node: &OpenShiftNode, chart_args: &[String]) -> linkerd_cni_installer::Report {
    let mut argv: Vec<String> = vec!["linkerd-cni-install".into()];
    argv.extend(
        chart_args
            .iter()
            .filter(|a| !a.starts_with("--service-account-dir"))
            .cloned(),
    );
    argv.push(format!("--host-prefix={}", node.root.display()));
    argv.push(format!("--service-account-dir={}", node.sa.display()));
    argv.push(format!("--plugin-binary={}", node.plugin.display()));
    let args = Args::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let env = |k: &str| match k {
        "KUBERNETES_SERVICE_HOST" => Some("10.0.0.1".to_string()),
        "KUBERNETES_SERVICE_PORT" => Some("443".to_string()),
        _ => None,
    };
    Installer::new(Settings::resolve(args, env, None).expect("names a mode")).pass()
}

/// If this breaks, on OpenShift the installer looks where CRI-O keeps no config: it never finds
/// Multus, publishes `multus: none` (a NAD placement blind to OpenShift's isolation), and in aux-chain
/// mode never writes the chain file, so every meshed pod fails its validator. With the OpenShift
/// values, in both attach modes, the installer reads thick Multus where CRI-O reads it, publishes
/// OpenShift's isolation, globals and chain, is ready, and (aux-chain) writes linkerd-cni's file
/// where Multus runs the chain, naming the kubeconfig the operator's NADs name.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn openshift_values_find_thick_multus_where_crio_reads_it() {
    let values = chart_dir().join("values-openshift.yaml");
    for attach in ["nad", "auxChain"] {
        let node = OpenShiftNode::new();
        let set = format!("attach={attach}");
        let (args, cni_kubeconfig) = rendered(&values, &["--set", &set]);
        let report = pass(&node, &args);
        assert!(report.errors.is_empty(), "{attach}: {:?}", report.errors);
        assert_eq!(report.waiting, None, "{attach}: not ready");
        let observation = report.observed.clone().expect("the node's Multus read");
        let net_dir = args
            .iter()
            .find_map(|a| a.strip_prefix("--dest-cni-net-dir="))
            .expect("--dest-cni-net-dir");
        let spec = NodeMultusSpec::observed(
            "node-1",
            None,
            net_dir,
            &observation,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        );
        assert_eq!(spec.multus, MultusKind::Thick, "{attach}: {spec:?}");
        assert_eq!(
            spec.config_file.as_deref(),
            Some("/etc/kubernetes/cni/net.d/00-multus.conf"),
            "{attach}"
        );
        assert_eq!(spec.namespace_isolation, Some(true), "{attach}");
        assert_eq!(
            spec.global_namespaces.as_deref(),
            Some(OPENSHIFT_GLOBALS),
            "{attach}"
        );
        assert_eq!(
            spec.auxiliary_cni_chain_name.as_deref(),
            Some("vendor-cni-chain"),
            "{attach}"
        );
        assert_eq!(spec.no_network_config(), None, "{attach}");
        // The plugin's kubeconfig is where the operator's NADs (and the chain file) say.
        assert!(
            node.on_node(&cni_kubeconfig).is_file(),
            "{attach}: {cni_kubeconfig} not written"
        );
        assert!(node.on_node("/var/lib/cni/bin/linkerd-cni").is_file());
        let chain_file = node.on_node("/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf");
        if attach == "auxChain" {
            let aux = report.aux_chain.as_ref().expect("aux-chain state");
            assert!(aux.installed, "{aux:?}");
            assert_eq!(aux.reason, None, "{aux:?}");
            let entry: Value =
                serde_json::from_slice(&fs::read(&chain_file).expect("chain file")).expect("json");
            assert_eq!(entry["kubernetes"]["kubeconfig"], cni_kubeconfig.as_str());
        } else {
            assert!(!chain_file.exists(), "nad mode writes no chain file");
        }
        // Nothing in the directory nobody reads on OpenShift.
        let unread = fs::read_dir(node.on_node("/etc/cni/net.d"))
            .expect("dir")
            .count();
        assert_eq!(unread, 0, "{attach}: wrote into /etc/cni/net.d");
    }
}

/// Where the installer finds no network config at all (here: the values pointed at /etc/cni/net.d,
/// which CRI-O on OpenShift does not read), it says so: aux-chain mode is not ready and names the
/// directory to set; nad mode warns; the NodeMultus it publishes reads as "no network config", which
/// `check` fails, never as a silent "no Multus".
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn no_network_config_where_the_installer_looks_is_said() {
    let values = chart_dir().join("values-openshift.yaml");
    for attach in ["nad", "auxChain"] {
        let node = OpenShiftNode::new();
        let set = format!("attach={attach}");
        let (args, _) = rendered(
            &values,
            &["--set", &set, "--set", "cni.destCNINetDir=/etc/cni/net.d"],
        );
        let report = pass(&node, &args);
        let observation = report.observed.clone().expect("read");
        let spec = NodeMultusSpec::observed(
            "node-1",
            None,
            "/etc/cni/net.d",
            &observation,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        );
        let why = spec.no_network_config().expect("said");
        assert!(why.contains("/etc/kubernetes/cni/net.d"), "{why}");
        let said = match attach {
            "auxChain" => report.waiting.clone().expect("not ready in aux-chain mode"),
            _ => report.warnings.join("; "),
        };
        assert!(
            said.contains("no network config in /etc/cni/net.d")
                && said.contains("/etc/kubernetes/cni/net.d"),
            "{attach}: {said}"
        );
    }
}
