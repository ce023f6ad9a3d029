//! The chart read by the real code that consumes it: its `linkerd-cni-config` ConfigMap through the
//! operator's NAD builder (the Multus path) and the installer's template filling (the chained path), each
//! ending in the CNI plugin's own config parser; and its container args through the operator's and the
//! installer's own clap definitions, whose defaults the values must equal.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use linkerd_cni::{IptablesMode, LinkerdConfig, PluginConfig};
use linkerd_multus_operator::nad_config::{build_config, ConfigSource};
use rules::cni_template::{self as template, Values};
use serde_json::Value;
use support::*;

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
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn default_values_give_linkerds_defaults() {
    let cm = rendered_configmap(&[]);
    for config in [via_operator(&cm), via_installer(&cm)] {
        assert_eq!(config.kubeconfig.to_str(), Some(KUBECONFIG));
        assert_eq!(
            config.log_file, None,
            "no log file unless cni.logFile is set"
        );
        let ignored: Vec<String> = config
            .linkerd
            .rules
            .inbound_ports_to_ignore
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(ignored, ["4191", "4190"]);
        let mut expected = LinkerdConfig::default();
        expected.rules.inbound_ports_to_ignore =
            config.linkerd.rules.inbound_ports_to_ignore.clone();
        assert_eq!(config.linkerd, expected);
    }
}

/// Every plugin setting the chart exposes reaches the plugin, through both paths (the Go operator's
/// NADs silently lost iptables-mode, IPv6 and the gid).
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
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
        "--set",
        "cni.logFile=/var/log/linkerd-cni.log",
    ]);
    for config in [via_operator(&cm), via_installer(&cm)] {
        let l = &config.linkerd.rules;
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
        let w = &config.linkerd;
        assert_eq!(w.iptables_mode, IptablesMode::Nft);
        assert!(w.ipv6 && w.use_wait_flag && !w.simulate);
        assert_eq!(
            config.log_file.as_deref(),
            Some(std::path::Path::new("/var/log/linkerd-cni.log"))
        );
    }
}

// === the chart's args, parsed by the binaries' own clap definitions ===

fn container_args(docs: &[Value], kind_name: &str) -> Vec<String> {
    find(docs, kind_name, None)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect()
}

/// The argv clap would see for the container's environment: each variable must be the `env` of one of
/// the binary's flags (a misspelt name fails), set the way clap reads it (`true`/`false` for switches).
fn argv_from_env(
    command: &clap::Command,
    env: &std::collections::BTreeMap<String, Value>,
) -> Vec<String> {
    let mut argv = vec![command.get_name().to_string()];
    for (name, value) in env {
        if name == "RUST_LOG" {
            continue; // the log filter, read by tracing, not clap
        }
        let arg = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name.as_str()))
            .unwrap_or_else(|| panic!("{name} is not the environment variable of any flag"));
        let long = arg.get_long().expect("a long flag");
        // Downward-API values: what the kubelet would fill in.
        let value = value
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("from-{name}"));
        if matches!(arg.get_action(), clap::ArgAction::SetTrue) {
            assert!(
                value == "true" || value == "false",
                "{name}={value} is not a boolean"
            );
            if value == "true" {
                argv.push(format!("--{long}"));
            }
        } else {
            argv.push(format!("--{long}={value}"));
        }
    }
    argv
}

