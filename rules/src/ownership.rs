//! PURE: whose a NAD of our name is. What the operator creates carries the managed-by label
//! ([`vocab::is_managed_by_us`]); an unlabelled linkerd-cni NAD (the Go operator's) may be adopted.

use std::collections::BTreeMap;

/// No manager claims it (no managed-by label, whatever its value) and its config is a JSON object
/// whose `type` is the linkerd-cni plugin. A conflist, another plugin, or a NAD another tool labels
/// as its own is never adoptable.
pub fn is_adoptable(labels: Option<&BTreeMap<String, String>>, config: Option<&str>) -> bool {
    let claimed = labels.is_some_and(|l| l.contains_key(vocab::MANAGED_BY_LABEL));
    let plugin_type = config
        .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
    !claimed && plugin_type.as_deref() == Some(vocab::PLUGIN_TYPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a NAD nobody claims whose config's top-level `type` is linkerd-cni may be adopted.
    #[test]
    fn which_nads_are_adoptable() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let go = r#"{"cniVersion":"0.3.0","name":"linkerd-cni","type":"linkerd-cni"}"#;
        let cases = [
            (None, Some(go), true),
            (Some(labels(&[("team", "a")])), Some(go), true),
            (
                Some(labels(&[(vocab::MANAGED_BY_LABEL, "helm")])),
                Some(go),
                false,
            ),
            (
                Some(labels(&[(vocab::MANAGED_BY_LABEL, "")])),
                Some(go),
                false,
            ),
            (
                None,
                Some(r#"{"type":"macvlan","name":"linkerd-cni"}"#),
                false,
            ),
            (None, Some(r#"{"type":"Linkerd-CNI"}"#), false),
            (
                None,
                Some(r#"{"cniVersion":"0.3.1","plugins":[{"type":"linkerd-cni"}]}"#),
                false,
            ),
            (None, Some("{not json"), false),
            (None, None, false),
        ];
        for (l, config, want_) in cases {
            assert_eq!(is_adoptable(l.as_ref(), config), want_, "{l:?} {config:?}");
        }
    }
}
