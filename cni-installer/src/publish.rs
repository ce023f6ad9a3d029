//! Publishing the node's Multus as the node's NodeMultus object (server-side apply), beside the
//! install loop: a pass never waits for the apiserver, and a failure to publish is logged and
//! retried, never an install error (the node's install does not depend on it).
//!
//! The object is written at start and whenever the observation (or, in `aux-chain` mode, the chain
//! file's state, `spec.auxChain`) changes; `observedAt` is when it did. With a TokenRequest token
//! for the plugin, each renewal is written too (`spec.pluginCredential`; once per 80% of the token's
//! lifetime: 19.2 h by default), for the operator's expiring-credential gauge.
//!
//! It is owned by its Node (an ownerReference with the Node's uid, read once), so the garbage
//! collector deletes it with the Node. A Node that cannot be read never holds publishing back: the
//! object is published without the reference and the reason is logged once.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use linkerd_multus_crds::node_multus::{
    self, AuxChainFile, NodeIptables, NodeMultusSpec, PluginCredential,
};
use rules::multus_node::Observation;
use tokio::sync::watch;

use crate::args::Publish;

/// The installer's field manager on the NodeMultus it applies.
pub const FIELD_MANAGER: &str = "linkerd-cni-install";
/// Retries of a failed publish back off up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// After a transient failure to read the Node, published without owner; asked again after this.
const OWNER_RETRY: Duration = Duration::from_secs(60);

/// What is published; a change of either is written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Observed {
    observation: Observation,
    aux_chain: Option<AuxChainFile>,
    iptables: Option<NodeIptables>,
    credential: Option<PluginCredential>,
}

/// What the loop hands the publisher after a pass.
#[derive(Clone, Debug)]
struct Offer {
    observed: Observed,
    observed_at: Time,
    /// The installer's own kubeconfig (this pod's service account, its token file), or why there is
    /// none.
    kubeconfig: Result<String, String>,
}

/// The loop's handle on the publisher task.
pub struct Publisher {
    tx: watch::Sender<Option<Offer>>,
}

impl Publisher {
    /// Starts the publisher task on the current runtime.
    pub fn spawn(publish: Publish, net_dir_on_node: String) -> Self {
        let (tx, rx) = watch::channel(None);
        tokio::spawn(run(rx, publish, net_dir_on_node));
        Self { tx }
    }

    /// Hands over what a pass observed (`aux_chain`: the chain file's state in `aux-chain` mode;
    /// `iptables`: the node's rules backend; `credential`: the plugin token's validity, when issued);
    /// wakes the publisher only when that or the installer's own credentials changed.
    pub fn offer(
        &self,
        observation: Observation,
        aux_chain: Option<AuxChainFile>,
        iptables: Option<NodeIptables>,
        credential: Option<(SystemTime, SystemTime)>,
        kubeconfig: Result<String, String>,
    ) {
        let time = |t: SystemTime| Timestamp::try_from(t).ok().map(Time);
        let credential = credential.and_then(|(issued, expires)| {
            Some(PluginCredential {
                issued_at: time(issued)?,
                expires_at: time(expires)?,
            })
        });
        let observed = Observed {
            observation,
            aux_chain,
            iptables,
            credential,
        };
        self.tx.send_if_modified(|current| {
            let (same_observed, same_kubeconfig) = match current {
                Some(c) => (c.observed == observed, c.kubeconfig == kubeconfig),
                None => (false, false),
            };
            if same_observed && same_kubeconfig {
                return false;
            }
            let observed_at = match current {
                Some(c) if same_observed => c.observed_at.clone(),
                _ => Time(Timestamp::now()),
            };
            *current = Some(Offer {
                observed,
                observed_at,
                kubeconfig,
            });
            true
        });
    }
}

