//! The helm chart installed with the real helm on the local kube-apiserver in the orders and platforms
//! that bite: before linkerd-cni exists, and on OpenShift with its platform namespaces. The install
//! lifecycle: `helm_install.rs`.

mod support;

use linkerd_multus_e2e::{kubectl, kubectl_ok, unique_name};
use support::install::*;
use support::*;

/// Install order: the chart installs while the CNI namespace does not exist yet (its ConfigMap read is
/// a ClusterRole limited by name). The real controller, acting as the chart's ServiceAccount with the
/// chart's RBAC, reports the missing ConfigMap (Warning Event, gauge 0) while `/ready` is 200, and
/// picks the ConfigMap up once linkerd-cni creates it: the NAD appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
async fn installs_before_linkerd_cni_and_picks_its_configmap_up() {
    use clap::Parser;
    use kube::api::{Api, DynamicObject};
    use linkerd_multus_e2e::events::wait_for_warning;
    use linkerd_multus_e2e::{client, client_as_service_account, eventually, TestNamespace};
    use linkerd_multus_operator::config::Config;

    let namespaces = Namespaces::create(&["helm-early"]);
    let ns = namespaces.0[0].clone();
    let cni_ns = unique_name("late-cni");
    let release = unique_name("lm");
    let values = isolating_values(&release, &cni_ns);
    let (installed, _) = Installed::install(&release, &ns, &values, &[]);
    let fullname = format!("{release}-linkerd-multus");

    // The test's own namespace selection (hidden flag), so other tests' namespaces are not touched.
    let label = ("linkerd-multus-test/run".to_string(), release.clone());
    let admin = client().await;
    let app = TestNamespace::create_with(
        &admin,
        "early-app",
        [(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]
        .into(),
    )
    .await;
    kubectl(&[
        "label",
        "namespace",
        &app.name,
        &format!("{}={}", label.0, label.1),
    ]);
    let selector = format!("{}={}", label.0, label.1);
    let argv = [
        "linkerd-multus-operator",
        "--cni-namespace",
        &cni_ns,
        "--linkerd-namespace",
        &unique_name("no-linkerd"),
        "--admin-addr",
        "127.0.0.1:0",
        "--namespace-selector",
        &selector,
        // A policy is cluster-wide: only operator/tests/admission_mode.rs runs one.
        "--admission=webhook",
    ];
    let Config::Run(run) =
        Config::from_cli(linkerd_multus_operator::cli::Cli::try_parse_from(argv).expect("flags"))
    else {
        unreachable!("no subcommand")
    };
    // Multus' CRD, as a Multus cluster has it (tests on this testbed may run in any order).
    linkerd_multus_e2e::ensure_nad_crd();
    let as_operator = client_as_service_account(&ns, &fullname).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let op = linkerd_multus_operator::spawn_controller(as_operator, run.controller, shutdown)
        .await
        .expect("operator starts");
    let get = |path: &'static str| async move {
        let resp = reqwest::get(format!("http://{}{path}", op.admin_addr))
            .await
            .expect("admin server");
        (
            resp.status().as_u16(),
            resp.text().await.unwrap_or_default(),
        )
    };

    wait_for_warning(
        &admin,
        &app.name,
        "CniConfigMapMissing",
        "a CniConfigMapMissing Warning in the enabled namespace",
        |_| true,
    )
    .await;
    let gauge = "linkerd_multus_input_healthy{input=\"configmap\"} ";
    let (_, metrics) = get("/metrics").await;
    assert!(metrics.contains(&format!("{gauge}0")), "{metrics}");
    let (ready, body) = get("/ready").await;
    assert_eq!(ready, 200, "{body}");

    // linkerd-cni arrives.
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "linkerd-cni-config", "namespace": cni_ns},
        "data": {"cni_network_config": include_str!("../../fixtures/linkerd2-cni-network-config.json")},
    })
    .to_string();
    let _cni = Namespaces(vec![cni_ns.clone()]);
    kubectl_ok(&["create", "namespace", &cni_ns]);
    let file = temp_file("cm.json", &cm);
    kubectl_ok(&["apply", "-f", path_str(&file)]);
    let nads = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &app.name,
        &linkerd_multus_operator::reconcile::nad_resource(None),
    );
    let started = std::time::Instant::now();
    let nad = eventually("the NAD appears once the ConfigMap exists", || async {
        nads.get_opt(vocab::NAD_NAME).await.ok()?
    })
    .await;
    eprintln!(
        "MEASURE ConfigMap created after the operator -> NAD visible: {:?}",
        started.elapsed()
    );
    let config = nad.data["spec"]["config"].as_str().expect("config");
    assert!(config.contains("\"type\":\"linkerd-cni\""), "{config}");
    eventually("the configmap gauge reads 1", || async {
        get("/metrics")
            .await
            .1
            .contains(&format!("{gauge}1"))
            .then_some(())
    })
    .await;
    drop(installed);
}

