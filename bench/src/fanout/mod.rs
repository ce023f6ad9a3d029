//! Controller fan-out on a dedicated apiserver: the real operator process against a minimal client
//! doing the same server-side applies as fast as it can.
//!
//! 1. `n` namespaces, already enabled, exist when the operator starts -> time from its start until
//!    every NAD exists. Floor: `n` applies of a same-sized NAD at `concurrency` in flight (the
//!    operator runs with the same `--max-concurrent-reconciles`).
//! 2. The CNI ConfigMap edited -> time until every NAD is updated. Floor: `n` applies of the change,
//!    in turns with the operator ([`edit`]).
//!
//! Both sides are timed until a metadata watch of their NADs has seen them all.
//! 3. Idle: writes the operator sends over two forced resyncs (its `nad_writes` counter; target 0).
//! 4. Operator RSS after the fan-out, and with `memory_namespaces` enabled namespaces if larger.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use linkerd_multus_e2e::free_port;
use linkerd_multus_e2e::operator_process::OperatorProcess;
use serde_json::json;

use crate::args::OperatorBenchArgs;
use crate::procs::status_kb;
use crate::row;

pub mod edit;

use self::edit::{edit_then_idle, Edit};

/// Label selecting the bench's namespaces (the operator's hidden `--namespace-selector`).
pub(crate) const LABEL: &str = "linkerd-multus-bench/fanout";
pub(crate) const PREFIX: &str = "bench-fan-";
pub(crate) const FLOOR_NAD: &str = "bench-floor";
pub(crate) const FLOOR_MANAGER: &str = "linkerd-multus-bench-floor";

/// The floor's NAD metadata: the operator's NADs carry its managed-by label, so the floor's carry
/// one of the same key (another value, which the operator ignores) and both write the same shape.
pub(crate) fn floor_metadata() -> serde_json::Value {
    json!({
        "name": FLOOR_NAD,
        "labels": { vocab::MANAGED_BY_LABEL: FLOOR_MANAGER },
    })
}
pub(crate) const CNI_NAMESPACE: &str = "bench-cni";
const POLL: Duration = Duration::from_millis(200);
const PATIENCE: Duration = Duration::from_secs(1800);

#[derive(clap::Args, Debug, Clone)]
pub struct FanoutArgs {
    #[command(flatten)]
    pub target: OperatorBenchArgs,
    /// Namespaces enabled at once.
    #[arg(long, default_value_t = 2000)]
    pub namespaces: usize,
    /// Requests in flight: the operator's `--max-concurrent-reconciles` and the floor client's (and
    /// the bench's own setup), the same on both sides. Default: the operator's own default.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// The operator's `--resync` for the idle part: e.g. 10s (a bare number is seconds).
    #[arg(long, alias = "resync-seconds", value_name = "DURATION", default_value = "10s",
          value_parser = vocab::duration::flag)]
    pub resync: Duration,
    /// ConfigMap edits, each timed on both sides in turns; the row is the median round.
    #[arg(long, default_value_t = 3)]
    pub edit_rounds: usize,
    /// Diagnostic, off in `bench/run`: the floor also keeps a watch of its NADs, so its turns pay the
    /// apiserver for serving it too: of whole objects (as the operator's own, the default) or of
    /// their metadata only.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "whole", value_name = "KIND")]
    pub floor_watches_its_nads: Option<edit::WatchKind>,
    /// Enabled namespaces for the memory row (more are created after the fan-out); 0 = skip.
    #[arg(long, default_value_t = 0)]
    pub memory_namespaces: usize,
}

