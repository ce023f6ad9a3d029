//! Failure drills (README "Reliability"): the operator as a real process on a control plane of each
//! drill's own (so its apiserver can be killed and its CRD deleted without touching other tests),
//! broken on purpose. Each drill prints the figure it measured (`MEASURE ...`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use linkerd_multus_e2e::events::wait_for_warning;
use linkerd_multus_e2e::operator_process::OperatorProcess;
use linkerd_multus_e2e::{
    binary, eventually, eventually_within, free_port, unique_name, DedicatedTestbed,
};
use nix::sys::signal::Signal;
use serde_json::{json, Value};

const CNI_NS: &str = "linkerd-cni";
const CM: &str = "linkerd-cni-config";
const OPERATOR_NS: &str = "linkerd-multus";
const WEBHOOK_CONFIG: &str = "linkerd-multus-drill";
const CONVERGE: Duration = Duration::from_secs(120);

// === the operator as a process ===

/// A replica of `linkerd-multus-operator` (the kit's process), with its webhook address and name.
struct Replica {
    process: OperatorProcess,
    webhook: String,
    identity: String,
}

impl Replica {
    /// Starts it against `bed` as replica `identity` (leader election on), plus `extra` flags.
    fn start(bed: &DedicatedTestbed, dir: &Path, identity: &str, extra: &[String]) -> Self {
        let log = dir.join(format!("operator-{identity}.log"));
        let webhook = format!("127.0.0.1:{}", free_port());
        let process =
            OperatorProcess::command(&binary("linkerd-multus-operator"), &bed.kubeconfig(), log)
                .append_log()
                .env("RUST_LOG", "info,linkerd_multus_operator=debug")
                .args(["--namespace", OPERATOR_NS, "--leader-elect"])
                .args(["--pod-name", identity])
                .args(["--webhook-addr", webhook.as_str()])
                .args(["--webhook-cert-secret", "linkerd-multus-drill-cert"])
                .args(["--webhook-config-name", WEBHOOK_CONFIG])
                // The drills measure the webhook path (operator down: pods wait), whatever the server.
                .args(["--admission", "webhook"])
                .args(extra)
                .spawn()
                .expect("starting linkerd-multus-operator");
        Self {
            process,
            webhook,
            identity: identity.to_string(),
        }
    }
}

impl std::ops::Deref for Replica {
    type Target = OperatorProcess;
    fn deref(&self) -> &OperatorProcess {
        &self.process
    }
}

impl std::ops::DerefMut for Replica {
    fn deref_mut(&mut self) -> &mut OperatorProcess {
        &mut self.process
    }
}

// === the cluster around it ===

/// A dedicated control plane with what the operator reads: the NAD CRD, linkerd-cni's ConfigMap.
struct Drill {
    bed: DedicatedTestbed,
    client: Client,
    dir: PathBuf,
}

impl Drill {
    async fn up(prefix: &str) -> Self {
        let bed = DedicatedTestbed::up(prefix);
        let client = bed.client().await;
        let dir = std::env::temp_dir().join(unique_name(prefix));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let d = Self { bed, client, dir };
        d.install_crd().await;
        for ns in [CNI_NS, OPERATOR_NS, "linkerd"] {
            d.create_namespace(ns, BTreeMap::new()).await;
        }
        d.put_config(&cni_config("info")).await;
        d
    }

    fn operator(&self, identity: &str, extra: &[&str]) -> Replica {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Replica::start(&self.bed, &self.dir, identity, &extra)
    }

    async fn install_crd(&self) {
        let api = Api::<CustomResourceDefinition>::all(self.client.clone());
        let crd = linkerd_multus_crds::crd();
        let name = crd.metadata.name.clone().expect("name");
        api.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
        eventually("the NAD CRD is Established", || async {
            api.get(&name)
                .await
                .ok()?
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
        })
        .await;
    }

