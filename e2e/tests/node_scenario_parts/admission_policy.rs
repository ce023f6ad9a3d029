//! The chart's default admission (`auto`) on a node whose apiserver serves MutatingAdmissionPolicy:
//! the operator keeps the policy, and with the operator scaled to 0 a meshed pod of an enabled
//! namespace is still created, attached, redirected and Ready; a pod of a namespace that is not
//! enabled is never evaluated by the policy (the apiserver's own counter of policy evaluations); and
//! switched to `admission=webhook`, with the operator at 0, the meshed pod is not created at all, as
//! the README says. On a server without the API the case is reported not run.

use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::wait_for_explained;
use linkerd_multus_operator::admission::objects;
use rules::admission_policy::PolicyApi;
use serde_json::{json, Value};

use super::*;

pub const CASE: &str =
    "e2e/tests/node_scenario.rs: admission policy keeps pods created with the operator at 0";
/// The apiserver's counter of MutatingAdmissionPolicy evaluations (k8s.io/apiserver
/// pkg/admission/plugin/policy/mutating/metrics: labels policy, policy_binding, error_type).
const EVALUATIONS: &str = "apiserver_mutating_admission_policy_check_total";
/// How long a refused ReplicaSet is watched for a pod that should not come.
const NOT_CREATED_FOR: Duration = Duration::from_secs(15);

/// Which API version of MutatingAdmissionPolicy the node's apiserver serves, by discovery.
pub fn served(node: &Node) -> Option<PolicyApi> {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    runtime.block_on(async {
        let client = node.client().await;
        objects::served(&client).await.expect("discovery")
    })
}

/// `<plural>.<version>.<group>`: the resource as kubectl names it, whichever version is served.
fn resource(api: PolicyApi, plural: &str) -> String {
    format!("{plural}.{}.{}", api.version(), PolicyApi::group())
}

