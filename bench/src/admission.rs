//! Pod admission through the real apiserver: creation latency of the fixture's pod (a bounded,
//! sequential loop of creates) with (a) the real webhook, (b) the floor webhook (same TLS stack,
//! a constant "allowed" echoing the request's uid) and (c) no webhook. Overhead ratio
//! (a - c) / (b - c), for p50 and p99. Blocks of each mode alternate, so all see the same noise.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::fixture;
use crate::row::pct;

const CONFIG_NAME: &str = "linkerd-multus-bench-admission";
/// Only the bench's pods go through the bench's webhook.
const POD_LABEL: &str = "linkerd-multus-bench/admission";

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

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    None,
    Floor,
    FloorPatch,
    Ours,
}

impl Mode {
    /// Does a pod admitted in this mode carry the Multus networks annotation?
    fn attaches(self) -> bool {
        matches!(self, Mode::FloorPatch | Mode::Ours)
    }
}

pub async fn run(args: AdmissionArgs) -> anyhow::Result<()> {
    let client = linkerd_multus_e2e::client_from(&args.kubeconfig).await;
    let ca = std::fs::read(&args.ca).with_context(|| format!("reading {}", args.ca.display()))?;
    let mut modes = vec![(Mode::None, None), (Mode::Floor, Some(args.floor.as_str()))];
    if let Some(url) = &args.floor_patch {
        modes.push((Mode::FloorPatch, Some(url.as_str())));
    }
    modes.push((Mode::Ours, Some(args.ours.as_str())));
    let mut samples = vec![Vec::new(); modes.len()];
    for _ in 0..args.blocks {
        for (i, &(mode, url)) in modes.iter().enumerate() {
            configure(&client, url, &ca, mode).await?;
            samples[i].extend(block(&client, mode, args.pods).await?);
        }
    }
    configure(&client, None, &ca, Mode::None).await?;
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
    }
    Ok(())
}

/// Points the bench's MutatingWebhookConfiguration at `url` (or removes it), then waits until the
/// apiserver uses it.
async fn configure(
    client: &Client,
    url: Option<&str>,
    ca: &[u8],
    mode: Mode,
) -> anyhow::Result<()> {
    let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    match api.delete(CONFIG_NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    let Some(url) = url else {
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
    bail!("the apiserver did not take up the webhook configuration within 20 s")
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
    api.delete_collection(
        &DeleteParams::default().grace_period(0),
        &ListParams::default().labels(&format!("{POD_LABEL}=1")),
    )
    .await?;
    Ok(out)
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
