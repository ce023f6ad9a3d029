//! `linkerd-multus-operator check`: like `linkerd check`, for this integration. It reads the cluster
//! (never writes: its one create, of the admission-agreement probe pod, is a server-side dry run),
//! probes the webhook's endpoint with its own caBundle, and prints one ✓/× line per
//! check with a hint for each failure (or JSON with `-o json`). Exit status 1 when anything failed.
//!
//! It runs with the operator's own flags (see `cli.rs`), so `kubectl exec deploy/<operator> --
//! linkerd-multus-operator check` checks exactly what that operator is configured for.

pub mod admission;
pub mod agreement;
mod aux_chain;
mod evaluate;
pub mod leader;
mod lean;
mod pod_pages;
mod probe;
pub mod published;
mod report;
pub mod row;
mod uids;

pub use aux_chain::{AuxChainSeen, InstallerPod};
pub use evaluate::{
    evaluate, evaluate_with, placed, pod_problem, CheckSettings, Observed, PodFindings, PodFold,
    RepairWaiting, SandboxFailure, SandboxSince, Verdict, WebhookConfiguration, WebhookProbe,
};
pub use report::{render_human, render_json, OutputFormat};

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, ObjectMeta};
use kube::{Api, Client, Resource, ResourceExt};
use linkerd_multus_crds::node_multus::NodeMultusSpec;
use linkerd_multus_crds::NetworkAttachmentDefinition;
use rules::multus_node::NodeIsolation;
use rules::namespaces::{want, Want};
use rules::pod::PodView;

use self::published::Source;
use crate::events::event_time;
use crate::repair::state::Published;

/// What `check` runs with (built from the flags in `config.rs`).
#[derive(Clone, Debug)]
pub struct CheckConfig {
    pub settings: CheckSettings,
    /// `--admission` and what it keeps (the admission line).
    pub admission: crate::admission::AdmissionSettings,
    pub output: OutputFormat,
    /// How long to wait for each webhook endpoint's TLS handshake.
    pub probe_timeout: Duration,
    /// `--leader-elect`: the Lease that tells whether published findings are the current leader's.
    pub lease: Option<crate::leader::LeaseConfig>,
    /// `--leader-findings-above`.
    pub leader_findings_above: usize,
}

