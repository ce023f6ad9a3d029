//! The helm chart installed, upgraded and uninstalled with the real helm on the local kube-apiserver:
//! certificates kept, no needless restart, least-privilege RBAC as the apiserver decides it, and nothing
//! left behind.

mod support;

use linkerd_multus_e2e::{kubeconfig_path, kubectl, kubectl_ok, unique_name, Cluster};
use serde_json::Value;
use support::*;

/// Namespaces created with kubectl for one test and deleted when dropped.
struct Namespaces(Vec<String>);

impl Namespaces {
    fn create(prefixes: &[&str]) -> Self {
        let names: Vec<String> = prefixes.iter().map(|p| unique_name(p)).collect();
        for name in &names {
            kubectl_ok(&["create", "namespace", name]);
        }
        Self(names)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(&[
                "delete",
                "namespace",
                name,
                "--wait=false",
                "--ignore-not-found",
            ]);
        }
    }
}

fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    let out = kubectl_ok(&all);
    serde_json::from_str(&out).expect("kubectl JSON")
}

/// Whether the testbed's apiserver serves `group/version` (discovery; the tests never pin a version).
fn serves(group_version: &str) -> bool {
    kubectl(&["get", "--raw", &format!("/apis/{group_version}")])
        .status
        .success()
}

/// Values that keep the test's webhook away from every other test's pods: it only matches namespaces
/// labelled with this release's name (none are), and a failed call would be ignored anyway.
fn isolating_values(release: &str, cni_namespace: &str) -> String {
    format!(
        "operator:\n  cniNamespace: {cni_namespace}\nwebhook:\n  failurePolicy: Ignore\n  namespaceSelector:\n    \
         matchLabels:\n      linkerd-multus-e2e/release: {release}\n"
    )
}

struct Installed {
    release: String,
    namespace: String,
    values: std::path::PathBuf,
}

impl Installed {
    fn install(release: &str, namespace: &str, values: &str, extra: &[&str]) -> (Self, String) {
        Self::install_chart(&chart_dir(), release, namespace, values, extra)
    }

    /// [`Installed::install`] of the chart in `chart` (another version of it).
    fn install_chart(
        chart: &std::path::Path,
        release: &str,
        namespace: &str,
        values: &str,
        extra: &[&str],
    ) -> (Self, String) {
        let values = temp_file("helm-values", values);
        let mut args = vec![
            "install",
            release,
            path_str(chart),
            "-n",
            namespace,
            "-f",
            path_str(&values),
        ];
        args.extend_from_slice(extra);
        let notes = Cluster::shared().helm_ok(&args);
        let installed = Self {
            release: release.into(),
            namespace: namespace.into(),
            values,
        };
        (installed, notes)
    }

    fn upgrade(&self, extra: &[&str]) {
        let chart = chart_dir();
        let mut args = vec![
            "upgrade",
            &self.release,
            path_str(&chart),
            "-n",
            &self.namespace,
            "-f",
            path_str(&self.values),
        ];
        args.extend_from_slice(extra);
        Cluster::shared().helm_ok(&args);
    }

    fn manifest(&self) -> String {
        Cluster::shared().helm_ok(&["get", "manifest", &self.release, "-n", &self.namespace])
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // A failed test must not leave its (cluster-scoped) webhook configuration behind.
        let kubeconfig = kubeconfig_path();
        let _ = helm(&[
            "--kubeconfig",
            path_str(&kubeconfig),
            "uninstall",
            &self.release,
            "-n",
            &self.namespace,
        ]);
        let _ = std::fs::remove_file(&self.values);
    }
}

/// The Deployment's generation and pod template: an upgrade that changes neither restarts nothing.
fn deployment_state(namespace: &str, name: &str) -> (i64, Value) {
    let d = kubectl_json(&["get", "deployment", name, "-n", namespace]);
    (
        d["metadata"]["generation"].as_i64().expect("generation"),
        d["spec"]["template"].clone(),
    )
}

