//! The book's Uninstall page, *By hand on a node*: each `linkerd-cni-install` line of its `sh`
//! block, read from docs/src/tasks/uninstall.md and run as written (only the node's root, `/host` there, is a temp dir
//! here), on a node that the installer laid out with the chart's flags for the configuration the
//! line's comment names, beside Linkerd's own kubeconfig. Each line must take every file of ours off
//! the node and leave everything else as it was: a line that drifts from the chart (a flag left out,
//! as `--attach aux-chain` once was) leaves a file of ours and fails here.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use support::*;
use vocab::{LINKERD_KUBECONFIG_NAME, PLUGIN_TYPE};

/// One configuration of the chart's installer: the book comment naming it, the flags the chart
/// renders for it (the node's paths), and its node.
struct Case {
    comment: &'static str,
    install: &'static [&'static str],
    net_dir: &'static str,
    bin_dir: &'static str,
    /// Files the node holds before the install: (path on the node, content).
    node: fn() -> Vec<(&'static str, String)>,
}

const CASES: &[Case] = &[
    Case {
        comment: "attach=auxChain with values-openshift.yaml",
        install: &[
            "--dest-cni-net-dir=/etc/kubernetes/cni/net.d",
            "--dest-cni-bin-dir=/var/lib/cni/bin",
            "--chain-mode=none",
            "--attach=aux-chain",
            "--aux-chain-name=vendor-cni-chain",
            "--aux-chain-dir=/run/multus/cni/net.d",
            "--multus-host-prefix=/host",
        ],
        net_dir: "/etc/kubernetes/cni/net.d",
        bin_dir: "/var/lib/cni/bin",
        node: openshift_node,
    },
    Case {
        comment: "attach=auxChain with the chart's default directories",
        install: &[
            "--dest-cni-net-dir=/etc/cni/net.d",
            "--dest-cni-bin-dir=/opt/cni/bin",
            "--chain-mode=none",
            "--attach=aux-chain",
            "--aux-chain-name=vendor-cni-chain",
        ],
        net_dir: "/etc/cni/net.d",
        bin_dir: "/opt/cni/bin",
        node: thin_multus_node,
    },
    Case {
        comment: "attach=nad with cni.chainMode=none (the chart's default)",
        install: &[
            "--dest-cni-net-dir=/etc/cni/net.d",
            "--dest-cni-bin-dir=/opt/cni/bin",
            "--chain-mode=none",
            "--attach=nad",
        ],
        net_dir: "/etc/cni/net.d",
        bin_dir: "/opt/cni/bin",
        node: || {
            vec![(
                "/etc/cni/net.d/00-multus.conf",
                text(&fixture("00-multus.conf")),
            )]
        },
    },
    Case {
        comment: "cni.chainMode=append",
        install: &[
            "--dest-cni-net-dir=/etc/cni/net.d",
            "--dest-cni-bin-dir=/opt/cni/bin",
            "--chain-mode=append",
        ],
        net_dir: "/etc/cni/net.d",
        bin_dir: "/opt/cni/bin",
        node: || {
            vec![(
                "/etc/cni/net.d/10-flannel.conflist",
                text(&fixture("10-flannel.conflist")),
            )]
        },
    },
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 fixture")
}

/// OpenShift 4.18+: thick Multus' generated config (its daemon's paths under /host) with the chain,
/// the cluster network's config in /run/multus/cni/net.d.
fn openshift_node() -> Vec<(&'static str, String)> {
    vec![
        (
            "/etc/kubernetes/cni/net.d/00-multus.conf",
            json!({
                "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus-shim",
                "clusterNetwork": "/host/run/multus/cni/net.d/10-ovn-kubernetes.conf",
                "auxiliaryCNIChainName": "vendor-cni-chain",
                "daemonSocketDir": "/run/multus/socket",
            })
            .to_string(),
        ),
        (
            "/run/multus/cni/net.d/10-ovn-kubernetes.conf",
            r#"{"cniVersion":"0.4.0","name":"ovn-kubernetes","type":"ovn-k8s-cni-overlay"}"#.into(),
        ),
    ]
}

/// Thin Multus with the chain, its cluster network in the net dir.
fn thin_multus_node() -> Vec<(&'static str, String)> {
    vec![
        (
            "/etc/cni/net.d/00-multus.conf",
            json!({
                "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
                "clusterNetwork": "/etc/cni/net.d/10-flannel.conflist",
                "auxiliaryCNIChainName": "vendor-cni-chain",
                "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
            })
            .to_string(),
        ),
        (
            "/etc/cni/net.d/10-flannel.conflist",
            text(&fixture("10-flannel.conflist")),
        ),
    ]
}

/// The kubeconfig Linkerd's own installer (linkerd2-cni's install-cni.sh) writes, under its name.
const LINKERDS_KUBECONFIG: &str = "# Kubeconfig file for linkerd CNI plugin.\napiVersion: v1\n\
    kind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://[10.96.0.1]:443\n\
    users:\n- name: linkerd-cni\n  user:\n    token: linkerds-token\ncontexts:\n\
    - name: linkerd-cni-context\n  context:\n    cluster: local\n    user: linkerd-cni\n\
    current-context: linkerd-cni-context\n";

