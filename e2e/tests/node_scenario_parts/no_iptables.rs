//! Drill of the node scenario: a node without iptables binaries (RHEL 10 ships none, and newer
//! OpenShift releases run on it). The node's `/usr/sbin` (`/sbin` links to it) loses every
//! `iptables*`, `ip6tables*`, `xtables*`, `arptables*` and `ebtables*` entry in the node's mount
//! namespace (the node's /usr/bin holds none but iptables-xml), so the runtime's view (the plugin's,
//! which probes /usr/sbin, /sbin, /usr/bin and /bin) and the installer's (its read-only mounts of the
//! same four, taken when its pod starts) both lack them. With the chart's default `iptables-mode: auto`, and no setting at all,
//! a meshed pod created then is redirected through the plugin's own nf_tables table; the installer
//! publishes `nftables` in the node's NodeMultus and `check` names it. Had `auto` picked a flavour whose
//! binaries are missing, the pod's ADD would fail and it would never run. The binaries come back at the
//! end (kube-proxy, which needs them, only fails its syncs meanwhile: no Service changes then).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::wait_for_explained;
use serde_json::{json, Value};

use super::*;
use crate::{app_container, assert_redirected, Meshed};

/// In the node's /run (a tmpfs): the whiteouts that hide the binaries.
const WHITEOUTS: &str = "/run/linkerd-multus-test-no-iptables";
const POD: &str = "no-iptables";

/// The node's /usr/sbin without iptables binaries while it lives: an overlay whose top layer holds
/// overlayfs whiteouts (character devices 0/0) named after each of them.
struct Hidden<'a> {
    node: &'a Node,
}

impl<'a> Hidden<'a> {
    fn new(node: &'a Node) -> Self {
        let script = format!(
            "set -e; d={WHITEOUTS}; rm -rf $d; mkdir -p $d
             for f in /usr/sbin/iptables* /usr/sbin/ip6tables* /usr/sbin/xtables* \
                      /usr/sbin/arptables* /usr/sbin/ebtables*; do
               if [ -e \"$f\" ] || [ -L \"$f\" ]; then mknod \"$d/${{f##*/}}\" c 0 0; fi
             done
             mount -t overlay linkerd-multus-no-iptables -o lowerdir=$d:/usr/sbin /usr/sbin"
        );
        in_node(node, &script);
        let hidden = Self { node };
        let left = in_node(
            node,
            "ls /usr/sbin /sbin | grep -E '^(ip6?|x|arp|eb)tables' || true",
        );
        assert_eq!(left.trim(), "", "iptables binaries left on the node");
        hidden
    }
}

impl Drop for Hidden<'_> {
    fn drop(&mut self) {
        let _ = Command::new("nsenter")
            .args(holder_args(self.node))
            .args([
                "sh",
                "-c",
                &format!("umount -l /usr/sbin; rm -rf {WHITEOUTS}"),
            ])
            .status();
    }
}

fn holder_args(node: &Node) -> Vec<String> {
    let pid =
        std::fs::read_to_string(node.dir().join("holder.pid")).expect("the node's holder.pid");
    vec![
        "-t".into(),
        pid.trim().into(),
        "-m".into(),
        "-n".into(),
        "--".into(),
    ]
}

/// `sh -c script` in the node's mount and network namespaces: its stdout.
fn in_node(node: &Node, script: &str) -> String {
    let out = Command::new("nsenter")
        .args(holder_args(node))
        .args(["sh", "-c", script])
        .output()
        .expect("nsenter");
    assert!(
        out.status.success(),
        "in the node: {script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The installer restarted (its mounts of the node's /usr/sbin and /sbin are taken at its start) and
/// the backend it publishes for the node once it is `want`.
fn restart_installer_until(node: &Node, want: impl Fn(&str) -> bool, what: &str) -> Value {
    let ds = format!("daemonset/{CNI_DAEMONSET}");
    node.kubectl_ok(&["-n", CNI_NS, "rollout", "restart", &ds]);
    node.kubectl_ok(&["-n", CNI_NS, "rollout", "status", &ds, "--timeout=120s"]);
    let name = node_name(node);
    wait_for_explained(
        &format!("the installer publishes {what} for the node"),
        READY_WITHIN,
        || {
            let spec = node.get_json(&["nodemultuses", &name])?["spec"].clone();
            want(spec["iptables"]["backend"].as_str()?).then_some(spec["iptables"].clone())
        },
        || node.kubectl_ok(&["get", "nodemultuses", "-o", "yaml"]),
    )
}

/// The network namespace (as this process reaches it) of the pod whose address is `ip`.
fn pod_netns(node: &Node, ip: &str) -> PathBuf {
    let dir = node.in_node_mounts("/run/netns");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    entries
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            in_netns(p, &["ip", "-o", "-4", "addr", "show"])
                .is_some_and(|a| a.contains(&format!(" {ip}/")))
        })
        .unwrap_or_else(|| panic!("no netns under {} holds {ip}", dir.display()))
}

/// `cmd` (this host's binary) in the network namespace at `netns`: its stdout when it succeeded.
fn in_netns(netns: &Path, cmd: &[&str]) -> Option<String> {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .args(cmd)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn step_meshed_pod_without_iptables(node: &Node, meshed: &Meshed, plain: &str) {
    let ns = &meshed.ns;
    let before = restart_installer_until(node, |b| b != "nftables", "a backend");
    eprintln!("the node's backend with its iptables binaries: {before}");
    let hidden = Hidden::new(node);
    let start = Instant::now();
    let published = restart_installer_until(node, |b| b == "nftables", "nftables");
    assert_eq!(published["configured"], "auto", "{published}");
    eprintln!(
        "iptables binaries hidden -> installer restarted, nftables published in {:?}",
        start.elapsed()
    );
    apply(
        node,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": POD, "namespace": ns,
                         "labels": {"app": POD, (ADMITTED_AS_ON_OPENSHIFT): "true"},
                         "annotations": {"linkerd.io/inject": "enabled"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [app_container(&meshed.test_image)]},
        }),
    );
    // A backend whose binaries are missing fails the ADD: the pod would never run.
    let pod = wait_pod_running(node, ns, &format!("app={POD}"));
    let ip = pod["status"]["podIP"].as_str().expect("pod IP").to_string();
    assert!(
        validator_passed(node, ns, POD),
        "the validator saw its connection redirected without iptables binaries"
    );
    assert_redirected(node, ns, POD, &ip, plain);
    let netns = pod_netns(node, &ip);
    let table = in_netns(&netns, &["nft", "list", "table", "ip", "linkerd-cni"]);
    assert!(
        table.as_deref().is_some_and(|t| t.contains("chain")),
        "the pod's rules are the plugin's nf_tables table: {table:?}"
    );
    let report = check_json(node);
    let backends = line(&report, "node-multus").to_string();
    assert!(
        backends.contains("nftables"),
        "check names the node's backend: {backends}"
    );
    // DEL on the same node: the nftables rules go with the pod.
    node.kubectl_ok(&["-n", ns, "delete", "pod", POD, "--wait=true"]);
    drop(hidden);
    let back = restart_installer_until(node, |b| b != "nftables", "a backend with binaries");
    assert_eq!(back["backend"], before["backend"], "{back}");
}
