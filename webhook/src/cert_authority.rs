//! Self-managed certificates, the pure part: issuing a CA and a serving certificate with rcgen, and
//! deciding whether a stored pair must be replaced. No client calls here; `self_managed` does the I/O.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::tls::certified_key_from_pem;
use crate::Error;

/// How long issued certificates are valid.
pub const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// Replace a certificate once less than this is left: far from the edge, so a few failed attempts or a
/// stopped operator still leave months of margin.
pub const RENEW_BEFORE: Duration = Duration::from_secs(120 * 24 * 3600);
/// Backdating, for apiservers whose clocks run a little behind ours.
const BACKDATE: Duration = Duration::from_secs(3600);

/// A CA bundle (current CA first, then the previous one while it is still valid, so apiservers
/// configured with either trust the new serving certificate), a serving certificate and its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The names the serving certificate is issued for: the Service's in-cluster DNS names, plus the
/// loopback ones so the webhook can be reached from the node or a test.
pub fn serving_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        "localhost".to_string(),
        "127.0.0.1".to_string(),
    ]
}

fn rcgen_err(what: &str) -> impl Fn(rcgen::Error) -> Error + '_ {
    move |e| Error::SelfManaged(format!("cannot {what}: {e}"))
}

/// Issues a fresh CA and a serving certificate for `names`, valid from `now` for `validity`. A still
/// valid first CA of `previous_ca_pem` is kept in the new bundle, after the new CA.
pub fn issue(
    names: &[String],
    now: SystemTime,
    validity: Duration,
    previous_ca_pem: Option<&str>,
) -> Result<Bundle, Error> {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let not_before = epoch + since_epoch.saturating_sub(BACKDATE);
    let not_after = epoch + since_epoch + validity;

    let ca_key = KeyPair::generate().map_err(rcgen_err("generate the CA key"))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_err("build the CA"))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    // A distinct subject per CA, so a serving certificate can be matched to the CA that issued it.
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("linkerd-multus-webhook-ca-{}", key_id(&ca_key)),
    );
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key).map_err(rcgen_err("sign the CA"))?;

    let mut leaf =
        CertificateParams::new(names.to_vec()).map_err(rcgen_err("build the certificate"))?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.not_before = not_before;
    leaf.not_after = not_after;
    let leaf_key = KeyPair::generate().map_err(rcgen_err("generate the serving key"))?;
    let issuer = Issuer::new(ca, ca_key);
    let leaf_cert = leaf
        .signed_by(&leaf_key, &issuer)
        .map_err(rcgen_err("sign the serving certificate"))?;

    let mut ca_pem = ca_cert.pem();
    if let Some(previous) = previous_ca_pem.and_then(|p| first_valid_pem(p, now)) {
        ca_pem.push_str(&previous);
    }
    Ok(Bundle {
        ca_pem,
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

/// A short hex id of a key, from its public half.
fn key_id(key: &KeyPair) -> String {
    key.public_key_raw()
        .iter()
        .rev()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first certificate of a PEM bundle, re-encoded as PEM, if it is still valid at `now`.
fn first_valid_pem(pem: &str, now: SystemTime) -> Option<String> {
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()?
        .ok()?;
    let (_, cert) = X509Certificate::from_der(&der).ok()?;
    if (cert.validity().not_after.timestamp() as i128) <= unix(now) {
        return None;
    }
    Some(pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der.to_vec()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    ))
}

fn unix(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i128,
        Err(e) => -(e.duration().as_secs() as i128),
    }
}

/// Why `bundle` must be replaced at `now` to serve `names`, or None when it is good to keep.
pub fn renewal_reason(bundle: &Bundle, names: &[String], now: SystemTime) -> Option<String> {
    if let Err(e) = certified_key_from_pem(
        bundle.cert_pem.as_bytes(),
        bundle.key_pem.as_bytes(),
        Path::new("secret"),
    ) {
        return Some(format!("the stored certificate cannot be served: {e}"));
    }
    let first_der = |pem: &str| {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .next()
            .and_then(Result::ok)
    };
    let Some(leaf_der) = first_der(&bundle.cert_pem) else {
        return Some("the stored certificate is not PEM".into());
    };
    let Some(ca_der) = first_der(&bundle.ca_pem) else {
        return Some("the stored CA bundle is not PEM".into());
    };
    let (Ok((_, leaf)), Ok((_, ca))) = (
        X509Certificate::from_der(&leaf_der),
        X509Certificate::from_der(&ca_der),
    ) else {
        return Some("the stored certificates cannot be parsed".into());
    };
    if leaf.issuer() != ca.subject() {
        return Some("the serving certificate was not issued by the stored CA".into());
    }
    let now_s = unix(now);
    let renew_before = RENEW_BEFORE.as_secs() as i128;
    for (what, cert) in [("serving certificate", &leaf), ("CA", &ca)] {
        let v = cert.validity();
        if v.not_before.timestamp() as i128 > now_s + BACKDATE.as_secs() as i128 {
            return Some(format!("the {what} is not valid yet"));
        }
        if (v.not_after.timestamp() as i128) - now_s < renew_before {
            return Some(format!(
                "the {what} expires within {} days",
                RENEW_BEFORE.as_secs() / 86400
            ));
        }
    }
    let sans: Vec<String> = match leaf.subject_alternative_name() {
        Ok(Some(ext)) => ext
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_string()),
                GeneralName::IPAddress(ip) if ip.len() == 4 => {
                    Some(std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]).to_string())
                }
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if let Some(missing) = names.iter().find(|n| !sans.contains(n)) {
        return Some(format!("the serving certificate does not name {missing}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        serving_names("svc", "ns")
    }

    /// A fresh bundle is kept; the same bundle near its end, or for other names, is replaced.
    #[test]
    fn renewal() {
        let now = SystemTime::now();
        let b = issue(&names(), now, VALIDITY, None).unwrap();
        assert_eq!(renewal_reason(&b, &names(), now), None);
        let later = now + VALIDITY - RENEW_BEFORE + Duration::from_secs(3600);
        assert!(renewal_reason(&b, &names(), later)
            .unwrap()
            .contains("expires within"));
        let other = serving_names("other", "ns");
        assert!(renewal_reason(&b, &other, now)
            .unwrap()
            .contains("does not name other"));
        let mut mixed = b.clone();
        mixed.ca_pem = issue(&names(), now, VALIDITY, None).unwrap().ca_pem;
        assert!(renewal_reason(&mixed, &names(), now)
            .unwrap()
            .contains("not issued by"));
        let mut broken = b.clone();
        broken.key_pem = "garbage".into();
        assert!(renewal_reason(&broken, &names(), now)
            .unwrap()
            .contains("cannot be served"));
    }

    /// The previous CA stays in the bundle while valid, after the new one.
    #[test]
    fn previous_ca_is_kept_while_valid() {
        let now = SystemTime::now();
        let old = issue(&names(), now, VALIDITY, None).unwrap();
        let new = issue(&names(), now, VALIDITY, Some(&old.ca_pem)).unwrap();
        let certs: Vec<_> = CertificateDer::pem_slice_iter(new.ca_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(certs.len(), 2);
        let old_first = CertificateDer::pem_slice_iter(old.ca_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(certs[1], old_first);
        let after_expiry = now + VALIDITY + Duration::from_secs(10);
        let newer = issue(&names(), after_expiry, VALIDITY, Some(&old.ca_pem)).unwrap();
        assert_eq!(
            CertificateDer::pem_slice_iter(newer.ca_pem.as_bytes()).count(),
            1
        );
    }
}
