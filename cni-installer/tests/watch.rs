//! The long-running `linkerd-cni-install` (the real binary, watching): it repairs outside rewrites,
//! follows token rotation, keeps retrying on bad input, and reverts on SIGTERM.

mod support;

use serde_json::Value;
use std::fs;
use support::*;
use vocab::PLUGIN_TYPE;

fn chained(node: &Node, name: &str) -> bool {
    fs::read(node.net.join(name)).is_ok_and(|b| {
        serde_json::from_slice::<Value>(&b).is_ok_and(|v| {
            v["plugins"]
                .as_array()
                .and_then(|p| p.last())
                .is_some_and(|p| p["type"] == PLUGIN_TYPE)
        })
    })
}

/// Another installer (flannel's, here) rewrites its conflist without linkerd-cni: the entry comes
/// back, logged with the reason. SIGTERM then restores the primary's own bytes and exits 0; the
/// kubeconfig goes, the binary stays.
#[test]
fn outside_rewrite_is_repaired_and_sigterm_restores_the_original() {
    let name = "10-flannel.conflist";
    let node = Node::with(&[name]);
    // A resync period far beyond the test: only the file watch can make it pass.
    let running = node.spawn(&["--resync", "1h"]);
    wait_for("linkerd-cni chained", || chained(&node, name).then_some(()));

    fs::write(node.net.join(name), fixture(name)).expect("outside rewrite");
    wait_for(
        "linkerd-cni chained again after the outside rewrite",
        || chained(&node, name).then_some(()),
    );
    assert_eq!(
        plugin_types(&node.read(name)),
        vec!["flannel", "portmap", PLUGIN_TYPE]
    );
    wait_for("the repair to be logged", || {
        running
            .log()
            .contains("rewritten by someone else")
            .then_some(())
    });

    let (status, log) = running.terminate();
    assert!(status.success(), "exit status {status:?}\n{log}");
    assert_eq!(
        node.read(name),
        fixture(name),
        "SIGTERM restores the original bytes"
    );
    assert_eq!(node.names(), vec![name], "the kubeconfig is removed");
    assert_eq!(fs::read(node.binary()).expect("binary kept"), FAKE_PLUGIN);
    assert!(log.contains("restored the original"), "{log}");
}

/// When someone else edited the conflist after us, SIGTERM keeps their edit and takes out only our
/// entry.
#[test]
fn sigterm_keeps_someone_elses_edit() {
    let name = "10-calico.conflist";
    let node = Node::with(&[name]);
    let running = node.spawn(&[]);
    wait_for("linkerd-cni chained", || chained(&node, name).then_some(()));

    let mut edited = json(&node.read(name));
    edited["plugins"][0]["mtu"] = 1400.into();
    fs::write(
        node.net.join(name),
        serde_json::to_vec(&edited).expect("json"),
    )
    .expect("edit");
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");

    let after = json(&node.read(name));
    assert_eq!(
        plugin_types(&node.read(name)),
        vec!["calico", "portmap", "bandwidth"]
    );
    assert_eq!(after["plugins"][0]["mtu"], 1400, "their edit survives");
    assert!(log.contains("removed linkerd-cni from"), "{log}");
}

/// A `.conf` converted to a `.conflist` comes back as the `.conf` on SIGTERM; `--uninstall-binary`
/// also removes the binary.
#[test]
fn sigterm_turns_the_conflist_back_into_the_conf() {
    let node = Node::with(&["10-bridge.conf"]);
    let running = node.spawn(&["--uninstall-binary"]);
    // The `.conflist` is written before the `.conf` is removed: wait for both.
    wait_for("the .conf converted", || {
        (chained(&node, "10-bridge.conflist") && !node.net.join("10-bridge.conf").exists())
            .then_some(())
    });

    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert_eq!(node.names(), vec!["10-bridge.conf"]);
    assert_eq!(node.read("10-bridge.conf"), fixture("10-bridge.conf"));
    assert!(!node.binary().exists(), "--uninstall-binary removes it");
}

