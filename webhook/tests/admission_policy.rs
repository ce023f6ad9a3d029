//! The MutatingAdmissionPolicy (`rules::admission_policy`) against the webhook's decision, on the real
//! apiserver: every pod of the decision table (`decision_cases`: each rule, each networks format, the
//! OpenShift uid-range cases and the injected proxy and validator), in the three attach settings
//! (per-namespace NADs, a shared NAD, Multus' auxiliary chain), is created with server-side dry run
//! in a namespace with the case's annotations and the policy bound to it; the admitted pod's
//! annotations and Linkerd's containers' uids must be what `rules::decision::decide` makes of the same
//! pod. Pods only the webhook can decide (`only_the_webhook_can`) must come out unchanged. The warning
//! policy (`render_warnings`, a ValidatingAdmissionPolicy with `Warn`) is bound beside it: the kinds
//! of the warnings the dry run returns (its `Warning` headers) must be the kinds `decide` gives,
//! less those only the webhook gives (`WarningKind::webhook_only`, listed), and the uid collisions'
//! text must be `decide`'s word for word.
//!
//! Decided by discovery: on a server that serves no MutatingAdmissionPolicy (v1, or v1beta1 with
//! the gate) the case is reported not run, never passed.

mod decision_cases;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use decision_cases::{aux_only_cases, cases, containers_of, meta_of, Case};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{client, not_run, unique_name, DeleteOnDrop, TestNamespace};
use rules::admission_policy::{
    only_the_webhook_can, render_named, render_warnings, PolicyApi, WarningKind,
    COLLISIONS_JOINED_BY, COLLISIONS_MORE, NAMED_IN_FULL,
};
use rules::attach::Attach;
use rules::decision::{decide, DecisionConfig};
use rules::namespaces::NadPlacement;
use serde_json::{json, Value};

const CASE: &str = "the MutatingAdmissionPolicy decides as the webhook";
/// The label every namespace has from 1.21 on: the test's bindings select one namespace each.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// How long a new policy may take to act (the apiserver's policy informer): about a second here.
const ACTIVATION: Duration = Duration::from_secs(30);

/// The API version serving MutatingAdmissionPolicy, preferred first; None when none does.
async fn served(kube: &Client) -> Option<PolicyApi> {
    for api in PolicyApi::ALL {
        if let Ok(list) = kube.list_api_group_resources(&api.api_version()).await {
            if list
                .resources
                .iter()
                .any(|r| r.kind == "MutatingAdmissionPolicy")
            {
                return Some(api);
            }
        }
    }
    None
}

fn resource(api: PolicyApi, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: PolicyApi::group().to_string(),
        version: api.version().to_string(),
        api_version: api.api_version(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

/// Creates `object` (cluster-scoped, of `res`), deleted when the guard drops.
async fn create(kube: &Client, res: &ApiResource, object: Value) -> DeleteOnDrop<DynamicObject> {
    let api = Api::<DynamicObject>::all_with(kube.clone(), res);
    let object: DynamicObject = serde_json::from_value(object).expect("a rendered object");
    let name = object.metadata.name.clone().expect("a name");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {} {name}: {e}", res.kind));
    DeleteOnDrop::new(api, name)
}

/// The pod as the apiserver takes it: a container where the case has none, an image on each. The
/// decision reads neither, and both sides are given this same pod.
fn valid(case_pod: &Value, namespace: &str) -> Value {
    let mut pod = case_pod.clone();
    let spec = &mut pod["spec"];
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        spec["containers"] = json!([{ "name": "app" }]);
    }
    for list in ["containers", "initContainers"] {
        for c in spec[list].as_array_mut().into_iter().flatten() {
            if c.get("image").is_none() {
                c["image"] = json!("x");
            }
        }
    }
    // The table's pods live in `app`: their namespace-qualified network items follow them.
    let networks = pod["metadata"]
        .get_mut("annotations")
        .and_then(|a| a.get_mut(vocab::NETWORKS_ANNOTATION));
    if let Some(networks) = networks {
        if let Some(text) = networks.as_str() {
            let moved = text
                .replace("app/", &format!("{namespace}/"))
                .replace("\"app\"", &format!("\"{namespace}\""));
            *networks = json!(moved);
        }
    }
    pod
}

/// What the two sides are compared on: the annotations, and each container's runAsUser/runAsGroup.
fn observed(pod: &Value) -> Value {
    let uids = |list: &str| -> Vec<Value> {
        pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let sc = c.get("securityContext").filter(|sc| sc.is_object());
                json!({
                    "name": c["name"],
                    "runAsUser": sc.and_then(|sc| sc.get("runAsUser")),
                    "runAsGroup": sc.and_then(|sc| sc.get("runAsGroup")),
                })
            })
            .collect()
    };
    json!({
        "annotations": pod["metadata"].get("annotations").cloned().unwrap_or(json!({})),
        "containers": uids("containers"),
        "initContainers": uids("initContainers"),
    })
}

