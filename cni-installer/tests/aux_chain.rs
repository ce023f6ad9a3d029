//! `--attach aux-chain` (the real binary on a temp node): linkerd-cni's plugin config goes into
//! Multus' auxiliary chain directory only while the node's Multus runs that chain; refusals write
//! nothing and keep what is there; a deleted or changed file is repaired through the watch; SIGTERM
//! leaves everything; `--uninstall` removes only what this mode installed.

mod support;

use linkerd_multus_e2e::wait_for_within;
use serde_json::{json, Value};
use std::fs;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;
use support::*;
use vocab::{AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, PLUGIN_TYPE};

const AUX: &[&str] = &["--chain-mode", "none", "--attach", "aux-chain"];
/// The watch repairs within about a second; the resync in these tests is an hour.
const REPAIR: Duration = Duration::from_secs(5);

/// A thin Multus config with `auxiliaryCNIChainName` (None: the key left out) and `clusterNetwork`.
fn multus_conf(chain: Option<&str>, cluster_network: &str) -> String {
    let mut conf = json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
        "clusterNetwork": cluster_network,
        "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
    });
    if let Some(chain) = chain {
        conf["auxiliaryCNIChainName"] = json!(chain);
    }
    conf.to_string()
}

/// A node whose net dir runs Multus with the default chain, its cluster network in the net dir.
fn multus_node(chain: Option<&str>) -> Node {
    let node = Node::with(&["10-flannel.conflist"]);
    let cluster = node.net.join("10-flannel.conflist");
    fs::write(
        node.net.join("00-multus.conf"),
        multus_conf(chain, &cluster.to_string_lossy()),
    )
    .expect("multus conf");
    node
}

fn subdir(node: &Node) -> PathBuf {
    node.net.join(DEFAULT_AUX_CHAIN_NAME)
}

fn chain_file(node: &Node) -> PathBuf {
    subdir(node).join(AUX_CHAIN_FILE_NAME)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Our file as the plugin would get it: the same entry `append` mode chains, marked as the chain's
/// (the plugin then passes pods through when the product is absent).
fn assert_is_ours(node: &Node, bytes: &[u8]) {
    let v = json(bytes);
    assert_eq!(v["type"], PLUGIN_TYPE, "{v}");
    assert_eq!(
        v["linkerd"][vocab::CNI_CONFIG_AUX_CHAIN_KEY],
        json!(true),
        "{v}"
    );
    assert!(
        v.get("plugins").is_none(),
        "a plugin object, not a list: {v}"
    );
    assert_eq!(
        v["kubernetes"]["kubeconfig"],
        json!(node.kubeconfig_path().to_string_lossy()),
        "{v}"
    );
}

/// A pass writes the file (subdir 0755, file 0644) and the kubeconfig; the next pass writes nothing.
/// The primary network config and Multus' own are untouched.
#[test]
fn a_pass_writes_the_chain_file() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    let multus_before = node.read("00-multus.conf");
    let out = node.once_ok(AUX);
    let written = fs::read(chain_file(&node)).expect("the chain file");
    assert_is_ours(&node, &written);
    assert_eq!(mode(&chain_file(&node)), 0o644);
    assert_eq!(mode(&subdir(&node)), 0o755);
    assert!(node.kubeconfig().is_some());
    assert!(node.binary().exists());
    assert!(
        stderr(&out).contains("wrote linkerd-cni's config into Multus' auxiliary chain")
            && stderr(&out).contains("it was missing, creating its directory"),
        "{}",
        stderr(&out)
    );
    assert_eq!(node.read("00-multus.conf"), multus_before);
    assert_eq!(
        node.read("10-flannel.conflist"),
        fixture("10-flannel.conflist")
    );

    let before = identity(&chain_file(&node));
    let again = node.once_ok(AUX);
    assert_eq!(identity(&chain_file(&node)), before, "no rewrite");
    assert!(!stderr(&again).contains("wrote linkerd-cni's config"));
}

