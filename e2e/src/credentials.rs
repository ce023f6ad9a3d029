//! Which credential a client used: a service-account token's claims, a kubeconfig's token, and the
//! node testbed's audit log of pod reads.

use base64::Engine as _;
use serde_json::Value;
use std::path::Path;

/// The claims of a JWT (its middle part), unverified: tests only read whom it names and to what it
/// is bound.
pub fn token_claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .expect("base64url claims");
    serde_json::from_slice(&bytes).expect("JSON claims")
}

/// The user token of a kubeconfig file (the first user's).
pub fn kubeconfig_token(path: &Path) -> String {
    let config = kube::config::Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read the kubeconfig {}: {e}", path.display()));
    // kube keeps the token secret; its own serialisation writes it back out.
    let v = serde_json::to_value(&config).expect("a kubeconfig serialises");
    v["users"][0]["user"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {}", path.display()))
        .to_string()
}

/// `system:serviceaccount:<namespace>:<name>`, the username a service-account token authenticates as.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// One `get` of a pod as the apiserver's audit log recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRead {
    pub namespace: String,
    pub pod: String,
    /// Empty when the request was not authenticated.
    pub user: String,
    pub code: i64,
}

/// Every pod `get` in an audit log (JSON lines; the node testbed's policy records them at Metadata).
pub fn pod_reads(audit_log: &Path) -> Vec<PodRead> {
    let text = std::fs::read_to_string(audit_log)
        .unwrap_or_else(|e| panic!("cannot read the audit log {}: {e}", audit_log.display()));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["verb"] == "get" && e["objectRef"]["resource"] == "pods")
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| PodRead {
            namespace: e["objectRef"]["namespace"].as_str().unwrap_or("").into(),
            pod: e["objectRef"]["name"].as_str().unwrap_or("").into(),
            user: e["user"]["username"].as_str().unwrap_or("").into(),
            code: e["responseStatus"]["code"].as_i64().unwrap_or(0),
        })
        .collect()
}
