//! The rendered chart turned into a ClusterServiceVersion and the extra manifests a registry+v1 bundle
//! may hold. Pure: text in, files out.
//!
//! What OLM does instead of the chart (operator-lifecycle-manager, pkg/controller/install): it creates
//! the install strategy's Deployment, a Service `<deployment>-service` in front of it, a CA and a
//! serving certificate it signs (Secret `<deployment>-service-cert`, mounted into every container at
//! `/tmp/k8s-webhook-server/serving-certs` as `tls.crt`/`tls.key`, and at
//! `/apiserver.local.config/certificates`), and the webhook configuration (named `<generateName>-<random>`,
//! its namespaceSelector the OperatorGroup's, no matchConditions). From a catalog, it also creates the
//! ServiceAccount and the RBAC of `permissions`/`clusterPermissions`.

use serde_json::{json, Map, Value};

use super::{examples, parse_all, BundleError, File, Inputs, CHANNEL, PACKAGE};

/// Where OLM mounts the serving certificate it signs for a webhook's Deployment (`tls.crt`, `tls.key`):
/// the chart's `webhook.certDir` for the bundle, so the operator serves it (`--tls-cert-file`), re-read
/// when OLM rotates it.
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// The Service OLM creates in front of a webhook's Deployment.
pub fn olm_service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

/// The oldest Kubernetes the project supports on users' clusters (README: 1.28 to 1.35).
const MIN_KUBE_VERSION: &str = "1.28.0";

/// OLM names the webhook configuration `<generateName>-<random>`, and the apiserver calls mutating
/// configurations in name order: this one must come after Linkerd's proxy injector's (as the chart's
/// `zz-` name does, templates/_helpers.tpl), and a webhook's name needs three DNS segments.
const WEBHOOK_NAME_PREFIX: &str = "zz-";

/// The webhook's failurePolicy in the bundle. OLM drops the chart's namespaceSelector (the webhook gets
/// every namespace the OperatorGroup selects: all of them, kube-system and openshift-* included), so
/// with `Fail` an operator that is down, or being removed with its CSV, would stop every pod creation
/// in the cluster. With `Ignore` such pods are created unattached, as the chart's lifecycle rule wants.
const FAILURE_POLICY: &str = "Ignore";

/// Kinds a registry+v1 bundle may carry beside the CSV and CRDs (operator-registry's supported types).
const EXTRA_KINDS: &[&str] = &[
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "ConfigMap",
    "Secret",
    "PodDisruptionBudget",
    "PriorityClass",
    "PrometheusRule",
    "ServiceMonitor",
    "VerticalPodAutoscaler",
];

/// cert-manager's objects: the chart's certificate, which OLM's replaces.
const CERT_MANAGER_GROUP: &str = "cert-manager.io";

