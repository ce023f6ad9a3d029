//! The installer's flags (each also an environment variable, as a DaemonSet sets them) and the
//! settings resolved from them.

use crate::aux_chain;
use crate::error::InstallError;
use rules::attach::Attach;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vocab::{
    AUX_CHAIN_FILE_NAME, DEFAULT_AUX_CHAIN_NAME, DEFAULT_CNI_BIN_DIR, DEFAULT_CNI_NET_DIR,
    DEFAULT_KUBECONFIG_NAME, DEFAULT_SERVICE_ACCOUNT_DIR, PLUGIN_TYPE,
};

/// Whether linkerd-cni is appended to the node's primary network config: a choice of its own, apart
/// from `--attach` (how Multus reaches pods), which only matters when it is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ChainMode {
    /// Append linkerd-cni as the last plugin of the primary network config (plain clusters).
    Append,
    /// Touch no primary network config: Multus runs the plugin, through a NetworkAttachmentDefinition
    /// (`--attach nad`; OpenShift, Multus clusters) or its auxiliary chain (`--attach aux-chain`).
    /// SIGTERM on a rollout leaves the binary and the kubeconfig (and the chain file) in place: NADs
    /// and the chain point at them, and a rolling update must not fail the pods scheduled meanwhile;
    /// on an uninstall (its DaemonSet deleted) it removes them.
    None,
}

impl ChainMode {
    /// The flag's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::None => "none",
        }
    }
}

/// Installs the linkerd-cni plugin on this node and keeps it installed until SIGTERM, which (in
/// `append` mode) removes what it added; in `none` and `aux-chain` modes SIGTERM removes it only on
/// an uninstall: when the apiserver says this pod's DaemonSet (POD_NAME, POD_NAMESPACE) is deleted,
/// or refuses the installer's own credential (asked within 5 s; a rollout, or an apiserver that
/// cannot be asked, leaves the node as it is, and `--uninstall` removes it by hand).
///
/// Every pass: copies the plugin binary into the CNI bin dir, writes the plugin's kubeconfig from this
/// pod's service account, and then, by --chain-mode: `append` makes linkerd-cni the last plugin of the
/// primary network config, the first *.conflist/*.conf/*.json in the net dir; `aux-chain` writes
/// linkerd-cni's plugin config into Multus' auxiliary chain directory
/// (<aux-chain-dir>/<aux-chain-name>/linkerd-cni.conf) while the node's Multus runs that chain;
/// `none` writes no network config. Passes run when those directories or the service-account dir
/// change, and every few seconds as a safety net.
#[derive(Clone, Debug, clap::Parser)]
#[command(name = "linkerd-cni-install", version)]
pub struct Args {
    /// Node directory of CNI network configs, as the node sees it (written under --host-prefix).
    #[arg(long, env = "DEST_CNI_NET_DIR", default_value = DEFAULT_CNI_NET_DIR)]
    pub dest_cni_net_dir: PathBuf,

    /// Node directory of CNI plugin binaries (OpenShift: /var/lib/cni/bin).
    #[arg(long, env = "DEST_CNI_BIN_DIR", default_value = DEFAULT_CNI_BIN_DIR)]
    pub dest_cni_bin_dir: PathBuf,

    /// Log level of the linkerd-cni plugin: fills the template's __LOG_LEVEL__ (default "info") and,
    /// when given, replaces a literal "log_level" too.
    #[arg(long, env = "CNI_LOG_LEVEL")]
    pub cni_log_level: Option<String>,

    /// File name of the plugin's kubeconfig in the net dir.
    #[arg(long, env = "KUBECONFIG_FILE_NAME", default_value = DEFAULT_KUBECONFIG_NAME)]
    pub kubeconfig_name: String,

    /// `append`: chain linkerd-cni after the primary network (plain clusters); `none`: leave the
    /// network configs alone (Multus runs the plugin, as --attach says).
    #[arg(long, env = "CNI_CHAIN_MODE", value_enum, default_value_t = ChainMode::Append)]
    pub chain_mode: ChainMode,

