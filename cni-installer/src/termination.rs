//! SIGTERM in `none` and `aux-chain` modes: an uninstall, or a rollout?
//!
//! A rolling update, a node drain and `helm uninstall` all end with SIGTERM. A rollout must keep the
//! chain file, the plugin's kubeconfig and the binary (pods scheduled before the next installer runs
//! need them); an uninstall must remove them, or the chain file names a plugin whose credential is
//! gone and, in `aux-chain` mode, stays in every pod's path. The installer asks the apiserver, with
//! its own credential and a short bound ([`BOUND`], well under the chart's 30 s grace period), about
//! the DaemonSet that owns its pod, found through its own Pod's controller ownerReference (POD_NAME
//! and POD_NAMESPACE, which the chart and the kustomize base already set, so no name to keep in sync
//! and the owner's uid to compare with).
//!
//! Uninstall: the DaemonSet is gone, being deleted, or another one of the same name (deleted and
//! created anew); or the apiserver refuses the installer's own credential (401/403): `helm uninstall`
//! deletes the DaemonSet, its RBAC and its ServiceAccount at once, so by SIGTERM time the credential
//! is often refused already. Keep: the DaemonSet is in place (rollout, drain, restart), or the
//! apiserver cannot be asked (the plugin's fail-open covers a leftover in `aux-chain` mode).
//!
//! One refusal is not an uninstall: the pod's own token is bound to the pod, so `kubectl delete pod
//! --force` makes the apiserver refuse it (401) while everything else stays (seen on the node: the
//! force-deleted installer removed the chain file). On a 401 the same question is asked again with
//! the plugin's token, which is bound to no pod (TokenRequest mode): its pod gone means a force
//! delete; the plugin's account or RBAC refused too means an uninstall. PURE: [`decide`] and the
//! readers of API objects and errors; the shell [`observe`] makes the reads.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::args::Settings;
use crate::credential;

/// The whole question, both reads included: well under `terminationGracePeriodSeconds` (30 s).
pub const BOUND: Duration = Duration::from_secs(5);
/// Per connection and per read.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What the apiserver said about this installer's pod and its DaemonSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// POD_NAME or POD_NAMESPACE is not set: there is nothing to ask about.
    NoOwnPod,
    /// The installer's own credential could not be put together (its service-account files).
    NoCredential(String),
    /// The apiserver refused the installer's own credential reading `what`.
    Refused {
        what: String,
        code: u16,
        message: String,
    },
    /// No answer (network, timeout).
    Unreachable { what: String, error: String },
    /// Any other failure (a 5xx, a body that does not parse).
    Failed { what: String, error: String },
    /// This pod is not in the API (deleted with `--force`): its owner cannot be found.
    PodGone { pod: String },
    /// This pod has no DaemonSet as its controller (started by hand).
    NotOwned { pod: String },
    /// The DaemonSet this pod's ownerReference names (`name`, uid `owner_uid`): `None` when it is gone.
    DaemonSet {
        name: String,
        owner_uid: String,
        found: Option<DaemonSetState>,
    },
    /// The installer's own token was refused with 401 (`own`, a [`Seen::Refused`]), and the question
    /// was asked again with the plugin's token, bound to no pod (`plugin`).
    AskedAgain { own: Box<Seen>, plugin: Box<Seen> },
}

/// The DaemonSet as read now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSetState {
    pub uid: String,
    /// It has a deletionTimestamp (foreground deletion waits for its pods).
    pub deleting: bool,
}

/// What SIGTERM does, with the reason logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Uninstall(String),
    Keep(String),
}

/// Decides from what was seen.
pub fn decide(seen: &Seen) -> Verdict {
    let cannot_ask = "so this is taken for a rollout or a restart";
    match seen {
        Seen::NoOwnPod => Verdict::Keep(format!(
            "POD_NAME and POD_NAMESPACE are not set, so the installer cannot ask whether its \
             DaemonSet is deleted; {cannot_ask}"
        )),
        Seen::NoCredential(why) => Verdict::Keep(format!(
            "the installer's own credential cannot be read ({why}); {cannot_ask}"
        )),
        Seen::Refused {
            what,
            code,
            message,
        } => Verdict::Uninstall(format!(
            "the apiserver refuses this installer's own credential reading {what} ({code}: \
             {message}): its ServiceAccount or RBAC is deleted, which only an uninstall does"
        )),
        Seen::Unreachable { what, error } => Verdict::Keep(format!(
            "the apiserver cannot be reached to read {what} ({error}); {cannot_ask} (if it is an \
             uninstall, the plugin passes pods through in the auxiliary chain, and \
             `linkerd-cni-install --uninstall` removes the files)"
        )),
        Seen::Failed { what, error } => {
            Verdict::Keep(format!("reading {what} failed ({error}); {cannot_ask}"))
        }
        Seen::PodGone { pod } => Verdict::Keep(format!(
            "this installer pod {pod} is no longer in the API (deleted with --force?), so its \
             DaemonSet is unknown; {cannot_ask}"
        )),
        Seen::NotOwned { pod } => Verdict::Keep(format!(
            "this installer pod {pod} is not owned by a DaemonSet; {cannot_ask}"
        )),
        Seen::DaemonSet {
            name, found: None, ..
        } => Verdict::Uninstall(format!("its DaemonSet {name} is deleted")),
        Seen::DaemonSet {
            name,
            found: Some(ds),
            ..
        } if ds.deleting => Verdict::Uninstall(format!("its DaemonSet {name} is being deleted")),
        Seen::DaemonSet {
            name,
            owner_uid,
            found: Some(ds),
        } if ds.uid != *owner_uid => Verdict::Uninstall(format!(
            "its DaemonSet {name} was deleted (this pod's owner had uid {owner_uid}; the one there \
             now, uid {}, is another installation's)",
            ds.uid
        )),
        Seen::DaemonSet { name, .. } => Verdict::Keep(format!(
            "its DaemonSet {name} is in place: a rollout, a node drain or a restart"
        )),
        Seen::AskedAgain { own, plugin } => match plugin.as_ref() {
            Seen::PodGone { pod } => Verdict::Keep(format!(
                "the apiserver refuses this installer's own token (401) because its pod {pod} is \
                 gone (read with the plugin's token): a pod's token dies with the pod, so the pod \
                 was deleted with --force, which is no uninstall"
            )),
            // The second read could not be made: the refusal stands.
            Seen::NoCredential(_) | Seen::Unreachable { .. } | Seen::Failed { .. } => decide(own),
            answered => decide(answered),
        },
    }
}

