//! The kubeconfig the plugin uses to look pods up, rendered from the installer pod's service account.
//! Pure: the caller reads the token and CA and writes the file (mode 0600).

use base64::Engine as _;
use serde_json::json;
use std::path::Path;

/// Name of the cluster, user and context inside the kubeconfig.
const CLUSTER: &str = "local";
const USER: &str = "linkerd-cni";
const CONTEXT: &str = "linkerd-cni-context";

/// The first line of every kubeconfig this installer writes, and its mark of ownership: the uninstall
/// removes a kubeconfig only when it starts with this line ([`crate::ownership`]). Linkerd's own
/// installer writes the same cluster, user and context names under another header, so only this
/// line tells the files apart. Every version of this installer wrote it, so a kubeconfig left under
/// the old default name ([`vocab::LINKERD_KUBECONFIG_NAME`]) is recognised too.
pub const MARK: &str =
    "# Kubeconfig of the linkerd-cni plugin, written by linkerd-cni-install. Do not edit.";

/// Names `path` (the installer's kubeconfig as the node sees it) in a plugin entry's
/// `kubernetes.kubeconfig`, whatever the template said, as the operator does in each NAD: the plugin
/// must read the kubeconfig this installer writes and renews. Without it the plugin would fall back to
/// [`vocab::DEFAULT_CNI_KUBECONFIG`], Linkerd's own installer's file, not this installer's. A
/// `kubernetes` value that is not an object is left for the plugin to report.
pub fn name_in(entry: &mut serde_json::Value, path: &str) {
    let Some(obj) = entry.as_object_mut() else {
        return;
    };
    let kubernetes = obj.entry("kubernetes").or_insert_with(|| json!({}));
    if let Some(kubernetes) = kubernetes.as_object_mut() {
        kubernetes.insert("kubeconfig".into(), path.into());
    }
}

/// `https://HOST:PORT` of the apiserver's in-cluster service.
pub fn server_url(host: &str, port: &str) -> String {
    format!("https://{}:{port}", vocab::url_host(host))
}

/// The kubeconfig text. The token is used as read minus surrounding whitespace (files often end in a
/// newline); the CA is embedded, so the file stands alone on the node.
pub fn render(server: &str, token: &str, ca_pem: &[u8]) -> String {
    let body = render_user(server, json!({"token": token.trim()}), ca_pem);
    format!("{MARK}\n{body}")
}

/// The installer's own kubeconfig, in memory: the token is re-read from `token_file` as the kubelet
/// rotates it (a projected token lives an hour).
pub fn render_token_file(server: &str, token_file: &Path, ca_pem: &[u8]) -> String {
    render_user(
        server,
        json!({"tokenFile": token_file.to_string_lossy()}),
        ca_pem,
    )
}

fn render_user(server: &str, user: serde_json::Value, ca_pem: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": USER, "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CLUSTER, "user": USER}}],
        "current-context": CONTEXT,
    });
    serde_yaml_ng::to_string(&config).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let cases = [
            ("10.96.0.1", "443", "https://10.96.0.1:443"),
            ("fd00:10:96::1", "443", "https://[fd00:10:96::1]:443"),
            ("::1", "6443", "https://[::1]:6443"),
            (
                "kubernetes.default.svc",
                "443",
                "https://kubernetes.default.svc:443",
            ),
        ];
        for (host, port, want) in cases {
            assert_eq!(server_url(host, port), want, "{host}");
        }
    }

    /// kube itself reads what we write, with the server, token and CA we gave.
    #[test]
    fn kube_reads_the_rendered_file() {
        let text = render(
            "https://[fd00::1]:443",
            "tok.en-123\n",
            b"-----BEGIN CERTIFICATE-----\nabc\n",
        );
        let parsed = kube::config::Kubeconfig::from_yaml(&text).expect("kube parses it");
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT));
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://[fd00::1]:443"));
        let ca = cluster.certificate_authority_data.as_deref().expect("ca");
        let ca = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .expect("b64");
        assert_eq!(ca, b"-----BEGIN CERTIFICATE-----\nabc\n");
        assert!(parsed.auth_infos[0]
            .auth_info
            .as_ref()
            .and_then(|u| u.token.as_ref())
            .is_some());
        let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("yaml");
        assert_eq!(
            v["users"][0]["user"]["token"].as_str(),
            Some("tok.en-123"),
            "trimmed"
        );
    }

    /// Every entry names the installer's kubeconfig: a template without the key, with another path,
    /// or with other `kubernetes` keys (kept). Would break: a custom template leaving the plugin on
    /// Linkerd's default kubeconfig, which this installer neither writes nor renews.
    #[test]
    fn entries_name_the_installers_kubeconfig() {
        let ours = "/etc/cni/net.d/ZZZ-linkerd-multus-kubeconfig";
        let cases = [
            (json!({"type": "linkerd-cni"}), json!({"kubeconfig": ours})),
            (
                json!({"type": "linkerd-cni", "kubernetes": {"kubeconfig": "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"}}),
                json!({"kubeconfig": ours}),
            ),
            (
                json!({"type": "linkerd-cni", "kubernetes": {"k8s_api_root": "x"}}),
                json!({"kubeconfig": ours, "k8s_api_root": "x"}),
            ),
            (json!({"type": "linkerd-cni", "kubernetes": 3}), json!(3)),
        ];
        for (mut entry, want) in cases {
            name_in(&mut entry, ours);
            assert_eq!(entry["kubernetes"], want);
        }
    }

    /// A token made of YAML-special characters stays one string.
    #[test]
    fn odd_tokens_stay_strings() {
        for token in ["123", "true", "a: b", "#x", "'q'"] {
            let text = render("https://h:1", token, b"");
            let v: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("yaml");
            assert_eq!(
                v["users"][0]["user"]["token"].as_str(),
                Some(token),
                "{token}"
            );
        }
    }
}
