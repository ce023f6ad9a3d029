//! A pod network for tests of the linkerd-cni plugin: Debian's `bridge` + `host-local` with the built
//! `linkerd-cni` chained after, on a fresh netns, with its own bridge name and subnet; reading its
//! rules back. Needs root; the plugin reads its pod from the testbed's apiserver. Shared by the plugin's
//! own tests and by tests that run it on pods other parts shaped (the webhook's OpenShift test).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::cni::{Network, Runtime};
use crate::netns::NetNs;

/// Where Debian's containernetworking-plugins put the reference plugins.
pub const DEBIAN_CNI_DIR: &str = "/usr/lib/cni";

/// The directory holding the built `linkerd-cni`, then Debian's plugins.
pub fn plugin_dirs() -> Vec<PathBuf> {
    let bin = crate::binary("linkerd-cni");
    vec![
        bin.parent().expect("binary dir").to_path_buf(),
        PathBuf::from(DEBIAN_CNI_DIR),
    ]
}

/// The wrapper that runs the built `linkerd-cni` with no `iptables*`, `ip6tables*`, `xtables*` or
/// `nft` binary reachable: in a private mount namespace an empty read-only tmpfs covers every
/// directory of `$PATH` and the plugin's fallbacks (/usr/sbin, /sbin, /usr/bin, /bin) that holds one
/// (a directory the shell itself runs from gets `/dev/null` bound over just those files), and the
/// plugin only starts once none of them is left as a regular or executable file (exit 97).
const HIDING_WRAPPER: &str = r#"#!/bin/sh
exec unshare --mount --propagation private /bin/sh -ec '
real="$1"; shift
dirs="$(echo "$PATH" | tr : " ") /usr/local/sbin /usr/local/bin /usr/sbin /sbin /usr/bin /bin"
tools() { for f in "$1"/iptables* "$1"/ip6tables* "$1"/xtables* "$1"/nft; do [ -e "$f" ] && echo "$f"; done; true; }
for d in $dirs; do
  [ -d "$d" ] || continue
  hits="$(tools "$d")"
  [ -n "$hits" ] || continue
  if [ -e "$d/sh" ] || [ -e "$d/mount" ]; then
    for f in $hits; do mount --bind /dev/null "$f"; done
  else
    mount -t tmpfs -o ro nobinaries "$d"
  fi
done
for d in $dirs; do
  for f in "$d"/iptables* "$d"/ip6tables* "$d"/xtables* "$d"/nft; do
    if [ -f "$f" ] || [ -x "$f" ]; then echo "still reachable: $f" >&2; exit 97; fi
  done
done
exec "$real" "$@"
' linkerd-cni-hiding REAL "$@"
"#;

/// A directory holding the hiding `linkerd-cni` wrapper, then Debian's plugins (one per process).
pub fn hiding_plugin_dirs() -> Vec<PathBuf> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir =
            std::env::temp_dir().join(format!("linkerd-cni-no-iptables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("wrapper dir");
        let real = crate::binary("linkerd-cni");
        let script = HIDING_WRAPPER.replace("REAL", real.to_str().expect("UTF-8 path"));
        let path = dir.join("linkerd-cni");
        std::fs::write(&path, script).expect("write wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        dir
    });
    vec![dir.clone(), PathBuf::from(DEBIAN_CNI_DIR)]
}

