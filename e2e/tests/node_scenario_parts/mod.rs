//! The node scenario's harness (`node_scenario.rs`): the chart's values for the node's images, the
//! cleanup of the release, the admission stand-ins in the node's netns, and waits on its objects.

use std::time::Duration;

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::stand_ins::{linkerd_injector, AdmissionServer, SccStandIn};
use linkerd_multus_e2e::validator::{self, Validator};
use linkerd_multus_e2e::{unique_name, wait_for_explained};
use serde_json::{json, Value};

use crate::support::{helm, path_str, temp_file};

pub mod admission_policy;
pub mod aux_chain;
pub mod isolation;
pub mod lifecycle;
pub mod multus_conf;
pub mod native_sidecar;
pub mod no_iptables;
pub mod olm;
pub mod without_nad_crd;

pub use multus_conf::MultusConf;

pub const RELEASE: &str = "ld-controller";
pub const RELEASE_NS: &str = "linkerd-multus";
pub const CNI_NS: &str = "linkerd-cni";
pub const OPERATOR: &str = "ld-controller-linkerd-multus";
pub const CNI_DAEMONSET: &str = "ld-controller-linkerd-multus-cni";
/// The chart's default `cni.kubeconfigName`.
pub const KUBECONFIG_NAME: &str = vocab::DEFAULT_KUBECONFIG_NAME;
/// The chart's default `cni.pluginServiceAccountName`.
pub const PLUGIN_SERVICE_ACCOUNT: &str = "linkerd-cni-plugin";
/// Where the test image keeps its one binary (e2e/images: /usr/local/bin).
pub const WORKLOAD: &str = "/usr/local/bin/linkerd-multus-test-workload";
/// The proxy uid of the pods laid out by hand (Linkerd's default).
pub const PROXY_UID: u32 = 2102;
/// OpenShift's uid range of the meshed namespace, and the proxy uid the webhook gives its pods there.
pub const UID_RANGE: &str = "1000650000/10000";
pub const RANGE_PROXY_UID: u64 = 1000650000 + 2102;
/// Pods with this label go through the stand-ins for Linkerd's injector and OpenShift's SCC admission.
pub const ADMITTED_AS_ON_OPENSHIFT: &str = "linkerd-multus-test/openshift-admission";
pub const READY_WITHIN: Duration = Duration::from_secs(120);
/// `operator.repair.deadline` on the node: the scenario's own bound for a pod to be Ready
/// ([`READY_WITHIN`]), so the watchdog halts no owner whose replacement the scenario would call
/// started. A replacement starts in 12–20 s at rest; with 45 s, CI at a load of 10–20 saw a
/// PodRepairHalted in step 6a (2026-11-30). Step 6a waits past it, about as long as steps 5c–6 take.
pub const REPAIR_DEADLINE: Duration = READY_WITHIN;

/// Runs one step of a scenario and prints how long it took (`step NAME: N s`): the tier's log then
/// says where a slow run's time went.
pub fn step<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let out = f();
    eprintln!("step {name}: {:.1} s", start.elapsed().as_secs_f64());
    out
}

pub use linkerd_multus_e2e::node::split_ref;

pub fn image(node: &Node, key: &str) -> String {
    node.built_image(key)
}

