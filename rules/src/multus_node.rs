//! PURE: the Multus a node runs, read from its CNI config, and what that Multus lets pods reference:
//! with `namespaceIsolation` a pod may use the NADs of its own namespace and of `globalNamespaces`
//! only. The installer reads each node's config with [`read_config`] and publishes it (a NodeMultus
//! object); the operator, the webhook and `check` decide with [`placement`] where the shared NAD may
//! live.
//!
//! Facts from Multus' sources: the thin plugin's config has `"type": "multus"`, the thick plugin's
//! shim `"type": "multus-shim"`. Multus reads `namespaceIsolation` (a bool), `globalNamespaces` (a
//! comma-separated string, each entry trimmed; unset or empty means `default` alone),
//! `auxiliaryCNIChainName`, `binDir` and `clusterNetwork` (strings) with Go's `encoding/json`, which matches keys
//! case-insensitively and fails the whole config on a value of the wrong type. The thick daemon
//! writes the shim's config from its own `daemon-config.json` (ConfigMap `multus-daemon-config`,
//! mounted only into the daemon) with both isolation keys copied; at each request the daemon lays
//! its daemon config over the shim's, so that file, not the node's, has the last word.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::decision::DecisionConfig;
use crate::namespaces::NadPlacement;

/// The namespace Multus allows across namespaces when `globalNamespaces` is unset or empty.
pub const DEFAULT_GLOBAL_NAMESPACE: &str = "default";
/// The `type` of the thin plugin's config.
pub const THIN_TYPE: &str = "multus";
/// The `type` of the thick plugin's shim config.
pub const THICK_TYPE: &str = "multus-shim";
/// Where the thick plugin's daemon config lives, which an installer cannot read from the node.
pub const DAEMON_CONFIG_NOTE: &str = "thick Multus lays its daemon config (daemon-config.json, \
     ConfigMap multus-daemon-config, mounted only into the Multus daemon) over this file at each \
     request; it is not on the node. The daemon writes this file from it (multusConfigFile auto), so \
     the isolation read here is the daemon's unless its config file is hand-written";

/// Which Multus plugin a config is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Thin,
    Thick,
}

impl Flavour {
    /// The flavour whose config has this `type`.
    pub fn of_type(plugin_type: &str) -> Option<Self> {
        match plugin_type {
            THIN_TYPE => Some(Self::Thin),
            THICK_TYPE => Some(Self::Thick),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Thin => "thin",
            Self::Thick => "thick",
        }
    }
}

/// What matters of a Multus config, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MultusConfig {
    pub flavour: Option<Flavour>,
    pub namespace_isolation: bool,
    /// `globalNamespaces` as written; `None` when absent.
    pub global_namespaces: Option<String>,
    pub auxiliary_cni_chain_name: Option<String>,
    pub bin_dir: Option<String>,
    /// `clusterNetwork` as written: a config file's path, or a network's name. Multus reads the
    /// auxiliary chain from the path's directory.
    pub cluster_network: Option<String>,
}

impl MultusConfig {
    /// What this config does with cross-namespace references.
    pub fn isolation(&self) -> Isolation {
        isolation(self.namespace_isolation, self.global_namespaces.as_deref())
    }
}

/// What an installer found in its node's CNI config directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// The runtime's network config (`primary`, the first in byte order) is not Multus'; `None`: there
    /// is none yet.
    NoMultus { primary: Option<String> },
    /// The runtime runs Multus, configured by `file`.
    Multus { file: String, config: MultusConfig },
    /// Nothing could be read; `file` when it was the primary config that could not.
    Unreadable {
        file: Option<String>,
        reason: String,
    },
}

impl Observation {
    /// What the primary config `file` holds, from its bytes (or why they could not be read).
    pub fn of_primary(file: String, bytes: Result<&[u8], String>) -> Self {
        let unreadable = |reason: String| Self::Unreadable {
            file: Some(file.clone()),
            reason,
        };
        match bytes.map(read_config) {
            Err(reason) => unreadable(reason),
            Ok(Err(e)) => unreadable(format!("{file}: {e}")),
            Ok(Ok(None)) => Self::NoMultus {
                primary: Some(file),
            },
            Ok(Ok(Some(config))) => Self::Multus { file, config },
        }
    }
}