/// The MutatingWebhookConfiguration the chart names after the release's fullname (see
/// `linkerd-multus.webhookConfigName`: it must sort after Linkerd's injector).
fn config_name(fullname: &str) -> String {
    format!("zz-{fullname}")
}

fn ca_bundle(name: &str) -> Option<String> {
    let mwc = kubectl_json(&["get", "mutatingwebhookconfiguration", name]);
    mwc["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .map(str::to_string)
}

/// What the operator does in self-managed mode: fill the caBundle of webhook configuration `config` in.
fn fill_ca_bundle(config: &str, ca: &str) {
    let patch =
        format!(r#"[{{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"{ca}"}}]"#);
    kubectl_ok(&[
        "patch",
        "mutatingwebhookconfiguration",
        config,
        "--type=json",
        "-p",
        &patch,
    ]);
}

/// Two fake CAs (base64 of a PEM header): no call is made, only the field is compared.
const FAKE_CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
const RENEWED_FAKE_CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCgo=";

/// After uninstall nothing labelled with the release exists, cluster-scoped or in its namespaces.
fn assert_nothing_left(release: &str, namespaces: &[&str]) {
    let selector = format!("app.kubernetes.io/instance={release}");
    let cluster_kinds =
        "clusterroles,clusterrolebindings,mutatingwebhookconfigurations,customresourcedefinitions";
    let left = kubectl_json(&["get", cluster_kinds, "-l", &selector]);
    assert_eq!(
        left["items"],
        serde_json::json!([]),
        "cluster-scoped objects left behind"
    );
    let kinds =
        "deployments,daemonsets,services,serviceaccounts,secrets,configmaps,roles,rolebindings,\
                 leases,poddisruptionbudgets.policy";
    for ns in namespaces {
        let left = kubectl_json(&["get", kinds, "-n", ns, "-l", &selector]);
        assert_eq!(
            left["items"],
            serde_json::json!([]),
            "objects left behind in {ns}"
        );
    }
}

/// Helm-generated certificates are created once: an upgrade keeps the Secret and the caBundle and does
/// not touch the Deployment's pod template; a real change of an operator flag does (so the check bites).
/// Where policy/v1 is not served (1.20) the PodDisruptionBudget falls back to policy/v1beta1.
/// Uninstall leaves nothing behind.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn install_upgrade_uninstall_with_helm_certificates() {
    let namespaces = Namespaces::create(&["helm-rel", "helm-cni"]);
    let (ns, cni_ns) = (namespaces.0[0].as_str(), namespaces.0[1].as_str());
    let release = unique_name("lm");
    // rbac.check=false here (the other test keeps the default): none of check's extras.
    let values = isolating_values(&release, cni_ns) + "rbac:\n  check: false\n";
    let (installed, notes) =
        Installed::install(&release, ns, &values, &["--set", "webhook.certs.mode=helm"]);
    let fullname = format!("{release}-linkerd-multus");
    assert!(
        notes.contains("kubectl annotate namespace <ns> linkerd.io/multus=enabled"),
        "{notes}"
    );
    // Before policy/v1 (1.21) namespaces lack their name label: the NOTES say so only there.
    let old_server = !serves("policy/v1");
    assert_eq!(
        notes.contains("kubernetes.io/metadata.name=kube-system"),
        old_server,
        "label advice (wanted: {old_server}) wrong: {notes}"
    );

    let mwcs = Access(
        "list",
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        None,
        None,
    );
    assert!(
        !operator_can(ns, &fullname, &mwcs),
        "rbac.check=false still grants check's extras"
    );
    // The operator's own: a NAD is deleted only once no pod lists it.
    let pods = Access("list", "", "pods", None, Some("default"));
    assert!(operator_can(ns, &fullname, &pods));
    let namespaces_list = Access("list", "", "namespaces", None, None);
    assert!(operator_can(ns, &fullname, &namespaces_list));

    let manifest = installed.manifest();
    let pdb_version = if old_server {
        "policy/v1beta1"
    } else {
        "policy/v1"
    };
    assert!(
        manifest.contains(&format!("apiVersion: {pdb_version}\n")),
        "PDB is not {pdb_version} on a server that serves it"
    );
    let pdb = kubectl_json(&["get", "poddisruptionbudgets.policy", &fullname, "-n", ns]);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let role = kubectl_json(&["get", "clusterrole", &format!("{fullname}-cni-config")]);
    assert_eq!(
        role["rules"][0]["resources"],
        serde_json::json!(["configmaps"])
    );

    let config = config_name(&fullname);
    let secret_name = format!("{fullname}-webhook-cert");
    let secret_before = kubectl_json(&["get", "secret", &secret_name, "-n", ns])["data"].clone();
    let ca_before = ca_bundle(&config).expect("caBundle set in helm mode");
    assert_eq!(secret_before["ca.crt"].as_str(), Some(ca_before.as_str()));
    let (generation_before, template_before) = deployment_state(ns, &fullname);

    // An upgrade that changes only the webhook registration.
    installed.upgrade(&[
        "--set",
        "webhook.certs.mode=helm",
        "--set",
        "webhook.timeoutSeconds=15",
    ]);
    let mwc = kubectl_json(&["get", "mutatingwebhookconfiguration", &config]);
    assert_eq!(
        mwc["webhooks"][0]["timeoutSeconds"], 15,
        "the upgrade was not applied"
    );
    let secret_after = kubectl_json(&["get", "secret", &secret_name, "-n", ns])["data"].clone();
    assert_eq!(
        secret_before, secret_after,
        "the upgrade regenerated the certificate"
    );
    assert_eq!(
        ca_bundle(&config).as_deref(),
        Some(ca_before.as_str()),
        "caBundle changed"
    );
    let (generation_after, template_after) = deployment_state(ns, &fullname);
    assert_eq!(
        template_before, template_after,
        "the upgrade changed the pod template (restart)"
    );
    assert_eq!(generation_before, generation_after);

    // A real operator change does roll the pods: the check above can fail.
    installed.upgrade(&[
        "--set",
        "webhook.certs.mode=helm",
        "--set",
        "operator.logLevel=debug",
    ]);
    let (generation_changed, _) = deployment_state(ns, &fullname);
    assert!(
        generation_changed > generation_after,
        "a changed flag did not reach the Deployment"
    );

    drop(installed);
    assert_nothing_left(&release, &[ns, cni_ns]);
}

/// Self-managed certificates: the caBundle the operator writes into the webhook configuration survives
/// `helm upgrade` (the chart carries the live one over). With cni.enabled the DaemonSet and Linkerd-format
/// ConfigMap land in the CNI namespace. Uninstall leaves nothing behind.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn install_upgrade_uninstall_self_managed_with_cni() {
    let namespaces = Namespaces::create(&["helm-rel", "helm-cni"]);
    let (ns, cni_ns) = (namespaces.0[0].as_str(), namespaces.0[1].as_str());
    let release = unique_name("lm");
    let values = isolating_values(&release, cni_ns);
    let (installed, _notes) =
        Installed::install(&release, ns, &values, &["--set", "cni.enabled=true"]);
    let fullname = format!("{release}-linkerd-multus");
    let config = config_name(&fullname);
    assert_eq!(
        ca_bundle(&config),
        None,
        "self-managed mode must leave caBundle to the operator"
    );

    let ds = kubectl_json(&["get", "daemonset", &format!("{fullname}-cni"), "-n", cni_ns]);
    assert_eq!(ds["spec"]["template"]["spec"]["hostNetwork"], true);
    let cm = kubectl_json(&["get", "configmap", "linkerd-cni-config", "-n", cni_ns]);
    let cni_config: Value =
        serde_json::from_str(cm["data"]["cni_network_config"].as_str().expect("key"))
            .expect("JSON");
    assert_eq!(cni_config["linkerd"]["proxy-uid"], 2102);

    assert_least_privilege(ns, cni_ns, &fullname);

    fill_ca_bundle(&config, FAKE_CA);
    let (generation_before, template_before) = deployment_state(ns, &fullname);

    installed.upgrade(&[
        "--set",
        "cni.enabled=true",
        "--set",
        "webhook.timeoutSeconds=12",
    ]);
    let mwc = kubectl_json(&["get", "mutatingwebhookconfiguration", &config]);
    assert_eq!(
        mwc["webhooks"][0]["timeoutSeconds"], 12,
        "the upgrade was not applied"
    );
    assert_eq!(
        ca_bundle(&config).as_deref(),
        Some(FAKE_CA),
        "upgrade wiped the operator's caBundle"
    );
    assert_eq!(
        deployment_state(ns, &fullname),
        (generation_before, template_before)
    );

    drop(installed);
    assert_nothing_left(&release, &[ns, cni_ns]);
}

