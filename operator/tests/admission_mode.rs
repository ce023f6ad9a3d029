//! `--admission` on the real apiserver, the operator's side of it: in policy mode the operator keeps
//! the MutatingAdmissionPolicy and binding, labels the enabled namespaces and narrows the webhook, so a
//! pod created there while the operator is stopped (and its webhook unreachable) is still attached; in
//! webhook mode (and `auto` where the API is not served) none of it exists and the webhook takes every
//! pod, as before.
//!
//! The "webhook" is a MutatingWebhookConfiguration of the test's own (entry `attach.multus.linkerd.io`,
//! the chart's) calling an address where nothing listens, `failurePolicy: Fail`: every pod it takes is
//! refused, which is what an operator that is down does. One test function: a policy and binding are
//! cluster-wide, and two at once would both mutate the labelled namespaces.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::{not_run, unique_name, DeleteOnDrop, TestNamespace};
use linkerd_multus_operator::admission::objects::{self, Kind};
use linkerd_multus_operator::admission::{current, AdmissionSettings};
use linkerd_multus_operator::check::{admission, agreement, render_human, Verdict};
use rules::admission_policy::PolicyApi;
use serde_json::{json, Value};
use support::*;

const CASE: &str = "policy mode admits an enabled namespace's pods with the operator stopped";
const RANGE: &str = "1000650000/10000";
const OFFSET: u32 = 2102;

/// The test's webhook configuration: the chart's entry name, an address nobody serves, this run's
/// namespaces only.
async fn unreachable_webhook(h: &Harness) -> DeleteOnDrop<DynamicObject> {
    let name = unique_name("adm-mwc");
    let api: Api<DynamicObject> = Api::all_with(
        h.client.clone(),
        &kube::api::ApiResource::erase::<
            k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
        >(&()),
    );
    let mwc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": { "name": name },
        "webhooks": [{
            "name": vocab::WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 2,
            "clientConfig": { "url": "https://127.0.0.1:1/annotate-multus-v1-pod" },
            "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["pods"] }],
            "namespaceSelector": { "matchLabels": { RUN_LABEL: h.run_id } },
        }],
    }))
    .expect("a configuration");
    api.create(&PostParams::default(), &mwc)
        .await
        .expect("create the webhook configuration");
    DeleteOnDrop::new(api, name)
}

/// An enabled namespace of this run, with OpenShift's uid range.
async fn enabled_namespace(h: &Harness) -> TestNamespace {
    let annotations = BTreeMap::from([
        (
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        ),
        (
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            RANGE.to_string(),
        ),
    ]);
    let ns = TestNamespace::create_with(&h.client, "adm-app", annotations).await;
    h.label(&ns.name).await;
    ns
}

async fn create_pod(kube: &Client, ns: &str, networks: Option<&str>) -> Result<Pod, String> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": unique_name("adm-pod") },
        "spec": { "containers": [{ "name": "app", "image": "x" }] },
    });
    if let Some(networks) = networks {
        pod["metadata"]["annotations"] = json!({ vocab::NETWORKS_ANNOTATION: networks });
    }
    let pod: Pod = serde_json::from_value(pod).expect("a pod");
    Api::<Pod>::namespaced(kube.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .map_err(|e| e.to_string())
}

/// Whether `ns` carries the admission label (any value: this test's binding selects its run id).
async fn labelled(kube: &Client, ns: &str) -> bool {
    let ns = Api::<Namespace>::all(kube.clone())
        .get(ns)
        .await
        .expect("namespace");
    ns.metadata
        .labels
        .is_some_and(|l| l.contains_key(vocab::ADMISSION_NAMESPACE_LABEL))
}

async fn webhook_condition(kube: &Client, config: &str) -> Option<Value> {
    let live = objects::get_webhook_config(kube, config)
        .await
        .expect("read the configuration")?;
    current::webhook_condition(&live, vocab::WEBHOOK_NAME).cloned()
}

async fn exists(kube: &Client, api: PolicyApi, kind: Kind, name: &str) -> bool {
    objects::get(kube, api, kind, name)
        .await
        .expect("read")
        .is_some()
}

