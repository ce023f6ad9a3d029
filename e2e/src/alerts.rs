//! PURE: the chart's PrometheusRule and ServiceMonitor as Prometheus reads them. The one reader of the
//! alerts (their names, their `for`, the operator's series their expressions name) for the promtool
//! tests (e2e/tests/helm_monitoring.rs), the registered-series test (operator/tests/alert_series.rs)
//! and the real Prometheus on the node (e2e/tests/node_monitoring.rs); and the ServiceMonitor turned
//! into the scrape job the Prometheus Operator generates from it.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// The prefix of every series the operator exposes.
pub const PREFIX: &str = "linkerd_multus_";

/// The alerting rules of a PrometheusRule's `spec` (a Prometheus rules file: `groups[].rules[]`).
pub fn alert_rules(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter(|r| r["alert"].is_string())
        .collect()
}

/// The alert's name.
pub fn alert_name(rule: &Value) -> &str {
    rule["alert"].as_str().unwrap_or_default()
}

/// Every `linkerd_multus_*` series name in `text` (an expression, or the whole template). Other series
/// (the platform's: kube-state-metrics', the apiserver's) are not the operator's and not named.
pub fn operator_series(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// `spec` with the `for` of the alerts named in `alerts` set to `hold`: a test that cannot wait an
/// alert's real `for` (its semantics are promtool's unit tests) still sees it go pending, then firing.
pub fn with_for(spec: &Value, alerts: &[&str], hold: &str) -> Value {
    let mut spec = spec.clone();
    for group in spec["groups"].as_array_mut().into_iter().flatten() {
        for rule in group["rules"].as_array_mut().into_iter().flatten() {
            if alerts.contains(&alert_name(rule)) {
                rule["for"] = json!(hold);
            }
        }
    }
    spec
}

/// The scrape jobs the Prometheus Operator generates from a ServiceMonitor (`monitor`, as the server
/// holds it), with its Kubernetes endpoints discovery done here: Debian's Prometheus is built without
/// `kubernetes_sd_configs`. Of `services` and `endpoints` (the Service and Endpoints objects of the
/// ServiceMonitor's `namespaceSelector` namespaces), each ready address of a Service whose labels match
/// `selector.matchLabels`, on the port its endpoint names, is a target labelled `namespace`, `service`,
/// `pod` and `endpoint` as that operator labels them. `interval` replaces the endpoint's (a test cannot
/// wait 30 s). One job per endpoint. Panics on a ServiceMonitor using what this does not translate
/// (matchExpressions, any namespace, a numeric port): a test must not scrape other than the chart asks.
pub fn scrape_jobs(
    monitor: &Value,
    services: &[Value],
    endpoints: &[Value],
    interval: &str,
) -> Vec<Value> {
    let spec = &monitor["spec"];
    let namespaces: Vec<&str> = spec["namespaceSelector"]["matchNames"]
        .as_array()
        .expect("namespaceSelector.matchNames")
        .iter()
        .map(|n| n.as_str().expect("namespace name"))
        .collect();
    assert!(
        spec["selector"]["matchExpressions"].is_null(),
        "selector.matchExpressions is not translated: {spec}"
    );
    let match_labels = spec["selector"]["matchLabels"]
        .as_object()
        .expect("selector.matchLabels");
    let selected: Vec<(&str, &str)> = services
        .iter()
        .filter(|s| {
            let meta = &s["metadata"];
            namespaces.contains(&meta["namespace"].as_str().unwrap_or_default())
                && match_labels
                    .iter()
                    .all(|(k, v)| &meta["labels"][k.as_str()] == v)
        })
        .map(|s| {
            let meta = &s["metadata"];
            (
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let name = format!(
        "serviceMonitor/{}/{}",
        monitor["metadata"]["namespace"]
            .as_str()
            .expect("namespace"),
        monitor["metadata"]["name"].as_str().expect("name")
    );
    spec["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .enumerate()
        .map(|(i, endpoint)| {
            let port = endpoint["port"]
                .as_str()
                .expect("endpoints[].port (a name)");
            let mut targets = Vec::new();
            for e in endpoints {
                let meta = &e["metadata"];
                let (ns, service) = (
                    meta["namespace"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap_or_default(),
                );
                if !selected.contains(&(ns, service)) {
                    continue;
                }
                for subset in e["subsets"].as_array().into_iter().flatten() {
                    let ports = subset["ports"].as_array().into_iter().flatten();
                    for number in ports.filter(|p| p["name"] == port).map(|p| &p["port"]) {
                        for address in subset["addresses"].as_array().into_iter().flatten() {
                            targets.push(json!({
                                "targets": [format!("{}:{number}", address["ip"].as_str().expect("ip"))],
                                "labels": {
                                    "namespace": ns, "service": service, "endpoint": port,
                                    "pod": address["targetRef"]["name"].as_str().unwrap_or_default(),
                                },
                            }));
                        }
                    }
                }
            }
            json!({
                "job_name": format!("{name}/{i}"),
                "metrics_path": endpoint["path"].as_str().unwrap_or("/metrics"),
                "scheme": endpoint["scheme"].as_str().unwrap_or("http"),
                "scrape_interval": interval,
                "static_configs": targets,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_only_the_operators_series() {
        let names = operator_series(
            "max by (namespace) (linkerd_multus_repair_all_halted) == 1 or \
             rate(linkerd_multus_webhook_requests_total{outcome=\"x\"}[5m]) > 0 or \
             kube_daemonset_status_number_unavailable > 0",
        );
        let want = [
            "linkerd_multus_repair_all_halted",
            "linkerd_multus_webhook_requests_total",
        ];
        assert_eq!(names, want.iter().map(|s| s.to_string()).collect());
    }

    #[test]
    fn shortens_only_the_named_alerts_for() {
        let spec = json!({"groups": [{"name": "g", "rules": [
            {"alert": "A", "expr": "1", "for": "5m"},
            {"alert": "B", "expr": "1", "for": "1m"},
            {"record": "r", "expr": "1"},
        ]}]});
        let short = with_for(&spec, &["A"], "2s");
        let rules = alert_rules(&short);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["for"], "2s");
        assert_eq!(rules[1]["for"], "1m");
    }

    #[test]
    fn a_service_monitor_becomes_the_operators_scrape_job() {
        let monitor = json!({
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {
                "namespaceSelector": {"matchNames": ["ns"]},
                "selector": {"matchLabels": {"app.kubernetes.io/component": "metrics"}},
                "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}],
            },
        });
        let service = |ns: &str, name: &str, component: &str| {
            json!({"metadata": {"namespace": ns, "name": name,
                                "labels": {"app.kubernetes.io/component": component}}})
        };
        let services = [
            service("ns", "op-metrics", "metrics"),
            service("ns", "op-webhook", "webhook"),
            service("other", "x", "metrics"),
        ];
        let endpoints = |ns: &str, name: &str| {
            json!({"metadata": {"namespace": ns, "name": name}, "subsets": [{
                "addresses": [{"ip": "10.0.0.5", "targetRef": {"kind": "Pod", "name": "op-1"}}],
                "notReadyAddresses": [{"ip": "10.0.0.6"}],
                "ports": [{"name": "metrics", "port": 8081}, {"name": "other", "port": 1}],
            }]})
        };
        let all = [
            endpoints("ns", "op-metrics"),
            endpoints("ns", "op-webhook"),
            endpoints("other", "x"),
        ];
        let jobs = scrape_jobs(&monitor, &services, &all, "1s");
        assert_eq!(
            jobs,
            vec![json!({
                "job_name": "serviceMonitor/ns/m/0", "metrics_path": "/metrics", "scheme": "http",
                "scrape_interval": "1s",
                "static_configs": [{"targets": ["10.0.0.5:8081"], "labels": {
                    "namespace": "ns", "service": "op-metrics", "endpoint": "metrics", "pod": "op-1"}}],
            })]
        );
    }
}
