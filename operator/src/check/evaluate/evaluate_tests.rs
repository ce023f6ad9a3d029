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
        sandbox_failures: BTreeMap::new(),
        repair_events: Vec::new(),
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
    let names: Vec<&str> = all.iter().map(|v| v.check).collect();
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
            &["app/typo: config.linkerd.io/proxy-uid \"21o2\" is not a uid: fix it in the workload's \
               pod template (a restart keeps it)"],
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
        let failed: Vec<&str> = all.iter().filter(|v| !v.ok).map(|v| v.check).collect();
        assert_eq!(failed, [*check], "{name}: {all:#?}");
        let v = verdict(&all, check);
        assert!(v.hint.is_some(), "{name}: a failure without a hint");
        assert_eq!(v.items, *items, "{name}");
    }
}

/// A foreign NAD where the operator would put its own is reported once, as foreign, not as stale.
#[test]
fn foreign_nad_in_an_enabled_namespace_is_reported_as_foreign_only() {
    let mut seen = healthy();
    seen.nads[1].metadata.labels = None;
    seen.nads[1].spec.config = Some("{}".into());
    let all = evaluate(&seen, &settings());
    assert!(verdict(&all, "nads").ok);
    assert_eq!(verdict(&all, "foreign-nads").items, ["app"]);
}

/// If this breaks, `check` stays silent about a proxy the rules do not exempt or a validator the SCC
/// rejects.
#[test]
fn uid_disagreements_are_listed() {
    let mut seen = healthy();
    seen.containers.insert(
        "app/web".into(),
        PodView::from_spec_json(Some(&serde_json::json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": 2102 } }],
            "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": 65534 } }],
        }))),
    );
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "proxy-uids");
    assert!(!v.ok);
    assert_eq!(
        v.items,
        [
            "app/web: linkerd-proxy runs as 2102 but config.linkerd.io/proxy-uid is 3102: the rules exempt 3102",
            "app/web: linkerd-network-validator runs as 65534, outside the namespace's uid range 1000/10000",
        ]
    );
}

/// Pods the webhook would leave alone are not flagged: restarting them would change nothing.
#[test]
fn pods_that_need_nothing_are_not_flagged() {
    let cfg = settings().decision;
    let ns = map(&[
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "disabled"),
    ]);
    assert_eq!(
        pod_problem(&pod("app", "p", &[]), "app", Some(&ns), &cfg, |_| false),
        None
    );
    // A custom uid inside the range is the admin's choice.
    let ranged = map(&[
        ("linkerd.io/multus", "enabled"),
        ("openshift.io/sa.scc.uid-range", "1000/10000"),
    ]);
    let inside = pod(
        "app",
        "p",
        &[
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "10999"),
        ],
    );
    assert_eq!(
        pod_problem(&inside, "app", Some(&ranged), &cfg, |_| false),
        None
    );
    let outside = pod(
        "app",
        "p",
        &[
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "11000"),
        ],
    );
    assert!(pod_problem(&outside, "app", Some(&ranged), &cfg, |_| false).is_some());
}

/// A terminating pod is not flagged by either pod check: it is already going (e.g. evicted by the
/// repairer).
#[test]
fn terminating_pods_are_not_flagged() {
    let mut seen = healthy();
    // Unattached, and its proxy outside the namespace's uid range 1000/10000.
    seen.pods[0] = pod(
        "app",
        "web",
        &[("config.linkerd.io/proxy-uid", "1000652102")],
    );
    let flagged = |seen: &Observed| {
        let all = evaluate(seen, &settings());
        [
            verdict(&all, "pods").items.len(),
            verdict(&all, "proxy-uids").items.len(),
        ]
    };
    assert_eq!(flagged(&seen), [1, 1]);
    seen.pods[0].deletion_timestamp = Some(Time(Default::default()));
    assert_eq!(flagged(&seen), [0, 0]);
}

