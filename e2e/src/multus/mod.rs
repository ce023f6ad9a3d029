//! A **stand-in for Multus' thin plugin**, for the test node only (Multus cannot be built on these
//! machines). It does exactly what Multus does for this project and nothing more:
//!
//! - ADD: reads the pod named by `CNI_ARGS` (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`) and its
//!   `k8s.v1.cni.cncf.io/networks` annotation (both formats), fetches every NetworkAttachmentDefinition
//!   it names, runs the cluster network (its config's single `delegates` entry) on `CNI_IFNAME`, then
//!   each NAD's `spec.config` on `net1`, `net2`, ... (or the interface the pod asked for) with **no
//!   prevResult**, the NAD config's own cniVersion and Multus' delegate `CNI_ARGS` (its five, then the
//!   runtime's). Prints the cluster network's result. The delegates are cached before any runs; a
//!   failure rolls back what was added.
//! - DEL: the delegates in reverse (from its cache, else from the pod and NADs if still there), then the
//!   cluster network. CHECK: the cluster network's. VERSION: answered.
//!
//! - The **auxiliary CNI chain** (`auxiliaryCNIChainName`, Multus v4.2.1+) for every pod, after its
//!   networks, and on DEL before them: see [`aux_chain`] for what Multus does and how the stand-in
//!   plays Multus' `passthru` plugin, which Debian does not ship.
//!
//! Delegates' stderr goes to the stand-in's stderr, as with the thin plugin. A cross-namespace NAD is
//! refused under `namespaceIsolation` unless its namespace is one of `globalNamespaces` (as Multus),
//! before anything runs. Refusals and failures carry the thin plugin's own words ([`words`]) and code
//! (999), so the sandbox fails as it does under Multus: `e2e/tests/multus_agreement.rs` runs the
//! real Multus and the stand-in on one table of cases and asserts they agree.
//! It posts the Events on the pod the real thin plugin delivers ([`events`]). Left out: default
//! networks, network-status annotations, device info, Multus' check that a delegate's interface does
//! not exist yet, `clusterNetwork` as a NAD or config name, waiting for a pod not (yet) found, the
//! thick plugin.
//!
//! Its config (Multus' keys): `{"cniVersion", "name", "type", "kubeconfig", "delegates": [<cluster
//! network conf or conflist>] | "clusterNetwork": "<its file>", "auxiliaryCNIChainName"?, "cniDir"?,
//! "namespaceIsolation"?, "globalNamespaces"?}`.

pub mod aux_chain;
pub mod conf;
pub mod events;
pub mod networks;
pub mod thick;
pub mod words;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cni::{Network, Runtime};
use aux_chain::Chain;
use conf::{PodRef, StandInConf};
use networks::Selection;

/// The CNI versions the stand-in speaks (it passes its cluster network's result through).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0"];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Conf(#[from] conf::ConfError),
    #[error("{0}")]
    Env(String),
    #[error("cannot get pod {namespace}/{name}: {why}")]
    Pod {
        namespace: String,
        name: String,
        why: String,
    },
    #[error("network-attachment-definition ({name}) in namespace ({namespace}): {why}")]
    NadConfig {
        namespace: String,
        name: String,
        why: String,
    },
    /// Refused or failed in Multus' own words ([`words`]): what the kubelet's FailedCreatePodSandBox
    /// Event carries. A plain Go error there, so code 999.
    #[error("{0}")]
    Multus(String),
    #[error("{0}")]
    Io(String),
}

impl Error {
    /// The CNI error code (spec: 4 environment, 7 network config, 11 try again later, 999 other).
    pub fn code(&self) -> u32 {
        match self {
            Error::Conf(_) | Error::NadConfig { .. } => 7,
            Error::Env(_) => 4,
            Error::Pod { .. } => 11,
            _ => 999,
        }
    }
}

