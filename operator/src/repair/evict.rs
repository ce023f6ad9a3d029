//! The one write the repairer makes: an Eviction of one pod, and what its answer means.
//!
//! Built here rather than with kube's `Api::evict`: kube 5.0 sends the delete options under
//! `delete_options`, which the apiserver ignores (measured on the testbed: a wrong uid precondition
//! still evicted), and the uid precondition is what guarantees the evicted pod is the one judged (a
//! StatefulSet reuses names). The body names no apiVersion, so each apiserver reads it as the
//! Eviction version it serves (policy/v1beta1 on 1.20, policy/v1 later).

use k8s_openapi::api::core::v1::Pod;
use kube::core::Status;
use kube::{Client, Resource};

/// What one eviction attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// Accepted: the pod is being deleted, its controller recreates it.
    Done,
    /// Refused with 429: a PodDisruptionBudget allows no disruption now (the message says which).
    Blocked(String),
    /// The pod is already gone, or its name now holds another pod (uid precondition).
    Gone,
    /// Anything else (RBAC, a pod with several PDBs, the network): why.
    Failed(String),
}

impl Evicted {
    /// The metric label of this outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Done => "evicted",
            Self::Blocked(_) => "blocked",
            Self::Gone => "gone",
            Self::Failed(_) => "failed",
        }
    }
}

/// Classifies the apiserver's answer to an eviction.
pub fn classify(result: Result<Status, kube::Error>) -> Evicted {
    match result {
        Ok(_) => Evicted::Done,
        Err(kube::Error::Api(s)) if s.code == 429 => Evicted::Blocked(s.message),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Evicted::Gone,
        Err(e) => Evicted::Failed(e.to_string()),
    }
}

/// A client that takes a 429 as the answer it is: kube 5's default client retries a 429 up to 15
/// times, its backoff growing towards minutes (an eviction a PodDisruptionBudget refused held the
/// repairer for over a minute on the testbed). Configured like `Client::try_default` otherwise.
pub async fn eviction_client() -> Result<Client, kube::Error> {
    let mut config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    config.default_retry = false;
    Client::try_from(config)
}

/// Asks the apiserver to evict pod `namespace/name`, only if it is still the pod of `uid`.
pub async fn evict(client: &Client, namespace: &str, name: &str, uid: &str) -> Evicted {
    let url = format!("{}/{name}/eviction", Pod::url_path(&(), Some(namespace)));
    let body = serde_json::json!({
        "metadata": { "name": name, "namespace": namespace },
        "deleteOptions": { "preconditions": { "uid": uid } },
    });
    let request = http::Request::post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes());
    match request {
        Ok(request) => classify(client.request::<Status>(request).await),
        Err(e) => Evicted::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> Result<Status, kube::Error> {
        Err(kube::Error::Api(
            Status::failure(message, "").with_code(code).boxed(),
        ))
    }

    #[test]
    fn answers() {
        assert_eq!(classify(Ok(Status::success())), Evicted::Done);
        assert_eq!(
            classify(api(429, "would violate the pod's disruption budget")),
            Evicted::Blocked("would violate the pod's disruption budget".into())
        );
        assert_eq!(classify(api(404, "not found")), Evicted::Gone);
        assert_eq!(classify(api(409, "uid precondition")), Evicted::Gone);
        assert!(
            matches!(classify(api(403, "forbidden")), Evicted::Failed(m) if m.contains("forbidden"))
        );
        assert!(matches!(
            classify(api(500, "more than one PodDisruptionBudget")),
            Evicted::Failed(_)
        ));
    }
}
