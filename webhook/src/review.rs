//! Reading an AdmissionReview and writing its answer, without I/O: [`parse`] either answers right away
//! or asks for the pod's namespace annotations, and [`PodReview::answer`] turns them into the reply.
//!
//! The rules that keep the apiserver happy live here: never a 500; a body that is not an
//! AdmissionReview gets a 400 with the reason; everything else gets an `allowed` review echoing the uid,
//! with a patch only when the decision made one that applies cleanly to the pod as received.
//!
//! The review is read in one pass (see `wire`) into types that borrow from the body, the pod kept as
//! text; of the pod only its metadata is then read, into an `ObjectMeta` for the decision and, for the
//! patch check, its annotations into a `Value`, and of its spec the containers' names and
//! securityContexts.

mod wire;

use std::borrow::Cow;
use std::collections::BTreeMap;

use http::StatusCode;
use json_patch::jsonptr::Pointer;
use json_patch::{Patch, PatchOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::Operation;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::metrics::outcome;
use rules::containers::{Container, PodContainers};
use rules::decision::{decide, DecisionConfig, Outcome};

/// The AdmissionReview versions answered.
const ADMISSION_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// An HTTP answer to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    /// `application/json` for reviews, `text/plain` for 4xx.
    pub json: bool,
    pub body: Vec<u8>,
    /// The metrics label of this request.
    pub outcome: &'static str,
}

impl Reply {
    pub fn bad_request(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            json: false,
            body: message.into().into_bytes(),
            outcome: outcome::BAD_REQUEST,
        }
    }

    fn review(
        api_version: &str,
        uid: &str,
        patch: Option<&str>,
        warnings: &[String],
        outcome: &'static str,
    ) -> Self {
        Self {
            status: StatusCode::OK,
            json: true,
            body: wire::answer(api_version, uid, patch, warnings),
            outcome,
        }
    }
}

/// The first step's result; borrows from the body.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// Answer now (bad request, not a pod CREATE, or no usable pod in it).
    Reply(Reply),
    /// A pod CREATE: fetch its namespace's annotations, then [`PodReview::answer`].
    Pod(Box<PodReview<'a>>),
}

/// A pod CREATE review waiting for its namespace's annotations.
#[derive(Debug)]
pub struct PodReview<'a> {
    api_version: Cow<'a, str>,
    uid: Cow<'a, str>,
    namespace: Cow<'a, str>,
    meta: ObjectMeta,
    /// The pod's metadata exactly as received, to check the patch against.
    metadata: &'a RawValue,
    /// The pod's containers' names and securityContexts, as received.
    containers: PodContainers,
}

fn bad(message: String) -> Parsed<'static> {
    Parsed::Reply(Reply::bad_request(StatusCode::BAD_REQUEST, message))
}

/// Says why `body` is refused: not JSON (at its first syntax error, as a whole-body parse finds it),
/// else not of the review's shape. Only on this path is the body parsed a second time.
fn refused(body: &[u8], shape: Option<serde_json::Error>) -> Parsed<'static> {
    bad(match (serde_json::from_slice::<Value>(body), shape) {
        (Err(e), _) => format!("the request body is not JSON: {e}"),
        (Ok(_), Some(e)) => format!("the request body is not an AdmissionReview: {e}"),
        (Ok(_), None) => "the request body is not JSON: it is not UTF-8".to_string(),
    })
}

