//! Step 8 of the node scenario: linkerd-cni attached through Multus' auxiliary CNI chain (issue 26).
//! The node's Multus (the stand-in) is configured as OpenShift 4.18 configures it: the cluster
//! network read from its file in `/run/multus/cni/net.d` (in the node's own /run, a tmpfs) and
//! `auxiliaryCNIChainName: vendor-cni-chain`. The admin switches the release to `attach=auxChain`:
//! the installer puts linkerd-cni's config in the chain's directory, the pods restarted come without
//! a networks annotation and are redirected, the NADs go once no pod lists them (0 left), a pod that
//! is not meshed gets no rules. A node "reboot" (the chain directory emptied, containerd restarted,
//! the installer away meanwhile) lets one pod start without rules: its validator exits 95, repair
//! leaves it while the node has no Ready installer and restarts it once the installer is back. A DaemonSet rollout fails no sandbox; `check` passes, and
//! fails naming the node when its Multus loses the chain. Then back to NADs.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::wait_for_explained;
use serde_json::{json, Value};

use super::*;
use crate::{assert_redirected, pod_names, step_cni_rollout_while_creating_pods, Meshed};

/// Where OpenShift 4.18's Multus finds the cluster network's config, so the chain's parent too.
const AUX_DIR: &str = "/run/multus/cni/net.d";
const CHAIN: &str = vocab::DEFAULT_AUX_CHAIN_NAME;
/// The cluster network's config in [`AUX_DIR`] (the stand-in's delegate, moved to a file).
const CLUSTER_NETWORK: &str = "10-testbed.conflist";
/// Removing the nodeSelector's key brings the installer back.
const NO_INSTALLER: &str = "linkerd-multus-test/no-installer";
const NETWORKS: &str = "k8s.v1.cni.cncf.io/networks";

pub fn step_attach_through_the_aux_chain(node: &Node, meshed: &Meshed, plain: &str) {
    let multus = MultusConf::new(node);
    let _aux_dir = RemovedOnDrop(node.in_node_mounts(AUX_DIR));
    write_multus(node, &multus, Some(CHAIN));
    switch_to_aux_chain(node, meshed, plain);
    unmeshed_pod_gets_no_rules(node, meshed, plain);
    reboot_window(node, meshed);
    step_cni_rollout_while_creating_pods(node, meshed);
    check_fails_without_the_chain(node, &multus);
    switch_back_to_nads(node, meshed);
    drop(multus);
}

/// The node's files of this step (the cluster network's config, the chain's directory), removed when
/// dropped so the node is left as the step found it.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// linkerd-cni's file in the chain's directory, as this process reaches the node's /run.
fn chain_file(node: &Node) -> PathBuf {
    node.in_node_mounts(&format!("{AUX_DIR}/{CHAIN}/{}", vocab::AUX_CHAIN_FILE_NAME))
}

/// The stand-in's config as OpenShift 4.18 writes Multus': the cluster network from its file in
/// [`AUX_DIR`], and `chain` as `auxiliaryCNIChainName` (none: the key is absent).
fn write_multus(node: &Node, multus: &MultusConf, chain: Option<&str>) {
    let mut conf = multus.original();
    let cluster = conf["delegates"][0].clone();
    assert!(cluster.is_object(), "the stand-in's delegate: {conf}");
    let dir = node.in_node_mounts(AUX_DIR);
    std::fs::create_dir_all(&dir).expect("the node's /run/multus/cni/net.d");
    std::fs::write(dir.join(CLUSTER_NETWORK), cluster.to_string()).expect("cluster network");
    let obj = conf.as_object_mut().expect("Multus config object");
    obj.remove("delegates");
    obj.insert(
        "clusterNetwork".into(),
        json!(format!("{AUX_DIR}/{CLUSTER_NETWORK}")),
    );
    if let Some(chain) = chain {
        obj.insert("auxiliaryCNIChainName".into(), json!(chain));
    }
    multus.write(&conf);
}

fn upgrade(node: &Node, sets: &[&str]) -> Duration {
    let start = Instant::now();
    helm_upgrade(node, sets);
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
    start.elapsed()
}

