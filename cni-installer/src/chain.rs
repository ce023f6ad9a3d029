//! Adding linkerd-cni to, and taking it out of, a primary CNI network config. Pure functions on the
//! file's bytes: the caller reads and writes, these only decide.
//!
//! The runtime runs the plugins of a `.conflist` in order; linkerd-cni must run last, after the primary
//! plugin has given the pod its interface and address, so it is always appended. A single-plugin
//! `.conf`/`.json` cannot hold a chain, so it is turned into a list the way libcni itself would read it
//! (`name` and `cniVersion` lifted to the top, the original object kept whole as the first plugin).

use crate::ownership;
use serde_json::{Map, Value};
use vocab::PLUGIN_TYPE;

/// How a runtime reads a config file, decided by its extension (see [`crate::primary`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    /// `*.conflist`: an object with a `plugins` array.
    List,
    /// `*.conf` or `*.json`: one plugin object.
    Single,
}

/// What to do with the primary config file.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The file already says what it should: write nothing.
    Unchanged,
    /// Write these bytes over the same file.
    Rewritten(Vec<u8>),
    /// A single-plugin file became a list: write these bytes to the `.conflist` name, then remove the
    /// old file.
    Converted(Vec<u8>),
}

/// Why a config file cannot be patched. The file is then left exactly as it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChainError {
    #[error("it is not valid JSON ({0}); fix or replace the file, it is left untouched")]
    Json(String),
    #[error("its top level is not a JSON object; it is left untouched")]
    NotObject,
    #[error("it is a .conflist without a \"plugins\" array; it is left untouched")]
    NoPlugins,
    #[error("entry #{index} of its \"plugins\" is not a JSON object; it is left untouched")]
    PluginNotObject { index: usize },
    #[error("it is a single-plugin config without a \"type\"; it is left untouched")]
    NoType,
    #[error("it is a linkerd-cni config itself, not a primary network; it is left untouched")]
    OwnConfig,
}

/// The `type` of Multus's own plugin: the thin plugin and the thick plugin's shim.
pub const MULTUS_TYPES: [&str; 2] = [
    rules::multus_node::THIN_TYPE,
    rules::multus_node::THICK_TYPE,
];

/// The Multus type `existing` runs when it is Multus's own config: a single-plugin file of that type,
/// or a list holding it (what an earlier append made of one). Appending to it would turn Multus's
/// config into a list, and Multus v4.2.x then stores its delegate lossily (the bridge DEL fails with
/// `no IP ranges specified`, leaking the pod's address). Unparseable files are none.
pub fn multus_type(existing: &[u8]) -> Option<String> {
    let root: Value = serde_json::from_slice(existing).ok()?;
    let plugins = root.get("plugins").and_then(Value::as_array);
    std::iter::once(&root)
        .chain(plugins.into_iter().flatten())
        .filter_map(|p| p.get("type").and_then(Value::as_str))
        .find(|t| MULTUS_TYPES.contains(t))
        .map(str::to_string)
}

/// Adds linkerd-cni as the last plugin of `existing`, exactly once, with the content of `entry`.
///
/// An entry that is already there and equal (as JSON, formatting aside) means no change, wherever it
/// is: another installer that also appends itself last (a second chained plugin) would otherwise
/// trade places with us forever, rewriting the file each time. An outdated entry is replaced where
/// it stands; duplicates after the first are dropped.
pub fn append(existing: &[u8], kind: ConfigKind, entry: &Value) -> Result<Outcome, ChainError> {
    let mut root = parse_object(existing)?;
    match kind {
        ConfigKind::List => {
            let plugins = plugins_mut(&mut root)?;
            let ours: Vec<usize> = (0..plugins.len())
                .filter(|&i| is_ours(&plugins[i]))
                .collect();
            match ours.as_slice() {
                [] => plugins.push(entry.clone()),
                [only] if plugins[*only] == *entry => return Ok(Outcome::Unchanged),
                [first, ..] => {
                    let first = *first;
                    plugins[first] = entry.clone();
                    let mut index = 0;
                    plugins.retain(|p| {
                        let keep = index == first || !is_ours(p);
                        index += 1;
                        keep
                    });
                }
            }
            Ok(Outcome::Rewritten(to_bytes(&Value::Object(root))))
        }
        ConfigKind::Single => {
            match root.get("type").and_then(Value::as_str) {
                None => return Err(ChainError::NoType),
                Some(t) if t == PLUGIN_TYPE => return Err(ChainError::OwnConfig),
                Some(_) => {}
            }
            let mut list = Map::new();
            for key in ["cniVersion", "name"] {
                if let Some(v) = root.get(key) {
                    list.insert(key.to_string(), v.clone());
                }
            }
            list.insert(
                "plugins".to_string(),
                Value::Array(vec![Value::Object(root), entry.clone()]),
            );
            Ok(Outcome::Converted(to_bytes(&Value::Object(list))))
        }
    }
}

