//! The proxy as a native sidecar on the node, in each attach mode: Linkerd's default pod shape since
//! 2.19 (linkerd2#15267), `linkerd-proxy` an init container with `restartPolicy: Always` after the
//! network validator. A Deployment asking for it (`config.alpha.linkerd.io/proxy-enable-native-sidecar`)
//! goes through the injector's and the SCC admission's stand-ins and the chart's webhook: the proxy
//! init container gets the range's proxy uid, the validator passes, the app starts beside the running
//! proxy, real connections are redirected as for the classic shape, and `check` passes.
//!
//! Not run where the server drops an init container's `restartPolicy` (asked with a server-side dry
//! run), or where the pod's status shows the kubelet running the proxy as an ordinary init container
//! (it keeps running, the app waits for it): both predate native sidecars (Kubernetes 1.28).

use std::time::{Duration, Instant};

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::stand_ins::{linkerd_injector, scc};
use linkerd_multus_e2e::{not_run, wait_for_explained};
use serde_json::{json, Value};

use super::*;
use crate::{app_container, assert_redirected, Meshed};

/// The Deployment's name and `app` label.
const NAME: &str = "native";
/// How long the proxy may run with the app still waiting before the kubelet counts as one that runs
/// it as an ordinary init container (one that knows sidecars starts the app at its next sync).
const BLOCKED_FOR: Duration = Duration::from_secs(30);
const NETWORKS: &str = vocab::NETWORKS_ANNOTATION;

/// How the meshed namespace's pods are attached to linkerd-cni.
#[derive(Clone, Copy, Debug)]
pub enum Attach {
    /// Through the NAD the webhook names in the pod's networks annotation.
    Nad,
    /// Through Multus' auxiliary chain, with no networks annotation.
    AuxChain,
}

impl Attach {
    fn value(self) -> &'static str {
        match self {
            Attach::Nad => "nad",
            Attach::AuxChain => "auxChain",
        }
    }
}

/// What a pod's status shows of its native-sidecar proxy.
#[derive(Debug, PartialEq, Eq)]
pub enum Sidecar {
    /// Running and Ready: the app runs beside the running proxy.
    Ready,
    /// The proxy runs, not started as a sidecar (no `started: true`, which kubelets that know
    /// sidecars report), and the app waits for it (`PodInitializing`).
    Blocking,
    /// Neither (yet).
    Starting,
}

/// Reads [`Sidecar`] from `pod`.
pub fn sidecar(pod: &Value) -> Sidecar {
    if pod["status"]["phase"] == "Running" && is_ready(pod) {
        return Sidecar::Ready;
    }
    let proxy = pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == vocab::PROXY_CONTAINER));
    let runs_unstarted =
        proxy.is_some_and(|p| p["state"]["running"].is_object() && p["started"] != true);
    let app_waits = pod["status"]["containerStatuses"]
        .as_array()
        .is_some_and(|l| {
            !l.is_empty()
                && l.iter()
                    .all(|c| c["state"]["waiting"]["reason"] == "PodInitializing")
        });
    if runs_unstarted && app_waits {
        Sidecar::Blocking
    } else {
        Sidecar::Starting
    }
}

