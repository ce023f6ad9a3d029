//! A **stand-in for OpenShift's SCC admission** (`security.openshift.io/SecurityContextConstraint` from
//! apiserver-library-go's sccadmission; not OpenShift), for a user allowed only the `restricted-v2` SCC,
//! as far as uids go.
//!
//! The real plugin is a *built-in mutating* plugin: it runs before every mutating webhook, **again
//! before each reinvocation round** (the apiserver reruns its built-in mutating plugins first), and once
//! more as a validating plugin at the end. A webhook cannot run before the built-ins, so the stand-in
//! is registered (see [`SccStandIn::configurations`]) as
//! - a mutating webhook whose configuration name sorts before every other one ([`NAME_PREFIX`]) with
//!   `reinvocationPolicy: IfNeeded`: the apiserver calls it first, and again first in the reinvocation
//!   round whenever a later webhook changed the pod — where the real plugin would re-admit it;
//! - a validating webhook: the final check.
//!
//! What it does, as restricted-v2 does in a namespace with `openshift.io/sa.scc.uid-range`
//! `<first>/<size>` (MustRunAsRange): a container (or init container) whose uid, its own `runAsUser`
//! else the pod's, is unset gets `runAsUser: <first>`; one outside `[first, first + size - 1]` refuses
//! the pod with the real plugin's text: every default SCC in its order, the others `not usable by
//! user or serviceaccount`, then one `provider restricted-v2: .initContainers[0].runAsUser: Invalid
//! value: 65534: must be in the ranges: [1000650000, 1000659999]` per uid outside the range; an
//! admitted pod is annotated `openshift.io/scc: restricted-v2`. `e2e/tests/scc_agreement.rs` checks
//! all of this against the real plugin. Left out: groups, capabilities, SELinux, seccomp, fsGroup. A
//! namespace without a range is treated as not OpenShift and not checked (on OpenShift every
//! namespace has one).

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use serde_json::{json, Value};

use super::server::{allowed, denied, AdmissionServer};

/// The SCC the stand-in plays.
pub const SCC: &str = "restricted-v2";
/// The annotation the real plugin writes on an admitted pod.
pub const SCC_ANNOTATION: &str = "openshift.io/scc";
/// Names of the stand-in's configurations start with this: `0` sorts before any letter, so the
/// apiserver calls it before every other mutating webhook (as built-in plugins run before webhooks).
pub const NAME_PREFIX: &str = "0-openshift-scc-stand-in";

/// How the stand-in was called: as the mutating plugin (defaults and checks) or the final validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Mutating,
    Validating,
}

/// The admission response for `request`, reading the namespace's range through `client`.
pub async fn respond(client: Client, phase: Phase, request: Value) -> Value {
    let namespace = request["namespace"].as_str().unwrap_or_default();
    let range = match Api::<Namespace>::all(client).get(namespace).await {
        Ok(ns) => ns
            .metadata
            .annotations
            .and_then(|a| a.get(vocab::OPENSHIFT_UID_RANGE_ANNOTATION).cloned()),
        Err(e) => return denied(&format!("scc stand-in: namespace {namespace}: {e}")),
    };
    let Some(range) = range else {
        return allowed(Vec::new());
    };
    match admit(&request["object"], &range) {
        Ok(ops) if phase == Phase::Mutating => allowed(ops),
        Ok(_) => allowed(Vec::new()),
        Err(refusal) => denied(&refusal),
    }
}

/// The stand-in served: one HTTPS webhook per phase, each calling [`respond`].
pub struct SccStandIn {
    mutating: AdmissionServer,
    validating: AdmissionServer,
}

impl SccStandIn {
    /// Serves both phases on loopback ports of the calling process' network namespace.
    pub fn start(client: Client) -> Self {
        let bind = || std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        Self::start_on(client, [bind(), bind()])
    }

    /// Serves the mutating phase on `listeners[0]` and the validating one on `listeners[1]` (bound
    /// where the apiserver can reach them, e.g. in the node's network namespace).
    pub fn start_on(client: Client, listeners: [std::net::TcpListener; 2]) -> Self {
        let [m, v] = listeners;
        let serve = |listener, phase| {
            let client = client.clone();
            AdmissionServer::start_on(listener, move |request| {
                respond(client.clone(), phase, request)
            })
        };
        Self {
            mutating: serve(m, Phase::Mutating),
            validating: serve(v, Phase::Validating),
        }
    }

