//! The helm chart installed, upgraded and uninstalled with the real helm on the local kube-apiserver:
//! certificates kept, no needless restart, least-privilege RBAC as the apiserver decides it, and nothing
//! left behind.

mod support;

use linkerd_multus_e2e::{kubectl, kubectl_ok};
use serde_json::Value;
use support::install::*;
use support::*;

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

/// The upgrade reached the webhook configuration `config`: its `timeoutSeconds` is now `seconds`.
fn assert_timeout_upgraded(config: &str, seconds: u64) {
    let mwc = kubectl_json(&["get", "mutatingwebhookconfiguration", config]);
    assert_eq!(
        mwc["webhooks"][0]["timeoutSeconds"], seconds,
        "the upgrade was not applied to {config}"
    );
}

/// Two fake CAs (base64 of a PEM header): no call is made, only the field is compared.
const FAKE_CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
const RENEWED_FAKE_CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCgo=";

/// Helm-generated certificates are created once: an upgrade keeps the Secret and the caBundle and does
/// not touch the Deployment's pod template; a real change of an operator flag does (so the check bites).
/// Uninstall leaves nothing behind.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn install_upgrade_uninstall_with_helm_certificates() {
    let r = Release::new("helm-rel");
    let ns = r.ns();
    // rbac.check=false here (the other test keeps the default): none of check's extras.
    let values = r.values() + "rbac:\n  check: false\n";
    let (installed, notes) = r.install(&values, &["--set", "webhook.certs.mode=helm"]);
    let fullname = r.fullname.as_str();
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
        !operator_can(ns, fullname, &mwcs),
        "rbac.check=false still grants check's extras"
    );
    // The operator's own: a NAD is deleted only once no pod lists it.
    let pods = Access("list", "", "pods", None, Some("default"));
    assert!(operator_can(ns, fullname, &pods));
    let namespaces_list = Access("list", "", "namespaces", None, None);
    assert!(operator_can(ns, fullname, &namespaces_list));

    let role = kubectl_json(&["get", "clusterrole", &format!("{fullname}-cni-config")]);
    assert_eq!(
        role["rules"][0]["resources"],
        serde_json::json!(["configmaps"])
    );

    let config = config_name(fullname);
    let secret_name = format!("{fullname}-webhook-cert");
    let secret_before = kubectl_json(&["get", "secret", &secret_name, "-n", ns])["data"].clone();
    let ca_before = ca_bundle(&config).expect("caBundle set in helm mode");
    assert_eq!(secret_before["ca.crt"].as_str(), Some(ca_before.as_str()));
    let (generation_before, template_before) = deployment_state(ns, fullname);

    // An upgrade that changes only the webhook registration.
    installed.upgrade(&[
        "--set",
        "webhook.certs.mode=helm",
        "--set",
        "webhook.timeoutSeconds=15",
    ]);
    assert_timeout_upgraded(&config, 15);
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
    let (generation_after, template_after) = deployment_state(ns, fullname);
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
    let (generation_changed, _) = deployment_state(ns, fullname);
    assert!(
        generation_changed > generation_after,
        "a changed flag did not reach the Deployment"
    );

    r.uninstall_leaves_nothing(installed);
}

/// The chart's PodDisruptionBudget (`templates/poddisruptionbudget.yaml`) picks `policy/v1` where the server
/// serves it (1.21+) and `policy/v1beta1` where only that one is (1.20 and older; removed in 1.25). The
/// install goes through the version this server serves, and the object is readable there; the other
/// branch cannot be installed on this server and is reported as not run.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn pdb_installs_through_the_policy_version_the_server_serves() {
    let r = Release::new("helm-pdb");
    let ns = r.ns();
    let (installed, _) = r.install(&r.values(), &[]);
    let fullname = r.fullname.as_str();
    let (v1, v1beta1) = (serves("policy/v1"), serves("policy/v1beta1"));
    let (used, other) = match (v1, v1beta1) {
        (true, _) => ("v1", "v1beta1"),
        (false, true) => ("v1beta1", "v1"),
        (false, false) => panic!("the server serves neither policy/v1 nor policy/v1beta1"),
    };
    let manifest = installed.manifest();
    let docs = parse_docs(&manifest);
    let pdb = find(&docs, "PodDisruptionBudget", Some(fullname));
    assert_eq!(pdb["apiVersion"], format!("policy/{used}"), "{manifest}");
    let live = kubectl_json(&[
        "get",
        &format!("poddisruptionbudgets.{used}.policy"),
        fullname,
        "-n",
        ns,
    ]);
    assert_eq!(live["apiVersion"], format!("policy/{used}"));
    assert_eq!(live["spec"]["minAvailable"], 1);
    assert_eq!(
        live["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
        "operator"
    );
    let why = if used == "v1" {
        "the server serves policy/v1, which the chart prefers"
    } else {
        "the server does not serve policy/v1 (Kubernetes 1.21+)"
    };
    linkerd_multus_e2e::not_run(
        &format!("helm install: the PodDisruptionBudget through policy/{other}"),
        why,
    );
    r.uninstall_leaves_nothing(installed);
}

