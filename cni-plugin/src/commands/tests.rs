//! ADD's and DEL's work after the pod lookup, driven through the backend the config selects, on
//! paths no backend may enter (a regular file) or that are gone. Assertions are on the result and
//! on what was logged, which is all `simulate` produces.

use std::io;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{add, del};
use crate::backend::{self, Backend};
use crate::cni::{codes, CniEnv};
use crate::config::PluginConfig;
use crate::plan::iptables::rules;
use crate::plan::{plan, tests::base, Family, RuleSettings};

fn config(linkerd: Value) -> PluginConfig {
    let cfg = json!({"cniVersion": "1.0.0", "name": "linkerd-cni", "linkerd": linkerd});
    PluginConfig::parse(cfg.to_string().as_bytes()).unwrap()
}

fn env(command: &str, netns: &str) -> CniEnv {
    CniEnv::from_vars([
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", "net1"),
    ])
    .unwrap()
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with this thread's logs captured.
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    let buf = Buffer::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (out, text)
}

/// `simulate` logs the rules the mode would write, each family in that mode's syntax, and
/// neither enters the netns nor claims to have installed anything.
#[test]
fn add_in_simulate_logs_every_familys_rules_and_writes_none() {
    let not_a_netns = tempfile::NamedTempFile::new().unwrap();
    let env = env("ADD", &not_a_netns.path().display().to_string());
    let s = base();
    let iptables = [Family::V4, Family::V6].map(|f| rules(&plan(&s, f)).create_input());
    let nftables = [Family::V4, Family::V6].map(|f| crate::nftables::table(&plan(&s, f)).render());
    for (mode, texts) in [("legacy", iptables), ("nftables", nftables)] {
        let cfg = config(json!({"simulate": true, "iptables-mode": mode, "ipv6": true}));
        let (out, logs) = logged(|| add::install(&env, &s, &*backend::select(&cfg.linkerd)));
        out.unwrap_or_else(|e| panic!("{mode}: {e}"));
        for (family, text) in ["ipv4", "ipv6"].iter().zip(texts) {
            assert!(
                logs.contains(&format!("family=\"{family}\"")),
                "{mode}: {logs}"
            );
            assert!(
                logs.contains(&format!("simulate: would apply\n{text}")),
                "{mode}: {logs}"
            );
        }
        assert!(!logs.contains("rules installed"), "{mode}: {logs}");
    }
}

/// A backend that installs nothing and says it created the rules: the log line of ADD's shell.
#[derive(Debug)]
struct SaysCreated;

impl Backend for SaysCreated {
    fn render(&self, _: &RuleSettings) -> Vec<backend::Rendered> {
        Vec::new()
    }
    fn install(
        &self,
        _: &std::path::Path,
        _: &RuleSettings,
    ) -> Result<backend::Applied, backend::BackendError> {
        Ok(backend::Applied::Created)
    }
    fn check(&self, _: &std::path::Path, _: &RuleSettings) -> Result<(), backend::BackendError> {
        Ok(())
    }
    fn remove(&self, _: &std::path::Path) -> Result<(), backend::BackendError> {
        Ok(())
    }
}

/// The node's log names the pod whose rules were installed (from CNI_ARGS), beside its container
/// and netns.
#[test]
fn add_logs_the_pod_it_installed_rules_for() {
    let env = CniEnv::from_vars([
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_NETNS", "/var/run/netns/p1"),
        ("CNI_IFNAME", "net1"),
        (
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-1",
        ),
    ])
    .unwrap();
    let (out, logs) = logged(|| add::install(&env, &base(), &SaysCreated));
    out.expect("install");
    assert!(logs.contains("rules installed"), "{logs}");
    assert!(logs.contains("pod=shop/web-1"), "{logs}");
    assert!(logs.contains("container=c1"), "{logs}");
    assert!(logs.contains("netns=/var/run/netns/p1"), "{logs}");
}

