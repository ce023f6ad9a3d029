//! Step 8 of the node scenario: linkerd-cni attached through Multus' auxiliary CNI chain (issue 26).
//! The node's Multus (the stand-in, or the real thin or thick plugin) is configured as OpenShift 4.18
//! configures it: the cluster network read from its file in `/run/multus/cni/net.d` (in the node's own
//! /run, a tmpfs) and `auxiliaryCNIChainName: vendor-cni-chain`. The admin switches the release to `attach=auxChain`:
//! the installer puts linkerd-cni's config in the chain's directory, the pods restarted come without
//! a networks annotation and are redirected, the NADs go once no pod lists them (0 left), a pod that
//! is not meshed gets no rules. A node reboot (/run emptied, containerd and the kubelet restarted,
//! every sandbox recreated, the installer away meanwhile) starts every meshed pod without rules: each
//! validator exits 95, repair leaves them while the node has no Ready installer and restarts them once
//! it is back; plain pods start throughout. A DaemonSet rollout fails no sandbox; `check` passes, and
//! fails naming the node when its Multus loses the chain. The lifecycle drill (upgrade, rollback, a
//! force-deleted installer pod, the plugin cut off from the apiserver, the plugin's account deleted,
//! uninstall, a reboot after it, reinstall) runs in this mode. Then back to NADs.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::{self, MultusKind, Node};
use linkerd_multus_e2e::{credentials, wait_for_explained};
use serde_json::{json, Value};

use super::lifecycle::{
    meshed_pods_of, plain_pod, ready_since, running_pod, sandbox_failures, validator_exit,
    wait_ready, Lifecycle,
};
use super::*;
use crate::support::{path_str, temp_file};
use crate::{assert_redirected, pod_names, step_cni_rollout_while_creating_pods, Meshed};

/// Where OpenShift 4.18's Multus finds the cluster network's config, so the chain's parent too (the
/// thick daemon's `multusAutoconfigDir` on the node).
const AUX_DIR: &str = node::MULTUS_AUTOCONF_DIR;
const CHAIN: &str = vocab::DEFAULT_AUX_CHAIN_NAME;
/// The cluster network's config in [`AUX_DIR`]: the thin plugin's delegate moved to a file of one
/// plugin (see [`multus_conf::single_plugin`]); the thick daemon's is already there, under this name.
const CLUSTER_NETWORK: &str = node::MULTUS_CLUSTER_CONF;
/// Removing the nodeSelector's key brings the installer back.
const NO_INSTALLER: &str = "linkerd-multus-test/no-installer";
const NETWORKS: &str = vocab::NETWORKS_ANNOTATION;

pub fn step_attach_through_the_aux_chain(
    node: &Node,
    cleanup: &mut Cleanup,
    meshed: &Meshed,
    plain: &str,
) {
    let multus = MultusConf::new(node);
    // The thick daemon's cluster network lives in AUX_DIR from the node's start: only the chain's
    // directory is this step's there.
    let ours = match multus.kind() {
        _ if node.profile().is_openshift() => format!("{AUX_DIR}/{CHAIN}"),
        MultusKind::Thick => format!("{AUX_DIR}/{CHAIN}"),
        MultusKind::StandIn | MultusKind::Thin => AUX_DIR.to_string(),
    };
    let _aux_dir = RemovedOnDrop(node.in_node_mounts(&ours));
    write_multus(node, &multus, Some(CHAIN));
    step("aux: switch to the aux chain", || {
        switch_to_aux_chain(node, meshed, plain)
    });
    step("aux: unmeshed pod gets no rules", || {
        unmeshed_pod_gets_no_rules(node, meshed, plain)
    });
    step("aux: native sidecar", || {
        super::native_sidecar::step_native_sidecar_proxy(
            node,
            meshed,
            plain,
            super::native_sidecar::Attach::AuxChain,
        )
    });
    step("aux: reboot window", || {
        reboot_window(node, cleanup, meshed, plain)
    });
    step("aux: CNI rollout while creating pods", || {
        step_cni_rollout_while_creating_pods(node, meshed)
    });
    step("aux: check fails without the chain", || {
        check_fails_without_the_chain(node, &multus)
    });
    let lifecycle = Lifecycle {
        node,
        sets: vec![
            "attach=auxChain".into(),
            format!("cni.auxChain.dir={AUX_DIR}"),
        ],
        chain_file: Some(chain_file(node)),
        mode: "aux",
        enabled: &meshed.ns,
        reboot: reboot_keeping_cluster_network,
    };
    lifecycle.upgrade_and_rollback(cleanup);
    step("aux: apiserver unreachable", || {
        lifecycle.apiserver_unreachable(cleanup)
    });
    step("aux: plugin account deleted", || {
        plugin_account_deleted(node, cleanup, meshed)
    });
    lifecycle.uninstall_and_reinstall(cleanup);
    step("aux: switch back to NADs", || {
        switch_back_to_nads(node, meshed)
    });
    drop(multus);
}

