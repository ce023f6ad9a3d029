//! Property tests over the request handling: arbitrary bytes, mangled reviews and arbitrary pod shapes
//! never panic, always get a 200 review echoing the uid or a 400, and any patch applies to the pod and is
//! idempotent (deciding again on the patched pod yields no patch). On the same inputs, and on reviews
//! with members dropped, renamed or replaced, the answer is the one kube's typed `AdmissionReview<Pod>`
//! implies (see `kube_answer`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{AdmissionReview, Operation};
use linkerd_multus_e2e::admission::review;
use linkerd_multus_webhook::review::{parse, Parsed, Reply};
use proptest::prelude::*;
use rules::containers::PodContainers;
use rules::decision::{decide, DecisionConfig};
use rules::pod::PodView;
use rules::uid_range::UidRange;
use serde::Deserialize;
use serde_json::value::RawValue;
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

/// A securityContext of any shape: absent (None), null, empty, Linkerd's, partial, or junk.
fn security_context() -> impl Strategy<Value = Option<Value>> {
    let uid = prop_oneof![
        Just(json!(2102)),
        Just(json!(65534)),
        (1000650000u64..1000660000).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any_json(),
    ];
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(json!({}))),
        (
            prop::option::of(uid.clone()),
            prop::option::of(uid),
            any::<bool>()
        )
            .prop_map(|(u, g, nr)| {
                let mut sc = json!({ "runAsNonRoot": nr });
                if let Some(u) = u {
                    sc["runAsUser"] = u;
                }
                if let Some(g) = g {
                    sc["runAsGroup"] = g;
                }
                Some(sc)
            }),
        any_json().prop_map(Some),
    ]
}

/// A container list of Linkerd's and other names, each with any securityContext.
fn container_list() -> impl Strategy<Value = Value> {
    let name = prop_oneof![
        Just(vocab::PROXY_CONTAINER.to_string()),
        Just(vocab::VALIDATOR_CONTAINER.to_string()),
        Just(vocab::INIT_CONTAINER.to_string()),
        "[a-z-]{1,8}",
    ];
    prop::collection::vec((name, security_context(), any::<bool>()), 0..4).prop_map(|items| {
        Value::Array(
            items
                .into_iter()
                .map(|(name, sc, always)| {
                    let mut c = json!({ "name": name, "image": "x" });
                    if always {
                        c["restartPolicy"] = json!("Always");
                    }
                    if let Some(sc) = sc {
                        c["securityContext"] = sc;
                    }
                    c
                })
                .collect(),
        )
    })
}

/// What matters of an answer: refused (400), or allowed echoing a uid, with the patch (as JSON) if any.
#[derive(Debug, PartialEq)]
enum Answer {
    Refused,
    Allowed { uid: String, patch: Option<Value> },
}

fn answer_of(reply: &Reply) -> Answer {
    let patch = check(reply, None);
    match reply.status.as_u16() {
        400 => Answer::Refused,
        _ => {
            let review: Value = serde_json::from_slice(&reply.body).expect("200 carries JSON");
            Answer::Allowed {
                uid: review["response"]["uid"]
                    .as_str()
                    .expect("a uid")
                    .to_string(),
                patch: patch.map(|p| serde_json::to_value(p).unwrap()),
            }
        }
    }
}

/// A review object as kube reads one typed as "anything": any JSON, kept unread. Lets the review
/// around an odd pod be read by kube's own types.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "Box<RawValue>")]
struct AnyObject {
    raw: Box<RawValue>,
    meta: ObjectMeta,
}

impl From<Box<RawValue>> for AnyObject {
    fn from(raw: Box<RawValue>) -> Self {
        Self {
            raw,
            meta: ObjectMeta::default(),
        }
    }
}

