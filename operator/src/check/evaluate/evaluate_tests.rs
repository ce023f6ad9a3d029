//! Table tests of `check`'s verdicts: each case names what a cluster admin would be misled about if it
//! regressed.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ServiceReference, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ObjectMeta;
use rules::decision::DecisionConfig;
use rules::multus_node::{self, Isolation, NodeIsolation};
use rules::namespaces::NadPlacement;
use rules::pod::PodView;

use super::*;
use crate::check::{render_human, render_json};
use crate::desired::desired_nad;
use crate::nad_config::{build_config, ConfigSource};

const CNI_CONFIG: &str = r#"{"type":"linkerd-cni","linkerd":{"proxy-uid":2102}}"#;

/// [`settings`] with one NAD shared from `namespace` (`--nad-namespace`).
fn shared_settings(namespace: &str) -> CheckSettings {
    let mut s = settings();
    s.decision.nad.placement = NadPlacement::Shared(namespace.into());
    s
}

fn settings() -> CheckSettings {
    CheckSettings {
        source: ConfigSource {
            namespace: "linkerd-cni".into(),
            configmap: "linkerd-cni-config".into(),
            kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        },
        decision: DecisionConfig::default(),
        adopt_unowned: false,
        node_multus_group: None,
        repair_state: None,
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn namespace(name: &str, annotations: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(map(annotations)),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn configmap(config: &str) -> ConfigMap {
    ConfigMap {
        data: Some(map(&[("cni_network_config", config)])),
        ..Default::default()
    }
}

fn owned_nad(ns: &str) -> NetworkAttachmentDefinition {
    let config = build_config(Some(&configmap(CNI_CONFIG)), &settings().source).expect("config");
    desired_nad(ns, "linkerd-cni", config, false, None)
}

fn pod(ns: &str, name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        annotations: Some(map(annotations)),
        ..Default::default()
    }
}

/// A healthy cluster: control plane and one enabled namespace with owned NADs, an attached pod, a
/// reachable webhook.
fn healthy() -> Observed {
    Observed {
        crd: Ok(true),
        configmap: Some(configmap(CNI_CONFIG)),
        namespaces: vec![
            namespace("linkerd", &[]),
            namespace(
                "app",
                &[
                    ("linkerd.io/multus", "enabled"),
                    ("openshift.io/sa.scc.uid-range", "1000/10000"),
                ],
            ),
            namespace("other", &[]),
        ],
        nads: vec![owned_nad("linkerd"), owned_nad("app")],
        webhooks: vec![WebhookProbe {
            name: "mwc/attach".into(),
            target: "service ops/wh:443".into(),
            result: Ok(()),
        }],
        // Linkerd's injector sorts before ours: the order OpenShift needs.
        webhook_configurations: vec![
            injector("linkerd-proxy-injector-webhook-config"),
            ours("mwc"),
        ],
        serves_scc: false,
        pods: vec![pod(
            "app",
            "web",
            &[
                ("linkerd.io/multus", "enabled"),
                ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
                ("config.linkerd.io/proxy-uid", "3102"),
            ],
        )],
        containers: BTreeMap::from([(
            "app/web".to_string(),
            PodView::from_spec_json(Some(&serde_json::json!({
                "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": 3102 } }],
                "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": 1000 } }],
            }))),
        )]),
        node_multus: Ok(vec![]),
        node_multus_ignored: Ok(vec![]),
        node_without_network: vec![],
        node_backends: vec![],
        sandbox_failures: BTreeMap::new(),
        repair_halts: None,
        repair_waiting: Vec::new(),
        aux_chain: None,
        validator_failed: Default::default(),
    }
}

fn ours(name: &str) -> WebhookConfiguration {
    WebhookConfiguration {
        name: name.into(),
        ours: true,
        injects_proxy: false,
    }
}

fn injector(name: &str) -> WebhookConfiguration {
    WebhookConfiguration {
        name: name.into(),
        ours: false,
        injects_proxy: true,
    }
}

fn verdict<'a>(all: &'a [Verdict], check: &str) -> &'a Verdict {
    all.iter()
        .find(|v| v.check == check)
        .unwrap_or_else(|| panic!("no verdict {check}"))
}

/// If this breaks, `check` cries wolf on a healthy cluster (or stops listing a check).
#[test]
fn healthy_cluster_passes_every_check() {
    let all = evaluate(&healthy(), &settings());
    let names: Vec<&str> = all.iter().map(|v| v.check.id()).collect();
    assert_eq!(
        names,
        [
            "attach",
            "nad-crd",
            "cni-configmap",
            "node-multus",
            "shared-nad",
            "nads",
            "foreign-nads",
            "webhook",
            "webhook-order",
            "pods",
            "sandboxes",
            "repair",
            "proxy-uids"
        ]
    );
    for v in &all {
        assert!(v.ok, "{v:?}");
    }
    assert_eq!(
        verdict(&all, "nads").message,
        "2 namespace(s) have an owned, up-to-date NAD"
    );
}

