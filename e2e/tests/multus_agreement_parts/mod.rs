//! The harness of the Multus agreement table: one node directory per Multus (the real thin plugin,
//! or the stand-in) with its bin directory, its config, its cache and IPAM store under the case's
//! temp dir; each run in a netns of its own, invoked as a runtime invokes a CNI plugin, and what it
//! did reduced to an [`Outcome`] the two must share.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use linkerd_multus_e2e::netns::NetNs;
use linkerd_multus_e2e::platform::{self, Platform};
use linkerd_multus_e2e::recorder::{read_log, LOG_ENV};
use linkerd_multus_e2e::{binary, kubeconfig_path};
use serde_json::{json, Value};

/// Multus' own cniVersion, as OpenShift's config has it: the auxiliary chain runs in it.
pub const MULTUS_VERSION: &str = "0.3.1";
pub const CHAIN: &str = "vendor-cni-chain";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Real,
    StandIn,
}

/// Where the node's Multus finds its cluster network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterNet {
    /// Its config's `delegates`.
    Delegates,
    /// `clusterNetwork` names a file beside the chain directory.
    File,
}

/// One node's Multus: its binary and the directory holding everything it writes.
pub struct Node {
    pub imp: Impl,
    pub dir: PathBuf,
    pub bin: PathBuf,
    multus: PathBuf,
    pub bridge: String,
    pub subnet_prefix: String,
}

impl Node {
    /// `dir` is created; `bridge`/`subnet_prefix` are the case's (both Multus run one after the
    /// other on the same bridge, each with its own IPAM store).
    pub fn new(
        imp: Impl,
        platform: &Platform,
        dir: PathBuf,
        bridge: &str,
        subnet_prefix: &str,
    ) -> Self {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("node bin dir");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, bin.join(name)).expect("symlink a plugin");
        };
        for plugin in ["bridge", "host-local"] {
            link(&Path::new("/usr/lib/cni").join(plugin), plugin);
        }
        for plugin in ["cni-recorder", "linkerd-cni"] {
            link(&binary(plugin), plugin);
        }
        // The real Multus finds `passthru` on its path; the stand-in plays it when there is none (as
        // on a node of a clone, where Debian ships none).
        let multus = match imp {
            Impl::Real => {
                link(&platform.binary(platform::PASSTHRU), "passthru");
                platform.binary(platform::MULTUS)
            }
            Impl::StandIn => binary("multus-stand-in"),
        };
        Self {
            imp,
            dir,
            bin,
            multus,
            bridge: bridge.to_string(),
            subnet_prefix: subnet_prefix.to_string(),
        }
    }

    pub fn net_d(&self) -> PathBuf {
        self.dir.join("net.d")
    }

    fn ipam(&self) -> PathBuf {
        self.dir.join("ipam")
    }

    /// The cluster network's config: a bridge with host-local addresses.
    pub fn cluster_network(&self) -> Value {
        json!({
            "cniVersion": MULTUS_VERSION, "name": "k8s-pod-network", "type": "bridge",
            "bridge": self.bridge, "isGateway": false, "ipMasq": false,
            "ipam": {"type": "host-local", "subnet": format!("{}0/24", self.subnet_prefix),
                     "dataDir": self.ipam()}
        })
    }

    /// The node's 00-multus.conf: the same keys for both, only `type` differs.
    pub fn conf(&self, cluster: ClusterNet, chain: bool, isolation: Option<&str>) -> Value {
        let mut conf = json!({
            "cniVersion": MULTUS_VERSION, "name": "multus-cni-network",
            "type": match self.imp { Impl::Real => "multus", Impl::StandIn => "multus-stand-in" },
            "kubeconfig": kubeconfig_path(), "cniDir": self.dir.join("cache"), "binDir": self.bin,
        });
        match cluster {
            ClusterNet::Delegates => conf["delegates"] = json!([self.cluster_network()]),
            ClusterNet::File => {
                std::fs::create_dir_all(self.net_d()).expect("net.d");
                let file = self.net_d().join("10-k8s-pod-network.conf");
                std::fs::write(&file, self.cluster_network().to_string()).expect("cluster conf");
                conf["clusterNetwork"] = json!(file);
            }
        }
        if chain {
            conf["auxiliaryCNIChainName"] = json!(CHAIN);
        }
        if let Some(global) = isolation {
            conf["namespaceIsolation"] = json!(true);
            conf["globalNamespaces"] = json!(global);
        }
        conf
    }

    /// Runs this Multus as the runtime does: `CNI_*` set, its config on stdin.
    pub fn invoke(&self, command: &str, conf: &Value, sandbox: &Sandbox, log: &Path) -> Invocation {
        let mut child = Command::new(&self.multus)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", &sandbox.container_id)
            .env("CNI_NETNS", sandbox.netns.path())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_ARGS", &sandbox.args)
            .env("CNI_PATH", &self.bin)
            // The recorder logs there when Multus hands it a config without `log`.
            .env(LOG_ENV, log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.multus.display()));
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(conf.to_string().as_bytes())
            .expect("write config");
        drop(stdin);
        let out = child.wait_with_output().expect("wait for Multus");
        Invocation {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// What the netns and the node hold now.
    pub fn state(&self, netns: &NetNs) -> NetState {
        let out = netns.exec(&["ip", "-o", "link"]);
        let mut links: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .filter(|n| n != "lo")
            .collect();
        links.sort();
        let nat = netns.exec(&["iptables-legacy-save", "-t", "nat"]);
        let leases = std::fs::read_dir(self.ipam().join("k8s-pod-network"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with(&self.subnet_prefix)
                    })
                    .count()
            })
            .unwrap_or(0);
        NetState {
            links,
            leases,
            redirect: String::from_utf8_lossy(&nat.stdout).contains("PROXY_INIT_REDIRECT"),
        }
    }
}

