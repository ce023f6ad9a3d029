//! Pod admission through the real apiserver: creation latency of the fixture's pod (a bounded,
//! sequential loop of creates) with (a) the real webhook, (b) the floor webhook (same TLS stack,
//! a constant "allowed" echoing the request's uid) and (c) no webhook. Overhead ratio
//! (a - c) / (b - c), for p50 and p99. Where the server serves MutatingAdmissionPolicy, (p) the
//! product's policy path (the policy, its binding and the warning policy, as `--admission=policy`
//! renders them for the webhook's settings) too: its overhead p - c against the webhook's a - c.
//! Blocks of each mode alternate, so all see the same noise.
//!
//! The storm ([`storm`]): as many creates as the apiserver takes (10,000 per mode, many in flight)
//! through the real webhook, a constant-patch webhook (its floor: the same TLS stack answering a
//! fixed small JSONPatch) and no webhook, blocks of each mode in turn; p50/p99 of each.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_operator::admission::objects::{self, Kind};
use rules::admission_policy::{render_selecting, PolicyApi};
use serde_json::json;

use crate::fixture;
use crate::row::{self, pct};

const CONFIG_NAME: &str = "linkerd-multus-bench-admission";
/// Only the bench's pods go through the bench's webhook.
const POD_LABEL: &str = "linkerd-multus-bench/admission";
/// The bench's policy and binding (not the product's name: a product installed beside is untouched).
const POLICY_NAME: &str = "linkerd-multus-bench-admission";
/// The fixture namespace's admission label value the bench's binding selects.
const POLICY_LABEL_VALUE: &str = "bench";

#[derive(clap::Args, Debug, Clone)]
pub struct AdmissionArgs {
    #[arg(long)]
    pub kubeconfig: std::path::PathBuf,
    /// Base URL of the real webhook (served by `webhook`).
    #[arg(long)]
    pub ours: String,
    /// Base URL of the floor webhook (served by `floor-webhook --echo-uid`).
    #[arg(long)]
    pub floor: String,
    /// Base URL of the floor webhook answering a constant patch too (`--echo-uid --patch`): the
    /// apiserver's own cost of applying a patch. Optional.
    #[arg(long)]
    pub floor_patch: Option<String>,
    /// CA of the servers' certificate.
    #[arg(long)]
    pub ca: std::path::PathBuf,
    /// Pods created per block.
    #[arg(long, default_value_t = 60)]
    pub pods: usize,
    /// Blocks per mode (none, floor, ours, in turn).
    #[arg(long, default_value_t = 3)]
    pub blocks: usize,
}

/// The pod-creation storm: the real webhook against the constant-patch floor and no webhook.
#[derive(clap::Args, Debug, Clone)]
pub struct StormArgs {
    #[arg(long)]
    pub kubeconfig: std::path::PathBuf,
    /// Base URL of the real webhook (served by `webhook`).
    #[arg(long)]
    pub ours: String,
    /// Base URL of the constant-patch floor (`floor-webhook --echo-uid --patch`).
    #[arg(long)]
    pub floor_patch: String,
    /// CA of the servers' certificate.
    #[arg(long)]
    pub ca: std::path::PathBuf,
    /// Pods created per mode.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Creates in flight.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Each mode's pods in this many blocks, the modes in turn.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// What the rows say of the cluster the storm runs on (e.g. its size).
    #[arg(long, default_value = "")]
    pub on: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    None,
    Floor,
    FloorPatch,
    Ours,
    /// The MutatingAdmissionPolicy path, no webhook.
    Policy,
}

impl Mode {
    /// Does a pod admitted in this mode carry the Multus networks annotation?
    fn attaches(self) -> bool {
        matches!(self, Mode::FloorPatch | Mode::Ours | Mode::Policy)
    }
}

/// What a mode installs: a webhook at a URL, the policy path, or nothing.
#[derive(Clone, Copy)]
enum Path<'a> {
    Nothing,
    Webhook(&'a str),
    Policy,
}

