//! The nodes' load on the apiserver, counted where it lands ([`Served`]): one real
//! `linkerd-cni-install` (`--attach aux-chain`, as on OpenShift: its namespace view watch, the
//! NodeMultus it publishes by server-side apply with the Node read for its owner, the plugin's
//! TokenRequest, and at SIGTERM the GETs of its own pod and DaemonSet) run on a fake node against
//! the bench's apiserver, in three windows: its start, its steady state, its termination. The idle
//! apiserver's own requests (its loopback controllers: GET namespaces and services every few
//! seconds, informer watches re-opened) over as long a time are the floor, taken off per verb and
//! resource; so are the bench's own GETs while it waits for the start.
//!
//! Only what the installer asks for is counted ([`INSTALLER_ASKS`]): in six minutes the apiserver
//! re-opens a few of its own watches (pods, roles, priority levels), which fell outside the idle window
//! they were compared with and doubled the installer's steady state (50.2 an hour, of which ~20 its own).
//!
//! A plugin ADD cannot run here without a node (root, a netns, the release plugin): its requests
//! are given from the code (`cni-plugin/src/pod.rs` `fetch`: the pod and its namespace, read at
//! once; `default/kubernetes` only for a pod of Linkerd's control plane; none for a pod of a
//! namespace outside the installer's view), and said to be so in the rows.
//!
//! Then x nodes, as a table: 2,000 installers cannot run on this machine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::cluster::{node_name, Size};
use crate::args::OperatorBenchArgs;
use crate::fanout::{CNI_NAMESPACE, FLOOR_MANAGER};
use crate::requests::Served;
use crate::row;

/// The installer's DaemonSet, pod and the plugin's service account, as the chart names them.
const DAEMONSET: &str = "linkerd-cni";
const INSTALLER_POD: &str = "linkerd-cni-bench";
const PLUGIN_SA: &str = "linkerd-cni";
/// The installer's field manager on its NodeMultus (`cni-installer/src/publish.rs`; the installer
/// crate is not a dependency of the bench).
const INSTALLER_MANAGER: &str = "linkerd-cni-install";

#[derive(clap::Args, Debug, Clone)]
pub struct NodesArgs {
    /// The release `linkerd-cni-install`; without it the installer's rows say "not run".
    #[arg(long)]
    pub installer: Option<PathBuf>,
    /// How long the installer's steady state is counted (its requests per hour are scaled from it;
    /// the idle apiserver is counted as long first). Its namespace watch is re-opened about every
    /// 5 minutes and counted when it closes: give it more than that.
    #[arg(long, value_name = "DURATION", default_value = "6m", value_parser = vocab::duration::flag)]
    pub installer_steady: Duration,
    /// Nodes the table multiplies by (OpenShift's maximum).
    #[arg(long, default_value_t = 2000)]
    pub table_nodes: usize,
}

/// Every request `linkerd-cni-install --attach aux-chain` makes, as the apiserver's metrics name it
/// (verb, resource): the plugin's token, its NodeMultus and the Node it is owned by, its namespace
/// view's list and watch, and at SIGTERM its own pod and DaemonSet (`cni-installer/src`, and what the
/// chart's `cni-installer-rbac.yaml` lets it do). A request of another kind is not the installer's.
pub const INSTALLER_ASKS: &[(&str, &str)] = &[
    ("POST", "serviceaccounts/token"),
    ("GET", "nodemultuses"),
    ("POST", "nodemultuses"),
    ("PATCH", "nodemultuses"),
    ("APPLY", "nodemultuses"),
    ("GET", "nodes"),
    ("LIST", "namespaces"),
    ("WATCH", "namespaces"),
    ("GET", "pods"),
    ("GET", "daemonsets"),
];

/// Requests of one node, by phase: counted (start, steady, termination) or from the code (ADD).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLoad {
    pub start: f64,
    /// Requests in the steady window, the idle apiserver's own taken off per verb and resource.
    pub steady: f64,
    pub steady_seconds: f64,
    pub termination: f64,
}