/// Multus that would not run the chain: nothing is written, a file already there stays as it is,
/// and the reason is logged.
#[test]
fn refusals_write_nothing_and_keep_what_is_there() {
    let unreadable = "{\"type\": \"multus\", \"auxiliaryCNIChainName\": ";
    let cases: [(&str, Option<String>, &str); 4] = [
        (
            "no auxiliaryCNIChainName",
            Some(multus_conf(None, "/etc/cni/net.d/10-flannel.conflist")),
            "sets no auxiliaryCNIChainName, so it would never run linkerd-cni from vendor-cni-chain/",
        ),
        (
            "another chain",
            Some(multus_conf(
                Some("other-chain"),
                "/etc/cni/net.d/10-flannel.conflist",
            )),
            "runs the auxiliary chain \"other-chain\", not \"vendor-cni-chain\"",
        ),
        ("no Multus", None, "10-flannel.conflist) is not Multus'"),
        (
            "Multus config unreadable",
            Some(unreadable.to_string()),
            "cannot read the node's Multus config",
        ),
    ];
    for (case, conf, why) in cases {
        for existing in [
            None,
            Some(&b"{\"type\": \"linkerd-cni\", \"old\": true}"[..]),
        ] {
            let node = Node::with(&["10-flannel.conflist"]);
            if let Some(conf) = &conf {
                fs::write(node.net.join("00-multus.conf"), conf).expect("conf");
            }
            if let Some(bytes) = existing {
                fs::create_dir(subdir(&node)).expect("subdir");
                fs::write(chain_file(&node), bytes).expect("existing file");
            }
            let before = existing.map(|_| identity(&chain_file(&node)));
            let out = node.once_ok(AUX);
            assert!(
                stderr(&out).contains("not installed") && stderr(&out).contains(why),
                "{case}: {}",
                stderr(&out)
            );
            match before {
                None => assert!(!subdir(&node).exists(), "{case}: nothing created"),
                Some(before) => assert_eq!(
                    identity(&chain_file(&node)),
                    before,
                    "{case}: kept as it was"
                ),
            }
        }
    }
}

/// The readiness probe: not ready (with the refusal) while Multus runs no chain; once Multus is
/// configured with it, the watch installs the file and the probe passes.
#[test]
fn ready_only_when_multus_runs_the_chain() {
    let node = multus_node(None);
    let tmp = tempfile::tempdir().expect("tempdir");
    let ready = tmp.path().join("ready");
    let running = node.spawn(
        &[
            AUX,
            &[
                "--resync",
                "1h",
                "--ready-file",
                ready.to_str().expect("utf-8"),
            ],
        ]
        .concat(),
    );
    let probe = || {
        std::process::Command::new(INSTALLER)
            .env_remove("READY_FILE")
            .args(["--ready-check", "--ready-file"])
            .arg(&ready)
            .output()
            .expect("probe")
    };
    let refused = wait_for("the probe to give the refusal", || {
        let out = probe();
        (!out.status.success() && stdout(&out).contains("sets no auxiliaryCNIChainName"))
            .then_some(stdout(&out))
    });
    assert!(
        refused.contains(&format!(
            "({}) sets no",
            node.net.join("00-multus.conf").display()
        )),
        "names the Multus config: {refused}"
    );
    assert!(!subdir(&node).exists());

    let cluster = node.net.join("10-flannel.conflist");
    // Atomically: a half-written config would be a second refusal, logged again.
    write_atomically(
        &node.net.join("00-multus.conf"),
        multus_conf(Some(DEFAULT_AUX_CHAIN_NAME), &cluster.to_string_lossy()),
    );
    wait_for_within("the chain file after Multus runs the chain", REPAIR, || {
        chain_file(&node).exists().then_some(())
    });
    wait_for("the probe to pass", || {
        probe().status.success().then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    // Logged once, not at every pass (the installer's own writes make passes too).
    assert_eq!(log.matches("not installed").count(), 1, "{log}");
    assert!(log.contains("no longer waiting"), "{log}");
}

/// Deleted, changed, or its whole directory removed: the watch puts the file back within seconds
/// (the resync is an hour), each write logged with its reason. SIGTERM then leaves the file, the
/// kubeconfig and the binary exactly as they are.
#[test]
fn repairs_through_the_watch_and_sigterm_keeps_everything() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    let running = node.spawn(&[AUX, &["--resync", "1h", "--uninstall-binary"]].concat());
    let file = chain_file(&node);
    wait_for("the chain file", || file.exists().then_some(()));
    let good = fs::read(&file).expect("read");

    fs::remove_file(&file).expect("delete");
    wait_for_within("the deleted file rewritten", REPAIR, || {
        (fs::read(&file).ok()? == good).then_some(())
    });

    fs::write(
        &file,
        b"{\"type\": \"linkerd-cni\", \"log_level\": \"debug\"}",
    )
    .expect("change");
    wait_for_within("the changed file repaired", REPAIR, || {
        (fs::read(&file).ok()? == good).then_some(())
    });

    fs::remove_dir_all(subdir(&node)).expect("remove the subdir");
    wait_for_within("the directory and file recreated", REPAIR, || {
        (fs::read(&file).ok()? == good).then_some(())
    });
    // The new directory is watched too (its old watch went with it).
    fs::remove_file(&file).expect("delete again");
    wait_for_within("the file rewritten in the new directory", REPAIR, || {
        (fs::read(&file).ok()? == good).then_some(())
    });

    let log = running.log();
    for reason in [
        "(it was missing)",
        "(it differed from linkerd-cni's config)",
        "(it was missing, creating its directory)",
    ] {
        assert!(log.contains(reason), "{reason}: {log}");
    }

    let kept = [file.clone(), node.kubeconfig_path(), node.binary()].map(|p| (identity(&p), p));
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    for (before, path) in kept {
        assert_eq!(identity(&path), before, "{} kept", path.display());
    }
    assert!(
        log.contains("--attach aux-chain: leaving the plugin binary, its kubeconfig and the chain file in place"),
        "{log}"
    );
}

/// `--uninstall` in aux-chain mode removes our file and the kubeconfig only: another vendor's file
/// and the directory stay, and the binary too without --uninstall-binary. Run again, nothing is left
/// to remove.
#[test]
fn uninstall_removes_only_our_file() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    node.once_ok(AUX);
    let vendor = subdir(&node).join("00-vendor.conf");
    fs::write(&vendor, "{\"type\": \"tuning\"}").expect("vendor file");

    let out = node
        .command(&[AUX, &["--uninstall"]].concat())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains(&format!("removed {}", chain_file(&node).display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("removed {}", node.kubeconfig_path().display())),
        "{said}"
    );
    assert!(!chain_file(&node).exists());
    assert!(node.kubeconfig().is_none());
    assert_eq!(
        fs::read_to_string(&vendor).expect("vendor file kept"),
        "{\"type\": \"tuning\"}"
    );
    assert!(node.binary().exists(), "kept without --uninstall-binary");
    assert_eq!(
        node.names(),
        vec![
            "00-multus.conf",
            "10-flannel.conflist",
            DEFAULT_AUX_CHAIN_NAME
        ]
    );

    let out = node
        .command(&[AUX, &["--uninstall", "--uninstall-binary"]].concat())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("removed"), "{}", stdout(&out));
    assert!(!node.binary().exists());
    let out = node
        .command(&[AUX, &["--uninstall"]].concat())
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "nothing to remove for --attach aux-chain on this node"
    );
}

