//! How many iptables binaries the plugin runs per ADD (property P7), counted on a real ADD in a real
//! netns: the plugin finds its binaries through `$PATH` (then the sbin directories), so a directory of
//! counting wrappers first in its `$PATH` sees every execution. A first ADD is one `-restore` per
//! family and nothing else; a repeated ADD (the book's "How it works") is that restore, which fails on the
//! existing chains, then one `-save` of the nat table and one `-restore` replacing our rules; DEL is
//! one `-save` and one `-restore`. Needs root and the testbed (`e2e/testbed up`).

mod support;

use std::path::{Path, PathBuf};

use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::json;
use support::*;

/// Every iptables binary name the plugin could run, whatever its mode or fallback.
fn wrapped_names() -> Vec<String> {
    let mut names = Vec::new();
    for base in ["iptables", "ip6tables"] {
        for flavour in ["", "-legacy", "-nft"] {
            for tool in ["", "-restore", "-save"] {
                names.push(format!("{base}{flavour}{tool}"));
            }
        }
    }
    names
}

/// The real binary of `name`, by absolute path, from the directories the plugin falls back to.
fn real_binary(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A test's counting setup: `bin/` holds one wrapper per iptables binary (appends its name and args
/// to `log`, then execs the real binary by absolute path); `plugin/` holds a `linkerd-cni` that puts
/// `bin/` first in `$PATH` and execs the built plugin.
struct Counting {
    dir: tempfile::TempDir,
}

impl Counting {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        let plugin = dir.path().join("plugin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        std::fs::create_dir_all(&plugin).expect("plugin dir");
        let log = dir.path().join("exec.log");
        let mut wrapped = 0;
        for name in wrapped_names() {
            let Some(real) = real_binary(&name) else {
                continue;
            };
            let script = format!(
                "#!/bin/sh\nprintf '%s %s\\n' '{name}' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                real.display()
            );
            write_script(&bin.join(&name), &script);
            wrapped += 1;
        }
        assert!(wrapped >= 6, "too few iptables binaries found to wrap");
        let real = linkerd_multus_e2e::binary("linkerd-cni");
        write_script(
            &plugin.join("linkerd-cni"),
            &format!(
                "#!/bin/sh\nPATH='{}':\"$PATH\" exec '{}' \"$@\"\n",
                bin.display(),
                real.display()
            ),
        );
        Self { dir }
    }

    fn plugin_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.dir.path().join("plugin"),
            PathBuf::from(DEBIAN_CNI_DIR),
        ]
    }

    /// The executions logged so far (`name args`), and the log emptied for the next step.
    fn take(&self) -> Vec<String> {
        let log = self.dir.path().join("exec.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        text.lines().map(str::to_string).collect()
    }
}

