//! The uninstall takes only what this installer wrote (the real binary on a temp node): files of the
//! same names that carry no mark of it stay, and it says why; a kubeconfig an earlier version wrote
//! under Linkerd's name goes with the uninstall, not before.

mod support;

use serde_json::json;
use std::fs;
use std::path::PathBuf;
use std::process::Output;
use support::*;
use vocab::{AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, LINKERD_KUBECONFIG_NAME};

const AUX: &[&str] = &["--chain-mode", "none", "--attach", "aux-chain"];

/// Thin Multus running the default chain, its cluster network in the net dir.
fn aux_node() -> Node {
    let node = Node::with(&["10-flannel.conflist"]);
    let cluster = node.net.join("10-flannel.conflist");
    let multus = json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
        "clusterNetwork": cluster, "auxiliaryCNIChainName": DEFAULT_AUX_CHAIN_NAME,
    });
    fs::write(node.net.join("00-multus.conf"), multus.to_string()).expect("multus conf");
    node
}

fn chain_file(node: &Node) -> PathBuf {
    node.net
        .join(DEFAULT_AUX_CHAIN_NAME)
        .join(AUX_CHAIN_FILE_NAME)
}

fn uninstall(node: &Node, extra: &[&str]) -> (Output, String) {
    let out = node
        .command(&[extra, &["--uninstall"]].concat())
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
    (out, said)
}

/// The kubeconfig Linkerd's own installer writes (its header; the same names inside as ours).
const LINKERDS_KUBECONFIG: &str = "# Kubeconfig file for linkerd CNI plugin.\napiVersion: v1\n\
    kind: Config\nusers:\n- name: linkerd-cni\n  user:\n    token: linkerds-token\n";

/// In aux-chain mode, with Linkerd's own installer's files beside ours (a migration from Linkerd's
/// CNI plugin) and someone else's `linkerd-cni.conf` in the chain in place of ours, `--uninstall
/// --uninstall-binary` removes our kubeconfig only: Linkerd's kubeconfig, its binary and the
/// foreign chain file stay byte for byte, each named with why. Would break: an uninstall deleting
/// files by name (the chain file, Linkerd's `ZZZ-linkerd-cni-kubeconfig`, Linkerd's binary).
#[test]
fn aux_uninstall_leaves_other_installers_files() {
    let node = aux_node();
    node.once_ok(AUX);
    assert!(chain_file(&node).exists() && node.kubeconfig().is_some());
    let linkerds_kubeconfig = node.net.join(LINKERD_KUBECONFIG_NAME);
    fs::write(&linkerds_kubeconfig, LINKERDS_KUBECONFIG).expect("Linkerd's kubeconfig");
    // Linkerd's plugin put in our binary's place, and an admin's config of it in the chain.
    let linkerds_binary = b"#!/bin/sh\necho Linkerd's linkerd-cni\n";
    fs::write(node.binary(), linkerds_binary).expect("Linkerd's binary");
    let theirs = json!({
        "cniVersion": "0.3.1", "name": "linkerd-cni", "type": "linkerd-cni",
        "kubernetes": {"kubeconfig": format!("/etc/cni/net.d/{LINKERD_KUBECONFIG_NAME}")},
    })
    .to_string();
    write_atomically(&chain_file(&node), &theirs);

    let (out, said) = uninstall(&node, &[AUX, &["--uninstall-binary"]].concat());
    assert!(out.status.success(), "{said}");
    assert!(node.kubeconfig().is_none(), "ours goes");
    assert!(
        said.contains(&format!("removed {}", node.kubeconfig_path().display())),
        "{said}"
    );
    assert_eq!(fs::read_to_string(chain_file(&node)).expect("kept"), theirs);
    assert_eq!(
        fs::read_to_string(&linkerds_kubeconfig).expect("kept"),
        LINKERDS_KUBECONFIG
    );
    assert_eq!(fs::read(node.binary()).expect("kept"), linkerds_binary);
    for (path, why) in [
        (chain_file(&node), "without this installer's mark"),
        (
            linkerds_kubeconfig.clone(),
            "Linkerd's own CNI installer wrote it",
        ),
        (node.binary(), "not the binary this installer installs"),
    ] {
        let kept = format!("kept {}: ", path.display());
        let line = said
            .lines()
            .find(|l| l.starts_with(&kept))
            .unwrap_or_else(|| panic!("no {kept:?} in: {said}"));
        assert!(line.contains(why), "{line}");
    }
}

/// An earlier version's kubeconfig under Linkerd's name (this installer's old default): a pass with
/// the new default writes the new file and leaves the old one alone (a NAD not yet rewritten may
/// name it); the uninstall removes both, the old one since it carries this installer's mark. Would
/// break: the old file left on every node for good, or removed while NADs may still name it.
#[test]
fn an_earlier_versions_kubeconfig_goes_with_the_uninstall() {
    let node = Node::with(&["00-multus.conf"]);
    let none = ["--chain-mode", "none"];
    node.once_ok(&[&none[..], &["--kubeconfig-name", LINKERD_KUBECONFIG_NAME]].concat());
    let old = node.net.join(LINKERD_KUBECONFIG_NAME);
    let written = identity(&old);

    node.once_ok(&none);
    assert!(node.kubeconfig().is_some(), "the new name is written");
    assert_eq!(
        identity(&old),
        written,
        "the pass leaves the old file alone"
    );

    let (out, said) = uninstall(&node, &none);
    assert!(out.status.success(), "{said}");
    assert!(node.kubeconfig().is_none() && !old.exists(), "{said}");
    assert!(
        said.contains(&format!(
            "removed {} (uninstalling; an earlier version",
            old.display()
        )),
        "{said}"
    );
    assert_eq!(node.names(), vec!["00-multus.conf"]);
}

/// In append mode the uninstall takes out the entry this installer appended (marked) and leaves a
/// linkerd-cni entry another installer appended to another network config (Linkerd's own, no mark),
/// saying so. Would break: the uninstall's sweep of every `.conflist` taking Linkerd's entry out.
#[test]
fn append_uninstall_leaves_another_installers_entry() {
    let node = Node::with(&["10-flannel.conflist"]);
    let theirs = json!({
        "cniVersion": "0.3.1", "name": "k8s-pod-network",
        "plugins": [{"type": "calico"}, {"type": "linkerd-cni", "log_level": "info"}],
    })
    .to_string();
    let other = node.net.join("20-calico.conflist");
    fs::write(&other, &theirs).expect("another config");
    node.once_ok(&[]);
    let entry = &json(&node.read("10-flannel.conflist"))["plugins"][2];
    assert_eq!(entry["type"], "linkerd-cni");
    assert_eq!(
        entry["linkerd-multus.io/installed-by"], "linkerd-cni-install",
        "the appended entry is marked"
    );

    let (out, said) = uninstall(&node, &[]);
    assert!(out.status.success(), "{said}");
    assert_eq!(
        plugin_types(&node.read("10-flannel.conflist")),
        vec!["flannel", "portmap"]
    );
    assert_eq!(fs::read_to_string(&other).expect("kept"), theirs);
    assert!(
        said.contains(&format!(
            "kept 1 linkerd-cni entry in {}: without this installer's mark",
            other.display()
        )),
        "{said}"
    );
}
