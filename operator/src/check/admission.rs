//! `check`'s admission line: which path is live (`--admission`, decided from discovery as the operator
//! decides it), and whether what that path needs is in place and current: in policy mode the policy and
//! binding as the operator renders them now, every enabled namespace labelled, the webhook narrowed;
//! in webhook mode none of ours left and the webhook not narrowed (its pods would reach neither path).

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use rules::admission_mode::{self, Live};
use rules::admission_policy::{render_selecting, webhook_match_condition, Owner, PolicyApi};
use rules::decision::DecisionConfig;
use serde_json::Value;

use super::Verdict;
use crate::admission::objects::{self, Kind};
use crate::admission::{current, AdmissionSettings};
use crate::check::row::Row;

const CHECK: Row = Row::Admission;

/// What `check` read for the line; each Err says why it could not be read.
#[derive(Clone, Debug)]
pub struct AdmissionSeen {
    pub served: Result<Option<PolicyApi>, String>,
    pub policy: Result<Option<Value>, String>,
    pub binding: Result<Option<Value>, String>,
    pub warning_policy: Result<Option<Value>, String>,
    pub warning_binding: Result<Option<Value>, String>,
    /// The webhook configuration (`--webhook-config-name`), when named.
    pub webhook_config: Result<Option<Value>, String>,
}

impl AdmissionSeen {
    /// Each object of the policy path, by kind.
    fn objects(&self) -> [(Kind, &Result<Option<Value>, String>); 4] {
        [
            (Kind::Policy, &self.policy),
            (Kind::Binding, &self.binding),
            (Kind::WarningPolicy, &self.warning_policy),
            (Kind::WarningBinding, &self.warning_binding),
        ]
    }
}

/// Reads discovery, our policies and bindings (where served) and the webhook configuration.
pub async fn observe(client: &Client, s: &AdmissionSettings) -> AdmissionSeen {
    let text = |e: objects::AdmissionError| vocab::report::chain(&e);
    let served = objects::served(client).await.map_err(text);
    let api = served.as_ref().ok().copied().flatten();
    let read = |kind| async move {
        match api {
            Some(api) => objects::get(client, api, kind, &s.policy_name)
                .await
                .map_err(text),
            None => Ok(None),
        }
    };
    let policy = read(Kind::Policy).await;
    let binding = read(Kind::Binding).await;
    let warning_policy = read(Kind::WarningPolicy).await;
    let warning_binding = read(Kind::WarningBinding).await;
    let webhook_config = match &s.webhook_config {
        Some(name) => objects::get_webhook_config(client, name)
            .await
            .map_err(text),
        None => Ok(None),
    };
    AdmissionSeen {
        served,
        policy,
        binding,
        warning_policy,
        warning_binding,
        webhook_config,
    }
}