/// The bundle's files: the CSV, the CRDs, the extra manifests, `metadata/annotations.yaml` and
/// `bundle.Dockerfile`.
pub fn build(inputs: &Inputs) -> Result<Vec<File>, BundleError> {
    let chart: Value =
        serde_yaml_ng::from_str(&inputs.chart_yaml).map_err(|source| BundleError::Yaml {
            what: "helm/Chart.yaml".into(),
            source,
        })?;
    let version = str_at(&chart, "/version")?;
    let objects = parse_all(&inputs.rendered, "the rendered chart")?;
    let owned = owned_crds(&inputs.crds)?;

    let deployment = only(&objects, "Deployment")?;
    let deployment_name = str_at(deployment, "/metadata/name")?;
    let namespace = str_at(deployment, "/metadata/namespace")?;
    let account = str_at(deployment, "/spec/template/spec/serviceAccountName")?;
    let webhook_config = only(&objects, "MutatingWebhookConfiguration")?;
    let config_name = str_at(webhook_config, "/metadata/name")?;
    let chart_services = webhook_services(webhook_config)?;
    let service = olm_service_name(&deployment_name);

    let rbac = Rbac::of(&objects, &account, &namespace);
    let rename = |rules: Vec<Value>| rewrite_rules(rules, &config_name, &chart_services, &service);
    let cluster_permissions = rename(rbac.cluster_rules);
    let permissions = rename(rbac.namespace_rules);
    let csv_name = format!("{PACKAGE}.v{version}");
    let direct = super::direct::prerequisites(
        &namespace,
        &account,
        &deployment_name,
        &csv_name,
        &cluster_permissions,
        &permissions,
    );

    let mut files = Vec::new();
    let mut examples = Vec::new();
    for object in &objects {
        let kind = str_at(object, "/kind")?;
        let name = str_at(object, "/metadata/name")?;
        let group = group_of(object);
        let for_olm = match kind.as_str() {
            "Deployment" | "MutatingWebhookConfiguration" | "CustomResourceDefinition" => true,
            "Service" => chart_services.contains(&name),
            "ServiceAccount" => name == account,
            "ClusterRole" | "Role" | "ClusterRoleBinding" | "RoleBinding" => {
                rbac.taken.contains(&(kind.clone(), name.clone()))
            }
            _ => group == CERT_MANAGER_GROUP,
        };
        if for_olm {
            continue;
        }
        if owned.iter().any(|c| c.kind == kind && c.group == group) {
            examples.push(clean(object.clone()));
            continue;
        }
        if !EXTRA_KINDS.contains(&kind.as_str()) {
            return Err(BundleError::UnsupportedKind { kind, name });
        }
        if let Some(ns) = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            if ns != namespace {
                return Err(BundleError::OtherNamespace {
                    kind,
                    name,
                    namespace: ns.to_string(),
                });
            }
        }
        files.push(File {
            path: format!("manifests/{}", manifest_file_name(object, &kind, &name)),
            text: yaml(&clean(object.clone())),
        });
    }

    if owned.iter().any(|c| c.kind == examples::node_agent_kind()) {
        examples.push(examples::node_agent(deployment, &inputs.openshift_values)?);
    }
    examples.push(examples::node_multus()?);
    let images = related_images(deployment, &inputs.installer_rendered)?;
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": csv_name,
            "annotations": annotations(&chart, &owned, &examples, &images, &namespace)?,
        },
        "spec": {
            "displayName": PACKAGE,
            "description": include_str!("description.md"),
            "version": version,
            "minKubeVersion": MIN_KUBE_VERSION,
            "maturity": CHANNEL,
            "provider": {"name": PACKAGE, "url": str_at(&chart, "/home")?},
            "links": links(&chart)?,
            "keywords": chart.get("keywords").cloned().unwrap_or(json!([])),
            "maintainers": chart.get("maintainers").cloned().unwrap_or(json!([])),
            "icon": [{
                "base64data": base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    include_str!("icon.svg"),
                ),
                "mediatype": "image/svg+xml",
            }],
            "installModes": [
                {"type": "OwnNamespace", "supported": false},
                {"type": "SingleNamespace", "supported": false},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true},
            ],
            "install": {
                "strategy": "deployment",
                "spec": {
                    "clusterPermissions": [{"serviceAccountName": account, "rules": cluster_permissions}],
                    "permissions": [{"serviceAccountName": account, "rules": permissions}],
                    "deployments": [{
                        "name": deployment_name,
                        "label": deployment.pointer("/metadata/labels").cloned().map(strip_labels),
                        "spec": deployment_spec(deployment)?,
                    }],
                },
            },
            "webhookdefinitions": webhook_definitions(&objects, webhook_config, deployment, &deployment_name)?,
            "customresourcedefinitions": {
                "owned": owned.iter().map(OwnedCrd::entry).collect::<Vec<_>>(),
            },
            "relatedImages": images,
        },
    });
    files.push(File {
        path: format!("manifests/{PACKAGE}.clusterserviceversion.yaml"),
        text: format!("{}{}", header("helm/ and config/crd/"), yaml(&csv)),
    });
    for crd in &owned {
        files.push(File {
            path: format!("manifests/{}_{}.yaml", crd.group, crd.plural),
            text: crd.text.clone(),
        });
    }
    files.push(File {
        path: "metadata/annotations.yaml".into(),
        text: format!(
            "{}{}",
            header("its own constants"),
            yaml(&bundle_annotations())
        ),
    });
    files.push(File {
        path: "bundle.Dockerfile".into(),
        text: dockerfile(),
    });
    files.push(File {
        path: super::direct::FILE.into(),
        text: format!(
            "{}{}",
            header("helm/ (the CSV's permissions)"),
            super::direct::HOW,
        ) + &direct
            .iter()
            .map(|o| format!("---\n{}", yaml(o)))
            .collect::<String>(),
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn header(from: &str) -> String {
    format!(
        "# Generated by `cargo run -p linkerd-multus-e2e --bin bundlegen` from {from}; do not edit by hand.\n"
    )
}

// === the CSV's parts ===

/// The operator's Deployment as OLM should create it: the serving certificate is OLM's (its volume
/// and mount at WEBHOOK_CERT_DIR replace the chart's), and the webhook configuration has a name the
/// chart cannot know (the narrowing by `--webhook-config-name` is for the chart's installs).
fn deployment_spec(deployment: &Value) -> Result<Value, BundleError> {
    let mut spec = deployment
        .get("spec")
        .cloned()
        .ok_or_else(|| BundleError::Missing("the Deployment's spec".into()))?;
    let pod = spec
        .pointer_mut("/template/spec")
        .ok_or_else(|| BundleError::Missing("the Deployment's pod spec".into()))?;
    let mut cert_volumes = Vec::new();
    for kind in ["containers", "initContainers"] {
        for container in pod
            .get_mut(kind)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(mounts) = container
                .get_mut("volumeMounts")
                .and_then(Value::as_array_mut)
            {
                mounts.retain(|m| {
                    let cert = m.get("mountPath").and_then(Value::as_str) == Some(WEBHOOK_CERT_DIR);
                    if cert {
                        cert_volumes.push(m.get("name").cloned().unwrap_or_default());
                    }
                    !cert
                });
            }
            if let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) {
                env.retain(|e| {
                    e.get("name").and_then(Value::as_str) != Some("WEBHOOK_CONFIG_NAME")
                });
            }
        }
    }
    if cert_volumes.is_empty() {
        return Err(BundleError::Missing(format!(
            "the Deployment's certificate mount at {WEBHOOK_CERT_DIR}"
        )));
    }
    if let Some(volumes) = pod.get_mut("volumes").and_then(Value::as_array_mut) {
        volumes.retain(|v| !cert_volumes.contains(v.get("name").unwrap_or(&Value::Null)));
    }
    Ok(spec)
}

