//! The real webhook alone (no controller), as the operator hosts it: [`Webhook::new`] + [`Webhook::run`]
//! with the certificate files, its namespace cache fed by the apiserver of `KUBECONFIG`. The
//! fixture's namespace is created enabled first, so the cache is warm and every review attaches.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::Api;
use linkerd_multus_webhook::{Webhook, WebhookArgs};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fixture;

/// Serves on `addr` until the process is killed.
pub async fn serve(addr: SocketAddr, cert: PathBuf, key: PathBuf) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    let annotations = BTreeMap::from([(
        vocab::MULTUS_ANNOTATION.to_string(),
        vocab::MULTUS_ENABLED.to_string(),
    )]);
    Api::<Namespace>::all(client.clone())
        .patch(
            fixture::NAMESPACE,
            &PatchParams::apply("linkerd-multus-bench"),
            &Patch::Apply(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": { "name": fixture::NAMESPACE, "annotations": annotations },
            })),
        )
        .await?;
    let args = WebhookArgs::from_flags([
        format!("--webhook-addr={addr}"),
        format!("--tls-cert-file={}", cert.display()),
        format!("--tls-key-file={}", key.display()),
    ])?;
    let mut registry = prometheus_client::registry::Registry::default();
    let decision = rules::decision::DecisionConfig::default();
    let webhook = Webhook::new(args, decision, "default".into(), client, &mut registry).await?;
    eprintln!("webhook serving on {}", webhook.local_addr()?);
    webhook.run(CancellationToken::new()).await?;
    Ok(())
}
