//! The product on the node, as a cluster admin runs it: the chart installed with the project's images,
//! the node's Multus in its place in the node's CNI config (the stand-in, or with the real platform the
//! real thin or thick plugin: `LINKERD_MULTUS_NODE_MULTUS` at the node's `up`), a namespace annotated (with an
//! OpenShift uid range), a Deployment injected by the stand-in for Linkerd's injector and admitted by
//! the stand-in for OpenShift's SCC admission, a pod from before its namespace was enabled repaired,
//! and real connections redirected by the rules `linkerd-cni` wrote when the runtime ran the chain;
//! then the same through Multus' auxiliary chain with no NAD at all (`node_scenario_parts/aux_chain.rs`).
//!
//! On the shared node (`e2e/testbed up --node`): the release and its namespaces are removed at the end.
//! The operator and its webhook see every namespace of the node, so other tests' pods there are left
//! alone only because their namespaces are not annotated.

mod node_scenario_parts;
mod support;

use std::time::Instant;

use linkerd_multus_e2e::credentials;
use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::stand_ins::scc;
use linkerd_multus_e2e::{unique_name, wait_for_explained};
use node_scenario_parts::*;
use serde_json::{json, Value};
use support::{chart_dir, path_str, temp_file};

#[test]
#[ignore = "needs the node testbed (root): run by e2e/test-all"]
fn the_chart_on_the_node_redirects_a_meshed_pods_traffic() {
    let _one_release = one_release_at_a_time();
    let node = Node::shared();
    let mut cleanup = Cleanup {
        node: &node,
        namespaces: vec![],
        cluster_objects: vec![],
    };
    let (plugin, meshed, plain) = installed_and_redirected(&node, &mut cleanup);
    step("4b meshed pod without iptables", || {
        no_iptables::step_meshed_pod_without_iptables(&node, &meshed, &plain)
    });
    step("4c native sidecar (nad)", || {
        native_sidecar::step_native_sidecar_proxy(
            &node,
            &meshed,
            &plain,
            native_sidecar::Attach::Nad,
        )
    });
    step("5 CNI rollout while creating pods (nad)", || {
        step_cni_rollout_while_creating_pods(&node, &meshed)
    });
    let repaired = step("5b repair unattached pod", || {
        step_repair_unattached_pod(&node, &mut cleanup, &meshed, &plain)
    });
    step("5c ConfigMap edit reaches new pods", || {
        step_configmap_edit_reaches_new_pods(&node, &meshed, &plain)
    });
    step("5d shared NAD refused by isolation", || {
        isolation::step_shared_nad_refused_by_isolation(
            &node,
            &mut cleanup,
            &meshed.ns,
            &meshed.test_image,
        )
    });
    step("6 check in the operator pod", || {
        step_check_in_the_operator_pod(&node)
    });
    step("6a repair not halted", || {
        step_repair_not_halted(&node, &repaired)
    });
    step("6b uid collision flagged", || {
        step_uid_collision_flagged(&node, &meshed)
    });
    step("7 uninstall leaves plugin and NADs", || {
        step_uninstall_leaves_plugin_and_nads(&node, &meshed, &plugin)
    });
    step("cleanup", || drop(cleanup));
}

/// The same release through Multus' auxiliary chain, and the lifecycle drill (upgrade, rollback,
/// reboot, the apiserver unreachable, uninstall and reinstall) in both attach modes, from steps 1 to 4
/// of their own. A test of its own so that e2e/test-all runs it on a second node, by its name, beside
/// the other: after it on one node, these ~680 s were the v1.20 node tier's longest stretch.
#[test]
#[ignore = "needs the node testbed (root): run by e2e/test-all"]
fn the_release_lifecycle_in_both_attach_modes() {
    let _one_release = one_release_at_a_time();
    let node = Node::shared();
    let mut cleanup = Cleanup {
        node: &node,
        namespaces: vec![],
        cluster_objects: vec![],
    };
    let (plugin, meshed, plain) = installed_and_redirected(&node, &mut cleanup);
    step("aux chain (all)", || {
        aux_chain::step_attach_through_the_aux_chain(&node, &mut cleanup, &meshed, &plain)
    });
    step("lifecycle nad (all)", || {
        lifecycle::Lifecycle {
            node: &node,
            sets: vec!["attach=nad".into()],
            chain_file: None,
            mode: "nad",
            enabled: &meshed.ns,
            reboot: |node| node.reboot(""),
        }
        .run(&mut cleanup)
    });
    step("7 uninstall leaves plugin and NADs", || {
        step_uninstall_leaves_plugin_and_nads(&node, &meshed, &plugin)
    });
    step("cleanup", || drop(cleanup));
}

