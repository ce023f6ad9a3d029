//! What the stand-in reads and composes, all pure: its own CNI config, the runtime's `CNI_ARGS`, a NAD's
//! `spec.config` turned into a delegate, and the `CNI_ARGS` Multus gives delegates.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// Where the stand-in keeps each sandbox's delegates for DEL when no `cniDir` is configured (Multus
/// keeps its own under /var/lib/cni/multus).
pub const DEFAULT_CACHE_DIR: &str = "/var/lib/cni/multus-stand-in";

/// The stand-in's own config, as the runtime hands it over (Multus' thin-plugin keys).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StandInConf {
    pub cni_version: String,
    #[serde(default)]
    pub name: String,
    /// The kubeconfig used to read pods and NADs (thick: none, the daemon's credential is used).
    #[serde(default)]
    pub kubeconfig: PathBuf,
    /// The cluster network: exactly one conf or conflist, run as the primary (`CNI_IFNAME`), unless
    /// `clusterNetwork` names its file.
    #[serde(default)]
    pub delegates: Vec<Value>,
    /// Multus' `clusterNetwork`, here only as the path of the cluster network's conf or conflist (read
    /// at each call; `delegates` is then ignored, as by Multus). Its directory holds the auxiliary chain.
    #[serde(default)]
    pub cluster_network: Option<String>,
    /// Multus' `auxiliaryCNIChainName` (v4.2.1+): the chain run for every pod after its networks
    /// ([`super::aux_chain`]).
    #[serde(default, rename = "auxiliaryCNIChainName")]
    pub auxiliary_cni_chain_name: Option<String>,
    #[serde(default)]
    pub cni_dir: Option<PathBuf>,
    /// Multus' `namespaceIsolation` (off by default): a pod may use the NADs of its own namespace
    /// and of `globalNamespaces` only.
    #[serde(default)]
    pub namespace_isolation: bool,
    /// Multus' `globalNamespaces`: a comma-separated list, read only with `namespaceIsolation`; unset,
    /// `default` alone is global.
    #[serde(default)]
    pub global_namespaces: Option<String>,
    /// Thick Multus' `daemonSocketDir` (a node path): set, the config is the daemon's generated one
    /// and its paths are the daemon's container paths ([`super::thick`]).
    #[serde(default)]
    pub daemon_socket_dir: Option<PathBuf>,
    /// Set by the runtime for CHECK and DEL.
    #[serde(default)]
    pub prev_result: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid stand-in config: {0}")]
pub struct ConfError(pub String);

impl StandInConf {
    pub fn parse(stdin: &[u8]) -> Result<Self, ConfError> {
        let mut conf: Self = serde_json::from_slice(stdin).map_err(|e| ConfError(e.to_string()))?;
        if let Some(dir) = &conf.daemon_socket_dir {
            // The daemon reads its config's paths in its container and uses its own credential.
            let daemon = super::thick::Daemon::load(dir).map_err(ConfError)?;
            if let Some(path) = &conf.cluster_network {
                let on_node = daemon.on_node(path).map_err(ConfError)?;
                conf.cluster_network = Some(on_node.to_string_lossy().into_owned());
            }
            conf.kubeconfig = daemon.kubeconfig;
        }
        if conf.kubeconfig.as_os_str().is_empty() {
            return Err(ConfError("no kubeconfig (and no daemonSocketDir)".into()));
        }
        match &conf.cluster_network {
            Some(path) if !path.contains('/') => Err(ConfError(format!(
                "clusterNetwork {path:?}: the stand-in reads it only as a file path (Multus also \
                 takes a NAD or config name)"
            ))),
            Some(_) => Ok(conf),
            None if conf.delegates.len() != 1 => Err(ConfError(format!(
                "`delegates` must hold exactly one cluster network (a conf or conflist), found {}",
                conf.delegates.len()
            ))),
            None => {
                conf.check_cluster_version(&conf.delegates[0])?;
                Ok(conf)
            }
        }
    }