impl NodeLoad {
    /// Steady requests per hour.
    pub fn per_hour(&self) -> f64 {
        if self.steady_seconds > 0.0 {
            self.steady * 3600.0 / self.steady_seconds
        } else {
            0.0
        }
    }

    /// The table's rows: (what, one node, `nodes` nodes).
    pub fn table(&self, nodes: usize) -> Vec<(String, String, String)> {
        let n = nodes as f64;
        let per_hour = self.per_hour();
        vec![
            (
                "installer start (once per installer pod)".into(),
                format!("{:.0} requests", self.start),
                format!("{:.0} requests (all nodes rolled at once)", self.start * n),
            ),
            (
                "installer steady state, per hour".into(),
                format!("{per_hour:.1} requests/h"),
                format!(
                    "{:.0} requests/h = {:.2}/s",
                    per_hour * n,
                    per_hour * n / 3600.0
                ),
            ),
            (
                "installer termination (SIGTERM)".into(),
                format!("{:.0} requests", self.termination),
                format!("{:.0} requests", self.termination * n),
            ),
        ]
    }
}

/// Requests of one plugin ADD, from the code (see the module doc): (pod in the view or not in
/// aux-chain mode, pod outside the view).
pub const ADD_REQUESTS: (f64, f64) = (2.0, 0.0);

pub async fn measure(
    args: &NodesArgs,
    target: &OperatorBenchArgs,
    client: &Client,
    size: Size,
) -> anyhow::Result<()> {
    let at = format!("{} enabled namespaces", size.namespaces);
    let Some(installer) = &args.installer else {
        row::single(
            "nodes: one installer's requests",
            "not run: no --installer",
            "-",
        );
        return Ok(());
    };
    let load = installer_load(args, installer, target, client).await?;
    for (what, one, all) in load.table(args.table_nodes) {
        row::single(
            &format!("nodes, {at}: {what}"),
            &one,
            &format!("x {} nodes (on paper): {all}", args.table_nodes),
        );
    }
    let (inside, outside) = ADD_REQUESTS;
    row::single(
        "nodes: one plugin ADD (from cni-plugin/src/pod.rs, not run here: no node)",
        &format!("{inside:.0} requests (GET pod, GET namespace); {outside:.0} outside the view"),
        "x pod starts per hour: independent of the node count",
    );
    Ok(())
}

