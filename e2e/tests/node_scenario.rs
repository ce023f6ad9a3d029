//! The product on the node, as a cluster admin runs it: the chart installed with the project's images,
//! the Multus stand-in in Multus' place in the node's CNI config, a namespace annotated (with an
//! OpenShift uid range), a Deployment injected by the stand-in for Linkerd's injector and admitted by
//! the stand-in for OpenShift's SCC admission, a pod from before its namespace was enabled repaired,
//! and real connections redirected by the rules `linkerd-cni` wrote when the runtime ran the chain.
//!
//! On the shared node (`e2e/testbed up --node`): the release and its namespaces are removed at the end.
//! The operator and its webhook see every namespace of the node, so other tests' pods there are left
//! alone only because their namespaces are not annotated.

mod support;

use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::stand_ins::{linkerd_injector, AdmissionServer, SccStandIn};
use linkerd_multus_e2e::{unique_name, wait_for_explained};
use serde_json::{json, Value};
use support::{chart_dir, helm, path_str, temp_file};

const RELEASE: &str = "ld-controller";
const RELEASE_NS: &str = "linkerd-multus";
const CNI_NS: &str = "linkerd-cni";
const OPERATOR: &str = "ld-controller-linkerd-multus";
const CNI_DAEMONSET: &str = "ld-controller-linkerd-multus-cni";
const KUBECONFIG_NAME: &str = "ZZZ-linkerd-cni-kubeconfig";
/// Where the test image keeps its one binary (e2e/images: /usr/local/bin).
const WORKLOAD: &str = "/usr/local/bin/linkerd-multus-test-workload";
/// The proxy uid of the pods laid out by hand (Linkerd's default).
const PROXY_UID: u32 = 2102;
/// OpenShift's uid range of the meshed namespace, and the proxy uid the webhook gives its pods there.
const UID_RANGE: &str = "1000650000/10000";
const RANGE_PROXY_UID: u64 = 1000650000 + 2102;
/// Pods with this label go through the stand-ins for Linkerd's injector and OpenShift's SCC admission.
const ADMITTED_AS_ON_OPENSHIFT: &str = "linkerd-multus-test/openshift-admission";
const READY_WITHIN: Duration = Duration::from_secs(120);

/// `repository` and `tag` of a full image reference.
fn split_ref(image: &str) -> (&str, &str) {
    image
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("image reference without a tag: {image}"))
}

fn image(node: &Node, key: &str) -> String {
    node.image(key)
        .unwrap_or_else(|| panic!("no {key} image recorded for the node: did e2e/images run?"))
}

