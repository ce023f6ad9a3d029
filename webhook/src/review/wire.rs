//! The AdmissionReview on the wire, as derived types borrowing from the body: kube's review shape (so
//! what kube's typed review refuses is still refused), minus what the webhook never reads. The pod is
//! kept as unread text, from which [`member`] takes its metadata and [`containers`] its containers; oldObject and options are skipped.
//! The answer is serialised directly.

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionResponse, Operation};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use rules::containers::{Container, PodContainers};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AdmissionReview<'a> {
    /// Flattened as in kube's review, which also makes serde read the review from a JSON object only.
    #[serde(flatten, borrow)]
    pub types: TypeMeta<'a>,
    #[serde(borrow, default)]
    pub request: Option<Request<'a>>,
    /// Never sent to a webhook; typed only so a malformed one is refused as kube does.
    #[serde(default, rename = "response")]
    _response: Option<AdmissionResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TypeMeta<'a> {
    #[serde(borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// kube's `AdmissionRequest`; the fields not read are checked for shape only.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(super) struct Request<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Gvk<'a>,
    #[serde(borrow)]
    resource: Gvr<'a>,
    #[serde(borrow, default)]
    pub sub_resource: Option<Text<'a>>,
    #[serde(borrow, default)]
    request_kind: Option<Gvk<'a>>,
    #[serde(borrow, default)]
    request_resource: Option<Gvr<'a>>,
    #[serde(borrow, default)]
    request_sub_resource: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Text<'a>,
    #[serde(borrow, default)]
    pub namespace: Option<Text<'a>>,
    pub operation: Operation,
    user_info: UserInfo,
    /// The pod, unread: an odd one gets a warning, not a 400.
    #[serde(borrow, default)]
    pub object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
#[allow(dead_code)]
pub(super) struct Gvk<'a> {
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    #[serde(borrow)]
    version: Text<'a>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub(super) struct Gvr<'a> {
    #[serde(borrow)]
    group: Text<'a>,
    #[serde(borrow)]
    version: Text<'a>,
    #[serde(borrow)]
    resource: Text<'a>,
    #[serde(borrow, default)]
    api_version: Text<'a>,
}

/// A string, borrowed from the body unless it has escapes.
#[derive(Default, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// The member `name` of the JSON object `value` (the last one, as the apiserver reads a repeated key),
/// unread; none when `value` is not an object.
pub(super) fn member<'a>(value: &'a RawValue, name: &str) -> Option<&'a RawValue> {
    let mut members: BTreeMap<Text<'a>, &'a RawValue> = serde_json::from_str(value.get()).ok()?;
    members.remove(name)
}

/// The containers of `pod` (its `spec.containers` and `spec.initContainers`): each one's name and
/// securityContext, read as [`PodContainers::from_spec`] reads them from a `Value`.
pub(super) fn containers(pod: Option<&RawValue>) -> PodContainers {
    let spec = pod.and_then(|p| member(p, "spec"));
    let list = |key: &str| -> Vec<Container> {
        let Some(items) = spec.and_then(|s| member(s, key)) else {
            return Vec::new();
        };
        let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(items.get()) else {
            return Vec::new();
        };
        items
            .into_iter()
            .map(|item| Container {
                name: member(item, "name")
                    .and_then(|n| serde_json::from_str::<String>(n.get()).ok()),
                security_context: member(item, "securityContext")
                    .and_then(|sc| serde_json::from_str(sc.get()).ok()),
                restart_policy: member(item, "restartPolicy")
                    .and_then(|r| serde_json::from_str::<String>(r.get()).ok()),
            })
            .collect()
    };
    PodContainers {
        containers: list("containers"),
        init_containers: list("initContainers"),
        pod_run_as_user: spec
            .and_then(|s| member(s, "securityContext"))
            .and_then(|sc| member(sc, "runAsUser"))
            .and_then(|u| serde_json::from_str::<i64>(u.get()).ok())
            .and_then(vocab::uid_from_kubernetes),
    }
}

/// The answer: an allowed review. Field order as kube's `AdmissionResponse` went through a `Value`
/// (the patch, inserted last, comes last).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    /// kube always wrote its (empty) status.
    status: Empty,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    /// The JSON patch in base64 (the API's encoding of []byte).
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a str>,
}

#[derive(Serialize)]
struct Empty {}

/// The reply body of an allowed review.
pub(super) fn answer(
    api_version: &str,
    uid: &str,
    patch: Option<&str>,
    warnings: &[String],
) -> Vec<u8> {
    let review = ReviewOut {
        api_version,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid,
            allowed: true,
            status: Empty {},
            patch_type: patch.map(|_| "JSONPatch"),
            warnings,
            patch,
        },
    };
    let size = 160
        + uid.len()
        + patch.map_or(0, str::len)
        + warnings.iter().map(|w| w.len() + 3).sum::<usize>();
    let mut body = Vec::with_capacity(size);
    match serde_json::to_writer(&mut body, &review) {
        Ok(()) => body,
        // Strings and a bool into a Vec cannot fail; this keeps the "never a 500" promise anyway.
        Err(_) => serde_json::json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": { "uid": uid, "allowed": true }
        })
        .to_string()
        .into_bytes(),
    }
}

/// A JSON patch as the base64 of its JSON (encoded in one go: through a base64 writer, serde's many
/// small writes cost more than the JSON itself).
pub(super) fn base64_json(patch: &json_patch::Patch) -> Result<String, serde_json::Error> {
    let mut json = Vec::with_capacity(96 * patch.0.len());
    serde_json::to_writer(&mut json, patch)?;
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        json,
    ))
}