/// The plugin's ServiceAccount deleted while the installation stays (its credential refused, as
/// after an uninstall that left the chain file, or a token past its lifetime): linkerd-cni still runs
/// for every pod from the chain, yet a plain pod starts, and a meshed pod starts without rules, so
/// its validator exits 95 (it never runs unredirected). The uninstall that follows restores it.
fn plugin_account_deleted(node: &Node, cleanup: &mut Cleanup, meshed: &Meshed) {
    let ns = &meshed.ns;
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "delete",
        "serviceaccount",
        PLUGIN_SERVICE_ACCOUNT,
    ]);
    // The apiserver keeps accepting a token it accepted within its token cache's TTL (10 s by
    // default) after the account is gone: a pod created meanwhile got its rules (seen on v1.35.6).
    // The step starts once the plugin's own token is refused.
    let token = credentials::kubeconfig_token(&node.cni_dir().join("net.d").join(KUBECONFIG_NAME));
    wait_for_explained(
        "the apiserver refuses the plugin's token",
        Duration::from_secs(60),
        || {
            let out = node.kubectl(&["--token", &token, "get", "--raw", "/api"]);
            let refused = String::from_utf8_lossy(&out.stderr).contains("Unauthorized");
            (!out.status.success() && refused).then_some(())
        },
        || "the token is still accepted".to_string(),
    );
    let plain = create_namespace(node, cleanup, "no-plugin-account");
    let start = Instant::now();
    apply(node, &plain_pod(node, &plain, "p1"));
    wait_ready(node, &plain, "p1", READY_WITHIN);
    assert_eq!(
        sandbox_failures(node, &plain),
        0,
        "a plain pod starts while the plugin's credential is refused: {}",
        node.describe(&plain, "pods")
    );
    eprintln!(
        "plugin's ServiceAccount deleted -> a plain pod Ready in {:?}",
        start.elapsed()
    );
    let running: BTreeSet<String> = pod_names(node, ns).into_iter().collect();
    let before = replicas(node, ns, "meshed");
    node.kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "deployment/meshed",
        &format!("--replicas={}", before + 1),
    ]);
    let caught = wait_for_explained(
        "a meshed pod started while the plugin's credential is refused: validator exit 95",
        READY_WITHIN,
        || {
            new_meshed_pods(node, ns, &running)
                .into_iter()
                .find(|p| validator_exit(p) == Some(95))
        },
        || node.describe(ns, "pods"),
    );
    assert!(
        !is_ready(&caught),
        "the meshed pod without rules never runs: {}",
        caught["status"]
    );
    node.kubectl_ok(&[
        "-n",
        ns,
        "scale",
        "deployment/meshed",
        &format!("--replicas={before}"),
    ]);
    wait_deployment_ready(node, ns, "meshed");
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

