//! The node agent the operator owns (`--node-agent=NAME`): the linkerd-cni installer DaemonSet and
//! linkerd-cni's ConfigMap, kept from the cluster-scoped NodeAgent of that name. The path an OLM
//! bundle takes (it cannot carry a DaemonSet); the chart renders the same objects itself with
//! `cni.enabled` (helm's install, upgrade, rollback and uninstall drills stay on that path).
//!
//! Only the leader writes. A pass: read the NodeAgent (none: nothing to do; what it owned goes with
//! it, by the garbage collector) → render (pure, `render.rs`) → apply each object with server-side
//! apply, unless the served one already holds it (idle writes nothing) and never over an object the
//! operator did not create → read the DaemonSet and its pods → judge the status (pure, `status.rs`)
//! and write it only when it changed. A NodeAgent of another name gets nothing: several operators
//! (test runs, or a second install) may share a cluster, and each answers for its own name alone.
//!
//! The installer's ServiceAccounts and RBAC are not the operator's: they ship as static manifests
//! (the chart renders them with `cni.enabled` or `nodeAgent.enabled`; a bundle carries them as RBAC
//! manifests). Creating them would need RBAC `escalate`/`bind`, or the operator holding every right it
//! grants the installer (NodeMultus writes, minting the plugin's tokens), for names that never change.

pub mod render;
pub mod status;

use std::time::Duration;

use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use linkerd_multus_crds::NodeAgent;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use vocab::report::Chain;

use crate::admission::current::holds;
pub use render::{AgentSettings, RenderError, Rendered};
use status::{Blocked, Observed};

/// First retry after a failed pass (doubled per failure, up to the recheck period).
const RETRY: Duration = Duration::from_secs(1);

/// Why a pass failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum NodeAgentError {
    #[error("reading {what}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Apply(String),
    #[error("writing the status of NodeAgent {name}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The one writer of a NodeAgent's objects and status.
pub struct NodeAgentKeeper {
    client: Client,
    settings: AgentSettings,
    recheck: Duration,
    is_leader: watch::Receiver<bool>,
}