/// A removal that fails exits non-zero and says why: here the chain file cannot even be read to
/// tell whether this installer wrote it. With it still there (naming the plugin), the kubeconfig and
/// the binary stay, or Multus would fail every pod.
#[test]
fn uninstall_failure_exits_non_zero_and_keeps_what_the_file_needs() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    node.once_ok(AUX);
    fs::remove_file(chain_file(&node)).expect("remove");
    // A directory under our file's name: remove_file fails on it.
    fs::create_dir_all(chain_file(&node).join("x")).expect("dir in the way");
    let out = node
        .command(&[AUX, &["--uninstall", "--uninstall-binary"]].concat())
        .output()
        .expect("run");
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!("cannot read {}", chain_file(&node).display())),
        "{}",
        stderr(&out)
    );
    assert!(node.kubeconfig().is_some());
    assert!(node.binary().exists());
}

/// `--uninstall` in the other modes: `append` takes the entry out of the conflist and removes the
/// kubeconfig; `none` removes the kubeconfig only.
#[test]
fn uninstall_in_append_and_none_modes() {
    let node = Node::with(&["10-flannel.conflist"]);
    node.once_ok(&[]);
    assert_eq!(
        plugin_types(&node.read("10-flannel.conflist"))
            .last()
            .map(String::as_str),
        Some(PLUGIN_TYPE)
    );
    let out = node.command(&["--uninstall"]).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("removed linkerd-cni from"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        plugin_types(&node.read("10-flannel.conflist")),
        vec!["flannel", "portmap"]
    );
    assert_eq!(node.names(), vec!["10-flannel.conflist"]);

    let node = Node::with(&["00-multus.conf"]);
    node.once_ok(&["--chain-mode", "none"]);
    let out = node
        .command(&["--chain-mode", "none", "--uninstall"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(node.names(), vec!["00-multus.conf"]);
    assert_eq!(node.read("00-multus.conf"), fixture("00-multus.conf"));
    assert!(node.binary().exists());
}

/// OpenShift's layout under a host prefix: Multus' config in the net dir, thick, its clusterNetwork
/// the path as the Multus daemon sees the node (`/host/run/...`); the chain under
/// `--aux-chain-dir /run/multus/cni/net.d`. The file lands there, with the kubeconfig's node path,
/// and no warning. Left at the net dir instead, nothing is written: a refusal.
#[test]
fn openshift_layout_under_a_host_prefix() {
    let node = Node::new();
    let root = tempfile::tempdir().expect("host root");
    let under = |p: &str| root.path().join(p.trim_start_matches('/'));
    for dir in [
        "etc/kubernetes/cni/net.d",
        "run/multus/cni/net.d",
        "var/lib/cni/bin",
    ] {
        fs::create_dir_all(root.path().join(dir)).expect("mkdir");
    }
    let thick = json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus-shim",
        "auxiliaryCNIChainName": "vendor-cni-chain",
        "clusterNetwork": "/host/run/multus/cni/net.d/10-ovn-kubernetes.conf",
        "daemonSocketDir": "/run/multus/socket",
    });
    fs::write(
        under("/etc/kubernetes/cni/net.d/00-multus.conf"),
        thick.to_string(),
    )
    .expect("multus conf");
    let run = |aux_dir: Option<&str>| {
        let mut cmd = node.bare_command();
        cmd.args([
            "--once",
            "--chain-mode",
            "none",
            "--attach",
            "aux-chain",
            "--host-prefix",
        ])
        .arg(root.path())
        .args(["--dest-cni-net-dir", "/etc/kubernetes/cni/net.d"])
        .args(["--dest-cni-bin-dir", "/var/lib/cni/bin"]);
        if let Some(dir) = aux_dir {
            cmd.env("AUX_CHAIN_DIR", dir);
        }
        cmd.output().expect("run")
    };

    let out = run(Some("/run/multus/cni/net.d"));
    assert!(out.status.success(), "{}", stderr(&out));
    let file = under("/run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf");
    let v: Value = json(&fs::read(&file).expect("chain file"));
    assert_eq!(v["type"], PLUGIN_TYPE);
    assert_eq!(
        v["kubernetes"]["kubeconfig"],
        format!("/etc/kubernetes/cni/net.d/{KUBECONFIG}"),
        "the node's path"
    );
    assert!(
        !stderr(&out).contains("Multus reads the chain from"),
        "{}",
        stderr(&out)
    );

    // Left at the net dir instead: Multus would never run a file there, so none is written and the
    // node is refused (not installed, unready), the reason naming the directory to set.
    let out = run(None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!under("/etc/kubernetes/cni/net.d/vendor-cni-chain").exists());
    let said = stderr(&out);
    assert!(
        said.contains("not installed")
            && said.contains("Multus reads the chain from /run/multus/cni/net.d/vendor-cni-chain/")
            && said.contains("set --aux-chain-dir /run/multus/cni/net.d"),
        "{said}"
    );
}

