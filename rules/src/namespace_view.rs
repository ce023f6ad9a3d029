//! PURE: the node-local view of the enabled namespaces that the installer keeps in aux-chain mode
//! ([`vocab::NAMESPACE_VIEW_FILE_NAME`], beside the plugin's kubeconfig), its bytes, and what the
//! plugin decides from it before asking the apiserver anything.
//!
//! Multus' auxiliary chain runs linkerd-cni for every pod of the node, and almost none of them is
//! meshed. A pod of a namespace that is not enabled ([`crate::namespaces::enabled`]) gets no rules
//! from linkerd-multus in any mode (through NADs: the operator writes no NAD there; the webhook's uid
//! handling and repair serve enabled namespaces only), so the plugin passes it through without a
//! request. The view may be stale; that is safe both ways:
//! - a namespace enabled moments ago and not yet in the view: a meshed pod there gets no rules, its
//!   `linkerd-network-validator` exits 95 (it never runs unredirected) and repair restarts it;
//! - a namespace no longer enabled still in the view: the plugin asks the apiserver, as without a view.
//!
//! Without a view (not yet written, unreadable, not ours) the plugin asks the apiserver, as before.

use std::borrow::Cow;
use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

/// The view's `kind`: a file of that name without it is not ours (never read, never removed).
pub const KIND: &str = "LinkerdMultusEnabledNamespaces";
/// The format's version; a view of another version is not read (the plugin asks the apiserver).
pub const VERSION: u64 = 1;

/// The installer's view: which namespaces are enabled, as its namespace watch last saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// The enabled namespaces, Linkerd's control-plane namespace included.
    pub namespaces: BTreeSet<String>,
    /// `--linkerd-namespace` of the installer that wrote it (for the reader's eyes).
    pub linkerd_namespace: String,
    /// When it was written (RFC 3339), and by which installer pod: for an admin reading the node.
    pub written_at: String,
    pub writer: String,
}

/// Why bytes are not a view.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a {KIND} (its `kind` is {0})")]
    NotOurs(String),
    #[error("version {0} is not {VERSION}: written by another release of the installer")]
    Version(String),
    #[error("`{key}` {problem}")]
    BadField { key: &'static str, problem: String },
}

impl View {
    /// The file's bytes: pretty JSON and a final newline, for an admin reading the node.
    pub fn render(&self) -> Vec<u8> {
        let doc = json!({
            "kind": KIND,
            "version": VERSION,
            "writtenAt": self.written_at,
            "writer": self.writer,
            "linkerdNamespace": self.linkerd_namespace,
            "namespaces": self.namespaces,
        });
        let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Reads the bytes [`View::render`] writes; anything else is refused with the reason.
    pub fn parse(bytes: &[u8]) -> Result<Self, ViewError> {
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| ViewError::NotJson(e.to_string()))?;
        let kind = doc.get("kind").cloned().unwrap_or(Value::Null);
        if kind.as_str() != Some(KIND) {
            return Err(ViewError::NotOurs(kind.to_string()));
        }
        let version = doc.get("version").cloned().unwrap_or(Value::Null);
        if version.as_u64() != Some(VERSION) {
            return Err(ViewError::Version(version.to_string()));
        }
        let text = |key: &'static str| -> Result<String, ViewError> {
            match doc.get(key) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(ViewError::BadField {
                    key,
                    problem: format!("is not a string: {other}"),
                }),
            }
        };
        let namespaces = match doc.get("namespaces") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| ViewError::BadField {
                            key: "namespaces",
                            problem: format!("holds {item}, not a namespace name"),
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(ViewError::BadField {
                    key: "namespaces",
                    problem: "is missing or not a list".into(),
                })
            }
        };
        Ok(Self {
            namespaces,
            linkerd_namespace: text("linkerdNamespace")?,
            written_at: text("writtenAt")?,
            writer: text("writer")?,
        })
    }
}

/// The view as [`lists`] reads it: borrowed from the bytes, no set built, unknown keys skipped. The
/// plugin reads the view for every pod of the node; at 10,000 enabled namespaces (~280 KB) building
/// [`View`]'s set took ~5 ms of the ADD, this ~1.
#[derive(serde::Deserialize)]
struct Borrowed<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    version: Option<u64>,
    #[serde(borrow, default)]
    namespaces: Option<Vec<Cow<'a, str>>>,
}

/// Whether the view's bytes list `namespace`, as [`View::parse`] would read them.
pub fn lists(bytes: &[u8], namespace: &str) -> Result<bool, ViewError> {
    match serde_json::from_slice::<Borrowed>(bytes) {
        Ok(Borrowed {
            kind: Some(kind),
            version: Some(VERSION),
            namespaces: Some(namespaces),
        }) if kind == KIND => Ok(namespaces.iter().any(|n| n == namespace)),
        // Anything else is refused, with the reason View::parse gives.
        _ => View::parse(bytes).map(|view| view.namespaces.contains(namespace)),
    }
}

/// Whether a namespace belongs in the view: the one rule of [`crate::namespaces::enabled`].
pub fn member(meta: &ObjectMeta, linkerd_namespace: &str) -> bool {
    crate::namespaces::enabled(meta, linkerd_namespace)
}

/// The view file as the plugin found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// No file (not written yet: the installer's watch has not synced, or another attach mode).
    Missing,
    /// There but not readable (an I/O error): the reason.
    Unusable(String),
    /// Its bytes, judged by [`lists`] (a file that is no view is unusable too).
    Read(Vec<u8>),
}

