//! The linkerd-cni plugin's test harness, on the workspace's test kit (`linkerd_multus_e2e`): the pod
//! network of `linkerd_multus_e2e::pod_network` (bridge + host-local + the built `linkerd-cni` on a
//! fresh netns); pods in the real local apiserver; the expected rules. (TCP listeners and clients
//! come from `linkerd_multus_e2e::traffic`.)
#![allow(dead_code)] // each test binary uses a different part of the harness

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
pub use linkerd_multus_e2e::pod_network::*;
use serde_json::{json, Value};

/// Creates a Pending pod in the testbed: `spec` is the pod spec JSON; `metadata` extra metadata
/// (annotations, labels).
pub async fn create_pod(
    client: &Client,
    namespace: &str,
    name: &str,
    metadata: Value,
    spec: Value,
) {
    let mut meta = json!({"name": name, "namespace": namespace});
    if let (Some(m), Some(extra)) = (meta.as_object_mut(), metadata.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    let pod: Pod =
        serde_json::from_value(json!({"metadata": meta, "spec": spec})).expect("pod json");
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {namespace}/{name}: {e}"));
}

/// A meshed pod: an app container and a `linkerd-proxy` container, as Linkerd's injector with CNI
/// enabled leaves it (no `linkerd-init`).
pub fn meshed_spec() -> Value {
    json!({
        "automountServiceAccountToken": false,
        "containers": [
            {"name": "app", "image": "app:1"},
            {"name": "linkerd-proxy", "image": "proxy:1"}
        ]
    })
}

/// The expected rules of the harness' default plugin settings (inbound 4190/4191 ignored),
/// as `iptables-save` prints them, written out independently of the plugin's plan code.
pub fn default_expected_rules(uid: vocab::Uid) -> Vec<String> {
    vec![
        ":PROXY_INIT_OUTPUT -".into(),
        ":PROXY_INIT_REDIRECT -".into(),
        "-A PREROUTING -m comment --comment \"proxy-init/install-proxy-init-prerouting\" -j PROXY_INIT_REDIRECT".into(),
        "-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT".into(),
        format!("-A PROXY_INIT_OUTPUT -m owner --uid-owner {uid} -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN"),
        "-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN".into(),
        "-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140".into(),
        "-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4191,4190 -m comment --comment \"proxy-init/ignore-port-4191,4190\" -j RETURN".into(),
        "-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143".into(),
    ]
}

/// The directory holding the built `linkerd-cni`, as a runtime's `CNI_PATH`.
pub fn bin_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_linkerd-cni"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

/// A result as a plugin that set up an interface prints it.
pub fn prev_result() -> Value {
    json!({"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/run/netns/x"}],
        "ips": [{"interface": 0, "address": "10.9.8.7/24"}], "dns": {}})
}