/// Why `check` could not even look (as opposed to a check that failed).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("cannot build a Kubernetes client (is KUBECONFIG set, or are you in a pod?)")]
    Client(#[source] kube::Error),
    #[error("cannot {what} from the API server")]
    Read {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// Runs every check against the cluster of `client`; returns the verdicts.
pub async fn check(
    client: &Client,
    settings: &CheckSettings,
    probe_timeout: Duration,
) -> Result<Vec<Verdict>, CheckError> {
    let observed = observe(client, settings, Some(probe_timeout)).await?;
    let pods = fold_pods(client, &observed, settings).await?;
    Ok(evaluate_with(&observed, settings, &pods))
}

/// [`check`], plus the admission line (`admission.rs`) and the agreement of the policy with the webhook
/// on a dry-run probe pod (`agreement.rs`), placed after the webhook's lines; the pod rows from the
/// repairing leader's findings where [`published::read`] finds them usable.
pub async fn check_with_admission(
    client: &Client,
    config: &CheckConfig,
) -> Result<Vec<Verdict>, CheckError> {
    let (settings, admission) = (&config.settings, &config.admission);
    let observed = observe(client, settings, Some(config.probe_timeout)).await?;
    let source = published::read(client, settings, config.lease.as_ref()).await;
    let (pods, note) = match source {
        Source::Published { found, note, pods } if pods > config.leader_findings_above => {
            (found, note)
        }
        walked => {
            let why = match walked {
                Source::Published { pods, .. } => format!(
                    "the leader holds {pods}, not more than --leader-findings-above={}",
                    config.leader_findings_above
                ),
                Source::Walk { why } => why,
            };
            let found = fold_pods(client, &observed, settings).await?;
            (found, format!("read from every pod: {why}"))
        }
    };
    let mut verdicts = evaluate_with(&observed, settings, &pods);
    if settings.repair_state.is_some() {
        // Where the pod rows come from; said only where a leader could have published them.
        if let Some(v) = verdicts.iter_mut().find(|v| v.check == row::Row::Pods) {
            v.message = format!("{} ({note})", v.message);
        }
    }
    let nodes = observed.node_multus.as_deref().unwrap_or_default();
    let placement = rules::multus_node::placement(settings.decision.nad.shared(), nodes);
    let cfg = placement.decision(&admission.decision);
    let seen = admission::observe(client, admission).await;
    let line = admission::verdict(&seen, admission, &cfg, &observed.namespaces);
    let planned = agreement::plan(&seen, admission, &cfg, &observed.namespaces);
    let probed = agreement::verdict(&agreement::probe(client, planned).await);
    let at = verdicts
        .iter()
        .position(|v| v.check == row::Row::WebhookOrder)
        .map_or(verdicts.len(), |i| i + 1);
    verdicts.insert(at, line);
    verdicts.insert(at + 1, probed);
    Ok(verdicts)
}

/// The command: builds a client from the environment, checks, prints; Ok(true) when all passed.
pub async fn run(config: &CheckConfig) -> Result<bool, CheckError> {
    let client = Client::try_default().await.map_err(CheckError::Client)?;
    let verdicts = check_with_admission(&client, config).await?;
    let out = match config.output {
        OutputFormat::Human => render_human(&verdicts),
        OutputFormat::Json => render_json(&verdicts),
    };
    print!("{out}");
    Ok(verdicts.iter().all(|v| v.ok))
}

fn read(what: &'static str) -> impl FnOnce(kube::Error) -> CheckError {
    move |source| CheckError::Read { what, source }
}

/// Everything `check` reads but the pods; `probe`: the webhooks' TLS handshake timeout (None: not
/// probed, as the leader observes for its pod findings, `published.rs`).
pub(crate) async fn observe(
    client: &Client,
    s: &CheckSettings,
    probe: Option<Duration>,
) -> Result<Observed, CheckError> {
    let crd = nad_crd(client).await?;
    let configmap = Api::<ConfigMap>::namespaced(client.clone(), &s.source.namespace)
        .get_opt(&s.source.configmap)
        .await
        .map_err(read("read the CNI ConfigMap"))?;
    let namespaces = lean::list(
        &Api::<Namespace>::all(client.clone()),
        &ListParams::default(),
    )
    .await
    .map_err(read("list namespaces"))?;
    // Without the CRD there are no NADs to list; the CRD check already says so.
    let nads = match crd {
        Ok(_) => our_nads(client, s).await?,
        Err(_) => Vec::new(),
    };
    let enabled = enabled_namespaces(&namespaces, &nads, s);
    let configs = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(read("list MutatingWebhookConfigurations"))?
        .items;
    let webhooks = match probe {
        Some(timeout) => webhook_probes(client, &configs, timeout).await,
        None => Vec::new(),
    };
    let nodes = NodesSeen::read(client, s).await;
    let aux_chain = if s.decision.nad.attach.uses_nads() {
        None
    } else {
        let names = nodes.names.clone().map(|n| n.into_iter().collect());
        Some(aux_chain_seen(client, s, &nodes.objects, names).await?)
    };
    let serves_scc = serves_scc(client).await?;
    let sandbox_failures = sandbox_failures(client, &enabled).await?;
    let repair_halts = repair_halts(client, s).await;
    let repair_waiting = repair_waiting(client, &enabled).await?;
    Ok(Observed {
        crd,
        configmap,
        namespaces,
        nads,
        webhooks,
        webhook_configurations: configs.iter().map(WebhookConfiguration::of).collect(),
        serves_scc,
        // Folded page by page instead (`fold_pods`).
        pods: Vec::new(),
        containers: BTreeMap::new(),
        node_multus: nodes.multus,
        node_multus_ignored: nodes.ignored,
        node_without_network: nodes.without_network,
        node_backends: nodes.backends,
        sandbox_failures,
        repair_halts,
        repair_waiting,
        aux_chain,
        validator_failed: BTreeSet::new(),
    })
}

/// Whether the NAD CRD exists and is established (Err: it does not exist, said so).
async fn nad_crd(client: &Client) -> Result<Result<bool, String>, CheckError> {
    let crd_name = format!(
        "{}.{}",
        NetworkAttachmentDefinition::plural(&()),
        NetworkAttachmentDefinition::group(&())
    );
    Ok(
        match Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&crd_name)
            .await
            .map_err(read("read CustomResourceDefinitions"))?
        {
            Some(crd) => Ok(is_established(&crd)),
            None => Err(format!("no CustomResourceDefinition {crd_name}")),
        },
    )
}

/// The NADs of our name, in every namespace.
async fn our_nads(
    client: &Client,
    s: &CheckSettings,
) -> Result<Vec<NetworkAttachmentDefinition>, CheckError> {
    let by_name = ListParams::default().fields(&format!("metadata.name={}", s.decision.nad.name));
    lean::list(
        &Api::<NetworkAttachmentDefinition>::all(client.clone()),
        &by_name,
    )
    .await
    .map_err(read("list NetworkAttachmentDefinitions"))
}

/// Where pods matter: where the NAD is wanted, and where an owned NAD is kept after an opt-out (its
/// users are listed).
fn enabled_namespaces<'a>(
    namespaces: &'a [Namespace],
    nads: &'a [NetworkAttachmentDefinition],
    s: &CheckSettings,
) -> BTreeSet<&'a str> {
    namespaces
        .iter()
        .filter(|ns| want(ns, &s.decision.nad.linkerd_namespace) == Want::Nad)
        .filter_map(|ns| ns.metadata.name.as_deref())
        .chain(
            nads.iter()
                .filter(|n| vocab::is_managed_by_us(n.metadata.labels.as_ref()))
                .filter_map(|n| n.metadata.namespace.as_deref()),
        )
        .collect()
}

