//! The node installer behind `linkerd-cni-install`: puts the linkerd-cni plugin on a node and keeps it
//! there (binary, kubeconfig, and in `append` mode an entry at the end of the primary network config),
//! and in `append` mode takes it all back out on SIGTERM (`none` mode leaves the node as it is: NADs
//! point at the binary and the kubeconfig).
//!
//! Pure decisions, each table-tested: [`primary`] (which file the runtime uses), [`chain`] (append /
//! remove the entry), [`kubeconfig`], [`revert`], [`ready`] (the readiness probe's verdict), and
//! Linkerd's config template through [`rules::cni_template`]. The I/O shell: [`files`] (atomic
//! writes), [`installer`] (one pass), [`multus`] (the node's Multus, read through
//! [`rules::multus_node`]), [`publish`] (it, as the node's NodeMultus), [`run`] (watch loop and
//! signals).

pub mod args;
pub mod chain;
pub mod credential;
pub mod error;
pub mod files;
pub mod installer;
pub mod kubeconfig;
pub mod multus;
pub mod primary;
pub mod publish;
pub mod ready;
pub mod revert;
pub mod run;

pub use args::{Args, ChainMode, Settings};
pub use error::InstallError;
pub use installer::{Installer, Report};
pub use run::{main, run};

/// Logs to stderr (the container log), `RUST_LOG` filtering, `info` by default.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal; container logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .try_init();
}