/// Reads the body. The pod is read apart from the review, so an odd pod (say an annotation that is a
/// number) still gets an allowed answer with a warning rather than a 400.
pub fn parse(body: &[u8]) -> Parsed<'_> {
    // UTF-8 checked once up front: strings are then read unchecked, and the parts skipped unread
    // (the pod spec) cannot carry bytes that are not text.
    let Ok(text) = std::str::from_utf8(body) else {
        return refused(body, None);
    };
    let review = match serde_json::from_str::<wire::AdmissionReview>(text) {
        Ok(r) => r,
        Err(e) => return refused(body, Some(e)),
    };
    // The answer repeats the review's type, so only a real one may pass. v1beta1 is still accepted
    // (configurations listing only it get it back); everything else is not a review.
    let types = review.types;
    if types.kind != "AdmissionReview" || !ADMISSION_VERSIONS.contains(&&*types.api_version) {
        return bad(format!(
            "expected kind AdmissionReview of apiVersion {}, got kind {:?} of apiVersion {:?}",
            ADMISSION_VERSIONS.join(" or "),
            types.kind,
            types.api_version
        ));
    }
    let Some(request) = review.request else {
        return bad("the AdmissionReview has no request".to_string());
    };
    let api_version = types.api_version;
    let uid = request.uid;

    let is_pod = request.kind.group.is_empty()
        && request.kind.kind == "Pod"
        && request.sub_resource.as_ref().is_none_or(|s| s.0.is_empty());
    if !is_pod || !matches!(request.operation, Operation::Create) {
        return Parsed::Reply(Reply::review(
            &api_version,
            &uid,
            None,
            &[],
            outcome::IGNORED,
        ));
    }

    let broken = |why: String| {
        let warning = format!("linkerd-multus: pod left unchanged: {why}");
        tracing::info!(uid = %uid, %warning, "admission warning");
        Parsed::Reply(Reply::review(
            &api_version,
            &uid,
            None,
            &[warning],
            outcome::WARNING,
        ))
    };
    let object = request.object;
    let Some(metadata) = object.and_then(|pod| wire::member(pod, "metadata")) else {
        return broken("the review carries no pod metadata".to_string());
    };
    let meta = match serde_json::from_str::<ObjectMeta>(metadata.get()) {
        Ok(meta) => meta,
        Err(e) => {
            return broken(format!(
                "its metadata cannot be read: {}",
                without_position(&e)
            ))
        }
    };
    let namespace = match request.namespace {
        Some(ns) => ns.0,
        None => Cow::Owned(meta.namespace.clone().unwrap_or_default()),
    };
    if namespace.is_empty() {
        return broken("the review names no namespace".to_string());
    }
    Parsed::Pod(Box::new(PodReview {
        api_version,
        uid,
        namespace,
        meta,
        metadata,
        containers: wire::containers(object),
    }))
}

impl PodReview<'_> {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// Decides with the namespace's annotations, or with none (and a warning saying why) when they
    /// could not be read.
    pub fn answer(
        self,
        ns_annotations: Result<&BTreeMap<String, String>, &str>,
        cfg: &DecisionConfig,
    ) -> Reply {
        let lookup_warning = ns_annotations.err().map(|e| {
            format!(
                "linkerd-multus: the annotations of namespace {} could not be read ({e}); \
                 decided from the pod's own annotations: without {}: enabled on the pod itself \
                 it is admitted unattached",
                self.namespace,
                vocab::MULTUS_ANNOTATION
            )
        });
        let decision = decide(
            &self.meta,
            &self.containers,
            &self.namespace,
            ns_annotations.ok(),
            cfg,
        );
        let mut warnings: Vec<String> = lookup_warning.into_iter().collect();
        warnings.extend(decision.warnings);
        let mut label = match decision.outcome {
            Outcome::Attached => outcome::ATTACHED,
            Outcome::Unchanged => outcome::UNCHANGED,
            Outcome::Skipped => outcome::SKIPPED,
        };

        let mut patch = decision.patch;
        if !patch.0.is_empty() {
            // Never hand the apiserver a patch that does not apply: it would fail the pod's creation.
            if let Err(e) = check_applies(&patch, self.metadata, &self.containers) {
                warnings.push(format!(
                    "linkerd-multus: pod left unchanged: the patch does not apply to it ({e})"
                ));
                patch.0.clear();
            }
        }
        tracing::debug!(
            uid = %self.uid,
            namespace = %self.namespace,
            pod = self.meta.name.as_deref().or(self.meta.generate_name.as_deref()).unwrap_or(""),
            outcome = label,
            patch = %serde_json::to_string(&patch).unwrap_or_default(),
            "admission decision"
        );
        for warning in &warnings {
            tracing::info!(uid = %self.uid, namespace = %self.namespace, %warning, "admission warning");
        }
        if !warnings.is_empty() {
            label = outcome::WARNING;
        }

        let mut encoded = None;
        if !patch.0.is_empty() {
            match wire::base64_json(&patch) {
                Ok(b64) => encoded = Some(b64),
                Err(e) => {
                    warnings.push(format!(
                        "linkerd-multus: pod left unchanged: the patch cannot be encoded ({e})"
                    ));
                    label = outcome::WARNING;
                }
            }
        }
        Reply::review(
            &self.api_version,
            &self.uid,
            encoded.as_deref(),
            &warnings,
            label,
        )
    }
}