/// Steps 1 to 4, which every later step stands on: the node's CNI config as found, the chart
/// installed, the meshed Deployment admitted and redirected, and the plain namespace's server.
/// Returns the plugin's path, the meshed Deployment and the plain namespace.
fn installed_and_redirected(
    node: &Node,
    cleanup: &mut Cleanup,
) -> (std::path::PathBuf, Meshed, String) {
    let conf_before = step("1 node CNI config", || step_node_cni_config(node));
    let plugin = step("2 install chart", || {
        step_install_chart(node, cleanup, &conf_before)
    });
    let meshed = step("3 meshed deployment", || {
        step_meshed_deployment(node, cleanup)
    });
    let plain = step("4 traffic redirected", || {
        step_traffic_redirected(node, cleanup, &meshed)
    });
    (plugin, meshed, plain)
}

/// The chart's default admission on a server that serves MutatingAdmissionPolicy: pods of an enabled
/// namespace are created with the operator at 0, other namespaces' pods are never evaluated, and in
/// webhook mode the pod waits (`node_scenario_parts/admission_policy.rs`). Reported not run where the
/// node's apiserver does not serve the API (the v1.20 node).
#[test]
#[ignore = "needs the node testbed (root): run by e2e/test-all"]
fn admission_policy_with_the_operator_at_zero() {
    let _one_release = one_release_at_a_time();
    let node = Node::shared();
    let Some(api) = admission_policy::served(&node) else {
        linkerd_multus_e2e::not_run(
            admission_policy::CASE,
            "the node's apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, \
             or v1beta1 with the MutatingAdmissionPolicy gate)",
        );
        return;
    };
    step("admission policy (all)", || {
        admission_policy::run(&node, api)
    });
}

/// OperatorHub's way in (issue 45): the real OLM installs the committed bundle, the operator keeps the
/// installer from a NodeAgent, a meshed pod is attached and redirected; deleting the CSV and the
/// NodeAgent, then a reboot, leave every pod starting (`node_scenario_parts/olm.rs`). Reported not run
/// without the real platform (OLM is in no registry this project reaches).
#[test]
#[ignore = "needs the node testbed (root) and the real platform's olm: run by e2e/test-all"]
fn olm_installs_the_bundle_and_its_uninstall_leaves_every_pod_starting() {
    let _one_release = one_release_at_a_time();
    olm::run();
}

/// The node's tests install the same release (and the policy is cluster-wide): one at a time.
fn one_release_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static RELEASE_ON_THE_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RELEASE_ON_THE_NODE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The node's Multus config file in its net.d (the stand-in's, the thin plugin's or the thick daemon's).
fn stand_in_conf(node: &Node) -> std::path::PathBuf {
    node.multus_conf()
}

/// A one-replica Deployment `meshed` in `ns` whose pods carry `pod_metadata` and run `containers`.
fn meshed_deployment(ns: &str, pod_metadata: Value, containers: Vec<Value>) -> Value {
    deployment(ns, "meshed", pod_metadata, containers)
}

/// The test image as the pod's app, answering on 8080.
fn app_container(test_image: &str) -> Value {
    json!({"name": "app", "image": test_image, "imagePullPolicy": "Never", "args": ["app"]})
}

/// Step 1: The node's CNI config is Multus' alone, laid out for the Multus the node runs. Returns its
/// 00-multus.conf as it was.
fn step_node_cni_config(node: &Node) -> String {
    multus_conf::assert_node_layout(node)
}