    /// Its result is printed as the stand-in's: the runtime expects the version it asked for.
    fn check_cluster_version(&self, cluster: &Value) -> Result<(), ConfError> {
        let cluster_version = cluster.get("cniVersion").and_then(Value::as_str);
        if cluster_version != Some(self.cni_version.as_str()) {
            return Err(ConfError(format!(
                "the cluster network's cniVersion ({}) must be the stand-in's ({})",
                cluster_version.unwrap_or("none"),
                self.cni_version
            )));
        }
        Ok(())
    }

    /// Whether a pod of `pod_namespace` may use a NAD of `nad_namespace`, as Multus decides it
    /// (`Err`: its reason, worded as Multus' `GetNetworkDelegates`).
    pub fn may_use(&self, pod_namespace: &str, nad_namespace: &str) -> Result<(), String> {
        if !self.namespace_isolation || pod_namespace == nad_namespace {
            return Ok(());
        }
        // Multus reads an empty globalNamespaces as unset.
        let global = self
            .global_namespaces
            .as_deref()
            .filter(|g| !g.is_empty())
            .unwrap_or("default");
        if global.split(',').any(|ns| ns.trim() == nad_namespace) {
            return Ok(());
        }
        Err(format!(
            "GetNetworkDelegates: namespace isolation enabled, annotation violates permission, pod \
             is in namespace {pod_namespace} but refers to target namespace {nad_namespace}"
        ))
    }

    /// The cluster network's config: `delegates`' one entry, or the file `clusterNetwork` names, read
    /// now (Multus: a `.conflist` as a list, anything else as one plugin's config).
    pub fn cluster_network(&self) -> Result<Value, ConfError> {
        let Some(path) = &self.cluster_network else {
            return Ok(self.delegates[0].clone());
        };
        let bad = |why: String| ConfError(format!("clusterNetwork {path}: {why}"));
        let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let config: Value = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
        if path.ends_with(".conflist") {
            let plugins = config.get("plugins").and_then(Value::as_array);
            if plugins.is_none_or(Vec::is_empty)
                || !config.get("name").is_some_and(Value::is_string)
            {
                return Err(bad("a conflist needs a name and plugins".into()));
            }
        } else if config
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(bad("no 'type'; perhaps this is a .conflist?".into()));
        }
        self.check_cluster_version(&config)?;
        Ok(config)
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.cni_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE_DIR))
    }
}

/// `K=V;K=V` as the runtime passes `CNI_ARGS`; items without `=` are dropped.
pub fn parse_cni_args(args: &str) -> Vec<(String, String)> {
    args.split(';')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn cni_arg<'a>(args: &'a [(String, String)], key: &str) -> Option<&'a str> {
    args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The pod a sandbox belongs to, as Multus identifies it to delegates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub infra_container_id: String,
}