/// `e` without " at line L column C": a position inside the metadata alone would mislead.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) if e.line() > 0 => message.to_string(),
        _ => text,
    }
}

/// Applies `patch` to the parts of the pod it may touch: its annotations, as
/// `{"metadata": {"annotations": ...}}` (or `{"metadata": {}}` without them), and each container's
/// securityContext at its place in `spec`. When every operation stays under /metadata/annotations or a
/// container's securityContext that is exactly applying it to the whole pod, so any other is refused.
fn check_applies(
    patch: &Patch,
    metadata: &RawValue,
    containers: &PodContainers,
) -> Result<(), String> {
    let outside = patch.0.iter().find(|op| {
        !allowed(op.path())
            || match op {
                PatchOperation::Move(m) => !allowed(&m.from),
                PatchOperation::Copy(c) => !allowed(&c.from),
                _ => false,
            }
    });
    if let Some(op) = outside {
        return Err(format!(
            "{op} reaches outside /metadata/annotations and the containers' securityContext"
        ));
    }
    let annotations = wire::member(metadata, "annotations")
        .map(|a| serde_json::from_str::<Value>(a.get()))
        .transpose()
        .map_err(|e| e.to_string())?;
    let metadata = serde_json::Map::from_iter(annotations.map(|a| ("annotations".to_string(), a)));
    let list = |items: &[Container]| {
        Value::Array(
            items
                .iter()
                .map(|c| {
                    Value::Object(serde_json::Map::from_iter(
                        c.security_context
                            .clone()
                            .map(|sc| ("securityContext".to_string(), sc)),
                    ))
                })
                .collect(),
        )
    };
    let mut pod = serde_json::json!({
        "metadata": Value::Object(metadata),
        "spec": {
            "containers": list(&containers.containers),
            "initContainers": list(&containers.init_containers),
        },
    });
    // `patch_unsafe`: no undo log, as this copy is thrown away either way.
    json_patch::patch_unsafe(&mut pod, patch).map_err(|e| e.to_string())
}

