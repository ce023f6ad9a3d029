//! The token the plugin's kubeconfig holds, and when to renew it.
//!
//! Since Kubernetes 1.22 a pod's own service-account token is bound to the pod: the apiserver refuses
//! it once the pod is deleted. The installer pod is deleted on every DaemonSet rollout, while the
//! kubeconfig it wrote must keep working for the pods set up before the next installer runs. So, with
//! `--plugin-service-account`, the installer asks the TokenRequest API for a token of that (read-only)
//! service account bound to no object: it is valid for its own lifetime whatever happens to the
//! installer pod, and each installer renews it at [`RENEW_AT`] of that lifetime.

use crate::args::Settings;
pub use crate::args::{PluginCredential as Source, MIN_TOKEN_LIFETIME as MIN_LIFETIME};
use crate::error::InstallError;
use crate::kubeconfig;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use std::time::{Duration, SystemTime};

pub use rules::credential::RENEW_AT;

/// The token the next pass writes into the plugin's kubeconfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginToken {
    /// This pod's own, read from `--service-account-dir` at each pass.
    FromServiceAccountDir,
    /// One the run loop obtained by TokenRequest ([`Keeper`]).
    Issued(String),
    /// TokenRequest mode without a usable token yet: the kubeconfig is left as it is.
    Missing { service_account: String },
}

/// A token the apiserver issued, with its validity as the apiserver stated it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    pub token: String,
    pub issued_at: SystemTime,
    pub expires_at: SystemTime,
}

impl Issued {
    /// Time to ask for a new one: past [`RENEW_AT`] of the lifetime (or a clock that went back
    /// before the issue time, which makes the age unknowable).
    pub fn renewal_due(&self, now: SystemTime) -> bool {
        let lifetime = self
            .expires_at
            .duration_since(self.issued_at)
            .unwrap_or_default();
        match now.duration_since(self.issued_at) {
            Ok(age) => age.as_secs_f64() >= lifetime.as_secs_f64() * RENEW_AT,
            Err(_) => true,
        }
    }

    pub fn valid_at(&self, now: SystemTime) -> bool {
        now < self.expires_at
    }
}

/// Whether a token must be asked for now: none held, or the held one is due for renewal.
pub fn must_request(held: Option<&Issued>, now: SystemTime) -> bool {
    held.is_none_or(|h| h.renewal_due(now))
}

/// The token to write after a request: the new one; on a failed request the held one while it is
/// still valid (the failure is returned beside it, to be logged), else only the failure.
pub fn settle(
    held: Option<Issued>,
    now: SystemTime,
    requested: Result<Issued, InstallError>,
) -> (Option<Issued>, Option<InstallError>) {
    match requested {
        Ok(new) => (Some(new), None),
        Err(e) => (held.filter(|h| h.valid_at(now)), Some(e)),
    }
}

/// The installer's own kubeconfig, in memory: the in-cluster address, the CA and the token file of
/// `--service-account-dir` (re-read as the kubelet rotates it).
pub fn installer_kubeconfig(settings: &Settings) -> Result<String, InstallError> {
    let ca = read_service_account(settings, "ca.crt")?;
    let (host, port) = settings.service_address()?;
    Ok(kubeconfig::render_token_file(
        &kubeconfig::server_url(host, port),
        &settings.service_account_dir.join("token"),
        &ca,
    ))
}

/// A file of `--service-account-dir`.
pub(crate) fn read_service_account(
    settings: &Settings,
    name: &str,
) -> Result<Vec<u8>, InstallError> {
    let path = settings.service_account_dir.join(name);
    std::fs::read(&path).map_err(|source| InstallError::ServiceAccount { path, source })
}

/// The installer's own client config: the in-cluster address, the CA and the rotating token of
/// `--service-account-dir`.
pub async fn installer_config(settings: &Settings) -> Result<kube::Config, InstallError> {
    config_of(&installer_kubeconfig(settings)?).await
}

/// A client config with `token` in place of the installer's own (the in-cluster address and CA):
/// the plugin's token, to ask what the installer's own token no longer may.
pub async fn config_with_token(
    settings: &Settings,
    token: &str,
) -> Result<kube::Config, InstallError> {
    let ca = read_service_account(settings, "ca.crt")?;
    let (host, port) = settings.service_address()?;
    config_of(&kubeconfig::render(
        &kubeconfig::server_url(host, port),
        token,
        &ca,
    ))
    .await
}

async fn config_of(text: &str) -> Result<kube::Config, InstallError> {
    let boxed = |e: kube::config::KubeconfigError| InstallError::ApiClient(Box::new(e));
    let parsed = kube::config::Kubeconfig::from_yaml(text).map_err(boxed)?;
    kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .map_err(boxed)
}

/// The installer's own client ([`installer_config`]), and the namespace named in
/// `--service-account-dir`.
pub async fn installer_client(settings: &Settings) -> Result<(kube::Client, String), InstallError> {
    let namespace = String::from_utf8_lossy(&read_service_account(settings, "namespace")?)
        .trim()
        .to_string();
    let config = installer_config(settings).await?;
    let client =
        kube::Client::try_from(config).map_err(|e| InstallError::ApiClient(Box::new(e)))?;
    Ok((client, namespace))
}