/// Step 2: The chart, installed as an admin would on this node. Returns the plugin's path.
fn step_install_chart(node: &Node, cleanup: &mut Cleanup, conf_before: &str) -> std::path::PathBuf {
    let net_d = node.cni_dir().join("net.d");
    let bin = node.cni_dir().join("bin");
    let stand_in_conf = stand_in_conf(node);
    // What Multus brings: its CRD (left in place, as Multus owns it).
    let crd = chart_dir().join("crds-optional/network-attachment-definition.yaml");
    node.kubectl_ok(&["apply", "-f", path_str(&crd)]);
    node.kubectl_ok(&["create", "namespace", CNI_NS]);
    cleanup.namespaces.push(CNI_NS.to_string());
    cleanup.namespaces.push(RELEASE_NS.to_string());
    let start = Instant::now();
    helm_install(node, &[]);
    let op = wait_deployment_ready(node, RELEASE_NS, OPERATOR);
    assert_eq!(
        count(&op, "/status/readyReplicas"),
        2,
        "both operator replicas Ready"
    );
    let op_ready = start.elapsed();
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
    eprintln!(
        "helm install -> operator Ready in {op_ready:?}, CNI DaemonSet Ready in {:?}",
        start.elapsed()
    );
    let plugin = bin.join("linkerd-cni");
    assert!(
        plugin.is_file(),
        "the installer wrote the plugin {}",
        plugin.display()
    );
    let kubeconfig = std::fs::read_to_string(net_d.join(KUBECONFIG_NAME))
        .unwrap_or_else(|e| panic!("the installer's kubeconfig in {}: {e}", net_d.display()));
    assert!(
        kubeconfig.contains("token:"),
        "the plugin's kubeconfig carries the pod's token: {kubeconfig}"
    );
    multus_conf::assert_published(node);
    assert_eq!(
        std::fs::read_to_string(&stand_in_conf).unwrap_or_default(),
        conf_before,
        "chainMode=none leaves the node's network config alone"
    );
    plugin
}

/// The meshed namespace and Deployment of step 3, and the admission stand-ins kept until the end.
struct Meshed {
    ns: String,
    deployment: Value,
    test_image: String,
    pod_name: String,
    pod_ip: String,
    _admission: OpenShiftAdmission,
}

/// Step 3: A namespace annotated for Multus and, as OpenShift does, with a uid range gets its NAD. A
/// Deployment with only its app is injected by the stand-in for Linkerd's injector and admitted by
/// the stand-in for OpenShift's SCC admission with the chart's default configuration name (it runs
/// after the injector's): attached, the proxy on the range's uid, the validator's check passed.
fn step_meshed_deployment(node: &Node, cleanup: &mut Cleanup) -> Meshed {
    // The runtime's directory as the node names it (the NAD's path is read by the plugin on the node).
    let net_d = node.profile().cni_net_dir;
    let ns = enabled_namespace(node, cleanup, "meshed");
    let nad = wait_for_explained(
        &format!("the operator wrote NAD {ns}/linkerd-cni"),
        READY_WITHIN,
        || node.get_json(&["-n", &ns, "network-attachment-definitions", "linkerd-cni"]),
        || node.describe(RELEASE_NS, "pods"),
    );
    let nad_conf: Value = serde_json::from_str(nad["spec"]["config"].as_str().unwrap_or("null"))
        .expect("the NAD's config is JSON");
    assert_eq!(
        nad_conf["kubernetes"]["kubeconfig"].as_str(),
        net_d.join(KUBECONFIG_NAME).to_str(),
        "the NAD names the kubeconfig the installer wrote: {nad_conf}"
    );
    let test_image = image(node, "test");
    let admission = OpenShiftAdmission::register(node, cleanup, &test_image);
    let deployment = meshed_deployment(
        &ns,
        json!({
            "labels": {"app": "meshed", (ADMITTED_AS_ON_OPENSHIFT): "true"},
            "annotations": {"linkerd.io/inject": "enabled"},
        }),
        vec![app_container(&test_image)],
    );
    let start = Instant::now();
    apply(node, &deployment);
    let pod = wait_pod_running(node, &ns, "app=meshed");
    eprintln!(
        "meshed Deployment created -> pod Running in {:?}",
        start.elapsed()
    );
    let annotations = &pod["metadata"]["annotations"];
    let networks = annotations["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        networks.contains("linkerd-cni") && annotations[scc::SCC_ANNOTATION] == scc::SCC,
        "the webhook attached the NAD, the SCC stand-in admitted the pod: annotations {annotations}"
    );
    let uid_of = |list: &str, name: &str| {
        pod["spec"][list]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["name"] == name))
            .and_then(|c| c["securityContext"]["runAsUser"].as_u64())
    };
    assert_eq!(
        uid_of("containers", "linkerd-proxy"),
        Some(RANGE_PROXY_UID),
        "the proxy runs on the range's uid: {}",
        pod["spec"]
    );
    let validator_uid = uid_of("initContainers", "linkerd-network-validator");
    assert!(
        validator_uid
            .is_some_and(|u| (1000650000..1000660000).contains(&u) && u != RANGE_PROXY_UID),
        "the validator runs on another uid of the range: {}",
        pod["spec"]
    );
    let pod_name = pod["metadata"]["name"]
        .as_str()
        .expect("pod name")
        .to_string();
    assert!(
        validator_passed(node, &ns, &pod_name),
        "the validator saw its connection redirected"
    );
    let pod_ip = pod["status"]["podIP"].as_str().expect("pod IP").to_string();
    Meshed {
        ns,
        deployment,
        test_image,
        pod_name,
        pod_ip,
        _admission: admission,
    }
}