/// The runtime's `CNI_*` environment.
#[derive(Debug, Clone)]
pub struct Env {
    pub command: String,
    pub container_id: String,
    pub netns: PathBuf,
    pub ifname: String,
    pub args: Vec<(String, String)>,
    pub path: Vec<PathBuf>,
}

impl Env {
    pub fn from_process() -> Result<Self, Error> {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let command = var("CNI_COMMAND");
        if command.is_empty() {
            return Err(Error::Env("CNI_COMMAND is not set".into()));
        }
        let env = Env {
            command,
            container_id: var("CNI_CONTAINERID"),
            netns: PathBuf::from(var("CNI_NETNS")),
            ifname: var("CNI_IFNAME"),
            args: conf::parse_cni_args(&var("CNI_ARGS")),
            path: std::env::split_paths(&var("CNI_PATH")).collect(),
        };
        if env.command != "VERSION" && (env.container_id.is_empty() || env.ifname.is_empty()) {
            return Err(Error::Env(
                "CNI_CONTAINERID and CNI_IFNAME are required".into(),
            ));
        }
        Ok(env)
    }

    fn runtime(&self, ifname: &str, args: Vec<(String, String)>) -> Runtime {
        Runtime {
            container_id: self.container_id.clone(),
            netns: self.netns.clone(),
            ifname: ifname.to_string(),
            args,
            pass_stderr: true,
            env: Vec::new(),
        }
    }

    /// The pod as Multus names it in its errors.
    fn label(&self) -> String {
        words::pod_label(&self.args)
    }

    fn pod(&self) -> Option<(String, String)> {
        let ns = conf::cni_arg(&self.args, "K8S_POD_NAMESPACE")?;
        let name = conf::cni_arg(&self.args, "K8S_POD_NAME")?;
        Some((ns.to_string(), name.to_string()))
    }
}

/// One attachment from a NAD, as run on ADD and kept for DEL.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Delegate {
    selection: Selection,
    ifname: String,
    config: Value,
    args: Vec<(String, String)>,
    /// The delegate's ADD result, given back on DEL as libcni's cache does.
    result: Option<Value>,
}

/// The auxiliary chain of one ADD, kept for DEL as Multus caches it with the delegates.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChainRun {
    chain: Chain,
    ifname: String,
    args: Vec<(String, String)>,
    result: Option<Value>,
}

/// What ADD leaves for DEL.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Cached {
    delegates: Vec<Delegate>,
    #[serde(default)]
    aux_chain: Option<ChainRun>,
}

/// A cache file as this or an earlier stand-in (delegates alone) wrote it.
#[derive(Deserialize)]
#[serde(untagged)]
enum CacheFile {
    Current(Box<Cached>),
    Delegates(Vec<Delegate>),
}

/// The binary's whole life: runs the command, prints the result (stdout is only for it) or the CNI
/// error, and returns the exit code.
pub fn main() -> i32 {
    let mut stdin = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut stdin);
    let version = serde_json::from_slice::<Value>(&stdin)
        .ok()
        .and_then(|v| v.get("cniVersion")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "1.0.0".into());
    match Env::from_process().and_then(|env| run(&env, &stdin)) {
        Ok(Some(out)) => {
            println!("{out}");
            0
        }
        Ok(None) => 0,
        Err(e) => {
            eprintln!("multus-stand-in: {e}");
            println!("{}", conf::error_json(&version, e.code(), &e.to_string()));
            1
        }
    }
}

