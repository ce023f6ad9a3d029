//! Self-managed certificate mode, the I/O part: keeps the CA and serving certificate in a Secret
//! (created if absent, replaced well before expiry, with optimistic concurrency so several replicas
//! agree on one), serves it, and keeps the MutatingWebhookConfiguration's `caBundle` in sync: at once
//! when the configuration changes (a watch of that one object), and every check interval.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vocab::report::Chain;

use crate::cert_authority::{issue, renewal_reason, serving_names, Bundle, VALIDITY};
use crate::tls::{certified_key_from_pem, SwapResolver};
use crate::Error;

const CA_KEY: &str = "ca.crt";
const CERT_KEY: &str = "tls.crt";
const KEY_KEY: &str = "tls.key";
/// After a failed check, try again this soon rather than a whole interval later.
const RETRY: Duration = Duration::from_secs(30);

/// The Secret and the webhook configuration, and how to keep them right.
pub struct CertStore {
    secrets: Api<Secret>,
    configs: Api<MutatingWebhookConfiguration>,
    secret_name: String,
    config_name: Option<String>,
    service: String,
    namespace: String,
    names: Vec<String>,
}

/// The running self-managed mode: the store plus the resolver serving its certificate.
pub struct SelfManaged {
    store: CertStore,
    interval: Duration,
    resolver: Arc<SwapResolver>,
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn bundle_of(secret: &Secret) -> Option<Bundle> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    Some(Bundle {
        ca_pem: text(CA_KEY)?,
        cert_pem: text(CERT_KEY)?,
        key_pem: text(KEY_KEY)?,
    })
}

impl SelfManaged {
    /// Makes sure a valid certificate is stored and the caBundle is in sync, then returns the manager
    /// and the resolver that serves the certificate.
    pub async fn start(
        store: CertStore,
        interval: Duration,
    ) -> Result<(Self, Arc<SwapResolver>), Error> {
        let bundle = store.ensure_secret().await?;
        store.sync_ca_bundle(&bundle.ca_pem).await?;
        let resolver = Arc::new(SwapResolver::new(store.certified_key(&bundle)?));
        let manager = Self {
            store,
            interval,
            resolver: resolver.clone(),
        };
        Ok((manager, resolver))
    }

    /// Re-checks every interval until `shutdown`: picks up a certificate another replica rotated,
    /// rotates it when due, re-syncs the caBundle. Also at once whenever the configuration changes:
    /// `helm rollback` to the first revision (rendered before any caBundle existed), or a manifest
    /// re-applied by hand, removes the caBundle, and with `failurePolicy: Fail` every pod create the
    /// webhook matches fails until it is back (seen on the node: for minutes, with a 5 m interval).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut changes = self.store.config_changes();
        let mut wait = self.interval;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                Some(()) = changes.next() => {}
            }
            wait = match self.refresh().await {
                Ok(()) => self.interval,
                Err(error) => {
                    tracing::warn!(error = %Chain(&error), "self-managed webhook certificate check failed; retrying");
                    RETRY
                }
            };
        }
    }

    async fn refresh(&self) -> Result<(), Error> {
        let bundle = self.store.ensure_secret().await?;
        // caBundle first: the apiserver must trust a new CA before anyone serves a certificate from it.
        self.store.sync_ca_bundle(&bundle.ca_pem).await?;
        self.resolver.set(self.store.certified_key(&bundle)?);
        Ok(())
    }
}

impl CertStore {
    pub fn new(
        client: Client,
        secret_name: String,
        config_name: Option<String>,
        service: String,
        namespace: String,
    ) -> Self {
        Self {
            secrets: Api::namespaced(client.clone(), &namespace),
            configs: Api::all(client),
            names: serving_names(&service, &namespace),
            secret_name,
            config_name,
            service,
            namespace,
        }
    }

    fn certified_key(&self, bundle: &Bundle) -> Result<rustls::sign::CertifiedKey, Error> {
        certified_key_from_pem(
            bundle.cert_pem.as_bytes(),
            bundle.key_pem.as_bytes(),
            std::path::Path::new(&self.secret_name),
        )
    }

