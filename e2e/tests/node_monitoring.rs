//! The chart's monitoring objects on the real node, read by a real Prometheus (Debian's server, run in
//! the node's network namespace): the chart installed with `monitoring.enabled`, the ServiceMonitor and
//! PrometheusRule read back from the server and loaded as the Prometheus Operator would (its Services
//! and Endpoints chosen by the ServiceMonitor's namespaces, selector and port: read here, as Debian's
//! build has no Kubernetes discovery, and given as static targets labelled as that operator labels them;
//! the rule's groups as a rules file), then:
//! - every `linkerd_multus_*` series an alert of the chart names (all of them, also those a value leaves
//!   out) is in Prometheus' TSDB under that name, scraped from the operator's pod. The
//!   `monitoring.platformAlerts` ones name kube-state-metrics' and the apiserver's series, not the
//!   operator's: no operator scrape can show those, so they are not asked for;
//! - repair halted on the node for real: three Deployments whose pods never become Ready (their image is
//!   not on the node, pull policy Never; the replacements' NAD names linkerd-cni, not installed here,
//!   so Multus fails their sandbox too), started unattached before their namespace is enabled; repair
//!   evicts one pod of each, no replacement becomes Ready within the chart's `operator.repair.deadline`
//!   (5 s here), the watchdog halts the three owners, which halts all repair; both repair-halted alerts
//!   must reach `firing` in Prometheus' `/api/v1/alerts`. Their `for` (1 and 5 minutes) is shortened to
//!   [`HOLD`] in the rules Prometheus loads: promtool's unit tests (helm_monitoring.rs) prove each `for`;
//!   here the expressions are evaluated over the operator's real series and must go pending, then fire.
//!
//! A labelled counter shows only once a label value occurs: the NAD controller's errors appear because
//! the namespace is enabled before linkerd-cni's ConfigMap exists (`configmap_missing`, as when
//! linkerd-cni is installed after the operator); the ConfigMap then comes and the NAD is written.

use std::time::{Duration, Instant};

use linkerd_multus_e2e::alerts::{alert_name, alert_rules, operator_series, scrape_jobs, with_for};
use linkerd_multus_e2e::node::{split_ref, Node};
use linkerd_multus_e2e::prometheus::Prometheus;
use linkerd_multus_e2e::{apply_nad_crd, unique_name, wait_for_explained, workspace_root};
use serde_json::{json, Value};

const RELEASE: &str = "ld-controller";
const RELEASE_NS: &str = "linkerd-multus";
const OPERATOR: &str = "ld-controller-linkerd-multus";
/// The alerts of a halted repair: any owner, and all repair.
const HALTED_ALERTS: [&str; 2] = [
    "LinkerdMultusRepairOwnersHalted",
    "LinkerdMultusRepairAllHalted",
];
/// Owners halted at which all repair halts (the watchdog's default, which no flag changes).
const OWNERS: usize = linkerd_multus_operator::repair::watchdog::DEFAULT_HALT_ALL_AT;
/// The repair deadline the chart is given: short, since these replacements can never be Ready.
const DEADLINE: &str = "5s";
/// The `for` of [`HALTED_ALERTS`] as Prometheus loads them.
const HOLD: &str = "2s";
/// From enabling the namespace to both alerts firing: the NAD written, one eviction per owner, the
/// deadline, the watchdog's next pass, a scrape, [`HOLD`].
const FIRING_WITHIN: Duration = Duration::from_secs(120);
/// The monitoring.coreos.com kinds the chart creates, served by stand-in CRDs (the Prometheus
/// Operator's own are not on the node): `plural`, `Kind`.
const MONITORING_KINDS: [(&str, &str); 2] = [
    ("servicemonitors", "ServiceMonitor"),
    ("prometheusrules", "PrometheusRule"),
];

/// Removes the release, the test's namespaces and the stand-in CRDs, also when the test fails half-way.
struct Cleanup<'a> {
    node: &'a Node,
    namespaces: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let start = Instant::now();
        // Their pods never became Ready: removed at once.
        let namespaces = self.namespaces.iter().map(String::as_str);
        let listed: Vec<&str> = namespaces.clone().collect();
        self.node.start_deleting_namespaces(&listed, |_| true);
        let _ = self
            .node
            .helm(&["uninstall", RELEASE, "-n", RELEASE_NS, "--wait"]);
        let mut args = vec![
            "delete",
            "namespace",
            "--ignore-not-found",
            "--timeout=120s",
        ];
        args.extend(namespaces.chain([RELEASE_NS]));
        let _ = self.node.kubectl(&args);
        for (plural, _) in MONITORING_KINDS {
            let crd = format!("crd/{plural}.monitoring.coreos.com");
            let _ = self.node.kubectl(&["delete", "--ignore-not-found", &crd]);
        }
        eprintln!("cleanup: {:.1} s", start.elapsed().as_secs_f64());
    }
}

fn apply(node: &Node, object: &Value) {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), object.to_string()).expect("write");
    node.kubectl_ok(&["apply", "-f", file.path().to_str().expect("UTF-8")]);
}

