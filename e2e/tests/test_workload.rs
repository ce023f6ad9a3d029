//! The test image's binary (`linkerd-multus-test-workload`) run for real: the app and the proxy answer
//! on loopback, and behind a real iptables REDIRECT the proxy reports the original destination and runs
//! as the proxy uid.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use linkerd_multus_e2e::binary;
use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::validator;
use linkerd_multus_e2e::workload::{Answer, Listener};

const WORKLOAD: &str = "linkerd-multus-test-workload";

/// A running workload, killed (by its PID) and reaped when dropped.
struct Running {
    child: Child,
    /// `role → address` from its `listening <role> <addr>` lines.
    listening: Vec<(String, SocketAddr)>,
}

impl Running {
    fn start(mut command: Command, listeners: usize) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the workload");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut listening = Vec::new();
        while listening.len() < listeners {
            let line = lines
                .next()
                .expect("the workload exited before listening")
                .expect("read stdout");
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["listening", role, addr] => {
                    listening.push((role.to_string(), addr.parse().expect("address")))
                }
                _ => panic!("unexpected line {line:?}"),
            }
        }
        Self { child, listening }
    }

    fn port(&self, role: &str) -> u16 {
        self.listening
            .iter()
            .find(|(r, _)| r == role)
            .unwrap_or_else(|| panic!("no {role} listener in {:?}", self.listening))
            .1
            .port()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary's `ask` subcommand, from `netns` when given: its parsed answer.
fn ask(netns: Option<&NetNs>, addr: &str) -> Answer {
    let bin = binary(WORKLOAD);
    let mut command = match netns {
        Some(ns) => ns.command(bin.to_str().expect("UTF-8 path")),
        None => Command::new(&bin),
    };
    let out = command.args(["ask", addr]).output().expect("run ask");
    assert!(
        out.status.success(),
        "ask {addr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(line.ends_with('\n'), "{line:?}");
    line.trim_end().parse().expect("a workload answer")
}

#[test]
#[ignore = "needs the built binaries (cargo build --workspace --bins): run by e2e/test-all"]
fn app_and_proxy_answer_on_loopback() {
    let mut app = Command::new(binary(WORKLOAD));
    app.args(["app", "--port", "0", "--name", "web-1"]);
    let app = Running::start(app, 1);
    let port = app.port("app");
    assert_eq!(
        ask(None, &format!("127.0.0.1:{port}")),
        Answer::App {
            name: "web-1".into()
        }
    );

    let mut proxy = Command::new(binary(WORKLOAD));
    proxy.args(["proxy", "--inbound", "0", "--outbound", "0"]);
    let proxy = Running::start(proxy, 2);
    for (role, listener) in [
        ("inbound", Listener::Inbound),
        ("outbound", Listener::Outbound),
    ] {
        let port = proxy.port(role);
        match ask(None, &format!("127.0.0.1:{port}")) {
            Answer::Proxy {
                listener: l,
                port: p,
                ..
            } => assert_eq!((l, p), (listener, port)),
            other => panic!("{role}: {other:?}"),
        }
    }

    let out = Command::new(binary(WORKLOAD))
        .args(["ask", "web:8080"])
        .output()
        .expect("run ask");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no DNS here"));
}

/// Redirects the netns' outgoing TCP matching `matching` (iptables match arguments) to local `port`.
fn redirect_output(ns: &NetNs, matching: &[&str], port: &str) {
    let mut args = vec!["iptables-legacy", "-t", "nat", "-A", "OUTPUT", "-p", "tcp"];
    args.extend_from_slice(matching);
    args.extend_from_slice(&["-j", "REDIRECT", "--to-ports", port]);
    let out = ns.exec(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// As in a meshed pod: a connection to 8080 redirected to 4143 reaches the proxy, which names the
/// original destination, and the proxy runs as the uid it was given.
#[test]
#[ignore = "needs root (netns, iptables) and the built binaries: run by e2e/test-all"]
fn proxy_reports_the_original_destination_behind_a_redirect() {
    let ns = NetNs::create("e2e-wl");
    redirect_output(&ns, &["--dport", "8080"], "4143");
    let bin = binary(WORKLOAD);
    let mut proxy = ns.command(bin.to_str().expect("UTF-8 path"));
    proxy.args(["proxy", "--uid", "2102"]);
    let proxy = Running::start(proxy, 2);
    assert_eq!(proxy.port("inbound"), 4143);

    assert_eq!(
        ask(Some(&ns), "127.0.0.1:8080"),
        Answer::Proxy {
            listener: Listener::Inbound,
            port: 4143,
            original_dst: Some("127.0.0.1:8080".parse().unwrap()),
        }
    );
    // `ip netns exec` execs the workload in place, so the child's PID is the workload's.
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", proxy.child.id())).expect("proc status");
    let uid_line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("Uid line");
    assert_eq!(
        uid_line.split_whitespace().nth(1),
        Some("2102"),
        "{uid_line}"
    );
}

/// Linkerd's validator, played by `validate`: in a netns whose outbound connections are redirected to
/// 4140 it exits 0; without the redirect its connection is refused and it exits 95, as Linkerd's does.
#[test]
#[ignore = "needs root (netns, iptables) and the built binaries: run by e2e/test-all"]
fn validate_exits_0_when_redirected_and_95_when_not() {
    let ns = NetNs::create("e2e-val");
    let bin = binary(WORKLOAD);
    let validate = || {
        ns.command(bin.to_str().expect("UTF-8 path"))
            .args(["validate", "127.0.0.9:20001"])
            .output()
            .expect("run validate")
    };
    let out = validate();
    assert_eq!(
        out.status.code(),
        Some(95),
        "not redirected: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    redirect_output(&ns, &["-d", "127.0.0.9"], "4140");
    let out = validate();
    assert!(
        out.status.success() && validator::passed(&String::from_utf8_lossy(&out.stdout)),
        "redirected: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