/// Step 4: Traffic: from an unmeshed pod in a plain namespace to the app's 8080 lands on the proxy's
/// inbound listener; the app's own outbound connections land on 4140; the proxy uid bypasses. Returns the plain namespace.
fn step_traffic_redirected(node: &Node, cleanup: &mut Cleanup, meshed: &Meshed) -> String {
    let plain = create_namespace(node, cleanup, "plain");
    apply(
        node,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "server", "namespace": plain, "labels": {"app": "server"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "main", "image": meshed.test_image, "imagePullPolicy": "Never", "args": ["app"]}]},
        }),
    );
    wait_pod_running(node, &plain, "app=server");
    assert_redirected(node, &meshed.ns, &meshed.pod_name, &meshed.pod_ip, &plain);
    plain
}

/// The meshed pod `pod` (at `pod_ip`, in `ns`) is redirected: a client in `plain` reaching its 8080
/// lands on the proxy's inbound 4143; the app's connection to `plain`'s server lands on the outbound
/// 4140; the proxy's uid bypasses the redirect.
fn assert_redirected(node: &Node, ns: &str, pod: &str, pod_ip: &str, plain: &str) {
    let app_addr = format!("{pod_ip}:8080");
    let client = unique_name("client");
    let inbound = run_to_completion(node, plain, &client, &["ask", &app_addr]);
    assert!(
        inbound.contains(&format!("proxy inbound 4143 original-dst {app_addr}")),
        "a connection to {app_addr} lands on the proxy's inbound 4143; the client got: {inbound}"
    );
    let server = wait_pod_running(node, plain, "app=server");
    let server_addr = format!(
        "{}:8080",
        server["status"]["podIP"].as_str().expect("server IP")
    );
    let outbound = ask_from(node, ns, pod, "app", &server_addr);
    assert!(
        outbound.contains(&format!("proxy outbound 4140 original-dst {server_addr}")),
        "the app's connection to {server_addr} lands on the proxy's outbound 4140; it got: {outbound}"
    );
    let bypass = ask_from(node, ns, pod, "linkerd-proxy", &server_addr);
    assert_eq!(
        bypass, "app server",
        "uid {RANGE_PROXY_UID} (the proxy) bypasses the redirect and reaches {server_addr} itself"
    );
}

