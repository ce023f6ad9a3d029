use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rules::admission_mode::AdmissionMode;
use rules::admission_policy::PolicyApi;
use rules::policy_agreement::PROBE_NAME_PREFIX;
use serde_json::json;

use super::*;

const RANGE: &str = "1000650000/10000";

fn settings(mode: AdmissionMode) -> AdmissionSettings {
    AdmissionSettings::for_tests(mode)
}

/// A namespace `name`: enabled or not, labelled or not, with OpenShift's uid range or not.
fn namespace(name: &str, enabled: bool, labelled: bool, range: bool) -> Namespace {
    let mut annotations = BTreeMap::new();
    if enabled {
        annotations.insert(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        );
    }
    if range {
        annotations.insert(
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            RANGE.to_string(),
        );
    }
    let label = (
        vocab::ADMISSION_NAMESPACE_LABEL.to_string(),
        vocab::ADMISSION_NAMESPACE_LABEL_VALUE.to_string(),
    );
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(annotations),
            labels: labelled.then(|| [label].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The policy path live: served, the policy and binding there.
fn live() -> AdmissionSeen {
    AdmissionSeen {
        served: Ok(Some(PolicyApi::V1Beta1)),
        policy: Ok(Some(json!({}))),
        binding: Ok(Some(json!({}))),
        warning_policy: Ok(Some(json!({}))),
        warning_binding: Ok(Some(json!({}))),
        webhook_config: Ok(None),
    }
}

fn not_probed(planned: Result<Plan, Probe>) -> String {
    match planned {
        Err(Probe::NotProbed(why)) => why,
        other => panic!("expected not probed: {other:?}"),
    }
}

/// The probe goes to an enabled, labelled namespace (one with a uid range first), never Linkerd's
/// or a terminating one, and only while the policy path is live with the policy and binding there.
/// Would break if `check` probed where the binding does not select (a false ×) or compared
/// against the webhook while the webhook is live.
#[test]
fn the_plan_picks_a_namespace_the_policy_serves() {
    let cfg = DecisionConfig::default();
    let s = settings(AdmissionMode::Auto);
    let mut terminating = namespace("a-going", true, true, true);
    terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
    let namespaces = [
        namespace(&cfg.nad.linkerd_namespace, true, true, true),
        terminating,
        namespace("b-unlabelled", true, false, true),
        namespace("c-disabled", false, true, true),
        namespace("d-plain", true, true, false),
        namespace("e-ranged", true, true, true),
    ];
    let plan = plan(&live(), &s, &cfg, &namespaces).expect("a plan");
    assert_eq!(plan.namespace, "e-ranged");
    assert_eq!(plan.pod["metadata"]["generateName"], PROBE_NAME_PREFIX);
    // The webhook's decision, with the namespace's range.
    assert_eq!(
        plan.decided["metadata"]["annotations"][vocab::PROXY_UID_ANNOTATION],
        "1000652102"
    );
    // Without a ranged one, a plain one.
    let plan = super::plan(&live(), &s, &cfg, &namespaces[..5]).expect("a plan");
    assert_eq!(plan.namespace, "d-plain");

    let why = not_probed(super::plan(&live(), &s, &cfg, &namespaces[..4]));
    assert!(why.contains("no namespace annotated"), "{why}");

    let mut missing = live();
    missing.binding = Ok(None);
    let why = not_probed(super::plan(&missing, &s, &cfg, &namespaces));
    assert!(why.contains("MutatingAdmissionPolicyBinding"), "{why}");

    // The webhook live (not served; or webhook mode): nothing to compare.
    let mut plain = live();
    plain.served = Ok(None);
    assert!(matches!(
        super::plan(&plain, &s, &cfg, &namespaces),
        Err(Probe::NotLive(_))
    ));
    let webhook = settings(AdmissionMode::Webhook);
    assert!(matches!(
        super::plan(&live(), &webhook, &cfg, &namespaces),
        Err(Probe::NotLive(_))
    ));
}

/// The line: ✓ listing what was compared when the admitted pod is the webhook's; × naming each
/// value and both sides when the policy decided otherwise (here: another offset); "not probed",
/// never ✓ and never ×, when refused for lack of permission; × when our policy itself refused.
/// Would break if the line passed a disagreement, or failed `check` for a missing permission.
#[test]
fn the_line_names_what_differs() {
    let cfg = DecisionConfig::default();
    let s = settings(AdmissionMode::Policy);
    let namespaces = [namespace("apps", true, true, true)];
    let plan = plan(&live(), &s, &cfg, &namespaces).expect("a plan");

    let agreed = verdict(&Probe::Admitted {
        admitted: plan.decided.clone(),
        plan: Box::new(plan.clone()),
    });
    assert!(agreed.ok && !agreed.warning, "{agreed:?}");
    assert!(agreed.message.contains("8 values compared"), "{agreed:?}");
    assert!(
        agreed
            .items
            .contains(&"annotation config.linkerd.io/proxy-uid: \"1000652102\"".to_string()),
        "{agreed:?}"
    );

    let mut other = cfg.clone();
    other.uids.proxy_uid_offset = 1000;
    let admitted = decided(
        &plan.pod,
        "apps",
        &namespaces[0].metadata.annotations.clone().unwrap(),
        &other,
    )
    .expect("decided");
    let differ = verdict(&Probe::Admitted {
        admitted,
        plan: Box::new(plan.clone()),
    });
    assert!(!differ.ok, "{differ:?}");
    assert!(
        differ
            .message
            .contains("annotation config.linkerd.io/proxy-uid, linkerd-proxy runAsUser"),
        "{differ:?}"
    );
    assert_eq!(
        differ.items,
        [
            "annotation config.linkerd.io/proxy-uid: the policy gave \"1000651000\", the webhook \
             would give \"1000652102\"",
            "linkerd-proxy runAsUser: the policy gave 1000651000, the webhook would give 1000652102"
        ]
    );

    let forbidden = verdict(&Probe::Refused {
        namespace: "apps".into(),
        why: "pods is forbidden: User \"x\" cannot create resource \"pods\"".into(),
        forbidden: true,
        by_policy: false,
    });
    assert!(forbidden.ok && forbidden.warning, "{forbidden:?}");
    assert!(forbidden.message.starts_with("not probed"), "{forbidden:?}");
    assert!(forbidden
        .hint
        .as_deref()
        .unwrap_or_default()
        .contains("create"));

    let by_policy = verdict(&Probe::Refused {
        namespace: "apps".into(),
        why: format!(
            "policy '{}' with binding denied request",
            vocab::ADMISSION_POLICY_NAME
        ),
        forbidden: true,
        by_policy: true,
    });
    assert!(!by_policy.ok, "{by_policy:?}");

    let not_live = verdict(&Probe::NotLive("the webhook".into()));
    assert!(
        not_live.ok && not_live.message.starts_with("not probed"),
        "{not_live:?}"
    );
    let none = verdict(&Probe::NotProbed("no namespace".into()));
    assert!(none.ok && none.warning, "{none:?}");
}
