//! The flags as clap parses them and the settings resolved from them.

use super::*;
use clap::Parser;
use rules::attach::Attach;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vocab::{
    AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, DEFAULT_CNI_BIN_DIR, DEFAULT_CNI_NET_DIR,
    DEFAULT_KUBECONFIG_NAME,
};

fn parse(flags: &[&str]) -> Args {
    Args::try_parse_from(std::iter::once("linkerd-cni-install").chain(flags.iter().copied()))
        .expect("parses")
}

#[test]
fn defaults() {
    let s = Settings::resolve(
        parse(&[]),
        |_| None,
        Some(Path::new("/usr/bin/linkerd-cni-install")),
    )
    .expect("names a mode");
    assert_eq!(s.net_dir, PathBuf::from(DEFAULT_CNI_NET_DIR));
    assert_eq!(s.bin_dir, PathBuf::from(DEFAULT_CNI_BIN_DIR));
    assert_eq!(
        s.kubeconfig_node_path,
        format!("{DEFAULT_CNI_NET_DIR}/{DEFAULT_KUBECONFIG_NAME}")
    );
    assert_eq!(s.mode, InstallMode::Append);
    assert_eq!(s.plugin_binary, PathBuf::from("/usr/bin/linkerd-cni"));
    assert_eq!(s.template, TemplateSource::Default);
    assert_eq!(s.service_host, None);
    assert_eq!(s.resync, Duration::from_secs(5));
}

/// `--resync` takes the operator's duration form; the old `--resync-seconds` still parses.
#[test]
fn resync_is_a_duration() {
    assert_eq!(parse(&["--resync=1m"]).resync, Duration::from_secs(60));
    assert_eq!(
        parse(&["--resync-seconds", "3600"]).resync,
        Duration::from_secs(3600)
    );
    let err = Args::try_parse_from(["x", "--resync=0"]).expect_err("zero");
    assert!(err.to_string().contains("--resync"), "{err}");
}

#[test]
fn prefix_moves_writes_not_config_paths() {
    let args = parse(&[
        "--host-prefix",
        "/host",
        "--dest-cni-bin-dir",
        "/var/lib/cni/bin",
        "--chain-mode",
        "none",
    ]);
    let s = Settings::resolve(
        args,
        |k| (k == "KUBERNETES_SERVICE_HOST").then(|| "::1".into()),
        None,
    )
    .expect("names a mode");
    assert_eq!(s.net_dir, PathBuf::from("/host/etc/cni/net.d"));
    assert_eq!(s.bin_dir, PathBuf::from("/host/var/lib/cni/bin"));
    assert_eq!(
        s.kubeconfig_node_path,
        format!("{DEFAULT_CNI_NET_DIR}/{DEFAULT_KUBECONFIG_NAME}")
    );
    assert_eq!(s.mode, InstallMode::Nad);
    assert_eq!(s.service_host.as_deref(), Some("::1"));
}

#[test]
fn template_file_wins_and_bad_mode_is_rejected() {
    let s = Settings::resolve(
        parse(&[
            "--cni-network-config",
            "{}",
            "--cni-network-config-file",
            "/t",
        ]),
        |_| None,
        None,
    )
    .expect("names a mode");
    assert_eq!(s.template, TemplateSource::File("/t".into()));
    let s = Settings::resolve(
        parse(&["--cni-network-config", "{\"type\":1}"]),
        |_| None,
        None,
    )
    .expect("names a mode");
    assert_eq!(s.template, TemplateSource::Text("{\"type\":1}".into()));
    assert!(Args::try_parse_from(["x", "--chain-mode", "prepend"]).is_err());
}

/// The node's name turns publishing on; the pod's name and namespace are named in what it publishes.
#[test]
fn node_name_turns_publishing_on() {
    let s = Settings::resolve(parse(&[]), |_| None, None).expect("names a mode");
    assert_eq!(s.publish, None);
    assert_eq!(s.net_dir_on_node, DEFAULT_CNI_NET_DIR);
    let s = Settings::resolve(parse(&["--node-name", ""]), |_| None, None).expect("names a mode");
    assert_eq!(s.publish, None, "an empty NODE_NAME publishes nothing");
    let s = Settings::resolve(
        parse(&[
            "--node-name=n1",
            "--pod-name=cni-abc",
            "--pod-namespace=linkerd-cni",
            "--host-prefix=/host",
        ]),
        |_| None,
        None,
    )
    .expect("names a mode");
    assert_eq!(
        s.publish,
        Some(Publish {
            node_name: "n1".into(),
            installer_pod: Some("linkerd-cni/cni-abc".into()),
            api_group: None,
        })
    );
    assert_eq!(
        s.net_dir_on_node, DEFAULT_CNI_NET_DIR,
        "as the node sees it"
    );
    assert_eq!(
        s.own_pod,
        Some(OwnPod {
            namespace: "linkerd-cni".into(),
            name: "cni-abc".into()
        }),
        "asked about on SIGTERM"
    );
    let s =
        Settings::resolve(parse(&["--pod-name=cni-abc"]), |_| None, None).expect("names a mode");
    assert_eq!(s.own_pod, None, "no namespace: nothing to ask about");
}

