//! Reading an AdmissionReview and writing its answer, without I/O: [`parse`] either answers right away
//! or asks for the pod's namespace annotations, and [`PodReview::answer`] turns them into the reply.
//!
//! The rules that keep the apiserver happy live here: never a 500; a body that is not an
//! AdmissionReview gets a 400 with the reason; everything else gets an `allowed` review echoing the uid,
//! with a patch only when the decision made one that applies cleanly to the pod as received.

use std::collections::BTreeMap;

use http::StatusCode;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::decision::{decide, DecisionConfig, Outcome};
use crate::metrics::outcome;

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

    fn review(mut response: AdmissionResponse, outcome: &'static str) -> Self {
        let uid = response.uid.clone();
        // kube serializes the patch bytes as a JSON array of numbers; the API documents a base64
        // string (Go's encoding of []byte), so that is what goes on the wire.
        let patch = response.patch.take();
        let body = serde_json::to_value(response.into_review())
            .map(|mut review| {
                let r = review.get_mut("response").and_then(Value::as_object_mut);
                if let (Some(patch), Some(r)) = (patch, r) {
                    let b64 =
                        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, patch);
                    r.insert("patch".into(), Value::String(b64));
                }
                review
            })
            .and_then(|review| serde_json::to_vec(&review));
        let body = body.unwrap_or_else(|_| {
            // Serializing these plain types cannot fail; this keeps the "never a 500" promise anyway.
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": { "uid": uid, "allowed": true }
            })
            .to_string()
            .into_bytes()
        });
        Self {
            status: StatusCode::OK,
            json: true,
            body,
            outcome,
        }
    }
}

/// The first step's result.
#[derive(Debug)]
pub enum Parsed {
    /// Answer now (bad request, not a pod CREATE, or no usable pod in it).
    Reply(Reply),
    /// A pod CREATE: fetch its namespace's annotations, then [`PodReview::answer`].
    Pod(Box<PodReview>),
}

/// A pod CREATE review waiting for its namespace's annotations.
#[derive(Debug)]
pub struct PodReview {
    request: AdmissionRequest<DynamicObject>,
    /// The pod exactly as received, to check the patch against.
    object: Value,
    meta: ObjectMeta,
    namespace: String,
}

fn allow(request: &AdmissionRequest<DynamicObject>, warnings: Vec<String>) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}

/// Reads the body. The pod object is taken out before the review is typed, so an odd pod (say an
/// annotation that is a number) still gets an allowed answer with a warning rather than a 400.
pub fn parse(body: &[u8]) -> Parsed {
    let mut value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Parsed::Reply(Reply::bad_request(
                StatusCode::BAD_REQUEST,
                format!("the request body is not JSON: {e}"),
            ))
        }
    };
    let mut object = Value::Null;
    if let Some(request) = value.get_mut("request").and_then(Value::as_object_mut) {
        object = request.remove("object").unwrap_or(Value::Null);
        request.remove("oldObject");
    }
    let review: AdmissionReview<DynamicObject> = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            return Parsed::Reply(Reply::bad_request(
                StatusCode::BAD_REQUEST,
                format!("the request body is not an AdmissionReview: {e}"),
            ))
        }
    };
    // The answer repeats the review's type, so only a real one may pass. v1beta1 is still accepted
    // (configurations listing only it get it back); everything else is not a review.
    if review.types.kind != "AdmissionReview"
        || !ADMISSION_VERSIONS.contains(&review.types.api_version.as_str())
    {
        return Parsed::Reply(Reply::bad_request(
            StatusCode::BAD_REQUEST,
            format!(
                "expected kind AdmissionReview of apiVersion {}, got kind {:?} of apiVersion {:?}",
                ADMISSION_VERSIONS.join(" or "),
                review.types.kind,
                review.types.api_version
            ),
        ));
    }
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => {
            return Parsed::Reply(Reply::bad_request(
                StatusCode::BAD_REQUEST,
                "the AdmissionReview has no request",
            ))
        }
    };

    let is_pod = request.kind.group.is_empty()
        && request.kind.kind == "Pod"
        && request.sub_resource.as_deref().unwrap_or("").is_empty();
    if !is_pod || !matches!(request.operation, Operation::Create) {
        return Parsed::Reply(Reply::review(allow(&request, vec![]), outcome::IGNORED));
    }

    let broken = |why: String| {
        let warning = format!("linkerd-multus: pod left unchanged: {why}");
        tracing::info!(uid = %request.uid, %warning, "admission warning");
        Parsed::Reply(Reply::review(
            allow(&request, vec![warning]),
            outcome::WARNING,
        ))
    };
    let meta: ObjectMeta = match object.get("metadata") {
        Some(m) => match serde_json::from_value(m.clone()) {
            Ok(meta) => meta,
            Err(e) => return broken(format!("its metadata cannot be read: {e}")),
        },
        None => return broken("the review carries no pod metadata".to_string()),
    };
    let namespace = request
        .namespace
        .clone()
        .or_else(|| meta.namespace.clone())
        .unwrap_or_default();
    if namespace.is_empty() {
        return broken("the review names no namespace".to_string());
    }
    Parsed::Pod(Box::new(PodReview {
        request,
        object,
        meta,
        namespace,
    }))
}

impl PodReview {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn uid(&self) -> &str {
        &self.request.uid
    }

    /// Decides with the namespace's annotations, or with none (and a warning saying why) when they
    /// could not be read.
    pub fn answer(
        self,
        ns_annotations: Result<BTreeMap<String, String>, String>,
        cfg: &DecisionConfig,
    ) -> Reply {
        let (ns, lookup_warning) = match ns_annotations {
            Ok(a) => (Some(a), None),
            Err(e) => (
                None,
                Some(format!(
                    "linkerd-multus: the annotations of namespace {} could not be read ({e}); \
                     decided from the pod's own annotations",
                    self.namespace
                )),
            ),
        };
        let decision = decide(&self.meta, &self.namespace, ns.as_ref(), cfg);
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
            let mut check = self.object.clone();
            if let Err(e) = json_patch::patch(&mut check, &patch) {
                warnings.push(format!(
                    "linkerd-multus: pod left unchanged: the patch does not apply to it ({e})"
                ));
                patch = json_patch::Patch(Vec::new());
            }
        }
        tracing::debug!(
            uid = %self.request.uid,
            namespace = %self.namespace,
            pod = self.meta.name.as_deref().or(self.meta.generate_name.as_deref()).unwrap_or(""),
            outcome = label,
            patch = %serde_json::to_string(&patch).unwrap_or_default(),
            "admission decision"
        );
        for warning in &warnings {
            tracing::info!(uid = %self.request.uid, namespace = %self.namespace, %warning, "admission warning");
        }
        if !warnings.is_empty() {
            label = outcome::WARNING;
        }

        let response = allow(&self.request, warnings);
        let response = if patch.0.is_empty() {
            response
        } else {
            match response.clone().with_patch(patch) {
                Ok(r) => r,
                Err(e) => {
                    let mut r = response;
                    r.warnings.get_or_insert_with(Vec::new).push(format!(
                        "linkerd-multus: pod left unchanged: the patch cannot be encoded ({e})"
                    ));
                    label = outcome::WARNING;
                    r
                }
            }
        };
        Reply::review(response, label)
    }
}
