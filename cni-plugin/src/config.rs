//! The plugin's network config (stdin), with the keys Linkerd's own ConfigMap uses.
//!
//! Parsed by hand rather than with serde derive so a wrong type is reported with the full key
//! (`linkerd.proxy-uid`), which is what an operator editing a ConfigMap needs. Unknown keys are
//! ignored: runtimes and Multus add their own.

use std::path::PathBuf;

use ipnet::IpNet;
use serde_json::{Map, Value};
use tracing::Level;

use crate::cni::{codes, CniError, CniVersion};
use crate::iptables::IptablesMode;
use crate::plan::RuleSettings;
use crate::ports::PortRange;

/// The whole network config handed to the plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    pub cni_version: CniVersion,
    pub name: String,
    /// The previous plugin's result, passed through (converted) on ADD.
    pub prev_result: Option<Value>,
    /// `kubernetes.kubeconfig`: how to reach the apiserver for the pod lookup.
    pub kubeconfig: PathBuf,
    /// `log_level`: `error`, `warn`, `info` (default), `debug` or `trace`.
    pub log_level: Level,
    /// `log_file`: also append logs to this file (stderr always gets them).
    pub log_file: Option<PathBuf>,
    pub linkerd: LinkerdConfig,
}

/// The `linkerd` block: the rules for every pod (which annotations may override), and how to write
/// them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkerdConfig {
    /// The rules of a pod without overriding annotations (`RuleSettings::default()`: Linkerd's).
    pub rules: RuleSettings,
    /// Log the plan, change nothing.
    pub simulate: bool,
    pub use_wait_flag: bool,
    pub iptables_mode: IptablesMode,
    pub ipv6: bool,
    /// `linkerd.aux-chain` ([`vocab::CNI_CONFIG_AUX_CHAIN_KEY`]), set by the installer in Multus'
    /// auxiliary chain: the plugin runs for every pod of the node, so the product's own absence (its
    /// kubeconfig gone, its credential refused) passes a pod through instead of failing its ADD.
    pub aux_chain: bool,
    /// `linkerd.enabled-namespaces-file` ([`vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY`]), set by the
    /// installer in the auxiliary chain: its node-local view of the enabled namespaces. With
    /// `aux_chain`, a pod of a namespace outside it is passed through without asking the apiserver
    /// ([`crate::view`]).
    pub namespace_view: Option<PathBuf>,
}

/// A config problem, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the network config is not valid JSON: {0}")]
    NotJson(String),
    #[error("the network config is not a JSON object")]
    NotAnObject,
    #[error("config key `{key}`: {problem}")]
    BadKey { key: String, problem: String },
    #[error("cniVersion `{0}` is not supported (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)")]
    UnsupportedVersion(String),
}

impl ConfigError {
    pub fn to_cni(&self) -> CniError {
        let code = match self {
            ConfigError::NotJson(_) => codes::DECODE_FAILURE,
            ConfigError::UnsupportedVersion(_) => codes::INCOMPATIBLE_VERSION,
            _ => codes::INVALID_CONFIG,
        };
        let details = match self {
            ConfigError::BadKey { key, .. } => key.clone(),
            _ => String::new(),
        };
        CniError::new(code, self.to_string(), details)
    }
}

fn bad(key: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::BadKey {
        key: key.to_string(),
        problem: problem.into(),
    }
}

/// A short description of a JSON value for error messages.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(60).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

impl PluginConfig {
    /// Parses the bytes a runtime wrote on stdin.
    pub fn parse(stdin: &[u8]) -> Result<Self, ConfigError> {
        let value: Value =
            serde_json::from_slice(stdin).map_err(|e| ConfigError::NotJson(e.to_string()))?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let obj = value.as_object().ok_or(ConfigError::NotAnObject)?;
        let version = string(obj, "cniVersion", "cniVersion")?
            .ok_or_else(|| bad("cniVersion", "is required"))?;
        let cni_version = CniVersion::parse(&version)
            .ok_or_else(|| ConfigError::UnsupportedVersion(version.clone()))?;
        let name = string(obj, "name", "name")?.unwrap_or_default();
        let prev_result = match obj.get("prevResult") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(v) => {
                return Err(bad(
                    "prevResult",
                    format!("expected an object, got {}", shown(v)),
                ))
            }
        };
        let kubeconfig = match object(obj, "kubernetes", "kubernetes")? {
            Some(k) => string(k, "kubeconfig", "kubernetes.kubeconfig")?,
            None => None,
        }
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(vocab::DEFAULT_CNI_KUBECONFIG));
        let log_level = match string(obj, "log_level", "log_level")?.as_deref() {
            None | Some("") | Some("info") => Level::INFO,
            Some("error") => Level::ERROR,
            Some("warn") | Some("warning") => Level::WARN,
            Some("debug") => Level::DEBUG,
            Some("trace") => Level::TRACE,
            Some(other) => {
                return Err(bad(
                    "log_level",
                    format!("`{other}` is not one of error, warn, info, debug, trace"),
                ))
            }
        };
        let log_file = string(obj, "log_file", "log_file")?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        let linkerd = match object(obj, "linkerd", "linkerd")? {
            Some(l) => LinkerdConfig::from_object(l)?,
            None => LinkerdConfig::default(),
        };
        Ok(Self {
            cni_version,
            name,
            prev_result,
            kubeconfig,
            log_level,
            log_file,
            linkerd,
        })
    }
}

