//! The node agent (`--node-agent`) against the real apiserver, the operator a real process: a
//! NodeAgent becomes the installer DaemonSet and linkerd-cni's ConfigMap, owned by it; a ConfigMap
//! someone else made is left alone and said in Degraded; a spec change rolls into the DaemonSet; the
//! status is written, then nothing at all while idle; a NodeAgent of another name gets nothing.
//!
//! The bare testbed runs no controller-manager: no DaemonSet controller counts the DaemonSet (so
//! Available is Unknown and Progressing True, `NotCounted`) and no garbage collector deletes the
//! objects with their NodeAgent. The ownerReferences that garbage collection follows are asserted
//! here; the deletion itself is the node tier's (a real garbage collector).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::CustomResourceExt;
use kube::{Api, Client};
use linkerd_multus_crds::{NodeAgent, NodeAgentSpec};
use linkerd_multus_e2e::{free_port, kubeconfig_path, unique_name, TestNamespace};
use serde_json::json;
use support::*;

const KUBECONFIG_ON_NODES: &str = "/etc/cni/net.d/ZZZ-linkerd-multus-kubeconfig";

/// Kills the operator (by its pid) and deletes the test's NodeAgents when the test ends, passed or not.
struct Cleanup {
    child: Option<Child>,
    client: Client,
    agents: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let agents = self.agents.clone();
        let client = self.client.clone();
        // The runtime may be gone in a panic: a thread of its own for the deletes.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(async {
                let api = Api::<NodeAgent>::all(client);
                for name in agents {
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            });
        })
        .join();
    }
}

fn writes(log: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("node agent: applied") || l.contains("node agent: status written"))
        .count()
}

