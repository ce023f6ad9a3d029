//! Property tests over the request handling: arbitrary bytes, mangled reviews and arbitrary pod shapes
//! never panic, always get a 200 review echoing the uid or a 400, and any patch applies to the pod and is
//! idempotent (deciding again on the patched pod yields no patch).

use std::collections::BTreeMap;

use linkerd_multus_webhook::decision::DecisionConfig;
use linkerd_multus_webhook::review::{parse, Parsed, Reply};
use proptest::prelude::*;
use serde_json::{json, Value};

fn cfg() -> DecisionConfig {
    DecisionConfig::default()
}

fn handle(body: &[u8], ns: &BTreeMap<String, String>) -> Reply {
    match parse(body) {
        Parsed::Reply(r) => r,
        Parsed::Pod(p) => p.answer(Ok(ns), &cfg()),
    }
}

/// Checks the reply's shape; returns the decoded patch, if any.
fn check(reply: &Reply, uid: Option<&str>) -> Option<json_patch::Patch> {
    match reply.status.as_u16() {
        400 => {
            assert!(!reply.json && !reply.body.is_empty(), "a 400 says why");
            None
        }
        200 => {
            let review: Value = serde_json::from_slice(&reply.body).expect("200 carries JSON");
            let version = review["apiVersion"].as_str().unwrap_or_default();
            assert!(
                ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"].contains(&version),
                "{version}"
            );
            assert_eq!(review["kind"], "AdmissionReview");
            assert_eq!(review["response"]["allowed"], true);
            if let Some(uid) = uid {
                assert_eq!(review["response"]["uid"], uid);
            }
            review["response"]["patch"].as_str().map(|b64| {
                let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                    .expect("patch is base64");
                serde_json::from_slice(&bytes).expect("patch is a JSON patch")
            })
        }
        other => panic!("status {other}"),
    }
}

fn review(uid: &str, kind: &str, op: &str, namespace: &str, object: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": { "group": "", "version": "v1", "kind": kind },
            "resource": { "group": "", "version": "v1", "resource": "pods" },
            "namespace": namespace,
            "operation": op,
            "userInfo": {},
            "object": object,
        }
    })
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(vocab::MULTUS_ANNOTATION.to_string()),
        Just(vocab::INJECT_ANNOTATION.to_string()),
        Just(vocab::NETWORKS_ANNOTATION.to_string()),
        Just(vocab::PROXY_UID_ANNOTATION.to_string()),
        Just(vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string()),
        "[a-z~/.]{1,10}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("enabled".to_string()),
        Just("disabled".to_string()),
        Just(vocab::NAD_NAME.to_string()),
        "[a-z/@, -]{0,24}",
        r#"\[(\{"name":"[a-z-]{0,12}"(,"namespace":"[a-z]{0,4}")?\},?){0,3}\] ?"#,
        "[0-9]{0,11}/[0-9]{0,6}",
        ".{0,16}",
    ]
}

fn annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(key(), value(), 0..6)
}

/// Pod metadata: usually well-formed (annotations/labels of strings, maybe absent), sometimes junk.
fn metadata() -> impl Strategy<Value = Value> {
    let good = (
        prop::option::of(annotations()),
        prop::option::of(prop::collection::btree_map(
            prop_oneof![
                Just(vocab::CONTROL_PLANE_COMPONENT_LABEL.to_string()),
                "[a-z]{1,5}"
            ],
            "[a-z]{0,5}",
            0..3,
        )),
    )
        .prop_map(|(a, l)| {
            let mut m = json!({ "name": "p" });
            if let Some(a) = a {
                m["annotations"] = json!(a);
            }
            if let Some(l) = l {
                m["labels"] = json!(l);
            }
            m
        });
    prop_oneof![4 => good, 1 => any_json()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&handle(&body, &BTreeMap::new()), None);
    }

    #[test]
    fn mangled_reviews(
        meta in metadata(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let object = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {} });
        let mut body = serde_json::to_vec(&review("u", "Pod", "CREATE", "app", object)).unwrap();
        for (i, b) in edits {
            let i = i.index(body.len());
            body[i] = b;
        }
        check(&handle(&body, &BTreeMap::new()), None);
    }

    #[test]
    fn arbitrary_pods_and_namespaces(
        meta in metadata(),
        ns in annotations(),
        namespace in prop_oneof![Just("linkerd".to_string()), Just("app".to_string())],
        op in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE")],
        junk_object in any::<bool>(),
        junk in any_json(),
    ) {
        let object = if junk_object {
            junk
        } else {
            json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {} })
        };
        let body = serde_json::to_vec(&review("uid-x", "Pod", op, &namespace, object.clone())).unwrap();
        let reply = handle(&body, &ns);
        prop_assert_eq!(reply.status.as_u16(), 200);
        if let Some(patch) = check(&reply, Some("uid-x")) {
            prop_assert_eq!(op, "CREATE");
            let mut patched = object;
            json_patch::patch(&mut patched, &patch).expect("the patch applies to the pod");
            // Reinvocation on the patched pod: nothing more to do.
            let again = serde_json::to_vec(&review("uid-y", "Pod", op, &namespace, patched)).unwrap();
            let second = check(&handle(&again, &ns), Some("uid-y"));
            prop_assert!(second.is_none(), "second patch {:?}", second);
        }
    }
}