/// The node's Multus config as OpenShift 4.18 writes Multus': the cluster network from its file in
/// [`AUX_DIR`], and `chain` as `auxiliaryCNIChainName` (none: the key is absent). The thick daemon
/// reads its cluster network from there already; only the chain changes (and the daemon restarts).
fn write_multus(node: &Node, multus: &MultusConf, chain: Option<&str>) {
    let mut conf = multus.original();
    if multus.kind() == MultusKind::Thick {
        // The daemon's paths are its container's: under /host on OpenShift's node.
        let container = if node.profile().is_openshift() {
            "/host"
        } else {
            ""
        };
        assert_eq!(
            conf["multusAutoconfigDir"],
            format!("{container}{AUX_DIR}").as_str(),
            "the thick daemon reads its cluster network from {AUX_DIR}: {conf}"
        );
        set_chain(&mut conf, chain);
        multus.write(&conf);
        let generated: Value = serde_json::from_str(
            &std::fs::read_to_string(node.multus_conf()).expect("the daemon's 00-multus.conf"),
        )
        .expect("00-multus.conf is JSON");
        assert_eq!(
            generated["clusterNetwork"],
            format!("{container}{AUX_DIR}/{CLUSTER_NETWORK}").as_str(),
            "{generated}"
        );
        return;
    }
    if conf.get("daemonSocketDir").is_some() {
        // The thick daemon's generated config (the OpenShift profile): its cluster network is in
        // AUX_DIR from the node's start, named with the daemon's /host prefix; only the chain changes.
        let want = format!("/host{AUX_DIR}/{CLUSTER_NETWORK}");
        assert_eq!(conf["clusterNetwork"], want.as_str(), "{conf}");
        set_chain(&mut conf, chain);
        multus.write(&conf);
        return;
    }
    let cluster = multus_conf::single_plugin(&conf["delegates"][0]);
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
    set_chain(&mut conf, chain);
    multus.write(&conf);
}

/// `chain` as the config's `auxiliaryCNIChainName`; none: the key removed.
fn set_chain(conf: &mut Value, chain: Option<&str>) {
    let obj = conf.as_object_mut().expect("Multus config object");
    match chain {
        Some(chain) => obj.insert("auxiliaryCNIChainName".into(), json!(chain)),
        None => obj.remove("auxiliaryCNIChainName"),
    };
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
        node.profile().cni_net_dir.join(KUBECONFIG_NAME).to_str(),
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
        validator_passed(node, ns, name),
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
    delete_pod_now(node, ns, "unmeshed");
}

/// The validator's exit code in `pod`'s current or last run.
/// `e2e/testbed reboot --node` with the cluster network's config in /run (where this step's Multus
/// reads it) written back by the boot, as OpenShift's network plugin writes it; not linkerd-cni's
/// chain file.
pub fn reboot_keeping_cluster_network(node: &Node) {
    let cluster_network =
        std::fs::read_to_string(node.in_node_mounts(&format!("{AUX_DIR}/{CLUSTER_NETWORK}")))
            .expect("the cluster network's config in /run");
    let saved = temp_file("cluster-network", &cluster_network);
    node.reboot(&format!(
        "mkdir -p {AUX_DIR} && cp {} {AUX_DIR}/{CLUSTER_NETWORK}",
        saved.display()
    ));
    let _ = std::fs::remove_file(&saved);
}

