//! What the policy cannot do, in one place: each case is a pure predicate on the pod as a
//! matchCondition sees it (the pod alone, no namespace), rendered as the matchCondition that keeps the
//! pod out of the policy, so a later webhook configuration can take exactly those pods with the
//! complementary condition. The decision for them is the webhook's, whole: a pod the policy skips gets
//! nothing from it.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::cel::quote;
use crate::decision::DecisionConfig;
use crate::networks;

/// A pod only the webhook can decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookOnly {
    /// Its networks annotation is a JSON list: CEL in the apiserver has no JSON decoder, so our entry
    /// cannot be merged into it (with NADs only; the auxiliary chain never reads the annotation).
    NetworksJsonList,
}

impl WebhookOnly {
    pub const ALL: [Self; 1] = [Self::NetworksJsonList];

    /// Why, for logs, `check` and the test's report.
    pub fn reason(self) -> &'static str {
        match self {
            Self::NetworksJsonList => {
                "the networks annotation is a JSON list, which CEL cannot decode to merge an entry"
            }
        }
    }

    /// The matchCondition's name (a qualified name).
    pub fn condition_name(self) -> &'static str {
        match self {
            Self::NetworksJsonList => "networks-not-a-json-list",
        }
    }

    fn concerns(self, cfg: &DecisionConfig) -> bool {
        match self {
            Self::NetworksJsonList => cfg.nad.attach.uses_nads(),
        }
    }

    /// True when this case holds for a pod with `annotations`.
    fn holds(self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        match self {
            Self::NetworksJsonList => annotations
                .and_then(|a| a.get(vocab::NETWORKS_ANNOTATION))
                .is_some_and(|value| networks::is_json_list(value)),
        }
    }

    /// CEL that is true when this case does *not* hold: the policy may take the pod.
    fn policy_takes(self) -> String {
        match self {
            // `networks::is_json_list`: the trimmed value starts with '['.
            Self::NetworksJsonList => format!(
                "!object.metadata.?annotations[?{}].orValue('').trim().startsWith('[')",
                quote(vocab::NETWORKS_ANNOTATION)
            ),
        }
    }
}

/// Why only the webhook can decide for a pod with `annotations` under `cfg`; None when the policy
/// decides as the webhook would.
pub fn only_the_webhook_can(
    annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
) -> Option<WebhookOnly> {
    WebhookOnly::ALL
        .into_iter()
        .find(|case| case.concerns(cfg) && case.holds(annotations))
}

/// The policy's matchConditions: one per case that concerns `cfg`, each false for its pods.
pub(super) fn match_conditions(cfg: &DecisionConfig) -> Vec<Value> {
    WebhookOnly::ALL
        .into_iter()
        .filter(|case| case.concerns(cfg))
        .map(|case| json!({ "name": case.condition_name(), "expression": case.policy_takes() }))
        .collect()
}

/// The name of the webhook's matchCondition in policy mode.
pub const WEBHOOK_CONDITION_NAME: &str = "only-what-the-policy-cannot-do";

/// The webhook's matchCondition in policy mode, the complement of the policy's: true for the pods of
/// [`only_the_webhook_can`] under `cfg` (`false` when no case concerns `cfg`), so the webhook sees
/// exactly the pods the policy skips.
pub fn webhook_match_condition(cfg: &DecisionConfig) -> Value {
    let takes: Vec<String> = WebhookOnly::ALL
        .into_iter()
        .filter(|case| case.concerns(cfg))
        .map(|case| format!("({})", case.policy_takes()))
        .collect();
    let expression = if takes.is_empty() {
        "false".to_string()
    } else {
        format!("!({})", takes.join(" && "))
    };
    json!({ "name": WEBHOOK_CONDITION_NAME, "expression": expression })
}