    async fn create_namespace(&self, name: &str, annotations: BTreeMap<String, String>) {
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations, "labels": {"drill": name}}
        }))
        .expect("namespace");
        match Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => panic!("create namespace {name}: {e}"),
        }
    }

    async fn put_config(&self, raw: &str) {
        let cm = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": CNI_NS},
            "data": {"cni_network_config": raw},
        });
        Api::<ConfigMap>::namespaced(self.client.clone(), CNI_NS)
            .patch(CM, &PatchParams::apply("drill").force(), &Patch::Apply(&cm))
            .await
            .expect("write ConfigMap");
    }

    fn nads(&self, ns: &str) -> Api<NetworkAttachmentDefinition> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Every NAD of the cluster, as (namespace, name) → the whole object as JSON.
    async fn all_nads(&self) -> Option<BTreeMap<(String, String), Value>> {
        let list = Api::<NetworkAttachmentDefinition>::all(self.client.clone())
            .list(&Default::default())
            .await
            .ok()?;
        Some(
            list.items
                .into_iter()
                .map(|n| {
                    let key = (
                        n.metadata.namespace.clone().unwrap_or_default(),
                        n.metadata.name.clone().unwrap_or_default(),
                    );
                    (key, serde_json::to_value(&n).expect("json"))
                })
                .collect(),
        )
    }

    /// A NAD of the operator's name without its label, and another NAD, in `ns`: someone else's.
    async fn create_foreign_nads(&self, ns: &str) {
        for (name, config) in [
            (vocab::NAD_NAME, r#"{"type":"theirs"}"#),
            ("other-net", r#"{"type":"macvlan"}"#),
        ] {
            let nad: NetworkAttachmentDefinition = serde_json::from_value(json!({
                "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name, "namespace": ns, "labels": {"owner": "someone-else"}},
                "spec": {"config": config}
            }))
            .expect("NAD");
            self.nads(ns)
                .create(&PostParams::default(), &nad)
                .await
                .expect("create foreign NAD");
        }
    }

    /// Each of `enabled` holds an owned NAD whose config contains `needle`; else what is missing.
    async fn converged(
        &self,
        enabled: &[String],
        needle: &str,
        foreign: &BTreeMap<(String, String), Value>,
    ) -> Result<(), String> {
        let all = self
            .all_nads()
            .await
            .ok_or_else(|| "cannot list NADs".to_string())?;
        let wanted: std::collections::BTreeSet<&String> = enabled
            .iter()
            .filter(|ns| !foreign.keys().any(|(n, _)| n == *ns))
            .collect();
        let done: std::collections::BTreeSet<&String> = all
            .iter()
            .filter(|((ns, _), v)| wanted.contains(ns) && is_ours(v))
            .filter(|(_, v)| config_of(v).contains(needle))
            .map(|((ns, _), _)| ns)
            .collect();
        let missing: Vec<_> = wanted.difference(&done).take(5).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} of {} converged; e.g. not yet: {missing:?}",
                done.len(),
                wanted.len()
            ))
        }
    }

    /// Once converged: one NAD per enabled namespace (ours, or the untouched foreign one), the foreign
    /// NADs exactly as before, no NAD anywhere else (but Linkerd's namespace).
    async fn assert_converged(
        &self,
        enabled: &[String],
        foreign: &BTreeMap<(String, String), Value>,
    ) {
        let all = self.all_nads().await.expect("list NADs");
        for ns in enabled {
            let here: Vec<_> = all.keys().filter(|(n, _)| n == ns).collect();
            let nad = all
                .get(&(ns.clone(), vocab::NAD_NAME.to_string()))
                .unwrap_or_else(|| panic!("no NAD in {ns}"));
            if foreign.keys().any(|(n, _)| n == ns) {
                assert!(!is_ours(nad), "the foreign NAD in {ns} was taken over");
            } else {
                assert!(is_ours(nad), "NAD in {ns} not owned");
                assert_eq!(here.len(), 1, "more than one NAD in {ns}: {here:?}");
            }
        }
        for (key, before) in foreign {
            assert_eq!(
                all.get(key),
                Some(before),
                "foreign NAD {key:?} was touched"
            );
        }
        let elsewhere: Vec<_> = all
            .keys()
            .filter(|(n, _)| !enabled.contains(n) && n != "linkerd")
            .collect();
        assert!(
            elsewhere.is_empty(),
            "NADs where none is wanted: {elsewhere:?}"
        );
    }

    /// Plays the kubelet for `ops` (an operator that exited is started again under its identity)
    /// until every NAD converged; returns the time it took and the exits seen.
    async fn supervise_until_converged(
        &self,
        ops: &mut [Replica],
        enabled: &[String],
        needle: &str,
        foreign: &BTreeMap<(String, String), Value>,
    ) -> (Duration, Vec<ExitStatus>) {
        let started = Instant::now();
        let mut exits = Vec::new();
        while let Err(why) = self.converged(enabled, needle, foreign).await {
            for op in ops.iter_mut() {
                if let Some(status) = op.exited() {
                    exits.push(status);
                    *op = self.operator(&op.identity.clone(), &[]);
                }
            }
            assert!(
                started.elapsed() < CONVERGE,
                "no convergence within {CONVERGE:?}: {why}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let took = started.elapsed();
        self.assert_converged(enabled, foreign).await;
        (took, exits)
    }

    /// The 500 namespaces of a fan-out, the first two already holding someone else's NADs (not yet
    /// enabled); and those foreign NADs as they are.
    async fn fan_out_namespaces(&self) -> (Vec<String>, BTreeMap<(String, String), Value>) {
        let enabled = names("fan", 500);
        for ns in &enabled[..2] {
            self.create_namespace(ns, BTreeMap::new()).await;
            self.create_foreign_nads(ns).await;
        }
        (enabled, self.all_nads().await.expect("NADs"))
    }

    async fn owned_nad_count(&self) -> usize {
        self.all_nads()
            .await
            .map(|all| all.values().filter(|v| is_ours(v)).count())
            .unwrap_or(0)
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("operator logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Creates `names` annotated enabled, `parallel` at a time, retrying each until it exists (the
/// apiserver may be down meanwhile); `created` counts them.
async fn enable_many(
    client: Client,
    names: Vec<String>,
    parallel: usize,
    created: Arc<AtomicUsize>,
) {
    let names = Arc::new(std::sync::Mutex::new(names));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..parallel {
        let (names, created, api) = (
            names.clone(),
            created.clone(),
            Api::<Namespace>::all(client.clone()),
        );
        workers.spawn(async move {
            loop {
                let Some(name) = names.lock().expect("names").pop() else {
                    return;
                };
                let ns: Namespace = serde_json::from_value(json!({"metadata": {
                    "name": name,
                    "annotations": {vocab::MULTUS_ANNOTATION: vocab::MULTUS_ENABLED}
                }}))
                .expect("namespace");
                loop {
                    match api.create(&PostParams::default(), &ns).await {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.is_already_exists() => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
                created.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.expect("namespace worker");
    }
}

fn is_ours(nad: &Value) -> bool {
    nad["metadata"]["labels"][vocab::MANAGED_BY_LABEL] == vocab::MANAGED_BY_VALUE
}

fn config_of(nad: &Value) -> &str {
    nad["spec"]["config"].as_str().unwrap_or_default()
}

/// Linkerd's chart ConfigMap value (the repository's one copy) at `log_level`.
fn cni_config(log_level: &str) -> String {
    let mut v: Value = serde_json::from_str(include_str!(
        "../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    v["log_level"] = json!(log_level);
    v.to_string()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:03}")).collect()
}

// === drill 1: broken inputs never stop admission ===

/// Polls `/ready` every 100 ms until stopped; counts answers other than 200.
fn watch_readiness(op: &Replica) -> (Arc<AtomicBool>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (stop, bad, polls) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (s, b, p, url) = (
        stop.clone(),
        bad.clone(),
        polls.clone(),
        format!("http://{}/ready", op.admin()),
    );
    tokio::spawn(async move {
        while !s.load(Ordering::Relaxed) {
            let ok = matches!(reqwest::get(&url).await, Ok(r) if r.status() == 200);
            if !ok {
                b.fetch_add(1, Ordering::Relaxed);
            }
            p.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (stop, bad, polls)
}

/// Drill 1: the ConfigMap deleted, then broken JSON, then (ConfigMap good again) the NAD CRD deleted.
/// Throughout, `/ready` stays 200 and a pod created in the enabled namespace is patched by the webhook
/// through the apiserver; while the ConfigMap is broken the NAD stays byte-identical; Warning Events
/// and the `input_healthy` gauge say which input is broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one) and built binaries: run by e2e/test-all"]
async fn drill_1_broken_inputs_never_stop_admission() {
    let mut drill = Drill1::up().await;
    let (stop, bad, polls) = watch_readiness(&drill.op);
    let mut admission = vec![drill.admitted().await];
    admission.push(drill.step_configmap_deleted().await);
    admission.push(drill.step_broken_json().await);
    drill.step_configmap_good_again().await;
    admission.push(drill.step_crd_deleted().await);

    stop.store(true, Ordering::Relaxed);
    let (bad, polls) = (bad.load(Ordering::Relaxed), polls.load(Ordering::Relaxed));
    eprintln!(
        "MEASURE drill 1: /ready polled {polls} times over the drill, {bad} not 200; pod admission \
         (webhook through the apiserver) per phase [healthy, ConfigMap deleted, broken JSON, CRD \
         deleted]: {admission:?}"
    );
    assert!(polls > 10, "readiness was polled ({polls})");
    assert_eq!(bad, 0, "/ready answered other than 200 {bad} times");
}

/// Drill 1's world: one operator whose webhook the apiserver calls (failurePolicy Fail) for the
/// enabled namespace `APP`, and that namespace's NAD as first written.
struct Drill1 {
    d: Drill,
    op: Replica,
    nad_before: Value,
    pods: Api<Pod>,
    created: usize,
}

impl Drill1 {
    const APP: &'static str = "drill-app";

    async fn up() -> Self {
        let d = Drill::up("drill-inputs").await;
        let app = Self::APP;
        let enabled = [(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )];
        d.create_namespace(app, enabled.into()).await;
        let op = d.operator("drill-a", &[]);
        let mwc: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": WEBHOOK_CONFIG},
            "webhooks": [{
                "name": "attach.multus.linkerd.io",
                "clientConfig": {"url": format!("https://{}/annotate-multus-v1-pod", op.webhook)},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {"drill": app}},
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                "timeoutSeconds": 10
            }]
        }))
        .expect("webhook configuration");
        let mwcs = Api::<MutatingWebhookConfiguration>::all(d.client.clone());
        mwcs.create(&PostParams::default(), &mwc)
            .await
            .expect("register the webhook");
        op.wait_ready().await;
        eventually("the operator filled in the caBundle", || async {
            let mwc = mwcs.get(WEBHOOK_CONFIG).await.ok()?;
            mwc.webhooks?[0]
                .client_config
                .ca_bundle
                .as_ref()
                .map(|_| ())
        })
        .await;
        let nad_before = eventually("the app NAD", || async {
            d.nads(app).get_opt(vocab::NAD_NAME).await.ok()?
        })
        .await;
        let nad_before = serde_json::to_value(&nad_before).expect("json");
        op.wait_metric(INPUT_CONFIGMAP, 1.0).await;
        let pods = Api::<Pod>::namespaced(d.client.clone(), app);
        Self {
            d,
            op,
            nad_before,
            pods,
            created: 0,
        }
    }

    /// Creates a pod through the apiserver: admitted and patched by the webhook; how long it took.
    async fn admitted(&mut self) -> Duration {
        self.created += 1;
        let n = self.created;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("web-{n}")},
            "spec": {"containers": [{"name": "app", "image": "example.com/app:1"}]}
        }))
        .expect("pod");
        let started = Instant::now();
        let created = self
            .pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod admitted");
        let networks = created
            .metadata
            .annotations
            .unwrap_or_default()
            .get(vocab::NETWORKS_ANNOTATION)
            .cloned();
        assert_eq!(
            networks.as_deref(),
            Some(vocab::NAD_NAME),
            "pod {n} not patched"
        );
        started.elapsed()
    }

    async fn warned(&self, reason: &'static str) {
        let what = format!("a {reason} Warning Event");
        wait_for_warning(&self.d.client, Self::APP, reason, &what, |_| true).await;
    }

    async fn same_nad(&self) {
        let now = self
            .d
            .nads(Self::APP)
            .get(vocab::NAD_NAME)
            .await
            .expect("NAD kept");
        assert_eq!(
            serde_json::to_value(&now).expect("json"),
            self.nad_before,
            "the NAD changed"
        );
    }

    /// 1a. The ConfigMap deleted.
    async fn step_configmap_deleted(&mut self) -> Duration {
        Api::<ConfigMap>::namespaced(self.d.client.clone(), CNI_NS)
            .delete(CM, &DeleteParams::default())
            .await
            .expect("delete ConfigMap");
        self.op.wait_metric(INPUT_CONFIGMAP, 0.0).await;
        self.warned("CniConfigMapMissing").await;
        let took = self.admitted().await;
        self.same_nad().await;
        took
    }

    /// 1b. Broken JSON.
    async fn step_broken_json(&mut self) -> Duration {
        self.d.put_config("{\"name\": ").await;
        self.warned("CniConfigInvalidJson").await;
        assert_eq!(self.op.metric(INPUT_CONFIGMAP).await, Some(0.0));
        let took = self.admitted().await;
        self.same_nad().await;
        took
    }

    /// Good again, with the same content: nothing to write, the NAD stays byte-identical.
    async fn step_configmap_good_again(&self) {
        self.d.put_config(&cni_config("info")).await;
        self.op.wait_metric(INPUT_CONFIGMAP, 1.0).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.same_nad().await;
    }

    /// 1c. The NAD CRD deleted (with it every NAD: nothing is left to keep).
    async fn step_crd_deleted(&mut self) -> Duration {
        Api::<CustomResourceDefinition>::all(self.d.client.clone())
            .delete(
                "network-attachment-definitions.k8s.cni.cncf.io",
                &DeleteParams::default(),
            )
            .await
            .expect("delete CRD");
        self.op.wait_metric(INPUT_NAD_WATCH, 0.0).await;
        self.op.wait_metric(INPUT_NAD_CRD, 0.0).await;
        // Any change of the namespace reconciles it, which finds the kind gone and says so there.
        Api::<Namespace>::all(self.d.client.clone())
            .patch(
                Self::APP,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"drill/touch": "1"}}})),
            )
            .await
            .expect("touch namespace");
        self.warned("NetworkAttachmentDefinitionCrdMissing").await;
        self.admitted().await
    }
}