/// Waits until policy mode is in place: every object of the policy path, the namespace `ns`
/// labelled and the webhook configuration `config` narrowed.
async fn policy_path_live(kube: &Client, api: PolicyApi, name: &str, ns: &str, config: &str) {
    eventually(
        "the policy, the binding, the label and the narrowing",
        || async {
            let mut ready = true;
            for kind in Kind::ALL {
                ready &= exists(kube, api, kind, name).await;
            }
            let ready = ready
                && labelled(kube, ns).await
                && webhook_condition(kube, config).await.is_some();
            ready.then_some(())
        },
    )
    .await;
}

/// Policy mode: with the operator stopped and the webhook unreachable, a pod of an enabled namespace
/// is created attached (the NAD in its networks annotation, the proxy uid from the range), and only a
/// pod the policy cannot decide (a JSON-list networks annotation) is refused. Back in webhook mode the
/// operator takes it all away (condition first, then binding and policy, then the label), and the
/// same pod is refused again, as with the webhook alone. Where the server serves no
/// MutatingAdmissionPolicy, `auto` keeps the webhook whole, labels nothing and creates no policy,
/// and the policy case is reported not run. Would fail without the policy (the pod is refused or
/// unattached), without the narrowing (refused), or with a narrowing that took the policy's pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, MutatingAdmissionPolicy served where it can be): run by e2e/test-all"]
async fn policy_mode_admits_with_the_operator_stopped() {
    let h = Harness::new("adm").await;
    let kube = h.client.clone();
    let served = objects::served(&kube).await.expect("discovery");
    let mwc = unreachable_webhook(&h).await;
    let app = enabled_namespace(&h).await;
    let policy_name = unique_name("adm-policy");
    let flags = |mode: &'static str| {
        [
            format!("--admission={mode}"),
            format!("--admission-policy-name={policy_name}"),
            format!("--admission-label-value={}", h.run_id),
            format!("--webhook-config-name={}", mwc.name()),
            format!("--proxy-uid-offset={OFFSET}"),
        ]
    };
    let start = |mode: &'static str| {
        let flags = flags(mode);
        let h = &h;
        async move {
            let argv: Vec<&str> = flags.iter().map(String::as_str).collect();
            h.start_operator(&argv).await
        }
    };

    let Some(api) = served else {
        // `auto` picks the webhook: nothing labelled, no policy, the webhook whole.
        let op = start("auto").await;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        assert!(
            !labelled(&kube, &app.name).await,
            "labelled without a policy"
        );
        assert_eq!(webhook_condition(&kube, mwc.name()).await, None);
        op.stop().await;
        let refused = create_pod(&kube, &app.name, None).await;
        assert!(refused.is_err(), "the webhook took no pod: {refused:?}");
        not_run(
            CASE,
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate): auto kept the webhook",
        );
        return;
    };

    // Whatever happens below, the policy and binding do not outlive the test.
    let _guards =
        Kind::ALL.map(|kind| DeleteOnDrop::new(kind.api(&kube, api), policy_name.clone()));

    // Policy mode, then the operator stopped.
    let op = start("policy").await;
    policy_path_live(&kube, api, &policy_name, &app.name, mwc.name()).await;
    // A binding deleted by hand is back at once (the keeper watches it; its recheck is 5 min).
    Kind::Binding
        .api(&kube, api)
        .delete(&policy_name, &Default::default())
        .await
        .expect("delete the binding by hand");
    linkerd_multus_e2e::eventually_within(
        "the binding deleted by hand is back",
        std::time::Duration::from_secs(10),
        || async {
            exists(&kube, api, Kind::Binding, &policy_name)
                .await
                .then_some(())
        },
    )
    .await;
    op.stop().await;

    // The apiserver's policy informer may take a moment: the first pod is retried until attached.
    let nad = h.nad_name.clone();
    let pod = eventually(
        "a pod created with the operator stopped is attached",
        || async {
            let pod = create_pod(&kube, &app.name, Some("other@eth1"))
                .await
                .ok()?;
            let networks = pod
                .metadata
                .annotations
                .as_ref()?
                .get(vocab::NETWORKS_ANNOTATION)?;
            networks.contains(&nad).then_some(pod)
        },
    )
    .await;
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get(vocab::NETWORKS_ANNOTATION)
            .map(String::as_str),
        Some(format!("other@eth1,{nad}").as_str())
    );
    assert_eq!(
        annotations
            .get(vocab::PROXY_UID_ANNOTATION)
            .map(String::as_str),
        Some((1_000_650_000 + OFFSET).to_string().as_str()),
        "{annotations:?}"
    );
    let json_list = create_pod(&kube, &app.name, Some(r#"[{"name":"other"}]"#)).await;
    assert!(
        json_list.is_err(),
        "a JSON-list pod must still go to the (unreachable) webhook: {json_list:?}"
    );

    // `check`'s line: all in place and current; then the binding deleted by hand is named.
    let policy_settings = admission_settings(&h, &flags("policy"));
    let line = check_line(&h, &policy_settings).await;
    assert!(line.ok, "{line:?}");
    Kind::Binding
        .api(&kube, api)
        .delete(&policy_name, &Default::default())
        .await
        .expect("delete the binding by hand");
    let line = check_line(&h, &policy_settings).await;
    assert!(
        !line.ok && line.message.contains("MutatingAdmissionPolicyBinding"),
        "{line:?}"
    );

    // Back to webhook mode: everything of the policy path is taken away, the webhook takes all.
    let op = start("webhook").await;
    eventually(
        "the narrowing, the policy, the binding and the label are gone",
        || async {
            let mut gone = webhook_condition(&kube, mwc.name()).await.is_none();
            for kind in Kind::ALL {
                gone &= !exists(&kube, api, kind, &policy_name).await;
            }
            let gone = gone && !labelled(&kube, &app.name).await;
            gone.then_some(())
        },
    )
    .await;
    op.stop().await;
    let refused = eventually("the webhook takes the pod again", || async {
        create_pod(&kube, &app.name, None).await.err()
    })
    .await;
    assert!(refused.contains(vocab::WEBHOOK_NAME), "{refused}");
    let line = check_line(&h, &admission_settings(&h, &flags("webhook"))).await;
    assert!(line.ok, "{line:?}");
}

/// The admission settings the test's operator runs with.
fn admission_settings(h: &Harness, flags: &[String]) -> AdmissionSettings {
    let argv: Vec<&str> = flags.iter().map(String::as_str).collect();
    h.args(&argv).admission
}

/// This run's namespaces: what its operator's selector sees (other tests' enabled namespaces carry
/// their own label values).
async fn run_namespaces(h: &Harness) -> Vec<Namespace> {
    let selector = format!("{RUN_LABEL}={}", h.run_id);
    Api::<Namespace>::all(h.client.clone())
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .expect("list namespaces")
        .items
}

/// `check`'s admission line, as the operator's flags make it (no NodeMultus: the flags' placement),
/// over this run's namespaces (what its operator's selector sees: other tests' enabled namespaces
/// carry their own label values).
async fn check_line(h: &Harness, s: &AdmissionSettings) -> Verdict {
    let kube = &h.client;
    let namespaces = run_namespaces(h).await;
    let seen = admission::observe(kube, s).await;
    admission::verdict(&seen, s, &s.decision, &namespaces)
}

/// Publishes `node`'s NodeMultus (in the test's `group`) as an installer does: namespace isolation
/// on, `default` global, so its Multus refuses a shared NAD anywhere else.
async fn publish_isolating(kube: &Client, group: &str, node: &str) {
    let object = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "NodeMultus", "metadata": {"name": node},
        "spec": {"nodeName": node, "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
                 "multus": "thin", "readable": true, "namespaceIsolation": true},
    });
    linkerd_multus_e2e::node_multus::api(kube, group)
        .patch(
            node,
            &kube::api::PatchParams::apply("admission-mode-test").force(),
            &kube::api::Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("publish NodeMultus {node}: {e}"));
}

