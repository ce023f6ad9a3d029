//! linkerd-cni against pods in the real local apiserver, called directly on a fresh netns the way
//! Multus calls an extra attachment (no bridge, often no prevResult). Covers the per-pod
//! decisions: pass-through, skip, bad annotations, overrides, runAsUser, control plane, native
//! sidecars, IPv6, simulate, DEL after the pod is gone. Needs root and `e2e/testbed up`.

mod support;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::DeleteParams;
use kube::Api;
use linkerd_multus_e2e::cni::{exec_plugin, PluginFailure, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::{json, Value};
use support::*;

/// A standalone plugin config (what a NAD of type linkerd-cni carries).
fn config(version: &'static str, mode: &'static str, linkerd: Value) -> Value {
    let mut s = PluginSettings::new(version, mode);
    s.linkerd = linkerd;
    let mut cfg = s.plugin_entry();
    cfg["cniVersion"] = json!(version);
    cfg["name"] = json!("linkerd-cni");
    cfg
}

fn call(
    ns: &NetNs,
    command: &str,
    cfg: &Value,
    namespace: &str,
    pod: &str,
) -> Result<Option<Value>, PluginFailure> {
    let rt = Runtime::new(&ns.path()).with_pod(namespace, pod);
    exec_plugin(&plugin_dirs(), command, cfg, &rt)
}

fn rules(ns: &NetNs, save: &str) -> Vec<String> {
    let out = ns.exec(&[save, "-t", "nat"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    our_lines(&String::from_utf8_lossy(&out.stdout))
}

/// Multus' extra attachment: no prevResult → an empty result of the config's version, rules in.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn without_prev_result_prints_an_empty_result_and_installs_rules() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-noprev").await;
    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    let ns = NetNs::create("lcni-noprev");
    for version in ["0.3.1", "1.0.0", "1.1.0"] {
        let out = call(
            &ns,
            "ADD",
            &config(version, "legacy", json!({})),
            &tns.name,
            "web",
        )
        .unwrap_or_else(|e| panic!("ADD {version}: {e}"));
        assert_eq!(out, Some(json!({"cniVersion": version, "dns": {}})));
        assert_eq!(
            rules(&ns, "iptables-legacy-save"),
            default_expected_rules(2102),
            "{version}"
        );
    }
}

/// A pod without a proxy, or with linkerd-init, gets nothing from us and its prevResult back.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn unmeshed_and_init_container_pods_pass_through() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-skip").await;
    create_pod(
        &client,
        &tns.name,
        "plain",
        json!({}),
        json!({"containers": [{"name": "app", "image": "a"}]}),
    )
    .await;
    create_pod(
        &client,
        &tns.name,
        "with-init",
        json!({}),
        json!({
        "initContainers": [{"name": "linkerd-init", "image": "proxy-init"}],
        "containers": [{"name": "app", "image": "a"}, {"name": "linkerd-proxy", "image": "p"}]}),
    )
    .await;
    let prev = json!({"cniVersion": "0.4.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
        "ips": [{"version": "4", "address": "10.9.9.9/24", "interface": 0}], "dns": {}});
    for pod in ["plain", "with-init"] {
        let ns = NetNs::create("lcni-skip");
        let mut cfg = config("0.4.0", "legacy", json!({}));
        cfg["prevResult"] = prev.clone();
        let out = call(&ns, "ADD", &cfg, &tns.name, pod).unwrap_or_else(|e| panic!("{pod}: {e}"));
        assert_eq!(out.as_ref(), Some(&prev), "{pod}");
        assert_eq!(
            rules(&ns, "iptables-legacy-save"),
            Vec::<String>::new(),
            "{pod}"
        );
        call(&ns, "CHECK", &cfg, &tns.name, pod).unwrap_or_else(|e| panic!("CHECK {pod}: {e}"));
    }
}

/// A bad annotation fails ADD with code 100 naming it, and leaves the netns untouched.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn bad_annotations_fail_and_change_nothing() {
    let client = client().await;
    let tns = TestNamespace::create_with(
        &client,
        "cni-badann",
        [(
            "config.linkerd.io/skip-subnets".to_string(),
            "10.0.0.0/99".to_string(),
        )]
        .into(),
    )
    .await;
    create_pod(
        &client,
        &tns.name,
        "bad-uid",
        json!({"annotations": {"config.linkerd.io/proxy-uid": "proxy",
                               // the pod's own valid value hides the namespace's broken one
                               "config.linkerd.io/skip-subnets": "10.0.0.0/8"}}),
        meshed_spec(),
    )
    .await;
    let ns = NetNs::create("lcni-badann");
    let cfg = config("1.0.0", "legacy", json!({}));
    let err = call(&ns, "ADD", &cfg, &tns.name, "bad-uid").expect_err("bad proxy-uid");
    assert_eq!(err.code(), Some(100), "{err}");
    assert_eq!(
        err.msg(),
        Some(format!("pod {}/bad-uid: annotation config.linkerd.io/proxy-uid=\"proxy\" on the pod: not a uid: it is not a decimal number; write the uid in digits, e.g. 2102", tns.name).as_str())
    );
    assert_eq!(rules(&ns, "iptables-legacy-save"), Vec::<String>::new());

    // The namespace's annotation applies to pods that do not set it.
    create_pod(&client, &tns.name, "ns-subnets", json!({}), meshed_spec()).await;
    let err =
        call(&ns, "ADD", &cfg, &tns.name, "ns-subnets").expect_err("bad namespace skip-subnets");
    assert_eq!(err.code(), Some(100), "{err}");
    assert!(
        err.msg()
            .unwrap_or_default()
            .contains("skip-subnets=\"10.0.0.0/99\" on the namespace"),
        "{err}"
    );
    assert_eq!(rules(&ns, "iptables-legacy-save"), Vec::<String>::new());
}