/// The linkerd2-cni chart's `cni_network_config` (the repository's one copy), with one knob to edit.
pub(crate) fn template(log_level: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(include_str!(
        "../../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    v["log_level"] = json!(log_level);
    v.to_string()
}

pub async fn run(args: FanoutArgs) -> anyhow::Result<()> {
    let client = args.target.client().await;
    ensure_crd(&client).await?;
    apply_namespace(&client, CNI_NAMESPACE, LABEL, false).await?;
    put_config(&client, "info").await?;

    let started = Instant::now();
    let names = create_enabled(&client, 0..args.namespaces, args.concurrency).await?;
    eprintln!(
        "fanout: {} enabled namespaces created in {:.1}s",
        names.len(),
        started.elapsed().as_secs_f64()
    );

    let dir = std::env::temp_dir().join(format!("linkerd-multus-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let concurrency = args.concurrency.to_string();
    let mut operator = Operator::start(
        &args.target,
        args.resync,
        &dir,
        &["--max-concurrent-reconciles", &concurrency],
    )?;
    let result = measure(&args, &client, &names, &mut operator).await;
    operator.stop();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(
    args: &FanoutArgs,
    client: &Client,
    names: &[String],
    operator: &mut Operator,
) -> anyhow::Result<()> {
    let n = names.len();
    // 1. Fan-out from start.
    let created = wait_nads(client, vocab::NAD_NAME, n, |_, _| true, Some(operator)).await?;
    let ours_create = operator.started().elapsed().as_secs_f64();
    let rss_fanout = operator.rss_mb()?;

    let config = nad_config(client, &names[0]).await?;
    let (floor_create, floor_created) = floor_writes(
        client,
        names,
        &config,
        args.concurrency,
        FloorWrite::Create,
        |_, _| true,
    )
    .await?;
    row::compare(
        &format!("controller: {n} enabled namespaces -> every NAD exists"),
        ours_create,
        floor_create,
        "s",
    );

    // 2. ConfigMap edit, 3. idle.
    edit_then_idle(
        client,
        names,
        operator,
        Edit {
            rows: "controller",
            levels: ["info", "debug"],
            ours: created,
            floor: floor_created,
            config,
            concurrency: args.concurrency,
            resync: args.resync,
            rounds: args.edit_rounds,
            floor_watches: args.floor_watches_its_nads,
        },
    )
    .await?;
    let rss_idle = operator.rss_mb()?;
    row::single(
        &format!("operator RSS, {n} enabled namespaces"),
        &format!("{:.1} MB", rss_fanout.max(rss_idle)),
        "target <= 64 MB (at 10k)",
    );

    // 4. Memory with more namespaces.
    if args.memory_namespaces > n {
        let started = Instant::now();
        let more = create_enabled(client, n..args.memory_namespaces, args.concurrency).await?;
        wait_nads(
            client,
            vocab::NAD_NAME,
            args.memory_namespaces,
            |_, _| true,
            Some(operator),
        )
        .await?;
        eprintln!(
            "fanout: {} more namespaces and their NADs in {:.1}s",
            more.len(),
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        row::single(
            &format!(
                "operator RSS, {} enabled namespaces",
                args.memory_namespaces
            ),
            &format!("{:.1} MB", operator.rss_mb()?),
            "target <= 64 MB",
        );
    }
    Ok(())
}

/// The `spec.config` of the operator's NAD in `namespace` (empty when it has none).
pub(crate) async fn nad_config(client: &Client, namespace: &str) -> anyhow::Result<String> {
    let nad = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), namespace)
        .get(vocab::NAD_NAME)
        .await?;
    Ok(nad.spec.config.unwrap_or_default())
}

/// Generation of each bench NAD, by namespace.
pub(crate) type Generations = BTreeMap<String, i64>;

/// Waits until `n` of the bench's namespaces have a NAD for which `ok(namespace, generation)`.
/// Followed with a metadata watch, not by polling lists: a list of every NAD each 200 ms loaded the
/// apiserver while the operator ran (and not while the floor did) and rounded up to the poll.
pub(crate) async fn wait_nads(
    client: &Client,
    nad: &str,
    n: usize,
    ok: impl Fn(&str, i64) -> bool,
    mut operator: Option<&mut Operator>,
) -> anyhow::Result<Generations> {
    let api = Api::<PartialObjectMeta<NetworkAttachmentDefinition>>::all(client.clone());
    // Listed from the apiserver's watch cache: waiting needs no quorum read, which pages through
    // every NAD in etcd (both sides' 10,000 at 5,000 namespaces) on the apiserver being measured.
    // Unpaged: kube drops `resourceVersion=0` from a list with a limit (the watcher's default page
    // of 500), which made each wait such a read (seen in the apiserver's audit log).
    let mut config = watcher::Config::default()
        .fields(&format!("metadata.name={nad}"))
        .any_semantic();
    config.page_size = None;
    let events = watcher::watcher(api, config).default_backoff();
    let mut events = std::pin::pin!(events);
    let deadline = Instant::now() + PATIENCE;
    let mut gens = Generations::new();
    while gens.len() < n {
        let exited = match operator.as_deref_mut() {
            Some(op) => op.exited(),
            None => None,
        };
        if let Some(status) = exited {
            bail!(
                "the operator exited ({status}); see its log: {}",
                log_path().display()
            );
        }
        if Instant::now() > deadline {
            bail!("only {} of {n} NADs ready after {PATIENCE:?}", gens.len());
        }
        let event = match tokio::time::timeout(POLL, events.try_next()).await {
            Ok(Ok(event)) => event.context("the NAD watch ended")?,
            // The watcher lists again by itself: at 150,000 pods the apiserver expired the watch's
            // resource version (410) while the operator wrote 10,000 NADs, and that ended a run.
            Ok(Err(e)) => {
                eprintln!("bench: the NAD watch failed, it lists again: {e}");
                continue;
            }
            Err(_) => continue,
        };
        let (meta, gone) = match event {
            watcher::Event::Apply(m) | watcher::Event::InitApply(m) => (m.metadata, false),
            watcher::Event::Delete(m) => (m.metadata, true),
            // A new list says what is there now: what an earlier one said may be gone.
            watcher::Event::Init => {
                gens.clear();
                continue;
            }
            watcher::Event::InitDone => continue,
        };
        let Some(ns) = meta.namespace.filter(|ns| ns.starts_with(PREFIX)) else {
            continue;
        };
        let gen = meta.generation.unwrap_or(0);
        if !gone && ok(&ns, gen) {
            gens.insert(ns, gen);
        } else {
            gens.remove(&ns);
        }
    }
    Ok(gens)
}

/// How the floor writes each NAD: the operator creates a new NAD with a POST and changes it with a
/// forced server-side apply, so the floor does the same and both edit objects of one shape (a NAD
/// made by a POST keeps that manager's entry in its managedFields through every apply after).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloorWrite {
    Create,
    Apply,
}

/// The floor: one write of a NAD with `config` per namespace, `concurrency` in flight, timed like
/// ours: until the same kind of watch has seen every NAD satisfy `ok` (the watch's cost on the
/// apiserver is then in both). Returns the seconds and the generations seen.
pub(crate) async fn floor_writes(
    client: &Client,
    names: &[String],
    config: &str,
    concurrency: usize,
    write: FloorWrite,
    ok: impl Fn(&str, i64) -> bool,
) -> anyhow::Result<(f64, Generations)> {
    let started = Instant::now();
    let seen = wait_nads(client, FLOOR_NAD, names.len(), ok, None);
    let writes = for_each(names, concurrency, |ns| {
        let body = json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": floor_metadata(),
            "spec": { "config": config },
        });
        // The answer is read as text and dropped, never decoded: the operator decodes only the
        // fields it keeps (`NadRead`), and a floor that built whole NADs spent twice its CPU
        // (0.55 against 0.19 s for 734 applies), which on 2 cores the apiserver went without.
        let path = <NetworkAttachmentDefinition as kube::Resource>::url_path(&(), Some(&ns));
        let request = kube::core::Request::new(path);
        let request = match write {
            FloorWrite::Create => {
                let params = PostParams {
                    field_manager: Some(FLOOR_MANAGER.to_string()),
                    ..PostParams::default()
                };
                request.create(&params, serde_json::to_vec(&body).expect("a JSON value"))
            }
            FloorWrite::Apply => {
                let params = PatchParams::apply(FLOOR_MANAGER).force();
                request.patch(FLOOR_NAD, &params, &Patch::Apply(body))
            }
        };
        async move {
            match client
                .request_text(request.context("building the floor's request")?)
                .await
            {
                Ok(_) => Ok(()),
                // The scale part grows one cluster: the last size's NADs are there.
                Err(kube::Error::Api(s))
                    if write == FloorWrite::Create && s.is_already_exists() =>
                {
                    Ok(())
                }
                Err(e) => Err(e.into()),
            }
        }
    });
    let (written, seen) = tokio::join!(writes, seen);
    written?;
    Ok((started.elapsed().as_secs_f64(), seen?))
}

async fn for_each<F, Fut>(names: &[String], concurrency: usize, f: F) -> anyhow::Result<()>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    stream::iter(names.iter().cloned().map(f))
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// Creates the enabled namespaces `{PREFIX}{i}` for each `i` in `range`; returns their names.
pub(crate) async fn create_enabled(
    client: &Client,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = range.map(|i| format!("{PREFIX}{i}")).collect();
    for_each(&names, concurrency, |ns| {
        let client = client.clone();
        async move { apply_namespace(&client, &ns, LABEL, true).await }
    })
    .await?;
    Ok(names)
}

/// Applies the namespace with `label=1` and the opt-in annotation set or absent.
pub(crate) async fn apply_namespace(
    client: &Client,
    name: &str,
    label: &str,
    enabled: bool,
) -> anyhow::Result<()> {
    let mut meta = json!({ "name": name, "labels": { label: "1" } });
    if enabled {
        meta["annotations"] = json!({ (vocab::MULTUS_ANNOTATION): vocab::MULTUS_ENABLED });
    }
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(FLOOR_MANAGER),
            &Patch::Apply(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": meta })),
        )
        .await
        .with_context(|| format!("applying namespace {name}"))?;
    Ok(())
}

pub(crate) async fn put_config(client: &Client, log_level: &str) -> anyhow::Result<()> {
    Api::<ConfigMap>::namespaced(client.clone(), CNI_NAMESPACE)
        .patch(
            vocab::DEFAULT_CNI_CONFIGMAP,
            &PatchParams::apply(FLOOR_MANAGER),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": vocab::DEFAULT_CNI_CONFIGMAP },
                "data": { (vocab::CNI_CONFIG_KEY): template(log_level) },
            })),
        )
        .await?;
    Ok(())
}