/// Namespaces annotated `linkerd.io/multus=enabled`.
fn enabled_namespaces(node: &Node) -> Vec<String> {
    let list = node.get_json(&["namespaces"]).expect("namespaces");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["metadata"]["annotations"]["linkerd.io/multus"] == "enabled")
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Every NAD of the cluster, `namespace/name`.
fn all_nads(node: &Node) -> Vec<String> {
    node.kubectl_ok(&[
        "get",
        "network-attachment-definitions",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
    ])
    .split_whitespace()
    .map(str::to_string)
    .collect()
}

/// Restarts every Deployment of `ns` and waits until each has only new pods, Ready.
fn restart_deployments(node: &Node, ns: &str) {
    node.kubectl_ok(&["-n", ns, "rollout", "restart", "deployment"]);
    let names = node.kubectl_ok(&[
        "-n",
        ns,
        "get",
        "deployments",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    for name in names.split_whitespace() {
        node.kubectl_ok(&[
            "-n",
            ns,
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=120s",
        ]);
    }
}

/// The pods of `ns` labelled `app=meshed`, not on their way out and not in `old`.
fn new_meshed_pods(node: &Node, ns: &str, old: &BTreeSet<String>) -> Vec<Value> {
    let list = node
        .get_json(&["-n", ns, "pods", "-l", "app=meshed"])
        .expect("pods");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| !old.contains(p["metadata"]["name"].as_str().unwrap_or_default()))
        .cloned()
        .collect()
}

/// The admin's switch: `helm upgrade --set attach=auxChain` with the chain's directory. The chain file
/// appears; restarted pods are attached by the chain (no networks annotation, still the range's proxy
/// uid) and redirected; the old NADs go once no pod lists them.
fn switch_to_aux_chain(node: &Node, meshed: &Meshed, plain: &str) {
    let ns = &meshed.ns;
    let took = upgrade(
        node,
        &["attach=auxChain", &format!("cni.auxChain.dir={AUX_DIR}")],
    );
    eprintln!("helm upgrade to attach=auxChain -> operator and installer Ready in {took:?}");
    let file = std::fs::read_to_string(chain_file(node))
        .unwrap_or_else(|e| panic!("the installer's file in the chain's directory: {e}"));
    let conf: Value = serde_json::from_str(&file).expect("the chain file is JSON");
    assert_eq!(conf["type"], "linkerd-cni", "{conf}");
    assert_eq!(
        conf["kubernetes"]["kubeconfig"].as_str(),
        node.cni_dir().join("net.d").join(KUBECONFIG_NAME).to_str(),
        "the chain's config names the installer's kubeconfig: {conf}"
    );
    assert!(
        all_nads(node).contains(&format!("{ns}/linkerd-cni")),
        "the NAD stays while pods list it"
    );

    let old: BTreeSet<String> = pod_names(node, ns).into_iter().collect();
    let start = Instant::now();
    for enabled in enabled_namespaces(node) {
        restart_deployments(node, &enabled);
    }
    wait_for_explained(
        "no NAD left in the cluster once no pod lists one",
        Duration::from_secs(240),
        || all_nads(node).is_empty().then_some(()),
        || format!("NADs: {:?}", all_nads(node)),
    );
    eprintln!(
        "pods restarted -> 0 NADs in the cluster in {:?}",
        start.elapsed()
    );
    let pod = new_meshed_pods(node, ns, &old)
        .into_iter()
        .next()
        .expect("a restarted meshed pod");
    let annotations = &pod["metadata"]["annotations"];
    assert!(
        annotations[NETWORKS].is_null(),
        "aux-chain mode adds no networks annotation: {annotations}"
    );
    let proxy_uid = pod["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "linkerd-proxy"))
        .and_then(|c| c["securityContext"]["runAsUser"].as_u64());
    assert_eq!(proxy_uid, Some(RANGE_PROXY_UID), "{}", pod["spec"]);
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    assert!(
        logs(node, ns, name, "linkerd-network-validator").contains("validated:"),
        "the chain's linkerd-cni redirected {name} (its validator passed)"
    );
    let ip = pod["status"]["podIP"].as_str().expect("pod IP");
    assert_redirected(node, ns, name, ip, plain);
}

/// A pod of an enabled namespace that is not meshed: the chain runs linkerd-cni for it too, which
/// writes nothing, so its 8080 reaches the app itself.
fn unmeshed_pod_gets_no_rules(node: &Node, meshed: &Meshed, plain: &str) {
    let ns = &meshed.ns;
    apply(
        node,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "unmeshed", "namespace": ns, "labels": {"app": "unmeshed"},
                         "annotations": {"linkerd.io/inject": "disabled"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "app", "image": meshed.test_image, "imagePullPolicy": "Never",
                "args": ["app"]}]},
        }),
    );
    let pod = wait_pod_running(node, ns, "app=unmeshed");
    let addr = format!("{}:8080", pod["status"]["podIP"].as_str().expect("pod IP"));
    let direct = run_to_completion(node, plain, "client-unmeshed", &["ask", &addr]);
    assert_eq!(
        direct.trim(),
        "app unmeshed",
        "a pod that is not meshed gets no rules: {addr} reaches the app itself"
    );
    node.kubectl_ok(&["-n", ns, "delete", "pod", "unmeshed", "--wait=true"]);
}