/// The chart's webhook entries as OLM webhook definitions.
fn webhook_definitions(
    objects: &[Value],
    config: &Value,
    deployment: &Value,
    deployment_name: &str,
) -> Result<Vec<Value>, BundleError> {
    let mut out = Vec::new();
    for webhook in config
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = str_at(webhook, "/name")?;
        let port = container_port(objects, deployment, webhook)?;
        let mut def = Map::new();
        def.insert("type".into(), json!("MutatingAdmissionWebhook"));
        def.insert(
            "generateName".into(),
            json!(format!("{WEBHOOK_NAME_PREFIX}{name}")),
        );
        def.insert("deploymentName".into(), json!(deployment_name));
        // The Service OLM creates listens on this port and forwards to the same port of the pod.
        def.insert("containerPort".into(), json!(port));
        def.insert(
            "webhookPath".into(),
            webhook
                .pointer("/clientConfig/service/path")
                .cloned()
                .unwrap_or(json!("/")),
        );
        for key in [
            "admissionReviewVersions",
            "sideEffects",
            "matchPolicy",
            "reinvocationPolicy",
            "timeoutSeconds",
            "rules",
            "objectSelector",
        ] {
            if let Some(v) = webhook.get(key) {
                def.insert(key.into(), v.clone());
            }
        }
        def.insert("failurePolicy".into(), json!(FAILURE_POLICY));
        out.push(Value::Object(def));
    }
    if out.is_empty() {
        return Err(BundleError::Missing(
            "a webhook in the MutatingWebhookConfiguration".into(),
        ));
    }
    Ok(out)
}