/// Whether this is the refusal a force-deleted pod's bound token meets, worth asking again.
fn refused_token(seen: &Seen) -> bool {
    matches!(seen, Seen::Refused { code: 401, .. })
}

/// The DaemonSet controlling `pod` (its controller ownerReference), as (name, uid).
pub fn owner_of(pod: &Pod) -> Option<(String, String)> {
    pod.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| {
            o.controller == Some(true)
                && o.kind == "DaemonSet"
                && o.api_version.split('/').next() == Some("apps")
        })
        .map(|o| (o.name.clone(), o.uid.clone()))
}

pub fn state_of(ds: &DaemonSet) -> DaemonSetState {
    DaemonSetState {
        uid: ds.metadata.uid.clone().unwrap_or_default(),
        deleting: ds.metadata.deletion_timestamp.is_some(),
    }
}

/// A failed read of `what`; `None` for a 404 (the caller says what is gone).
pub fn from_error(what: &str, e: &kube::Error) -> Option<Seen> {
    let what = what.to_string();
    Some(match e {
        kube::Error::Api(status) if status.code == 404 => return None,
        kube::Error::Api(status) if matches!(status.code, 401 | 403) => Seen::Refused {
            what,
            code: status.code,
            message: status.message.clone(),
        },
        kube::Error::Api(status) => Seen::Failed {
            what,
            error: format!("{}: {}", status.code, status.message),
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => Seen::Unreachable {
            what,
            error: vocab::report::chain(e),
        },
        other => Seen::Failed {
            what,
            error: vocab::report::chain(other),
        },
    })
}

/// Asks the apiserver, within [`BOUND`] in all: with the installer's own credential, and on a 401
/// again with `plugin_token` (the plugin's token, bound to no pod) when there is one.
pub async fn observe(settings: &Settings, plugin_token: Option<&str>) -> Seen {
    let Some(own) = &settings.own_pod else {
        return Seen::NoOwnPod;
    };
    let ask = async {
        let seen = lookup(
            credential::installer_config(settings).await,
            &own.namespace,
            &own.name,
        )
        .await;
        match plugin_token {
            Some(token) if refused_token(&seen) => {
                let plugin = lookup(
                    credential::config_with_token(settings, token).await,
                    &own.namespace,
                    &own.name,
                )
                .await;
                Seen::AskedAgain {
                    own: Box::new(seen),
                    plugin: Box::new(plugin),
                }
            }
            _ => seen,
        }
    };
    match tokio::time::timeout(BOUND, ask).await {
        Ok(seen) => seen,
        Err(_) => Seen::Unreachable {
            what: format!("pod {}/{} and its DaemonSet", own.namespace, own.name),
            error: format!("no answer within {BOUND:?}"),
        },
    }
}

async fn lookup(
    config: Result<kube::Config, crate::error::InstallError>,
    namespace: &str,
    name: &str,
) -> Seen {
    let client = match config {
        Ok(mut config) => {
            config.connect_timeout = Some(CONNECT_TIMEOUT);
            config.read_timeout = Some(READ_TIMEOUT);
            match kube::Client::try_from(config) {
                Ok(client) => client,
                Err(e) => return Seen::NoCredential(vocab::report::chain(&e)),
            }
        }
        Err(e) => return Seen::NoCredential(vocab::report::chain(&e)),
    };
    let pod_ref = format!("pod {namespace}/{name}");
    let pod = match Api::<Pod>::namespaced(client.clone(), namespace)
        .get(name)
        .await
    {
        Ok(pod) => pod,
        Err(e) => {
            return from_error(&pod_ref, &e).unwrap_or(Seen::PodGone {
                pod: format!("{namespace}/{name}"),
            })
        }
    };
    let Some((ds_name, owner_uid)) = owner_of(&pod) else {
        return Seen::NotOwned {
            pod: format!("{namespace}/{name}"),
        };
    };
    let shown = format!("{namespace}/{ds_name}");
    match Api::<DaemonSet>::namespaced(client, namespace)
        .get(&ds_name)
        .await
    {
        Ok(ds) => Seen::DaemonSet {
            name: shown,
            owner_uid,
            found: Some(state_of(&ds)),
        },
        Err(e) => from_error(&format!("daemonset {shown}"), &e).unwrap_or(Seen::DaemonSet {
            name: shown,
            owner_uid,
            found: None,
        }),
    }
}

#[cfg(test)]
#[path = "termination_tests.rs"]
mod tests;
