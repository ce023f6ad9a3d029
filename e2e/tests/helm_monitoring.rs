//! The chart's monitoring objects (`monitoring.*`): when they render, what the ServiceMonitor scrapes, and
//! the PrometheusRule's alerts checked and unit-tested by the real promtool (Debian's `prometheus`
//! package) against `e2e/tests/monitoring/alerts-test.yaml`. That each alert's series is one the operator
//! registers: `operator/tests/alert_series.rs`; that each is present in a real Prometheus scraping the
//! operator on the node: `e2e/tests/node_monitoring.rs`.

mod support;

use std::process::Command;

use linkerd_multus_e2e::alerts::{alert_name, alert_rules};
use linkerd_multus_e2e::workspace_root;
use serde_json::Value;
use support::*;

const ON: [&str; 2] = ["--set", "monitoring.enabled=true"];
const MONITORING_API: &str = "monitoring.coreos.com/v1/ServiceMonitor";

fn render(extra: &[&str]) -> Vec<Value> {
    parse_docs(&helm_template(TEMPLATE_RELEASE, TEMPLATE_NAMESPACE, extra))
}

fn kinds(docs: &[Value]) -> Vec<&str> {
    docs.iter()
        .map(kind)
        .filter(|k| matches!(*k, "ServiceMonitor" | "PrometheusRule"))
        .collect()
}

/// Off by default; auto renders only where the server serves the CRDs (discovery, here --api-versions);
/// true always.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn monitoring_renders_when_enabled_or_served() {
    let auto = ["--set", "monitoring.enabled=auto"];
    let served = [
        "--set",
        "monitoring.enabled=auto",
        "--api-versions",
        MONITORING_API,
    ];
    // A release installed before the value existed, upgraded with --reuse-values: no `monitoring` at all.
    let predates = ["--set", "monitoring=null"];
    let both = vec!["ServiceMonitor", "PrometheusRule"];
    for (extra, want) in [
        (&[][..], vec![]),
        (&predates[..], vec![]),
        (&auto[..], vec![]),
        (&served[..], both.clone()),
        (&ON[..], both),
    ] {
        let docs = render(extra);
        let mut got = kinds(&docs);
        got.sort_unstable();
        let mut want = want;
        want.sort_unstable();
        assert_eq!(got, want, "helm template {extra:?}");
    }
}

/// The ServiceMonitor selects the metrics Service, whose port reaches the operator's admin port (the one
/// serving /metrics) on the operator's pods.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn service_monitor_scrapes_the_operators_admin_port() {
    let docs = render(&ON);
    let monitor = find(&docs, "ServiceMonitor", None);
    let service = find(
        &docs,
        "Service",
        Some("ld-controller-linkerd-multus-metrics"),
    );
    let deployment = find(&docs, "Deployment", None);
    let selector = &monitor["spec"]["selector"]["matchLabels"];
    for (k, v) in selector.as_object().expect("matchLabels") {
        assert_eq!(
            &service["metadata"]["labels"][k], v,
            "ServiceMonitor selects {k}"
        );
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    let port = &service["spec"]["ports"][0];
    assert_eq!(endpoint["port"], port["name"]);
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(
            &pod_labels[k], v,
            "metrics Service selects the operator's pods by {k}"
        );
    }
    let ports = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .expect("ports");
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == port["targetPort"] && p["containerPort"] == port["port"]),
        "targetPort {} is not the admin port in {ports:?}",
        port["targetPort"]
    );
}

/// Runs promtool, failing clearly where it is missing (never passing without it).
fn promtool(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install Debian's `prometheus` package (e2e/testbed install)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// `promtool check rules` accepts the rendered rules and `promtool test rules` passes, with a firing and
/// a non-firing case for every alert.
#[test]
#[ignore = "needs helm (e2e/testbed install) and promtool (Debian's prometheus): run by e2e/test-all"]
fn promtool_checks_and_tests_every_alert() {
    // Every alert rendered: those of linkerd-cni reached through Multus only, and the platform's.
    let docs = render(&[
        "--set",
        "monitoring.enabled=true",
        "--set",
        "monitoring.platformAlerts=true",
        "--set",
        "cni.enabled=true",
        "--set",
        "cni.chainMode=none",
    ]);
    let spec = &find(&docs, "PrometheusRule", None)["spec"];
    let tests_path = workspace_root().join("e2e/tests/monitoring/alerts-test.yaml");
    let tests = std::fs::read_to_string(&tests_path).expect("alerts-test.yaml");

    let tested: Value = serde_yaml_ng::from_str(&tests).expect("alerts-test.yaml parses");
    let cases: Vec<&Value> = tested["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().expect("alert_rule_test"))
        .collect();
    let alerts: Vec<&str> = alert_rules(spec).into_iter().map(alert_name).collect();
    assert!(!alerts.is_empty(), "no alerts in {spec}");
    for alert in &alerts {
        let fires = |want: bool| {
            cases.iter().any(|c| {
                c["alertname"] == *alert
                    && c["exp_alerts"]
                        .as_array()
                        .is_some_and(|a| a.is_empty() != want)
            })
        };
        assert!(
            fires(true) && fires(false),
            "{alert}: needs a firing and a non-firing case in {}",
            tests_path.display()
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let rules = serde_yaml_ng::to_string(spec).expect("rules as YAML");
    std::fs::write(dir.path().join("rules.yaml"), rules).expect("write rules.yaml");
    std::fs::write(dir.path().join("alerts-test.yaml"), &tests).expect("write alerts-test.yaml");
    let checked = promtool(dir.path(), &["check", "rules", "rules.yaml"]);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", alerts.len())),
        "{checked}"
    );
    promtool(dir.path(), &["test", "rules", "alerts-test.yaml"]);
}