/// The pod rows' fold as `check` and the repairing leader (`published.rs`) feed it: only pods of
/// the namespaces that matter ([`enabled_namespaces`]), each with its validator's verdict in
/// aux-chain mode only.
pub struct PodRows<'a> {
    enabled: BTreeSet<&'a str>,
    aux: bool,
    fold: PodFold<'a>,
}

impl<'a> PodRows<'a> {
    /// `placed`: [`placed`]`(seen, s)`.
    pub fn new(seen: &'a Observed, s: &CheckSettings, placed: &'a CheckSettings) -> Self {
        Self {
            enabled: enabled_namespaces(&seen.namespaces, &seen.nads, s),
            aux: !s.decision.nad.attach.uses_nads(),
            fold: PodFold::new(seen, placed),
        }
    }

    /// Whether pods of `namespace` count (the others are skipped by [`Self::add`]).
    pub fn reads(&self, namespace: &str) -> bool {
        self.enabled.contains(namespace)
    }

    /// One pod that can run again (finished pods never get another sandbox: they neither keep a
    /// NAD nor need an attachment).
    pub fn add(&mut self, pod: &ObjectMeta, containers: &PodView, validator_failed: bool) {
        if self.reads(pod.namespace.as_deref().unwrap_or_default()) {
            self.fold
                .add(pod, Some(containers), self.aux && validator_failed);
        }
    }

    pub fn finish(self) -> PodFindings {
        self.fold.finish()
    }
}

/// The pod rows' findings, from one paged walk of the cluster's pods that can run again, folded
/// page by page ([`PodRows`], [`pod_pages`]): never a request per namespace, never every pod in
/// memory at once. Pods: the `proxy-uids` row reads their containers, aux-chain's `pods` row their
/// validator's status.
async fn fold_pods(
    client: &Client,
    seen: &Observed,
    s: &CheckSettings,
) -> Result<PodFindings, CheckError> {
    let placed = placed(seen, s);
    let mut rows = PodRows::new(seen, s, &placed);
    let can_run = ListParams::default().fields(rules::attachment::PODS_THAT_CAN_RUN_AGAIN);
    pod_pages::each_pod(client, can_run, |pod| {
        // Most pods of a large cluster are in no namespace that counts: their containers unread.
        if rows.reads(pod.metadata.namespace.as_deref().unwrap_or_default()) {
            let containers = PodView::from_spec(pod.spec.as_ref());
            let failed = crate::repair::decide::validator_failed(pod);
            rows.add(&pod.metadata, &containers, failed);
        }
    })
    .await
    .map_err(read("list pods"))?;
    Ok(rows.finish())
}