/// Installs Multus' NAD CRD unless present and waits until it is served.
pub(crate) async fn ensure_crd(client: &Client) -> anyhow::Result<()> {
    let resource = ApiResource::erase::<NetworkAttachmentDefinition>(&());
    ensure_crd_served(client, linkerd_multus_crds::crd(), &resource).await
}

/// Installs `crd` unless present and waits until its kind (`resource`) is served.
pub(crate) async fn ensure_crd_served(
    client: &Client,
    crd: CustomResourceDefinition,
    resource: &ApiResource,
) -> anyhow::Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    let objects = Api::<DynamicObject>::all_with(client.clone(), resource);
    for _ in 0..100 {
        if objects
            .list_metadata(&ListParams::default().limit(1))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
    bail!("the {} CRD is not served after 20 s", resource.kind)
}

/// The operator process under test (the kit's, killed when dropped).
pub(crate) struct Operator(OperatorProcess);

impl std::ops::Deref for Operator {
    type Target = OperatorProcess;
    fn deref(&self) -> &OperatorProcess {
        &self.0
    }
}

impl std::ops::DerefMut for Operator {
    fn deref_mut(&mut self) -> &mut OperatorProcess {
        &mut self.0
    }
}

/// Where the operator's stderr goes (kept after the run, for a look when something failed).
fn log_path() -> PathBuf {
    std::env::temp_dir().join("linkerd-multus-bench-operator.log")
}

