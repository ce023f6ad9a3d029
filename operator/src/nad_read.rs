//! A NAD as the operator decodes it: its identity, labels, annotations and `spec.config`, nothing else.
//!
//! Each NAD the operator writes comes back to it twice: as the write's answer and as the watch's echo.
//! Decoded as a whole `DynamicObject`, each built its managedFields as a JSON tree only to drop it:
//! 9% of the operator's CPU in a 5,000-namespace ConfigMap edit (perf, 2026-11-30). Serde skips the
//! fields not named here without building them. Still untyped where it matters: a foreign NAD of any
//! shape decodes (its config reads as None) and the kind's group is the served one (`--nad-api-group`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::core::{DynamicResourceScope, Resource};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

#[derive(Clone, Debug, Default, Deserialize)]
pub struct NadRead {
    #[serde(default, deserialize_with = "narrow_meta")]
    pub metadata: ObjectMeta,
    /// `spec.config`, when it is a string.
    #[serde(default, rename = "spec", deserialize_with = "spec_config")]
    pub config: Option<String>,
}

/// A create's answer comes back whole (kube's `create` answers with the type it sends).
impl From<DynamicObject> for NadRead {
    fn from(mut nad: DynamicObject) -> Self {
        Self {
            config: config_of(nad.data.get_mut("spec").map(Value::take)),
            metadata: nad.metadata,
        }
    }
}

/// The metadata fields the plan and the watch read; managedFields, owner references and the rest are
/// skipped unbuilt.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

fn narrow_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = Option::<Meta>::deserialize(d)?.unwrap_or_default();
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        labels: m.labels,
        annotations: m.annotations,
        ..ObjectMeta::default()
    })
}

/// A NAD's spec is small (one string), so it is read as a value; any shape is accepted.
fn spec_config<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(config_of(Option::<Value>::deserialize(d)?))
}

/// `config` of a NAD's `spec`, when the spec is an object and its config a string.
fn config_of(spec: Option<Value>) -> Option<String> {
    match spec {
        Some(Value::Object(mut spec)) => match spec.remove("config") {
            Some(Value::String(config)) => Some(config),
            _ => None,
        },
        _ => None,
    }
}

/// The same served kind as `DynamicObject`: its group and version come from the `ApiResource`.
impl Resource for NadRead {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use kube::core::WatchEvent;
    use kube::ResourceExt;
    use serde_json::json;

    use super::*;

    /// A NAD as the apiserver answers an apply, managedFields and all.
    fn as_served(spec: Value) -> Value {
        json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {
                "name": "linkerd-cni",
                "namespace": "apps",
                "uid": "u-1",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2026-12-01T00:00:00Z",
                "labels": { "app.kubernetes.io/managed-by": "linkerd-multus" },
                "annotations": { "a": "b" },
                "ownerReferences": [{ "apiVersion": "v1", "kind": "Namespace", "name": "apps", "uid": "n" }],
                "managedFields": [{
                    "manager": "linkerd-multus", "operation": "Apply", "apiVersion": "k8s.cni.cncf.io/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": { "f:metadata": { "f:labels": { "f:app.kubernetes.io/managed-by": {} } },
                                  "f:spec": { "f:config": {} } }
                }]
            },
            "spec": spec
        })
    }

    #[test]
    fn keeps_what_is_read_and_drops_the_rest() {
        let nad: NadRead =
            serde_json::from_value(as_served(json!({ "config": "{\"a\":1}" }))).expect("decodes");
        let m = &nad.metadata;
        assert_eq!(m.name.as_deref(), Some("linkerd-cni"));
        assert_eq!(m.namespace.as_deref(), Some("apps"));
        assert_eq!(m.uid.as_deref(), Some("u-1"));
        assert_eq!(m.resource_version.as_deref(), Some("42"));
        assert_eq!(
            m.labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by")),
            Some(&"linkerd-multus".to_string())
        );
        assert_eq!(
            m.annotations.as_ref().and_then(|a| a.get("a")),
            Some(&"b".to_string())
        );
        assert_eq!(nad.config.as_deref(), Some("{\"a\":1}"));
        assert!(m.managed_fields.is_none());
        assert!(m.owner_references.is_none());
        assert!(m.generation.is_none());
    }

    /// A foreign NAD of any shape still decodes, so it is seen (and judged foreign), never an error.
    #[test]
    fn foreign_shapes_decode_with_no_config() {
        for spec in [
            json!(3),
            json!("x"),
            json!(null),
            json!({ "config": 5 }),
            json!({ "config": { "cniVersion": "1.0.0" } }),
            json!({ "other": [1, 2] }),
        ] {
            let nad: NadRead = serde_json::from_value(as_served(spec.clone())).expect("decodes");
            assert_eq!(nad.config, None, "{spec}");
            assert_eq!(nad.metadata.uid.as_deref(), Some("u-1"), "{spec}");
        }
        let bare: NadRead = serde_json::from_value(json!({ "metadata": null })).expect("decodes");
        assert_eq!(bare.metadata, ObjectMeta::default());
        assert_eq!(bare.config, None);
    }

    /// The watch's frames decode into it the way kube reads them.
    #[test]
    fn decodes_a_watch_frame() {
        let frame = json!({ "type": "MODIFIED", "object": as_served(json!({ "config": "c" })) });
        let event: WatchEvent<NadRead> = serde_json::from_str(&frame.to_string()).expect("decodes");
        let WatchEvent::Modified(nad) = event else {
            panic!("not Modified: {event:?}");
        };
        assert_eq!(nad.config.as_deref(), Some("c"));
        assert_eq!(nad.resource_version().as_deref(), Some("42"));
    }

    /// A create's whole answer and the narrow decode of the same object agree.
    #[test]
    fn a_whole_object_converts_to_the_same() {
        let served = as_served(json!({ "config": "c" }));
        let whole: DynamicObject = serde_json::from_value(served.clone()).expect("whole");
        let narrow: NadRead = serde_json::from_value(served).expect("narrow");
        let converted = NadRead::from(whole);
        assert_eq!(converted.config, narrow.config);
        let (c, n) = (&converted.metadata, &narrow.metadata);
        assert_eq!(
            (
                &c.name,
                &c.namespace,
                &c.uid,
                &c.resource_version,
                &c.labels,
                &c.annotations
            ),
            (
                &n.name,
                &n.namespace,
                &n.uid,
                &n.resource_version,
                &n.labels,
                &n.annotations
            )
        );
    }
}