/// The networks annotation a dry-run create of a plain pod in `ns` comes out with.
async fn admitted_networks(kube: &Client, ns: &str) -> Option<String> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": unique_name("adm-dry") },
        "spec": { "containers": [{ "name": "app", "image": "x" }] },
    }))
    .expect("a pod");
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let admitted = Api::<Pod>::namespaced(kube.clone(), ns)
        .create(&params, &pod)
        .await
        .ok()?;
    admitted
        .metadata
        .annotations?
        .get(vocab::NETWORKS_ANNOTATION)
        .cloned()
}

/// The policy follows the NAD's placement, as the webhook does: with `--nad-namespace` pods are
/// attached to the shared NAD (`<ns>/<name>`) until a node's Multus refuses that namespace (an
/// isolating NodeMultus of an existing node), then each namespace's own (`<name>`), without a restart.
/// Would fail if the keeper rendered the flags alone, or did not re-apply on a placement change (its
/// recheck here is 5 min).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, MutatingAdmissionPolicy served where it can be): run by e2e/test-all"]
async fn the_policy_follows_the_nads_placement() {
    let h = Harness::new("adm-place").await;
    let kube = h.client.clone();
    let Some(api) = objects::served(&kube).await.expect("discovery") else {
        not_run(
            "the admission policy follows the NAD's placement",
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate)",
        );
        return;
    };
    let group = linkerd_multus_e2e::node_multus::test_group("adm-place");
    let _crd = linkerd_multus_e2e::node_multus::install_crd_in(&kube, &group).await;
    let home = h.namespace("adm-home", None).await;
    let app = enabled_namespace(&h).await;
    // The policy's owner (no policy is kept without one); narrowed, it takes no pod of this test.
    let mwc = unreachable_webhook(&h).await;
    let policy_name = unique_name("adm-policy");
    let _guards =
        Kind::ALL.map(|kind| DeleteOnDrop::new(kind.api(&kube, api), policy_name.clone()));
    let flags = [
        "--admission=policy".to_string(),
        format!("--admission-policy-name={policy_name}"),
        format!("--admission-label-value={}", h.run_id),
        format!("--webhook-config-name={}", mwc.name()),
        format!("--nad-namespace={}", home.name),
        format!("--node-multus-api-group={group}"),
    ];
    let argv: Vec<&str> = flags.iter().map(String::as_str).collect();
    let op = h.start_operator(&argv).await;

    let shared = format!("{}/{}", home.name, h.nad_name);
    eventually("pods are attached to the shared NAD", || async {
        (admitted_networks(&kube, &app.name).await? == shared).then_some(())
    })
    .await;
    // A node whose Multus refuses the shared NAD's namespace: each namespace's own NAD.
    let node = unique_name("adm-node");
    publish_isolating(&kube, &group, &node).await;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(kube.clone());
    let created: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"metadata": {"name": node}})).expect("a Node");
    nodes
        .create(&PostParams::default(), &created)
        .await
        .expect("create the Node");
    let _node = DeleteOnDrop::new(nodes, node);
    linkerd_multus_e2e::eventually_within(
        "pods are attached to their namespace's own NAD once a node refuses the shared one",
        std::time::Duration::from_secs(30),
        || async { (admitted_networks(&kube, &app.name).await? == h.nad_name).then_some(()) },
    )
    .await;
    op.stop().await;
}