/// A pod listing the operator's NAD of another namespace (kept after a `--nad-namespace` switch while
/// pods list it) is told so, not "created before its namespace was set up"; someone else's NAD there
/// is no attachment at all.
#[test]
fn pods_on_our_nad_elsewhere_are_told_why() {
    let mut seen = healthy();
    seen.nads.push(owned_nad("default"));
    seen.pods.push(pod(
        "app",
        "switched",
        &[
            ("k8s.v1.cni.cncf.io/networks", "default/linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "3102"),
        ],
    ));
    let items = |seen: &Observed| verdict(&evaluate(seen, &settings()), "pods").items.clone();
    assert_eq!(
        items(&seen),
        [
            "app/switched: attached to default/linkerd-cni, not linkerd-cni: a NAD from before a \
          --nad-namespace switch, kept only while pods list it: restart it to move it"
        ]
    );

    seen.nads.last_mut().unwrap().metadata.labels =
        Some(map(&[("app.kubernetes.io/managed-by", "helm")]));
    let items = items(&seen);
    assert_eq!(items.len(), 1);
    assert!(
        items[0].starts_with("app/switched: not attached to linkerd-cni"),
        "{items:?}"
    );
}

/// `check` names unowned linkerd-cni NADs and the flag, saying what the flag does in each namespace.
#[test]
fn unowned_nads_name_the_adopt_flag() {
    let mut seen = healthy();
    for ns in ["app", "other"] {
        seen.nads
            .retain(|n| n.metadata.namespace.as_deref() != Some(ns));
        let mut n = owned_nad(ns);
        n.metadata.labels = None;
        seen.nads.push(n);
    }
    let adopting = CheckSettings {
        adopt_unowned: true,
        ..settings()
    };
    let v = evaluate(&seen, &adopting)
        .into_iter()
        .find(|v| v.check == "foreign-nads")
        .expect("foreign-nads");
    assert!(!v.ok);
    assert_eq!(v.items.len(), 2, "{v:?}");
    assert!(
        v.items[0].starts_with("app: unowned") && v.items[0].contains("adopts it"),
        "{v:?}"
    );
    assert!(
        v.items[1].starts_with("other: unowned") && v.items[1].contains("does not opt in"),
        "{v:?}"
    );
    assert!(v
        .hint
        .unwrap_or_default()
        .contains("operator.adoptUnownedNADs=true"));
}

/// With `--nad-namespace` and `--adopt-unowned-nads`, `check` promises an adoption only where the
/// controller makes one (its `want_nad`): in the shared namespace, not in an enabled namespace.
#[test]
fn shared_mode_promises_adoption_only_in_the_shared_namespace() {
    let mut seen = healthy();
    seen.namespaces.push(namespace("shared", &[]));
    for ns in ["app", "shared"] {
        seen.nads
            .retain(|n| n.metadata.namespace.as_deref() != Some(ns));
        let mut n = owned_nad(ns);
        n.metadata.labels = None;
        seen.nads.push(n);
    }
    let adopting_shared = CheckSettings {
        adopt_unowned: true,
        ..shared_settings("shared")
    };
    let v = evaluate(&seen, &adopting_shared)
        .into_iter()
        .find(|v| v.check == "foreign-nads")
        .expect("foreign-nads");
    let item = |ns: &str| {
        v.items
            .iter()
            .find(|i| i.starts_with(&format!("{ns}: unowned")))
            .unwrap_or_else(|| panic!("no item for {ns}: {v:?}"))
    };
    assert!(
        item("app").contains("not adopted, with --nad-namespace only shared holds a NAD"),
        "{v:?}"
    );
    assert!(item("shared").contains("adopts it"), "{v:?}");
}

/// An owned NAD kept after an opt-out is not "left behind" while a pod uses it, and is once none does.
#[test]
fn kept_nad_is_expected_only_while_used() {
    let mut seen = healthy();
    seen.nads.push(owned_nad("other"));
    seen.pods.push(pod(
        "other",
        "left",
        &[("k8s.v1.cni.cncf.io/networks", "other/linkerd-cni@eth9")],
    ));
    let all = evaluate(&seen, &settings());
    assert!(verdict(&all, "nads").ok, "{all:#?}");
    assert_eq!(verdict(&all, "pods").items.len(), 1);
    seen.pods.pop();
    let all = evaluate(&seen, &settings());
    assert_eq!(
        verdict(&all, "nads").items,
        ["other: NAD left behind in a namespace that is not enabled"]
    );
    assert!(verdict(&all, "pods").ok);
}

/// Shared mode: one NAD in the shared namespace; pods attached as `shared/linkerd-cni` in either
/// format pass, an unqualified entry does not; a per-namespace NAD left behind is expected only while
/// a pod of its namespace lists it; a pod elsewhere listing the (formerly) shared NAD keeps it.
#[test]
fn shared_nad_mode() {
    let shared = shared_settings("shared");
    let config = build_config(Some(&configmap(CNI_CONFIG)), &settings().source).expect("config");
    let mut seen = healthy();
    seen.namespaces.push(namespace("shared", &[]));
    seen.nads = vec![desired_nad(
        "shared",
        "linkerd-cni",
        config.clone(),
        true,
        None,
    )];
    let networks = "k8s.v1.cni.cncf.io/networks";
    seen.pods[0] = pod(
        "app",
        "web",
        &[
            ("linkerd.io/multus", "enabled"),
            (networks, "shared/linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "3102"),
        ],
    );
    seen.pods.push(pod(
        "app",
        "json",
        &[
            ("linkerd.io/multus", "enabled"),
            (networks, r#"[{"name":"linkerd-cni","namespace":"shared"}]"#),
        ],
    ));
    let all = evaluate(&seen, &shared);
    for v in &all {
        assert!(v.ok, "{v:?}");
    }
    assert_eq!(
        verdict(&all, "nads").message,
        "1 namespace(s) have an owned, up-to-date NAD"
    );
    let mut missing = seen.clone();
    missing
        .namespaces
        .retain(|ns| ns.metadata.name.as_deref() != Some("shared"));
    let all = evaluate(&missing, &shared);
    assert_eq!(verdict(&all, "nads").items.len(), 1, "{all:#?}");
    assert!(verdict(&all, "nads").items[0]
        .starts_with("shared: the --nad-namespace namespace does not exist"));

    // Attached to the namespace's own NAD only: not as the webhook attaches today.
    seen.pods.push(pod(
        "app",
        "old",
        &[("linkerd.io/multus", "enabled"), (networks, "linkerd-cni")],
    ));
    seen.nads.push(owned_nad("app"));
    let all = evaluate(&seen, &shared);
    assert_eq!(
        verdict(&all, "pods").items,
        [
            "app/old: attached to app/linkerd-cni, not shared/linkerd-cni: a NAD from before a \
          --nad-namespace switch, kept only while pods list it: restart it to move it"
        ]
    );
    assert!(verdict(&all, "nads").ok, "kept for app/old: {all:#?}");
    seen.pods.pop();
    let all = evaluate(&seen, &shared);
    assert_eq!(
        verdict(&all, "nads").items,
        ["app: NAD left behind in a namespace that is not enabled"]
    );

    // Back to one NAD per namespace: the shared NAD stays expected while a pod of `app` lists it.
    seen.nads.pop();
    seen.nads.push(owned_nad("linkerd"));
    seen.nads.push(owned_nad("app"));
    let all = evaluate(&seen, &settings());
    assert!(verdict(&all, "nads").ok, "{all:#?}");
    seen.pods.truncate(1);
    seen.pods[0] = pod("app", "web", &[(networks, "linkerd-cni")]);
    let all = evaluate(&seen, &settings());
    assert_eq!(
        verdict(&all, "nads").items,
        ["shared: NAD left behind in a namespace that is not enabled"]
    );
}

/// If this breaks, `check` misses (or invents) the configuration order that gets meshed pods rejected
/// on OpenShift: ours is told by the path it calls, Linkerd's injector by its entry's or its Service's
/// name, whatever the configurations are called.
#[test]
fn webhook_configurations_are_told_apart() {
    let entry = |name: &str, service: &str, path: &str| MutatingWebhook {
        name: name.into(),
        client_config: WebhookClientConfig {
            service: Some(ServiceReference {
                name: service.into(),
                namespace: "ns".into(),
                path: Some(path.into()),
                port: None,
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let config = |name: &str, hooks: Vec<MutatingWebhook>| MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    };
    let told = |c: &MutatingWebhookConfiguration| {
        let w = WebhookConfiguration::of(c);
        (w.name, w.ours, w.injects_proxy)
    };
    // Linkerd's own configuration.
    let linkerd = config(
        "linkerd-proxy-injector-webhook-config",
        vec![entry(
            "linkerd-proxy-injector.linkerd.io",
            "linkerd-proxy-injector",
            "/",
        )],
    );
    assert_eq!(
        told(&linkerd),
        ("linkerd-proxy-injector-webhook-config".into(), false, true)
    );
    // By the entry's name alone, and by the Service's alone.
    let by_entry = config(
        "a",
        vec![entry("linkerd-proxy-injector.example.com", "svc", "/")],
    );
    assert_eq!(told(&by_entry), ("a".into(), false, true));
    let by_service = config(
        "b",
        vec![entry("inject.example.com", "linkerd-proxy-injector", "/")],
    );
    assert_eq!(told(&by_service), ("b".into(), false, true));
    // Linkerd's other injector adds no proxy.
    let tap = config(
        "linkerd-tap-injector-webhook-config",
        vec![entry(
            "linkerd-tap-injector.linkerd.io",
            "tap-injector",
            "/",
        )],
    );
    assert_eq!(
        told(&tap),
        ("linkerd-tap-injector-webhook-config".into(), false, false)
    );
    // Ours by its path, in any entry; an empty configuration is neither.
    let mine = config(
        "zz-linkerd-multus",
        vec![
            entry("other.example.com", "x", "/"),
            entry(
                "attach.example.com",
                "linkerd-multus-webhook",
                "/annotate-multus-v1-pod",
            ),
        ],
    );
    assert_eq!(told(&mine), ("zz-linkerd-multus".into(), true, false));
    let empty = MutatingWebhookConfiguration::default();
    assert_eq!(told(&empty), (String::new(), false, false));
}

/// If this breaks, `check` passes a cluster where every meshed pod is rejected by OpenShift's SCC
/// admission (the injector's uids are re-admitted before our reinvocation), or stops naming the fix.
#[test]
fn ours_before_the_injector_fails_where_sccs_run() {
    let mut seen = healthy();
    // The chart before the rename: release ld-controller.
    seen.webhook_configurations[1] = ours("ld-controller-linkerd-multus");
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "webhook-order");
    assert!(!v.ok, "{v:?}");
    assert!(
        v.message.starts_with(
            "ld-controller-linkerd-multus (this webhook) runs before \
             linkerd-proxy-injector-webhook-config (Linkerd's proxy injector): OpenShift's SCC admission"
        ),
        "{v:?}"
    );
    let hint = v.hint.clone().unwrap_or_default();
    assert!(
        hint.starts_with("upgrade the chart: its configuration is named zz-<fullname>"),
        "{hint}"
    );
    assert!(
        hint.ends_with(
            "recreate it under a name that sorts after linkerd-proxy-injector-webhook-config"
        ),
        "{hint}"
    );
    assert!(v.items.is_empty(), "one pair: the message names it");

    // The API group alone says SCCs run, with no uid range on an enabled namespace.
    seen.namespaces = vec![namespace("app", &[("linkerd.io/multus", "enabled")])];
    seen.serves_scc = true;
    assert!(!verdict(&evaluate(&seen, &settings()), "webhook-order").ok);
}

/// An old configuration of ours kept next to the renamed one (e.g. kustomize's `linkerd-multus` after
/// applying `zz-linkerd-multus`): the fix is deleting the old one, and every wrong pair is listed.
#[test]
fn an_old_configuration_left_next_to_the_renamed_one_is_named_for_deletion() {
    let mut seen = healthy();
    seen.webhook_configurations = vec![
        ours("linkerd-multus"),
        injector("linkerd-proxy-injector-webhook-config"),
        injector("linkerd-proxy-injector-webhook-config-2"),
        ours("zz-linkerd-multus"),
    ];
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "webhook-order");
    assert!(!v.ok, "{v:?}");
    assert!(
        v.message.starts_with(
            "linkerd-multus (this webhook) runs before linkerd-proxy-injector-webhook-config "
        ),
        "{v:?}"
    );
    assert_eq!(
        v.hint.as_deref(),
        Some(
            "zz-linkerd-multus already calls this webhook after the injector: delete the old \
             configuration(s): kubectl delete mutatingwebhookconfiguration linkerd-multus"
        )
    );
    assert_eq!(
        v.items,
        [
            "linkerd-multus runs before linkerd-proxy-injector-webhook-config",
            "linkerd-multus runs before linkerd-proxy-injector-webhook-config-2",
        ]
    );
}

/// Each passing case says why it passes, so nobody goes looking for a problem that is not there.
#[test]
fn webhook_order_passes_say_why() {
    let message = |seen: &Observed| {
        let all = evaluate(seen, &settings());
        let v = verdict(&all, "webhook-order").clone();
        assert!(v.ok, "{v:?}");
        v.message
    };
    assert_eq!(
        message(&healthy()),
        "mwc runs after linkerd-proxy-injector-webhook-config"
    );

    // Without SCCs (no SCC group, no uid range on an enabled namespace) the reinvocation fixes the
    // uids; a range on a namespace that is not enabled does not count.
    let mut seen = healthy();
    seen.webhook_configurations[1] = ours("linkerd-multus");
    seen.namespaces = vec![
        namespace("app", &[("linkerd.io/multus", "enabled")]),
        namespace("other", &[("openshift.io/sa.scc.uid-range", "1000/10000")]),
    ];
    assert_eq!(
        message(&seen),
        "linkerd-multus runs before linkerd-proxy-injector-webhook-config, which is fine without \
         OpenShift's SCCs: this webhook is reinvoked after the injector and sets the uids"
    );

    let mut seen = healthy();
    seen.webhook_configurations = vec![ours("linkerd-multus")];
    assert_eq!(
        message(&seen),
        "no MutatingWebhookConfiguration injects linkerd-proxy (Linkerd's proxy injector not found): \
         the order does not matter"
    );

    // The webhook line reports the missing configuration; this one does not repeat it.
    let mut seen = healthy();
    seen.webhook_configurations = vec![injector("linkerd-proxy-injector-webhook-config")];
    assert_eq!(
        message(&seen),
        "no MutatingWebhookConfiguration calls this webhook: no order to check"
    );
}

const ISOLATION_EVENT: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed \
    to setup network for sandbox \"9f\": plugin type=\"multus\" name=\"multus-cni-network\" failed \
    (add): [app/new:linkerd-cni]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in \
    getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: namespace isolation \
    enabled, annotation violates permission, pod is in namespace app but refers to target namespace \
    nad-home";

/// A pod that never started because Multus refuses its NAD is reported with Multus' message and the
/// fix; it is not offered "restart it" advice in the pods line, and a pod that started since, or a
/// failure of another network, is no failure of ours.
#[test]
fn a_pod_whose_sandbox_fails_over_our_nad_is_reported_as_never_started() {
    let mut seen = healthy();
    seen.pods.push(pod(
        "app",
        "new",
        &[("k8s.v1.cni.cncf.io/networks", "nad-home/linkerd-cni")],
    ));
    seen.sandbox_failures.insert(
        "app/new".into(),
        SandboxFailure {
            message: ISOLATION_EVENT.into(),
            count: 4,
            started: false,
        },
    );
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "sandboxes");
    assert!(!v.ok, "{v:?}");
    assert_eq!(v.items.len(), 1, "{v:?}");
    assert!(
        v.items[0].starts_with(
            "app/new: never started, its sandbox failed 4 time(s): [app/new:linkerd-cni]"
        ) && v.items[0].ends_with("refers to target namespace nad-home"),
        "{v:?}"
    );
    let hint = v.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("nad-home") && hint.contains("globalNamespaces"),
        "{hint}"
    );
    assert!(
        !verdict(&all, "pods")
            .items
            .iter()
            .any(|i| i.starts_with("app/new")),
        "{:?}",
        verdict(&all, "pods")
    );

    for (message, started) in [
        (ISOLATION_EVENT, true),
        (
            "failed (add): [app/new:macvlan]: plugin type=\"macvlan\" failed",
            false,
        ),
    ] {
        let mut seen = seen.clone();
        seen.sandbox_failures.insert(
            "app/new".into(),
            SandboxFailure {
                message: message.into(),
                count: 1,
                started,
            },
        );
        let all = evaluate(&seen, &settings());
        assert!(verdict(&all, "sandboxes").ok, "{message} started={started}");
    }
}

/// An owner is reported while its latest watchdog Event says halted, and no longer once resumed.
#[test]
fn halted_repair_is_reported_until_resumed() {
    let at = |s: i64| Some(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + s).unwrap());
    let event = |owner: &str, halted: bool, t: i64| RepairEvent {
        owner: owner.into(),
        halted,
        at: at(t),
        message: if halted {
            "Halted repair".into()
        } else {
            "Resumed".into()
        },
    };
    let mut seen = healthy();
    seen.repair_events = vec![
        event("app/ReplicaSet web", true, 10),
        event("app/ReplicaSet db", true, 10),
        event("app/ReplicaSet db", false, 20),
    ];
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "repair");
    assert!(!v.ok);
    assert_eq!(
        v.items,
        vec!["app/ReplicaSet web: Halted repair".to_string()]
    );
    seen.repair_events
        .push(event("app/ReplicaSet web", false, 30));
    assert!(verdict(&evaluate(&seen, &settings()), "repair").ok);
}

