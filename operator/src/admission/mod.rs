//! The admission path (`--admission`): which of the webhook and the MutatingAdmissionPolicy admits
//! pods, and the objects that make it so. The keeper decides the live path from discovery
//! ([`rules::admission_mode`]), then, as the leader:
//! - policy: applies the policy and binding (and the warning policy and its binding) rendered from the decision's inputs as they are now
//!   (the flags, with the NAD's placement from every node's Multus), owned by the webhook
//!   configuration (`--webhook-config-name`: an uninstall deletes it, and the garbage collector the
//!   policy and binding with it; nothing is applied while it is missing), then, once every enabled
//!   namespace carries the binding's label (the controller labels them), narrows the webhook to the
//!   pods only it can decide (a matchCondition on its entry);
//! - webhook: widens the webhook first (removes that condition), then deletes our policy and binding.
//!
//! Narrowing waits for the labels, and widening comes before the delete, so at no step does an
//! enabled namespace's pod go to neither path. Files: `objects` (I/O), `current` (pure comparisons).

pub mod current;
pub mod objects;

use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::Store;
use kube::Client;
use rules::admission_mode::{self, AdmissionMode, Live};
use rules::admission_policy::{render_selecting, webhook_match_condition, Owner, PolicyApi};
use rules::decision::DecisionConfig;
use rules::multus_node::Placement;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use vocab::report::Chain;

pub use objects::AdmissionError;
use objects::{Kind, WebhookEntry};

use crate::listed::Listed;

/// After an unfinished pass (labels still missing), or a first failure, look again this soon; each
/// further failure in a row doubles it, up to the recheck period (a refusal that lasts, such as
/// missing RBAC, is not retried every 2 s).
const RETRY: Duration = Duration::from_secs(2);

/// The admission path's settings, from the flags.
#[derive(Clone, Debug)]
pub struct AdmissionSettings {
    pub mode: AdmissionMode,
    /// The policy's and binding's name (`--admission-policy-name`, hidden: tests).
    pub policy_name: String,
    /// The value of the namespace label the binding selects (`--admission-label-value`, hidden:
    /// tests sharing an apiserver each select their own namespaces).
    pub label_value: String,
    /// The webhook configuration narrowed while the policy is live (`--webhook-config-name`); None:
    /// the webhook keeps every pod it is configured for.
    pub webhook_config: Option<String>,
    /// What the webhook decides with: the policy is rendered from the same.
    pub decision: DecisionConfig,
    /// How often the objects are checked without a trigger (`--resync`).
    pub recheck: Duration,
}

#[cfg(test)]
impl AdmissionSettings {
    /// The product's names and default decision in `mode`, the configuration named `zz` (unit tests).
    pub(crate) fn for_tests(mode: AdmissionMode) -> Self {
        Self {
            mode,
            policy_name: vocab::ADMISSION_POLICY_NAME.into(),
            label_value: vocab::ADMISSION_NAMESPACE_LABEL_VALUE.into(),
            webhook_config: Some("zz".into()),
            decision: DecisionConfig::default(),
            recheck: Duration::from_secs(300),
        }
    }
}

/// Keeps the admission path; publishes the live path for the controller (namespace labels).
pub struct Keeper {
    client: Client,
    settings: AdmissionSettings,
    placement: watch::Receiver<Placement>,
    is_leader: watch::Receiver<bool>,
    namespaces: Store<Namespace>,
    namespaces_listed: Listed,
    live: watch::Sender<Option<Live>>,
}

/// What a pass left.
#[derive(Debug, PartialEq, Eq)]
enum Pass {
    Done,
    /// Some enabled namespace lacks the label yet: the webhook is not narrowed.
    AwaitLabels,
    /// The webhook configuration that owns the policy is missing (not created yet, or an uninstall
    /// deleted it): nothing is applied, so no policy outlives the product.
    AwaitOwner,
}

impl Keeper {
    pub fn new(
        client: Client,
        settings: AdmissionSettings,
        placement: watch::Receiver<Placement>,
        is_leader: watch::Receiver<bool>,
        (namespaces, namespaces_listed): (Store<Namespace>, Listed),
        live: watch::Sender<Option<Live>>,
    ) -> Self {
        Self {
            client,
            settings,
            placement,
            is_leader,
            namespaces,
            namespaces_listed,
            live,
        }
    }