/// Upgrading from a version that named the webhook configuration after the fullname (which sorts before
/// Linkerd's injector) renames it with no moment where the release's webhook cannot be called: helm creates
/// the new configuration before it deletes the old one, and the chart carries the caBundle the operator
/// had written into the old one over into the new one. A poll every 50 ms during the upgrade sees at least
/// one of the two at every moment, and each one it sees has the caBundle. No operator runs on the testbed,
/// so the new configuration's caBundle can only come from the chart. The next upgrade keeps the caBundle
/// (it stays in the manifest, or helm's three-way merge would remove it), the operator's renewed one
/// included. Uninstall leaves nothing behind.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn upgrade_renames_the_webhook_configuration_without_a_gap() {
    let namespaces = Namespaces::create(&["helm-rename", "helm-cni"]);
    let (ns, cni_ns) = (namespaces.0[0].as_str(), namespaces.0[1].as_str());
    let release = unique_name("lm");
    let old_chart = chart_with_the_old_config_name();
    let values = isolating_values(&release, cni_ns);
    let (installed, _) = Installed::install_chart(old_chart.path(), &release, ns, &values, &[]);
    let old = format!("{release}-linkerd-multus");
    let new = config_name(&old);
    assert_eq!(ca_bundle(&old), None, "the old chart set a caBundle");
    fill_ca_bundle(&old, FAKE_CA);

    let polls = poll_configs_during([&old, &new], || installed.upgrade(&[]));
    assert!(polls.len() >= 2, "too few polls to tell: {polls:?}");
    let both = polls.iter().filter(|seen| seen.len() == 2).count();
    eprintln!(
        "MEASURE rename upgrade: {} polls, {both} saw both configurations",
        polls.len()
    );
    for (i, seen) in polls.iter().enumerate() {
        assert!(
            !seen.is_empty(),
            "poll {i}: neither {old} nor {new} existed: {polls:?}"
        );
        assert!(
            seen.values().all(|ca| ca == FAKE_CA),
            "poll {i}: a configuration without the caBundle could be called: {polls:?}"
        );
    }
    assert_eq!(
        ca_bundle(&new).as_deref(),
        Some(FAKE_CA),
        "the renamed configuration lacks the caBundle"
    );
    let gone = kubectl(&["get", "mutatingwebhookconfiguration", &old]);
    assert!(
        !gone.status.success() && String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "the old configuration is still there: {}",
        String::from_utf8_lossy(&gone.stdout)
    );

    // The operator renews its CA; the next upgrade keeps the live caBundle.
    fill_ca_bundle(&new, RENEWED_FAKE_CA);
    installed.upgrade(&["--set", "webhook.timeoutSeconds=12"]);
    let mwc = kubectl_json(&["get", "mutatingwebhookconfiguration", &new]);
    assert_eq!(
        mwc["webhooks"][0]["timeoutSeconds"], 12,
        "the upgrade was not applied"
    );
    assert_eq!(
        ca_bundle(&new).as_deref(),
        Some(RENEWED_FAKE_CA),
        "the second upgrade lost the caBundle"
    );
    assert!(
        installed
            .manifest()
            .contains(&format!("caBundle: {RENEWED_FAKE_CA}\n")),
        "the manifest no longer carries the caBundle"
    );

    drop(installed);
    assert_nothing_left(&release, &[ns, cni_ns]);
}

