//! What the plugin needs to know about a pod, read through the kubeconfig with short timeouts and
//! a few retries (a CNI ADD blocks the pod's start; an unreachable apiserver must fail fast and
//! clearly so the kubelet retries).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Config};

/// Timeouts per request; with [`ATTEMPTS`] tries, an unreachable apiserver fails ADD within ~10 s.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(3);
const ATTEMPTS: u32 = 3;
const RETRY_DELAY: Duration = Duration::from_millis(300);

/// The facts about a pod the rules depend on. Built from API objects by [`PodFacts::from_objects`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFacts {
    pub annotations: BTreeMap<String, String>,
    pub namespace_annotations: BTreeMap<String, String>,
    /// A container, or a native-sidecar init container, named `linkerd-proxy`.
    pub has_proxy: bool,
    /// An init container `linkerd-init`: the pod sets up its own rules.
    pub has_init_container: bool,
    /// `runAsUser` of the proxy container (else the pod's), the uid the proxy really runs as.
    pub proxy_run_as_user: Option<vocab::Uid>,
    /// Labelled as a Linkerd control-plane component.
    pub control_plane: bool,
    /// Ports and target ports of `default/kubernetes`; empty when not read.
    pub apiserver_ports: Vec<u16>,
}

impl PodFacts {
    /// Pure: extracts the facts from the API objects.
    pub fn from_objects(pod: &Pod, ns: Option<&Namespace>, apiserver: Option<&Service>) -> Self {
        let view = rules::pod::PodView::from_spec(pod.spec.as_ref());
        let mut apiserver_ports = Vec::new();
        for p in apiserver
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.ports.as_deref())
            .unwrap_or_default()
        {
            let target = match &p.target_port {
                Some(IntOrString::Int(n)) => u16::try_from(*n).ok(),
                _ => None,
            };
            for port in [u16::try_from(p.port).ok(), target].into_iter().flatten() {
                if !apiserver_ports.contains(&port) {
                    apiserver_ports.push(port);
                }
            }
        }
        Self {
            annotations: pod.metadata.annotations.clone().unwrap_or_default(),
            namespace_annotations: ns
                .and_then(|n| n.metadata.annotations.clone())
                .unwrap_or_default(),
            has_proxy: view.has_proxy(),
            has_init_container: view.has_linkerd_init(),
            proxy_run_as_user: view.proxy_uid(),
            control_plane: vocab::is_control_plane_pod(pod.metadata.labels.as_ref()),
            apiserver_ports,
        }
    }

    /// Why this pod gets no rules from us, if it doesn't.
    pub fn skip_reason(&self) -> Option<&'static str> {
        if !self.has_proxy {
            Some("the pod has no linkerd-proxy container")
        } else if self.has_init_container {
            Some("the pod has a linkerd-init container, which sets up its own rules")
        } else {
            None
        }
    }
}

/// Why the pod could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error("cannot read kubeconfig {path}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot build a Kubernetes client from {path}: {message}")]
    Client { path: String, message: String },
    #[error("the Kubernetes API at {url} could not be reached after {ATTEMPTS} attempts (kubeconfig {path}): {message}")]
    Unreachable {
        url: String,
        path: String,
        message: String,
    },
    #[error("reading {what} failed")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl PodError {
    /// Transient failures ask the runtime to retry (CNI code 11); the rest are plain failures.
    pub fn is_transient(&self) -> bool {
        matches!(self, PodError::Unreachable { .. })
    }

    /// Why this failure means the product itself is absent from the node (uninstalled, or its
    /// installer gone past the token's lifetime), not that the pod or the apiserver is at fault: the
    /// kubeconfig cannot be read or used, or the apiserver refuses its credential (401, 403). In
    /// Multus' auxiliary chain, which runs the plugin for every pod, such a pod is passed through
    /// rather than failed. `None` for the rest: an unreachable apiserver (transient: the kubelet
    /// retries), a pod that does not exist.
    pub fn product_absence(&self) -> Option<&'static str> {
        match self {
            PodError::Kubeconfig { .. } => Some("the plugin's kubeconfig cannot be read"),
            PodError::Client { .. } => Some("the plugin's kubeconfig cannot be used"),
            PodError::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 401 => {
                Some("the apiserver refuses the plugin's credential (401 Unauthorized)")
            }
            PodError::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 403 => Some(
                "the apiserver forbids the plugin's credential to read the pod (403 Forbidden)",
            ),
            PodError::Api { .. } | PodError::Unreachable { .. } => None,
        }
    }
}