/// Each broken state must turn exactly its own line red, with the objects involved listed.
#[test]
fn each_broken_state_fails_its_own_check() {
    type Breaker = fn(&mut Observed);
    let cases: &[(&str, Breaker, &str, &[&str])] = &[
        (
            "crd missing",
            |o| o.crd = Err("no CRD".into()),
            "nad-crd",
            &[],
        ),
        ("crd not established", |o| o.crd = Ok(false), "nad-crd", &[]),
        (
            "configmap missing",
            |o| o.configmap = None,
            "cni-configmap",
            &[],
        ),
        (
            "configmap broken",
            |o| o.configmap = Some(configmap("{nope")),
            "cni-configmap",
            &[],
        ),
        (
            "nad missing",
            |o| {
                o.nads
                    .retain(|n| n.metadata.namespace.as_deref() != Some("app"))
            },
            "nads",
            &["app: no NAD linkerd-cni"],
        ),
        (
            "nad stale",
            |o| o.nads[1].spec.config = Some("{}".into()),
            "nads",
            &["app: NAD config differs from the ConfigMap's"],
        ),
        (
            "owned nad left in a disabled namespace",
            |o| o.nads.push(owned_nad("other")),
            "nads",
            &["other: NAD left behind in a namespace that is not enabled"],
        ),
        (
            "foreign nad",
            |o| {
                let mut n = owned_nad("other");
                n.metadata.labels = None;
                o.nads.push(n)
            },
            "foreign-nads",
            &["other: unowned (no managed-by label, type linkerd-cni, e.g. linkerd-multus-attach-operator's): \
               --adopt-unowned-nads would take it over"],
        ),
        (
            "foreign nad of another manager",
            |o| {
                let mut n = owned_nad("other");
                n.metadata.labels = Some(map(&[("app.kubernetes.io/managed-by", "helm")]));
                o.nads.push(n)
            },
            "foreign-nads",
            &["other"],
        ),
        ("no webhook", |o| o.webhooks.clear(), "webhook", &[]),
        (
            "webhook unreachable",
            |o| o.webhooks[0].result = Err("cannot connect".into()),
            "webhook",
            &["mwc/attach → service ops/wh:443: cannot connect"],
        ),
        (
            "ours sorts before Linkerd's injector, with a uid range",
            |o| o.webhook_configurations[1].name = "linkerd-multus".into(),
            "webhook-order",
            &[],
        ),
        (
            "pod created before enabling",
            |o| o.pods.push(pod("app", "old", &[])),
            "pods",
            &["app/old: not attached to linkerd-cni (no k8s.v1.cni.cncf.io/networks entry; created before \
               its namespace was set up): restart it"],
        ),
        (
            "pod with a stale proxy uid",
            |o| {
                o.pods.push(pod(
                    "app",
                    "moved",
                    &[
                        ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
                        ("config.linkerd.io/proxy-uid", "1000652102"),
                    ],
                ))
            },
            "pods",
            &["app/moved: proxy uid 1000652102 is outside the namespace's uid range 1000/10000: restart \
               it; if its pod template sets config.linkerd.io/proxy-uid, fix the value there"],
        ),
        (
            "pod with a malformed proxy uid",
            |o| {
                o.pods.push(pod(
                    "app",
                    "typo",
                    &[
                        ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
                        ("config.linkerd.io/proxy-uid", "21o2"),
                    ],
                ))
            },
            "pods",
            &["app/typo: config.linkerd.io/proxy-uid \"21o2\" is not a uid: it is not a decimal \
               number; write the uid in digits, e.g. 2102. Fix it in the workload's pod template (a \
               restart keeps it)"],
        ),
        (
            "pod still attached after its namespace opted out",
            |o| {
                o.nads.push(owned_nad("other"));
                o.pods.push(pod(
                    "other",
                    "left",
                    &[("k8s.v1.cni.cncf.io/networks", "[{\"name\":\"linkerd-cni\"}]")],
                ));
                o.pods.push(pod("other", "plain", &[]));
            },
            "pods",
            &["other/left: its namespace opted out, but it still lists linkerd-cni in \
               k8s.v1.cni.cncf.io/networks, so the NAD stays until it is gone: restart it to leave the \
               mesh"],
        ),
    ];
    for (name, breaker, check, items) in cases {
        let mut seen = healthy();
        breaker(&mut seen);
        let all = evaluate(&seen, &settings());
        let failed: Vec<&str> = all.iter().filter(|v| !v.ok).map(|v| v.check.id()).collect();
        assert_eq!(failed, [*check], "{name}: {all:#?}");
        let v = verdict(&all, check);
        assert!(v.hint.is_some(), "{name}: a failure without a hint");
        assert_eq!(v.items, *items, "{name}");
    }
}

/// `--attach aux-chain`: the same cluster judged without NADs (`evaluate_aux_tests.rs`).
#[path = "evaluate_aux_tests.rs"]
mod aux;
#[path = "fold_tests.rs"]
mod fold;
#[path = "multus_tests.rs"]
mod multus;
#[path = "nads_tests.rs"]
mod nads;
#[path = "pods_tests.rs"]
mod pods;
#[path = "webhooks_tests.rs"]
mod webhooks;
