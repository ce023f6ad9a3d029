//! `linkerd-cni-install`'s flags, as clap parses them; what clap cannot judge alone (the
//! `--chain-mode`/`--attach` pair) is judged where they are resolved ([`super::Settings::resolve`]).

use crate::aux_chain;
use crate::install_mode::ChainMode;
use rules::attach::Attach;
use std::path::PathBuf;
use std::time::Duration;
use vocab::{
    DEFAULT_AUX_CHAIN_NAME, DEFAULT_CNI_BIN_DIR, DEFAULT_CNI_NET_DIR, DEFAULT_KUBECONFIG_NAME,
    DEFAULT_SERVICE_ACCOUNT_DIR,
};

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

    /// `--attach`: the operator's flag, declared once by its owner ([`rules::attach`]).
    #[command(flatten)]
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

    /// Print the pods' rules backend this installer publishes for the node under --node-root (with
    /// `iptables-mode: auto`, the node's choice) as NodeMultus' `spec.iptables` JSON, and exit. For
    /// the test that holds it equal to the plugin's own choice on the same node.
    #[arg(long, hide = true, conflicts_with_all = ["once", "ready_check", "uninstall"])]
    pub print_iptables_backend: bool,

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

/// The apiserver's floor for a requested token lifetime (TokenRequest validation).
pub const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// The apiserver issues no token for less than [`MIN_TOKEN_LIFETIME`].
fn parse_token_lifetime(text: &str) -> Result<Duration, String> {
    vocab::duration::parse_at_least(text, MIN_TOKEN_LIFETIME)
}
