//! The test image's validator (`linkerd-multus-test-workload validate`) agrees with Linkerd's real one
//! (linkerd2-proxy-init's `validator/` v0.1.9, from the real platform): on one pod — a netns of the
//! test's own, with a veth to a "node" netns of its own and a default route through it — both run in
//! turn with the arguments the node scenario's injector stand-in gives them
//! ([`Validator::args`]), as the uid the pod runs them as, under each case's rules: none, the rules
//! linkerd-cni writes (its planner, `linkerd_cni::plan`, through `iptables-restore --noflush` as the
//! plugin installs them, legacy and nft), those rules with the proxy uid's exemption, a skipped port or
//! another proxy port, the platform README's one REDIRECT rule, and a node that takes the connection
//! to a listener of its own. Both must exit with the same code, the case's (0: its connection landed
//! on its own listener; 95: not), and [`validator::passed`] must read each one's logs as its exit code
//! says. Where they differ, the test workload's is wrong: the node scenario judges "never runs
//! unredirected" with it wherever the platform is not given.
//!
//! Without `LINKERD_MULTUS_PLATFORM` the table is reported not run. Everything it creates (two netns
//! per case, their veth and rules, the validators' processes, a temp dir) is gone at its end.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use linkerd_cni::plan::iptables;
use linkerd_cni::plan::{plan, Family, RuleSettings};
use linkerd_cni::ports::PortRange;
use linkerd_multus_e2e::binary;
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::platform::{self, Platform};
use linkerd_multus_e2e::validator::{self, Validator};

const CASE: &str =
    "the test image's validator agrees with Linkerd's (linkerd-network-validator v0.1.9)";

/// The pod's and the node's addresses on their veth (in netns of their own; not the node testbed's
/// 10.231.0.0/24 or its pods' 10.232.0.0/24, to keep the two apart in logs).
const POD_IP: &str = "10.233.0.2";
const NODE_IP: &str = "10.233.0.1";
/// A closed port of the node: refused at once when nothing redirects (the node scenario's target).
const NODE_TARGET: &str = "10.233.0.1:20001";
/// Linkerd's own default `--connect-addr` (TEST-NET-1): the node forwards nothing, so unredirected
/// the connection times out.
const UNROUTABLE: &str = "192.0.2.2:1404";
/// The uid Linkerd's template runs the validator as, and Linkerd's proxy uid (the rules exempt it).
const VALIDATOR_UID: u32 = 65534;
const PROXY_UID: u32 = 2102;
/// Longer than either validator may take (Linkerd's 10 s timeout; the workload's 5 s + 5 s).
const RUN_DEADLINE: Duration = Duration::from_secs(40);

enum Rules {
    None,
    /// linkerd-cni's plan for these settings (IPv4), installed through this `*-restore --noflush`.
    Planned {
        settings: RuleSettings,
        restore: &'static str,
    },
    /// `iptables -t nat -A OUTPUT -p tcp -j REDIRECT --to-ports 4140` (the platform README's).
    OneRedirect,
    /// The node redirects the target's port to its own 4140, where a listener that is not the pod's
    /// validator answers: the pod's connection succeeds, but not to itself.
    NodeTakesIt,
}

struct Case {
    name: &'static str,
    rules: Rules,
    uid: u32,
    target: &'static str,
    want: i32,
}

fn legacy(settings: RuleSettings) -> Rules {
    Rules::Planned {
        settings,
        restore: "iptables-legacy-restore",
    }
}

