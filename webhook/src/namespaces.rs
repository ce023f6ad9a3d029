//! Namespace annotations for the decision, from a watch-fed cache of namespace metadata. A namespace
//! the cache has not seen yet (created a moment ago) costs one direct GET.

use std::collections::BTreeMap;
use std::future::Future;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, reflector, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

/// Namespace metadata as the webhook sees it.
#[derive(Clone)]
pub struct NamespaceCache {
    store: Store<PartialObjectMeta<Namespace>>,
    api: Api<PartialObjectMeta<Namespace>>,
}

impl NamespaceCache {
    /// The cache and the future that keeps it filled; the future runs until dropped (the watcher
    /// retries with backoff on errors, so it never ends by itself).
    pub fn new(client: Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let api = Api::<PartialObjectMeta<Namespace>>::all(client);
        let (store, writer) = reflector::store();
        // Keep kube's default list+watch: streaming lists are refused by older apiservers.
        let feed = reflector(writer, watcher(api.clone(), watcher::Config::default()))
            .default_backoff()
            .for_each(|event| async move {
                if let Err(error) = event {
                    tracing::warn!(%error, "namespace watch failed; retrying");
                }
            });
        (Self { store, api }, feed)
    }

    /// The namespace's annotations (empty when it has none). A miss in the cache asks the apiserver.
    pub async fn annotations(&self, name: &str) -> Result<BTreeMap<String, String>, kube::Error> {
        if let Some(ns) = self.store.get(&ObjectRef::new(name)) {
            return Ok(ns.metadata.annotations.clone().unwrap_or_default());
        }
        tracing::debug!(
            namespace = name,
            "namespace not in the cache yet; reading it"
        );
        let ns = self.api.get(name).await?;
        Ok(ns.metadata.annotations.unwrap_or_default())
    }
}