/// Waits until a dry run of `pod` in `namespace` gives `want` (the policy is active once the
/// apiserver's informer has it); the last pod seen, or the refusal, when it never does.
async fn active(kube: &Client, namespace: &str, pod: &Value, want: &Value) -> Result<(), String> {
    let deadline = Instant::now() + ACTIVATION;
    loop {
        let last = match dry_run(kube, namespace, pod).await {
            Ok(admitted) if observed(&admitted) == *want => return Ok(()),
            Ok(admitted) => observed(&admitted).to_string(),
            Err(e) => format!("refused: {e}"),
        };
        if Instant::now() > deadline {
            return Err(last);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The pod the webhook's decision makes of `pod` in `namespace`.
fn by_the_webhook(
    pod: &Value,
    namespace: &str,
    ns: &BTreeMap<String, String>,
    cfg: &DecisionConfig,
) -> Value {
    let decision = decide(&meta_of(pod), &containers_of(pod), namespace, Some(ns), cfg);
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &decision.patch).expect("the decision's patch applies");
    patched
}

/// The pod as admitted by a server-side dry-run create in `namespace`, or the refusal.
async fn dry_run(kube: &Client, namespace: &str, pod: &Value) -> Result<Value, String> {
    let res = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
    let api = Api::<DynamicObject>::namespaced_with(kube.clone(), namespace, &res);
    let object: DynamicObject = serde_json::from_value(pod.clone()).map_err(|e| e.to_string())?;
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&params, &object).await {
        Ok(admitted) => Ok(serde_json::to_value(admitted).expect("a pod")),
        Err(e) => Err(e.to_string()),
    }
}

/// [`dry_run`] through a raw request, with the warnings the apiserver returned (kube's typed calls
/// drop the response's `Warning` headers).
async fn dry_run_warned(
    kube: &Client,
    namespace: &str,
    pod: &Value,
) -> Result<(Value, Vec<String>), String> {
    let request = http::Request::post(format!("/api/v1/namespaces/{namespace}/pods?dryRun=All"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(pod).expect("a pod"),
        ))
        .map_err(|e| e.to_string())?;
    let response = kube.send(request).await.map_err(|e| e.to_string())?;
    let warnings = response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| warning_text(&String::from_utf8_lossy(v.as_bytes())))
        .collect();
    let status = response.status();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    let admitted = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok((admitted, warnings))
}

/// The text of a `Warning` header (`299 - "text"`, RFC 7234), unescaped.
fn warning_text(header: &str) -> String {
    let quoted = header
        .split_once(" - \"")
        .map_or(header, |(_, rest)| rest.strip_suffix('"').unwrap_or(rest));
    quoted.replace("\\\"", "\"").replace("\\\\", "\\")
}

/// The warnings' kinds, sorted, one per time a warning says its kind's marker (the policy names every
/// colliding container in one warning, `decide` each in its own); a text of no kind is an error.
fn kinds(warnings: &[String]) -> Result<Vec<WarningKind>, String> {
    let mut kinds = Vec::new();
    for w in warnings {
        let kind = WarningKind::of(w).ok_or_else(|| format!("a warning of no known kind: {w}"))?;
        kinds.extend(std::iter::repeat_n(kind, w.matches(kind.marker()).count()));
    }
    kinds.sort();
    Ok(kinds)
}

