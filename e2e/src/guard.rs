//! Delete-on-drop guards for cluster objects a test creates, deleting through the client the object
//! was made with (so a dedicated testbed's objects are deleted on that testbed).
//!
//! `Drop` cannot await, and a test's own runtime may be single-threaded (its tasks, among them the
//! client's connections, cannot run while `drop` blocks) or already shutting down. So the kit's clients
//! run every request, and so their connections, on a small runtime of the kit's own ([`kit_runtime`],
//! see [`OnKit`]), which outlives every test, and a guard's delete runs there.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use kube::api::DeleteParams;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// How long a guard's delete may take before the test goes on (a dead apiserver must not hang it).
const DELETE_TIMEOUT: Duration = Duration::from_secs(20);

/// The runtime driving the kit's kube clients (see the module doc).
pub(crate) fn kit_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-kit")
            .enable_all()
            .build()
            .expect("the test kit's runtime")
    })
}

/// A kube client's HTTP service whose requests are driven on the kit's runtime: connections spawned
/// while a request runs land there too, not on the (possibly blocked) runtime of the test.
pub(crate) struct OnKit<S>(pub S);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, Req> tower::Service<Req> for OnKit<S>
where
    S: tower::Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let running = kit_runtime().spawn(self.0.call(request));
        Box::pin(async move { running.await?.map_err(Into::into) })
    }
}

/// Runs `fut` to completion on the kit's runtime from synchronous code (inside a runtime or not).
fn block_on_kit<F>(fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = kit_runtime().handle().clone();
    // A thread of its own: `block_on` may not be called from within a runtime's context.
    std::thread::spawn(move || handle.block_on(fut))
        .join()
        .expect("the kit's delete thread")
}

/// A cluster object (cluster-scoped or namespaced, as `api` says) deleted when the guard drops, without
/// waiting for finalization; not-found is fine.
pub struct DeleteOnDrop<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    api: Api<K>,
    name: String,
    keep: bool,
}

impl<K> DeleteOnDrop<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Guards the object `name` of `api` (created already, or about to be).
    pub fn new(api: Api<K>, name: impl Into<String>) -> Self {
        Self {
            api,
            name: name.into(),
            keep: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Leaves the object in place when the guard drops (for looking at it after a test).
    pub fn keep(mut self) -> Self {
        self.keep = true;
        self
    }

    /// Deletes the object now (tests that check what happens on deletion call this).
    pub async fn delete(&self) {
        let _ = self
            .api
            .delete(&self.name, &DeleteParams::background())
            .await;
    }
}

impl<K> Drop for DeleteOnDrop<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if self.keep {
            eprintln!("keeping {}", self.name);
            return;
        }
        let (api, name) = (self.api.clone(), self.name.clone());
        let deleted = block_on_kit(async move {
            tokio::time::timeout(
                DELETE_TIMEOUT,
                api.delete(&name, &DeleteParams::background()),
            )
            .await
        });
        match deleted {
            Ok(Ok(_)) => {}
            Ok(Err(kube::Error::Api(s))) if s.is_not_found() => {}
            Ok(Err(e)) => eprintln!("could not delete {}: {e}", self.name),
            Err(_) => eprintln!(
                "could not delete {} within {DELETE_TIMEOUT:?} (a client not made by the kit?)",
                self.name
            ),
        }
    }
}
