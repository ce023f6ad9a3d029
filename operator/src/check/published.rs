//! The pod rows' findings as the repairing leader publishes them, so that `check` need not read every
//! pod of the cluster. At OpenShift's maximums (150,000 pods) that read alone is ~40 s of the
//! apiserver's encoding on the scale bench, where `check`'s goal is 10 s; the leader already holds
//! every pod (repair's store) and folds them through the same [`PodRows`](super::PodRows) every
//! [`EVERY`], writing only what changed (no write while nothing does).
//!
//! `check` trusts them only when they can be neither stale nor someone else's: published by the
//! replica that holds the leader Lease now, that Lease renewed, and folded with `check`'s own
//! settings ([`fingerprint`]). Otherwise, or when a row has more than [`MAX_LINES`] lines, it walks
//! the pods itself, and says why ([`Source::Walk`]). The findings live in the repair state's
//! ConfigMap (`repair/state.rs`) under [`FINDINGS_KEY`], applied by a field manager of their own
//! so that the halts' writer and this one keep each other's keys.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use super::{CheckSettings, PodFindings};
use crate::leader::LeaseConfig;
use crate::repair::state::StateLocation;

/// The ConfigMap key of the findings.
pub const FINDINGS_KEY: &str = "podFindings";
/// How often the leader observes the cluster and folds its pods again.
pub const EVERY: Duration = Duration::from_secs(60);
/// Lines a row may have and still be published (a ConfigMap holds 1 MiB); past it, `check` walks.
pub const MAX_LINES: usize = 500;

/// The field manager of [`FINDINGS_KEY`] alone.
pub fn field_manager() -> String {
    format!("{}-findings", vocab::FIELD_MANAGER)
}

/// Who folded what, with which settings, and what came of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedFindings {
    /// The leader that folded them (its identity in the Lease).
    pub by: String,
    /// [`fingerprint`] of its settings.
    pub settings: String,
    /// The pods it folded (those that can run again).
    pub pods: usize,
    /// When this content was written (the leader folds again every [`EVERY`] and writes only a
    /// change).
    pub at: Timestamp,
    pub outcome: Outcome,
}

/// What the leader's fold came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Outcome {
    #[serde(rename_all = "camelCase")]
    Found {
        stale: Vec<String>,
        uids: Vec<String>,
        waiting: BTreeMap<String, String>,
        nad_users: BTreeMap<String, usize>,
    },
    /// A row had more than [`MAX_LINES`] lines.
    TooMany,
    /// The leader could not observe the cluster (what `check` reads besides the pods).
    Failed { why: String },
}

impl Outcome {
    pub fn of(found: PodFindings) -> Self {
        let PodFindings {
            stale,
            uids,
            waiting,
            nad_users,
        } = found;
        if [stale.len(), uids.len(), waiting.len()]
            .iter()
            .any(|n| *n > MAX_LINES)
        {
            return Self::TooMany;
        }
        Self::Found {
            stale,
            uids,
            waiting,
            nad_users,
        }
    }
}

impl PublishedFindings {
    /// The same findings, whenever written.
    pub fn same_as(&self, other: &Self) -> bool {
        Self {
            at: other.at,
            ..self.clone()
        } == *other
    }

    /// The patch of the repair state's ConfigMap: this key alone.
    pub fn configmap(&self, at: &StateLocation) -> ConfigMap {
        let json = serde_json::to_string(self).unwrap_or_default();
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(at.name.clone()),
                namespace: Some(at.namespace.clone()),
                ..Default::default()
            },
            data: Some([(FINDINGS_KEY.to_string(), json)].into()),
            ..Default::default()
        }
    }

    /// Read back off the ConfigMap: None when it has no findings.
    pub fn from_configmap(cm: &ConfigMap) -> Result<Option<Self>, String> {
        let Some(json) = cm.data.as_ref().and_then(|d| d.get(FINDINGS_KEY)) else {
            return Ok(None);
        };
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| format!("its `{FINDINGS_KEY}` is not what the operator writes: {e}"))
    }
}

/// A digest of the settings the pod rows read (and of this build): the leader's and `check`'s agree
/// when both run with the same flags. FNV-1a of their `Debug` text: stable within a build, which is
/// all it must be (another build's findings are walked over, not misread).
pub fn fingerprint(s: &CheckSettings) -> String {
    let text = format!("{} {s:?}", env!("CARGO_PKG_VERSION"));
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The leader Lease as `check` read it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseSeen {
    pub holder: Option<String>,
    pub renewed: Option<Timestamp>,
    pub seconds: Option<i32>,
}

impl LeaseSeen {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        Self {
            holder: spec.and_then(|s| s.holder_identity.clone()),
            renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            seconds: spec.and_then(|s| s.lease_duration_seconds),
        }
    }
}