const AGREEMENT: &str =
    "check's admission-agreement line compares the live policy with the webhook";

/// `check`'s admission-agreement line, as the operator's flags make it, over this run's namespaces
/// (a dry-run probe pod; see `check/agreement.rs`).
async fn agreement_line(h: &Harness, s: &AdmissionSettings) -> Verdict {
    let kube = &h.client;
    let namespaces = run_namespaces(h).await;
    let seen = admission::observe(kube, s).await;
    let planned = agreement::plan(&seen, s, &s.decision, &namespaces);
    agreement::verdict(&agreement::probe(kube, planned).await)
}

/// `check` dry-runs a meshed probe pod (comma-list networks, an injected proxy and validator) in an
/// enabled namespace with a uid range, with the operator in policy mode and then stopped: the line
/// passes, listing the compared values; as a ServiceAccount that may not create pods it says "not
/// probed" (a warning). The live policy then edited by hand (its uid offset 1000,
/// the operator stopped so it stays so): the line fails naming the proxy-uid annotation and the
/// proxy's runAsUser with both sides' values. Where the server serves no MutatingAdmissionPolicy the
/// line says "not probed" and the case is reported not run. Would fail if the comparison saw no
/// difference (the line would pass the edited policy), or if the probe missed the policy (a pass
/// needs every value equal to the webhook's, the networks entry and the range's uids included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver, MutatingAdmissionPolicy served where it can be): run by e2e/test-all"]
async fn check_compares_the_policy_with_the_webhook() {
    let h = Harness::new("adm-agree").await;
    let kube = h.client.clone();
    let mwc = unreachable_webhook(&h).await;
    let app = enabled_namespace(&h).await;
    let policy_name = unique_name("adm-policy");
    let flags = [
        "--admission=policy".to_string(),
        format!("--admission-policy-name={policy_name}"),
        format!("--admission-label-value={}", h.run_id),
        format!("--webhook-config-name={}", mwc.name()),
        format!("--proxy-uid-offset={OFFSET}"),
    ];
    let s = admission_settings(&h, &flags);
    let Some(api) = objects::served(&kube).await.expect("discovery") else {
        let line = agreement_line(&h, &s).await;
        assert!(
            line.ok && line.message.starts_with("not probed"),
            "{line:?}"
        );
        not_run(
            AGREEMENT,
            "the apiserver serves no MutatingAdmissionPolicy (admissionregistration.k8s.io v1, or \
             v1beta1 with the MutatingAdmissionPolicy gate): the line says not probed",
        );
        return;
    };
    let _guards =
        Kind::ALL.map(|kind| DeleteOnDrop::new(kind.api(&kube, api), policy_name.clone()));
    let argv: Vec<&str> = flags.iter().map(String::as_str).collect();
    let op = h.start_operator(&argv).await;
    policy_path_live(&kube, api, &policy_name, &app.name, mwc.name()).await;
    op.stop().await;

    // (1) The policy as the operator renders it: the same pod as the webhook's, the networks entry
    // appended and the range's proxy uid (the apiserver's policy informer may take a moment: until
    // then the line names what the policy did not do yet).
    let networks = format!(
        "annotation {}: \"{},{}\"",
        vocab::NETWORKS_ANNOTATION,
        rules::policy_agreement::OTHER_NETWORK,
        h.nad_name
    );
    let uid = 1_000_650_000 + OFFSET;
    let proxy = format!("{} runAsUser: {uid}", vocab::PROXY_CONTAINER);
    let line = linkerd_multus_e2e::eventually_within(
        "the agreement line passes with the webhook's values",
        std::time::Duration::from_secs(30),
        || async {
            let line = agreement_line(&h, &s).await;
            let agreed = line.ok
                && !line.warning
                && line.items.contains(&networks)
                && line.items.contains(&proxy);
            if !agreed {
                eprintln!("not yet: {line:?}");
            }
            agreed.then_some(line)
        },
    )
    .await;
    eprint!("{}", render_human(std::slice::from_ref(&line)));
    assert!(line.message.contains(&app.name), "{line:?}");

    // Refused for lack of permission (a ServiceAccount of no rights, as the chart's is for pods):
    // said "not probed", a warning, never a pass of the comparison nor a failure of `check`.
    let nobody = linkerd_multus_e2e::client_as_service_account(&app.name, "no-rights").await;
    let seen = admission::observe(&kube, &s).await;
    let namespaces = [Api::<Namespace>::all(kube.clone())
        .get(&app.name)
        .await
        .expect("the namespace")];
    let planned = agreement::plan(&seen, &s, &s.decision, &namespaces);
    let refused = agreement::verdict(&agreement::probe(&nobody, planned).await);
    eprint!("{}", render_human(std::slice::from_ref(&refused)));
    assert!(
        refused.ok && refused.warning && refused.message.starts_with("not probed"),
        "{refused:?}"
    );
    assert!(refused.message.contains("forbidden"), "{refused:?}");

    // (2) The live policy edited by hand (another offset), the operator stopped: named.
    let policies = Kind::Policy.api(&kube, api);
    let mut live = policies.get(&policy_name).await.expect("read the policy");
    let variables = live.data["spec"]["variables"]
        .as_array_mut()
        .expect("the policy's variables");
    let offset = variables
        .iter_mut()
        .find(|v| v["name"] == "offsetUid")
        .expect("the offsetUid variable");
    let edited = offset["expression"]
        .as_str()
        .expect("an expression")
        .replace(&OFFSET.to_string(), "1000");
    offset["expression"] = json!(edited);
    policies
        .replace(&policy_name, &PostParams::default(), &live)
        .await
        .expect("edit the policy by hand");
    let line = linkerd_multus_e2e::eventually_within(
        "the agreement line fails on the edited policy",
        std::time::Duration::from_secs(30),
        || async {
            let line = agreement_line(&h, &s).await;
            (!line.ok).then_some(line)
        },
    )
    .await;
    eprint!("{}", render_human(std::slice::from_ref(&line)));
    let edited_uid = 1_000_650_000 + 1000;
    assert_eq!(
        line.items,
        [
            format!(
                "annotation {}: the policy gave \"{edited_uid}\", the webhook would give \"{uid}\"",
                vocab::PROXY_UID_ANNOTATION
            ),
            format!(
                "{} runAsUser: the policy gave {edited_uid}, the webhook would give {uid}",
                vocab::PROXY_CONTAINER
            ),
        ],
        "{line:?}"
    );
}