/// `decide`'s warnings as the policy gives them: its collision warnings (one per container) as the
/// policy's one, the first `NAMED_IN_FULL` whole and joined, the rest by the container's name.
fn as_the_policy_warns(warnings: &[String]) -> Vec<String> {
    let is_collision = |w: &&String| WarningKind::of(w) == Some(WarningKind::UidCollision);
    let collisions: Vec<&String> = warnings.iter().filter(is_collision).collect();
    let mut out: Vec<String> = warnings
        .iter()
        .filter(|w| !is_collision(w))
        .cloned()
        .collect();
    if !collisions.is_empty() {
        let (whole, named) = collisions.split_at(collisions.len().min(NAMED_IN_FULL));
        let mut text = whole
            .iter()
            .map(|w| w.as_str())
            .collect::<Vec<_>>()
            .join(COLLISIONS_JOINED_BY);
        if !named.is_empty() {
            let names: Vec<&str> = named
                .iter()
                .map(|w| {
                    let rest = w
                        .strip_prefix("linkerd-multus: container ")
                        .expect("a collision");
                    rest.split(' ').next().expect("a name")
                })
                .collect();
            text = format!(
                "{text}{COLLISIONS_JOINED_BY}{COLLISIONS_MORE}{}",
                names.join(", ")
            );
        }
        out.push(text);
    }
    out
}

/// The collision warning's text, whole, less the apiserver's `Validation failed for
/// ValidatingAdmissionPolicy …: ` before the policy's. Its text is all the policy's (no parser
/// explains anything in it), so it is compared word for word.
fn collision_text(warnings: &[String]) -> String {
    warnings
        .iter()
        .filter(|w| WarningKind::of(w) == Some(WarningKind::UidCollision))
        .map(|w| w.find("linkerd-multus: ").map_or(w.as_str(), |at| &w[at..]))
        .collect::<Vec<_>>()
        .join(COLLISIONS_JOINED_BY)
}

/// One attach setting's run.
struct Setting {
    tag: &'static str,
    cfg: DecisionConfig,
}

fn settings() -> Vec<Setting> {
    let nad = DecisionConfig::default();
    let mut shared = nad.clone();
    shared.nad.placement = NadPlacement::Shared("nad-home".into());
    let mut aux = nad.clone();
    aux.nad.attach = Attach::AuxChain;
    vec![
        Setting {
            tag: "nad",
            cfg: nad,
        },
        Setting {
            tag: "shared",
            cfg: shared,
        },
        Setting {
            tag: "aux",
            cfg: aux,
        },
    ]
}

/// How each case came out.
#[derive(Default)]
struct Tally {
    agreed: usize,
    unchanged_for_the_webhook: Vec<String>,
    refused_by_the_apiserver: Vec<String>,
    namespace_unknown: Vec<String>,
    disagreed: Vec<String>,
    /// Cases whose warnings (some kind) agree, and the kinds only the webhook gives, by case.
    warnings_agreed: usize,
    warnings_webhook_only: Vec<String>,
    /// Cases whose collision warnings agree word for word.
    collisions_agreed: usize,
    /// Namespaces where no pod shows the policy at work (no canary).
    without_canary: Vec<String>,
}

/// True when every uid of `observed` is one Kubernetes' validation takes (a range near the top of
/// the uids gives others: the pod would be refused after admission).
fn kubernetes_takes_the_uids(observed: &Value) -> bool {
    ["containers", "initContainers"].iter().all(|list| {
        observed[list].as_array().into_iter().flatten().all(|c| {
            ["runAsUser", "runAsGroup"].iter().all(|f| {
                c[f].as_i64()
                    .is_none_or(|uid| uid <= i64::from(vocab::MAX_KUBERNETES_UID))
            })
        })
    })
}

