//! OperatorHub's way in (issue 45), on the node: the real OLM v0 `olm` operator installs the committed
//! bundle (`bundle/`, laid out as a catalog's InstallPlan would: [`linkerd_multus_e2e::olm`]), the CSV
//! reaches `Succeeded`, the operator it started keeps the installer DaemonSet from a NodeAgent, and a
//! meshed pod of an enabled namespace is attached, redirected (Linkerd's validator passes) and Ready
//! with `check` all ✓. Then the uninstall as OLM does it: the CSV deleted (the operator, its webhook
//! configuration and Service go), then the NodeAgent (the garbage collector takes its DaemonSet, whose
//! installers clean the node as on `helm uninstall`), and a node reboot: every plain pod of the formerly
//! enabled namespace starts again, and its meshed pod is held by its validator, never running
//! unredirected (what `helm uninstall` must leave, node_scenario's lifecycle drill).
//!
//! Needs the real platform (`olm` is not in any registry this project reaches): reported not run
//! without it.

use std::time::{Duration, Instant};

use super::lifecycle::{
    meshed_pods_of, plain_pod, ready_since, running_pod, validator_exit, wait_ready,
};
use super::*;
use k8s_openapi::jiff::Timestamp;
use linkerd_multus_e2e::apply_nad_crd;
use linkerd_multus_e2e::bundle;
use linkerd_multus_e2e::node::{split_ref, Node};
use linkerd_multus_e2e::olm::{self, Bundle, Olm, SUCCEEDED_WITHIN};
use linkerd_multus_e2e::platform::{Platform, OLM};
use linkerd_multus_e2e::{wait_for_explained, workspace_root};
use serde_json::{json, Value};

const CASE: &str =
    "OLM installs the bundle on the node, and its uninstall leaves every pod starting";
/// The namespace the CSV is installed into (the one `bundle/direct-install.yaml` creates).
const INSTALL_NS: &str = "linkerd-multus";
/// How long after the NodeAgent's deletion its DaemonSet may take to be gone (the garbage collector,
/// then each installer's SIGTERM handling).
const GONE_WITHIN: Duration = Duration::from_secs(120);

/// The whole drill on the shared node (the test `olm_installs_the_bundle...` of node_scenario.rs).
pub fn run() {
    let Some(platform) = Platform::or_not_run(CASE) else {
        return;
    };
    let node = Node::shared();
    let bundle = Bundle::read(&bundle::bundle_dir());
    if let Some(why) = olm::below_min_kube_version(&node, &bundle) {
        linkerd_multus_e2e::not_run(CASE, &why);
        return;
    }
    let mut cleanup = Cleanup {
        node: &node,
        namespaces: vec![],
        cluster_objects: vec![],
    };
    let logs = tempfile::tempdir().expect("temp dir");
    let olm = Olm::start(
        &node,
        &platform.binary(OLM),
        &platform.dir().join("olm/crds"),
        logs.path(),
    );
    let _olm_objects = OlmObjects {
        node: &node,
        csv: bundle.csv_name().to_string(),
    };
    step("olm 1 the CSV Succeeded", || {
        csv_succeeded(&node, &mut cleanup, &bundle, &olm)
    });
    assert_eq!(
        bundle.namespace(),
        INSTALL_NS,
        "direct-install.yaml's namespace"
    );
    let cni_ns = bundle
        .operator_env("CNI_NAMESPACE")
        .expect("the CSV sets CNI_NAMESPACE");
    let agent = bundle
        .operator_env("NODE_AGENT")
        .expect("the CSV sets NODE_AGENT");
    let daemonset = step("olm 2 the NodeAgent's installer Ready", || {
        node_agent_ready(&node, &cni_ns, &agent)
    });
    let enabled = step(
        "olm 3 a meshed pod attached, redirected, Ready; check ✓",
        || meshed_pod_ready(&node, &mut cleanup, &bundle.deployments()[0]),
    );
    step("olm 4 the CSV and the NodeAgent deleted", || {
        uninstalled(&node, &mut cleanup, &bundle, &agent, (&cni_ns, &daemonset))
    });
    step("olm 5 a reboot after the uninstall", || {
        reboot_after_uninstall(&node, &enabled)
    });
}

