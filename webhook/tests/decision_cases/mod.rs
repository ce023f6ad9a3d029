//! The webhook decision table's cases (every rule of the decision, each networks format, pointer
//! escaping, every uid-range failure, the injected proxy and validator on OpenShift) with what the
//! decision must give: `decision_table` asserts them; `admission_policy` feeds the same pods to the
//! apiserver's MutatingAdmissionPolicy and compares with the decision.

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rules::containers::PodContainers;
use rules::decision::{DecisionConfig, Outcome};
use serde_json::{json, Value};

pub const NS: &str = "app";
// Literal pointers on purpose: they pin the RFC 6901 escaping of the vocabulary's keys.
pub const P_NETWORKS: &str = "/metadata/annotations/k8s.v1.cni.cncf.io~1networks";
pub const P_MULTUS: &str = "/metadata/annotations/linkerd.io~1multus";
pub const P_INJECT: &str = "/metadata/annotations/linkerd.io~1inject";
pub const P_UID: &str = "/metadata/annotations/config.linkerd.io~1proxy-uid";

pub const M: &str = vocab::MULTUS_ANNOTATION;
pub const I: &str = vocab::INJECT_ANNOTATION;
pub const N: &str = vocab::NETWORKS_ANNOTATION;
pub const U: &str = vocab::PROXY_UID_ANNOTATION;
pub const R: &str = vocab::OPENSHIFT_UID_RANGE_ANNOTATION;
pub const CP: &str = vocab::CONTROL_PLANE_COMPONENT_LABEL;

pub fn cfg() -> DecisionConfig {
    DecisionConfig::default()
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn add(path: &str, value: Value) -> Value {
    json!({ "op": "add", "path": path, "value": value })
}

pub fn obj(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

pub struct Case {
    pub name: &'static str,
    pub namespace: &'static str,
    /// The pod's metadata as JSON (None annotations: the key is absent).
    pub pod: Value,
    pub ns: Option<BTreeMap<String, String>>,
    pub patch: Vec<Value>,
    pub warnings: Vec<&'static str>,
    pub outcome: Outcome,
}

pub fn pod(annotations: Option<&[(&str, &str)]>, labels: &[(&str, &str)]) -> Value {
    let mut meta = json!({ "name": "p", "labels": obj(labels) });
    if let Some(a) = annotations {
        meta["annotations"] = obj(a);
    }
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": { "containers": [] } })
}

pub const W_BAD_NETWORKS_PREFIX: &str = "linkerd-multus: pod not attached to linkerd-cni: annotation k8s.v1.cni.cncf.io/networks is not a Multus network list (";
pub const W_BAD_NETWORKS_SUFFIX: &str = "); fix it or add linkerd-cni to it yourself";
pub const W_UID_PREFIX: &str = "linkerd-multus: config.linkerd.io/proxy-uid not set: namespace annotation openshift.io/sa.scc.uid-range: ";
pub const W_UID_SUFFIX: &str = "; set config.linkerd.io/proxy-uid on the pod or namespace to a uid inside the namespace's range other than its first, or fix the range or the operator's --proxy-uid-offset";

/// A pod as Linkerd's injector leaves it: `app` and the proxy in `containers`, the validator in
/// `initContainers`, each with the securityContext given (None: the member is absent).
pub fn injected(
    annotations: &[(&str, &str)],
    proxy: Option<Value>,
    validator: Option<Value>,
) -> Value {
    let with = |name: &str, sc: Option<Value>| {
        let mut c = json!({ "name": name, "image": "x" });
        if let Some(sc) = sc {
            c["securityContext"] = sc;
        }
        c
    };
    let mut p = pod(Some(annotations), &[]);
    p["spec"] = json!({
        "containers": [with("app", Some(json!({ "runAsUser": 65534 }))), with(PROXY, proxy)],
        "initContainers": [with(VALIDATOR, validator)],
    });
    p
}

pub const PROXY: &str = vocab::PROXY_CONTAINER;
pub const VALIDATOR: &str = vocab::VALIDATOR_CONTAINER;
pub const P_PROXY: &str = "/spec/containers/1/securityContext";
pub const P_VALIDATOR: &str = "/spec/initContainers/0/securityContext";
pub const W_OUTSIDE_PREFIX: &str = "linkerd-multus: config.linkerd.io/proxy-uid ";
pub const W_OUTSIDE_SUFFIX: &str = " is not a uid inside namespace annotation openshift.io/sa.scc.uid-range \"1000650000/10000\": container linkerd-proxy left as it is, and a restricted SCC rejects it; set config.linkerd.io/proxy-uid to a uid of the range other than its first, or remove it";

pub const W_NOT_A_UID: &str = "linkerd-multus: config.linkerd.io/proxy-uid \"abc\" on the pod is not a uid: it is not a decimal number; write the uid in digits, e.g. 2102. Until it is fixed, linkerd-cni fails the pod's sandbox";
pub const W_SPACE: &str = "linkerd-multus: config.linkerd.io/proxy-uid \" 1000652102\" on the pod is not a uid: it has whitespace around the digits; write the digits alone (Linkerd's injector ignores such a value, so the proxy would not run as it). Until it is fixed, linkerd-cni fails the pod's sandbox";
pub const W_NEGATIVE_NS: &str = "linkerd-multus: config.linkerd.io/proxy-uid \"-1\" on the namespace is not a uid: it is negative; a uid is 0 to 2147483647 (Kubernetes refuses a negative runAsUser). Until it is fixed, linkerd-cni fails the pod's sandbox";
pub const W_COLLISION_RANGE_FIRST: &str = "linkerd-multus: container app runs as uid 1000650000 (the first uid of the namespace's uid range, which the restricted SCC gives a container without runAsUser), the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app container runs as";
pub const W_COLLISION_POD: &str = "linkerd-multus: container app runs as uid 5000 (the pod's runAsUser), the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app container runs as";
pub const W_COLLISION_NS: &str = "linkerd-multus: container app runs as uid 7000, the proxy uid the namespace's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the namespace, or set it to a uid no app container runs as";
pub const W_COLLISION_PROXY_POD: &str = "linkerd-multus: container app runs as uid 5000 (the pod's runAsUser), the uid linkerd-proxy runs as: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; run container app as another uid, or set config.linkerd.io/proxy-uid to a uid no app container runs as";
pub const W_COLLISION_OFFSET: &str = "linkerd-multus: container app runs as uid 1000652102, the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app container runs as";
pub const W_COLLISION_WORKER_RANGE_FIRST: &str = "linkerd-multus: container worker runs as uid 1000650000 (the first uid of the namespace's uid range, which the restricted SCC gives a container without runAsUser), the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app container runs as";
pub const W_COLLISION_PROXY: &str = "linkerd-multus: container app runs as uid 2102, the uid linkerd-proxy runs as: linkerd-cni exempts that uid from the redirect, so the container's traffic bypasses the mesh; run container app as another uid, or set config.linkerd.io/proxy-uid to a uid no app container runs as";

/// [`W_COLLISION_RANGE_FIRST`] for the container `name`.
pub fn w_collision_range_first(name: &str) -> &'static str {
    leak(W_COLLISION_RANGE_FIRST.replacen("container app ", &format!("container {name} "), 1))
}

pub fn w_outside(value: &str) -> &'static str {
    leak(format!("{W_OUTSIDE_PREFIX}{value:?}{W_OUTSIDE_SUFFIX}"))
}