/// The directory mismatch makes the watching installer unready, its probe giving the reason: the
/// node must not look meshed while Multus reads the chain from elsewhere.
#[test]
fn a_chain_dir_multus_does_not_read_is_unready() {
    let node = Node::with(&["10-flannel.conflist"]);
    let elsewhere = tempfile::tempdir().expect("Multus' real directory");
    let cluster = elsewhere.path().join("10-flannel.conflist");
    fs::write(
        node.net.join("00-multus.conf"),
        multus_conf(Some(DEFAULT_AUX_CHAIN_NAME), &cluster.to_string_lossy()),
    )
    .expect("multus conf");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ready = tmp.path().join("ready");
    let running = node.spawn(
        &[
            AUX,
            &[
                "--resync",
                "1h",
                "--ready-file",
                ready.to_str().expect("utf-8"),
            ],
        ]
        .concat(),
    );
    let refused = wait_for("the probe to give the refusal", || {
        let out = std::process::Command::new(INSTALLER)
            .env_remove("READY_FILE")
            .args(["--ready-check", "--ready-file"])
            .arg(&ready)
            .output()
            .expect("probe");
        (!out.status.success() && stdout(&out).contains("Multus reads the chain from"))
            .then_some(stdout(&out))
    });
    assert!(
        refused.contains(&format!(
            "set --aux-chain-dir {}",
            elsewhere.path().display()
        )),
        "{refused}"
    );
    assert!(
        !subdir(&node).exists(),
        "nothing written where Multus does not read"
    );
    assert!(
        node.kubeconfig().is_some(),
        "the kubeconfig is still kept up"
    );
    drop(running);
}

