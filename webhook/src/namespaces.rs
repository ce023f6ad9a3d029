//! Namespace annotations for the decision, from a watch-fed cache of namespaces. A namespace the cache
//! has not seen yet (created a moment ago) costs one direct GET.
//!
//! In the operator the cache shares the controller's namespace watch and store ([`watch`] +
//! [`slim`], one copy per process); alone (tests, benchmarks) it runs the same watch itself.

use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, NamespaceStatus};
use kube::runtime::reflector::{self, reflector, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

/// Namespaces as the webhook sees them.
#[derive(Clone)]
pub struct NamespaceCache {
    store: Store<Namespace>,
    api: Api<Namespace>,
}

impl NamespaceCache {
    /// The cache and the future that keeps it filled; the future runs until dropped (the watcher
    /// retries with backoff on errors, so it never ends by itself).
    pub fn new(client: Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let api = Api::<Namespace>::all(client);
        let (store, writer) = reflector::store();
        let feed = reflector(writer, watch(api.clone(), watcher::Config::default()))
            .default_backoff()
            .for_each(|event| async move {
                if let Err(error) = event {
                    tracing::warn!(%error, "namespace watch failed; retrying");
                }
            });
        (Self { store, api }, feed)
    }

    /// The same cache reading `store`, which another watch of [`watch`] keeps filled.
    pub fn sharing(&self, store: Store<Namespace>) -> Self {
        Self {
            store,
            api: self.api.clone(),
        }
    }

    /// The namespace as last seen by the watch, if it was.
    pub fn cached(&self, name: &str) -> Option<Arc<Namespace>> {
        self.store.get(&ObjectRef::new(name))
    }

    /// The namespace from the apiserver, for one the cache has not seen yet.
    pub async fn fetch(&self, name: &str) -> Result<Arc<Namespace>, kube::Error> {
        tracing::debug!(
            namespace = name,
            "namespace not in the cache yet; reading it"
        );
        Ok(Arc::new(self.api.get(name).await?))
    }
}

/// The namespace watch of the process: every namespace [`slim`]med before a store keeps it. Kube's
/// default list+watch: streaming lists are refused by older apiservers.
pub fn watch(
    api: Api<Namespace>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<Namespace>, watcher::Error>> + Send + 'static {
    watcher(api, config).modify(slim)
}

/// Annotations written by `kubectl apply` hold a copy of the whole object; never a decision input.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Keeps what the webhook's decision and the controller read (annotations, deletion timestamp,
/// phase, the admission policy binding's label) and what a store keys on (name, uid, version):
/// managedFields and labels made up most of the ~3.5 KB each namespace cost at 10,000 (heaptrack).
pub fn slim(ns: &mut Namespace) {
    let meta = &mut ns.metadata;
    meta.managed_fields = None;
    meta.labels = meta
        .labels
        .take()
        .map(|mut labels| {
            labels.retain(|k, _| k == vocab::ADMISSION_NAMESPACE_LABEL);
            labels
        })
        .filter(|labels| !labels.is_empty());
    meta.owner_references = None;
    meta.finalizers = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    ns.spec = None;
    ns.status = ns.status.take().map(|s| NamespaceStatus {
        phase: s.phase,
        conditions: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slim_keeps_the_decision_inputs() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
            ManagedFieldsEntry, ObjectMeta, Time,
        };
        let annotations: std::collections::BTreeMap<String, String> = [
            (vocab::MULTUS_ANNOTATION, "enabled"),
            (vocab::INJECT_ANNOTATION, "enabled"),
            (vocab::OPENSHIFT_UID_RANGE_ANNOTATION, "1000650000/10000"),
            (LAST_APPLIED, "{\"a whole\":\"object\"}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let mut ns = Namespace {
            metadata: ObjectMeta {
                name: Some("apps".into()),
                uid: Some("u-1".into()),
                annotations: Some(annotations.clone()),
                labels: Some(
                    [
                        ("team".to_string(), "a".to_string()),
                        (
                            vocab::ADMISSION_NAMESPACE_LABEL.to_string(),
                            "enabled".to_string(),
                        ),
                    ]
                    .into(),
                ),
                managed_fields: Some(vec![ManagedFieldsEntry::default()]),
                deletion_timestamp: Some(Time(Default::default())),
                ..Default::default()
            },
            spec: Some(Default::default()),
            status: Some(NamespaceStatus {
                phase: Some("Terminating".into()),
                conditions: Some(vec![Default::default()]),
            }),
        };
        slim(&mut ns);
        let mut want = annotations;
        want.remove(LAST_APPLIED);
        assert_eq!(ns.metadata.annotations, Some(want));
        assert_eq!(ns.metadata.name.as_deref(), Some("apps"));
        assert_eq!(ns.metadata.uid.as_deref(), Some("u-1"));
        let admission = [(
            vocab::ADMISSION_NAMESPACE_LABEL.to_string(),
            "enabled".to_string(),
        )];
        assert_eq!(ns.metadata.labels, Some(admission.into()));
        assert_eq!(ns.metadata.managed_fields, None);
        assert!(ns.metadata.deletion_timestamp.is_some());
        assert_eq!(
            ns.status.and_then(|s| s.phase).as_deref(),
            Some("Terminating")
        );
        assert_eq!(ns.spec, None);
    }
}