async fn installer_load(
    args: &NodesArgs,
    installer: &Path,
    target: &OperatorBenchArgs,
    client: &Client,
) -> anyhow::Result<NodeLoad> {
    let node = node_name(0);
    prepare(client, &node).await?;
    let dir = tempdir()?;
    let fake = FakeNode::new(&dir, &target.kubeconfig)?;

    // The floor: the apiserver's own requests of the installer's kinds with nothing of ours running.
    let before = Served::read(client).await?;
    let began = Instant::now();
    tokio::time::sleep(args.installer_steady).await;
    let idle = before.since(&Served::read(client).await?);
    eprintln!("nodes: idle apiserver served: {}", idle.describe());
    let idle = idle.only(INSTALLER_ASKS);
    let idle_seconds = began.elapsed().as_secs_f64();

    let before = Served::read(client).await?;
    let mut child = fake.spawn(installer, &node)?;
    let result = async {
        let polls = wait_started(client, &node, &fake, &mut child).await?;
        let start = before.since(&Served::read(client).await?);
        eprintln!("nodes: installer start, served: {}", start.describe());
        let start = start
            .only(INSTALLER_ASKS)
            .without_own("GET", "nodemultuses", polls);

        let before = Served::read(client).await?;
        let began = Instant::now();
        tokio::time::sleep(args.installer_steady).await;
        let steady_seconds = began.elapsed().as_secs_f64();
        let steady = before.since(&Served::read(client).await?);
        eprintln!(
            "nodes: installer steady state, served: {}",
            steady.describe()
        );
        // Per verb and resource: a total less the idle total hid the installer in the noise.
        let steady = steady
            .only(INSTALLER_ASKS)
            .less(&idle, steady_seconds / idle_seconds.max(1e-9));
        eprintln!(
            "nodes: installer steady state, its kinds less the idle apiserver's: {}",
            steady.describe()
        );

        let before = Served::read(client).await?;
        terminate(&mut child).await?;
        let termination = before.since(&Served::read(client).await?);
        eprintln!(
            "nodes: installer termination, served: {}",
            termination.describe()
        );
        let termination = termination.only(INSTALLER_ASKS);
        anyhow::Ok(NodeLoad {
            start: start.total(),
            steady: steady.total(),
            steady_seconds,
            termination: termination.total(),
        })
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The plugin's service account, the installer's DaemonSet and its pod on `node` (owned by it, so
/// the termination reads both as on a cluster).
async fn prepare(client: &Client, node: &str) -> anyhow::Result<()> {
    let ns = CNI_NAMESPACE;
    let apply = PatchParams::apply(FLOOR_MANAGER).force();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .patch(
            PLUGIN_SA,
            &apply,
            &Patch::Apply(json!({ "apiVersion": "v1", "kind": "ServiceAccount",
                                  "metadata": { "name": PLUGIN_SA } })),
        )
        .await
        .context("applying the plugin's service account")?;
    let labels = json!({ "app": DAEMONSET });
    let ds = Api::<DaemonSet>::namespaced(client.clone(), ns)
        .patch(
            DAEMONSET,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": { "name": DAEMONSET },
                "spec": { "selector": { "matchLabels": labels }, "template": {
                    "metadata": { "labels": labels },
                    "spec": { "containers": [{ "name": "install", "image": "bench" }] } } },
            })),
        )
        .await
        .context("applying the installer's DaemonSet")?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": INSTALLER_POD, "labels": labels, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": DAEMONSET,
            "uid": ds.metadata.uid, "controller": true }] },
        "spec": { "nodeName": node, "containers": [{ "name": "install", "image": "bench" }] },
    }))?;
    match Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e).context("creating the installer's pod"),
    }
}