fn node(name: &str, isolation: Isolation) -> NodeIsolation {
    NodeIsolation {
        node: name.into(),
        isolation,
    }
}

/// If this breaks, `check` shows ✓ while every new meshed pod outside the shared NAD's namespace
/// fails its sandbox (the silent failure of issue 24): a node's Multus that refuses the configured
/// namespace fails the shared-nad line with the nodes and the fix, and the NAD and pod lines expect
/// what the operator then does (one NAD per namespace, pods attached to their own).
#[test]
fn shared_nad_refused_by_a_nodes_multus_fails_with_the_fix() {
    let shared = shared_settings("nad-home");
    let mut seen = healthy();
    seen.namespaces.push(namespace("nad-home", &[]));
    seen.node_multus = Ok(vec![
        node("n1", multus_node::isolation(true, None)),
        node("n2", Isolation::Off),
    ]);
    let all = evaluate(&seen, &shared);
    let refused = verdict(&all, "shared-nad");
    assert!(!refused.ok, "{refused:?}");
    assert!(
        refused
            .message
            .starts_with("--nad-namespace nad-home is refused by Multus on node(s) n1:"),
        "{}",
        refused.message
    );
    let hint = refused.hint.as_deref().unwrap_or_default();
    assert!(hint.contains("`default`"), "{hint}");
    assert!(
        hint.contains("add nad-home to their Multus globalNamespaces"),
        "{hint}"
    );
    assert_eq!(
        refused.items,
        ["n1: namespaceIsolation on, globalNamespaces default"]
    );
    // The operator keeps the per-namespace NADs and the webhook attaches pods to them: as expected.
    for check in ["nads", "pods", "node-multus"] {
        assert!(verdict(&all, check).ok, "{:?}", verdict(&all, check));
    }

    // Fixed on the node (nad-home in globalNamespaces): passes, and the shared NAD is now expected.
    seen.node_multus = Ok(vec![
        node("n1", multus_node::isolation(true, Some("default,nad-home"))),
        node("n2", Isolation::Off),
    ]);
    let all = evaluate(&seen, &shared);
    let allowed = verdict(&all, "shared-nad");
    assert!(allowed.ok && !allowed.warning, "{allowed:?}");
    assert!(allowed.message.contains("(2)"), "{}", allowed.message);
    let nads = verdict(&all, "nads");
    assert!(!nads.ok, "the shared NAD is missing: {nads:?}");
    assert!(
        nads.items
            .iter()
            .any(|i| i == "nad-home: no NAD linkerd-cni"),
        "{nads:?}"
    );
}