/// The step, in the release's current attach mode `attach`: the meshed namespace of step 3, the
/// plain namespace of step 4 (its server and clients).
pub fn step_native_sidecar_proxy(node: &Node, meshed: &Meshed, plain: &str, attach: Attach) {
    let case = format!(
        "e2e/tests/node_scenario.rs: the proxy as a native sidecar, attach={}",
        attach.value()
    );
    if !serves_native_sidecars(node, plain) {
        not_run(
            &case,
            "the server drops an init container's restartPolicy (native sidecars: Kubernetes 1.28+)",
        );
        return;
    }
    let ns = &meshed.ns;
    let start = Instant::now();
    apply(node, &native_deployment(ns, &meshed.test_image));
    let Some(pod) = wait_started(node, ns) else {
        delete_deployment(node, ns);
        not_run(
            &case,
            "the kubelet runs an init container with restartPolicy: Always as an ordinary one: the \
             proxy keeps running and the app never starts (native sidecars: Kubernetes 1.28+)",
        );
        return;
    };
    eprintln!(
        "native-sidecar Deployment (attach={}) created -> pod Ready in {:?}",
        attach.value(),
        start.elapsed()
    );
    assert_native_shape(&pod, attach);
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    assert!(
        validator_passed(node, ns, name),
        "the native-sidecar pod {name}'s validator saw its connection redirected"
    );
    let ip = pod["status"]["podIP"].as_str().expect("pod IP");
    assert_redirected(node, ns, name, ip, plain);
    let out = operator_check(node, &[]);
    assert!(
        out.status.success(),
        "check with a native-sidecar pod (attach={}):\n{}{}",
        attach.value(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    delete_deployment(node, ns);
}

/// Whether the server keeps an init container's `restartPolicy`: a server-side dry run of a pod in
/// `ns` (a namespace no webhook of the scenario changes).
fn serves_native_sidecars(node: &Node, ns: &str) -> bool {
    let probe = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "native-sidecar-probe", "namespace": ns},
        "spec": {
            "initContainers": [{"name": "s", "image": "x", "restartPolicy": "Always"}],
            "containers": [{"name": "c", "image": "x"}],
        },
    });
    let stored = node.dry_run_stored(None, &probe);
    stored["spec"]["initContainers"][0]["restartPolicy"] == "Always"
}

/// A one-replica Deployment asking Linkerd's injector (its stand-in) for the proxy as a native
/// sidecar, admitted as on OpenShift.
fn native_deployment(ns: &str, test_image: &str) -> Value {
    deployment(
        ns,
        NAME,
        json!({
            "labels": {"app": NAME, (ADMITTED_AS_ON_OPENSHIFT): "true"},
            "annotations": {
                "linkerd.io/inject": "enabled",
                (linkerd_injector::NATIVE_SIDECAR_ANNOTATION): "true",
            },
        }),
        vec![app_container(test_image)],
    )
}

/// The Deployment's pod once Ready, or `None` once its status has shown [`Sidecar::Blocking`] for
/// [`BLOCKED_FOR`].
fn wait_started(node: &Node, ns: &str) -> Option<Value> {
    let selector = format!("app={NAME}");
    let mut blocked_since: Option<Instant> = None;
    wait_for_explained(
        &format!("the native-sidecar pod in {ns} is Ready (or its proxy blocks the app)"),
        READY_WITHIN,
        || {
            let list = node.get_json(&["-n", ns, "pods", "-l", &selector])?;
            let pod = list["items"].as_array()?.first()?.clone();
            match sidecar(&pod) {
                Sidecar::Ready => Some(Some(pod)),
                Sidecar::Blocking => {
                    let since = *blocked_since.get_or_insert_with(Instant::now);
                    (since.elapsed() >= BLOCKED_FOR).then_some(None)
                }
                Sidecar::Starting => {
                    blocked_since = None;
                    None
                }
            }
        },
        || node.describe(ns, "pods"),
    )
}

