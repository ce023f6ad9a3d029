//! PURE: an app container that runs as the proxy's uid. linkerd-cni exempts the proxy's uid from the
//! redirect (the proxy's own traffic must not loop back into it), so a container running as that uid
//! talks around the proxy: it bypasses the mesh while Linkerd's validator and every other check pass
//! (linkerd2#14796). The webhook warns at admission and `check` fails on it; both ask [`collisions`],
//! with the uid [`super::Sources::exempted_valid`] names.

use vocab::Uid;

use super::{Exempted, ProxyUidSource};
use crate::pod::PodView;

/// Where an app container's uid comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppUid {
    /// Its own `runAsUser`.
    Own,
    /// The pod's `runAsUser`.
    Pod,
    /// Neither is set, in a namespace with an OpenShift uid range: the restricted SCC runs it as the
    /// range's first uid.
    RangeFirst,
}

/// An app container running as the exempted uid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    pub container: String,
    pub uid: Uid,
    pub from: AppUid,
    pub exempted: ProxyUidSource,
}

/// The app containers of `pod` (`containers` but the proxy) whose uid is `exempted`'s: their own
/// `runAsUser`, else the pod's, else `range_first` (the namespace's uid range, if it has one). Init
/// containers are left out on purpose: running one as the proxy uid is Linkerd's documented way to let
/// it reach the network before the proxy starts.
pub fn collisions(pod: &PodView, exempted: Exempted, range_first: Option<Uid>) -> Vec<Collision> {
    if !pod.has_proxy() {
        return Vec::new();
    }
    pod.apps()
        .filter_map(|(name, own)| {
            let (uid, from) = match (own, pod.pod_run_as_user(), range_first) {
                (Some(uid), _, _) => (uid, AppUid::Own),
                (None, Some(uid), _) => (uid, AppUid::Pod),
                (None, None, Some(uid)) => (uid, AppUid::RangeFirst),
                (None, None, None) => return None,
            };
            (uid == exempted.uid).then(|| Collision {
                container: name.to_string(),
                uid,
                from,
                exempted: exempted.source,
            })
        })
        .collect()
}

impl AppUid {
    /// What the explanation says after the uid, naming where it comes from.
    pub fn text(self) -> &'static str {
        match self {
            Self::Own => "",
            Self::Pod => " (the pod's runAsUser)",
            Self::RangeFirst => {
                " (the first uid of the namespace's uid range, which the restricted SCC gives a \
                 container without runAsUser)"
            }
        }
    }
}

impl Collision {
    /// What is wrong and how to fix it: the webhook's warning and `check`'s line say this.
    pub fn explain(&self) -> String {
        explain(
            &self.container,
            &self.uid.to_string(),
            self.from.text(),
            self.exempted,
        )
    }
}