/// Where `check`'s pod rows come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The leader's findings, how `check` says so, and how many pods the leader folded.
    Published {
        found: PodFindings,
        note: String,
        pods: usize,
    },
    /// Walk every pod: why the published ones are not used.
    Walk { why: String },
}

/// PURE: whether `check` may use `published`, given the Lease as read at `now`.
pub fn judge(
    published: Result<Option<PublishedFindings>, String>,
    lease: Result<Option<LeaseSeen>, String>,
    fingerprint: &str,
    now: Timestamp,
) -> Source {
    let walk = |why: String| Source::Walk { why };
    let p = match published {
        Err(why) => return walk(format!("cannot read the leader's findings: {why}")),
        Ok(None) => return walk("no leader has published its findings yet".into()),
        Ok(Some(p)) => p,
    };
    let lease = match lease {
        Err(why) => return walk(format!("cannot read the leader Lease: {why}")),
        Ok(None) => return walk("there is no leader Lease".into()),
        Ok(Some(lease)) => lease,
    };
    if lease.holder.as_deref() != Some(p.by.as_str()) {
        let holder = lease.holder.as_deref().unwrap_or("nobody");
        return walk(format!(
            "the findings are {}'s, the Lease is {holder}'s",
            p.by
        ));
    }
    // Twice the Lease's term: a renewal a little late, or clocks a little apart, are not an outage.
    let term = i64::from(lease.seconds.unwrap_or(15).max(1)) * 2;
    let expired = lease
        .renewed
        .is_none_or(|at| at.as_second() + term < now.as_second());
    if expired {
        return walk(format!(
            "the leader {} has not renewed its Lease: the operator may be down",
            p.by
        ));
    }
    if p.settings != fingerprint {
        return walk("the leader runs another build or other settings than this check".into());
    }
    match p.outcome {
        Outcome::TooMany => walk(format!("a row has more than {MAX_LINES} lines")),
        Outcome::Failed { why } => walk(format!("the leader could not observe the cluster: {why}")),
        Outcome::Found {
            stale,
            uids,
            waiting,
            nad_users,
        } => Source::Published {
            found: PodFindings {
                stale,
                uids,
                waiting,
                nad_users,
            },
            note: format!(
                "as the operator's leader {} found them in the {} pod(s) it holds; it looks again \
                 every {} s, and they are unchanged since {:.0}",
                p.by,
                p.pods,
                EVERY.as_secs(),
                p.at
            ),
            pods: p.pods,
        },
    }
}

/// Reads the findings and the Lease, and judges them ([`judge`]).
pub async fn read(client: &Client, s: &CheckSettings, lease: Option<&LeaseConfig>) -> Source {
    let (Some(at), Some(lease)) = (&s.repair_state, lease) else {
        return Source::Walk {
            why:
                "only a repairing leader (--repair-unattached-pods, --leader-elect) publishes them"
                    .into(),
        };
    };
    let published = Api::<ConfigMap>::namespaced(client.clone(), &at.namespace)
        .get_opt(&at.name)
        .await
        .map_err(|e| e.to_string())
        .and_then(|cm| {
            Ok(cm
                .as_ref()
                .map(PublishedFindings::from_configmap)
                .transpose()?
                .flatten())
        });
    let seen = Api::<Lease>::namespaced(client.clone(), &lease.namespace)
        .get_opt(&lease.name)
        .await
        .map(|l| l.as_ref().map(LeaseSeen::of))
        .map_err(|e| e.to_string());
    judge(published, seen, &fingerprint(s), Timestamp::now())
}

/// Applies `findings` to the repair state's ConfigMap (the leader's write).
pub async fn write(
    client: &Client,
    at: &StateLocation,
    findings: &PublishedFindings,
) -> Result<(), kube::Error> {
    let params = PatchParams::apply(&field_manager()).force();
    Api::<ConfigMap>::namespaced(client.clone(), &at.namespace)
        .patch(&at.name, &params, &Patch::Apply(&findings.configmap(at)))
        .await
        .map(|_| ())
}

#[cfg(test)]
#[path = "published_tests.rs"]
mod tests;