/// Asks the apiserver for a token of `service_account` in `namespace`, audience the apiserver's own,
/// bound to no object.
pub async fn request(
    client: kube::Client,
    namespace: &str,
    service_account: &str,
    lifetime: Duration,
) -> Result<Issued, InstallError> {
    let api: Api<ServiceAccount> = Api::namespaced(client, namespace);
    let ask = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            bound_object_ref: None,
            expiration_seconds: Some(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX)),
        },
        ..TokenRequest::default()
    };
    let issued_at = SystemTime::now();
    let answer = api
        .create_token_request(service_account, &PostParams::default(), &ask)
        .await
        .map_err(|source| InstallError::TokenRequest {
            namespace: namespace.to_string(),
            service_account: service_account.to_string(),
            source: Box::new(source),
        })?;
    let Some(status) = answer.status.filter(|s| !s.token.trim().is_empty()) else {
        return Err(InstallError::EmptyIssuedToken {
            namespace: namespace.to_string(),
            service_account: service_account.to_string(),
        });
    };
    Ok(Issued {
        token: status.token.trim().to_string(),
        issued_at,
        expires_at: SystemTime::from(status.expiration_timestamp.0),
    })
}

/// The loop's side of TokenRequest mode: holds the issued token and renews it when due.
pub struct Keeper {
    service_account: String,
    lifetime: Duration,
    client: Option<(kube::Client, String)>,
    held: Option<Issued>,
}

impl Keeper {
    /// `None` in pod-token mode.
    pub fn new(source: &Source) -> Option<Self> {
        match source {
            Source::PodToken => None,
            Source::TokenRequest {
                service_account,
                lifetime,
            } => Some(Keeper {
                service_account: service_account.clone(),
                lifetime: *lifetime,
                client: None,
                held: None,
            }),
        }
    }

    /// The token the pass is to write, renewing it first when due; a failure is returned to be
    /// reported with the pass (the held token stays in use while it is valid).
    pub async fn refresh(&mut self, settings: &Settings) -> (PluginToken, Option<InstallError>) {
        let now = SystemTime::now();
        let mut failure = None;
        if must_request(self.held.as_ref(), now) {
            let requested = match self.client(settings).await {
                Ok((client, namespace)) => {
                    let issued =
                        request(client, &namespace, &self.service_account, self.lifetime).await;
                    if let Ok(new) = &issued {
                        tracing::info!(
                            service_account = %format!("{namespace}/{}", self.service_account),
                            expires_at = %k8s_openapi::jiff::Timestamp::try_from(new.expires_at)
                                .map(|t| t.to_string())
                                .unwrap_or_default(),
                            "obtained the plugin's token (bound to no pod)"
                        );
                    }
                    issued
                }
                Err(e) => Err(e),
            };
            let (held, error) = settle(self.held.take(), now, requested);
            self.held = held;
            failure = error;
        }
        let token = match &self.held {
            Some(h) => PluginToken::Issued(h.token.clone()),
            None => PluginToken::Missing {
                service_account: self.service_account.clone(),
            },
        };
        (token, failure)
    }

    /// When the token held now was issued and expires (what the node's NodeMultus publishes).
    pub fn held_validity(&self) -> Option<(SystemTime, SystemTime)> {
        self.held.as_ref().map(|h| (h.issued_at, h.expires_at))
    }

    /// The plugin's token held now, if any.
    pub fn held_token(&self) -> Option<&str> {
        self.held.as_ref().map(|h| h.token.as_str())
    }

    async fn client(
        &mut self,
        settings: &Settings,
    ) -> Result<(kube::Client, String), InstallError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let built = installer_client(settings).await?;
        self.client = Some(built.clone());
        Ok(built)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(at: u64, lifetime: u64) -> Issued {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(at);
        Issued {
            token: format!("t{at}"),
            issued_at: t0,
            expires_at: t0 + Duration::from_secs(lifetime),
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn renewal_is_due_at_four_fifths_of_the_stated_lifetime() {
        let t = issued(1000, 1000);
        assert!(!t.renewal_due(at(1000)));
        assert!(!t.renewal_due(at(1799)));
        assert!(t.renewal_due(at(1800)));
        assert!(t.renewal_due(at(5000)));
        // A clock that went back before the issue: renew rather than trust an unknowable age.
        assert!(t.renewal_due(at(10)));
        assert!(t.valid_at(at(1999)) && !t.valid_at(at(2000)));
    }

    #[test]
    fn a_held_token_is_kept_until_due() {
        let held = issued(0, 1000);
        assert!(must_request(None, at(0)));
        assert!(!must_request(Some(&held), at(100)));
        assert!(must_request(Some(&held), at(900)));
        let (token, error) = settle(Some(held), at(900), Ok(issued(900, 1000)));
        assert_eq!(token.map(|t| t.token), Some("t900".to_string()));
        assert!(error.is_none());
    }

    /// An apiserver that cannot issue a new token costs nothing while the held one is valid, and
    /// the failure is reported either way.
    #[test]
    fn a_failed_renewal_keeps_the_valid_token_and_reports() {
        let fail = || {
            Err(InstallError::EmptyIssuedToken {
                namespace: "n".into(),
                service_account: "sa".into(),
            })
        };
        let held = issued(0, 1000);
        let (token, error) = settle(Some(held.clone()), at(900), fail());
        assert_eq!(token, Some(held.clone()));
        assert!(error.is_some());
        let (token, error) = settle(Some(held), at(1000), fail());
        assert_eq!(token, None, "expired: nothing usable to write");
        assert!(error.is_some());
        let (token, error) = settle(None, at(0), fail());
        assert_eq!(token, None);
        assert!(error.is_some());
    }
}
