//! The helm chart's CNI DaemonSet (`cni.enabled=true`) rendered by the real helm: the values admins know
//! from Linkerd's linkerd2-cni chart. The rest of the chart: `helm_chart.rs`.

mod support;

use serde_json::Value;
use support::*;

const RELEASE: &str = TEMPLATE_RELEASE;
const NAMESPACE: &str = TEMPLATE_NAMESPACE;

// === the CNI DaemonSet: the values admins know from Linkerd's linkerd2-cni chart ===

/// Every document of the render with `cni.enabled=true` plus `extra`.
fn cni_docs(extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["--set", "cni.enabled=true"];
    args.extend_from_slice(extra);
    parse_docs(&helm_template(RELEASE, NAMESPACE, &args))
}

fn cni_daemonset(extra: &[&str]) -> Value {
    find(&cni_docs(extra), "DaemonSet", None).clone()
}

fn config_checksum(extra: &[&str]) -> String {
    let ds = cni_daemonset(extra);
    let sum = ds["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        .as_str()
        .expect("checksum/config annotation")
        .to_string();
    assert!(
        sum.len() == 64 && sum.chars().all(|c| c.is_ascii_hexdigit()),
        "{sum}"
    );
    sum
}

/// The installer reads the ConfigMap through its env, once: a changed ConfigMap must change the pod
/// template (so the DaemonSet rolls), and a change elsewhere must not look like one.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_daemonset_rolls_when_its_configmap_changes() {
    let base = config_checksum(&[]);
    assert_ne!(
        config_checksum(&["--set", "cni.proxyUID=2103"]),
        base,
        "a changed ConfigMap left the pod template alone"
    );
    assert_eq!(
        config_checksum(&["--set", "cni.resync=9s"]),
        base,
        "the checksum follows more than the ConfigMap"
    );
}

/// `cni.commonLabels` lands on every object of the CNI part (and the pods), nowhere else;
/// `cni.podLabels` only on the pods.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_common_and_pod_labels() {
    let docs = cni_docs(&[
        "--set",
        "cni.commonLabels.team=net",
        "--set",
        "cni.podLabels.tier=node",
    ]);
    let mut cni_objects = 0;
    for doc in &docs {
        let labels = &doc["metadata"]["labels"];
        let is_cni = labels["app.kubernetes.io/component"] == "cni";
        assert_eq!(
            labels["team"] == "net",
            is_cni,
            "commonLabels on {}/{}",
            kind(doc),
            name(doc)
        );
        assert!(labels.get("tier").is_none(), "podLabels on {}", name(doc));
        cni_objects += usize::from(is_cni);
    }
    assert_eq!(
        cni_objects, 12,
        "ServiceAccounts (installer, plugin), Role(Binding)s for the plugin's token and for the \
         installer's SIGTERM question, the plugin's and the NodeMultus ClusterRole(Binding)s, \
         DaemonSet, ConfigMap"
    );
    // On SIGTERM the installer reads its own pod and its DaemonSet (an uninstall or a rollout?), in
    // its namespace, and nothing else; bound to its own account.
    let ds = find(&docs, "DaemonSet", None);
    let role = find(
        &docs,
        "Role",
        Some("ld-controller-linkerd-multus-cni-installer"),
    );
    assert_eq!(
        role["rules"],
        serde_json::json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets"],
             "resourceNames": [name(ds)], "verbs": ["get"]},
        ])
    );
    let binding = find(
        &docs,
        "RoleBinding",
        Some("ld-controller-linkerd-multus-cni-installer"),
    );
    assert_eq!(
        binding["roleRef"]["name"],
        "ld-controller-linkerd-multus-cni-installer"
    );
    assert_eq!(binding["subjects"][0]["name"], "linkerd-cni");
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    assert_eq!(pod_labels["team"], "net");
    assert_eq!(pod_labels["tier"], "node");
    let (key, value) = vocab::CNI_INSTALLER_LABEL
        .split_once('=')
        .expect("key=value");
    assert_eq!(
        pod_labels[key], value,
        "check and repair find installers by it"
    );
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_update_strategy_and_revision_history() {
    let ds = cni_daemonset(&[]);
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    let ds = cni_daemonset(&[
        "--set-json",
        r#"cni.updateStrategy={"type":"OnDelete"}"#,
        "--set",
        "cni.revisionHistoryLimit=3",
    ]);
    assert_eq!(
        ds["spec"]["updateStrategy"],
        serde_json::json!({"type": "OnDelete"})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 3);
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_node_affinity_and_tolerations() {
    let affinity = serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "example.com/no-mesh", "operator": "DoesNotExist"}
        ]}]
    }}});
    let tolerations = serde_json::json!([{"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    let pod = &cni_daemonset(&[])["spec"]["template"]["spec"];
    assert!(pod.get("affinity").is_none(), "{pod}");
    assert_eq!(
        pod["tolerations"],
        serde_json::json!([{"operator": "Exists"}])
    );
    let ds = cni_daemonset(&[
        "--set-json",
        &format!("cni.affinity={affinity}"),
        "--set-json",
        &format!("cni.tolerations={tolerations}"),
    ]);
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["affinity"], affinity);
    assert_eq!(pod["tolerations"], tolerations);
}

#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_extra_init_containers() {
    let pod = &cni_daemonset(&[])["spec"]["template"]["spec"];
    assert!(pod.get("initContainers").is_none(), "{pod}");
    let init = serde_json::json!([{"name": "prepare", "image": "busybox:1", "command": ["true"]}]);
    let ds = cni_daemonset(&["--set-json", &format!("cni.extraInitContainers={init}")]);
    assert_eq!(ds["spec"]["template"]["spec"]["initContainers"], init);
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["name"],
        "install-cni"
    );
    assert_rejected(
        &[
            "--set",
            "cni.enabled=true",
            "--set-json",
            r#"cni.extraInitContainers=[{"name":"x"}]"#,
        ],
        "image is required",
    );
}

