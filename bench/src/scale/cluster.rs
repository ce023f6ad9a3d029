//! A cluster simulated at size on a real apiserver: Node objects with no kubelet, a NodeMultus per
//! node as its installer would publish it, enabled namespaces, and pods created straight into the
//! apiserver, bound to a node, their status written as a kubelet would (Running, Ready,
//! `PodReadyToStartContainers`), attached and meshed as the webhook and the injector leave them.

use anyhow::Context;
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::time::Duration;

use crate::fanout::FLOOR_MANAGER;

const NODE_PREFIX: &str = "bench-node-";
/// The timestamp every simulated status carries: what the objects say, not when they were written.
pub const SINCE: &str = "2026-01-01T00:00:00Z";

const PODS_PER_NAMESPACE: usize = 15;
const PODS_PER_NODE: usize = 75;

/// How big the simulated cluster is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub nodes: usize,
    pub namespaces: usize,
    pub pods: usize,
}

impl Size {
    /// The cluster for `pods` pods in OpenShift's proportions at its maximums (150,000 pods, 10,000
    /// namespaces, 2,000 nodes: 15 pods per namespace, 75 per node), at least one of each.
    pub fn for_pods(pods: usize) -> Self {
        Self {
            nodes: pods.div_ceil(PODS_PER_NODE).clamp(1, 2000),
            namespaces: pods.div_ceil(PODS_PER_NAMESPACE).clamp(1, 10_000),
            pods,
        }
    }
}

/// The node names `0..n`.
pub fn node_name(i: usize) -> String {
    format!("{NODE_PREFIX}{i}")
}

/// Creates nodes `range` (Ready) and their NodeMultus (thin Multus, readable, nftables backend).
pub async fn add_nodes(
    client: &Client,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> anyhow::Result<()> {
    let nodes = Api::<Node>::all(client.clone());
    let resource = linkerd_multus_crds::node_multus::api_resource(None);
    let multus = Api::<DynamicObject>::all_with(client.clone(), &resource);
    stream::iter(range.map(node_name))
        .map(|name| {
            let (nodes, multus, resource) = (nodes.clone(), multus.clone(), resource.clone());
            async move {
                let (post, merge) = (PostParams::default(), PatchParams::default());
                let node: Node = serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
                }))?;
                create_or_keep(retried(|| nodes.create(&post, &node)).await)
                    .with_context(|| format!("creating node {name}"))?;
                let status = Patch::Merge(node_status());
                retried(|| nodes.patch_status(&name, &merge, &status))
                    .await
                    .with_context(|| format!("writing node {name}'s status"))?;
                let apply = Patch::Apply(node_multus(&resource, &name));
                let params = PatchParams::apply(FLOOR_MANAGER).force();
                retried(|| multus.patch(&name, &params, &apply))
                    .await
                    .with_context(|| format!("applying NodeMultus {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

fn node_status() -> Value {
    json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": SINCE, "lastTransitionTime": SINCE,
    }]}})
}

fn node_multus(resource: &ApiResource, node: &str) -> Value {
    json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": { "name": node },
        "spec": {
            "nodeName": node, "observedAt": SINCE, "netDir": "/etc/cni/net.d",
            "multus": "thin", "readable": true, "configFile": "/etc/cni/net.d/00-multus.conf",
            "iptables": { "configured": "auto", "backend": "nftables", "reason": "bench" },
        },
    })
}

/// Pod `i`'s namespace (its index) and node in a cluster of `size`. Filled in order, so a pod keeps
/// its namespace and node as the cluster grows (a modulo would move pod-i to another namespace at
/// the next size: a second pod of that name).
pub fn placement(i: usize, size: Size) -> (usize, String) {
    let namespace = (i / PODS_PER_NAMESPACE).min(size.namespaces.max(1) - 1);
    (
        namespace,
        node_name((i / PODS_PER_NODE).min(size.nodes.max(1) - 1)),
    )
}