/// A TLS handshake with each webhook of `configs` that serves our path.
async fn webhook_probes(
    client: &Client,
    configs: &[MutatingWebhookConfiguration],
    timeout: Duration,
) -> Vec<WebhookProbe> {
    let mut webhooks = Vec::new();
    for config in configs {
        let config_name = config.metadata.name.as_deref().unwrap_or_default();
        for hook in config.webhooks.iter().flatten() {
            if let Some(mut target) = probe::Target::of(&hook.client_config, vocab::WEBHOOK_PATH) {
                let result = match service_address(client, &target).await {
                    Ok(address) => {
                        target.address = address;
                        probe::tls_handshake(&target, ca_bundle(&hook.client_config), timeout).await
                    }
                    Err(e) => Err(e),
                };
                webhooks.push(WebhookProbe {
                    name: format!("{config_name}/{}", hook.name),
                    target: target.to_string(),
                    result,
                });
            }
        }
    }
    webhooks
}

/// The nodes' NodeMultus objects as the operator counts them: only those of nodes that exist
/// (`placement::of_existing_nodes`). Not served, or not readable: said by the node-multus line
/// rather than stopping `check`.
struct NodesSeen {
    names: Result<BTreeSet<String>, String>,
    /// The objects of nodes that exist.
    objects: Result<Vec<DynamicObject>, String>,
    multus: Result<Vec<NodeIsolation>, String>,
    ignored: Result<Vec<String>, String>,
    without_network: Vec<(String, String)>,
    backends: Vec<(String, String)>,
}

impl NodesSeen {
    async fn read(client: &Client, s: &CheckSettings) -> Self {
        let resource =
            linkerd_multus_crds::node_multus::api_resource(s.node_multus_group.as_deref());
        let objects = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(|e| e.to_string());
        let names: Result<BTreeSet<String>, String> = Api::<Node>::all(client.clone())
            .list_metadata(&ListParams::default())
            .await
            .map(|list| list.items.into_iter().map(|n| n.name_any()).collect())
            .map_err(|e| e.to_string());
        let counted = objects.as_ref().map(|items| {
            let published = items.iter().map(crate::placement::node_isolation).collect();
            crate::placement::of_existing_nodes(published, names.as_ref().ok())
        });
        let ignored = match (&names, &counted) {
            (Err(why), _) => Err(why.clone()),
            (Ok(_), Ok(counted)) => Ok(counted.ignored.clone()),
            (Ok(_), Err(_)) => Ok(Vec::new()),
        };
        let multus = counted.map(|c| c.nodes).map_err(|e| e.clone());
        let without_network = without_network(&objects, &ignored);
        let backends = backends(&objects, &ignored);
        let objects = objects.map(|items| {
            let ignored = ignored.as_deref().unwrap_or_default();
            items
                .into_iter()
                .filter(|o| !ignored.contains(&o.name_any()))
                .collect::<Vec<_>>()
        });
        NodesSeen {
            names,
            objects,
            multus,
            ignored,
            without_network,
            backends,
        }
    }
}

/// Whether the server serves OpenShift's SCCs. Discovery: every authenticated user may read it, so
/// `check` needs no extra RBAC for this.
async fn serves_scc(client: &Client) -> Result<bool, CheckError> {
    Ok(client
        .list_api_groups()
        .await
        .map_err(read("list API groups"))?
        .groups
        .iter()
        .any(|g| g.name == vocab::OPENSHIFT_SCC_GROUP))
}

