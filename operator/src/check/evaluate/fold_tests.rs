//! Tests of the pod fold (`fold.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

/// A cluster where every pod row has something to say: a pod not attached, a proxy uid outside the
/// range, a pod the repairer leaves waiting for its NAD, and an opted-out namespace whose owned NAD
/// a pod still lists.
fn eventful() -> (Observed, Vec<(ObjectMeta, PodView)>) {
    let (seen, pods) = eventful_specs();
    let pods = pods
        .into_iter()
        .map(|(meta, spec)| (meta, PodView::from_spec_json(Some(&spec))))
        .collect();
    (seen, pods)
}

/// [`eventful`], each pod with its spec.
fn eventful_specs() -> (Observed, Vec<(ObjectMeta, serde_json::Value)>) {
    let mut seen = healthy();
    seen.namespaces.push(namespace("gone", &[]));
    seen.nads.push(owned_nad("gone"));
    let spec = |proxy: i64| {
        serde_json::json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": proxy } }],
        })
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

/// The repairing leader folds its store's slim pods for `check` (`check/leader.rs`,
/// `check/published.rs`): if a row read a field the store does not keep, `check` would say less from
/// the leader's findings than from the pods themselves.
#[test]
fn the_leaders_slim_pods_say_what_the_pods_say() {
    use crate::check::published::Outcome;
    use crate::check::PodRows;
    use crate::repair::slim::SlimPod;
    use k8s_openapi::api::core::v1::Pod;

    let (seen, mut pods) = eventful_specs();
    // Not meshed, its app as the uid its annotation names: no row says anything of it, and the store
    // keeps no containers for it.
    pods.push((
        pod("app", "plain", &[(vocab::PROXY_UID_ANNOTATION, "3102")]),
        serde_json::json!({
            "containers": [{ "name": "app", "securityContext": { "runAsUser": 3102 } }],
        }),
    ));
    let s = settings();
    let full: Vec<Pod> = pods
        .into_iter()
        .map(|(mut metadata, spec)| {
            // What no row reads, and the store does not keep.
            metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert("example.com/other".into(), "x".into());
            metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("app".into(), "web".into());
            Pod {
                metadata,
                spec: Some(serde_json::from_value(spec).expect("spec")),
                status: None,
            }
        })
        .collect();
    let placed = placed(&seen, &s);
    let mut rows = PodRows::new(&seen, &s, &placed);
    for pod in &full {
        rows.add(&pod.metadata, &PodView::from_spec(pod.spec.as_ref()), false);
    }
    let walked = rows.finish();
    assert!(
        !walked.stale.is_empty()
            && !walked.uids.is_empty()
            && !walked.waiting.is_empty()
            && !walked.nad_users.is_empty(),
        "every row has something to say: {walked:?}"
    );
    let slim: Vec<SlimPod> = full.into_iter().map(SlimPod::from).collect();
    let (leader, folded) = crate::check::leader::fold(&seen, &s, slim.iter());
    assert_eq!(leader, Outcome::of(walked));
    assert_eq!(folded, 6);
    let kept: Vec<(&str, bool)> = slim.iter().map(|p| (p.name(), p.view.is_some())).collect();
    assert!(
        kept.iter().all(|(name, kept)| *kept != (*name == "plain")),
        "{kept:?}"
    );
}
