//! What a pass reads: the flags resolved once (paths under the host prefix, the template's source,
//! the plugin's credential, the install mode) with the pod's environment.

use super::flags::Args;
use crate::aux_chain;
use crate::error::InstallError;
use crate::install_mode::{InstallMode, ModeError};
use std::path::{Path, PathBuf};
use std::time::Duration;
use vocab::{AUX_CHAIN_FILE_NAME, PLUGIN_TYPE};

/// Where and as whom the installer publishes its node's Multus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub node_name: String,
    /// `<namespace>/<name>` of this installer pod, when known.
    pub installer_pod: Option<String>,
    /// `--node-multus-api-group`; None: the CRD's own.
    pub api_group: Option<String>,
}

/// Where the plugin's token comes from (`--plugin-service-account`; [`crate::credential`] keeps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginCredential {
    /// This pod's own token from `--service-account-dir` (bound to the pod on Kubernetes 1.22+).
    PodToken,
    /// A TokenRequest for this service account in the installer's namespace.
    TokenRequest {
        service_account: String,
        lifetime: Duration,
    },
}

/// Where the network config template comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    Text(String),
    File(PathBuf),
    Default,
}

/// Everything a pass needs, resolved once from [`Args`] and the environment.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Net dir as this process writes it (prefix applied).
    pub net_dir: PathBuf,
    /// Bin dir as this process writes it (prefix applied).
    pub bin_dir: PathBuf,
    pub kubeconfig_name: String,
    /// The kubeconfig's path as the node (and so the plugin) sees it.
    pub kubeconfig_node_path: String,
    /// `--chain-mode` and `--attach`, resolved once ([`InstallMode::resolve`]).
    pub mode: InstallMode,
    pub service_account_dir: PathBuf,
    pub plugin_binary: PathBuf,
    pub template: TemplateSource,
    pub log_level_override: Option<String>,
    pub service_host: Option<String>,
    pub service_port: Option<String>,
    pub uninstall_binary: bool,
    pub force_append_to_multus: bool,
    pub once: bool,
    pub resync: Duration,
    pub ready_file: Option<PathBuf>,
    pub plugin_credential: PluginCredential,
    /// The net dir as the node sees it (what the NodeMultus names).
    pub net_dir_on_node: String,
    /// Publishing the node's Multus: None without `--node-name`.
    pub publish: Option<Publish>,
    /// The auxiliary chain (used in `aux-chain` mode only).
    pub aux_chain: AuxChain,
    /// `--uninstall`.
    pub uninstall: bool,
    /// `--node-root`: the node's binary directories below it (`iptables-mode: auto`).
    pub node_root: PathBuf,
    /// This installer pod (POD_NAMESPACE, POD_NAME): on SIGTERM its DaemonSet tells an uninstall
    /// from a rollout ([`crate::termination`]).
    pub own_pod: Option<OwnPod>,
    /// `--linkerd-namespace`: always in the view of the enabled namespaces ([`crate::namespace_view`]).
    pub linkerd_namespace: String,
}

/// This installer's pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnPod {
    pub namespace: String,
    pub name: String,
}

/// Where `aux-chain` mode puts linkerd-cni's file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxChain {
    /// The chain's name and directory as the node sees them.
    pub target: aux_chain::Target,
    /// The directory holding the chain's subdirectory as this process sees it (prefix applied).
    pub dir: PathBuf,
}

impl AuxChain {
    /// The chain's subdirectory as this process writes it.
    pub fn subdir(&self) -> PathBuf {
        self.dir.join(&self.target.name)
    }

    /// linkerd-cni's file as this process writes it.
    pub fn file(&self) -> PathBuf {
        self.subdir().join(AUX_CHAIN_FILE_NAME)
    }
}

impl Settings {
    /// `host:port` of the apiserver's in-cluster service, from the pod's environment.
    pub fn service_address(&self) -> Result<(&str, &str), InstallError> {
        let host = self
            .service_host
            .as_deref()
            .ok_or(InstallError::MissingEnv {
                name: "KUBERNETES_SERVICE_HOST",
            })?;
        let port = self
            .service_port
            .as_deref()
            .ok_or(InstallError::MissingEnv {
                name: "KUBERNETES_SERVICE_PORT",
            })?;
        Ok((host, port))
    }

