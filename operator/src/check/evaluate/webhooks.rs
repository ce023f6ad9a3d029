//! The webhook lines: every entry calling our path answers a verified TLS handshake, and the
//! order the API server calls mutating webhooks in puts ours after Linkerd's injector.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use rules::namespaces::{want, Want};

use super::{CheckSettings, Observed, Verdict};
use crate::check::probe;
use crate::check::row::Row;

/// A webhook entry that calls our path, and what probing its endpoint gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookProbe {
    /// `<configuration>/<webhook>`.
    pub name: String,
    /// Where it points: a URL, or `service <ns>/<name>:<port>`.
    pub target: String,
    /// Ok when a TLS handshake verified by the entry's caBundle succeeded; else why not.
    pub result: Result<(), String>,
}

/// A MutatingWebhookConfiguration, as far as the order the API server calls them in matters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookConfiguration {
    pub name: String,
    /// An entry calls this webhook's path.
    pub ours: bool,
    /// An entry is Linkerd's proxy injector.
    pub injects_proxy: bool,
}

impl WebhookConfiguration {
    pub fn of(config: &MutatingWebhookConfiguration) -> Self {
        let hooks = || config.webhooks.iter().flatten();
        Self {
            name: config.metadata.name.clone().unwrap_or_default(),
            ours: hooks()
                .any(|h| probe::Target::of(&h.client_config, vocab::WEBHOOK_PATH).is_some()),
            injects_proxy: hooks().any(is_proxy_injector),
        }
    }
}

/// Linkerd's injector by its entry's name (`linkerd-proxy-injector.linkerd.io`; a prefix, so any
/// suffix Linkerd has used) or by its Service's (the entry may have been renamed).
fn is_proxy_injector(hook: &MutatingWebhook) -> bool {
    hook.name.starts_with(vocab::LINKERD_PROXY_INJECTOR)
        || hook
            .client_config
            .service
            .as_ref()
            .is_some_and(|svc| svc.name == vocab::LINKERD_PROXY_INJECTOR)
}

pub(super) fn webhook_verdict(probes: &[WebhookProbe]) -> Verdict {
    const CHECK: Row = Row::Webhook;
    if probes.is_empty() {
        return Verdict::fail(
            CHECK,
            format!(
                "no MutatingWebhookConfiguration calls {}",
                vocab::WEBHOOK_PATH
            ),
            "install the chart (helm install ld-controller ./helm) or config/default",
        );
    }
    let failed: Vec<String> = probes
        .iter()
        .filter_map(|p| {
            p.result
                .as_ref()
                .err()
                .map(|e| format!("{} → {}: {e}", p.name, p.target))
        })
        .collect();
    if failed.is_empty() {
        let names: Vec<String> = probes
            .iter()
            .map(|p| format!("{} → {}", p.name, p.target))
            .collect();
        return Verdict::pass(
            CHECK,
            "the webhook is reachable and its caBundle verifies its certificate",
        )
        .with_items(names);
    }
    Verdict::fail(
        CHECK,
        "the webhook cannot be reached, or its certificate does not verify against the caBundle",
        "check the operator pods and the certificate Secret; with cert-manager, check the CA injector",
    )
    .with_items(failed)
}

/// Linkerd's injector must run before this webhook where OpenShift's SCC admission runs: the API
/// server reruns its built-in mutating plugins (SCC among them) after a webhook changed the pod and
/// before reinvoking earlier webhooks, so the injector's uids are rejected before ours could move them.
pub(super) fn webhook_order_verdict(seen: &Observed, s: &CheckSettings) -> Verdict {
    const CHECK: Row = Row::WebhookOrder;
    let names = |pick: fn(&WebhookConfiguration) -> bool| -> Vec<&str> {
        seen.webhook_configurations
            .iter()
            .filter(|c| pick(c))
            .map(|c| c.name.as_str())
            .collect()
    };
    let ours = names(|c| c.ours);
    let injectors = names(|c| c.injects_proxy);
    // The webhook line already fails for this.
    if ours.is_empty() {
        return Verdict::pass(
            CHECK,
            "no MutatingWebhookConfiguration calls this webhook: no order to check",
        );
    }
    // The API server's order: names compared byte by byte.
    let Some(&last_injector) = injectors.iter().max() else {
        return Verdict::pass(
            CHECK,
            format!(
                "no MutatingWebhookConfiguration injects {} (Linkerd's proxy injector not found): \
                 the order does not matter",
                vocab::PROXY_CONTAINER
            ),
        );
    };
    let early: Vec<(&str, &str)> = ours
        .iter()
        .flat_map(|&o| {
            injectors
                .iter()
                .filter(move |&&i| i > o)
                .map(move |&i| (o, i))
        })
        .collect();
    let Some(&(first_ours, first_injector)) = early.first() else {
        let after: Vec<String> = ours
            .iter()
            .map(|o| format!("{o} runs after {last_injector}"))
            .collect();
        return Verdict::pass(CHECK, after.join("; "));
    };
    let ranged = seen.namespaces.iter().any(|ns| {
        want(ns, &s.decision.nad.linkerd_namespace) == Want::Nad
            && ns
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(&s.decision.uids.range_annotation))
    });
    if !seen.serves_scc && !ranged {
        return Verdict::pass(
            CHECK,
            format!(
                "{first_ours} runs before {first_injector}, which is fine without OpenShift's SCCs: \
                 this webhook is reinvoked after the injector and sets the uids"
            ),
        );
    }
    // An old configuration of ours next to one that already runs last: deleting the old one is enough.
    let late: Vec<&str> = ours
        .iter()
        .copied()
        .filter(|&o| o > last_injector)
        .collect();
    let hint = if late.is_empty() {
        format!(
            "upgrade the chart: its configuration is named zz-<fullname> (e.g. \
             zz-ld-controller-linkerd-multus), runs after Linkerd's injector, and helm deletes the old \
             one; with kustomize, apply config/default again (zz-linkerd-multus) and delete the old one: \
             kubectl delete mutatingwebhookconfiguration linkerd-multus; installed otherwise, recreate it \
             under a name that sorts after {last_injector}"
        )
    } else {
        let mut old: Vec<&str> = early.iter().map(|&(o, _)| o).collect();
        old.dedup();
        format!(
            "{} already calls this webhook after the injector: delete the old configuration(s): \
             kubectl delete mutatingwebhookconfiguration {}",
            late.join(", "),
            old.join(" ")
        )
    };
    let pairs = if early.len() > 1 {
        early
            .iter()
            .map(|(o, i)| format!("{o} runs before {i}"))
            .collect()
    } else {
        Vec::new()
    };
    Verdict::fail(
        CHECK,
        format!(
            "{first_ours} (this webhook) runs before {first_injector} (Linkerd's proxy injector): \
             OpenShift's SCC admission re-admits the pod after the injector, before this webhook is \
             reinvoked, and rejects the injector's proxy and validator uids"
        ),
        hint,
    )
    .with_items(pairs)
}
