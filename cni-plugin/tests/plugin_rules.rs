//! linkerd-cni chained after Debian's bridge + host-local on real network namespaces, for each
//! config version and iptables flavour: the rules iptables-save shows (or `nft list` in nftables
//! mode, where the plugin runs with no iptables or nft binary reachable), idempotent ADD, CHECK
//! (also on a tampered ruleset), DEL, and DEL after the netns is gone. Pods live in the real apiserver.
//! Needs root and the testbed (`e2e/testbed up`), except the pure counter test.

mod support;

use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::json;
use support::*;

/// The bridge's result, passed through by linkerd-cni in the config's version.
fn assert_bridge_result(net: &PodNetwork, result: &serde_json::Value, version: &str) {
    // The bridge's result comes back in the config's version.
    assert_eq!(result["cniVersion"], version, "{result}");
    let ip = &result["ips"][0];
    assert!(
        ip["address"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&net.addr.gateway4[..net.addr.gateway4.len() - 1]),
        "{result}"
    );
    assert_eq!(
        ip.get("version").is_some(),
        version != "1.0.0",
        "ips[].version by version: {result}"
    );
    assert!(
        result["interfaces"]
            .as_array()
            .is_some_and(|i| i.len() >= 2),
        "{result}"
    );
}

/// After the loopback exemption was removed: CHECK fails (code 101) saying rule 2 of
/// PROXY_INIT_OUTPUT is now `found…` where `expected…` was planned; ADD repairs it.
fn check_names_then_add_repairs(
    net: &PodNetwork,
    result: &serde_json::Value,
    found: &str,
    expected: &str,
) {
    let err = net
        .network
        .check(&net.runtime, result)
        .expect_err("CHECK on a tampered ruleset");
    assert_eq!(err.code(), Some(101), "{err}");
    let msg = err.msg().unwrap_or_default();
    assert!(
        msg.contains(&format!("rule 2 of PROXY_INIT_OUTPUT is {found}"))
            && msg.contains(&format!("expected {expected}")),
        "{msg}"
    );
    net.linkerd_only("ADD", Some(result))
        .unwrap_or_else(|e| panic!("repairing ADD: {e}"));
    net.network
        .check(&net.runtime, result)
        .unwrap_or_else(|e| panic!("CHECK after repair: {e}"));
}

