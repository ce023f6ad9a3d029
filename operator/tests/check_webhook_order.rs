//! `check`'s `webhook-order` line on the real local apiserver: a configuration of ours that sorts before
//! Linkerd's injector's fails where a namespace has OpenShift's uid range, naming both; one renamed to
//! sort after it is told to delete the old; with the old gone the line passes.
//!
//! The configurations call nothing (no namespace carries their selector's label), so they gate no pod
//! of other tests; they are deleted when the test ends.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::api::PostParams;
use kube::{Api, Client};
use linkerd_multus_e2e::{unique_name, DeleteOnDrop, TestNamespace};
use linkerd_multus_operator::check::{self, CheckSettings, Verdict};
use linkerd_multus_operator::nad_config::ConfigSource;
use rules::decision::DecisionConfig;
use rules::namespaces::OurNad;
use serde_json::json;

/// A configuration named `name` with one entry `hook` calling `url`, for no pod.
async fn configuration(
    kube: &Client,
    name: &str,
    hook: &str,
    url: &str,
) -> DeleteOnDrop<MutatingWebhookConfiguration> {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": name },
        "webhooks": [{
            "name": hook,
            "clientConfig": { "url": url },
            "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"] }],
            "namespaceSelector": { "matchLabels": { "linkerd-multus-test/never": name } },
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap();
    let api = Api::<MutatingWebhookConfiguration>::all(kube.clone());
    api.create(&PostParams::default(), &config)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    DeleteOnDrop::new(api, name)
}

async fn webhook_order(kube: &Client, linkerd_namespace: &str) -> Verdict {
    let settings = CheckSettings {
        source: ConfigSource {
            namespace: "default".into(),
            configmap: unique_name("absent"),
            kubeconfig: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        },
        decision: DecisionConfig {
            nad: OurNad {
                linkerd_namespace: linkerd_namespace.into(),
                ..OurNad::default()
            },
            ..DecisionConfig::default()
        },
        adopt_unowned: false,
        node_multus_group: None,
        repair_state: None,
    };
    check::check(kube, &settings, Duration::from_secs(1))
        .await
        .expect("check reads the cluster")
        .into_iter()
        .find(|v| v.check == "webhook-order")
        .expect("a webhook-order line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn webhook_order_fails_where_linkerds_injector_runs_after_ours() {
    let kube = linkerd_multus_e2e::client().await;
    let linkerd = TestNamespace::create(&kube, "order-cp").await;
    let _ranged = TestNamespace::create_with(
        &kube,
        "order-range",
        BTreeMap::from([
            (
                vocab::MULTUS_ANNOTATION.to_string(),
                vocab::MULTUS_ENABLED.to_string(),
            ),
            (
                vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
                "1000650000/10000".to_string(),
            ),
        ]),
    )
    .await;
    let suffix = unique_name("order");
    let ours_url = format!("https://127.0.0.1:1{}", vocab::WEBHOOK_PATH);
    let old = format!("ld-controller-linkerd-multus-{suffix}");
    let injector = format!("linkerd-proxy-injector-webhook-config-{suffix}");
    let renamed = format!("zz-ld-controller-linkerd-multus-{suffix}");
    let old_guard = configuration(&kube, &old, "attach.multus.linkerd.io", &ours_url).await;
    let _injector = configuration(
        &kube,
        &injector,
        "linkerd-proxy-injector.linkerd.io",
        "https://127.0.0.1:1/",
    )
    .await;

    let v = webhook_order(&kube, &linkerd.name).await;
    let text = format!("{} {:?} {:?}", v.message, v.items, v.hint);
    assert!(
        !v.ok && text.contains(&old) && text.contains(&injector),
        "{v:?}"
    );

    let _renamed = configuration(&kube, &renamed, "attach.multus.linkerd.io", &ours_url).await;
    let v = webhook_order(&kube, &linkerd.name).await;
    let hint = v.hint.clone().unwrap_or_default();
    assert!(
        !v.ok && hint.contains(&format!("delete mutatingwebhookconfiguration {old}")),
        "{v:?}"
    );

    old_guard.delete().await;
    linkerd_multus_e2e::eventually(
        "the old configuration is gone and the line passes",
        || async {
            let v = webhook_order(&kube, &linkerd.name).await;
            (v.ok && v.message.contains(&renamed)).then_some(())
        },
    )
    .await;
}
