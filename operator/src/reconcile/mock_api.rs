//! A mock apiserver for the tests of the reconcile I/O (`fetch_tests.rs`, `apply_tests.rs`), after
//! kube-rs' controller-rs: a kube [`Client`] over tower-test's mock service, and a verifier task that
//! takes the expected calls in order, checks each (method, path and query, headers, JSON body),
//! answers it with a canned response, and fails on any call it was not told to expect. A test runs
//! the code under test, then [`MockApi::finish`] (before its own assertions, so a wrong call is
//! reported as such rather than as the error it caused), which also fails when an expected call
//! never came.

use std::panic::resume_unwind;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tower_test::mock;

use rules::namespaces::OurNad;

use super::{nad_resource, Context, ReconcileSettings};
use crate::events::Events;
use crate::listed::listed;
use crate::metrics::Metrics;
use crate::nad_cache::NadView;
use crate::nad_config::ConfigSource;

/// The namespace the tests reconcile.
pub const NS: &str = "apps";
/// The NAD name of [`settings`].
pub const NAD: &str = "linkerd-cni";
/// The NAD collection of [`NS`], as the client addresses it.
pub const NADS: &str = "/apis/k8s.cni.cncf.io/v1/namespaces/apps/network-attachment-definitions";
/// The NAD of [`NS`].
pub const NAD_PATH: &str =
    "/apis/k8s.cni.cncf.io/v1/namespaces/apps/network-attachment-definitions/linkerd-cni";

type BodyCheck = Box<dyn FnOnce(&Value) + Send>;

/// One call the code under test must make next, and the apiserver's answer to it.
pub struct Call {
    method: Method,
    /// Path and query, exactly.
    uri: String,
    headers: Vec<(&'static str, &'static str)>,
    body: Option<BodyCheck>,
    status: StatusCode,
    reply: Value,
}

impl Call {
    fn new(method: Method, uri: impl Into<String>) -> Self {
        Self {
            method,
            uri: uri.into(),
            headers: Vec::new(),
            body: None,
            status: StatusCode::OK,
            reply: json!({}),
        }
    }

    pub fn get(uri: impl Into<String>) -> Self {
        Self::new(Method::GET, uri)
    }

    pub fn post(uri: impl Into<String>) -> Self {
        Self::new(Method::POST, uri)
    }

    pub fn patch(uri: impl Into<String>) -> Self {
        Self::new(Method::PATCH, uri)
    }

    pub fn delete(uri: impl Into<String>) -> Self {
        Self::new(Method::DELETE, uri)
    }

    /// The request carries header `name` with exactly `value`.
    pub fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }

    /// Checks the request's JSON body (a request without a body fails the check).
    pub fn body(mut self, check: impl FnOnce(&Value) + Send + 'static) -> Self {
        self.body = Some(Box::new(check));
        self
    }

    /// Answers 200 with `reply`.
    pub fn answer(mut self, reply: Value) -> Self {
        self.reply = reply;
        self
    }

    /// Answers with a failure `Status` about the NAD (`details` name it, as an object's error does).
    pub fn fail(self, code: u16, reason: &str) -> Self {
        self.fail_with(
            code,
            reason,
            json!({"name": NAD, "group": "k8s.cni.cncf.io"}),
        )
    }

    /// Answers 404 as for a kind that is not served: a `Status` naming no object.
    pub fn kind_not_served(self) -> Self {
        self.fail_with(404, "NotFound", json!({}))
    }

    fn fail_with(mut self, code: u16, reason: &str, details: Value) -> Self {
        self.status = StatusCode::from_u16(code).expect("a status code");
        self.reply = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("mock {reason}"),
            "reason": reason,
            "details": details,
            "code": code,
        });
        self
    }

    fn describe(&self) -> String {
        format!("{} {}", self.method, self.uri)
    }

    /// Asserts `req` is this call; returns the answer.
    async fn verify(self, index: usize, req: Request<Body>) -> Response<Body> {
        let got = format!("{} {}", req.method(), uri_of(&req));
        assert_eq!(got, self.describe(), "call {index}");
        for (name, value) in &self.headers {
            let header = req.headers().get(*name).and_then(|v| v.to_str().ok());
            assert_eq!(header, Some(*value), "call {index} ({got}): header {name}");
        }
        if let Some(check) = self.body {
            let bytes = req.into_body().collect_bytes().await.expect("request body");
            let body: Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("call {index} ({got}): body not JSON: {e}"));
            check(&body);
        }
        Response::builder()
            .status(self.status)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(&self.reply).expect("reply")))
            .expect("response")
    }
}

