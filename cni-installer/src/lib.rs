//! The node installer behind `linkerd-cni-install`: puts the linkerd-cni plugin on a node and keeps it
//! there: the binary, its kubeconfig, and by `--chain-mode`
//! - `append`: an entry at the end of the primary network config, taken back out on SIGTERM;
//! - `aux-chain`: a plugin config in Multus' auxiliary CNI chain directory
//!   (`<--aux-chain-dir>/<--aux-chain-name>/linkerd-cni.conf`, Multus v4.2.1+ with
//!   `auxiliaryCNIChainName`, OpenShift 4.18+), written only while the node's Multus runs that chain;
//! - `none`: nothing more (NADs point at the binary and the kubeconfig).
//!
//! In `none` and `aux-chain` modes SIGTERM leaves the node as it is on a rollout (it must not start
//! pods unmeshed or failing) and removes what the mode installed on an uninstall, told apart by the
//! installer's DaemonSet ([`termination`]); `--uninstall` removes it by hand.
//!
//! Pure decisions, each table-tested: [`install_mode`] (`--chain-mode` and `--attach`, read once),
//! [`primary`] (which file the runtime uses), [`chain`] (append / remove the entry), [`aux_chain`]
//! (write / refuse the chain file), [`kubeconfig`], [`revert`],
//! [`ready`] (the readiness probe's verdict), [`ownership`] (what an uninstall may remove), and
//! Linkerd's config template through [`rules::cni_template`]. The I/O shell: [`files`] (atomic
//! writes), [`installer`] (one pass, the uninstall), [`multus`] (the node's Multus, read through
//! [`rules::multus_node`]), [`publish`] (it, and the chain file's state, as the node's NodeMultus),
//! [`run`] (watch loop, signals, `--uninstall`).

pub mod args;
pub mod aux_chain;
pub mod chain;
pub mod credential;
pub mod error;
pub mod files;
pub mod install_mode;
pub mod installer;
pub mod kubeconfig;
pub mod multus;
pub mod namespace_view;
pub mod ownership;
pub mod primary;
pub mod publish;
pub mod ready;
pub mod revert;
pub mod run;
pub mod termination;

pub use args::{Args, ChainMode, Settings};
pub use error::InstallError;
pub use installer::{Installer, Report};
pub use run::{main, run};

/// Logs to stderr (the container log), `RUST_LOG` filtering, `info` by default. `notify` logs its
/// own bookkeeping when a watched directory is deleted (the kernel already dropped the watch) at
/// warn level; nothing to act on, so only its errors show by default.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,notify=error"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal; container logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
}