/// The whole lifecycle for one version and flavour. If it regresses, pods on that kind of node get
/// wrong, duplicated or leftover rules.
async fn lifecycle(version: &'static str, mode: &'static str) {
    let client = client().await;
    let ns = TestNamespace::create(&client, &format!("cni-rules-{mode}")).await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let (save, other) = match mode {
        "legacy" => ("iptables-legacy-save", "iptables-nft-save"),
        _ => ("iptables-nft-save", "iptables-legacy-save"),
    };

    let mut net = PodNetwork::new(&PluginSettings::new(version, mode), &ns.name, "web");
    let result = net.add().unwrap_or_else(|e| panic!("ADD: {e}"));

    assert_bridge_result(&net, &result, version);

    // Exactly our rules, in the flavour we asked for; the other flavour sees nothing of ours.
    assert_eq!(net.our_rules(save), default_expected_rules(2102));
    assert_eq!(
        net.our_rules(other),
        Vec::<String>::new(),
        "{other} must not see our rules"
    );

    // Repeated ADD (a runtime retry) leaves the identical ruleset, hooks not duplicated.
    let before = net.save(save);
    let again = net
        .linkerd_only("ADD", Some(&result))
        .unwrap_or_else(|e| panic!("second ADD: {e}"));
    assert_eq!(
        again.as_ref(),
        Some(&result),
        "ADD passes its prevResult through unchanged"
    );
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&net.save(save)), strip(&before));
    assert_eq!(net.our_rules(save), default_expected_rules(2102));

    if version != "0.3.1" {
        net.network
            .check(&net.runtime, &result)
            .unwrap_or_else(|e| panic!("CHECK: {e}"));
        // Someone removes the loopback exemption: CHECK names the rule.
        let iptables = save.replace("-save", "");
        let del = net
            .ns
            .exec(&[&iptables, "-t", "nat", "-D", "PROXY_INIT_OUTPUT", "2"]);
        assert!(
            del.status.success(),
            "{}",
            String::from_utf8_lossy(&del.stderr)
        );
        check_names_then_add_repairs(
            &net,
            &result,
            "`-A PROXY_INIT_OUTPUT -p tcp",
            "`-A PROXY_INIT_OUTPUT -o lo",
        );
    }

    // DEL removes our chains and hooks and leaves the rest of the nat table alone.
    net.network
        .del(&net.runtime, Some(&result))
        .unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(net.our_rules(save), Vec::<String>::new());
    assert!(net.save(save).contains(":PREROUTING ACCEPT"));

    // DEL again after the netns is gone succeeds (the kubelet retries DEL after teardown).
    net.ns.delete();
    net.network
        .del(&net.runtime, Some(&result))
        .unwrap_or_else(|e| panic!("DEL without netns: {e}"));
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_3_1_legacy() {
    lifecycle("0.3.1", "legacy").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_4_0_legacy() {
    lifecycle("0.4.0", "legacy").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v1_0_0_legacy() {
    lifecycle("1.0.0", "legacy").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_3_1_nft() {
    lifecycle("0.3.1", "nft").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_4_0_nft() {
    lifecycle("0.4.0", "nft").await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v1_0_0_nft() {
    lifecycle("1.0.0", "nft").await;
}

/// ADD into a netns where our chains already exist with stale rules (a kubelet retry after the
/// config changed, or leftovers): the one-restore fast path fails on its `-N` and the plugin falls
/// back to reading the table, so the result is exactly the plan. If it regresses, such a pod keeps
/// stale redirects, duplicated hooks, or ADD fails. `only_output`: just PROXY_INIT_OUTPUT exists,
/// so the fast path fails on its second `-N` (line 3) after the first succeeded.
async fn stale_chains_converge(mode: &'static str, only_output: bool) {
    let client = client().await;
    let ns = TestNamespace::create(&client, &format!("cni-stale-{mode}")).await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let save = format!("iptables-{mode}-save");
    let iptables = format!("iptables-{mode}");
    let mut net = PodNetwork::new(&PluginSettings::new("1.0.0", mode), &ns.name, "web");
    let mut stale = vec![
        "-N PROXY_INIT_OUTPUT",
        "-A PROXY_INIT_OUTPUT -p udp -j RETURN",
        "-A PROXY_INIT_OUTPUT -p tcp -j REDIRECT --to-ports 9999",
        "-A OUTPUT -m comment --comment proxy-init/install-proxy-init-output -j PROXY_INIT_OUTPUT",
        "-A POSTROUTING -s 10.77.0.0/16 -j MASQUERADE",
    ];
    if !only_output {
        stale.extend([
            "-N PROXY_INIT_REDIRECT",
            "-A PROXY_INIT_REDIRECT -p tcp -j REDIRECT --to-ports 9998",
        ]);
    }
    for rule in stale {
        let mut args = vec![iptables.as_str(), "-t", "nat"];
        args.extend(rule.split(' '));
        let out = net.ns.exec(&args);
        assert!(
            out.status.success(),
            "{rule}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    net.add()
        .unwrap_or_else(|e| panic!("ADD over stale chains: {e}"));
    assert_eq!(net.our_rules(&save), default_expected_rules(2102));
    assert!(
        net.save(&save)
            .contains("-A POSTROUTING -s 10.77.0.0/16 -j MASQUERADE\n"),
        "other chains' rules stay"
    );
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn stale_chains_converge_legacy() {
    stale_chains_converge("legacy", false).await;
    stale_chains_converge("legacy", true).await;
}

#[tokio::test]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn stale_chains_converge_nft() {
    stale_chains_converge("nft", false).await;
    stale_chains_converge("nft", true).await;
}

/// The nftables mode's lifecycle, read back with `nft` from the test side while the plugin has no
/// iptables or nft binary reachable. If it regresses, pods on nodes without iptables get wrong,
/// duplicated or leftover rules, or other tables get touched.
async fn lifecycle_nftables(version: &'static str, v6: bool) {
    let client = client().await;
    let ns = TestNamespace::create(&client, "cni-rules-nftables").await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let mut settings = PluginSettings::new(version, "nftables");
    settings.ipv6 = v6;
    if v6 {
        settings.linkerd = json!({"subnets-to-ignore": ["10.9.0.0/16", "fd00:9::/64"]});
    }
    let mut net = PodNetwork::new(&settings, &ns.name, "web");
    // A bystander table the plugin must never touch.
    net.nft(&["add table inet bystander { chain c { type filter hook output priority 0; }; }"]);
    let result = net.add().unwrap_or_else(|e| panic!("ADD: {e}"));
    assert_bridge_result(&net, &result, version);

    // Exactly our table as nft itself reads it back, written out independently of the plugin.
    // With IPv6 on, each family also skips its own ignored subnet.
    let expected = |family: &str, subnet: &str| {
        let line = if v6 {
            format!("\t\t{family} saddr {subnet} return comment \"proxy-init/ignore-subnet-{subnet}\"\n")
        } else {
            String::new()
        };
        NFT_EXPECTED
            .replace("FAMILY", family)
            .replace("SUBNET\n", &line)
    };
    assert_eq!(
        net.nft(&["list", "table", "ip", "linkerd-cni"]),
        expected("ip", "10.9.0.0/16")
    );
    let v6_table = net.ns.exec(&["nft", "list", "table", "ip6", "linkerd-cni"]);
    assert_eq!(
        v6_table.status.success(),
        v6,
        "an ip6 table exactly when ipv6 is on"
    );
    if v6 {
        assert_eq!(
            String::from_utf8_lossy(&v6_table.stdout),
            expected("ip6", "fd00:9::/64")
        );
    }
    // iptables sees nothing of ours.
    assert_eq!(net.our_rules("iptables-nft-save"), Vec::<String>::new());

    // Repeated ADD leaves the identical ruleset.
    let before = net.nft(&["list", "ruleset"]);
    net.linkerd_only("ADD", Some(&result))
        .unwrap_or_else(|e| panic!("second ADD: {e}"));
    assert_eq!(net.nft(&["list", "ruleset"]), before);

    if version != "0.3.1" {
        net.network
            .check(&net.runtime, &result)
            .unwrap_or_else(|e| panic!("CHECK: {e}"));
        // Someone removes the loopback exemption: CHECK names the rule.
        let listing = net.nft(&[
            "-a",
            "list",
            "chain",
            "ip",
            "linkerd-cni",
            "PROXY_INIT_OUTPUT",
        ]);
        let handle = listing
            .lines()
            .find(|l| l.contains("oifname \"lo\""))
            .and_then(|l| l.rsplit("# handle ").next())
            .unwrap_or_else(|| panic!("no loopback rule with a handle in\n{listing}"))
            .trim()
            .to_string();
        net.nft(&[
            "delete",
            "rule",
            "ip",
            "linkerd-cni",
            "PROXY_INIT_OUTPUT",
            "handle",
            &handle,
        ]);
        check_names_then_add_repairs(
            &net,
            &result,
            "`meta l4proto tcp redirect to :4140",
            "`oifname \"lo\" return",
        );
        assert_eq!(net.nft(&["list", "ruleset"]), before);
    }

    // DEL removes our tables and nothing else.
    net.network
        .del(&net.runtime, Some(&result))
        .unwrap_or_else(|e| panic!("DEL: {e}"));
    assert_eq!(net.nft(&["list", "tables"]), "table inet bystander\n");

    // DEL again after the netns is gone succeeds.
    net.ns.delete();
    net.network
        .del(&net.runtime, Some(&result))
        .unwrap_or_else(|e| panic!("DEL without netns: {e}"));
}

/// The harness' default settings as `nft list table` prints them (FAMILY: ip or ip6; SUBNET: the
/// line of an ignored subnet, if any).
/// The output chain is the fixture the plan's own table test uses.
const NFT_EXPECTED: &str = concat!(
    r#"table FAMILY linkerd-cni {
	chain PROXY_INIT_REDIRECT {
		type nat hook prerouting priority dstnat; policy accept;
		tcp dport 4191 return comment "proxy-init/ignore-port-4191"
		tcp dport 4190 return comment "proxy-init/ignore-port-4190"
SUBNET
		meta l4proto tcp redirect to :4143 comment "proxy-init/redirect-all-incoming-to-proxy-port"
	}

"#,
    include_str!("../../fixtures/nft-default-output-chain.txt"),
    "}\n"
);

#[tokio::test]
#[ignore = "needs root (netns, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_3_1_nftables() {
    lifecycle_nftables("0.3.1", false).await;
}

#[tokio::test]
#[ignore = "needs root (netns, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v0_4_0_nftables() {
    lifecycle_nftables("0.4.0", false).await;
}

#[tokio::test]
#[ignore = "needs root (netns, nftables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn v1_0_0_nftables_ipv6() {
    lifecycle_nftables("1.0.0", true).await;
}

/// The hiding wrapper really hides: the legacy mode through it finds no binary.
#[tokio::test]
#[ignore = "needs root (netns, mount namespace) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn the_nftables_harness_leaves_the_plugin_no_iptables() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "cni-rules-hidden").await;
    create_pod(&client, &ns.name, "web", json!({}), meshed_spec()).await;
    let mut settings = PluginSettings::new("1.0.0", "legacy");
    settings.hide_binaries = true;
    let mut net = PodNetwork::new(&settings, &ns.name, "web");
    let err = net.add().expect_err("legacy ADD without binaries");
    let msg = err.msg().unwrap_or_default();
    assert!(
        msg.contains("no ipv4 iptables binaries for mode legacy"),
        "{err}"
    );
}

/// Chain counters go, everything else of the `iptables-save` text stays exact.
#[test]
fn chain_counters_are_dropped() {
    let save = "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [1:40]\n:OUTPUT ACCEPT [12:3456]\n\
                :PROXY_INIT_OUTPUT - [0:0]\n-A OUTPUT -j PROXY_INIT_OUTPUT\n-A X -m comment --comment \"[1:2]\"\n\
                :ODD - [a:1]\nCOMMIT\n";
    assert_eq!(
        without_counters(save),
        "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT\n:OUTPUT ACCEPT\n\
         :PROXY_INIT_OUTPUT -\n-A OUTPUT -j PROXY_INIT_OUTPUT\n-A X -m comment --comment \"[1:2]\"\n\
         :ODD - [a:1]\nCOMMIT\n"
    );
    assert_eq!(
        our_lines(save),
        [":PROXY_INIT_OUTPUT -", "-A OUTPUT -j PROXY_INIT_OUTPUT"]
    );
}