    /// How Multus reaches pods, the operator's --attach (same values, same env): `nad` (a
    /// NetworkAttachmentDefinition; nothing more to write here) or `aux-chain`: put linkerd-cni into
    /// Multus' auxiliary CNI chain, which Multus runs for every pod (Multus v4.2.1+ configured with
    /// "auxiliaryCNIChainName"; OpenShift 4.18+, with --aux-chain-dir /run/multus/cni/net.d).
    /// `aux-chain` needs --chain-mode none: appended as well, the plugin would run twice per pod.
    #[arg(long, env = "ATTACH", default_value = "nad", value_parser = Attach::parse)]
    pub attach: Attach,

    /// In `aux-chain` mode, the chain to join: Multus' "auxiliaryCNIChainName" (OpenShift 4.18+:
    /// vendor-cni-chain). Nothing is written while the node's Multus names another chain or none.
    #[arg(long, env = "AUX_CHAIN_NAME", default_value = DEFAULT_AUX_CHAIN_NAME,
          value_parser = aux_chain::parse_name)]
    pub aux_chain_name: String,

    /// In `aux-chain` mode, the directory holding the chain's subdirectory, as the node sees it
    /// (written under --host-prefix): the directory of the config file Multus' "clusterNetwork"
    /// names, where Multus looks for <aux-chain-name>/*.conf. OpenShift 4.18+: /run/multus/cni/net.d
    /// (a tmpfs: rewritten after a reboot). In the other modes, linkerd-cni's file left there from
    /// `aux-chain` mode is removed (Multus would run linkerd-cni from it a second time).
    /// [default: --dest-cni-net-dir]
    #[arg(long, env = "AUX_CHAIN_DIR")]
    pub aux_chain_dir: Option<PathBuf>,

    /// Where thick Multus' daemon sees the node's root in its container: the daemon writes the
    /// shim's config with its own paths (OpenShift's `clusterNetwork`:
    /// /host/run/multus/cni/net.d/...), so this prefix is taken off them to get the node's path.
    /// The daemon's mounts say it, and they are not on the node: upstream's thick DaemonSet and
    /// OpenShift's network operator both mount under /host.
    #[arg(long, env = "MULTUS_HOST_PREFIX", default_value = vocab::DEFAULT_MULTUS_HOST_PREFIX)]
    pub multus_host_prefix: PathBuf,

    /// Linkerd's control-plane namespace (the operator's --linkerd-namespace). In `aux-chain` mode it
    /// is always in the node's view of the enabled namespaces (annotated or not, as its pods are
    /// always attached), which the installer keeps beside the plugin's kubeconfig
    /// (linkerd-multus-enabled-namespaces): the plugin passes a pod of any other namespace through
    /// without asking the apiserver.
    #[arg(long, env = "LINKERD_NAMESPACE", default_value = vocab::DEFAULT_LINKERD_NAMESPACE)]
    pub linkerd_namespace: String,

    /// Where the node's binary directories (/usr/sbin, /sbin, /usr/bin, /bin) are mounted, read
    /// only, for `iptables-mode: auto`: the installer decides the node's backend as the plugin does
    /// (no iptables binaries: nftables) to publish it in the NodeMultus. [default: --host-prefix, else /]
    #[arg(long, env = "NODE_ROOT")]
    pub node_root: Option<PathBuf>,

    /// Directory holding this pod's service-account `token` and `ca.crt`.
    #[arg(long, env = "SERVICE_ACCOUNT_DIR", default_value = DEFAULT_SERVICE_ACCOUNT_DIR)]
    pub service_account_dir: PathBuf,

    /// The linkerd-cni binary to install [default: linkerd-cni next to this installer].
    #[arg(long, env = "PLUGIN_BINARY")]
    pub plugin_binary: Option<PathBuf>,

    /// The plugin's network config template (Linkerd's ConfigMap key cni_network_config); without it
    /// and without --cni-network-config-file, Linkerd's defaults are used.
    #[arg(long, env = "CNI_NETWORK_CONFIG", hide_env_values = true)]
    pub cni_network_config: Option<String>,

    /// File holding the network config template; re-read every pass. Wins over CNI_NETWORK_CONFIG.
    #[arg(long, env = "CNI_NETWORK_CONFIG_FILE")]
    pub cni_network_config_file: Option<PathBuf>,

    /// Where the node's root is mounted in this container (e.g. /host); the dest dirs are written
    /// below it, while paths inside configs stay as the node sees them.
    #[arg(long, env = "CONTAINER_MOUNT_PREFIX")]
    pub host_prefix: Option<PathBuf>,

    /// Also remove the plugin binary: on SIGTERM in `append` mode, and with --uninstall (by default
    /// it stays, so pods already set up by it can still be torn down by the runtime). In `none` and
    /// `aux-chain` modes, on SIGTERM only on an uninstall (the DaemonSet deleted).
    #[arg(long, env = "UNINSTALL_BINARY")]
    pub uninstall_binary: bool,

    /// In `append` mode, append linkerd-cni even when the primary network config is Multus's own
    /// (type multus or multus-shim), which is refused by default: use `--chain-mode none` there.
    #[arg(long, env = "FORCE_APPEND_TO_MULTUS")]
    pub force_append_to_multus: bool,

    /// Service account (in this pod's namespace) whose token the plugin's kubeconfig holds, obtained
    /// by TokenRequest and bound to no pod, so it outlives this installer pod (Kubernetes 1.22+ binds
    /// a pod's own token to the pod). Renewed at 80% of --plugin-token-lifetime. The installer's
    /// account needs `create` on `serviceaccounts/token` for it. Unset: the plugin uses this pod's own
    /// token, which stops working once this pod is deleted.
    #[arg(long, env = "PLUGIN_SERVICE_ACCOUNT")]
    pub plugin_service_account: Option<String>,

    /// Lifetime asked for the plugin's token (`30m`, `24h`; at least 10m). The apiserver may shorten
    /// it (--service-account-max-token-expiration); renewal follows the lifetime it grants.
    #[arg(long, env = "PLUGIN_TOKEN_LIFETIME", default_value = "24h", value_parser = parse_token_lifetime)]
    pub plugin_token_lifetime: Duration,

    /// Install once and exit (non-zero if a step failed) instead of watching.
    #[arg(long)]
    pub once: bool,

    /// Remove what --chain-mode installs on this node, print what was removed and exit (non-zero
    /// if a removal failed): `aux-chain`, linkerd-cni's file in the chain directory (never the
    /// directory or another file in it); `append`, its entry in the network configs; every mode, the
    /// plugin's kubeconfig, and the binary with --uninstall-binary. Give the same --chain-mode and
    /// directories as the DaemonSet, after deleting it, when its installers could not remove it on
    /// SIGTERM (the apiserver unreachable then), e.g. from the installer's image with the node's root
    /// mounted at --host-prefix.
    #[arg(long, conflicts_with_all = ["once", "ready_check"])]
    pub uninstall: bool,

    /// Period of the safety-net pass when no file change is seen: e.g. 5s, 1m (a bare number is
    /// seconds).
    #[arg(long, env = "RESYNC", alias = "resync-seconds", value_name = "DURATION",
          default_value = vocab::DEFAULT_INSTALLER_RESYNC, value_parser = vocab::duration::flag)]
    pub resync: Duration,

    /// Status file inside this container (not on the node) where the running installer records after
    /// every pass whether the node is installed; read by --ready-check. Unset: none is written.
    #[arg(long, env = "READY_FILE")]
    pub ready_file: Option<PathBuf>,

    /// Check instead of installing: exit 0 if --ready-file says the node is installed and is fresh
    /// (the DaemonSet's readiness probe), else print why and exit 1.
    #[arg(long, requires = "ready_file", conflicts_with = "once")]
    pub ready_check: bool,

    /// This node's name (the DaemonSet sets it from spec.nodeName): the installer publishes what the
    /// node's Multus allows as the NodeMultus object of this name. Unset: nothing is published.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,

    /// This installer pod's name, named in the NodeMultus it publishes; on SIGTERM its DaemonSet
    /// (the pod's ownerReference) tells an uninstall from a rollout.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,

    /// This installer pod's namespace, named in the NodeMultus it publishes.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,

    /// API group of the NodeMultus kind (default: linkerd-multus.io). Tests point it at a CRD copy of
    /// their own, so what they publish is seen by no other test's operator.
    #[arg(long, env = "NODE_MULTUS_API_GROUP", hide = true)]
    pub node_multus_api_group: Option<String>,
}

