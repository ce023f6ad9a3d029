//! Shared harness of the operator's tests on the local apiserver.
//!
//! Every test gets its own CNI namespace + ConfigMap, its own control-plane namespace name, its own
//! NAD name and its own operator (a task running the real controller, leader election and admin
//! server). The operator only manages namespaces labelled with the test's run id (hidden flag
//! `--namespace-selector`), so parallel tests never see each other's namespaces.

#![allow(dead_code)]

pub mod repair;

use std::net::SocketAddr;

use clap::Parser;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{client, unique_name, DeleteOnDrop, TestNamespace};
pub use linkerd_multus_e2e::{eventually, DEADLINE};
use linkerd_multus_operator::check::CheckConfig;
use linkerd_multus_operator::cli::Cli;
use linkerd_multus_operator::config::{Config, ControllerConfig};
use linkerd_multus_operator::{spawn_controller, RunError};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Operator logs on stderr, only when asked for with `RUST_LOG` (they are not captured per test).
pub fn init_logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        linkerd_multus_operator::init_tracing(linkerd_multus_operator::cli::LogFormat::Plain);
    }
}

/// Label key selecting a test's namespaces (test-only; not part of the project's vocabulary).
pub const RUN_LABEL: &str = "linkerd-multus-test/run";
pub const KUBECONFIG: &str = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig";

