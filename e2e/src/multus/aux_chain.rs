//! Multus' **auxiliary CNI chain** (`auxiliaryCNIChainName`, Multus v4.2.1 and later), run by the
//! stand-in as Multus runs it.
//!
//! Read in Multus' `pkg/multus/multus.go` (`CmdAdd`, `DelegateAdd`, `delPlugins`, `CmdDel`):
//!
//! - **Built at every ADD**, after the pod is read and before any delegate runs: a conflist named
//!   after the chain in Multus' own cniVersion, `{"type": "passthru", "name": "passthru-cni"}` first,
//!   loaded from the directory of `clusterNetwork` (`filepath.Dir`) by `LoadChainedDelegatesFromBytes`.
//!   Appended as the last delegate only when it holds more than passthru; saved with the delegates in
//!   Multus' cache for DEL.
//! - **`clusterNetwork` not a path** (no `/`: a NAD or config name, or only `delegates`): every ADD
//!   fails.
//! - **Run as the last delegate**: on `getIfname`'s `net<N>` (its index among the delegates; the
//!   interface must not exist yet), with the delegates' `CNI_ARGS`, through libcni's `AddNetworkList`:
//!   each plugin gets the list's name and cniVersion and the previous plugin's result as `prevResult`
//!   (passthru, first, gets none). Its result is not the pod's (the cluster network's is).
//! - **A failure fails the sandbox**: `delPlugins` DELs every delegate up to it (the chain too), then
//!   the ADD errors.
//! - **DEL**: from the cache (the chain as it was at ADD, not re-read), delegates last to first, so
//!   the chain first; libcni's `DelNetworkList` runs its plugins in reverse, each with a
//!   [`stripped`] config, with the cached ADD result as `prevResult` from cniVersion 0.4.0 on (none
//!   before), and stops at the first failure. Multus caches the delegates, the chain among them,
//!   before it runs any, so a DEL after a failed ADD runs the chain too. CHECK does not run it.
//!
//! Read in libcni 1.3 (`libcni/conf.go`, which Multus 4.2.1 uses for plugin drop-ins):
//! `NetworkPluginConfsFromFiles(dir, name)` reads `<dir>/<name>/*.conf` (`ConfFiles`: not
//! directories, exactly the `.conf` extension; `os.ReadDir`'s order, by name), each a plugin config
//! (a JSON object with a `type`); a missing directory has none, and any unreadable or invalid file is
//! an error.
//!
//! Inferred, because the body of `LoadChainedDelegatesFromBytes` (pkg/k8sclient) was not available:
//! that it loads the directory with that libcni function after checking the chain's name against the
//! CNI spec (its stub comments say so), and that it returns no chain when that fails (its signature
//! returns no error; `CmdAdd` then goes on without a chain). What DEL gets was seen on the real
//! Multus v4.2.2 (`e2e/tests/multus_agreement.rs`): every plugin of the chain, stripped.
//!
//! `passthru` is Multus' `cmd/passthru-cni`: ADD prints an empty result of the config's version
//! (`{"cniVersion": V, "dns": {}}`), DEL prints nothing, for cniVersion 0.3.0 to 1.1.0. Debian ships
//! no `passthru` binary: when none is on `CNI_PATH`, the stand-in gives passthru's answers in-process,
//! exactly those.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::cni::{exec_plugin, Failure, Network, PluginFailure, Runtime};

/// The plugin Multus puts first in every auxiliary chain.
pub const PASSTHRU: &str = "passthru";

/// The cniVersions passthru declares (Multus' `cmd/passthru-cni`).
pub const PASSTHRU_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// One auxiliary chain as built for one ADD.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    pub name: String,
    pub cni_version: String,
    /// passthru's entry, then each plugin config file's JSON, in order.
    pub plugins: Vec<Value>,
    /// The files the plugins came from (for logs), in order.
    pub files: Vec<PathBuf>,
}

impl Chain {
    /// The conflist Multus runs (libcni injects its name and cniVersion into each plugin).
    pub fn conflist(&self) -> Value {
        json!({"cniVersion": self.cni_version, "name": self.name, "plugins": self.plugins})
    }
}

