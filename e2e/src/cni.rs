//! A small CNI runtime for tests, doing libcni's job (there is no `cnitool` here): run the plugins
//! of a conflist in order for ADD (chaining `prevResult`), in reverse for DEL, all of them for
//! CHECK, with the `CNI_*` environment set.
//!
//! ```no_run
//! # use linkerd_multus_e2e::cni::{Network, PluginFailure, Runtime};
//! # use linkerd_multus_e2e::netns::NetNs;
//! # fn main() -> Result<(), PluginFailure> {
//! # let conflist_json = serde_json::json!({"cniVersion": "1.0.0", "name": "n", "plugins": []});
//! # let plugin_dir = std::path::PathBuf::from("target/debug");
//! let ns = NetNs::create("t");
//! let net = Network::new(conflist_json, vec![plugin_dir, "/usr/lib/cni".into()]);
//! let rt = Runtime::new(&ns.path()).with_pod("my-namespace", "my-pod");
//! let result = net.add(&rt)?;          // the last plugin's result
//! net.check(&rt, &result)?;
//! net.del(&rt, Some(&result))?;
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use crate::namespace::unique_name;

/// What the runtime says about the container: `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
/// `CNI_ARGS`.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub container_id: String,
    pub netns: PathBuf,
    pub ifname: String,
    /// `CNI_ARGS` pairs, joined as `K=V;K=V`.
    pub args: Vec<(String, String)>,
    /// Copy each plugin's stderr to ours as well (a plugin that runs delegates, like Multus, does).
    pub pass_stderr: bool,
    /// More environment for the plugin (the runtime's own is inherited).
    pub env: Vec<(String, String)>,
}

impl Runtime {
    /// A unique container id, interface `eth0`, no args.
    pub fn new(netns: &Path) -> Self {
        Self {
            container_id: unique_name("ctr"),
            netns: netns.to_path_buf(),
            ifname: "eth0".into(),
            args: Vec::new(),
            pass_stderr: false,
            env: Vec::new(),
        }
    }

    /// Adds the args a kubelet passes for a pod (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`, ...).
    pub fn with_pod(mut self, namespace: &str, name: &str) -> Self {
        self.args.push(("IgnoreUnknown".into(), "1".into()));
        self.args
            .push(("K8S_POD_NAMESPACE".into(), namespace.into()));
        self.args.push(("K8S_POD_NAME".into(), name.into()));
        self.args.push((
            "K8S_POD_INFRA_CONTAINER_ID".into(),
            self.container_id.clone(),
        ));
        self
    }
}

/// A plugin that failed. Boxed so `Result`s stay small; its fields ([`Failure`]) read through
/// it directly: `err.stderr`, `err.exit_code`.
#[derive(Debug, Clone)]
pub struct PluginFailure(Box<Failure>);

impl PluginFailure {
    /// A failure a caller determined itself (e.g. a plugin answered in-process).
    pub fn new(failure: Failure) -> Self {
        Self(Box::new(failure))
    }
}

impl std::ops::Deref for PluginFailure {
    type Target = Failure;
    fn deref(&self) -> &Failure {
        &self.0
    }
}

/// What a failed plugin left: its parsed CNI error object when it printed one, and everything
/// else needed to understand why.
#[derive(Debug, Clone)]
pub struct Failure {
    pub plugin: String,
    pub command: String,
    /// `None` when killed by a signal, or when the plugin binary was not found / not run.
    pub exit_code: Option<i32>,
    /// The `{cniVersion, code, msg, details}` object from stdout, if it printed one.
    pub error: Option<Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Failure {
    /// The CNI error code, if the plugin printed an error object.
    pub fn code(&self) -> Option<u64> {
        self.error.as_ref()?.get("code")?.as_u64()
    }

    /// The error message, if the plugin printed an error object.
    pub fn msg(&self) -> Option<&str> {
        self.error.as_ref()?.get("msg")?.as_str()
    }
}

impl fmt::Display for PluginFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} failed (exit {:?}): stdout={} stderr={}",
            self.plugin,
            self.command,
            self.exit_code,
            self.stdout.trim(),
            self.stderr.trim()
        )
    }
}

impl std::error::Error for PluginFailure {}

/// A conflist (`{cniVersion, name, plugins: [...]}`) and where its plugin binaries live.
#[derive(Debug, Clone)]
pub struct Network {
    pub conflist: Value,
    pub plugin_dirs: Vec<PathBuf>,
}

impl Network {
    /// `plugin_dirs` are searched in order for a binary named like each plugin's `type`.
    pub fn new(conflist: Value, plugin_dirs: Vec<PathBuf>) -> Self {
        Self {
            conflist,
            plugin_dirs,
        }
    }

    /// A network from either form libcni loads: a conflist, or a single plugin's config (with its own
    /// `name` and `cniVersion`), which becomes a list of one.
    pub fn from_config(config: Value, plugin_dirs: Vec<PathBuf>) -> Self {
        if config.get("plugins").is_some() {
            return Self::new(config, plugin_dirs);
        }
        let list = serde_json::json!({
            "cniVersion": config.get("cniVersion").cloned().unwrap_or_default(),
            "name": config.get("name").cloned().unwrap_or_default(),
            "plugins": [config],
        });
        Self::new(list, plugin_dirs)
    }