/// Runs one CNI command; `Some` is what goes to stdout.
pub fn run(env: &Env, stdin: &[u8]) -> Result<Option<Value>, Error> {
    if env.command == "VERSION" {
        return Ok(Some(serde_json::json!({
            "cniVersion": "1.0.0",
            "supportedVersions": SUPPORTED_VERSIONS,
        })));
    }
    let conf = StandInConf::parse(stdin)?;
    let cluster = Cluster::new(conf.cluster_network()?, env);
    let primary = env.runtime(&env.ifname, env.args.clone());
    match env.command.as_str() {
        "ADD" => add(env, &conf, &cluster, &primary).map(Some),
        "DEL" => del(env, &conf, &cluster, &primary).map(|()| None),
        "CHECK" => {
            let prev = conf
                .prev_result
                .as_ref()
                .ok_or_else(|| Error::Env("CHECK needs a prevResult".into()))?;
            cluster.network.check(&primary, prev).map_err(|failure| {
                Error::Multus(words::libcni_error(&cluster.config, &failure, "check"))
            })?;
            Ok(None)
        }
        other => Err(Error::Env(format!("unknown CNI_COMMAND {other}"))),
    }
}

/// The cluster network: its config as given (Multus words a plugin and a list apart) and how to run it.
struct Cluster {
    config: Value,
    network: Network,
}

impl Cluster {
    fn new(config: Value, env: &Env) -> Self {
        let network = Network::from_config(config.clone(), env.path.clone());
        Self { config, network }
    }

    fn name(&self) -> &str {
        self.config["name"].as_str().unwrap_or_default()
    }
}

fn add(
    env: &Env,
    conf: &StandInConf,
    cluster: &Cluster,
    primary: &Runtime,
) -> Result<Value, Error> {
    // Every NAD is resolved, and the auxiliary chain built, before anything runs: a missing NAD or a
    // clusterNetwork that is not a path leaves nothing to roll back.
    let (pod, mut delegates) = match env.pod() {
        Some((namespace, name)) => {
            let (pod, delegates) = resolve(env, conf, &namespace, &name)?;
            (Some(pod), delegates)
        }
        None => (None, Vec::new()),
    };
    let mut chain = match (&conf.auxiliary_cni_chain_name, &pod) {
        (Some(name), Some(pod)) => aux_chain_for(env, conf, name)?.map(|chain| ChainRun {
            chain,
            // Its position among the delegates, as any delegate that asked for no interface.
            ifname: conf::delegate_ifname(None, delegates.len()),
            args: conf::delegate_runtime_args(pod, &env.args),
            result: None,
        }),
        _ => None,
    };
    // As Multus, the delegates are cached before any runs: a DEL after a failed ADD runs them all
    // (the chain too), without ADD results.
    let cache = cache_file(conf, env);
    save(
        &cache,
        &Cached {
            delegates: delegates.clone(),
            aux_chain: chain.clone(),
        },
    )?;
    let result = cluster.network.add(primary).map_err(|failure| {
        let _ = cluster.network.del(primary, None);
        let err = words::libcni_error(&cluster.config, &failure, "add");
        Error::Multus(words::add_failed(&env.label(), cluster.name(), &err))
    })?;
    if let Some(pod) = &pod {
        let message = events::added_interface(&primary.ifname, &result, cluster.name());
        post_event(
            conf,
            events::event(pod, "Normal", "AddedInterface", &message),
        );
    }
    for i in 0..delegates.len() {
        let d = &delegates[i];
        let network = Network::from_config(d.config.clone(), env.path.clone());
        match network.add(&env.runtime(&d.ifname, d.args.clone())) {
            Ok(r) => delegates[i].result = Some(r),
            Err(failure) => {
                // As Multus: DEL every delegate up to the failed one, then the cluster network.
                del_delegates(env, &delegates[..=i]);
                let _ = cluster.network.del(primary, Some(&result));
                let d = &delegates[i];
                let err = words::libcni_error(&d.config, &failure, "add");
                let net = d.config["name"].as_str().unwrap_or_default();
                return Err(Error::Multus(words::add_failed(&env.label(), net, &err)));
            }
        }
    }
    if let Some(run) = &mut chain {
        let rt = env.runtime(&run.ifname, run.args.clone());
        match aux_chain::add(&run.chain, &env.path, &rt) {
            Ok(r) => run.result = Some(r),
            Err(failure) => {
                // The chain is a delegate like the others: it is DELeted too (with no ADD result).
                let _ = aux_chain::del(&run.chain, &env.path, &rt, None);
                del_delegates(env, &delegates);
                let _ = cluster.network.del(primary, Some(&result));
                let err = words::libcni_error(&run.chain.conflist(), &failure, "add");
                let msg = words::add_failed(&env.label(), &run.chain.name, &err);
                return Err(Error::Multus(msg));
            }
        }
    }
    let cached = Cached {
        delegates,
        aux_chain: chain,
    };
    if let Err(e) = save(&cache, &cached) {
        del_chain(env, cached.aux_chain.as_ref());
        del_delegates(env, &cached.delegates);
        let _ = cluster.network.del(primary, Some(&result));
        return Err(e);
    }
    Ok(result)
}