/// A copy of the chart as earlier versions named the webhook configuration: after the fullname. Only the
/// `linkerd-multus.webhookConfigName` helper differs. Removed when dropped.
fn chart_with_the_old_config_name() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("linkerd-multus-old-chart")
        .tempdir()
        .expect("temp dir");
    copy_dir(&chart_dir(), dir.path());
    let helpers = dir.path().join("templates/_helpers.tpl");
    let text = std::fs::read_to_string(&helpers).expect("_helpers.tpl");
    let define = r#"{{- define "linkerd-multus.webhookConfigName" -}}"#;
    let start = text.find(define).expect("the webhookConfigName helper") + define.len();
    let end = start + text[start..].find("{{- end -}}").expect("its end");
    let old = format!(
        "{}\n{{{{- include \"linkerd-multus.fullname\" . -}}}}\n{}",
        &text[..start],
        &text[end..]
    );
    std::fs::write(&helpers, old).expect("write _helpers.tpl");
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// Runs `action` while a thread polls the webhook configurations `names` every 50 ms (at most 2 minutes'
/// worth); returns, per poll, the ones that existed with their caBundle ("" without one).
fn poll_configs_during(
    names: [&str; 2],
    action: impl FnOnce(),
) -> Vec<std::collections::BTreeMap<String, String>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the poll also when `action` panics.
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let poller = scope.spawn(|| {
            let mut polls = Vec::new();
            // One last poll after the stop: the state the action left.
            for _ in 0..2400 {
                let last = stop.load(Ordering::SeqCst);
                polls.push(existing_configs(names));
                if last {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            polls
        });
        let guard = StopOnDrop(&stop);
        action();
        drop(guard);
        poller.join().expect("the poll thread")
    })
}

