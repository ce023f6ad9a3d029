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

/// The issue's case through the real apiserver: a user-set proxy uid that is also the app container's
/// (the range's first, which the restricted SCC gives a container without runAsUser). The pod is
/// admitted and kubectl shows the webhook's warning naming the container, the uid and the fix. The
/// server's own bound on runAsUser is the one `vocab::parse_proxy_uid` applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_proxy_uid_the_app_runs_as_is_admitted_with_a_warning() {
    let kube = client().await;
    let control_plane = TestNamespace::create(&kube, "wh-cp").await;
    let range = TestNamespace::create_with(
        &kube,
        "wh-collide",
        ann(&[
            (vocab::MULTUS_ANNOTATION, "enabled"),
            (vocab::OPENSHIFT_UID_RANGE_ANNOTATION, "1000650000/10000"),
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
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bundle.ca_pem);
    let _guard = create_config(
        &kube,
        &unique_name("linkerd-multus-webhook-test"),
        vec![webhook_entry(
            "pods.linkerd-multus.test",
            json!({ "url": wh.url(), "caBundle": ca }),
            &selector,
        )],
    )
    .await;
    wait_until_called(&kube, &range.name, &selector).await;

    let mut pod = pod_json(
        "collides",
        &selector,
        json!({ (vocab::PROXY_UID_ANNOTATION): "1000650000" }),
        json!({}),
    );
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "name": vocab::PROXY_CONTAINER, "image": "example.invalid/proxy",
            "securityContext": { "runAsUser": 1000650000 },
        }));
    let stderr = kubectl_create(&range.name, &pod);
    assert!(
        stderr.contains(
            "Warning: linkerd-multus: container app runs as uid 1000650000 (the first uid of the \
             namespace's uid range, which the restricted SCC gives a container without runAsUser), \
             the proxy uid the pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid \
             from the redirect, so the container's traffic bypasses the mesh; remove \
             config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app container \
             runs as"
        ),
        "{stderr}"
    );
    let stored = stored_annotations(&kube, &range.name, "collides").await;
    assert_eq!(
        stored.get(vocab::PROXY_UID_ANNOTATION).map(String::as_str),
        Some("1000650000"),
        "admitted as it was asked for"
    );
    wh.stop().await;

    // The apiserver refuses a runAsUser above the parser's bound and takes the bound itself (pods
    // without the selector label: the webhook is not asked).
    let pods = Api::<Pod>::namespaced(kube.clone(), &range.name);
    for (uid, admitted) in [
        (i64::from(vocab::MAX_KUBERNETES_UID), true),
        (i64::from(vocab::MAX_KUBERNETES_UID) + 1, false),
        (-1, false),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "generateName": "bound-" },
            "spec": { "containers": [{ "name": "app", "image": "example.invalid/app",
                                       "securityContext": { "runAsUser": uid } }] },
        }))
        .unwrap();
        let result = pods.create(&PostParams::default(), &pod).await;
        assert_eq!(result.is_ok(), admitted, "runAsUser {uid}: {result:?}");
    }
}