/// The auxiliary chain for this ADD, read from disk now. `Err`: the ADD fails (Multus' check of
/// clusterNetwork); a chain that cannot be loaded is logged and not run, as Multus does.
fn aux_chain_for(env: &Env, conf: &StandInConf, name: &str) -> Result<Option<Chain>, Error> {
    let dir = aux_chain::conf_dir(conf.cluster_network.as_deref())
        .map_err(|why| Error::Multus(words::cmd_err(&env.label(), &why)))?;
    match aux_chain::load(&dir, name, &conf.cni_version) {
        Ok(chain) => Ok(chain),
        Err(why) => {
            eprintln!("multus-stand-in: auxiliary CNI chain {name} not run: {why}");
            Ok(None)
        }
    }
}

fn del(env: &Env, conf: &StandInConf, cluster: &Cluster, primary: &Runtime) -> Result<(), Error> {
    let cache = cache_file(conf, env);
    let cached = match load(&cache) {
        Some(cached) => cached,
        // No cache (ADD never got to the delegates): the pod and NADs, if they are still there.
        None => Cached {
            delegates: match env.pod() {
                Some((namespace, name)) => resolve(env, conf, &namespace, &name)
                    .map(|(_, delegates)| delegates)
                    .unwrap_or_else(|e| {
                        eprintln!("multus-stand-in: DEL without cache, skipping delegates: {e}");
                        Vec::new()
                    }),
                None => Vec::new(),
            },
            aux_chain: None,
        },
    };
    // Multus DELs its delegates last to first (the chain, the NADs, the cluster network), every one
    // of them, and returns all failures together.
    let mut failures: Vec<String> = del_chain(env, cached.aux_chain.as_ref())
        .into_iter()
        .collect();
    failures.extend(del_delegates(env, &cached.delegates));
    if let Err(failure) = cluster.network.del(primary, conf.prev_result.as_ref()) {
        let err = words::libcni_error(&cluster.config, &failure, "delete");
        failures.push(words::del_failed(&cluster.config, &err));
    }
    let _ = std::fs::remove_file(&cache);
    match words::join_del_failures(&failures) {
        Some(msg) => Err(Error::Multus(msg)),
        None => Ok(()),
    }
}

/// DELs the auxiliary chain of an ADD, if it ran one; its failure in Multus' words.
fn del_chain(env: &Env, run: Option<&ChainRun>) -> Option<String> {
    let run = run?;
    let rt = env.runtime(&run.ifname, run.args.clone());
    let conflist = run.chain.conflist();
    aux_chain::del(&run.chain, &env.path, &rt, run.result.as_ref())
        .err()
        .map(|failure| {
            let err = words::libcni_error(&conflist, &failure, "delete");
            words::del_failed(&conflist, &err)
        })
}

