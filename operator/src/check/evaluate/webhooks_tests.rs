//! Tests of the webhook lines (`webhooks.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

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
