//! The result a plugin prints after ADD, and its conversion between spec versions.
//!
//! A chained plugin passes its `prevResult` on, in the version of its own config. Between the
//! versions we support, the only difference in shape is `ips[].version`: present ("4"/"6") before
//! 1.0.0, gone from 1.0.0 on. Everything else (interfaces, routes, dns, unknown keys) passes through.

use serde_json::{json, Map, Value};

use super::error::{codes, CniError};
use super::version::CniVersion;

/// The result of a plugin that set up nothing: what we print when there is no `prevResult`
/// (Multus calls an extra attachment that way).
pub fn empty_result(version: CniVersion) -> Value {
    json!({"cniVersion": version.as_str(), "dns": {}})
}

/// Converts `prev` (a result of any supported version, read from its own `cniVersion`, or
/// `config_version` when it names none) to `to`.
pub fn convert_result(
    prev: &Value,
    config_version: CniVersion,
    to: CniVersion,
) -> Result<Value, CniError> {
    let obj = prev.as_object().ok_or_else(|| {
        CniError::new(
            codes::DECODE_FAILURE,
            "prevResult is not a JSON object",
            prev.to_string(),
        )
    })?;
    let from = match obj.get("cniVersion") {
        None => config_version,
        Some(Value::String(s)) => CniVersion::parse(s).ok_or_else(|| {
            CniError::new(
                codes::INCOMPATIBLE_VERSION,
                format!("cannot convert a prevResult of cniVersion {s}"),
                "supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0",
            )
        })?,
        Some(other) => {
            return Err(CniError::new(
                codes::DECODE_FAILURE,
                "prevResult.cniVersion is not a string",
                other.to_string(),
            ))
        }
    };
    let mut out: Map<String, Value> = obj.clone();
    out.insert("cniVersion".into(), Value::from(to.as_str()));
    if from.ips_carry_version() != to.ips_carry_version() {
        if let Some(Value::Array(ips)) = out.get_mut("ips") {
            for (i, ip) in ips.iter_mut().enumerate() {
                let ip = ip.as_object_mut().ok_or_else(|| {
                    CniError::new(
                        codes::DECODE_FAILURE,
                        format!("prevResult.ips[{i}] is not an object"),
                        "",
                    )
                })?;
                if to.ips_carry_version() {
                    let family = ip_family(ip).ok_or_else(|| {
                        CniError::new(
                            codes::DECODE_FAILURE,
                            format!("prevResult.ips[{i}].address is missing or not a string"),
                            "",
                        )
                    })?;
                    ip.insert("version".into(), Value::from(family));
                } else {
                    ip.remove("version");
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// "4" or "6" from an `ips[]` entry's CIDR address.
fn ip_family(ip: &Map<String, Value>) -> Option<&'static str> {
    let addr = ip.get("address")?.as_str()?;
    Some(if addr.contains(':') { "6" } else { "4" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridge_result_031() -> Value {
        json!({
            "cniVersion": "0.3.1",
            "interfaces": [{"name": "cni0", "mac": "aa:bb:cc:dd:ee:ff"},
                           {"name": "eth0", "mac": "11:22:33:44:55:66", "sandbox": "/run/netns/x"}],
            "ips": [{"version": "4", "interface": 1, "address": "10.22.0.5/24", "gateway": "10.22.0.1"},
                    {"version": "6", "interface": 1, "address": "fd00::5/64", "gateway": "fd00::1"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {}
        })
    }

    /// A 1.0.0 runtime rejects `ips[].version`; an 0.3.1 one needs it.
    #[test]
    fn converts_up_and_down() {
        let up =
            convert_result(&bridge_result_031(), CniVersion::V0_3_1, CniVersion::V1_0_0).unwrap();
        assert_eq!(up["cniVersion"], "1.0.0");
        assert_eq!(
            up["ips"],
            json!([{"interface": 1, "address": "10.22.0.5/24", "gateway": "10.22.0.1"},
                   {"interface": 1, "address": "fd00::5/64", "gateway": "fd00::1"}])
        );
        assert_eq!(up["interfaces"], bridge_result_031()["interfaces"]);
        assert_eq!(up["routes"], bridge_result_031()["routes"]);

        let down = convert_result(&up, CniVersion::V1_0_0, CniVersion::V0_3_1).unwrap();
        assert_eq!(down, bridge_result_031());

        let same =
            convert_result(&bridge_result_031(), CniVersion::V0_3_1, CniVersion::V0_4_0).unwrap();
        assert_eq!(same["cniVersion"], "0.4.0");
        assert_eq!(same["ips"], bridge_result_031()["ips"]);
    }

    #[test]
    fn missing_version_means_the_configs() {
        let mut prev = bridge_result_031();
        prev.as_object_mut().unwrap().remove("cniVersion");
        let out = convert_result(&prev, CniVersion::V0_3_1, CniVersion::V1_1_0).unwrap();
        assert_eq!(out["cniVersion"], "1.1.0");
        assert!(out["ips"][0].get("version").is_none());
    }

    #[test]
    fn unconvertible_results_are_errors() {
        let e = convert_result(
            &json!({"cniVersion": "0.2.0", "ip4": {}}),
            CniVersion::V0_3_1,
            CniVersion::V1_0_0,
        )
        .unwrap_err();
        assert_eq!(e.code, codes::INCOMPATIBLE_VERSION);
        let e = convert_result(&json!([1]), CniVersion::V0_3_1, CniVersion::V1_0_0).unwrap_err();
        assert_eq!(e.code, codes::DECODE_FAILURE);
        let e = convert_result(
            &json!({"cniVersion": "1.0.0", "ips": [{"interface": 0}]}),
            CniVersion::V1_0_0,
            CniVersion::V0_3_1,
        )
        .unwrap_err();
        assert!(e.msg.contains("ips[0].address"), "{e}");
    }

    #[test]
    fn empty_result_names_its_version() {
        assert_eq!(
            empty_result(CniVersion::V0_4_0),
            json!({"cniVersion": "0.4.0", "dns": {}})
        );
    }
}