/// The repairer's own state, not its Events (they expire, and vanish with their namespace).
async fn repair_halts(
    client: &Client,
    s: &CheckSettings,
) -> Option<Result<Option<Published>, String>> {
    let at = s.repair_state.as_ref()?;
    Some(
        crate::repair::state::read(client, at)
            .await
            .map_err(|e| vocab::report::chain(&e)),
    )
}

/// The pods the repairer leaves running for their NAD, as its events say.
async fn repair_waiting(
    client: &Client,
    enabled: &BTreeSet<&str>,
) -> Result<Vec<RepairWaiting>, CheckError> {
    let mut waiting = Vec::new();
    for (ns, e) in events_in(client, crate::repair::REASON_WAITING, enabled).await? {
        let object = &e.involved_object;
        waiting.push(RepairWaiting {
            pod: format!("{ns}/{}", object.name.as_deref().unwrap_or_default()),
            uid: object.uid.clone(),
            at: event_time(&e),
            message: e.message.clone().unwrap_or_default(),
        });
    }
    Ok(waiting)
}

/// The nodes (that exist) whose NodeMultus says their installer found no network config at all.
fn without_network(
    objects: &Result<Vec<DynamicObject>, String>,
    ignored: &Result<Vec<String>, String>,
) -> Vec<(String, String)> {
    per_existing_node(objects, ignored, NodeMultusSpec::no_network_config)
}

/// Each node's (that exists) rules backend, as its NodeMultus says.
fn backends(
    objects: &Result<Vec<DynamicObject>, String>,
    ignored: &Result<Vec<String>, String>,
) -> Vec<(String, String)> {
    per_existing_node(objects, ignored, |spec| {
        Some(spec.iptables.as_ref()?.describe())
    })
}

/// `(node, what)` for each readable NodeMultus of a node that exists, where `what` says something.
fn per_existing_node(
    objects: &Result<Vec<DynamicObject>, String>,
    ignored: &Result<Vec<String>, String>,
    what: impl Fn(&NodeMultusSpec) -> Option<String>,
) -> Vec<(String, String)> {
    let ignored = ignored.as_deref().unwrap_or_default();
    objects
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|o| !ignored.contains(&o.name_any()))
        .filter_map(|o| {
            let spec = serde_json::from_value::<NodeMultusSpec>(o.data["spec"].clone()).ok()?;
            Some((o.name_any(), what(&spec)?))
        })
        .collect()
}

/// Aux-chain mode: the NodeMultus specs (of nodes that exist), the installer pods (those the NodeMultus
/// objects name and the chart's in the CNI namespace: one pod list per namespace, with the pods `list`
/// the operator has) and the nodes (refused: said by the line, not an error). See `aux_chain.rs`.
async fn aux_chain_seen(
    client: &Client,
    s: &CheckSettings,
    objects: &Result<Vec<DynamicObject>, String>,
    nodes: Result<Vec<String>, String>,
) -> Result<AuxChainSeen, CheckError> {
    let (published, unlisted) = match objects {
        Ok(items) => (
            items
                .iter()
                .map(|o| {
                    let spec = serde_json::from_value::<NodeMultusSpec>(o.data["spec"].clone())
                        .map_err(|e| e.to_string());
                    (o.name_any(), spec)
                })
                .collect::<BTreeMap<_, _>>(),
            None,
        ),
        Err(why) => (BTreeMap::new(), Some(why.clone())),
    };
    let named: BTreeSet<&str> = published
        .values()
        .filter_map(|spec| spec.as_ref().ok()?.installer_pod.as_deref())
        .collect();
    let mut namespaces: BTreeSet<&str> = named
        .iter()
        .filter_map(|p| p.split_once('/'))
        .map(|(ns, _)| ns)
        .collect();
    namespaces.insert(&s.source.namespace);
    let mut installers = Vec::new();
    for namespace in namespaces {
        let pods = Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map_err(read("list pods"))?;
        installers.extend(
            pods.items
                .iter()
                .filter(|pod| {
                    rules::installers::is_installer(&pod.metadata, &s.source.namespace, |name| {
                        named.contains(name)
                    })
                })
                .map(InstallerPod::of),
        );
    }
    Ok(AuxChainSeen {
        published,
        unlisted,
        installers,
        nodes,
    })
}

