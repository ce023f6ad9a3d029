//! The testbed's node mode (`e2e/testbed up --node`): a kubelet + containerd node with the whole control
//! plane, the project's images imported. Tests use the shared one `e2e/test-all` starts, or a dedicated
//! one of their own (to take it down and check what is left).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::testbed::workspace_root;

const HOW_TO_START: &str = "start the node with `e2e/testbed up --node` (e2e/test-all does)";
/// File name of the node's Multus config (e2e/lib/testbed-node-multus.sh writes it, or Multus' thick
/// daemon does).
pub const MULTUS_CONF: &str = "00-multus.conf";
/// The kubelet's version and Ready heartbeat in the node's status, as `kubectl get nodes -o` takes them.
const KUBELET_STATUS: &str = "jsonpath={.items[0].status.nodeInfo.kubeletVersion} \
    {.items[0].status.conditions[?(@.type==\"Ready\")].lastHeartbeatTime}";
/// Where the thick daemon (and OpenShift) reads the cluster network's config: in the node's /run.
pub const MULTUS_AUTOCONF_DIR: &str = "/run/multus/cni/net.d";
/// The cluster network's config file there (thick).
pub const MULTUS_CLUSTER_CONF: &str = "10-testbed.conf";

/// Which Multus the node runs: chosen by `LINKERD_MULTUS_NODE_MULTUS` at `e2e/testbed up --node`,
/// recorded in the node's `node/multus` (e2e/lib/testbed-node-multus.sh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultusKind {
    /// The project's stand-in for the thin plugin (`multus-stand-in`, linked as `multus`).
    StandIn,
    /// The real thin plugin: its 00-multus.conf is read at each call.
    Thin,
    /// The real thick plugin (daemon + shim, OpenShift's): its daemon config takes effect when the
    /// daemon restarts, which writes 00-multus.conf anew.
    Thick,
}

impl MultusKind {
    /// The recorded name (`stand-in`, `thin`, `thick`); none recorded is a node from before the
    /// choice, which ran the stand-in.
    pub fn parse(recorded: Option<&str>) -> Result<Self, String> {
        match recorded.map(str::trim) {
            None | Some("stand-in") => Ok(Self::StandIn),
            Some("thin") => Ok(Self::Thin),
            Some("thick") => Ok(Self::Thick),
            Some(other) => Err(format!(
                "unknown Multus {other:?} recorded (expected stand-in, thin or thick)"
            )),
        }
    }
}

/// The node's layout, chosen by `LINKERD_MULTUS_NODE_PROFILE` at `e2e/testbed up --node` and recorded
/// in the node's `node/profile` (e2e/lib/testbed-node-profile.sh): what the scenario installs with and
/// where the node's runtime reads CNI configs and plugins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `plain` or `openshift`.
    pub name: String,
    /// The runtime's CNI config directory as the node's processes see it (a chart value).
    pub cni_net_dir: PathBuf,
    /// The runtime's CNI plugin directory as the node's processes see it.
    pub cni_bin_dir: PathBuf,
    /// The chart's values file an admin of this node installs with (workspace-relative), if any.
    pub chart_values: Option<PathBuf>,
    /// The node's Multus' `globalNamespaces` when it isolates namespaces.
    pub global_namespaces: String,
}

