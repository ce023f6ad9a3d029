//! The attach modes against each other, on a dedicated apiserver: one shared NAD (`--nad-namespace`),
//! one per namespace, and none (`--attach aux-chain`). For `n` enabled namespaces: the NAD writes the
//! operator sends (its `nad_writes` counter), the NAD objects left, and the operator's RSS once
//! settled. Counts, not times: the operator may be a debug build.
//!
//! 1. Shared mode from scratch: start (every namespace already enabled), then a ConfigMap edit.
//! 2. Switched to one NAD per namespace: start, then a ConfigMap edit.
//! 3. Switched back to shared: the per-namespace NADs go (no pod uses them).
//! 4. Switched to the auxiliary chain: the shared NAD goes; a ConfigMap edit writes nothing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use kube::api::ListParams;
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;

use crate::args::OperatorBenchArgs;
use crate::fanout::{self, Operator, CNI_NAMESPACE, LABEL};
use crate::row;

/// The shared NAD's namespace (selected by the bench's label, not enabled).
const SHARED_NAMESPACE: &str = "bench-shared-nad";
const POLL: Duration = Duration::from_millis(500);
const PATIENCE: Duration = Duration::from_secs(1800);

#[derive(clap::Args, Debug, Clone)]
pub struct SharedArgs {
    #[command(flatten)]
    pub target: OperatorBenchArgs,
    /// Enabled namespaces.
    #[arg(long, default_value_t = 2000)]
    pub namespaces: usize,
    /// Requests the bench's own setup keeps in flight.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
}

pub async fn run(args: SharedArgs) -> anyhow::Result<()> {
    let client = args.target.client().await;
    fanout::ensure_crd(&client).await?;
    fanout::apply_namespace(&client, CNI_NAMESPACE, LABEL, false).await?;
    fanout::apply_namespace(&client, SHARED_NAMESPACE, LABEL, false).await?;
    fanout::put_config(&client, "info").await?;
    if !nads(&client).await?.is_empty() {
        bail!(
            "NADs named {} exist already: the shared part needs a fresh control plane",
            vocab::NAD_NAME
        );
    }
    let names = fanout::create_enabled(&client, 0..args.namespaces, args.concurrency).await?;
    let n = names.len();
    let dir = std::env::temp_dir().join(format!("linkerd-multus-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let shared_flags = ["--nad-namespace", SHARED_NAMESPACE];
    let start =
        |flags: &[&str]| Operator::start(&args.target, Duration::from_secs(600), &dir, flags);

    // 1. Shared from scratch.
    let mut op = start(&shared_flags)?;
    let shared_start = settle(&client, &mut op, |nads| nads.len() == 1 && shared(nads)).await?;
    let before = generation(&client, SHARED_NAMESPACE).await?;
    fanout::put_config(&client, "debug").await?;
    let shared_edit = settle(&client, &mut op, |nads| {
        nads.get(SHARED_NAMESPACE).is_some_and(|g| *g > before)
    })
    .await?;
    op.stop();

    // 2. One NAD per namespace (the shared one goes: no pod uses it).
    let mut op = start(&[])?;
    let per_ns_start = settle(&client, &mut op, |nads| nads.len() == n && !shared(nads)).await?;
    let gens = nads(&client).await?;
    fanout::put_config(&client, "info").await?;
    let per_ns_edit = settle(&client, &mut op, |nads| {
        nads.len() == n
            && nads
                .iter()
                .all(|(ns, g)| gens.get(ns).is_some_and(|b| g > b))
    })
    .await?;
    op.stop();

    // 3. Back to shared: every per-namespace NAD goes.
    let mut op = start(&shared_flags)?;
    let switch = settle(&client, &mut op, |nads| nads.len() == 1 && shared(nads)).await?;
    op.stop();

    // 4. The auxiliary chain: no NAD at all; an edit of the ConfigMap has nothing to write.
    let mut op = start(&["--attach", "aux-chain"])?;
    let aux_start = settle(&client, &mut op, BTreeMap::is_empty).await?;
    fanout::put_config(&client, "debug").await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let aux_edit = settle(&client, &mut op, BTreeMap::is_empty).await?;
    op.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let what = |s: &str| format!("NAD writes, {n} enabled namespaces: {s}");
    let both = |one: &Settled| format!("{} writes, {} NAD(s)", one.writes, one.objects);
    row::single(&what("operator start, shared"), &both(&shared_start), "");
    row::single(
        &what("operator start, per namespace"),
        &both(&per_ns_start),
        "",
    );
    row::single(&what("ConfigMap edit, shared"), &both(&shared_edit), "");
    row::single(
        &what("ConfigMap edit, per namespace"),
        &both(&per_ns_edit),
        "",
    );
    row::single(
        &what("per namespace -> shared (unused NADs)"),
        &both(&switch),
        "",
    );
    row::single(
        &what("shared -> aux-chain (unused NAD), operator start"),
        &both(&aux_start),
        "",
    );
    row::single(
        &what("ConfigMap edit, aux-chain"),
        &both(&aux_edit),
        "target: as at start",
    );
    let rss = format!("operator RSS, {n} enabled namespaces, settled after its start");
    row::compare(
        &format!("{rss}: aux-chain vs one NAD per namespace"),
        aux_start.rss_mb,
        per_ns_start.rss_mb,
        "MB",
    );
    row::compare(
        &format!("{rss}: shared NAD vs one NAD per namespace"),
        shared_start.rss_mb,
        per_ns_start.rss_mb,
        "MB",
    );
    Ok(())
}

/// What one step left: the operator's NAD writes since it started, the NADs of the bench.
struct Settled {
    writes: f64,
    objects: usize,
    rss_mb: f64,
}

/// Waits until the bench's NADs (by namespace: generation) satisfy `done`, then 3 s more (writes in
/// flight land), and reads the operator's write counter.
async fn settle(
    client: &Client,
    op: &mut Operator,
    done: impl Fn(&BTreeMap<String, i64>) -> bool,
) -> anyhow::Result<Settled> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = op.exited() {
            bail!("the operator exited ({status})");
        }
        if done(&nads(client).await?) {
            break;
        }
        if Instant::now() > deadline {
            bail!("the NADs did not settle within {PATIENCE:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    Ok(Settled {
        writes: op.writes().await?,
        objects: nads(client).await?.len(),
        rss_mb: op.rss_mb()?,
    })
}

fn shared(nads: &BTreeMap<String, i64>) -> bool {
    nads.contains_key(SHARED_NAMESPACE)
}

/// Every NAD named `linkerd-cni`, by namespace: its generation.
async fn nads(client: &Client) -> anyhow::Result<BTreeMap<String, i64>> {
    let params = ListParams::default().fields(&format!("metadata.name={}", vocab::NAD_NAME));
    let list = Api::<NetworkAttachmentDefinition>::all(client.clone())
        .list_metadata(&params)
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|m| Some((m.metadata.namespace?, m.metadata.generation.unwrap_or(0))))
        .collect())
}

async fn generation(client: &Client, namespace: &str) -> anyhow::Result<i64> {
    Ok(nads(client).await?.get(namespace).copied().unwrap_or(0))
}
