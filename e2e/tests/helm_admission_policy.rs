//! The chart's RBAC carries the admission policy path (`admission` auto or policy): the real controller,
//! acting as the chart's ServiceAccount, creates the MutatingAdmissionPolicy and binding (server-side
//! apply, limited by name), labels an enabled namespace, narrows the release's webhook configuration,
//! and in webhook mode takes all of it away again. Where the server serves no MutatingAdmissionPolicy
//! the case is reported not run.

mod support;

use kube::Client;
use linkerd_multus_e2e::{
    client, client_as_service_account, eventually, kubectl_ok, not_run, unique_name,
    DedicatedTestbed, DeleteOnDrop, TestNamespace,
};
use linkerd_multus_operator::admission::current;
use linkerd_multus_operator::admission::objects::{self, Kind};
use rules::admission_policy::PolicyApi;
use support::install::*;
use support::{chart_dir, path_str};

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
    let _guards = Kind::ALL
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

const UNINSTALL_CASE: &str = "an uninstall takes the admission policy and binding with it";

/// A kube-controller-manager running only the garbage collector against `bed`, killed on drop (a
/// bare testbed has none, and the ownerReference is only as good as the collector that reads it).
struct GarbageCollector(std::process::Child);

impl GarbageCollector {
    fn start(binary: &std::path::Path, bed: &DedicatedTestbed) -> Self {
        let log = std::fs::File::create(bed.dir().join("garbage-collector.log")).expect("log");
        let child = std::process::Command::new(binary)
            .arg(format!("--kubeconfig={}", bed.kubeconfig().display()))
            .args([
                "--controllers=garbagecollector",
                "--leader-elect=false",
                "--secure-port=0",
            ])
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("start kube-controller-manager");
        Self(child)
    }
}

impl Drop for GarbageCollector {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A kube-controller-manager of the server's own release (`--version` equal to the server's
/// gitVersion): the testbed's recorded one, else the platform's. None: no such binary here.
async fn controller_manager_of(
    bed: &DedicatedTestbed,
    kube: &Client,
) -> Option<std::path::PathBuf> {
    let git = kube.apiserver_version().await.expect("version").git_version;
    let recorded = std::fs::read_to_string(bed.dir().join("binaries"))
        .ok()
        .and_then(|b| {
            b.lines()
                .find_map(|l| l.strip_prefix("kube-controller-manager "))
                .map(|p| std::path::PathBuf::from(p.trim()))
        });
    let platform = std::env::var_os(linkerd_multus_e2e::platform::PLATFORM_ENV)
        .and_then(|_| linkerd_multus_e2e::platform::Platform::or_not_run(UNINSTALL_CASE))
        .map(|p| p.binary(linkerd_multus_e2e::platform::CONTROLLER_MANAGER));
    [recorded, platform].into_iter().flatten().find(|bin| {
        std::process::Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == format!("Kubernetes {git}"))
    })
}

/// The policy and binding (and the warning policy and its binding) do not outlive the product: owned
/// by the release's webhook configuration,
/// they are deleted by the garbage collector once `helm uninstall` deletes it, while an operator
/// restart (the configuration stays) keeps them; the operator, still running through the uninstall,
/// does not re-create them; and a pod of the formerly enabled (still labelled) namespace is then
/// admitted unchanged. On its own apiserver (the collector deletes whatever has a missing owner), with
/// a kube-controller-manager of the server's release running the collector alone. Would fail without
/// the ownerReference (the policy stays and keeps adding the NAD the uninstall removed) or if the
/// keeper applied the policy with its owner gone (it comes back unowned).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one), a kube-controller-manager and helm: run by e2e/test-all"]
async fn an_uninstall_takes_the_policy_away() {
    use clap::Parser;
    use linkerd_multus_operator::config::Config;
    use std::time::Duration;

    let bed = DedicatedTestbed::up("adm-uninstall");
    let admin = bed.client().await;
    let Some(api) = objects::served(&admin).await.expect("discovery") else {
        not_run(
            UNINSTALL_CASE,
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate)",
        );
        return;
    };
    let Some(kcm) = controller_manager_of(&bed, &admin).await else {
        not_run(
            UNINSTALL_CASE,
            "no kube-controller-manager of the server's release (the testbed's recorded one, or the \
             platform's) to run the garbage collector",
        );
        return;
    };
    let _gc = GarbageCollector::start(&kcm, &bed);
    linkerd_multus_e2e::ensure_node_multus_crd(bed.kubeconfig_path());
    let (release, ns) = ("lm", "linkerd-multus");
    bed.helm_ok(&[
        "install",
        release,
        path_str(&chart_dir()),
        "-n",
        ns,
        "--create-namespace",
        "--set",
        "installNADCRD=true",
    ]);
    bed.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/network-attachment-definitions.k8s.cni.cncf.io",
        "--timeout=30s",
    ]);
    let config = format!("zz-{release}-linkerd-multus");
    let app = "adm-app";
    bed.kubectl_ok(&["create", "namespace", app]);
    bed.kubectl_ok(&[
        "annotate",
        "namespace",
        app,
        &format!("{}={}", vocab::MULTUS_ANNOTATION, vocab::MULTUS_ENABLED),
    ]);

    let start = || {
        let argv = [
            "linkerd-multus-operator".to_string(),
            "--linkerd-namespace=no-linkerd".into(),
            "--admin-addr=127.0.0.1:0".into(),
            "--admission=policy".into(),
            format!("--webhook-config-name={config}"),
        ];
        let Config::Run(run) = Config::from_cli(
            linkerd_multus_operator::cli::Cli::try_parse_from(argv).expect("flags"),
        ) else {
            unreachable!("no subcommand")
        };
        let client = admin.clone();
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
    let name = vocab::ADMISSION_POLICY_NAME;
    let uids = || async {
        let mut uids = Vec::new();
        for kind in Kind::ALL {
            let object = objects::get(&admin, api, kind, name).await.expect("read");
            uids.push(object.map(|o| {
                o["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            }));
        }
        uids
    };

    let op = start().await;
    let before = eventually("the policy and binding", || async {
        let uids = uids().await;
        uids.iter().all(Option::is_some).then_some(uids)
    })
    .await;
    // A restart keeps them (the collector runs; the configuration is in place).
    stop(op).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let op = start().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        uids().await,
        before,
        "a restart kept the policy and binding"
    );

    // The uninstall, with the operator still running (its pod terminates after the configuration).
    bed.helm_ok(&["uninstall", release, "-n", ns]);
    linkerd_multus_e2e::eventually_within(
        "the policy and binding gone after the uninstall",
        Duration::from_secs(30),
        || async { uids().await.iter().all(Option::is_none).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        uids().await,
        [const { None }; 4],
        "the keeper re-created them"
    );
    stop(op).await;

    // The namespace keeps its label (harmless: nothing selects it now); its pod is admitted as sent.
    let ns_labels = bed
        .get_json(&["namespace", app])
        .map(|n| n["metadata"]["labels"].clone())
        .unwrap_or_default();
    assert!(
        ns_labels.get(vocab::ADMISSION_NAMESPACE_LABEL).is_some(),
        "the namespace was labelled: {ns_labels}"
    );
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "after-uninstall", "namespace": app },
        "spec": { "containers": [{ "name": "app", "image": "x" }] },
    });
    let stored = bed.dry_run_stored(Some(app), &pod);
    assert_eq!(
        stored["metadata"].get("annotations"),
        None,
        "a pod of the formerly enabled namespace is admitted unchanged: {stored}"
    );
}
