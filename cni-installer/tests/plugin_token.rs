//! The plugin's credential in TokenRequest mode, on the testbed's real apiserver: the installer,
//! acting as its own service account, writes a token of the plugin's account bound to no pod — not
//! its own — which the apiserver accepts; without the RBAC for it the installer says what is
//! missing and leaves the kubeconfig it wrote before untouched.

mod support;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use linkerd_multus_e2e::credentials::{self, service_account_user, token_claims};
use linkerd_multus_e2e::{client, kubectl_ok, TestNamespace};
use std::fs;
use support::Node;

fn kubeconfig_token(node: &Node) -> String {
    credentials::kubeconfig_token(&node.kubeconfig_path())
}

/// A token of `namespace/name` as the admin asks for it (stands in for the installer pod's own).
async fn token_of(client: &kube::Client, namespace: &str, name: &str) -> String {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let ask = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    api.create_token_request(name, &PostParams::default(), &ask)
        .await
        .expect("admin TokenRequest")
        .status
        .expect("status")
        .token
}

#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all, or after `e2e/testbed up`"]
async fn the_plugin_gets_its_own_accounts_token_bound_to_no_pod() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "plugin-token").await;
    let n = ns.name.as_str();
    for sa in ["installer", "plugin"] {
        kubectl_ok(&["-n", n, "create", "serviceaccount", sa]);
    }
    // The chart's least privilege: the installer may mint the plugin's token and nothing else; the
    // plugin may read pods.
    kubectl_ok(&[
        "-n",
        n,
        "create",
        "role",
        "mint-plugin-token",
        "--verb=create",
        "--resource=serviceaccounts/token",
        "--resource-name=plugin",
    ]);
    kubectl_ok(&[
        "-n",
        n,
        "create",
        "rolebinding",
        "mint-plugin-token",
        "--role=mint-plugin-token",
        &format!("--serviceaccount={n}:installer"),
    ]);
    kubectl_ok(&[
        "-n",
        n,
        "create",
        "role",
        "read-pods",
        "--verb=get",
        "--resource=pods",
    ]);
    kubectl_ok(&[
        "-n",
        n,
        "create",
        "rolebinding",
        "read-pods",
        "--role=read-pods",
        &format!("--serviceaccount={n}:plugin"),
    ]);

    let mut node = Node::new();
    node.use_testbed_service_account();
    let installer_token = token_of(&client, n, "installer").await;
    fs::write(node.sa.join("token"), &installer_token).expect("token");
    fs::write(node.sa.join("namespace"), n).expect("namespace");

    let out = node.once(&["--chain-mode", "none", "--plugin-service-account", "plugin"]);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    let written = kubeconfig_token(&node);
    assert_ne!(written, installer_token, "the installer's own token");
    let c = token_claims(&written);
    assert_eq!(
        c["sub"].as_str(),
        Some(service_account_user(n, "plugin").as_str()),
        "{c}"
    );
    assert!(
        c["kubernetes.io"].get("pod").is_none(),
        "bound to a pod: {c}"
    );
    assert!(log.contains("obtained the plugin's token"), "{log}");

    // The apiserver accepts it as the plugin (what the plugin does with it: read a pod).
    let plugin_client = linkerd_multus_e2e::client_from(&node.kubeconfig_path()).await;
    let missing = Api::<Pod>::namespaced(plugin_client, n)
        .get("no-such-pod")
        .await;
    match missing {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "{s:?}"),
        other => panic!("the plugin's token is not accepted to read pods: {other:?}"),
    }

    // Without the RBAC: a clear error naming what is missing; the kubeconfig stays as it was.
    kubectl_ok(&["-n", n, "delete", "rolebinding", "mint-plugin-token"]);
    let out = node.once(&["--chain-mode", "none", "--plugin-service-account", "plugin"]);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains(&format!("service account {n}/plugin"))
            && log.contains("serviceaccounts/token"),
        "{log}"
    );
    assert_eq!(
        kubeconfig_token(&node),
        written,
        "the kubeconfig was rewritten"
    );
}