/// The container port the chart's webhook Service forwards to (`targetPort`: a number, or the name
/// of one of the Deployment's container ports).
fn container_port(
    objects: &[Value],
    deployment: &Value,
    webhook: &Value,
) -> Result<i64, BundleError> {
    let service_name = str_at(webhook, "/clientConfig/service/name")?;
    let target = objects
        .iter()
        .find(|o| kind(o) == "Service" && name(o) == service_name)
        .and_then(|s| s.pointer("/spec/ports/0/targetPort"))
        .ok_or_else(|| BundleError::Missing(format!("Service {service_name}'s targetPort")))?;
    if let Some(port) = target.as_i64() {
        return Ok(port);
    }
    deployment
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .find(|p| p.get("name") == Some(target))
        .and_then(|p| p.get("containerPort").and_then(Value::as_i64))
        .ok_or_else(|| BundleError::Missing(format!("the Deployment's container port {target}")))
}

/// The Services the webhook configuration calls (OLM creates its own in their place).
fn webhook_services(config: &Value) -> Result<Vec<String>, BundleError> {
    let mut out = Vec::new();
    for webhook in config
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(str_at(webhook, "/clientConfig/service/name")?);
    }
    Ok(out)
}

/// The rules of the roles bound to the operator's ServiceAccount, and which roles and bindings those are.
struct Rbac {
    cluster_rules: Vec<Value>,
    namespace_rules: Vec<Value>,
    /// (kind, name) of the roles and bindings the CSV's permissions replace.
    taken: Vec<(String, String)>,
}