/// Deletes a cluster-scoped object with kubectl when dropped.
struct KubectlDelete(&'static str, String);

impl Drop for KubectlDelete {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--ignore-not-found"]);
    }
}

/// `helm/values-openshift.yaml` keeps OpenShift's platform namespaces (labelled
/// `openshift.io/run-level` or `openshift.io/cluster-monitoring`) away from the webhook, as the real
/// apiserver applies the rendered namespaceSelector: with the webhook's URL unreachable and
/// `failurePolicy: Fail`, a pod in a plain namespace is refused, while pods in namespaces with either
/// label are created (they are never sent to the webhook). A scoping label added to the selector
/// keeps the test's webhook away from every other test's pods.
///
/// An unlabelled `openshift-*` namespace is kept away only by the chart's matchCondition, rendered for
/// this server as `helm install` would (its version as `--kube-version`; `openshiftNamespacesByName=true`
/// where the server serves matchConditions before 1.30). Where the server keeps matchConditions, a pod
/// there is created; where it does not, it is refused like the plain one, and the by-name case is
/// reported as not run.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn openshift_values_keep_platform_namespaces_away_from_the_webhook() {
    let scope = unique_name("os-scope");
    let openshift = chart_dir().join("values-openshift.yaml");
    let scoping = temp_file(
        "helm-values",
        &format!(
            "webhook:\n  namespaceSelector:\n    matchLabels:\n      linkerd-multus-e2e/scope: {scope}\n"
        ),
    );
    let version = server_version();
    let served = serves_match_conditions();
    let mut render = vec![
        "-f",
        path_str(&openshift),
        "-f",
        path_str(&scoping),
        "--kube-version",
        version.as_str(),
    ];
    let auto = parse_docs(&helm_template("ld-controller", "linkerd-multus", &render));
    let auto_conditions =
        &find(&auto, "MutatingWebhookConfiguration", None)["webhooks"][0]["matchConditions"];
    // What auto renders must install here: matchConditions only on a server that keeps them.
    assert!(
        auto_conditions.is_null() || served,
        "auto renders matchConditions for {version}, which does not serve them: {auto_conditions}"
    );
    if served && auto_conditions.is_null() {
        render.extend(["--set", "webhook.openshiftNamespacesByName=true"]);
    }
    let docs = parse_docs(&helm_template("ld-controller", "linkerd-multus", &render));
    let mut config = find(&docs, "MutatingWebhookConfiguration", None).clone();
    let hook = &mut config["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    let by_name = served;
    assert_eq!(
        !hook["matchConditions"].is_null(),
        by_name,
        "matchConditions rendered for {version}: {}",
        hook["matchConditions"]
    );
    let expressions = hook["namespaceSelector"]["matchExpressions"].clone();
    for key in ["openshift.io/run-level", "openshift.io/cluster-monitoring"] {
        assert!(
            expressions
                .as_array()
                .expect("matchExpressions")
                .iter()
                .any(|e| e["key"] == key && e["operator"] == "DoesNotExist"),
            "{key} excluded: {expressions}"
        );
    }
    // Nothing listens on port 1: every call the apiserver makes fails, so Fail refuses the pod.
    hook["clientConfig"] = serde_json::json!({"url": "https://127.0.0.1:1/annotate-multus-v1-pod"});
    config["metadata"] = serde_json::json!({"name": scope});
    let file = temp_file("webhook-config", &config.to_string());
    kubectl_ok(&["create", "--validate=false", "-f", path_str(&file)]);
    let _config = KubectlDelete("mutatingwebhookconfiguration", scope.clone());
    let stored = kubectl_ok(&["get", "mutatingwebhookconfiguration", &scope, "-o", "json"]);
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("JSON");
    assert_eq!(
        !stored["webhooks"][0]["matchConditions"].is_null(),
        by_name,
        "the server stored: {stored}"
    );

    let namespaces = Namespaces::create(&[
        "os-plain",
        "os-runlevel",
        "os-monitoring",
        "openshift-unlabelled",
    ]);
    let labels = [
        None,
        Some("openshift.io/run-level=0"),
        Some("openshift.io/cluster-monitoring=true"),
        None,
    ];
    for (ns, label) in namespaces.0.iter().zip(labels) {
        let scope_label = format!("linkerd-multus-e2e/scope={scope}");
        let mut args = vec!["label", "namespace", ns.as_str(), scope_label.as_str()];
        args.extend(label);
        kubectl_ok(&args);
    }
    let create_pod = |ns: &str, name: &str| {
        kubectl(&[
            "-n",
            ns,
            "run",
            name,
            "--image=example.com/app:1",
            "--restart=Never",
        ])
    };
    // The apiserver picks the configuration up within moments: wait until the plain namespace's pod
    // is refused by the failing webhook, which proves the selector is in force.
    let mut attempt = 0;
    let refused = linkerd_multus_e2e::wait_for("the webhook to be in force", || {
        attempt += 1;
        let out = create_pod(&namespaces.0[0], &format!("plain-{attempt}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("failed calling webhook")).then_some(stderr)
    });
    eprintln!("plain namespace: {}", refused.trim());
    for ns in &namespaces.0[1..3] {
        let out = create_pod(ns, "platform");
        assert!(
            out.status.success(),
            "a pod in platform namespace {ns} is never sent to the webhook: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let unlabelled = &namespaces.0[3];
    let out = create_pod(unlabelled, "platform");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if by_name {
        assert!(
            out.status.success(),
            "a pod in {unlabelled} is never sent to the webhook (matchConditions): {stderr}"
        );
    } else {
        assert!(
            !out.status.success() && stderr.contains("failed calling webhook"),
            "without matchConditions the selector alone cannot keep {unlabelled} away: {stderr}"
        );
        linkerd_multus_e2e::not_run(
            "helm install order: the matchCondition keeps an unlabelled openshift-* namespace away from the webhook",
            &format!("the server ({version}) does not keep a webhook's matchConditions (GA in Kubernetes 1.30)"),
        );
    }
}

/// `webhook.openshiftNamespacesByName=true` on a server whose OpenAPI lacks matchConditions (before
/// 1.27) is refused by helm with a clear error, and nothing is created (a dry run: no object is
/// written either way). On a server that knows the field the case cannot occur and is reported as not
/// run.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn forcing_match_conditions_on_a_server_without_them_is_refused_by_helm() {
    let r = Release::new("helm-mc");
    let (ns, release) = (r.ns(), r.name.as_str());
    let values = temp_file("helm-values", &r.values());
    let chart = chart_dir();
    let out = linkerd_multus_e2e::Cluster::shared().helm(&[
        "install",
        release,
        path_str(&chart),
        "-n",
        ns,
        "-f",
        path_str(&values),
        "--set",
        "webhook.openshiftNamespacesByName=true",
        "--dry-run",
    ]);
    let _ = std::fs::remove_file(&values);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if openapi_knows_match_conditions() {
        // Not `success()`: a client-side dry run's `lookup` sees no live NodeMultus CRD, so where
        // another test's release owns it, helm refuses on that ownership (seen on v1.35.6).
        assert!(!stderr.contains("matchConditions"), "{stderr}");
        linkerd_multus_e2e::not_run(
            "helm install: openshiftNamespacesByName=true refused on a server without matchConditions",
            &format!("the server ({}) knows matchConditions", server_version()),
        );
    } else {
        assert!(
            !out.status.success() && stderr.contains("unknown field \"matchConditions\""),
            "{stderr}"
        );
        let left = kubectl_ok(&[
            "get",
            "mutatingwebhookconfigurations",
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
            "-o",
            "name",
        ]);
        assert_eq!(left.trim(), "", "a refused install created objects");
    }
}

/// The server's version (`/version`'s gitVersion), as helm install sees it.
fn server_version() -> String {
    let version: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["get", "--raw", "/version"])).expect("JSON");
    version["gitVersion"]
        .as_str()
        .expect("gitVersion")
        .to_string()
}

/// Whether the server keeps a webhook's matchConditions: a server-side dry-run create of a
/// configuration carrying one, read back (an older server, or 1.27 with its feature gate off, drops it).
fn serves_match_conditions() -> bool {
    let probe = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": unique_name("match-conditions-probe")},
        "webhooks": [{
            "name": "probe.multus.linkerd.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"url": "https://127.0.0.1:1/"},
            "matchConditions": [{"name": "probe", "expression": "true"}],
        }],
    });
    let created = linkerd_multus_e2e::Cluster::shared().dry_run_stored(None, &probe);
    !created["webhooks"][0]["matchConditions"].is_null()
}

/// Whether the server's OpenAPI describes a webhook's matchConditions: helm validates manifests with it.
fn openapi_knows_match_conditions() -> bool {
    kubectl_ok(&["get", "--raw", "/openapi/v2"])
        .contains("io.k8s.api.admissionregistration.v1.MatchCondition")
}