/// Linkerd's templates: the proxy as 2102, the validator as 65534 (user and group).
pub fn proxy_sc(uid: vocab::Uid) -> Option<Value> {
    Some(json!({ "runAsUser": uid, "runAsNonRoot": true, "readOnlyRootFilesystem": true }))
}
pub fn validator_sc() -> Option<Value> {
    Some(json!({ "runAsUser": 65534, "runAsGroup": 65534, "runAsNonRoot": true }))
}

pub fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}
pub fn w_networks(reason: &str) -> &'static str {
    leak(format!(
        "{W_BAD_NETWORKS_PREFIX}{reason}{W_BAD_NETWORKS_SUFFIX}"
    ))
}
pub fn w_uid(reason: &str) -> &'static str {
    leak(format!("{W_UID_PREFIX}{reason}{W_UID_SUFFIX}"))
}

pub fn cases() -> Vec<Case> {
    use Outcome::*;
    let on = [(M, "enabled")];
    let range = [(M, "enabled"), (R, "1000650000/10000")];
    let c = |name, namespace, pod, ns, patch, warnings, outcome| Case {
        name,
        namespace,
        pod,
        ns,
        patch,
        warnings,
        outcome,
    };
    vec![
        // --- rule 1 and 2: effective values, copying, selection ---
        c("ns enabled, pod without annotations map: whole map added", NS, pod(None, &[]), Some(map(&on)),
          vec![add("/metadata/annotations", json!({ N: "linkerd-cni", M: "enabled" }))], vec![], Attached),
        c("ns enabled, pod with empty annotations map: per-key adds", NS, pod(Some(&[]), &[]), Some(map(&on)),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("nothing anywhere: nothing written (no empty strings)", NS, pod(None, &[]), Some(map(&[])),
          vec![], vec![], Skipped),
        c("namespace annotations unknown, pod silent: nothing", NS, pod(None, &[]), None,
          vec![], vec![], Skipped),
        c("namespace annotations unknown, pod enabled: attached from the pod alone", NS,
          pod(Some(&[(M, "enabled")]), &[]), None,
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        c("pod enabled, ns silent", NS, pod(Some(&[(M, "enabled")]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        c("pod disabled overrides ns enabled: nothing copied, skipped", NS, pod(Some(&[(M, "disabled")]), &[]),
          Some(map(&on)), vec![], vec![], Skipped),
        c("pod enabled overrides ns disabled", NS, pod(Some(&[(M, "enabled")]), &[]), Some(map(&[(M, "disabled")])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        c("ns disabled: copied, skipped", NS, pod(Some(&[]), &[]), Some(map(&[(M, "disabled")])),
          vec![add(P_MULTUS, json!("disabled"))], vec![], Skipped),
        c("multus value is case-sensitive: Enabled is not enabled", NS, pod(Some(&[(M, "Enabled")]), &[]),
          Some(map(&[])), vec![], vec![], Skipped),
        c("ns inject disabled: both copied, skipped", NS, pod(Some(&[]), &[]),
          Some(map(&[(M, "enabled"), (I, "disabled")])),
          vec![add(P_INJECT, json!("disabled")), add(P_MULTUS, json!("enabled"))], vec![], Skipped),
        c("pod inject disabled beats ns inject enabled", NS, pod(Some(&[(I, "disabled")]), &[]),
          Some(map(&[(M, "enabled"), (I, "enabled")])),
          vec![add(P_MULTUS, json!("enabled"))], vec![], Skipped),
        c("pod inject enabled beats ns inject disabled", NS, pod(Some(&[(I, "enabled")]), &[]),
          Some(map(&[(M, "enabled"), (I, "disabled")])),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("inject ingress still attached (anything but disabled)", NS, pod(Some(&[]), &[]),
          Some(map(&[(M, "enabled"), (I, "ingress")])),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_INJECT, json!("ingress")), add(P_MULTUS, json!("enabled"))],
          vec![], Attached),
        c("inject copied even when multus is off", NS, pod(None, &[]), Some(map(&[(I, "enabled")])),
          vec![add("/metadata/annotations", json!({ I: "enabled" }))], vec![], Skipped),
        c("pod already has both, ns has both: no copy", NS, pod(Some(&[(M, "enabled"), (I, "enabled")]), &[]),
          Some(map(&[(M, "disabled"), (I, "disabled")])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        // --- control plane ---
        c("control-plane pod in linkerd ns: attached without any annotation", "linkerd",
          pod(None, &[(CP, "destination")]), Some(map(&[])),
          vec![add("/metadata/annotations", json!({ N: "linkerd-cni" }))], vec![], Attached),
        c("control-plane pod attached even with multus disabled and inject disabled", "linkerd",
          pod(Some(&[(M, "disabled"), (I, "disabled")]), &[(CP, "identity")]), Some(map(&[])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        c("empty control-plane label does not count", "linkerd", pod(None, &[(CP, "")]), Some(map(&[])),
          vec![], vec![], Skipped),
        c("control-plane label outside the linkerd ns does not count", NS, pod(None, &[(CP, "destination")]),
          Some(map(&[])), vec![], vec![], Skipped),
        c("control-plane pod gets no proxy uid even with a range", "linkerd", pod(Some(&[]), &[(CP, "proxy-injector")]),
          Some(map(&range)),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        // --- rule 3: networks, comma lists ---
        c("comma list without us: appended", NS, pod(Some(&[(N, "macvlan-conf")]), &[]), Some(map(&on)),
          vec![add(P_NETWORKS, json!("macvlan-conf,linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("comma list with spaces: separator style kept", NS, pod(Some(&[(M, "enabled"), (N, " a , other/b@eth1 ")]), &[]),
          Some(map(&[])), vec![add(P_NETWORKS, json!(" a , other/b@eth1, linkerd-cni"))], vec![], Attached),
        c("comma list already referencing us by bare name", NS, pod(Some(&[(M, "enabled"), (N, "a,linkerd-cni")]), &[]),
          Some(map(&[])), vec![], vec![], Unchanged),
        c("comma list referencing us with our namespace and an interface", NS,
          pod(Some(&[(M, "enabled"), (N, "app/linkerd-cni@net1")]), &[]), Some(map(&[])), vec![], vec![], Unchanged),
        c("same name in another namespace is not us: appended", NS,
          pod(Some(&[(M, "enabled"), (N, "other/linkerd-cni")]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!("other/linkerd-cni,linkerd-cni"))], vec![], Attached),
        c("blank networks value replaced by our name", NS, pod(Some(&[(M, "enabled"), (N, "  ")]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
        c("comma list with an empty item: untouched, warning", NS, pod(Some(&[(M, "enabled"), (N, "a,,b")]), &[]),
          Some(map(&[])), vec![], vec![w_networks("the comma list has an empty item")], Skipped),
        c("comma list item with two slashes: untouched, warning", NS, pod(Some(&[(M, "enabled"), (N, "a/b/c")]), &[]),
          Some(map(&[])), vec![], vec![w_networks("item \"a/b/c\" has an invalid network name")], Skipped),
        c("comma list item with a space inside: untouched, warning", NS, pod(Some(&[(M, "enabled"), (N, "my net")]), &[]),
          Some(map(&[])), vec![], vec![w_networks("item \"my net\" has an invalid network name")], Skipped),
        c("unparseable networks on a skipped pod: no warning, untouched", NS, pod(Some(&[(N, "a,,b")]), &[]),
          Some(map(&[])), vec![], vec![], Skipped),
        c("unparseable networks still lets the ns annotations be copied, no uid", NS, pod(Some(&[(N, "x@")]), &[]),
          Some(map(&range)), vec![add(P_MULTUS, json!("enabled"))],
          vec![w_networks("item \"x@\" has an invalid interface name")], Skipped),
        // --- rule 3: networks, JSON lists ---
        c("JSON list without us: appended in JSON, text kept", NS,
          pod(Some(&[(M, "enabled"), (N, r#"[ { "name": "macvlan", "interface": "eth1" } ]"#)]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!(r#"[ { "name": "macvlan", "interface": "eth1" },{"name":"linkerd-cni"}]"#))],
          vec![], Attached),
        c("empty JSON list: our object added", NS, pod(Some(&[(M, "enabled"), (N, "[]")]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!(r#"[{"name":"linkerd-cni"}]"#))], vec![], Attached),
        c("JSON list referencing us with our namespace", NS,
          pod(Some(&[(M, "enabled"), (N, r#"[{"name":"linkerd-cni","namespace":"app"}]"#)]), &[]), Some(map(&[])),
          vec![], vec![], Unchanged),
        c("JSON list referencing us without namespace", NS,
          pod(Some(&[(M, "enabled"), (N, r#"[{"name":"x"},{"name":"linkerd-cni","interface":"l5d"}]"#)]), &[]),
          Some(map(&[])), vec![], vec![], Unchanged),
        c("JSON list with us in another namespace: appended", NS,
          pod(Some(&[(M, "enabled"), (N, r#"[{"name":"linkerd-cni","namespace":"linkerd"}]"#)]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!(r#"[{"name":"linkerd-cni","namespace":"linkerd"},{"name":"linkerd-cni"}]"#))],
          vec![], Attached),
        c("bare JSON object (not a list): untouched, warning (the Go operator corrupted this)", NS,
          pod(Some(&[(M, "enabled"), (N, r#"{"name":"macvlan"}"#)]), &[]), Some(map(&[])), vec![],
          vec![w_networks("looks like JSON but is not a JSON list of objects")], Skipped),
        c("truncated JSON list: untouched, warning", NS, pod(Some(&[(M, "enabled"), (N, r#"[{"name":"a"}"#)]), &[]),
          Some(map(&[])), vec![],
          vec![w_networks("not a valid JSON list: EOF while parsing a list at line 1 column 13")], Skipped),
        c("JSON list element without a name: untouched, warning", NS,
          pod(Some(&[(M, "enabled"), (N, r#"[{"interface":"eth1"}]"#)]), &[]), Some(map(&[])), vec![],
          vec![w_networks("JSON list element 0 has no non-empty string \"name\"")], Skipped),
        c("JSON list of strings: untouched, warning", NS, pod(Some(&[(M, "enabled"), (N, r#"["a"]"#)]), &[]),
          Some(map(&[])), vec![], vec![w_networks("JSON list element 0 is not an object")], Skipped),
        // --- rule 4: OpenShift proxy uid ---
        c("uid range: proxy uid = first + 2102", NS, pod(Some(&[]), &[]), Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))],
          vec![], Attached),
        c("uid range but the pod chose a proxy uid: kept", NS, pod(Some(&[(U, "1234")]), &[]), Some(map(&range)),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("uid range but the namespace chose a proxy uid: kept", NS, pod(Some(&[]), &[]),
          Some(map(&[(M, "enabled"), (R, "1000650000/10000"), (U, "1000650007")])),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("uid range on a skipped pod: nothing", NS, pod(Some(&[]), &[]), Some(map(&[(R, "1000650000/10000")])),
          vec![], vec![], Skipped),
        c("uid range with a pod already attached: only the uid", NS,
          pod(Some(&[(M, "enabled"), (N, "linkerd-cni")]), &[]), Some(map(&[(R, "5000/3000")])),
          vec![add(P_UID, json!("7102"))], vec![], Attached),
        c("malformed uid range (no slash): warning, no uid", NS, pod(Some(&[(M, "enabled")]), &[]),
          Some(map(&[(R, "1000650000")])), vec![add(P_NETWORKS, json!("linkerd-cni"))],
          vec![w_uid("\"1000650000\" is not \"<first uid>/<size>\" (no '/')")], Attached),
        c("malformed uid range (letters): warning, no uid", NS, pod(Some(&[(M, "enabled")]), &[]),
          Some(map(&[(R, "abc/10000")])), vec![add(P_NETWORKS, json!("linkerd-cni"))],
          vec![w_uid("\"abc/10000\" is not \"<first uid>/<size>\" (the first uid is not a decimal number)")], Attached),
        c("malformed uid range (number too large): warning", NS, pod(Some(&[(M, "enabled")]), &[]),
          Some(map(&[(R, "99999999999/10000")])), vec![add(P_NETWORKS, json!("linkerd-cni"))],
          vec![w_uid("\"99999999999/10000\" is not \"<first uid>/<size>\" (a number is larger than the largest uid)")],
          Attached),
        c("uid range too small for the offset: warning", NS, pod(Some(&[(M, "enabled")]), &[]),
          Some(map(&[(R, "1000650000/2102")])), vec![add(P_NETWORKS, json!("linkerd-cni"))],
          vec![w_uid("the proxy uid offset 2102 is not smaller than the range size 2102")], Attached),
        c("uid range overflowing the largest uid: warning", NS, pod(Some(&[(M, "enabled")]), &[]),
          Some(map(&[(R, "4294966000/10000")])), vec![add(P_NETWORKS, json!("linkerd-cni"))],
          vec![w_uid("4294966000 + offset 2102 is larger than the largest uid")], Attached),
        // --- rule 4 on the injected pod: the proxy and the validator inside the range ---
        c("injector ran first: annotation set, proxy and validator moved into the range", NS,
          injected(&[], proxy_sc(2102), validator_sc()), Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled")),
               add(&format!("{P_PROXY}/runAsUser"), json!(1000652102)),
               add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![], Attached),
        c("reinvoked after the injector (this webhook ran first): only the validator moves", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], proxy_sc(1000652102), validator_sc()),
          Some(map(&range)),
          vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![], Attached),
        c("proxy without securityContext: the whole object added", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], None, None), Some(map(&range)),
          vec![add(P_PROXY, json!({ "runAsUser": 1000652102 }))], vec![], Attached),
        c("proxy with a null securityContext: replaced by an object", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], Some(Value::Null), None),
          Some(map(&range)), vec![add(P_PROXY, json!({ "runAsUser": 1000652102 }))], vec![], Attached),
        c("proxy with an empty securityContext: the field added", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], Some(json!({})), Some(json!({}))),
          Some(map(&range)), vec![add(&format!("{P_PROXY}/runAsUser"), json!(1000652102))], vec![], Attached),
        c("proxy runAsUser of the wrong type: replaced", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], Some(json!({ "runAsUser": "2102" })), None),
          Some(map(&range)), vec![add(&format!("{P_PROXY}/runAsUser"), json!(1000652102))], vec![], Attached),
        c("proxy securityContext not an object: untouched, warning", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], Some(json!("x")), None),
          Some(map(&range)), vec![],
          vec!["linkerd-multus: container linkerd-proxy left unchanged: its securityContext is not an object"],
          Unchanged),
        c("native-sidecar proxy (an init container) moved", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], None, validator_sc());
            p["spec"]["containers"] = json!([{ "name": "app", "image": "x" }]);
            p["spec"]["initContainers"].as_array_mut().unwrap().push(json!({
                "name": PROXY, "image": "x", "restartPolicy": "Always", "securityContext": { "runAsUser": 2102 } }));
            p },
          Some(map(&range)),
          vec![add(P_UID, json!("1000652102")),
               add("/spec/initContainers/1/securityContext/runAsUser", json!(1000652102)),
               add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![], Attached),
        c("an init container named linkerd-proxy that does not keep running is not the proxy", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], None, None);
            p["spec"]["containers"] = json!([{ "name": "app", "image": "x" }]);
            p["spec"]["initContainers"] = json!([{ "name": PROXY, "securityContext": { "runAsUser": 2102 } }]);
            p },
          Some(map(&range)), vec![], vec![], Unchanged),
        c("user proxy uid inside the range: kept, the proxy made to match", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000650007")], proxy_sc(2102), validator_sc()),
          Some(map(&range)),
          vec![add(&format!("{P_PROXY}/runAsUser"), json!(1000650007)),
               add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![], Attached),
        c("user proxy uid is the range's first: the validator takes the second", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000650000")], proxy_sc(1000650000), validator_sc()),
          Some(map(&range)),
          vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650001)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650001))],
          vec![], Attached),
        c("user proxy uid outside the range: kept, proxy untouched, warning; validator moved", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1234")], proxy_sc(1234), validator_sc()),
          Some(map(&range)),
          vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![w_outside("1234")], Attached),
        c("user proxy uid not a number: kept, proxy untouched, warning", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "abc")], proxy_sc(2102), None),
          Some(map(&range)), vec![], vec![W_NOT_A_UID], Unchanged),
        c("user proxy uid with a space: not trimmed, warning (Linkerd's injector ignores it)", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, " 1000652102")], proxy_sc(2102), None),
          Some(map(&range)), vec![], vec![W_SPACE], Unchanged),
        c("namespace's proxy uid negative, no range: warning", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), None),
          Some(map(&[(U, "-1")])), vec![], vec![W_NEGATIVE_NS], Unchanged),
        c("user proxy uid is the range's first, the app without runAsUser: admitted, warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000650000")],
                                 proxy_sc(1000650000), validator_sc());
            p["spec"]["containers"][0] = json!({ "name": "app", "image": "x" });
            p },
          Some(map(&range)),
          vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650001)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650001))],
          vec![W_COLLISION_RANGE_FIRST], Attached),
        c("user proxy uid is the pod's runAsUser, no range: admitted, warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "5000")], proxy_sc(5000), None);
            p["spec"]["containers"][0] = json!({ "name": "app", "image": "x" });
            p["spec"]["securityContext"] = json!({ "runAsUser": 5000 });
            p },
          Some(map(&[])), vec![], vec![W_COLLISION_POD], Unchanged),
        c("no annotation, the app runs as the proxy's 2102: admitted, warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), None);
            p["spec"]["containers"][0]["securityContext"] = json!({ "runAsUser": 2102 });
            p },
          Some(map(&[])), vec![], vec![W_COLLISION_PROXY], Unchanged),
        c("an init container as the proxy uid is Linkerd's recipe for network access: no warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), None);
            p["spec"]["initContainers"] = json!([{ "name": "fetch", "securityContext": { "runAsUser": 2102 } }]);
            p },
          Some(map(&[])), vec![], vec![], Unchanged),
        c("the namespace's proxy uid is the app's runAsUser, no proxy uid of its own: warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], None, None);
            p["spec"]["containers"][0]["securityContext"] = json!({ "runAsUser": 7000 });
            p },
          Some(map(&[(U, "7000")])), vec![], vec![W_COLLISION_NS], Unchanged),
        c("the pod's runAsUser for the proxy and the app alike: warning", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], None, None);
            p["spec"]["containers"][0] = json!({ "name": "app", "image": "x" });
            p["spec"]["securityContext"] = json!({ "runAsUser": 5000 });
            p },
          Some(map(&[])), vec![], vec![W_COLLISION_PROXY_POD], Unchanged),
        c("the app runs as the uid the range's offset gives the proxy: the set annotation warned", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), None);
            p["spec"]["containers"][0]["securityContext"] = json!({ "runAsUser": 1000652102 });
            p },
          Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(&format!("{P_PROXY}/runAsUser"), json!(1000652102))],
          vec![W_COLLISION_OFFSET], Attached),
        c("a native-sidecar proxy as the range's first: both apps without runAsUser warned", NS,
          { let mut p = pod(Some(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000650000")]), &[]);
            p["spec"] = json!({
                "containers": [{ "name": "app", "image": "x" }, { "name": "worker", "image": "x" }],
                "initContainers": [{ "name": PROXY, "image": "x", "restartPolicy": "Always",
                                     "securityContext": { "runAsUser": 1000650000 } }],
            });
            p },
          Some(map(&range)), vec![], vec![W_COLLISION_RANGE_FIRST, W_COLLISION_WORKER_RANGE_FIRST],
          Unchanged),
        c("seven apps as the range's first: each warned (the policy explains five, names two)", NS,
          { let mut p = pod(Some(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000650000")]), &[]);
            let mut containers: Vec<Value> =
                (0..7).map(|i| json!({ "name": format!("app{i}"), "image": "x" })).collect();
            containers.push(json!({ "name": PROXY, "image": "x",
                                    "securityContext": { "runAsUser": 1000650000 } }));
            p["spec"] = json!({ "containers": containers });
            p },
          Some(map(&range)), vec![],
          (0..7).map(|i| w_collision_range_first(&format!("app{i}"))).collect(), Unchanged),
        c("namespace's proxy uid inside the range: the proxy made to match, no pod annotation", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), None),
          Some(map(&[(R, "1000650000/10000"), (U, "1000650009")])),
          vec![add(&format!("{P_PROXY}/runAsUser"), json!(1000650009))], vec![], Attached),
        c("validator inside the range and not the proxy's: untouched", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], proxy_sc(1000652102),
                   Some(json!({ "runAsUser": 1000650003, "runAsGroup": 1000650003 }))),
          Some(map(&range)), vec![], vec![], Unchanged),
        c("validator as the proxy's uid: moved (its test connection must be redirected)", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], proxy_sc(1000652102),
                   Some(json!({ "runAsUser": 1000652102 }))),
          Some(map(&range)), vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000))], vec![], Attached),
        c("validator without runAsUser: left to the platform; a group outside the range moved", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], proxy_sc(1000652102),
                   Some(json!({ "runAsGroup": 65534 }))),
          Some(map(&range)), vec![add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))], vec![], Attached),
        c("containers not Linkerd's are never touched", NS,
          { let mut p = injected(&[(M, "enabled"), (N, "linkerd-cni"), (U, "1000652102")], None, None);
            p["spec"]["containers"] = json!([{ "name": "linkerd-proxy-x", "securityContext": { "runAsUser": 2102 } }]);
            p["spec"]["initContainers"] = json!([{ "name": "linkerd-init", "securityContext": { "runAsUser": 65534 } }]);
            p },
          Some(map(&range)), vec![], vec![], Unchanged),
        c("control-plane pod with a proxy in a range: no securityContext change", "linkerd",
          { let mut p = injected(&[(N, "linkerd-cni")], proxy_sc(2102), validator_sc());
            p["metadata"]["labels"] = json!({ CP: "destination" });
            p },
          Some(map(&range)), vec![add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("namespace without a range: no securityContext change", NS,
          injected(&[], proxy_sc(2102), validator_sc()), Some(map(&on)),
          vec![add(P_NETWORKS, json!("linkerd-cni")), add(P_MULTUS, json!("enabled"))], vec![], Attached),
        c("pod not attached in a range: no securityContext change", NS,
          injected(&[(M, "disabled")], proxy_sc(2102), validator_sc()), Some(map(&range)),
          vec![], vec![], Skipped),
        c("malformed range: warning, no securityContext change", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), validator_sc()),
          Some(map(&[(R, "1000650000")])), vec![],
          vec![w_uid("\"1000650000\" is not \"<first uid>/<size>\" (no '/')")], Unchanged),
        c("range too small for the offset: warning; the validator still moved", NS,
          injected(&[(M, "enabled"), (N, "linkerd-cni")], proxy_sc(2102), validator_sc()),
          Some(map(&[(R, "1000650000/100")])),
          vec![add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          vec![w_uid("the proxy uid offset 2102 is not smaller than the range size 100")], Attached),
        // --- escaping and odd keys ---
        c("existing keys with ~ and / are left alone, ours escaped", NS,
          pod(Some(&[("a~b/c", "x"), (M, "enabled")]), &[]), Some(map(&[])),
          vec![add(P_NETWORKS, json!("linkerd-cni"))], vec![], Attached),
    ]
}

