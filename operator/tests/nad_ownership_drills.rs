//! Failure drills of NAD ownership on the real local kube-apiserver: migration from the Go operator
//! (drill 5), opt-out while a pod still uses the NAD (drill 6), and a create racing a foreign NAD.
//! Each prints the figure it measured (`MEASURE ...`).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, PostParams};
use kube::runtime::reflector;
use kube::Api;
use linkerd_multus_operator::check::{self, CheckSettings};
use linkerd_multus_operator::events::Events;
use linkerd_multus_operator::listed::listed;
use linkerd_multus_operator::metrics::Metrics;
use linkerd_multus_operator::nad_cache::NadView;
use linkerd_multus_operator::nad_config::ConfigSource;
use linkerd_multus_operator::reconcile::{self, Context, Step};
use rules::decision::DecisionConfig;
use rules::namespaces::OurNad;
use serde_json::{json, Value};
use support::*;

/// A NAD as linkerd-multus-attach-operator wrote it: no labels at all (unless `labels`), the CNI
/// ConfigMap's template with its kubeconfig filled in and `cniVersion` 0.3.0, of plugin `type`
/// `plugin_type`.
async fn go_operator_nad(
    h: &Harness,
    ns: &str,
    plugin_type: &str,
    labels: Option<BTreeMap<String, String>>,
) -> DynamicObject {
    let mut config: Value = serde_json::from_str(&chart_template("info", "legacy")).expect("json");
    config["cniVersion"] = json!("0.3.0");
    config["type"] = json!(plugin_type);
    config["kubernetes"]["kubeconfig"] = json!(KUBECONFIG);
    let resource = linkerd_multus_operator::reconcile::nad_resource(h.group.as_deref());
    let mut nad = DynamicObject::new(&h.nad_name, &resource).within(ns);
    nad.metadata.labels = labels;
    nad.data = json!({"spec": {"config": config.to_string()}});
    h.nads(ns)
        .create(&PostParams::default(), &nad)
        .await
        .expect("create the Go operator's NAD")
}

/// Events of `type_` with `reason` inside `ns`.
async fn events(h: &Harness, ns: &str, type_: &str, reason: &str) -> Vec<Event> {
    linkerd_multus_e2e::events::events_of(&h.client, ns, type_, reason)
        .await
        .expect("list events")
}

fn resource_version(nad: &DynamicObject) -> Option<String> {
    nad.metadata.resource_version.clone()
}