impl NodeAgentKeeper {
    pub fn new(
        client: Client,
        settings: AgentSettings,
        recheck: Duration,
        is_leader: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            settings,
            recheck,
            is_leader,
        }
    }

    /// Runs until `shutdown`: a pass at start, on every change of the NodeAgent, its DaemonSet,
    /// ConfigMap or installer pods, on a change of leadership, every recheck period, and soon again
    /// after a failure.
    pub async fn run(mut self, shutdown: CancellationToken) {
        tracing::info!(
            node_agent = %self.settings.name,
            daemonset = %format!("{}/{}", self.settings.cni_namespace, self.settings.daemonset_name()),
            "node agent: keeping the installer DaemonSet of this NodeAgent"
        );
        let mut changes = self.changes();
        let mut failures = 0u32;
        loop {
            let wait = if *self.is_leader.borrow() {
                match self.pass().await {
                    Ok(()) => {
                        failures = 0;
                        self.recheck
                    }
                    Err(error) => {
                        let wait = RETRY
                            .saturating_mul(1 << failures.min(16))
                            .min(self.recheck);
                        failures = failures.saturating_add(1);
                        tracing::warn!(error = %Chain(&error), retry_in = ?wait, "node agent: retrying");
                        wait
                    }
                }
            } else {
                self.recheck
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
                Ok(()) = self.is_leader.changed() => {}
                Some(()) = changes.next() => {
                    // A burst (a rollout touches every pod) makes one pass.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    while let Some(Some(())) = changes.next().now_or_never() {}
                }
            }
        }
    }

    /// Ticks on any change of what a pass reads.
    fn changes(&self) -> BoxStream<'static, ()> {
        let selector = selector_string(&self.settings);
        let ns = &self.settings.cni_namespace;
        let client = &self.client;
        let by_name =
            watcher::Config::default().fields(&format!("metadata.name={}", self.settings.name));
        let by_label = watcher::Config::default().labels(&selector);
        // By name: the chart's RBAC grants the DaemonSet by name.
        let by_ds_name = watcher::Config::default()
            .fields(&format!("metadata.name={}", self.settings.daemonset_name()));
        let by_cm_name = watcher::Config::default()
            .fields(&format!("metadata.name={}", self.settings.cni_configmap));
        fn ticks<K>(
            api: Api<PartialObjectMeta<K>>,
            config: watcher::Config,
            what: &'static str,
        ) -> BoxStream<'static, ()>
        where
            K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
            K::DynamicType: Default,
        {
            watcher(api, config)
                .default_backoff()
                .filter_map(move |event| {
                    let tick = match event {
                        Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                            Some(())
                        }
                        Ok(_) => None,
                        Err(error) => {
                            tracing::warn!(what, %error, "node agent: cannot watch; re-checked every --resync");
                            None
                        }
                    };
                    futures::future::ready(tick)
                })
                .boxed()
        }
        futures::stream::select_all([
            ticks(
                Api::<PartialObjectMeta<NodeAgent>>::all(client.clone()),
                by_name,
                "nodeagents",
            ),
            ticks(
                Api::<PartialObjectMeta<DaemonSet>>::namespaced(client.clone(), ns),
                by_ds_name,
                "daemonsets",
            ),
            ticks(
                Api::<PartialObjectMeta<Pod>>::namespaced(client.clone(), ns),
                by_label,
                "pods",
            ),
            ticks(
                Api::<PartialObjectMeta<ConfigMap>>::namespaced(client.clone(), ns),
                by_cm_name,
                "configmaps",
            ),
        ])
        .boxed()
    }

    async fn pass(&self) -> Result<(), NodeAgentError> {
        let name = &self.settings.name;
        let agents = Api::<NodeAgent>::all(self.client.clone());
        let read = |what: String| move |source| NodeAgentError::Read { what, source };
        let Some(agent) = agents
            .get_opt(name)
            .await
            .map_err(read(format!("NodeAgent {name}")))?
        else {
            return Ok(());
        };
        let blocked = match render::render(&agent, &self.settings) {
            Ok(rendered) => self.apply_all(&rendered).await?,
            Err(error) => {
                tracing::warn!(node_agent = %name, error = %Chain(&error), "node agent: spec renders nothing");
                Some(Blocked::InvalidSpec(Chain(&error).to_string()))
            }
        };
        let ns = &self.settings.cni_namespace;
        let ds_name = self.settings.daemonset_name();
        let daemonset = Api::<DaemonSet>::namespaced(self.client.clone(), ns)
            .get_opt(&ds_name)
            .await
            .map_err(read(format!("DaemonSet {ns}/{ds_name}")))?
            .filter(|ds| ours(ds.meta().labels.as_ref()));
        let pods = Api::<Pod>::namespaced(self.client.clone(), ns)
            .list(&ListParams::default().labels(&selector_string(&self.settings)))
            .await
            .map_err(read(format!("the installer pods in {ns}")))?
            .items;
        let retry = match &blocked {
            Some(Blocked::ApplyFailed(why)) => Some(NodeAgentError::Apply(why.clone())),
            _ => None,
        };
        let observed = Observed {
            generation: agent.metadata.generation,
            blocked,
            daemonset: daemonset.as_ref(),
            pods: &pods,
        };
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let judged = status::judge(&observed, agent.status.as_ref(), &now);
        if agent.status.as_ref() != Some(&judged) {
            self.write_status(&agents, &judged).await?;
        }
        // A failed write is retried soon, after the status said it.
        retry.map_or(Ok(()), Err)
    }

    async fn write_status(
        &self,
        agents: &Api<NodeAgent>,
        judged: &linkerd_multus_crds::NodeAgentStatus,
    ) -> Result<(), NodeAgentError> {
        let name = &self.settings.name;
        let patch = json!({
            "apiVersion": "linkerd-multus.io/v1alpha1",
            "kind": "NodeAgent",
            "status": judged,
        });
        agents
            .patch_status(
                name,
                &PatchParams::apply(vocab::FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|source| NodeAgentError::Status {
                name: name.clone(),
                source,
            })?;
        tracing::info!(node_agent = %name, "node agent: status written");
        Ok(())
    }

    /// Applies the ConfigMap, then the DaemonSet (whose pods read it). What stops it is returned for
    /// the status, not as an error: the status says it, and the next pass tries again.
    async fn apply_all(&self, rendered: &Rendered) -> Result<Option<Blocked>, NodeAgentError> {
        let ns = &self.settings.cni_namespace;
        let configmaps = Api::<ConfigMap>::namespaced(self.client.clone(), ns);
        if let Some(blocked) = apply(&configmaps, "ConfigMap", &rendered.configmap).await? {
            return Ok(Some(blocked));
        }
        let daemonsets = Api::<DaemonSet>::namespaced(self.client.clone(), ns);
        apply(&daemonsets, "DaemonSet", &rendered.daemonset).await
    }
}

/// The pods' and the DaemonSet's label selector, `key=value,...`.
fn selector_string(settings: &AgentSettings) -> String {
    settings
        .selector()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The operator's ownership label is on it.
fn ours(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(vocab::MANAGED_BY_LABEL))
        .is_some_and(|v| v == vocab::MANAGED_BY_VALUE)
}

/// Applies `desired` unless the served object holds it already; refuses an object someone else made.
async fn apply<K>(
    api: &Api<K>,
    kind: &str,
    desired: &Value,
) -> Result<Option<Blocked>, NodeAgentError>
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = desired["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let live = api
        .get_opt(name)
        .await
        .map_err(|source| NodeAgentError::Read {
            what: format!("{kind} {namespace}/{name}"),
            source,
        })?;
    if let Some(live) = &live {
        if !ours(live.meta().labels.as_ref()) {
            let manager = live
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(vocab::MANAGED_BY_LABEL))
                .map_or("no manager label".to_string(), |m| {
                    format!("managed-by: {m}")
                });
            return Ok(Some(Blocked::NotOwned(format!(
                "{kind} {namespace}/{name} exists and is not the operator's ({manager}): it is left \
                 alone; remove it (or the chart's cni.enabled, or Linkerd's linkerd2-cni) for the \
                 operator to create its own"
            ))));
        }
        let served = serde_json::to_value(live).unwrap_or(Value::Null);
        if holds(&served, desired) {
            return Ok(None);
        }
    }
    // Forced: these fields are the operator's alone (a hand edit is undone).
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    match api.patch(name, &params, &Patch::Apply(desired)).await {
        Ok(_) => {
            tracing::info!(kind, namespace, name, "node agent: applied");
            Ok(None)
        }
        Err(error) => {
            tracing::warn!(kind, namespace, name, error = %Chain(&error), "node agent: cannot apply");
            Ok(Some(Blocked::ApplyFailed(format!(
                "cannot apply {kind} {namespace}/{name}: {}",
                Chain(&error)
            ))))
        }
    }
}