fn condition(agent: &NodeAgent, kind: &str) -> Option<(String, String)> {
    let c = agent
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)?;
    Some((c.status.clone(), c.reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver) and the built binary: run by e2e/test-all"]
async fn a_node_agent_becomes_the_installer_it_owns() {
    init_logs();
    let client = linkerd_multus_e2e::client().await;
    ensure_crd(&client, &NodeAgent::crd()).await;
    let home = TestNamespace::create(&client, "node-agent-home").await;
    let cni = TestNamespace::create(&client, "node-agent-cni").await;
    let name = unique_name("na");
    let other = format!("{name}-other");
    let cm_name = unique_name("cni-config");
    let agents = Api::<NodeAgent>::all(client.clone());
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), &cni.name);
    let configmaps = Api::<ConfigMap>::namespaced(client.clone(), &cni.name);
    let mut cleanup = Cleanup {
        child: None,
        client: client.clone(),
        agents: vec![name.clone(), other.clone()],
    };

    // A ConfigMap of that name someone else made (Linkerd's linkerd2-cni, say).
    let foreign: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": cm_name, "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "data": {"cni_network_config": "{}"},
    }))
    .expect("configmap");
    configmaps
        .create(&PostParams::default(), &foreign)
        .await
        .expect("foreign ConfigMap");

    let log = std::env::temp_dir().join(format!("{}.log", unique_name("node-agent-operator")));
    let out = std::fs::File::create(&log).expect("log file");
    let admin = format!("127.0.0.1:{}", free_port());
    let webhook = format!("127.0.0.1:{}", free_port());
    // Selects no namespace: the NAD controller has nothing to do here.
    let selector = format!("{RUN_LABEL}={name}");
    let child = Command::new(env!("CARGO_BIN_EXE_linkerd-multus-operator"))
        .env("KUBECONFIG", kubeconfig_path())
        .env("RUST_LOG", "info")
        .env("NODE_AGENT", &name)
        .args(["--cni-namespace", &cni.name, "--cni-configmap", &cm_name])
        .args(["--cni-kubeconfig", KUBECONFIG_ON_NODES, "--resync", "1s"])
        .args(["--namespace", &home.name, "--namespace-selector", &selector])
        .args(["--admission", "webhook"])
        .args(["--admin-addr", &admin, "--webhook-addr", &webhook])
        .args(["--webhook-cert-secret", "node-agent-webhook-cert"])
        .stdout(Stdio::null())
        .stderr(Stdio::from(out))
        .spawn()
        .expect("start the operator binary");
    cleanup.child = Some(child);
    let report = || std::fs::read_to_string(&log).unwrap_or_default();

    // 1. The NodeAgent, and one of another name.
    let agent = agents
        .create(
            &PostParams::default(),
            &NodeAgent::new(&name, NodeAgentSpec::default()),
        )
        .await
        .expect("NodeAgent");
    agents
        .create(
            &PostParams::default(),
            &NodeAgent::new(&other, NodeAgentSpec::default()),
        )
        .await
        .expect("the other NodeAgent");
    let uid = agent.metadata.uid.clone().expect("uid");

    // The foreign ConfigMap is never taken over: Degraded says whose it is, no DaemonSet yet.
    let degraded = eventually("Degraded NotOwned", || async {
        let a = agents.get(&name).await.ok()?;
        let c = a
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Degraded")?;
        (c.reason == "NotOwned").then_some(c.message)
    })
    .await;
    assert!(degraded.contains("managed-by: Helm"), "{degraded}");
    let kept = configmaps.get(&cm_name).await.expect("ConfigMap");
    assert_eq!(
        kept.data.expect("data")["cni_network_config"],
        "{}",
        "{}",
        report()
    );
    assert!(daemonsets
        .get_opt(&format!("{name}-cni"))
        .await
        .expect("get")
        .is_none());

    // 2. Gone, the operator makes its own: both objects, owned by the NodeAgent.
    configmaps
        .delete(&cm_name, &DeleteParams::default())
        .await
        .expect("delete the foreign ConfigMap");
    let ds = eventually("the installer DaemonSet", || async {
        daemonsets
            .get_opt(&format!("{name}-cni"))
            .await
            .ok()
            .flatten()
    })
    .await;
    let cm = eventually("the operator's ConfigMap", || async {
        let cm = configmaps.get_opt(&cm_name).await.ok().flatten()?;
        cm.metadata.owner_references.is_some().then_some(cm)
    })
    .await;
    for owners in [&ds.metadata.owner_references, &cm.metadata.owner_references] {
        let owner = &owners.as_ref().expect("ownerReferences")[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("NodeAgent", name.as_str(), uid.as_str(), Some(true))
        );
    }
    let field_managers: Vec<_> = ds
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(field_managers, [vocab::FIELD_MANAGER]);

    // Status: no DaemonSet controller on this testbed, so not counted; nothing failing.
    let agent = eventually("the status of the created objects", || async {
        let a = agents.get(&name).await.ok()?;
        (condition(&a, "Degraded") == Some(("False".into(), "AsExpected".into()))).then_some(a)
    })
    .await;
    assert_eq!(
        condition(&agent, "Available"),
        Some(("Unknown".into(), "NotCounted".into()))
    );
    assert_eq!(
        condition(&agent, "Progressing"),
        Some(("True".into(), "NotCounted".into()))
    );
    assert_eq!(
        agent.status.as_ref().and_then(|s| s.observed_generation),
        Some(1)
    );

    // 3. A spec change rolls into the DaemonSet (and its plugin config into the ConfigMap).
    let before = ds
        .spec
        .clone()
        .expect("spec")
        .template
        .metadata
        .expect("meta")
        .annotations
        .expect("a")["checksum/config"]
        .clone();
    agents
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"logLevel": "debug"}})),
        )
        .await
        .expect("patch the spec");
    let ds = eventually("the DaemonSet with --cni-log-level=debug", || async {
        let ds = daemonsets.get(&format!("{name}-cni")).await.ok()?;
        let args = ds.spec.as_ref()?.template.spec.as_ref()?.containers[0]
            .args
            .clone()?;
        args.contains(&"--cni-log-level=debug".to_string())
            .then_some(ds)
    })
    .await;
    let after = ds
        .spec
        .expect("spec")
        .template
        .metadata
        .expect("meta")
        .annotations
        .expect("a")["checksum/config"]
        .clone();
    assert_ne!(
        before, after,
        "the changed plugin config must roll the pods"
    );
    eventually("the status of generation 2", || async {
        let a = agents.get(&name).await.ok()?;
        (a.status?.observed_generation == Some(2)).then_some(())
    })
    .await;

    // 4. Idle: over several recheck periods (--resync 1s) and watch events, not one write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (sent, idle_versions) = (
        writes(&log),
        versions(&agents, &daemonsets, &configmaps, &name, &cm_name).await,
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(writes(&log), sent, "writes while idle:\n{}", report());
    assert_eq!(
        versions(&agents, &daemonsets, &configmaps, &name, &cm_name).await,
        idle_versions
    );
    assert!(
        sent >= 4,
        "the applies and status writes are logged: {sent}\n{}",
        report()
    );

    // 5. The NodeAgent of another name got nothing.
    let untouched = agents.get(&other).await.expect("other");
    assert!(untouched.status.is_none(), "{:?}", untouched.status);
    assert!(daemonsets
        .get_opt(&format!("{other}-cni"))
        .await
        .expect("get")
        .is_none());

    // 6. Deleted, the NodeAgent leaves its objects to the garbage collector (none on this testbed):
    // the operator neither recreates nor touches them.
    agents
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the NodeAgent");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(writes(&log), sent, "writes after the delete:\n{}", report());
}

async fn versions(
    agents: &Api<NodeAgent>,
    daemonsets: &Api<DaemonSet>,
    configmaps: &Api<ConfigMap>,
    name: &str,
    cm: &str,
) -> [Option<String>; 3] {
    [
        agents
            .get(name)
            .await
            .expect("agent")
            .metadata
            .resource_version,
        daemonsets
            .get(&format!("{name}-cni"))
            .await
            .expect("ds")
            .metadata
            .resource_version,
        configmaps
            .get(cm)
            .await
            .expect("cm")
            .metadata
            .resource_version,
    ]
}
