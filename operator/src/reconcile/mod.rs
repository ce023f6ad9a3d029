//! The I/O shell around the pure decisions (`desired.rs`), one namespace at a time:
//! build the desired NAD config → fetch the NAD that exists → apply the plan → report.
//!
//! Files follow the steps: `context` (settings, client, stores), `built_config` (the NAD config, once
//! per ConfigMap version), `fetch`, `apply`, `report` (Events, logs, metrics), `health` (input
//! health, for the `input_healthy` gauge), `retry` (backoff after a failure) and `recent` (the
//! operator's own writes, remembered until the NAD watch shows them).

mod admission_label;
mod apply;
mod built_config;
mod context;
mod fetch;
mod health;
#[cfg(test)]
pub(crate) mod mock_api;
mod recent;
mod report;
mod retry;

pub use apply::Step;
pub use context::{nad_resource, Context, ReconcileSettings};
pub use health::Health;
pub use recent::RecentWrites;
pub use retry::{backoff, error_policy};

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use crate::desired::{self, Desired, Existing, Plan, Users};
use crate::error::Error;
use rules::namespaces::Want;

/// kube-runtime never times a reconcile out; a request the apiserver never answers would otherwise
/// stall this namespace until the client's 295 s read timeout.
const RECONCILE_TIMEOUT: Duration = Duration::from_secs(20);
/// How soon a NAD kept for pods that still use it is looked at again: the figure between the last
/// such pod's deletion and the NAD's. A metadata list of one namespace each time (see `fetch::users`).
const USERS_RECHECK: Duration = Duration::from_secs(5);

/// Reconciles one namespace's NAD and records the outcome in the metrics.
pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = tokio::time::timeout(RECONCILE_TIMEOUT, reconcile_namespace(&ns, &ctx))
        .await
        .unwrap_or(Err(Error::Timeout(RECONCILE_TIMEOUT)));
    report::outcome(&ctx, started.elapsed(), &result);
    if result.is_ok() {
        ctx.failures.clear(&ns.name_any());
    }
    result
}

/// Reports where pods are attached from (see `report::placement`).
pub async fn report_placement(ctx: &Context, namespaces: &Store<Namespace>) {
    report::placement(ctx, namespaces).await
}

async fn reconcile_namespace(ns: &Namespace, ctx: &Context) -> Result<Action, Error> {
    let name = ns.metadata.name.as_deref().ok_or(Error::UnnamedNamespace)?;
    // The periodic re-check is one stream for all namespaces (`controller::resync_ticks`).
    let resync = Action::await_change();
    // Where pods are attached from is known once every node's Multus is (or cannot be) listed.
    ctx.node_multus_listed.wait().await;
    let shared = ctx.shared();
    // In aux-chain mode no namespace wants one: ours go the opt-out way (deleted once unused).
    let want = ctx.settings.nad.want_placed(ns, shared.as_deref());
    if want == Want::LeaveAlone {
        return Ok(Action::await_change());
    }
    // The policy binding's label first: it does not depend on the CNI ConfigMap.
    if ctx.is_leader() {
        admission_label::sync(ctx, ns, name).await?;
    }
    // Before its first list the ConfigMap store is empty, which would read as "ConfigMap deleted".
    ctx.configmap_listed.wait().await;
    let leader = ctx.is_leader();

    // Build.
    let config = match want {
        Want::Nad => match ctx.build_config() {
            Ok(c) => Some(c),
            Err(e) => {
                if leader {
                    report::config_unavailable(ctx, ns, name, &e).await;
                }
                return Err(e.into());
            }
        },
        _ => None,
    };
    // Followers compute (so their input gauge and logs say what the leader's do) but never write.
    if !leader {
        return Ok(resync);
    }

    // Fetch.
    let existing = match fetch::existing(ctx, name).await {
        Ok(e) => e,
        // Without the CRD there is no NAD to delete.
        Err(Error::CrdMissing(_)) if config.is_none() => return Ok(resync),
        Err(e @ Error::CrdMissing(_)) => {
            let consequence = "Pods here cannot be attached to linkerd-cni until it is installed.";
            report::crd_missing(ctx, ns, &e, Some(consequence)).await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };

    // Apply (and report what cannot be applied).
    match decide_and_write(ctx, ns, name, config.as_deref(), existing).await? {
        Step::WaitForUsers => Ok(Action::requeue(USERS_RECHECK)),
        Step::Done | Step::Raced => Ok(resync),
    }
}

/// Plans from `existing` and carries the plan out. A create that finds the name taken (a NAD that
/// appeared since `existing` was read) plans once more from a live read, so that NAD is judged like
/// any other (foreign: reported, never written into). Public so a test can hand it a stale `existing`.
pub async fn decide_and_write(
    ctx: &Context,
    ns: &Namespace,
    name: &str,
    config: Option<&str>,
    existing: Option<Existing>,
) -> Result<Step, Error> {
    match plan_and_carry_out(ctx, ns, name, config, existing).await? {
        Step::Raced => {
            let existing = fetch::live(ctx, name).await?;
            // Raced again (deleted and recreated meanwhile): that writer's watch event brings us back.
            plan_and_carry_out(ctx, ns, name, config, existing).await
        }
        step => Ok(step),
    }
}

/// Plans (looking up the NAD's users when the plan depends on them) and carries the plan out.
async fn plan_and_carry_out(
    ctx: &Context,
    ns: &Namespace,
    name: &str,
    config: Option<&str>,
    existing: Option<Existing>,
) -> Result<Step, Error> {
    let adopt = ctx.settings.adopt_unowned;
    let shared_here = ctx.shared().as_deref() == Some(name);
    let desired = config.map(|c| Desired::new(c, shared_here, existing.as_ref()));
    let decide = |users: &Users| desired::plan(desired, existing.as_ref(), adopt, users);
    let mut plan = decide(&Users::NotLooked);
    if plan == Plan::FindUsers {
        // A NAD that is or was shared may be referenced from any namespace.
        let anywhere = existing.as_ref().is_some_and(Existing::owned_shared);
        plan = decide(&fetch::users(ctx, name, anywhere).await?);
    }
    apply::carry_out(ctx, ns, name, plan, desired).await
}
