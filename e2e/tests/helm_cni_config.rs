//! The chart's `linkerd-cni-config` ConfigMap read by the real consumers: the operator's NAD config
//! builder (the Multus path) and the installer's template filling (the chained path), each ending in the
//! CNI plugin's own config parser. Proves the chart's format is one the code accepts, with every value.

mod packaging;

use k8s_openapi::api::core::v1::ConfigMap;
use linkerd_cni::install::template::{self, Values};
use linkerd_cni::{IptablesMode, LinkerdConfig, PluginConfig};
use linkerd_multus_operator::nad_config::{build_config, ConfigSource};
use packaging::*;
use serde_json::Value;

const KUBECONFIG: &str = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig";

fn rendered_configmap(extra: &[&str]) -> ConfigMap {
    let mut args = vec!["--set", "cni.enabled=true"];
    args.extend_from_slice(extra);
    let docs = parse_docs(&helm_template("ld-controller", "linkerd-multus", &args));
    let cm = find(&docs, "ConfigMap", Some("linkerd-cni-config"));
    serde_json::from_value(cm.clone()).expect("a ConfigMap")
}

/// The plugin config Multus hands the plugin: the NAD's `spec.config` as the operator builds it.
fn via_operator(cm: &ConfigMap) -> PluginConfig {
    let source = ConfigSource {
        namespace: "linkerd-cni".into(),
        configmap: "linkerd-cni-config".into(),
        kubeconfig: KUBECONFIG.into(),
    };
    let nad_config =
        build_config(Some(cm), &source).expect("the operator accepts the chart's ConfigMap");
    PluginConfig::parse(nad_config.as_bytes())
        .expect("the plugin accepts the operator's NAD config")
}

/// The plugin config a runtime hands the plugin after the installer chained it: the template filled,
/// plus the `cniVersion` the runtime copies from the conflist.
fn via_installer(cm: &ConfigMap) -> PluginConfig {
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("cni_network_config"))
        .expect("key");
    let values = Values {
        kubeconfig_path: KUBECONFIG,
        log_level: "info",
        service_host: "10.96.0.1",
        service_port: "443",
    };
    let mut entry =
        template::render(text, &values, Some("info")).expect("the installer accepts it");
    entry["cniVersion"] = Value::String("0.3.1".into());
    PluginConfig::from_value(&entry).expect("the plugin accepts the installer's entry")
}

/// Default values give the plugin Linkerd's defaults, plus the proxy's admin and control ports ignored
/// inbound — through both paths.
#[test]
fn default_values_give_linkerds_defaults() {
    let cm = rendered_configmap(&[]);
    for config in [via_operator(&cm), via_installer(&cm)] {
        assert_eq!(config.kubeconfig.to_str(), Some(KUBECONFIG));
        let ignored: Vec<String> = config
            .linkerd
            .inbound_ports_to_ignore
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(ignored, ["4191", "4190"]);
        let expected = LinkerdConfig {
            inbound_ports_to_ignore: config.linkerd.inbound_ports_to_ignore.clone(),
            ..LinkerdConfig::default()
        };
        assert_eq!(config.linkerd, expected);
    }
}

/// Every plugin setting the chart exposes reaches the plugin, through both paths (the Go operator's
/// NADs silently lost iptables-mode, IPv6 and the gid).
#[test]
fn every_cni_value_reaches_the_plugin() {
    let cm = rendered_configmap(&[
        "--set",
        "cni.inboundProxyPort=5143",
        "--set",
        "cni.outboundProxyPort=5140",
        "--set",
        "cni.proxyUID=3000",
        "--set",
        "cni.proxyGID=3001",
        "--set-string",
        "cni.portsToRedirect=80\\,8080",
        "--set-string",
        "cni.ignoreInboundPorts=22\\,9000-9010",
        "--set-string",
        "cni.ignoreOutboundPorts=25",
        "--set-string",
        "cni.ignoreSubnets=10.0.0.0/8\\,fd00::/8",
        "--set",
        "cni.iptablesMode=nft",
        "--set",
        "cni.ipv6=true",
        "--set",
        "cni.useWaitFlag=true",
    ]);
    for config in [via_operator(&cm), via_installer(&cm)] {
        let l = &config.linkerd;
        assert_eq!((l.incoming_proxy_port, l.outgoing_proxy_port), (5143, 5140));
        assert_eq!((l.proxy_uid, l.proxy_gid), (Some(3000), Some(3001)));
        assert_eq!(l.ports_to_redirect, [80, 8080]);
        let shown = |v: &[linkerd_cni::ports::PortRange]| {
            v.iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            shown(&l.inbound_ports_to_ignore),
            ["4191", "4190", "22", "9000-9010"]
        );
        assert_eq!(shown(&l.outbound_ports_to_ignore), ["25"]);
        let subnets: Vec<String> = l.subnets_to_ignore.iter().map(|n| n.to_string()).collect();
        assert_eq!(subnets, ["10.0.0.0/8", "fd00::/8"]);
        assert_eq!(l.iptables_mode, IptablesMode::Nft);
        assert!(l.ipv6 && l.use_wait_flag && !l.simulate);
    }
}