/// Namespace and pod annotations and the proxy's runAsUser shape the rules (linkerd2#2812: the
/// exempt uid is the one the proxy really runs as).
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn annotations_and_run_as_user_shape_the_rules() {
    let client = client().await;
    let tns = TestNamespace::create_with(
        &client,
        "cni-override",
        [(
            "config.linkerd.io/skip-outbound-ports".to_string(),
            "3306,9000-9100".to_string(),
        )]
        .into(),
    )
    .await;
    create_pod(&client, &tns.name, "db-client",
        json!({"annotations": {"config.linkerd.io/skip-inbound-ports": "8443",
                               "config.linkerd.io/proxy-gid": "3000"}}),
        json!({"automountServiceAccountToken": false, "containers": [
            {"name": "app", "image": "a"},
            {"name": "linkerd-proxy", "image": "p", "securityContext": {"runAsUser": 1000650000}}]})).await;
    let ns = NetNs::create("lcni-override");
    call(
        &ns,
        "ADD",
        &config("1.0.0", "nft", json!({})),
        &tns.name,
        "db-client",
    )
    .unwrap_or_else(|e| panic!("ADD: {e}"));
    let got = rules(&ns, "iptables-nft-save");
    let want = [
        ":PROXY_INIT_OUTPUT -",
        ":PROXY_INIT_REDIRECT -",
        "-A PREROUTING -m comment --comment \"proxy-init/install-proxy-init-prerouting\" -j PROXY_INIT_REDIRECT",
        "-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT",
        "-A PROXY_INIT_OUTPUT -m owner --uid-owner 1000650000 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN",
        "-A PROXY_INIT_OUTPUT -m owner --gid-owner 3000 -m comment --comment \"proxy-init/ignore-proxy-group-id\" -j RETURN",
        "-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN",
        "-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 3306,9000:9100 -m comment --comment \"proxy-init/ignore-port-3306,9000:9100\" -j RETURN",
        "-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140",
        "-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4191,4190,8443 -m comment --comment \"proxy-init/ignore-port-4191,4190,8443\" -j RETURN",
        "-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143",
    ];
    assert_eq!(got, want);
}

/// Control-plane pods must reach the apiserver without their (not yet running) proxy: the ports
/// and target ports of the real `default/kubernetes` Service are skipped outbound.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn control_plane_pods_skip_the_apiserver_ports() {
    let client = client().await;
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the apiserver's own Service");
    let mut ports: Vec<String> = Vec::new();
    for p in svc.spec.and_then(|s| s.ports).unwrap_or_default() {
        ports.push(p.port.to_string());
        if let Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(t)) =
            p.target_port
        {
            if !ports.contains(&t.to_string()) {
                ports.push(t.to_string());
            }
        }
    }
    assert!(ports.len() >= 2, "443 and the secure port: {ports:?}");
    let tns = TestNamespace::create(&client, "cni-ctl").await;
    create_pod(
        &client,
        &tns.name,
        "destination",
        json!({"labels": {"linkerd.io/control-plane-component": "destination"}}),
        meshed_spec(),
    )
    .await;
    let ns = NetNs::create("lcni-ctl");
    call(
        &ns,
        "ADD",
        &config(
            "0.4.0",
            "legacy",
            json!({"outbound-ports-to-ignore": ["25"]}),
        ),
        &tns.name,
        "destination",
    )
    .unwrap_or_else(|e| panic!("ADD: {e}"));
    let list = format!("25,{}", ports.join(","));
    let want = format!("-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports {list} -m comment --comment \"proxy-init/ignore-port-{list}\" -j RETURN");
    let got = rules(&ns, "iptables-legacy-save");
    assert!(got.contains(&want), "{want}\nnot in\n{got:#?}");
}