/// [`Collision::explain`]'s text for a container, uid and [`AppUid::text`] given as text: the warning
/// policy renders it with CEL in their places (`admission_policy::warnings`), so the words are these.
pub fn explain(container: &str, uid: &str, from: &str, exempted: ProxyUidSource) -> String {
    let key = vocab::PROXY_UID_ANNOTATION;
    let (named, fix) = match exempted {
        ProxyUidSource::PodAnnotation => (
            format!("the proxy uid the pod's {key} names"),
            format!(
                "remove {key} from the pod's template, or set it to a uid no app container runs as"
            ),
        ),
        ProxyUidSource::NamespaceAnnotation => (
            format!("the proxy uid the namespace's {key} names"),
            format!("remove {key} from the namespace, or set it to a uid no app container runs as"),
        ),
        ProxyUidSource::ProxyRunAsUser | ProxyUidSource::Configured => (
            format!("the uid {} runs as", vocab::PROXY_CONTAINER),
            format!(
                "run container {container} as another uid, or set {key} to a uid no app container \
                 runs as"
            ),
        ),
    };
    format!(
        "container {container} runs as uid {uid}{from}, {named}: linkerd-cni exempts that uid from \
         the redirect, so the container's traffic bypasses the mesh; {fix}"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    const FIRST: Uid = 1000650000;

    fn exempt(uid: Uid) -> Exempted {
        Exempted {
            uid,
            source: ProxyUidSource::PodAnnotation,
        }
    }

    /// (case, pod spec, exempted uid, range's first, colliding containers with the uid's origin).
    #[test]
    fn which_containers_collide() {
        let proxy = json!({ "name": "linkerd-proxy", "securityContext": { "runAsUser": FIRST } });
        type Case<'a> = (&'a str, Value, Uid, Option<Uid>, &'a [(&'a str, AppUid)]);
        let cases: &[Case] = &[
            (
                "the container's own runAsUser",
                json!({ "containers": [{ "name": "app", "securityContext": { "runAsUser": 5000 } }, proxy] }),
                5000,
                None,
                &[("app", AppUid::Own)],
            ),
            (
                "the pod's runAsUser, for a container without its own",
                json!({ "securityContext": { "runAsUser": 5000 },
                     "containers": [{ "name": "app" }, { "name": "other", "securityContext": { "runAsUser": 6000 } }, proxy] }),
                5000,
                None,
                &[("app", AppUid::Pod)],
            ),
            (
                "the range's first, for a container with neither",
                json!({ "containers": [{ "name": "app" }, proxy] }),
                FIRST,
                Some(FIRST),
                &[("app", AppUid::RangeFirst)],
            ),
            (
                "no range and no runAsUser: the image's user is unknown, nothing said",
                json!({ "containers": [{ "name": "app" }, proxy] }),
                FIRST,
                None,
                &[],
            ),
            (
                "the container's own uid beats the range's first",
                json!({ "containers": [{ "name": "app", "securityContext": { "runAsUser": 7 } }, proxy] }),
                FIRST,
                Some(FIRST),
                &[],
            ),
            (
                "a native-sidecar proxy in initContainers: the containers are all apps",
                json!({ "containers": [{ "name": "app" }, { "name": "worker" }],
                     "initContainers": [{ "name": "linkerd-proxy", "restartPolicy": "Always",
                                          "securityContext": { "runAsUser": FIRST } }] }),
                FIRST,
                Some(FIRST),
                &[("app", AppUid::RangeFirst), ("worker", AppUid::RangeFirst)],
            ),
            (
                "the proxy itself is no app",
                json!({ "containers": [proxy] }),
                FIRST,
                Some(FIRST),
                &[],
            ),
            (
                "init containers may run as the proxy uid (Linkerd's way to give them the network)",
                json!({ "containers": [{ "name": "app", "securityContext": { "runAsUser": 7 } }, proxy],
                     "initContainers": [{ "name": "fetch", "securityContext": { "runAsUser": 2102 } }] }),
                2102,
                None,
                &[],
            ),
            (
                "no proxy: no rules, nothing bypasses them",
                json!({ "containers": [{ "name": "app", "securityContext": { "runAsUser": 2102 } }] }),
                2102,
                None,
                &[],
            ),
            (
                "the usual OpenShift pod: app as the first uid, proxy as first + 2102",
                json!({ "containers": [{ "name": "app" }, proxy] }),
                FIRST + 2102,
                Some(FIRST),
                &[],
            ),
        ];
        for (case, spec, uid, first, want) in cases {
            let typed: k8s_openapi::api::core::v1::PodSpec =
                serde_json::from_value(spec.clone()).expect("a pod spec");
            for view in [
                PodView::from_spec_json(Some(spec)),
                PodView::from_spec(Some(&typed)),
            ] {
                let got: Vec<(String, AppUid)> = collisions(&view, exempt(*uid), *first)
                    .into_iter()
                    .map(|c| (c.container, c.from))
                    .collect();
                let want: Vec<(String, AppUid)> =
                    want.iter().map(|(n, f)| (n.to_string(), *f)).collect();
                assert_eq!(got, want, "{case}");
            }
        }
    }

    /// The text names the container, the uid, where each comes from and the fix.
    #[test]
    fn the_explanation_names_the_fix() {
        let c = Collision {
            container: "app".into(),
            uid: FIRST,
            from: AppUid::RangeFirst,
            exempted: ProxyUidSource::PodAnnotation,
        };
        assert_eq!(
            c.explain(),
            "container app runs as uid 1000650000 (the first uid of the namespace's uid range, which \
             the restricted SCC gives a container without runAsUser), the proxy uid the pod's \
             config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so \
             the container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the \
             pod's template, or set it to a uid no app container runs as"
        );
        let c = Collision {
            from: AppUid::Own,
            exempted: ProxyUidSource::ProxyRunAsUser,
            uid: 2102,
            ..c
        };
        assert_eq!(
            c.explain(),
            "container app runs as uid 2102, the uid linkerd-proxy runs as: linkerd-cni exempts that \
             uid from the redirect, so the container's traffic bypasses the mesh; run container app \
             as another uid, or set config.linkerd.io/proxy-uid to a uid no app container runs as"
        );
    }
}