/// Takes every linkerd-cni entry this installer appended (marked: [`ownership::is_our_entry`]) out of
/// a `.conflist`; another's linkerd-cni entry stays ([`foreign_entries`] counts them). Single-plugin
/// files never hold one of ours, so they are always [`Outcome::Unchanged`].
pub fn remove(existing: &[u8], kind: ConfigKind) -> Result<Outcome, ChainError> {
    let mut root = parse_object(existing)?;
    if kind == ConfigKind::Single {
        return Ok(Outcome::Unchanged);
    }
    let plugins = plugins_mut(&mut root)?;
    let before = plugins.len();
    plugins.retain(|p| !ownership::is_our_entry(p));
    if plugins.len() == before {
        return Ok(Outcome::Unchanged);
    }
    Ok(Outcome::Rewritten(to_bytes(&Value::Object(root))))
}

/// Whether `existing` (a `.conflist`) holds a linkerd-cni entry. Unparseable files hold none.
pub fn contains_ours(existing: &[u8]) -> bool {
    serde_json::from_slice::<Value>(existing)
        .ok()
        .and_then(|v| v.get("plugins").and_then(Value::as_array).cloned())
        .is_some_and(|plugins| plugins.iter().any(is_ours))
}

/// How many linkerd-cni entries of `existing` (a `.conflist`) this installer did not append: an
/// uninstall leaves them. Unparseable files hold none.
pub fn foreign_entries(existing: &[u8]) -> usize {
    serde_json::from_slice::<Value>(existing)
        .ok()
        .and_then(|v| v.get("plugins").and_then(Value::as_array).cloned())
        .map_or(0, |plugins| {
            plugins
                .iter()
                .filter(|p| is_ours(p) && !ownership::is_our_entry(p))
                .count()
        })
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ChainError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ChainError::NotObject),
        Err(e) => Err(ChainError::Json(e.to_string())),
    }
}

fn plugins_mut(root: &mut Map<String, Value>) -> Result<&mut Vec<Value>, ChainError> {
    let plugins = root
        .get_mut("plugins")
        .and_then(Value::as_array_mut)
        .ok_or(ChainError::NoPlugins)?;
    if let Some(index) = plugins.iter().position(|p| !p.is_object()) {
        return Err(ChainError::PluginNotObject { index });
    }
    Ok(plugins)
}

fn is_ours(plugin: &Value) -> bool {
    plugin.get("type").and_then(Value::as_str) == Some(PLUGIN_TYPE)
}