/// The operator accepts the chart's settings in every cert mode, and apart from what the chart must set
/// (leader election, the self-managed names, the downward-API identity) every one equals the binary's
/// own default: a value whose default drifted from the flag's fails here.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn operator_parses_the_chart_settings_and_defaults_agree() {
    use clap::{CommandFactory, Parser};
    use linkerd_multus_operator::cli::Cli;
    for mode in ["selfManaged", "certManager", "helm"] {
        let set = format!("webhook.certs.mode={mode}");
        let docs = parse_docs(&helm_template(
            "ld-controller",
            "linkerd-multus",
            &["--set", &set],
        ));
        let deployment = find(&docs, "Deployment", None);
        assert!(deployment["spec"]["template"]["spec"]["containers"][0]
            .get("args")
            .is_none());
        let argv = argv_from_env(&Cli::command(), &operator_env(&docs));
        let chart = Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("the operator rejects the chart's settings ({mode}): {e}"));
        assert!(chart.command.is_none());
        let mut expected =
            Cli::try_parse_from(["linkerd-multus-operator"]).expect("defaults parse");
        expected.run.leader_elect = true;
        expected.run.namespace = Some("from-POD_NAMESPACE".into());
        expected.run.pod_name = Some("from-POD_NAME".into());
        // Every admission mode: the configuration narrowed while the policy is live, widened after.
        expected.webhook.webhook_config_name = Some("zz-ld-controller-linkerd-multus".into());
        if mode == "selfManaged" {
            expected.webhook.webhook_cert_secret =
                Some("ld-controller-linkerd-multus-webhook-cert".into());
            expected.webhook.webhook_service_name = "ld-controller-linkerd-multus-webhook".into();
        }
        assert_eq!(
            format!("{:?}", chart.run),
            format!("{:?}", expected.run),
            "{mode}"
        );
        assert_eq!(
            format!("{:?}", chart.webhook),
            format!("{:?}", expected.webhook),
            "{mode}"
        );
    }
}

/// `operator.repair.enabled=true` turns the repairer on with the binary's own defaults for the rest.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn operator_repair_values_default_like_the_flags() {
    use clap::{CommandFactory, Parser};
    use linkerd_multus_operator::cli::Cli;
    let docs = parse_docs(&helm_template(
        "ld-controller",
        "linkerd-multus",
        &["--set", "operator.repair.enabled=true"],
    ));
    let argv = argv_from_env(&Cli::command(), &operator_env(&docs));
    let chart = Cli::try_parse_from(&argv).expect("the operator accepts the repair settings");
    let mut expected = Cli::try_parse_from(["linkerd-multus-operator"]).expect("defaults parse");
    expected.repair.repair_unattached_pods = true;
    assert_eq!(
        format!("{:?}", chart.repair),
        format!("{:?}", expected.repair)
    );
}

/// The installer parses the DaemonSet's args; each equals the installer's default except the log level,
/// which the chart always passes (the installer's own fallback is the same `info`), the status file
/// and the plugin's ServiceAccount, which only the chart creates.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn installer_parses_the_chart_args_and_defaults_agree() {
    use clap::Parser;
    use linkerd_cni_installer::args::Args;
    let docs = parse_docs(&helm_template(
        "ld-controller",
        "linkerd-multus",
        &["--set", "cni.enabled=true"],
    ));
    let args = container_args(&docs, "DaemonSet");
    let chart =
        Args::try_parse_from(std::iter::once("linkerd-cni-install".to_string()).chain(args))
            .unwrap_or_else(|e| panic!("the installer rejects the chart's args: {e}"));
    let mut expected = Args::try_parse_from(["linkerd-cni-install"]).expect("defaults parse");
    expected.cni_log_level = Some("info".into());
    // The status file has no default (tests and `--once` write none); the chart names one in the pod.
    expected.ready_file = Some("/tmp/linkerd-cni-install.ready".into());
    // The plugin's own ServiceAccount exists only where the chart creates it; alone, the binary
    // keeps the pod-token mode.
    expected.plugin_service_account = Some("linkerd-cni-plugin".into());
    // iptables-mode auto: the node's binary directories, mounted read only where only the chart mounts them.
    expected.node_root = Some("/node".into());
    assert_eq!(format!("{chart:?}"), format!("{expected:?}"));

    // The readiness probe's command parses as a check of the file the container writes.
    let ds = find(&docs, "DaemonSet", None);
    let probe: Vec<String> = ds["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
        ["exec"]["command"]
        .as_array()
        .expect("the probe's command")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect();
    let check = Args::try_parse_from(&probe)
        .unwrap_or_else(|e| panic!("the installer rejects the probe's command: {e}"));
    assert!(check.ready_check);
    assert_eq!(check.ready_file, chart.ready_file);

    let openshift = openshift_values();
    let docs = parse_docs(&helm_template(
        "ld-controller",
        "linkerd-multus",
        &["-f", &openshift, "--set", "cni.enabled=true"],
    ));
    let args = container_args(&docs, "DaemonSet");
    let chart =
        Args::try_parse_from(std::iter::once("linkerd-cni-install".to_string()).chain(args))
            .expect("the installer accepts the OpenShift args");
    assert_eq!(chart.dest_cni_bin_dir.to_str(), Some("/var/lib/cni/bin"));
    assert_eq!(format!("{:?}", chart.chain_mode), "None");
}

