//! ADD wall time of the built `linkerd-cni` in a fresh netns, against two references for the same
//! rules in the same kind of netns: the floor of one bare `iptables-restore` (what the plugin
//! spends on iptables), and one `iptables` exec per rule (what Linkerd's own plugin does). Legacy
//! and nft; and nftables (the plugin's own netlink batch, no binary), whose floor is one `nft -f` of
//! the same table (no per-rule reference). A benchmark, not a test: it prints a table and asserts
//! nothing about time.
//!
//! Run: `e2e/testbed up && cargo bench -p linkerd-cni --bench add_latency` (as root). The ADD
//! includes the pod lookup against the local apiserver (TLS), as on a node.

use std::process::Command;
use std::time::{Duration, Instant};

use linkerd_cni::plan::{self, Family, NatTable, RuleSettings};
use linkerd_cni::ports::PortRange;
use linkerd_multus_e2e::cni::{exec_plugin, Runtime};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::json;

const ROUNDS: usize = 15;

/// The settings the plugin computes for the benchmark pod with the config below.
fn settings() -> RuleSettings {
    RuleSettings {
        incoming_proxy_port: 4143,
        outgoing_proxy_port: 4140,
        proxy_uid: Some(2102),
        proxy_gid: None,
        ports_to_redirect: vec![],
        inbound_ports_to_ignore: PortRange::parse_list("4190,4191").unwrap_or_default(),
        outbound_ports_to_ignore: PortRange::parse_list("443,6443").unwrap_or_default(),
        subnets_to_ignore: vec![],
    }
}

/// Splits an `iptables-save` rule line into arguments (double quotes group words).
fn split(line: &str) -> Vec<String> {
    let (mut args, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    args.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        args.push(cur);
    }
    args
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Times `f` in a fresh netns per round (creating and deleting the netns is not timed).
fn time_in_fresh_netns(mut f: impl FnMut(&NetNs)) -> Duration {
    let samples = (0..ROUNDS)
        .map(|_| {
            let ns = NetNs::create("lcni-bench");
            let start = Instant::now();
            f(&ns);
            start.elapsed()
        })
        .collect();
    median(samples)
}

/// Runs `bin args` with `input` on stdin; it must succeed.
fn feed(bin: &str, args: &[&str], input: &str) {
    use std::io::Write;
    let mut child = Command::new(bin)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    assert!(child.wait().expect("wait").success(), "{bin} failed");
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; any other argument (a filter) is ignored.
    let client = client().await;
    let tns = TestNamespace::create(&client, "cni-bench").await;
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": tns.name},
        "spec": {"automountServiceAccountToken": false, "containers": [
            {"name": "app", "image": "a"}, {"name": "linkerd-proxy", "image": "p"}]}
    }))
    .expect("pod");
    kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &tns.name)
        .create(&Default::default(), &pod)
        .await
        .expect("create pod");
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_linkerd-cni"));
    let dirs = vec![bin.parent().expect("bin dir").to_path_buf()];
    let plan = plan::plan(&settings(), Family::V4);
    let restore_input = plan.restore_input(&NatTable::default());
    let rule_lines: Vec<String> = restore_input
        .lines()
        .filter(|l| l.starts_with("-A "))
        .map(str::to_string)
        .collect();

    println!(
        "linkerd-cni ADD vs. references, {} rules, median of {ROUNDS} rounds, fresh netns each",
        rule_lines.len()
    );
    println!(
        "{:<8} | {:>9} | {:>22} | {:>19} | {:>16} | {:>11} | {:>13}",
        "mode",
        "ADD",
        "ADD simulate (lookup)",
        "1 restore or nft -f",
        "1 exec per rule",
        "ADD/restore",
        "execs/restore"
    );
    let nft_input = linkerd_cni::nftables::table(&settings(), Family::V4).render();
    for mode in ["legacy", "nft", "nftables"] {
        let config = json!({
            "cniVersion": "1.0.0", "name": "linkerd-cni", "type": "linkerd-cni", "log_level": "warn",
            "kubernetes": {"kubeconfig": linkerd_multus_e2e::kubeconfig_path()},
            "linkerd": {"iptables-mode": mode, "inbound-ports-to-ignore": ["4190", "4191"],
                        "outbound-ports-to-ignore": ["443", "6443"]}
        });
        let add = time_in_fresh_netns(|ns| {
            let rt = Runtime::new(&ns.path()).with_pod(&tns.name, "web");
            exec_plugin(&dirs, "ADD", &config, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
        });
        // The same ADD with `simulate`: process start, config, pod lookup, no netns or iptables.
        let mut simulate_config = config.clone();
        simulate_config["linkerd"]["simulate"] = json!(true);
        let lookup = time_in_fresh_netns(|ns| {
            let rt = Runtime::new(&ns.path()).with_pod(&tns.name, "web");
            exec_plugin(&dirs, "ADD", &simulate_config, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
        });
        // The floor: one restore of the same rules (nftables: one `nft -f`); Linkerd's way: one
        // iptables exec per rule (none for nftables).
        let (restore, per_rule) = if mode == "nftables" {
            let nft = time_in_fresh_netns(|ns| ns.run(|| feed("nft", &["-f", "-"], &nft_input)));
            (nft, None)
        } else {
            let restore_bin = format!("iptables-{mode}-restore");
            let restore = time_in_fresh_netns(|ns| {
                ns.run(|| feed(&restore_bin, &["--noflush"], &restore_input))
            });
            let iptables_bin = format!("iptables-{mode}");
            let per_rule = time_in_fresh_netns(|ns| {
                ns.run(|| {
                    for chain in [plan::REDIRECT_CHAIN, plan::OUTPUT_CHAIN] {
                        let ok = Command::new(&iptables_bin)
                            .args(["-t", "nat", "-N", chain])
                            .status();
                        assert!(ok.expect("iptables").success());
                    }
                    for line in &rule_lines {
                        let ok = Command::new(&iptables_bin)
                            .args(["-t", "nat"])
                            .args(split(line))
                            .status();
                        assert!(ok.expect("iptables").success(), "{line}");
                    }
                })
            });
            (restore, Some(per_rule))
        };
        let ratio = |a: Duration, b: Duration| format!("{:.1}x", a.as_secs_f64() / b.as_secs_f64());
        println!(
            "{:<8} | {:>9} | {:>22} | {:>19} | {:>16} | {:>11} | {:>13}",
            mode,
            ms(add),
            ms(lookup),
            ms(restore),
            per_rule.map_or("-".to_string(), ms),
            ratio(add, restore),
            per_rule.map_or("-".to_string(), |p| ratio(p, restore))
        );
    }
}