/// Which of the webhook configurations `names` exist, with their first webhook's caBundle ("" without one).
fn existing_configs(names: [&str; 2]) -> std::collections::BTreeMap<String, String> {
    let out = kubectl_ok(&[
        "get",
        "mutatingwebhookconfigurations",
        names[0],
        names[1],
        "--ignore-not-found",
        "-o",
        "json",
    ]);
    if out.trim().is_empty() {
        return Default::default(); // kubectl prints nothing when neither exists
    }
    let list: Value = serde_json::from_str(&out).expect("kubectl JSON");
    list["items"]
        .as_array()
        .expect("a List")
        .iter()
        .map(|mwc| {
            let ca = mwc["webhooks"][0]["clientConfig"]["caBundle"]
                .as_str()
                .unwrap_or_default();
            (name(mwc).to_string(), ca.to_string())
        })
        .collect()
}

/// One RBAC question for the operator's ServiceAccount: `verb` on `group`/`resource` (`name`, namespace).
struct Access<'a>(&'a str, &'a str, &'a str, Option<&'a str>, Option<&'a str>);

/// Asks the apiserver's authorizer itself (a SubjectAccessReview), as the ServiceAccount's user and groups.
fn operator_can(
    ns: &str,
    sa: &str,
    Access(verb, group, resource, name, namespace): &Access,
) -> bool {
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": format!("system:serviceaccount:{ns}:{sa}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
            "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "name": name, "namespace": namespace,
            },
        },
    });
    let file = temp_file("sar.json", &review.to_string());
    let answer = kubectl_json(&["create", "-f", path_str(&file)]);
    let _ = std::fs::remove_file(&file);
    answer["status"]["allowed"].as_bool().unwrap_or(false)
}

