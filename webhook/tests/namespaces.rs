//! The namespace cache on the real local kube-apiserver.

use linkerd_multus_e2e::{client, eventually, kubectl_ok, TestNamespace};
use linkerd_multus_webhook::namespaces::NamespaceCache;

/// The cache follows the watch: a namespace already in it sees its new annotation without a GET.
/// Were the watch broken, the store would keep the stale copy and this would time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver): run by e2e/test-all"]
async fn follows_namespace_changes() {
    let kube = client().await;
    let ns = TestNamespace::create(&kube, "wh-cache").await;
    let (cache, feed) = NamespaceCache::new(kube.clone());
    let feed = tokio::spawn(feed);
    let in_store = |cache: &NamespaceCache, want: Option<&str>| {
        cache
            .cached(&ns.name)
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
            let what = format!("the cache shows {want:?}");
            eventually(&what, || {
                let shown = in_store(&cache, want).then_some(());
                async move { shown }
            })
            .await
        }
    };
    wait(None).await;
    let annotation = format!("{}=enabled", vocab::MULTUS_ANNOTATION);
    kubectl_ok(&["annotate", "namespace", &ns.name, &annotation]);
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
