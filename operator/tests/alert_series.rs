//! The chart's alerts (helm/templates/monitoring.yaml) name only series the operator exposes, and each
//! alert's runbook_url is a heading of the README. An alert on a misspelled or removed metric would never
//! fire; this fails instead. Pure: the metrics are registered here as the operator registers them.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kube::runtime::reflector;
use linkerd_multus_operator::metrics::{Metrics, RepairMetrics};
use prometheus_client::registry::Registry;

fn repo_file(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The sample names of the operator's /metrics: the registries `run` fills (the controller's, the
/// repairer's, the webhook's), named from their `# TYPE` lines with the suffixes prometheus-client
/// gives samples. Not the input gauge (`input_healthy`): it reads a running controller; no alert uses it.
fn exposed_series() -> BTreeSet<String> {
    let mut registry = Registry::with_prefix("linkerd_multus");
    let nads = reflector::store::Writer::default();
    // A labelled family shows in the exposition once it has a child: one each.
    let controller = Metrics::register(&mut registry, nads.as_reader());
    controller.failed("any");
    controller.wrote("any");
    RepairMetrics::register(&mut registry).count("any");
    linkerd_multus_webhook::metrics::Metrics::register(&mut registry).record("any", 0.0);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE <name> <type>");
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    names
}

/// Every `linkerd_multus_*` token of the template.
fn alert_metric_names(template: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = template;
    while let Some(at) = rest.find("linkerd_multus_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

#[test]
fn every_alert_series_is_registered_by_the_operator() {
    let template = repo_file("helm/templates/monitoring.yaml");
    let used = alert_metric_names(&template);
    assert!(!used.is_empty(), "no linkerd_multus_ series in the alerts");
    let exposed = exposed_series();
    let missing: Vec<_> = used.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "alerts use series the operator does not expose: {missing:?}\nexposed: {exposed:?}"
    );
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_runbook_url_is_a_readme_heading() {
    let template = repo_file("helm/templates/monitoring.yaml");
    let anchors: BTreeSet<String> = repo_file("README.md")
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let runbooks: Vec<&str> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: {{ $runbook }}"))
        .collect();
    let alerts = template.matches("- alert: ").count();
    assert_eq!(runbooks.len(), alerts, "every alert has a runbook_url");
    for a in runbooks {
        assert!(
            anchors.contains(a),
            "runbook_url #{a} is no heading of README.md"
        );
    }
}
