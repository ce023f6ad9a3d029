//! The edges of reading a review in one pass: where the pod is missing or odd, which bodies are not a
//! review, and the exact reply bytes. Each case asserts the whole reply.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::AdmissionReview;
use linkerd_multus_webhook::metrics::outcome;
use linkerd_multus_webhook::review::{parse, Parsed, Reply};
use rules::decision::DecisionConfig;

fn cfg() -> DecisionConfig {
    DecisionConfig::default()
}

fn handle(body: &str) -> Reply {
    let ns = BTreeMap::from([(vocab::MULTUS_ANNOTATION.to_string(), "enabled".to_string())]);
    match parse(body.as_bytes()) {
        Parsed::Reply(r) => r,
        Parsed::Pod(p) => p.answer(Ok(&ns), &cfg()),
    }
}

/// A pod CREATE review whose `request` ends with `rest` (`"object": ...` and the like).
fn review(rest: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u1","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"namespace":"app","operation":"CREATE","userInfo":{{"username":"me","groups":["g"],"extra":{{"k":["v"]}}}}{rest}}}}}"#
    )
}

fn assert_reply(reply: &Reply, status: u16, outcome: &str, body: &str) {
    assert_eq!(
        (reply.status.as_u16(), reply.outcome, reply.json),
        (status, outcome, status == 200),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(String::from_utf8_lossy(&reply.body), body);
}

fn warned(why: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"u1","allowed":true,"status":{{}},"warnings":["linkerd-multus: pod left unchanged: {why}"]}}}}"#
    )
}

/// base64 of `[{"op":"add","path":"/metadata/annotations","value":{"k8s.v1.cni.cncf.io/networks":"linkerd-cni","linkerd.io/multus":"enabled"}}]`
const WHOLE_MAP: &str = "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2Fubm90YXRpb25zIiwidmFsdWUiOnsiazhzLnYxLmNuaS5jbmNmLmlvL25ldHdvcmtzIjoibGlua2VyZC1jbmkiLCJsaW5rZXJkLmlvL211bHR1cyI6ImVuYWJsZWQifX1d";

fn attached(uid: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{uid}","allowed":true,"status":{{}},"patchType":"JSONPatch","patch":"{WHOLE_MAP}"}}}}"#
    )
}

#[test]
fn the_patch_is_the_expected_base64() {
    let json = r#"[{"op":"add","path":"/metadata/annotations","value":{"k8s.v1.cni.cncf.io/networks":"linkerd-cni","linkerd.io/multus":"enabled"}}]"#;
    assert_eq!(
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, json),
        WHOLE_MAP
    );
}

#[test]
fn a_missing_or_odd_object_is_allowed_with_a_warning() {
    let none = warned("the review carries no pod metadata");
    for rest in [
        "",
        r#","object":null"#,
        r#","object":"a pod""#,
        r#","object":42"#,
        r#","object":true"#,
        r#","object":[{"metadata":{"name":"p"}}]"#,
        r#","object":{}"#,
        r#","object":{"kind":"Pod","spec":{"containers":[]}}"#,
    ] {
        assert_reply(&handle(&review(rest)), 200, outcome::WARNING, &none);
    }
}

