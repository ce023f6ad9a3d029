//! PURE: the pod as every part reads it. The CNI plugin (which uid its rules exempt), `check` (does the
//! proxy run as that uid) and the repairer (is the pod meshed) all ask one [`PodView`], so "the uid the
//! proxy runs as" has one answer: the proxy container's `runAsUser`, else the pod's.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use serde_json::Value;
use vocab::{uid_from_kubernetes, Uid};

use crate::containers::{self, PodContainers};

/// What the rules read of a pod's spec: Linkerd's containers, their own uids and the pod's.
/// (`Hash`: repair keeps one copy of each, shared by the pods that have it.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodView {
    /// The proxy (a container, or a native-sidecar init container): `Some(its own runAsUser)`.
    proxy: Option<Option<Uid>>,
    /// The validator init container: `Some(its own runAsUser)`.
    validator: Option<Option<Uid>>,
    /// An init container `linkerd-init`: the pod sets up its own rules.
    linkerd_init: bool,
    /// The pod's `securityContext.runAsUser`: what a container without its own runs as.
    pod_run_as_user: Option<Uid>,
    /// The app containers: every container of `containers` but the proxy, with its own `runAsUser`.
    apps: Vec<(String, Option<Uid>)>,
}

/// One container as this view reads it: name, whether it is an init container, restart policy, uid.
struct Member<'a> {
    name: &'a str,
    init: bool,
    restart_policy: Option<&'a str>,
    run_as_user: Option<Uid>,
}

impl<'a> Member<'a> {
    fn of(c: &'a Container, init: bool) -> Self {
        Self {
            name: &c.name,
            init,
            restart_policy: c.restart_policy.as_deref(),
            run_as_user: c
                .security_context
                .as_ref()
                .and_then(|sc| sc.run_as_user)
                .and_then(uid_from_kubernetes),
        }
    }
}

impl PodView {
    /// From a typed pod spec (the plugin and the repairer read pods through the API).
    pub fn from_spec(spec: Option<&PodSpec>) -> Self {
        let Some(spec) = spec else {
            return Self::default();
        };
        let pod_run_as_user = spec
            .security_context
            .as_ref()
            .and_then(|sc| sc.run_as_user)
            .and_then(uid_from_kubernetes);
        let containers = spec.containers.iter().map(|c| Member::of(c, false));
        let inits = spec.init_containers.iter().flatten();
        Self::from_members(
            containers.chain(inits.map(|c| Member::of(c, true))),
            pod_run_as_user,
        )
    }

    /// From a pod spec as JSON (the webhook and `check` read it so); anything odd reads as absent.
    pub fn from_spec_json(spec: Option<&Value>) -> Self {
        let run_as_user =
            |v: &Value| uid_from_kubernetes(v.get("securityContext")?.get("runAsUser")?.as_i64()?);
        let list = |key: &'static str| {
            spec.and_then(|s| s.get(key))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |c| Member {
                    name: c.get("name").and_then(Value::as_str).unwrap_or_default(),
                    init: key == "initContainers",
                    restart_policy: c.get("restartPolicy").and_then(Value::as_str),
                    run_as_user: run_as_user(c),
                })
        };
        Self::from_members(
            list("containers").chain(list("initContainers")),
            spec.and_then(run_as_user),
        )
    }

    /// From the containers the webhook reads off an admission review.
    pub fn from_containers(pod: &PodContainers) -> Self {
        fn member(c: &containers::Container, init: bool) -> Member<'_> {
            Member {
                name: c.name.as_deref().unwrap_or_default(),
                init,
                restart_policy: c.restart_policy.as_deref(),
                run_as_user: containers::run_as(c, "runAsUser"),
            }
        }
        let containers = pod.containers.iter().map(|c| member(c, false));
        let inits = pod.init_containers.iter().map(|c| member(c, true));
        Self::from_members(containers.chain(inits), pod.pod_run_as_user)
    }

    fn from_members<'a>(members: impl Iterator<Item = Member<'a>>, pod_uid: Option<Uid>) -> Self {
        let mut view = Self {
            pod_run_as_user: pod_uid,
            ..Self::default()
        };
        for m in members {
            if view.proxy.is_none() && vocab::is_proxy_container(m.name, m.init, m.restart_policy) {
                view.proxy = Some(m.run_as_user);
            } else if m.init && m.name == vocab::VALIDATOR_CONTAINER && view.validator.is_none() {
                view.validator = Some(m.run_as_user);
            } else if m.init && m.name == vocab::INIT_CONTAINER {
                view.linkerd_init = true;
            } else if !m.init && !vocab::is_proxy_container(m.name, false, m.restart_policy) {
                view.apps.push((m.name.to_string(), m.run_as_user));
            }
        }
        view
    }

    /// The pod runs Linkerd's proxy (a container, or a native-sidecar init container).
    pub fn has_proxy(&self) -> bool {
        self.proxy.is_some()
    }

    /// The pod has Linkerd's `linkerd-init` container, which writes its own rules.
    pub fn has_linkerd_init(&self) -> bool {
        self.linkerd_init
    }

    /// The uid the proxy runs as: its own `runAsUser`, else the pod's. None without a proxy.
    pub fn proxy_uid(&self) -> Option<Uid> {
        self.proxy.map(|own| own.or(self.pod_run_as_user))?
    }

    /// The uid Linkerd's validator runs as: its own `runAsUser`, else the pod's.
    pub fn validator_uid(&self) -> Option<Uid> {
        self.validator.map(|own| own.or(self.pod_run_as_user))?
    }

    /// The app containers (`containers` but the proxy): name and own `runAsUser`.
    pub fn apps(&self) -> impl Iterator<Item = (&str, Option<Uid>)> {
        self.apps.iter().map(|(name, uid)| (name.as_str(), *uid))
    }

    /// The pod's own `runAsUser`.
    pub fn pod_run_as_user(&self) -> Option<Uid> {
        self.pod_run_as_user
    }
}

