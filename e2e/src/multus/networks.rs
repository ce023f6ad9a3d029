//! The pod's `k8s.v1.cni.cncf.io/networks` annotation read as Multus reads it: a comma list of
//! `[namespace/]name[@interface]`, or a JSON list of `{"name", "namespace", "interface", ...}`
//! (other keys of Multus' selection element are ignored). A missing namespace is the pod's own.
//! Refusals are worded as Multus v4 words them (`parsePodNetworkAnnotation`), checked against it by
//! `e2e/tests/multus_agreement.rs`; the JSON decoder's own words differ (Go's, serde's).

use serde::Deserialize;

/// One network the pod asks for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Selection {
    pub namespace: String,
    pub name: String,
    /// The interface name the pod asked for; `None`: Multus' `net<N>`.
    pub interface: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pod's k8s.v1.cni.cncf.io/networks annotation {value:?}: {why}")]
pub struct AnnotationError {
    pub value: String,
    pub why: String,
}

#[derive(Deserialize)]
struct JsonElement {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    interface: Option<String>,
}

/// Parses `value` for a pod in `pod_namespace`. Blank: no networks.
pub fn parse(value: &str, pod_namespace: &str) -> Result<Vec<Selection>, AnnotationError> {
    let error = |why: String| AnnotationError {
        value: value.to_string(),
        why,
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(Vec::new());
    }
    let or_pod_namespace = |ns: Option<String>| {
        ns.filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| pod_namespace.to_string())
    };
    // Multus takes it for JSON when it holds any of these.
    if trimmed.contains(['[', '{', '"']) {
        let elements: Vec<JsonElement> = serde_json::from_str(trimmed).map_err(|e| {
            error(format!(
                "parsePodNetworkAnnotation: failed to parse pod Network Attachment Selection \
                 Annotation JSON format: {e}"
            ))
        })?;
        return elements
            .into_iter()
            .map(|e| {
                if e.name.is_empty() {
                    return Err(error("a selection without a name".into()));
                }
                Ok(Selection {
                    namespace: or_pod_namespace(e.namespace),
                    name: e.name,
                    interface: e.interface.filter(|i| !i.is_empty()),
                })
            })
            .collect();
    }
    trimmed
        .split(',')
        .map(|item| {
            parse_item(item.trim())
                .map_err(|why| error(format!("parsePodNetworkAnnotation: {why}")))
        })
        .map(|item| {
            item.map(|(namespace, name, interface)| Selection {
                namespace: or_pod_namespace(namespace),
                name,
                interface,
            })
        })
        .collect()
}

type Item = (Option<String>, String, Option<String>);

/// `[namespace/]name[@interface]` as Multus' `parsePodNetworkObjectName` takes it: namespace and name
/// DNS-1123 labels, the interface at most 15 bytes without `/` or whitespace. An empty name (Multus
/// would look up a NAD named "") is refused here.
fn parse_item(item: &str) -> Result<Item, String> {
    let fail = |why: String| format!("parsePodNetworkObjectName: {why}");
    let slashes: Vec<&str> = item.split('/').collect();
    let (namespace, rest) = match slashes[..] {
        [ns, rest] => (ns.trim(), rest),
        [rest] => ("", rest),
        _ => return Err(fail("Invalid network object (failed at '/')".into())),
    };
    let ats: Vec<&str> = rest.split('@').collect();
    let (name, interface) = match ats[..] {
        [name, iface] => (name.trim(), iface.trim()),
        [name] => (name.trim(), ""),
        _ => return Err(fail("Invalid network object (failed at '@')".into())),
    };
    for part in [namespace, name] {
        if !part.is_empty() && !is_dns_label(part) {
            return Err(fail(format!(
                "Failed to parse: one or more items did not match comma-delimited format (must \
                 consist of lower case alphanumeric characters). Must start and end with an \
                 alphanumeric character), mismatch @ '{part}'"
            )));
        }
    }
    if interface.len() > 15 || interface.contains(|c: char| c == '/' || c.is_whitespace()) {
        return Err(fail(format!(
            "Failed to parse interface name: must be less than 15 chars and not contain '/' or \
             spaces. interface name '{interface}'"
        )));
    }
    if name.is_empty() {
        return Err(fail(format!("no network name in {item:?}")));
    }
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Ok((some(namespace), name.to_string(), some(interface)))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.starts_with(ok) && s.ends_with(ok) && s.chars().all(|c| ok(c) || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(namespace: &str, name: &str, interface: Option<&str>) -> Selection {
        Selection {
            namespace: namespace.into(),
            name: name.into(),
            interface: interface.map(str::to_string),
        }
    }

    #[test]
    fn both_formats_resolve_to_the_same_selections() {
        let table: &[(&str, Vec<Selection>)] = &[
            ("", vec![]),
            ("  ", vec![]),
            ("linkerd-cni", vec![sel("pod-ns", "linkerd-cni", None)]),
            ("other/linkerd-cni", vec![sel("other", "linkerd-cni", None)]),
            (
                "linkerd-cni@net7",
                vec![sel("pod-ns", "linkerd-cni", Some("net7"))],
            ),
            (
                " macvlan , other/linkerd-cni@eth9 ",
                vec![
                    sel("pod-ns", "macvlan", None),
                    sel("other", "linkerd-cni", Some("eth9")),
                ],
            ),
            (
                r#"[{"name":"linkerd-cni"}]"#,
                vec![sel("pod-ns", "linkerd-cni", None)],
            ),
            (
                r#"[{"name":"a","namespace":"other","interface":"x1","ips":["10.0.0.1/24"]},
                    {"name":"b","namespace":""}]"#,
                vec![sel("other", "a", Some("x1")), sel("pod-ns", "b", None)],
            ),
        ];
        for (value, want) in table {
            assert_eq!(&parse(value, "pod-ns").unwrap(), want, "{value}");
        }
    }

    #[test]
    fn bad_values_get_an_error_naming_the_value() {
        for value in [
            "a,,b",
            "a/b/c",
            "a b",
            "/",
            "ns/",
            "bad!name",
            "linkerd.cni",
            "Linkerd-CNI",
            "a@b@c",
            "linkerd-cni@an-interface-name",
            "linkerd-cni@a/b",
            "[",
            r#"[{"namespace":"x"}]"#,
            r#"[{"name":""}]"#,
            r#"{"name":"a"}"#,
        ] {
            let err = parse(value, "pod-ns").unwrap_err();
            assert_eq!(err.value, value);
            assert!(err.to_string().contains("networks annotation"), "{err}");
        }
    }
}