/// The linkerd2-cni chart's `cni_network_config` (the repository's one copy), with a GID, IPv6 and the
/// two knobs the tests turn.
pub fn chart_template(log_level: &str, iptables_mode: &str) -> String {
    let mut v: Value = serde_json::from_str(include_str!(
        "../../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    v["log_level"] = json!(log_level);
    v["linkerd"]["iptables-mode"] = json!(iptables_mode);
    v["linkerd"]["proxy-gid"] = json!(2102);
    v["linkerd"]["ipv6"] = json!(true);
    v.to_string()
}

/// The NAD config the operator must produce from [`chart_template`], written out by hand (keys
/// sorted, compact) so the test does not reuse the code under test.
pub fn expected_config(log_level: &str, iptables_mode: &str) -> String {
    let v = json!({
        "cniVersion": "0.3.1",
        "kubernetes": {"kubeconfig": KUBECONFIG},
        "linkerd": {
            "inbound-ports-to-ignore": ["4191", "4190"],
            "incoming-proxy-port": 4143,
            "iptables-mode": iptables_mode,
            "ipv6": true,
            "outgoing-proxy-port": 4140,
            "ports-to-redirect": [],
            "proxy-gid": 2102,
            "proxy-uid": 2102,
            "simulate": false,
            "use-wait-flag": false
        },
        "log_level": log_level,
        "name": "linkerd-cni",
        "type": "linkerd-cni"
    });
    v.to_string()
}

pub struct Harness {
    pub client: Client,
    pub run_id: String,
    pub cni_ns: TestNamespace,
    pub cm_name: String,
    pub linkerd_ns: String,
    pub nad_name: String,
    /// `Some`: the NAD kind lives in this test-only API group (see `crd_absent.rs`).
    pub group: Option<String>,
}

impl Harness {
    /// Installs Multus' NAD CRD if absent, and creates the CNI namespace and ConfigMap.
    pub async fn new(prefix: &str) -> Self {
        init_logs();
        let client = client().await;
        ensure_crd(&client, &linkerd_multus_crds::crd()).await;
        Self::with_group(client, prefix, None).await
    }

    /// Like [`Harness::new`] but for a NAD kind in `group` (whose CRD the test installs itself).
    pub async fn with_group(client: Client, prefix: &str, group: Option<String>) -> Self {
        let run_id = unique_name(prefix);
        let cni_ns = TestNamespace::create(&client, &format!("{prefix}-cni")).await;
        let h = Self {
            client,
            cm_name: unique_name("cni-config"),
            linkerd_ns: unique_name(&format!("{prefix}-linkerd")),
            nad_name: unique_name("lcni"),
            run_id,
            cni_ns,
            group,
        };
        h.put_config(&chart_template("info", "nft")).await;
        h
    }

    /// Flags of this test's operator (plus `extra`).
    pub fn args(&self, extra: &[&str]) -> ControllerConfig {
        match self.parse(None, extra) {
            Config::Run(run) => run.controller,
            Config::Check(_) => unreachable!("no subcommand given"),
        }
    }

    /// `check` as this test's operator would run it (its flags plus `extra`).
    pub fn check_config(&self, extra: &[&str]) -> CheckConfig {
        match self.parse(Some("check"), extra) {
            Config::Check(check) => *check,
            Config::Run(_) => unreachable!("check given"),
        }
    }

    fn parse(&self, command: Option<&str>, extra: &[&str]) -> Config {
        let selector = format!("{RUN_LABEL}={}", self.run_id);
        let mut argv = vec!["linkerd-multus-operator"];
        argv.extend(command);
        argv.extend([
            "--cni-namespace",
            &self.cni_ns.name,
            "--cni-configmap",
            &self.cm_name,
            "--linkerd-namespace",
            &self.linkerd_ns,
            "--nad-name",
            &self.nad_name,
            "--admin-addr",
            "127.0.0.1:0",
            "--namespace-selector",
            &selector,
        ]);
        if let Some(group) = &self.group {
            argv.extend(["--nad-api-group", group]);
        }
        // The operator's own namespace (its Lease, the repairer's published halts) is the test's
        // CNI namespace unless the test names one: parallel tests never share that state.
        if !extra.contains(&"--namespace") {
            argv.extend(["--namespace", &self.cni_ns.name]);
        }
        // The webhook path unless the test asks: a policy and its binding are cluster-wide, and
        // parallel tests' operators would each rewrite one.
        if !extra.iter().any(|a| a.starts_with("--admission")) {
            argv.push("--admission=webhook");
        }
        argv.extend(extra);
        Config::from_cli(Cli::try_parse_from(argv).expect("test flags parse"))
    }

    pub async fn start_operator(&self, extra: &[&str]) -> Operator {
        let shutdown = CancellationToken::new();
        let running = spawn_controller(self.client.clone(), self.args(extra), shutdown.clone())
            .await
            .expect("operator starts");
        Operator {
            shutdown,
            admin: running.admin_addr,
            task: Some(running.task),
        }
    }

    /// A fresh namespace managed by this test's operator, with the multus annotation if given.
    pub async fn namespace(&self, prefix: &str, multus: Option<&str>) -> TestNamespace {
        let annotations = multus
            .map(|v| [(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())].into())
            .unwrap_or_default();
        let ns = TestNamespace::create_with(&self.client, prefix, annotations).await;
        self.label(&ns.name).await;
        ns
    }

    /// Creates the control-plane namespace (no annotation), labelled for this run.
    pub async fn create_linkerd_namespace(&self) -> DeleteOnDrop<Namespace> {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(self.linkerd_ns.clone()),
                labels: Some([(RUN_LABEL.to_string(), self.run_id.clone())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let api = Api::<Namespace>::all(self.client.clone());
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create control-plane namespace");
        DeleteOnDrop::new(api, &self.linkerd_ns)
    }

    /// Puts `ns` under this test's operator (its `--namespace-selector`).
    pub async fn label(&self, ns: &str) {
        let patch = json!({"metadata": {"labels": {RUN_LABEL: self.run_id}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label namespace");
    }

    /// Sets (`Some`) or removes (`None`) the multus annotation.
    pub async fn annotate(&self, ns: &str, value: Option<&str>) {
        let patch = json!({"metadata": {"annotations": {vocab::MULTUS_ANNOTATION: value}}});
        Api::<Namespace>::all(self.client.clone())
            .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("annotate namespace");
    }

    /// Creates or replaces the CNI ConfigMap with `cni_network_config` = `raw`.
    pub async fn put_config(&self, raw: &str) {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": self.cm_name},
            "data": {vocab::CNI_CONFIG_KEY: raw, "dest_cni_net_dir": "/etc/cni/net.d"}
        });
        self.configmaps()
            .patch(
                &self.cm_name,
                &PatchParams::apply("linkerd-multus-tests").force(),
                &Patch::Apply(&cm),
            )
            .await
            .expect("write ConfigMap");
    }

    pub async fn delete_config(&self) {
        self.configmaps()
            .delete(&self.cm_name, &Default::default())
            .await
            .expect("delete ConfigMap");
    }

    fn configmaps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.cni_ns.name)
    }

    pub fn nads(&self, ns: &str) -> Api<DynamicObject> {
        let resource = linkerd_multus_operator::reconcile::nad_resource(self.group.as_deref());
        Api::namespaced_with(self.client.clone(), ns, &resource)
    }

    pub async fn nad(&self, ns: &str) -> Option<DynamicObject> {
        self.nads(ns)
            .get_opt(&self.nad_name)
            .await
            .expect("get NAD")
    }

    /// `spec.config` of the NAD in `ns`, if it exists.
    pub async fn nad_config(&self, ns: &str) -> Option<String> {
        self.nad(ns)
            .await
            .and_then(|n| n.data["spec"]["config"].as_str().map(str::to_string))
    }

    /// Waits until the NAD in `ns` holds exactly `config` (and the ownership label).
    pub async fn wait_nad_config(&self, ns: &str, config: &str) {
        eventually(
            &format!("NAD in {ns} holds the expected config"),
            || async {
                let nad = self.nad(ns).await?;
                let owned = nad.metadata.labels.as_ref()?.get(vocab::MANAGED_BY_LABEL)?
                    == vocab::MANAGED_BY_VALUE;
                (owned && nad.data["spec"]["config"].as_str() == Some(config)).then_some(())
            },
        )
        .await
    }

    pub async fn wait_nad_gone(&self, ns: &str) {
        eventually(&format!("NAD in {ns} is gone"), || async {
            self.nad(ns).await.is_none().then_some(())
        })
        .await
    }

    /// Creates a NAD of this test's name without the ownership label (someone else's).
    pub async fn create_foreign_nad(&self, ns: &str, config: &str) -> DynamicObject {
        let resource = linkerd_multus_operator::reconcile::nad_resource(self.group.as_deref());
        let mut nad = DynamicObject::new(&self.nad_name, &resource).within(ns);
        nad.metadata.labels = Some([("owner".to_string(), "someone-else".to_string())].into());
        nad.data = json!({"spec": {"config": config}});
        self.nads(ns)
            .create(&PostParams::default(), &nad)
            .await
            .expect("create foreign NAD")
    }

    /// Warning Events with `reason` about namespace `ns` (filed inside `ns`).
    pub async fn warnings(&self, ns: &str, reason: &str) -> Vec<Event> {
        linkerd_multus_e2e::events::warnings(&self.client, ns, reason)
            .await
            .expect("list events")
    }

    /// Waits for a Warning Event with `reason` in `ns` that `keep` accepts (the kit's waiter).
    pub async fn wait_warning(
        &self,
        ns: &str,
        reason: &str,
        description: &str,
        keep: impl Fn(&Event) -> bool,
    ) -> Event {
        linkerd_multus_e2e::events::wait_for_warning(&self.client, ns, reason, description, keep)
            .await
    }

    /// The Events filed in `ns` that `keep` accepts.
    pub async fn events(&self, ns: &str, keep: impl Fn(&Event) -> bool) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), ns)
            .list(&Default::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| keep(e))
            .collect()
    }
}