/// Resources pass through whole, ephemeral-storage included; a misspelled key is refused.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_resources_with_ephemeral_storage() {
    let ds = cni_daemonset(&[
        "--set",
        "cni.resources.requests.ephemeral-storage=10Mi",
        "--set",
        "cni.resources.limits.ephemeral-storage=50Mi",
        "--set",
        "cni.resources.limits.memory=64Mi",
    ]);
    let resources = &ds["spec"]["template"]["spec"]["containers"][0]["resources"];
    assert_eq!(
        *resources,
        serde_json::json!({
            "requests": {"cpu": "10m", "memory": "16Mi", "ephemeral-storage": "10Mi"},
            "limits": {"memory": "64Mi", "ephemeral-storage": "50Mi"},
        })
    );
    assert_rejected(
        &["--set", "cni.resources.limit.memory=1Gi"],
        "Additional property limit",
    );
}

/// The installer pod has a readiness probe: the installer binary (the image's entrypoint, from the
/// Dockerfile) in `--ready-check` mode, reading the status file the container's args make it write,
/// in the pod's own /tmp emptyDir rather than a node directory; its timing comes from
/// `cni.readinessProbe`.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn cni_daemonset_has_a_readiness_probe() {
    let ds = cni_daemonset(&[]);
    let pod = &ds["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let probe = &container["readinessProbe"];
    let command: Vec<&str> = probe["exec"]["command"]
        .as_array()
        .unwrap_or_else(|| panic!("no exec readinessProbe on the installer: {container}"))
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    let dockerfile =
        std::fs::read_to_string(linkerd_multus_e2e::workspace_root().join("Dockerfile"))
            .expect("Dockerfile");
    let entrypoint = dockerfile
        .split("AS cni")
        .nth(1)
        .and_then(|stage| stage.lines().find(|l| l.starts_with("ENTRYPOINT")))
        .expect("the cni stage's ENTRYPOINT");
    assert_eq!(entrypoint, format!(r#"ENTRYPOINT ["{}"]"#, command[0]));
    assert_eq!(command[1], "--ready-check");
    let ready_file = command[2]
        .strip_prefix("--ready-file=")
        .expect("--ready-file=");
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string"))
        .collect();
    assert!(
        args.contains(&command[2]),
        "the installer writes {ready_file}: {args:?}"
    );
    let tmp = container["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| ready_file.starts_with(&format!("{}/", m["mountPath"].as_str().unwrap_or("?"))))
        .unwrap_or_else(|| panic!("{ready_file} is on no mounted volume"));
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == tmp["name"])
        .expect("the volume");
    assert!(
        volume.get("emptyDir").is_some(),
        "the status file must stay in the pod, not on the node: {volume}"
    );
    assert_eq!(probe["periodSeconds"], 5);
    assert_eq!(probe["failureThreshold"], 3);

    let ds = cni_daemonset(&[
        "--set",
        "cni.readinessProbe.periodSeconds=7",
        "--set",
        "cni.readinessProbe.initialDelaySeconds=2",
    ]);
    let probe = &ds["spec"]["template"]["spec"]["containers"][0]["readinessProbe"];
    assert_eq!(probe["periodSeconds"], 7);
    assert_eq!(probe["initialDelaySeconds"], 2);
    assert_eq!(probe["exec"]["command"][1], "--ready-check");
    assert_rejected(
        &["--set", "cni.readinessProbe.period=7"],
        "Additional property period",
    );
}

/// The kubeconfig's identity: the plugin's own read-only ServiceAccount, whose token only the
/// installer's account may mint (TokenRequest, by resource name); the installer passes its name. With
/// the value empty, the installer pod's own account reads pods, as before.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn the_plugin_has_its_own_account_and_only_the_installer_mints_its_token() {
    let docs = cni_docs(&[]);
    let binding = find(
        &docs,
        "ClusterRoleBinding",
        Some("ld-controller-linkerd-multus-cni"),
    );
    assert_eq!(binding["subjects"][0]["name"], "linkerd-cni-plugin");
    let role = find(
        &docs,
        "Role",
        Some("ld-controller-linkerd-multus-cni-plugin-token"),
    );
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"],
            "resourceNames": ["linkerd-cni-plugin"], "verbs": ["create"]}])
    );
    let token_binding = find(
        &docs,
        "RoleBinding",
        Some("ld-controller-linkerd-multus-cni-plugin-token"),
    );
    assert_eq!(token_binding["subjects"][0]["name"], "linkerd-cni");
    let args = cni_daemonset(&[])["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    let args: Vec<&str> = args
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--plugin-service-account=linkerd-cni-plugin")
            && args.contains(&"--plugin-token-lifetime=24h"),
        "{args:?}"
    );

    let legacy = cni_docs(&["--set", "cni.pluginServiceAccountName="]);
    assert_eq!(
        find(
            &legacy,
            "ClusterRoleBinding",
            Some("ld-controller-linkerd-multus-cni")
        )["subjects"][0]["name"],
        "linkerd-cni"
    );
    assert!(!legacy
        .iter()
        .any(|d| name(d) == "ld-controller-linkerd-multus-cni-plugin-token"));
    let args = cni_daemonset(&["--set", "cni.pluginServiceAccountName="]).to_string();
    assert!(!args.contains("--plugin-service-account"), "{args}");
}

