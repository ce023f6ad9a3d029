//! The spec versions this plugin accepts and the `VERSION` command's answer.

use std::fmt;

use serde_json::{json, Value};

/// A CNI spec version this plugin understands. Ordered, so `>=` reads as "at least".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CniVersion {
    V0_3_0,
    V0_3_1,
    V0_4_0,
    V1_0_0,
    V1_1_0,
}

impl CniVersion {
    /// Every supported version, oldest first.
    pub const ALL: [CniVersion; 5] = [
        CniVersion::V0_3_0,
        CniVersion::V0_3_1,
        CniVersion::V0_4_0,
        CniVersion::V1_0_0,
        CniVersion::V1_1_0,
    ];
    /// The newest version, used when the input names none we can trust.
    pub const LATEST: CniVersion = CniVersion::V1_1_0;

    pub fn as_str(self) -> &'static str {
        match self {
            CniVersion::V0_3_0 => "0.3.0",
            CniVersion::V0_3_1 => "0.3.1",
            CniVersion::V0_4_0 => "0.4.0",
            CniVersion::V1_0_0 => "1.0.0",
            CniVersion::V1_1_0 => "1.1.0",
        }
    }

    /// Parses an exact version string; `None` for anything we do not support.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// CHECK exists from 0.4.0 on; older runtimes never send it.
    pub fn supports_check(self) -> bool {
        self >= CniVersion::V0_4_0
    }

    /// Before 1.0.0 each entry of `ips` carries `"version": "4"|"6"`; 1.0.0 dropped the field.
    pub fn ips_carry_version(self) -> bool {
        self < CniVersion::V1_0_0
    }
}

impl fmt::Display for CniVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to `CNI_COMMAND=VERSION`. It echoes the requested version when we support it (so an
/// old runtime can parse the answer), otherwise the newest.
pub fn version_info(requested: Option<&str>) -> Value {
    let answer = requested
        .and_then(CniVersion::parse)
        .unwrap_or(CniVersion::LATEST);
    json!({
        "cniVersion": answer.as_str(),
        "supportedVersions": CniVersion::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exactly_the_supported_versions() {
        for v in CniVersion::ALL {
            assert_eq!(CniVersion::parse(v.as_str()), Some(v));
        }
        for bad in ["0.1.0", "0.2.0", "1.0", "", "v1.0.0", "2.0.0"] {
            assert_eq!(CniVersion::parse(bad), None, "{bad}");
        }
    }

    /// A runtime reads `supportedVersions` to decide whether to call us at all.
    #[test]
    fn version_answer_lists_all_and_echoes_supported_request() {
        let all = json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]);
        assert_eq!(
            version_info(Some("0.3.1")),
            json!({"cniVersion": "0.3.1", "supportedVersions": all})
        );
        assert_eq!(
            version_info(Some("0.2.0")),
            json!({"cniVersion": "1.1.0", "supportedVersions": all})
        );
        assert_eq!(
            version_info(None),
            json!({"cniVersion": "1.1.0", "supportedVersions": all})
        );
    }

    #[test]
    fn feature_gates_follow_the_spec() {
        assert!(!CniVersion::V0_3_1.supports_check());
        assert!(CniVersion::V0_4_0.supports_check());
        assert!(CniVersion::V0_4_0.ips_carry_version());
        assert!(!CniVersion::V1_0_0.ips_carry_version());
    }
}
