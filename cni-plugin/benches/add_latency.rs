//! ADD, CHECK and DEL wall time of the built `linkerd-cni` in a fresh netns, against the floors
//! for the same work: one pod GET over a fresh TLS connection with the same kubeconfig (timed
//! inside curl, `time_total`, so curl's own process start is not counted), and that GET plus one
//! bare `iptables-restore` of the same rules; and one `iptables` exec per rule (what Linkerd's
//! own plugin does) against the restore. First, the exec every plugin costs: Debian's `true` and
//! the plugin's `VERSION`, exec'd the same way. A benchmark, not a test: it prints a table and
//! asserts nothing about time.
//!
//! Run: `e2e/testbed up && cargo bench -p linkerd-cni --bench add_latency` (as root). The ADD
//! includes the pod lookup against the local apiserver (TLS), as on a node. It times this bench's
//! build of the plugin (dynamically linked), or the one in `LINKERD_CNI_BENCH_DIR`.
//!
//! A last line measures the plugin where Multus' auxiliary CNI chain runs it for every pod: ADD for
//! a pod that is not meshed (process start, kubeconfig, TLS, the reads, skip, prevResult printed
//! back), alternating round by round with its floor, curl's GET of that pod. And one more, the same
//! ADD where the installer's view of 10,000 enabled namespaces does not list the pod's namespace
//! (process start, config, the view read, prevResult printed back: no request), against the GET it
//! no longer makes.

use std::process::Command;
use std::time::{Duration, Instant};

use linkerd_cni::plan::iptables::{rules, NatTable};
use linkerd_cni::plan::{self, Family, RuleSettings};
use linkerd_cni::ports::PortRange;
use linkerd_multus_e2e::cni::{exec_plugin, Network, Runtime};
use linkerd_multus_e2e::multus::aux_chain;
use linkerd_multus_e2e::multus::conf::{delegate_cni_args, PodRef};
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::{client, TestNamespace};
use serde_json::json;

const ROUNDS: usize = 15;

/// The directory of the `linkerd-cni` timed: `LINKERD_CNI_BENCH_DIR` when set (e.g. the static
/// build the images ship, `target/x86_64-unknown-linux-gnu/release`: it starts without the dynamic
/// loader), else this bench's own build.
fn plugin_dirs() -> Vec<std::path::PathBuf> {
    let dir = match std::env::var_os("LINKERD_CNI_BENCH_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::PathBuf::from(env!("CARGO_BIN_EXE_linkerd-cni"))
            .parent()
            .expect("bin dir")
            .to_path_buf(),
    };
    assert!(
        dir.join("linkerd-cni").is_file(),
        "no linkerd-cni in {}",
        dir.display()
    );
    vec![dir]
}

/// The settings the plugin computes for the benchmark pod with the config below.
fn settings() -> RuleSettings {
    RuleSettings {
        inbound_ports_to_ignore: PortRange::parse_list("4190,4191").unwrap_or_default(),
        outbound_ports_to_ignore: PortRange::parse_list("443,6443").unwrap_or_default(),
        ..RuleSettings::default()
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

/// Times `f` in a fresh netns per round after an untimed `setup` there (creating and deleting
/// the netns is not timed either).
fn time_in_fresh_netns_after(mut setup: impl FnMut(&NetNs), mut f: impl FnMut(&NetNs)) -> Duration {
    let samples = (0..ROUNDS)
        .map(|_| {
            let ns = NetNs::create("lcni-bench");
            setup(&ns);
            let start = Instant::now();
            f(&ns);
            start.elapsed()
        })
        .collect();
    median(samples)
}

fn time_in_fresh_netns(f: impl FnMut(&NetNs)) -> Duration {
    time_in_fresh_netns_after(|_| {}, f)
}

/// The floor of the pod lookup: one GET of the pod over a fresh TLS connection, with the server,
/// CA and token of the plugin's kubeconfig, timed by curl itself (`time_total`: connect, TLS,
/// request, response; not curl's process start).
struct TlsGet {
    url: String,
    ca: tempfile::NamedTempFile,
    token: String,
}

impl TlsGet {
    fn new(kubeconfig: &std::path::Path, namespace: &str, pod: &str) -> Self {
        use base64::Engine;
        let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
        let kc: serde_json::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
        let cluster = &kc["clusters"][0]["cluster"];
        let server = cluster["server"].as_str().expect("server");
        let ca = base64::engine::general_purpose::STANDARD
            .decode(
                cluster["certificate-authority-data"]
                    .as_str()
                    .expect("CA data"),
            )
            .expect("CA base64");
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        std::io::Write::write_all(&mut file, &ca).expect("write CA");
        let token = kc["users"][0]["user"]["token"].as_str().expect("token");
        Self {
            url: format!("{server}/api/v1/namespaces/{namespace}/pods/{pod}"),
            ca: file,
            token: token.to_string(),
        }
    }

    fn once(&self) -> Duration {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "-o", "/dev/null", "-w", "%{time_total}"])
            .arg("--cacert")
            .arg(self.ca.path())
            .args(["-H", &format!("Authorization: Bearer {}", self.token)])
            .arg(&self.url)
            .output()
            .expect("curl");
        assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let secs: f64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("time_total");
        Duration::from_secs_f64(secs)
    }
}