/// Removes what OLM and the bundle left, also when the test fails half-way: the NodeAgent first (its
/// installers clean the node), then the CSV (OLM removes its webhook configuration), then OLM's CRDs
/// and namespace. Dropped before `olm` stops and before the scenario's [`Cleanup`].
struct OlmObjects<'a> {
    node: &'a Node,
    csv: String,
}

impl Drop for OlmObjects<'_> {
    fn drop(&mut self) {
        let node = self.node;
        let _ = node.kubectl(&[
            "delete",
            "--ignore-not-found",
            "--wait",
            "nodeagents",
            "--all",
        ]);
        let _ = node.kubectl(&[
            "-n",
            INSTALL_NS,
            "delete",
            "--ignore-not-found",
            "csv",
            &self.csv,
        ]);
        let label = format!("olm.owner={}", self.csv);
        let _ = node.kubectl(&["delete", "mutatingwebhookconfigurations", "-l", &label]);
        // Never a panic here: a drop during a failed test's unwinding would abort the run.
        let listed = node.kubectl(&["get", "crd", "-o", "name"]);
        let olm_crds = String::from_utf8_lossy(&listed.stdout);
        for crd in olm_crds
            .lines()
            .filter(|c| c.ends_with(".operators.coreos.com"))
        {
            let _ = node.kubectl(&["delete", "--ignore-not-found", crd]);
        }
        let _ = node.kubectl(&[
            "delete",
            "namespace",
            "--ignore-not-found",
            olm::OLM_NAMESPACE,
        ]);
    }
}

/// Step 1: the bundle laid out and its CSV created; `olm` installs it to `Succeeded`.
fn csv_succeeded(node: &Node, cleanup: &mut Cleanup, bundle: &Bundle, olm: &Olm) {
    cleanup.namespaces.push(INSTALL_NS.into());
    // Multus' CRD, as on a cluster running Multus (the bundle neither owns nor requires it).
    apply_nad_crd(&node.kubeconfig());
    cleanup
        .cluster_objects
        .extend(bundle.lay_out(node, INSTALL_NS));
    let start = Instant::now();
    olm::apply(
        node,
        &bundle.csv_with_image(INSTALL_NS, &image(node, "operator")),
    );
    let name = bundle.csv_name();
    wait_for_explained(
        &format!("OLM moves CSV {INSTALL_NS}/{name} to Succeeded"),
        SUCCEEDED_WITHIN,
        || olm::csv_phase(node, INSTALL_NS, name).filter(|(p, _)| p == "Succeeded"),
        || {
            format!(
                "{:?}\n{}\nolm's log:\n{}",
                olm::csv_phase(node, INSTALL_NS, name),
                node.describe(INSTALL_NS, "pods"),
                olm.log_tail()
            )
        },
    );
    eprintln!("CSV created -> Succeeded in {:?}", start.elapsed());
    for deployment in bundle.deployments() {
        wait_deployment_ready(node, INSTALL_NS, &deployment);
    }
    let webhooks = node.kubectl_ok(&[
        "get",
        "mutatingwebhookconfigurations",
        "-l",
        &format!("olm.owner={name}"),
        "-o",
        "name",
    ]);
    assert_eq!(
        webhooks.lines().count(),
        1,
        "OLM created the CSV's one webhook configuration: {webhooks:?}"
    );
}

/// The NodeAgent's spec on this node: the `cni` values an admin of this node gives the chart (its
/// profile's values file, then the node's own settings), which a NodeAgent takes verbatim.
fn node_agent_spec(node: &Node) -> Value {
    let mut spec = json!({});
    if let Some(file) = node.profile().chart_values {
        let text = std::fs::read_to_string(workspace_root().join(&file)).expect("values file");
        let values: Value = serde_yaml_ng::from_str(&text).expect("values YAML");
        merge(&mut spec, &values["cni"]);
    }
    let values: Value = serde_json::from_str(&values(node)).expect("the node's values");
    merge(&mut spec, &values["cni"]);
    spec.as_object_mut().expect("object").remove("enabled");
    let installer = image(node, "cni");
    let (repository, tag) = split_ref(&installer);
    spec["image"] = json!({"repository": repository, "tag": tag, "pullPolicy": "Never"});
    spec
}

