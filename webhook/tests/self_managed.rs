//! Self-managed certificate mode on the real local kube-apiserver: the Secret, the caBundle, replicas
//! racing, rotation, and the loop that follows both.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::Api;
use linkerd_multus_e2e::{
    client, eventually, eventually_within, free_port, unique_name, TestNamespace,
};
use linkerd_multus_webhook::cert_authority::{issue, serving_names};
use linkerd_multus_webhook::CertStore;
use serde_json::json;
use support::cluster::*;
use support::*;

/// Self-managed mode on the real apiserver: the Secret is created, our entry's caBundle is injected
/// (and only ours), and the apiserver trusts the certificate enough to call the webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn self_managed_certificate_mode() {
    let kube = client().await;
    let operator_ns = TestNamespace::create(&kube, "wh-op").await;
    let on = TestNamespace::create_with(
        &kube,
        "wh-sm-on",
        ann(&[(vocab::MULTUS_ANNOTATION, "enabled")]),
    )
    .await;
    let port = free_port();
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
    a.webhook_service_name = vocab::DEFAULT_WEBHOOK_SERVICE_NAME.into();
    let wh = Running::start(a, decision("linkerd"), &operator_ns.name, kube.clone()).await;

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
        vocab::DEFAULT_WEBHOOK_SERVICE_NAME.into(),
        operator_ns.name.clone(),
    );
    assert_eq!(store.ensure_secret().await.unwrap(), bundle);
}

/// Two replicas starting together on a missing Secret end up serving the same certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
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
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
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
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn self_managed_loop_follows_the_secret_and_restores_the_ca_bundle() {
    let kube = client().await;
    let (operator_ns, config_name, _guard, wh) =
        self_managed_with_config(&kube, "wh-loop", Duration::from_secs(1)).await;
    let secrets = Api::<Secret>::namespaced(kube.clone(), &operator_ns.name);
    let first = secret_bundle(&secrets.get("webhook-cert").await.unwrap());
    assert_eq!(
        served_cert(wh.addr, &first.ca_pem).await,
        der(&first.cert_pem)
    );

    // Another replica's rotation, as a replace of the Secret.
    let names = serving_names(vocab::DEFAULT_WEBHOOK_SERVICE_NAME, &operator_ns.name);
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
    eventually("the rotated certificate is served", || async {
        (served_cert(wh.addr, &both).await == der(&second.cert_pem)).then_some(())
    })
    .await;

    // Someone wipes the caBundle: it comes back.
    let configs = Api::<MutatingWebhookConfiguration>::all(kube.clone());
    let want = Some(second.ca_pem.clone().into_bytes());
    assert_eq!(ca_bundle_of(&configs, &config_name).await, want);
    wipe_ca_bundle(&configs, &config_name).await;
    eventually("the caBundle is restored", || async {
        (ca_bundle_of(&configs, &config_name).await == want).then_some(())
    })
    .await;
    wh.stop().await;
}

/// A caBundle removed from the configuration (`helm rollback` to the release's first revision, which
/// was rendered before the operator filled one in, or a manifest re-applied by hand) is put back at
/// once, not at the next check an interval later: with `failurePolicy: Fail` every pod create the
/// webhook matches fails meanwhile (seen on the node: minutes of x509 errors after a rollback, with the
/// chart's 5 m interval). Fails if the loop only re-checks on its interval (here an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_removed_ca_bundle_is_restored_at_once_not_at_the_next_interval() {
    let kube = client().await;
    let (operator_ns, config_name, _guard, wh) =
        self_managed_with_config(&kube, "wh-watch", Duration::from_secs(3600)).await;
    let secrets = Api::<Secret>::namespaced(kube.clone(), &operator_ns.name);
    let want = Some(
        secret_bundle(&secrets.get("webhook-cert").await.unwrap())
            .ca_pem
            .into_bytes(),
    );
    let configs = Api::<MutatingWebhookConfiguration>::all(kube.clone());
    assert_eq!(ca_bundle_of(&configs, &config_name).await, want);
    for round in 1..=2 {
        wipe_ca_bundle(&configs, &config_name).await;
        let wiped = std::time::Instant::now();
        eventually_within(
            &format!("the caBundle is restored (wipe {round}) well before the interval"),
            Duration::from_secs(20),
            || async { (ca_bundle_of(&configs, &config_name).await == want).then_some(()) },
        )
        .await;
        eprintln!("wipe {round}: caBundle restored in {:?}", wiped.elapsed());
    }
    wh.stop().await;
}

/// The webhook in self-managed mode (Secret `webhook-cert`, re-checked every `interval`) with a
/// configuration of its own to keep the caBundle of: its namespace, the configuration's name, the
/// guard that deletes it, and the running webhook.
async fn self_managed_with_config(
    kube: &kube::Client,
    prefix: &str,
    interval: Duration,
) -> (TestNamespace, String, ConfigGuard, Running) {
    let operator_ns = TestNamespace::create(kube, prefix).await;
    let selector = unique_name("sel");
    let config_name = unique_name(&format!("linkerd-multus-{prefix}"));
    let guard = create_config(
        kube,
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
    a.webhook_cert_check_interval = interval;
    let wh = Running::start(a, decision("linkerd"), &operator_ns.name, kube.clone()).await;
    (operator_ns, config_name, guard, wh)
}

/// The caBundle of the configuration's first webhook.
async fn ca_bundle_of(configs: &Api<MutatingWebhookConfiguration>, name: &str) -> Option<Vec<u8>> {
    configs.get(name).await.unwrap().webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .map(|b| b.0)
}

/// Removes the first webhook's caBundle, as helm's three-way merge does on a rollback to a manifest
/// without one.
async fn wipe_ca_bundle(configs: &Api<MutatingWebhookConfiguration>, name: &str) {
    let wipe: json_patch::Patch = serde_json::from_value(json!([
        { "op": "remove", "path": "/webhooks/0/clientConfig/caBundle" }
    ]))
    .unwrap();
    configs
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Json::<()>(wipe),
        )
        .await
        .unwrap();
}
