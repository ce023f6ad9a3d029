//! Events as the tests look for them: the operator files its Warnings inside the namespace they are
//! about (events.k8s.io/v1).

use k8s_openapi::api::events::v1::Event;
use kube::{Api, Client};

/// Events of `type_` (`Warning`, `Normal`) with `reason`, filed in `ns`.
pub async fn events_of(
    client: &Client,
    ns: &str,
    type_: &str,
    reason: &str,
) -> kube::Result<Vec<Event>> {
    Ok(Api::<Event>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some(type_))
        .collect())
}

/// Warning Events with `reason` filed in `ns`.
pub async fn warnings(client: &Client, ns: &str, reason: &str) -> kube::Result<Vec<Event>> {
    events_of(client, ns, "Warning", reason).await
}

/// Waits (the kit's deadline, failing with `description`) for a Warning Event with `reason` in `ns`
/// that `keep` accepts; returns it. A failed list is tried again.
pub async fn wait_for_warning(
    client: &Client,
    ns: &str,
    reason: &str,
    description: &str,
    keep: impl Fn(&Event) -> bool,
) -> Event {
    crate::eventually(description, || async {
        warnings(client, ns, reason)
            .await
            .ok()?
            .into_iter()
            .find(|e| keep(e))
    })
    .await
}