async fn run(mut rx: watch::Receiver<Option<Offer>>, publish: Publish, net_dir: String) {
    let mut client: Option<(String, Client)> = None;
    let mut published: Option<Observed> = None;
    let mut last_error: Option<String> = None;
    let mut backoff = Duration::from_secs(1);
    let mut owner = NodeOwner::default();
    loop {
        let offer = rx.borrow_and_update().clone();
        if let Some(offer) = offer.filter(|o| published.as_ref() != Some(&o.observed)) {
            match apply(&mut client, &mut owner, &publish, &net_dir, &offer).await {
                Ok(()) => {
                    tracing::info!(
                        node = %publish.node_name,
                        observed = %describe(&offer.observed.observation),
                        aux_chain = %offer.observed.aux_chain.as_ref().map_or_else(String::new, describe_aux_chain),
                        iptables = %offer.observed.iptables.as_ref().map_or_else(String::new, NodeIptables::describe),
                        "published the node's Multus (kubectl get nodemultus {})",
                        publish.node_name
                    );
                    if let Some(previous) = last_error.take() {
                        tracing::info!(previous = %previous, "publishing resolved");
                    }
                    published = Some(offer.observed);
                    backoff = Duration::from_secs(1);
                }
                Err(e) => {
                    if last_error.as_ref() != Some(&e) {
                        tracing::warn!(node = %publish.node_name, error = %e, "cannot publish the node's Multus (NodeMultus); retrying");
                    }
                    last_error = Some(e);
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() { return },
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        }
        if published.is_some() && owner.ask_again() {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                // Published again, with the owner once the Node reads.
                () = tokio::time::sleep(OWNER_RETRY) => published = None,
            }
        } else if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Whether the NodeMultus' owner (this node's Node) is known.
#[derive(Clone, Debug, Default, PartialEq)]
enum Owner {
    /// Not read yet, or a transient error: asked again.
    #[default]
    Unknown,
    Known(OwnerReference),
    /// Not readable for a reason asking again does not fix (no such Node, no `get` on nodes).
    Unavailable,
}

/// The Node as owner, read once; why not, logged once per reason.
#[derive(Debug, Default)]
struct NodeOwner {
    state: Owner,
    logged: Option<String>,
}

impl NodeOwner {
    /// The reference to publish, reading the Node when not known yet.
    async fn resolve(&mut self, client: &Client, node: &str) -> Option<OwnerReference> {
        match &self.state {
            Owner::Known(reference) => return Some(reference.clone()),
            Owner::Unavailable => return None,
            Owner::Unknown => {}
        }
        let read = Api::<Node>::all(client.clone())
            .get_metadata(node)
            .await
            .map_err(|e| why_no_owner(node, &e))
            .and_then(|n| node_owner(node, n.metadata.uid));
        match read {
            Ok(reference) => {
                if self.logged.take().is_some() {
                    tracing::info!(node, "the NodeMultus is owned by its Node again");
                }
                self.state = Owner::Known(reference.clone());
                Some(reference)
            }
            Err((reason, lasting)) => {
                if self.logged.as_ref() != Some(&reason) {
                    tracing::warn!(
                        node,
                        reason = %reason,
                        "publishing the NodeMultus without its Node as owner: it is not deleted with \
                         the Node (the operator and check ignore it once the Node is gone)"
                    );
                    self.logged = Some(reason);
                }
                if lasting {
                    self.state = Owner::Unavailable;
                }
                None
            }
        }
    }

    /// The Node could not be read for a reason that may pass.
    fn ask_again(&self) -> bool {
        self.state == Owner::Unknown && self.logged.is_some()
    }
}

/// The ownerReference of node `name` with `uid` (the garbage collector matches the uid).
fn node_owner(name: &str, uid: Option<String>) -> Result<OwnerReference, (String, bool)> {
    let uid = uid
        .filter(|u| !u.is_empty())
        .ok_or_else(|| (format!("Node {name} has no uid"), true))?;
    Ok(OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: name.into(),
        uid,
        ..OwnerReference::default()
    })
}

/// Why the Node cannot be the owner, and whether asking again cannot help (no such Node, no
/// permission: both last until the installer is reconfigured).
fn why_no_owner(node: &str, error: &kube::Error) -> (String, bool) {
    match error {
        kube::Error::Api(status) if status.code == 404 => (
            format!("there is no Node {node} (is NODE_NAME the pod's spec.nodeName?)"),
            true,
        ),
        kube::Error::Api(status) if status.code == 403 => (
            format!(
                "cannot read Node {node}: {} (the installer's service account needs get on nodes)",
                status.message
            ),
            true,
        ),
        e => (format!("cannot read Node {node}: {e}"), false),
    }
}

/// One server-side apply of the node's NodeMultus; Err is the log line's reason.
async fn apply(
    client: &mut Option<(String, Client)>,
    owner: &mut NodeOwner,
    publish: &Publish,
    net_dir: &str,
    offer: &Offer,
) -> Result<(), String> {
    let kubeconfig = offer.kubeconfig.as_ref().map_err(Clone::clone)?;
    if client.as_ref().map(|(text, _)| text) != Some(kubeconfig) {
        *client = Some((kubeconfig.clone(), build_client(kubeconfig).await?));
    }
    let Some((_, client)) = client.as_ref() else {
        return Err("no client".into());
    };
    let mut spec = NodeMultusSpec::observed(
        &publish.node_name,
        publish.installer_pod.clone(),
        net_dir,
        &offer.observed.observation,
        offer.observed_at.clone(),
    );
    spec.aux_chain = offer.observed.aux_chain.clone();
    spec.iptables = offer.observed.iptables.clone();
    spec.plugin_credential = offer.observed.credential.clone();
    let resource = node_multus::api_resource(publish.api_group.as_deref());
    let mut object = DynamicObject::new(&publish.node_name, &resource);
    object.metadata.owner_references = owner
        .resolve(client, &publish.node_name)
        .await
        .map(|reference| vec![reference]);
    object.data = serde_json::json!({ "spec": spec });
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api
        .patch(&publish.node_name, &params, &Patch::Apply(&object))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
            "the NodeMultus kind ({}) is not served: {} (the chart installs its CRD)",
            resource.api_version, status.message
        )),
        // The chart's ValidatingAdmissionPolicy: only the installer on the node may write its object.
        Err(kube::Error::Api(status))
            if status.code == 403 && status.message.contains("ValidatingAdmissionPolicy") =>
        {
            Err(format!(
                "{} (NODE_NAME must be this pod's node, and the pod's token must name it: \
                 Kubernetes 1.30+ with ServiceAccountTokenPodNodeInfo)",
                status.message
            ))
        }
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "{} (the installer's service account needs get, create and patch on nodemultuses)",
            status.message
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// A client from the installer's own kubeconfig (never the plugin's: that account may only read
/// pods), with timeouts so a dead apiserver never holds a publish for long.
async fn build_client(kubeconfig: &str) -> Result<Client, String> {
    let parsed = Kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| format!("cannot read the kubeconfig: {e}"))?;
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("cannot use the kubeconfig: {e}"))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(15));
    Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))
}