/// attach=auxChain: the operator reads ATTACH as its aux-chain mode and the installer accepts the
/// DaemonSet's aux-chain args (the same attach mode, chain mode none, the chain's name and
/// directory) as given.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn aux_chain_settings_parse_in_both_binaries() {
    use clap::{CommandFactory, Parser};
    use linkerd_cni_installer::args::Args;
    use linkerd_multus_operator::cli::Cli;
    let openshift = openshift_values();
    let docs = parse_docs(&helm_template(
        "ld-controller",
        "linkerd-multus",
        &openshift_aux_chain_args(&openshift),
    ));
    let argv = argv_from_env(&Cli::command(), &operator_env(&docs));
    let chart = Cli::try_parse_from(&argv).expect("the operator accepts ATTACH");
    assert_eq!(chart.decision.nad.attach, rules::attach::Attach::AuxChain);

    let args = container_args(&docs, "DaemonSet");
    let installer =
        Args::try_parse_from(std::iter::once("linkerd-cni-install".to_string()).chain(args))
            .unwrap_or_else(|e| panic!("the installer rejects the chart's aux-chain args: {e}"));
    let parsed = format!("{installer:?}");
    assert_eq!(
        installer.attach,
        rules::attach::Attach::AuxChain,
        "{parsed}"
    );
    assert_eq!(format!("{:?}", installer.chain_mode), "None", "{parsed}");
    let mode =
        linkerd_cni_installer::args::Settings::resolve(installer, |_| None, None).map(|s| s.mode);
    assert_eq!(
        mode,
        Ok(linkerd_cni_installer::args::InstallMode::AuxChain),
        "{parsed}"
    );
    for want in ["vendor-cni-chain", "/run/multus/cni/net.d"] {
        assert!(parsed.contains(want), "{want} not parsed: {parsed}");
    }
}

/// `iptables-mode: auto`: the installer sees, under `--node-root`, every directory the plugin looks
/// in for the node's iptables binaries (`rules::backend_choice::SBIN_DIRS`, read only), so the
/// backend it publishes in NodeMultus is the one the plugin picks; a fixed mode mounts none. (The
/// chart mounted only the two sbin directories: a node with its binaries in /usr/bin alone was
/// published as `nftables` while the plugin took `nft`.)
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn the_installer_sees_every_directory_the_plugin_probes() {
    let render = |extra: &[&str]| {
        let mut args = vec!["--set", "cni.enabled=true"];
        for e in extra {
            args.extend(["--set", e]);
        }
        let docs = parse_docs(&helm_template("ld-controller", "linkerd-multus", &args));
        find(&docs, "DaemonSet", None).clone()
    };
    let ds = render(&[]);
    let pod = &ds["spec"]["template"]["spec"];
    let root = container_args(std::slice::from_ref(&ds), "DaemonSet")
        .iter()
        .find_map(|a| a.strip_prefix("--node-root=").map(str::to_string))
        .expect("--node-root in auto mode");
    for dir in rules::backend_choice::SBIN_DIRS {
        let at = format!("{root}{dir}");
        let mount = pod["containers"][0]["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["mountPath"] == at.as_str())
            .unwrap_or_else(|| panic!("{dir} is not mounted at {at}: {}", pod["containers"][0]));
        assert_eq!(mount["readOnly"], true, "{mount}");
        let volume = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == mount["name"])
            .expect("the mount's volume");
        assert_eq!(volume["hostPath"]["path"], dir, "{volume}");
    }
    let fixed = render(&["cni.iptablesMode=nft"]);
    let args = container_args(std::slice::from_ref(&fixed), "DaemonSet");
    assert!(
        !args.iter().any(|a| a.starts_with("--node-root")),
        "{args:?}"
    );
}