fn uri_of(req: &Request<Body>) -> &str {
    req.uri().path_and_query().map_or("", |pq| pq.as_str())
}

/// The verifier of one test's calls.
pub struct MockApi {
    verifier: JoinHandle<()>,
    done: oneshot::Sender<()>,
}

impl MockApi {
    /// Ends the script: fails the test if the verifier failed, if an expected call never came,
    /// or if a call came that was not expected.
    pub async fn finish(self) {
        // Dropped receiver: the verifier already ended (it failed; the join below says how).
        let _ = self.done.send(());
        match tokio::time::timeout(Duration::from_secs(10), self.verifier).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.is_panic() => resume_unwind(e.into_panic()),
            Ok(Err(e)) => panic!("verifier: {e}"),
            Err(_) => panic!("the verifier did not finish"),
        }
    }
}

/// A kube client answered by `calls`, in order.
pub fn client(calls: Vec<Call>) -> (Client, MockApi) {
    let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let (done, mut finished) = oneshot::channel::<()>();
    let verifier = tokio::spawn(async move {
        let count = calls.len();
        let mut calls = calls.into_iter().enumerate();
        while let Some((index, call)) = calls.next() {
            let next = tokio::select! {
                biased;
                next = handle.next_request() => next,
                _ = &mut finished => None,
            };
            let Some((req, send)) = next else {
                let missing: Vec<_> = std::iter::once(call.describe())
                    .chain(calls.map(|(_, c)| c.describe()))
                    .collect();
                panic!("{index} of {count} expected calls came; missing: {missing:?}");
            };
            send.send_response(call.verify(index, req).await);
        }
        // Every call of the code under test was answered before it returned, so any call still
        // queued when the test finishes is one too many.
        tokio::select! {
            biased;
            next = handle.next_request() => if let Some((req, _)) = next {
                panic!("unexpected call after the {count} expected: {} {}", req.method(), uri_of(&req));
            },
            _ = finished => {}
        }
    });
    (Client::new(service, "default"), MockApi { verifier, done })
}

/// The settings of the tests: one NAD per namespace, named [`NAD`], of Multus' group.
pub fn settings() -> ReconcileSettings {
    ReconcileSettings {
        nad: OurNad {
            name: NAD.to_string(),
            ..OurNad::default()
        },
        source: ConfigSource {
            namespace: vocab::DEFAULT_CNI_NAMESPACE.to_string(),
            configmap: vocab::DEFAULT_CNI_CONFIGMAP.to_string(),
            kubeconfig: vocab::DEFAULT_CNI_KUBECONFIG.to_string(),
        },
        nad_resource: nad_resource(None),
        resync: Duration::from_secs(300),
        concurrency: 1,
        adopt_unowned: false,
        node_multus_resource: linkerd_multus_crds::node_multus::api_resource(None),
    }
}

/// A leader's [`Context`] built as `controller.rs` builds it, over a client answered by `calls`;
/// its watch stores are empty and never listed.
pub fn context(calls: Vec<Call>) -> (Context, MockApi) {
    let nads = reflector::store::Writer::default().as_reader();
    context_with(settings(), nads, calls)
}

/// [`context`] with these settings and NAD store.
pub fn context_with(
    settings: ReconcileSettings,
    nads: Store<NadView>,
    calls: Vec<Call>,
) -> (Context, MockApi) {
    let (client, api) = client(calls);
    let (_, never_listed) = listed();
    let configmaps = reflector::store::Writer::default().as_reader();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry, nads.clone());
    let (_, is_leader) = watch::channel(true);
    let ctx = Context::new(
        client.clone(),
        settings,
        (configmaps, never_listed.clone()),
        (nads, never_listed),
        Events::new(client, "mock-api-test".to_string()),
        metrics,
        is_leader,
    );
    (ctx, api)
}

/// A NAD as the apiserver answers it: `labels`, `annotations` and `spec.config` as given.
pub fn nad(
    uid: &str,
    resource_version: &str,
    labels: Value,
    annotations: Value,
    config: &str,
) -> Value {
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": NAD,
            "namespace": NS,
            "uid": uid,
            "resourceVersion": resource_version,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"config": config},
    })
}

/// Our own label set.
pub fn managed_by() -> Value {
    let label = (
        vocab::MANAGED_BY_LABEL.to_string(),
        vocab::MANAGED_BY_VALUE.into(),
    );
    Value::Object([label].into_iter().collect())
}