/// Self-managed certificates: the caBundle the operator writes into the webhook configuration survives
/// `helm upgrade` (the chart carries the live one over). With cni.enabled the DaemonSet and Linkerd-format
/// ConfigMap land in the CNI namespace. Uninstall leaves nothing behind.
#[test]
#[ignore = "needs the testbed (kube-apiserver) and helm: run by e2e/test-all"]
fn install_upgrade_uninstall_self_managed_with_cni() {
    let r = Release::new("helm-rel");
    let (ns, cni_ns) = (r.ns(), r.cni_ns());
    let values = r.values();
    let (installed, _notes) = r.install(&values, &["--set", "cni.enabled=true"]);
    let fullname = r.fullname.as_str();
    let config = config_name(fullname);
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

    assert_least_privilege(ns, cni_ns, fullname);
    assert_installer_least_privilege(cni_ns);

    fill_ca_bundle(&config, FAKE_CA);
    let (generation_before, template_before) = deployment_state(ns, fullname);

    installed.upgrade(&[
        "--set",
        "cni.enabled=true",
        "--set",
        "webhook.timeoutSeconds=12",
    ]);
    assert_timeout_upgraded(&config, 12);
    assert_eq!(
        ca_bundle(&config).as_deref(),
        Some(FAKE_CA),
        "upgrade wiped the operator's caBundle"
    );
    assert_eq!(
        deployment_state(ns, fullname),
        (generation_before, template_before)
    );

    r.uninstall_leaves_nothing(installed);
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
    let r = Release::new("helm-rename");
    let old_chart = chart_with_the_old_config_name();
    let values = r.values();
    let (installed, _) = r.install_chart(old_chart.path(), &values, &[]);
    let old = r.fullname.clone();
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
    assert_timeout_upgraded(&new, 12);
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

    r.uninstall_leaves_nothing(installed);
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

/// The CNI installer's ServiceAccount may write NodeMultus objects (get, create, patch: a server-side
/// apply) and nothing more of the cluster: no nodes, no ConfigMaps (linkerd-cni's own), no Leases.
fn assert_installer_least_privilege(cni_ns: &str) {
    let sa = "linkerd-cni";
    let group = "linkerd-multus.io";
    for access in [
        Access("get", group, "nodemultuses", Some("n1"), None),
        Access("create", group, "nodemultuses", None, None),
        Access("patch", group, "nodemultuses", Some("n1"), None),
    ] {
        assert!(
            operator_can(cni_ns, sa, &access),
            "the installer may not {} {}",
            access.0,
            access.2
        );
    }
    for access in [
        Access("delete", group, "nodemultuses", Some("n1"), None),
        Access("list", group, "nodemultuses", None, None),
        Access("patch", "", "nodes", Some("n1"), None),
        Access(
            "patch",
            "",
            "configmaps",
            Some("linkerd-cni-config"),
            Some(cni_ns),
        ),
        Access(
            "update",
            "coordination.k8s.io",
            "leases",
            Some("linkerd-multus-operator"),
            Some(cni_ns),
        ),
    ] {
        assert!(
            !operator_can(cni_ns, sa, &access),
            "the installer may {} {}/{:?}",
            access.0,
            access.2,
            access.3
        );
    }
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
        // What each node's Multus allows, published by the installers.
        Access("watch", "linkerd-multus.io", "nodemultuses", None, None),
        // admission auto (default): the binding's namespace label, the policy and binding by name.
        Access("patch", "", "namespaces", Some("default"), None),
        Access(
            "create",
            admission,
            "mutatingadmissionpolicies",
            Some(vocab::ADMISSION_POLICY_NAME),
            None,
        ),
        Access(
            "delete",
            admission,
            "mutatingadmissionpolicybindings",
            Some(vocab::ADMISSION_POLICY_NAME),
            None,
        ),
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
        Access(
            "patch",
            admission,
            "mutatingadmissionpolicies",
            Some("other"),
            None,
        ),
        Access(
            "delete",
            admission,
            "mutatingadmissionpolicybindings",
            Some("other"),
            None,
        ),
        // The name of earlier versions (the fullname) is not the operator's any more.
        Access("patch", admission, mwcs, Some(fullname), None),
        Access("patch", coord, "leases", Some("other"), Some(ns)),
        Access("create", coord, "leases", None, Some("default")),
        Access(
            "patch",
            "linkerd-multus.io",
            "nodemultuses",
            Some("n1"),
            None,
        ),
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
