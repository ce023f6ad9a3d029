//! The I/O of the admission path: what the server serves (discovery), the policy and binding
//! (server-side apply, delete), and the webhook configuration's matchCondition of policy mode.

use futures::stream::{BoxStream, StreamExt};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use rules::admission_policy::{PolicyApi, Rendered, WEBHOOK_CONDITION_NAME};
use serde_json::{json, Value};

use super::current;
use crate::error::is_not_found;

/// Why a step of the admission path failed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error("cannot read which MutatingAdmissionPolicy versions the server serves (discovery)")]
    Discovery(#[source] kube::Error),
    #[error("cannot {action} {kind} {name}")]
    Write {
        action: &'static str,
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read {kind} {name}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The MutatingAdmissionPolicy version served, preferred first; None when none is. A group version
/// the server does not know answers 404: not served.
pub async fn served(client: &Client) -> Result<Option<PolicyApi>, AdmissionError> {
    for api in PolicyApi::ALL {
        match client.list_api_group_resources(&api.api_version()).await {
            Ok(list) => {
                if list
                    .resources
                    .iter()
                    .any(|r| r.kind == "MutatingAdmissionPolicy")
                {
                    return Ok(Some(api));
                }
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(AdmissionError::Discovery(e)),
        }
    }
    Ok(None)
}

/// The kind of one of the objects the policy path keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Policy,
    Binding,
    /// The ValidatingAdmissionPolicy that gives the webhook's warnings, and its binding.
    WarningPolicy,
    WarningBinding,
}

impl Kind {
    /// In the order they are applied (a binding after its policy); deleted in reverse.
    pub const ALL: [Self; 4] = [
        Self::Policy,
        Self::Binding,
        Self::WarningPolicy,
        Self::WarningBinding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "MutatingAdmissionPolicy",
            Self::Binding => "MutatingAdmissionPolicyBinding",
            Self::WarningPolicy => "ValidatingAdmissionPolicy",
            Self::WarningBinding => "ValidatingAdmissionPolicyBinding",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Self::Policy => "mutatingadmissionpolicies",
            Self::Binding => "mutatingadmissionpolicybindings",
            Self::WarningPolicy => "validatingadmissionpolicies",
            Self::WarningBinding => "validatingadmissionpolicybindings",
        }
    }

    /// The API of this kind where the mutating policy is served as `version`: the warning policy is
    /// always `v1` (served from 1.30, before any MutatingAdmissionPolicy).
    pub fn api(self, client: &Client, version: PolicyApi) -> Api<DynamicObject> {
        let version = match self {
            Self::Policy | Self::Binding => version,
            Self::WarningPolicy | Self::WarningBinding => PolicyApi::V1,
        };
        let res = ApiResource {
            group: PolicyApi::group().to_string(),
            version: version.version().to_string(),
            api_version: version.api_version(),
            kind: self.as_str().to_string(),
            plural: self.plural().to_string(),
        };
        Api::all_with(client.clone(), &res)
    }

    pub fn of(self, rendered: &Rendered) -> &Value {
        match self {
            Self::Policy => &rendered.policy,
            Self::Binding => &rendered.binding,
            Self::WarningPolicy => &rendered.warning_policy,
            Self::WarningBinding => &rendered.warning_binding,
        }
    }
}

/// A tick whenever one of the objects named `name` is written or deleted (by anyone: a hand
/// delete is undone at once, not at the next recheck). Watched by name, so `list`/`watch` can be
/// limited to it. Errors are logged and retried with backoff.
pub fn changes(client: &Client, version: PolicyApi, name: &str) -> BoxStream<'static, ()> {
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let watch = |kind: Kind| {
        watcher(kind.api(client, version), by_name.clone())
            .default_backoff()
            .filter_map(move |event| {
                let tick = match event {
                    // InitDone too: a change between the pass and the watch's (re)list is seen.
                    Ok(
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone,
                    ) => Some(()),
                    Ok(_) => None,
                    Err(error) => {
                        tracing::warn!(kind = kind.as_str(), %error,
                            "cannot watch the admission policy; it is re-checked every --resync");
                        None
                    }
                };
                futures::future::ready(tick)
            })
    };
    futures::stream::select_all(Kind::ALL.map(|kind| watch(kind).boxed())).boxed()
}