/// The values an admin would give on this node: local images, the installer in Multus mode writing
/// into the node's CNI directories. The NAD CRD is Multus' (applied before, as Multus would have).
/// On a node whose profile names a values file (OpenShift's), that file does the rest, as the README
/// says: only the node's images, the installer on and the scenario's repair deadline are added.
pub fn values(node: &Node) -> String {
    let op_image = image(node, "operator");
    let (op_repo, op_tag) = split_ref(&op_image);
    let cni_image = image(node, "cni");
    let (cni_repo, cni_tag) = split_ref(&cni_image);
    let profile = node.profile();
    let net_d = profile.cni_net_dir;
    let bin = profile.cni_bin_dir;
    if profile.chart_values.is_some() {
        return json!({
            "image": {"repository": op_repo, "tag": op_tag, "pullPolicy": "Never"},
            "operator": {
                "repair": {"enabled": true, "deadline": format!("{}s", REPAIR_DEADLINE.as_secs())},
            },
            "cni": {
                "enabled": true,
                "image": {"repository": cni_repo, "tag": cni_tag, "pullPolicy": "Never"},
            },
        })
        .to_string();
    }
    json!({
        "image": {"repository": op_repo, "tag": op_tag, "pullPolicy": "Never"},
        "operator": {
            "cniNamespace": CNI_NS,
            "cniKubeconfig": net_d.join(KUBECONFIG_NAME),
            "repair": {"enabled": true, "deadline": format!("{}s", REPAIR_DEADLINE.as_secs())},
        },
        "cni": {
            "enabled": true,
            "image": {"repository": cni_repo, "tag": cni_tag, "pullPolicy": "Never"},
            "chainMode": "none",
            "destCNINetDir": net_d,
            "destCNIBinDir": bin,
            "kubeconfigName": KUBECONFIG_NAME,
        },
    })
    .to_string()
}

/// Removes the release, the test's namespaces and its cluster-scoped objects (`kind/name`), also when
/// the test fails half-way.
pub struct Cleanup<'a> {
    pub node: &'a Node,
    pub namespaces: Vec<String>,
    pub cluster_objects: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for object in &self.cluster_objects {
            let _ = self.node.kubectl(&["delete", "--ignore-not-found", object]);
        }
        let kubeconfig = self.node.kubeconfig();
        let _ = helm(&[
            "--kubeconfig",
            path_str(&kubeconfig),
            "uninstall",
            RELEASE,
            "-n",
            RELEASE_NS,
        ]);
        // Waited for, so the next run on this node can create the same namespaces again. Terminating
        // first (no pod can be created in them then), the test's workload pods are then removed at
        // once: waiting for each to end gracefully took 114 s for 18 namespaces on the v1.20 node (38 s
        // against 8 s for 9 pods in 3, measured). The release's own pods end as they would: the
        // installer's SIGTERM removes its files from the node.
        let start = std::time::Instant::now();
        let namespaces = self.namespaces.iter().map(String::as_str);
        let listed: Vec<&str> = namespaces.clone().collect();
        self.node
            .start_deleting_namespaces(&listed, |ns| ![CNI_NS, RELEASE_NS].contains(&ns));
        let mut args = vec![
            "delete",
            "namespace",
            "--ignore-not-found",
            "--timeout=120s",
        ];
        args.extend(namespaces);
        let _ = self.node.kubectl(&args);
        eprintln!(
            "cleanup: {} namespaces deleted in {:?}",
            self.namespaces.len(),
            start.elapsed()
        );
    }
}

/// The stand-ins for Linkerd's injector (injecting the test image as proxy and validator: the test
/// workload's, or Linkerd's real one where the platform is given, see [`Validator::for_node`]) and for
/// OpenShift's SCC admission, served in the node's netns where its apiserver calls them, registered
/// under Linkerd's real configuration name for the pods labelled [`ADMITTED_AS_ON_OPENSHIFT`].
pub struct OpenShiftAdmission {
    _servers: (AdmissionServer, SccStandIn),
    _runtime: tokio::runtime::Runtime,
}

