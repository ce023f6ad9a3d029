//! `check`'s one walk of the cluster's pods: pages of 500 (a large cluster is never held in memory
//! at once, and never a request per namespace), the next page fetched while this one is read, and
//! each pod read as a [`ListedPod`] (without its managedFields).
//!
//! Why: at 50,000 pods (the scale bench's cluster) the walk is the whole of `check`'s time. Fetching
//! ahead lets the apiserver encode the next page while this one is decoded.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::ListParams;
use kube::core::Request;
use kube::Client;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::listed_pod::ListedPod;

/// Pods per page.
const PAGE: u32 = 500;
/// Pages fetched ahead of the one being read (each a few MB of JSON).
const AHEAD: usize = 2;

/// Every pod `params` selects, in order, to `each`.
pub async fn each_pod(
    client: &Client,
    params: ListParams,
    mut each: impl FnMut(&Pod),
) -> Result<(), kube::Error> {
    let (tx, mut rx) = mpsc::channel(AHEAD);
    let fetching = tokio::spawn(fetch(client.clone(), params.limit(PAGE), tx));
    // Dropping `rx` on an error stops the fetch at its next page.
    while let Some(body) = rx.recv().await {
        let page: Page = serde_json::from_str(&body?).map_err(kube::Error::SerdeError)?;
        for pod in page.items {
            each(&pod.into());
        }
    }
    // Every body was read, so the fetch has returned.
    let _ = fetching.await;
    Ok(())
}

/// Fetches the pages in order into `tx`; stops after the last, at an error, or when the reader is gone.
async fn fetch(
    client: Client,
    mut params: ListParams,
    tx: mpsc::Sender<Result<String, kube::Error>>,
) {
    let pods = Request::new("/api/v1/pods");
    loop {
        let body = match pods.list(&params) {
            Ok(request) => client.request_text(request).await,
            Err(e) => Err(kube::Error::BuildRequest(e)),
        };
        let next = body.as_deref().ok().and_then(continue_token);
        if tx.send(body).await.is_err() {
            return;
        }
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return,
        }
    }
}

/// The page's continue token, read without decoding its items (a malformed page: none; reading
/// it in full then reports the error).
fn continue_token(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Head {
        metadata: ListMeta,
    }
    let head: Head = serde_json::from_str(body).ok()?;
    head.metadata.continue_.filter(|c| !c.is_empty())
}

#[derive(Deserialize)]
struct Page {
    items: Vec<ListedPod>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listed_pod::tests::served_pod;

    #[test]
    fn the_continue_token_is_read_without_the_items() {
        let page = |token: &str| {
            serde_json::json!({
                "kind": "PodList", "apiVersion": "v1",
                "metadata": { "resourceVersion": "9", "continue": token },
                "items": [served_pod()]
            })
            .to_string()
        };
        assert_eq!(continue_token(&page("abc")).as_deref(), Some("abc"));
        assert_eq!(continue_token(&page("")), None);
        assert_eq!(continue_token(r#"{"metadata": {}, "items": []}"#), None);
        assert_eq!(continue_token("{not json"), None);
    }
}