    /// The two configurations registering the stand-in for pods matching `object_selector`, both
    /// named [`NAME_PREFIX`]`-<suffix>`: a mutating one (called first, reinvoked if needed) and a
    /// validating one.
    pub fn configurations(&self, suffix: &str, object_selector: Value) -> [Value; 2] {
        let name = format!("{NAME_PREFIX}-{suffix}");
        let entry = |hook: &str, server: &AdmissionServer| {
            json!({
                "name": hook,
                "clientConfig": server.client_config(),
                "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"] }],
                "objectSelector": object_selector,
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            })
        };
        let mut mutating = entry("admit.scc-stand-in.openshift.test", &self.mutating);
        mutating["reinvocationPolicy"] = json!("IfNeeded");
        let validating = entry("validate.scc-stand-in.openshift.test", &self.validating);
        [
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": { "name": name }, "webhooks": [mutating],
            }),
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": { "name": name }, "webhooks": [validating],
            }),
        ]
    }
}

/// What restricted-v2 does to `pod` in a namespace with `range`: the JSON patch defaulting the unset
/// uids and annotating the SCC, or the refusal text.
pub fn admit(pod: &Value, range: &str) -> Result<Vec<Value>, String> {
    let (min, max) = parse_range(range).ok_or_else(|| {
        refusal(&[format!(
            "provider {SCC}: invalid {} annotation {range:?}",
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION
        )])
    })?;
    let pod_uid = pod["spec"]["securityContext"]["runAsUser"].as_i64();
    let mut ops = Vec::new();
    let mut errors = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            match c["securityContext"]["runAsUser"].as_i64().or(pod_uid) {
                Some(uid) if uid < min || uid > max => errors.push(format!(
                    "provider {SCC}: .{list}[{i}].runAsUser: Invalid value: {uid}: must be in the ranges: [{min}, {max}]"
                )),
                Some(_) => {}
                None if c["securityContext"].is_object() => ops.push(json!({
                    "op": "add", "path": format!("/spec/{list}/{i}/securityContext/runAsUser"), "value": min,
                })),
                None => ops.push(json!({
                    "op": "add", "path": format!("/spec/{list}/{i}/securityContext"), "value": { "runAsUser": min },
                })),
            }
        }
    }
    if !errors.is_empty() {
        return Err(refusal(&errors));
    }
    if pod["metadata"]["annotations"][SCC_ANNOTATION] != SCC {
        if !pod["metadata"]["annotations"].is_object() {
            ops.push(json!({ "op": "add", "path": "/metadata/annotations", "value": {} }));
        }
        let key = SCC_ANNOTATION.replace('~', "~0").replace('/', "~1");
        ops.push(
            json!({ "op": "add", "path": format!("/metadata/annotations/{key}"), "value": SCC }),
        );
    }
    Ok(ops)
}

/// OpenShift's default SCCs other than [`SCC`] that sort before and after it in the real plugin's
/// list (by priority, then the most restrictive first), as its refusal names them.
const SCCS_BEFORE: &[&str] = &["anyuid"];
const SCCS_AFTER: &[&str] = &[
    "restricted",
    "nonroot-v2",
    "nonroot",
    "hostmount-anyuid",
    "hostnetwork-v2",
    "hostnetwork",
    "hostaccess",
    "privileged",
];

/// The real plugin's refusal for a user allowed only [`SCC`]: Go's error aggregate (in brackets) of
/// every SCC's verdict, restricted-v2's `errors` (each already `provider restricted-v2: ...`).
fn refusal(errors: &[String]) -> String {
    let unusable =
        |scc: &&str| format!("provider {scc:?}: Forbidden: not usable by user or serviceaccount");
    let all: Vec<String> = SCCS_BEFORE
        .iter()
        .map(unusable)
        .chain(errors.iter().cloned())
        .chain(SCCS_AFTER.iter().map(unusable))
        .collect();
    format!(
        "unable to validate against any security context constraint: [{}]",
        all.join(", ")
    )
}

