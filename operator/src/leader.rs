//! Leader election through a coordination.k8s.io/v1 Lease (crate `kube-lease-manager`).
//!
//! Only the leader writes NADs and Events; every replica keeps its watches warm (so `/ready` and a
//! takeover are immediate) and serves the webhook. Without `--leader-elect` this replica is always
//! the leader.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Seconds a leader's claim is valid without renewal; a new leader takes over at most this late.
const LEASE_SECONDS: u64 = 15;
/// The leader renews this long before its claim expires.
const GRACE_SECONDS: u64 = 5;
/// How long a shutting-down leader waits for the Lease release.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The Lease to hold (`--leader-elect`), which `check` also reads to know the current leader.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("cannot set up the leader-election Lease {namespace}/{name}")]
    Setup {
        namespace: String,
        name: String,
        #[source]
        source: LeaseManagerError,
    },
}

/// The Lease's server-side-apply field manager, unique per replica: the crate detects a competing
/// claim as an SSA conflict, which only happens between *different* managers. (A shared manager
/// let two replicas starting together both hold the Lease; the leader-election test caught it.)
fn lease_field_manager(identity: &str) -> String {
    let mut manager = format!("{}-lease-{identity}", vocab::FIELD_MANAGER);
    // Field managers are limited to 128 characters.
    while manager.len() > 128 {
        manager.pop();
    }
    manager
}

/// This replica's leadership, observed through [`Leadership::subscribe`].
pub struct Leadership {
    tx: watch::Sender<bool>,
    elected: Option<kube_lease_manager::LeaseManager>,
}

impl Leadership {
    /// Always the leader (single replica, `--leader-elect` off).
    pub fn always() -> Self {
        let (tx, _) = watch::channel(true);
        Self { tx, elected: None }
    }

    /// Prepares election on Lease `namespace/name` (creating it if absent) as `identity`.
    pub async fn elect(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
    ) -> Result<Self, LeaderError> {
        let manager = LeaseManagerBuilder::new(client, name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(LEASE_SECONDS)
            .with_grace(GRACE_SECONDS)
            .with_field_manager(lease_field_manager(identity))
            .build()
            .await
            .map_err(|source| LeaderError::Setup {
                namespace: namespace.to_string(),
                name: name.to_string(),
                source,
            })?;
        let (tx, _) = watch::channel(false);
        Ok(Self {
            tx,
            elected: Some(manager),
        })
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// Keeps the Lease (when electing) until `shutdown`, then releases it so another replica takes
    /// over at once instead of after the Lease expires.
    pub async fn run(self, shutdown: CancellationToken) {
        let Some(manager) = self.elected else {
            shutdown.cancelled().await;
            return;
        };
        let (mut rx, task) = manager.watch().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                changed = rx.changed() => {
                    if changed.is_err() {
                        tracing::error!("leader election stopped unexpectedly");
                        break;
                    }
                    let leading = *rx.borrow_and_update();
                    tracing::info!(leading, "leadership changed");
                    self.tx.send_replace(leading);
                }
            }
        }
        self.tx.send_replace(false);
        // Dropping the receiver makes the manager release the Lease and return.
        drop(rx);
        match tokio::time::timeout(RELEASE_TIMEOUT, task).await {
            Ok(Ok(Ok(_))) => tracing::info!("leader Lease released"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "releasing the leader Lease failed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "leader election task failed"),
            Err(_) => tracing::warn!("timed out releasing the leader Lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_manager_is_per_replica_and_bounded() {
        assert_ne!(lease_field_manager("pod-a"), lease_field_manager("pod-b"));
        assert!(lease_field_manager(&"x".repeat(300)).len() <= 128);
    }
}