pub async fn run(args: AdmissionArgs) -> anyhow::Result<()> {
    let client = linkerd_multus_e2e::client_from(&args.kubeconfig).await;
    let ca = std::fs::read(&args.ca).with_context(|| format!("reading {}", args.ca.display()))?;
    let mut modes = vec![
        (Mode::None, Path::Nothing),
        (Mode::Floor, Path::Webhook(&args.floor)),
    ];
    if let Some(url) = &args.floor_patch {
        modes.push((Mode::FloorPatch, Path::Webhook(url)));
    }
    modes.push((Mode::Ours, Path::Webhook(&args.ours)));
    let served = objects::served(&client).await?;
    match served {
        Some(_) => {
            label_fixture_namespace(&client).await?;
            modes.push((Mode::Policy, Path::Policy));
        }
        None => println!(
            "ROW\tpod admission through the MutatingAdmissionPolicy\tnot run: the apiserver serves no \
             MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or v1beta1 with its gate)\t-\t-"
        ),
    }
    let mut samples = vec![Vec::new(); modes.len()];
    for _ in 0..args.blocks {
        for (i, &(mode, path)) in modes.iter().enumerate() {
            configure(&client, path, &ca, served, mode).await?;
            samples[i].extend(block(&client, mode, args.pods).await?);
        }
    }
    configure(&client, Path::Nothing, &ca, served, Mode::None).await?;
    let of = |m: Mode| modes.iter().position(|&(x, _)| x == m).map(|i| &samples[i]);
    let (none, floor, ours) = (
        of(Mode::None).context("none")?,
        of(Mode::Floor).context("floor")?,
        of(Mode::Ours).context("ours")?,
    );
    let n = none.len();
    for p in [50, 99] {
        let (c, b, a) = (pct(none, p), pct(floor, p), pct(ours, p));
        println!(
            "ROW\tpod admission via the apiserver, p{p} of {n} creates: webhook overhead (a-c)/(b-c)\t{:.2} ms (a {a:.2} - c {c:.2})\t{:.2} ms (b {b:.2} constant-allow - c)\t{}",
            a - c,
            b - c,
            if b - c > 0.0 { format!("{:.2}", (a - c) / (b - c)) } else { "-".into() }
        );
        if let Some(patched) = of(Mode::FloorPatch) {
            let d = pct(patched, p);
            println!(
                "ROW\t  of which the apiserver applying a patch, p{p}: constant-patch webhook - c\t{:.2} ms (d {d:.2} - c)\t{:.2} ms (b - c)\t{}",
                d - c,
                b - c,
                if b - c > 0.0 { format!("{:.2}", (d - c) / (b - c)) } else { "-".into() }
            );
        }
        if let Some(policy) = of(Mode::Policy) {
            let e = pct(policy, p);
            println!(
                "ROW\tpod admission, p{p}: MutatingAdmissionPolicy overhead (p-c) against the webhook's (a-c)\t{:.2} ms (p {e:.2} - c)\t{:.2} ms (a - c)\t{}",
                e - c,
                a - c,
                if a - c > 0.0 { format!("{:.2}", (e - c) / (a - c)) } else { "-".into() }
            );
        }
    }
    Ok(())
}

pub async fn storm(args: StormArgs) -> anyhow::Result<()> {
    let client = linkerd_multus_e2e::client_from(&args.kubeconfig).await;
    let ca = std::fs::read(&args.ca).with_context(|| format!("reading {}", args.ca.display()))?;
    let served = objects::served(&client).await?;
    let modes = [
        (Mode::None, Path::Nothing),
        (Mode::FloorPatch, Path::Webhook(&args.floor_patch)),
        (Mode::Ours, Path::Webhook(&args.ours)),
    ];
    let rounds = args.rounds.max(1);
    let per_block = args.pods.div_ceil(rounds);
    let mut samples = vec![Vec::new(); modes.len()];
    let mut tried = vec![0; modes.len()];
    let mut failed = vec![0; modes.len()];
    let mut wall = vec![0.0; modes.len()];
    for round in 0..rounds {
        for (i, &(mode, path)) in modes.iter().enumerate() {
            let n = per_block.min(args.pods - tried[i]);
            configure(&client, path, &ca, served, mode).await?;
            let started = Instant::now();
            let block = storm_block(&client, mode, n, args.concurrency).await?;
            wall[i] += started.elapsed().as_secs_f64();
            tried[i] += n;
            failed[i] += block.failed;
            samples[i].extend(block.latencies);
            eprintln!(
                "storm: round {round}, mode {i}: {n} creates, {} failed{}",
                block.failed,
                block
                    .first_failure
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            );
            delete_bench_pods(&client).await?;
        }
    }
    if failed.iter().any(|&f| f > 0) {
        println!(
            "ROW\twebhook storm{}: creates the apiserver failed, real vs constant-patch webhook (no \
             webhook: {})\t{}\t{}\t-",
            args.on, failed[0], failed[2], failed[1]
        );
        eprintln!("storm: failed creates per mode (none, constant-patch, ours): {failed:?}");
    }
    configure(&client, Path::Nothing, &ca, served, Mode::None).await?;
    let rate = |i: usize| samples[i].len() as f64 / wall[i].max(1e-9);
    for line in storm_rows(
        &args.on,
        args.concurrency,
        &samples[0],
        &samples[1],
        &samples[2],
    ) {
        println!("ROW\t{}", line.join("\t"));
    }
    row::compare(
        &format!(
            "webhook storm{}: creates per second at {} in flight, real vs constant-patch webhook \
             (no webhook: {:.0}/s)",
            args.on,
            args.concurrency,
            rate(0)
        ),
        rate(2),
        rate(1),
        "/s",
    );
    Ok(())
}