/// The line. `cfg` is the decision with the NAD's placement as the operator computes it now.
pub fn verdict(
    seen: &AdmissionSeen,
    s: &AdmissionSettings,
    cfg: &DecisionConfig,
    namespaces: &[Namespace],
) -> Verdict {
    let served = match &seen.served {
        Ok(served) => *served,
        Err(why) => {
            return Verdict::fail(
                CHECK,
                format!("cannot tell which admission path is live: {why}"),
                "check that discovery (/apis) answers",
            )
        }
    };
    let live = s.mode.resolve(served, s.webhook_config.is_some());
    let mode = s.mode.as_str();
    let condition = match &seen.webhook_config {
        Ok(Some(config)) => Ok(current::webhook_condition(config, vocab::WEBHOOK_NAME).cloned()),
        Ok(None) => Err("not found"),
        Err(_) => Err("unreadable"),
    };
    let mut problems = Vec::new();
    let mut items = Vec::new();
    match &live {
        Live::Webhook { why } => {
            if s.mode == admission_mode::AdmissionMode::Policy {
                problems.push(format!("the policy cannot be live: {why}"));
            }
            for (kind, object) in seen.objects() {
                if matches!(object, Ok(Some(_))) {
                    problems.push(format!(
                        "{} {} is still there while the webhook is live",
                        kind.as_str(),
                        s.policy_name
                    ));
                }
            }
            if matches!(condition, Ok(Some(_))) {
                problems.push(
                    "the webhook is narrowed to what the policy cannot do, but the policy is not \
                     live: pods of enabled namespaces reach neither"
                        .into(),
                );
            }
        }
        Live::Policy(api) => {
            let unowned = render_selecting(cfg, *api, &s.policy_name, &s.label_value);
            // Owned by the configuration as served (a missing one is named below).
            let owner = match &seen.webhook_config {
                Ok(Some(config)) => Owner::of(config),
                _ => None,
            };
            let desired = match &owner {
                Some(owner) => unowned.clone().owned_by(owner),
                None => unowned.clone(),
            };
            for (kind, object) in seen.objects() {
                let name = &s.policy_name;
                match object {
                    Ok(Some(live))
                        if current::holds(live, kind.of(&unowned))
                            && !current::holds(live, kind.of(&desired)) =>
                    {
                        problems.push(format!(
                            "{} {name} is not owned by the webhook configuration {}: an uninstall \
                             would leave it attaching pods to a NAD that is gone",
                            kind.as_str(),
                            owner.as_ref().map_or("", |o| o.name.as_str())
                        ))
                    }
                    Ok(Some(live)) if current::holds(live, kind.of(&desired)) => {
                        let generation = live["metadata"]["generation"].as_i64().unwrap_or(0);
                        items.push(format!(
                            "{} {name}: current (generation {generation})",
                            kind.as_str()
                        ));
                    }
                    Ok(Some(_)) => problems.push(format!(
                        "{} {name} is not what the operator renders now (stale)",
                        kind.as_str()
                    )),
                    Ok(None) => problems.push(format!("{} {name} is missing", kind.as_str())),
                    Err(why) => problems.push(why.clone()),
                }
            }
            let linkerd = &cfg.nad.linkerd_namespace;
            let unlabelled: Vec<String> = namespaces
                .iter()
                .filter(|ns| !rules::namespaces::is_terminating(ns))
                .filter(|ns| {
                    admission_mode::wants_label(&ns.metadata, linkerd, &live)
                        && !admission_mode::labelled(&ns.metadata, &s.label_value)
                })
                .filter_map(|ns| ns.metadata.name.clone())
                .collect();
            if !unlabelled.is_empty() {
                problems.push(format!(
                    "enabled namespaces without the label {}: the policy does not see their pods",
                    vocab::ADMISSION_NAMESPACE_LABEL
                ));
                items.extend(unlabelled.iter().map(|ns| format!("unlabelled: {ns}")));
            }
            let wanted = webhook_match_condition(cfg);
            match (&s.webhook_config, condition) {
                (None, _) => items.push(
                    "the webhook is not narrowed (no --webhook-config-name): it still takes every \
                     pod it is configured for"
                        .into(),
                ),
                (Some(_), Ok(Some(c))) if c == wanted => {
                    items.push("the webhook takes only what the policy cannot do".into())
                }
                (Some(name), Ok(Some(_))) => problems.push(format!(
                    "the matchCondition of {name} is not the complement of the policy's (stale)"
                )),
                (Some(name), Ok(None)) => problems.push(format!(
                    "{name} is not narrowed yet: with the operator down, its pods wait"
                )),
                (Some(name), Err(why)) => {
                    problems.push(format!("webhook configuration {name}: {why}"))
                }
            }
        }
    }
    let message = format!("{mode}: live is {}", live.describe());
    if problems.is_empty() {
        Verdict::pass(CHECK, message).with_items(items)
    } else {
        Verdict::fail(
            CHECK,
            format!("{message}; {}", problems.join("; ")),
            "the operator's leader keeps these (is it running and Ready? its log says `admission \
             path`); it re-applies them every --resync and whenever the NAD's placement changes",
        )
        .with_items(items)
    }
}

#[cfg(test)]
mod tests {

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use rules::admission_mode::AdmissionMode;
    use serde_json::json;

    use super::*;

    fn settings(mode: AdmissionMode) -> AdmissionSettings {
        AdmissionSettings::for_tests(mode)
    }