/// Nodes whose Multus cannot be read are a warning (listed), never a failure; so is a cluster where
/// no node published its Multus, or where NodeMultus cannot be listed.
#[test]
fn unreadable_or_unpublished_multus_is_a_warning() {
    let shared = shared_settings("default");
    let mut seen = healthy();
    seen.node_multus = Ok(vec![
        node(
            "n1",
            Isolation::Unknown {
                reason: "00-multus.conf: it is not valid JSON".into(),
            },
        ),
        node("n2", multus_node::isolation(true, None)),
    ]);
    let all = evaluate(&seen, &shared);
    let unknown = verdict(&all, "node-multus");
    assert!(unknown.ok && unknown.warning, "{unknown:?}");
    assert_eq!(unknown.items, ["n1: 00-multus.conf: it is not valid JSON"]);
    assert!(unknown.message.contains("1 of 2"), "{}", unknown.message);
    assert!(verdict(&all, "shared-nad").ok, "default is global on n2");
    // A warning alone leaves `check` successful.
    let alone = [unknown.clone()];
    let human = render_human(&alone);
    assert!(human.contains("‼ node-multus:"), "{human}");
    assert!(human.contains("Status check results are ✓"), "{human}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&alone)).expect("json");
    assert_eq!(json["success"], true);
    assert_eq!(json["checks"][0]["warning"], true);

    seen.node_multus = Ok(vec![]);
    let all = evaluate(&seen, &shared);
    let unpublished = verdict(&all, "shared-nad");
    assert!(unpublished.ok && unpublished.warning, "{unpublished:?}");
    assert!(verdict(&all, "node-multus").ok);

    seen.node_multus = Err("the server could not find the requested resource".into());
    let all = evaluate(&seen, &shared);
    for check in ["node-multus", "shared-nad"] {
        let v = verdict(&all, check);
        assert!(v.ok && v.warning, "{v:?}");
    }
    assert!(!verdict(&evaluate(&healthy(), &settings()), "shared-nad").warning);
}

/// `--attach aux-chain`: the same cluster judged without NADs (`evaluate_aux_tests.rs`).
#[path = "evaluate_aux_tests.rs"]
mod aux;
