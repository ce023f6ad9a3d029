//! PURE: does the live MutatingAdmissionPolicy decide a pod as the webhook would? `check` creates
//! [`probe_pod`] with server-side dry run (nothing is stored) in an enabled namespace, and
//! [`compare`]s the pod the apiserver returns with [`decided`]: the webhook's decision
//! ([`crate::decision::decide`]) applied to the same pod, with the same [`DecisionConfig`].
//!
//! Compared: the annotations the decision sets ([`POD_ANNOTATIONS`]) and the `runAsUser` /
//! `runAsGroup` of Linkerd's proxy and validator. Nothing else: other admission (OpenShift's SCC,
//! other webhooks) may add to the pod, and the app container's uid is theirs to set.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

use crate::containers::PodContainers;
use crate::decision::{decide, DecisionConfig, POD_ANNOTATIONS};

/// The probe's `generateName`: a dry run stores nothing, and a generated name meets no pod's.
pub const PROBE_NAME_PREFIX: &str = "linkerd-multus-check-probe-";

/// A network of someone else's already in the probe's networks annotation (comma-list form, the one
/// the policy merges): the NAD need not exist, nothing runs the pod.
pub const OTHER_NETWORK: &str = "linkerd-multus-check-other@eth1";

/// The uids of Linkerd's containers the decision may move.
const CONTAINER_FIELDS: [&str; 2] = ["runAsUser", "runAsGroup"];

/// A pod that exercises every step of the decision: meshed (`linkerd.io/inject: enabled`, the proxy
/// and validator as Linkerd's injector adds them, with its uids, so an injector seeing it leaves it
/// alone), with another network in comma-list form, no proxy uid of its own (in a namespace with a
/// uid range the decision sets one from the range and moves both containers' uids into it).
/// PodSecurity's `restricted` profile admits it, so a namespace enforcing it does not refuse the probe.
pub fn probe_pod() -> Value {
    let restricted = |uid: Option<i64>| {
        let mut sc = json!({
            "allowPrivilegeEscalation": false,
            "capabilities": { "drop": ["ALL"] },
        });
        if let Some(uid) = uid {
            sc["runAsUser"] = json!(uid);
        }
        sc
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "annotations": {
                vocab::INJECT_ANNOTATION: "enabled",
                vocab::NETWORKS_ANNOTATION: OTHER_NETWORK,
            },
        },
        "spec": {
            "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
            "initContainers": [{
                "name": vocab::VALIDATOR_CONTAINER, "image": "probe",
                "securityContext": restricted(Some(65534)),
            }],
            "containers": [
                { "name": "app", "image": "probe", "securityContext": restricted(None) },
                { "name": vocab::PROXY_CONTAINER, "image": "probe",
                  "securityContext": restricted(Some(i64::from(vocab::DEFAULT_PROXY_UID))) },
            ],
        },
    })
}

/// `pod` as the webhook's decision makes it in `namespace`, whose annotations are `ns_annotations`.
/// Err: the pod's metadata cannot be read, or the decision's patch does not apply to it.
pub fn decided(
    pod: &Value,
    namespace: &str,
    ns_annotations: &BTreeMap<String, String>,
    cfg: &DecisionConfig,
) -> Result<Value, String> {
    let meta: ObjectMeta = serde_json::from_value(pod["metadata"].clone())
        .map_err(|e| format!("the probe pod's metadata: {e}"))?;
    let containers = PodContainers::from_spec(pod.get("spec"));
    let decision = decide(&meta, &containers, namespace, Some(ns_annotations), cfg);
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &decision.patch)
        .map_err(|e| format!("the decision's patch does not apply to the probe pod: {e}"))?;
    Ok(patched)
}

/// One value on which the policy and the webhook differ, each side as JSON (None: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// `annotation <key>` or `<container> <field>`.
    pub what: String,
    pub policy: Option<String>,
    pub webhook: Option<String>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |v: &Option<String>| v.as_deref().unwrap_or("nothing").to_string();
        write!(
            f,
            "{}: the policy gave {}, the webhook would give {}",
            self.what,
            shown(&self.policy),
            shown(&self.webhook)
        )
    }
}

/// What [`compare`] found: the values both sides agree on (`what = value`), and where they differ.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    pub same: Vec<String>,
    pub differences: Vec<Difference>,
}