/// Is this error worth another attempt (network, timeout, server-side 5xx/429)?
fn retryable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Reads the pod, its namespace and (for control-plane pods) `default/kubernetes`.
pub async fn fetch(kubeconfig: &Path, namespace: &str, name: &str) -> Result<PodFacts, PodError> {
    let path = kubeconfig.display().to_string();
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|source| PodError::Kubeconfig {
        path: path.clone(),
        source,
    })?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| PodError::Client {
            path: path.clone(),
            message: vocab::report::chain(&e),
        })?;
    let url = config.cluster_url.to_string();
    let client =
        crate::connection::client(config, CONNECT_TIMEOUT).map_err(|e| PodError::Client {
            path: path.clone(),
            message: e.to_string(),
        })?;

    let unreachable = |e: kube::Error| PodError::Unreachable {
        url: url.clone(),
        path: path.clone(),
        // With its sources, so "connection refused" is not hidden behind "client error".
        message: vocab::report::chain(&e),
    };
    // Both reads go out at once: over HTTP/2 they share the connection's one handshake.
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let namespaces = Api::<Namespace>::all(client.clone());
    let (pod, ns) = tokio::join!(
        with_retries(|| pods.get(name)),
        with_retries(|| namespaces.get(namespace)),
    );
    let pod = pod.map_err(|e| {
        if retryable(&e) {
            unreachable(e)
        } else {
            PodError::Api {
                what: format!("pod {namespace}/{name}"),
                source: e,
            }
        }
    })?;
    // The namespace only supplies fallback annotations: without RBAC to read it we go on with the
    // pod's (logged); an apiserver that stops answering is still a retryable failure.
    let ns = match ns {
        Ok(ns) => Some(ns),
        Err(e) if retryable(&e) => return Err(unreachable(e)),
        Err(e) => {
            tracing::warn!(namespace, error = %vocab::report::Chain(&e), "cannot read the pod's namespace; using the pod's annotations only");
            None
        }
    };
    let mut facts = PodFacts::from_objects(&pod, ns.as_ref(), None);
    if facts.control_plane {
        let services = Api::<Service>::namespaced(client.clone(), "default");
        match with_retries(|| services.get("kubernetes")).await {
            Ok(svc) => facts = PodFacts::from_objects(&pod, ns.as_ref(), Some(&svc)),
            Err(e) => {
                tracing::warn!(error = %vocab::report::Chain(&e), "cannot read default/kubernetes; skipping ports 443 and 6443 outbound")
            }
        }
    }
    Ok(facts)
}