impl kube::Resource for AnyObject {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// What this webhook must answer, from kube's typed reading of `body`: as kube's
/// `AdmissionReview<Pod>` reads it, except that a pod kube refuses is read apart from the review (an
/// odd pod is allowed, decided from its metadata if that reads as kube's `ObjectMeta`). `None` when
/// the pod is not even a JSON value serde_json can hold.
fn kube_answer(body: &[u8], ns: &BTreeMap<String, String>) -> Option<Answer> {
    // JSON is UTF-8 (RFC 8259); read from bytes, serde_json would not check the parts it skips.
    let Ok(body) = std::str::from_utf8(body) else {
        return Some(Answer::Refused);
    };
    let Ok(review) = serde_json::from_str::<AdmissionReview<AnyObject>>(body) else {
        return Some(Answer::Refused);
    };
    if review.types.kind != "AdmissionReview"
        || !["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]
            .contains(&review.types.api_version.as_str())
    {
        return Some(Answer::Refused);
    }
    let Some(request) = review.request else {
        return Some(Answer::Refused);
    };
    let uid = request.uid.clone();
    let is_pod = request.kind.group.is_empty()
        && request.kind.kind == "Pod"
        && request.sub_resource.as_deref().is_none_or(str::is_empty);
    let Some(object) = request
        .object
        .filter(|_| is_pod && request.operation == Operation::Create)
    else {
        return Some(Answer::Allowed { uid, patch: None });
    };
    let object: Value = serde_json::from_str(object.raw.get()).ok()?;
    let meta = match serde_json::from_str::<AdmissionReview<Pod>>(body) {
        Ok(typed) => typed.request.and_then(|r| r.object).map(|pod| pod.metadata),
        Err(_) => object
            .get("metadata")
            .and_then(|m| ObjectMeta::deserialize(m).ok()),
    };
    let namespace = request
        .namespace
        .or_else(|| meta.as_ref()?.namespace.clone())
        .unwrap_or_default();
    let patch = match meta {
        Some(meta) if !namespace.is_empty() => {
            let containers = PodContainers::from_spec(object.get("spec"));
            decide(&meta, &containers, &namespace, Some(ns), &cfg()).patch
        }
        _ => json_patch::Patch(Vec::new()),
    };
    let applies = json_patch::patch(&mut object.clone(), &patch).is_ok();
    let patch = (!patch.0.is_empty() && applies).then(|| serde_json::to_value(patch).unwrap());
    Some(Answer::Allowed { uid, patch })
}

/// The webhook answers as [`kube_answer`] says.
fn agrees_with_kube(body: &[u8], ns: &BTreeMap<String, String>) -> Result<(), TestCaseError> {
    let got = answer_of(&handle(body, ns));
    if let Some(want) = kube_answer(body, ns) {
        prop_assert_eq!(got, want, "{}", String::from_utf8_lossy(body));
    }
    Ok(())
}

/// One change to a review at the JSON level.
#[derive(Clone, Debug)]
enum Edit {
    Drop,
    Rename,
    Replace(Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::Drop),
        Just(Edit::Rename),
        any_json().prop_map(Edit::Replace)
    ]
}

/// The JSON pointers of every member and element under `value`.
fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v))
            .collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => Vec::new(),
    };
    for (token, child) in children {
        let path = format!("{at}/{token}");
        out.push(path.clone());
        pointers(child, &path, out);
    }
}

