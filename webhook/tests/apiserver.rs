//! The webhook called by the real local kube-apiserver: a MutatingWebhookConfiguration pointing at
//! `https://127.0.0.1:<port>/annotate-multus-v1-pod`, scoped by an objectSelector to this test's pods
//! (so it never touches other tests), `failurePolicy: Ignore` so a dangling one breaks nothing.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use common::*;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{client, kubectl, unique_name, TestNamespace};
use linkerd_multus_webhook::cert_authority::{issue, serving_names, Bundle};
use linkerd_multus_webhook::CertStore;
use serde_json::{json, Value};

// The tests run on multi-threaded runtimes: kubectl is a blocking call, and the webhook under test runs
// on the same runtime, so one thread would deadlock the apiserver's call back into it.

/// Label that scopes a test's webhook configuration to the test's own pods.
const SELECTOR_KEY: &str = "linkerd-multus-webhook-test";

/// Deletes the webhook configuration when the test ends, passed or not.
struct ConfigGuard(String);

impl Drop for ConfigGuard {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "delete",
            "mutatingwebhookconfiguration",
            &self.0,
            "--ignore-not-found",
        ]);
    }
}

fn webhook_entry(name: &str, client_config: Value, selector: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"] }],
        "objectSelector": { "matchLabels": { (SELECTOR_KEY): selector } },
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "IfNeeded",
        "timeoutSeconds": 10
    })
}

async fn create_config(kube: &Client, name: &str, webhooks: Vec<Value>) -> ConfigGuard {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": { "name": name },
        "webhooks": webhooks,
    }))
    .unwrap();
    Api::<MutatingWebhookConfiguration>::all(kube.clone())
        .create(&PostParams::default(), &config)
        .await
        .expect("create the webhook configuration");
    ConfigGuard(name.to_string())
}

fn pod_json(name: &str, selector: &str, annotations: Value, labels: Value) -> Value {
    let mut labels = labels;
    labels[SELECTOR_KEY] = json!(selector);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": labels, "annotations": annotations },
        "spec": { "containers": [{ "name": "app", "image": "example.invalid/app" }] }
    })
}

/// `kubectl create -f` of a pod; returns kubectl's stderr (where the apiserver's warnings go).
fn kubectl_create(namespace: &str, pod: &Value) -> String {
    let dir = temp_dir();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, serde_json::to_vec(pod).unwrap()).unwrap();
    let out = kubectl(&["create", "-n", namespace, "-f", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "kubectl create failed: {stderr}");
    stderr
}

async fn stored_annotations(
    kube: &Client,
    namespace: &str,
    name: &str,
) -> BTreeMap<String, String> {
    Api::<Pod>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
        .expect("the pod is stored")
        .metadata
        .annotations
        .unwrap_or_default()
}