/// Exactly the `CNI_ARGS` Multus passes each delegate.
pub fn delegate_cni_args(pod: &PodRef) -> Vec<(String, String)> {
    [
        ("IgnoreUnknown", "true"),
        ("K8S_POD_NAMESPACE", &pod.namespace),
        ("K8S_POD_NAME", &pod.name),
        ("K8S_POD_INFRA_CONTAINER_ID", &pod.infra_container_id),
        ("K8S_POD_UID", &pod.uid),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The `CNI_ARGS` Multus passes each delegate: [`delegate_cni_args`], then the runtime's own
/// (`runtime`), each filling a key of Multus' that is empty or else appended, duplicates and all
/// (Multus' `CreateCNIRuntimeConf`).
pub fn delegate_runtime_args(pod: &PodRef, runtime: &[(String, String)]) -> Vec<(String, String)> {
    let mut args = delegate_cni_args(pod);
    for (key, value) in runtime {
        match args
            .iter_mut()
            .find(|(k, v)| k == key && v.is_empty() && !value.is_empty())
        {
            Some(slot) => slot.1 = value.clone(),
            None => args.push((key.clone(), value.clone())),
        }
    }
    args
}

/// A NAD's `spec.config` as the delegate config Multus runs: its own cniVersion (required), the NAD's
/// name when the config has none. Plain errors; the caller names the NAD.
pub fn delegate_config(spec_config: Option<&str>, nad_name: &str) -> Result<Value, String> {
    let text = spec_config
        .filter(|c| !c.trim().is_empty())
        .ok_or("its spec.config is empty")?;
    let mut config: Value =
        serde_json::from_str(text).map_err(|e| format!("its spec.config is not JSON: {e}"))?;
    let obj = config
        .as_object_mut()
        .ok_or("its spec.config is not a JSON object")?;
    if !obj.contains_key("type") && !obj.contains_key("plugins") {
        return Err("its spec.config has neither `type` nor `plugins`".into());
    }
    if !obj.get("cniVersion").is_some_and(Value::is_string) {
        return Err("its spec.config has no cniVersion".into());
    }
    obj.entry("name")
        .or_insert_with(|| Value::from(nad_name.to_string()));
    Ok(config)
}

/// The interface of the `index`th (0-based) attachment: the pod's choice, else `net1`, `net2`, ...
pub fn delegate_ifname(interface: Option<&str>, index: usize) -> String {
    interface.map_or_else(|| format!("net{}", index + 1), str::to_string)
}

/// A CNI error object as a plugin prints it on stdout.
pub fn error_json(cni_version: &str, code: u32, msg: &str) -> Value {
    serde_json::json!({"cniVersion": cni_version, "code": code, "msg": msg})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conf_needs_exactly_one_cluster_network() {
        let ok = json!({"cniVersion": "0.3.1", "name": "multus", "type": "multus-stand-in",
            "kubeconfig": "/k", "delegates": [{"cniVersion": "0.3.1", "name": "k8s", "plugins": []}]});
        let conf = StandInConf::parse(ok.to_string().as_bytes()).unwrap();
        assert_eq!(conf.cluster_network().unwrap()["name"], "k8s");
        assert_eq!(conf.auxiliary_cni_chain_name, None);
        assert_eq!(conf.cache_dir(), PathBuf::from(DEFAULT_CACHE_DIR));
        for bad in [
            json!({"cniVersion": "0.3.1", "kubeconfig": "/k", "delegates": []}),
            json!({"cniVersion": "0.3.1", "kubeconfig": "/k", "delegates": [{}, {}]}),
            json!({"cniVersion": "0.3.1", "delegates": [{}]}),
            json!({"kubeconfig": "/k", "delegates": [{}]}),
            json!({"cniVersion": "0.3.1", "kubeconfig": "/k", "delegates": [{"cniVersion": "1.0.0"}]}),
        ] {
            let err = StandInConf::parse(bad.to_string().as_bytes()).unwrap_err();
            assert!(
                err.to_string().starts_with("invalid stand-in config"),
                "{err}"
            );
        }
    }

    /// `clusterNetwork` names the cluster network's file, read at each call (Multus ignores
    /// `delegates` then); only a path is taken, and the file must be a config of the right version.
    #[test]
    fn cluster_network_is_read_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("10-k8s.conflist");
        let conf = |path: &std::path::Path| {
            json!({"cniVersion": "0.4.0", "kubeconfig": "/k", "clusterNetwork": path,
                "auxiliaryCNIChainName": "vendor-cni-chain", "delegates": [{}, {}]})
        };
        let parsed = StandInConf::parse(conf(&list).to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed.auxiliary_cni_chain_name.as_deref(),
            Some("vendor-cni-chain")
        );
        let missing = parsed.cluster_network().unwrap_err().to_string();
        assert!(missing.contains("10-k8s.conflist"), "{missing}");
        std::fs::write(
            &list,
            r#"{"cniVersion": "0.4.0", "name": "k8s", "plugins": [{"type": "bridge"}]}"#,
        )
        .unwrap();
        assert_eq!(parsed.cluster_network().unwrap()["name"], "k8s");
        for (body, why) in [
            (
                r#"{"cniVersion": "0.4.0", "name": "k8s", "plugins": []}"#,
                "needs a name and plugins",
            ),
            (
                r#"{"cniVersion": "0.3.1", "name": "k8s", "plugins": [{"type": "b"}]}"#,
                "must be the stand-in's",
            ),
            ("{", "clusterNetwork"),
        ] {
            std::fs::write(&list, body).unwrap();
            let err = parsed.cluster_network().unwrap_err().to_string();
            assert!(err.contains(why), "{body}: {err}");
        }
        let single = dir.path().join("10-k8s.conf");
        std::fs::write(
            &single,
            r#"{"cniVersion": "0.4.0", "name": "k8s", "plugins": [{"type": "b"}]}"#,
        )
        .unwrap();
        let parsed = StandInConf::parse(conf(&single).to_string().as_bytes()).unwrap();
        let err = parsed.cluster_network().unwrap_err().to_string();
        assert!(err.contains("perhaps this is a .conflist"), "{err}");

        let by_name = json!({"cniVersion": "0.4.0", "kubeconfig": "/k", "clusterNetwork": "k8s"});
        let err = StandInConf::parse(by_name.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("only as a file path"), "{err}");
    }

    /// The thick daemon's generated config: no kubeconfig, its paths in the daemon's container.
    /// With the daemon's file in `daemonSocketDir`, clusterNetwork is read on the node and the
    /// daemon's credential used; without it, the call fails as the shim does without its daemon.
    #[test]
    fn a_thick_config_reads_through_the_daemons_mounts() {
        let node = tempfile::tempdir().unwrap();
        let socket = node.path().join("run/multus/socket");
        let nets = node.path().join("run/multus/cni/net.d");
        std::fs::create_dir_all(&socket).unwrap();
        std::fs::create_dir_all(&nets).unwrap();
        std::fs::write(
            nets.join("10-k8s.conf"),
            r#"{"cniVersion": "0.3.1", "name": "k8s", "type": "bridge"}"#,
        )
        .unwrap();
        let generated = json!({"cniVersion": "0.3.1", "name": "multus-cni-network",
            "type": "multus-shim", "clusterNetwork": "/host/run/multus/cni/net.d/10-k8s.conf",
            "namespaceIsolation": true, "globalNamespaces": "default,openshift-multus",
            "auxiliaryCNIChainName": "vendor-cni-chain", "daemonSocketDir": socket});
        let err = StandInConf::parse(generated.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("daemon is not running"), "{err}");
        let daemon = json!({"kubeconfig": "/daemon.kubeconfig", "mounts": [
            {"container": "/host/run/multus/cni/net.d", "node": nets},
            {"container": "/hostroot", "node": "/"}]});
        std::fs::write(
            socket.join(super::super::thick::DAEMON_FILE),
            daemon.to_string(),
        )
        .unwrap();
        let conf = StandInConf::parse(generated.to_string().as_bytes()).unwrap();
        assert_eq!(conf.kubeconfig, PathBuf::from("/daemon.kubeconfig"));
        assert_eq!(conf.cluster_network().unwrap()["name"], "k8s");
        let dir = super::super::aux_chain::conf_dir(conf.cluster_network.as_deref()).unwrap();
        assert_eq!(dir, nets, "the chain's directory on the node");
        let mut outside = generated.clone();
        outside["clusterNetwork"] = json!("/host/etc/cni/net.d/10-k8s.conf");
        let err = StandInConf::parse(outside.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("not mounted"), "{err}");
    }

    #[test]
    fn cni_args_round_trip_and_delegates_get_multus_args() {
        let args = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;junk");
        assert_eq!(cni_arg(&args, "K8S_POD_NAME"), Some("p"));
        assert_eq!(cni_arg(&args, "K8S_POD_UID"), None);
        assert_eq!(args.len(), 3);
        let pod = PodRef {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u-1".into(),
            infra_container_id: "c1".into(),
        };
        let joined: Vec<String> = delegate_cni_args(&pod)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            joined.join(";"),
            "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1"
        );
        // The runtime's args follow (as the real Multus passes them); an empty one of Multus' is filled.
        let no_uid = PodRef {
            uid: String::new(),
            ..pod
        };
        let runtime = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAME=p;K8S_POD_UID=u-2");
        let joined: Vec<String> = delegate_runtime_args(&no_uid, &runtime)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            joined.join(";"),
            "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1;\
             K8S_POD_UID=u-2;IgnoreUnknown=1;K8S_POD_NAME=p"
        );
    }

    #[test]
    fn nad_config_becomes_a_delegate_or_a_reason() {
        let named = delegate_config(
            Some(r#"{"cniVersion":"1.0.0","type":"linkerd-cni"}"#),
            "nad",
        );
        assert_eq!(
            named.unwrap(),
            json!({"cniVersion": "1.0.0", "type": "linkerd-cni", "name": "nad"})
        );
        let own = delegate_config(
            Some(r#"{"cniVersion":"0.4.0","name":"mine","plugins":[]}"#),
            "nad",
        );
        assert_eq!(own.unwrap()["name"], "mine");
        for (config, why) in [
            (None, "empty"),
            (Some(" "), "empty"),
            (Some("{"), "not JSON"),
            (Some("[]"), "not a JSON object"),
            (
                Some(r#"{"cniVersion":"1.0.0"}"#),
                "neither `type` nor `plugins`",
            ),
            (Some(r#"{"type":"x"}"#), "no cniVersion"),
        ] {
            let err = delegate_config(config, "nad").unwrap_err();
            assert!(err.contains(why), "{config:?}: {err}");
        }
    }

    /// Multus' namespace isolation: off, any namespace; on, the pod's own and the global ones
    /// (`default` when `globalNamespaces` is unset, only the listed ones when it is set).
    #[test]
    fn namespace_isolation_allows_own_and_global_namespaces() {
        let conf = |extra: Value| {
            let mut c = json!({"cniVersion": "0.3.1", "kubeconfig": "/k",
                "delegates": [{"cniVersion": "0.3.1"}]});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            StandInConf::parse(c.to_string().as_bytes()).unwrap()
        };
        let open = conf(json!({}));
        let isolated = conf(json!({"namespaceIsolation": true}));
        let listed = conf(json!({"namespaceIsolation": true,
            "globalNamespaces": "openshift-multus, shared"}));
        let cases = [
            (&open, "app", "other", true),
            (&isolated, "app", "app", true),
            (&isolated, "app", "default", true),
            (&isolated, "app", "shared", false),
            (&listed, "app", "shared", true),
            (&listed, "app", "openshift-multus", true),
            (&listed, "app", "default", false),
            (&listed, "shared", "shared", true),
        ];
        for (c, pod_ns, nad_ns, allowed) in cases {
            let got = c.may_use(pod_ns, nad_ns);
            assert_eq!(got.is_ok(), allowed, "{pod_ns} → {nad_ns}: {got:?}");
        }
        let why = isolated.may_use("app", "shared").unwrap_err();
        assert_eq!(
            why,
            "GetNetworkDelegates: namespace isolation enabled, annotation violates permission, pod \
             is in namespace app but refers to target namespace shared"
        );
        // An empty globalNamespaces is unset to Multus: `default` alone.
        let empty = conf(json!({"namespaceIsolation": true, "globalNamespaces": ""}));
        assert!(empty.may_use("app", "default").is_ok());
        assert!(empty.may_use("app", "shared").is_err());
    }

    #[test]
    fn interfaces_are_the_pods_choice_or_net_n() {
        assert_eq!(delegate_ifname(None, 0), "net1");
        assert_eq!(delegate_ifname(None, 2), "net3");
        assert_eq!(delegate_ifname(Some("x9"), 0), "x9");
    }
}
