//! `iptables-mode: auto`: the backend the installer publishes in NodeMultus (and `check` shows) is
//! the one the plugin picks on that node (#42), with the node's iptables binaries in each directory
//! the chart mounts for the installer (/usr/sbin, /sbin, /usr/bin, /bin) and in none.
//!
//! Both real binaries run, each in its own view of one node, as on a node: the plugin (the kubelet
//! runs it on the node's root, `linkerd-cni --iptables-backend` prints ADD's decision) and the
//! installer (its container, the node's binary directories bind-mounted read only under
//! `--node-root=/node` as the chart's hostPath mounts are; `--print-iptables-backend` prints what a
//! pass publishes). Why not the node testbed: its node's filesystem is this machine's, merged-/usr
//! (/sbin is /usr/sbin, /bin is /usr/bin) with its binaries in /usr/sbin; placing them elsewhere
//! means moving the node's own iptables away from its kubelet and from every other test. So each
//! case builds the node's root (a tmpfs: unmerged binary directories holding Debian's iptables
//! files, the host's libraries and /proc) in a private mount namespace, and a fresh network
//! namespace, whose legacy x_tables (`/proc/net/ip_tables_names`) both read, as on a node.
//! Which directories the chart mounts is held to `SBIN_DIRS` by chart_vs_binaries.

use std::path::Path;
use std::process::Command;

use linkerd_multus_e2e::binary;
use rules::backend_choice::SBIN_DIRS;

/// Builds the two roots, places Debian's iptables files (`xtables-*-multi` and their relative links,
/// the plain names through /etc/alternatives as Debian has them) in the directories given after the
/// first three arguments, and prints `plugin=<backend>` and `installer=<NodeMultus spec.iptables>`.
const SCRIPT: &str = r#"
set -eu
work="$1"; bins="$2"; legacy="$3"; shift 3
N="$work/node"; C="$work/installer"
mkdir -p "$N" "$C"
mount -t tmpfs node "$N"
mount -t tmpfs installer "$C"
for r in "$N" "$C"; do
  mkdir -p "$r/usr/lib" "$r/proc" "$r/opt" "$r/etc" "$r/tmp"
  mount --rbind /usr/lib "$r/usr/lib"
  if [ -d /usr/lib64 ] && [ ! -L /usr/lib64 ]; then mkdir -p "$r/usr/lib64"; mount --bind /usr/lib64 "$r/usr/lib64"; fi
  for l in lib lib64 lib32 libx32; do
    if [ -L "/$l" ]; then cp -P "/$l" "$r/$l"
    elif [ -d "/$l" ]; then mkdir -p "$r/$l"; mount --bind "/$l" "$r/$l"; fi
  done
  mount --rbind /proc "$r/proc"
  mount --bind "$bins" "$r/opt"
done
for d in /usr/sbin /sbin /usr/bin /bin; do
  mkdir -p "$N$d" "$C/node$d"
done
first=""
for d in "$@"; do
  [ -n "$first" ] || first="$d"
  cp /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi "$N$d/"
  for b in iptables ip6tables; do
    for f in restore save; do
      ln -s xtables-nft-multi "$N$d/$b-nft-$f"
      ln -s xtables-legacy-multi "$N$d/$b-legacy-$f"
      ln -s "/etc/alternatives/$b-$f" "$N$d/$b-$f"
    done
  done
done
if [ -n "$first" ]; then
  mkdir -p "$N/etc/alternatives"
  for b in iptables ip6tables; do
    for f in restore save; do ln -s "$first/$b-nft-$f" "$N/etc/alternatives/$b-$f"; done
  done
fi
for d in /usr/sbin /sbin /usr/bin /bin; do
  mount --bind "$N$d" "$C/node$d"
  mount -o remount,bind,ro "$C/node$d"
done
# The node's own rules in legacy x_tables: one listing registers the nat table in this netns.
if [ "$legacy" = yes ]; then /usr/sbin/iptables-legacy -t nat -S >/dev/null; fi
echo "plugin=$(chroot "$N" /opt/linkerd-cni --iptables-backend)"
echo "installer=$(chroot "$C" /opt/linkerd-cni-install --print-iptables-backend --node-root=/node)"
"#;

/// What each side said for one node.
struct Said {
    plugin: String,
    installer: serde_json::Value,
}

/// Runs both binaries on a node with the iptables binaries in `dirs`, in a fresh network
/// namespace, with the legacy nat table registered there when `legacy`.
fn on_node(dirs: &[&str], legacy: bool) -> Said {
    let plugin = binary("linkerd-cni");
    let installer = binary("linkerd-cni-install");
    let bins = plugin.parent().expect("target dir");
    assert_eq!(
        installer.parent(),
        Some(bins),
        "both binaries in one directory"
    );
    let work = tempfile::tempdir().expect("temp dir");
    let out = Command::new("unshare")
        .args(["--mount", "--net", "--propagation", "private", "sh", "-c"])
        .arg(SCRIPT)
        .arg("node-iptables-backend")
        .arg(work.path())
        .arg(bins)
        .arg(if legacy { "yes" } else { "no" })
        .args(dirs)
        .output()
        .expect("unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{dirs:?}: {stdout}\n{stderr}");
    let line = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("{dirs:?}: no {key}= line: {stdout}\n{stderr}"))
    };
    Said {
        plugin: line("plugin"),
        installer: serde_json::from_str(&line("installer"))
            .unwrap_or_else(|e| panic!("{dirs:?}: the installer's line: {e}: {stdout}")),
    }
}

#[test]
#[ignore = "needs root (a mount and a network namespace): run by e2e/test-all"]
fn the_installer_publishes_the_backend_the_plugin_picks_on_the_node() {
    assert!(
        Path::new("/usr/sbin/xtables-nft-multi").is_file()
            && Path::new("/usr/sbin/xtables-legacy-multi").is_file(),
        "the host's iptables is missing: apt-get install -y iptables"
    );
    // Each directory the chart mounts, alone; none (RHEL 10); legacy x_tables in use.
    let mut cases: Vec<(String, Vec<&str>, bool, &str)> = SBIN_DIRS
        .iter()
        .map(|d| (format!("only in {d}"), vec![*d], false, "nft"))
        .collect();
    cases.push(("no iptables binaries".into(), vec![], false, "nftables"));
    cases.push((
        "in /usr/sbin, the node's rules in legacy x_tables".into(),
        vec!["/usr/sbin"],
        true,
        "legacy",
    ));
    let mut failures = Vec::new();
    for (case, dirs, legacy, want) in &cases {
        let said = on_node(dirs, *legacy);
        let published = said.installer["backend"].as_str().unwrap_or_default();
        eprintln!(
            "{case}: plugin {}, installer publishes {}",
            said.plugin, said.installer
        );
        if said.plugin != published || said.plugin != *want {
            failures.push(format!(
                "{case}: the plugin picks {}, the installer publishes {published} (want {want})",
                said.plugin
            ));
        }
        assert_eq!(said.installer["configured"], "auto", "{case}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