fn cases() -> Vec<Case> {
    let case = |name, rules, uid, target, want| Case {
        name,
        rules,
        uid,
        target,
        want,
    };
    let skip_20001 = RuleSettings {
        outbound_ports_to_ignore: vec![PortRange::single(20001)],
        ..RuleSettings::default()
    };
    let other_port = RuleSettings {
        outgoing_proxy_port: 4150,
        ..RuleSettings::default()
    };
    vec![
        case("no rules", Rules::None, VALIDATOR_UID, NODE_TARGET, 95),
        case(
            "no rules, Linkerd's unroutable default address (times out)",
            Rules::None,
            VALIDATOR_UID,
            UNROUTABLE,
            95,
        ),
        case(
            "linkerd-cni's rules (iptables-legacy)",
            legacy(RuleSettings::default()),
            VALIDATOR_UID,
            NODE_TARGET,
            0,
        ),
        case(
            "linkerd-cni's rules (iptables-nft)",
            Rules::Planned {
                settings: RuleSettings::default(),
                restore: "iptables-nft-restore",
            },
            VALIDATOR_UID,
            NODE_TARGET,
            0,
        ),
        case(
            "linkerd-cni's rules, Linkerd's unroutable default address",
            legacy(RuleSettings::default()),
            VALIDATOR_UID,
            UNROUTABLE,
            0,
        ),
        case(
            "linkerd-cni's rules, run as the proxy uid (exempt)",
            legacy(RuleSettings::default()),
            PROXY_UID,
            NODE_TARGET,
            95,
        ),
        case(
            "linkerd-cni's rules skipping the target's port (skip-outbound-ports 20001)",
            legacy(skip_20001),
            VALIDATOR_UID,
            NODE_TARGET,
            95,
        ),
        case(
            "linkerd-cni's rules for another outbound port (4150)",
            legacy(other_port),
            VALIDATOR_UID,
            NODE_TARGET,
            95,
        ),
        case(
            "one REDIRECT rule to 4140",
            Rules::OneRedirect,
            VALIDATOR_UID,
            NODE_TARGET,
            0,
        ),
        case(
            "the node takes the connection on a 4140 of its own",
            Rules::NodeTakesIt,
            VALIDATOR_UID,
            NODE_TARGET,
            95,
        ),
    ]
}

/// A pod and its node: two netns joined by a veth, the pod's default route through the node (which
/// forwards nothing). Both netns, and with them the veth and every rule, are deleted when dropped.
struct Pod {
    pod: NetNs,
    node: NetNs,
}

impl Pod {
    fn create() -> Self {
        let node = NetNs::create("e2e-vnode");
        let pod = NetNs::create("e2e-vpod");
        let veth = [
            "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "veth0", "netns",
        ];
        ok(&pod, &[&veth[..], &[node.name()]].concat());
        ok(
            &pod,
            &["ip", "addr", "add", &format!("{POD_IP}/24"), "dev", "eth0"],
        );
        ok(&pod, &["ip", "link", "set", "eth0", "up"]);
        ok(
            &node,
            &[
                "ip",
                "addr",
                "add",
                &format!("{NODE_IP}/24"),
                "dev",
                "veth0",
            ],
        );
        ok(&node, &["ip", "link", "set", "veth0", "up"]);
        ok(&pod, &["ip", "route", "add", "default", "via", NODE_IP]);
        Self { pod, node }
    }

