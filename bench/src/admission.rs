//! Pod admission through the real apiserver: creation latency of the fixture's pod (a bounded,
//! sequential loop of creates) with (a) the real webhook, (b) the floor webhook (same TLS stack,
//! a constant "allowed" echoing the request's uid) and (c) no webhook. Overhead ratio
//! (a - c) / (b - c), for p50 and p99. Where the server serves MutatingAdmissionPolicy, (p) the
//! product's policy path (the policy, its binding and the warning policy, as `--admission=policy`
//! renders them for the webhook's settings) too: its overhead p - c against the webhook's a - c.
//! Blocks of each mode alternate, so all see the same noise. The storm ([`crate::storm`]) shares the
//! bench's webhook configuration and pods.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_operator::admission::objects::{self, Kind};
use rules::admission_policy::{render_selecting, PolicyApi};
use serde_json::json;

use crate::fixture;
use crate::row::pct;

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

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    None,
    Floor,
    FloorPatch,
    Ours,
    /// The MutatingAdmissionPolicy path, no webhook.
    Policy,
}

impl Mode {
    /// Does a pod admitted in this mode carry the Multus networks annotation?
    pub(crate) fn attaches(self) -> bool {
        matches!(self, Mode::FloorPatch | Mode::Ours | Mode::Policy)
    }
}

/// What a mode installs: a webhook at a URL, the policy path, or nothing.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
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
pub(crate) async fn configure(
    client: &Client,
    path: Path<'_>,
    ca: &[u8],
    served: Option<PolicyApi>,
    mode: Mode,
) -> anyhow::Result<()> {
    if let Some(api) = served {
        policy_path(client, api, matches!(path, Path::Policy)).await?;
    }
    match path {
        Path::Webhook(url) => install_webhooks(client, ca, &[("bench", url, "1")]).await?,
        Path::Nothing | Path::Policy => remove_webhooks(client).await?,
    }
    settle(client, &[(mode, "1")]).await
}

/// The bench's MutatingWebhookConfiguration with one webhook per `(name, base URL, label value)`:
/// each admits the pods whose bench label has that value. Replaces the one there was.
pub(crate) async fn install_webhooks(
    client: &Client,
    ca: &[u8],
    hooks: &[(&str, &str, &str)],
) -> anyhow::Result<()> {
    use base64::Engine;
    remove_webhooks(client).await?;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let webhooks: Vec<_> = hooks
        .iter()
        .map(|(name, url, value)| {
            json!({
                "name": format!("{name}.bench.linkerd-multus.io"),
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": { "url": format!("{url}{}", vocab::WEBHOOK_PATH), "caBundle": ca },
                "objectSelector": { "matchLabels": { POD_LABEL: value } },
                "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                            "resources": ["pods"] }],
            })
        })
        .collect();
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": CONFIG_NAME },
        "webhooks": webhooks,
    }))?;
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await?;
    Ok(())
}

pub(crate) async fn remove_webhooks(client: &Client) -> anyhow::Result<()> {
    let api = Api::<MutatingWebhookConfiguration>::all(client.clone());
    match api.delete(CONFIG_NAME, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The apiserver's webhook configuration watch has no ready signal: probe pods, one for each
/// `(mode, label value)`, are created until each is (or is not) attached as its mode wants, then 2 s
/// more pass (floor and none both leave a pod unattached, so that switch is only waited for).
pub(crate) async fn settle(client: &Client, probes: &[(Mode, &str)]) -> anyhow::Result<()> {
    let api = Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE);
    for _ in 0..100 {
        let mut ready = true;
        for &(mode, label) in probes {
            let probe = api
                .create(&PostParams::default(), &pod_labelled(label)?)
                .await?;
            ready &= attached(&probe) == mode.attaches();
        }
        if ready {
            tokio::time::sleep(Duration::from_secs(2)).await;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the apiserver did not take up the admission configuration within 20 s")
}

pub(crate) fn attached(pod: &Pod) -> bool {
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

/// Deletes the bench's pods, whatever their label's value (no kubelet: gone at once). On a
/// 150,000-pod cluster one collection delete of 6,000 storm pods outlived the apiserver's 60 s
/// request timeout (500 "context deadline exceeded") and ended a run: such a timeout deletes again
/// what is left, up to ten times.
pub(crate) async fn delete_bench_pods(client: &Client) -> anyhow::Result<()> {
    let api = Api::<Pod>::namespaced(client.clone(), fixture::NAMESPACE);
    let params = DeleteParams::default().grace_period(0);
    let selector = ListParams::default().labels(POD_LABEL);
    let mut attempt = 1;
    loop {
        match api.delete_collection(&params, &selector).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if server_timed_out(&s) && attempt < 10 => {
                eprintln!(
                    "bench: deleting the bench's pods timed out ({}), again",
                    s.message
                );
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The apiserver gave up on a request at its own deadline (it may have done part of it).
fn server_timed_out(s: &kube::core::Status) -> bool {
    matches!(s.code, 500 | 504) && (s.message.contains("deadline") || s.reason == "Timeout")
}

/// The fixture review's pod, labelled for the bench's webhook.
fn pod() -> anyhow::Result<Pod> {
    pod_labelled("1")
}

/// The fixture review's pod with the bench label's `value` (which of the bench's webhooks admits it).
pub(crate) fn pod_labelled(value: &str) -> anyhow::Result<Pod> {
    let review: serde_json::Value = serde_json::from_str(fixture::REVIEW)?;
    let mut pod = review["request"]["object"].clone();
    pod["metadata"]["labels"][POD_LABEL] = json!(value);
    pod["metadata"]
        .as_object_mut()
        .map(|m| m.remove("ownerReferences"));
    Ok(serde_json::from_value(pod)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str, message: &str) -> kube::core::Status {
        serde_json::from_value(json!({
            "status": "Failure", "code": code, "reason": reason, "message": message
        }))
        .unwrap()
    }

    #[test]
    fn the_apiservers_own_deadline_is_a_timeout_and_nothing_else_is() {
        assert!(server_timed_out(&status(
            500,
            "",
            "context deadline exceeded"
        )));
        assert!(server_timed_out(&status(
            504,
            "Timeout",
            "the request timed out"
        )));
        assert!(!server_timed_out(&status(403, "Forbidden", "deadline")));
        assert!(!server_timed_out(&status(
            500,
            "InternalError",
            "etcd is down"
        )));
    }
}