/// What any exec'd plugin pays before its own work, and what ours pays: Debian's `true` (the
/// cheapest program a node has) and the plugin's `VERSION`, each exec'd as a runtime execs a plugin
/// (config on stdin, `CNI_*` in the environment, stdout read) in a fresh netns. The nftables mode
/// has no exec of its own in its floor, where a restore's floor has one: this is that exec.
fn process_starts(dirs: &[std::path::PathBuf]) -> (Duration, Duration) {
    let bare = tempfile::tempdir().expect("tempdir");
    let true_bin = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("Debian's true");
    std::os::unix::fs::symlink(true_bin, bare.path().join("true")).expect("symlink true");
    let bare = vec![bare.path().to_path_buf()];
    let exec = |dirs: &[std::path::PathBuf], plugin: &str, command: &str| {
        let config = json!({"cniVersion": "1.0.0", "name": "start", "type": plugin});
        time_in_fresh_netns(|ns| {
            exec_plugin(dirs, command, &config, &Runtime::new(&ns.path()))
                .unwrap_or_else(|e| panic!("{plugin} {command}: {e}"));
        })
    };
    (
        exec(&bare, "true", "ADD"),
        exec(dirs, "linkerd-cni", "VERSION"),
    )
}

fn restore(bin: &str, input: &str) {
    let mut child = Command::new(bin)
        .arg("--noflush")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("iptables-restore");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    assert!(child.wait().expect("wait").success());
}

/// The plugin's iptables modes measured here, with the restore binary that is their iptables floor.
/// A mode without a restore binary (e.g. `nftables`, one netlink batch) has the TLS GET alone as
/// its floor: add it here as `("nftables", None)`.
const MODES: &[(&str, Option<&str>)] = &[
    ("legacy", Some("iptables-legacy-restore")),
    ("nft", Some("iptables-nft-restore")),
    // The plugin's own netlink batch: no binary, so the floor is the TLS GET alone.
    ("nftables", None),
];