impl Profile {
    /// The recorded `key=value` lines; none recorded is a node from before profiles (plain, its CNI
    /// directories under `state`).
    pub fn parse(recorded: Option<&str>, state: &Path) -> Result<Self, String> {
        let get = |key: &str| {
            recorded?
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let name = get("profile").unwrap_or_else(|| "plain".into());
        if name != "plain" && name != "openshift" {
            return Err(format!(
                "unknown profile {name:?} recorded (expected plain or openshift)"
            ));
        }
        Ok(Self {
            cni_net_dir: get("cni_net_dir").map_or_else(|| state.join("cni/net.d"), PathBuf::from),
            cni_bin_dir: get("cni_bin_dir").map_or_else(|| state.join("cni/bin"), PathBuf::from),
            chart_values: get("chart_values").map(PathBuf::from),
            global_namespaces: get("global_namespaces").unwrap_or_else(|| "default".into()),
            name,
        })
    }

    pub fn is_openshift(&self) -> bool {
        self.name == "openshift"
    }
}

/// A node testbed: its state directory, and whether this value started it (and stops it when dropped).
pub struct Node {
    dir: PathBuf,
    cluster: Cluster,
    dedicated: bool,
    down_done: bool,
}

impl Node {
    /// The node `e2e/testbed up --node` started: `LINKERD_MULTUS_NODE_TESTBED_DIR`, else `.testbed-node/`.
    /// Panics, saying how to start it, when it is not up.
    pub fn shared() -> Self {
        let dir = std::env::var_os("LINKERD_MULTUS_NODE_TESTBED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".testbed-node"));
        let node = Self {
            cluster: Cluster::new(dir.join("kubeconfig")),
            dir,
            dedicated: false,
            down_done: false,
        };
        let out = node.script("status");
        assert!(
            out.status.success(),
            "no node testbed in {}: {}; {HOW_TO_START}",
            node.dir.display(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
        node
    }

    /// Starts a node of its own in a fresh directory under the temp dir (needs root, the cached
    /// Kubernetes binaries and the static builds of `e2e/images`: cargo cannot build while `cargo test`
    /// holds the target directory); `down` on drop.
    pub fn dedicated(prefix: &str) -> Self {
        let dir = std::env::temp_dir().join(crate::unique_name(prefix));
        let node = Self {
            cluster: Cluster::new(dir.join("kubeconfig")),
            dir,
            dedicated: true,
            down_done: false,
        };
        let out = node.script("up");
        assert!(
            out.status.success(),
            "e2e/testbed up --node in {} failed:\n{}",
            node.dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        node
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `f` in the node's network namespace (where its apiserver, kubelet and pods live): a listener
    /// bound in `f` on 127.0.0.1 is what the node's apiserver reaches as `https://127.0.0.1:<port>`.
    pub fn run_in_netns<T: Send, F: FnOnce() -> T + Send>(&self, f: F) -> T {
        crate::netns::run_in(&self.netns(), f)
    }

    /// The node's network namespace (`/proc/<holder>/ns/net`), for a process to join (`nsenter --net`).
    pub fn netns(&self) -> PathBuf {
        let pid = std::fs::read_to_string(self.dir.join("holder.pid"))
            .unwrap_or_else(|e| panic!("the node's holder.pid in {}: {e}", self.dir.display()));
        PathBuf::from(format!("/proc/{}/ns/net", pid.trim()))
    }

    /// The node's CNI directories as containerd uses them: `bin` and `net.d` under this path.
    /// The node's Multus config: the stand-in's, in Multus' file name and type.
    pub fn multus_conf(&self) -> PathBuf {
        self.cni_dir().join("net.d").join(MULTUS_CONF)
    }

    pub fn cni_dir(&self) -> PathBuf {
        self.dir.join("cni")
    }

    /// The node's layout ([`Profile`]).
    pub fn profile(&self) -> Profile {
        let file = self.dir.join("node/profile");
        let recorded = std::fs::read_to_string(&file).ok();
        Profile::parse(recorded.as_deref(), &self.dir)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
    }

    /// Which Multus this node runs.
    pub fn multus_kind(&self) -> MultusKind {
        let recorded = std::fs::read_to_string(self.dir.join("node/multus")).ok();
        MultusKind::parse(recorded.as_deref())
            .unwrap_or_else(|e| panic!("{}: {e}", self.dir.join("node/multus").display()))
    }

    /// The thick daemon's config (OpenShift's keys), which [`Node::restart_multus`] applies.
    pub fn multus_daemon_config(&self) -> PathBuf {
        self.dir.join("multus/daemon-config.json")
    }

    /// Restarts Multus' thick daemon (`e2e/testbed restart-multus --node`), as a rollout of its
    /// DaemonSet would after a config change: 00-multus.conf is gone meanwhile and written anew.
    /// Returns once the daemon serves its socket and has written it.
    pub fn restart_multus(&self) {
        let out = self.script("restart-multus");
        assert!(
            out.status.success(),
            "e2e/testbed restart-multus --node failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The full reference of a locally built image (`operator`, `cni`, `test`): the
    /// `LINKERD_MULTUS_<KEY>_IMAGE` variable when set, else what `e2e/images` recorded for this node.
    /// `None` when that image was not built (its binary does not exist yet).
    pub fn image(&self, key: &str) -> Option<String> {
        let var = format!("LINKERD_MULTUS_{}_IMAGE", key.to_ascii_uppercase());
        if let Ok(v) = std::env::var(&var) {
            return Some(v);
        }
        let recorded = std::fs::read_to_string(self.dir.join("images.env")).ok()?;
        recorded
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .find_map(|l| l.strip_prefix(&format!("{var}=")).map(str::to_string))
    }

    /// [`Node::image`], which must have been built: panics saying so otherwise.
    pub fn built_image(&self, key: &str) -> String {
        self.image(key)
            .unwrap_or_else(|| panic!("no {key} image recorded for the node: did e2e/images run?"))
    }

    /// The sandbox image `e2e/images` builds for this node (always built: it needs no Rust binary).
    pub fn pause_image() -> String {
        let out = Command::new(workspace_root().join("e2e/images"))
            .args(["--ref", "pause"])
            .output()
            .expect("running e2e/images --ref pause");
        assert!(out.status.success(), "e2e/images --ref pause failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// What this node runs right now, as the testbed recorded it: to check after `down`.
    pub fn footprint(&self) -> Footprint {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        let mut pids = BTreeSet::new();
        for entry in std::fs::read_dir(&self.dir).expect("the node's state dir") {
            let path = entry.expect("a dir entry").path();
            if path.extension().is_some_and(|e| e == "pid") {
                pids.extend(
                    std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|s| s.trim().parse::<u32>().ok()),
                );
            }
        }
        let cgroup = read("node/cgroup").trim().to_string();
        let cgroup_dirs = cgroup_hierarchies()
            .into_iter()
            .map(|h| h.join(&cgroup))
            .filter(|d| d.is_dir())
            .collect::<Vec<_>>();
        // The pods' processes, from the cgroups the kubelet made.
        for dir in &cgroup_dirs {
            pids.extend(procs_under(dir));
        }
        let namespaces: BTreeSet<String> = read("node/netns-id")
            .lines()
            .chain(read("node/mntns-id").lines())
            .map(str::to_string)
            .collect();
        // Held open until the footprint goes: a namespace's inode number, once it is gone, is free for
        // the next one made on the host (another node's pod sandbox, in CI), and `leftovers` would
        // name that one's processes. So is a PID: each is kept with its start time.
        let holder = read("holder.pid").trim().to_string();
        let pinned = ["net", "mnt"]
            .iter()
            .filter_map(|kind| {
                let path = format!("/proc/{holder}/ns/{kind}");
                let id = std::fs::read_link(&path).ok()?;
                namespaces
                    .contains(&*id.to_string_lossy())
                    .then(|| std::fs::File::open(&path).ok())
                    .flatten()
            })
            .collect();
        Footprint {
            dir: self.dir.clone(),
            pids: pids
                .into_iter()
                .filter_map(|pid| Some((pid, running_since(pid)?)))
                .collect(),
            namespaces,
            _pinned: pinned,
            cgroup,
            cgroup_dirs,
        }
    }

    /// Reboots the node as its pods see it (`e2e/testbed reboot --node`): the kubelet, every pod's
    /// processes and containerd stopped, the node's /run emptied, containerd and the kubelet started
    /// again, so every pod gets a new sandbox through the CNI config of the moment. `boot` (a shell
    /// command, run in the node's mount namespace once /run is empty, before containerd starts) plays
    /// what the node's boot writes there first. Returns when the node is Ready again and its kubelet
    /// has posted its status, with the version it had before (a reboot once started the cached
    /// v1.20.2 kubelet on a v1.35.6 node; `up` now records what it was given).
    pub fn reboot(&self, boot: &str) {
        // The kubelet's version and heartbeat, as its node status shows them.
        let status = || {
            self.kubectl_ok(&["get", "nodes", "-o", KUBELET_STATUS])
                .split_once(' ')
                .map(|(v, h)| (v.to_string(), h.to_string()))
                .unwrap_or_default()
        };
        let (version, heartbeat) = status();
        let out = self.script_with("reboot", &[("LINKERD_MULTUS_REBOOT_BOOT", boot)]);
        assert!(
            out.status.success(),
            "e2e/testbed reboot --node failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Read once the restarted kubelet has posted its status.
        let after = crate::wait_for_explained(
            "the restarted kubelet posts the node's status",
            Duration::from_secs(60),
            || Some(status()).filter(|(_, h)| *h != heartbeat),
            || self.kubectl_ok(&["get", "nodes", "-o", "yaml"]),
        );
        assert_eq!(after.0, version, "the kubelet's version across the reboot");
    }

    /// `path` as the node's processes (kubelet, containerd, the CNI plugins) see it: their mount
    /// namespace has a tmpfs of its own on /run, as a real node's /run is, emptied by a reboot.
    pub fn in_node_mounts(&self, path: &str) -> PathBuf {
        let pid = std::fs::read_to_string(self.dir.join("holder.pid"))
            .unwrap_or_else(|e| panic!("the node's holder.pid in {}: {e}", self.dir.display()));
        PathBuf::from(format!("/proc/{}/root", pid.trim())).join(path.trim_start_matches('/'))
    }

    /// Runs `e2e/testbed down --node` now and returns its output.
    pub fn down(&mut self) -> Output {
        self.down_done = true;
        self.script("down")
    }

    fn script(&self, command: &str) -> Output {
        self.script_with(command, &[])
    }

    fn script_with(&self, command: &str, env: &[(&str, &str)]) -> Output {
        Command::new(workspace_root().join("e2e/testbed"))
            .args([command, "--node"])
            .env("LINKERD_MULTUS_TESTBED_DIR", &self.dir)
            .env("LINKERD_MULTUS_IMAGES_NO_BUILD", "1")
            .envs(env.iter().copied())
            .output()
            .unwrap_or_else(|e| panic!("cannot run e2e/testbed {command} --node: {e}"))
    }
}

/// kubeconfig, kubectl, client, get_json, describe: the node's cluster.
impl std::ops::Deref for Node {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.dedicated && !self.down_done {
            let _ = self.down();
        }
    }
}

/// A node's processes, namespaces, cgroups and directory, recorded while it runs.
#[derive(Debug)]
pub struct Footprint {
    pub dir: PathBuf,
    /// Each process and its start (clock ticks after boot).
    pub pids: BTreeMap<u32, u64>,
    /// `net:[...]` and `mnt:[...]` of the node's namespaces.
    pub namespaces: BTreeSet<String>,
    /// The namespaces themselves, open (see [`Node::footprint`]).
    _pinned: Vec<std::fs::File>,
    pub cgroup: String,
    pub cgroup_dirs: Vec<PathBuf>,
}

impl Footprint {
    /// Everything of it that still exists, described; empty when nothing is left.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = vec![];
        for (pid, start) in &self.pids {
            if running_since(*pid) == Some(*start) {
                left.push(format!("process {pid} ({})", cmdline(*pid)));
            }
        }
        for (pid, ns) in processes_in(&self.namespaces) {
            left.push(format!("process {pid} ({}) in {ns}", cmdline(pid)));
        }
        for h in cgroup_hierarchies() {
            let d = h.join(&self.cgroup);
            if !self.cgroup.is_empty() && d.exists() {
                left.push(format!("cgroup {}", d.display()));
            }
        }
        let dir = self.dir.to_string_lossy().to_string();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for line in mounts.lines().filter(|l| l.contains(&dir)) {
            left.push(format!("mount {line}"));
        }
        if self.dir.exists() {
            left.push(format!("directory {}", self.dir.display()));
        }
        left
    }
}

/// The mount points of the host's cgroup hierarchies (v1 and v2).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect()
}

fn procs_under(dir: &Path) -> Vec<u32> {
    let mut pids = vec![];
    if let Ok(s) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(s.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                pids.extend(procs_under(&e.path()));
            }
        }
    }
    pids
}

/// Processes whose network or mount namespace is one of `namespaces`.
fn processes_in(namespaces: &BTreeSet<String>) -> Vec<(u32, String)> {
    let mut found = vec![];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        for kind in ["net", "mnt"] {
            if let Ok(link) = std::fs::read_link(format!("/proc/{pid}/ns/{kind}")) {
                let link = link.to_string_lossy().to_string();
                if namespaces.contains(&link) {
                    found.push((pid, link));
                }
            }
        }
    }
    found
}

/// When `pid` started (field 22 of its stat, clock ticks after boot), while it runs. A zombie has
/// stopped: the daemons' parent (`up`) is gone, so they wait for init to reap them, which takes
/// seconds here.
fn running_since(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses),
    // and the start is the 20th field after it.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// `repository` and `tag` of a full image reference.
pub fn split_ref(image: &str) -> (&str, &str) {
    image
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("image reference without a tag: {image}"))
}

#[cfg(test)]
mod tests {
    use super::{MultusKind, Profile};
    use std::path::{Path, PathBuf};

    /// A node from before profiles is plain with its state's directories; OpenShift's is read as
    /// recorded; an unknown name is refused.
    #[test]
    fn the_recorded_profile_is_read() {
        let state = Path::new("/s");
        let plain = Profile::parse(None, state).unwrap();
        assert_eq!(plain.name, "plain");
        assert_eq!(plain.cni_net_dir, PathBuf::from("/s/cni/net.d"));
        assert_eq!(plain.chart_values, None);
        assert_eq!(plain.global_namespaces, "default");
        let ocp = Profile::parse(
            Some("profile=openshift\ncni_net_dir=/etc/kubernetes/cni/net.d\ncni_bin_dir=/var/lib/cni/bin\nchart_values=helm/values-openshift.yaml\nglobal_namespaces=default,openshift-multus\n"),
            state,
        )
        .unwrap();
        assert!(ocp.is_openshift());
        assert_eq!(ocp.cni_net_dir, PathBuf::from("/etc/kubernetes/cni/net.d"));
        assert_eq!(ocp.cni_bin_dir, PathBuf::from("/var/lib/cni/bin"));
        assert_eq!(ocp.chart_values, Some("helm/values-openshift.yaml".into()));
        assert_eq!(ocp.global_namespaces, "default,openshift-multus");
        let err = Profile::parse(Some("profile=okd\n"), state).unwrap_err();
        assert!(err.contains("\"okd\""), "{err}");
    }

    /// A node recorded before the choice existed ran the stand-in; anything unknown is refused.
    #[test]
    fn the_recorded_multus_is_read() {
        for (recorded, kind) in [
            (None, MultusKind::StandIn),
            (Some("stand-in\n"), MultusKind::StandIn),
            (Some("thin\n"), MultusKind::Thin),
            (Some("thick"), MultusKind::Thick),
        ] {
            assert_eq!(MultusKind::parse(recorded), Ok(kind), "{recorded:?}");
        }
        let err = MultusKind::parse(Some("thicc")).unwrap_err();
        assert!(err.contains("\"thicc\"") && err.contains("thick"), "{err}");
    }
}