/// Compares the pod the apiserver admitted (through the policy) with the pod the webhook's decision
/// makes ([`decided`]), on the decided annotations and Linkerd's containers' uids (every container
/// of that name in either pod).
pub fn compare(admitted: &Value, decided: &Value) -> Comparison {
    let mut values: Vec<(String, Option<String>, Option<String>)> = POD_ANNOTATIONS
        .iter()
        .map(|key| {
            let of = |pod: &Value| {
                pod["metadata"]["annotations"]
                    .get(*key)
                    .map(Value::to_string)
            };
            (format!("annotation {key}"), of(admitted), of(decided))
        })
        .collect();
    for list in ["initContainers", "containers"] {
        for name in [vocab::VALIDATOR_CONTAINER, vocab::PROXY_CONTAINER] {
            let container = |pod: &Value| {
                pod["spec"][list]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["name"] == name))
                    .cloned()
            };
            let (a, d) = (container(admitted), container(decided));
            if a.is_none() && d.is_none() {
                continue;
            }
            for field in CONTAINER_FIELDS {
                let of = |c: &Option<Value>| {
                    c.as_ref()
                        .and_then(|c| c["securityContext"].get(field))
                        .filter(|v| !v.is_null())
                        .map(Value::to_string)
                };
                values.push((format!("{name} {field}"), of(&a), of(&d)));
            }
        }
    }
    let mut comparison = Comparison::default();
    for (what, policy, webhook) in values {
        if policy == webhook {
            let value = policy.unwrap_or_else(|| "absent".into());
            comparison.same.push(format!("{what}: {value}"));
        } else {
            comparison.differences.push(Difference {
                what,
                policy,
                webhook,
            });
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespaces::NadPlacement;

    const RANGE: &str = "1000650000/10000";

    fn enabled(range: Option<&str>) -> BTreeMap<String, String> {
        let mut ns = BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]);
        if let Some(range) = range {
            ns.insert(
                vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
                range.to_string(),
            );
        }
        ns
    }

    /// The probe exercises the decision: in a uid-range namespace every compared value but the
    /// inject copy is changed by it (the networks entry appended to the comma list, the proxy uid
    /// set, both containers moved into the range). Would break if the probe stopped being a pod the
    /// decision acts on, leaving the row comparing nothing.
    #[test]
    fn the_probe_exercises_every_step() {
        let cfg = DecisionConfig::default();
        let pod = probe_pod();
        let after = decided(&pod, "apps", &enabled(Some(RANGE)), &cfg).expect("decided");
        let annotations = &after["metadata"]["annotations"];
        assert_eq!(
            annotations[vocab::NETWORKS_ANNOTATION],
            format!("{OTHER_NETWORK},{}", cfg.nad.name)
        );
        assert_eq!(
            annotations[vocab::PROXY_UID_ANNOTATION],
            (1_000_650_000 + vocab::DEFAULT_PROXY_UID_OFFSET).to_string()
        );
        assert_eq!(annotations[vocab::MULTUS_ANNOTATION], vocab::MULTUS_ENABLED);
        let changed = compare(&pod, &after);
        let what: Vec<&str> = changed
            .differences
            .iter()
            .map(|d| d.what.as_str())
            .collect();
        assert_eq!(
            what,
            [
                "annotation linkerd.io/multus",
                "annotation k8s.v1.cni.cncf.io/networks",
                "annotation config.linkerd.io/proxy-uid",
                "linkerd-network-validator runAsUser",
                "linkerd-proxy runAsUser",
            ],
            "{changed:?}"
        );
        // Without a range: the networks entry and the copy only.
        let plain = decided(&pod, "apps", &enabled(None), &cfg).expect("decided");
        assert_eq!(compare(&pod, &plain).differences.len(), 2);
    }

    /// Agreement passes with every compared value listed; each difference names the value and both
    /// sides. Would break if `compare` ignored an annotation, a container's uid, or a value one side
    /// lacks.
    #[test]
    fn differences_name_the_value_and_both_sides() {
        let cfg = DecisionConfig::default();
        let pod = probe_pod();
        let ns = enabled(Some(RANGE));
        let want = decided(&pod, "apps", &ns, &cfg).expect("decided");

        let same = compare(&want, &want);
        assert!(same.differences.is_empty(), "{same:?}");
        assert_eq!(same.same.len(), 4 + 2 * 2, "{same:?}");
        assert!(same
            .same
            .contains(&"linkerd-proxy runAsUser: 1000652102".to_string()));

        // Another offset, another NAD name: the policy of another configuration.
        let mut other = cfg.clone();
        other.uids.proxy_uid_offset = 1000;
        other.nad.placement = NadPlacement::Shared("home".into());
        let admitted = decided(&pod, "apps", &ns, &other).expect("decided");
        let found: Vec<String> = compare(&admitted, &want)
            .differences
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                format!(
                    "annotation k8s.v1.cni.cncf.io/networks: the policy gave \
                     \"{OTHER_NETWORK},home/{n}\", the webhook would give \"{OTHER_NETWORK},{n}\"",
                    n = cfg.nad.name
                ),
                "annotation config.linkerd.io/proxy-uid: the policy gave \"1000651000\", the \
                 webhook would give \"1000652102\""
                    .to_string(),
                "linkerd-proxy runAsUser: the policy gave 1000651000, the webhook would give \
                 1000652102"
                    .to_string(),
            ]
        );

        // The policy not at work at all: every value it should have set is named, absent ones too.
        let untouched = compare(&pod, &want);
        assert!(untouched
            .differences
            .iter()
            .any(|d| d.what == "annotation config.linkerd.io/proxy-uid"
                && d.policy.is_none()
                && d.to_string().contains("the policy gave nothing")));
    }
}