/// Step 5: The CNI DaemonSet rolled while meshed pods are created one after another, with bound
/// service-account tokens (the node's apiserver turns them on): every pod runs attached and redirected
/// (its network validator passed), no sandbox fails, and the plugin read each new pod with the token of
/// its own ServiceAccount, bound to no pod, not with the deleted installer pod's token.
fn step_cni_rollout_while_creating_pods(node: &Node, meshed: &Meshed) {
    const NEW_PODS: usize = 10;
    let ns = &meshed.ns;
    let old_installer = installer_pods(node)
        .pop()
        .expect("the installer pod before the rollout");
    let before: std::collections::BTreeSet<String> = pod_names(node, ns).into_iter().collect();
    // From the Deployment's own count: `before` may still list pods on their way out.
    let replicas_before = replicas(node, ns, "meshed");
    let sandbox_failures = || {
        events(
            node,
            ns,
            "FailedCreatePodSandBox",
            &[
                "custom-columns=POD:.involvedObject.name,COUNT:.count",
                "--no-headers",
            ],
        )
    };
    // Earlier steps' failures (a pod naming a refused NAD on purpose) are not this step's.
    let failed_before: std::collections::BTreeSet<String> =
        sandbox_failures().lines().map(str::to_string).collect();
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "rollout",
        "restart",
        &format!("daemonset/{CNI_DAEMONSET}"),
    ]);
    let start = Instant::now();
    for i in 1..=NEW_PODS {
        let replicas = format!("--replicas={}", replicas_before + i as i64);
        node.kubectl_ok(&["-n", ns, "scale", "deployment/meshed", &replicas]);
        std::thread::sleep(std::time::Duration::from_millis(700));
    }
    wait_deployment_ready(node, ns, "meshed");
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
    eprintln!(
        "rollout restart of the CNI DaemonSet during {NEW_PODS} pod creations -> all Ready in {:?}",
        start.elapsed()
    );
    let failed: Vec<String> = sandbox_failures()
        .lines()
        .filter(|l| !failed_before.contains(*l))
        .map(str::to_string)
        .collect();
    eprintln!(
        "sandboxes failed during the installer's rollout: {}",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "no sandbox fails while the CNI DaemonSet rolls (FailedCreatePodSandBox events: pod, count): {failed:?}"
    );
    let new: Vec<String> = pod_names(node, ns)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), NEW_PODS, "new pods: {new:?}");
    for pod in &new {
        assert!(
            validator_passed(node, ns, pod),
            "pod {pod} created during the rollout is redirected (its validator passed)"
        );
    }
    assert!(
        node.get_json(&["-n", CNI_NS, "pod", &old_installer])
            .is_none(),
        "the old installer pod {old_installer} is gone"
    );

    // Which credential: the kubeconfig holds the plugin account's token, bound to no pod, and the
    // apiserver's audit log shows each new pod read with it and accepted.
    let plugin_user = credentials::service_account_user(CNI_NS, PLUGIN_SERVICE_ACCOUNT);
    let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
    let claims = credentials::token_claims(&credentials::kubeconfig_token(&kubeconfig));
    assert_eq!(
        claims["sub"].as_str(),
        Some(plugin_user.as_str()),
        "{claims}"
    );
    assert!(
        claims["kubernetes.io"].get("pod").is_none(),
        "the plugin's token is bound to a pod: {claims}"
    );
    let reads = credentials::pod_reads(&node.dir().join("audit.log"));
    for pod in &new {
        let of_pod: Vec<_> = reads
            .iter()
            .filter(|r| r.namespace == *ns && r.pod == *pod)
            // The plugin's reads: with a linkerd-cni account, or refused before any user was known.
            .filter(|r| {
                r.code == 401
                    || r.user
                        .starts_with(&format!("system:serviceaccount:{CNI_NS}:"))
            })
            .collect();
        // Each read with the plugin's account and never refused; the last accepted. A 5xx is the
        // apiserver's own failure, which the plugin retries (one in CI on 2026-11-30, at load 20).
        assert!(
            of_pod.last().is_some_and(|r| r.code == 200)
                && of_pod
                    .iter()
                    .all(|r| r.user == plugin_user && (r.code == 200 || r.code >= 500)),
            "pod {pod}: the plugin's reads (user, code): {of_pod:?}"
        );
    }
    // Back to the count before: every later step restarts, evicts or holds each meshed pod, and
    // repair evicts 5 a minute at most (this used to leave 4, later 5 and 6, meshed pods).
    let back = format!("--replicas={replicas_before}");
    node.kubectl_ok(&["-n", ns, "scale", "deployment/meshed", &back]);
    wait_deployment_ready(node, ns, "meshed");
}

fn pod_names(node: &Node, ns: &str) -> Vec<String> {
    node.kubectl_ok(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        "app=meshed",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])
    .split_whitespace()
    .map(String::from)
    .collect()
}