    fn install(&self, rules: &Rules) {
        let redirect = |ns: &NetNs, chain: &str, matching: &[&str]| {
            let mut args = vec!["iptables-legacy", "-t", "nat", "-A", chain, "-p", "tcp"];
            args.extend_from_slice(matching);
            args.extend_from_slice(&["-j", "REDIRECT", "--to-ports", "4140"]);
            ok(ns, &args);
        };
        match rules {
            Rules::None => {}
            Rules::Planned { settings, restore } => {
                let input = iptables::rules(&plan(settings, Family::V4)).create_input();
                let mut child = self
                    .pod
                    .command(restore)
                    .arg("--noflush")
                    .stdin(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| panic!("{restore}: {e}"));
                child
                    .stdin
                    .take()
                    .expect("stdin")
                    .write_all(input.as_bytes())
                    .expect("write the plan");
                let out = child.wait_with_output().expect("wait for the restore");
                assert!(
                    out.status.success(),
                    "{restore} --noflush <<{input}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Rules::OneRedirect => redirect(&self.pod, "OUTPUT", &[]),
            Rules::NodeTakesIt => redirect(&self.node, "PREROUTING", &["--dport", "20001"]),
        }
    }
}

/// Runs `args` in `ns`, failing the test with its stderr unless it succeeds.
fn ok(ns: &NetNs, args: &[&str]) {
    let out = ns.exec(args);
    assert!(
        out.status.success(),
        "{args:?} in {}: {}",
        ns.name(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One validator's run: its exit code, its logs (stdout then stderr), how long it took.
struct Run {
    code: Option<i32>,
    logs: String,
    took: Duration,
}

/// Runs `program args` in the pod's netns as `uid` (and that gid), killed after [`RUN_DEADLINE`].
fn run_validator(pod: &NetNs, program: &Path, args: &[String], uid: u32, scratch: &Path) -> Run {
    let stdout = scratch.join("stdout");
    let stderr = scratch.join("stderr");
    let file = |p: &Path| std::fs::File::create(p).expect("a log file");
    let start = Instant::now();
    // Spawned from a thread inside the pod's netns: the child is born there.
    let mut child = pod.run(|| {
        Command::new(program)
            .args(args)
            .uid(uid)
            .gid(uid)
            .stdout(file(&stdout))
            .stderr(file(&stderr))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()))
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the validator") {
            break status;
        }
        if start.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} {args:?} still runs after {RUN_DEADLINE:?}",
                program.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Run {
        code: status.code(),
        logs: read(&stdout) + &read(&stderr),
        took: start.elapsed(),
    }
}

/// A listener on the node's own 4140 that answers every connection with 64 bytes (as long as Linkerd's
/// validator's token, so it reads a wrong one at once), until `stop`.
fn node_listener(node: &NetNs, stop: &AtomicBool) {
    let listener = node.run(|| TcpListener::bind("0.0.0.0:4140").expect("bind the node's 4140"));
    listener.set_nonblocking(true).expect("nonblocking");
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut conn, _)) => {
                let _ = conn.set_nonblocking(false);
                let _ = conn.write_all(&[b'x'; 64]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the node's listener: {e}"),
        }
    }
}

/// Copies `from` into `dir` as `name`, mode 0755: the validators run as uids that cannot read the
/// target directory or the platform's cache under /root.
fn executable_copy(from: &Path, dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    to
}

/// Every case of the table, through both validators on the same pod. If the test workload's
/// validator passed a pod Linkerd's would hold (or held one Linkerd's passes), the node scenario's
/// "never runs unredirected" would be judged by a validator that is not Linkerd's.
#[test]
#[ignore = "needs root (netns, iptables): run by e2e/test-all"]
fn the_test_workloads_validator_agrees_with_linkerds() {
    let Some(platform) = Platform::or_not_run(CASE) else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let workload = executable_copy(
        &binary("linkerd-multus-test-workload"),
        dir.path(),
        "linkerd-multus-test-workload",
    );
    let linkerd = executable_copy(
        &platform.binary(platform::NETWORK_VALIDATOR),
        dir.path(),
        "linkerd2-network-validator",
    );

    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for case in cases() {
        let pod = Pod::create();
        pod.install(&case.rules);
        let target = case.target.parse().expect("an address");
        let stop = AtomicBool::new(false);
        let [ours, theirs] = std::thread::scope(|s| {
            if let Rules::NodeTakesIt = case.rules {
                s.spawn(|| node_listener(&pod.node, &stop));
                // Bound before the validators connect.
                std::thread::sleep(Duration::from_millis(200));
            }
            let runs = [
                (&workload, Validator::TestWorkload),
                (&linkerd, Validator::Linkerd),
            ]
            .map(|(program, which)| {
                run_validator(&pod.pod, program, &which.args(target), case.uid, dir.path())
            });
            stop.store(true, Ordering::Relaxed);
            runs
        });
        let row = format!(
            "{:<78} uid {:<5} want {:>2}: test workload {:?} ({} ms), Linkerd's {:?} ({} ms)",
            case.name,
            case.uid,
            case.want,
            ours.code,
            ours.took.as_millis(),
            theirs.code,
            theirs.took.as_millis()
        );
        eprintln!("{row}");
        if ours.code != theirs.code {
            wrong.push(format!("DISAGREE {row}"));
        }
        for (who, run) in [("test workload", &ours), ("Linkerd's", &theirs)] {
            if run.code != Some(case.want) {
                wrong.push(format!(
                    "{}: {who} exited {:?}, not {}:\n{}",
                    case.name, run.code, case.want, run.logs
                ));
            }
            if validator::passed(&run.logs) != (run.code == Some(0)) {
                wrong.push(format!(
                    "{}: validator::passed misreads {who}'s logs (exit {:?}):\n{}",
                    case.name, run.code, run.logs
                ));
            }
        }
        rows.push(row);
    }
    assert!(
        wrong.is_empty(),
        "the validators differ:\n{}\n\nthe table:\n{}",
        wrong.join("\n"),
        rows.join("\n")
    );
}
