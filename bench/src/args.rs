//! The arguments every operator bench takes, flattened into each one's own.

use std::path::PathBuf;

/// The control plane and the operator binary a bench runs.
#[derive(clap::Args, Debug, Clone)]
pub struct OperatorBenchArgs {
    /// Kubeconfig of a dedicated control plane (the fan-out and shared parts create thousands of
    /// namespaces there).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The release `linkerd-multus-operator` binary.
    #[arg(long)]
    pub operator: PathBuf,
}

impl OperatorBenchArgs {
    /// A client for the control plane.
    pub async fn client(&self) -> kube::Client {
        linkerd_multus_e2e::client_from(&self.kubeconfig).await
    }
}
