//! Probing a webhook endpoint the way the API server does: TCP, then TLS verified by the entry's
//! caBundle alone, for the host name the API server would use. For a service reference the API server
//! dials the Service's ClusterIP (it never asks cluster DNS), so the caller resolves that first.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Where a webhook entry sends its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The name the certificate must carry (and the TLS SNI).
    pub host: String,
    pub port: u16,
    /// For a service reference: its namespace and name, to be resolved to `address`.
    pub service: Option<(String, String)>,
    /// Where to connect when that is not `host` (the Service's ClusterIP).
    pub address: Option<String>,
    /// How the configuration names it, for messages.
    described: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.described)
    }
}

impl Target {
    /// The entry's endpoint when it calls `path` (else None: not our webhook).
    pub fn of(config: &WebhookClientConfig, path: &str) -> Option<Self> {
        if let Some(svc) = &config.service {
            if svc.path.as_deref() != Some(path) {
                return None;
            }
            let port = svc.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443);
            // The API server verifies the certificate for <service>.<namespace>.svc.
            return Some(Self {
                host: format!("{}.{}.svc", svc.name, svc.namespace),
                port,
                service: Some((svc.namespace.clone(), svc.name.clone())),
                address: None,
                described: format!("service {}/{}:{port}", svc.namespace, svc.name),
            });
        }
        let url = config.url.as_deref()?;
        if url.parse::<http::Uri>().ok()?.path() != path {
            return None;
        }
        let (host, port) = vocab::https_host_port(url)?;
        Some(Self {
            host: host.to_string(),
            port,
            service: None,
            address: None,
            described: url.to_string(),
        })
    }
}

/// Ok when a TLS handshake with `target`, trusting only `ca_pem`, succeeds within `timeout`.
pub async fn tls_handshake(
    target: &Target,
    ca_pem: &[u8],
    timeout: Duration,
) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| format!("caBundle is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("caBundle holds an unusable certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle is empty (no CA injected yet?)".to_string());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name =
        ServerName::try_from(target.host.clone()).map_err(|e| format!("bad host name: {e}"))?;
    let handshake = async {
        let address = target.address.as_deref().unwrap_or(&target.host);
        let tcp = TcpStream::connect((address, target.port))
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        Ok(())
    };
    tokio::time::timeout(timeout, handshake)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    fn url(u: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            url: Some(u.to_string()),
            ..Default::default()
        }
    }

    /// The probe must go where the API server goes: the service DNS name, or the URL's host and port.
    #[test]
    fn targets() {
        let svc = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "wh".into(),
                namespace: "ops".into(),
                path: Some("/annotate-multus-v1-pod".into()),
                port: Some(9443),
            }),
            ..Default::default()
        };
        let t = Target::of(&svc, "/annotate-multus-v1-pod").expect("ours");
        assert_eq!((t.host.as_str(), t.port), ("wh.ops.svc", 9443));
        assert_eq!(t.service, Some(("ops".to_string(), "wh".to_string())));
        assert_eq!(t.to_string(), "service ops/wh:9443");

        let t = Target::of(
            &url("https://127.0.0.1:8443/annotate-multus-v1-pod"),
            "/annotate-multus-v1-pod",
        )
        .expect("ours");
        assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 8443));
        assert_eq!(t.service, None);
        let t = Target::of(
            &url("https://[::1]/annotate-multus-v1-pod"),
            "/annotate-multus-v1-pod",
        )
        .expect("v6");
        assert_eq!((t.host.as_str(), t.port), ("::1", 443));

        assert_eq!(
            Target::of(&url("https://x/other"), "/annotate-multus-v1-pod"),
            None
        );
        assert_eq!(
            Target::of(&url("not a url"), "/annotate-multus-v1-pod"),
            None
        );
    }

    #[tokio::test]
    async fn empty_or_garbage_ca_bundle_fails_clearly() {
        let t = Target::of(
            &url("https://127.0.0.1:1/annotate-multus-v1-pod"),
            "/annotate-multus-v1-pod",
        )
        .unwrap();
        let e = tls_handshake(&t, b"", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(e.contains("caBundle is empty"), "{e}");
        let e = tls_handshake(
            &t,
            b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert!(e.contains("caBundle"), "{e}");
    }
}