impl Rbac {
    fn of(objects: &[Value], account: &str, namespace: &str) -> Self {
        let binds_account = |b: &Value| {
            b.get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|s| {
                    s.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                        && s.get("name").and_then(Value::as_str) == Some(account)
                        && s.get("namespace").and_then(Value::as_str) == Some(namespace)
                })
        };
        let mut rbac = Rbac {
            cluster_rules: Vec::new(),
            namespace_rules: Vec::new(),
            taken: Vec::new(),
        };
        let mut kept_roles = Vec::new();
        for binding in objects
            .iter()
            .filter(|o| matches!(kind(o), "ClusterRoleBinding" | "RoleBinding"))
        {
            let role_kind = binding
                .pointer("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role_name = binding
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = (role_kind.to_string(), role_name.to_string());
            if !binds_account(binding) {
                kept_roles.push(role);
                continue;
            }
            let rules = objects
                .iter()
                .find(|o| kind(o) == role_kind && name(o) == role_name)
                .and_then(|r| r.get("rules"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if kind(binding) == "ClusterRoleBinding" {
                rbac.cluster_rules.extend(rules);
            } else {
                rbac.namespace_rules.extend(rules);
            }
            rbac.taken
                .push((kind(binding).to_string(), name(binding).to_string()));
            rbac.taken.push(role);
        }
        rbac.taken.retain(|t| !kept_roles.contains(t));
        rbac
    }
}

/// The operator's rules with the chart's names of what OLM names itself: the rule on the chart's
/// webhook configuration goes (OLM's has a generated name), the chart's webhook Service becomes OLM's.
fn rewrite_rules(
    rules: Vec<Value>,
    config_name: &str,
    chart_services: &[String],
    service: &str,
) -> Vec<Value> {
    rules
        .into_iter()
        .filter(|r| !names(r).iter().any(|n| n == config_name))
        .map(|mut r| {
            if let Some(list) = r.get_mut("resourceNames").and_then(Value::as_array_mut) {
                for n in list.iter_mut() {
                    if n.as_str()
                        .is_some_and(|s| chart_services.iter().any(|c| c == s))
                    {
                        *n = json!(service);
                    }
                }
            }
            r
        })
        .collect()
}

fn names(rule: &Value) -> Vec<String> {
    rule.get("resourceNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// The operator's images and the node installer's (the DaemonSet the chart renders with the installer
/// on, which the operator creates from its custom resource where the chart has `nodeAgent`).
fn related_images(deployment: &Value, installer_rendered: &str) -> Result<Vec<Value>, BundleError> {
    let installer = parse_all(installer_rendered, "the chart rendered with the installer")?;
    let daemonset = only(&installer, "DaemonSet")?;
    let mut out: Vec<Value> = Vec::new();
    for workload in [deployment, daemonset] {
        for kind in ["initContainers", "containers"] {
            let containers = workload.pointer(&format!("/spec/template/spec/{kind}"));
            for c in containers.and_then(Value::as_array).into_iter().flatten() {
                let image = str_at(c, "/image")?;
                if !out.iter().any(|i| i["image"] == image) {
                    out.push(json!({"name": str_at(c, "/name")?, "image": image}));
                }
            }
        }
    }
    Ok(out)
}

fn links(chart: &Value) -> Result<Vec<Value>, BundleError> {
    let mut out = vec![json!({"name": "Documentation", "url": str_at(chart, "/home")?})];
    for source in chart
        .get("sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(json!({"name": "Source", "url": source}));
    }
    Ok(out)
}

/// The CSV's annotations. The `features.operators.openshift.io/*` ones say what is true of this
/// product, each with its reason.
fn annotations(
    chart: &Value,
    owned: &[OwnedCrd],
    examples: &[Value],
    images: &[Value],
    namespace: &str,
) -> Result<Value, BundleError> {
    // NodeMultus is never written by users (each node's installer publishes its own): internal, the
    // console offers no form for it.
    let internal_kind = <linkerd_multus_crds::NodeMultus as kube::Resource>::kind(&());
    let internal: Vec<String> = owned
        .iter()
        .filter(|c| c.kind == internal_kind)
        .map(|c| c.name.clone())
        .collect();
    let operator_image = images
        .first()
        .and_then(|i| i.get("image"))
        .cloned()
        .ok_or_else(|| BundleError::Missing("the operator's image".into()))?;
    Ok(json!({
        "alm-examples": serde_json::to_string_pretty(examples).unwrap_or_default(),
        "capabilities": "Basic Install",
        "categories": "Networking",
        "containerImage": operator_image,
        "description": str_at(chart, "/description")?,
        "repository": chart.pointer("/sources/0").cloned().unwrap_or(Value::Null),
        "support": PACKAGE,
        "operatorframework.io/suggested-namespace": namespace,
        "operators.operatorframework.io/internal-objects": serde_json::to_string(&internal).unwrap_or_default(),
        // It ships a CNI plugin and the DaemonSet that installs it on every node.
        "features.operators.openshift.io/cni": "true",
        "features.operators.openshift.io/cnf": "false",
        "features.operators.openshift.io/csi": "false",
        // Its images are referenced by tag, not digest: a mirror registry cannot stand in for them.
        "features.operators.openshift.io/disconnected": "false",
        // TLS is rustls on ring, not a FIPS-validated module.
        "features.operators.openshift.io/fips-compliant": "false",
        // It reads no HTTP(S)_PROXY settings (it talks only to the cluster's apiserver).
        "features.operators.openshift.io/proxy-aware": "false",
        // The webhook's TLS settings are its own, not the cluster's TLS security profile.
        "features.operators.openshift.io/tls-profiles": "false",
        // It calls no cloud provider's API.
        "features.operators.openshift.io/token-auth-aws": "false",
        "features.operators.openshift.io/token-auth-azure": "false",
        "features.operators.openshift.io/token-auth-gcp": "false",
    }))
}

/// `metadata/annotations.yaml`: the format, the package and its channel.
fn bundle_annotations() -> Value {
    json!({"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": PACKAGE,
        "operators.operatorframework.io.bundle.channels.v1": CHANNEL,
        "operators.operatorframework.io.bundle.channel.default.v1": CHANNEL,
    }})
}

/// The bundle image: the two directories and the same annotations as labels (`bundle/` is the
/// build context).
fn dockerfile() -> String {
    let mut out = String::from(
        "# Generated by `cargo run -p linkerd-multus-e2e --bin bundlegen`; do not edit by hand.\n\
         # Build the bundle image from bundle/: docker build -f bundle.Dockerfile -t IMAGE bundle/\n\
         FROM scratch\n",
    );
    if let Some(map) = bundle_annotations()["annotations"].as_object() {
        for (k, v) in map {
            out.push_str(&format!("LABEL {k}={}\n", v.as_str().unwrap_or_default()));
        }
    }
    out.push_str("COPY manifests /manifests/\nCOPY metadata /metadata/\n");
    out
}

// === CRDs ===

struct OwnedCrd {
    name: String,
    group: String,
    kind: String,
    plural: String,
    version: String,
    description: String,
    text: String,
}

impl OwnedCrd {
    fn entry(&self) -> Value {
        json!({
            "name": self.name,
            "version": self.version,
            "kind": self.kind,
            "displayName": display_name(&self.kind),
            "description": self.description,
        })
    }
}

fn owned_crds(crds: &[(String, String)]) -> Result<Vec<OwnedCrd>, BundleError> {
    let mut out = Vec::new();
    for (file, text) in crds {
        let crd = parse_all(text, file)?
            .into_iter()
            .next()
            .ok_or_else(|| BundleError::Missing(format!("a CRD in {file}")))?;
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
        let stored = versions
            .into_iter()
            .flatten()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .ok_or_else(|| BundleError::Missing(format!("the stored version in {file}")))?;
        out.push(OwnedCrd {
            name: str_at(&crd, "/metadata/name")?,
            group: str_at(&crd, "/spec/group")?,
            kind: str_at(&crd, "/spec/names/kind")?,
            plural: str_at(&crd, "/spec/names/plural")?,
            version: str_at(stored, "/name")?,
            description: str_at(stored, "/schema/openAPIV3Schema/description")?,
            text: text.clone(),
        });
    }
    Ok(out)
}

/// `NodeMultus` → `Node Multus`.
fn display_name(kind: &str) -> String {
    let mut out = String::new();
    for (i, c) in kind.chars().enumerate() {
        if i > 0 && c.is_uppercase() {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

// === helpers ===

/// An extra manifest as OLM should create it: without helm's labels, and without a namespace (OLM
/// puts it in the operator's).
fn clean(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("namespace");
        if let Some(labels) = meta.remove("labels") {
            let labels = strip_labels(labels);
            if labels.as_object().is_some_and(|l| !l.is_empty()) {
                meta.insert("labels".into(), labels);
            }
        }
    }
    object
}

/// Labels without helm's own (the chart version, `managed-by: Helm`): OLM manages these objects.
fn strip_labels(mut labels: Value) -> Value {
    if let Some(map) = labels.as_object_mut() {
        map.remove("helm.sh/chart");
        map.remove("app.kubernetes.io/managed-by");
    }
    labels
}

/// `<name>_<group>_<version>_<kind>.yaml`, as operator-sdk names a bundle's manifests.
fn manifest_file_name(object: &Value, kind: &str, name: &str) -> String {
    let api = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!(
        "{name}_{}_{}.yaml",
        api.replace('/', "_"),
        kind.to_lowercase()
    )
}

fn only<'a>(objects: &'a [Value], wanted: &str) -> Result<&'a Value, BundleError> {
    let mut found = objects.iter().filter(|o| kind(o) == wanted);
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        (None, _) => Err(BundleError::Missing(format!("a {wanted}"))),
        (Some(_), Some(_)) => Err(BundleError::UnsupportedKind {
            kind: wanted.into(),
            name: "(more than one)".into(),
        }),
    }
}

fn kind(object: &Value) -> &str {
    object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn group_of(object: &Value) -> String {
    let api = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    api.rsplit_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default()
}

fn str_at(value: &Value, pointer: &str) -> Result<String, BundleError> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| BundleError::Missing(pointer.to_string()))
}

fn yaml(value: &Value) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_default()
}