    fn plugins(&self) -> Vec<Value> {
        self.conflist
            .get("plugins")
            .and_then(Value::as_array)
            .cloned()
            .expect("a conflist with a `plugins` list")
    }

    fn str_field(&self, key: &str) -> String {
        self.conflist
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    /// One plugin's config as libcni builds it: the plugin's own keys plus the list's `name` and
    /// `cniVersion`, and `prevResult` when given.
    pub fn plugin_config(&self, plugin: &Value, prev_result: Option<&Value>) -> Value {
        let mut conf: Map<String, Value> = plugin.as_object().cloned().unwrap_or_default();
        conf.insert("name".into(), Value::from(self.str_field("name")));
        conf.insert(
            "cniVersion".into(),
            Value::from(self.str_field("cniVersion")),
        );
        if let Some(prev) = prev_result {
            conf.insert("prevResult".into(), prev.clone());
        }
        Value::Object(conf)
    }

    /// ADD through every plugin in order; returns the last result.
    pub fn add(&self, rt: &Runtime) -> Result<Value, PluginFailure> {
        let mut prev: Option<Value> = None;
        for plugin in self.plugins() {
            let conf = self.plugin_config(&plugin, prev.as_ref());
            let out = exec_plugin(&self.plugin_dirs, "ADD", &conf, rt)?;
            prev = Some(out.unwrap_or(Value::Null));
        }
        Ok(prev.unwrap_or(Value::Null))
    }

    /// CHECK through every plugin in order, each given the ADD's final result.
    pub fn check(&self, rt: &Runtime, prev_result: &Value) -> Result<(), PluginFailure> {
        for plugin in self.plugins() {
            let conf = self.plugin_config(&plugin, Some(prev_result));
            exec_plugin(&self.plugin_dirs, "CHECK", &conf, rt)?;
        }
        Ok(())
    }

    /// DEL through every plugin in reverse order. Like libcni, every plugin is tried and the
    /// first failure is returned.
    pub fn del(&self, rt: &Runtime, prev_result: Option<&Value>) -> Result<(), PluginFailure> {
        let mut first_failure = None;
        for plugin in self.plugins().iter().rev() {
            let conf = self.plugin_config(plugin, prev_result);
            if let Err(e) = exec_plugin(&self.plugin_dirs, "DEL", &conf, rt) {
                first_failure.get_or_insert(e);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// Runs one plugin (found by its config's `type` in `plugin_dirs`) with `command`. Returns the
/// parsed stdout JSON (`None` when it printed nothing), or the failure.
pub fn exec_plugin(
    plugin_dirs: &[PathBuf],
    command: &str,
    config: &Value,
    rt: &Runtime,
) -> Result<Option<Value>, PluginFailure> {
    exec_plugin_logged(plugin_dirs, command, config, rt).0
}

/// [`exec_plugin`], also returning what the plugin wrote to stderr (a failure carries it as well).
pub fn exec_plugin_logged(
    plugin_dirs: &[PathBuf],
    command: &str,
    config: &Value,
    rt: &Runtime,
) -> (Result<Option<Value>, PluginFailure>, String) {
    let plugin = config
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let failure = |exit_code, stdout: String, stderr: String| {
        let error = serde_json::from_str::<Value>(&stdout)
            .ok()
            .filter(|v| v.get("code").is_some());
        PluginFailure(Box::new(Failure {
            plugin: plugin.clone(),
            command: command.to_string(),
            exit_code,
            error,
            stdout,
            stderr,
        }))
    };
    let Some(binary) = plugin_dirs
        .iter()
        .map(|d| d.join(&plugin))
        .find(|p| p.is_file())
    else {
        let why = format!("plugin `{plugin}` not found in {plugin_dirs:?}");
        return (Err(failure(None, String::new(), why.clone())), why);
    };
    let cni_args = rt
        .args
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(";");
    let cni_path = std::env::join_paths(plugin_dirs).expect("plugin dirs without ':'");
    let spawned = Command::new(&binary)
        // A runtime runs plugins without it; under `cargo test` or `cargo bench` it lists the
        // build's directories, which the loader searched for each library of a dynamically linked
        // plugin: ~0.5 ms of every timed ADD (measured) that no node pays.
        .env_remove("LD_LIBRARY_PATH")
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", &rt.container_id)
        .env("CNI_NETNS", &rt.netns)
        .env("CNI_IFNAME", &rt.ifname)
        .env("CNI_ARGS", cni_args)
        .env("CNI_PATH", cni_path)
        .envs(rt.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let why = format!("cannot run {}: {e}", binary.display());
            return (Err(failure(None, String::new(), why.clone())), why);
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(config.to_string().as_bytes());
    }
    let out = match child.wait_with_output() {
        Ok(out) => out,
        Err(e) => {
            let why = format!("waiting for {}: {e}", binary.display());
            return (Err(failure(None, String::new(), why.clone())), why);
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if rt.pass_stderr {
        eprint!("{stderr}");
    }
    let result = if !out.status.success() {
        Err(failure(out.status.code(), stdout, stderr.clone()))
    } else if stdout.trim().is_empty() {
        Ok(None)
    } else {
        serde_json::from_str(&stdout)
            .map(Some)
            .map_err(|_| failure(out.status.code(), stdout, stderr.clone()))
    };
    (result, stderr)
}