/// The validator's exit code in `pod`'s current or last run.
fn validator_exit(pod: &Value) -> Option<i64> {
    let status = pod["status"]["initContainerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "linkerd-network-validator")?;
    ["state", "lastState"]
        .iter()
        .find_map(|s| status[s]["terminated"]["exitCode"].as_i64())
}

/// A node "reboot": the installer away (kept off by a nodeSelector), the chain's directory emptied
/// (the node's /run is a tmpfs), containerd restarted. Pods already running keep their rules; one
/// created in the window starts without, its validator exits 95, and once the installer is back
/// repair restarts it and the replacement is redirected.
fn reboot_window(node: &Node, meshed: &Meshed) {
    let ns = &meshed.ns;
    let off = json!({"spec": {"template": {"spec": {"nodeSelector": {(NO_INSTALLER): "true"}}}}});
    patch_installer(node, "merge", &off);
    wait_for_explained(
        "the installer pod is gone",
        READY_WITHIN,
        || installer_pods(node).is_empty().then_some(()),
        || node.describe(CNI_NS, "pods"),
    );
    assert!(
        chain_file(node).is_file(),
        "the installer's SIGTERM leaves its chain file (a rollout must not unmesh new pods)"
    );
    let chain_dir = node.in_node_mounts(&format!("{AUX_DIR}/{CHAIN}"));
    std::fs::remove_dir_all(&chain_dir).expect("empty the chain's directory");
    node.restart_containerd();
    let running: BTreeSet<String> = pod_names(node, ns).into_iter().collect();

    let replicas = running.len() + 1;
    let start = Instant::now();
    node.kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "deployment/meshed",
        &format!("--replicas={replicas}"),
    ]);
    let window_pod = wait_for_explained(
        "the pod started in the window: its validator exits 95 (no rules)",
        READY_WITHIN,
        || {
            new_meshed_pods(node, ns, &running)
                .into_iter()
                .find(|p| validator_exit(p) == Some(95))
        },
        || node.describe(ns, "pods"),
    );
    let window_name = window_pod["metadata"]["name"]
        .as_str()
        .expect("pod name")
        .to_string();
    eprintln!(
        "reboot window: {window_name} started without rules, validator exit 95 after {:?}",
        start.elapsed()
    );
    // Repair judges the pod at once and every 10 s; while the node has no Ready installer it must
    // wait: a replacement would start without the chain's file too.
    std::thread::sleep(Duration::from_secs(15));
    let held = node.get_json(&["-n", ns, "pod", &window_name]);
    assert!(
        held.as_ref()
            .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_null()),
        "repair left {window_name} alone while the node had no Ready installer: {held:?}"
    );
    eprintln!("{window_name} not evicted in 15 s without a Ready installer");

    let back = Instant::now();
    let on = json!([{"op": "remove",
        "path": format!("/spec/template/spec/nodeSelector/{}", NO_INSTALLER.replace('/', "~1"))}]);
    patch_installer(node, "json", &on);
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
    assert!(
        chain_file(node).is_file(),
        "the installer wrote its chain file again at start"
    );
    wait_for_explained(
        &format!("repair restarted {window_name} and every meshed pod is Ready"),
        Duration::from_secs(180),
        || {
            let gone = node.get_json(&["-n", ns, "pod", &window_name]).is_none();
            let d = node.get_json(&["-n", ns, "deployment", "meshed"])?;
            let ready = count(&d, "/status/readyReplicas") == replicas as i64;
            (gone && ready).then_some(())
        },
        || node.describe(ns, "pods"),
    );
    eprintln!(
        "installer back -> the window's pod caught by repair and replaced, Ready in {:?}",
        back.elapsed()
    );
    // The Event is on the pod's owner and names the last pod evicted: the window's own pod, since
    // its replacement started with the installer back (and was not evicted again).
    let evicted = events(
        node,
        ns,
        "PodEvictedForRepair",
        &["jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"],
    );
    assert!(
        evicted
            .lines()
            .any(|m| m.contains(&format!("Evicted pod {window_name} "))
                && m.contains("exited with code 95")),
        "repair evicted the window's pod once, for the validator's 95: {evicted}"
    );
    eprintln!("repair evictions in the window: {evicted}");
    for pod in pod_names(node, ns) {
        assert!(
            logs(node, ns, &pod, "linkerd-network-validator").contains("validated:"),
            "after the reboot every meshed pod runs redirected: {pod}"
        );
    }
}