impl OpenShiftAdmission {
    pub fn register(node: &Node, cleanup: &mut Cleanup, test_image: &str) -> Self {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        let _in_runtime = runtime.enter();
        let client = runtime.block_on(node.client());
        let bind = || {
            node.run_in_netns(|| {
                std::net::TcpListener::bind("127.0.0.1:0").expect("bind in the node's netns")
            })
        };
        // Linkerd's validator connects to an address outside the pod and expects its own listener to
        // take the connection; here the node's address (a closed port refuses at once if not redirected).
        let node_ip = node.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}",
        ]);
        let connect: std::net::SocketAddr = format!("{}:20001", node_ip.trim())
            .parse()
            .unwrap_or_else(|e| panic!("the node's InternalIP {node_ip:?}: {e}"));
        let validator = Validator::for_node(node);
        let containers = linkerd_injector::Containers {
            image: test_image.to_string(),
            proxy_args: vec!["proxy".into()],
            validator_command: validator.command(),
            validator_args: validator.args(connect),
        };
        let injector = AdmissionServer::start_on(bind(), move |request| {
            linkerd_injector::respond_with(containers.clone(), request)
        });
        let scc = SccStandIn::start_on(client, [bind(), bind()]);
        let selector = json!({ "matchLabels": { (ADMITTED_AS_ON_OPENSHIFT): "true" } });
        let [mutating, validating] = scc.configurations(&unique_name("node"), selector.clone());
        let injector_config = linkerd_injector::configuration(
            linkerd_injector::CONFIGURATION_NAME,
            injector.client_config(),
            selector,
        );
        for config in [mutating, validating, injector_config] {
            cleanup.cluster_objects.push(format!(
                "{}/{}",
                config["kind"].as_str().unwrap().to_lowercase(),
                config["metadata"]["name"].as_str().unwrap()
            ));
            apply(node, &config);
        }
        Self {
            _servers: (injector, scc),
            _runtime: runtime,
        }
    }
}

/// An int field of a JSON object, 0 when absent (the apiserver omits zero counts).
/// `kubectl patch --type kind` of the installer's DaemonSet.
pub fn patch_installer(node: &Node, kind: &str, patch: &Value) {
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

pub fn count(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// `spec.replicas` of Deployment `ns/name` (listing its pods may also count pods on their way out).
pub fn replicas(node: &Node, ns: &str, name: &str) -> i64 {
    node.get_json(&["-n", ns, "deployment", name])
        .map_or(0, |d| count(&d, "/spec/replicas"))
}

pub fn wait_deployment_ready(node: &Node, ns: &str, name: &str) -> Value {
    wait_for_explained(
        &format!("deployment {ns}/{name} has every replica Ready"),
        READY_WITHIN,
        || {
            let d = node.get_json(&["-n", ns, "deployment", name])?;
            let want = count(&d, "/spec/replicas");
            (want > 0
                && count(&d, "/status/readyReplicas") == want
                && count(&d, "/status/replicas") == want
                && count(&d, "/status/updatedReplicas") == want)
                .then_some(d)
        },
        || node.describe(ns, &format!("deployment/{name}")) + &node.describe(ns, "pods"),
    )
}

pub fn wait_daemonset_ready(node: &Node, ns: &str, name: &str) -> Value {
    wait_for_explained(
        &format!("daemonset {ns}/{name} has its pod Ready (its readiness probe)"),
        READY_WITHIN,
        || {
            let d = node.get_json(&["-n", ns, "daemonset", name])?;
            let want = count(&d, "/status/desiredNumberScheduled");
            (want > 0
                && count(&d, "/status/numberReady") == want
                && count(&d, "/status/updatedNumberScheduled") == want)
                .then_some(d)
        },
        || node.describe(ns, &format!("daemonset/{name}")) + &node.describe(ns, "pods"),
    )
}

/// The single pod labelled `selector` once Running with every container ready.
pub fn wait_pod_running(node: &Node, ns: &str, selector: &str) -> Value {
    wait_for_explained(
        &format!("the pod {selector} in {ns} is Running and Ready"),
        READY_WITHIN,
        || {
            let list = node.get_json(&["-n", ns, "pods", "-l", selector])?;
            let pod = list["items"].as_array()?.first()?.clone();
            (pod["status"]["phase"] == "Running" && is_ready(&pod)).then_some(pod)
        },
        || node.describe(ns, "pods"),
    )
}

/// The pod's Ready condition is True.
pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A pod that runs the test image with `args` once; its log when it Succeeded.
pub fn run_to_completion(node: &Node, ns: &str, name: &str, args: &[&str]) -> String {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main", "image": image(node, "test"), "imagePullPolicy": "Never", "args": args,
            }],
        },
    });
    apply(node, &pod);
    wait_for_explained(
        &format!("pod {ns}/{name} ({args:?}) Succeeded"),
        READY_WITHIN,
        || {
            let p = node.get_json(&["-n", ns, "pod", name])?;
            match p["status"]["phase"].as_str() {
                Some("Succeeded") => Some(()),
                Some("Failed") => panic!(
                    "pod {ns}/{name} ({args:?}) Failed: {}\n{}",
                    logs(node, ns, name, "main"),
                    node.describe(ns, &format!("pod/{name}"))
                ),
                _ => None,
            }
        },
        || node.describe(ns, &format!("pod/{name}")),
    );
    logs(node, ns, name, "main")
}