/// One pod sandbox: its netns, the container id and the `CNI_ARGS` the runtime passes (the same for
/// both Multus, so their messages and delegates' args can be compared as they are).
pub struct Sandbox {
    pub netns: NetNs,
    pub container_id: String,
    pub args: String,
}

impl Sandbox {
    pub fn new(container_id: &str, namespace: &str, pod: &str, uid: &str) -> Self {
        Self {
            netns: NetNs::create("e2e-mag"),
            container_id: container_id.to_string(),
            args: format!(
                "IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod};\
                 K8S_POD_INFRA_CONTAINER_ID={container_id};K8S_POD_UID={uid}"
            ),
        }
    }
}

pub struct Invocation {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Invocation {
    /// The verdict, with `node_dir` written as `<node>` in messages (each Multus has its own).
    pub fn verdict(&self, node_dir: &Path) -> Verdict {
        let json: Option<Value> = serde_json::from_str(self.stdout.trim()).ok();
        if !self.success {
            let json = json.unwrap_or(Value::Null);
            let msg = json["msg"].as_str().unwrap_or(&self.stdout);
            let details = json["details"].as_str().unwrap_or_default();
            let norm = |s: &str| s.replace(&node_dir.display().to_string(), "<node>");
            return Verdict::Err {
                code: json["code"].as_u64(),
                msg: norm(msg),
                details: norm(details),
            };
        }
        Verdict::Ok(json.map(|r| {
            ResultSummary {
                cni_version: r["cniVersion"].as_str().unwrap_or_default().to_string(),
                // Not the host's random veth names.
                interfaces: strings(&r["interfaces"], "name")
                    .into_iter()
                    .filter(|n| !n.starts_with("veth"))
                    .collect(),
                ips: strings(&r["ips"], "address"),
            }
        }))
    }
}

fn strings(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v[key].as_str().map(str::to_string))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok(Option<ResultSummary>),
    Err {
        code: Option<u64>,
        msg: String,
        details: String,
    },
}

