//! Multus' pod networks annotation (`k8s.v1.cni.cncf.io/networks`): does it already reference our
//! NetworkAttachmentDefinition, and what is the value with it appended?
//!
//! Multus accepts two formats and so do we: a comma list of `[namespace/]name[@interface]` (spaces around
//! items allowed) and a JSON list of objects `{"name", "namespace", "interface", ...}`. Anything else is
//! refused with a reason, so the caller leaves the value untouched instead of corrupting it.

use std::fmt;

/// Why a networks annotation value cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworksError(String);

impl fmt::Display for NetworksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One network the pod asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Selection {
    namespace: Option<String>,
    name: String,
}

impl Selection {
    /// Its namespace; an item without one names the pod's own.
    fn namespace_or<'a>(&'a self, pod_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(pod_namespace)
    }
}

/// A parsed annotation value, remembering its format so an append keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Format {
    CommaList,
    JsonList,
}

/// Characters Multus allows in each part of a comma-list item.
fn valid_part(part: &str) -> bool {
    part.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_item(item: &str) -> Result<Selection, NetworksError> {
    let (namespace, rest) = match item.split_once('/') {
        Some((ns, rest)) => (Some(ns), rest),
        None => (None, item),
    };
    let name = match rest.split_once('@') {
        Some((name, iface)) => {
            if iface.is_empty() || !valid_part(iface) || iface.contains('@') {
                return Err(NetworksError(format!(
                    "item {item:?} has an invalid interface name"
                )));
            }
            name
        }
        None => rest,
    };
    if name.is_empty() || !valid_part(name) {
        return Err(NetworksError(format!(
            "item {item:?} has an invalid network name"
        )));
    }
    if let Some(ns) = namespace {
        if ns.is_empty() || !valid_part(ns) {
            return Err(NetworksError(format!(
                "item {item:?} has an invalid namespace"
            )));
        }
    }
    Ok(Selection {
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
    })
}

fn parse_json(value: &str) -> Result<Vec<Selection>, NetworksError> {
    let items: Vec<serde_json::Value> = serde_json::from_str(value)
        .map_err(|e| NetworksError(format!("not a valid JSON list: {e}")))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let obj = item
                .as_object()
                .ok_or_else(|| NetworksError(format!("JSON list element {i} is not an object")))?;
            let name = match obj.get("name") {
                Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
                _ => {
                    return Err(NetworksError(format!(
                        "JSON list element {i} has no non-empty string \"name\""
                    )))
                }
            };
            let namespace = match obj.get("namespace") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(s)) if s.is_empty() => None,
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(_) => {
                    return Err(NetworksError(format!(
                        "JSON list element {i} has a \"namespace\" that is not a string"
                    )))
                }
            };
            Ok(Selection { namespace, name })
        })
        .collect()
}

/// True when `value` is read as the JSON-list format (valid or not): it starts with `[` once trimmed.
/// The admission policy leaves such pods to the webhook (`admission_policy::WebhookOnly`).
pub fn is_json_list(value: &str) -> bool {
    value.trim().starts_with('[')
}

/// Parses a value into its format and selections. An empty (or blank) value is an empty comma list.
fn parse(value: &str) -> Result<(Format, Vec<Selection>), NetworksError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok((Format::CommaList, Vec::new()));
    }
    if is_json_list(trimmed) {
        return Ok((Format::JsonList, parse_json(trimmed)?));
    }
    // Multus treats any of these characters as JSON; a bare object is not a list it accepts.
    if trimmed.contains(['{', '"', '[']) {
        return Err(NetworksError(
            "looks like JSON but is not a JSON list of objects".to_string(),
        ));
    }
    let items = trimmed
        .split(',')
        .map(|item| {
            let item = item.trim();
            if item.is_empty() {
                Err(NetworksError(
                    "the comma list has an empty item".to_string(),
                ))
            } else {
                parse_item(item)
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((Format::CommaList, items))
}

/// True when the list selects `nad` of `nad_namespace` from a pod in `pod_namespace` (an item without
/// a namespace means the pod's own).
fn selects(selections: &[Selection], nad: &str, nad_namespace: &str, pod_namespace: &str) -> bool {
    selections
        .iter()
        .any(|s| s.name == nad && s.namespace_or(pod_namespace) == nad_namespace)
}

/// Does the networks annotation `value` of a pod in `pod_namespace` use the NetworkAttachmentDefinition
/// `nad` of `nad_namespace` (the pod's own, or a shared NAD's)? Errors when `value` cannot be parsed.
pub fn references(
    value: &str,
    nad: &str,
    nad_namespace: &str,
    pod_namespace: &str,
) -> Result<bool, NetworksError> {
    let (_, selections) = parse(value)?;
    Ok(selects(&selections, nad, nad_namespace, pod_namespace))
}

/// The namespaces of the entries of `value` naming `nad`, for a pod in `pod_namespace` (an entry
/// without a namespace names the pod's own). Errors when `value` cannot be parsed.
pub fn namespaces_naming(
    value: &str,
    nad: &str,
    pod_namespace: &str,
) -> Result<Vec<String>, NetworksError> {
    let (_, selections) = parse(value)?;
    Ok(selections
        .into_iter()
        .filter(|s| s.name == nad)
        .map(|s| s.namespace_or(pod_namespace).to_string())
        .collect())
}

/// `nad` as a comma-list item names it: bare (the pod's own namespace), or `namespace/nad`.
pub fn reference(nad: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{nad}"),
        None => nad.to_string(),
    }
}

/// What to do with a pod's networks annotation to attach `nad` (in the pod's namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// The value already references the attachment: leave it.
    Present,
    /// Set the annotation to this value (the old one with the attachment appended, same format).
    Set(String),
}