/// `<first>/<size>` as the inclusive range `[first, first + size - 1]`.
fn parse_range(range: &str) -> Option<(i64, i64)> {
    let (first, size) = range.split_once('/')?;
    let (first, size) = (
        first.trim().parse::<i64>().ok()?,
        size.trim().parse::<i64>().ok()?,
    );
    (size > 0).then_some((first, first.checked_add(size - 1)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGE: &str = "1000650000/10000";

    fn applied(pod: &Value, ops: Vec<Value>) -> Value {
        let mut doc = pod.clone();
        let patch: json_patch::Patch = serde_json::from_value(json!(ops)).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        doc
    }

    /// The injected pod with Linkerd's validator uid is refused with the real plugin's words.
    #[test]
    fn refuses_uids_outside_the_range_as_the_real_plugin_words_it() {
        let pod = json!({ "spec": {
            "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": 65534 } }],
            "containers": [{ "name": "app" }, { "name": "linkerd-proxy", "securityContext": { "runAsUser": 1000652102 } }],
        }});
        let unusable = |scc: &str| {
            format!("provider \"{scc}\": Forbidden: not usable by user or serviceaccount")
        };
        let refused = admit(&pod, RANGE).unwrap_err();
        assert!(
            refused.starts_with(&format!(
                "unable to validate against any security context constraint: [{}, provider \
                 restricted-v2: .initContainers[0].runAsUser: Invalid value: 65534: must be in the \
                 ranges: [1000650000, 1000659999], {}, ",
                unusable("anyuid"),
                unusable("restricted")
            )) && refused.ends_with(&format!("{}]", unusable("privileged"))),
            "{refused}"
        );
        let mut both = pod.clone();
        both["spec"]["containers"][1]["securityContext"]["runAsUser"] = json!(2102);
        let refused = admit(&both, RANGE).unwrap_err();
        assert!(
            refused.contains("must be in the ranges: [1000650000, 1000659999], provider restricted-v2: \
                 .containers[1].runAsUser: Invalid value: 2102: must be in the ranges: [1000650000, 1000659999], provider \"restricted\""),
            "{refused}"
        );
    }

    /// Unset uids get the range's first (the pod's own uid counts for its containers), and the pod
    /// is annotated; a second admission of the result changes nothing.
    #[test]
    fn defaults_unset_uids_to_the_first_of_the_range() {
        let pod = json!({ "metadata": { "name": "p" }, "spec": {
            "containers": [
                { "name": "app" },
                { "name": "side", "securityContext": { "readOnlyRootFilesystem": true } },
                { "name": "proxy", "securityContext": { "runAsUser": 1000659999 } },
            ],
        }});
        let admitted = applied(&pod, admit(&pod, RANGE).unwrap());
        let uid =
            |i: usize| admitted["spec"]["containers"][i]["securityContext"]["runAsUser"].clone();
        assert_eq!(
            [uid(0), uid(1), uid(2)],
            [json!(1000650000), json!(1000650000), json!(1000659999)]
        );
        assert_eq!(
            admitted["spec"]["containers"][1]["securityContext"]["readOnlyRootFilesystem"],
            true
        );
        assert_eq!(admitted["metadata"]["annotations"][SCC_ANNOTATION], SCC);
        assert_eq!(admit(&admitted, RANGE), Ok(Vec::new()));

        let pod_level = json!({ "spec": { "securityContext": { "runAsUser": 7 }, "containers": [{ "name": "app" }] } });
        assert!(admit(&pod_level, RANGE)
            .unwrap_err()
            .contains(".containers[0].runAsUser: Invalid value: 7:"));
    }

    #[test]
    fn a_malformed_range_refuses_every_pod() {
        let pod = json!({ "spec": { "containers": [{ "name": "app" }] } });
        for range in ["", "x/1", "5/0", "5"] {
            assert!(admit(&pod, range).is_err(), "{range:?}");
        }
    }

    #[tokio::test]
    async fn registered_first_and_reinvoked_then_validated() {
        // A client is needed only to answer reviews; this test never sends one.
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let stand_in = SccStandIn::start(Client::try_from(config).unwrap());
        let [m, v] = stand_in.configurations("t", json!({}));
        let name = m["metadata"]["name"].as_str().unwrap();
        for other in [
            "a",
            "ld-controller-linkerd-multus",
            "linkerd-proxy-injector-webhook-config",
        ] {
            assert!(name < other, "{name} sorts before {other}");
        }
        assert_eq!(m["webhooks"][0]["reinvocationPolicy"], "IfNeeded");
        assert_eq!(m["webhooks"][0]["failurePolicy"], "Fail");
        assert_eq!(v["kind"], "ValidatingWebhookConfiguration");
        assert_ne!(
            m["webhooks"][0]["clientConfig"],
            v["webhooks"][0]["clientConfig"]
        );
    }
}
