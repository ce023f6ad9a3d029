//! The webhook called by the real local kube-apiserver: a MutatingWebhookConfiguration pointing at
//! `https://127.0.0.1:<port>/annotate-multus-v1-pod`, scoped by an objectSelector to this test's pods
//! (so it never touches other tests), `failurePolicy: Ignore` so a dangling one breaks nothing.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use linkerd_multus_e2e::{client, unique_name, TestNamespace};
use serde_json::{json, Value};
use support::cluster::*;
use support::*;

/// Pods created through the apiserver end up with exactly the annotations the rules call for. If the
/// response format, the patch encoding or the namespace lookup were wrong, the stored pods would differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn stored_pods_carry_the_expected_annotations() {
    let kube = client().await;
    let control_plane = TestNamespace::create(&kube, "wh-cp").await;
    let on = TestNamespace::create_with(
        &kube,
        "wh-on",
        ann(&[(vocab::MULTUS_ANNOTATION, "enabled")]),
    )
    .await;
    let off = TestNamespace::create(&kube, "wh-off").await;
    let range = TestNamespace::create_with(
        &kube,
        "wh-range",
        ann(&[
            (vocab::MULTUS_ANNOTATION, "enabled"),
            (vocab::OPENSHIFT_UID_RANGE_ANNOTATION, "1000650000/10000"),
        ]),
    )
    .await;
    let small = TestNamespace::create_with(
        &kube,
        "wh-small",
        ann(&[
            (vocab::MULTUS_ANNOTATION, "enabled"),
            (vocab::OPENSHIFT_UID_RANGE_ANNOTATION, "1000650000/1000"),
        ]),
    )
    .await;
    let no_inject = TestNamespace::create_with(
        &kube,
        "wh-noinject",
        ann(&[
            (vocab::MULTUS_ANNOTATION, "enabled"),
            (vocab::INJECT_ANNOTATION, "disabled"),
        ]),
    )
    .await;

    let dir = temp_dir();
    let bundle = write_cert(dir.path());
    let wh = Running::start(
        args(dir.path()),
        decision(&control_plane.name),
        "default",
        kube.clone(),
    )
    .await;
    let selector = unique_name("sel");
    let config_name = unique_name("linkerd-multus-webhook-test");
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bundle.ca_pem);
    let _guard = create_config(
        &kube,
        &config_name,
        vec![webhook_entry(
            "pods.linkerd-multus.test",
            json!({ "url": wh.url(), "caBundle": ca }),
            &selector,
        )],
    )
    .await;
    wait_until_called(&kube, &on.name, &selector).await;

    let n = vocab::NETWORKS_ANNOTATION;
    let m = vocab::MULTUS_ANNOTATION;
    // (pod name, namespace, pod annotations, pod labels, expected stored annotations)
    type Case<'a> = (&'a str, &'a str, Value, Value, BTreeMap<String, String>);
    let cases: Vec<Case> = vec![
        (
            "plain-in-enabled-ns",
            &on.name,
            json!({}),
            json!({}),
            ann(&[(n, "linkerd-cni"), (m, "enabled")]),
        ),
        (
            "plain-in-plain-ns",
            &off.name,
            json!({}),
            json!({}),
            ann(&[]),
        ),
        (
            "opted-in-pod-in-plain-ns",
            &off.name,
            json!({ (m): "enabled" }),
            json!({}),
            ann(&[(n, "linkerd-cni"), (m, "enabled")]),
        ),
        (
            "opted-out-pod-in-enabled-ns",
            &on.name,
            json!({ (m): "disabled" }),
            json!({}),
            ann(&[(m, "disabled")]),
        ),
        (
            "uid-range",
            &range.name,
            json!({}),
            json!({}),
            ann(&[
                (n, "linkerd-cni"),
                (m, "enabled"),
                (vocab::PROXY_UID_ANNOTATION, "1000652102"),
            ]),
        ),
        (
            "inject-disabled-ns",
            &no_inject.name,
            json!({}),
            json!({}),
            ann(&[(m, "enabled"), (vocab::INJECT_ANNOTATION, "disabled")]),
        ),
        (
            "control-plane",
            &control_plane.name,
            json!({}),
            json!({ (vocab::CONTROL_PLANE_COMPONENT_LABEL): "destination" }),
            ann(&[(n, "linkerd-cni")]),
        ),
        (
            "not-control-plane-elsewhere",
            &off.name,
            json!({}),
            json!({ (vocab::CONTROL_PLANE_COMPONENT_LABEL): "destination" }),
            ann(&[]),
        ),
        (
            "json-networks",
            &on.name,
            json!({ (n): r#"[{"name":"macvlan"}]"# }),
            json!({}),
            ann(&[
                (n, r#"[{"name":"macvlan"},{"name":"linkerd-cni"}]"#),
                (m, "enabled"),
            ]),
        ),
        (
            "comma-networks-with-us",
            &on.name,
            json!({ (n): "macvlan, linkerd-cni@l5d" }),
            json!({}),
            ann(&[(n, "macvlan, linkerd-cni@l5d"), (m, "enabled")]),
        ),
    ];
    for (name, namespace, annotations, labels, expected) in &cases {
        let stderr = kubectl_create(
            namespace,
            &pod_json(name, &selector, annotations.clone(), labels.clone()),
        );
        assert!(
            !stderr.contains("Warning"),
            "{name}: unexpected warning {stderr}"
        );
        let got = stored_annotations(&kube, namespace, name).await;
        assert_eq!(&got, expected, "case {name}");
    }

    // Warnings reach the user and the pod is left as it was (apart from the copied namespace value).
    let stderr = kubectl_create(
        &on.name,
        &pod_json("bad-networks", &selector, json!({ (n): "a,,b" }), json!({})),
    );
    assert!(stderr.contains("is not a Multus network list"), "{stderr}");
    assert_eq!(
        stored_annotations(&kube, &on.name, "bad-networks").await,
        ann(&[(n, "a,,b"), (m, "enabled")])
    );
    let stderr = kubectl_create(
        &small.name,
        &pod_json("small-range", &selector, json!({}), json!({})),
    );
    assert!(
        stderr.contains("not smaller than the range size 1000"),
        "{stderr}"
    );
    assert_eq!(
        stored_annotations(&kube, &small.name, "small-range").await,
        ann(&[(n, "linkerd-cni"), (m, "enabled")])
    );

    // Created through the client too, with generateName (no name in the review).
    let pods = Api::<Pod>::namespaced(kube.clone(), &range.name);
    let mut generated = pod_json("x", &selector, json!({}), json!({}));
    generated["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    generated["metadata"]["generateName"] = json!("gen-");
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(generated).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        created.metadata.annotations.unwrap_or_default(),
        ann(&[
            (n, "linkerd-cni"),
            (m, "enabled"),
            (vocab::PROXY_UID_ANNOTATION, "1000652102")
        ])
    );
    wh.stop().await;
}
