//! Tests of the NAD lines (`nads.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

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
