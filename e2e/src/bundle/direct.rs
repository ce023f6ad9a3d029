//! What a bundle applied directly (no catalog, no Subscription) needs before its CSV: OLM creates the
//! CSV's Deployment, webhook Service, certificate and webhook configuration, but neither the
//! namespace and OperatorGroup nor the ServiceAccount and RBAC of `permissions`/`clusterPermissions`
//! (a catalog's InstallPlan creates those). Made from the same rules as the CSV's.

use serde_json::{json, Value};

/// The file, beside `manifests/` and `metadata/` (outside what the bundle image holds).
pub const FILE: &str = "direct-install.yaml";

/// The file's opening comment after the generated-by line.
pub const HOW: &str = "\
# For a bundle applied directly, without a catalog (docs: getting-started/olm): the namespace, an
# AllNamespaces OperatorGroup, and the CSV's ServiceAccount and RBAC, which OLM expects to exist.
# kubectl apply -f bundle/direct-install.yaml, then kubectl create -n linkerd-multus -f bundle/manifests/.
";

/// The namespace, the OperatorGroup, the ServiceAccount and its ClusterRole, Role and bindings.
///
/// The RBAC carries OLM's owner labels for the CSV `csv`, as a catalog's InstallPlan gives it: with
/// AllNamespaces, OLM copies the CSV's owned Roles into ClusterRoles of the same names, and without an
/// owned Role its sync fails ("no owned roles found") over and over. Its informers see only objects
/// labelled `olm.managed`. The Role is named apart from the ClusterRole, which that copy would
/// otherwise overwrite (seen with olm 992bb097).
pub fn prerequisites(
    namespace: &str,
    account: &str,
    name: &str,
    csv: &str,
    cluster_rules: &[Value],
    rules: &[Value],
) -> Vec<Value> {
    let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
    let namespaced = format!("{name}-namespaced");
    let role_ref = |kind: &str, name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
    let owner = json!({
        "olm.managed": "true",
        "olm.owner": csv,
        "olm.owner.kind": "ClusterServiceVersion",
        "olm.owner.namespace": namespace,
    });
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({
            "apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": owner},
            "rules": cluster_rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": owner},
            "roleRef": role_ref("ClusterRole", name),
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": namespaced, "namespace": namespace, "labels": owner},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": namespaced, "namespace": namespace, "labels": owner},
            "roleRef": role_ref("Role", &namespaced),
            "subjects": subject,
        }),
    ]
}