    /// Resolves `args`; `env` looks up KUBERNETES_SERVICE_HOST/PORT and `installer` is this process'
    /// own path (for the default plugin binary). Both passed in so tests need no process state. Fails
    /// only on flags clap cannot judge alone: a `--chain-mode`/`--attach` pair naming no mode.
    pub fn resolve(
        args: Args,
        env: impl Fn(&str) -> Option<String>,
        installer: Option<&Path>,
    ) -> Result<Self, ModeError> {
        // The pair's one reading; nothing after it looks at either flag again.
        let mode = InstallMode::resolve(args.chain_mode, args.attach)?;
        let under_prefix = |dir: &Path| match &args.host_prefix {
            Some(prefix) => prefix.join(dir.strip_prefix("/").unwrap_or(dir)),
            None => dir.to_path_buf(),
        };
        let plugin_binary = args.plugin_binary.clone().unwrap_or_else(|| {
            installer
                .and_then(Path::parent)
                .unwrap_or(Path::new("."))
                .join(PLUGIN_TYPE)
        });
        let template = match (&args.cni_network_config_file, &args.cni_network_config) {
            (Some(file), _) => TemplateSource::File(file.clone()),
            (None, Some(text)) if !text.trim().is_empty() => TemplateSource::Text(text.clone()),
            _ => TemplateSource::Default,
        };
        let installer_pod = match (&args.pod_namespace, &args.pod_name) {
            (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
            (None, Some(name)) => Some(name.clone()),
            _ => None,
        };
        let own_pod = match (&args.pod_namespace, &args.pod_name) {
            (Some(namespace), Some(name)) if !namespace.is_empty() && !name.is_empty() => {
                Some(OwnPod {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })
            }
            _ => None,
        };
        let publish = args
            .node_name
            .clone()
            .filter(|n| !n.is_empty())
            .map(|node_name| Publish {
                node_name,
                installer_pod,
                api_group: args.node_multus_api_group.clone(),
            });
        let aux_dir_on_node = args
            .aux_chain_dir
            .clone()
            .unwrap_or_else(|| args.dest_cni_net_dir.clone());
        let aux_chain = AuxChain {
            dir: under_prefix(&aux_dir_on_node),
            target: aux_chain::Target {
                name: args.aux_chain_name.clone(),
                dir_on_node: aux_dir_on_node,
                multus_host_prefix: args.multus_host_prefix.clone(),
            },
        };
        let node_root = args
            .node_root
            .clone()
            .or_else(|| args.host_prefix.clone())
            .unwrap_or_else(|| PathBuf::from("/"));
        Ok(Settings {
            mode,
            node_root,
            aux_chain,
            own_pod,
            uninstall: args.uninstall,
            linkerd_namespace: args.linkerd_namespace.clone(),
            net_dir: under_prefix(&args.dest_cni_net_dir),
            net_dir_on_node: args.dest_cni_net_dir.to_string_lossy().into_owned(),
            publish,
            bin_dir: under_prefix(&args.dest_cni_bin_dir),
            kubeconfig_node_path: args
                .dest_cni_net_dir
                .join(&args.kubeconfig_name)
                .to_string_lossy()
                .into_owned(),
            kubeconfig_name: args.kubeconfig_name,
            service_account_dir: args.service_account_dir,
            plugin_binary,
            template,
            log_level_override: args.cni_log_level,
            service_host: env("KUBERNETES_SERVICE_HOST").filter(|v| !v.is_empty()),
            service_port: env("KUBERNETES_SERVICE_PORT").filter(|v| !v.is_empty()),
            uninstall_binary: args.uninstall_binary,
            force_append_to_multus: args.force_append_to_multus,
            once: args.once,
            resync: args.resync,
            ready_file: args.ready_file,
            plugin_credential: match args.plugin_service_account.filter(|a| !a.is_empty()) {
                Some(service_account) => PluginCredential::TokenRequest {
                    service_account,
                    lifetime: args.plugin_token_lifetime,
                },
                None => PluginCredential::PodToken,
            },
        })
    }
}