/// Drill 5: the Go operator's NADs (cniVersion 0.3.0, no labels) are left alone without
/// `--adopt-unowned-nads` and adopted with it (same object, our label and config, a Normal Event);
/// a NAD of another `type`, one another manager labels, and one in a namespace that does not opt in
/// are never adopted. Prints the time from the operator's start to the adoption.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn drill5_go_operator_nads_are_adopted_only_with_the_flag() {
    let h = Harness::new("drill5").await;
    let go = h.namespace("drill5-go", Some(vocab::MULTUS_ENABLED)).await;
    let other_type = h
        .namespace("drill5-type", Some(vocab::MULTUS_ENABLED))
        .await;
    let labelled = h
        .namespace("drill5-label", Some(vocab::MULTUS_ENABLED))
        .await;
    let opted_out = h.namespace("drill5-out", None).await;
    let go_nad = go_operator_nad(&h, &go.name, vocab::PLUGIN_TYPE, None).await;
    let macvlan = go_operator_nad(&h, &other_type.name, "macvlan", None).await;
    let helm_label = BTreeMap::from([(vocab::MANAGED_BY_LABEL.to_string(), "helm".to_string())]);
    let helm = go_operator_nad(&h, &labelled.name, vocab::PLUGIN_TYPE, Some(helm_label)).await;
    let not_wanted = go_operator_nad(&h, &opted_out.name, vocab::PLUGIN_TYPE, None).await;
    let untouched = [
        (&other_type.name, &macvlan),
        (&labelled.name, &helm),
        (&opted_out.name, &not_wanted),
    ];

    // Without the flag: every one is someone else's.
    let op = h.start_operator(&[]).await;
    for ns in [&go.name, &other_type.name, &labelled.name] {
        h.wait_warning(
            ns,
            "ForeignNetworkAttachmentDefinition",
            &format!("a foreign-NAD Warning in {ns}"),
            |_| true,
        )
        .await;
    }
    eventually("every namespace reconciled", || async {
        (op.metric(RECONCILES).await >= 4.0).then_some(())
    })
    .await;
    let now = h.nad(&go.name).await.expect("Go operator's NAD");
    assert_eq!(
        resource_version(&now),
        resource_version(&go_nad),
        "untouched without the flag"
    );
    assert_eq!(op.metric(WRITES_APPLY).await, 0.0);
    op.stop().await;

    // With the flag: only the Go operator's NAD in an opted-in namespace is adopted.
    let started = Instant::now();
    let op = h.start_operator(&["--adopt-unowned-nads"]).await;
    let expected = expected_config("info", "nft");
    h.wait_nad_config(&go.name, &expected).await;
    let adopted_after = started.elapsed();
    let adopted = h.nad(&go.name).await.expect("adopted NAD");
    assert_eq!(
        adopted.metadata.uid, go_nad.metadata.uid,
        "the same object, adopted"
    );
    let event = eventually(
        "a NetworkAttachmentDefinitionAdopted Normal Event",
        || async {
            events(&h, &go.name, "Normal", "NetworkAttachmentDefinitionAdopted")
                .await
                .into_iter()
                .next()
        },
    )
    .await;
    assert!(
        event
            .note
            .unwrap_or_default()
            .contains("--adopt-unowned-nads"),
        "the Event names the flag"
    );
    // Judged foreign by this operator too (or, if broken, written to: then the loop below says which).
    eventually("the other namespaces reconciled", || async {
        let foreign = op
            .metric("linkerd_multus_controller_foreign_nads_total")
            .await;
        let mut changed = false;
        for (ns, before) in untouched {
            let now = h.nad(ns).await.map(|n| resource_version(&n));
            changed |= now != Some(resource_version(before));
        }
        (foreign >= 2.0 || changed).then_some(())
    })
    .await;
    for (ns, before) in untouched {
        let now = h.nad(ns).await.expect("NAD kept");
        assert_eq!(
            resource_version(&now),
            resource_version(before),
            "{ns}: never adopted"
        );
        assert!(
            !vocab::is_managed_by_us(now.metadata.labels.as_ref()),
            "{ns}"
        );
    }
    assert_eq!(
        op.metric(WRITES_APPLY).await,
        1.0,
        "one write: the adoption"
    );
    eprintln!("MEASURE drill 5: operator start -> Go operator's NAD adopted: {adopted_after:?}");
    op.stop().await;
}

/// `check` with this harness's settings, against the real cluster.
async fn check_items(h: &Harness, verdict: &str) -> Vec<String> {
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
        repair_state: None,
    };
    check::check(&h.client, &settings, Duration::from_secs(1))
        .await
        .expect("check reads the cluster")
        .into_iter()
        .find(|v| v.check == verdict)
        .expect("verdict")
        .items
}