/// The storm's rows (what, ours, floor, ratio) from each mode's create latencies in ms: the real
/// webhook (a) against the constant-patch one (d) at p50 and p99, and each one's overhead over no
/// webhook (c).
pub fn storm_rows(
    on: &str,
    concurrency: usize,
    none: &[f64],
    patch: &[f64],
    ours: &[f64],
) -> Vec<[String; 4]> {
    let ratio = |x: f64, y: f64| {
        if y > 0.0 {
            format!("{:.2}", x / y)
        } else {
            "-".into()
        }
    };
    let mut rows = Vec::new();
    for p in [50, 99] {
        let (c, d, a) = (pct(none, p), pct(patch, p), pct(ours, p));
        let goal = if p == 99 { ", goal <= 1.1x" } else { "" };
        rows.push([
            format!(
                "webhook storm{on}: p{p} of {} creates at {concurrency} in flight, real vs \
                 constant-patch webhook{goal}",
                ours.len()
            ),
            format!("{a:.2} ms"),
            format!("{d:.2} ms"),
            ratio(a, d),
        ]);
        rows.push([
            format!("  of which over no webhook (c {c:.2} ms), p{p}: a - c vs d - c"),
            format!("{:.2} ms", a - c),
            format!("{:.2} ms", d - c),
            ratio(a - c, d - c),
        ]);
    }
    rows
}

/// Creates `n` pods, `concurrency` in flight; each create's ms. Checks each was admitted as the
/// mode wants (attached or not).
async fn storm_block(
    client: &Client,
    mode: Mode,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Block> {
    let api = Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE);
    let body = pod()?;
    let outcomes: Vec<Result<f64, kube::Error>> = stream::iter(0..n)
        .map(|_| {
            let (api, body) = (api.clone(), body.clone());
            async move {
                let started = Instant::now();
                let created = match api.create(&PostParams::default(), &body).await {
                    Ok(created) => created,
                    Err(e) => return anyhow::Ok(Err(e)),
                };
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                if attached(&created) != mode.attaches() {
                    bail!("a pod was admitted unlike its mode: the webhook configuration is not the one measured");
                }
                anyhow::Ok(Ok(ms))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    let mut block = Block::default();
    for outcome in outcomes {
        match outcome {
            Ok(ms) => block.latencies.push(ms),
            // A create the apiserver gave up on (a ServerTimeout under the storm) is the storm's
            // finding, not the end of the measurement: counted, shown in the rows, its first reason kept.
            Err(e) => {
                block.failed += 1;
                block.first_failure.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Ok(block)
}

/// One mode's creates in one block.
#[derive(Default)]
struct Block {
    latencies: Vec<f64>,
    failed: usize,
    first_failure: Option<String>,
}

/// Labels the fixture namespace for the bench's binding (the operator labels enabled namespaces so).
async fn label_fixture_namespace(client: &Client) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .patch(
            fixture::NAMESPACE,
            &PatchParams::apply("linkerd-multus-bench-admission"),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": { "name": fixture::NAMESPACE,
                              "labels": { (vocab::ADMISSION_NAMESPACE_LABEL): POLICY_LABEL_VALUE } },
            })),
        )
        .await?;
    Ok(())
}

/// Installs the policy path rendered for the webhook's settings (`api`), or removes it (`install`
/// false): each kind in the operator's order, bindings after their policies (deleted in reverse).
async fn policy_path(client: &Client, api: PolicyApi, install: bool) -> anyhow::Result<()> {
    let cfg = rules::decision::DecisionConfig::default();
    let rendered = render_selecting(&cfg, api, POLICY_NAME, POLICY_LABEL_VALUE);
    if install {
        for kind in Kind::ALL {
            objects::apply(client, api, kind, kind.of(&rendered)).await?;
        }
    } else {
        for kind in Kind::ALL.into_iter().rev() {
            objects::delete_ours(client, api, kind, POLICY_NAME).await?;
        }
    }
    Ok(())
}

/// Points the bench's MutatingWebhookConfiguration at the mode's URL (or removes it), installs or
/// removes the policy path (where `served`), then waits until the apiserver uses them.
async fn configure(
    client: &Client,
    path: Path<'_>,
    ca: &[u8],
    served: Option<PolicyApi>,
    mode: Mode,
) -> anyhow::Result<()> {
    if let Some(api) = served {
        policy_path(client, api, matches!(path, Path::Policy)).await?;
    }
    let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    match api.delete(CONFIG_NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    let Path::Webhook(url) = path else {
        return settle(client, mode).await;
    };
    use base64::Engine;
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": CONFIG_NAME },
        "webhooks": [{
            "name": "bench.linkerd-multus.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {
                "url": format!("{url}{}", vocab::WEBHOOK_PATH),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            },
            "objectSelector": { "matchLabels": { POD_LABEL: "1" } },
            "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["pods"] }],
        }],
    }))?;
    api.create(&PostParams::default(), &config).await?;
    settle(client, mode).await
}

