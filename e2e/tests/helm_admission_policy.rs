//! The chart's RBAC carries the admission policy path (`admission` auto or policy): the real controller,
//! acting as the chart's ServiceAccount, creates the MutatingAdmissionPolicy and binding (server-side
//! apply, limited by name), labels an enabled namespace, narrows the release's webhook configuration,
//! and in webhook mode takes all of it away again. Where the server serves no MutatingAdmissionPolicy
//! the case is reported not run.

mod support;

use kube::Client;
use linkerd_multus_e2e::{
    client, client_as_service_account, eventually, kubectl_ok, not_run, unique_name, DeleteOnDrop,
    TestNamespace,
};
use linkerd_multus_operator::admission::current;
use linkerd_multus_operator::admission::objects::{self, Kind};
use rules::admission_policy::PolicyApi;
use support::install::*;

const CASE: &str = "the chart's RBAC carries the admission policy path";

async fn policy_path(kube: &Client, api: PolicyApi, config: &str, app: &str) -> [bool; 4] {
    let name = vocab::ADMISSION_POLICY_NAME;
    let policy = objects::get(kube, api, Kind::Policy, name).await;
    let binding = objects::get(kube, api, Kind::Binding, name).await;
    let namespace = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(kube.clone())
        .get(app)
        .await
        .expect("namespace");
    let labelled = namespace
        .metadata
        .labels
        .is_some_and(|l| l.contains_key(vocab::ADMISSION_NAMESPACE_LABEL));
    let live = objects::get_webhook_config(kube, config)
        .await
        .expect("read the webhook configuration")
        .expect("the release's webhook configuration");
    let narrowed = current::webhook_condition(&live, vocab::WEBHOOK_NAME).is_some();
    // The chart's own condition (rendered for a 1.30+ server) stays beside ours: server-side apply
    // merges the list by name.
    let entry = live["webhooks"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == vocab::WEBHOOK_NAME))
        .expect("the chart's entry");
    let charts = entry["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["name"] == "not-an-openshift-namespace");
    assert!(charts, "the chart's matchCondition is gone: {entry}");
    [
        policy.expect("read the policy").is_some(),
        binding.expect("read the binding").is_some(),
        labelled,
        narrowed,
    ]
}

/// The chart's own matchCondition survives the narrowing and the widening. Would fail if the chart's
/// ClusterRole lacked any permission the path uses (the namespace patch,
/// the policy's or binding's create-by-apply, patch or delete by name, the configuration's get or
/// patch): the operator's writes would be refused and the objects never appear (or never go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
async fn the_charts_rbac_carries_the_policy_path() {
    use clap::Parser;
    use linkerd_multus_operator::config::Config;

    let admin = client().await;
    let Some(api) = objects::served(&admin).await.expect("discovery") else {
        not_run(
            CASE,
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate)",
        );
        return;
    };
    // The only test that uses the policy's real name (the chart's RBAC names it): it never outlives it.
    let _guards = [Kind::Policy, Kind::Binding]
        .map(|kind| DeleteOnDrop::new(kind.api(&admin, api), vocab::ADMISSION_POLICY_NAME));
    let namespaces = Namespaces::create(&["helm-adm"]);
    let ns = namespaces.0[0].clone();
    let release = unique_name("lm");
    let values = isolating_values(&release, &unique_name("adm-cni"));
    let (installed, _) = Installed::install(&release, &ns, &values, &[]);
    let fullname = format!("{release}-linkerd-multus");
    let config = format!("zz-{fullname}");

    let run_label = ("linkerd-multus-test/run".to_string(), release.clone());
    let app = TestNamespace::create_with(
        &admin,
        "adm-app",
        [(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]
        .into(),
    )
    .await;
    kubectl_ok(&[
        "label",
        "namespace",
        &app.name,
        &format!("{}={}", run_label.0, run_label.1),
    ]);
    let selector = format!("{}={}", run_label.0, run_label.1);
    let linkerd = unique_name("no-linkerd");
    let as_operator = client_as_service_account(&ns, &fullname).await;
    let start = |mode: &str| {
        let argv = [
            "linkerd-multus-operator".to_string(),
            "--linkerd-namespace".into(),
            linkerd.clone(),
            "--admin-addr=127.0.0.1:0".into(),
            "--namespace-selector".into(),
            selector.clone(),
            format!("--admission={mode}"),
            // Its own label value: no other test's operator labels its namespaces for this binding.
            format!("--admission-label-value={release}"),
            format!("--webhook-config-name={config}"),
        ];
        let Config::Run(run) = Config::from_cli(
            linkerd_multus_operator::cli::Cli::try_parse_from(argv).expect("flags"),
        ) else {
            unreachable!("no subcommand")
        };
        let client = as_operator.clone();
        async move {
            let shutdown = tokio_util::sync::CancellationToken::new();
            let op =
                linkerd_multus_operator::spawn_controller(client, run.controller, shutdown.clone())
                    .await
                    .expect("operator starts");
            (shutdown, op)
        }
    };
    let stop = |(shutdown, op): (
        tokio_util::sync::CancellationToken,
        linkerd_multus_operator::RunningController,
    )| async move {
        shutdown.cancel();
        op.task
            .await
            .expect("operator task")
            .expect("operator stopped cleanly");
    };

    let op = start("policy").await;
    eventually(
        "as the chart's ServiceAccount: policy, binding, label, narrowing",
        || async {
            let seen = policy_path(&admin, api, &config, &app.name).await;
            (seen == [true; 4]).then_some(())
        },
    )
    .await;
    stop(op).await;
    let op = start("webhook").await;
    eventually(
        "as the chart's ServiceAccount: all of it taken away",
        || async {
            let seen = policy_path(&admin, api, &config, &app.name).await;
            (seen == [false; 4]).then_some(())
        },
    )
    .await;
    stop(op).await;
    drop(installed);
}