/// An --aux-chain-dir that does not exist is an error that says what the directory must be; the
/// directory is not invented.
#[test]
fn missing_aux_dir_is_a_clear_error() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    let missing = node.net.join("no-such-dir");
    // Multus' clusterNetwork names it too (else the mismatch is refused before any write).
    fs::write(
        node.net.join("00-multus.conf"),
        multus_conf(
            Some(DEFAULT_AUX_CHAIN_NAME),
            &missing.join("10-flannel.conflist").to_string_lossy(),
        ),
    )
    .expect("multus conf");
    let out = node.once(&[AUX, &["--aux-chain-dir", missing.to_str().expect("utf-8")]].concat());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot create the directory")
            && stderr(&out).contains("--aux-chain-dir must be the directory"),
        "{}",
        stderr(&out)
    );
    assert!(!missing.exists());
}

/// Back to NADs (`none`) or to `append`: the next pass removes linkerd-cni's file left in the chain
/// directory (Multus would run linkerd-cni from it a second time), and nothing else there.
#[test]
fn other_modes_remove_our_leftover_chain_file() {
    for mode in ["none", "append"] {
        let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
        node.once_ok(AUX);
        let vendor = subdir(&node).join("10-vendor.conf");
        fs::write(&vendor, r#"{"type": "tuning"}"#).expect("another vendor's file");
        let mut flags = vec!["--chain-mode", mode];
        if mode == "append" {
            flags.push("--force-append-to-multus");
        }
        let out = node.once_ok(&flags);
        assert!(!chain_file(&node).exists(), "{mode}: our leftover stays");
        assert!(
            stderr(&out).contains("left from --attach aux-chain"),
            "{mode}: {}",
            stderr(&out)
        );
        assert!(vendor.is_file(), "{mode}: another vendor's file went");

        // A file of that name that is not linkerd-cni's config is not ours to remove.
        fs::write(chain_file(&node), r#"{"type": "tuning"}"#).expect("foreign file");
        node.once_ok(&flags);
        assert!(chain_file(&node).is_file(), "{mode}: a foreign file went");
    }
}

/// The installed file is what Multus runs (the Multus stand-in's own loader, `multus::aux_chain`):
/// the chain built from the directory of `clusterNetwork` is passthru, another vendor's plugin that
/// sorts first, then ours, exactly the file's config.
#[test]
fn the_installed_file_is_what_multus_runs_after_passthru() {
    use linkerd_multus_e2e::multus::aux_chain::{conf_dir, load, passthru_entry};
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    node.once_ok(AUX);
    let ours = json(&fs::read(chain_file(&node)).expect("the chain file"));
    fs::write(subdir(&node).join("00-vendor.conf"), r#"{"type":"tuning"}"#).expect("vendor");

    let cluster = node.net.join("10-flannel.conflist");
    let dir = conf_dir(Some(&cluster.to_string_lossy())).expect("a path");
    assert_eq!(dir, node.net);
    let chain = load(&dir, DEFAULT_AUX_CHAIN_NAME, "0.3.1")
        .expect("loads")
        .expect("a chain");
    assert_eq!(
        chain.plugins,
        vec![passthru_entry(), json!({"type": "tuning"}), ours.clone()]
    );
    assert_eq!(chain.files.last(), Some(&chain_file(&node)));

    // Alone in the directory: passthru, then ours.
    fs::remove_file(subdir(&node).join("00-vendor.conf")).expect("remove vendor");
    let chain = load(&dir, DEFAULT_AUX_CHAIN_NAME, "1.0.0")
        .expect("loads")
        .expect("a chain");
    assert_eq!(chain.plugins, vec![passthru_entry(), ours]);
}

/// `--attach aux-chain` left with the default `--chain-mode append` would run the plugin twice per
/// pod: refused (exit 2) with the flag to set, before anything is written.
#[test]
fn the_aux_chain_with_append_is_refused_before_anything_is_written() {
    let node = multus_node(Some(DEFAULT_AUX_CHAIN_NAME));
    let out = node.once(&["--attach", "aux-chain"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--attach aux-chain needs --chain-mode none"),
        "{}",
        stderr(&out)
    );
    assert!(!chain_file(&node).exists());
    assert!(!node.binary().exists());
}