/// The chain file's state in one line, for the log.
pub fn describe_aux_chain(aux: &AuxChainFile) -> String {
    match (&aux.reason, aux.installed) {
        (None, true) => format!("{} installed", aux.file),
        (Some(why), true) => format!("{} installed ({why})", aux.file),
        (Some(why), false) => format!("{} not installed: {why}", aux.file),
        (None, false) => format!("{} not installed", aux.file),
    }
}

/// The observation in one line, for the log.
pub fn describe(observation: &Observation) -> String {
    match observation {
        Observation::NoMultus { primary: Some(p) } => {
            format!("no Multus (the primary config is {p})")
        }
        Observation::NoMultus { primary: None } => "no Multus (no network config yet)".into(),
        Observation::Multus { file, config } => format!(
            "{} Multus in {file}, namespaceIsolation={}, globalNamespaces={}",
            config.flavour.map_or("?", |f| f.as_str()),
            config.namespace_isolation,
            config
                .global_namespaces
                .as_deref()
                .unwrap_or("(unset: default)"),
        ),
        Observation::Unreadable { reason, .. } => format!("unreadable: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        let status = serde_json::from_value(serde_json::json!({"code": code, "message": message}))
            .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    /// The reference the garbage collector follows: core v1 Node, its name and uid; no uid, no owner.
    #[test]
    fn the_node_with_its_uid_is_the_owner() {
        let reference = node_owner("node-1", Some("1f2e".into())).expect("an owner");
        assert_eq!(
            serde_json::to_value(&reference).expect("json"),
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "1f2e"})
        );
        for uid in [None, Some(String::new())] {
            let (why, lasting) = node_owner("node-1", uid).expect_err("no uid");
            assert_eq!(why, "Node node-1 has no uid");
            assert!(lasting);
        }
    }

    /// No such Node and no permission last (logged once, not asked again); anything else may pass.
    #[test]
    fn why_a_node_is_not_the_owner() {
        let (why, lasting) = why_no_owner("n", &api_error(404, "nodes \"n\" not found"));
        assert!(lasting);
        assert!(why.contains("there is no Node n"), "{why}");
        let (why, lasting) = why_no_owner("n", &api_error(403, "nodes \"n\" is forbidden"));
        assert!(lasting);
        assert!(why.contains("needs get on nodes"), "{why}");
        let (why, lasting) = why_no_owner("n", &api_error(500, "etcdserver: request timed out"));
        assert!(!lasting);
        assert!(why.contains("request timed out"), "{why}");
    }

    /// A failure that may pass is asked again (after a publish without owner); a lasting one is not.
    #[test]
    fn only_a_passing_failure_is_asked_again() {
        let mut owner = NodeOwner::default();
        assert!(!owner.ask_again(), "not asked yet: the publish asks");
        owner.logged = Some("cannot read Node n: timed out".into());
        assert!(owner.ask_again());
        owner.state = Owner::Unavailable;
        assert!(!owner.ask_again());
    }
}