/// The apiserver's webhook configuration watch has no ready signal: probe pods are created until
/// one is (or is not) attached as the mode wants, then 2 s more pass (floor and none both leave a
/// pod unattached, so that switch is only waited for).
async fn settle(client: &Client, mode: Mode) -> anyhow::Result<()> {
    let api = Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE);
    for _ in 0..100 {
        let probe = api.create(&PostParams::default(), &pod()?).await?;
        if attached(&probe) == mode.attaches() {
            tokio::time::sleep(Duration::from_secs(2)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the apiserver did not take up the admission configuration within 20 s")
}

fn attached(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(vocab::NETWORKS_ANNOTATION))
}

/// Creates `n` pods one after the other; returns each create's ms. Checks the mode took effect:
/// our webhook attaches every pod (the Multus networks annotation), the others none.
async fn block(client: &Client, mode: Mode, n: usize) -> anyhow::Result<Vec<f64>> {
    let api = Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE);
    let body = pod()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let created = api.create(&PostParams::default(), &body).await?;
        out.push(started.elapsed().as_secs_f64() * 1000.0);
        if attached(&created) != mode.attaches() {
            bail!("a pod was admitted unlike its mode: the webhook configuration is not the one measured");
        }
    }
    delete_bench_pods(client).await?;
    Ok(out)
}

/// Deletes the bench's pods (no kubelet: gone at once).
async fn delete_bench_pods(client: &Client) -> anyhow::Result<()> {
    Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE)
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default().labels(&format!("{POD_LABEL}=1")),
        )
        .await?;
    Ok(())
}

/// The fixture review's pod, labelled for the bench's webhook.
fn pod() -> anyhow::Result<Pod> {
    let review: serde_json::Value = serde_json::from_str(fixture::REVIEW)?;
    let mut pod = review["request"]["object"].clone();
    pod["metadata"]["labels"][POD_LABEL] = json!("1");
    pod["metadata"]
        .as_object_mut()
        .map(|m| m.remove("ownerReferences"));
    Ok(serde_json::from_value(pod)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storm_rows_hold_the_real_webhook_to_the_constant_patch_at_each_percentile() {
        let none: Vec<f64> = (1..=100).map(f64::from).collect();
        let patch: Vec<f64> = none.iter().map(|v| v + 2.0).collect();
        let ours: Vec<f64> = none.iter().map(|v| v + 3.0).collect();
        let rows = storm_rows(" at 15k pods", 64, &none, &patch, &ours);
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0][0],
            "webhook storm at 15k pods: p50 of 100 creates at 64 in flight, real vs constant-patch webhook"
        );
        assert_eq!(rows[0][1..], ["53.00 ms", "52.00 ms", "1.02"]);
        assert_eq!(rows[1][1..], ["3.00 ms", "2.00 ms", "1.50"]);
        assert!(rows[2][0].contains("p99") && rows[2][0].ends_with("goal <= 1.1x"));
        assert_eq!(rows[2][1..], ["102.00 ms", "101.00 ms", "1.01"]);
        // No overhead of the floor over no webhook: no ratio, not a division by zero.
        let rows = storm_rows("", 1, &none, &none, &ours);
        assert_eq!(rows[1][3], "-");
    }
}
