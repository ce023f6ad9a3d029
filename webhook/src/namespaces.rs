//! Namespace annotations for the decision, from a watch-fed cache of namespace metadata. A namespace
//! the cache has not seen yet (created a moment ago) costs one direct GET.

use std::future::Future;
use std::sync::Arc;

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

    /// The namespace as last seen by the watch, if it was.
    pub fn cached(&self, name: &str) -> Option<Arc<PartialObjectMeta<Namespace>>> {
        self.store.get(&ObjectRef::new(name))
    }

    /// The namespace from the apiserver, for one the cache has not seen yet.
    pub async fn fetch(
        &self,
        name: &str,
    ) -> Result<Arc<PartialObjectMeta<Namespace>>, kube::Error> {
        tracing::debug!(
            namespace = name,
            "namespace not in the cache yet; reading it"
        );
        Ok(Arc::new(self.api.get(name).await?))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use linkerd_multus_e2e::{client, kubectl, TestNamespace};

    use super::*;

    /// The cache follows the watch: a namespace already in it sees its new annotation without a GET.
    /// Were the watch broken, the store would keep the stale copy and this would time out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn follows_namespace_changes() {
        let kube = client().await;
        let ns = TestNamespace::create(&kube, "wh-cache").await;
        let (cache, feed) = NamespaceCache::new(kube.clone());
        let feed = tokio::spawn(feed);
        let in_store = |cache: &NamespaceCache, want: Option<&str>| {
            cache
                .store
                .get(&ObjectRef::new(&ns.name))
                .map(|n| {
                    n.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(vocab::MULTUS_ANNOTATION))
                        .map(String::as_str)
                        == want
                })
                .unwrap_or(false)
        };
        let wait = |want: Option<&'static str>| {
            let cache = cache.clone();
            let in_store = &in_store;
            async move {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !in_store(&cache, want) {
                    assert!(Instant::now() < deadline, "the cache never showed {want:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        wait(None).await;
        let annotation = format!("{}=enabled", vocab::MULTUS_ANNOTATION);
        let out = kubectl(&["annotate", "namespace", &ns.name, &annotation]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        wait(Some("enabled")).await;
        let got = cache.fetch(&ns.name).await.unwrap();
        assert_eq!(
            got.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(vocab::MULTUS_ANNOTATION))
                .map(String::as_str),
            Some("enabled")
        );
        // A namespace that does not exist is an error, not a panic.
        assert!(cache.cached("no-such-namespace-wh-cache").is_none());
        assert!(cache.fetch("no-such-namespace-wh-cache").await.is_err());
        feed.abort();
    }
}