/// Creates pods `range`, 15 to a namespace of `namespaces` and 75 to a node, each then given a kubelet's
/// status: every pod meshed (proxy + validator) and attached, so repair has nothing to do.
pub async fn add_pods(
    client: &Client,
    range: std::ops::Range<usize>,
    namespaces: &[String],
    nodes: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    stream::iter(range)
        .map(|i| {
            let (ns, node) = placement(
                i,
                Size {
                    nodes,
                    namespaces: namespaces.len(),
                    pods: 0,
                },
            );
            let namespace = namespaces[ns].clone();
            let api = Api::<Pod>::namespaced(client.clone(), &namespace);
            async move {
                let name = format!("pod-{i}");
                let (post, merge) = (PostParams::default(), PatchParams::default());
                let pod: Pod = serde_json::from_value(pod(&name, &node))?;
                let created = create_or_keep(retried(|| api.create(&post, &pod)).await)
                    .with_context(|| format!("creating pod {namespace}/{name}"))?;
                // A pod kept from an earlier run already has its status, unless that run stopped
                // between the two writes: a GET is far cheaper than a status write.
                let running =
                    |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                if !created && running(&retried(|| api.get(&name)).await?) {
                    return anyhow::Ok(());
                }
                let status = Patch::Merge(pod_status());
                retried(|| api.patch_status(&name, &merge, &status))
                    .await
                    .with_context(|| format!("writing pod {namespace}/{name}'s status"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// A Deployment's meshed pod as it is stored on OpenShift after admission and its sandbox: attached
/// to linkerd-cni's NAD, injected (proxy and validator, Linkerd's annotations), admitted by SCC, its
/// networks' status written by Multus and OVN-Kubernetes (annotations of their usual size), bound to
/// `node`.
pub fn pod(name: &str, node: &str) -> Value {
    let ip = "10.128.2.17";
    let network_status = json!([
        { "name": "ovn-kubernetes", "interface": "eth0", "ips": [ip],
          "mac": "0a:58:0a:80:02:11", "default": true, "dns": {} },
        { "name": format!("app/{}", vocab::NAD_NAME), "interface": "net1", "dns": {} },
    ]);
    let pod_networks = json!({ "default": {
        "ip_addresses": [format!("{ip}/23")], "mac_address": "0a:58:0a:80:02:11",
        "gateway_ips": ["10.128.2.1"], "routes": [{ "dest": "10.128.0.0/14", "nextHop": "10.128.2.1" }],
        "ip_address": format!("{ip}/23"), "gateway_ip": "10.128.2.1", "role": "primary" } });
    json!({
        "metadata": {
            "name": name,
            "labels": { "app": "bench", "linkerd.io/control-plane-ns": "linkerd",
                        "linkerd.io/proxy-deployment": "bench", "linkerd.io/workload-ns": "app",
                        "pod-template-hash": "5d8f7c9b4" },
            "annotations": {
                (vocab::NETWORKS_ANNOTATION): vocab::NAD_NAME,
                "linkerd.io/inject": "enabled",
                "linkerd.io/created-by": "linkerd/proxy-injector edge-25.1.1",
                "linkerd.io/proxy-version": "edge-25.1.1",
                "linkerd.io/trust-root-sha256":
                    "6f3e1c1d0b8a4e2f9c7d5b3a1e0f2d4c6b8a0e1f3d5c7b9a1e2f4d6c8b0a2e4f",
                (vocab::PROXY_UID_ANNOTATION): "1000652102",
                "openshift.io/scc": "restricted-v2",
                "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
                "k8s.ovn.org/pod-networks": pod_networks.to_string(),
                "k8s.v1.cni.cncf.io/network-status": network_status.to_string(),
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench-5d8f7c9b4",
                "uid": "00000000-0000-4000-8000-000000000001", "controller": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "initContainers": [{ "name": "linkerd-network-validator",
                                 "image": "cr.l5d.io/linkerd/proxy:edge-25.1.1" }],
            "containers": [
                { "name": "app", "image": "registry.example/bench/app:1",
                  "ports": [{ "containerPort": 8080 }] },
                { "name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:edge-25.1.1",
                  "ports": [{ "containerPort": 4143, "name": "linkerd-proxy" },
                            { "containerPort": 4191, "name": "linkerd-admin" }] },
            ],
        },
    })
}

pub fn pod_status() -> Value {
    let condition = |t: &str| json!({ "type": t, "status": "True", "lastTransitionTime": SINCE });
    let running = |name: &str| {
        json!({
            "name": name, "ready": true, "restartCount": 0, "started": true,
            "image": "registry.example/bench/app:1", "imageID": "",
            "state": { "running": { "startedAt": SINCE } },
        })
    };
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition)
    .into();
    json!({ "status": {
        "phase": "Running",
        "podIP": "10.128.0.10",
        "conditions": conditions,
        "initContainerStatuses": [{
            "name": "linkerd-network-validator", "ready": true, "restartCount": 0,
            "image": "cr.l5d.io/linkerd/proxy:edge-25.1.1", "imageID": "",
            "state": { "terminated": { "exitCode": 0, "reason": "Completed",
                                        "startedAt": SINCE, "finishedAt": SINCE } },
        }],
        "containerStatuses": [running("app"), running("linkerd-proxy")],
    }})
}

/// A create that finds the object already there (a size grown from the last, an earlier run) keeps
/// it; whether it was created.
fn create_or_keep<T>(result: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
        Err(e) => Err(e),
    }
}

/// How often a request the apiserver gave up on is sent again before the build fails.
const TRIES: u32 = 5;

/// `request`, sent again (after 1, 2, 4, 8 s) while the apiserver answers 429 or 5xx: under a build
/// of 150,000 pods it sometimes times out its own quota evaluation or etcd write, and one such
/// answer should not end a build of half an hour.
async fn retried<T, F>(request: impl Fn() -> F) -> Result<T, kube::Error>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut wait = Duration::from_secs(1);
    for _ in 1..TRIES {
        match request().await {
            Err(kube::Error::Api(s)) if gave_up(s.code) => {
                eprintln!(
                    "scale: the apiserver answered {} ({}), again in {wait:?}",
                    s.code, s.message
                );
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            done => return done,
        }
    }
    request().await
}

/// An answer the apiserver may not give the same request again.
fn gave_up(code: u16) -> bool {
    code == 429 || code >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_throttling_and_server_errors_are_sent_again() {
        assert!(gave_up(429) && gave_up(500) && gave_up(504));
        assert!(!gave_up(409) && !gave_up(404) && !gave_up(422));
    }

    #[test]
    fn sizes_keep_openshifts_proportions_and_caps() {
        assert_eq!(
            Size::for_pods(150_000),
            Size {
                nodes: 2000,
                namespaces: 10_000,
                pods: 150_000
            }
        );
        assert_eq!(
            Size::for_pods(15_000),
            Size {
                nodes: 200,
                namespaces: 1000,
                pods: 15_000
            }
        );
        assert_eq!(
            Size::for_pods(1),
            Size {
                nodes: 1,
                namespaces: 1,
                pods: 1
            }
        );
    }

    #[test]
    fn the_simulated_pod_and_status_are_valid_objects() {
        let pod: Pod = serde_json::from_value(pod("p", "n")).expect("a Pod");
        assert_eq!(pod.spec.expect("spec").node_name.as_deref(), Some("n"));
        let status: Pod = serde_json::from_value(pod_status()).expect("a status");
        let status = status.status.expect("status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status
            .conditions
            .expect("conditions")
            .iter()
            .any(|c| c.type_ == "PodReadyToStartContainers" && c.status == "True"));
    }
}
