//! The linkerd-cni entry the installer adds: Linkerd's `cni_network_config` template with its
//! placeholders filled. Pure: the caller supplies every value.
//!
//! Placeholders (Linkerd's chart and the Calico-style templates it grew from use these):
//! `__KUBECONFIG_FILEPATH__` (the kubeconfig this installer writes, as the node sees it),
//! `__LOG_LEVEL__`, `__KUBERNETES_SERVICE_HOST__` and `__KUBERNETES_SERVICE_PORT__` (Linkerd's template
//! builds `https://HOST:PORT` from them, so an IPv6 host is filled in brackets), and
//! `__SERVICEACCOUNT_TOKEN__`, deliberately filled with an empty string: network configs are
//! world-readable and the plugin authenticates with the 0600 kubeconfig instead.

use serde_json::{json, Value};
use vocab::{
    DEFAULT_INBOUND_PROXY_PORT, DEFAULT_OUTBOUND_PROXY_PORT, DEFAULT_PROXY_UID,
    PLACEHOLDER_KUBECONFIG_FILEPATH, PLACEHOLDER_LOG_LEVEL, PLACEHOLDER_SERVICEACCOUNT_TOKEN,
    PLACEHOLDER_SERVICE_HOST, PLACEHOLDER_SERVICE_PORT, PLUGIN_TYPE,
};

/// The values placeholders are filled with.
#[derive(Clone, Debug)]
pub struct Values<'a> {
    pub kubeconfig_path: &'a str,
    pub log_level: &'a str,
    /// Host as it goes into a URL (IPv6 in brackets), see [`super::kubeconfig::url_host`].
    pub service_host: &'a str,
    pub service_port: &'a str,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error(
        "the CNI network config template is not valid JSON after filling its placeholders: {0}"
    )]
    Json(String),
    #[error("the CNI network config template must be one JSON object (a single plugin config)")]
    NotObject,
    #[error("the CNI network config template's \"type\" is {found:?}; it must be \"linkerd-cni\", the binary this installer puts on the node")]
    WrongType { found: Option<String> },
}

/// The template used when neither `CNI_NETWORK_CONFIG` nor `--cni-network-config-file` gives one:
/// Linkerd's defaults. Deployments normally pass the ConfigMap's `cni_network_config` instead.
pub fn default_template() -> String {
    let template = json!({
        "name": PLUGIN_TYPE,
        "type": PLUGIN_TYPE,
        "log_level": PLACEHOLDER_LOG_LEVEL,
        "kubernetes": { "kubeconfig": PLACEHOLDER_KUBECONFIG_FILEPATH },
        "linkerd": {
            "incoming-proxy-port": DEFAULT_INBOUND_PROXY_PORT,
            "outgoing-proxy-port": DEFAULT_OUTBOUND_PROXY_PORT,
            "proxy-uid": DEFAULT_PROXY_UID,
            "ports-to-redirect": [],
            "inbound-ports-to-ignore": [],
            "simulate": false,
        },
    });
    serde_json::to_string_pretty(&template).unwrap_or_default()
}

/// Fills the placeholders and checks the result is a linkerd-cni plugin object. `log_level_override`
/// (an explicit `--cni-log-level`) also replaces a literal `log_level` the template may carry.
pub fn render(
    template: &str,
    values: &Values<'_>,
    log_level_override: Option<&str>,
) -> Result<Value, TemplateError> {
    // Values go in as JSON string contents, so a path with a quote or backslash cannot break the JSON.
    let filled = [
        (PLACEHOLDER_KUBECONFIG_FILEPATH, values.kubeconfig_path),
        (PLACEHOLDER_LOG_LEVEL, values.log_level),
        (PLACEHOLDER_SERVICE_HOST, values.service_host),
        (PLACEHOLDER_SERVICE_PORT, values.service_port),
        (PLACEHOLDER_SERVICEACCOUNT_TOKEN, ""),
    ]
    .iter()
    .fold(template.to_string(), |text, (placeholder, value)| {
        text.replace(placeholder, &json_escape(value))
    });
    let mut entry = match serde_json::from_str::<Value>(&filled) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(TemplateError::NotObject),
        Err(e) => return Err(TemplateError::Json(e.to_string())),
    };
    match entry.get("type").and_then(Value::as_str) {
        Some(t) if t == PLUGIN_TYPE => {}
        other => {
            return Err(TemplateError::WrongType {
                found: other.map(str::to_string),
            })
        }
    }
    if let Some(level) = log_level_override {
        entry.insert("log_level".to_string(), Value::String(level.to_string()));
    }
    Ok(Value::Object(entry))
}

