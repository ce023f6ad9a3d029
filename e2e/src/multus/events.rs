//! The Events the thin Multus posts on the pod, as the real one (v4.2.2) delivers them: `AddedInterface`
//! for the cluster network's interface (`Add eth0 [10.1.2.3/24] from k8s-pod-network`) and a Warning
//! `NoNetworkFound` for a NAD it cannot read, from the component `multus`. The real thin plugin also
//! records one for each NAD's interface, but exits before its recorder sends them: none arrived on any
//! run of `e2e/tests/multus_agreement.rs`, so the stand-in posts none. Best effort, as Multus': a
//! failure is logged on stderr and changes nothing.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use super::conf::PodRef;

/// The component Multus' Events come from.
pub const COMPONENT: &str = "multus";

/// `Add <ifname> [<addresses>] from <network>`, the addresses of a CNI result as Go prints a list.
pub fn added_interface(ifname: &str, result: &Value, network: &str) -> String {
    let ips: Vec<&str> = result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str())
        .collect();
    format!("Add {ifname} [{}] from {network}", ips.join(" "))
}

/// The Event object, named as client-go's recorder names it (`<pod>.<hex nanoseconds>`).
pub fn event(pod: &PodRef, type_: &str, reason: &str, message: &str) -> Event {
    let now = k8s_openapi::jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", pod.name, now.as_nanosecond())),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()).filter(|u| !u.is_empty()),
            ..Default::default()
        },
        reason: Some(reason.into()),
        message: Some(message.into()),
        type_: Some(type_.into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(String::new()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Default::default()
    }
}

/// Posts `event`; a failure is only logged.
pub async fn post(client: &Client, event: Event) {
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    let api = Api::<Event>::namespaced(client.clone(), &namespace);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        eprintln!("multus-stand-in: Event {:?} not posted: {e}", event.reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_read_as_multus_own() {
        let result = json!({"ips": [{"address": "10.1.2.3/24"}, {"address": "fd00::3/64"}]});
        assert_eq!(
            added_interface("eth0", &result, "k8s-pod-network"),
            "Add eth0 [10.1.2.3/24 fd00::3/64] from k8s-pod-network"
        );
        assert_eq!(
            added_interface("net1", &json!({}), "x"),
            "Add net1 [] from x"
        );
        let pod = PodRef {
            namespace: "ns".into(),
            name: "web".into(),
            uid: "u1".into(),
            infra_container_id: "c".into(),
        };
        let e = event(&pod, "Warning", "NoNetworkFound", "gone");
        assert!(e
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("web.")));
        assert_eq!(e.involved_object.uid.as_deref(), Some("u1"));
        assert_eq!(
            e.source.and_then(|s| s.component).as_deref(),
            Some("multus")
        );
    }
}