/// `--attach` takes the operator's values and env name; aux-chain with append is refused, saying
/// why, since the plugin would run twice per pod; the operator's spelling of a bad value too.
#[test]
fn attach_is_the_operators_and_refuses_append_with_the_aux_chain() {
    let resolve = |flags: &[&str]| Settings::resolve(parse(flags), |_| None, None).map(|s| s.mode);
    assert_eq!(parse(&[]).attach, Attach::Nad);
    assert_eq!(
        resolve(&["--chain-mode=none", "--attach=aux-chain"]),
        Ok(InstallMode::AuxChain)
    );
    assert_eq!(resolve(&["--attach=nad"]), Ok(InstallMode::Append));
    let err = resolve(&["--attach=aux-chain"])
        .expect_err("append + aux-chain")
        .to_string();
    assert!(
        err.contains("needs --chain-mode none") && err.contains("twice"),
        "{err}"
    );
    let err = Args::try_parse_from(["x", "--attach", "auxChain"]).expect_err("helm's spelling");
    assert!(err.to_string().contains("nad or aux-chain"), "{err}");
    let err = Args::try_parse_from(["x", "--chain-mode", "aux-chain"]).expect_err("moved");
    assert!(err.to_string().contains("append, none"), "{err}");
}

/// `aux-chain` mode: the chain's name and directory, each with its env name (the chart sets
/// them), resolved under the prefix; the directory defaults to the net dir.
#[test]
fn aux_chain_settings() {
    let s = Settings::resolve(
        parse(&["--chain-mode", "none", "--attach", "aux-chain"]),
        |_| None,
        None,
    )
    .expect("names a mode");
    assert_eq!(s.mode, InstallMode::AuxChain);
    assert_eq!(s.mode.flags(), "--attach aux-chain");
    for mode in [ChainMode::Append, ChainMode::None] {
        let value = clap::ValueEnum::to_possible_value(&mode).expect("a value");
        assert_eq!(mode.name(), value.get_name());
    }
    assert_eq!(s.aux_chain.target.name, DEFAULT_AUX_CHAIN_NAME);
    assert_eq!(
        s.aux_chain.target.dir_on_node,
        PathBuf::from(DEFAULT_CNI_NET_DIR)
    );
    assert_eq!(
        s.aux_chain.file(),
        PathBuf::from(format!(
            "{DEFAULT_CNI_NET_DIR}/{DEFAULT_AUX_CHAIN_NAME}/{AUX_CHAIN_FILE_NAME}"
        ))
    );
    let s = Settings::resolve(
        parse(&[
            "--chain-mode=none",
            "--attach=aux-chain",
            "--aux-chain-name=my-chain",
            "--aux-chain-dir=/run/multus/cni/net.d",
            "--host-prefix=/host",
        ]),
        |_| None,
        None,
    )
    .expect("names a mode");
    assert_eq!(s.aux_chain.dir, PathBuf::from("/host/run/multus/cni/net.d"));
    assert_eq!(
        s.aux_chain.file(),
        PathBuf::from("/host/run/multus/cni/net.d/my-chain/linkerd-cni.conf")
    );
    assert_eq!(
        s.aux_chain.target.file_on_node(),
        PathBuf::from("/run/multus/cni/net.d/my-chain/linkerd-cni.conf"),
        "as the node sees it"
    );
    let err = Args::try_parse_from(["x", "--aux-chain-name", "../etc"]).expect_err("bad name");
    assert!(
        err.to_string().contains("is not a CNI network name"),
        "{err}"
    );

    use clap::CommandFactory;
    let cmd = Args::command();
    let env = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
    };
    assert_eq!(env("chain_mode").as_deref(), Some("CNI_CHAIN_MODE"));
    assert_eq!(env("attach").as_deref(), Some("ATTACH"));
    assert_eq!(env("aux_chain_name").as_deref(), Some("AUX_CHAIN_NAME"));
    assert_eq!(env("aux_chain_dir").as_deref(), Some("AUX_CHAIN_DIR"));
}

#[test]
fn uninstall_runs_alone() {
    assert!(parse(&["--uninstall"]).uninstall);
    assert!(
        Settings::resolve(parse(&["--uninstall"]), |_| None, None)
            .expect("names a mode")
            .uninstall
    );
    assert!(Args::try_parse_from(["x", "--uninstall", "--once"]).is_err());
    assert!(
        Args::try_parse_from(["x", "--uninstall", "--ready-check", "--ready-file=/r"]).is_err()
    );
}

#[test]
fn ready_check_needs_the_ready_file_and_no_once() {
    assert!(Args::try_parse_from(["x", "--ready-check"]).is_err());
    assert!(Args::try_parse_from(["x", "--ready-check", "--ready-file=/r", "--once"]).is_err());
    let args = parse(&["--ready-check", "--ready-file=/tmp/r"]);
    assert!(args.ready_check);
    let s = Settings::resolve(args, |_| None, None).expect("names a mode");
    assert_eq!(s.ready_file, Some(PathBuf::from("/tmp/r")));
}