/// Why a node's Multus config cannot be read. Multus itself fails on all but the first two too.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultusConfigError {
    #[error("it is not valid JSON ({0})")]
    Json(String),
    #[error("its top level is not a JSON object")]
    NotObject,
    #[error("its \"{key}\" is not a {want}, so Multus cannot load it either")]
    WrongType {
        key: &'static str,
        want: &'static str,
    },
}

/// Reads the primary network config's bytes: `Ok(None)` when it is not Multus' (no entry of type
/// multus or multus-shim, at the top or in a `plugins` list).
pub fn read_config(bytes: &[u8]) -> Result<Option<MultusConfig>, MultusConfigError> {
    let root = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(root)) => root,
        Ok(_) => return Err(MultusConfigError::NotObject),
        Err(e) => return Err(MultusConfigError::Json(e.to_string())),
    };
    let plugins = root.get("plugins").and_then(Value::as_array);
    let found = std::iter::once(&root)
        .chain(plugins.into_iter().flatten().filter_map(Value::as_object))
        .find_map(|p| {
            let flavour = p
                .get("type")
                .and_then(Value::as_str)
                .and_then(Flavour::of_type)?;
            Some((p, flavour))
        });
    let Some((conf, flavour)) = found else {
        return Ok(None);
    };
    Ok(Some(MultusConfig {
        flavour: Some(flavour),
        namespace_isolation: bool_field(conf, "namespaceIsolation")?.unwrap_or(false),
        global_namespaces: string_field(conf, "globalNamespaces")?,
        auxiliary_cni_chain_name: string_field(conf, "auxiliaryCNIChainName")?,
        bin_dir: string_field(conf, "binDir")?,
        cluster_network: string_field(conf, "clusterNetwork")?,
    }))
}

/// A key as Go's `encoding/json` finds it: the exact name, else any case-insensitive match. `null`
/// leaves the default, as in Go.
fn field<'a>(conf: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    conf.get(key)
        .or_else(|| {
            conf.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

fn bool_field(
    conf: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<bool>, MultusConfigError> {
    field(conf, key)
        .map(|v| {
            v.as_bool().ok_or(MultusConfigError::WrongType {
                key,
                want: "boolean",
            })
        })
        .transpose()
}

fn string_field(
    conf: &Map<String, Value>,
    key: &'static str,
) -> Result<Option<String>, MultusConfigError> {
    field(conf, key)
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or(MultusConfigError::WrongType {
                    key,
                    want: "string",
                })
        })
        .transpose()
}

/// The namespaces `globalNamespaces` allows, as Multus splits it: unset or empty is `default` alone.
pub fn global_namespaces(raw: Option<&str>) -> Vec<String> {
    match raw {
        Some(raw) if !raw.is_empty() => raw
            .split(',')
            .map(str::trim)
            .filter(|ns| !ns.is_empty())
            .map(str::to_string)
            .collect(),
        _ => vec![DEFAULT_GLOBAL_NAMESPACE.to_string()],
    }
}

/// What a node's Multus does with a pod's reference to a NAD of another namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Any namespace (isolation off, or no Multus at all).
    Off,
    /// Only the pod's own namespace and these.
    On { global_namespaces: Vec<String> },
    /// The node's Multus could not be read: nothing is known.
    Unknown { reason: String },
}

/// The isolation of a config with these two keys.
pub fn isolation(namespace_isolation: bool, raw_global_namespaces: Option<&str>) -> Isolation {
    if namespace_isolation {
        Isolation::On {
            global_namespaces: global_namespaces(raw_global_namespaces),
        }
    } else {
        Isolation::Off
    }
}

impl Isolation {
    /// Whether a pod of `pod_namespace` is refused a NAD of `nad_namespace` (unknown: not known to be).
    pub fn refuses(&self, pod_namespace: &str, nad_namespace: &str) -> bool {
        match self {
            Self::On { global_namespaces } => {
                pod_namespace != nad_namespace
                    && !global_namespaces.iter().any(|ns| ns == nad_namespace)
            }
            Self::Off | Self::Unknown { .. } => false,
        }
    }

    /// Whether the pods of every other namespace may use a NAD of `nad_namespace`.
    pub fn shares_from(&self, nad_namespace: &str) -> bool {
        match self {
            Self::On { global_namespaces } => {
                global_namespaces.iter().any(|ns| ns == nad_namespace)
            }
            Self::Off | Self::Unknown { .. } => true,
        }
    }
}

/// One node's Multus, as its installer published it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIsolation {
    pub node: String,
    pub isolation: Isolation,
}

