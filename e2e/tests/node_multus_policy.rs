//! The chart's ValidatingAdmissionPolicy (`templates/node-multus-policy.yaml`): only the linkerd-cni
//! installer on a node writes that node's NodeMultus, judged by the node its pod-bound token names
//! (`authentication.kubernetes.io/node-name`, Kubernetes 1.30+). Rendered where `cni.nodeMultusPolicy`
//! says (auto: where helm sees ValidatingAdmissionPolicy v1 served or a 1.30+ server); on a server that
//! does not serve it, the enforcement case is reported not run.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::node_multus::{api, install_crd_in, test_group};
use linkerd_multus_e2e::{
    client, client_from, eventually_within, kubeconfig_path, not_run, unique_name, DeleteOnDrop,
    TestNamespace,
};
use serde_json::{json, Value};

const POLICY: &str = "templates/node-multus-policy.yaml";
const SERVED: &str = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy";

/// `helm template` of the policy's file alone, with `extra`; empty when it renders nothing.
fn render(namespace: &str, extra: &[&str]) -> String {
    let chart = linkerd_multus_e2e::chart::chart_dir();
    let mut args = vec![
        "template",
        "ld",
        chart.to_str().expect("UTF-8 path"),
        "-n",
        namespace,
        "--show-only",
        POLICY,
    ];
    args.extend_from_slice(extra);
    let out = linkerd_multus_e2e::chart::helm(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("could not find template") {
        return String::new();
    }
    assert!(out.status.success(), "helm template: {stderr}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Rendered only with the installer (cni.enabled), where `cni.nodeMultusPolicy` says: auto where helm sees
/// the API served or a 1.30+ server — under `helm template` only when told by `--api-versions` or
/// `--kube-version`, as GitOps tools do — true always, false never. Each case would catch the chart
/// leaving out the policy a server can enforce (GitOps installs without it) or rendering one a server
/// cannot serve (helm install failing on it).
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn policy_renders_where_asked_or_the_server_serves_it() {
    let cni = ["--set", "cni.enabled=true"];
    let count = |extra: &[&str]| {
        render("ns", &[&cni[..], extra].concat())
            .matches("kind: ValidatingAdmissionPolicy\n")
            .count()
    };
    for (extra, expected, why) in [
        (
            &[][..],
            0,
            "helm template told nothing (v1.25, no such API): not rendered",
        ),
        (
            &["--kube-version", "1.29.5"][..],
            0,
            "a 1.29 server: not rendered",
        ),
        (
            &["--kube-version", "1.30.0"][..],
            1,
            "a 1.30 server: rendered",
        ),
        (
            &["--kube-version", "v1.35.6-gke.1"][..],
            1,
            "a vendor 1.35 server: rendered",
        ),
        (
            &["--api-versions", SERVED][..],
            1,
            "the API served: rendered",
        ),
        (
            &["--set", "cni.nodeMultusPolicy=true"][..],
            1,
            "true: rendered with helm template told nothing",
        ),
        (
            &[
                "--set",
                "cni.nodeMultusPolicy=false",
                "--api-versions",
                SERVED,
                "--kube-version",
                "1.31.0",
            ][..],
            0,
            "false: never, even where served",
        ),
        (
            &[
                "--set",
                "cni.nodeMultusPolicy=auto",
                "--api-versions",
                SERVED,
            ][..],
            1,
            "auto set explicitly: the API served",
        ),
    ] {
        assert_eq!(count(extra), expected, "{why} ({extra:?})");
    }
    assert_eq!(
        render("ns", &["--api-versions", SERVED]),
        "",
        "no installer: not rendered"
    );
    assert_eq!(
        render("ns", &["--set", "cni.nodeMultusPolicy=true"]),
        "",
        "no installer, true: not rendered"
    );
    let rendered = render(
        "ns",
        &[
            &cni[..],
            &["--api-versions", SERVED],
            &["--set", "operator.cniNamespace=cni-ns"],
            &["--set", "cni.serviceAccountName=inst"],
        ]
        .concat(),
    );
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&rendered)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .filter(|d: &Value| !d.is_null())
        .collect();
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    let policy: ValidatingAdmissionPolicy =
        serde_json::from_value(docs[0].clone()).expect("a ValidatingAdmissionPolicy v1");
    let spec = policy.spec.expect("spec");
    let rules = spec
        .match_constraints
        .and_then(|m| m.resource_rules)
        .expect("resource rules");
    assert_eq!(
        serde_json::to_value(&rules).expect("json"),
        json!([{"apiGroups": ["linkerd-multus.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["nodemultuses"]}])
    );
    let conditions = spec.match_conditions.expect("matchConditions");
    assert_eq!(
        conditions[0].expression,
        "request.userInfo.username == 'system:serviceaccount:cni-ns:inst'"
    );
    let validations = spec.validations.expect("validations");
    assert!(
        validations.iter().any(|v| v.expression.contains(
            "request.userInfo.extra['authentication.kubernetes.io/node-name'][0] == object.metadata.name"
        )),
        "{validations:?}"
    );
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let binding: ValidatingAdmissionPolicyBinding =
        serde_json::from_value(docs[1].clone()).expect("a binding v1");
    let binding = binding.spec.expect("spec");
    assert_eq!(binding.policy_name, policy.metadata.name);
    assert_eq!(binding.validation_actions, Some(vec!["Deny".to_string()]));
}

/// The server serves ValidatingAdmissionPolicy v1.
async fn serves_policies(kube: &Client) -> bool {
    kube.list_api_group_resources("admissionregistration.k8s.io/v1")
        .await
        .is_ok_and(|list| {
            list.resources
                .iter()
                .any(|r| r.name == "validatingadmissionpolicies")
        })
}

/// A client that authenticates with `token` (the testbed's server and CA).
async fn client_with_token(token: &str) -> Client {
    let text = std::fs::read_to_string(kubeconfig_path()).expect("testbed kubeconfig");
    let mut kc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig YAML");
    kc["users"][0]["user"] = serde_yaml_ng::to_value(json!({ "token": token })).expect("user");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, serde_yaml_ng::to_string(&kc).expect("YAML")).expect("write");
    client_from(&path).await
}

/// Publishes NodeMultus `name` of `group` as `kube`, as the installer does (server-side apply).
async fn publish(kube: &Client, group: &str, name: &str) -> Result<(), kube::Error> {
    let object = json!({
        "apiVersion": format!("{group}/v1alpha1"), "kind": "NodeMultus", "metadata": {"name": name},
        "spec": {"nodeName": name, "observedAt": "2025-01-01T00:00:00Z", "netDir": "/etc/cni/net.d",
                 "multus": "none", "readable": true},
    });
    api(kube, group)
        .patch(
            name,
            &PatchParams::apply("linkerd-cni-install").force(),
            &Patch::Apply(&object),
        )
        .await
        .map(drop)
}

fn create<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

/// With the policy installed, the installer's token bound to a pod on node B may write B's NodeMultus
/// but not A's (refused with the policy's message), nor may a token bound to no pod write any; an
/// admin writes A's (other users are not matched).
#[tokio::test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
async fn only_the_installer_on_the_node_writes_its_nodemultus() {
    const CASE: &str =
        "NodeMultus written only by the installer on its node (ValidatingAdmissionPolicy)";
    let kube = client().await;
    if !serves_policies(&kube).await {
        let version = kube
            .apiserver_version()
            .await
            .map_or_else(|e| e.to_string(), |v| v.git_version);
        not_run(
            CASE,
            &format!(
                "the server ({version}) does not serve admissionregistration.k8s.io/v1 \
                 ValidatingAdmissionPolicy: the chart renders no policy there"
            ),
        );
        return;
    }
    let group = test_group("nm-vap");
    let _crd = install_crd_in(&kube, &group).await;
    let ns = TestNamespace::create(&kube, "nm-vap").await;
    let sa = "installer";
    let (node_a, node_b) = (unique_name("node-a"), unique_name("node-b"));

    // The chart's policy, moved to this test's group and named for it.
    let release = unique_name("vap");
    let rendered = render(
        &ns.name,
        &[
            "--set",
            "cni.enabled=true",
            "--api-versions",
            SERVED,
            "--set",
            &format!("operator.cniNamespace={}", ns.name),
            "--set",
            &format!("cni.serviceAccountName={sa}"),
            "--set",
            &format!("fullnameOverride={release}"),
        ],
    )
    .replace(
        "apiGroups: [\"linkerd-multus.io\"]",
        &format!("apiGroups: [\"{group}\"]"),
    );
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&rendered)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .filter(|d: &Value| !d.is_null())
        .collect();
    let policies = Api::<ValidatingAdmissionPolicy>::all(kube.clone());
    let policy: ValidatingAdmissionPolicy = create(docs[0].clone());
    let policy_name = policy.metadata.name.clone().expect("name");
    policies
        .create(&PostParams::default(), &policy)
        .await
        .expect("create the policy");
    let _policy = DeleteOnDrop::new(policies, &policy_name);
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(kube.clone());
    bindings
        .create(&PostParams::default(), &create(docs[1].clone()))
        .await
        .expect("create the binding");
    let _binding = DeleteOnDrop::new(bindings, &policy_name);

    // The installer's account with the chart's RBAC on this group, two nodes, a pod on node B.
    Api::<ServiceAccount>::namespaced(kube.clone(), &ns.name)
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": sa}})),
        )
        .await
        .expect("create the ServiceAccount");
    let roles = Api::<ClusterRole>::all(kube.clone());
    roles
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": release},
                "rules": [{"apiGroups": [group], "resources": ["nodemultuses"],
                           "verbs": ["get", "create", "patch"]}]})),
        )
        .await
        .expect("create the ClusterRole");
    let _role = DeleteOnDrop::new(roles, &release);
    let role_bindings = Api::<ClusterRoleBinding>::all(kube.clone());
    role_bindings
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": release},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": release},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns.name}]})),
        )
        .await
        .expect("create the ClusterRoleBinding");
    let _role_binding = DeleteOnDrop::new(role_bindings, &release);
    let nodes = Api::<Node>::all(kube.clone());
    let mut node_guards = Vec::new();
    for node in [&node_a, &node_b] {
        nodes
            .create(
                &PostParams::default(),
                &create(json!({"metadata": {"name": node}})),
            )
            .await
            .expect("create a Node");
        node_guards.push(DeleteOnDrop::new(nodes.clone(), node.as_str()));
    }
    let pod: Pod = Api::<Pod>::namespaced(kube.clone(), &ns.name)
        .create(
            &PostParams::default(),
            &create(json!({"metadata": {"name": "installer-b"},
                "spec": {"nodeName": node_b, "serviceAccountName": sa,
                         "containers": [{"name": "install-cni", "image": "installer"}]}})),
        )
        .await
        .expect("create the installer pod on node B");
    let token = |bound: Option<&Pod>| {
        let mut spec = json!({"audiences": [], "expirationSeconds": 600});
        if let Some(pod) = bound {
            spec["boundObjectRef"] = json!({"apiVersion": "v1", "kind": "Pod",
                "name": pod.metadata.name, "uid": pod.metadata.uid});
        }
        create::<TokenRequest>(json!({ "spec": spec }))
    };
    let accounts = Api::<ServiceAccount>::namespaced(kube.clone(), &ns.name);
    let on_b = accounts
        .create_token_request(sa, &PostParams::default(), &token(Some(&pod)))
        .await
        .expect("a token bound to the pod");
    let on_b = client_with_token(&on_b.status.expect("token").token).await;
    let unbound = accounts
        .create_token_request(sa, &PostParams::default(), &token(None))
        .await
        .expect("a token bound to nothing");
    let unbound = client_with_token(&unbound.status.expect("token").token).await;

    // The policy takes effect within a moment of its creation.
    let refusal = eventually_within(
        "the installer on node B is refused node A's NodeMultus",
        Duration::from_secs(30),
        || async {
            match publish(&on_b, &group, &node_a).await {
                Err(kube::Error::Api(status)) if status.code == 403 => Some(status.message),
                _ => None,
            }
        },
    )
    .await;
    assert!(
        refusal.contains(&format!(
            "the linkerd-cni installer on node {node_b} may write only the NodeMultus of that node, not {node_a}"
        )),
        "{refusal}"
    );
    publish(&on_b, &group, &node_b)
        .await
        .expect("the installer on node B writes node B's NodeMultus");
    match publish(&unbound, &group, &node_b).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            assert!(
                status.message.contains("its token names no node"),
                "{status:?}"
            )
        }
        other => panic!("a token bound to no pod names no node: refused, got {other:?}"),
    }
    publish(&kube, &group, &node_a)
        .await
        .expect("an admin is not matched by the policy");
}
