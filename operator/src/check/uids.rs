//! PURE: the `proxy-uids` check. No app container may run as the uid the plugin's rules exempt (its
//! traffic would bypass the mesh). In a namespace with an OpenShift uid range, an attached pod's proxy
//! must run as the uid the plugin's rules exempt (`rules::proxy_uid`: its pod's
//! `config.linkerd.io/proxy-uid`, else its own runAsUser), inside the range, and Linkerd's validator
//! inside the range as another uid (its test connection must be redirected).

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use rules::decision::DecisionConfig;
use rules::pod::PodView;
use rules::proxy_uid::{collision, Sources};
use rules::uid_range::UidRange;

/// What is wrong with the pod's uids, one line each; empty when nothing is (or it is Linkerd's control
/// plane, whose uids the webhook leaves to Linkerd's installation). An app container running as the
/// exempted uid is named in any namespace; the rest is judged only where there is a uid range.
pub fn uid_problems(
    pod: &ObjectMeta,
    pod_view: &PodView,
    ns_annotations: Option<&BTreeMap<String, String>>,
    cfg: &DecisionConfig,
) -> Vec<String> {
    let namespace = pod.namespace.as_deref().unwrap_or_default();
    if vocab::is_linkerd_control_plane(namespace, &cfg.nad.linkerd_namespace, pod.labels.as_ref()) {
        return Vec::new();
    }
    let range = ns_annotations
        .and_then(|a| a.get(&cfg.uids.range_annotation))
        .and_then(|r| UidRange::parse(r).ok());
    let run_as = pod_view.proxy_uid();
    let sources = Sources::from_annotations(pod.annotations.as_ref(), run_as, ns_annotations, None);
    // The uid the rules exempt; the configured default is not known here.
    let exempted = sources.exempted_valid();
    let mut problems: Vec<String> = exempted
        .map(|e| collision::collisions(pod_view, e, range.map(|r| r.first)))
        .unwrap_or_default()
        .iter()
        .map(|c| format!("{}; then restart the pod", c.explain()))
        .collect();
    let Some(range) = range else {
        return problems;
    };
    let rules = exempted.map(|e| e.uid);
    // As the plugin warns (one rule, `Sources::disagreement`): only an annotation the plugin reads
    // before the proxy's runAsUser can differ from it. A value that is no uid is the `pods` row's.
    if let Some(d) = sources.disagreement() {
        if let Ok(named) = d.named {
            problems.push(format!(
                "{} runs as {} but {} is {named}: the rules exempt {named}",
                vocab::PROXY_CONTAINER,
                d.run_as,
                vocab::PROXY_UID_ANNOTATION,
            ));
        }
    }
    if let Some(uid) = run_as {
        if !range.contains(uid) {
            problems.push(format!(
                "{} runs as {uid}, outside the namespace's uid range {}/{}",
                vocab::PROXY_CONTAINER,
                range.first,
                range.size
            ));
        }
    }
    if let Some(uid) = pod_view.validator_uid() {
        if !range.contains(uid) {
            problems.push(format!(
                "{} runs as {uid}, outside the namespace's uid range {}/{}",
                vocab::VALIDATOR_CONTAINER,
                range.first,
                range.size
            ));
        } else if Some(uid) == rules {
            problems.push(format!(
                "{} runs as the proxy's uid {uid}, which the rules do not redirect",
                vocab::VALIDATOR_CONTAINER
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(annotations: serde_json::Value, spec: serde_json::Value) -> Vec<String> {
        let meta: ObjectMeta =
            serde_json::from_value(json!({ "annotations": annotations })).unwrap();
        let ns = BTreeMap::from([(
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "1000/10000".to_string(),
        )]);
        let view = PodView::from_spec_json(Some(&spec));
        uid_problems(&meta, &view, Some(&ns), &DecisionConfig::default())
    }

    fn spec(proxy: vocab::Uid, validator: vocab::Uid) -> serde_json::Value {
        json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": proxy } }],
            "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": validator } }],
        })
    }

    /// The proxy and the validator run as the pod's `runAsUser` when they set none: the uid the plugin
    /// exempts (it reads the same [`PodView`]), so `check` judges that uid, not "no uid".
    #[test]
    fn a_pod_level_uid_is_the_proxys_and_the_validators() {
        let pod_level = |uid: vocab::Uid| {
            json!({
                "securityContext": { "runAsUser": uid },
                "containers": [{ "name": "linkerd-proxy" }],
                "initContainers": [{ "name": "linkerd-network-validator" }],
            })
        };
        assert_eq!(
            problems(json!({ "config.linkerd.io/proxy-uid": "4102" }), pod_level(3102)),
            ["linkerd-proxy runs as 3102 but config.linkerd.io/proxy-uid is 4102: the rules exempt 4102"]
        );
        assert_eq!(
            problems(json!({}), pod_level(3102)),
            ["linkerd-network-validator runs as the proxy's uid 3102, which the rules do not redirect"]
        );
    }

    /// Without a range only a collision is judged: here the app runs as the pod's uid, which the
    /// namespace's proxy-uid names (a value that is no uid names nothing: `pods` reports it).
    #[test]
    fn a_collision_is_named_without_a_range() {
        let meta: ObjectMeta = serde_json::from_value(json!({ "namespace": "app" })).unwrap();
        let spec = json!({
            "securityContext": { "runAsUser": 5000 },
            "containers": [{ "name": "app" }, { "name": "linkerd-proxy" , "securityContext": { "runAsUser": 2102 } }],
        });
        let view = PodView::from_spec_json(Some(&spec));
        let cfg = DecisionConfig::default();
        let ns = |uid: &str| {
            BTreeMap::from([(vocab::PROXY_UID_ANNOTATION.to_string(), uid.to_string())])
        };
        assert!(uid_problems(&meta, &view, None, &cfg).is_empty());
        // The proxy's runAsUser comes before the namespace's annotation: 2102 is exempted, no app runs as it.
        assert!(uid_problems(&meta, &view, Some(&ns("5000")), &cfg).is_empty());
        let meta: ObjectMeta = serde_json::from_value(json!({
            "namespace": "app", "annotations": { (vocab::PROXY_UID_ANNOTATION): "5000" },
        }))
        .unwrap();
        assert_eq!(
            uid_problems(&meta, &view, None, &cfg),
            ["container app runs as uid 5000 (the pod's runAsUser), the proxy uid the pod's \
              config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the \
              container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's \
              template, or set it to a uid no app container runs as; then restart the pod"]
        );
        let meta: ObjectMeta = serde_json::from_value(json!({
            "namespace": "app", "annotations": { (vocab::PROXY_UID_ANNOTATION): " 5000" },
        }))
        .unwrap();
        assert!(uid_problems(&meta, &view, None, &cfg).is_empty());
    }

    /// This site on the shared table: a uid is compared with the proxy's (`007` is 7), a value that is
    /// no uid names nothing here (the `pods` row names it, `pods_tests.rs`).
    #[test]
    fn proxy_uids_follow_the_shared_table() {
        let ns = BTreeMap::from([(
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "0/4294967295".to_string(),
        )]);
        let view = PodView::from_spec_json(Some(&json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": 7 } }],
        })));
        for (value, want) in vocab::PROXY_UID_CASES {
            let meta: ObjectMeta = serde_json::from_value(
                json!({ "annotations": { (vocab::PROXY_UID_ANNOTATION): value } }),
            )
            .unwrap();
            let got = uid_problems(&meta, &view, Some(&ns), &DecisionConfig::default());
            let expected: Vec<String> = match want {
                Ok(7) | Err(_) => vec![],
                Ok(uid) => vec![format!(
                    "linkerd-proxy runs as 7 but config.linkerd.io/proxy-uid is {uid}: the rules exempt {uid}"
                )],
            };
            assert_eq!(got, expected, "{value:?}");
        }
    }

    /// The disagreement `check` and the plugin answered differently, fixed. Before, `check` compared
    /// the pod's annotation, else the namespace's, with the proxy's runAsUser, and failed this pod:
    /// "linkerd-proxy runs as 3102 but config.linkerd.io/proxy-uid is 4102: the rules exempt 3102"
    /// (naming, itself, the uid the proxy runs as). The plugin reads the proxy's runAsUser before the
    /// namespace's annotation, so its rules exempt 3102 and it warns of nothing; `check` now says
    /// what the plugin does. The pod's own annotation is still named, as the plugin names it.
    #[test]
    fn a_namespace_annotation_the_proxys_uid_overrides_is_no_disagreement() {
        let view = PodView::from_spec_json(Some(&spec(3102, 1000)));
        let ns = BTreeMap::from([
            (
                vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
                "1000/10000".to_string(),
            ),
            (vocab::PROXY_UID_ANNOTATION.to_string(), "4102".to_string()),
        ]);
        let cfg = DecisionConfig::default();
        let meta = ObjectMeta::default();
        assert_eq!(
            uid_problems(&meta, &view, Some(&ns), &cfg),
            Vec::<String>::new()
        );
        let meta: ObjectMeta = serde_json::from_value(
            json!({ "annotations": { (vocab::PROXY_UID_ANNOTATION): "5102" } }),
        )
        .unwrap();
        assert_eq!(
            uid_problems(&meta, &view, Some(&ns), &cfg),
            ["linkerd-proxy runs as 3102 but config.linkerd.io/proxy-uid is 5102: the rules exempt 5102"]
        );
    }

    /// `check` on the proxy uid's shared case table, in a range holding every uid: the proxy named
    /// as running as another uid than the rules exempt exactly where the plugin warns so (a value
    /// that is no uid is the `pods` row's), and the validator, run as the uid `check` predicts is
    /// exempted, named. The configured uid is the plugin's alone.
    #[test]
    fn the_proxy_uid_sources_follow_the_shared_case_table() {
        use rules::proxy_uid::PROXY_UID_SOURCE_CASES;
        let cfg = DecisionConfig::default();
        for case in PROXY_UID_SOURCE_CASES
            .iter()
            .filter(|c| c.sources.configured.is_none())
        {
            let s = case.sources;
            let mut ns = BTreeMap::from([(
                vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
                "0/4294967295".to_string(),
            )]);
            if let Some(v) = s.namespace_annotation {
                ns.insert(vocab::PROXY_UID_ANNOTATION.to_string(), v.to_string());
            }
            let meta: ObjectMeta = serde_json::from_value(json!({
                "annotations": s.pod_annotation
                    .map(|v| json!({ (vocab::PROXY_UID_ANNOTATION): v }))
                    .unwrap_or(json!({})),
            }))
            .unwrap();
            let mut proxy = json!({ "name": "linkerd-proxy" });
            if let Some(uid) = s.proxy_run_as_user {
                proxy["securityContext"] = json!({ "runAsUser": uid });
            }
            let validator_uid = case.valid.map_or(99_999, |e| e.uid);
            let view = PodView::from_spec_json(Some(&json!({
                "containers": [proxy],
                "initContainers": [{ "name": "linkerd-network-validator",
                                     "securityContext": { "runAsUser": validator_uid } }],
            })));
            let got = uid_problems(&meta, &view, Some(&ns), &cfg);
            let disagrees = case.disagrees && case.plugin.is_ok();
            assert_eq!(
                got.iter()
                    .any(|p| p.contains(" but config.linkerd.io/proxy-uid is ")),
                disagrees,
                "{}: {got:?}",
                case.name
            );
            assert_eq!(
                got.iter()
                    .any(|p| p.contains("which the rules do not redirect")),
                case.valid.is_some(),
                "{}: {got:?}",
                case.name
            );
        }
    }

    #[test]
    fn uids_that_agree_pass_and_each_disagreement_is_named() {
        let uid = json!({ "config.linkerd.io/proxy-uid": "3102" });
        assert!(problems(uid.clone(), spec(3102, 1000)).is_empty());
        assert_eq!(
            problems(uid.clone(), spec(2102, 1000)),
            ["linkerd-proxy runs as 2102 but config.linkerd.io/proxy-uid is 3102: the rules exempt 3102"]
        );
        assert_eq!(
            problems(json!({}), spec(50000, 1000)),
            ["linkerd-proxy runs as 50000, outside the namespace's uid range 1000/10000"]
        );
        assert_eq!(
            problems(uid.clone(), spec(3102, 65534)),
            ["linkerd-network-validator runs as 65534, outside the namespace's uid range 1000/10000"]
        );
        assert_eq!(
            problems(uid, spec(3102, 3102)),
            ["linkerd-network-validator runs as the proxy's uid 3102, which the rules do not redirect"]
        );
        // Without an annotation the rules follow the container.
        assert_eq!(
            problems(json!({}), spec(3102, 3102)),
            ["linkerd-network-validator runs as the proxy's uid 3102, which the rules do not redirect"]
        );
        assert!(problems(json!({}), json!({})).is_empty());
        // Linkerd's control plane is not the webhook's to fix.
        let meta: ObjectMeta = serde_json::from_value(json!({
            "namespace": "linkerd",
            "labels": { (vocab::CONTROL_PLANE_COMPONENT_LABEL): "destination" },
        }))
        .unwrap();
        let ns = BTreeMap::from([(
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            "1000/10000".to_string(),
        )]);
        let view = PodView::from_spec_json(Some(&spec(2102, 65534)));
        let cfg = DecisionConfig::default();
        assert!(uid_problems(&meta, &view, Some(&ns), &cfg).is_empty());
    }
}