/// Where pods are attached from, decided once for the controller, the webhook and `check`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// `--nad-namespace` as configured.
    pub configured: Option<String>,
    /// The namespace of the shared NAD pods are attached to; `None`: each namespace's own NAD.
    pub shared: Option<String>,
    /// Nodes whose Multus refuses the configured namespace to pods of other namespaces, sorted. Any
    /// such node makes `shared` `None`: a typo in a flag must not stop pod creation.
    pub refused_by: Vec<String>,
    /// Namespaces every isolating node allows across namespaces (the fix), sorted; `None` when no
    /// node isolates.
    pub allowed_everywhere: Option<Vec<String>>,
    /// Nodes whose Multus could not be read, with why, sorted by node.
    pub unknown: Vec<(String, String)>,
}

/// Decides where pods are attached from, given `--nad-namespace` and every node's published Multus.
/// Nodes not published (no installer of ours there) are not known to refuse: today's behaviour.
pub fn placement(configured: Option<&str>, nodes: &[NodeIsolation]) -> Placement {
    let mut refused_by = Vec::new();
    let mut unknown = Vec::new();
    let mut allowed: Option<Vec<String>> = None;
    for n in nodes {
        match &n.isolation {
            Isolation::Unknown { reason } => unknown.push((n.node.clone(), reason.clone())),
            Isolation::Off => {}
            Isolation::On { global_namespaces } => {
                allowed = Some(match allowed {
                    None => global_namespaces.clone(),
                    Some(so_far) => so_far
                        .into_iter()
                        .filter(|ns| global_namespaces.contains(ns))
                        .collect(),
                });
            }
        }
        if configured.is_some_and(|ns| !n.isolation.shares_from(ns)) {
            refused_by.push(n.node.clone());
        }
    }
    refused_by.sort();
    refused_by.dedup();
    unknown.sort();
    let allowed_everywhere = allowed.map(|mut a| {
        a.sort();
        a.dedup();
        a
    });
    Placement {
        configured: configured.map(str::to_string),
        shared: configured
            .filter(|_| refused_by.is_empty())
            .map(str::to_string),
        refused_by,
        allowed_everywhere,
        unknown,
    }
}

impl Placement {
    /// The configured shared namespace is refused by some node's Multus.
    pub fn refused(&self) -> bool {
        !self.refused_by.is_empty()
    }

    /// What is wrong, for the Event, the log and `check`; `None` when nothing is refused.
    pub fn refusal(&self) -> Option<String> {
        let configured = self.configured.as_deref().filter(|_| self.refused())?;
        Some(format!(
            "--nad-namespace {configured} is refused by Multus on node(s) {nodes}: with \
             namespaceIsolation on, a pod may use a NAD of another namespace only from \
             globalNamespaces, so pods outside {configured} could not start with the shared NAD. \
             The operator keeps one NAD per namespace and the webhook attaches each pod to its own \
             namespace's NAD until this is fixed",
            nodes = self.refused_by.join(", "),
        ))
    }