/// The apiserver picks up a new webhook configuration asynchronously: create probe pods until one comes
/// back mutated (a readiness wait, not a timing assertion).
async fn wait_until_called(kube: &Client, namespace: &str, selector: &str) {
    let pods = Api::<Pod>::namespaced(kube.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0.. {
        let pod: Pod = serde_json::from_value(pod_json(
            &format!("probe-{i}"),
            selector,
            json!({}),
            json!({}),
        ))
        .unwrap();
        let stored = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("create probe pod");
        let _ = pods
            .delete(&format!("probe-{i}"), &DeleteParams::default())
            .await;
        if stored
            .metadata
            .annotations
            .is_some_and(|a| a.contains_key(vocab::NETWORKS_ANNOTATION))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the apiserver never called the webhook"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Pods created through the apiserver end up with exactly the annotations the rules call for. If the
/// response format, the patch encoding or the namespace lookup were wrong, the stored pods would differ.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
        settings(&control_plane.name, "default"),
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

fn secret_bundle(secret: &Secret) -> Bundle {
    let data = secret.data.as_ref().expect("secret data");
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    Bundle {
        ca_pem: text("ca.crt"),
        cert_pem: text("tls.crt"),
        key_pem: text("tls.key"),
    }
}

/// Self-managed mode on the real apiserver: the Secret is created, our entry's caBundle is injected
/// (and only ours), and the apiserver trusts the certificate enough to call the webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_managed_certificate_mode() {
    let kube = client().await;
    let operator_ns = TestNamespace::create(&kube, "wh-op").await;
    let on = TestNamespace::create_with(
        &kube,
        "wh-sm-on",
        ann(&[(vocab::MULTUS_ANNOTATION, "enabled")]),
    )
    .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let selector = unique_name("sel");
    let config_name = unique_name("linkerd-multus-webhook-sm");
    let url = format!("https://127.0.0.1:{port}{}", vocab::WEBHOOK_PATH);
    let _guard = create_config(
        &kube,
        &config_name,
        vec![
            webhook_entry("pods.linkerd-multus.test", json!({ "url": url }), &selector),
            webhook_entry(
                "someone-else.example.com",
                json!({ "service": { "namespace": operator_ns.name, "name": "someone-else" } }),
                "never-matches",
            ),
        ],
    )
    .await;

    let mut a = args(std::path::Path::new("/nonexistent"));
    a.webhook_addr = format!("127.0.0.1:{port}");
    a.webhook_cert_secret = Some("webhook-cert".into());
    a.webhook_config_name = Some(config_name.clone());
    a.webhook_service_name = "linkerd-multus-webhook".into();
    let wh = Running::start(a, settings("linkerd", &operator_ns.name), kube.clone()).await;

    let secret = Api::<Secret>::namespaced(kube.clone(), &operator_ns.name)
        .get("webhook-cert")
        .await
        .expect("the Secret was created");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(
        secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(vocab::MANAGED_BY_LABEL))
            .map(String::as_str),
        Some(vocab::MANAGED_BY_VALUE)
    );
    let bundle = secret_bundle(&secret);
    let config = Api::<MutatingWebhookConfiguration>::all(kube.clone())
        .get(&config_name)
        .await
        .unwrap();
    let hooks = config.webhooks.unwrap();
    assert_eq!(
        hooks[0]
            .client_config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.clone()),
        Some(bundle.ca_pem.clone().into_bytes())
    );
    assert_eq!(
        hooks[1].client_config.ca_bundle, None,
        "someone else's entry must stay untouched"
    );

    wait_until_called(&kube, &on.name, &selector).await;
    kubectl_create(
        &on.name,
        &pod_json("via-self-managed", &selector, json!({}), json!({})),
    );
    assert_eq!(
        stored_annotations(&kube, &on.name, "via-self-managed").await,
        ann(&[
            (vocab::NETWORKS_ANNOTATION, "linkerd-cni"),
            (vocab::MULTUS_ANNOTATION, "enabled")
        ])
    );
    wh.stop().await;

    // A restart (a second replica) adopts the stored certificate instead of issuing another.
    let store = CertStore::new(
        kube.clone(),
        "webhook-cert".into(),
        Some(config_name),
        "linkerd-multus-webhook".into(),
        operator_ns.name.clone(),
    );
    assert_eq!(store.ensure_secret().await.unwrap(), bundle);
}

/// Two replicas starting together on a missing Secret end up serving the same certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replicas_agree_on_one_certificate() {
    let kube = client().await;
    let ns = TestNamespace::create(&kube, "wh-race").await;
    for round in 0..3 {
        let name = format!("cert-{round}");
        let store = || {
            CertStore::new(
                kube.clone(),
                name.clone(),
                None,
                "svc".into(),
                ns.name.clone(),
            )
        };
        let (a, b) = (store(), store());
        let (ra, rb) = tokio::join!(a.ensure_secret(), b.ensure_secret());
        let (ra, rb) = (ra.expect("replica a"), rb.expect("replica b"));
        assert_eq!(ra, rb, "round {round}: replicas disagree");
        let stored = Api::<Secret>::namespaced(kube.clone(), &ns.name)
            .get(&name)
            .await
            .unwrap();
        assert_eq!(secret_bundle(&stored), ra);
    }
}