/// `over` merged into `base` map by map (helm's merge of values files).
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Step 2: a NodeAgent created; the operator applies its DaemonSet, whose installer becomes Ready, and
/// reports it Available. Returns the DaemonSet's name.
fn node_agent_ready(node: &Node, cni_ns: &str, name: &str) -> String {
    let agent = json!({
        "apiVersion": "linkerd-multus.io/v1alpha1", "kind": "NodeAgent",
        "metadata": {"name": name},
        "spec": node_agent_spec(node),
    });
    let start = Instant::now();
    olm::apply(node, &agent);
    let daemonset = wait_for_explained(
        &format!("the operator applies NodeAgent {name}'s DaemonSet in {cni_ns}"),
        READY_WITHIN,
        || {
            let list = node.get_json(&["-n", cni_ns, "daemonsets"])?;
            list["items"].as_array()?.iter().find_map(|d| {
                let owned = d["metadata"]["ownerReferences"]
                    .as_array()?
                    .iter()
                    .any(|o| o["kind"] == "NodeAgent" && o["name"] == name);
                owned.then(|| d["metadata"]["name"].as_str().map(String::from))?
            })
        },
        || {
            node.describe(INSTALL_NS, "pods")
                + &node.kubectl_ok(&["get", "nodeagents", "-o", "yaml"])
        },
    );
    wait_daemonset_ready(node, cni_ns, &daemonset);
    wait_for_explained(
        &format!("NodeAgent {name} reports Available=True"),
        READY_WITHIN,
        || {
            let agent = node.get_json(&["nodeagent", name])?;
            agent["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
                .then_some(())
        },
        || node.kubectl_ok(&["get", "nodeagents", "-o", "yaml"]),
    );
    eprintln!(
        "NodeAgent created -> installer Ready, Available in {:?}",
        start.elapsed()
    );
    daemonset
}

/// A one-replica Deployment `name` of the test image's app in `ns`, with `pod_metadata`.
fn app_deployment(node: &Node, ns: &str, name: &str, pod_metadata: Value) -> Value {
    deployment(
        ns,
        name,
        pod_metadata,
        vec![crate::app_container(&image(node, "test"))],
    )
}

/// Step 3: an enabled namespace with a plain and a meshed Deployment (injected by the stand-in for
/// Linkerd's injector, with Linkerd's real validator): the meshed pod names linkerd-cni's NAD, its
/// validator saw its connection redirected, it is Ready, and `check` passes every row. Returns the
/// namespace.
fn meshed_pod_ready(node: &Node, cleanup: &mut Cleanup, operator: &str) -> String {
    let ns = enabled_namespace(node, cleanup, "olm-meshed");
    wait_for_explained(
        &format!("the operator wrote NAD {ns}/linkerd-cni"),
        READY_WITHIN,
        || node.get_json(&["-n", &ns, "network-attachment-definitions", "linkerd-cni"]),
        || node.describe(INSTALL_NS, "pods"),
    );
    let _admission = OpenShiftAdmission::register(node, cleanup, &image(node, "test"));
    apply(
        node,
        &app_deployment(node, &ns, "plain", json!({"labels": {"app": "plain"}})),
    );
    apply(
        node,
        &app_deployment(
            node,
            &ns,
            "meshed",
            json!({
                "labels": {"app": "meshed", (ADMITTED_AS_ON_OPENSHIFT): "true"},
                "annotations": {"linkerd.io/inject": "enabled"},
            }),
        ),
    );
    wait_pod_running(node, &ns, "app=plain");
    let pod = wait_pod_running(node, &ns, "app=meshed");
    let networks = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .unwrap_or_default();
    assert!(
        networks.contains("linkerd-cni"),
        "the webhook OLM registered attached the NAD: {}",
        pod["metadata"]
    );
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    assert!(
        validator_passed(node, &ns, name),
        "the validator saw its connection redirected"
    );
    let report = check_json(node, operator);
    let failing: Vec<&Value> = report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["ok"] != true)
        .collect();
    assert!(
        failing.is_empty(),
        "check ✓ on every row: {failing:?}\n{report}"
    );
    ns
}