/// Drops the member or element at `at`, renames it (members only) or replaces its value.
fn apply(review: &mut Value, at: &str, edit: Edit) {
    let (parent, token) = at.rsplit_once('/').expect("a pointer");
    let key = token.replace("~1", "/").replace("~0", "~");
    match (review.pointer_mut(parent), edit) {
        (Some(Value::Object(m)), Edit::Drop) => {
            m.remove(&key);
        }
        (Some(Value::Object(m)), Edit::Rename) => {
            if let Some(v) = m.remove(&key) {
                m.insert(format!("{key}X"), v);
            }
        }
        (Some(Value::Array(a)), Edit::Drop | Edit::Rename) => {
            a.remove(key.parse::<usize>().expect("an index"));
        }
        (_, Edit::Replace(new)) => *review.pointer_mut(at).expect("the path") = new,
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&handle(&body, &BTreeMap::new()), None);
        agrees_with_kube(&body, &BTreeMap::new())?;
    }

    #[test]
    fn mangled_reviews(
        meta in metadata(),
        ns in annotations(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let object = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {} });
        let mut body = serde_json::to_vec(&review("u", "Pod", "CREATE", "app", object)).unwrap();
        for (i, b) in edits {
            let i = i.index(body.len());
            body[i] = b;
        }
        check(&handle(&body, &ns), None);
        agrees_with_kube(&body, &ns)?;
    }

    #[test]
    fn mangled_review_shapes(
        meta in metadata(),
        ns in annotations(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), edit()), 1..3),
    ) {
        let object = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {} });
        let mut review = review("u", "Pod", "CREATE", "app", object);
        let request = review["request"].as_object_mut().unwrap();
        request.insert("requestKind".into(), request["kind"].clone());
        request.insert("requestResource".into(), request["resource"].clone());
        request.insert("name".into(), json!("p"));
        request.insert("dryRun".into(), json!(false));
        request.insert("oldObject".into(), Value::Null);
        request.insert("userInfo".into(), json!({ "username": "me", "groups": ["g"], "extra": { "k": ["v"] } }));
        for (i, edit) in edits {
            let mut at = Vec::new();
            pointers(&review, "", &mut at);
            let at = i.get(at.as_slice()).clone();
            apply(&mut review, &at, edit);
        }
        let body = serde_json::to_vec(&review).unwrap();
        check(&handle(&body, &ns), None);
        agrees_with_kube(&body, &ns)?;
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
        agrees_with_kube(&body, &ns)?;
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

    /// Aux-chain mode on arbitrary pods and namespaces: the pod's networks annotation comes out as it
    /// went in (present or not, whatever its text), the patch applies and a second decision on the
    /// patched pod adds nothing.
    #[test]
    fn aux_chain_mode_never_touches_networks(
        meta in metadata(),
        ns in annotations(),
        namespace in prop_oneof![Just("linkerd".to_string()), Just("app".to_string())],
    ) {
        let mut cfg = cfg();
        cfg.nad.attach = rules::attach::Attach::AuxChain;
        let pod = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {} });
        let Ok(object_meta) = ObjectMeta::deserialize(&pod["metadata"]) else {
            return Ok(());
        };
        let none = PodContainers::default();
        let d = decide(&object_meta, &none, &namespace, Some(&ns), &cfg);
        let mut patched = pod.clone();
        json_patch::patch(&mut patched, &d.patch).expect("the patch applies to the pod");
        let networks = |p: &Value| p["metadata"]["annotations"].get(vocab::NETWORKS_ANNOTATION).cloned();
        prop_assert_eq!(networks(&patched), networks(&pod));
        let again = ObjectMeta::deserialize(&patched["metadata"]).expect("patched metadata");
        let second = decide(&again, &none, &namespace, Some(&ns), &cfg);
        prop_assert!(second.patch.0.is_empty(), "second patch {:?}", second.patch);
    }

    /// Any securityContext shapes on Linkerd's containers in a namespace with a range: the patch
    /// applies, touches only the proxy's and the validator's securityContext, is idempotent, and leaves
    /// the proxy as the annotated uid and the validator inside the range but not as the proxy.
    #[test]
    fn arbitrary_security_contexts(
        containers in container_list(),
        init_containers in container_list(),
        user_uid in prop::option::of(prop_oneof![
            Just("1234".to_string()),
            (1000650000u32..1000660000).prop_map(|u| u.to_string()),
            "[0-9a-z]{0,6}",
        ]),
        range in prop_oneof![Just("1000650000/10000".to_string()), "[0-9]{1,10}/[0-9]{1,5}"],
    ) {
        let mut annotations = json!({ (vocab::MULTUS_ANNOTATION): "enabled" });
        if let Some(u) = &user_uid {
            annotations[vocab::PROXY_UID_ANNOTATION] = json!(u);
        }
        let object = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p", "annotations": annotations },
            "spec": { "containers": containers, "initContainers": init_containers },
        });
        let ns = BTreeMap::from([(vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(), range.clone())]);
        let body = serde_json::to_vec(&review("u", "Pod", "CREATE", "app", object.clone())).unwrap();
        agrees_with_kube(&body, &ns)?;
        let mut patched = object.clone();
        if let Some(patch) = check(&handle(&body, &ns), Some("u")) {
            for op in &patch.0 {
                let path = op.path().to_string();
                let allowed = path.starts_with("/metadata/annotations")
                    || path.split('/').nth(4) == Some("securityContext")
                        && [vocab::PROXY_CONTAINER, vocab::VALIDATOR_CONTAINER].contains(
                            &patched.pointer(&path.split('/').take(4).collect::<Vec<_>>().join("/"))
                                .and_then(|c| c["name"].as_str()).unwrap_or_default(),
                        );
                prop_assert!(allowed, "{path}");
            }
            json_patch::patch(&mut patched, &patch).expect("the patch applies to the pod");
            let again = serde_json::to_vec(&review("v", "Pod", "CREATE", "app", patched.clone())).unwrap();
            let second = check(&handle(&again, &ns), Some("v"));
            prop_assert!(second.is_none(), "second patch {:?}", second);
        }
        // Where the webhook chose a uid inside the range, the containers agree with it.
        let Ok(range) = UidRange::parse(&range) else { return Ok(()) };
        let uid = patched["metadata"]["annotations"][vocab::PROXY_UID_ANNOTATION].as_str()
            .and_then(|u| u.parse::<vocab::Uid>().ok()).filter(|u| range.contains(*u));
        let Some(uid) = uid else { return Ok(()) };
        let pod = PodView::from_spec_json(patched.get("spec"));
        let sc_object = |list: &str, name: &str| patched["spec"][list].as_array().and_then(|l| {
            l.iter().find(|c| c["name"] == name && (list != "initContainers" || name != vocab::PROXY_CONTAINER || c["restartPolicy"] == "Always"))
        }).map(|c| c.get("securityContext").is_none_or(|sc| sc.is_object() || sc.is_null()));
        if sc_object("containers", vocab::PROXY_CONTAINER).or(sc_object("initContainers", vocab::PROXY_CONTAINER)) == Some(true) {
            prop_assert_eq!(pod.proxy_uid(), Some(uid));
        }
        if let Some(v) = pod.validator_uid() {
            if sc_object("initContainers", vocab::VALIDATOR_CONTAINER) == Some(true) && range.size > 1 {
                prop_assert!(range.contains(v) && v != uid, "validator {} proxy {}", v, uid);
            }
        }
    }
}