pub fn meta_of(pod: &Value) -> ObjectMeta {
    serde_json::from_value(pod["metadata"].clone()).expect("test pod metadata")
}

pub fn containers_of(pod: &Value) -> PodContainers {
    PodContainers::from_spec(pod.get("spec"))
}
pub fn aux_chain() -> DecisionConfig {
    let mut cfg = cfg();
    cfg.nad.attach = rules::attach::Attach::AuxChain;
    cfg
}

/// A case of the NAD-mode table as aux-chain mode must decide it: the networks annotation neither
/// added nor edited (dropped from a whole-map add, which goes when nothing else is left), every
/// other operation and warning the same; a selected pod with nothing else to set is unchanged.
/// None for the cases NAD mode skips because their networks annotation cannot be read: aux-chain
/// mode never reads it, so they are attached ([`aux_only_cases`]).
pub fn in_aux_chain_mode(case: &Case) -> Option<Case> {
    if case
        .warnings
        .iter()
        .any(|w| w.starts_with(W_BAD_NETWORKS_PREFIX))
    {
        return None;
    }
    let patch: Vec<Value> = case
        .patch
        .iter()
        .filter(|op| op["path"] != P_NETWORKS)
        .filter_map(|op| {
            if op["path"] != "/metadata/annotations" {
                return Some(op.clone());
            }
            let mut whole = op.clone();
            let map = whole["value"]
                .as_object_mut()
                .expect("a whole annotation map");
            map.remove(N);
            (!map.is_empty()).then_some(whole)
        })
        .collect();
    let outcome = match (case.outcome, patch.is_empty()) {
        (Outcome::Skipped, _) => Outcome::Skipped,
        (_, true) => Outcome::Unchanged,
        (_, false) => Outcome::Attached,
    };
    // A selected pod of a known namespace that is not enabled opted in by its own annotation: told
    // that aux-chain mode redirects only the pods of enabled namespaces.
    let enabled = |v: Option<&Value>| v.and_then(Value::as_str) == Some("enabled");
    let mut warnings = case.warnings.clone();
    if case.outcome != Outcome::Skipped
        && case.namespace != "linkerd"
        && enabled(case.pod["metadata"]["annotations"].get(M))
        && case
            .ns
            .as_ref()
            .is_some_and(|ns| ns.get(M).map(String::as_str) != Some("enabled"))
    {
        warnings.insert(0, w_own_opt_in(case.namespace));
    }
    Some(Case {
        name: case.name,
        namespace: case.namespace,
        pod: case.pod.clone(),
        ns: case.ns.clone(),
        patch,
        warnings,
        outcome,
    })
}