/// The object named `name` as served, or None.
pub async fn get(
    client: &Client,
    version: PolicyApi,
    kind: Kind,
    name: &str,
) -> Result<Option<Value>, AdmissionError> {
    let got = kind.api(client, version).get_opt(name).await;
    let read = |source| AdmissionError::Read {
        kind: kind.as_str(),
        name: name.to_string(),
        source,
    };
    let object = got.map_err(read)?;
    Ok(object.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

/// Applies `desired` (of `kind`) unless the served object already holds it; true when written.
pub async fn apply(
    client: &Client,
    version: PolicyApi,
    kind: Kind,
    desired: &Value,
) -> Result<bool, AdmissionError> {
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let live = get(client, version, kind, name).await?;
    if live.as_ref().is_some_and(|l| current::holds(l, desired)) {
        return Ok(false);
    }
    let write = |source| AdmissionError::Write {
        action: "apply",
        kind: kind.as_str(),
        name: name.to_string(),
        source,
    };
    let object: DynamicObject =
        serde_json::from_value(desired.clone()).map_err(|e| write(kube::Error::SerdeError(e)))?;
    // Forced: these fields are ours alone (a hand edit of the policy is undone).
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    kind.api(client, version)
        .patch(name, &params, &Patch::Apply(&object))
        .await
        .map_err(write)?;
    tracing::info!(kind = kind.as_str(), name, "applied");
    Ok(true)
}

/// Deletes the object of `kind` named `name` when it is ours (managed-by label); another's is
/// never touched. True when deleted.
pub async fn delete_ours(
    client: &Client,
    version: PolicyApi,
    kind: Kind,
    name: &str,
) -> Result<bool, AdmissionError> {
    let Some(live) = get(client, version, kind, name).await? else {
        return Ok(false);
    };
    let labels: Option<std::collections::BTreeMap<String, String>> =
        serde_json::from_value(live["metadata"]["labels"].clone()).ok();
    if !vocab::is_managed_by_us(labels.as_ref()) {
        tracing::warn!(
            kind = kind.as_str(),
            name,
            "not labelled as ours: left in place although admission is not through the policy"
        );
        return Ok(false);
    }
    match kind
        .api(client, version)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => {
            tracing::info!(kind = kind.as_str(), name, "deleted");
            Ok(true)
        }
        Err(e) if is_not_found(&e) => Ok(false),
        Err(source) => Err(AdmissionError::Write {
            action: "delete",
            kind: kind.as_str(),
            name: name.to_string(),
            source,
        }),
    }
}

/// The webhook configuration named `config` and its entry `webhook`.
pub struct WebhookEntry<'a> {
    pub config: &'a str,
    pub webhook: &'a str,
}

const MWC: &str = "MutatingWebhookConfiguration";

fn mwc_api(client: &Client) -> Api<DynamicObject> {
    let res = ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: MWC.into(),
        plural: "mutatingwebhookconfigurations".into(),
    };
    Api::all_with(client.clone(), &res)
}

/// The configuration as served, or None.
pub async fn get_webhook_config(
    client: &Client,
    config: &str,
) -> Result<Option<Value>, AdmissionError> {
    let got = mwc_api(client).get_opt(config).await;
    let object = got.map_err(|source| AdmissionError::Read {
        kind: MWC,
        name: config.to_string(),
        source,
    })?;
    Ok(object.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
}

/// Sets (`Some`) or removes (`None`) our matchCondition on the webhook entry, by server-side apply
/// of that one condition: the chart's own conditions and fields stay the chart's. Nothing is sent
/// when the configuration already says so; a missing configuration is left missing (false).
pub async fn set_webhook_condition(
    client: &Client,
    entry: &WebhookEntry<'_>,
    condition: Option<&Value>,
) -> Result<bool, AdmissionError> {
    let Some(live) = get_webhook_config(client, entry.config).await? else {
        return Ok(false);
    };
    if current::webhook_condition(&live, entry.webhook) == condition {
        return Ok(false);
    }
    let mut body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": MWC,
        "metadata": { "name": entry.config },
    });
    if let Some(condition) = condition {
        body["webhooks"] = json!([{ "name": entry.webhook, "matchConditions": [condition] }]);
    }
    let write = |source| AdmissionError::Write {
        action: "apply the matchCondition of",
        kind: MWC,
        name: entry.config.to_string(),
        source,
    };
    let object: DynamicObject =
        serde_json::from_value(body).map_err(|e| write(kube::Error::SerdeError(e)))?;
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    mwc_api(client)
        .patch(entry.config, &params, &Patch::Apply(&object))
        .await
        .map_err(write)?;
    tracing::info!(
        config = entry.config,
        webhook = entry.webhook,
        condition = WEBHOOK_CONDITION_NAME,
        narrowed = condition.is_some(),
        "webhook configuration's matchCondition applied"
    );
    Ok(true)
}
