//! The pod's `k8s.v1.cni.cncf.io/networks` annotation read as Multus reads it: a comma list of
//! `[namespace/]name[@interface]`, or a JSON list of `{"name", "namespace", "interface", ...}`
//! (other keys of Multus' selection element are ignored). A missing namespace is the pod's own.

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
    if trimmed.contains('[') {
        let elements: Vec<JsonElement> = serde_json::from_str(trimmed)
            .map_err(|e| error(format!("not a JSON list of network selections: {e}")))?;
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
        .map(|item| parse_item(item.trim()).map_err(&error))
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

/// `[namespace/]name[@interface]`, each part of the characters Multus allows.
fn parse_item(item: &str) -> Result<Item, String> {
    let (namespace, rest) = match item.split_once('/') {
        Some((ns, rest)) => (Some(ns), rest),
        None => (None, item),
    };
    let (name, interface) = match rest.split_once('@') {
        Some((name, iface)) => (name, Some(iface)),
        None => (rest, None),
    };
    let valid = |part: &str| {
        part.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let parts = [namespace, Some(name), interface];
    if name.is_empty() || !parts.into_iter().flatten().all(valid) {
        return Err(format!("invalid item {item:?}"));
    }
    Ok((
        namespace.filter(|ns| !ns.is_empty()).map(str::to_string),
        name.to_string(),
        interface.filter(|i| !i.is_empty()).map(str::to_string),
    ))
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