/// The `sh` block after *By hand on a node* on the book's Uninstall page (docs/src/tasks/uninstall.md): each command (lines
/// joined at a trailing `\`) with the comment line above it.
fn readme_lines() -> Vec<(String, Vec<String>)> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/tasks/uninstall.md");
    let section = fs::read_to_string(&page).expect("the book's Uninstall page");
    let by_hand = section
        .split_once("**By hand on a node.**")
        .expect("Uninstall has *By hand on a node*")
        .1;
    let block = by_hand
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("an sh block after *By hand on a node*")
        .0
        .replace("\\\n", " ");
    let mut lines = Vec::new();
    let mut comment = None;
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(c) = line.strip_prefix("# ") {
            comment = Some(c.to_string());
            continue;
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        assert_eq!(
            words.first().map(String::as_str),
            Some("linkerd-cni-install"),
            "{line}"
        );
        lines.push((
            comment
                .take()
                .unwrap_or_else(|| panic!("no comment names the configuration of: {line}")),
            words,
        ));
    }
    lines
}

/// Every file under `root` with its bytes.
fn files_under(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.insert(
                    path.strip_prefix(root).expect("under root").to_path_buf(),
                    fs::read(&path).expect("read"),
                );
            }
        }
    }
    out
}

/// A network config compared as JSON (a stripped entry rewrites the file's formatting), else bytes.
fn meaning(bytes: &[u8]) -> Result<Value, Vec<u8>> {
    serde_json::from_slice(bytes).map_err(|_| bytes.to_vec())
}

/// Each line of the book's block removes what the chart's installer wrote in that configuration
/// and nothing else, Linkerd's own kubeconfig included; the book names exactly the configurations
/// this test lays out. Would break: a manual line that leaves the chain file or the kubeconfig on a
/// node (the book's aux-chain line without `--attach aux-chain`), or an uninstall taking Linkerd's
/// kubeconfig.
#[test]
fn the_readme_lines_remove_what_the_installer_wrote_and_nothing_else() {
    let lines = readme_lines();
    let named: Vec<&str> = lines.iter().map(|(c, _)| c.as_str()).collect();
    let cases: Vec<&str> = CASES.iter().map(|c| c.comment).collect();
    assert_eq!(
        named, cases,
        "the book's lines and this test's configurations"
    );
    for (case, (_, words)) in CASES.iter().zip(&lines) {
        eprintln!("=== {}: {}", case.comment, words.join(" "));
        let node = Node::new();
        let root = node.net.parent().expect("temp dir").join("root");
        let on_node = |p: &str| root.join(p.trim_start_matches('/'));
        for dir in [case.net_dir, case.bin_dir] {
            fs::create_dir_all(on_node(dir)).expect("mkdir");
        }
        for (path, content) in (case.node)() {
            fs::create_dir_all(on_node(path).parent().expect("parent")).expect("mkdir");
            fs::write(on_node(path), content).expect("node file");
        }
        let before = files_under(&root);

        let out = node
            .bare_command()
            .arg(format!("--host-prefix={}", root.display()))
            .args(case.install)
            .arg("--once")
            .output()
            .expect("run installer");
        assert!(
            out.status.success(),
            "{}: the install failed: {}",
            case.comment,
            String::from_utf8_lossy(&out.stderr)
        );
        let installed = files_under(&root);
        let kubeconfig = Path::new(case.net_dir.trim_start_matches('/')).join(KUBECONFIG);
        assert!(
            installed.contains_key(&kubeconfig),
            "{}: no kubeconfig",
            case.comment
        );
        let linkerds = on_node(case.net_dir).join(LINKERD_KUBECONFIG_NAME);
        fs::write(&linkerds, LINKERDS_KUBECONFIG).expect("Linkerd's kubeconfig");

        // The book's line, word for word but for the node's root.
        let mut args = words[1..].to_vec();
        let prefix = args
            .iter()
            .position(|w| w == "--host-prefix")
            .unwrap_or_else(|| panic!("{}: no --host-prefix /host", case.comment));
        assert_eq!(args[prefix + 1], "/host", "{}", case.comment);
        args[prefix + 1] = root.to_string_lossy().into_owned();
        let out = clean_installer().args(&args).output().expect("run");
        let said = String::from_utf8_lossy(&out.stdout);
        eprintln!("{said}{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{}: {said}", case.comment);

        let mut after = files_under(&root);
        // The binary stays without --uninstall-binary (pods it set up still need its DEL).
        let binary = Path::new(case.bin_dir.trim_start_matches('/')).join(PLUGIN_TYPE);
        assert!(after.remove(&binary).is_some(), "{}: binary", case.comment);
        assert_eq!(
            after
                .remove(
                    &linkerds
                        .strip_prefix(&root)
                        .expect("under root")
                        .to_path_buf()
                )
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .as_deref(),
            Some(LINKERDS_KUBECONFIG),
            "{}: Linkerd's kubeconfig is kept as it was",
            case.comment
        );
        // The node after the book's line is the node before the install.
        let differ: BTreeSet<&PathBuf> = after
            .keys()
            .chain(before.keys())
            .filter(|p| after.get(*p).map(|b| meaning(b)) != before.get(*p).map(|b| meaning(b)))
            .collect();
        assert!(
            differ.is_empty(),
            "{}: left or changed on the node: {differ:?} (stdout: {said})",
            case.comment
        );
        assert!(
            said.contains(&format!("kept {}", linkerds.display())),
            "{}: {said}",
            case.comment
        );
    }
}