/// The installed RBAC grants what the operator does and nothing more: no pod or namespace writes;
/// Secrets, the Lease, the CNI ConfigMap and the webhook configuration only by name.
fn assert_least_privilege(ns: &str, cni_ns: &str, fullname: &str) {
    let secret = format!("{fullname}-webhook-cert");
    let config = config_name(fullname);
    let (nads, coord, events) = ("k8s.cni.cncf.io", "coordination.k8s.io", "events.k8s.io");
    let admission = "admissionregistration.k8s.io";
    let mwcs = "mutatingwebhookconfigurations";
    let allowed = [
        Access("watch", "", "namespaces", None, None),
        Access("get", "", "namespaces", Some("default"), None),
        Access(
            "create",
            nads,
            "network-attachment-definitions",
            None,
            Some("default"),
        ),
        Access(
            "delete",
            nads,
            "network-attachment-definitions",
            Some("linkerd-cni"),
            Some("default"),
        ),
        Access("patch", events, "events", None, Some("default")),
        Access("create", "", "events", None, Some("default")),
        Access(
            "watch",
            "",
            "configmaps",
            Some("linkerd-cni-config"),
            Some(cni_ns),
        ),
        Access("create", "", "secrets", None, Some(ns)),
        Access("get", "", "secrets", Some(&secret), Some(ns)),
        Access("update", "", "secrets", Some(&secret), Some(ns)),
        Access("patch", admission, mwcs, Some(&config), None),
        Access("create", coord, "leases", None, Some(ns)),
        Access(
            "patch",
            coord,
            "leases",
            Some("linkerd-multus-operator"),
            Some(ns),
        ),
        // Whether pods still use a NAD whose namespace opted out.
        Access("list", "", "pods", None, Some("default")),
        // rbac.check (default): read-only extras for `check`.
        Access("list", admission, mwcs, None, None),
    ];
    for access in &allowed {
        assert!(
            operator_can(ns, fullname, access),
            "the operator may not {} {}/{:?}",
            access.0,
            access.2,
            access.3
        );
    }
    let denied = [
        Access("create", "", "pods", None, Some("default")),
        Access("patch", "", "pods", Some("p"), Some("default")),
        Access("create", "", "namespaces", None, None),
        Access("delete", "", "namespaces", Some("default"), None),
        Access("patch", "", "namespaces", Some("default"), None),
        Access("get", "", "secrets", Some("other"), Some(ns)),
        Access("list", "", "secrets", None, Some(ns)),
        Access("get", "", "secrets", Some(&secret), Some("default")),
        Access("list", "", "configmaps", None, Some(cni_ns)),
        Access("list", "", "configmaps", None, Some("default")),
        Access("get", "", "configmaps", Some("other"), Some(cni_ns)),
        Access(
            "patch",
            "",
            "configmaps",
            Some("linkerd-cni-config"),
            Some(cni_ns),
        ),
        Access("patch", admission, mwcs, Some("other"), None),
        // The name of earlier versions (the fullname) is not the operator's any more.
        Access("patch", admission, mwcs, Some(fullname), None),
        Access("patch", coord, "leases", Some("other"), Some(ns)),
        Access("create", coord, "leases", None, Some("default")),
    ];
    for access in &denied {
        assert!(
            !operator_can(ns, fullname, access),
            "the operator may {} {}/{:?}",
            access.0,
            access.2,
            access.3
        );
    }
    // What the controller really sends for the ConfigMap: a list (and watch) with a name field selector,
    // which resourceNames authorizes; the same list without the selector is forbidden.
    let who = format!("--as=system:serviceaccount:{ns}:{fullname}");
    let selector = "metadata.name=linkerd-cni-config";
    kubectl_ok(&[
        "get",
        "configmaps",
        "-n",
        cni_ns,
        "--field-selector",
        selector,
        &who,
    ]);
    let all = kubectl(&["get", "configmaps", "-n", cni_ns, &who]);
    assert!(
        String::from_utf8_lossy(&all.stderr).contains("Forbidden"),
        "listing every ConfigMap was allowed"
    );
}