/// Drill 6: after an opt-out the NAD stays while a pod lists it (in Multus' JSON format here), the
/// namespace's Event and `check` name that pod and not the others (nor a Succeeded pod that lists it:
/// it never gets another sandbox); once it is deleted, the NAD goes, the finished pod still there.
/// Prints the time from the pod's deletion to the NAD's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn drill6_opted_out_nad_stays_until_its_last_pod_is_gone() {
    let h = Harness::new("drill6").await;
    let ns = h.namespace("drill6", Some(vocab::MULTUS_ENABLED)).await;
    let op = h.start_operator(&[]).await;
    h.wait_nad_config(&ns.name, &expected_config("info", "nft"))
        .await;
    let pods = Api::<Pod>::namespaced(h.client.clone(), &ns.name);
    let pod = |name: &str, networks: Option<String>| -> Pod {
        let annotations = networks.map(|v| json!({ vocab::NETWORKS_ANNOTATION: v }));
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations.unwrap_or(json!({}))},
            "spec": {"containers": [{"name": "app", "image": "example.invalid/app"}]}
        }))
        .expect("pod")
    };
    let networks = json!([{"name": "macvlan"}, {"name": h.nad_name, "interface": "net9"}]);
    for p in [
        pod("attached", Some(networks.to_string())),
        pod("elsewhere", Some(format!("other/{}", h.nad_name))),
        pod("plain", None),
        pod("finished", Some(h.nad_name.clone())),
    ] {
        pods.create(&PostParams::default(), &p)
            .await
            .expect("create pod");
    }
    // A completed Job's pod: it lists the NAD but never gets another sandbox.
    linkerd_multus_e2e::set_pod_status(
        &h.client,
        &ns.name,
        "finished",
        json!({"phase": "Succeeded"}),
    )
    .await;

    h.annotate(&ns.name, None).await;
    let event = eventually("the in-use Warning, or the NAD gone", || async {
        if h.nad(&ns.name).await.is_none() {
            return Some(None);
        }
        h.warnings(&ns.name, "NetworkAttachmentDefinitionInUse")
            .await
            .into_iter()
            .next()
            .map(Some)
    })
    .await;
    assert!(h.nad(&ns.name).await.is_some(), "the NAD stays while used");
    let note = event.and_then(|e| e.note).unwrap_or_default();
    assert!(
        note.contains("(attached)") && !note.contains("finished"),
        "only the attached pod: {note}"
    );
    let items = check_items(&h, "pods").await;
    let ours: Vec<&String> = items
        .iter()
        .filter(|i| i.starts_with(&format!("{}/", ns.name)))
        .collect();
    assert_eq!(ours.len(), 1, "{items:?}");
    assert!(
        ours[0].starts_with(&format!("{}/attached: its namespace opted out", ns.name))
            && ours[0].contains("restart it to leave the mesh"),
        "{ours:?}"
    );
    // Several re-checks later it is still there.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(h.nad(&ns.name).await.is_some(), "the NAD stays while used");
    assert_eq!(op.metric(WRITES_DELETE).await, 0.0);

    pods.delete("attached", &Default::default())
        .await
        .expect("delete pod");
    let deleted = Instant::now();
    h.wait_nad_gone(&ns.name).await;
    eprintln!(
        "MEASURE drill 6: last attached pod deleted -> NAD gone: {:?}",
        deleted.elapsed()
    );
    let items = check_items(&h, "pods").await;
    assert!(
        !items
            .iter()
            .any(|i| i.starts_with(&format!("{}/", ns.name))),
        "{items:?}"
    );
    op.stop().await;
}

/// Create means create: the decision says "create" (from a read that saw no NAD) but a foreign NAD
/// with exactly our config appeared since. The create is refused, the NAD is judged again from a live
/// read (foreign: a Warning Event), and it stays byte for byte as it was: no label, no field manager
/// of ours. A server-side apply here would have merged into it silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn create_never_lands_on_a_nad_that_appeared_meanwhile() {
    let h = Harness::new("create-race").await;
    let ns = h
        .namespace("create-race", Some(vocab::MULTUS_ENABLED))
        .await;
    let expected = expected_config("info", "nft");
    let foreign = h.create_foreign_nad(&ns.name, &expected).await;

    let settings = h.args(&[]).settings;
    let nad_store = reflector::store::Writer::<NadView>::default().as_reader();
    let mut registry = prometheus_client::registry::Registry::default();
    let (_leader, is_leader) = tokio::sync::watch::channel(true);
    let (_, never_listed) = listed();
    let ctx = Arc::new(Context::new(
        h.client.clone(),
        settings,
        (
            reflector::store::Writer::<ConfigMap>::default().as_reader(),
            never_listed.clone(),
        ),
        (nad_store.clone(), never_listed),
        Events::new(h.client.clone(), "create-race-test".into()),
        Metrics::register(&mut registry, nad_store),
        is_leader,
    ));
    let namespace = Api::<Namespace>::all(h.client.clone())
        .get(&ns.name)
        .await
        .expect("namespace");

    let started = Instant::now();
    let step = reconcile::decide_and_write(&ctx, &namespace, &ns.name, Some(&expected), None)
        .await
        .expect("a refused create is not an error");
    let took = started.elapsed();
    assert_eq!(step, Step::Done);
    let now = h.nad(&ns.name).await.expect("foreign NAD");
    assert_eq!(now.metadata.uid, foreign.metadata.uid);
    assert_eq!(
        resource_version(&now),
        resource_version(&foreign),
        "not written into"
    );
    assert!(!vocab::is_managed_by_us(now.metadata.labels.as_ref()));
    let managers = field_managers(&now.metadata);
    assert!(
        !managers.iter().any(|m| m == vocab::FIELD_MANAGER),
        "{managers:?}"
    );
    h.wait_warning(
        &ns.name,
        "ForeignNetworkAttachmentDefinition",
        "a foreign-NAD Warning after the refused create",
        |_| true,
    )
    .await;
    eprintln!("MEASURE create race: refused create + live re-plan + report: {took:?}");
}
