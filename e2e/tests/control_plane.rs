//! The foundation every other test stands on: a kube 5 client talks to the testbed's real kube-apiserver.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use linkerd_multus_e2e::{client, kubectl_ok, TestNamespace};

/// If this breaks, no test that needs the apiserver can be trusted: the namespace must round-trip.
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn creates_a_namespace_and_reads_it_back() {
    let client = client().await;
    // Whatever version the testbed runs (LINKERD_MULTUS_APISERVER may swap it): a well-formed 1.x.
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(version.major, "1", "{version:?}");
    let minor = version.minor.trim_end_matches('+');
    assert!(minor.parse::<u32>().is_ok(), "{version:?}");
    assert!(
        version.git_version.starts_with(&format!("v1.{minor}.")),
        "{version:?}"
    );

    let annotations = BTreeMap::from([("example.com/probe".to_string(), "yes".to_string())]);
    let ns = TestNamespace::create_with(&client, "control-plane", annotations).await;
    let read = Api::<Namespace>::all(client.clone())
        .get(&ns.name)
        .await
        .expect("get namespace");
    assert_eq!(read.metadata.name.as_deref(), Some(ns.name.as_str()));
    assert_eq!(
        read.metadata
            .annotations
            .unwrap_or_default()
            .get("example.com/probe")
            .map(String::as_str),
        Some("yes")
    );

    // kubectl sees the same object through the same kubeconfig.
    let out = kubectl_ok(&[
        "get",
        "namespace",
        &ns.name,
        "-o",
        "jsonpath={.metadata.name}",
    ]);
    assert_eq!(out, ns.name);
}

/// The testbed labels system namespaces the way 1.21+ does; webhook namespaceSelectors rely on it.
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn system_namespaces_carry_their_name_label() {
    let client = client().await;
    let ns = Api::<Namespace>::all(client)
        .get("kube-system")
        .await
        .expect("kube-system");
    let labels = ns.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("kube-system")
    );
}