/// The chart's schema offers exactly the values the binaries' owners accept, and each default is the
/// owner's default (read from the chart's files, no helm): `cni.iptablesMode` is
/// `rules::backend_choice::IptablesMode`, `attach` `rules::attach::Attach` (helm spells `aux-chain`
/// `auxChain`; the chart's `attachFlag` helper turns it back), `admission`
/// `rules::admission_mode::AdmissionMode`, `cni.chainMode` the installer's `--chain-mode`.
#[test]
fn the_schemas_enums_are_the_owners_values() {
    use clap::{Parser, ValueEnum};
    use linkerd_cni_installer::{Args, ChainMode};
    use rules::admission_mode::AdmissionMode;
    use rules::attach::Attach;
    let root = linkerd_multus_e2e::workspace_root();
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("reading {p}: {e}"))
    };
    let schema: Value = serde_json::from_str(&read("helm/values.schema.json")).expect("schema");
    let values: Value = serde_yaml_ng::from_str(&read("helm/values.yaml")).expect("values.yaml");
    // helm's camelCase value → the flag's kebab-case one.
    let flag = |v: &str| {
        v.chars().fold(String::new(), |mut s, c| {
            if c.is_ascii_uppercase() {
                s.push('-');
            }
            s.push(c.to_ascii_lowercase());
            s
        })
    };
    let chart = |path: &str| {
        let at = path.replace('.', "/properties/");
        let offered: Vec<String> = schema
            .pointer(&format!("/properties/{at}/enum"))
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("no enum for {path} in values.schema.json"))
            .iter()
            .map(|v| flag(v.as_str().expect("a string value")))
            .collect();
        let default = values
            .pointer(&format!("/{}", path.replace('.', "/")))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no default for {path} in values.yaml"));
        (offered, flag(default))
    };
    let installer =
        Args::try_parse_from(["linkerd-cni-install"]).expect("the installer's defaults");
    let owners: [(&str, Vec<String>, String); 4] = [
        (
            "cni.iptablesMode",
            rules::backend_choice::IptablesMode::ALL
                .iter()
                .map(|m| m.as_str().to_string())
                .collect(),
            rules::backend_choice::IptablesMode::default()
                .as_str()
                .into(),
        ),
        (
            "attach",
            Attach::VALUES.map(String::from).to_vec(),
            Attach::default().as_str().into(),
        ),
        (
            "admission",
            AdmissionMode::VALUES.map(String::from).to_vec(),
            AdmissionMode::default().as_str().into(),
        ),
        (
            "cni.chainMode",
            ChainMode::value_variants()
                .iter()
                .filter_map(|m| Some(m.to_possible_value()?.get_name().to_string()))
                .collect(),
            installer
                .chain_mode
                .to_possible_value()
                .expect("a value")
                .get_name()
                .into(),
        ),
    ];
    for (path, values, default) in owners {
        let (offered, chart_default) = chart(path);
        assert_eq!(
            offered, values,
            "{path}: the schema's enum vs the owner's values"
        );
        assert_eq!(
            chart_default, default,
            "{path}: values.yaml's default vs the owner's"
        );
    }
}