/// The stored pod: the proxy only among the init containers, after the validator, kept running
/// (`restartPolicy: Always`) on the range's proxy uid; the validator on another uid of the range;
/// admitted by the SCC stand-in; a networks annotation naming the NAD exactly in NAD mode.
fn assert_native_shape(pod: &Value, attach: Attach) {
    let spec = &pod["spec"];
    let named = |list: &str, name: &str| -> Option<(usize, Value)> {
        spec[list]
            .as_array()?
            .iter()
            .position(|c| c["name"] == name)
            .map(|i| (i, spec[list][i].clone()))
    };
    assert!(
        named("containers", vocab::PROXY_CONTAINER).is_none(),
        "the proxy is not among the containers: {spec}"
    );
    let (proxy_at, proxy) =
        named("initContainers", vocab::PROXY_CONTAINER).expect("the proxy init container");
    let (validator_at, validator) =
        named("initContainers", vocab::VALIDATOR_CONTAINER).expect("the validator init container");
    assert_eq!(proxy["restartPolicy"], "Always", "{spec}");
    assert!(validator_at < proxy_at, "the validator runs first: {spec}");
    assert_eq!(
        proxy["securityContext"]["runAsUser"].as_u64(),
        Some(RANGE_PROXY_UID),
        "the native-sidecar proxy runs on the range's proxy uid: {spec}"
    );
    let validator_uid = validator["securityContext"]["runAsUser"].as_u64();
    assert!(
        validator_uid
            .is_some_and(|u| (1000650000..1000660000).contains(&u) && u != RANGE_PROXY_UID),
        "the validator runs on another uid of the range: {spec}"
    );
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations[scc::SCC_ANNOTATION], scc::SCC, "{annotations}");
    let networks = annotations[NETWORKS].as_str();
    match attach {
        Attach::Nad => assert!(
            networks.is_some_and(|n| n.contains("linkerd-cni")),
            "attach=nad: the webhook named the NAD: {annotations}"
        ),
        Attach::AuxChain => assert!(
            networks.is_none(),
            "attach=auxChain adds no networks annotation: {annotations}"
        ),
    }
    let proxy_status = pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == vocab::PROXY_CONTAINER))
        .cloned()
        .unwrap_or_default();
    assert!(
        proxy_status["state"]["running"].is_object() && proxy_status["started"] == true,
        "the proxy keeps running as a started sidecar: {proxy_status}"
    );
}

/// The Deployment deleted, its pod gone (so later steps count only their own pods).
fn delete_deployment(node: &Node, ns: &str) {
    node.kubectl_ok(&["-n", ns, "delete", "deployment", NAME, "--wait=true"]);
    let selector = format!("app={NAME}");
    wait_for_explained(
        &format!("the native-sidecar pod in {ns} is gone"),
        READY_WITHIN,
        || {
            // `--ignore-not-found` prints nothing at all for an empty list.
            let list = node.get_json(&["-n", ns, "pods", "-l", &selector]);
            let left = list.map_or(0, |l| l["items"].as_array().map_or(0, Vec::len));
            (left == 0).then_some(())
        },
        || node.describe(ns, "pods"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, ready: bool, proxy: Value, app: Value) -> Value {
        json!({"status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "initContainerStatuses": [
                {"name": "linkerd-network-validator", "state": {"terminated": {"exitCode": 0}}},
                proxy,
            ],
            "containerStatuses": [app],
        }})
    }

    #[test]
    fn the_status_tells_a_sidecar_from_a_blocking_init_container() {
        let running = |started: Option<bool>| {
            let mut s = json!({"name": "linkerd-proxy", "state": {"running": {}}});
            if let Some(started) = started {
                s["started"] = json!(started);
            }
            s
        };
        let waits = json!({"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}});
        let runs = json!({"name": "app", "state": {"running": {}}, "started": true});
        assert_eq!(
            sidecar(&pod("Running", true, running(Some(true)), runs.clone())),
            Sidecar::Ready
        );
        // A kubelet that predates sidecars: the proxy runs, never `started`, the app waits.
        assert_eq!(
            sidecar(&pod("Pending", false, running(None), waits.clone())),
            Sidecar::Blocking
        );
        // A sidecar-aware kubelet between the proxy's start and the app's: still starting.
        assert_eq!(
            sidecar(&pod("Pending", false, running(Some(true)), waits.clone())),
            Sidecar::Starting
        );
        // The proxy not running yet (the validator still runs, or failed): starting.
        let proxy_waits =
            json!({"name": "linkerd-proxy", "state": {"waiting": {"reason": "PodInitializing"}}});
        assert_eq!(
            sidecar(&pod("Pending", false, proxy_waits, waits)),
            Sidecar::Starting
        );
        // Running but not Ready (the app's probe): not blocking, the app runs.
        assert_eq!(
            sidecar(&pod("Running", false, running(None), runs)),
            Sidecar::Starting
        );
        assert_eq!(sidecar(&json!({})), Sidecar::Starting);
    }
}