    /// Runs until `shutdown`: a pass at start, whenever the placement or the leadership changes,
    /// every recheck period, soon again after a failure, and at once when the policy or binding
    /// changes while the policy is live (a hand delete is undone).
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut watching: Option<(PolicyApi, BoxStream<'static, ()>)> = None;
        let mut failures = 0u32;
        loop {
            let wait = match self.pass().await {
                Ok(pass) => {
                    failures = 0;
                    match pass {
                        Pass::Done => self.settings.recheck,
                        Pass::AwaitLabels | Pass::AwaitOwner => RETRY,
                    }
                }
                Err(error) => {
                    let wait = RETRY
                        .saturating_mul(1 << failures.min(16))
                        .min(self.settings.recheck);
                    failures = failures.saturating_add(1);
                    tracing::warn!(error = %Chain(&error), retry_in = ?wait, "admission path: retrying");
                    wait
                }
            };
            let api = match *self.live.borrow() {
                Some(Live::Policy(api)) => Some(api),
                _ => None,
            };
            if watching.as_ref().map(|(w, _)| *w) != api {
                watching = api.map(|api| {
                    let name = &self.settings.policy_name;
                    (api, objects::changes(&self.client, api, name))
                });
            }
            let changed = async {
                match watching.as_mut() {
                    Some((_, changes)) => changes.next().await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
                Ok(()) = self.placement.changed() => {}
                Ok(()) = self.is_leader.changed() => {}
                Some(()) = changed => {}
            }
        }
    }

    async fn pass(&self) -> Result<Pass, AdmissionError> {
        let served = objects::served(&self.client).await?;
        let live = self
            .settings
            .mode
            .resolve(served, self.settings.webhook_config.is_some());
        self.live.send_if_modified(|old| {
            let changed = old.as_ref() != Some(&live);
            if changed {
                tracing::info!(mode = %self.settings.mode, live = %live.describe(), "admission path");
                *old = Some(live.clone());
            }
            changed
        });
        if !*self.is_leader.borrow() {
            return Ok(Pass::Done);
        }
        let cfg = self
            .placement
            .borrow()
            .decision(&self.settings.decision)
            .into_owned();
        let name = &self.settings.policy_name;
        let entry = self
            .settings
            .webhook_config
            .as_deref()
            .map(|config| WebhookEntry {
                config,
                webhook: vocab::WEBHOOK_NAME,
            });
        match live {
            Live::Policy(api) => {
                // `resolve` takes the policy only with a configuration named.
                let Some(entry) = &entry else {
                    return Ok(Pass::Done);
                };
                let config = objects::get_webhook_config(&self.client, entry.config).await?;
                let Some(owner) = config.as_ref().and_then(Owner::of) else {
                    tracing::info!(
                        config = entry.config,
                        "the webhook configuration that owns the admission policy is missing \
                         (not created yet, or uninstalled): the policy is not applied"
                    );
                    return Ok(Pass::AwaitOwner);
                };
                let rendered =
                    render_selecting(&cfg, api, name, &self.settings.label_value).owned_by(&owner);
                for kind in Kind::ALL {
                    objects::apply(&self.client, api, kind, kind.of(&rendered)).await?;
                }
                if !self.every_enabled_namespace_labelled(&live).await {
                    return Ok(Pass::AwaitLabels);
                }
                let condition = webhook_match_condition(&cfg);
                objects::set_webhook_condition(&self.client, entry, Some(&condition)).await?;
            }
            Live::Webhook { .. } => {
                if let Some(entry) = &entry {
                    objects::set_webhook_condition(&self.client, entry, None).await?;
                }
                if let Some(api) = served {
                    for kind in Kind::ALL.into_iter().rev() {
                        objects::delete_ours(&self.client, api, kind, name).await?;
                    }
                }
            }
        }
        Ok(Pass::Done)
    }

    /// True once the namespace watch has listed and every namespace that wants the label has it.
    async fn every_enabled_namespace_labelled(&self, live: &Live) -> bool {
        if !self.namespaces_listed.now() {
            return false;
        }
        let linkerd = &self.settings.decision.nad.linkerd_namespace;
        let missing: Vec<String> = self
            .namespaces
            .state()
            .iter()
            .filter(|ns| !rules::namespaces::is_terminating(ns))
            .filter(|ns| {
                admission_mode::wants_label(&ns.metadata, linkerd, live)
                    && !admission_mode::labelled(&ns.metadata, &self.settings.label_value)
            })
            .filter_map(|ns| ns.metadata.name.clone())
            .collect();
        if !missing.is_empty() {
            tracing::debug!(
                ?missing,
                "the webhook stays whole until these namespaces are labelled"
            );
        }
        missing.is_empty()
    }
}