/// Writes the service-account files the way the kubelet's atomic writer does: files in a timestamped
/// directory, `token`/`ca.crt` symlinks through `..data`, and `..data` swapped by a rename.
fn kubelet_write(sa: &std::path::Path, generation: u32, token: &str) {
    use std::os::unix::fs::symlink;
    let dir_name = format!("..2026_11_22_{generation}");
    let dir = sa.join(&dir_name);
    fs::create_dir(&dir).expect("timestamped dir");
    fs::write(dir.join("token"), token).expect("token");
    fs::write(dir.join("ca.crt"), CA).expect("ca");
    let tmp = sa.join("..data_tmp");
    symlink(&dir_name, &tmp).expect("..data_tmp");
    fs::rename(&tmp, sa.join("..data")).expect("swap ..data");
    for name in ["token", "ca.crt"] {
        let link = sa.join(name);
        if fs::symlink_metadata(&link).is_ok_and(|m| !m.file_type().is_symlink()) {
            fs::remove_file(&link).expect("replace plain file");
        }
        if fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{name}"), &link).expect("symlink");
        }
    }
}

/// The kubelet rotates the projected token (its atomic-writer layout): the kubeconfig follows.
#[test]
fn token_rotation_rewrites_the_kubeconfig() {
    let node = Node::with(&["05-cilium.conflist"]);
    kubelet_write(&node.sa, 1, "token-1\n");
    // A resync period far beyond the test: only the file watch can make it pass.
    let running = node.spawn(&["--resync", "1h"]);
    wait_for("the first kubeconfig", || {
        node.kubeconfig()
            .is_some_and(|k| k.contains("token: token-1"))
            .then_some(())
    });

    kubelet_write(&node.sa, 2, "token-2\n");
    wait_for("the kubeconfig with the rotated token", || {
        node.kubeconfig()
            .is_some_and(|k| k.contains("token: token-2"))
            .then_some(())
    });
    assert_eq!(mode(&node.kubeconfig_path()), 0o600);
    assert!(!node.kubeconfig().unwrap_or_default().contains("token-1"));
    wait_for("the reason logged", || {
        running
            .log()
            .contains("token, CA or apiserver address changed")
            .then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
}

/// Bad input does not stop the installer: a missing token and a corrupt primary config are reported,
/// and once they are fixed the node gets installed; the corrupt file is never written meanwhile.
#[test]
fn keeps_retrying_until_the_token_and_the_config_are_fixed() {
    let name = "10-flannel.conflist";
    let node = Node::new();
    let corrupt = b"{\"name\": \"cbr0\", \"plugins\": [";
    fs::write(node.net.join(name), corrupt).expect("corrupt");
    fs::remove_file(node.sa.join("token")).expect("no token");
    let running = node.spawn(&[]);
    wait_for("the missing token reported", || {
        running
            .log()
            .contains("cannot read the service-account file")
            .then_some(())
    });
    assert!(node.kubeconfig().is_none());

    fs::write(node.sa.join("token"), "token-1\n").expect("token appears");
    wait_for("the kubeconfig once the token exists", || {
        node.kubeconfig().is_some().then_some(())
    });
    wait_for("the corrupt config reported", || {
        running.log().contains("not valid JSON").then_some(())
    });
    assert_eq!(
        node.read(name),
        corrupt,
        "a corrupt config is never rewritten"
    );

    fs::write(node.net.join(name), fixture(name)).expect("fixed");
    wait_for("linkerd-cni chained once the config is valid", || {
        chained(&node, name).then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert_eq!(node.read(name), fixture(name));
}

/// A primary config that appears after the installer started (the network plugin installs later)
/// gets chained.
#[test]
fn a_primary_config_appearing_later_is_chained() {
    let node = Node::new();
    let running = node.spawn(&[]);
    wait_for("the kubeconfig", || {
        node.kubeconfig().is_some().then_some(())
    });
    fs::write(
        node.net.join("10-flannel.conflist"),
        fixture("10-flannel.conflist"),
    )
    .expect("write");
    wait_for("linkerd-cni chained", || {
        chained(&node, "10-flannel.conflist").then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(
        node.read("10-flannel.conflist"),
        fixture("10-flannel.conflist")
    );
}

/// A config that sorts before the chained one becomes the primary: linkerd-cni moves there, and the
/// old file gets its original bytes back (the runtime no longer reads it).
#[test]
fn a_new_primary_takes_the_entry_and_the_old_one_is_restored() {
    let node = Node::with(&["10-flannel.conflist"]);
    let running = node.spawn(&[]);
    wait_for("flannel chained", || {
        chained(&node, "10-flannel.conflist").then_some(())
    });

    fs::write(
        node.net.join("05-cilium.conflist"),
        fixture("05-cilium.conflist"),
    )
    .expect("cilium");
    wait_for("the entry moved to the new primary", || {
        (chained(&node, "05-cilium.conflist")
            && fs::read(node.net.join("10-flannel.conflist")).ok()
                == Some(fixture("10-flannel.conflist")))
        .then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert!(log.contains("no longer the primary"), "{log}");
    assert_eq!(
        node.read("05-cilium.conflist"),
        fixture("05-cilium.conflist")
    );
    assert_eq!(
        node.read("10-flannel.conflist"),
        fixture("10-flannel.conflist")
    );
}

/// The primary's own installer writes its `.conf` again after we converted it: the new `.conf` is
/// converted over our earlier `.conflist`, and SIGTERM restores the new `.conf`.
#[test]
fn a_rewritten_conf_is_converted_again() {
    let node = Node::with(&["10-bridge.conf"]);
    let running = node.spawn(&[]);
    wait_for("the .conf converted", || {
        (chained(&node, "10-bridge.conflist") && !node.net.join("10-bridge.conf").exists())
            .then_some(())
    });

    let mut newer = json(&fixture("10-bridge.conf"));
    newer["mtu"] = 1450.into();
    let newer = serde_json::to_vec_pretty(&newer).expect("json");
    let tmp = node.net.join("10-bridge.conf.tmp");
    fs::write(&tmp, &newer).expect("write");
    fs::rename(&tmp, node.net.join("10-bridge.conf")).expect("rename");
    wait_for("the new .conf converted", || {
        (!node.net.join("10-bridge.conf").exists()
            && fs::read(node.net.join("10-bridge.conflist")).is_ok_and(|b| {
                json(&b)["plugins"][0]["mtu"] == 1450 && chained(&node, "10-bridge.conflist")
            }))
        .then_some(())
    });
    let (status, log) = running.terminate();
    assert!(status.success(), "{log}");
    assert_eq!(node.names(), vec!["10-bridge.conf"]);
    assert_eq!(node.read("10-bridge.conf"), newer);
}

/// After a SIGKILL (no cleanup), a new installer finds its entry already there and changes nothing;
/// its SIGTERM still takes the entry out, leaving the primary's own plugins.
#[test]
fn a_restarted_installer_still_cleans_up() {
    let name = "10-flannel.conflist";
    let node = Node::with(&[name]);
    let first = node.spawn(&[]);
    wait_for("flannel chained", || chained(&node, name).then_some(()));
    first.kill();
    let chained_bytes = identity(&node.net.join(name));

    let second = node.spawn(&[]);
    wait_for("the second installer's first pass", || {
        second.log().contains("first pass done").then_some(())
    });
    wait_for("the kubeconfig still there", || {
        node.kubeconfig().is_some().then_some(())
    });
    let (status, log) = second.terminate();
    assert!(status.success(), "{log}");
    assert!(
        !log.contains("appended"),
        "the entry was already there: {log}"
    );
    assert_ne!(identity(&node.net.join(name)), chained_bytes);
    assert_eq!(
        json(&node.read(name)),
        json(&fixture(name)),
        "same JSON as the original (formatting may differ)"
    );
    assert!(node.kubeconfig().is_none());
}
