//! The one read of a watched owner: a GET of the ReplicaSet, StatefulSet, DaemonSet or
//! ReplicationController an eviction was watched for, so the watchdog releases an owner that is
//! gone ([`Lookup`] → [`super::watchdog::Gone::judge`]). Only the owners the watchdog holds are
//! looked up, once per review (at most a few: evictions are rate-limited and all repair stops at
//! three halts); the pod store cannot tell "deleted" from "no replacement was created".

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};

use super::watchdog::Lookup;

/// The plural of each kind [`super::decide::recreating_owner`] accepts.
fn plural(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "ReplicaSet" => "replicasets",
        "StatefulSet" => "statefulsets",
        "DaemonSet" => "daemonsets",
        "ReplicationController" => "replicationcontrollers",
        _ => return None,
    })
}

/// The owner's resource, from its reference (None for a kind repair never evicts from). Always
/// version v1 (served for these four kinds since Kubernetes 1.16): an ownerReference written under
/// an older version (`apps/v1beta2`) names one the server may no longer serve, and its 404 would read
/// as "deleted".
pub fn resource(owner: &ObjectReference) -> Option<ApiResource> {
    let kind = owner.kind.as_deref()?;
    let group = owner
        .api_version
        .as_deref()?
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, "v1", kind),
        plural(kind)?,
    ))
}

/// What the API server has under the owner's name now (Ok(None): a kind repair does not know).
pub async fn look_up(
    client: &Client,
    owner: &ObjectReference,
) -> Result<Option<Lookup>, kube::Error> {
    let (Some(resource), Some(namespace), Some(name)) = (
        resource(owner),
        owner.namespace.as_deref(),
        owner.name.as_deref(),
    ) else {
        return Ok(None);
    };
    let found = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .get_opt(name)
        .await?;
    Ok(Some(match found {
        None => Lookup::Missing,
        Some(o) => Lookup::Found {
            uid: o.metadata.uid.unwrap_or_default(),
            deleting: o.metadata.deletion_timestamp.is_some(),
            replicas: o.data["spec"]["replicas"].as_i64(),
        },
    }))
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    fn owner(api_version: &str, kind: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            ..Default::default()
        }
    }

    /// The GET's URL: a wrong group or plural would 404, which reads as "deleted" and releases an
    /// owner that exists.
    #[test]
    fn each_owner_kind_is_found_where_it_is_served() {
        for (api_version, kind, url) in [
            (
                "apps/v1",
                "ReplicaSet",
                "/apis/apps/v1/namespaces/ns/replicasets",
            ),
            (
                "apps/v1",
                "StatefulSet",
                "/apis/apps/v1/namespaces/ns/statefulsets",
            ),
            (
                "apps/v1",
                "DaemonSet",
                "/apis/apps/v1/namespaces/ns/daemonsets",
            ),
            (
                "v1",
                "ReplicationController",
                "/api/v1/namespaces/ns/replicationcontrollers",
            ),
            // Written under a version the server may no longer serve: asked for in v1.
            (
                "apps/v1beta2",
                "ReplicaSet",
                "/apis/apps/v1/namespaces/ns/replicasets",
            ),
        ] {
            let r = resource(&owner(api_version, kind)).expect(kind);
            assert_eq!(DynamicObject::url_path(&r, Some("ns")), url);
        }
        assert!(resource(&owner("batch/v1", "Job")).is_none());
    }
}
