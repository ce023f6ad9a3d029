//! `check`'s `proxy-uids` line on the real local apiserver: a pod whose app container runs as the proxy
//! uid fails it, named with its container, uid and fix, in a namespace with OpenShift's uid range (the
//! app as the range's first) and in one without (the app as the pod's runAsUser); a pod whose proxy
//! has a uid of its own passes. The pods never run (no node): `check` reads them as stored.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use linkerd_multus_e2e::{unique_name, TestNamespace};
use linkerd_multus_operator::check::{self, CheckSettings, Verdict};
use linkerd_multus_operator::nad_config::ConfigSource;
use rules::decision::DecisionConfig;
use rules::namespaces::OurNad;
use serde_json::{json, Value};

async fn proxy_uids(kube: &Client, linkerd_namespace: &str) -> Verdict {
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
        .find(|v| v.check == "proxy-uids")
        .expect("a proxy-uids line")
}

async fn create(kube: &Client, namespace: &str, name: &str, proxy_uid: &str, spec: Value) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name, "annotations": { (vocab::PROXY_UID_ANNOTATION): proxy_uid } },
        "spec": spec,
    }))
    .unwrap();
    Api::<Pod>::namespaced(kube.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create {namespace}/{name}: {e}"));
}

fn container(name: &str, uid: Option<u32>) -> Value {
    let mut c = json!({ "name": name, "image": "example.invalid/x" });
    if let Some(uid) = uid {
        c["securityContext"] = json!({ "runAsUser": uid });
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn an_app_container_running_as_the_proxy_uid_fails_the_line() {
    let kube = linkerd_multus_e2e::client().await;
    let linkerd = TestNamespace::create(&kube, "uids-cp").await;
    let enabled = (
        vocab::MULTUS_ANNOTATION.to_string(),
        vocab::MULTUS_ENABLED.to_string(),
    );
    let ranged = TestNamespace::create_with(
        &kube,
        "uids-range",
        BTreeMap::from([
            enabled.clone(),
            (
                vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
                "1000650000/10000".to_string(),
            ),
        ]),
    )
    .await;
    let plain = TestNamespace::create_with(&kube, "uids-plain", BTreeMap::from([enabled])).await;
    let validator = json!([container(vocab::VALIDATOR_CONTAINER, Some(1000650001))]);
    create(&kube, &ranged.name, "first", "1000650000", json!({
        "containers": [container("app", None), container(vocab::PROXY_CONTAINER, Some(1000650000))],
        "initContainers": validator,
    }))
    .await;
    create(&kube, &ranged.name, "offset", "1000652102", json!({
        "containers": [container("app", None), container(vocab::PROXY_CONTAINER, Some(1000652102))],
        "initContainers": validator,
    }))
    .await;
    create(
        &kube,
        &plain.name,
        "pod-level",
        "5000",
        json!({
            "securityContext": { "runAsUser": 5000 },
            "containers": [container("app", None), container(vocab::PROXY_CONTAINER, Some(5000))],
        }),
    )
    .await;

    let v = proxy_uids(&kube, &linkerd.name).await;
    assert!(!v.ok, "{v:?}");
    let ours: Vec<&String> = v
        .items
        .iter()
        .filter(|i| {
            i.starts_with(&format!("{}/", ranged.name))
                || i.starts_with(&format!("{}/", plain.name))
        })
        .collect();
    let fix =
        "remove config.linkerd.io/proxy-uid from the pod's template, or set it to a uid no app \
               container runs as; then restart the pod";
    // Listed by pod, `<namespace>/<name>` in byte order.
    assert_eq!(
        ours,
        [
            &format!(
                "{}/pod-level: container app runs as uid 5000 (the pod's runAsUser), the proxy uid the \
                 pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the \
                 redirect, so the container's traffic bypasses the mesh; {fix}",
                plain.name
            ),
            &format!(
                "{}/first: container app runs as uid 1000650000 (the first uid of the namespace's uid \
                 range, which the restricted SCC gives a container without runAsUser), the proxy uid the \
                 pod's config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the \
                 redirect, so the container's traffic bypasses the mesh; {fix}",
                ranged.name
            ),
        ],
        "{v:?}"
    );
}

/// `check` walks the cluster's pods in pages of 500, the next fetched while one is read: a pod past
/// the first page (600 pods sort before it in its namespace) is read, and named once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_pod_past_the_first_page_is_read() {
    use futures::{stream, StreamExt};
    let kube = linkerd_multus_e2e::client().await;
    let linkerd = TestNamespace::create(&kube, "uids-pages-cp").await;
    let enabled = (
        vocab::MULTUS_ANNOTATION.to_string(),
        vocab::MULTUS_ENABLED.to_string(),
    );
    let ns = TestNamespace::create_with(&kube, "uids-pages", BTreeMap::from([enabled])).await;
    let good = json!({ "containers": [container("app", Some(1000)), container(vocab::PROXY_CONTAINER, Some(5000))] });
    stream::iter(0..600)
        .for_each_concurrent(16, |i| {
            let (kube, ns, good) = (&kube, &ns.name, good.clone());
            async move { create(kube, ns, &format!("pod-{i:03}"), "5000", good).await }
        })
        .await;
    create(&kube, &ns.name, "zz-last", "5000", json!({
        "containers": [container("app", Some(5000)), container(vocab::PROXY_CONTAINER, Some(5000))],
    }))
    .await;

    let v = proxy_uids(&kube, &linkerd.name).await;
    let ours: Vec<&String> = v
        .items
        .iter()
        .filter(|i| i.starts_with(&format!("{}/", ns.name)))
        .collect();
    assert_eq!(ours.len(), 1, "{v:?}");
    assert!(
        ours[0].starts_with(&format!(
            "{}/zz-last: container app runs as uid 5000",
            ns.name
        )),
        "{v:?}"
    );
}