/// Install order: the chart installs while the CNI namespace does not exist yet (its ConfigMap read is
/// a ClusterRole limited by name). The real controller, acting as the chart's ServiceAccount with the
/// chart's RBAC, reports the missing ConfigMap (Warning Event, gauge 0) while `/ready` is 200, and
/// picks the ConfigMap up once linkerd-cni creates it: the NAD appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
async fn installs_before_linkerd_cni_and_picks_its_configmap_up() {
    use clap::Parser;
    use kube::api::{Api, DynamicObject};
    use linkerd_multus_e2e::events::wait_for_warning;
    use linkerd_multus_e2e::{client, client_as_service_account, eventually, TestNamespace};
    use linkerd_multus_operator::config::Config;

    let namespaces = Namespaces::create(&["helm-early"]);
    let ns = namespaces.0[0].clone();
    let cni_ns = unique_name("late-cni");
    let release = unique_name("lm");
    let values = isolating_values(&release, &cni_ns);
    let (installed, _) = Installed::install(&release, &ns, &values, &[]);
    let fullname = format!("{release}-linkerd-multus");

    // The test's own namespace selection (hidden flag), so other tests' namespaces are not touched.
    let label = ("linkerd-multus-test/run".to_string(), release.clone());
    let admin = client().await;
    let app = TestNamespace::create_with(
        &admin,
        "early-app",
        [(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )]
        .into(),
    )
    .await;
    kubectl(&[
        "label",
        "namespace",
        &app.name,
        &format!("{}={}", label.0, label.1),
    ]);
    let selector = format!("{}={}", label.0, label.1);
    let argv = [
        "linkerd-multus-operator",
        "--cni-namespace",
        &cni_ns,
        "--linkerd-namespace",
        &unique_name("no-linkerd"),
        "--admin-addr",
        "127.0.0.1:0",
        "--namespace-selector",
        &selector,
    ];
    let Config::Run(run) =
        Config::from_cli(linkerd_multus_operator::cli::Cli::try_parse_from(argv).expect("flags"))
    else {
        unreachable!("no subcommand")
    };
    // Multus' CRD, as a Multus cluster has it (tests on this testbed may run in any order).
    linkerd_multus_e2e::ensure_nad_crd();
    let as_operator = client_as_service_account(&ns, &fullname).await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let op = linkerd_multus_operator::spawn_controller(as_operator, run.controller, shutdown)
        .await
        .expect("operator starts");
    let get = |path: &'static str| async move {
        let resp = reqwest::get(format!("http://{}{path}", op.admin_addr))
            .await
            .expect("admin server");
        (
            resp.status().as_u16(),
            resp.text().await.unwrap_or_default(),
        )
    };

    wait_for_warning(
        &admin,
        &app.name,
        "CniConfigMapMissing",
        "a CniConfigMapMissing Warning in the enabled namespace",
        |_| true,
    )
    .await;
    let gauge = "linkerd_multus_input_healthy{input=\"configmap\"} ";
    let (_, metrics) = get("/metrics").await;
    assert!(metrics.contains(&format!("{gauge}0")), "{metrics}");
    let (ready, body) = get("/ready").await;
    assert_eq!(ready, 200, "{body}");

    // linkerd-cni arrives.
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "linkerd-cni-config", "namespace": cni_ns},
        "data": {"cni_network_config": include_str!("../../fixtures/linkerd2-cni-network-config.json")},
    })
    .to_string();
    let _cni = Namespaces(vec![cni_ns.clone()]);
    kubectl_ok(&["create", "namespace", &cni_ns]);
    let file = temp_file("cm.json", &cm);
    kubectl_ok(&["apply", "-f", path_str(&file)]);
    let nads = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &app.name,
        &linkerd_multus_operator::reconcile::nad_resource(None),
    );
    let started = std::time::Instant::now();
    let nad = eventually("the NAD appears once the ConfigMap exists", || async {
        nads.get_opt(vocab::NAD_NAME).await.ok()?
    })
    .await;
    eprintln!(
        "MEASURE ConfigMap created after the operator -> NAD visible: {:?}",
        started.elapsed()
    );
    let config = nad.data["spec"]["config"].as_str().expect("config");
    assert!(config.contains("\"type\":\"linkerd-cni\""), "{config}");
    eventually("the configmap gauge reads 1", || async {
        get("/metrics")
            .await
            .1
            .contains(&format!("{gauge}1"))
            .then_some(())
    })
    .await;
    drop(installed);
}