/// A CRD serving `kind` under monitoring.coreos.com/v1 that keeps whatever the chart writes.
fn monitoring_crd(plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.monitoring.coreos.com")},
        "spec": {
            "group": "monitoring.coreos.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// A meshed Deployment (a container named as Linkerd's proxy) whose pods never become Ready: their
/// image is not on the node and is never pulled.
fn never_ready(namespace: &str, name: &str) -> Value {
    let container = |n: &str| json!({"name": n, "image": "linkerd-multus-test/absent:never", "imagePullPolicy": "Never"});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [container("app"), container(vocab::PROXY_CONTAINER)]},
            },
        },
    })
}

/// The only object of `plural` in the release namespace, as the server holds it.
fn the_one(node: &Node, plural: &str) -> Value {
    let list = node
        .get_json(&["-n", RELEASE_NS, &format!("{plural}.monitoring.coreos.com")])
        .unwrap_or_else(|| panic!("no {plural} in {RELEASE_NS}"));
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "one {plural}: {list}");
    items[0].clone()
}

/// The scrape jobs of `monitor` over the Services and Endpoints of its namespaces now.
fn discover(node: &Node, monitor: &Value) -> Vec<Value> {
    let mut services = Vec::new();
    let mut endpoints = Vec::new();
    let namespaces = monitor["spec"]["namespaceSelector"]["matchNames"]
        .as_array()
        .expect("matchNames");
    for ns in namespaces.iter().filter_map(Value::as_str) {
        for (kind, into) in [("services", &mut services), ("endpoints", &mut endpoints)] {
            let list = node.get_json(&["-n", ns, kind]).expect(kind);
            into.extend(list["items"].as_array().cloned().unwrap_or_default());
        }
    }
    scrape_jobs(monitor, &services, &endpoints, "1s")
}

/// What to look at when a wait times out: the operator's log tail, the workload's events, and what
/// Prometheus sees.
fn explain(node: &Node, namespace: &str, prometheus: &Prometheus) -> String {
    let log = node.kubectl(&[
        "-n",
        RELEASE_NS,
        "logs",
        &format!("deploy/{OPERATOR}"),
        "--tail=40",
    ]);
    let events = node.kubectl(&["-n", namespace, "get", "events"]);
    format!(
        "operator log:\n{}\nevents in {namespace}:\n{}\ntargets: {:?}\nalerts: {:?}\nprometheus log:\n{}",
        String::from_utf8_lossy(&log.stdout),
        String::from_utf8_lossy(&events.stdout),
        prometheus.targets(),
        prometheus.alerts(),
        prometheus.log()
    )
}