/// A pod in the namespace the policy must change (proof it is active there), if any the decision
/// changes: tried from the cheapest.
fn canary(namespace: &str, ns: &BTreeMap<String, String>, cfg: &DecisionConfig) -> Option<Value> {
    let app = json!({ "name": "app", "image": "x" });
    let proxy = json!({ "name": vocab::PROXY_CONTAINER, "image": "x",
                        "securityContext": { "runAsUser": 2102 } });
    let validator = json!({ "name": vocab::VALIDATOR_CONTAINER, "image": "x",
                            "securityContext": { "runAsUser": 65534 } });
    let specs = [
        json!({ "containers": [app] }),
        json!({ "containers": [app, proxy] }),
        json!({ "containers": [app, proxy], "initContainers": [validator] }),
        json!({ "containers": [app], "initContainers": [validator] }),
    ];
    let candidates = [
        json!({}),
        json!({ vocab::MULTUS_ANNOTATION: vocab::MULTUS_ENABLED }),
    ];
    let labels = [
        json!({}),
        json!({ vocab::CONTROL_PLANE_COMPONENT_LABEL: "destination" }),
    ];
    for annotations in &candidates {
        for labels in &labels {
            for spec in &specs {
                let pod = json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": { "name": "canary", "annotations": annotations, "labels": labels },
                    "spec": spec,
                });
                let want = observed(&by_the_webhook(&pod, namespace, ns, cfg));
                if want != observed(&pod) && kubernetes_takes_the_uids(&want) {
                    return Some(pod);
                }
            }
        }
    }
    None
}

