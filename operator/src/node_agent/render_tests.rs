//! Tests of the pure render. The whole-object agreement with the chart is e2e's
//! `node_agent_vs_chart` (it needs helm); these hold what the operator alone decides.

use linkerd_multus_crds::{NodeAgent, NodeAgentSpec};
use rules::attach::Attach;
use serde_json::json;

use super::*;

fn settings(attach: Attach) -> AgentSettings {
    AgentSettings {
        name: "ld".into(),
        cni_namespace: "linkerd-cni".into(),
        cni_configmap: "linkerd-cni-config".into(),
        cni_kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-multus-kubeconfig".into(),
        attach,
        linkerd_namespace: "linkerd".into(),
        default_tag: "0.1.0".into(),
    }
}

fn agent(spec: serde_json::Value) -> NodeAgent {
    let mut agent = NodeAgent::new(
        "ld",
        serde_json::from_value::<NodeAgentSpec>(spec).expect("spec"),
    );
    agent.metadata.uid = Some("u-1".into());
    agent
}

fn args(rendered: &Rendered) -> Vec<String> {
    serde_json::from_value(
        rendered.daemonset["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
    )
    .expect("args")
}

/// An empty spec: the chart's default installer, named after the NodeAgent, owned by it, with the
/// operator's ownership label; the plugin config in Linkerd's format.
#[test]
fn an_empty_spec_is_the_default_installer() {
    let r = render(&agent(json!({})), &settings(Attach::Nad)).expect("renders");
    let ds = &r.daemonset;
    assert_eq!(ds["metadata"]["name"], "ld-cni");
    assert_eq!(ds["metadata"]["namespace"], "linkerd-cni");
    assert_eq!(
        ds["metadata"]["labels"][vocab::MANAGED_BY_LABEL],
        vocab::MANAGED_BY_VALUE
    );
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "linkerd-multus", "app.kubernetes.io/instance": "ld",
               "app.kubernetes.io/component": "cni"})
    );
    let owner = json!([{"apiVersion": "linkerd-multus.io/v1alpha1", "kind": "NodeAgent", "name": "ld",
                        "uid": "u-1", "controller": true}]);
    assert_eq!(ds["metadata"]["ownerReferences"], owner);
    assert_eq!(r.configmap["metadata"]["ownerReferences"], owner);
    assert_eq!(
        args(&r),
        [
            "--dest-cni-net-dir=/etc/cni/net.d",
            "--dest-cni-bin-dir=/opt/cni/bin",
            "--cni-log-level=info",
            "--kubeconfig-name=ZZZ-linkerd-multus-kubeconfig",
            "--attach=nad",
            "--chain-mode=append",
            "--aux-chain-name=vendor-cni-chain",
            "--multus-host-prefix=/host",
            "--node-root=/node",
            "--service-account-dir=/var/run/secrets/kubernetes.io/serviceaccount",
            "--resync=5s",
            "--ready-file=/tmp/linkerd-cni-install.ready",
            "--plugin-service-account=linkerd-cni-plugin",
            "--plugin-token-lifetime=24h",
        ]
    );
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["image"],
        "ghcr.io/linkerd-multus/linkerd-cni-install:0.1.0"
    );
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    let config: serde_json::Value = serde_json::from_str(
        r.configmap["data"][vocab::CNI_CONFIG_KEY]
            .as_str()
            .expect("text"),
    )
    .expect("the plugin config is JSON");
    assert_eq!(
        config["linkerd"]["inbound-ports-to-ignore"],
        json!(["4191", "4190"])
    );
    assert_eq!(config["linkerd"]["iptables-mode"], "auto");
    assert_eq!(
        config["kubernetes"]["kubeconfig"],
        "__KUBECONFIG_FILEPATH__"
    );
}

/// The operator's attach mode, not the spec, decides the installer's attach flags: aux-chain forces
/// chain mode none, adds Linkerd's namespace, and mounts the chain's own directory.
#[test]
fn the_operators_attach_mode_reaches_the_installer() {
    let spec = json!({"chainMode": "append", "auxChain": {"dir": "/run/multus/cni/net.d/"}});
    // aux-chain: no NAD names the kubeconfig, so the operator's --cni-kubeconfig does not matter.
    let mut aux = settings(Attach::AuxChain);
    aux.cni_kubeconfig = "/elsewhere".into();
    render(&agent(spec.clone()), &aux).expect("renders");
    let r = render(&agent(spec.clone()), &settings(Attach::AuxChain)).expect("renders");
    let a = args(&r);
    for want in [
        "--attach=aux-chain",
        "--chain-mode=none",
        "--aux-chain-dir=/run/multus/cni/net.d",
        "--linkerd-namespace=linkerd",
    ] {
        assert!(a.contains(&want.to_string()), "{want} missing: {a:?}");
    }
    let volumes = r.daemonset["spec"]["template"]["spec"]["volumes"].to_string();
    assert!(volumes.contains("DirectoryOrCreate"), "{volumes}");
    let nad = args(&render(&agent(spec), &settings(Attach::Nad)).expect("renders"));
    assert!(nad.contains(&"--chain-mode=append".to_string()), "{nad:?}");
    assert!(
        !nad.iter().any(|a| a.starts_with("--linkerd-namespace")),
        "{nad:?}"
    );
    // Still mounted in nad mode: the installer removes its chain file left from aux-chain mode.
    assert!(
        nad.contains(&"--aux-chain-dir=/run/multus/cni/net.d".to_string()),
        "{nad:?}"
    );
}

/// The pod template's checksum follows the plugin config and nothing else: a changed config rolls
/// the installers (they read it once), a changed toleration does not look like one.
#[test]
fn the_checksum_follows_the_plugin_config() {
    let sum = |spec| {
        render(&agent(spec), &settings(Attach::Nad))
            .expect("renders")
            .daemonset["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            .clone()
    };
    let base = sum(json!({}));
    assert_eq!(base.as_str().map(str::len), Some(16));
    assert_ne!(sum(json!({"proxyUID": 1000})), base);
    assert_ne!(sum(json!({"destCNIBinDir": "/var/lib/cni/bin"})), base);
    assert_eq!(sum(json!({"tolerations": []})), base);
}

/// A port list that is not ports renders nothing, naming the field (helm's atoi would write 0).
#[test]
fn a_bad_port_is_refused() {
    let err = render(
        &agent(json!({"portsToRedirect": "80,http"})),
        &settings(Attach::Nad),
    )
    .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "spec.portsToRedirect: `http` is not a port number; fix the NodeAgent's spec"
    );
}

/// With NADs, a NodeAgent whose kubeconfig is not the one the NADs name renders nothing: every
/// attached pod would fail its sandbox.
#[test]
fn a_kubeconfig_the_nads_do_not_name_is_refused() {
    let err = render(
        &agent(json!({"destCNINetDir": "/etc/kubernetes/cni/net.d"})),
        &settings(Attach::Nad),
    )
    .expect_err("refused");
    assert!(
        err.to_string().contains("is /etc/kubernetes/cni/net.d/ZZZ-linkerd-multus-kubeconfig, but the operator's --cni-kubeconfig"),
        "{err}"
    );
}
