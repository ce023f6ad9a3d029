//! PURE: Linkerd's `cni_network_config` template (the linkerd2-cni chart's ConfigMap value), understood
//! in one place for its two readers:
//! - the node installer fills the placeholders with the node's values and chains the result
//!   ([`render`]);
//! - the operator has no node to fill them from, since Multus hands a NAD's config straight to the
//!   plugin: it sets the kubeconfig path, fills the CNI defaults, keeps every other key as the admin
//!   configured it and drops only what still holds a placeholder ([`for_nad`]).
//!
//! Placeholders (Linkerd's chart and the Calico-style templates it grew from use these):
//! `__KUBECONFIG_FILEPATH__`, `__LOG_LEVEL__`, `__KUBERNETES_SERVICE_HOST__` and
//! `__KUBERNETES_SERVICE_PORT__` (the chart builds `https://HOST:PORT` from them, so an IPv6 host goes
//! in brackets), and `__SERVICEACCOUNT_TOKEN__`, deliberately filled with an empty string: network
//! configs are world-readable and the plugin authenticates with its 0600 kubeconfig instead.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use vocab::{
    url_host, DEFAULT_CNI_VERSION, DEFAULT_INBOUND_PROXY_PORT, DEFAULT_OUTBOUND_PROXY_PORT,
    DEFAULT_PROXY_UID, PLUGIN_TYPE,
};

pub const PLACEHOLDER_KUBECONFIG_FILEPATH: &str = "__KUBECONFIG_FILEPATH__";
pub const PLACEHOLDER_LOG_LEVEL: &str = "__LOG_LEVEL__";
pub const PLACEHOLDER_SERVICE_HOST: &str = "__KUBERNETES_SERVICE_HOST__";
pub const PLACEHOLDER_SERVICE_PORT: &str = "__KUBERNETES_SERVICE_PORT__";
pub const PLACEHOLDER_SERVICEACCOUNT_TOKEN: &str = "__SERVICEACCOUNT_TOKEN__";

/// The template is not one JSON object.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("is not valid JSON")]
    InvalidJson(#[source] serde_json::Error),
    #[error("must be a JSON object (a single plugin config), found {found}")]
    NotAnObject { found: &'static str },
}

/// Why the installer cannot chain a template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the CNI network config template (placeholders filled)")]
    Parse(#[from] ParseError),
    #[error("the CNI network config template's \"type\" is {found:?}; it must be \"linkerd-cni\", the binary the installer puts on the node")]
    WrongType { found: Option<String> },
}

/// The node's values the installer fills placeholders with.
#[derive(Clone, Debug)]
pub struct Values<'a> {
    pub kubeconfig_path: &'a str,
    pub log_level: &'a str,
    /// `KUBERNETES_SERVICE_HOST` as the pod sees it (a bare IPv6 address gets its brackets here).
    pub service_host: &'a str,
    pub service_port: &'a str,
}

/// Parses a template (or a filled one) into its object.
pub fn parse(text: &str) -> Result<Map<String, Value>, ParseError> {
    match serde_json::from_str(text).map_err(ParseError::InvalidJson)? {
        Value::Object(obj) => Ok(obj),
        other => Err(ParseError::NotAnObject {
            found: json_kind(&other),
        }),
    }
}

/// The template the installer uses when none is given: Linkerd's defaults.
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

/// The installer's path: fills the placeholders and checks the result is a linkerd-cni plugin
/// object. `log_level_override` (an explicit `--cni-log-level`) also replaces a literal `log_level`.
pub fn render(
    template: &str,
    values: &Values<'_>,
    log_level_override: Option<&str>,
) -> Result<Value, TemplateError> {
    let host = url_host(values.service_host);
    // Values go in as JSON string contents, so a path with a quote or backslash cannot break the JSON.
    let filled = [
        (PLACEHOLDER_KUBECONFIG_FILEPATH, values.kubeconfig_path),
        (PLACEHOLDER_LOG_LEVEL, values.log_level),
        (PLACEHOLDER_SERVICE_HOST, &host),
        (PLACEHOLDER_SERVICE_PORT, values.service_port),
        (PLACEHOLDER_SERVICEACCOUNT_TOKEN, ""),
    ]
    .iter()
    .fold(template.to_string(), |text, (placeholder, value)| {
        text.replace(placeholder, &json_escape(value))
    });
    let mut entry = parse(&filled)?;
    match entry.get("type").and_then(Value::as_str) {
        Some(PLUGIN_TYPE) => {}
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

/// The operator's path: the NAD's `spec.config` with `kubeconfig` as the plugin's kubeconfig.
///
/// Output is canonical (object keys sorted at every level, compact), so the same input always gives
/// byte-identical text and an unchanged ConfigMap never causes a write.
pub fn for_nad(template: &str, kubeconfig: &str) -> Result<String, ParseError> {
    let mut obj = parse(template)?;
    // `kubernetes` is rebuilt: our kubeconfig path, plus whatever else it held that is filled in.
    let mut kubernetes = match obj.remove("kubernetes") {
        Some(Value::Object(k)) => k,
        _ => Map::new(),
    };
    kubernetes.retain(|_, v| !holds_placeholder(v));
    kubernetes.insert("kubeconfig".into(), Value::String(kubeconfig.to_string()));
    // Any other top-level value still holding a placeholder (the installer-only `policy` block) is
    // dropped whole: a block with half its fields removed would be worse than none.
    obj.retain(|_, v| !holds_placeholder(v));
    obj.insert("kubernetes".into(), Value::Object(kubernetes));
    for (k, default) in [
        ("cniVersion", DEFAULT_CNI_VERSION),
        ("name", PLUGIN_TYPE),
        ("type", PLUGIN_TYPE),
    ] {
        obj.entry(k)
            .or_insert_with(|| Value::String(default.to_string()));
    }
    Ok(canonical(Value::Object(obj)).to_string())
}

/// Placeholder-looking words in `text`: `__NAME__` with NAME made of upper-case letters, digits and
/// underscores and holding at least one letter (the form `install-cni.sh` substitutes; `__1__` or
/// `______` are not one).
pub fn placeholders(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 1 < b.len() {
        if !(b[i] == b'_' && b[i + 1] == b'_') {
            i += 1;
            continue;
        }
        let start = i + 2;
        let end = start
            + b[start..]
                .iter()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b'_')
                .count();
        // The run is ASCII, so both ends are char boundaries.
        if let Some(name) = text[start..end].strip_suffix("__") {
            if name.bytes().any(|c| c.is_ascii_uppercase()) {
                found.push(&text[i..end]);
            }
        }
        // A later start inside the run would see a suffix of it, which cannot match if it did not.
        i = end.max(i + 1);
    }
    found
}

/// True when a string anywhere inside `v` holds a placeholder.
pub fn holds_placeholder(v: &Value) -> bool {
    match v {
        Value::String(s) => !placeholders(s).is_empty(),
        Value::Array(a) => a.iter().any(holds_placeholder),
        Value::Object(m) => m.values().any(holds_placeholder),
        _ => false,
    }
}

/// Sorts object keys recursively: serde_json keeps insertion order here (`preserve_order`), so the
/// template's key order would otherwise leak into the output.
pub fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> =
                m.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

fn json_escape(value: &str) -> String {
    let quoted = Value::String(value.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[path = "cni_template_tests.rs"]
mod tests;