const INPUT_CONFIGMAP: &str = "linkerd_multus_input_healthy{input=\"configmap\"}";
const INPUT_NAD_CRD: &str = "linkerd_multus_input_healthy{input=\"nad_crd\"}";
const INPUT_NAD_WATCH: &str = "linkerd_multus_input_healthy{input=\"nad_watch\"}";

// === drill 2: the apiserver killed mid fan-out ===

/// Drill 2: while 500 namespaces are being enabled, kube-apiserver is SIGKILLed and started again.
/// The operator keeps running (or, if it exits, exits cleanly and is restarted as the kubelet would);
/// every NAD converges, none is duplicated, the foreign NADs are untouched. Prints the time from the
/// apiserver's restart to convergence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one, killed on purpose) and built binaries: run by e2e/test-all"]
async fn drill_2_apiserver_killed_mid_fan_out() {
    let d = Drill::up("drill-apiserver").await;
    let (enabled, foreign) = d.fan_out_namespaces().await;
    let op = d.operator("drill-a", &[]);
    op.wait_ready().await;

    let created = Arc::new(AtomicUsize::new(0));
    let fan_out = tokio::spawn(enable_many(
        d.client.clone(),
        enabled.clone(),
        8,
        created.clone(),
    ));
    // Mid fan-out: some namespaces created, some NADs written.
    eventually_within("the fan-out under way", CONVERGE, || async {
        (created.load(Ordering::Relaxed) >= 150 && d.owned_nad_count().await >= 20).then_some(())
    })
    .await;
    let argv = d.bed.kill_apiserver();
    let at_kill = created.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let bed = &d.bed;
    tokio::task::block_in_place(|| bed.start_apiserver(&argv));
    let restarted = Instant::now();
    fan_out.await.expect("fan-out task");
    let mut ops = [op];
    let (_, exits) = d
        .supervise_until_converged(&mut ops, &enabled, vocab::NAD_NAME, &foreign)
        .await;
    eprintln!(
        "MEASURE drill 2: kube-apiserver SIGKILLed with {at_kill} of 500 namespaces created, down 3 s; \
         every NAD converged {:?} after its restart; operator exits meanwhile: {exits:?}",
        restarted.elapsed()
    );
    for status in &exits {
        assert!(
            status.success(),
            "the operator did not exit cleanly: {status}"
        );
    }
    let [mut op] = ops;
    assert!(op.exited().is_none(), "the operator runs at the end");
}