/// What the plugin does before any request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The pod's namespace is not in the view: pass the pod through, no request.
    PassThrough,
    /// Ask the apiserver for the pod: its namespace is in the view, or there is no view (why).
    Ask { no_view: Option<String> },
}

/// PURE: decides from the view as found whether the pod of `namespace` needs the apiserver.
pub fn lookup(found: &Found, namespace: &str) -> Lookup {
    match found {
        Found::Read(bytes) => match lists(bytes, namespace) {
            Ok(true) => Lookup::Ask { no_view: None },
            Ok(false) => Lookup::PassThrough,
            Err(e) => Lookup::Ask {
                no_view: Some(e.to_string()),
            },
        },
        Found::Missing => Lookup::Ask {
            no_view: Some("the installer has not written it (yet)".into()),
        },
        Found::Unusable(why) => Lookup::Ask {
            no_view: Some(why.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn view(namespaces: &[&str]) -> View {
        View {
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            linkerd_namespace: "linkerd".into(),
            written_at: "2026-11-28T06:00:00Z".into(),
            writer: "linkerd-multus/cni-abc".into(),
        }
    }

    /// A pod outside the view is passed through with no request; inside it, or with no usable
    /// view, the plugin asks the apiserver as before. If this regressed, either every unmeshed pod
    /// of the node would wait on the apiserver again, or a pod of an enabled namespace would lose
    /// its rules.
    #[test]
    fn the_view_decides_whether_the_apiserver_is_asked() {
        let read = Found::Read(view(&["demo", "linkerd"]).render());
        let empty = Found::Read(view(&[]).render());
        let garbage = Found::Read(b"{".to_vec());
        let asked = Lookup::Ask { no_view: None };
        let cases: [(&str, &Found, &str, Lookup); 8] = [
            ("enabled", &read, "demo", asked.clone()),
            ("control plane", &read, "linkerd", asked.clone()),
            ("not enabled", &read, "openshift-dns", Lookup::PassThrough),
            ("prefix only", &read, "dem", Lookup::PassThrough),
            ("empty view", &empty, "demo", Lookup::PassThrough),
            (
                "no view",
                &Found::Missing,
                "openshift-dns",
                Lookup::Ask {
                    no_view: Some("the installer has not written it (yet)".into()),
                },
            ),
            (
                "not a view",
                &garbage,
                "openshift-dns",
                Lookup::Ask {
                    no_view: Some(
                        "not JSON: EOF while parsing an object at line 1 column 1".into(),
                    ),
                },
            ),
            (
                "unusable view",
                &Found::Unusable("not JSON".into()),
                "openshift-dns",
                Lookup::Ask {
                    no_view: Some("not JSON".into()),
                },
            ),
        ];
        for (case, found, namespace, expected) in cases {
            assert_eq!(lookup(found, namespace), expected, "{case}");
        }
    }

    /// The bytes written are the bytes read back; a file of that name that is not ours, of another
    /// version or malformed is refused with the reason (so the plugin asks the apiserver).
    #[test]
    fn render_and_parse() {
        let v = view(&["b", "a"]);
        assert_eq!(View::parse(&v.render()), Ok(v.clone()));
        let text = String::from_utf8(v.render()).expect("utf8");
        assert!(text.ends_with("]\n}\n"), "{text}");
        assert!(
            text.contains("\"namespaces\": [\n    \"a\",\n    \"b\"\n  ]"),
            "{text}"
        );
        let refused: [(&str, &[u8], &str); 6] = [
            ("garbage", b"{", "not JSON"),
            (
                "not ours",
                br#"{"kind":"Other","version":1,"namespaces":[]}"#,
                "Other",
            ),
            ("no kind", br#"{"version":1,"namespaces":[]}"#, "null"),
            (
                "other version",
                br#"{"kind":"LinkerdMultusEnabledNamespaces","version":2,"namespaces":[]}"#,
                "version 2",
            ),
            (
                "no list",
                br#"{"kind":"LinkerdMultusEnabledNamespaces","version":1}"#,
                "`namespaces` is missing",
            ),
            (
                "not names",
                br#"{"kind":"LinkerdMultusEnabledNamespaces","version":1,"namespaces":[1]}"#,
                "holds 1",
            ),
        ];
        for (case, bytes, says) in refused {
            let err = View::parse(bytes).expect_err(case).to_string();
            assert!(err.contains(says), "{case}: {err}");
            let fast = lists(bytes, "a").expect_err(case).to_string();
            assert_eq!(fast, err, "{case}: lists refuses as parse does");
        }
        for namespace in ["a", "b", "c", "", "\"a\""] {
            assert_eq!(
                lists(&v.render(), namespace),
                Ok(v.namespaces.contains(namespace)),
                "{namespace:?}"
            );
        }
    }

    /// The view lists exactly the namespaces [`crate::namespaces::enabled`] calls enabled: the exact
    /// annotation value, and the control-plane namespace whatever its annotation.
    #[test]
    fn membership_is_the_enabled_rule() {
        let meta = |name: &str, value: Option<&str>| ObjectMeta {
            name: Some(name.into()),
            annotations: value
                .map(|v| BTreeMap::from([(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())])),
            ..Default::default()
        };
        let cases = [
            (meta("a", Some("enabled")), true),
            (meta("a", Some("Enabled")), false),
            (meta("a", Some("disabled")), false),
            (meta("a", None), false),
            (meta("linkerd", None), true),
            (meta("linkerd", Some("disabled")), true),
        ];
        for (m, expected) in cases {
            assert_eq!(member(&m, "linkerd"), expected, "{:?}", m);
        }
    }
}