/// Step 5b: Repair: a meshed Deployment's pod created before its namespace is enabled runs unattached
/// (its 8080 reaches the app itself); enabled while Multus' CRD is missing, it is left running
/// (`without_nad_crd`); once the CRD is back, the operator evicts it, the
/// ReplicaSet recreates it, the webhook attaches the new pod and its 8080 lands on the proxy.
/// Laid out by hand as Linkerd's injector would (its stand-in's validator would keep an unattached
/// pod from starting, as Linkerd's does).
fn step_repair_unattached_pod(
    node: &Node,
    cleanup: &mut Cleanup,
    meshed: &Meshed,
    plain: &str,
) -> Repaired {
    let test_image = &meshed.test_image;
    let late = create_namespace(node, cleanup, "late");
    let early = meshed_deployment(
        &late,
        json!({"labels": {"app": "meshed"}}),
        vec![
            app_container(test_image),
            json!({"name": "linkerd-proxy", "image": test_image, "imagePullPolicy": "Never",
                   "args": ["proxy", "--uid", PROXY_UID.to_string()],
                   "securityContext": {"runAsUser": PROXY_UID}}),
        ],
    );
    apply(node, &early);
    let before = wait_pod_running(node, &late, "app=meshed");
    let before_uid = before["metadata"]["uid"].as_str().expect("uid").to_string();
    assert_eq!(
        before["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"],
        Value::Null,
        "not attached before its namespace is enabled"
    );
    let before_name = before["metadata"]["name"].as_str().expect("pod name");
    let before_addr = format!(
        "{}:8080",
        before["status"]["podIP"].as_str().expect("pod IP")
    );
    let direct = run_to_completion(node, plain, "client-early", &["ask", &before_addr]);
    assert_eq!(
        direct.trim(),
        format!("app {before_name}"),
        "unattached: a connection to {before_addr} reaches the app itself"
    );
    let crd_deleted = without_nad_crd::CrdDeleted::new(node);
    without_nad_crd::enable_and_hold(node, &late, before_name, &before_uid);
    drop(crd_deleted);
    let start = Instant::now();
    let repaired = wait_for_explained(
        &format!(
            "the operator restarted the unattached pod of {late} and its new pod runs attached"
        ),
        without_nad_crd::REPAIRED_WITHIN,
        || {
            let list = node.get_json(&["-n", &late, "pods", "-l", "app=meshed"])?;
            list["items"].as_array()?.iter().find_map(|p| {
                let attached = p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
                    .as_str()?
                    .contains("linkerd-cni");
                (p["metadata"]["uid"] != before_uid.as_str() && attached && is_ready(p))
                    .then(|| p.clone())
            })
        },
        || node.describe(&late, "pods"),
    );
    let evicted_by = Instant::now();
    eprintln!(
        "NAD CRD back -> unattached pod evicted, replacement attached and Ready in {:?}",
        start.elapsed()
    );
    let evicted = events(node, &late, "PodEvictedForRepair", &["name"]);
    assert_eq!(evicted.lines().count(), 1, "one repair Event: {evicted}");
    let evicted_at = events(
        node,
        &late,
        "PodEvictedForRepair",
        &["jsonpath={.items[0].eventTime}"],
    );
    let ready_for = ready_after(&repaired, evicted_at.trim());
    eprintln!("the replacement turned Ready {ready_for} after the eviction (the server's clocks)");
    let repaired_addr = format!(
        "{}:8080",
        repaired["status"]["podIP"].as_str().expect("pod IP")
    );
    let inbound = run_to_completion(node, plain, "client-repaired", &["ask", &repaired_addr]);
    assert!(
        inbound.contains(&format!("proxy inbound 4143 original-dst {repaired_addr}")),
        "the repaired pod's {repaired_addr} lands on the proxy's inbound 4143; the client got: {inbound}"
    );
    Repaired {
        ns: late,
        evicted_by,
        ready_for,
    }
}

