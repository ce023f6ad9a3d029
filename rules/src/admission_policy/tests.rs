use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::attach::Attach;
use crate::namespaces::NadPlacement;
use crate::proxy_uid::ProxyUidSource;

/// A setting a CEL literal could not hold as written would change the expression around it (or fail
/// to compile in the apiserver): each is escaped.
#[test]
fn literals_are_escaped() {
    let cases = [
        ("linkerd-cni", r#""linkerd-cni""#),
        ("", r#""""#),
        (r#"a"b"#, r#""a\"b""#),
        (r"a\b", r#""a\\b""#),
        ("a'b", r#""a'b""#),
        ("line\nbreak\r\ttab", r#""line\nbreak\r\ttab""#),
        ("\u{0}\u{1b}\u{7f}\u{85}", r#""\u0000\u001b\u007f\u0085""#),
        ("ünï €", r#""ünï €""#),
        (r"^[0-9]+\s$", r#""^[0-9]+\\s$""#),
    ];
    for (raw, want) in cases {
        assert_eq!(quote(raw), want, "{raw:?}");
    }
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The pods left to the webhook: a JSON-list networks annotation (however it is spaced), with NADs
/// only. Would break if the policy were asked to merge into JSON, or if aux-chain pods were sent to the
/// webhook for an annotation nothing reads.
#[test]
fn only_the_webhook_merges_into_a_json_list() {
    let nad = DecisionConfig::default();
    let mut aux = nad.clone();
    aux.nad.attach = Attach::AuxChain;
    let n = vocab::NETWORKS_ANNOTATION;
    let json_list = Some(WebhookOnly::NetworksJsonList);
    type Case = (Option<BTreeMap<String, String>>, Option<WebhookOnly>);
    let cases: [Case; 7] = [
        (None, None),
        (Some(annotations(&[])), None),
        (Some(annotations(&[(n, "a,b@eth1")])), None),
        (Some(annotations(&[(n, r#"{"name":"a"}"#)])), None),
        (Some(annotations(&[(n, "[]")])), json_list),
        (
            Some(annotations(&[(n, " \n[{\"name\":\"a\"}]")])),
            json_list,
        ),
        (Some(annotations(&[(n, "[broken")])), json_list),
    ];
    for (pod, want) in cases {
        assert_eq!(only_the_webhook_can(pod.as_ref(), &nad), want, "{pod:?}");
        assert_eq!(only_the_webhook_can(pod.as_ref(), &aux), None, "{pod:?}");
    }
    assert_eq!(
        render(&nad, PolicyApi::V1).policy["spec"]["matchConditions"],
        json!([{
            "name": "networks-not-a-json-list",
            "expression": "!object.metadata.?annotations[?\"k8s.v1.cni.cncf.io/networks\"]\
                           .orValue('').trim().startsWith('[')",
        }])
    );
    assert_eq!(
        render(&aux, PolicyApi::V1).policy["spec"]["matchConditions"],
        json!([])
    );
}

/// Everything of the policy but its variables, and the whole binding: the shape the apiserver
/// accepted on v1.35 (one policy, reinvoked, an ApplyConfiguration then a JSONPatch, bound to the
/// labelled namespaces). The API version changes the version alone.
#[test]
fn the_objects_around_the_cel() {
    let cfg = DecisionConfig::default();
    let Rendered {
        mut policy,
        binding,
        ..
    } = render(&cfg, PolicyApi::V1Beta1);
    let variables = policy["spec"]
        .as_object_mut()
        .and_then(|spec| spec.remove("variables"))
        .expect("variables");
    assert_eq!(variables.as_array().map(Vec::len), Some(39));
    let labels = json!({ "app.kubernetes.io/managed-by": "linkerd-multus-operator" });
    assert_eq!(
        policy,
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": { "name": "attach.multus.linkerd.io", "labels": labels },
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "matchConstraints": { "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods"],
                }] },
                "matchConditions": [{
                    "name": "networks-not-a-json-list",
                    "expression": "!object.metadata.?annotations[?\"k8s.v1.cni.cncf.io/networks\"]\
                                   .orValue('').trim().startsWith('[')",
                }],
                "mutations": [
                    { "patchType": "ApplyConfiguration", "applyConfiguration": { "expression":
                        "variables.annotations.size() == 0 ? Object{} : \
                         Object{metadata: Object.metadata{annotations: variables.annotations}}" } },
                    { "patchType": "JSONPatch", "jsonPatch": { "expression":
                        "(variables.moveProxy ? [variables.proxyHasSecurityContext ? \
                         JSONPatch{op: 'add', path: variables.proxyPath + '/securityContext/runAsUser', \
                         value: variables.proxyUid} : JSONPatch{op: 'add', path: variables.proxyPath + \
                         '/securityContext', value: {'runAsUser': variables.proxyUid}}] : []) + \
                         (variables.moveValidatorUser ? [JSONPatch{op: 'add', path: '/spec/initContainers/' \
                         + string(variables.validator) + \"/securityContext/runAsUser\", value: \
                         variables.validatorTarget}] : []) + (variables.moveValidatorGroup ? \
                         [JSONPatch{op: 'add', path: '/spec/initContainers/' + string(variables.validator) \
                         + \"/securityContext/runAsGroup\", value: variables.validatorTarget}] : [])" } },
                ],
            },
        })
    );
    assert_eq!(
        binding,
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": { "name": "attach.multus.linkerd.io", "labels": labels },
            "spec": {
                "policyName": "attach.multus.linkerd.io",
                "matchResources": { "namespaceSelector": { "matchLabels": {
                    "multus.linkerd.io/admission": "enabled" } } },
            },
        })
    );
    let v1 = render(&cfg, PolicyApi::V1);
    assert_eq!(v1.policy["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(v1.binding["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(v1.binding["spec"], binding["spec"]);
}

fn variables(cfg: &DecisionConfig) -> Vec<(String, String)> {
    let policy = render(cfg, PolicyApi::V1).policy;
    policy["spec"]["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|v| {
            let text = |k: &str| v[k].as_str().expect("a string").to_string();
            (text("name"), text("expression"))
        })
        .collect()
}

/// The variables that carry the settings, for the defaults and for every setting changed (a shared
/// NAD, another NAD name with a quote in it, Linkerd elsewhere, another range annotation and offset;
/// then the auxiliary chain). Would break if a setting were not rendered, or rendered unescaped.
#[test]
fn settings_are_rendered_as_literals() {
    let pick = |cfg: &DecisionConfig| -> Value {
        let wanted = [
            "controlPlane",
            "networksPresent",
            "networks",
            "uidApplies",
            "offsetUid",
        ];
        Value::Object(
            variables(cfg)
                .into_iter()
                .filter(|(name, _)| wanted.contains(&name.as_str()))
                .map(|(name, text)| (name, Value::String(text)))
                .collect(),
        )
    };
    let defaults = DecisionConfig::default();
    assert_eq!(
        pick(&defaults),
        json!({
            "controlPlane": "request.namespace == \"linkerd\" && \
                object.metadata.?labels[?\"linkerd.io/control-plane-component\"].orValue('') != ''",
            "networksPresent": "variables.networksItems.exists(item, (item.contains('/') ? item : \
                request.namespace + '/' + item).split('@')[0] == request.namespace + '/' + \"linkerd-cni\")",
            "networks": "variables.attached && !variables.networksPresent ? \
                (variables.networksItems.size() == 0 ? \"linkerd-cni\" : variables.networksKept + \
                (variables.networksKept.contains(', ') ? ', ' : ',') + \"linkerd-cni\") : ''",
            "uidApplies": "variables.attached && !variables.controlPlane && \
                variables.nsAnnotations[?\"openshift.io/sa.scc.uid-range\"].hasValue()",
            "offsetUid": "2102 > 0 && 2102 < variables.rangeSize && variables.rangeFirst + 2102 < \
                4294967295 ? variables.rangeFirst + 2102 : -1",
        })
    );

    let mut changed = DecisionConfig::default();
    changed.nad.name = "my\"nad".into();
    changed.nad.placement = NadPlacement::Shared("nad-home".into());
    changed.nad.linkerd_namespace = "mesh".into();
    changed.uids.range_annotation = "example.com/uids".into();
    changed.uids.proxy_uid_offset = 5;
    assert_eq!(
        pick(&changed),
        json!({
            "controlPlane": "request.namespace == \"mesh\" && \
                object.metadata.?labels[?\"linkerd.io/control-plane-component\"].orValue('') != ''",
            "networksPresent": "variables.networksItems.exists(item, (item.contains('/') ? item : \
                request.namespace + '/' + item).split('@')[0] == \"nad-home\" + '/' + \"my\\\"nad\")",
            "networks": "variables.attached && !variables.networksPresent ? \
                (variables.networksItems.size() == 0 ? \"nad-home/my\\\"nad\" : variables.networksKept + \
                (variables.networksKept.contains(', ') ? ', ' : ',') + \"nad-home/my\\\"nad\") : ''",
            "uidApplies": "variables.attached && !variables.controlPlane && \
                variables.nsAnnotations[?\"example.com/uids\"].hasValue()",
            "offsetUid": "5 > 0 && 5 < variables.rangeSize && variables.rangeFirst + 5 < \
                4294967295 ? variables.rangeFirst + 5 : -1",
        })
    );

    let mut aux = changed.clone();
    aux.nad.attach = Attach::AuxChain;
    assert_eq!(
        pick(&aux),
        json!({
            "controlPlane": "request.namespace == \"mesh\" && \
                object.metadata.?labels[?\"linkerd.io/control-plane-component\"].orValue('') != ''",
            "networks": "''",
            "uidApplies": "variables.attached && !variables.controlPlane && \
                variables.nsAnnotations[?\"example.com/uids\"].hasValue()",
            "offsetUid": "5 > 0 && 5 < variables.rangeSize && variables.rangeFirst + 5 < \
                4294967295 ? variables.rangeFirst + 5 : -1",
        })
    );
}

/// The apiserver refuses a variable that names one defined after it (or not at all), and one named
/// twice: every `variables.<name>` in a variable or mutation is defined before it is used.
#[test]
fn variables_are_defined_before_use() {
    let mut aux = DecisionConfig::default();
    aux.nad.attach = Attach::AuxChain;
    for cfg in [DecisionConfig::default(), aux] {
        let rendered = render(&cfg, PolicyApi::V1).policy;
        let mut defined: Vec<String> = Vec::new();
        let used = |text: &str| -> Vec<String> {
            text.split("variables.")
                .skip(1)
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect()
                })
                .collect()
        };
        for (name, text) in variables(&cfg) {
            for u in used(&text) {
                assert!(defined.contains(&u), "{name} uses {u} before it is defined");
            }
            assert!(!defined.contains(&name), "{name} defined twice");
            defined.push(name);
        }
        for mutation in rendered["spec"]["mutations"].as_array().expect("mutations") {
            let text = mutation.to_string();
            for u in used(&text) {
                assert!(defined.contains(&u), "a mutation uses {u}, never defined");
            }
        }
        // The warning policy: the same variables, then its own, then the validations.
        let warn = render_warnings(&cfg, "x", "enabled").policy;
        let mut defined: Vec<String> = Vec::new();
        for var in warn["spec"]["variables"].as_array().expect("variables") {
            let name = var["name"].as_str().expect("a name").to_string();
            for u in used(var["expression"].as_str().expect("an expression")) {
                assert!(
                    defined.contains(&u),
                    "warning {name} uses {u} before it is defined"
                );
            }
            assert!(!defined.contains(&name), "warning {name} defined twice");
            defined.push(name);
        }
        for validation in warn["spec"]["validations"].as_array().expect("validations") {
            for u in used(&validation.to_string()) {
                assert!(defined.contains(&u), "a validation uses {u}, never defined");
            }
        }
    }
}

/// The webhook's condition in policy mode is the complement of the policy's: the JSON-list pods with
/// NADs, nothing in aux-chain mode. Would break if the webhook took the policy's pods (with it down,
/// they would wait) or skipped the policy's skipped pods (attached by nobody).
#[test]
fn the_webhook_takes_the_complement() {
    let nad = DecisionConfig::default();
    let mut aux = nad.clone();
    aux.nad.attach = Attach::AuxChain;
    assert_eq!(
        webhook_match_condition(&nad),
        json!({
            "name": WEBHOOK_CONDITION_NAME,
            "expression": "!((!object.metadata.?annotations[?\"k8s.v1.cni.cncf.io/networks\"]\
                           .orValue('').trim().startsWith('[')))",
        })
    );
    assert_eq!(
        webhook_match_condition(&aux),
        json!({ "name": WEBHOOK_CONDITION_NAME, "expression": "false" })
    );
}

/// Both objects name the webhook configuration as their owner (the garbage collector deletes them
/// with it), without blockOwnerDeletion; a configuration without a uid owns nothing. Would break if
/// either object were left unowned (it would outlive an uninstall).
#[test]
fn both_objects_are_owned_by_the_webhook_configuration() {
    let config = json!({"metadata": {"name": "zz-lm", "uid": "u-1"}});
    let owner = Owner::of(&config).expect("an owner");
    let rendered = render(&DecisionConfig::default(), PolicyApi::V1Beta1).owned_by(&owner);
    for object in [
        &rendered.policy,
        &rendered.binding,
        &rendered.warning_policy,
        &rendered.warning_binding,
    ] {
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([{"apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "MutatingWebhookConfiguration", "name": "zz-lm", "uid": "u-1"}])
        );
    }
    assert_eq!(Owner::of(&json!({"metadata": {"name": "zz-lm"}})), None);
    assert_eq!(
        Owner::of(&json!({"metadata": {"name": "zz-lm", "uid": ""}})),
        None
    );
}

/// The warning policy warns only (a CEL error or a warning never refuses a pod), is bound with `Warn`
/// to the namespaces the mutating policy's binding selects, skips the pods only the webhook decides,
/// and has one validation per kind CEL can tell under the setting. Would break if a warning could
/// refuse a pod, or a kind were dropped or given where it cannot arise.
#[test]
fn the_warning_policy_only_warns() {
    let nad = DecisionConfig::default();
    let mut aux = nad.clone();
    aux.nad.attach = Attach::AuxChain;
    let r = render(&nad, PolicyApi::V1);
    assert_eq!(r.warning_policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(
        r.warning_policy["apiVersion"],
        "admissionregistration.k8s.io/v1"
    );
    assert_eq!(r.warning_policy["spec"]["failurePolicy"], "Ignore");
    assert_eq!(
        r.warning_binding["spec"]["validationActions"],
        json!(["Warn"])
    );
    assert_eq!(
        r.warning_binding["spec"]["matchResources"],
        r.binding["spec"]["matchResources"]
    );
    assert_eq!(
        r.warning_policy["spec"]["matchConditions"],
        r.policy["spec"]["matchConditions"]
    );
    let count = |cfg: &DecisionConfig| {
        render_warnings(cfg, "x", "enabled").policy["spec"]["validations"]
            .as_array()
            .map(Vec::len)
    };
    let in_policy = WarningKind::ALL
        .iter()
        .filter(|k| k.webhook_only().is_none())
        .count();
    assert_eq!(count(&nad), Some(in_policy));
    // No networks annotation is read with the auxiliary chain.
    assert_eq!(count(&aux), Some(in_policy - 1));
    for kind in WarningKind::ALL {
        assert_eq!(
            WarningKind::of(&format!("x {} y", kind.marker())),
            Some(kind)
        );
    }
    assert_eq!(WarningKind::of("something else"), None);
}

/// The policy's collision warning says `decide`'s words: for each source of the exempted uid (by the
/// plugin's precedence) and each origin of the container's uid, its CEL with the container's name,
/// the uid and the origin given values is `Collision::explain`'s text. Would break if either text
/// changed without the other, or a source's fix were given for another.
#[test]
fn the_collision_warning_is_decides_text() {
    use crate::proxy_uid::collision::{AppUid, Collision};
    let origin = cel::collision_from(
        AppUid::Own.text(),
        AppUid::Pod.text(),
        AppUid::RangeFirst.text(),
    );
    let sources: Vec<ProxyUidSource> = cel::exempting_sources()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(
        sources,
        [
            ProxyUidSource::PodAnnotation,
            ProxyUidSource::ProxyRunAsUser,
            ProxyUidSource::NamespaceAnnotation
        ]
    );
    for exempted in sources {
        for from in [AppUid::Own, AppUid::Pod, AppUid::RangeFirst] {
            let text = warnings::collision_text(exempted)
                .replace("c.name", &quote("app"))
                .replace("string(variables.exemptedUid)", &quote("5000"))
                .replace(&origin, &quote(from.text()));
            // Only literals are left, `("…" + "…")`: read as a JSON list of strings.
            let inner = text
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .expect("in parentheses");
            let parts: Vec<String> =
                serde_json::from_str(&format!("[{}]", inner.replace("\" + \"", "\", \"")))
                    .unwrap_or_else(|e| {
                        panic!("{exempted:?} {from:?}: not only literals: {e}: {text}")
                    });
            let want = Collision {
                container: "app".into(),
                uid: 5000,
                from,
                exempted,
            };
            assert_eq!(
                parts.concat(),
                format!("linkerd-multus: {}", want.explain()),
                "{exempted:?} {from:?}"
            );
        }
    }
}

/// The collision validation: given where `collisions` is not empty, its message picks the text by
/// the source that named the uid, in the plugin's order, and names every container; a message the
/// apiserver cannot take falls back to one that still has the kind's marker.
#[test]
fn the_collision_validation() {
    let warn = render_warnings(&DecisionConfig::default(), "x", "enabled").policy;
    let validation = warn["spec"]["validations"]
        .as_array()
        .expect("validations")
        .iter()
        .find(|v| v["expression"] == "!(variables.collisions.size() > 0)")
        .expect("the collision validation")
        .clone();
    let message = validation["messageExpression"].as_str().expect("a message");
    let pod = warnings::collision_text(ProxyUidSource::PodAnnotation);
    let proxy = warnings::collision_text(ProxyUidSource::ProxyRunAsUser);
    let ns = warnings::collision_text(ProxyUidSource::NamespaceAnnotation);
    let place = "variables.collisions.map(x, x.name).indexOf(c.name)";
    assert_eq!(
        message,
        format!(
            "variables.collisions.filter(c, {place} < 5).map(c, variables.exemptedFrom == \
             'podAnnotationUid' ? {pod} : variables.exemptedFrom == 'proxyRunsAs' ? {proxy} : {ns})\
             .join(\"; \") + (variables.collisions.size() > 5 ? \
             \"; the same for these containers too: \" + \
             variables.collisions.filter(c, {place} >= 5).map(c, c.name).join(', ') : '')"
        )
    );
    assert_eq!(
        WarningKind::of(validation["message"].as_str().expect("a fallback")),
        Some(WarningKind::UidCollision)
    );
    let variables: BTreeMap<String, String> = warn["spec"]["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap().into(),
                v["expression"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        variables["exemptedUid"],
        "variables.podAnnotationUid >= 0 ? variables.podAnnotationUid : variables.proxyRunsAs >= 0 ? \
         variables.proxyRunsAs : variables.nsAnnotationUid >= 0 ? variables.nsAnnotationUid : -1"
    );
}