/// Decides how the annotation `current` (None: absent) must change so the pod in `pod_namespace` uses the
/// NetworkAttachmentDefinition `nad`: its own namespace's when `shared_namespace` is None (written
/// `nad`), else the one in `shared_namespace` (written `ns/nad`, or with `"namespace"` in a JSON list).
/// Either spelling of the same NAD already there counts as present. Errors when `current` cannot be parsed.
pub fn attach(
    current: Option<&str>,
    nad: &str,
    shared_namespace: Option<&str>,
    pod_namespace: &str,
) -> Result<Attachment, NetworksError> {
    let item = reference(nad, shared_namespace);
    let Some(current) = current else {
        return Ok(Attachment::Set(item));
    };
    let (format, selections) = parse(current)?;
    let nad_namespace = shared_namespace.unwrap_or(pod_namespace);
    if selects(&selections, nad, nad_namespace, pod_namespace) {
        return Ok(Attachment::Present);
    }
    let kept = current.trim_end();
    let value = match format {
        Format::CommaList if selections.is_empty() => item,
        Format::CommaList => {
            // Keep the author's separator style.
            let sep = if kept.contains(", ") { ", " } else { "," };
            format!("{kept}{sep}{item}")
        }
        Format::JsonList => {
            // Insert textually before the closing bracket so the existing text stays byte for byte.
            let entry = match shared_namespace {
                Some(ns) => serde_json::json!({ "name": nad, "namespace": ns }),
                None => serde_json::json!({ "name": nad }),
            }
            .to_string();
            let body = kept
                .strip_suffix(']')
                .ok_or_else(|| NetworksError("JSON list does not end with ']'".to_string()))?
                .trim_end();
            if selections.is_empty() {
                format!("{body}{entry}]")
            } else {
                format!("{body},{entry}]")
            }
        }
    };
    Ok(Attachment::Set(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(current: &str) -> Result<Attachment, NetworksError> {
        attach(Some(current), "linkerd-cni", None, "app")
    }

    #[test]
    fn comma_lists() {
        assert_eq!(
            set("macvlan"),
            Ok(Attachment::Set("macvlan,linkerd-cni".into()))
        );
        assert_eq!(
            set(" a , other/b@eth1 "),
            Ok(Attachment::Set(" a , other/b@eth1, linkerd-cni".into()))
        );
        assert_eq!(set("linkerd-cni@net9"), Ok(Attachment::Present));
        assert_eq!(set("a, app/linkerd-cni"), Ok(Attachment::Present));
        assert_eq!(
            set("other/linkerd-cni"),
            Ok(Attachment::Set("other/linkerd-cni,linkerd-cni".into()))
        );
        assert_eq!(set("   "), Ok(Attachment::Set("linkerd-cni".into())));
        assert!(set("a,,b").is_err());
        assert!(set("a/b/c").is_err());
        assert!(set("a@").is_err());
        assert!(set("a@b@c").is_err());
        assert!(set("/a").is_err());
        assert!(set("a b").is_err());
    }

    /// Every format Multus accepts is recognised as using the NAD; other namespaces' NADs are not.
    #[test]
    fn references_in_every_format() {
        let uses = |v: &str| references(v, "linkerd-cni", "app", "app");
        for v in [
            "linkerd-cni",
            "a, linkerd-cni",
            "app/linkerd-cni",
            "linkerd-cni@net1",
            "app/linkerd-cni@net1",
            r#"[{"name":"linkerd-cni"}]"#,
            r#"[{"name":"a"},{"name":"linkerd-cni","namespace":"app","interface":"x"}]"#,
        ] {
            assert_eq!(uses(v), Ok(true), "{v}");
        }
        for v in [
            "",
            "macvlan",
            "other/linkerd-cni",
            "linkerd-cni-2",
            r#"[{"name":"linkerd-cni","namespace":"other"}]"#,
        ] {
            assert_eq!(uses(v), Ok(false), "{v}");
        }
        assert!(uses("a,,b").is_err());
        assert!(uses(r#"{"name":"linkerd-cni"}"#).is_err());
    }

    #[test]
    fn namespaces_naming_in_every_format() {
        let of = |v: &str| namespaces_naming(v, "linkerd-cni", "app");
        let cases: [(&str, &[&str]); 6] = [
            ("", &[]),
            ("macvlan, linkerd-cni-2", &[]),
            ("linkerd-cni@net1", &["app"]),
            ("default/linkerd-cni, app/linkerd-cni", &["default", "app"]),
            (
                r#"[{"name":"linkerd-cni","namespace":"default"}]"#,
                &["default"],
            ),
            (
                r#"[{"name":"a"},{"name":"linkerd-cni","namespace":""}]"#,
                &["app"],
            ),
        ];
        for (v, want) in cases {
            assert_eq!(
                of(v),
                Ok(want.iter().map(|s| s.to_string()).collect()),
                "{v}"
            );
        }
        assert!(of("a,,b").is_err());
    }

    #[test]
    fn json_lists() {
        assert_eq!(
            set(r#"[ {"name":"a"} ]"#),
            Ok(Attachment::Set(
                r#"[ {"name":"a"},{"name":"linkerd-cni"}]"#.into()
            ))
        );
        assert_eq!(
            set("[]"),
            Ok(Attachment::Set(r#"[{"name":"linkerd-cni"}]"#.into()))
        );
        assert_eq!(
            set(r#"[{"name":"linkerd-cni","namespace":"app","interface":"x"}]"#),
            Ok(Attachment::Present)
        );
        assert_eq!(
            set(r#"[{"name":"linkerd-cni","namespace":""}]"#),
            Ok(Attachment::Present)
        );
        assert!(matches!(
            set(r#"[{"name":"linkerd-cni","namespace":"other"}]"#),
            Ok(Attachment::Set(_))
        ));
        assert!(set(r#"{"name":"a"}"#).is_err());
        assert!(set(r#"[{"name":1}]"#).is_err());
        assert!(set(r#"["a"]"#).is_err());
        assert!(set("[").is_err());
    }

    /// Shared mode: `shared/linkerd-cni` is written in the value's own format, and either spelling of
    /// it (qualified, or unqualified from a pod of that namespace) counts as present; the pod's own
    /// namespace's NAD of that name does not.
    #[test]
    fn shared_nad() {
        let shared = |current: Option<&str>, pod_ns: &str| {
            attach(current, "linkerd-cni", Some("shared"), pod_ns)
        };
        let cases = [
            (None, "app", Attachment::Set("shared/linkerd-cni".into())),
            (
                Some(""),
                "app",
                Attachment::Set("shared/linkerd-cni".into()),
            ),
            (
                Some("macvlan"),
                "app",
                Attachment::Set("macvlan,shared/linkerd-cni".into()),
            ),
            (
                Some("a, linkerd-cni"),
                "app",
                Attachment::Set("a, linkerd-cni, shared/linkerd-cni".into()),
            ),
            (Some("shared/linkerd-cni@net1"), "app", Attachment::Present),
            (Some("linkerd-cni"), "shared", Attachment::Present),
            (
                Some(r#"[{"name":"a"}]"#),
                "app",
                Attachment::Set(
                    r#"[{"name":"a"},{"name":"linkerd-cni","namespace":"shared"}]"#.into(),
                ),
            ),
            (
                Some("[]"),
                "app",
                Attachment::Set(r#"[{"name":"linkerd-cni","namespace":"shared"}]"#.into()),
            ),
            (
                Some(r#"[{"name":"linkerd-cni","namespace":"shared"}]"#),
                "app",
                Attachment::Present,
            ),
            (
                Some(r#"[{"name":"linkerd-cni"}]"#),
                "shared",
                Attachment::Present,
            ),
            (
                Some(r#"[{"name":"linkerd-cni"}]"#),
                "app",
                Attachment::Set(
                    r#"[{"name":"linkerd-cni"},{"name":"linkerd-cni","namespace":"shared"}]"#
                        .into(),
                ),
            ),
        ];
        for (current, pod_ns, want) in cases {
            assert_eq!(shared(current, pod_ns), Ok(want), "{current:?} in {pod_ns}");
        }
        let uses = |v: &str, pod_ns: &str| references(v, "linkerd-cni", "shared", pod_ns);
        assert_eq!(uses("shared/linkerd-cni", "app"), Ok(true));
        assert_eq!(
            uses(r#"[{"name":"linkerd-cni","namespace":"shared"}]"#, "app"),
            Ok(true)
        );
        assert_eq!(uses("linkerd-cni", "shared"), Ok(true));
        assert_eq!(uses("linkerd-cni", "app"), Ok(false));
        assert_eq!(uses("app/linkerd-cni", "app"), Ok(false));
    }
}