/// Every Event matching `fields`, in all namespaces.
/// `reason`'s Events about objects in a namespace of `enabled`, each with that namespace.
async fn events_in<'a>(
    client: &Client,
    reason: &str,
    enabled: &BTreeSet<&'a str>,
) -> Result<Vec<(&'a str, Event)>, CheckError> {
    let all = events(client, &format!("reason={reason}")).await?;
    Ok(all
        .into_iter()
        .filter_map(|e| {
            let ns = *enabled.get(e.involved_object.namespace.as_deref()?)?;
            Some((ns, e))
        })
        .collect())
}

async fn events(client: &Client, fields: &str) -> Result<Vec<Event>, CheckError> {
    Ok(Api::<Event>::all(client.clone())
        .list(&ListParams::default().fields(fields))
        .await
        .map_err(read("list Events"))?
        .items)
}

/// The kubelet's latest `FailedCreatePodSandBox` Event of each pod in `namespaces` that still exists,
/// with whether a sandbox was created since ([`SandboxSince::of`]). One cluster-wide Event list; then one list per
/// failing pod (by name: `list` is the permission the operator already has on pods).
async fn sandbox_failures(
    client: &Client,
    namespaces: &BTreeSet<&str>,
) -> Result<BTreeMap<String, SandboxFailure>, CheckError> {
    let failed = ListParams::default().fields(crate::sandboxes::FIELD_SELECTOR);
    let events = Api::<Event>::all(client.clone())
        .list(&failed)
        .await
        .map_err(read("list Events"))?
        .items;
    let mut latest: BTreeMap<(String, String), Event> = BTreeMap::new();
    for event in events {
        let object = &event.involved_object;
        let (Some(ns), Some(name)) = (object.namespace.clone(), object.name.clone()) else {
            continue;
        };
        if !namespaces.contains(ns.as_str()) {
            continue;
        }
        let key = (ns, name);
        if latest
            .get(&key)
            .is_none_or(|seen| event_time(seen) <= event_time(&event))
        {
            latest.insert(key, event);
        }
    }
    let mut failures = BTreeMap::new();
    for ((ns, name), event) in latest {
        let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
        let pods = Api::<Pod>::namespaced(client.clone(), &ns)
            .list(&by_name)
            .await
            .map_err(read("list pods"))?;
        // Events outlive their pod by an hour; a pod of the same name may be a new one.
        let Some(pod) = pods
            .items
            .into_iter()
            .find(|p| p.metadata.uid == event.involved_object.uid)
        else {
            continue;
        };
        let since = SandboxSince::of(pod.status.as_ref(), event_time(&event));
        failures.insert(
            format!("{ns}/{name}"),
            SandboxFailure {
                message: event.message.unwrap_or_default(),
                count: event.count.unwrap_or(1),
                since,
            },
        );
    }
    Ok(failures)
}

/// The ClusterIP the API server dials for a service reference (None for a URL target). Without
/// this, `check` inside a pod would need cluster DNS, which the API server itself does not use.
async fn service_address(
    client: &Client,
    target: &probe::Target,
) -> Result<Option<String>, String> {
    let Some((namespace, name)) = &target.service else {
        return Ok(None);
    };
    let svc = Api::<Service>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read service {namespace}/{name}: {e}"))?
        .ok_or_else(|| format!("service {namespace}/{name} does not exist"))?;
    match svc.spec.and_then(|s| s.cluster_ip) {
        Some(ip) if !ip.is_empty() && ip != "None" => Ok(Some(ip)),
        // Headless: the API server cannot route to it either.
        _ => Err(format!("service {namespace}/{name} has no ClusterIP")),
    }
}

fn ca_bundle(config: &WebhookClientConfig) -> &[u8] {
    config
        .ca_bundle
        .as_ref()
        .map(|b| b.0.as_slice())
        .unwrap_or_default()
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