// === attach=auxChain: the installer writes into Multus' auxiliary chain ===

fn installer_args(ds: &Value) -> Vec<String> {
    ds["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect()
}

/// A volume mount as (volume name, mountPath).
type Mount = (String, String);
/// A hostPath volume as (name, path, type).
type HostPath = (String, String, String);

/// The installer's mounts and its hostPath volumes.
fn installer_mounts(ds: &Value) -> (Vec<Mount>, Vec<HostPath>) {
    let pod = &ds["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                m["mountPath"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let host_paths = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter(|v| v.get("hostPath").is_some())
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["hostPath"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                v["hostPath"]["type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    (mounts, host_paths)
}

/// attach=auxChain: the operator gets ATTACH=aux-chain, the installer --attach=aux-chain and
/// --chain-mode=none (whatever cni.chainMode says) with the chain's name and directory; a directory other than the CNI net dir is
/// mounted from the node at its own path (DirectoryOrCreate: OpenShift's is a tmpfs emptied at boot).
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn attach_aux_chain_renders_the_installer_flags_and_mount() {
    // The defaults: nad, the chain mode as set; the chain's name (so the installer finds its file left
    // from aux-chain mode), its directory the net dir (the installer's default: no flag).
    let docs = cni_docs(&[]);
    assert_eq!(operator_env(&docs)["ATTACH"], "nad");
    let args = installer_args(find(&docs, "DaemonSet", None));
    assert!(
        args.contains(&"--chain-mode=append".to_string())
            && args.contains(&"--attach=nad".to_string())
            && args.contains(&"--aux-chain-name=vendor-cni-chain".to_string()),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("--aux-chain-dir")),
        "{args:?}"
    );
    // A chain directory of its own is mounted in nad mode too (switching back cleans it).
    let ds = cni_daemonset(&["--set", "cni.auxChain.dir=/run/multus/cni/net.d"]);
    let args = installer_args(&ds);
    assert!(
        args.contains(&"--chain-mode=append".to_string())
            && args.contains(&"--aux-chain-dir=/run/multus/cni/net.d".to_string()),
        "{args:?}"
    );
    assert!(
        installer_mounts(&ds)
            .0
            .contains(&("aux-chain-dir".into(), "/run/multus/cni/net.d".into())),
        "{ds}"
    );

    for chain_mode in ["append", "none"] {
        let set = format!("cni.chainMode={chain_mode}");
        let docs = cni_docs(&["--set", "attach=auxChain", "--set", &set]);
        assert_eq!(operator_env(&docs)["ATTACH"], "aux-chain");
        let ds = find(&docs, "DaemonSet", None);
        let args = installer_args(ds);
        for want in [
            "--attach=aux-chain",
            "--chain-mode=none",
            "--aux-chain-name=vendor-cni-chain",
        ] {
            assert!(
                args.contains(&want.to_string()),
                "{chain_mode}: {want} not in {args:?}"
            );
        }
        assert_eq!(
            args.iter()
                .filter(|a| a.starts_with("--chain-mode"))
                .count(),
            1
        );
        // The chain's directory is the CNI net dir, mounted already: no second mount of one path.
        let (mounts, _) = installer_mounts(ds);
        assert!(
            !mounts.iter().any(|(n, _)| n == "aux-chain-dir"),
            "{mounts:?}"
        );
    }

    let ds = cni_daemonset(&[
        "--set",
        "attach=auxChain",
        "--set",
        "cni.auxChain.dir=/run/multus/cni/net.d/",
        "--set",
        "cni.auxChain.name=my-chain",
    ]);
    let args = installer_args(&ds);
    assert!(
        args.contains(&"--aux-chain-name=my-chain".to_string()),
        "{args:?}"
    );
    assert!(
        args.contains(&"--aux-chain-dir=/run/multus/cni/net.d".to_string()),
        "{args:?}"
    );
    let (mounts, host_paths) = installer_mounts(&ds);
    assert!(
        mounts.contains(&("aux-chain-dir".into(), "/run/multus/cni/net.d".into())),
        "{mounts:?}"
    );
    assert!(
        host_paths.contains(&(
            "aux-chain-dir".into(),
            "/run/multus/cni/net.d".into(),
            "DirectoryOrCreate".into()
        )),
        "{host_paths:?}"
    );
}

/// OpenShift's values preset the chain of 4.18+; attach=auxChain with them writes
/// /run/multus/cni/net.d/vendor-cni-chain/linkerd-cni.conf; the operator lists and watches nodes
/// (check names a node without installer; a NodeMultus counts only while its node exists).
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn openshift_values_preset_the_vendor_chain() {
    let openshift = chart_dir().join("values-openshift.yaml");
    let docs = cni_docs(&["-f", path_str(&openshift), "--set", "attach=auxChain"]);
    let args = installer_args(find(&docs, "DaemonSet", None));
    for want in [
        "--attach=aux-chain",
        "--chain-mode=none",
        "--aux-chain-name=vendor-cni-chain",
        "--aux-chain-dir=/run/multus/cni/net.d",
        // CRI-O's network_dir on OpenShift, where thick Multus writes 00-multus.conf.
        "--dest-cni-net-dir=/etc/kubernetes/cni/net.d",
        "--multus-host-prefix=/host",
    ] {
        assert!(args.contains(&want.to_string()), "{want} not in {args:?}");
    }
    let role = find(&docs, "ClusterRole", Some("ld-controller-linkerd-multus"));
    let lists_nodes = |role: &serde_json::Value| {
        role["rules"].as_array().expect("rules").iter().any(|r| {
            r["resources"] == serde_json::json!(["nodes"])
                && r["verbs"] == serde_json::json!(["list", "watch"])
        })
    };
    assert!(lists_nodes(role), "{role:#}");
    // Without rbac.check too: the operator itself needs the nodes' names.
    let docs = cni_docs(&["--set", "rbac.check=false"]);
    let role = find(&docs, "ClusterRole", Some("ld-controller-linkerd-multus"));
    assert!(lists_nodes(role), "{role:#}");
}