/// Placeholder-looking words (`__UPPER_CASE__`) left in a template after filling: worth a warning,
/// since the plugin will see them literally.
pub fn leftover_placeholders(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("__") {
        let after = &rest[start + 2..];
        let len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
            .unwrap_or(after.len());
        let word = &after[..len];
        if let Some(name) = word.strip_suffix("__").filter(|n| !n.is_empty()) {
            found.push(format!("__{name}__"));
            rest = &after[len..];
        } else {
            rest = after;
        }
    }
    found
}

fn json_escape(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values<'static> {
        Values {
            kubeconfig_path: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig",
            log_level: "debug",
            service_host: "[fd00::1]",
            service_port: "443",
        }
    }

    /// Linkerd's chart template (its shape, with the placeholders it uses) renders to a usable entry.
    #[test]
    fn renders_linkerd_chart_template() {
        let template = r#"{
          "name": "linkerd-cni", "type": "linkerd-cni", "log_level": "__LOG_LEVEL__",
          "policy": {"type": "k8s",
                     "k8s_api_root": "https://__KUBERNETES_SERVICE_HOST__:__KUBERNETES_SERVICE_PORT__",
                     "k8s_auth_token": "__SERVICEACCOUNT_TOKEN__"},
          "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"},
          "linkerd": {"incoming-proxy-port": 4143, "proxy-uid": 2102}
        }"#;
        let got = render(template, &values(), None).expect("renders");
        assert_eq!(
            got["kubernetes"]["kubeconfig"],
            "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
        );
        assert_eq!(got["log_level"], "debug");
        assert_eq!(got["policy"]["k8s_api_root"], "https://[fd00::1]:443");
        assert_eq!(
            got["policy"]["k8s_auth_token"], "",
            "the token never lands in the conflist"
        );
        assert_eq!(got["linkerd"]["proxy-uid"], 2102);
        assert!(leftover_placeholders(&got.to_string()).is_empty());
    }

    #[test]
    fn default_template_renders() {
        let got = render(&default_template(), &values(), None).expect("renders");
        assert_eq!(got["type"], PLUGIN_TYPE);
        assert_eq!(got["kubernetes"]["kubeconfig"], values().kubeconfig_path);
        assert_eq!(
            got["linkerd"]["incoming-proxy-port"],
            DEFAULT_INBOUND_PROXY_PORT
        );
    }

    #[test]
    fn explicit_log_level_wins_over_a_literal_one() {
        let template = r#"{"type": "linkerd-cni", "log_level": "info"}"#;
        assert_eq!(
            render(template, &values(), None).expect("ok")["log_level"],
            "info"
        );
        assert_eq!(
            render(template, &values(), Some("trace")).expect("ok")["log_level"],
            "trace"
        );
    }

    #[test]
    fn values_are_escaped_into_json() {
        let v = Values {
            kubeconfig_path: "/a \"b\"\\c",
            ..values()
        };
        let got = render(
            r#"{"type": "linkerd-cni", "k": "__KUBECONFIG_FILEPATH__"}"#,
            &v,
            None,
        )
        .expect("ok");
        assert_eq!(got["k"], "/a \"b\"\\c");
    }

    #[test]
    fn bad_templates_are_named() {
        let cases: Vec<(&str, &str, TemplateError)> = vec![
            (
                "not json",
                "{\"type\": ",
                TemplateError::Json(String::new()),
            ),
            ("list", "[]", TemplateError::NotObject),
            ("no type", "{}", TemplateError::WrongType { found: None }),
            (
                "other type",
                "{\"type\": \"bridge\"}",
                TemplateError::WrongType {
                    found: Some("bridge".into()),
                },
            ),
        ];
        for (name, template, want) in cases {
            let got = render(template, &values(), None).expect_err(name);
            match (&got, &want) {
                (TemplateError::Json(m), TemplateError::Json(_)) => {
                    assert!(!m.is_empty(), "{name}")
                }
                _ => assert_eq!(got, want, "{name}"),
            }
        }
    }

    #[test]
    fn finds_leftover_placeholders() {
        assert_eq!(
            leftover_placeholders(r#"{"a": "__CNI_MTU__", "b": "x__y", "c": "__NODE_NAME__"}"#),
            vec!["__CNI_MTU__".to_string(), "__NODE_NAME__".to_string()]
        );
        assert!(leftover_placeholders("no placeholders, __ nor ____").is_empty());
    }
}