/// passthru's entry in the chain, as Multus writes it.
pub fn passthru_entry() -> Value {
    json!({"type": PASSTHRU, "name": "passthru-cni"})
}

/// The directory whose `<chain name>/` subdirectory holds the chain: the one of the cluster network's
/// config file. `Err`: Multus' reason to fail the ADD.
pub fn conf_dir(cluster_network: Option<&str>) -> Result<PathBuf, String> {
    let path = cluster_network.unwrap_or_default();
    if !path.contains('/') {
        return Err(format!(
            "auxiliary chain used but ClusterNetwork must be a path, and it is not a path: {path}"
        ));
    }
    // Go's filepath.Dir: "/a/b.conf" → "/a", "/b.conf" → "/".
    Ok(Path::new(path)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf))
}

/// The CNI spec's network name: an alphanumeric, then alphanumerics, `_`, `.` or `-`.
pub fn is_valid_network_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// Go's `filepath.Ext`: from the last dot of the name on (".conf" of ".conf" too), empty without one.
fn go_ext(name: &str) -> &str {
    name.rfind('.').map_or("", |i| &name[i..])
}

/// libcni's `ConfFiles(dir, [".conf"])`: the entries of `dir` that are not directories (a symlink is
/// not one) and end in `.conf`, sorted by name as Go's `os.ReadDir` sorts (bytewise). A missing
/// directory has none.
pub fn plugin_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        if go_ext(&name.to_string_lossy()) == ".conf" {
            files.push((name.as_encoded_bytes().to_vec(), entry.path()));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, path)| path).collect())
}

/// One plugin config file as libcni accepts it: a JSON object whose `type` is a non-empty string, and
/// whose `name` and `cniVersion`, if there, are strings (its typed fields).
pub fn plugin_config(bytes: &[u8]) -> Result<Value, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("error parsing configuration: {e}"))?;
    let obj = value
        .as_object()
        .ok_or("error parsing configuration: not a JSON object")?;
    for key in ["name", "cniVersion"] {
        if obj.get(key).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return Err(format!(
                "error parsing configuration: `{key}` is not a string"
            ));
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) if !t.is_empty() => Ok(value),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err("error parsing configuration: missing 'type'".into())
        }
        Some(_) => Err("error parsing configuration: `type` is not a string".into()),
    }
}

/// Builds the chain `name` from `conf_dir/name/` for an ADD. `Ok(None)`: no plugin config there, so
/// no chain. `Err`: why this ADD runs no chain (Multus logs it and goes on without one).
pub fn load(conf_dir: &Path, name: &str, cni_version: &str) -> Result<Option<Chain>, String> {
    if !is_valid_network_name(name) {
        return Err(format!("{name:?} is not a valid network name"));
    }
    let dir = conf_dir.join(name);
    let files = plugin_files(&dir).map_err(|e| {
        format!(
            "failed to read plugin config files in {}: {e}",
            dir.display()
        )
    })?;
    if files.is_empty() {
        return Ok(None);
    }
    let mut plugins = vec![passthru_entry()];
    for file in &files {
        let bytes =
            std::fs::read(file).map_err(|e| format!("error reading {}: {e}", file.display()))?;
        plugins.push(plugin_config(&bytes).map_err(|e| format!("{}: {e}", file.display()))?);
    }
    Ok(Some(Chain {
        name: name.to_string(),
        cni_version: cni_version.to_string(),
        plugins,
        files,
    }))
}

/// Whether libcni hands a DEL the cached ADD result: from cniVersion 0.4.0 on.
pub fn del_gets_cached_result(cni_version: &str) -> bool {
    !matches!(cni_version, "" | "0.1.0" | "0.2.0" | "0.3.0" | "0.3.1")
}

