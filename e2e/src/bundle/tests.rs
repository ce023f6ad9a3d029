use serde_json::{json, Value};

use super::*;

#[test]
fn top_level_keys_are_found_at_column_zero_only() {
    let values = "cni:\n  enabled: false\nnodeAgent:\n  enabled: false\n";
    assert!(has_top_level_key(values, "nodeAgent"));
    assert!(has_top_level_key(values, "cni"));
    assert!(!has_top_level_key(values, "enabled"));
    assert!(!has_top_level_key("nodeAgentX: 1\n", "nodeAgent"));
}

const CHART: &str = "version: 1.2.3\ndescription: d\nhome: https://h\nsources: [https://s]\n";
const INSTALLER: &str =
    "kind: DaemonSet\nmetadata: {name: ds}\nspec:\n  template:\n    spec:\n      \
    containers: [{name: install-cni, image: 'reg/installer:1'}]\n";

/// A render shaped like the chart's: the operator's Deployment, ServiceAccount, RBAC, webhook
/// Service and configuration, and `extra` after them.
fn render(extra: &[Value]) -> String {
    let mut objects = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "op", "namespace": "ns",
                            "labels": {"app": "op", "helm.sh/chart": "c-1"}},
               "spec": {"template": {"spec": {
                   "serviceAccountName": "op",
                   "containers": [{"name": "operator", "image": "reg/op:1",
                       "env": [{"name": "WEBHOOK_CONFIG_NAME", "value": "zz-op"},
                               {"name": "TLS_CERT_FILE", "value": format!("{WEBHOOK_CERT_DIR}/tls.crt")}],
                       "ports": [{"name": "webhook", "containerPort": 9443}],
                       "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                                        {"name": "certs", "mountPath": WEBHOOK_CERT_DIR}]}],
                   "volumes": [{"name": "tmp", "emptyDir": {}},
                               {"name": "certs", "secret": {"secretName": "op-cert"}}]}}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "ns"}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "op-webhook", "namespace": "ns"},
               "spec": {"ports": [{"port": 443, "targetPort": "webhook"}]}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "op"},
               "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
                         {"apiGroups": ["admissionregistration.k8s.io"],
                          "resources": ["mutatingwebhookconfigurations"],
                          "resourceNames": ["zz-op"], "verbs": ["patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "op"},
               "roleRef": {"kind": "ClusterRole", "name": "op"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "op", "namespace": "ns"},
               "rules": [{"apiGroups": [""], "resources": ["services"],
                          "resourceNames": ["op-webhook"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "op", "namespace": "ns"},
               "roleRef": {"kind": "Role", "name": "op"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": "zz-op"},
               "webhooks": [{"name": "attach.example.io", "failurePolicy": "Fail", "sideEffects": "None",
                   "admissionReviewVersions": ["v1"],
                   "clientConfig": {"service": {"name": "op-webhook", "namespace": "ns", "path": "/p", "port": 443}},
                   "namespaceSelector": {"matchLabels": {"a": "b"}},
                   "rules": [{"operations": ["CREATE"], "resources": ["pods"]}]}]}),
    ];
    objects.extend_from_slice(extra);
    objects
        .iter()
        .map(|o| format!("---\n{}", serde_yaml_ng::to_string(o).expect("yaml")))
        .collect()
}

fn inputs(extra: &[Value]) -> Inputs {
    Inputs {
        chart_yaml: CHART.into(),
        rendered: render(extra),
        installer_rendered: INSTALLER.into(),
        crds: Vec::new(),
        openshift_values: String::new(),
    }
}

fn csv(files: &[File]) -> Value {
    let file = files
        .iter()
        .find(|f| f.path.ends_with(".clusterserviceversion.yaml"))
        .expect("a CSV");
    serde_yaml_ng::from_str(&file.text).expect("CSV YAML")
}

/// What OLM does in the chart's place: its certificate, its Service, its webhook configuration name,
/// and a webhook that cannot stop pod creation cluster-wide (OLM drops the namespaceSelector).
#[test]
fn the_csv_leaves_to_olm_what_olm_creates() {
    let files = build(&inputs(&[])).expect("build");
    let csv = csv(&files);
    let spec = &csv["spec"]["install"]["spec"];
    let pod = &spec["deployments"][0]["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"], json!([{"name": "tmp", "emptyDir": {}}]));
    assert_eq!(
        pod["containers"][0]["volumeMounts"],
        json!([{"name": "tmp", "mountPath": "/tmp"}])
    );
    assert_eq!(
        pod["containers"][0]["env"],
        json!([{"name": "TLS_CERT_FILE", "value": format!("{WEBHOOK_CERT_DIR}/tls.crt")}])
    );
    assert_eq!(
        spec["deployments"][0]["label"],
        json!({"app": "op"}),
        "helm's labels are not OLM's"
    );
    assert_eq!(
        spec["clusterPermissions"],
        json!([{"serviceAccountName": "op",
                "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]}])
    );
    assert_eq!(
        spec["permissions"][0]["rules"][0]["resourceNames"],
        json!([olm_service_name("op")])
    );
    assert_eq!(
        csv["spec"]["webhookdefinitions"],
        json!([{"type": "MutatingAdmissionWebhook", "generateName": "zz-attach.example.io",
                "deploymentName": "op", "containerPort": 9443, "webhookPath": "/p",
                "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "rules": [{"operations": ["CREATE"], "resources": ["pods"]}],
                "failurePolicy": "Ignore"}])
    );
    assert_eq!(
        csv["spec"]["relatedImages"],
        json!([{"name": "operator", "image": "reg/op:1"},
               {"name": "install-cni", "image": "reg/installer:1"}])
    );
    assert_eq!(csv["metadata"]["name"], "linkerd-multus.v1.2.3");
    let manifests: Vec<&str> = files
        .iter()
        .filter(|f| f.path.starts_with("manifests/"))
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(
        manifests,
        ["manifests/linkerd-multus.clusterserviceversion.yaml"],
        "the operator's own objects are the CSV's, not extra manifests"
    );
}

/// Objects the bundle can carry go in as extra manifests, without namespace and helm labels; a kind
/// it cannot carry, or another namespace, is an error naming it.
#[test]
fn extra_manifests_are_checked() {
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                     "metadata": {"name": "op", "namespace": "ns",
                                  "labels": {"app.kubernetes.io/managed-by": "Helm"}},
                     "spec": {"minAvailable": 1}});
    let files = build(&inputs(&[pdb])).expect("build");
    let file = files
        .iter()
        .find(|f| f.path == "manifests/op_policy_v1_poddisruptionbudget.yaml")
        .expect("the PDB");
    assert_eq!(
        file.text,
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: op\nspec:\n  minAvailable: 1\n"
    );

    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cni", "namespace": "ns"}});
    let err = build(&inputs(&[ds])).expect_err("a DaemonSet");
    assert!(
        matches!(&err, BundleError::UnsupportedKind { kind, name } if kind == "DaemonSet" && name == "cni"),
        "{err}"
    );

    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x", "namespace": "other"}});
    let err = build(&inputs(&[sa])).expect_err("another namespace");
    assert!(
        matches!(&err, BundleError::OtherNamespace { namespace, .. } if namespace == "other"),
        "{err}"
    );
}

/// For a directly applied bundle: the RBAC OLM expects to find, owned by the CSV by label, the Role
/// named apart from the ClusterRole.
#[test]
fn direct_install_carries_olms_owner_labels() {
    let files = build(&inputs(&[])).expect("build");
    let file = files
        .iter()
        .find(|f| f.path == direct::FILE)
        .expect("direct-install");
    let objects = parse_all(&file.text, "direct-install").expect("YAML");
    let kinds: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("Namespace", "ns"),
            ("OperatorGroup", "op"),
            ("ServiceAccount", "op"),
            ("ClusterRole", "op"),
            ("ClusterRoleBinding", "op"),
            ("Role", "op-namespaced"),
            ("RoleBinding", "op-namespaced"),
        ]
    );
    for o in &objects[3..] {
        assert_eq!(
            o["metadata"]["labels"]["olm.owner"],
            "linkerd-multus.v1.2.3"
        );
        assert_eq!(o["metadata"]["labels"]["olm.managed"], "true");
    }
}