/// True for a path under /metadata/annotations or /spec/{containers,initContainers}/N/securityContext.
fn allowed(path: &Pointer) -> bool {
    const PREFIX: &Pointer = Pointer::from_static("/metadata/annotations");
    if path.starts_with(PREFIX) {
        return true;
    }
    let mut tokens = path.tokens().map(|t| t.decoded().into_owned());
    let spec = tokens.next().is_some_and(|t| t == "spec");
    let list = tokens
        .next()
        .is_some_and(|t| t == "containers" || t == "initContainers");
    let index = tokens
        .next()
        .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()));
    let field = tokens.next().is_some_and(|t| t == "securityContext");
    spec && list && index && field
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patch(ops: Value) -> Patch {
        serde_json::from_value(ops).unwrap()
    }

    fn check(patch: &Patch, metadata: Value) -> Result<(), String> {
        check_applies(
            patch,
            &RawValue::from_string(metadata.to_string()).unwrap(),
            &PodContainers::default(),
        )
    }

    /// The check is the real `json_patch` on the received annotations, and refuses what it could not
    /// judge from them alone.
    #[test]
    fn the_patch_check() {
        let add = |path: &str| patch(json!([{ "op": "add", "path": path, "value": "v" }]));
        let meta = || json!({ "name": "p", "annotations": { "a": "b" } });
        assert_eq!(check(&add("/metadata/annotations/x"), meta()), Ok(()));
        assert_eq!(check(&add("/metadata/annotations"), json!({})), Ok(()));
        let invalid =
            |path: &str| format!("operation '/0' failed at path '{path}': path is invalid");
        for annotations in [json!("s"), json!(null), json!([])] {
            assert_eq!(
                check(
                    &add("/metadata/annotations/x"),
                    json!({ "annotations": annotations })
                ),
                Err(invalid("/metadata/annotations/x"))
            );
        }
        assert_eq!(
            check(&add("/metadata/annotations/x"), json!({ "name": "p" })),
            Err(invalid("/metadata/annotations/x"))
        );
        // The last of repeated keys counts, as when the apiserver decodes the pod.
        let repeated =
            RawValue::from_string(r#"{"annotations":{},"annotations":1}"#.into()).unwrap();
        assert_eq!(
            check_applies(
                &add("/metadata/annotations/x"),
                &repeated,
                &PodContainers::default()
            ),
            Err(invalid("/metadata/annotations/x"))
        );
        assert_eq!(
            check(&add("/metadata/labels/x"), meta()),
            Err(r#"{"op":"add","path":"/metadata/labels/x","value":"v"} reaches outside /metadata/annotations and the containers' securityContext"#.into())
        );
        assert_eq!(
            check(&add("/metadata/annotationsX"), meta()),
            Err(r#"{"op":"add","path":"/metadata/annotationsX","value":"v"} reaches outside /metadata/annotations and the containers' securityContext"#.into())
        );
        let copy =
            patch(json!([{ "op": "copy", "from": "/spec", "path": "/metadata/annotations/x" }]));
        assert_eq!(
            check(&copy, meta()),
            Err(r#"{"op":"copy","from":"/spec","path":"/metadata/annotations/x"} reaches outside /metadata/annotations and the containers' securityContext"#.into())
        );
    }

    /// A container's securityContext may be patched, at its place in the received spec; nothing else
    /// of the spec may.
    #[test]
    fn the_patch_check_on_containers() {
        let containers = PodContainers::from_spec(Some(&json!({
            "containers": [{ "name": "app" }, { "name": "p", "securityContext": { "runAsUser": 1 } }],
            "initContainers": [{ "name": "v", "securityContext": null }],
        })));
        let check = |ops: Value| {
            let metadata = RawValue::from_string("{}".into()).unwrap();
            check_applies(&patch(ops), &metadata, &containers)
        };
        let add = |path: &str, value: Value| json!([{ "op": "add", "path": path, "value": value }]);
        assert_eq!(
            check(add(
                "/spec/containers/1/securityContext/runAsUser",
                json!(7)
            )),
            Ok(())
        );
        assert_eq!(
            check(add("/spec/containers/0/securityContext", json!({}))),
            Ok(())
        );
        assert_eq!(
            check(add("/spec/initContainers/0/securityContext", json!({}))),
            Ok(())
        );
        // The app has no securityContext, so a field under it does not apply.
        assert!(check(add(
            "/spec/containers/0/securityContext/runAsUser",
            json!(7)
        ))
        .is_err());
        assert!(check(add("/spec/containers/2/securityContext", json!({}))).is_err());
        for outside in [
            "/spec/containers/1/image",
            "/spec/containers/-",
            "/spec/securityContext",
        ] {
            assert!(
                check(add(outside, json!("x")))
                    .unwrap_err()
                    .contains("reaches outside"),
                "{outside}"
            );
        }
    }
}