/// ADD of a pod that is not meshed, as the auxiliary chain calls it (behind passthru, the chain's
/// name, `net1`, Multus' delegate args), and the GET of that pod in curl, alternating per round.
/// Prints `aux-chain | ADD (not meshed) | TLS GET | ADD minus GET (paired)`.
async fn not_meshed_in_the_aux_chain(client: &kube::Client, namespace: &str) {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "bare", "namespace": namespace},
        "spec": {"automountServiceAccountToken": false, "containers": [{"name": "app", "image": "a"}]}
    }))
    .expect("pod");
    let created =
        kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), namespace)
            .create(&Default::default(), &pod)
            .await
            .expect("create pod");
    let dirs = plugin_dirs();
    let entry = json!({
        "type": "linkerd-cni", "log_level": "warn",
        "kubernetes": {"kubeconfig": linkerd_multus_e2e::kubeconfig_path()},
        "linkerd": {"iptables-mode": "legacy"}
    });
    let chain = aux_chain::Chain {
        name: "vendor-cni-chain".into(),
        cni_version: "1.0.0".into(),
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        files: vec![],
    };
    let prev = json!({"cniVersion": "1.0.0", "dns": {}});
    let config = Network::new(chain.conflist(), vec![]).plugin_config(&entry, Some(&prev));
    let ns = NetNs::create("lcni-bench");
    let mut rt = Runtime::new(&ns.path());
    rt.ifname = "net1".into();
    rt.args = delegate_cni_args(&PodRef {
        namespace: namespace.into(),
        name: "bare".into(),
        uid: created.metadata.uid.unwrap_or_default(),
        infra_container_id: rt.container_id.clone(),
    });
    let get = TlsGet::new(&linkerd_multus_e2e::kubeconfig_path(), namespace, "bare");
    let add = || {
        let start = Instant::now();
        let out = exec_plugin(&dirs, "ADD", &config, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
        let took = start.elapsed();
        assert_eq!(out.as_ref(), Some(&prev), "the prevResult, unchanged");
        took
    };
    let (mut adds, mut gets, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS * 2 {
        let (a, g) = if round % 2 == 0 {
            let a = add();
            (a, get.once())
        } else {
            let g = get.once();
            (add(), g)
        };
        diffs.push(a.as_secs_f64() - g.as_secs_f64());
        adds.push(a);
        gets.push(g);
    }
    diffs.sort_by(f64::total_cmp);
    println!(
        "aux-chain | {} | {} | {:.1} ms",
        ms(median(adds)),
        ms(median(gets)),
        diffs[diffs.len() / 2] * 1000.0
    );

    // The same pod where the installer's view of 10,000 enabled namespaces does not list its
    // namespace: the plugin reads the view and passes the pod through, no request; against the
    // GET it no longer makes, alternating per round.
    let view_dir = tempfile::tempdir().expect("tempdir");
    let view_path = view_dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
    // As large as this project's scale target: 10,000 enabled namespaces (~280 KB).
    let view = rules::namespace_view::View {
        namespaces: (0..10_000)
            .map(|i| format!("team-{i:05}-namespace"))
            .collect(),
        ..Default::default()
    };
    std::fs::write(&view_path, view.render()).expect("view");
    let mut entry = entry;
    entry["linkerd"][vocab::CNI_CONFIG_AUX_CHAIN_KEY] = json!(true);
    entry["linkerd"][vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY] = json!(view_path);
    let chain = aux_chain::Chain {
        plugins: vec![aux_chain::passthru_entry(), entry.clone()],
        ..chain
    };
    let config = Network::new(chain.conflist(), vec![]).plugin_config(&entry, Some(&prev));
    let (mut adds, mut gets, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS * 2 {
        let add = || {
            let start = Instant::now();
            let out =
                exec_plugin(&dirs, "ADD", &config, &rt).unwrap_or_else(|e| panic!("ADD: {e}"));
            let took = start.elapsed();
            assert_eq!(out.as_ref(), Some(&prev), "the prevResult, unchanged");
            took
        };
        let (a, g) = if round % 2 == 0 {
            let a = add();
            (a, get.once())
        } else {
            let g = get.once();
            (add(), g)
        };
        diffs.push(a.as_secs_f64() - g.as_secs_f64());
        adds.push(a);
        gets.push(g);
    }
    diffs.sort_by(f64::total_cmp);
    println!(
        "aux-chain-view | {} | {} | {:.1} ms",
        ms(median(adds)),
        ms(median(gets)),
        diffs[diffs.len() / 2] * 1000.0
    );
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
    let dirs = plugin_dirs();
    let plan = rules(&plan::plan(&settings(), Family::V4));
    let restore_input = plan.restore_input(&NatTable::default());
    let rule_lines: Vec<String> = restore_input
        .lines()
        .filter(|l| l.starts_with("-A "))
        .map(str::to_string)
        .collect();
    let get = TlsGet::new(&linkerd_multus_e2e::kubeconfig_path(), &tns.name, "web");

    println!(
        "linkerd-cni ({}) vs. floors, {} rules, median of {ROUNDS} rounds, fresh netns each",
        dirs[0].join("linkerd-cni").display(),
        rule_lines.len()
    );
    // `|`-separated; bench/run reads the columns by position.
    let (bare_start, plugin_start) = process_starts(&dirs);
    println!("process start | true | linkerd-cni VERSION");
    println!("process-start | {} | {}", ms(bare_start), ms(plugin_start));
    // One line per mode.
    println!(
        "mode | ADD | ADD simulate (lookup) | CHECK | DEL | TLS GET | restore + TLS GET | 1 iptables-restore | 1 exec per rule | 1 iptables-save | ADD minus lookup (paired)"
    );
    for &(mode, restore_bin) in MODES {
        let config = json!({
            "cniVersion": "1.0.0", "name": "linkerd-cni", "type": "linkerd-cni", "log_level": "warn",
            "kubernetes": {"kubeconfig": linkerd_multus_e2e::kubeconfig_path()},
            "linkerd": {"iptables-mode": mode, "inbound-ports-to-ignore": ["4190", "4191"],
                        "outbound-ports-to-ignore": ["443", "6443"]}
        });
        let rt = |ns: &NetNs| Runtime::new(&ns.path()).with_pod(&tns.name, "web");
        let run = |cmd: &str, ns: &NetNs| {
            exec_plugin(&dirs, cmd, &config, &rt(ns)).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        };
        // ADD, and the same ADD with `simulate` (process start, config, pod lookup, no netns or
        // iptables), alternate round by round, each in a fresh netns: "ADD minus lookup" is the
        // median of the per-round differences. Two medians of separate blocks drift apart with the
        // machine's load by more than the restore costs.
        let mut simulate_config = config.clone();
        simulate_config["linkerd"]["simulate"] = json!(true);
        let (mut adds, mut lookups) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let timed = |simulate: bool| {
                let ns = NetNs::create("lcni-bench");
                let cfg = if simulate { &simulate_config } else { &config };
                let start = Instant::now();
                exec_plugin(&dirs, "ADD", cfg, &rt(&ns)).unwrap_or_else(|e| panic!("ADD: {e}"));
                start.elapsed()
            };
            // Which goes first alternates too.
            let (add, lookup) = if round % 2 == 0 {
                let a = timed(false);
                (a, timed(true))
            } else {
                let l = timed(true);
                (timed(false), l)
            };
            adds.push(add);
            lookups.push(lookup);
        }
        let beyond_lookup = {
            let mut d: Vec<f64> = adds
                .iter()
                .zip(&lookups)
                .map(|(a, l)| a.as_secs_f64() - l.as_secs_f64())
                .collect();
            d.sort_by(f64::total_cmp);
            d[d.len() / 2]
        };
        let (add, lookup) = (median(adds), median(lookups));
        let check = time_in_fresh_netns_after(|ns| run("ADD", ns), |ns| run("CHECK", ns));
        let del = time_in_fresh_netns_after(|ns| run("ADD", ns), |ns| run("DEL", ns));
        let get_alone = median((0..ROUNDS).map(|_| get.once()).collect());
        // What DEL (and a repeated ADD) runs before its restore: one `-save` of nat.
        let save = restore_bin.map(|restore_bin| {
            let save_bin = restore_bin.replace("-restore", "-save");
            time_in_fresh_netns(|ns| {
                ns.run(|| {
                    let ok = Command::new(&save_bin).args(["-t", "nat"]).output();
                    assert!(ok.expect("iptables-save").status.success());
                })
            })
        });
        let (restore_get, restore_alone, per_rule) = match restore_bin {
            Some(restore_bin) => {
                // Per round: the restore's wall time (exec'd in a fresh netns), and that plus one
                // GET timed inside curl.
                let (mut alone, mut with_get) = (Vec::new(), Vec::new());
                for _ in 0..ROUNDS {
                    let ns = NetNs::create("lcni-bench");
                    let start = Instant::now();
                    ns.run(|| restore(restore_bin, &restore_input));
                    let r = start.elapsed();
                    alone.push(r);
                    with_get.push(r + get.once());
                }
                let (restore_alone, restore_get) = (median(alone), median(with_get));
                let iptables_bin = restore_bin.trim_end_matches("-restore");
                let per_rule = time_in_fresh_netns(|ns| {
                    ns.run(|| {
                        for chain in [plan::REDIRECT_CHAIN, plan::OUTPUT_CHAIN] {
                            let ok = Command::new(iptables_bin)
                                .args(["-t", "nat", "-N", chain])
                                .status();
                            assert!(ok.expect("iptables").success());
                        }
                        for line in &rule_lines {
                            let ok = Command::new(iptables_bin)
                                .args(["-t", "nat"])
                                .args(split(line))
                                .status();
                            assert!(ok.expect("iptables").success(), "{line}");
                        }
                    })
                });
                (Some(restore_get), Some(restore_alone), Some(per_rule))
            }
            None => (None, None, None),
        };
        let opt = |d: Option<Duration>| d.map(ms).unwrap_or_else(|| "-".to_string());
        println!(
            "{mode} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} ms",
            ms(add),
            ms(lookup),
            ms(check),
            ms(del),
            ms(get_alone),
            opt(restore_get),
            opt(restore_alone),
            opt(per_rule),
            opt(save),
            beyond_lookup * 1000.0,
        );
    }
    not_meshed_in_the_aux_chain(&client, &tns.name).await;
}