/// A stored certificate close to expiry is replaced (keeping the old CA in the bundle); one in a Secret
/// we did not create is never touched; a missing webhook configuration is not an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotates_expiring_certificates_and_leaves_foreign_secrets_alone() {
    let kube = client().await;
    let ns = TestNamespace::create(&kube, "wh-rotate").await;
    let secrets = Api::<Secret>::namespaced(kube.clone(), &ns.name);
    let names = serving_names("svc", &ns.name);
    let expiring = issue(
        &names,
        SystemTime::now(),
        Duration::from_secs(30 * 24 * 3600),
        None,
    )
    .unwrap();
    let make = |name: &str, ours: bool| -> Secret {
        let mut labels = BTreeMap::new();
        if ours {
            labels.insert(
                vocab::MANAGED_BY_LABEL.to_string(),
                vocab::MANAGED_BY_VALUE.to_string(),
            );
        }
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels },
            "type": "kubernetes.io/tls",
            "stringData": { "ca.crt": expiring.ca_pem, "tls.crt": expiring.cert_pem, "tls.key": expiring.key_pem },
        }))
        .unwrap()
    };
    secrets
        .create(&PostParams::default(), &make("ours", true))
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &make("foreign", false))
        .await
        .unwrap();

    let store = CertStore::new(
        kube.clone(),
        "ours".into(),
        Some(unique_name("absent-config")),
        "svc".into(),
        ns.name.clone(),
    );
    let rotated = store.ensure_secret().await.unwrap();
    assert_ne!(rotated.cert_pem, expiring.cert_pem);
    assert!(
        rotated.ca_pem.ends_with(&expiring.ca_pem),
        "old CA kept after the new one"
    );
    assert_eq!(secret_bundle(&secrets.get("ours").await.unwrap()), rotated);
    store
        .sync_ca_bundle(&rotated.ca_pem)
        .await
        .expect("absent configuration is fine");

    let foreign = CertStore::new(
        kube.clone(),
        "foreign".into(),
        None,
        "svc".into(),
        ns.name.clone(),
    );
    let err = foreign.ensure_secret().await.unwrap_err().to_string();
    assert!(err.contains("not ours to replace"), "{err}");
    assert_eq!(
        secret_bundle(&secrets.get("foreign").await.unwrap()),
        expiring
    );
}

/// The self-managed loop follows the Secret (another replica rotated it: the next connection gets the
/// new certificate) and puts the caBundle back when someone wipes it (e.g. a re-applied manifest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_managed_loop_follows_the_secret_and_restores_the_ca_bundle() {
    let kube = client().await;
    let operator_ns = TestNamespace::create(&kube, "wh-loop").await;
    let selector = unique_name("sel");
    let config_name = unique_name("linkerd-multus-webhook-loop");
    let _guard = create_config(
        &kube,
        &config_name,
        vec![webhook_entry(
            "pods.linkerd-multus.test",
            json!({ "url": "https://127.0.0.1:1/x" }),
            &selector,
        )],
    )
    .await;
    let mut a = args(std::path::Path::new("/nonexistent"));
    a.webhook_cert_secret = Some("webhook-cert".into());
    a.webhook_config_name = Some(config_name.clone());
    a.webhook_cert_check_interval = 1;
    let wh = Running::start(a, settings("linkerd", &operator_ns.name), kube.clone()).await;
    let secrets = Api::<Secret>::namespaced(kube.clone(), &operator_ns.name);
    let first = secret_bundle(&secrets.get("webhook-cert").await.unwrap());
    assert_eq!(
        served_cert(wh.addr, &first.ca_pem).await,
        der(&first.cert_pem)
    );

    // Another replica's rotation, as a replace of the Secret.
    let names = serving_names("linkerd-multus-webhook", &operator_ns.name);
    let second = issue(
        &names,
        SystemTime::now(),
        linkerd_multus_webhook::cert_authority::VALIDITY,
        None,
    )
    .unwrap();
    let mut secret = secrets.get("webhook-cert").await.unwrap();
    secret.data = None;
    secret.string_data = Some(BTreeMap::from([
        ("ca.crt".to_string(), second.ca_pem.clone()),
        ("tls.crt".to_string(), second.cert_pem.clone()),
        ("tls.key".to_string(), second.key_pem.clone()),
    ]));
    secrets
        .replace("webhook-cert", &PostParams::default(), &secret)
        .await
        .unwrap();
    let both = format!("{}{}", first.ca_pem, second.ca_pem);
    let deadline = Instant::now() + Duration::from_secs(30);
    while served_cert(wh.addr, &both).await != der(&second.cert_pem) {
        assert!(
            Instant::now() < deadline,
            "the rotated certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Someone wipes the caBundle: it comes back.
    let configs = Api::<MutatingWebhookConfiguration>::all(kube.clone());
    let ca_of = |c: MutatingWebhookConfiguration| {
        c.webhooks.unwrap()[0]
            .client_config
            .ca_bundle
            .clone()
            .map(|b| b.0)
    };
    assert_eq!(
        ca_of(configs.get(&config_name).await.unwrap()),
        Some(second.ca_pem.clone().into_bytes())
    );
    let wipe: json_patch::Patch = serde_json::from_value(
        json!([{ "op": "remove", "path": "/webhooks/0/clientConfig/caBundle" }]),
    )
    .unwrap();
    configs
        .patch(
            &config_name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Json::<()>(wipe),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ca_of(configs.get(&config_name).await.unwrap())
        != Some(second.ca_pem.clone().into_bytes())
    {
        assert!(Instant::now() < deadline, "the caBundle was never restored");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wh.stop().await;
}
