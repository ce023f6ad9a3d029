//! The mutating admission webhook: attaches the `linkerd-cni` NetworkAttachmentDefinition to pods through
//! Multus' networks annotation, copies the namespace's Linkerd annotations onto the pod and, on OpenShift,
//! picks a proxy uid inside the namespace's uid range, then makes Linkerd's injected proxy and validator run
//! inside it (it runs after Linkerd's injector; see the book's OpenShift page).
//!
//! The operator binary hosts it: it flattens [`WebhookArgs`] into its CLI, builds a [`Webhook`] with
//! [`Webhook::new`] and drives [`Webhook::run`] until its shutdown token is cancelled.
//!
//! Layout: the decision itself is `rules::decision` (pure: pod + namespace annotations → patch,
//! warnings); [`review`] (pure: request body → reply); `server` (axum, served by
//! [`TlsListener`], which needs no cluster, with the bounds of [`connections`]); [`namespaces`] (the namespace cache, sharing the operator controller's
//! watch through [`Webhook::share_namespaces`]); [`tls`] (certificate files reloaded on change);
//! [`cert_authority`] and `self_managed` (the self-managed certificate mode); `metrics`.

mod args;
pub mod cert_authority;
pub mod connections;
mod error;
pub mod metrics;
pub mod namespaces;
pub mod review;
mod self_managed;
mod server;
pub mod tls;

pub use args::WebhookArgs;
pub use error::Error;
pub use self_managed::CertStore;
pub use server::{TlsListener, MAX_BODY_BYTES};

use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use prometheus_client::registry::Registry;
use rules::decision::DecisionConfig;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::namespaces::NamespaceCache;
use crate::self_managed::SelfManaged;
use crate::server::AppState;

/// The webhook server, bound and ready to serve.
pub struct Webhook {
    https: TlsListener,
    state: AppState,
    namespace_feed: futures::future::BoxFuture<'static, ()>,
    self_managed: Option<SelfManaged>,
    metrics: Metrics,
}

impl Webhook {
    /// Binds `--webhook-addr` serving the TLS files (as [`TlsListener::from_files`]) or the
    /// self-managed certificate, registers the webhook's metrics in `registry` and builds the
    /// namespace cache. `decision` is the operator's parsed flags, whole (what every patch depends
    /// on); `operator_namespace` is where the self-managed certificate's Secret lives.
    pub async fn new(
        args: WebhookArgs,
        decision: DecisionConfig,
        operator_namespace: String,
        client: kube::Client,
        registry: &mut Registry,
    ) -> Result<Self, Error> {
        // kube already uses ring; installing it as the process default keeps aws-lc-rs out. Another
        // component may have installed it first, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();

        let (https, self_managed) = match &args.webhook_cert_secret {
            Some(secret) => {
                let addr = server::parse_addr(&args.webhook_addr)?;
                let store = CertStore::new(
                    client.clone(),
                    secret.clone(),
                    args.webhook_config_name.clone(),
                    args.webhook_service_name.clone(),
                    operator_namespace,
                );
                let interval = args.webhook_cert_check_interval;
                let (manager, resolver) = SelfManaged::start(store, interval).await?;
                let https = TlsListener::bind(addr, resolver, args.webhook_max_connections)?;
                (https, Some(manager))
            }
            None => (TlsListener::from_files(&args)?, None),
        };

        let metrics = Metrics::register(registry);
        let https = https.count_connections_in(metrics.open_connections());
        let (namespaces, feed) = NamespaceCache::new(client);
        let state = AppState {
            namespaces,
            decision,
            placement: None,
            metrics: metrics.clone(),
        };
        Ok(Self {
            https,
            state,
            namespace_feed: Box::pin(feed),
            self_managed,
            metrics,
        })
    }

    /// Reads namespaces from `store`, kept filled by the caller's [`namespaces::watch`], instead of
    /// running a watch of its own: one namespace watch and cache per process.
    pub fn share_namespaces(&mut self, store: kube::runtime::reflector::Store<Namespace>) {
        self.state.namespaces = self.state.namespaces.sharing(store);
        self.namespace_feed = Box::pin(futures::future::pending());
    }

    /// Attaches pods where `placement` says (the operator's decision from every node's Multus)
    /// rather than where `--nad-namespace` alone would.
    pub fn share_placement(
        &mut self,
        placement: tokio::sync::watch::Receiver<rules::multus_node::Placement>,
    ) {
        self.state.placement = Some(placement);
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.https.local_addr()
    }

    /// A handle on the webhook's counters (the same ones registered in the registry).
    pub fn metrics(&self) -> Metrics {
        self.metrics.clone()
    }

    /// Serves HTTPS until `shutdown` is cancelled; also keeps the namespace cache and, in self-managed
    /// mode, the certificate up to date.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let router = server::router(Arc::new(self.state));
        let serve = self.https.serve(router, shutdown.clone());
        let certs = async {
            match self.self_managed {
                Some(manager) => manager.run(shutdown.clone()).await,
                None => shutdown.cancelled().await,
            }
        };
        // The feed and the certificate loop only end at shutdown; the server decides when we are done.
        let background = futures::future::join(self.namespace_feed, certs);
        tokio::select! {
            result = serve => result,
            _ = background => Ok(()),
        }
    }
}
