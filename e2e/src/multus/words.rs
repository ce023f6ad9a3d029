//! Multus' words: the messages the real thin plugin (v4.2.2) returns, with code 999 (plain Go errors),
//! which the kubelet shows in FailedCreatePodSandBox Events. Seen from the real binary by
//! `e2e/tests/multus_agreement.rs`, which runs both on the same cases.

use serde_json::Value;

use crate::cni::PluginFailure;

/// What Multus' refusals to load the pod's delegates start with (after [`cmd_err`]'s label).
pub const LOAD_DELEGATES: &str =
    "error loading k8s delegates k8s args: TryLoadPodDelegates: error \
                                  in getting k8s network for pod: ";

/// The pod as Multus labels it in errors: `<namespace>/<name>/<uid>` from the runtime's CNI_ARGS.
pub fn pod_label(args: &[(String, String)]) -> String {
    let arg = |k| super::conf::cni_arg(args, k).unwrap_or_default();
    format!(
        "{}/{}/{}",
        arg("K8S_POD_NAMESPACE"),
        arg("K8S_POD_NAME"),
        arg("K8S_POD_UID")
    )
}

/// `cmdErr`: Multus failed before or around the delegates.
pub fn cmd_err(pod: &str, msg: &str) -> String {
    format!("Multus: [{pod}]: {msg}")
}

/// A NAD the pod names that cannot be read (`why`: the apiserver's message); also the message of
/// Multus' NoNetworkFound Event.
pub fn nad_not_found(name: &str, namespace: &str, why: &str) -> String {
    format!(
        "cannot find a network-attachment-definition ({name}) in namespace ({namespace}): {why}"
    )
}

/// The refusal for [`nad_not_found`].
pub fn nad_missing(pod: &str, name: &str, namespace: &str, why: &str) -> String {
    cmd_err(
        pod,
        &format!(
            "{LOAD_DELEGATES}GetNetworkDelegates: failed getting the delegate: getKubernetesDelegate: \
             {}",
            nad_not_found(name, namespace, why)
        ),
    )
}

/// `cmdPluginErr` on ADD: a delegate (the cluster network, a NAD's, the auxiliary chain) failed;
/// `network` is its config's name.
pub fn add_failed(pod: &str, network: &str, err: &str) -> String {
    format!("[{pod}:{network}]: error adding container to network \"{network}\": {err}")
}

/// A delegate's DEL that failed (no pod label): a plugin config is named by its type, a conflist by
/// its name.
pub fn del_failed(config: &Value, err: &str) -> String {
    let field = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    if is_conflist(config) {
        format!(
            "DelegateDel: error invoking ConflistDel - \"{}\": conflistDel: error in getting result \
             from DelNetworkList: {err}",
            field("name")
        )
    } else {
        format!(
            "DelegateDel: error invoking DelegateDel - \"{}\": error in getting result from \
             DelNetwork: {err}",
            field("type")
        )
    }
}

/// Multus returns every DEL failure of one sandbox, last delegate first, in one error.
pub fn join_del_failures(failures: &[String]) -> Option<String> {
    (!failures.is_empty()).then(|| failures.join(" / "))
}

pub fn is_conflist(config: &Value) -> bool {
    config.get("plugins").is_some()
}

/// libcni's error for a plugin of `config` that failed running `command` (`add`, `delete`): the
/// plugin's message (`msg; details`); through a conflist, `plugin type="T" name="N" failed (add): `
/// before it (the name only when the plugin's own entry has one).
pub fn libcni_error(config: &Value, failure: &PluginFailure, command: &str) -> String {
    let own = plugin_message(failure);
    if !is_conflist(config) {
        return own;
    }
    let name = config["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["type"].as_str() == Some(failure.plugin.as_str()))
        .and_then(|p| p["name"].as_str())
        .filter(|n| !n.is_empty());
    let described = match name {
        Some(name) => format!("type={:?} name={name:?}", failure.plugin),
        None => format!("type={:?}", failure.plugin),
    };
    format!("plugin {described} failed ({command}): {own}")
}

/// What libcni reads from a failed plugin: its error object, else what it printed.
fn plugin_message(failure: &PluginFailure) -> String {
    if let Some(msg) = failure.msg() {
        let details = failure
            .error
            .as_ref()
            .and_then(|e| e["details"].as_str())
            .unwrap_or_default();
        return if details.is_empty() {
            msg.to_string()
        } else {
            format!("{msg}; {details}")
        };
    }
    match (
        failure.exit_code,
        failure.stdout.trim(),
        failure.stderr.trim(),
    ) {
        // Not run: the runtime's own reason (e.g. not found on the path).
        (None, _, why) => why.to_string(),
        (Some(code), "", "") => {
            format!("netplugin failed with no error message: exit status {code}")
        }
        (_, "", stderr) => format!("netplugin failed: {stderr:?}"),
        (_, stdout, _) => {
            format!("netplugin failed but error parsing its diagnostic message {stdout:?}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::Failure;
    use serde_json::json;

    fn failed(plugin: &str, stdout: &str) -> PluginFailure {
        PluginFailure::new(Failure {
            plugin: plugin.into(),
            command: "ADD".into(),
            exit_code: Some(1),
            error: serde_json::from_str(stdout).ok(),
            stdout: stdout.into(),
            stderr: String::new(),
        })
    }

    /// The words the real Multus v4.2.2 used in the agreement table, rebuilt.
    #[test]
    fn messages_are_multus_own() {
        let args = crate::multus::conf::parse_cni_args(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_UID=u1",
        );
        let pod = pod_label(&args);
        assert_eq!(pod, "ns/web/u1");
        let failure = failed("cni-recorder", r#"{"code":999,"msg":"no"}"#);
        let single = json!({"cniVersion": "0.4.0", "name": "broken-net", "type": "cni-recorder"});
        assert_eq!(
            add_failed(&pod, "broken-net", &libcni_error(&single, &failure, "add")),
            "[ns/web/u1:broken-net]: error adding container to network \"broken-net\": no"
        );
        let chain = json!({"name": "vendor-cni-chain", "plugins": [
            {"type": "passthru", "name": "passthru-cni"}, {"type": "cni-recorder"}]});
        assert_eq!(
            libcni_error(&chain, &failure, "add"),
            "plugin type=\"cni-recorder\" failed (add): no"
        );
        let passthru = failed("passthru", r#"{"code":1,"msg":"old","details":"0.2.0"}"#);
        assert_eq!(
            libcni_error(&chain, &passthru, "delete"),
            "plugin type=\"passthru\" name=\"passthru-cni\" failed (delete): old; 0.2.0"
        );
        assert_eq!(
            del_failed(&single, "no"),
            "DelegateDel: error invoking DelegateDel - \"cni-recorder\": error in getting result \
             from DelNetwork: no"
        );
        assert!(del_failed(&chain, "x").starts_with(
            "DelegateDel: error invoking ConflistDel - \"vendor-cni-chain\": conflistDel:"
        ));
        assert!(nad_missing(&pod, "l", "ns", "gone").starts_with(
            "Multus: [ns/web/u1]: error loading k8s delegates k8s args: TryLoadPodDelegates:"
        ));
        assert_eq!(join_del_failures(&[]), None);
        assert_eq!(
            join_del_failures(&["a".into(), "b".into()]).as_deref(),
            Some("a / b")
        );
        let silent = failed("x", "");
        assert_eq!(
            plugin_message(&silent),
            "netplugin failed with no error message: exit status 1"
        );
    }
}