    /// The stored bundle, created or rotated first when needed. Losing a create or replace race to
    /// another replica is fine: we read again and use theirs.
    pub async fn ensure_secret(&self) -> Result<Bundle, Error> {
        let action = format!("managing Secret {}/{}", self.namespace, self.secret_name);
        for _ in 0..5 {
            let existing = self
                .secrets
                .get_opt(&self.secret_name)
                .await
                .map_err(kube_err(action.clone()))?;
            let now = SystemTime::now();
            let result = match existing {
                None => {
                    let bundle = issue(&self.names, now, VALIDITY, None)?;
                    tracing::info!(secret = %self.secret_name, "creating the webhook's self-managed certificate");
                    self.secrets
                        .create(&PostParams::default(), &self.secret(&bundle, None))
                        .await
                        .map(|_| bundle)
                }
                Some(secret) => {
                    let stored = bundle_of(&secret);
                    let reason = match &stored {
                        Some(b) => renewal_reason(b, &self.names, now),
                        None => Some("the Secret lacks ca.crt, tls.crt or tls.key".to_string()),
                    };
                    match (stored, reason) {
                        (Some(b), None) => return Ok(b),
                        (_, Some(reason)) if !vocab::is_managed_by_us(secret.metadata.labels.as_ref()) => {
                            return Err(Error::SelfManaged(format!(
                                "Secret {}/{} is not labelled {}={} and {reason}; it is not ours to \
                                 replace: delete it or choose another --webhook-cert-secret",
                                self.namespace,
                                self.secret_name,
                                vocab::MANAGED_BY_LABEL,
                                vocab::MANAGED_BY_VALUE
                            )))
                        }
                        (stored, reason) => {
                            let reason = reason.unwrap_or_default();
                            tracing::info!(secret = %self.secret_name, %reason, "rotating the webhook's self-managed certificate");
                            let previous = stored.map(|b| b.ca_pem);
                            let bundle = issue(&self.names, now, VALIDITY, previous.as_deref())?;
                            let replacement =
                                self.secret(&bundle, secret.metadata.resource_version.clone());
                            self.secrets
                                .replace(&self.secret_name, &PostParams::default(), &replacement)
                                .await
                                .map(|_| bundle)
                        }
                    }
                }
            };
            match result {
                Ok(bundle) => return Ok(bundle),
                // 409: another replica created or replaced it between our read and our write.
                Err(e) if is_status(&e, 409) => {
                    tracing::debug!(secret = %self.secret_name, "lost a certificate write race; reading again");
                }
                Err(e) => return Err(kube_err(action)(e)),
            }
        }
        Err(Error::SelfManaged(format!(
            "Secret {}/{} kept changing under us; giving up for now",
            self.namespace, self.secret_name
        )))
    }

    /// The Secret holding `bundle`; `resource_version` makes a replace fail if someone wrote in between.
    fn secret(&self, bundle: &Bundle, resource_version: Option<String>) -> Secret {
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    vocab::MANAGED_BY_LABEL.to_string(),
                    vocab::MANAGED_BY_VALUE.to_string(),
                )])),
                resource_version,
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                (CA_KEY.to_string(), bytes(&bundle.ca_pem)),
                (CERT_KEY.to_string(), bytes(&bundle.cert_pem)),
                (KEY_KEY.to_string(), bytes(&bundle.key_pem)),
            ])),
            ..Default::default()
        }
    }

    /// A tick each time the configuration is written or deleted (and once the watch has listed it):
    /// a watch of that one object, by name, so its RBAC stays the object's `resourceNames`. Watch
    /// errors are logged and retried with backoff; the interval's checks go on meanwhile.
    fn config_changes(&self) -> BoxStream<'static, ()> {
        let Some(name) = &self.config_name else {
            return futures::stream::pending().boxed();
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let name = name.clone();
        watcher(self.configs.clone(), config)
            .default_backoff()
            .filter_map(move |event| {
                let tick = match event {
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))
                    | Ok(watcher::Event::InitDone) => Some(()),
                    Ok(_) => None,
                    Err(error) => {
                        tracing::warn!(config = %name, error = %Chain(&error),
                            "cannot watch the webhook configuration; its caBundle is re-checked every interval");
                        None
                    }
                };
                futures::future::ready(tick)
            })
            .boxed()
    }

    /// Sets `caBundle` on the configuration's webhooks that call us: through our Service, or through a
    /// URL whose host our certificate names. Other entries and absent configurations are left alone.
    pub async fn sync_ca_bundle(&self, ca_pem: &str) -> Result<(), Error> {
        let Some(name) = &self.config_name else {
            return Ok(());
        };
        let action = format!("syncing the caBundle of MutatingWebhookConfiguration {name}");
        let Some(config) = self
            .configs
            .get_opt(name)
            .await
            .map_err(kube_err(action.clone()))?
        else {
            tracing::debug!(config = %name, "no MutatingWebhookConfiguration to sync the caBundle into");
            return Ok(());
        };
        let wanted = ByteString(ca_pem.as_bytes().to_vec());
        let mut ops = Vec::new();
        for (i, webhook) in config.webhooks.iter().flatten().enumerate() {
            let cc = &webhook.client_config;
            let via_service = cc
                .service
                .as_ref()
                .is_some_and(|s| s.name == self.service && s.namespace == self.namespace);
            let via_url = cc
                .url
                .as_deref()
                .and_then(vocab::https_host_port)
                .is_some_and(|(h, _)| self.names.iter().any(|n| n == h));
            if (via_service || via_url) && cc.ca_bundle.as_ref() != Some(&wanted) {
                // The test op makes the patch fail, rather than hit another entry, if the list moved.
                ops.push(json!({ "op": "test", "path": format!("/webhooks/{i}/name"), "value": webhook.name }));
                ops.push(json!({ "op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": wanted }));
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        let patch: json_patch::Patch = serde_json::from_value(json!(ops))
            .map_err(|e| Error::SelfManaged(format!("cannot build the caBundle patch: {e}")))?;
        tracing::info!(config = %name, "updating the webhook caBundle");
        self.configs
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(kube_err(action))?;
        Ok(())
    }
}