/// The pod's Ready condition is True: the repairer's judgement of an evicted pod's replacement and,
/// with `check`, of a linkerd-cni installer pod ([`crate::installers`]).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Both readings agree on every case: the JSON one (webhook, `check`) and the typed one (plugin,
    /// repairer).
    fn both(spec: Value) -> [PodView; 2] {
        let typed: PodSpec = serde_json::from_value(spec.clone()).expect("a pod spec");
        let views = [
            PodView::from_spec_json(Some(&spec)),
            PodView::from_spec(Some(&typed)),
        ];
        assert_eq!(views[0], views[1], "{spec}");
        views
    }

    #[test]
    fn the_proxy_runs_as_its_own_uid_else_the_pods() {
        let own = both(json!({
            "securityContext": { "runAsUser": 5000 },
            "containers": [{ "name": "app" }, { "name": "linkerd-proxy", "securityContext": { "runAsUser": 2102 } }],
            "initContainers": [{ "name": "linkerd-network-validator" }],
        }));
        assert_eq!(own[0].proxy_uid(), Some(2102));
        assert_eq!(own[0].validator_uid(), Some(5000));

        let pod_level = both(json!({
            "securityContext": { "runAsUser": 5000 },
            "containers": [{ "name": "linkerd-proxy" }],
        }));
        assert_eq!(pod_level[0].proxy_uid(), Some(5000));
        assert_eq!(pod_level[0].validator_uid(), None);

        let neither = both(json!({ "containers": [{ "name": "linkerd-proxy" }] }));
        assert!(neither[0].has_proxy());
        assert_eq!(neither[0].proxy_uid(), None);
    }

    #[test]
    fn which_containers_count() {
        let sidecar = both(json!({
            "containers": [{ "name": "app" }],
            "initContainers": [
                { "name": "linkerd-init" },
                { "name": "linkerd-proxy", "restartPolicy": "Always", "securityContext": { "runAsUser": 7 } },
            ],
        }));
        assert!(sidecar[0].has_proxy() && sidecar[0].has_linkerd_init());
        assert_eq!(sidecar[0].proxy_uid(), Some(7));

        let blocking_init = both(json!({
            "containers": [{ "name": "app" }],
            "initContainers": [{ "name": "linkerd-proxy" }],
        }));
        assert!(
            !blocking_init[0].has_proxy(),
            "an init container that ends is no proxy"
        );
        assert_eq!(
            PodView::from_spec_json(None),
            PodView::from_spec(None),
            "no spec: nothing"
        );
        assert!(!PodView::from_spec_json(Some(&json!({ "containers": "x" }))).has_proxy());
    }

    /// Kubernetes' int64 `runAsUser` is read once, here: a value that is no uid reads as absent, the
    /// same through both readings (the pod's uid then applies to the proxy, as without its own).
    #[test]
    fn a_run_as_user_that_is_no_uid_reads_as_absent() {
        for bad in [-1i64, 4294967295, 1 << 40] {
            let view = both(json!({
                "securityContext": { "runAsUser": 5000 },
                "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": bad } }],
            }));
            assert_eq!(view[0].proxy_uid(), Some(5000), "{bad}");
            let view = both(json!({
                "securityContext": { "runAsUser": bad },
                "containers": [{ "name": "linkerd-proxy" }],
            }));
            assert_eq!(view[0].proxy_uid(), None, "{bad}");
        }
    }
}