/// The values an admin would give on this node: local images, the installer in Multus mode writing
/// into the node's CNI directories. The NAD CRD is Multus' (applied before, as Multus would have).
fn values(node: &Node) -> String {
    let op_image = image(node, "operator");
    let (op_repo, op_tag) = split_ref(&op_image);
    let cni_image = image(node, "cni");
    let (cni_repo, cni_tag) = split_ref(&cni_image);
    let net_d = node.cni_dir().join("net.d");
    let bin = node.cni_dir().join("bin");
    json!({
        "image": {"repository": op_repo, "tag": op_tag, "pullPolicy": "Never"},
        "operator": {
            "cniNamespace": CNI_NS,
            "cniKubeconfig": net_d.join(KUBECONFIG_NAME),
            "repair": {"enabled": true},
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
struct Cleanup<'a> {
    node: &'a Node,
    namespaces: Vec<String>,
    cluster_objects: Vec<String>,
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
        // Waited for, so the next run on this node can create the same namespaces again.
        let mut args = vec![
            "delete",
            "namespace",
            "--ignore-not-found",
            "--timeout=120s",
        ];
        args.extend(self.namespaces.iter().map(String::as_str));
        let _ = self.node.kubectl(&args);
    }
}

/// The stand-ins for Linkerd's injector (injecting the test image as proxy and validator) and for
/// OpenShift's SCC admission, served in the node's netns where its apiserver calls them, registered
/// under Linkerd's real configuration name for the pods labelled [`ADMITTED_AS_ON_OPENSHIFT`].
struct OpenShiftAdmission {
    _servers: (AdmissionServer, SccStandIn),
    _runtime: tokio::runtime::Runtime,
}

impl OpenShiftAdmission {
    fn register(node: &Node, cleanup: &mut Cleanup, test_image: &str) -> Self {
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
        let containers = linkerd_injector::Containers {
            image: test_image.to_string(),
            proxy_args: vec!["proxy".into()],
            validator_args: vec!["validate".into(), format!("{}:20001", node_ip.trim())],
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
fn count(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn wait_deployment_ready(node: &Node, ns: &str, name: &str) -> Value {
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

fn wait_daemonset_ready(node: &Node, ns: &str, name: &str) -> Value {
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
fn wait_pod_running(node: &Node, ns: &str, selector: &str) -> Value {
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
fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A pod that runs the test image with `args` once; its log when it Succeeded.
fn run_to_completion(node: &Node, ns: &str, name: &str, args: &[&str]) -> String {
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

fn logs(node: &Node, ns: &str, pod: &str, container: &str) -> String {
    let out = node.kubectl(&["-n", ns, "logs", pod, "-c", container]);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The Events of `ns` with `reason`, as `kubectl get -o` prints them with `output` (the format, then
/// any further flags).
fn events(node: &Node, ns: &str, reason: &str, output: &[&str]) -> String {
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

fn apply(node: &Node, manifest: &Value) {
    let file = temp_file("node-scenario", &manifest.to_string());
    node.kubectl_ok(&["apply", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(file);
}

/// `ask ADDR` run inside `container` of `pod` (as that container's user): the answer.
fn ask_from(node: &Node, ns: &str, pod: &str, container: &str, addr: &str) -> String {
    node.kubectl_ok(&[
        "-n", ns, "exec", pod, "-c", container, "--", WORKLOAD, "ask", addr,
    ])
    .trim()
    .to_string()
}

fn create_namespace(node: &Node, cleanup: &mut Cleanup, prefix: &str) -> String {
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

#[test]
#[ignore = "needs the node testbed (root): run by e2e/test-all"]
fn the_chart_on_the_node_redirects_a_meshed_pods_traffic() {
    let node = Node::shared();
    let net_d = node.cni_dir().join("net.d");
    let bin = node.cni_dir().join("bin");

    // 1. The node's CNI config: the Multus stand-in in front, the cluster network its delegate.
    let stand_in_conf = net_d.join("00-multus-stand-in.conf");
    let conf_before = std::fs::read_to_string(&stand_in_conf)
        .unwrap_or_else(|e| panic!("the node's CNI config {}: {e}", stand_in_conf.display()));
    let conf: Value = serde_json::from_str(&conf_before).expect("the stand-in's config is JSON");
    assert_eq!(conf["type"], "multus-stand-in", "primary plugin: {conf}");
    assert_eq!(
        conf["delegates"][0]["plugins"][0]["type"], "bridge",
        "the cluster network (bridge + host-local) is the stand-in's delegate: {conf}"
    );
    let confs: Vec<String> = std::fs::read_dir(&net_d)
        .expect("the node's net.d")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf") || n.ends_with(".conflist"))
        .collect();
    assert_eq!(
        confs,
        vec!["00-multus-stand-in.conf".to_string()],
        "the stand-in's is the node's only network config"
    );
    assert!(
        bin.join("multus-stand-in").exists(),
        "e2e/images linked multus-stand-in into {}",
        bin.display()
    );

    // 2. The chart, installed as an admin would on this node.
    let mut cleanup = Cleanup {
        node: &node,
        namespaces: vec![],
        cluster_objects: vec![],
    };
    // What Multus brings: its CRD (left in place, as Multus owns it).
    let crd = chart_dir().join("crds-optional/network-attachment-definition.yaml");
    node.kubectl_ok(&["apply", "-f", path_str(&crd)]);
    node.kubectl_ok(&["create", "namespace", CNI_NS]);
    cleanup.namespaces.push(CNI_NS.to_string());
    cleanup.namespaces.push(RELEASE_NS.to_string());
    let values = temp_file("node-scenario-values", &values(&node));
    let chart = chart_dir();
    let start = Instant::now();
    node.helm_ok(&[
        "install",
        RELEASE,
        path_str(&chart),
        "-n",
        RELEASE_NS,
        "--create-namespace",
        "-f",
        path_str(&values),
    ]);
    let op = wait_deployment_ready(&node, RELEASE_NS, OPERATOR);
    assert_eq!(
        count(&op, "/status/readyReplicas"),
        2,
        "both operator replicas Ready"
    );
    let op_ready = start.elapsed();
    wait_daemonset_ready(&node, CNI_NS, CNI_DAEMONSET);
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
    assert_eq!(
        std::fs::read_to_string(&stand_in_conf).unwrap_or_default(),
        conf_before,
        "chainMode=none leaves the node's network config alone"
    );

    // 3. A namespace annotated for Multus and, as OpenShift does, with a uid range gets its NAD. A
    // Deployment with only its app is injected by the stand-in for Linkerd's injector and admitted by
    // the stand-in for OpenShift's SCC admission with the chart's default configuration name (it runs
    // after the injector's): attached, the proxy on the range's uid, the validator's check passed.
    let ns = create_namespace(&node, &mut cleanup, "meshed");
    node.kubectl_ok(&[
        "annotate",
        "namespace",
        &ns,
        "linkerd.io/multus=enabled",
        &format!("{}={UID_RANGE}", vocab::OPENSHIFT_UID_RANGE_ANNOTATION),
    ]);
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
    let test_image = image(&node, "test");
    let _admission = OpenShiftAdmission::register(&node, &mut cleanup, &test_image);
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "meshed", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "meshed"}},
            "template": {
                "metadata": {
                    "labels": {"app": "meshed", (ADMITTED_AS_ON_OPENSHIFT): "true"},
                    "annotations": {"linkerd.io/inject": "enabled"},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "app", "image": test_image, "imagePullPolicy": "Never", "args": ["app"]},
                    ],
                },
            },
        },
    });
    let start = Instant::now();
    apply(&node, &deployment);
    let pod = wait_pod_running(&node, &ns, "app=meshed");
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
        networks.contains("linkerd-cni") && annotations["openshift.io/scc"] == "restricted-v2",
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
        logs(&node, &ns, &pod_name, "linkerd-network-validator").contains("validated:"),
        "the validator saw its connection redirected"
    );
    let pod_ip = pod["status"]["podIP"].as_str().expect("pod IP").to_string();

    // 4. Traffic: from an unmeshed pod in a plain namespace to the app's 8080 lands on the proxy's
    // inbound listener; the app's own outbound connections land on 4140; the proxy uid bypasses.
    let plain = create_namespace(&node, &mut cleanup, "plain");
    let app_addr = format!("{pod_ip}:8080");
    let inbound = run_to_completion(&node, &plain, "client", &["ask", &app_addr]);
    assert!(
        inbound.contains(&format!("proxy inbound 4143 original-dst {app_addr}")),
        "a connection to {app_addr} lands on the proxy's inbound 4143; the client got: {inbound}"
    );
    apply(
        &node,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "server", "namespace": plain, "labels": {"app": "server"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "main", "image": test_image, "imagePullPolicy": "Never", "args": ["app"]}]},
        }),
    );
    let server = wait_pod_running(&node, &plain, "app=server");
    let server_addr = format!(
        "{}:8080",
        server["status"]["podIP"].as_str().expect("server IP")
    );
    let outbound = ask_from(&node, &ns, &pod_name, "app", &server_addr);
    assert!(
        outbound.contains(&format!("proxy outbound 4140 original-dst {server_addr}")),
        "the app's connection to {server_addr} lands on the proxy's outbound 4140; it got: {outbound}"
    );
    let bypass = ask_from(&node, &ns, &pod_name, "linkerd-proxy", &server_addr);
    assert_eq!(
        bypass, "app server",
        "uid {RANGE_PROXY_UID} (the proxy) bypasses the redirect and reaches {server_addr} itself"
    );

    // 5. The CNI DaemonSet restarted while meshed pods are being created: every pod runs, attached,
    // and no sandbox fails (in chainMode=none the old installer leaves the binary and the kubeconfig on
    // SIGTERM, so a pod set up in the gap still finds them).
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "rollout",
        "restart",
        &format!("daemonset/{CNI_DAEMONSET}"),
    ]);
    let start = Instant::now();
    node.kubectl_ok(&["-n", &ns, "scale", "deployment/meshed", "--replicas=4"]);
    wait_deployment_ready(&node, &ns, "meshed");
    wait_daemonset_ready(&node, CNI_NS, CNI_DAEMONSET);
    eprintln!(
        "rollout restart of the CNI DaemonSet + 3 new pods -> all Ready in {:?}",
        start.elapsed()
    );
    let failed = events(
        &node,
        &ns,
        "FailedCreatePodSandBox",
        &[
            "custom-columns=POD:.involvedObject.name,COUNT:.count",
            "--no-headers",
        ],
    );
    eprintln!(
        "sandboxes failed during the installer's restart: {}",
        failed.lines().count()
    );
    assert_eq!(
        failed.trim(),
        "",
        "no sandbox fails while the CNI DaemonSet restarts (FailedCreatePodSandBox events: pod, count)"
    );
    let pods = node
        .get_json(&["-n", &ns, "pods", "-l", "app=meshed"])
        .expect("the meshed pods");
    for p in pods["items"].as_array().expect("a pod list") {
        let networks = p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
            .as_str()
            .unwrap_or_default();
        assert!(
            networks.contains("linkerd-cni"),
            "pod {} created during the restart is attached: {networks:?}",
            p["metadata"]["name"]
        );
    }

    // 5b. Repair: a meshed Deployment's pod created before its namespace is enabled runs unattached
    // (its 8080 reaches the app itself); once the namespace is enabled, the operator evicts it, the
    // ReplicaSet recreates it, the webhook attaches the new pod and its 8080 lands on the proxy.
    // Laid out by hand as Linkerd's injector would (its stand-in's validator would keep an unattached
    // pod from starting, as Linkerd's does).
    let late = create_namespace(&node, &mut cleanup, "late");
    let early = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "meshed", "namespace": late},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "meshed"}},
            "template": {
                "metadata": {"labels": {"app": "meshed"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "app", "image": test_image, "imagePullPolicy": "Never", "args": ["app"]},
                        {"name": "linkerd-proxy", "image": test_image, "imagePullPolicy": "Never",
                         "args": ["proxy", "--uid", PROXY_UID.to_string()],
                         "securityContext": {"runAsUser": PROXY_UID}},
                    ],
                },
            },
        },
    });
    apply(&node, &early);
    let before = wait_pod_running(&node, &late, "app=meshed");
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
    let direct = run_to_completion(&node, &plain, "client-early", &["ask", &before_addr]);
    assert_eq!(
        direct.trim(),
        format!("app {before_name}"),
        "unattached: a connection to {before_addr} reaches the app itself"
    );
    node.kubectl_ok(&["annotate", "namespace", &late, "linkerd.io/multus=enabled"]);
    let start = Instant::now();
    let repaired = wait_for_explained(
        &format!(
            "the operator restarted the unattached pod of {late} and its new pod runs attached"
        ),
        READY_WITHIN,
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
    eprintln!(
        "namespace enabled -> unattached pod evicted, replacement attached and Ready in {:?}",
        start.elapsed()
    );
    let evicted = events(&node, &late, "PodEvictedForRepair", &["name"]);
    assert_eq!(evicted.lines().count(), 1, "one repair Event: {evicted}");
    let repaired_addr = format!(
        "{}:8080",
        repaired["status"]["podIP"].as_str().expect("pod IP")
    );
    let inbound = run_to_completion(&node, &plain, "client-repaired", &["ask", &repaired_addr]);
    assert!(
        inbound.contains(&format!("proxy inbound 4143 original-dst {repaired_addr}")),
        "the repaired pod's {repaired_addr} lands on the proxy's inbound 4143; the client got: {inbound}"
    );

    // 5c. The linkerd-cni ConfigMap edited (8080 added to the inbound ports to skip): the NAD's config
    // follows, and a pod created afterwards gets the new rules: a connection to its 8080 reaches the
    // app itself, not the proxy.
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
                node.get_json(&["-n", &ns, "network-attachment-definitions", "linkerd-cni"])?;
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
    apply(&node, &edited);
    let new_pod = wait_pod_running(&node, &ns, "app=meshed-edited");
    let new_name = new_pod["metadata"]["name"].as_str().expect("pod name");
    let new_addr = format!(
        "{}:8080",
        new_pod["status"]["podIP"].as_str().expect("pod IP")
    );
    let direct = run_to_completion(&node, &plain, "client-edited", &["ask", &new_addr]);
    assert_eq!(
        direct.trim(),
        format!("app {new_name}"),
        "with 8080 skipped, a connection to the new pod's {new_addr} reaches the app itself"
    );

    // 6. `check` in the operator's pod, with exactly its settings, passes on the healthy node. The node
    // has no cluster DNS: `check` dials the webhook Service's ClusterIP, as the API server does.
    let out = node.kubectl(&[
        "-n",
        RELEASE_NS,
        "exec",
        &format!("deploy/{OPERATOR}"),
        "--",
        "linkerd-multus-operator",
        "check",
    ]);
    assert!(
        out.status.success(),
        "check in the operator pod failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // 7. `helm uninstall`: nothing cluster-scoped of the release is left; in chainMode=none the
    // installer leaves its kubeconfig and the plugin on the node; the NADs stay (the README says so).
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
        net_d.join(KUBECONFIG_NAME).is_file() && plugin.is_file(),
        "chainMode=none: the kubeconfig and the plugin stay on the node after SIGTERM"
    );
    assert!(
        node.get_json(&["-n", &ns, "network-attachment-definitions", "linkerd-cni"])
            .is_some(),
        "the NAD stays after uninstall (pods that use it keep working)"
    );

    drop(cleanup);
}