impl LinkerdConfig {
    fn from_object(l: &Map<String, Value>) -> Result<Self, ConfigError> {
        let d = Self::default();
        let key = |k: &str| format!("linkerd.{k}");
        let port = |k: &str, default: u16| -> Result<u16, ConfigError> {
            match integer(l, k, &key(k))? {
                None => Ok(default),
                Some(n) => u16::try_from(n)
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad(&key(k), format!("{n} is not a port (1-65535)"))),
            }
        };
        let id = |k: &str, default: Option<u32>| -> Result<Option<u32>, ConfigError> {
            match integer(l, k, &key(k))? {
                None => Ok(default),
                Some(n) if n < 0 => Ok(None),
                Some(n) => u32::try_from(n)
                    .map(Some)
                    .map_err(|_| bad(&key(k), format!("{n} is too large for an id"))),
            }
        };
        let ranges = |k: &str| -> Result<Vec<PortRange>, ConfigError> {
            list(l, k, &key(k))?
                .iter()
                .map(|v| match v {
                    Value::String(s) => PortRange::parse(s).map_err(|e| bad(&key(k), e)),
                    Value::Number(n) => n
                        .as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|p| *p != 0)
                        .map(PortRange::single)
                        .ok_or_else(|| bad(&key(k), format!("{n} is not a port"))),
                    other => Err(bad(
                        &key(k),
                        format!(
                            "expected port strings like \"80\" or \"9000-9100\", got {}",
                            shown(other)
                        ),
                    )),
                })
                .collect()
        };
        let ports_to_redirect = list(l, "ports-to-redirect", &key("ports-to-redirect"))?
            .iter()
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u16::try_from(n).ok())
                    .filter(|p| *p != 0)
                    .ok_or_else(|| {
                        bad(
                            &key("ports-to-redirect"),
                            format!("expected port numbers, got {}", shown(v)),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        let subnets_to_ignore = list(l, "subnets-to-ignore", &key("subnets-to-ignore"))?
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| s.trim().parse::<IpNet>().ok())
                    .ok_or_else(|| {
                        bad(
                            &key("subnets-to-ignore"),
                            format!(
                                "expected CIDR strings like \"10.0.0.0/8\", got {}",
                                shown(v)
                            ),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        let iptables_mode = IptablesMode::from_config(
            string(l, "iptables-mode", &key("iptables-mode"))?.as_deref(),
        )
        .map_err(|why| bad(&key("iptables-mode"), why))?;
        let r = &d.rules;
        Ok(Self {
            rules: RuleSettings {
                incoming_proxy_port: port("incoming-proxy-port", r.incoming_proxy_port)?,
                outgoing_proxy_port: port("outgoing-proxy-port", r.outgoing_proxy_port)?,
                proxy_uid: id("proxy-uid", r.proxy_uid)?,
                proxy_gid: id("proxy-gid", r.proxy_gid)?,
                ports_to_redirect,
                inbound_ports_to_ignore: ranges("inbound-ports-to-ignore")?,
                outbound_ports_to_ignore: ranges("outbound-ports-to-ignore")?,
                subnets_to_ignore,
            },
            simulate: boolean(l, "simulate", &key("simulate"))?.unwrap_or(d.simulate),
            use_wait_flag: boolean(l, "use-wait-flag", &key("use-wait-flag"))?
                .unwrap_or(d.use_wait_flag),
            iptables_mode,
            ipv6: boolean(l, "ipv6", &key("ipv6"))?.unwrap_or(d.ipv6),
            aux_chain: boolean(
                l,
                vocab::CNI_CONFIG_AUX_CHAIN_KEY,
                &key(vocab::CNI_CONFIG_AUX_CHAIN_KEY),
            )?
            .unwrap_or(d.aux_chain),
            namespace_view: string(
                l,
                vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY,
                &key(vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY),
            )?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        })
    }
}

// === typed lookups; `null` counts as absent ===

fn present<'a>(obj: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    obj.get(k).filter(|v| !v.is_null())
}

fn string(obj: &Map<String, Value>, k: &str, full: &str) -> Result<Option<String>, ConfigError> {
    match present(obj, k) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(bad(full, format!("expected a string, got {}", shown(v)))),
    }
}

fn object<'a>(
    obj: &'a Map<String, Value>,
    k: &str,
    full: &str,
) -> Result<Option<&'a Map<String, Value>>, ConfigError> {
    match present(obj, k) {
        None => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(v) => Err(bad(full, format!("expected an object, got {}", shown(v)))),
    }
}