pub fn w_own_opt_in(namespace: &str) -> &'static str {
    leak(format!(
        "linkerd-multus: the pod opts in by its own linkerd.io/multus annotation, but namespace \
         {namespace} is not enabled: with --attach aux-chain linkerd-cni redirects only the pods of \
         enabled namespaces, so a meshed pod here gets no rules and its linkerd-network-validator \
         stops it; annotate the namespace linkerd.io/multus=enabled"
    ))
}

/// Aux-chain mode on the cases of [`aux_only_cases`]: what NAD mode cannot show.
pub fn aux_only_cases() -> Vec<Case> {
    use Outcome::*;
    let range = [(M, "enabled"), (R, "1000650000/10000")];
    let c = |name, pod, ns, patch, outcome| Case {
        name,
        namespace: NS,
        pod,
        ns,
        patch,
        warnings: vec![],
        outcome,
    };
    let mut told = c(
        "aux: another namespace's NAD of our name is left as it is; the pod's own opt-in \
                       in a namespace that is not enabled is told",
        pod(Some(&[(M, "enabled"), (N, "other/linkerd-cni")]), &[]),
        Some(map(&[])),
        vec![],
        Unchanged,
    );
    told.warnings = vec![w_own_opt_in(NS)];
    vec![
        told,
        c("aux: the pod's own opt-in, its namespace unreadable: attached, nothing told",
          pod(Some(&[(M, "enabled")]), &[]), None, vec![], Unchanged),
        c("aux: a pod already listing our NAD (from NAD mode) is left as it is; the uid is set",
          pod(Some(&[(N, "macvlan,linkerd-cni")]), &[]), Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(P_MULTUS, json!("enabled"))], Attached),
        c("aux: an unreadable networks annotation is never read: no warning, attached by the chain",
          pod(Some(&[(N, "a,,b")]), &[]), Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(P_MULTUS, json!("enabled"))], Attached),
        c("aux: a bare JSON object as networks is left alone, the injected pod still aligned",
          injected(&[(N, r#"{"name":"macvlan"}"#)], proxy_sc(2102), validator_sc()), Some(map(&range)),
          vec![add(P_UID, json!("1000652102")), add(P_MULTUS, json!("enabled")),
               add(&format!("{P_PROXY}/runAsUser"), json!(1000652102)),
               add(&format!("{P_VALIDATOR}/runAsUser"), json!(1000650000)),
               add(&format!("{P_VALIDATOR}/runAsGroup"), json!(1000650000))],
          Attached),
        c("aux: a pod silent in an enabled namespace without a range: only the copy",
          pod(None, &[]), Some(map(&[(M, "enabled")])),
          vec![add("/metadata/annotations", json!({ M: "enabled" }))], Attached),
    ]
}