/// Deletes a cluster-scoped object with kubectl when dropped.
struct KubectlDelete(&'static str, String);

impl Drop for KubectlDelete {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", self.0, &self.1, "--ignore-not-found"]);
    }
}

/// `helm/values-openshift.yaml` keeps OpenShift's platform namespaces (labelled
/// `openshift.io/run-level` or `openshift.io/cluster-monitoring`) away from the webhook, as the real
/// apiserver applies the rendered namespaceSelector: with the webhook's URL unreachable and
/// `failurePolicy: Fail`, a pod in a plain namespace is refused, while pods in namespaces with either
/// label are created (they are never sent to the webhook). A scoping label added to the selector
/// keeps the test's webhook away from every other test's pods.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn openshift_values_keep_platform_namespaces_away_from_the_webhook() {
    let scope = unique_name("os-scope");
    let openshift = chart_dir().join("values-openshift.yaml");
    let scoping = temp_file(
        "helm-values",
        &format!(
            "webhook:\n  namespaceSelector:\n    matchLabels:\n      linkerd-multus-e2e/scope: {scope}\n"
        ),
    );
    let docs = parse_docs(&helm_template(
        "ld-controller",
        "linkerd-multus",
        &["-f", path_str(&openshift), "-f", path_str(&scoping)],
    ));
    let mut config = find(&docs, "MutatingWebhookConfiguration", None).clone();
    let hook = &mut config["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    let expressions = hook["namespaceSelector"]["matchExpressions"].clone();
    for key in ["openshift.io/run-level", "openshift.io/cluster-monitoring"] {
        assert!(
            expressions
                .as_array()
                .expect("matchExpressions")
                .iter()
                .any(|e| e["key"] == key && e["operator"] == "DoesNotExist"),
            "{key} excluded: {expressions}"
        );
    }
    // Nothing listens on port 1: every call the apiserver makes fails, so Fail refuses the pod.
    hook["clientConfig"] = serde_json::json!({"url": "https://127.0.0.1:1/annotate-multus-v1-pod"});
    config["metadata"] = serde_json::json!({"name": scope});
    let file = temp_file("webhook-config", &config.to_string());
    kubectl_ok(&["create", "-f", path_str(&file)]);
    let _config = KubectlDelete("mutatingwebhookconfiguration", scope.clone());

    let namespaces = Namespaces::create(&["os-plain", "os-runlevel", "os-monitoring"]);
    let labels = [
        None,
        Some("openshift.io/run-level=0"),
        Some("openshift.io/cluster-monitoring=true"),
    ];
    for (ns, label) in namespaces.0.iter().zip(labels) {
        let scope_label = format!("linkerd-multus-e2e/scope={scope}");
        let mut args = vec!["label", "namespace", ns.as_str(), scope_label.as_str()];
        args.extend(label);
        kubectl_ok(&args);
    }
    let create_pod = |ns: &str, name: &str| {
        kubectl(&[
            "-n",
            ns,
            "run",
            name,
            "--image=example.com/app:1",
            "--restart=Never",
        ])
    };
    // The apiserver picks the configuration up within moments: wait until the plain namespace's pod
    // is refused by the failing webhook, which proves the selector is in force.
    let mut attempt = 0;
    let refused = linkerd_multus_e2e::wait_for("the webhook to be in force", || {
        attempt += 1;
        let out = create_pod(&namespaces.0[0], &format!("plain-{attempt}"));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (!out.status.success() && stderr.contains("failed calling webhook")).then_some(stderr)
    });
    eprintln!("plain namespace: {}", refused.trim());
    for ns in &namespaces.0[1..] {
        let out = create_pod(ns, "platform");
        assert!(
            out.status.success(),
            "a pod in platform namespace {ns} is never sent to the webhook: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
