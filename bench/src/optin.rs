//! Opt-in latency on a dedicated apiserver: `linkerd.io/multus=enabled` set on a namespace -> its
//! NAD visible to a watcher, and the annotation removed -> the NAD gone; the real operator process
//! against the floor, a minimal client in this process that watches namespaces and creates (or
//! deletes) a NAD on the event. Rounds alternate ours and the floor so both see the same noise.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use serde_json::json;

use crate::args::OperatorBenchArgs;
use crate::fanout::{self, Operator, CNI_NAMESPACE, FLOOR_NAD, LABEL};
use crate::row::{self, pct};

/// Label of the floor client's namespaces (the operator selects `LABEL=1` only).
const FLOOR_LABEL: &str = "linkerd-multus-bench/optin-floor";
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(clap::Args, Debug, Clone)]
pub struct OptinArgs {
    #[command(flatten)]
    pub target: OperatorBenchArgs,
    /// Rounds of enable + disable, each for ours and for the floor.
    #[arg(long, default_value_t = 20)]
    pub rounds: usize,
}

pub async fn run(args: OptinArgs) -> anyhow::Result<()> {
    let client = args.target.client().await;
    fanout::ensure_crd(&client).await?;
    fanout::apply_namespace(&client, CNI_NAMESPACE, LABEL, false).await?;
    fanout::put_config(&client, "info").await?;
    let floor = tokio::spawn(floor_client(client.clone()));

    let dir = std::env::temp_dir().join(format!("linkerd-multus-optin-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut operator = Operator::start(&args.target, Duration::from_secs(600), &dir, &[])?;
    let result = measure(&client, &args, &mut operator).await;
    operator.stop();
    floor.abort();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(client: &Client, args: &OptinArgs, operator: &mut Operator) -> anyhow::Result<()> {
    let tag = std::process::id();
    // Warm-up (not counted): the operator has synced once a namespace it manages gets its NAD.
    let warm = format!("bench-optin-warm-{tag}");
    fanout::apply_namespace(client, &warm, LABEL, true).await?;
    wait_for(client, &warm, vocab::NAD_NAME, true, Instant::now()).await?;
    if operator.exited().is_some() {
        bail!("the operator exited during warm-up");
    }
    let warm_floor = format!("bench-optin-warmf-{tag}");
    fanout::apply_namespace(client, &warm_floor, FLOOR_LABEL, true).await?;
    wait_for(client, &warm_floor, FLOOR_NAD, true, Instant::now()).await?;
    const DURATION_SUM: &str = "linkerd_multus_controller_reconcile_duration_seconds_sum";
    let (writes_before, spent_before) = (
        operator.writes().await?,
        operator.metric_sum(DURATION_SUM).await?,
    );
    let (mut ours_on, mut ours_off, mut floor_on, mut floor_off) = (vec![], vec![], vec![], vec![]);
    for i in 0..args.rounds {
        for (label, nad, on, off) in [
            (LABEL, vocab::NAD_NAME, &mut ours_on, &mut ours_off),
            (FLOOR_LABEL, FLOOR_NAD, &mut floor_on, &mut floor_off),
        ] {
            let ns = format!(
                "bench-optin-{}-{tag}-{i}",
                if nad == FLOOR_NAD { "f" } else { "o" }
            );
            fanout::apply_namespace(client, &ns, label, false).await?;
            on.push(flip(client, &ns, label, nad, true).await?);
            off.push(flip(client, &ns, label, nad, false).await?);
        }
    }
    // Where our time goes: the operator's own reconcile time (its metrics) per NAD write; the rest
    // is the watch event reaching the controller and the write reaching the bench's watch.
    let writes = operator.writes().await? - writes_before;
    let spent = operator.metric_sum(DURATION_SUM).await? - spent_before;
    for (what, ours, floor) in [
        ("annotate -> NAD visible", ours_on, floor_on),
        ("disable -> NAD gone", ours_off, floor_off),
    ] {
        let (o50, o99, f50, f99) = (
            pct(&ours, 50),
            pct(&ours, 99),
            pct(&floor, 50),
            pct(&floor, 99),
        );
        let n = ours.len();
        row::compare(&format!("opt-in: {what}, p50 of {n}"), o50, f50, "ms");
        row::compare(&format!("opt-in: {what}, p99 of {n}"), o99, f99, "ms");
    }
    if writes > 0.0 {
        row::single(
            "  of which the operator's reconciles, per NAD write (its metrics; no-op ones included)",
            &format!("{:.2} ms", spent * 1000.0 / writes),
            &format!("{writes} writes"),
        );
    }
    Ok(())
}

/// Sets (or removes) the opt-in annotation and returns the ms from the apiserver's answer to that
/// patch until the NAD is there (or gone), seen by a watch opened before the change. Timed from the
/// answer, not the request: the patch alone took either ~5 or ~50 ms here, for both kinds of
/// namespace (more often ~50 for ours; the cause is not found), while the operator, traced, sat
/// idle until its watch event arrived together with the answer. That time is the apiserver's.
async fn flip(client: &Client, ns: &str, label: &str, nad: &str, on: bool) -> anyhow::Result<f64> {
    let api = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), ns);
    let rv = api
        .list_metadata(&ListParams::default())
        .await?
        .metadata
        .resource_version;
    let params = WatchParams::default().fields(&format!("metadata.name={nad}"));
    let mut events = api
        .watch(&params, rv.as_deref().unwrap_or("0"))
        .await?
        .boxed();
    fanout::apply_namespace(client, ns, label, on).await?;
    let started = Instant::now();
    let deadline = started + PATIENCE;
    loop {
        let next = tokio::time::timeout_at(deadline.into(), events.try_next())
            .await
            .with_context(|| format!("{nad} in {ns}: no event within {PATIENCE:?}"))??;
        match next {
            Some(WatchEvent::Added(_)) if on => break,
            Some(WatchEvent::Deleted(_)) if !on => break,
            Some(WatchEvent::Error(e)) => bail!("watch of {ns}: {e:?}"),
            Some(_) => {}
            None => bail!("the watch of {ns} ended"),
        }
    }
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Polls (only for the warm-up) until the NAD exists.
async fn wait_for(
    client: &Client,
    ns: &str,
    nad: &str,
    present: bool,
    since: Instant,
) -> anyhow::Result<()> {
    let api = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), ns);
    while since.elapsed() < PATIENCE {
        if api.get_opt(nad).await?.is_some() == present {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!(
        "{nad} in {ns}: not {} after {PATIENCE:?}",
        if present { "created" } else { "deleted" }
    )
}

/// The floor: watch namespaces with [`FLOOR_LABEL`]; enabled -> create the NAD, else delete it.
async fn floor_client(client: Client) -> anyhow::Result<()> {
    let namespaces = Api::<Namespace>::all(client.clone());
    let config = watcher::Config::default().labels(&format!("{FLOOR_LABEL}=1"));
    let mut events = watcher(namespaces, config).boxed();
    while let Some(event) = events.try_next().await? {
        let watcher::Event::Apply(ns) = event else {
            continue;
        };
        let name = ns.metadata.name.clone().unwrap_or_default();
        let enabled = rules::namespaces::opts_in(ns.metadata.annotations.as_ref());
        let api = Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), &name);
        if enabled {
            let nad: NetworkAttachmentDefinition = serde_json::from_value(json!({
                "apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                "metadata": fanout::floor_metadata(), "spec": { "config": fanout::template("info") },
            }))?;
            match api.create(&PostParams::default(), &nad).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(e.into()),
            }
        } else {
            match api.delete(FLOOR_NAD, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}
