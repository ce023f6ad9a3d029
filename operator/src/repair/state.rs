//! The repairer's halted owners, published where they outlive the leader and its Events: a ConfigMap
//! `<lease name>-repair` in the operator's namespace, written by the leader (server-side apply) each
//! time the set changes. A replica that gains the lead restores the halts from it, and `check` reads
//! it (its `repair` line), so neither depends on Events, which expire after the API server's
//! `--event-ttl` (1 h by default) and vanish with their namespace.
//!
//! Why a ConfigMap of its own: the Lease exists only with `--leader-elect`, the operator owns no
//! other object of its namespace, and `/metrics` is the leader's alone (`check` may run in another
//! replica). The ConfigMap is small (at most a few owners: all repair stops at three) and written
//! only when an owner is halted, released or resumed.

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use super::watchdog::Halt;

/// The ConfigMap's data keys.
pub const HALTED_KEY: &str = "halted";
pub const HALT_ALL_AT_KEY: &str = "haltAllAt";
pub const ALL_HALTED_KEY: &str = "allHalted";

/// Where the state is published: the operator's namespace, named after its Lease (`--lease-name`,
/// unique per installation whether or not it elects a leader).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLocation {
    pub namespace: String,
    pub name: String,
}

impl StateLocation {
    pub fn new(operator_namespace: &str, lease_name: &str) -> Self {
        Self {
            namespace: operator_namespace.to_string(),
            name: format!("{lease_name}-repair"),
        }
    }
}

impl std::fmt::Display for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigMap {}/{}", self.namespace, self.name)
    }
}

/// One halted owner as published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HaltedOwner {
    pub namespace: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// The evicted pod whose replacement never became Ready ("" when not known).
    #[serde(default)]
    pub evicted: String,
    pub evicted_at: Timestamp,
    pub halted_at: Timestamp,
}

impl HaltedOwner {
    /// `<namespace>/<Kind> <name>`, as `check` and the logs name an owner.
    pub fn describe(&self) -> String {
        format!("{}/{} {}", self.namespace, self.kind, self.name)
    }
}

/// What the leader publishes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// Halted owners at which all repair stops.
    pub halt_all_at: usize,
    pub halted: Vec<HaltedOwner>,
}