/// Every case of the decision table, through the policy and through the decision, must give the
/// same pod. Would fail if the policy's CEL and `decide` differed on any rule (a copy, the
/// selection, the comma list, the uid range, the offset, the proxy's or validator's uid), if a
/// webhook-only pod were touched by the policy, or if the policy were not served as rendered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, MutatingAdmissionPolicy served where it can be): run by e2e/test-all"]
async fn the_policy_decides_as_the_webhook() {
    let kube = client().await;
    let Some(api) = served(&kube).await else {
        not_run(
            CASE,
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate)",
        );
        return;
    };
    let policies = resource(api, "MutatingAdmissionPolicy", "mutatingadmissionpolicies");
    let bindings = resource(
        api,
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
    );
    let warn_policies = ApiResource {
        group: PolicyApi::group().to_string(),
        version: "v1".into(),
        api_version: format!("{}/v1", PolicyApi::group()),
        kind: "ValidatingAdmissionPolicy".into(),
        plural: "validatingadmissionpolicies".into(),
    };
    let warn_bindings = ApiResource {
        kind: "ValidatingAdmissionPolicyBinding".into(),
        plural: "validatingadmissionpolicybindings".into(),
        ..warn_policies.clone()
    };
    // Without the label and without a policy: tells a pod the apiserver refuses from a policy's error.
    let plain = TestNamespace::create(&kube, "pol-plain").await;
    let namespaces = Api::<Namespace>::all(kube.clone());

    let mut all: Vec<Case> = cases();
    all.extend(aux_only_cases());
    let mut failures = Vec::new();
    for setting in settings() {
        let mut tally = Tally::default();
        // One namespace per (role, annotations): the table's `linkerd` is Linkerd's namespace.
        let mut groups: BTreeMap<(bool, BTreeMap<String, String>), Vec<&Case>> = BTreeMap::new();
        for case in &all {
            match &case.ns {
                Some(ns) => groups
                    .entry((case.namespace == "linkerd", ns.clone()))
                    .or_default()
                    .push(case),
                None => tally.namespace_unknown.push(case.name.to_string()),
            }
        }
        for ((linkerd, ns_annotations), group) in &groups {
            let ns = TestNamespace::create_with(
                &kube,
                &format!("pol-{}", setting.tag),
                ns_annotations.clone(),
            )
            .await;
            let label = json!({ "metadata": { "labels": {
                vocab::ADMISSION_NAMESPACE_LABEL: vocab::ADMISSION_NAMESPACE_LABEL_VALUE } } });
            namespaces
                .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&label))
                .await
                .expect("labelling the namespace");
            let mut cfg = setting.cfg.clone();
            if *linkerd {
                cfg.nad.linkerd_namespace = ns.name.clone();
            }
            // The warning policy first: the canary below then finds both policies loaded (retried too).
            let mut warn = render_warnings(
                &cfg,
                &unique_name("polw"),
                vocab::ADMISSION_NAMESPACE_LABEL_VALUE,
            );
            warn.binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] =
                json!([{ "key": NAME_LABEL, "operator": "In", "values": [ns.name] }]);
            let _warn_policy = create(&kube, &warn_policies, warn.policy).await;
            let _warn_binding = create(&kube, &warn_bindings, warn.binding).await;
            let mut warned_once = false;
            let mut rendered = render_named(&cfg, api, &unique_name("pol"));
            // Scoped to this namespace, so no other test's pods meet it.
            rendered.binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] =
                json!([{ "key": NAME_LABEL, "operator": "In", "values": [ns.name] }]);
            let _policy = create(&kube, &policies, rendered.policy).await;
            let _binding = create(&kube, &bindings, rendered.binding).await;

            // The policy is active once the apiserver's informer has it: a canary pod shows it.
            let canary = canary(&ns.name, ns_annotations, &cfg);
            if let Some(pod) = &canary {
                let want = observed(&by_the_webhook(pod, &ns.name, ns_annotations, &cfg));
                if let Err(last) = active(&kube, &ns.name, pod, &want).await {
                    // Reported with the cases, which then show where the two differ.
                    tally.disagreed.push(format!(
                        "the canary pod in {} never came out as the webhook makes it:\n    \
                         policy  {last}\n    webhook {want}",
                        ns.name
                    ));
                }
            } else {
                // Nothing the policy does shows here: every case must then come out unchanged.
                tally.without_canary.push(ns.name.clone());
            }

            for case in group {
                let pod = valid(&case.pod, &ns.name);
                let webhook_only = only_the_webhook_can(meta_of(&pod).annotations.as_ref(), &cfg);
                let want = match webhook_only {
                    Some(_) => observed(&pod),
                    None => observed(&by_the_webhook(&pod, &ns.name, ns_annotations, &cfg)),
                };
                if canary.is_none() && want != observed(&pod) {
                    tally.disagreed.push(format!(
                        "{}: no canary pod proves the policy active in {}, where it must act",
                        case.name, ns.name
                    ));
                    continue;
                }
                // The warnings' kinds the policy must give: none for a webhook-only pod (the
                // webhook warns), else decide's less those only the webhook gives.
                let decided = decide(
                    &meta_of(&pod),
                    &containers_of(&pod),
                    &ns.name,
                    Some(ns_annotations),
                    &cfg,
                );
                let mut want_warnings = Vec::new();
                let decided_warnings = as_the_policy_warns(&decided.warnings);
                if webhook_only.is_none() {
                    for kind in kinds(&decided_warnings).expect("decide's warnings have kinds") {
                        match kind.webhook_only() {
                            Some(why) => tally
                                .warnings_webhook_only
                                .push(format!("{}: {kind:?} ({why})", case.name)),
                            None => want_warnings.push(kind),
                        }
                    }
                }
                let deadline = Instant::now() + ACTIVATION;
                let got = loop {
                    let got = dry_run_warned(&kube, &ns.name, &pod).await;
                    let warned = got.as_ref().map(|(_, w)| kinds(w));
                    if let Ok(Ok(k)) = &warned {
                        warned_once |= !k.is_empty();
                    }
                    // Until the warning policy is seen at work here, a missing warning may be its
                    // informer's lag: retried.
                    let settled = warned_once
                        || want_warnings.is_empty()
                        || matches!(&warned, Ok(Ok(k)) if *k == want_warnings)
                        || Instant::now() > deadline;
                    if settled {
                        break got;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                };
                let got = got.map(|(admitted, warnings)| {
                    match kinds(&warnings) {
                        Ok(k) if k == want_warnings
                            && collision_text(&warnings) != collision_text(&decided_warnings) =>
                        {
                            tally.disagreed.push(format!(
                                "{}: the collision warning's text\n    policy  {}\n    webhook {}",
                                case.name,
                                collision_text(&warnings),
                                collision_text(&decided_warnings)
                            ))
                        }
                        Ok(k) if k == want_warnings => {
                            if !k.is_empty() {
                                tally.warnings_agreed += 1;
                            }
                            if k.contains(&WarningKind::UidCollision) {
                                tally.collisions_agreed += 1;
                            }
                        }
                        Ok(k) => tally.disagreed.push(format!(
                            "{}: warnings\n    policy  {k:?} {warnings:?}\n    webhook {want_warnings:?} {:?}",
                            case.name, decided.warnings
                        )),
                        Err(e) => tally.disagreed.push(format!("{}: {e}", case.name)),
                    }
                    admitted
                });
                match got {
                    Ok(admitted) if observed(&admitted) == want => match webhook_only {
                        Some(why) => tally.unchanged_for_the_webhook.push(format!(
                            "{} ({})",
                            case.name,
                            why.reason()
                        )),
                        None => tally.agreed += 1,
                    },
                    Ok(admitted) => tally.disagreed.push(format!(
                        "{}:\n    policy  {}\n    webhook {}",
                        case.name,
                        observed(&admitted),
                        want
                    )),
                    // Refused where no policy runs too: a pod the apiserver never admits.
                    Err(e) => match dry_run(&kube, &plain.name, &pod).await {
                        Err(_) => tally
                            .refused_by_the_apiserver
                            .push(format!("{}: {e}", case.name)),
                        Ok(_) => tally
                            .disagreed
                            .push(format!("{}: refused through the policy: {e}", case.name)),
                    },
                }
            }
        }
        eprintln!(
            "{} ({} namespaces): {} cases agree ({} with warnings of the same kinds, {} of them the same \
             uid collisions); {} left unchanged \
             for the webhook; {} refused by the apiserver with or without the policy; {} need an \
             unreadable namespace (the apiserver always has it); {} disagree; {} namespaces without a \
             canary",
            setting.tag,
            groups.len(),
            tally.agreed,
            tally.warnings_agreed,
            tally.collisions_agreed,
            tally.unchanged_for_the_webhook.len(),
            tally.refused_by_the_apiserver.len(),
            tally.namespace_unknown.len(),
            tally.disagreed.len(),
            tally.without_canary.len()
        );
        for line in &tally.unchanged_for_the_webhook {
            eprintln!("  webhook only: {line}");
        }
        for line in &tally.refused_by_the_apiserver {
            eprintln!("  refused: {line}");
        }
        for line in &tally.warnings_webhook_only {
            eprintln!("  warning only the webhook gives: {line}");
        }
        assert!(
            tally.warnings_agreed >= 3,
            "{}: only {} cases with warnings compared",
            setting.tag,
            tally.warnings_agreed
        );
        if setting.cfg.nad.attach.uses_nads() {
            assert!(
                !tally.unchanged_for_the_webhook.is_empty(),
                "{}: no webhook-only case was exercised",
                setting.tag
            );
        }
        assert!(
            tally.agreed >= 60,
            "{}: only {} cases compared",
            setting.tag,
            tally.agreed
        );
        // The decision table's collisions: own runAsUser, the pod's, the range's first (two apps
        // beside a native sidecar, seven apps), by the pod's, the namespace's and the proxy's uid. Listed with
        // the cases that differ, which say why.
        if tally.collisions_agreed < 8 {
            tally.disagreed.push(format!(
                "only {} cases with uid collisions agree, of the table's 8",
                tally.collisions_agreed
            ));
        }
        failures.extend(
            tally
                .disagreed
                .into_iter()
                .map(|d| format!("[{}] {d}", setting.tag)),
        );
    }
    assert!(
        failures.is_empty(),
        "{} cases differ between the policy and the webhook:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