/// One operator instance running as a task in the test process.
pub struct Operator {
    pub shutdown: CancellationToken,
    pub admin: SocketAddr,
    task: Option<tokio::task::JoinHandle<Result<(), RunError>>>,
}

impl Operator {
    /// Graceful shutdown; fails the test if the operator did not stop cleanly.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let result = tokio::time::timeout(DEADLINE, task)
                .await
                .expect("operator stops within the deadline")
                .expect("operator task did not panic");
            result.expect("operator stopped cleanly");
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let resp = reqwest::get(format!("http://{}{path}", self.admin))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// The value of a metric line (exact name incl. labels), 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let (_, body) = self.get("/metrics").await;
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until the metric line `name` reads `value` (the metric must be exposed).
    pub async fn wait_metric(&self, name: &str, value: f64) {
        eventually(&format!("{name} reads {value}"), || async {
            let (_, body) = self.get("/metrics").await;
            let now = body.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(' '))
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })?;
            (now == value).then_some(())
        })
        .await
    }

    pub async fn wait_ready(&self, ready: bool) {
        eventually(
            &format!("/ready answers {}", if ready { 200 } else { 503 }),
            || async {
                let (status, _) = self.get("/ready").await;
                ((status == 200) == ready).then_some(())
            },
        )
        .await
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub const WRITES_CREATE: &str = "linkerd_multus_controller_nad_writes_total{op=\"create\"}";
pub const WRITES_APPLY: &str = "linkerd_multus_controller_nad_writes_total{op=\"apply\"}";
pub const WRITES_DELETE: &str = "linkerd_multus_controller_nad_writes_total{op=\"delete\"}";
pub const RECONCILES: &str = "linkerd_multus_controller_reconciles_total";
pub const INPUT_CONFIGMAP: &str = "linkerd_multus_input_healthy{input=\"configmap\"}";
pub const INPUT_SHARED_NAMESPACE: &str = "linkerd_multus_input_healthy{input=\"shared_namespace\"}";
pub const INPUT_NAD_CRD: &str = "linkerd_multus_input_healthy{input=\"nad_crd\"}";
pub const INPUT_NAD_WATCH: &str = "linkerd_multus_input_healthy{input=\"nad_watch\"}";
pub const INPUT_FOREIGN_NADS: &str = "linkerd_multus_input_healthy{input=\"foreign_nads\"}";

/// Creates `crd` unless a CRD of that name exists (tests and other suites share the cluster-wide
/// Multus CRD: never replace or delete it), then waits until it is Established.
pub async fn ensure_crd(client: &Client, crd: &CustomResourceDefinition) {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let name = crd.metadata.name.clone().expect("CRD name");
    match api.create(&PostParams::default(), crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => panic!("creating CRD {name}: {e}"),
    }
    linkerd_multus_e2e::node_multus::wait_established(&api, &name).await;
}

/// The Multus CRD moved to `group` (same schema): a NAD kind this test alone uses.
pub fn crd_in_group(group: &str) -> CustomResourceDefinition {
    let mut crd = linkerd_multus_crds::crd();
    crd.spec.group = group.to_string();
    crd.metadata.name = Some(format!("{}.{group}", crd.spec.names.plural));
    crd
}

/// Reads a whole JSON value at `pointer` from a dynamic object.
pub fn at<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a Value> {
    obj.data.pointer(pointer)
}

/// The field managers that have written `meta`'s object, in the order the apiserver lists them.
pub fn field_managers(meta: &kube::api::ObjectMeta) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect()
}