/// Per family (`iptables*`, `ip6tables*`): the binaries run, in order, without their arguments.
fn by_family(execs: &[String]) -> (Vec<String>, Vec<String>) {
    let name = |line: &String| line.split(' ').next().unwrap_or_default().to_string();
    let v4 = execs
        .iter()
        .filter(|l| l.starts_with("iptables"))
        .map(name)
        .collect();
    let v6 = execs
        .iter()
        .filter(|l| l.starts_with("ip6tables"))
        .map(name)
        .collect();
    (v4, v6)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

async fn count(mode: &'static str) {
    let client = client().await;
    let ns = TestNamespace::create(&client, &format!("cni-count-{mode}")).await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let counting = Counting::new();
    let mut settings = PluginSettings::new("1.0.0", mode);
    settings.ipv6 = true;
    let mut net = PodNetwork::new(&settings, &ns.name, "web");
    net.network.plugin_dirs = counting.plugin_dirs();
    let names = |family: &str| {
        (
            format!("{family}-{mode}-restore"),
            format!("{family}-{mode}-save"),
        )
    };
    let (r4, s4) = names("iptables");
    let (r6, s6) = names("ip6tables");

    let result = net.add().unwrap_or_else(|e| panic!("first ADD: {e}"));
    let first = counting.take();
    assert_eq!(
        by_family(&first),
        (strings(&[&r4]), strings(&[&r6])),
        "first ADD: one restore per family, nothing else: {first:#?}"
    );
    assert!(
        first.iter().all(|l| l.ends_with(" --noflush")),
        "{first:#?}"
    );
    assert_eq!(net.our_rules(&s4), default_expected_rules(2102));

    net.linkerd_only("ADD", Some(&result))
        .unwrap_or_else(|e| panic!("repeated ADD: {e}"));
    let again = counting.take();
    assert_eq!(
        by_family(&again),
        (
            strings(&[&r4, &s4, &r4]),
            strings(&[&r6, &s6, &r6])
        ),
        "repeated ADD: the creating restore (refused: our chains exist), one save, one restore per \
         family: {again:#?}"
    );
    assert!(
        again
            .iter()
            .filter(|l| l.contains("-save"))
            .all(|l| l.ends_with("-save -t nat")),
        "{again:#?}"
    );
    assert_eq!(net.our_rules(&s4), default_expected_rules(2102));
    assert_eq!(net.our_rules(&s6), default_expected_rules(2102));

    net.linkerd_only("DEL", Some(&result))
        .unwrap_or_else(|e| panic!("DEL: {e}"));
    let del = counting.take();
    // DEL cannot know the mode ADD used (backend::select_for_del), so it looks for the other
    // flavour's nat table too, with no execution: legacy's in /proc, iptables-nft's and our
    // nf_tables table over netlink. Neither is here (`a_del_in_another_mode_...` has one).
    assert_eq!(
        by_family(&del),
        (strings(&[&s4, &r4]), strings(&[&s6, &r6])),
        "DEL: one save and one restore per family, nothing of the other flavour: {del:#?}"
    );
    assert_eq!(net.our_rules(&s4), Vec::<String>::new());
    eprintln!(
        "MEASURE iptables executions ({mode}, ipv4+ipv6): first ADD {}, repeated ADD {}, DEL {}",
        first.len(),
        again.len(),
        del.len()
    );
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn executions_per_add_legacy() {
    count("legacy").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn executions_per_add_nft() {
    count("nft").await;
}

/// A DEL whose config names another mode than its ADD's (an upgrade between them, or Multus' aux
/// chain, which hands DEL no mode) still removes the iptables-nft rules, with that flavour's save
/// and restore only; and where the netns holds no nat table of the config's mode (an nftables ADD,
/// as for any pod DEL'd through the aux chain), DEL runs no iptables binary at all, and creates no
/// legacy nat table by reading one.
#[tokio::test]
#[ignore = "needs root (netns, iptables, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn a_del_in_another_mode_removes_the_nft_rules_and_execs_nothing_more() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "cni-count-switch").await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let counting = Counting::new();
    let mut settings = PluginSettings::new("1.0.0", "nft");
    settings.ipv6 = true;
    let mut net = PodNetwork::new(&settings, &ns.name, "web");
    net.network.plugin_dirs = counting.plugin_dirs();
    let result = net.add().unwrap_or_else(|e| panic!("ADD (nft): {e}"));
    assert_eq!(
        net.our_rules("iptables-nft-save"),
        default_expected_rules(2102)
    );
    let _ = counting.take();

    set_mode(&mut net, "nftables");
    net.linkerd_only("DEL", Some(&result))
        .unwrap_or_else(|e| panic!("DEL (nftables): {e}"));
    let del = counting.take();
    assert_eq!(
        by_family(&del),
        (
            strings(&["iptables-nft-save", "iptables-nft-restore"]),
            strings(&["ip6tables-nft-save", "ip6tables-nft-restore"])
        ),
        "DEL in nftables mode after an nft ADD: {del:#?}"
    );
    assert_eq!(net.our_rules("iptables-nft-save"), Vec::<String>::new());
    assert_eq!(net.our_rules("ip6tables-nft-save"), Vec::<String>::new());
    let _ = counting.take();

    for del_mode in ["nftables", "nft", "legacy"] {
        let mut settings = PluginSettings::new("1.0.0", "nftables");
        settings.ipv6 = true;
        let mut net = PodNetwork::new(&settings, &ns.name, "web");
        net.network.plugin_dirs = counting.plugin_dirs();
        let result = net.add().unwrap_or_else(|e| panic!("ADD (nftables): {e}"));
        assert!(net.nft(&["list", "tables"]).contains("linkerd-cni"));
        set_mode(&mut net, del_mode);
        net.linkerd_only("DEL", Some(&result))
            .unwrap_or_else(|e| panic!("DEL ({del_mode}): {e}"));
        let execs = counting.take();
        assert_eq!(
            execs,
            Vec::<String>::new(),
            "nftables ADD, {del_mode} DEL: {execs:#?}"
        );
        assert_eq!(net.nft(&["list", "tables"]), "", "{del_mode} DEL");
        let legacy = net.ns.exec(&["cat", "/proc/net/ip_tables_names"]);
        let legacy = String::from_utf8_lossy(&legacy.stdout);
        assert!(!legacy.contains("nat"), "{del_mode} DEL: {legacy}");
    }
}

/// Names `mode` in the linkerd-cni entry, as an upgrade between a pod's ADD and DEL would.
fn set_mode(net: &mut PodNetwork, mode: &str) {
    let entry = net.network.conflist["plugins"]
        .as_array_mut()
        .and_then(|p| p.last_mut())
        .expect("linkerd-cni entry");
    entry["linkerd"]["iptables-mode"] = json!(mode);
}