/// Until the installer has published its NodeMultus (its field manager on it) and written its view
/// of the enabled namespaces (its namespace LIST done), then 2 s for what follows at once. Returns
/// the GETs of the NodeMultus this sent (not the installer's).
async fn wait_started(
    client: &Client,
    node: &str,
    fake: &FakeNode,
    child: &mut Child,
) -> anyhow::Result<f64> {
    let resource = linkerd_multus_crds::node_multus::api_resource(None);
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut polls = 0.0;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!(
                "the installer exited ({status}): see {}",
                fake.log.display()
            );
        }
        polls += 1.0;
        let published = api
            .get(node)
            .await?
            .metadata
            .managed_fields
            .is_some_and(|m| {
                m.iter()
                    .any(|f| f.manager.as_deref() == Some(INSTALLER_MANAGER))
            });
        if published && fake.view_written() {
            tokio::time::sleep(Duration::from_secs(2)).await;
            return Ok(polls);
        }
        if Instant::now() > deadline {
            bail!(
                "the installer did not publish and write its view within 120 s (published: \
                 {published}); see {}",
                fake.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn terminate(child: &mut Child) -> anyhow::Result<()> {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            bail!("the installer did not exit within 60 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The apiserver counts a request once it answered; the installer has its answers.
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("linkerd-multus-nodes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A node's directories under `dir`: a thin Multus in the net dir, a bin dir, a service-account
/// dir with the bench kubeconfig's token and CA, a stand-in plugin binary.
struct FakeNode {
    net: PathBuf,
    bin: PathBuf,
    sa: PathBuf,
    plugin: PathBuf,
    log: PathBuf,
    host: String,
    port: String,
}

impl FakeNode {
    fn new(dir: &Path, kubeconfig: &Path) -> anyhow::Result<Self> {
        let (net, bin, sa) = (dir.join("net.d"), dir.join("bin"), dir.join("sa"));
        for d in [&net, &bin, &sa] {
            std::fs::create_dir_all(d)?;
        }
        let conf = json!({
            "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
            "clusterNetwork": net.join("10-flannel.conflist"),
            "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
        });
        std::fs::write(net.join("00-multus.conf"), conf.to_string())?;
        std::fs::write(
            net.join("10-flannel.conflist"),
            json!({ "cniVersion": "0.3.1", "name": "cbr0",
                    "plugins": [{ "type": "flannel" }, { "type": "portmap" }] })
            .to_string(),
        )?;
        let plugin = dir.join("linkerd-cni-build");
        std::fs::write(&plugin, "#!/bin/sh\necho stand-in linkerd-cni\n")?;

        let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let cluster = kc
            .clusters
            .first()
            .and_then(|c| c.cluster.clone())
            .context("no cluster in the kubeconfig")?;
        let server = cluster.server.context("no server")?;
        let (host, port) = server
            .trim_start_matches("https://")
            .rsplit_once(':')
            .context("server is not https://host:port")?;
        let ca = cluster
            .certificate_authority_data
            .context("no certificate-authority-data")?;
        use base64::Engine as _;
        std::fs::write(
            sa.join("ca.crt"),
            base64::engine::general_purpose::STANDARD.decode(ca)?,
        )?;
        // kube serializes the token it holds as a secret as it reads it.
        let user = kc.auth_infos.first().and_then(|a| a.auth_info.as_ref());
        let token = serde_json::to_value(user)?["token"]
            .as_str()
            .context("no token in the kubeconfig")?
            .to_string();
        std::fs::write(sa.join("token"), token)?;
        std::fs::write(sa.join("namespace"), CNI_NAMESPACE)?;
        Ok(Self {
            log: dir.join("installer.log"),
            net,
            bin,
            sa,
            plugin,
            host: host.trim_matches(|c| c == '[' || c == ']').to_string(),
            port: port.to_string(),
        })
    }

    /// The view of the enabled namespaces, once written.
    fn view_written(&self) -> bool {
        self.net.join(vocab::NAMESPACE_VIEW_FILE_NAME).exists()
    }

    fn spawn(&self, installer: &Path, node: &str) -> anyhow::Result<Child> {
        let log = std::fs::File::create(&self.log)?;
        Command::new(installer)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .env("KUBERNETES_SERVICE_HOST", &self.host)
            .env("KUBERNETES_SERVICE_PORT", &self.port)
            .env("NODE_NAME", node)
            .env("POD_NAME", INSTALLER_POD)
            .env("POD_NAMESPACE", CNI_NAMESPACE)
            .args(["--chain-mode", "none", "--attach", "aux-chain"])
            .arg("--dest-cni-net-dir")
            .arg(&self.net)
            .arg("--dest-cni-bin-dir")
            .arg(&self.bin)
            .arg("--service-account-dir")
            .arg(&self.sa)
            .arg("--plugin-binary")
            .arg(&self.plugin)
            .args(["--plugin-service-account", PLUGIN_SA])
            .args(["--linkerd-namespace", "bench-linkerd"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", installer.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_scales_the_steady_window_to_an_hour_and_each_phase_by_the_nodes() {
        let load = NodeLoad {
            start: 7.0,
            steady: 2.0,
            steady_seconds: 360.0,
            termination: 2.0,
        };
        assert_eq!(load.per_hour(), 20.0);
        let table = load.table(2000);
        assert_eq!(table[0].1, "7 requests");
        assert_eq!(table[0].2, "14000 requests (all nodes rolled at once)");
        assert_eq!(table[1].1, "20.0 requests/h");
        assert_eq!(table[1].2, "40000 requests/h = 11.11/s");
        assert_eq!(table[2].2, "4000 requests");
        let none = NodeLoad {
            steady_seconds: 0.0,
            ..load
        };
        assert_eq!(none.per_hour(), 0.0);
    }
}