async fn with_retries<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        // The connection carries no read timeout of its own; a request that hangs is retried.
        let answer = tokio::time::timeout(READ_TIMEOUT, call())
            .await
            .unwrap_or_else(|_| {
                Err(kube::Error::Service(
                    format!("no answer within {READ_TIMEOUT:?}").into(),
                ))
            });
        match answer {
            Err(e) if attempt < ATTEMPTS && retryable(&e) => {
                tracing::debug!(attempt, error = %vocab::report::Chain(&e), "Kubernetes API call failed; retrying");
                attempt += 1;
                tokio::time::sleep(RETRY_DELAY).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"linkerd.io/control-plane-component": "destination"}},
            "spec": spec
        }))
        .unwrap()
    }

    fn api(code: u16) -> PodError {
        PodError::Api {
            what: "pod demo/web".into(),
            source: kube::Error::Api(
                kube::core::Status::failure("refused", "Refused")
                    .with_code(code)
                    .boxed(),
            ),
        }
    }

    /// Which failures say the product is absent (passed through in the auxiliary chain), which are
    /// transient (the kubelet retries), and which stay failures.
    #[test]
    fn product_absence_and_transience() {
        let missing =
            Kubeconfig::read_from("/nonexistent/linkerd-cni-kubeconfig").expect_err("no such file");
        let cases: Vec<(&str, PodError, Option<&str>, bool)> = vec![
            (
                "kubeconfig missing",
                PodError::Kubeconfig {
                    path: "/nonexistent/linkerd-cni-kubeconfig".into(),
                    source: missing,
                },
                Some("kubeconfig cannot be read"),
                false,
            ),
            (
                "kubeconfig unusable",
                PodError::Client {
                    path: "k".into(),
                    message: "bad certificate-authority-data".into(),
                },
                Some("kubeconfig cannot be used"),
                false,
            ),
            ("401", api(401), Some("401 Unauthorized"), false),
            ("403", api(403), Some("403 Forbidden"), false),
            ("404: the pod does not exist", api(404), None, false),
            ("400", api(400), None, false),
            (
                "a non-API error",
                PodError::Api {
                    what: "pod demo/web".into(),
                    source: kube::Error::LinesCodecMaxLineLengthExceeded,
                },
                None,
                false,
            ),
            (
                "unreachable",
                PodError::Unreachable {
                    url: "https://10.96.0.1".into(),
                    path: "k".into(),
                    message: "connection refused".into(),
                },
                None,
                true,
            ),
        ];
        for (case, e, absence, transient) in cases {
            match (e.product_absence(), absence) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{case}: {got}"),
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
            assert_eq!(e.is_transient(), transient, "{case}");
        }
    }

    #[test]
    fn finds_the_proxy_and_its_uid() {
        let p = pod(json!({"containers": [
            {"name": "app"},
            {"name": "linkerd-proxy", "securityContext": {"runAsUser": 1000650000}}
        ]}));
        let f = PodFacts::from_objects(&p, None, None);
        assert!(f.has_proxy && !f.has_init_container && f.control_plane);
        assert_eq!(f.proxy_run_as_user, Some(1000650000));
        assert_eq!(f.skip_reason(), None);
    }

    /// vocab's rule: a control-plane label with an empty value counts as absent.
    #[test]
    fn an_empty_control_plane_label_is_not_the_control_plane() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"linkerd.io/control-plane-component": ""}},
            "spec": {"containers": [{"name": "linkerd-proxy"}]}
        }))
        .unwrap();
        assert!(!PodFacts::from_objects(&p, None, None).control_plane);
    }

    #[test]
    fn pod_level_run_as_user_applies_to_the_proxy() {
        let p = pod(json!({"securityContext": {"runAsUser": 5000},
                           "containers": [{"name": "linkerd-proxy"}]}));
        assert_eq!(
            PodFacts::from_objects(&p, None, None).proxy_run_as_user,
            Some(5000)
        );
    }

    /// Native sidecars (Linkerd 2.15+) are init containers with restartPolicy Always.
    #[test]
    fn native_sidecar_proxy_counts_plain_init_container_does_not() {
        let sidecar = pod(json!({"containers": [{"name": "app"}],
            "initContainers": [{"name": "linkerd-proxy", "restartPolicy": "Always"}]}));
        assert!(PodFacts::from_objects(&sidecar, None, None).has_proxy);
        let plain = pod(json!({"containers": [{"name": "app"}],
            "initContainers": [{"name": "linkerd-proxy"}]}));
        assert!(!PodFacts::from_objects(&plain, None, None).has_proxy);
    }

    #[test]
    fn skip_reasons() {
        let none = pod(json!({"containers": [{"name": "app"}]}));
        assert_eq!(
            PodFacts::from_objects(&none, None, None).skip_reason(),
            Some("the pod has no linkerd-proxy container")
        );
        let init = pod(json!({"containers": [{"name": "linkerd-proxy"}],
            "initContainers": [{"name": "linkerd-init"}]}));
        assert!(PodFacts::from_objects(&init, None, None)
            .skip_reason()
            .unwrap()
            .contains("linkerd-init"));
    }

    #[test]
    fn apiserver_ports_and_target_ports() {
        let svc: Service = serde_json::from_value(json!({"spec": {"ports": [
            {"port": 443, "targetPort": 6443}, {"port": 8443, "targetPort": "https"}
        ]}}))
        .unwrap();
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"annotations": {"a": "b"}}})).unwrap();
        let f = PodFacts::from_objects(
            &pod(json!({"containers": [{"name": "linkerd-proxy"}]})),
            Some(&ns),
            Some(&svc),
        );
        assert_eq!(f.apiserver_ports, vec![443, 6443, 8443]);
        assert_eq!(
            f.namespace_annotations.get("a").map(String::as_str),
            Some("b")
        );
    }
}
