//! The CNI error object every failure turns into.

use std::fmt;

use serde_json::{json, Value};

/// Error codes: 1–11 are the spec's well-known codes, 100+ are this plugin's own.
pub mod codes {
    /// The config's `cniVersion` is not one we support.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// An I/O failure: the netns could not be entered, iptables could not be run or failed.
    pub const IO_FAILURE: u32 = 5;
    /// A `CNI_*` environment variable is missing or malformed.
    pub const INVALID_ENV: u32 = 4;
    /// The network config on stdin is not JSON.
    pub const DECODE_FAILURE: u32 = 6;
    /// The network config is JSON but a key has a wrong type or value.
    pub const INVALID_CONFIG: u32 = 7;
    /// Transient: the Kubernetes API could not be reached; the runtime should retry.
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// A pod or namespace annotation of Linkerd's has a value we cannot use.
    pub const INVALID_ANNOTATION: u32 = 100;
    /// CHECK found the pod's rules differ from what they should be.
    pub const RULES_MISMATCH: u32 = 101;
    /// The pod could not be read for a reason other than reachability (not found, forbidden, ...).
    pub const POD_LOOKUP_FAILED: u32 = 102;
}

/// A CNI error: printed on stdout as `{cniVersion, code, msg, details}`, with a non-zero exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// The JSON object for stdout, in the version the caller asked for.
    pub fn to_json(&self, cni_version: &str) -> Value {
        json!({
            "cniVersion": cni_version,
            "code": self.code,
            "msg": self.msg,
            "details": self.details,
        })
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CNI error {}: {}", self.code, self.msg)?;
        if !self.details.is_empty() {
            write!(f, " ({})", self.details)?;
        }
        Ok(())
    }
}

impl std::error::Error for CniError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_object_has_the_four_spec_fields() {
        let e = CniError::new(codes::INVALID_CONFIG, "bad key", "linkerd.proxy-uid");
        assert_eq!(
            e.to_json("1.0.0"),
            json!({"cniVersion": "1.0.0", "code": 7, "msg": "bad key", "details": "linkerd.proxy-uid"})
        );
        assert_eq!(e.to_string(), "CNI error 7: bad key (linkerd.proxy-uid)");
    }
}
