//! The installer's file in Multus' auxiliary chain is what the Multus stand-in loads: an installer
//! pass in `--chain-mode aux-chain` on a temp node, then the chain built from the directory of
//! Multus' `clusterNetwork` as Multus builds it at every ADD. Pure file work: no root, no apiserver.

use clap::Parser;
use linkerd_cni_installer::args::{Args, Settings};
use linkerd_cni_installer::Installer;
use linkerd_multus_e2e::multus::aux_chain::{self, passthru_entry};
use serde_json::json;
use std::fs;
use vocab::{AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, PLUGIN_TYPE};

#[test]
fn the_installed_file_is_what_multus_runs_after_passthru() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (net, bin, sa) = (
        tmp.path().join("net.d"),
        tmp.path().join("bin"),
        tmp.path().join("sa"),
    );
    for dir in [&net, &bin, &sa] {
        fs::create_dir(dir).expect("mkdir");
    }
    fs::write(sa.join("token"), "token\n").expect("token");
    fs::write(sa.join("ca.crt"), "ca\n").expect("ca");
    let plugin = tmp.path().join("linkerd-cni");
    fs::write(&plugin, "#!/bin/sh\n").expect("plugin");
    let cluster_network = net.join("10-flannel.conflist");
    fs::write(
        &cluster_network,
        r#"{"cniVersion":"0.3.1","name":"cbr0","plugins":[{"type":"flannel"}]}"#,
    )
    .expect("cluster network");
    let multus = json!({
        "cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus",
        "auxiliaryCNIChainName": DEFAULT_AUX_CHAIN_NAME,
        "clusterNetwork": cluster_network.to_string_lossy(),
    });
    fs::write(net.join("00-multus.conf"), multus.to_string()).expect("multus conf");

    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let args = Args::try_parse_from([
        "linkerd-cni-install".to_string(),
        "--chain-mode=aux-chain".into(),
        format!("--aux-chain-name={DEFAULT_AUX_CHAIN_NAME}"),
        format!("--dest-cni-net-dir={}", path(&net)),
        format!("--aux-chain-dir={}", path(&net)),
        format!("--dest-cni-bin-dir={}", path(&bin)),
        format!("--service-account-dir={}", path(&sa)),
        format!("--plugin-binary={}", path(&plugin)),
    ])
    .expect("args");
    let env = |k: &str| match k {
        "KUBERNETES_SERVICE_HOST" => Some("10.96.0.1".to_string()),
        "KUBERNETES_SERVICE_PORT" => Some("443".to_string()),
        _ => None,
    };
    let mut installer = Installer::new(Settings::resolve(args, env, None));
    let report = installer.pass();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.waiting, None);
    let entry = installer.entry().expect("the plugin entry");

    // Another vendor's plugin sorts first; ours runs after it.
    let chain_dir = net.join(DEFAULT_AUX_CHAIN_NAME);
    fs::write(chain_dir.join("00-vendor.conf"), r#"{"type":"tuning"}"#).expect("vendor");

    let conf_dir = aux_chain::conf_dir(Some(&path(&cluster_network))).expect("a path");
    assert_eq!(conf_dir, net);
    let chain = aux_chain::load(&conf_dir, DEFAULT_AUX_CHAIN_NAME, "0.3.1")
        .expect("loads")
        .expect("a chain");
    assert_eq!(chain.name, DEFAULT_AUX_CHAIN_NAME);
    assert_eq!(
        chain.plugins,
        vec![passthru_entry(), json!({"type": "tuning"}), entry.clone()]
    );
    assert_eq!(chain.plugins[2]["type"], PLUGIN_TYPE);
    assert_eq!(
        chain.plugins[2]["kubernetes"]["kubeconfig"],
        json!(path(&net.join(vocab::DEFAULT_KUBECONFIG_NAME)))
    );
    assert_eq!(
        chain.files.last(),
        Some(&chain_dir.join(AUX_CHAIN_FILE_NAME))
    );

    // Alone in the directory: passthru, then ours.
    fs::remove_file(chain_dir.join("00-vendor.conf")).expect("remove vendor");
    let chain = aux_chain::load(&conf_dir, DEFAULT_AUX_CHAIN_NAME, "1.0.0")
        .expect("loads")
        .expect("a chain");
    assert_eq!(chain.plugins, vec![passthru_entry(), entry]);
}