#[test]
#[ignore = "needs the node testbed (e2e/testbed up --node), helm, kubectl and Debian's prometheus: run by e2e/test-all"]
fn a_real_prometheus_scrapes_every_alert_series_and_fires_repair_halted() {
    let start = Instant::now();
    let node = Node::shared();
    let workload = unique_name("mon");
    let cni_ns = unique_name("mon-cni");
    let cleanup = Cleanup {
        node: &node,
        namespaces: vec![workload.clone(), cni_ns.clone()],
    };
    for (plural, kind) in MONITORING_KINDS {
        apply(&node, &monitoring_crd(plural, kind));
        let crd = format!("crd/{plural}.monitoring.coreos.com");
        node.kubectl_ok(&["wait", "--for=condition=Established", &crd, "--timeout=60s"]);
    }
    // Multus ships the NAD CRD: applied as Multus would have (the stand-in does not).
    apply_nad_crd(node.kubeconfig_path());
    node.kubectl_ok(&["create", "namespace", &cni_ns]);
    node.kubectl_ok(&["create", "namespace", &workload]);

    let image = node.built_image("operator");
    let (repository, tag) = split_ref(&image);
    // The webhook, not `auto`: where the server serves MutatingAdmissionPolicy (v1.35.6) `auto` admits
    // through the policy, the webhook then sees no pod and its request counter, labelled by outcome,
    // has no series (seen on that node: `linkerd_multus_webhook_requests_total` missing).
    let values = json!({
        "admission": "webhook",
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "operator": {"cniNamespace": cni_ns, "repair": {"enabled": true, "deadline": DEADLINE}},
        "cni": {"enabled": false},
        "monitoring": {"enabled": true},
    });
    let values_file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(values_file.path(), values.to_string()).expect("write values");
    let chart = workspace_root().join("helm");
    node.helm_ok(&[
        "install",
        RELEASE,
        chart.to_str().expect("UTF-8"),
        "-n",
        RELEASE_NS,
        "--create-namespace",
        "--wait",
        "--timeout=120s",
        "-f",
        values_file.path().to_str().expect("UTF-8"),
    ]);
    eprintln!("installed: {:.1} s", start.elapsed().as_secs_f64());
    // Started unattached: their namespace is not enabled yet.
    let owners: Vec<String> = (0..OWNERS).map(|i| format!("halts-{i}")).collect();
    for owner in &owners {
        apply(&node, &never_ready(&workload, owner));
    }

    // Enabling the namespace before their pods exist would have the webhook attach them.
    wait_for_explained(
        "a pod of each owner exists, unattached",
        Duration::from_secs(60),
        || {
            let list = node.get_json(&["-n", &workload, "pods"])?;
            let pods = list["items"].as_array()?;
            let networks =
                |p: &Value| p["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].clone();
            assert!(
                pods.iter().all(|p| networks(p).is_null()),
                "attached before enabling: {list}"
            );
            (pods.len() == OWNERS).then_some(())
        },
        || node.describe(&workload, "pods"),
    );
    let monitor = the_one(&node, "servicemonitors");
    let rule = the_one(&node, "prometheusrules");
    let rules = with_for(&rule["spec"], &HALTED_ALERTS, HOLD);
    let loaded: Vec<&str> = alert_rules(&rules).into_iter().map(alert_name).collect();
    for alert in HALTED_ALERTS {
        assert!(
            loaded.contains(&alert),
            "{alert} not in the PrometheusRule: {loaded:?}"
        );
    }
    // The operator's endpoints, as Kubernetes discovery would find them (Debian's build has none).
    let jobs = wait_for_explained(
        "the ServiceMonitor selects the operator's ready endpoint",
        Duration::from_secs(60),
        || {
            let jobs = discover(&node, &monitor);
            let found = jobs.iter().any(|j| {
                j["static_configs"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty())
            });
            found.then_some(jobs)
        },
        || node.describe(RELEASE_NS, "endpoints"),
    );
    let prometheus = Prometheus::start(&node.netns(), &jobs, &rules);
    eprintln!("prometheus ready: {:.1} s", start.elapsed().as_secs_f64());
    let explain = || explain(&node, &workload, &prometheus);
    wait_for_explained(
        "Prometheus scrapes the operator through the ServiceMonitor",
        Duration::from_secs(60),
        || {
            prometheus
                .targets()
                .iter()
                .any(|t| t["health"] == "up" && t["labels"]["namespace"] == RELEASE_NS)
                .then_some(())
        },
        explain,
    );
    eprintln!("operator scraped: {:.1} s", start.elapsed().as_secs_f64());

    let enabled = Instant::now();
    node.kubectl_ok(&[
        "annotate",
        "namespace",
        &workload,
        "linkerd.io/multus=enabled",
    ]);
    wait_for_explained(
        "the NAD controller's errors (no linkerd-cni ConfigMap yet) are a series",
        Duration::from_secs(60),
        || {
            prometheus
                .series_names()
                .contains(&"linkerd_multus_controller_reconcile_errors_total".to_string())
                .then_some(())
        },
        explain,
    );
    let config =
        std::fs::read_to_string(workspace_root().join("fixtures/linkerd2-cni-network-config.json"))
            .expect("fixture");
    apply(
        &node,
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "linkerd-cni-config", "namespace": cni_ns},
            "data": {vocab::CNI_CONFIG_KEY: config, "dest_cni_net_dir": "/etc/cni/net.d"},
        }),
    );

    let firing = wait_for_explained(
        "both repair-halted alerts fire",
        FIRING_WITHIN,
        || {
            let alerts = prometheus.alerts();
            let firing: Vec<&str> = alerts
                .iter()
                .filter(|a| a["state"] == "firing")
                .filter_map(|a| a["labels"]["alertname"].as_str())
                .collect();
            HALTED_ALERTS
                .iter()
                .all(|a| firing.contains(a))
                .then(|| alerts.clone())
        },
        explain,
    );
    eprintln!(
        "enabled -> both repair-halted alerts firing: {:.1} s",
        enabled.elapsed().as_secs_f64()
    );
    for alert in firing
        .iter()
        .filter(|a| HALTED_ALERTS.contains(&a["labels"]["alertname"].as_str().unwrap_or_default()))
    {
        assert_eq!(alert["labels"]["namespace"], RELEASE_NS, "{alert}");
    }
    let halted = node.kubectl_ok(&[
        "-n",
        &workload,
        "get",
        "events",
        "--field-selector",
        "reason=PodRepairHalted",
        "-o",
        "name",
    ]);
    assert!(
        halted.lines().count() >= OWNERS,
        "a PodRepairHalted Event per owner: {halted}"
    );

    // Every operator series an alert names, also those of alerts a value leaves out of this install.
    let template = std::fs::read_to_string(workspace_root().join("helm/templates/monitoring.yaml"))
        .expect("monitoring.yaml");
    let mut wanted = operator_series(&template);
    for rule in alert_rules(&rules) {
        wanted.extend(operator_series(rule["expr"].as_str().unwrap_or_default()));
    }
    let present = prometheus.series_names();
    let missing: Vec<&String> = wanted.iter().filter(|n| !present.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "alerts name series Prometheus did not scrape from the operator: {missing:?}\nscraped: {present:?}"
    );
    drop(prometheus);
    eprintln!("checked: {:.1} s", start.elapsed().as_secs_f64());
    drop(cleanup);
    eprintln!("cleaned up: {:.1} s", start.elapsed().as_secs_f64());
}