/// Whether the `linkerd-network-validator` of pod `ns/pod` saw its connection redirected, whichever
/// validator ran ([`linkerd_multus_e2e::validator::passed`]).
///
/// Every caller asks it of a Ready pod (its init containers all exited 0), so an answer without the
/// line is read again, three times in all, and the logs seen are printed: once on the v1.20 node a
/// Ready pod's read lacked it, with nothing left to tell why.
pub fn validator_passed(node: &Node, ns: &str, pod: &str) -> bool {
    let mut seen = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        seen = logs(node, ns, pod, vocab::VALIDATOR_CONTAINER);
        if validator::passed(&seen) {
            return true;
        }
    }
    eprintln!("{ns}/{pod}: the validator's logs, read 3 times, never say it passed; the last read:\n{seen}");
    false
}

pub fn logs(node: &Node, ns: &str, pod: &str, container: &str) -> String {
    let out = node.kubectl(&["-n", ns, "logs", pod, "-c", container]);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The Events of `ns` with `reason`, as `kubectl get -o` prints them with `output` (the format, then
/// any further flags).
pub fn events(node: &Node, ns: &str, reason: &str, output: &[&str]) -> String {
    let selector = format!("reason={reason}");
    let mut args = vec![
        "-n",
        ns,
        "get",
        "events",
        "--field-selector",
        &selector,
        "-o",
    ];
    args.extend_from_slice(output);
    node.kubectl_ok(&args)
}

/// The pods the Events of `ns` with `reason` are about.
pub fn event_pods(node: &Node, ns: &str, reason: &str) -> Vec<String> {
    events(
        node,
        ns,
        reason,
        &["jsonpath={.items[*].involvedObject.name}"],
    )
    .split_whitespace()
    .map(str::to_string)
    .collect()
}

/// `helm install` of the release with [`values`] and `sets` (`--set` each), creating its namespace,
/// with `admission=webhook`: the scenario proves the webhook's path (its warnings, its Service), and a
/// policy is cluster-wide ([`admission_policy`] runs the chart's default on its own).
pub fn helm_install(node: &Node, sets: &[&str]) {
    let mut sets = sets.to_vec();
    sets.push("admission=webhook");
    helm_install_chart_admission(node, &sets);
}

/// [`helm_install`] with the chart's own `admission` (auto unless `sets` say otherwise).
pub fn helm_install_chart_admission(node: &Node, sets: &[&str]) {
    let values = temp_file("node-scenario-values", &values(node));
    let chart = crate::support::chart_dir();
    let preset = node
        .profile()
        .chart_values
        .map(|f| linkerd_multus_e2e::workspace_root().join(f));
    let mut args = vec![
        "install",
        RELEASE,
        path_str(&chart),
        "-n",
        RELEASE_NS,
        "--create-namespace",
    ];
    if let Some(preset) = &preset {
        args.extend(["-f", path_str(preset)]);
    }
    args.extend(["-f", path_str(&values)]);
    for set in sets {
        args.extend(["--set", set]);
    }
    node.helm_ok(&args);
    let _ = std::fs::remove_file(values);
}

/// `helm upgrade --reuse-values --wait` of the release with `sets` (`--set` each).
pub fn helm_upgrade(node: &Node, sets: &[&str]) {
    let chart = crate::support::chart_dir();
    let mut args = vec![
        "upgrade",
        RELEASE,
        path_str(&chart),
        "-n",
        RELEASE_NS,
        "--reuse-values",
        "--wait",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    node.helm_ok(&args);
}

/// The label selector of the CNI installer's pods.
pub const INSTALLER_SELECTOR: &str = "app.kubernetes.io/component=cni";

/// The names of the CNI installer's pods.
pub fn installer_pods(node: &Node) -> Vec<String> {
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "get",
        "pods",
        "-l",
        INSTALLER_SELECTOR,
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])
    .split_whitespace()
    .map(str::to_string)
    .collect()
}

/// Deletes the bare pod `ns/name` at once (`--force --grace-period=0`): its object is gone when this
/// returns, and the kubelet kills what runs in the background. For pods whose end no step asserts: a
/// graceful delete waits for the kubelet to release the object, which the v1.20 kubelet does only at
/// its next status sync (12.9 s for a plain pod with a 1 s grace period, 2026-11-29).
pub fn delete_pod_now(node: &Node, ns: &str, name: &str) {
    node.kubectl_ok(&[
        "-n",
        ns,
        "delete",
        "pod",
        name,
        "--force",
        "--grace-period=0",
    ]);
}

pub fn apply(node: &Node, manifest: &Value) {
    let file = temp_file("node-scenario", &manifest.to_string());
    node.kubectl_ok(&["apply", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(file);
}

/// `ask ADDR` run inside `container` of `pod` (as that container's user): the answer.
pub fn ask_from(node: &Node, ns: &str, pod: &str, container: &str, addr: &str) -> String {
    node.kubectl_ok(&[
        "-n", ns, "exec", pod, "-c", container, "--", WORKLOAD, "ask", addr,
    ])
    .trim()
    .to_string()
}

/// `linkerd-multus-operator check` (with `extra` flags) run in the operator's pod, as the README says.
pub fn operator_check(node: &Node, extra: &[&str]) -> std::process::Output {
    let target = format!("deploy/{OPERATOR}");
    let mut args = vec![
        "-n",
        RELEASE_NS,
        "exec",
        &target,
        "--",
        "linkerd-multus-operator",
        "check",
    ];
    args.extend_from_slice(extra);
    node.kubectl(&args)
}

pub fn create_namespace(node: &Node, cleanup: &mut Cleanup, prefix: &str) -> String {
    let ns = unique_name(prefix);
    node.kubectl_ok(&["create", "namespace", &ns]);
    cleanup.namespaces.push(ns.clone());
    wait_for_explained(
        &format!("the token controller made ServiceAccount {ns}/default"),
        READY_WITHIN,
        || {
            node.get_json(&["-n", &ns, "serviceaccount", "default"])
                .map(|_| ())
        },
        || node.describe(&ns, "serviceaccounts"),
    );
    ns
}

/// A one-replica Deployment `name` in `ns` whose pods carry `pod_metadata` and run `containers`.
pub fn deployment(ns: &str, name: &str, pod_metadata: Value, containers: Vec<Value>) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": pod_metadata,
                "spec": {"terminationGracePeriodSeconds": 1, "containers": containers},
            },
        },
    })
}

/// A namespace of the test enabled for linkerd-multus (`linkerd.io/multus=enabled`), with OpenShift's
/// uid range ([`UID_RANGE`]) as the meshed pods' proxy uid comes from it.
pub fn enabled_namespace(node: &Node, cleanup: &mut Cleanup, prefix: &str) -> String {
    let ns = create_namespace(node, cleanup, prefix);
    node.kubectl_ok(&[
        "annotate",
        "namespace",
        &ns,
        "linkerd.io/multus=enabled",
        &format!("{}={UID_RANGE}", vocab::OPENSHIFT_UID_RANGE_ANNOTATION),
    ]);
    ns
}

pub fn node_name(node: &Node) -> String {
    node.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
}

/// `check -o json` in the operator's pod, parsed.
pub fn check_json(node: &Node) -> Value {
    let out = operator_check(node, &["-o", "json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check -o json: {e}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The line of `check` in a `check -o json` report.
pub fn line<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["check"] == check))
        .unwrap_or_else(|| panic!("no {check} line in {report}"))
}