/// Pretty JSON with a final newline: what an admin reading the node's file expects to see.
fn to_bytes(value: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(value).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Value {
        json!({"name": "linkerd-cni", "type": PLUGIN_TYPE, "log_level": "info"})
    }

    fn types(bytes: &[u8]) -> Vec<String> {
        let v: Value = serde_json::from_slice(bytes).expect("json");
        v["plugins"]
            .as_array()
            .expect("plugins")
            .iter()
            .map(|p| p["type"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("json")
    }

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).expect("json")
    }

    /// Every way a list can hold (or not hold) our entry ends with exactly one, the desired one; a new
    /// one goes last.
    #[test]
    fn append_to_lists() {
        let other = json!({"type": PLUGIN_TYPE, "log_level": "debug"});
        let cases: Vec<(&str, Value, Option<Vec<&str>>)> = vec![
            (
                "plain",
                json!([{"type": "flannel"}, {"type": "portmap"}]),
                Some(vec!["flannel", "portmap", PLUGIN_TYPE]),
            ),
            ("empty", json!([]), Some(vec![PLUGIN_TYPE])),
            ("already last", json!([{"type": "calico"}, entry()]), None),
            (
                "another chained plugin appended after us: no fight",
                json!([{"type": "calico"}, entry(), {"type": "istio-cni"}]),
                None,
            ),
            (
                "twice",
                json!([{"type": "cilium"}, entry(), entry()]),
                Some(vec!["cilium", PLUGIN_TYPE]),
            ),
            (
                "outdated",
                json!([{"type": "cilium"}, other.clone()]),
                Some(vec!["cilium", PLUGIN_TYPE]),
            ),
            (
                "outdated, not last: replaced in place",
                json!([{"type": "cilium"}, other, {"type": "tuning"}, entry()]),
                Some(vec!["cilium", PLUGIN_TYPE, "tuning"]),
            ),
        ];
        for (name, plugins, want) in cases {
            let existing = bytes(json!({"cniVersion": "0.3.1", "name": "k8s", "plugins": plugins}));
            let got = append(&existing, ConfigKind::List, &entry()).expect(name);
            match (got, want) {
                (Outcome::Unchanged, None) => {}
                (Outcome::Rewritten(out), Some(want)) => {
                    assert_eq!(types(&out), want, "{name}");
                    let v: Value = serde_json::from_slice(&out).expect("json");
                    let plugins = v["plugins"].as_array().expect("plugins");
                    assert_eq!(
                        plugins.iter().filter(|p| is_ours(p)).collect::<Vec<_>>(),
                        vec![&entry()],
                        "{name}: exactly one entry, the desired one"
                    );
                    assert_eq!(v["name"], "k8s", "{name}: top-level keys kept");
                    // Applying again to our own output is a no-op.
                    assert_eq!(
                        append(&out, ConfigKind::List, &entry()),
                        Ok(Outcome::Unchanged),
                        "{name}"
                    );
                }
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A single-plugin `.conf` becomes a list: name/cniVersion on top, the original whole, ours last.
    #[test]
    fn append_converts_single() {
        let conf =
            json!({"cniVersion": "0.3.1", "name": "mynet", "type": "bridge", "bridge": "cni0"});
        let Ok(Outcome::Converted(out)) =
            append(&bytes(conf.clone()), ConfigKind::Single, &entry())
        else {
            panic!("expected a conversion");
        };
        let v: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(
            v,
            json!({"cniVersion": "0.3.1", "name": "mynet", "plugins": [conf, entry()]})
        );
    }

    /// Files that cannot be patched say why, and never produce bytes to write.
    #[test]
    fn append_rejects_bad_files() {
        let e = entry();
        let cases: Vec<(&str, &[u8], ConfigKind, ChainError)> = vec![
            (
                "truncated",
                b"{\"plugins\": [",
                ConfigKind::List,
                ChainError::Json(String::new()),
            ),
            (
                "empty file",
                b"",
                ConfigKind::List,
                ChainError::Json(String::new()),
            ),
            ("array", b"[]", ConfigKind::List, ChainError::NotObject),
            (
                "no plugins",
                b"{\"name\": \"x\"}",
                ConfigKind::List,
                ChainError::NoPlugins,
            ),
            (
                "plugins not array",
                b"{\"plugins\": {}}",
                ConfigKind::List,
                ChainError::NoPlugins,
            ),
            (
                "plugin not object",
                b"{\"plugins\": [{}, 3]}",
                ConfigKind::List,
                ChainError::PluginNotObject { index: 1 },
            ),
            (
                "single without type",
                b"{\"name\": \"x\"}",
                ConfigKind::Single,
                ChainError::NoType,
            ),
            (
                "single that is ours",
                b"{\"type\": \"linkerd-cni\"}",
                ConfigKind::Single,
                ChainError::OwnConfig,
            ),
        ];
        for (name, input, kind, want) in cases {
            let got = append(input, kind, &e).expect_err(name);
            match (&got, &want) {
                (ChainError::Json(msg), ChainError::Json(_)) => assert!(!msg.is_empty(), "{name}"),
                _ => assert_eq!(got, want, "{name}"),
            }
        }
    }

    #[test]
    fn multus_own_config_is_recognised() {
        let cases: Vec<(&str, &[u8], Option<&str>)> = vec![
            (
                "thin",
                br#"{"type": "multus", "delegates": []}"#,
                Some("multus"),
            ),
            (
                "thick shim",
                br#"{"type": "multus-shim"}"#,
                Some("multus-shim"),
            ),
            (
                "converted earlier",
                br#"{"plugins": [{"type": "multus"}, {"type": "linkerd-cni"}]}"#,
                Some("multus"),
            ),
            ("bridge", br#"{"type": "bridge"}"#, None),
            (
                "flannel list",
                br#"{"plugins": [{"type": "flannel"}]}"#,
                None,
            ),
            ("similar name", br#"{"type": "multus-stand-in"}"#, None),
            ("broken", b"{oops", None),
        ];
        for (name, input, want) in cases {
            assert_eq!(multus_type(input).as_deref(), want, "{name}");
        }
    }

    /// Every entry this installer appended goes, another's linkerd-cni entry (no mark: Linkerd's
    /// own installer's) stays. Would break: an uninstall taking Linkerd's entry out.
    #[test]
    fn remove_takes_out_every_entry_and_only_ours() {
        let marked = ownership::mark_entry(entry());
        let existing = bytes(json!({"name": "k8s", "plugins": [
            marked, {"type": "calico"}, entry(), ownership::mark_entry(entry())
        ]}));
        let Ok(Outcome::Rewritten(out)) = remove(&existing, ConfigKind::List) else {
            panic!("expected a rewrite");
        };
        assert_eq!(types(&out), vec!["calico", "linkerd-cni"]);
        assert_eq!(
            json(&out)["plugins"][1],
            entry(),
            "the unmarked one, as it was"
        );
        assert_eq!(foreign_entries(&out), 1);
        assert_eq!(foreign_entries(&existing), 1);
        assert_eq!(remove(&out, ConfigKind::List), Ok(Outcome::Unchanged));
        assert_eq!(
            remove(b"{\"type\": \"bridge\"}", ConfigKind::Single),
            Ok(Outcome::Unchanged)
        );
        assert!(matches!(
            remove(b"{oops", ConfigKind::List),
            Err(ChainError::Json(_))
        ));
    }
}