/// `check -o json` run in the operator's pod as the docs say (OLM's Deployment is the CSV's, not the
/// chart's release-named one the scenario's helper execs into).
fn check_json(node: &Node, deployment: &str) -> Value {
    let target = format!("deploy/{deployment}");
    let args = [
        "-n",
        INSTALL_NS,
        "exec",
        &target,
        "--",
        "linkerd-multus-operator",
        "check",
        "-o",
        "json",
    ];
    let out = node.kubectl(&args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check -o json: {e}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Step 4: the CSV deleted (OLM removes the operator's Deployment and its webhook configuration), then
/// the NodeAgent (the garbage collector removes its DaemonSet, the installers clean the node). A plain
/// pod of a new namespace and one of the formerly enabled namespace start.
fn uninstalled(
    node: &Node,
    cleanup: &mut Cleanup,
    bundle: &Bundle,
    agent: &str,
    (cni_ns, daemonset): (&str, &str),
) {
    let name = bundle.csv_name();
    node.kubectl_ok(&["-n", INSTALL_NS, "delete", "csv", name, "--wait"]);
    for deployment in bundle.deployments() {
        wait_for_explained(
            &format!("OLM removed Deployment {INSTALL_NS}/{deployment} with its CSV"),
            GONE_WITHIN,
            || {
                node.get_json(&["-n", INSTALL_NS, "deployment", &deployment])
                    .is_none()
                    .then_some(())
            },
            || node.describe(INSTALL_NS, "deployments"),
        );
    }
    assert!(
        node.get_json(&["daemonset", "-n", cni_ns, daemonset]).is_some(),
        "the installer stays while its NodeAgent does: deleting the CSV alone leaves the node installed"
    );
    node.kubectl_ok(&["delete", "nodeagent", agent, "--wait"]);
    wait_for_explained(
        &format!("the garbage collector removed DaemonSet {cni_ns}/{daemonset} and its pods"),
        GONE_WITHIN,
        || {
            let gone = node
                .get_json(&["daemonset", "-n", cni_ns, daemonset])
                .is_none();
            let pods = installer_pods_in(node, cni_ns);
            (gone && pods == 0).then_some(())
        },
        || node.describe(cni_ns, "pods"),
    );
    let ns = create_namespace(node, cleanup, "olm-after");
    apply(node, &plain_pod(node, &ns, "p1"));
    wait_ready(node, &ns, "p1", READY_WITHIN);
}

fn installer_pods_in(node: &Node, ns: &str) -> usize {
    node.get_json(&["-n", ns, "pods", "-l", "app.kubernetes.io/component=cni"])
        .and_then(|l| l["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Step 5: a node reboot after the uninstall: the plain pod of the formerly enabled namespace is Ready
/// again in a new sandbox, its meshed pod is held by Linkerd's validator (exit 95) and is not Ready.
fn reboot_after_uninstall(node: &Node, enabled: &str) {
    let rebooted = Timestamp::now();
    node.reboot("");
    wait_for_explained(
        &format!("{enabled}'s plain pod Ready again after the reboot, in a new sandbox"),
        READY_WITHIN,
        || ready_since(&running_pod(node, enabled, "app=plain")?, rebooted).then_some(()),
        || node.describe(enabled, "pods"),
    );
    wait_for_explained(
        "the meshed pod held by its validator (95) after the reboot",
        READY_WITHIN,
        || {
            let pods = meshed_pods_of(node, enabled, "app=meshed");
            (!pods.is_empty()
                && pods
                    .iter()
                    .all(|p| validator_exit(p) == Some(95) && !is_ready(p)))
            .then_some(())
        },
        || node.describe(enabled, "pods"),
    );
}