#[test]
fn unreadable_metadata_is_allowed_with_a_warning() {
    for (metadata, why) in [
        ("null", "invalid type: null, expected ObjectMeta"),
        (
            r#""p""#,
            r#"invalid type: string \"p\", expected ObjectMeta"#,
        ),
        ("[]", "invalid type: sequence, expected ObjectMeta"),
        (
            r#"{"annotations":{"a":1}}"#,
            "invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"labels":"x"}"#,
            r#"invalid type: string \"x\", expected a map"#,
        ),
    ] {
        let body = review(&format!(r#","object":{{"metadata":{metadata}}}"#));
        assert_reply(
            &handle(&body),
            200,
            outcome::WARNING,
            &warned(&format!("its metadata cannot be read: {why}")),
        );
    }
}

#[test]
fn only_the_metadata_is_read() {
    // The spec is skipped whatever it holds; the last `metadata` wins, as in a JSON object.
    for object in [
        r#"{"metadata":{"name":"p"},"spec":{"x":[[[{"y":null}]]],"n":1e5,"s":"\u00e9\""}}"#,
        r#"{"spec":7,"metadata":{"name":"p"},"status":{}}"#,
        r#"{"metadata":{"annotations":{"linkerd.io/multus":"disabled"}},"metadata":{"name":"p"}}"#,
    ] {
        let body = review(&format!(
            r#","object":{object},"oldObject":{{"any":[1]}},"dryRun":true,"options":{{"kind":"CreateOptions"}}"#
        ));
        assert_reply(&handle(&body), 200, outcome::ATTACHED, &attached("u1"));
    }
}

#[test]
fn the_pod_namespace_is_the_fallback() {
    let body =
        review(r#","object":{"metadata":{"name":"p"}}"#).replace(r#""namespace":"app","#, "");
    assert_reply(
        &handle(&body),
        200,
        outcome::WARNING,
        &warned("the review names no namespace"),
    );
    let body = review(r#","object":{"metadata":{"name":"p","namespace":"app"}}"#)
        .replace(r#""namespace":"app","#, "");
    assert_reply(&handle(&body), 200, outcome::ATTACHED, &attached("u1"));
}

#[test]
fn escaped_strings_are_echoed() {
    let body = review(r#","object":{"metadata":{}}"#)
        .replace(r#""uid":"u1""#, r#""uid":"u\"\u00e9\/1""#)
        .replace(r#""namespace":"app""#, r#""namespace":"\u0061pp""#);
    assert_reply(
        &handle(&body),
        200,
        outcome::ATTACHED,
        &attached("u\\\"é/1"),
    );
}

#[test]
fn other_requests_are_ignored_in_their_version() {
    let body = review(r#","object":{"metadata":{}}"#)
        .replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
        .replace(r#""operation":"CREATE""#, r#""operation":"UPDATE""#);
    assert_reply(
        &handle(&body),
        200,
        outcome::IGNORED,
        r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"status":{}}}"#,
    );
    let body = review(r#","subResource":"status","object":{"metadata":{}}"#);
    assert_reply(
        &handle(&body),
        200,
        outcome::IGNORED,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"status":{}}}"#,
    );
}

fn assert_refused(body: &[u8], message: &str) {
    // A review's shape is kube's: its typed review refuses the same bodies, saying the same.
    if let Some(why) = message.strip_prefix("the request body is not an AdmissionReview: ") {
        let kube = serde_json::from_slice::<AdmissionReview<Pod>>(body).err();
        assert_eq!(kube.map(|e| e.to_string()).as_deref(), Some(why));
    }
    let reply = match parse(body) {
        Parsed::Reply(r) => r,
        Parsed::Pod(_) => panic!("{} was taken as a pod", String::from_utf8_lossy(body)),
    };
    assert_reply(&reply, 400, outcome::BAD_REQUEST, message);
}

#[test]
fn bodies_that_are_not_reviews() {
    let ar = "the request body is not an AdmissionReview: ";
    // Serde would take a struct as a positional list; the review never was one (nor is it for kube:
    // its flattened TypeMeta makes it a JSON object only).
    assert_refused(
        br#"["admission.k8s.io/v1","AdmissionReview",null]"#,
        &format!("{ar}invalid type: sequence, expected struct AdmissionReview at line 1 column 0"),
    );
    let user = r#""userInfo":{"username":"me","groups":["g"],"extra":{"k":["v"]}}"#;
    for (from, to, error) in [
        (user, r#""userInfo":[]"#, "invalid type: sequence, expected UserInfo at line 1 column 240"),
        (user, r#""userInfo":{"groups":[1]}"#, "invalid type: integer `1`, expected a string at line 1 column 250"),
        (user, r#""userInfo":{"extra":{"k":"v"}}"#, "invalid type: string \"v\", expected a sequence at line 1 column 255"),
        (r#""namespace":"app""#, r#""name":null"#, "invalid type: null, expected a string at line 1 column 199"),
        (r#""namespace":"app""#, r#""dryRun":null"#, "invalid type: null, expected a boolean at line 1 column 201"),
        (r#""operation":"CREATE""#, r#""operation":"PATCH""#, "unknown variant `PATCH`, expected one of `CREATE`, `UPDATE`, `DELETE`, `CONNECT` at line 1 column 225"),
        (r#""uid":"u1""#, r#""uid":"u1","uid":"u2""#, "duplicate field `uid` at line 1 column 88"),
    ] {
        let body = review(r#","object":{}"#).replace(from, to);
        assert_refused(body.as_bytes(), &format!("{ar}{error}"));
    }
    // A shape error first and a syntax error later: not JSON, as when the body was parsed whole first.
    assert_refused(
        br#"{"request":42,"x":nope}"#,
        "the request body is not JSON: expected ident at line 1 column 20",
    );
    // Bytes that are not UTF-8, even inside the spec that is otherwise skipped.
    let mut body = review(r#","object":{"metadata":{},"spec":{"s":"__"}}"#).into_bytes();
    let at = body.windows(2).position(|w| w == b"__").unwrap();
    body[at] = 0xff;
    assert_refused(
        &body,
        "the request body is not JSON: invalid unicode code point at line 1 column 329",
    );
    assert_refused(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u"}}"#,
        &format!("{ar}missing field `allowed` at line 1 column 83"),
    );
}

/// A proxy uid an app container runs as (here the pod's runAsUser, read off the review in its one
/// pass) is admitted with a warning naming the container, the uid and the fix; the pod is still
/// patched as usual (the validator moved off the proxy's uid).
#[test]
fn a_proxy_uid_the_app_runs_as_is_admitted_with_a_warning() {
    let ns = BTreeMap::from([
        (vocab::MULTUS_ANNOTATION.to_string(), "enabled".to_string()),
        (
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "1000650000/10000".to_string(),
        ),
    ]);
    let body = review(
        r#","object":{"metadata":{"name":"p","annotations":{"config.linkerd.io/proxy-uid":"1000650000"}},
           "spec":{"securityContext":{"runAsUser":1000650000},
                   "containers":[{"name":"app"},{"name":"linkerd-proxy","securityContext":{"runAsUser":1000650000}}],
                   "initContainers":[{"name":"linkerd-network-validator","securityContext":{"runAsUser":65534}}]}}"#,
    );
    let reply = match parse(body.as_bytes()) {
        Parsed::Reply(r) => r,
        Parsed::Pod(p) => p.answer(Ok(&ns), &cfg()),
    };
    assert_eq!(
        (reply.status.as_u16(), reply.outcome),
        (200, outcome::WARNING)
    );
    let review: serde_json::Value = serde_json::from_slice(&reply.body).expect("a review");
    let response = &review["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"],
        serde_json::json!(["linkerd-multus: container app runs as uid 1000650000 (the pod's runAsUser), \
            the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from \
            the redirect, so the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid \
            from the pod's template, or set it to a uid no app container runs as"])
    );
    let patch = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        response["patch"].as_str().expect("a patch"),
    )
    .expect("base64");
    let patch = String::from_utf8_lossy(&patch);
    assert!(
        patch.contains("/spec/initContainers/0/securityContext/runAsUser"),
        "{patch}"
    );
}
