//! The webhook's serving certificate: parsed and checked at start, and re-read whenever its files change
//! (cert-manager and kubelet rotate them in place), so rotation needs no restart. In self-managed mode the
//! certificate comes from the Secret instead and is swapped in by [`SwapResolver::set`].

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use vocab::report::Chain;

use crate::Error;

/// Builds a [`CertifiedKey`] from PEM text; `origin` names the source in errors.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    origin: &Path,
) -> Result<CertifiedKey, Error> {
    let invalid = |reason: String| Error::InvalidTls {
        path: origin.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("cannot parse the PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate found".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| invalid(format!("cannot parse the PEM private key: {e}")))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider)
        .map_err(|e| invalid(format!("the key does not fit the certificate: {e}")))
}

/// What identifies one version of a file: a rotation changes at least one of these (a Secret volume
/// swaps a symlink, so the inode changes even when size and mtime happen to match).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    dev: u64,
    ino: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        dev: m.dev(),
        ino: m.ino(),
    })
}

struct Loaded {
    stamps: (Option<Stamp>, Option<Stamp>),
    key: Arc<CertifiedKey>,
}

/// Serves the certificate in two PEM files, re-reading them on the first handshake after they change.
pub struct FileResolver {
    cert_path: PathBuf,
    key_path: PathBuf,
    loaded: Mutex<Loaded>,
}

impl fmt::Debug for FileResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileResolver")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::ReadTls {
        path: path.to_path_buf(),
        source,
    })
}

impl FileResolver {
    /// Reads and checks both files now: a webhook that cannot serve TLS must fail at start, loudly.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self, Error> {
        let stamps = (stamp(cert_path), stamp(key_path));
        let key = certified_key_from_pem(&read(cert_path)?, &read(key_path)?, cert_path)?;
        Ok(Self {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            loaded: Mutex::new(Loaded {
                stamps,
                key: Arc::new(key),
            }),
        })
    }

    /// The current certificate, re-read first if either file changed. A broken new pair (e.g. the
    /// certificate written but not yet its key) keeps the previous one serving and is retried on the
    /// next change.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let stamps = (stamp(&self.cert_path), stamp(&self.key_path));
        if stamps != loaded.stamps {
            loaded.stamps = stamps;
            let fresh = read(&self.cert_path).and_then(|cert| {
                let key = read(&self.key_path)?;
                certified_key_from_pem(&cert, &key, &self.cert_path)
            });
            match fresh {
                Ok(key) => {
                    tracing::info!(cert = %self.cert_path.display(), "reloaded the webhook's TLS certificate");
                    loaded.key = Arc::new(key);
                }
                Err(error) => {
                    tracing::warn!(error = %Chain(&error), "TLS files changed but cannot be used; still serving the previous certificate");
                }
            }
        }
        loaded.key.clone()
    }
}

impl ResolvesServerCert for FileResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Serves whatever certificate was set last (self-managed mode).
pub struct SwapResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for SwapResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapResolver").finish_non_exhaustive()
    }
}

impl SwapResolver {
    pub fn new(key: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(key)),
        }
    }

    pub fn set(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }
}

impl ResolvesServerCert for SwapResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// The rustls server configuration around a resolver: TLS 1.2+, ring, h2 and http/1.1.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<rustls::ServerConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(Error::TlsConfig)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