/// What of a result can match between two sandboxes (not MACs, not the netns path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultSummary {
    pub cni_version: String,
    pub interfaces: Vec<String>,
    pub ips: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetState {
    pub links: Vec<String>,
    pub leases: usize,
    pub redirect: bool,
}

/// One call the recorder saw, as far as both Multus must agree on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub tag: String,
    pub command: String,
    pub ifname: String,
    pub args: String,
    pub prev_result: Option<Value>,
    /// The config as the plugin got it, without `prevResult`: a stripped config shows here.
    pub config: Value,
    pub in_sandbox: bool,
}

/// The recorder's calls since the last take (the log is emptied).
pub fn take_calls(log: &Path, sandbox: &Sandbox) -> Vec<Call> {
    let calls = read_log(log)
        .into_iter()
        .map(|c| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let mut config = c["config"].clone();
            let prev_result = config.as_object_mut().and_then(|o| o.remove("prevResult"));
            Call {
                tag: s(&c["tag"]),
                command: s(&c["command"]),
                ifname: s(&c["ifname"]),
                args: s(&c["args"]),
                prev_result: prev_result.map(sorted),
                config: sorted(config),
                in_sandbox: c["netns"].as_str() == sandbox.netns.path().to_str(),
            }
        })
        .collect();
    let _ = std::fs::remove_file(log);
    calls
}

/// Everything a case compares: both Multus must produce the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub add: Verdict,
    pub add_calls: Vec<Call>,
    pub after_add: NetState,
    /// linkerd-cni's log reached Multus' stderr (the runtime's log, for the thin plugin).
    pub delegate_log: bool,
    pub del: Verdict,
    pub del_calls: Vec<Call>,
    pub after_del: NetState,
}

/// ADD, then `between` (objects deleted as a sandbox outlives them), then DEL (the runtime tears a
/// failed sandbox down too), in a fresh netns. The pod's `uid` (each Multus gets a pod of its own) is
/// written `<uid>`.
pub fn run(
    node: &Node,
    conf: &Value,
    sandbox: &Sandbox,
    log: &Path,
    uid: &str,
    between: impl FnOnce(),
) -> (Outcome, String) {
    let added = node.invoke("ADD", conf, sandbox, log);
    let add = added.verdict(&node.dir);
    let add_calls = take_calls(log, sandbox);
    let after_add = node.state(&sandbox.netns);
    between();
    let deleted = node.invoke("DEL", conf, sandbox, log);
    let outcome = Outcome {
        add,
        add_calls,
        after_add,
        delegate_log: added.stderr.contains("linkerd-cni:"),
        del: deleted.verdict(&node.dir),
        del_calls: take_calls(log, sandbox),
        after_del: node.state(&sandbox.netns),
    };
    let stderr = format!(
        "ADD stderr:\n{}\nDEL stderr:\n{}",
        added.stderr, deleted.stderr
    );
    (outcome.without(uid), stderr)
}

impl Outcome {
    /// `uid` written `<uid>` wherever Multus or a delegate was told it.
    fn without(mut self, uid: &str) -> Self {
        let norm = |s: &mut String| {
            *s = s.replace(uid, "<uid>");
            // The JSON decoder's own words (Go's, serde's) are not Multus'.
            const JSON: &str = "Annotation JSON format: ";
            if let Some(at) = s.find(JSON) {
                s.replace_range(at + JSON.len().., "<decoder's words>");
            }
        };
        for verdict in [&mut self.add, &mut self.del] {
            if let Verdict::Err { msg, details, .. } = verdict {
                norm(msg);
                norm(details);
            }
        }
        for call in self.add_calls.iter_mut().chain(self.del_calls.iter_mut()) {
            norm(&mut call.args);
        }
        self
    }
}

/// `value` with every object's keys in order, so a diff shows what differs, not the order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}