/// The policy's evaluations so far, every binding and outcome summed (the series appears only with
/// its first evaluation: none yet is 0).
fn evaluations(node: &Node) -> u64 {
    let metrics = node.kubectl_ok(&["get", "--raw", "/metrics"]);
    let policy = format!("policy=\"{}\"", vocab::ADMISSION_POLICY_NAME);
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{EVALUATIONS}{{")) && l.contains(&policy))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn scale_operator(node: &Node, replicas: u32) {
    node.kubectl_ok(&[
        "-n",
        RELEASE_NS,
        "scale",
        &format!("deployment/{OPERATOR}"),
        &format!("--replicas={replicas}"),
    ]);
    if replicas > 0 {
        wait_deployment_ready(node, RELEASE_NS, OPERATOR);
        return;
    }
    wait_for_explained(
        "the operator's pods are gone (scaled to 0)",
        READY_WITHIN,
        || {
            // `--ignore-not-found` prints nothing at all for an empty list.
            let pods = node.get_json(&[
                "-n",
                RELEASE_NS,
                "pods",
                "-l",
                "app.kubernetes.io/component=operator",
            ]);
            let left = pods.map_or(0, |p| p["items"].as_array().map_or(0, Vec::len));
            (left == 0).then_some(())
        },
        || node.describe(RELEASE_NS, "pods"),
    );
}

/// `check`'s `admission` line passes in the operator's pod (the live path as it should be: policy,
/// binding, labels and the webhook's narrowing, or the webhook whole).
fn wait_admission_line_ok(node: &Node, what: &str) {
    wait_for_explained(
        &format!("check's admission line passes ({what})"),
        READY_WITHIN,
        || {
            let report = check_json(node);
            let admission = line(&report, "admission").clone();
            (admission["ok"] == true).then_some(())
        },
        || format!("{:#}", check_json(node)),
    );
}

/// A meshed Deployment `name` in `ns` through the injector and SCC stand-ins.
fn meshed(ns: &str, name: &str, test_image: &str) -> Value {
    let pod_metadata = json!({
        "labels": {"app": name, (ADMITTED_AS_ON_OPENSHIFT): "true"},
        "annotations": {"linkerd.io/inject": "enabled"},
    });
    deployment(
        ns,
        name,
        pod_metadata,
        vec![crate::app_container(test_image)],
    )
}

pub fn run(node: &Node, api: PolicyApi) {
    let started = Instant::now();
    let mut cleanup = Cleanup {
        node,
        namespaces: vec![],
        cluster_objects: vec![
            // Kept by the operator, not by helm: gone with the switch to webhook, else here.
            format!(
                "{}/{}",
                resource(api, "mutatingadmissionpolicybindings"),
                vocab::ADMISSION_POLICY_NAME
            ),
            format!(
                "{}/{}",
                resource(api, "mutatingadmissionpolicies"),
                vocab::ADMISSION_POLICY_NAME
            ),
        ],
    };
    let crd = crate::support::chart_dir().join("crds-optional/network-attachment-definition.yaml");
    node.kubectl_ok(&["apply", "-f", crate::support::path_str(&crd)]);
    node.kubectl_ok(&["create", "namespace", CNI_NS]);
    cleanup.namespaces.push(CNI_NS.to_string());
    cleanup.namespaces.push(RELEASE_NS.to_string());
    // The chart's defaults: admission auto, which takes the policy on this server.
    helm_install_chart_admission(node, &[]);
    wait_deployment_ready(node, RELEASE_NS, OPERATOR);
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);

    let ns = enabled_namespace(node, &mut cleanup, "adm-meshed");
    wait_for_explained(
        &format!("the operator wrote NAD {ns}/linkerd-cni and labelled {ns} for the binding"),
        READY_WITHIN,
        || {
            node.get_json(&["-n", &ns, "network-attachment-definitions", "linkerd-cni"])?;
            let n = node.get_json(&["namespace", &ns])?;
            (n["metadata"]["labels"][vocab::ADMISSION_NAMESPACE_LABEL]
                == vocab::ADMISSION_NAMESPACE_LABEL_VALUE)
                .then_some(())
        },
        || node.describe(RELEASE_NS, "pods"),
    );
    wait_admission_line_ok(node, "auto: the policy live, the webhook narrowed");
    let policy = resource(api, "mutatingadmissionpolicies");
    assert!(
        node.get_json(&[&policy, vocab::ADMISSION_POLICY_NAME])
            .is_some(),
        "auto keeps the policy on a server that serves it"
    );
    let test_image = image(node, "test");
    let _admission = OpenShiftAdmission::register(node, &mut cleanup, &test_image);
    scale_operator(node, 0);
    eprintln!(
        "MEASURE admission policy: installed, namespace enabled, operator at 0: {:?}",
        started.elapsed()
    );

    // With the operator at 0: created, attached, redirected, Ready.
    let before = evaluations(node);
    apply(node, &meshed(&ns, "adm-policy", &test_image));
    let pod = wait_pod_running(node, &ns, "app=adm-policy");
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    let networks = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
        .as_str()
        .unwrap_or_default();
    assert!(
        networks.contains("linkerd-cni"),
        "the policy attached the NAD with the operator at 0: {}",
        pod["metadata"]
    );
    let proxy_uid = pod["spec"]["containers"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == vocab::PROXY_CONTAINER))
        .and_then(|c| c["securityContext"]["runAsUser"].as_u64());
    assert_eq!(
        proxy_uid,
        Some(RANGE_PROXY_UID),
        "the policy put the injected proxy on the range's uid: {}",
        pod["spec"]
    );
    assert!(
        validator_passed(node, &ns, name),
        "the pod admitted by the policy is redirected (its validator passed)"
    );
    let after_meshed = evaluations(node);
    assert!(
        after_meshed > before,
        "the enabled namespace's pod was evaluated by the policy ({EVALUATIONS}: {before} -> {after_meshed})"
    );

    // A namespace that is not enabled: the binding's selector keeps its pods out of the policy.
    let plain = create_namespace(node, &mut cleanup, "adm-plain");
    node.kubectl_ok(&[
        "-n",
        &plain,
        "run",
        "plain",
        &format!("--image={test_image}"),
        "--image-pull-policy=Never",
        "--restart=Never",
        "--",
        "app",
    ]);
    let after_plain = evaluations(node);
    assert_eq!(
        after_plain, after_meshed,
        "a pod of namespace {plain} (not enabled) was evaluated by the policy ({EVALUATIONS})"
    );
    eprintln!(
        "MEASURE admission policy: meshed pod Ready with the operator at 0, {EVALUATIONS} {before} -> \
         {after_meshed} (enabled) -> {after_plain} (not enabled): {:?}",
        started.elapsed()
    );

    // admission=webhook, the operator at 0 again: the README's "those pods are not created at all".
    // Installed again rather than upgraded: helm before 3.12 cannot patch a webhook configuration
    // whose live matchConditions differ from the release's (the operator's narrowing): "unable to
    // find api field in struct MutatingWebhook for the json field matchConditions".
    node.helm_ok(&["uninstall", RELEASE, "-n", RELEASE_NS, "--wait"]);
    helm_install(node, &[]);
    wait_deployment_ready(node, RELEASE_NS, OPERATOR);
    wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
    wait_for_explained(
        "back in webhook mode the operator deleted its policy",
        READY_WITHIN,
        || {
            node.get_json(&[&policy, vocab::ADMISSION_POLICY_NAME])
                .is_none()
                .then_some(())
        },
        || node.describe(RELEASE_NS, "pods"),
    );
    wait_admission_line_ok(node, "webhook: the webhook whole, no policy");
    scale_operator(node, 0);
    apply(node, &meshed(&ns, "adm-webhook", &test_image));
    let refused = wait_for_explained(
        "the ReplicaSet's pod refused: the webhook has no replica to call",
        READY_WITHIN,
        || {
            let list = node.get_json(&[
                "-n",
                &ns,
                "events",
                "--field-selector",
                "reason=FailedCreate",
            ])?;
            list["items"].as_array()?.iter().find_map(|e| {
                let message = e["message"].as_str()?;
                (e["involvedObject"]["name"]
                    .as_str()?
                    .starts_with("adm-webhook-")
                    && message.contains(vocab::WEBHOOK_NAME))
                .then(|| message.to_string())
            })
        },
        || node.describe(&ns, "replicasets"),
    );
    std::thread::sleep(NOT_CREATED_FOR);
    let pods = node.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "pods",
        "-l",
        "app=adm-webhook",
        "-o",
        "name",
    ]);
    assert_eq!(
        pods.trim(),
        "",
        "in webhook mode with the operator at 0 no pod is created ({refused})"
    );
    eprintln!(
        "MEASURE admission policy case: {:?} (webhook mode refused: {refused})",
        started.elapsed()
    );
    drop(cleanup);
}