/// Where and as whom the installer publishes its node's Multus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub node_name: String,
    /// `<namespace>/<name>` of this installer pod, when known.
    pub installer_pod: Option<String>,
    /// `--node-multus-api-group`; None: the CRD's own.
    pub api_group: Option<String>,
}

/// The apiserver's floor for a requested token lifetime (TokenRequest validation).
pub const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// The apiserver issues no token for less than [`MIN_TOKEN_LIFETIME`].
fn parse_token_lifetime(text: &str) -> Result<Duration, String> {
    vocab::duration::parse_at_least(text, MIN_TOKEN_LIFETIME)
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
    pub chain_mode: ChainMode,
    pub attach: Attach,
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

impl Args {
    /// Flags clap cannot judge alone: `--attach aux-chain` with `--chain-mode append` would run the
    /// plugin twice for every pod (from the primary config and from Multus' chain).
    pub fn check(&self) -> Result<(), String> {
        if self.attach == Attach::AuxChain && self.chain_mode == ChainMode::Append {
            return Err("--attach aux-chain needs --chain-mode none: appended to the primary network \
                 config as well, linkerd-cni would run twice for every pod (helm: attach=auxChain sets it)"
                .into());
        }
        Ok(())
    }
}

impl Settings {
    /// The flags that chose what this installer writes, for messages.
    pub fn mode_flags(&self) -> String {
        match (self.chain_mode, self.attach) {
            (ChainMode::None, Attach::AuxChain) => "--attach aux-chain".into(),
            (mode, _) => format!("--chain-mode {}", mode.name()),
        }
    }

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
    /// own path (for the default plugin binary). Both passed in so tests need no process state.
    pub fn resolve(
        args: Args,
        env: impl Fn(&str) -> Option<String>,
        installer: Option<&Path>,
    ) -> Self {
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
        Settings {
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
            chain_mode: args.chain_mode,
            attach: args.attach,
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(flags: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("linkerd-cni-install").chain(flags.iter().copied()))
            .expect("parses")
    }

    #[test]
    fn defaults() {
        let s = Settings::resolve(
            parse(&[]),
            |_| None,
            Some(Path::new("/usr/bin/linkerd-cni-install")),
        );
        assert_eq!(s.net_dir, PathBuf::from(DEFAULT_CNI_NET_DIR));
        assert_eq!(s.bin_dir, PathBuf::from(DEFAULT_CNI_BIN_DIR));
        assert_eq!(
            s.kubeconfig_node_path,
            format!("{DEFAULT_CNI_NET_DIR}/{DEFAULT_KUBECONFIG_NAME}")
        );
        assert_eq!(s.chain_mode, ChainMode::Append);
        assert_eq!(s.plugin_binary, PathBuf::from("/usr/bin/linkerd-cni"));
        assert_eq!(s.template, TemplateSource::Default);
        assert_eq!(s.service_host, None);
        assert_eq!(s.resync, Duration::from_secs(5));
    }

    /// `--resync` takes the operator's duration form; the old `--resync-seconds` still parses.
    #[test]
    fn resync_is_a_duration() {
        assert_eq!(parse(&["--resync=1m"]).resync, Duration::from_secs(60));
        assert_eq!(
            parse(&["--resync-seconds", "3600"]).resync,
            Duration::from_secs(3600)
        );
        let err = Args::try_parse_from(["x", "--resync=0"]).expect_err("zero");
        assert!(err.to_string().contains("--resync"), "{err}");
    }

    #[test]
    fn prefix_moves_writes_not_config_paths() {
        let args = parse(&[
            "--host-prefix",
            "/host",
            "--dest-cni-bin-dir",
            "/var/lib/cni/bin",
            "--chain-mode",
            "none",
        ]);
        let s = Settings::resolve(
            args,
            |k| (k == "KUBERNETES_SERVICE_HOST").then(|| "::1".into()),
            None,
        );
        assert_eq!(s.net_dir, PathBuf::from("/host/etc/cni/net.d"));
        assert_eq!(s.bin_dir, PathBuf::from("/host/var/lib/cni/bin"));
        assert_eq!(
            s.kubeconfig_node_path,
            format!("{DEFAULT_CNI_NET_DIR}/{DEFAULT_KUBECONFIG_NAME}")
        );
        assert_eq!(s.chain_mode, ChainMode::None);
        assert_eq!(s.service_host.as_deref(), Some("::1"));
    }

    #[test]
    fn template_file_wins_and_bad_mode_is_rejected() {
        let s = Settings::resolve(
            parse(&[
                "--cni-network-config",
                "{}",
                "--cni-network-config-file",
                "/t",
            ]),
            |_| None,
            None,
        );
        assert_eq!(s.template, TemplateSource::File("/t".into()));
        let s = Settings::resolve(
            parse(&["--cni-network-config", "{\"type\":1}"]),
            |_| None,
            None,
        );
        assert_eq!(s.template, TemplateSource::Text("{\"type\":1}".into()));
        assert!(Args::try_parse_from(["x", "--chain-mode", "prepend"]).is_err());
    }

    /// The node's name turns publishing on; the pod's name and namespace are named in what it publishes.
    #[test]
    fn node_name_turns_publishing_on() {
        let s = Settings::resolve(parse(&[]), |_| None, None);
        assert_eq!(s.publish, None);
        assert_eq!(s.net_dir_on_node, DEFAULT_CNI_NET_DIR);
        let s = Settings::resolve(parse(&["--node-name", ""]), |_| None, None);
        assert_eq!(s.publish, None, "an empty NODE_NAME publishes nothing");
        let s = Settings::resolve(
            parse(&[
                "--node-name=n1",
                "--pod-name=cni-abc",
                "--pod-namespace=linkerd-cni",
                "--host-prefix=/host",
            ]),
            |_| None,
            None,
        );
        assert_eq!(
            s.publish,
            Some(Publish {
                node_name: "n1".into(),
                installer_pod: Some("linkerd-cni/cni-abc".into()),
                api_group: None,
            })
        );
        assert_eq!(
            s.net_dir_on_node, DEFAULT_CNI_NET_DIR,
            "as the node sees it"
        );
        assert_eq!(
            s.own_pod,
            Some(OwnPod {
                namespace: "linkerd-cni".into(),
                name: "cni-abc".into()
            }),
            "asked about on SIGTERM"
        );
        let s = Settings::resolve(parse(&["--pod-name=cni-abc"]), |_| None, None);
        assert_eq!(s.own_pod, None, "no namespace: nothing to ask about");
    }

    /// `--attach` takes the operator's values and env name; aux-chain with append is refused, saying
    /// why, since the plugin would run twice per pod; the operator's spelling of a bad value too.
    #[test]
    fn attach_is_the_operators_and_refuses_append_with_the_aux_chain() {
        assert_eq!(parse(&[]).attach, Attach::Nad);
        assert_eq!(
            parse(&["--chain-mode=none", "--attach=aux-chain"]).check(),
            Ok(())
        );
        assert_eq!(parse(&["--attach=nad"]).check(), Ok(()));
        let err = parse(&["--attach=aux-chain"])
            .check()
            .expect_err("append + aux-chain");
        assert!(
            err.contains("needs --chain-mode none") && err.contains("twice"),
            "{err}"
        );
        let err = Args::try_parse_from(["x", "--attach", "auxChain"]).expect_err("helm's spelling");
        assert!(err.to_string().contains("nad or aux-chain"), "{err}");
        let err = Args::try_parse_from(["x", "--chain-mode", "aux-chain"]).expect_err("moved");
        assert!(err.to_string().contains("append, none"), "{err}");
    }

    /// `aux-chain` mode: the chain's name and directory, each with its env name (the chart sets
    /// them), resolved under the prefix; the directory defaults to the net dir.
    #[test]
    fn aux_chain_settings() {
        let s = Settings::resolve(
            parse(&["--chain-mode", "none", "--attach", "aux-chain"]),
            |_| None,
            None,
        );
        assert_eq!(s.attach, Attach::AuxChain);
        assert_eq!(s.mode_flags(), "--attach aux-chain");
        for mode in [ChainMode::Append, ChainMode::None] {
            let value = clap::ValueEnum::to_possible_value(&mode).expect("a value");
            assert_eq!(mode.name(), value.get_name());
        }
        assert_eq!(s.aux_chain.target.name, DEFAULT_AUX_CHAIN_NAME);
        assert_eq!(
            s.aux_chain.target.dir_on_node,
            PathBuf::from(DEFAULT_CNI_NET_DIR)
        );
        assert_eq!(
            s.aux_chain.file(),
            PathBuf::from(format!(
                "{DEFAULT_CNI_NET_DIR}/{DEFAULT_AUX_CHAIN_NAME}/{AUX_CHAIN_FILE_NAME}"
            ))
        );
        let s = Settings::resolve(
            parse(&[
                "--chain-mode=none",
                "--attach=aux-chain",
                "--aux-chain-name=my-chain",
                "--aux-chain-dir=/run/multus/cni/net.d",
                "--host-prefix=/host",
            ]),
            |_| None,
            None,
        );
        assert_eq!(s.aux_chain.dir, PathBuf::from("/host/run/multus/cni/net.d"));
        assert_eq!(
            s.aux_chain.file(),
            PathBuf::from("/host/run/multus/cni/net.d/my-chain/linkerd-cni.conf")
        );
        assert_eq!(
            s.aux_chain.target.file_on_node(),
            PathBuf::from("/run/multus/cni/net.d/my-chain/linkerd-cni.conf"),
            "as the node sees it"
        );
        let err = Args::try_parse_from(["x", "--aux-chain-name", "../etc"]).expect_err("bad name");
        assert!(
            err.to_string().contains("is not a CNI network name"),
            "{err}"
        );

        use clap::CommandFactory;
        let cmd = Args::command();
        let env = |id: &str| {
            cmd.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        assert_eq!(env("chain_mode").as_deref(), Some("CNI_CHAIN_MODE"));
        assert_eq!(env("attach").as_deref(), Some("ATTACH"));
        assert_eq!(env("aux_chain_name").as_deref(), Some("AUX_CHAIN_NAME"));
        assert_eq!(env("aux_chain_dir").as_deref(), Some("AUX_CHAIN_DIR"));
    }

    #[test]
    fn uninstall_runs_alone() {
        assert!(parse(&["--uninstall"]).uninstall);
        assert!(Settings::resolve(parse(&["--uninstall"]), |_| None, None).uninstall);
        assert!(Args::try_parse_from(["x", "--uninstall", "--once"]).is_err());
        assert!(
            Args::try_parse_from(["x", "--uninstall", "--ready-check", "--ready-file=/r"]).is_err()
        );
    }

    #[test]
    fn ready_check_needs_the_ready_file_and_no_once() {
        assert!(Args::try_parse_from(["x", "--ready-check"]).is_err());
        assert!(Args::try_parse_from(["x", "--ready-check", "--ready-file=/r", "--once"]).is_err());
        let args = parse(&["--ready-check", "--ready-file=/tmp/r"]);
        assert!(args.ready_check);
        let s = Settings::resolve(args, |_| None, None);
        assert_eq!(s.ready_file, Some(PathBuf::from("/tmp/r")));
    }
}