/// DELs `delegates` in reverse; every one is tried, their failures returned in Multus' words. Each
/// gets its ADD result as prevResult where libcni would give it (cniVersion 0.4.0 on).
fn del_delegates(env: &Env, delegates: &[Delegate]) -> Vec<String> {
    let mut failures = Vec::new();
    for d in delegates.iter().rev() {
        let network = Network::from_config(d.config.clone(), env.path.clone());
        let rt = env.runtime(&d.ifname, d.args.clone());
        let version = d.config["cniVersion"].as_str().unwrap_or_default();
        let prev = d
            .result
            .as_ref()
            .filter(|_| aux_chain::del_gets_cached_result(version));
        if let Err(failure) = network.del(&rt, prev) {
            let err = words::libcni_error(&d.config, &failure, "delete");
            failures.push(words::del_failed(&d.config, &err));
        }
    }
    failures
}

/// The pod (as delegates are told of it) and its attachments, each NAD fetched and turned into a
/// delegate.
fn resolve(
    env: &Env,
    conf: &StandInConf,
    namespace: &str,
    name: &str,
) -> Result<(PodRef, Vec<Delegate>), Error> {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Io(format!("tokio runtime: {e}")))?;
    tokio.block_on(async {
        let client = client(&conf.kubeconfig).await?;
        let pod_error = |why: String| Error::Pod {
            namespace: namespace.to_string(),
            name: name.to_string(),
            why,
        };
        let pod = Api::<Pod>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| pod_error(e.to_string()))?;
        let annotation = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(vocab::NETWORKS_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        let pod_ref = PodRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            infra_container_id: env.container_id.clone(),
        };
        let resource = ApiResource::erase::<NetworkAttachmentDefinition>(&());
        let mut delegates = Vec::new();
        let selections = networks::parse(&annotation, namespace).map_err(|e| {
            let msg = format!("error loading k8s delegates k8s args: {}", e.why);
            Error::Multus(words::cmd_err(&env.label(), &msg))
        })?;
        for (i, selection) in selections.into_iter().enumerate() {
            conf.may_use(namespace, &selection.namespace)
                .map_err(|why| Error::Multus(isolation_message(env, &why)))?;
            let api = Api::<DynamicObject>::namespaced_with(
                client.clone(),
                &selection.namespace,
                &resource,
            );
            let nad = match api.get(&selection.name).await {
                Ok(nad) => nad,
                Err(e) => {
                    let why = match e {
                        kube::Error::Api(status) => status.message,
                        e => e.to_string(),
                    };
                    let (nad, nad_ns) = (&selection.name, &selection.namespace);
                    let message = words::nad_not_found(nad, nad_ns, &why);
                    let event = events::event(&pod_ref, "Warning", "NoNetworkFound", &message);
                    events::post(&client, event).await;
                    let refusal = words::nad_missing(&env.label(), nad, nad_ns, &why);
                    return Err(Error::Multus(refusal));
                }
            };
            let spec_config = nad.data["spec"]["config"].as_str();
            let config = conf::delegate_config(spec_config, &selection.name).map_err(|why| {
                Error::NadConfig {
                    namespace: selection.namespace.clone(),
                    name: selection.name.clone(),
                    why,
                }
            })?;
            delegates.push(Delegate {
                ifname: conf::delegate_ifname(selection.interface.as_deref(), i),
                selection,
                config,
                args: conf::delegate_runtime_args(&pod_ref, &env.args),
                result: None,
            });
        }
        Ok((pod_ref, delegates))
    })
}

/// The refusal as the thin plugin (v4) returns it.
fn isolation_message(env: &Env, why: &str) -> String {
    words::cmd_err(&env.label(), &format!("{}{why}", words::LOAD_DELEGATES))
}

/// Posts an Event from a blocking context (a runtime and client of its own), best effort.
fn post_event(conf: &StandInConf, event: k8s_openapi::api::core::v1::Event) {
    let Ok(tokio) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    tokio.block_on(async {
        match client(&conf.kubeconfig).await {
            Ok(client) => events::post(&client, event).await,
            Err(e) => eprintln!("multus-stand-in: Event not posted: {e}"),
        }
    });
}