/// Linkerd 2.15+ runs the proxy as a native sidecar (an init container with restartPolicy Always).
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn native_sidecar_proxies_get_rules() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-sidecar").await;
    create_pod(
        &client,
        &tns.name,
        "web",
        json!({}),
        json!({
        "automountServiceAccountToken": false,
        "initContainers": [{"name": "linkerd-proxy", "image": "p", "restartPolicy": "Always"}],
        "containers": [{"name": "app", "image": "a"}]}),
    )
    .await;
    let ns = NetNs::create("lcni-sidecar");
    let res = call(
        &ns,
        "ADD",
        &config("1.0.0", "legacy", json!({})),
        &tns.name,
        "web",
    );
    // An apiserver that predates native sidecars drops restartPolicy on init containers; then
    // the pod has no proxy by the spec it stored, and passing through is right.
    let stored = Api::<Pod>::namespaced(client.clone(), &tns.name)
        .get("web")
        .await
        .expect("pod");
    let kept = stored
        .spec
        .and_then(|s| s.init_containers)
        .unwrap_or_default()
        .iter()
        .any(|c| c.restart_policy.as_deref() == Some("Always"));
    res.unwrap_or_else(|e| panic!("ADD: {e}"));
    let got = rules(&ns, "iptables-legacy-save");
    if kept {
        assert_eq!(got, default_expected_rules(2102));
    } else {
        assert_eq!(
            got,
            Vec::<String>::new(),
            "restartPolicy was dropped by this apiserver"
        );
    }
}

/// IPv6 on: the same rules also go to ip6tables, of the same flavour.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn ipv6_rules_go_to_ip6tables() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-v6").await;
    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    let ns = NetNs::create("lcni-v6");
    let cfg = config(
        "1.0.0",
        "nft",
        json!({"ipv6": true, "subnets-to-ignore": ["10.0.0.0/8", "fd00::/8"]}),
    );
    call(&ns, "ADD", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("ADD: {e}"));
    let v6 = rules(&ns, "ip6tables-nft-save");
    let v4 = rules(&ns, "iptables-nft-save");
    let subnet = |net: &str| {
        format!("-A PROXY_INIT_REDIRECT -s {net} -m comment --comment \"proxy-init/ignore-subnet-{net}\" -j RETURN")
    };
    assert!(
        v6.contains(&subnet("fd00::/8")) && !v6.contains(&subnet("10.0.0.0/8")),
        "{v6:#?}"
    );
    assert!(
        v4.contains(&subnet("10.0.0.0/8")) && !v4.contains(&subnet("fd00::/8")),
        "{v4:#?}"
    );
    let without_subnets = |r: &[String]| {
        r.iter()
            .filter(|l| !l.contains("ignore-subnet"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(without_subnets(&v6), default_expected_rules(2102));
    assert_eq!(without_subnets(&v4), default_expected_rules(2102));
    call(&ns, "CHECK", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("CHECK: {e}"));
    call(&ns, "DEL", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("DEL: {e}"));
    assert!(
        rules(&ns, "ip6tables-nft-save").is_empty() && rules(&ns, "iptables-nft-save").is_empty()
    );
}

/// `simulate` logs the plan and changes nothing.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn simulate_changes_nothing() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-sim").await;
    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    let ns = NetNs::create("lcni-sim");
    call(
        &ns,
        "ADD",
        &config("0.4.0", "legacy", json!({"simulate": true})),
        &tns.name,
        "web",
    )
    .unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_eq!(rules(&ns, "iptables-legacy-save"), Vec::<String>::new());
}

/// A pod that does not exist is an error (code 102), not a silent pass-through; DEL after the
/// pod is gone still cleans up.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn missing_pod_fails_add_but_not_del() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-gone").await;
    let ns = NetNs::create("lcni-gone");
    let cfg = config("1.0.0", "legacy", json!({}));
    let err = call(&ns, "ADD", &cfg, &tns.name, "nope").expect_err("no such pod");
    assert_eq!(err.code(), Some(102), "{err}");
    assert!(
        err.msg()
            .unwrap_or_default()
            .contains(&format!("pod {}/nope", tns.name)),
        "{err}"
    );

    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    call(&ns, "ADD", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("ADD: {e}"));
    Api::<Pod>::namespaced(client.clone(), &tns.name)
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete pod");
    call(&ns, "DEL", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(rules(&ns, "iptables-legacy-save"), Vec::<String>::new());
}

/// `plain` uses the node's `iptables-restore` (Debian's alternative, nft here), and
/// `use-wait-flag` passes `-w`, which the real binaries must accept.
#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn plain_mode_with_the_wait_flag() {
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-plain").await;
    create_pod(&client, &tns.name, "web", json!({}), meshed_spec()).await;
    let ns = NetNs::create("lcni-plain");
    let cfg = config("0.4.0", "plain", json!({"use-wait-flag": true}));
    call(&ns, "ADD", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_eq!(rules(&ns, "iptables-save"), default_expected_rules(2102));
    call(&ns, "CHECK", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("CHECK: {e}"));
    call(&ns, "DEL", &cfg, &tns.name, "web").unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(rules(&ns, "iptables-save"), Vec::<String>::new());
}