impl Operator {
    /// Started with `flags` added to the bench's own; without a `--namespace-selector` among them,
    /// it selects the bench's namespaces.
    pub(crate) fn start(
        target: &OperatorBenchArgs,
        resync: Duration,
        dir: &Path,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let bundle = linkerd_multus_webhook::cert_authority::issue(
            &["localhost".to_string()],
            std::time::SystemTime::now(),
            linkerd_multus_webhook::cert_authority::VALIDITY,
            None,
        )?;
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, &bundle.cert_pem)?;
        std::fs::write(&key, &bundle.key_pem)?;
        let webhook = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let bin = &target.operator;
        let bench_namespaces = format!("{LABEL}=1");
        let selector = (!flags.contains(&"--namespace-selector"))
            .then_some(["--namespace-selector", &bench_namespaces]);
        let process = OperatorProcess::command(bin, &target.kubeconfig, log_path())
            .discard_stdout()
            // BENCH_OPERATOR_LOG: the operator's RUST_LOG, to read its timeline in the log file.
            // Repair's info lines by default: the scale part times a leader's start by one.
            .env(
                "RUST_LOG",
                std::env::var("BENCH_OPERATOR_LOG")
                    .unwrap_or_else(|_| "warn,linkerd_multus_operator::repair=info".into()),
            )
            .args(["--cni-namespace", CNI_NAMESPACE])
            .args(["--linkerd-namespace", "bench-linkerd"])
            .args(["--namespace", CNI_NAMESPACE])
            .args(["--webhook-addr", &webhook.to_string()])
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .args(selector.iter().flatten())
            .args(["--resync", &vocab::duration::format(resync)])
            .args(flags)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Self(process))
    }

    /// Resident set size from /proc, in MB.
    pub(crate) fn rss_mb(&self) -> anyhow::Result<f64> {
        self.status_mb("VmRSS")
    }

    /// The largest resident set size the process has had, in MB.
    pub(crate) fn peak_rss_mb(&self) -> anyhow::Result<f64> {
        self.status_mb("VmHWM")
    }

    fn status_mb(&self, field: &str) -> anyhow::Result<f64> {
        Ok(status_kb(&self.pid().to_string(), field)? as f64 / 1024.0)
    }

    /// Sum of the operator's NAD write counters (every op) from its /metrics.
    pub(crate) async fn writes(&self) -> anyhow::Result<f64> {
        Ok(self
            .metric_sum("linkerd_multus_controller_nad_writes_total")
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::edit::WatchKind;
    use super::FanoutArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: FanoutArgs,
    }

    fn floor_watch(extra: &[&str]) -> Result<Option<WatchKind>, clap::Error> {
        let base = ["bench", "--kubeconfig", "k", "--operator", "o"];
        Ok(Cli::try_parse_from(base.iter().chain(extra))?
            .args
            .floor_watches_its_nads)
    }

    #[test]
    fn the_floors_watch_is_off_unless_asked_and_whole_when_asked_bare() {
        assert_eq!(floor_watch(&[]).unwrap(), None);
        let bare = floor_watch(&["--floor-watches-its-nads"]).unwrap();
        assert_eq!(bare, Some(WatchKind::Whole));
        let metadata = floor_watch(&["--floor-watches-its-nads=metadata"]).unwrap();
        assert_eq!(metadata, Some(WatchKind::Metadata));
        assert!(floor_watch(&["--floor-watches-its-nads=spec"]).is_err());
    }
}