/// How long after `evicted_at` (an Event's time) `pod` turned Ready, by the server's clocks.
fn ready_after(pod: &Value, evicted_at: &str) -> String {
    use k8s_openapi::jiff::Timestamp;
    let ready_at = pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["lastTransitionTime"].as_str());
    match (
        ready_at.and_then(|t| t.parse::<Timestamp>().ok()),
        evicted_at.parse::<Timestamp>(),
    ) {
        (Some(ready), Ok(evicted)) => {
            format!("{:.1} s", ready.duration_since(evicted).as_secs_f64())
        }
        _ => format!("unknown (Ready at {ready_at:?}, evicted at {evicted_at:?})"),
    }
}

/// The namespace of step 5b's repaired Deployment, and when its replacement was Ready at the latest.
struct Repaired {
    ns: String,
    evicted_by: Instant,
    /// From the eviction to the replacement's Ready, by the server's clocks: over the repair
    /// deadline, a halt is the watchdog doing its work.
    ready_for: String,
}

/// Step 6a: The repaired Deployment's owner is not halted: 30 s past the repair deadline after its
/// eviction, no `PodRepairHalted` Event and `check`'s `repair` line passes (the watchdog counts the
/// ReplicaSet's replacement, created within the eviction's second).
fn step_repair_not_halted(node: &Node, repaired: &Repaired) {
    let until = repaired.evicted_by + REPAIR_DEADLINE + std::time::Duration::from_secs(30);
    std::thread::sleep(until.saturating_duration_since(Instant::now()));
    let halted = events(
        node,
        &repaired.ns,
        "PodRepairHalted",
        &["custom-columns=NOTE:.message", "--no-headers"],
    );
    assert_eq!(
        halted.trim(),
        "",
        "no PodRepairHalted 30 s past the {REPAIR_DEADLINE:?} deadline; the replacement was Ready {} \
         after the eviction",
        repaired.ready_for
    );
    let report = check_json(node);
    let repair = line(&report, "repair");
    assert_eq!(repair["ok"], true, "{repair}");
}

/// Step 5c: The linkerd-cni ConfigMap edited (8080 added to the inbound ports to skip): the NAD's config
/// follows, and a pod created afterwards gets the new rules: a connection to its 8080 reaches the
/// app itself, not the proxy.
fn step_configmap_edit_reaches_new_pods(node: &Node, meshed: &Meshed, plain: &str) {
    let Meshed { ns, deployment, .. } = meshed;
    let cm = node
        .get_json(&["-n", CNI_NS, "configmap", "linkerd-cni-config"])
        .expect("the chart's linkerd-cni-config");
    let mut cni_config: Value = serde_json::from_str(
        cm["data"]["cni_network_config"]
            .as_str()
            .expect("cni_network_config"),
    )
    .expect("cni_network_config is JSON");
    cni_config["linkerd"]["inbound-ports-to-ignore"]
        .as_array_mut()
        .expect("inbound-ports-to-ignore is a list")
        .push(json!("8080"));
    let patch = json!({"data": {"cni_network_config": cni_config.to_string()}});
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "patch",
        "configmap",
        "linkerd-cni-config",
        "--type",
        "merge",
        "-p",
        &patch.to_string(),
    ]);
    let start = Instant::now();
    wait_for_explained(
        &format!("NAD {ns}/linkerd-cni skips inbound 8080 after the ConfigMap edit"),
        READY_WITHIN,
        || {
            let nad =
                node.get_json(&["-n", ns, "network-attachment-definitions", "linkerd-cni"])?;
            let conf: Value = serde_json::from_str(nad["spec"]["config"].as_str()?).ok()?;
            conf["linkerd"]["inbound-ports-to-ignore"]
                .as_array()?
                .contains(&json!("8080"))
                .then_some(())
        },
        || node.describe(RELEASE_NS, "pods"),
    );
    eprintln!("ConfigMap edit -> NAD updated in {:?}", start.elapsed());
    let mut edited = deployment.clone();
    edited["metadata"]["name"] = json!("meshed-edited");
    edited["spec"]["selector"]["matchLabels"]["app"] = json!("meshed-edited");
    edited["spec"]["template"]["metadata"]["labels"]["app"] = json!("meshed-edited");
    apply(node, &edited);
    let new_pod = wait_pod_running(node, ns, "app=meshed-edited");
    let new_name = new_pod["metadata"]["name"].as_str().expect("pod name");
    let new_addr = format!(
        "{}:8080",
        new_pod["status"]["podIP"].as_str().expect("pod IP")
    );
    let direct = run_to_completion(node, plain, "client-edited", &["ask", &new_addr]);
    assert_eq!(
        direct.trim(),
        format!("app {new_name}"),
        "with 8080 skipped, a connection to the new pod's {new_addr} reaches the app itself"
    );
}