/// Fails with the install command when the reference plugins or iptables are missing.
pub fn require_tools() {
    for p in [
        "/usr/lib/cni/bridge",
        "/usr/lib/cni/host-local",
        "/usr/sbin/iptables-legacy-restore",
        "/usr/sbin/iptables-nft-restore",
        "/usr/sbin/nft",
        "/usr/bin/unshare",
    ] {
        assert!(
            Path::new(p).exists(),
            "{p} is missing: apt-get install -y containernetworking-plugins iptables nftables"
        );
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The host's forwarding switches as they were before any test bridge flipped them
/// (`isGateway` turns forwarding on); each [`PodNetwork`] puts them back when dropped.
fn original_forwarding() -> &'static [(String, String)] {
    static ORIGINAL: OnceLock<Vec<(String, String)>> = OnceLock::new();
    ORIGINAL.get_or_init(|| {
        [
            "/proc/sys/net/ipv4/ip_forward",
            "/proc/sys/net/ipv6/conf/all/forwarding",
        ]
        .iter()
        .filter_map(|p| Some((p.to_string(), std::fs::read_to_string(p).ok()?)))
        .collect()
    })
}

/// A test's own addresses: a bridge name and IPv4/IPv6 subnets no other test (or process) uses.
#[derive(Debug, Clone)]
pub struct Addressing {
    pub bridge: String,
    pub subnet4: String,
    pub gateway4: String,
    pub subnet6: String,
    pub gateway6: String,
}

impl Addressing {
    pub fn unique() -> Self {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // 10.<150..199>.<n>.0/24: second octet from the pid, third from the counter (the installer's
        // chain test uses 10.231.x).
        let b = 150 + pid % 50;
        let c = (n + (pid / 50) * 7) % 250 + 1;
        Self {
            bridge: format!("lcni{:x}x{n}", pid % 0xffff),
            subnet4: format!("10.{b}.{c}.0/24"),
            gateway4: format!("10.{b}.{c}.1"),
            subnet6: format!("fd77:{:x}:{c:x}::/64", pid % 0xffff),
            gateway6: format!("fd77:{:x}:{c:x}::1", pid % 0xffff),
        }
    }
}

/// What to put in the linkerd-cni plugin entry.
#[derive(Debug, Clone)]
pub struct PluginSettings {
    pub cni_version: &'static str,
    pub mode: &'static str,
    pub ipv6: bool,
    pub kubeconfig: PathBuf,
    /// Run the plugin through the wrapper that hides every iptables and nft binary
    /// ([`hiding_plugin_dirs`]); on for `nftables`.
    pub hide_binaries: bool,
    /// Extra keys merged into the `linkerd` block.
    pub linkerd: Value,
}

impl PluginSettings {
    /// For the testbed's apiserver (which must be up).
    pub fn new(cni_version: &'static str, mode: &'static str) -> Self {
        Self::with_kubeconfig(cni_version, mode, crate::kubeconfig_path())
    }

    /// For the apiserver of `kubeconfig` (a test's own server; no testbed needed).
    pub fn with_kubeconfig(
        cni_version: &'static str,
        mode: &'static str,
        kubeconfig: PathBuf,
    ) -> Self {
        Self {
            cni_version,
            mode,
            ipv6: false,
            kubeconfig,
            hide_binaries: mode == "nftables",
            linkerd: json!({}),
        }
    }

    /// The linkerd-cni entry of the conflist.
    pub fn plugin_entry(&self) -> Value {
        let mut linkerd = json!({
            "incoming-proxy-port": 4143,
            "outgoing-proxy-port": 4140,
            "proxy-uid": 2102,
            "inbound-ports-to-ignore": ["4191", "4190"],
            "iptables-mode": self.mode,
            "ipv6": self.ipv6,
        });
        if let (Some(base), Some(extra)) = (linkerd.as_object_mut(), self.linkerd.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        json!({
            "type": "linkerd-cni",
            "log_level": "debug",
            "kubernetes": {"kubeconfig": self.kubeconfig},
            "linkerd": linkerd,
        })
    }
}

/// A pod's network: a netns, a bridge + host-local + linkerd-cni conflist, and cleanup of all of
/// it (DEL, the bridge link, the IPAM store, the forwarding switches) on drop.
pub struct PodNetwork {
    pub ns: NetNs,
    pub addr: Addressing,
    pub network: Network,
    pub runtime: Runtime,
    /// Kept for its drop: host-local's store.
    _ipam_dir: tempfile::TempDir,
    /// The ADD result, for CHECK/DEL.
    pub result: Option<Value>,
}

impl PodNetwork {
    /// Prepares (does not ADD) a pod network for `pod` in `namespace`.
    pub fn new(settings: &PluginSettings, namespace: &str, pod: &str) -> Self {
        require_tools();
        original_forwarding();
        let addr = Addressing::unique();
        let ns = NetNs::create("lcni");
        let ipam_dir = tempfile::tempdir().expect("ipam dir");
        let mut ranges = vec![json!([{"subnet": addr.subnet4}])];
        if settings.ipv6 {
            ranges.push(json!([{"subnet": addr.subnet6}]));
        }
        let conflist = json!({
            "cniVersion": settings.cni_version,
            "name": format!("net-{}", addr.bridge),
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": addr.bridge,
                    "isGateway": true,
                    "ipMasq": false,
                    "ipam": {"type": "host-local", "ranges": ranges, "dataDir": ipam_dir.path()},
                },
                settings.plugin_entry(),
            ]
        });
        let runtime = Runtime::new(&ns.path()).with_pod(namespace, pod);
        Self {
            ns,
            addr,
            network: Network::new(
                conflist,
                if settings.hide_binaries {
                    hiding_plugin_dirs()
                } else {
                    plugin_dirs()
                },
            ),
            runtime,
            _ipam_dir: ipam_dir,
            result: None,
        }
    }

    /// ADD through the whole chain; remembers the result.
    pub fn add(&mut self) -> Result<Value, crate::cni::PluginFailure> {
        let r = self.network.add(&self.runtime)?;
        self.result = Some(r.clone());
        Ok(r)
    }

    /// Runs only linkerd-cni (the chain's last plugin) with `command`, given `prev_result` (as a
    /// runtime retrying ADD would, after the bridge already set the interface up).
    pub fn linkerd_only(
        &self,
        command: &str,
        prev_result: Option<&Value>,
    ) -> Result<Option<Value>, crate::cni::PluginFailure> {
        let plugins = self.network.conflist["plugins"]
            .as_array()
            .expect("plugins")
            .clone();
        let entry = plugins.last().expect("linkerd-cni entry");
        let conf = self.network.plugin_config(entry, prev_result);
        crate::cni::exec_plugin(&self.network.plugin_dirs, command, &conf, &self.runtime)
    }

    /// The pod's first IPv4 (or IPv6) address from the ADD result.
    pub fn pod_ip(&self, v6: bool) -> String {
        let ips = self.result.as_ref().expect("ADD first")["ips"]
            .as_array()
            .expect("ips in the result")
            .clone();
        ips.iter()
            .filter_map(|ip| ip["address"].as_str())
            .map(|a| a.split('/').next().unwrap_or_default().to_string())
            .find(|a| a.contains(':') == v6)
            .expect("an address of that family")
    }

    /// `<flavour>-save -t nat` inside the pod netns (`iptables-legacy-save`, `ip6tables-nft-save`, ...),
    /// chain counters dropped: a stray packet on the bridge must not fail a comparison.
    pub fn save(&self, binary: &str) -> String {
        let out = self.ns.exec(&[binary, "-t", "nat"]);
        assert!(
            out.status.success(),
            "{binary}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        without_counters(&String::from_utf8_lossy(&out.stdout))
    }

    /// `nft <args>` inside the pod netns (the test side has the binary; the plugin does not).
    pub fn nft(&self, args: &[&str]) -> String {
        let mut cmd = vec!["nft"];
        cmd.extend_from_slice(args);
        let out = self.ns.exec(&cmd);
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Just the lines that mention our chains, in `iptables-save` order.
    pub fn our_rules(&self, binary: &str) -> Vec<String> {
        our_lines(&self.save(binary))
    }
}

/// `iptables-save` text with the `[packets:bytes]` of each chain line (`:PREROUTING ACCEPT [1:40]`)
/// removed; rules carry none without `-c`, which is never passed.
pub fn without_counters(save: &str) -> String {
    save.lines()
        .map(|l| match (l.starts_with(':'), l.rsplit_once(" [")) {
            (true, Some((chain, counters))) if is_counters(counters) => chain,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `n:m]`, the tail of a chain line's counters.
fn is_counters(tail: &str) -> bool {
    tail.strip_suffix(']')
        .and_then(|c| c.split_once(':'))
        .is_some_and(|(p, b)| {
            [p, b]
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
        })
}

/// The lines of an `iptables-save` output that mention our chains, counters dropped.
pub fn our_lines(save: &str) -> Vec<String> {
    without_counters(save)
        .lines()
        .filter(|l| l.contains("PROXY_INIT_"))
        .map(str::to_string)
        .collect()
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        let _ = self.network.del(&self.runtime, self.result.as_ref());
        self.ns.delete();
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.addr.bridge])
            .output();
        for (path, value) in original_forwarding() {
            let _ = std::fs::write(path, value);
        }
    }
}

/// linkerd-cni's config as the chart's NAD holds it (legacy iptables), reading pods with `kubeconfig`:
/// the delegate of the Multus tests (stand-in alone, and against the real Multus).
pub fn linkerd_cni_nad_config(kubeconfig: &Path) -> Value {
    json!({
        "cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni", "log_level": "info",
        "kubernetes": {"kubeconfig": kubeconfig},
        "linkerd": {
            "incoming-proxy-port": 4143, "outgoing-proxy-port": 4140, "proxy-uid": 2102,
            "ports-to-redirect": [], "inbound-ports-to-ignore": ["4191", "4190"],
            "simulate": false, "use-wait-flag": false, "iptables-mode": "legacy", "ipv6": false
        }
    })
}