async fn client(kubeconfig: &Path) -> Result<Client, Error> {
    let io = |e: String| Error::Io(format!("kubeconfig {}: {e}", kubeconfig.display()));
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| io(e.to_string()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| io(e.to_string()))?;
    // A sandbox must not hang on an unreachable apiserver; the kubelet retries.
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(10));
    Client::try_from(config).map_err(|e| io(e.to_string()))
}

fn cache_file(conf: &StandInConf, env: &Env) -> PathBuf {
    conf.cache_dir()
        .join(format!("{}-{}", env.container_id, env.ifname))
}

fn save(path: &Path, cached: &Cached) -> Result<(), Error> {
    let io = |e: std::io::Error| Error::Io(format!("writing {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let body = serde_json::to_vec(cached).expect("the cache serialises");
    std::fs::write(path, body).map_err(io)
}

fn load(path: &Path) -> Option<Cached> {
    match serde_json::from_slice(&std::fs::read(path).ok()?).ok()? {
        CacheFile::Current(cached) => Some(*cached),
        CacheFile::Delegates(delegates) => Some(Cached {
            delegates,
            aux_chain: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(command: &str) -> Env {
        Env {
            command: command.into(),
            container_id: "c1".into(),
            netns: PathBuf::from("/run/netns/none"),
            ifname: "eth0".into(),
            args: Vec::new(),
            path: Vec::new(),
        }
    }

    /// A cache an earlier stand-in wrote (the delegates alone) still drives DEL; today's keeps the
    /// auxiliary chain of the ADD beside them.
    #[test]
    fn caches_of_both_shapes_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1-eth0");
        let delegate = serde_json::json!({
            "selection": {"namespace": "ns", "name": "linkerd-cni", "interface": null},
            "ifname": "net1", "config": {"cniVersion": "0.3.1", "type": "linkerd-cni"},
            "args": [["K8S_POD_NAME", "p"]], "result": null
        });
        std::fs::write(&path, serde_json::json!([delegate]).to_string()).unwrap();
        let old = load(&path).expect("the old shape loads");
        assert_eq!(old.delegates.len(), 1);
        assert!(old.aux_chain.is_none());

        let run = ChainRun {
            chain: Chain {
                name: "vendor-cni-chain".into(),
                cni_version: "0.3.1".into(),
                plugins: vec![aux_chain::passthru_entry()],
                files: vec![],
            },
            ifname: "net2".into(),
            args: vec![],
            result: Some(serde_json::json!({"cniVersion": "0.3.1", "dns": {}})),
        };
        let cached = Cached {
            delegates: old.delegates,
            aux_chain: Some(run),
        };
        save(&path, &cached).unwrap();
        let new = load(&path).expect("the new shape loads");
        assert_eq!(new.delegates.len(), 1);
        assert_eq!(new.aux_chain.expect("the chain").ifname, "net2");
        std::fs::write(&path, "[]").unwrap();
        assert_eq!(load(&path).expect("empty").delegates.len(), 0);
    }

    #[test]
    fn version_is_answered_without_a_config() {
        let out = run(&env("VERSION"), b"").unwrap().unwrap();
        assert_eq!(
            out["supportedVersions"],
            serde_json::json!(SUPPORTED_VERSIONS)
        );
    }

    #[test]
    fn bad_config_and_unknown_command_are_cni_errors() {
        let err = run(&env("ADD"), b"{").unwrap_err();
        assert_eq!(err.code(), 7, "{err}");
        let conf = serde_json::json!({"cniVersion": "0.4.0", "kubeconfig": "/k",
            "delegates": [{"cniVersion": "0.4.0", "name": "k8s", "plugins": []}]});
        let err = run(&env("FROB"), conf.to_string().as_bytes()).unwrap_err();
        assert_eq!(err.code(), 4, "{err}");
        let err = run(&env("CHECK"), conf.to_string().as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("CHECK needs a prevResult"),
            "{err}"
        );
    }
}
