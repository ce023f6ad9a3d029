//! Tests of the pod fold (`fold.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

/// A cluster where every pod row has something to say: a pod not attached, a proxy uid outside the
/// range, a pod the repairer leaves waiting for its NAD, and an opted-out namespace whose owned NAD
/// a pod still lists.
fn eventful() -> (Observed, Vec<(ObjectMeta, PodView)>) {
    let mut seen = healthy();
    seen.namespaces.push(namespace("gone", &[]));
    seen.nads.push(owned_nad("gone"));
    let spec = |proxy: i64| {
        PodView::from_spec_json(Some(&serde_json::json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": proxy } }],
        })))
    };
    let mut old = pod("app", "old", &[("linkerd.io/multus", "enabled")]);
    old.uid = Some("u-old".into());
    seen.repair_waiting = vec![RepairWaiting {
        pod: "app/old".into(),
        uid: Some("u-old".into()),
        at: None,
        message: "left running: no NAD".into(),
    }];
    let mut terminating = pod("app", "bye", &[]);
    terminating.deletion_timestamp = Some(Time(Default::default()));
    let pods = vec![
        (seen.pods[0].clone(), spec(3102)),
        (old, spec(3102)),
        (
            pod(
                "app",
                "far",
                &[("k8s.v1.cni.cncf.io/networks", "linkerd-cni")],
            ),
            spec(50_000),
        ),
        (terminating, spec(50_000)),
        (
            pod(
                "gone",
                "user",
                &[("k8s.v1.cni.cncf.io/networks", "linkerd-cni")],
            ),
            spec(3102),
        ),
    ];
    // The NAD of app is missing: the waiting pod's replacement would have none.
    seen.nads
        .retain(|n| n.metadata.namespace.as_deref() != Some("app"));
    seen.pods.clear();
    seen.containers.clear();
    (seen, pods)
}

/// If this breaks, `check` on a large cluster (which folds its pods page by page and hands
/// `evaluate_with` only what the rows found) says something else than the rows say of the same pods
/// given whole: a line lost between pages, a NAD kept for users it no longer sees.
#[test]
fn pods_folded_page_by_page_say_what_the_rows_say_of_them_whole() {
    let (seen, pods) = eventful();
    let s = settings();
    let placed = placed(&seen, &s);
    let mut fold = PodFold::new(&seen, &placed);
    // Two pages, as `check` walks them; nothing kept of a page but what the rows report.
    for page in pods.chunks(2) {
        for (meta, view) in page {
            fold.add(meta, Some(view), false);
        }
    }
    let found = fold.finish();
    let folded = evaluate_with(&seen, &s, &found);

    let mut whole = seen.clone();
    for (meta, view) in &pods {
        whole.pods.push(meta.clone());
        let key = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        );
        whole.containers.insert(key, view.clone());
    }
    assert_eq!(folded, evaluate(&whole, &s));

    assert_eq!(
        verdict(&folded, "pods").items,
        [
            "app/old: not attached to linkerd-cni (no k8s.v1.cni.cncf.io/networks entry; created \
             before its namespace was set up): restart it",
            "gone/user: its namespace opted out, but it still lists linkerd-cni in \
             k8s.v1.cni.cncf.io/networks, so the NAD stays until it is gone: restart it to leave \
             the mesh",
        ]
    );
    assert_eq!(
        verdict(&folded, "proxy-uids").items,
        ["app/far: linkerd-proxy runs as 50000, outside the namespace's uid range 1000/10000"]
    );
    assert_eq!(
        verdict(&folded, "repair").items,
        ["app/old: left running: no NAD"]
    );
    // The NAD of gone is kept for its user; the terminating pod is named by no row.
    assert_eq!(found.nad_users, BTreeMap::from([("gone".to_string(), 1)]));
    assert!(verdict(&folded, "nads")
        .items
        .iter()
        .all(|i| !i.starts_with("gone:")));
}