    /// `cfg` attaching pods where this placement says (borrowed when it already does): the one
    /// place the webhook and the repairer take the decided namespace instead of the flag. In
    /// aux-chain mode no pod names a NAD, so `cfg` is used as it is.
    pub fn decision<'a>(&self, cfg: &'a DecisionConfig) -> Cow<'a, DecisionConfig> {
        if !cfg.nad.attach.uses_nads() || cfg.nad.shared() == self.shared.as_deref() {
            Cow::Borrowed(cfg)
        } else {
            let placement = match &self.shared {
                Some(namespace) => NadPlacement::Shared(namespace.clone()),
                None => NadPlacement::PerNamespace,
            };
            let mut placed = cfg.clone();
            placed.nad.placement = placement;
            Cow::Owned(placed)
        }
    }

    /// How to fix a refusal.
    pub fn fix(&self) -> String {
        let configured = self.configured.as_deref().unwrap_or_default();
        let choose = match self.allowed_everywhere.as_deref() {
            Some([]) => "no namespace is in every isolating node's globalNamespaces".to_string(),
            Some(allowed) => format!("one every isolating node allows: {}", allowed.join(", ")),
            None => format!("`{DEFAULT_GLOBAL_NAMESPACE}`"),
        };
        format!(
            "set --nad-namespace (helm: operator.nadNamespace) to a namespace in those nodes' \
             globalNamespaces ({choose}; `{DEFAULT_GLOBAL_NAMESPACE}` when globalNamespaces is \
             unset), or add {configured} to their Multus globalNamespaces, or leave \
             --nad-namespace empty for one NAD per namespace"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Option<MultusConfig>, MultusConfigError> {
        read_config(text.as_bytes())
    }

    /// Thin and thick configs, with and without isolation: the keys Multus reads, as written.
    #[test]
    fn reads_thin_and_thick_configs() {
        let thin = read(
            r#"{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus",
                "namespaceIsolation":true,"globalNamespaces":"default,openshift-multus",
                "auxiliaryCNIChainName":"vendor-cni-chain","binDir":"/var/lib/cni/bin",
                "delegates":[{"type":"flannel"}]}"#,
        )
        .expect("reads")
        .expect("is Multus");
        assert_eq!(
            thin,
            MultusConfig {
                flavour: Some(Flavour::Thin),
                namespace_isolation: true,
                global_namespaces: Some("default,openshift-multus".into()),
                auxiliary_cni_chain_name: Some("vendor-cni-chain".into()),
                bin_dir: Some("/var/lib/cni/bin".into()),
                cluster_network: None,
            }
        );
        assert_eq!(
            thin.isolation(),
            Isolation::On {
                global_namespaces: vec!["default".into(), "openshift-multus".into()]
            }
        );

        // What the thick daemon generates from a daemon config without isolation.
        let thick = read(
            r#"{"cniVersion":"0.3.1","logLevel":"verbose","logToStderr":true,
                "name":"multus-cni-network","clusterNetwork":"/host/etc/cni/net.d/10-kindnet.conflist",
                "type":"multus-shim"}"#,
        )
        .expect("reads")
        .expect("is Multus");
        assert_eq!(thick.flavour, Some(Flavour::Thick));
        assert!(!thick.namespace_isolation);
        assert_eq!(thick.isolation(), Isolation::Off);
        assert_eq!(thick.bin_dir, None);
        assert_eq!(
            thick.cluster_network.as_deref(),
            Some("/host/etc/cni/net.d/10-kindnet.conflist")
        );
    }

    /// Configs that are not Multus' are none; a list that holds Multus (converted earlier) is.
    #[test]
    fn recognises_multus_only() {
        for other in [
            r#"{"type":"bridge"}"#,
            r#"{"plugins":[{"type":"flannel"},{"type":"portmap"}]}"#,
            r#"{"type":"multus-stand-in","namespaceIsolation":true}"#,
            r#"{"name":"no type"}"#,
        ] {
            assert_eq!(read(other), Ok(None), "{other}");
        }
        let listed = read(
            r#"{"plugins":[{"type":"multus","namespaceIsolation":true},{"type":"linkerd-cni"}]}"#,
        )
        .expect("reads")
        .expect("is Multus");
        assert!(listed.namespace_isolation);
    }

    /// Bad files say why instead of reading as "no isolation".
    #[test]
    fn malformed_configs_are_clear_errors() {
        let cases: [(&str, MultusConfigError); 6] = [
            (
                "{\"type\": \"multus\",",
                MultusConfigError::Json(String::new()),
            ),
            ("", MultusConfigError::Json(String::new())),
            ("[]", MultusConfigError::NotObject),
            (
                r#"{"type":"multus","namespaceIsolation":"true"}"#,
                MultusConfigError::WrongType {
                    key: "namespaceIsolation",
                    want: "boolean",
                },
            ),
            (
                r#"{"type":"multus-shim","globalNamespaces":["a","b"]}"#,
                MultusConfigError::WrongType {
                    key: "globalNamespaces",
                    want: "string",
                },
            ),
            (
                r#"{"type":"multus-shim","clusterNetwork":{"name":"ovn"}}"#,
                MultusConfigError::WrongType {
                    key: "clusterNetwork",
                    want: "string",
                },
            ),
        ];
        for (text, want) in cases {
            let got = read(text).expect_err(text);
            match (&got, &want) {
                (MultusConfigError::Json(msg), MultusConfigError::Json(_)) => {
                    assert!(!msg.is_empty(), "{text}");
                    assert!(got.to_string().contains("not valid JSON"), "{got}");
                }
                _ => assert_eq!(got, want, "{text}"),
            }
        }
    }

    /// Go's encoding/json: keys match case-insensitively (exact first); null leaves the default.
    #[test]
    fn keys_as_go_reads_them() {
        let c = read(r#"{"type":"multus","NamespaceIsolation":true,"globalnamespaces":"a"}"#)
            .expect("reads")
            .expect("is Multus");
        assert!(c.namespace_isolation);
        assert_eq!(c.global_namespaces.as_deref(), Some("a"));
        let c = read(r#"{"type":"multus","clusternetwork":"ovn-kubernetes"}"#)
            .expect("reads")
            .expect("is Multus");
        assert_eq!(c.cluster_network.as_deref(), Some("ovn-kubernetes"));
        let c = read(r#"{"type":"multus","namespaceIsolation":null,"globalNamespaces":null}"#)
            .expect("reads")
            .expect("is Multus");
        assert_eq!(c.isolation(), Isolation::Off);
        assert_eq!(c.global_namespaces, None);
    }

    /// The installer's observation of its primary file: Multus, not Multus, unreadable.
    #[test]
    fn observations_of_the_primary_file() {
        let multus = br#"{"type":"multus","namespaceIsolation":true}"#;
        let Observation::Multus { file, config } =
            Observation::of_primary("00-multus.conf".into(), Ok(multus))
        else {
            panic!("not Multus")
        };
        assert_eq!(file, "00-multus.conf");
        assert!(config.namespace_isolation);
        assert_eq!(
            Observation::of_primary("10-flannel.conflist".into(), Ok(br#"{"plugins":[]}"#)),
            Observation::NoMultus {
                primary: Some("10-flannel.conflist".into())
            }
        );
        let Observation::Unreadable { file, reason } =
            Observation::of_primary("00-multus.conf".into(), Ok(b"{oops"))
        else {
            panic!("not unreadable")
        };
        assert_eq!(file.as_deref(), Some("00-multus.conf"));
        assert!(
            reason.starts_with("00-multus.conf: it is not valid JSON"),
            "{reason}"
        );
        assert_eq!(
            Observation::of_primary("x.conf".into(), Err("permission denied".into())),
            Observation::Unreadable {
                file: Some("x.conf".into()),
                reason: "permission denied".into()
            }
        );
    }

    /// Multus' default: unset or empty is `default` alone; a list replaces it, entries trimmed.
    #[test]
    fn global_namespaces_as_multus_splits_them() {
        let cases: [(Option<&str>, &[&str]); 5] = [
            (None, &["default"]),
            (Some(""), &["default"]),
            (Some("shared"), &["shared"]),
            (
                Some("default, openshift-multus ,x"),
                &["default", "openshift-multus", "x"],
            ),
            (Some("a,,b"), &["a", "b"]),
        ];
        for (raw, want) in cases {
            assert_eq!(global_namespaces(raw), want, "{raw:?}");
        }
    }

    /// Isolation with and without globalNamespaces: own namespace always, global ones across.
    #[test]
    fn what_isolation_refuses() {
        let unset = isolation(true, None);
        let listed = isolation(true, Some("default,shared"));
        let off = isolation(false, Some("shared"));
        let unknown = Isolation::Unknown { reason: "x".into() };
        let cases = [
            (&unset, "app", "default", false),
            (&unset, "app", "nad-home", true),
            (&unset, "nad-home", "nad-home", false),
            (&listed, "app", "shared", false),
            (&listed, "app", "default", false),
            (&listed, "app", "nad-home", true),
            (&off, "app", "nad-home", false),
            (&unknown, "app", "nad-home", false),
        ];
        for (iso, pod, nad, want) in cases {
            assert_eq!(iso.refuses(pod, nad), want, "{iso:?} {pod} -> {nad}");
        }
    }

    fn node(name: &str, isolation: Isolation) -> NodeIsolation {
        NodeIsolation {
            node: name.into(),
            isolation,
        }
    }

    /// The shared NAD is used only where no published node refuses it; unpublished or unreadable
    /// nodes do not stop it (they are reported).
    #[test]
    fn placement_table() {
        let isolating = |g: Option<&str>| isolation(true, g);
        // (--nad-namespace, the nodes, the shared namespace used, the nodes refusing it)
        type Case<'a> = (
            Option<&'a str>,
            Vec<NodeIsolation>,
            Option<&'a str>,
            Vec<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (None, vec![node("a", isolating(None))], None, vec![]),
            (Some("nad-home"), vec![], Some("nad-home"), vec![]),
            (
                Some("nad-home"),
                vec![node("a", Isolation::Off)],
                Some("nad-home"),
                vec![],
            ),
            (
                Some("nad-home"),
                vec![node("b", isolating(None)), node("a", isolating(Some("x")))],
                None,
                vec!["a", "b"],
            ),
            (
                Some("default"),
                vec![node("a", isolating(None))],
                Some("default"),
                vec![],
            ),
            (
                Some("nad-home"),
                vec![
                    node("a", isolating(Some("default,nad-home"))),
                    node("b", Isolation::Off),
                ],
                Some("nad-home"),
                vec![],
            ),
            (
                Some("nad-home"),
                vec![
                    node("a", isolating(Some("nad-home"))),
                    node("b", isolating(None)),
                ],
                None,
                vec!["b"],
            ),
            (
                Some("nad-home"),
                vec![node(
                    "a",
                    Isolation::Unknown {
                        reason: "gone".into(),
                    },
                )],
                Some("nad-home"),
                vec![],
            ),
        ];
        for (configured, nodes, shared, refused) in cases {
            let p = placement(configured, &nodes);
            assert_eq!(p.shared.as_deref(), shared, "{configured:?} {nodes:?}");
            assert_eq!(p.refused_by, refused, "{configured:?} {nodes:?}");
            assert_eq!(p.refused(), !refused.is_empty());
            assert_eq!(p.refusal().is_some(), !refused.is_empty());
        }
    }

    /// The webhook and the repairer attach where the placement says, not where the flag does.
    #[test]
    fn decision_follows_the_placement() {
        let mut cfg = DecisionConfig::default();
        cfg.nad.placement = NadPlacement::Shared("nad-home".into());
        let refused = placement(Some("nad-home"), &[node("a", isolation(true, None))]);
        let placed = refused.decision(&cfg);
        assert!(matches!(placed, Cow::Owned(_)));
        assert_eq!(placed.nad.shared(), None);
        assert_eq!(placed.nad.reference(), "linkerd-cni");
        assert_eq!(placed.uids, cfg.uids);
        let allowed = placement(Some("nad-home"), &[node("a", Isolation::Off)]);
        let placed = allowed.decision(&cfg);
        assert!(matches!(placed, Cow::Borrowed(_)));
        assert_eq!(placed.nad.reference(), "nad-home/linkerd-cni");
    }

    /// Aux-chain mode: no NAD to share, so an isolating node refuses nothing (no Event, the gauge
    /// healthy, no fallback) and the decision's config is left as configured.
    #[test]
    fn aux_chain_mode_places_nothing() {
        use crate::attach::Attach;
        let mut cfg = DecisionConfig::default();
        cfg.nad.placement = NadPlacement::Shared("nad-home".into());
        let isolating = [node("a", isolation(true, None))];
        let nad_mode = placement(cfg.nad.shared_to_place(), &isolating);
        assert!(nad_mode.refused(), "the same nodes refuse it in NAD mode");
        cfg.nad.attach = Attach::AuxChain;
        let p = placement(cfg.nad.shared_to_place(), &isolating);
        assert!(!p.refused());
        assert_eq!(p.refusal(), None);
        assert_eq!(p.configured, None);
        assert!(matches!(p.decision(&cfg), Cow::Borrowed(_)));
        assert!(matches!(nad_mode.decision(&cfg), Cow::Borrowed(_)));
    }

    /// The message names the nodes, and the fix names what every isolating node allows.
    #[test]
    fn refusal_names_nodes_and_fix() {
        let p = placement(
            Some("nad-home"),
            &[
                node(
                    "n2",
                    isolation(true, Some("default, shared, openshift-multus")),
                ),
                node("n1", isolation(true, Some("shared,default"))),
                node(
                    "n3",
                    Isolation::Unknown {
                        reason: "cannot list".into(),
                    },
                ),
            ],
        );
        let why = p.refusal().expect("refused");
        assert!(why.contains("--nad-namespace nad-home"), "{why}");
        assert!(why.contains("node(s) n1, n2:"), "{why}");
        let fix = p.fix();
        assert!(fix.contains("allows: default, shared;"), "{fix}");
        assert!(
            fix.contains("add nad-home to their Multus globalNamespaces"),
            "{fix}"
        );
        assert_eq!(
            p.unknown,
            vec![("n3".to_string(), "cannot list".to_string())]
        );

        let disjoint = placement(
            Some("x"),
            &[
                node("a", isolation(true, Some("p"))),
                node("b", isolation(true, Some("q"))),
            ],
        );
        assert!(
            disjoint.fix().contains("no namespace is in every"),
            "{}",
            disjoint.fix()
        );
        assert_eq!(placement(Some("x"), &[]).refusal(), None);
    }
}