/// A real backend's ADD on a path that is no netns fails as an I/O failure naming it, and logs
/// no success.
#[test]
fn add_that_cannot_enter_the_netns_fails() {
    let not_a_netns = tempfile::NamedTempFile::new().unwrap();
    let path = not_a_netns.path().display().to_string();
    let cfg = config(json!({"iptables-mode": "nftables"}));
    let (out, logs) =
        logged(|| add::install(&env("ADD", &path), &base(), &*backend::select(&cfg.linkerd)));
    let e = out.unwrap_err();
    assert_eq!(e.code, codes::IO_FAILURE, "{e}");
    assert!(
        e.msg
            .starts_with(&format!("cannot enter network namespace {path}:")),
        "{e}"
    );
    assert!(!logs.contains("installed"), "{logs}");
}

/// DEL without a netns, or with one that is gone, has nothing to remove and succeeds, saying so.
/// A netns that exists but cannot be entered is an error.
#[test]
fn del_succeeds_when_the_netns_is_missing_or_gone() {
    let cfg = config(json!({"iptables-mode": "nftables"}));
    let (out, logs) = logged(|| del::del(&env("DEL", ""), &cfg));
    out.unwrap();
    assert!(
        logs.contains("DEL without a netns: nothing to remove"),
        "{logs}"
    );

    let gone = "/run/netns/linkerd-cni-test-gone";
    let (out, logs) = logged(|| del::del(&env("DEL", gone), &cfg));
    out.unwrap();
    assert!(
        logs.contains(&format!("netns={gone}"))
            && logs.contains("DEL: the netns is gone, nothing to remove"),
        "{logs}"
    );

    let not_a_netns = tempfile::NamedTempFile::new().unwrap();
    let path = not_a_netns.path().display().to_string();
    let e = del::del(&env("DEL", &path), &cfg).unwrap_err();
    assert_eq!(e.code, codes::IO_FAILURE, "{e}");
    assert!(
        e.msg
            .starts_with(&format!("cannot enter network namespace {path}:")),
        "{e}"
    );
}

/// `simulate` DEL removes nothing, so it never enters the netns, in any mode.
#[test]
fn del_in_simulate_enters_no_netns() {
    let not_a_netns = tempfile::NamedTempFile::new().unwrap();
    let env = env("DEL", &not_a_netns.path().display().to_string());
    for mode in ["legacy", "nft", "plain", "nftables"] {
        let cfg = config(json!({"simulate": true, "iptables-mode": mode}));
        del::del(&env, &cfg).unwrap_or_else(|e| panic!("{mode}: {e}"));
    }
}

/// The product's absence passes a pod through in every attach mode (a NAD left by an uninstall must
/// not fail pods); an unreachable apiserver only in the auxiliary chain, which runs for every pod;
/// any other failure fails everywhere.
#[test]
fn fail_open_for_the_products_absence_everywhere_and_unreachable_in_the_aux_chain() {
    use crate::pod::PodError;
    let refused = |code: u16| PodError::Api {
        what: "pod demo/web".into(),
        source: kube::Error::Api(
            kube::core::Status::failure("refused", "Refused")
                .with_code(code)
                .boxed(),
        ),
    };
    let no_kubeconfig = || PodError::Client {
        path: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig".into(),
        message: "no such file".into(),
    };
    let unreachable = || PodError::Unreachable {
        url: "https://10.96.0.1".into(),
        path: "k".into(),
        message: "connection refused".into(),
    };
    let cases: [(&str, PodError, bool, bool); 10] = [
        ("401 in the chain", refused(401), true, true),
        ("403 in the chain", refused(403), true, true),
        ("kubeconfig gone in the chain", no_kubeconfig(), true, true),
        ("401 through a NAD", refused(401), false, true),
        ("403 through a NAD", refused(403), false, true),
        (
            "kubeconfig gone through a NAD",
            no_kubeconfig(),
            false,
            true,
        ),
        ("unreachable in the chain", unreachable(), true, true),
        ("unreachable through a NAD", unreachable(), false, false),
        ("pod not found in the chain", refused(404), true, false),
        ("server error through a NAD", refused(500), false, false),
    ];
    for (case, e, aux_chain, passes) in cases {
        assert_eq!(super::fail_open(&e, aux_chain).is_some(), passes, "{case}");
    }
    // The failure that is not passed through keeps its code: transient asks for a retry.
    assert_eq!(
        super::pod_error(&unreachable()).code,
        codes::TRY_AGAIN_LATER
    );
    assert_eq!(
        super::pod_error(&refused(401)).code,
        codes::POD_LOOKUP_FAILED
    );
}