/// passthru's answer to `command` with `config` (its stdin): `Ok(Some)` is its stdout.
pub fn passthru(command: &str, config: &Value) -> Result<Option<Value>, PluginFailure> {
    let version = config
        .get("cniVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fail = |code: u32, msg: &str, details: String| {
        let error = json!({"cniVersion": version, "code": code, "msg": msg, "details": details});
        PluginFailure::new(Failure {
            plugin: PASSTHRU.into(),
            command: command.into(),
            exit_code: Some(1),
            stdout: error.to_string(),
            error: Some(error),
            stderr: String::new(),
        })
    };
    if command != "VERSION" && !PASSTHRU_VERSIONS.contains(&version) {
        // skel's version check, before the command runs.
        return Err(fail(
            1,
            "incompatible CNI versions",
            format!("config is {version:?}, plugin supports {PASSTHRU_VERSIONS:?}"),
        ));
    }
    match command {
        "ADD" => Ok(Some(json!({"cniVersion": version, "dns": {}}))),
        "DEL" => Ok(None),
        "VERSION" => Ok(Some(
            json!({"cniVersion": version, "supportedVersions": PASSTHRU_VERSIONS}),
        )),
        other => Err(fail(
            4,
            "unknown CNI_COMMAND",
            format!("passthru implements ADD and DEL, not {other}"),
        )),
    }
}

/// Runs one plugin of the chain: the binary if `plugin_dirs` has it, passthru's answers in-process
/// when it is passthru and there is none.
fn exec(
    plugin_dirs: &[PathBuf],
    command: &str,
    config: &Value,
    rt: &Runtime,
) -> Result<Option<Value>, PluginFailure> {
    let plugin = config.get("type").and_then(Value::as_str);
    let on_path = |p: &str| plugin_dirs.iter().any(|d| d.join(p).is_file());
    if plugin == Some(PASSTHRU) && !on_path(PASSTHRU) {
        return passthru(command, config);
    }
    exec_plugin(plugin_dirs, command, config, rt)
}

/// ADD through the chain (libcni's `AddNetworkList`); returns its last plugin's result. A plugin that
/// prints no result fails it, as libcni cannot decode one.
pub fn add(chain: &Chain, plugin_dirs: &[PathBuf], rt: &Runtime) -> Result<Value, PluginFailure> {
    let list = Network::new(chain.conflist(), plugin_dirs.to_vec());
    let mut prev: Option<Value> = None;
    for plugin in &chain.plugins {
        let config = list.plugin_config(plugin, prev.as_ref());
        let out = exec(plugin_dirs, "ADD", &config, rt)?;
        let Some(result) = out else {
            return Err(PluginFailure::new(Failure {
                plugin: config["type"].as_str().unwrap_or_default().to_string(),
                command: "ADD".into(),
                exit_code: Some(0),
                error: None,
                stdout: String::new(),
                stderr: "printed no result: libcni fails with \"unexpected end of JSON input\""
                    .into(),
            }));
        };
        prev = Some(result);
    }
    Ok(prev.unwrap_or(Value::Null))
}

/// A chain plugin's config as Multus hands it on DEL (rollback included): only what libcni's typed
/// `NetConf` keeps of it — `type` and an `ipam` object (its `type` if any); the chain's name and
/// cniVersion are added as for any list. Seen on the real Multus v4.2.2: linkerd-cni gets neither its
/// `linkerd` nor its `kubernetes` keys, the recorder no `log`.
pub fn stripped(plugin: &Value) -> Value {
    let mut out = json!({"type": plugin["type"], "ipam": {}});
    if let Some(ipam_type) = plugin["ipam"]["type"].as_str() {
        out["ipam"]["type"] = json!(ipam_type);
    }
    out
}

/// DEL through the chain in reverse (libcni's `DelNetworkList`) with each plugin's [`stripped`]
/// config: `add_result` as every plugin's `prevResult` from cniVersion 0.4.0 on; the first failure
/// ends it.
pub fn del(
    chain: &Chain,
    plugin_dirs: &[PathBuf],
    rt: &Runtime,
    add_result: Option<&Value>,
) -> Result<(), PluginFailure> {
    let list = Network::new(chain.conflist(), plugin_dirs.to_vec());
    let prev = add_result.filter(|_| del_gets_cached_result(&chain.cni_version));
    for plugin in chain.plugins.iter().rev() {
        exec(
            plugin_dirs,
            "DEL",
            &list.plugin_config(&stripped(plugin), prev),
            rt,
        )?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "aux_chain_tests.rs"]
mod tests;