/// `kubectl patch --type kind` of the installer's DaemonSet.
fn patch_installer(node: &Node, kind: &str, patch: &Value) {
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "patch",
        "daemonset",
        CNI_DAEMONSET,
        "--type",
        kind,
        "-p",
        &patch.to_string(),
    ]);
}

/// `check` passes in aux-chain mode, and fails naming the node once its Multus loses the chain.
fn check_fails_without_the_chain(node: &Node, multus: &MultusConf) {
    let out = operator_check(node, &[]);
    assert!(
        out.status.success(),
        "check in aux-chain mode:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    write_multus(node, multus, None);
    let name = node_name(node);
    let report = wait_for_explained(
        "check fails once the node's Multus has no auxiliary chain",
        Duration::from_secs(60),
        || {
            let report = check_json(node);
            (report["success"] == false).then_some(report)
        },
        || check_json(node).to_string(),
    );
    let text = report.to_string();
    assert!(
        text.contains(name.trim()) && text.contains("auxiliaryCNIChainName"),
        "check names the node and what its Multus lacks: {report}"
    );
    write_multus(node, multus, Some(CHAIN));
    wait_for_explained(
        "check passes again once the chain is back",
        Duration::from_secs(60),
        || (check_json(node)["success"] == true).then_some(()),
        || check_json(node).to_string(),
    );
}

/// Back to NADs: the NADs come back, the installer removes its chain file (linkerd-cni would run
/// twice), and a restarted pod is attached through its networks annotation again.
fn switch_back_to_nads(node: &Node, meshed: &Meshed) {
    let ns = &meshed.ns;
    let took = upgrade(node, &["attach=nad"]);
    eprintln!("helm upgrade back to attach=nad in {took:?}");
    wait_for_explained(
        &format!("NAD {ns}/linkerd-cni is back"),
        READY_WITHIN,
        || {
            node.get_json(&["-n", ns, "network-attachment-definitions", "linkerd-cni"])
                .map(|_| ())
        },
        || format!("NADs: {:?}", all_nads(node)),
    );
    wait_for_explained(
        "the installer removed its chain file",
        READY_WITHIN,
        || (!chain_file(node).exists()).then_some(()),
        || node.describe(CNI_NS, "pods"),
    );
    let old: BTreeSet<String> = pod_names(node, ns).into_iter().collect();
    restart_deployments(node, ns);
    let pod = new_meshed_pods(node, ns, &old)
        .into_iter()
        .next()
        .expect("a restarted meshed pod");
    assert!(
        pod["metadata"]["annotations"][NETWORKS]
            .as_str()
            .is_some_and(|n| n.contains("linkerd-cni")),
        "attached through the NAD again: {}",
        pod["metadata"]
    );
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    assert!(
        logs(node, ns, name, "linkerd-network-validator").contains("validated:"),
        "{name} redirected through the NAD"
    );
}