/// Why the published state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read the repair state from the API server")]
    Read(#[source] kube::Error),
    #[error("cannot write the repair state")]
    Write(#[source] kube::Error),
    #[error("the repair state's `{key}` is not what the operator writes: {why}")]
    Invalid { key: &'static str, why: String },
}

impl Published {
    /// The watchdog's halts, as published.
    pub fn of(halts: &[Halt<ObjectReference>], halt_all_at: usize) -> Self {
        let halted = halts
            .iter()
            .map(|h| HaltedOwner {
                namespace: h.owner.namespace.clone().unwrap_or_default(),
                api_version: h.owner.api_version.clone().unwrap_or_default(),
                kind: h.owner.kind.clone().unwrap_or_default(),
                name: h.owner.name.clone().unwrap_or_default(),
                uid: h.owner_uid.clone(),
                evicted: h.evicted.clone(),
                evicted_at: h.evicted_at,
                halted_at: h.halted_at,
            })
            .collect();
        Self {
            halt_all_at,
            halted,
        }
    }

    pub fn all_halted(&self) -> bool {
        self.halted.len() >= self.halt_all_at.max(1)
    }

    /// The halts to restore into a watchdog.
    pub fn halts(&self) -> Vec<Halt<ObjectReference>> {
        self.halted
            .iter()
            .map(|o| Halt {
                owner_uid: o.uid.clone(),
                owner: ObjectReference {
                    api_version: Some(o.api_version.clone()),
                    kind: Some(o.kind.clone()),
                    name: Some(o.name.clone()),
                    namespace: Some(o.namespace.clone()),
                    uid: Some(o.uid.clone()),
                    ..Default::default()
                },
                evicted: o.evicted.clone(),
                evicted_at: o.evicted_at,
                halted_at: o.halted_at,
            })
            .collect()
    }

    /// The ConfigMap the leader applies (the whole object: server-side apply owns every key).
    pub fn configmap(&self, at: &StateLocation) -> ConfigMap {
        let halted = serde_json::to_string(&self.halted).unwrap_or_else(|_| "[]".to_string());
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(at.name.clone()),
                namespace: Some(at.namespace.clone()),
                labels: Some(
                    [(
                        vocab::MANAGED_BY_LABEL.to_string(),
                        vocab::MANAGED_BY_VALUE.to_string(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            data: Some(
                [
                    (HALTED_KEY.to_string(), halted),
                    (HALT_ALL_AT_KEY.to_string(), self.halt_all_at.to_string()),
                    (ALL_HALTED_KEY.to_string(), self.all_halted().to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        }
    }

    /// Reads the state back from its ConfigMap.
    pub fn from_configmap(cm: &ConfigMap) -> Result<Self, StateError> {
        let data = cm.data.clone().unwrap_or_default();
        let get = |key: &'static str| {
            data.get(key).ok_or(StateError::Invalid {
                key,
                why: "missing".into(),
            })
        };
        let halted = serde_json::from_str(get(HALTED_KEY)?).map_err(|e| StateError::Invalid {
            key: HALTED_KEY,
            why: e.to_string(),
        })?;
        let halt_all_at = get(HALT_ALL_AT_KEY)?
            .parse()
            .map_err(|e: std::num::ParseIntError| StateError::Invalid {
                key: HALT_ALL_AT_KEY,
                why: e.to_string(),
            })?;
        Ok(Self {
            halt_all_at,
            halted,
        })
    }
}

/// The published state, None when there is none (no leader has published yet).
pub async fn read(client: &Client, at: &StateLocation) -> Result<Option<Published>, StateError> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), &at.namespace)
        .get_opt(&at.name)
        .await
        .map_err(StateError::Read)?;
    cm.as_ref().map(Published::from_configmap).transpose()
}

/// Applies `state` (creating the ConfigMap the first time).
pub async fn write(
    client: &Client,
    at: &StateLocation,
    state: &Published,
) -> Result<(), StateError> {
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    Api::<ConfigMap>::namespaced(client.clone(), &at.namespace)
        .patch(&at.name, &params, &Patch::Apply(&state.configmap(at)))
        .await
        .map_err(StateError::Write)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("time")
    }

    fn halt(uid: &str, kind: &str, name: &str) -> Halt<ObjectReference> {
        Halt {
            owner_uid: uid.into(),
            owner: ObjectReference {
                api_version: Some("apps/v1".into()),
                kind: Some(kind.into()),
                name: Some(name.into()),
                namespace: Some("app".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            evicted: format!("{name}-1"),
            evicted_at: t(0),
            halted_at: t(120),
        }
    }

    /// The whole ConfigMap, as `check` and the next leader read it: if a key or a field is renamed,
    /// they no longer find the halts (a halt forgotten, or `check` green while repair is off).
    #[test]
    fn the_published_configmap_and_its_reading() {
        let halts = vec![
            halt("u1", "ReplicaSet", "web-5d4"),
            halt("u2", "StatefulSet", "db"),
        ];
        let published = Published::of(&halts, 2);
        assert!(published.all_halted());
        let at = StateLocation::new("linkerd-multus", "linkerd-multus-operator");
        let cm = published.configmap(&at);
        let value = serde_json::to_value(&cm).expect("json");
        let halted: serde_json::Value =
            serde_json::from_str(value["data"]["halted"].as_str().expect("halted")).expect("json");
        assert_eq!(
            value["metadata"],
            json!({
                "name": "linkerd-multus-operator-repair",
                "namespace": "linkerd-multus",
                "labels": {"app.kubernetes.io/managed-by": "linkerd-multus-operator"},
            })
        );
        assert_eq!(value["data"]["haltAllAt"], "2");
        assert_eq!(value["data"]["allHalted"], "true");
        assert_eq!(
            halted[0],
            json!({
                "namespace": "app", "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4",
                "uid": "u1", "evicted": "web-5d4-1",
                "evictedAt": "2023-11-14T22:13:20Z", "haltedAt": "2023-11-14T22:15:20Z",
            })
        );
        let back = Published::from_configmap(&cm).expect("reads back");
        assert_eq!(back, published);
        assert_eq!(back.halts(), halts);
        assert_eq!(back.halted[1].describe(), "app/StatefulSet db");
    }

    /// A ConfigMap someone edited into something else is refused with the key that is wrong, not
    /// read as "nothing halted".
    #[test]
    fn a_broken_state_is_an_error() {
        let mut cm = Published::default().configmap(&StateLocation::new("ns", "lease"));
        assert_eq!(
            Published::from_configmap(&cm).expect("empty is fine"),
            Published::default()
        );
        cm.data
            .as_mut()
            .expect("data")
            .insert(HALTED_KEY.into(), "{".into());
        let err = Published::from_configmap(&cm).expect_err("broken");
        assert!(err.to_string().contains("`halted`"), "{err}");
        cm.data = None;
        assert!(Published::from_configmap(&cm).is_err());
    }
}