/// A node reboot (`e2e/testbed reboot --node`: the node's /run emptied, containerd and the kubelet
/// restarted, every pod's sandbox recreated), with the installer kept away meanwhile (a nodeSelector)
/// so the window lasts. The boot writes the cluster network's config back into /run (OpenShift's
/// network plugin does), not linkerd-cni's chain file. Plain pods start throughout; every meshed pod's
/// new sandbox has no rules, so its validator exits 95 and it never runs; repair leaves them while
/// the node has no Ready installer and restarts each once the installer is back, redirected.
fn reboot_window(node: &Node, cleanup: &mut Cleanup, meshed: &Meshed, plain: &str) {
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
        "the installer's SIGTERM with its DaemonSet in place (a rollout) leaves its chain file"
    );
    let meshed_before: BTreeSet<String> = validated_pods(node, ns);
    let start = Instant::now();
    let rebooted = k8s_openapi::jiff::Timestamp::now();
    reboot_keeping_cluster_network(node);
    eprintln!("node rebooted (Ready again) in {:?}", start.elapsed());
    assert!(
        !chain_file(node).exists(),
        "the reboot emptied /run: no chain file until the installer is back"
    );

    // Plain pods: the one from before comes back on its new sandbox, a new one starts. Creating it
    // waits for the webhook (failurePolicy Fail): on this one node its pods restarted too.
    wait_for_explained(
        "the plain pod from before the reboot Ready in its new sandbox",
        READY_WITHIN,
        || {
            let pod = running_pod(node, plain, "app=server")?;
            ready_since(&pod, rebooted).then_some(())
        },
        || node.describe(plain, "pods"),
    );
    let fresh = create_namespace(node, cleanup, "after-reboot");
    let manifest = temp_file("after-reboot", &plain_pod(node, &fresh, "p1").to_string());
    wait_for_explained(
        "the webhook admits pods again (the operator's pods restarted with the node)",
        READY_WITHIN,
        || {
            node.kubectl(&["apply", "-f", path_str(&manifest)])
                .status
                .success()
                .then_some(())
        },
        || node.describe(RELEASE_NS, "pods"),
    );
    let _ = std::fs::remove_file(&manifest);
    eprintln!(
        "after the reboot: the webhook admits pods again {:?} after it began",
        start.elapsed()
    );
    wait_ready(node, &fresh, "p1", READY_WITHIN);
    eprintln!(
        "after the reboot: plain pods Running {:?} after it began",
        start.elapsed()
    );

    // Every meshed pod restarted on a sandbox without rules: its validator exits 95, it is not Ready.
    let caught = wait_for_explained(
        "every meshed pod's validator exits 95 on its new sandbox (no rules)",
        READY_WITHIN,
        || {
            let pods = meshed_pods(node, ns);
            (!pods.is_empty()
                && pods
                    .iter()
                    .all(|p| validator_exit(p) == Some(95) && !is_ready(p)))
            .then_some(pods.len())
        },
        || node.describe(ns, "pods"),
    );
    eprintln!(
        "reboot: {caught} meshed pods caught by their validator (95) {:?} after it began",
        start.elapsed()
    );
    // Repair judges pods at once and every 10 s; while the node has no Ready installer it must
    // wait: a replacement would start without the chain's file too.
    std::thread::sleep(Duration::from_secs(15));
    let held: BTreeSet<String> = meshed_pods(node, ns)
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && !is_ready(p))
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        meshed_before.is_subset(&held),
        "repair left every caught pod alone while the node had no Ready installer: before {meshed_before:?}, held {held:?}"
    );

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
        "repair restarted every caught pod, and every meshed pod runs redirected",
        Duration::from_secs(240),
        || {
            let pods = meshed_pods(node, ns);
            let names: BTreeSet<String> = pods
                .iter()
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            (names.is_disjoint(&meshed_before)
                && names.len() >= meshed_before.len()
                && pods.iter().all(is_ready))
            .then_some(())
        },
        || node.describe(ns, "pods"),
    );
    eprintln!(
        "installer back -> {} caught pods evicted by repair, every meshed pod Ready in {:?}",
        meshed_before.len(),
        back.elapsed()
    );
    for pod in validated_pods(node, ns) {
        assert!(
            validator_passed(node, ns, &pod),
            "after the reboot every meshed pod runs redirected: {pod}"
        );
    }
    let evicted = events(
        node,
        ns,
        "PodEvictedForRepair",
        &["jsonpath={range .items[*]}{.message}{\"\\n\"}{end}"],
    );
    assert!(
        evicted.contains("exited with code 95"),
        "repair evicted the caught pods for the validator's 95: {evicted}"
    );
}

/// The pods of `ns` with Linkerd's network validator (the injected meshed pods), not on their way out.
fn meshed_pods(node: &Node, ns: &str) -> Vec<Value> {
    meshed_pods_of(node, ns, "")
}

/// The names of [`meshed_pods`].
fn validated_pods(node: &Node, ns: &str) -> BTreeSet<String> {
    meshed_pods(node, ns)
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect()
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
    // Waited for by what it says: while a thick daemon restarts, its 00-multus.conf is gone for a
    // moment, and check may first fail for that.
    let report = wait_for_explained(
        "check fails saying the node's Multus has no auxiliaryCNIChainName",
        Duration::from_secs(60),
        || {
            let report = check_json(node);
            (report["success"] == false && report.to_string().contains("auxiliaryCNIChainName"))
                .then_some(report)
        },
        || check_json(node).to_string(),
    );
    assert!(
        report.to_string().contains(name.trim()),
        "check names the node whose Multus lacks the chain: {report}"
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
        validator_passed(node, ns, name),
        "{name} redirected through the NAD"
    );
}