/// Step 6: `check` in the operator's pod, with exactly its settings, passes on the healthy node. The node
/// has no cluster DNS: `check` dials the webhook Service's ClusterIP, as the API server does.
fn step_check_in_the_operator_pod(node: &Node) {
    let out = operator_check(node, &[]);
    assert!(
        out.status.success(),
        "check in the operator pod failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Step 6b: A proxy uid the app runs as: `config.linkerd.io/proxy-uid` set to the range's first uid,
/// which OpenShift's restricted SCC (its stand-in) gives the app container. The pod is admitted with
/// the webhook's warning on kubectl's stderr, and `check`'s `proxy-uids` line fails naming the pod;
/// once the pod is gone, it passes again.
fn step_uid_collision_flagged(node: &Node, meshed: &Meshed) {
    let ns = &meshed.ns;
    let first_uid = RANGE_PROXY_UID - u64::from(PROXY_UID);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "collides", "namespace": ns,
                     "labels": {"app": "collides", (ADMITTED_AS_ON_OPENSHIFT): "true"},
                     "annotations": {"linkerd.io/inject": "enabled",
                                     "config.linkerd.io/proxy-uid": first_uid.to_string()}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [app_container(&meshed.test_image)]},
    });
    let file = temp_file("node-scenario-collides", &pod.to_string());
    let out = node.kubectl(&["apply", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the pod is admitted despite the collision: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "Warning: linkerd-multus: container app runs as uid {first_uid}"
        )),
        "kubectl shows the webhook's warning naming the container and the uid: {stderr}"
    );
    let report = check_json(node);
    let uids = line(&report, "proxy-uids");
    assert_eq!(uids["ok"], false, "{uids}");
    assert!(
        uids.to_string().contains(&format!("{ns}/collides")),
        "check names the pod: {uids}"
    );
    delete_pod_now(node, ns, "collides");
    let report = check_json(node);
    assert_eq!(line(&report, "proxy-uids")["ok"], true, "{report:#}");
}

/// Step 7: `helm uninstall`: nothing cluster-scoped of the release is left; in chainMode=none the
/// installer, seeing its DaemonSet deleted, removes its kubeconfig and leaves the plugin on the node;
/// the NADs stay (the README says so).
fn step_uninstall_leaves_plugin_and_nads(node: &Node, meshed: &Meshed, plugin: &std::path::Path) {
    let net_d = node.cni_dir().join("net.d");
    let ns = &meshed.ns;
    node.helm_ok(&["uninstall", RELEASE, "-n", RELEASE_NS, "--wait"]);
    let instance = format!("app.kubernetes.io/instance={RELEASE}");
    for kind in [
        "clusterroles",
        "clusterrolebindings",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
    ] {
        let left = node.kubectl_ok(&["get", kind, "-l", &instance, "-o", "name"]);
        assert_eq!(
            left.trim(),
            "",
            "{kind} of the release left after uninstall"
        );
    }
    wait_for_explained(
        "the installer pod is gone after uninstall",
        READY_WITHIN,
        || {
            // `--ignore-not-found` prints nothing at all for an empty list.
            let pods = node.get_json(&["-n", CNI_NS, "pods"]);
            let left = pods.map_or(0, |p| p["items"].as_array().map_or(0, Vec::len));
            (left == 0).then_some(())
        },
        || node.describe(CNI_NS, "pods"),
    );
    assert!(
        !net_d.join(KUBECONFIG_NAME).exists() && plugin.is_file(),
        "chainMode=none, uninstall (its DaemonSet deleted): the installer removed the kubeconfig and \
         kept the plugin (the runtime still runs it for the DEL of pods attached before)"
    );
    assert!(
        node.get_json(&["-n", ns, "network-attachment-definitions", "linkerd-cni"])
            .is_some(),
        "the NAD stays after uninstall (pods that use it keep working)"
    );
}