    fn namespace(labelled: bool) -> Namespace {
        let label = (
            vocab::ADMISSION_NAMESPACE_LABEL.to_string(),
            vocab::ADMISSION_NAMESPACE_LABEL_VALUE.to_string(),
        );
        Namespace {
            metadata: ObjectMeta {
                name: Some("apps".into()),
                annotations: Some(
                    [(
                        vocab::MULTUS_ANNOTATION.into(),
                        vocab::MULTUS_ENABLED.into(),
                    )]
                    .into(),
                ),
                labels: labelled.then(|| [label].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn config(condition: Option<Value>) -> Value {
        let conditions: Vec<Value> = condition.into_iter().collect();
        json!({"metadata": {"name": "zz", "uid": "u-zz"},
               "webhooks": [{"name": vocab::WEBHOOK_NAME, "matchConditions": conditions}]})
    }

    /// Everything in place as the operator renders it now.
    fn policy_live() -> AdmissionSeen {
        let cfg = DecisionConfig::default();
        let owner = Owner::of(&config(None)).expect("an owner");
        let r = rules::admission_policy::render_named(
            &cfg,
            PolicyApi::V1Beta1,
            vocab::ADMISSION_POLICY_NAME,
        )
        .owned_by(&owner);
        AdmissionSeen {
            served: Ok(Some(PolicyApi::V1Beta1)),
            policy: Ok(Some(r.policy)),
            binding: Ok(Some(r.binding)),
            warning_policy: Ok(Some(r.warning_policy)),
            warning_binding: Ok(Some(r.warning_binding)),
            webhook_config: Ok(Some(config(Some(webhook_match_condition(&cfg))))),
        }
    }

    /// The line passes only when the live path has what it needs, and names what is missing or stale:
    /// would break if `check` passed a policy path that leaves pods to neither (a stale or missing
    /// object, an unlabelled enabled namespace, a webhook narrowed without a policy).
    #[test]
    fn the_line_judges_the_live_path() {
        let cfg = DecisionConfig::default();
        let ok = |seen: &AdmissionSeen, mode, labelled| {
            let v = verdict(seen, &settings(mode), &cfg, &[namespace(labelled)]);
            (v.ok, v.message)
        };
        let (pass, message) = ok(&policy_live(), AdmissionMode::Auto, true);
        assert!(pass, "{message}");
        assert!(message.contains("v1beta1"), "{message}");

        let (pass, message) = ok(&policy_live(), AdmissionMode::Auto, false);
        assert!(!pass && message.contains("without the label"), "{message}");

        let mut stale = policy_live();
        stale.policy.as_mut().unwrap().as_mut().unwrap()["spec"]["variables"] = json!([]);
        let (pass, message) = ok(&stale, AdmissionMode::Policy, true);
        assert!(!pass && message.contains("stale"), "{message}");

        let mut unowned = policy_live();
        let policy = unowned.policy.as_mut().unwrap().as_mut().unwrap();
        policy["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        let (pass, message) = ok(&unowned, AdmissionMode::Auto, true);
        assert!(!pass && message.contains("not owned"), "{message}");

        let mut missing = policy_live();
        missing.binding = Ok(None);
        let (pass, message) = ok(&missing, AdmissionMode::Auto, true);
        assert!(!pass && message.contains("Binding"), "{message}");

        let mut wide = policy_live();
        wide.webhook_config = Ok(Some(config(None)));
        let (pass, message) = ok(&wide, AdmissionMode::Auto, true);
        assert!(!pass && message.contains("not narrowed"), "{message}");

        // Webhook live: nothing of ours may be left, and the webhook may not be narrowed.
        let plain = AdmissionSeen {
            served: Ok(None),
            policy: Ok(None),
            binding: Ok(None),
            warning_policy: Ok(None),
            warning_binding: Ok(None),
            webhook_config: Ok(Some(config(None))),
        };
        assert!(ok(&plain, AdmissionMode::Auto, false).0);
        let (pass, message) = ok(&plain, AdmissionMode::Policy, false);
        assert!(!pass && message.contains("cannot be live"), "{message}");
        let (pass, message) = ok(&policy_live(), AdmissionMode::Webhook, true);
        assert!(!pass && message.contains("reach neither"), "{message}");
        assert!(message.contains("still there"), "{message}");
    }
}
