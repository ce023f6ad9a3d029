//! Helpers of the repair tests (`repair.rs`, `repair_release.rs`): owners and pods as the bare
//! testbed needs them (it has no controller-manager: the tests create the pods an owner would), and
//! `check`'s repair line.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

use super::{Harness, KUBECONFIG};

pub const EVICTED: &str = "linkerd_multus_pod_repairs_total{outcome=\"evicted\"}";

/// Longer than the repairer's scan interval: every pod has been judged again since.
pub const A_SCAN: Duration = Duration::from_secs(11);

pub fn pods(client: &Client, ns: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), ns)
}

/// A real ReplicaSet (nothing here runs it) and the ownerReference its pods carry.
pub async fn replica_set(client: &Client, ns: &str, name: &str) -> OwnerReference {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "app"}]}
            }
        }
    }))
    .expect("ReplicaSet");
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ReplicaSet");
    controller_ref("apps/v1", "ReplicaSet", name, rs.metadata.uid)
}

pub fn controller_ref(
    api_version: &str,
    kind: &str,
    name: &str,
    uid: Option<String>,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.expect("uid"),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// A meshed pod (app + linkerd-proxy) without the networks annotation, as one created before its
/// namespace was enabled; `owner` None: a bare pod. Returns its uid.
pub async fn meshed_pod(
    client: &Client,
    ns: &str,
    name: &str,
    owner: Option<&OwnerReference>,
) -> String {
    let app = owner.map_or(name, |o| o.name.as_str());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "ownerReferences": owner.map(|o| vec![o]),
        },
        "spec": {"containers": [
            {"name": "app", "image": "app"},
            {"name": vocab::PROXY_CONTAINER, "image": "proxy"}
        ]}
    }))
    .expect("Pod");
    pods(client, ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod")
        .metadata
        .uid
        .expect("uid")
}

pub async fn uid_of(client: &Client, ns: &str, name: &str) -> Option<String> {
    let pod = pods(client, ns).get_opt(name).await.expect("get pod")?;
    pod.metadata.uid
}

/// Events in `ns` about the object `kind/name` with `reason`.
pub async fn events_about(
    h: &Harness,
    ns: &str,
    kind: &str,
    name: &str,
    reason: &str,
) -> Vec<Event> {
    h.events(ns, |e| {
        let about = e.regarding.as_ref();
        e.reason.as_deref() == Some(reason)
            && about.and_then(|r| r.kind.as_deref()) == Some(kind)
            && about.and_then(|r| r.name.as_deref()) == Some(name)
    })
    .await
}

/// The Events `read` returns, once there is at least one: the repairer counts its metric before it
/// posts the Event, so a test that waited for the metric may read the Events too early (seen on a
/// loaded CI machine).
pub async fn posted<F, Fut>(read: F) -> Vec<Event>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Vec<Event>>,
{
    super::eventually("the Event posted", || async {
        let events = read().await;
        (!events.is_empty()).then_some(events)
    })
    .await
}

pub const HALTED: &str = "linkerd_multus_pod_repairs_total{outcome=\"halted\"}";

/// `check`'s `repair` line with this harness's settings: whether it passed, and its items about `ns`.
pub async fn check_repair(h: &Harness, ns: &str) -> (bool, Vec<String>) {
    let (ok, _, items) = repair_line(h, ns).await;
    (ok, items)
}

/// `check`'s `repair` line with this harness's settings (repair on, the operator's namespace the
/// harness's): whether it passed, its message, and its items about `ns`.
pub async fn repair_line(h: &Harness, ns: &str) -> (bool, String, Vec<String>) {
    use linkerd_multus_operator::check::{self, CheckSettings};
    use linkerd_multus_operator::nad_config::ConfigSource;
    use linkerd_multus_operator::repair::state::StateLocation;
    use rules::decision::DecisionConfig;
    use rules::namespaces::OurNad;
    let settings = CheckSettings {
        source: ConfigSource {
            namespace: h.cni_ns.name.clone(),
            configmap: h.cm_name.clone(),
            kubeconfig: KUBECONFIG.into(),
        },
        decision: DecisionConfig {
            nad: OurNad {
                name: h.nad_name.clone(),
                linkerd_namespace: h.linkerd_ns.clone(),
                ..OurNad::default()
            },
            ..DecisionConfig::default()
        },
        adopt_unowned: false,
        node_multus_group: None,
        repair_state: Some(StateLocation::new(
            &h.cni_ns.name,
            vocab::DEFAULT_LEASE_NAME,
        )),
    };
    let line = check::check(&h.client, &settings, Duration::from_secs(1))
        .await
        .expect("check reads the cluster")
        .into_iter()
        .find(|v| v.check == "repair")
        .expect("a repair line");
    eprintln!(
        "check: {} repair: {} {:?}",
        if line.ok { "✓" } else { "×" },
        line.message,
        line.items
    );
    // Other tests share the cluster: only this namespace's items are this test's.
    let ours = line
        .items
        .into_iter()
        .filter(|i| i.starts_with(&format!("{ns}/")))
        .collect();
    (line.ok, line.message, ours)
}