// === drill 3: the operator killed, and the leader handing over, mid fan-out ===

/// The replica holding the leader Lease.
async fn leader(client: &Client) -> Option<String> {
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), OPERATOR_NS)
            .get_opt(vocab::DEFAULT_LEASE_NAME)
            .await
            .ok()??;
    lease.spec?.holder_identity
}

/// Drill 3: (a) 500 enabled namespaces, the operator SIGKILLed mid fan-out and another replica started
/// (it takes over once the dead leader's Lease expires); (b) two replicas, a ConfigMap edit fanned out
/// to every NAD, and the leader stopped (SIGTERM: it hands the Lease over) mid fan-out. Each time every
/// NAD converges, none is duplicated, the foreign NADs are untouched. Prints the time from the kill
/// (hand-off) to convergence. `--max-concurrent-reconciles 2` keeps the fan-out long enough to cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, a dedicated one) and built binaries: run by e2e/test-all"]
async fn drill_3_operator_killed_and_leader_handoff_mid_fan_out() {
    let d = Drill::up("drill-operator").await;
    let (enabled, foreign) = d.fan_out_namespaces().await;
    enable_many(
        d.client.clone(),
        enabled.clone(),
        8,
        Arc::new(AtomicUsize::new(0)),
    )
    .await;
    let slow = ["--max-concurrent-reconciles", "2"];
    let wanted = enabled.len() - 2;

    // (a) SIGKILL mid fan-out.
    let mut a = d.operator("drill-a", &slow);
    eventually_within("the fan-out under way", CONVERGE, || async {
        (d.owned_nad_count().await >= 50).then_some(())
    })
    .await;
    a.signal(Signal::SIGKILL);
    let killed = Instant::now();
    let at_kill = d.owned_nad_count().await;
    let status = a.wait_exit();
    assert!(
        at_kill < wanted,
        "the fan-out was over before the kill ({at_kill})"
    );
    let mut ops = [d.operator("drill-b", &slow)];
    let (_, exits) = d
        .supervise_until_converged(&mut ops, &enabled, vocab::NAD_NAME, &foreign)
        .await;
    let after_kill = killed.elapsed();
    assert!(exits.is_empty(), "the new replica exited: {exits:?}");
    eprintln!(
        "MEASURE drill 3a: operator SIGKILLed ({status}) with {at_kill} of {wanted} NADs written; \
         a new replica converged every NAD {after_kill:?} after the kill (includes the dead leader's \
         15 s Lease)"
    );

    // (b) Hand-off mid fan-out: a second replica, then a ConfigMap edit, then the leader stopped.
    let [b] = ops;
    let c = d.operator("drill-c", &slow);
    c.wait_ready().await;
    let leading = leader(&d.client).await.expect("a leader");
    assert_eq!(leading, "drill-b", "the replica that converged leads");
    d.put_config(&cni_config("debug")).await;
    let needle = "\"log_level\":\"debug\"";
    eventually_within("the edit's fan-out under way", CONVERGE, || async {
        let all = d.all_nads().await?;
        (all.values()
            .filter(|v| config_of(v).contains(needle))
            .count()
            >= 20)
            .then_some(())
    })
    .await;
    let at_handoff = d.all_nads().await.map(|all| {
        all.values()
            .filter(|v| config_of(v).contains(needle))
            .count()
    });
    b.signal(Signal::SIGTERM);
    let handed = Instant::now();
    let mut b = b;
    let stopped = tokio::task::block_in_place(|| b.wait_exit());
    assert!(
        stopped.success(),
        "the leader did not stop cleanly: {stopped}"
    );
    let mut ops = [c];
    let (_, exits) = d
        .supervise_until_converged(&mut ops, &enabled, needle, &foreign)
        .await;
    let after_handoff = handed.elapsed();
    assert!(exits.is_empty(), "the new leader exited: {exits:?}");
    assert_eq!(leader(&d.client).await.as_deref(), Some("drill-c"));
    eprintln!(
        "MEASURE drill 3b: leader drill-b stopped (SIGTERM, exit {stopped}) with {at_handoff:?} of \
         {wanted} NADs updated; drill-c took over and every NAD converged {after_handoff:?} after the \
         SIGTERM"
    );
}
