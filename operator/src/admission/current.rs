//! PURE: is what the server holds what the operator wants: the policy and binding as rendered (the
//! server adds defaults, so "holds" means every rendered field is there, equal), and the webhook
//! entry's matchCondition of policy mode. Read by the keeper (a write that changes nothing is not
//! sent) and by `check`.

use rules::admission_policy::WEBHOOK_CONDITION_NAME;
use serde_json::Value;

/// True when `live` carries every field of `desired` with its value: objects field by field, lists
/// of the same length item by item, anything else equal. Fields only `live` has (server defaults,
/// metadata) do not matter.
pub fn holds(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => d
            .iter()
            .all(|(key, want)| l.get(key).is_some_and(|have| holds(have, want))),
        (Value::Array(l), Value::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(have, want)| holds(have, want))
        }
        (l, d) => l == d,
    }
}

/// Our matchCondition on the entry `webhook` of the configuration `config`, if it is there.
pub fn webhook_condition<'a>(config: &'a Value, webhook: &str) -> Option<&'a Value> {
    config["webhooks"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == webhook)?["matchConditions"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == WEBHOOK_CONDITION_NAME)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Server defaults and metadata do not make a policy stale; a changed, missing or extra list item
    /// does. Would break if the keeper re-applied on every pass, or missed a changed literal.
    #[test]
    fn holds_ignores_defaults_only() {
        let desired = json!({"spec": {"a": "x", "list": [{"k": 1}]}});
        let defaulted = json!({"metadata": {"uid": "u"},
            "spec": {"a": "x", "list": [{"k": 1, "scope": "*"}], "matchPolicy": "Equivalent"}});
        assert!(holds(&defaulted, &desired));
        for stale in [
            json!({"spec": {"a": "y", "list": [{"k": 1}]}}),
            json!({"spec": {"list": [{"k": 1}]}}),
            json!({"spec": {"a": "x", "list": [{"k": 1}, {"k": 2}]}}),
            json!({"spec": {"a": "x", "list": [{"k": 2}]}}),
        ] {
            assert!(!holds(&stale, &desired), "{stale}");
        }
    }

    #[test]
    fn finds_our_condition_on_the_named_entry_only() {
        let ours = json!({"name": WEBHOOK_CONDITION_NAME, "expression": "false"});
        let config = json!({"webhooks": [
            {"name": "other", "matchConditions": [ours.clone()]},
            {"name": "attach", "matchConditions": [{"name": "theirs", "expression": "true"}]},
        ]});
        assert_eq!(webhook_condition(&config, "attach"), None);
        assert_eq!(webhook_condition(&config, "other"), Some(&ours));
        assert_eq!(webhook_condition(&json!({}), "attach"), None);
    }
}
