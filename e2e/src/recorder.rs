//! `cni-recorder`: a CNI plugin for tests that records every call it gets and changes nothing, to see
//! what a runtime (or the Multus stand-in) hands a plugin: in which order, with which `CNI_*`
//! environment and which config.
//!
//! Config: `{"type": "cni-recorder", "log"?: "<file>", "tag"?: "<any string>", "failOn"?: "ADD"|"DEL",
//! "standalone"?: true}`. Each call appends one JSON line to `log`: `{"tag", "command", "containerId",
//! "netns", "ifname", "args", "config"}` (`config`: its stdin as received). ADD prints the `prevResult`
//! back unchanged, as a chained plugin that sets up nothing does, and fails without one (code 7), as
//! chained plugins such as `tuning` do, unless `standalone` (then: an empty result of its version,
//! as a NAD's plugin answers). DEL prints nothing. `failOn` makes that command fail (code 999) after
//! it is recorded. Without `log` in its config it logs to the file `$CNI_RECORDER_LOG` names: Multus
//! hands a cached auxiliary-chain plugin a stripped config on DEL, and its environment reaches the plugin.

use std::io::Write;

use serde_json::{json, Value};

const VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// One call as `run` sees it.
pub struct Call<'a> {
    pub command: &'a str,
    pub container_id: &'a str,
    pub netns: &'a str,
    pub ifname: &'a str,
    pub args: &'a str,
    /// `$CNI_RECORDER_LOG`: the log when the config names none.
    pub log_env: Option<&'a str>,
}

/// The environment variable naming the log when the config has no `log`.
pub const LOG_ENV: &str = "CNI_RECORDER_LOG";

/// Runs one call: `Ok(Some)` goes to stdout, `Err` is the CNI error object.
pub fn run(call: &Call, stdin: &[u8]) -> Result<Option<Value>, Value> {
    let error = |code: u32, msg: String| json!({"cniVersion": "1.0.0", "code": code, "msg": msg});
    let config: Value = serde_json::from_slice(stdin)
        .map_err(|e| error(6, format!("cni-recorder: config is not JSON: {e}")))?;
    if call.command == "VERSION" {
        return Ok(Some(
            json!({"cniVersion": "1.0.0", "supportedVersions": VERSIONS}),
        ));
    }
    let log = config
        .get("log")
        .and_then(Value::as_str)
        .or(call.log_env.filter(|l| !l.is_empty()))
        .ok_or_else(|| error(7, "cni-recorder: config has no `log` file".into()))?;
    let line = json!({
        "tag": config.get("tag").cloned().unwrap_or(Value::Null),
        "command": call.command,
        "containerId": call.container_id,
        "netns": call.netns,
        "ifname": call.ifname,
        "args": call.args,
        "config": config,
    });
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| writeln!(f, "{line}"))
        .map_err(|e| error(5, format!("cni-recorder: writing {log}: {e}")))?;
    if config.get("failOn").and_then(Value::as_str) == Some(call.command) {
        return Err(error(
            999,
            format!("cni-recorder: failing {} as told", call.command),
        ));
    }
    let standalone = config.get("standalone").and_then(Value::as_bool) == Some(true);
    match (call.command, config.get("prevResult")) {
        ("ADD", Some(prev)) => Ok(Some(prev.clone())),
        ("ADD", None) if standalone => Ok(Some(json!({
            "cniVersion": config.get("cniVersion").cloned().unwrap_or(Value::Null),
            "dns": {},
        }))),
        ("ADD", None) => Err(error(7, "cni-recorder: Required prevResult missing".into())),
        _ => Ok(None),
    }
}

/// The binary's life: reads the environment and stdin, prints the answer, returns the exit code.
pub fn main() -> i32 {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let (command, container_id, netns, ifname, args) = (
        var("CNI_COMMAND"),
        var("CNI_CONTAINERID"),
        var("CNI_NETNS"),
        var("CNI_IFNAME"),
        var("CNI_ARGS"),
    );
    let log_env = std::env::var(LOG_ENV).ok();
    let mut stdin = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut stdin);
    let call = Call {
        log_env: log_env.as_deref(),
        command: &command,
        container_id: &container_id,
        netns: &netns,
        ifname: &ifname,
        args: &args,
    };
    match run(&call, &stdin) {
        Ok(out) => {
            if let Some(out) = out {
                println!("{out}");
            }
            0
        }
        Err(e) => {
            println!("{e}");
            1
        }
    }
}

/// The calls recorded in `log`, in order (none if it does not exist).
pub fn read_log(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a recorded call"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(command: &str) -> Call<'_> {
        Call {
            command,
            container_id: "c1",
            netns: "/run/netns/x",
            ifname: "net1",
            args: "K8S_POD_NAME=p",
            log_env: None,
        }
    }

    #[test]
    fn records_and_passes_the_prev_result_through() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let prev = json!({"cniVersion": "0.4.0", "dns": {}});
        let conf = json!({"type": "cni-recorder", "log": log, "tag": "a", "prevResult": prev});
        let out = run(&call("ADD"), conf.to_string().as_bytes()).unwrap();
        assert_eq!(out, Some(prev));
        assert_eq!(
            run(&call("DEL"), conf.to_string().as_bytes()).unwrap(),
            None
        );
        let calls = read_log(&log);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["command"], "ADD");
        assert_eq!(calls[0]["ifname"], "net1");
        assert_eq!(calls[0]["args"], "K8S_POD_NAME=p");
        assert_eq!(calls[1]["config"], conf);
    }

    #[test]
    fn without_prev_result_or_when_told_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let bare = json!({"type": "cni-recorder", "log": log});
        let e = run(&call("ADD"), bare.to_string().as_bytes()).unwrap_err();
        assert_eq!(e["code"], 7);
        let failing = json!({"type": "cni-recorder", "log": log, "failOn": "DEL"});
        let e = run(&call("DEL"), failing.to_string().as_bytes()).unwrap_err();
        assert_eq!(e["code"], 999);
        assert_eq!(read_log(&log).len(), 2, "failed calls are recorded too");
        let e = run(&call("ADD"), br#"{"type": "cni-recorder"}"#).unwrap_err();
        assert_eq!(e["code"], 7);
        let env_log = dir.path().join("env-log");
        let from_env = Call {
            log_env: env_log.to_str(),
            ..call("DEL")
        };
        assert_eq!(
            run(&from_env, br#"{"type": "cni-recorder"}"#).unwrap(),
            None
        );
        assert_eq!(read_log(&env_log).len(), 1, "logged where the env says");
        let alone =
            json!({"cniVersion": "0.3.1", "type": "cni-recorder", "log": log, "standalone": true});
        let out = run(&call("ADD"), alone.to_string().as_bytes()).unwrap();
        assert_eq!(out, Some(json!({"cniVersion": "0.3.1", "dns": {}})));
    }
}