fn integer(obj: &Map<String, Value>, k: &str, full: &str) -> Result<Option<i64>, ConfigError> {
    match present(obj, k) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad(full, format!("expected an integer, got {}", shown(v)))),
    }
}

fn boolean(obj: &Map<String, Value>, k: &str, full: &str) -> Result<Option<bool>, ConfigError> {
    match present(obj, k) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(bad(
            full,
            format!("expected true or false, got {}", shown(v)),
        )),
    }
}

fn list<'a>(obj: &'a Map<String, Value>, k: &str, full: &str) -> Result<&'a [Value], ConfigError> {
    match present(obj, k) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => Err(bad(full, format!("expected a list, got {}", shown(v)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The config Linkerd's own chart renders, keys and value types as it writes them.
    #[test]
    fn parses_linkerds_config() {
        let cfg = PluginConfig::from_value(&json!({
            "cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni",
            "log_level": "debug", "policy": {"type": "k8s"},
            "kubernetes": {"kubeconfig": "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"},
            "linkerd": {
                "incoming-proxy-port": 4143, "outgoing-proxy-port": 4140, "proxy-uid": 2102,
                "proxy-gid": -1, "ports-to-redirect": [8080],
                "inbound-ports-to-ignore": ["4191", "4190", "9000-9100"],
                "outbound-ports-to-ignore": ["443", 6443], "subnets-to-ignore": ["10.0.0.0/8", "fd00::/8"],
                "simulate": false, "use-wait-flag": true, "iptables-mode": "nft", "ipv6": true,
                "aux-chain": true, "enabled-namespaces-file": "/etc/cni/net.d/v",
                "some-future-key": {"x": 1}
            }
        }))
        .unwrap();
        assert_eq!(cfg.cni_version, CniVersion::V0_3_1);
        assert_eq!(cfg.log_level, Level::DEBUG);
        assert_eq!(cfg.kubeconfig, PathBuf::from(vocab::DEFAULT_CNI_KUBECONFIG));
        let l = &cfg.linkerd.rules;
        assert_eq!((l.incoming_proxy_port, l.outgoing_proxy_port), (4143, 4140));
        assert_eq!((l.proxy_uid, l.proxy_gid), (Some(2102), None));
        assert_eq!(l.ports_to_redirect, vec![8080]);
        assert_eq!(
            l.inbound_ports_to_ignore[2],
            PortRange {
                first: 9000,
                last: 9100
            }
        );
        assert_eq!(
            l.outbound_ports_to_ignore,
            vec![PortRange::single(443), PortRange::single(6443)]
        );
        assert_eq!(l.subnets_to_ignore.len(), 2);
        let w = &cfg.linkerd;
        assert!(w.use_wait_flag && w.ipv6 && !w.simulate && w.aux_chain);
        assert_eq!(w.iptables_mode, IptablesMode::Nft);
        assert_eq!(w.namespace_view, Some(PathBuf::from("/etc/cni/net.d/v")));
    }

    /// Every iptables-mode value, `auto` (decided per node when the backend is selected) included.
    #[test]
    fn iptables_modes_parse() {
        for (text, want) in [
            ("legacy", IptablesMode::Legacy),
            ("nft", IptablesMode::Nft),
            ("plain", IptablesMode::Plain),
            ("nftables", IptablesMode::Nftables),
            ("auto", IptablesMode::Auto),
        ] {
            let conf =
                format!(r#"{{"cniVersion":"1.0.0","linkerd":{{"iptables-mode":"{text}"}}}}"#);
            let cfg = PluginConfig::parse(conf.as_bytes()).unwrap();
            assert_eq!(cfg.linkerd.iptables_mode, want, "{text}");
            assert_eq!(want.as_str(), text);
        }
    }

    #[test]
    fn minimal_config_gets_linkerds_defaults() {
        let cfg = PluginConfig::parse(br#"{"cniVersion":"1.0.0"}"#).unwrap();
        assert_eq!(cfg.linkerd, LinkerdConfig::default());
        assert_eq!(cfg.linkerd.rules.proxy_uid, Some(2102));
        assert_eq!(cfg.linkerd.iptables_mode, IptablesMode::Auto);
        assert!(
            !cfg.linkerd.aux_chain,
            "a NAD's config: the pod asked to be meshed"
        );
        assert_eq!(cfg.prev_result, None);
    }

    /// Each broken value is reported with the full key an operator must fix, as code 7.
    #[test]
    fn wrong_types_name_the_key() {
        let cases = [
            (
                json!({"linkerd": {"proxy-uid": "2102"}}),
                "linkerd.proxy-uid",
            ),
            (
                json!({"linkerd": {"incoming-proxy-port": 70000}}),
                "linkerd.incoming-proxy-port",
            ),
            (
                json!({"linkerd": {"outgoing-proxy-port": 0}}),
                "linkerd.outgoing-proxy-port",
            ),
            (
                json!({"linkerd": {"inbound-ports-to-ignore": "4190"}}),
                "linkerd.inbound-ports-to-ignore",
            ),
            (
                json!({"linkerd": {"outbound-ports-to-ignore": ["9-1"]}}),
                "linkerd.outbound-ports-to-ignore",
            ),
            (
                json!({"linkerd": {"outbound-ports-to-ignore": [true]}}),
                "linkerd.outbound-ports-to-ignore",
            ),
            (
                json!({"linkerd": {"ports-to-redirect": ["8080"]}}),
                "linkerd.ports-to-redirect",
            ),
            (
                json!({"linkerd": {"subnets-to-ignore": ["10.0.0.0/33"]}}),
                "linkerd.subnets-to-ignore",
            ),
            (json!({"linkerd": {"simulate": "yes"}}), "linkerd.simulate"),
            (
                json!({"linkerd": {"use-wait-flag": 1}}),
                "linkerd.use-wait-flag",
            ),
            (
                json!({"linkerd": {"iptables-mode": "bpf"}}),
                "linkerd.iptables-mode",
            ),
            (json!({"linkerd": {"ipv6": "true"}}), "linkerd.ipv6"),
            (
                json!({"linkerd": {"aux-chain": "yes"}}),
                "linkerd.aux-chain",
            ),
            (json!({"linkerd": {"proxy-gid": 1.5}}), "linkerd.proxy-gid"),
            (json!({"linkerd": ["x"]}), "linkerd"),
            (
                json!({"kubernetes": {"kubeconfig": 3}}),
                "kubernetes.kubeconfig",
            ),
            (json!({"kubernetes": "x"}), "kubernetes"),
            (json!({"log_level": "loud"}), "log_level"),
            (json!({"prevResult": "x"}), "prevResult"),
            (json!({"name": 5}), "name"),
        ];
        for (mut cfg, key) in cases {
            cfg.as_object_mut()
                .unwrap()
                .insert("cniVersion".into(), json!("0.4.0"));
            let err = PluginConfig::from_value(&cfg).unwrap_err();
            assert!(
                matches!(&err, ConfigError::BadKey { key: k, .. } if k == key),
                "{cfg}: {err}"
            );
            let cni = err.to_cni();
            assert_eq!(
                (cni.code, cni.details.as_str()),
                (codes::INVALID_CONFIG, key)
            );
            assert!(cni.msg.contains(key), "{}", cni.msg);
        }
    }

    #[test]
    fn version_and_json_problems_have_their_own_codes() {
        let e = PluginConfig::parse(b"{not json").unwrap_err();
        assert_eq!(e.to_cni().code, codes::DECODE_FAILURE);
        let e = PluginConfig::parse(br#"{"cniVersion":"0.2.0"}"#).unwrap_err();
        assert_eq!(e.to_cni().code, codes::INCOMPATIBLE_VERSION);
        let e = PluginConfig::parse(br#"{"name":"x"}"#).unwrap_err();
        assert!(e.to_string().contains("cniVersion"), "{e}");
        let e = PluginConfig::parse(b"[]").unwrap_err();
        assert_eq!(e, ConfigError::NotAnObject);
    }
}
