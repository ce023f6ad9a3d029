//! The chart's alerts (helm/templates/monitoring.yaml) name only series the operator exposes, and each
//! alert's runbook_url is a heading of the book's alerts page. An alert on a misspelled or removed metric would never
//! fire; this fails instead. Pure: the metrics are registered as the operator registers them.

use std::collections::BTreeSet;
use std::path::PathBuf;

use linkerd_multus_e2e::alerts::operator_series;
use linkerd_multus_e2e::book::anchors;
use linkerd_multus_operator::metrics::every_family;

fn repo_file(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The sample names of the operator's /metrics, named from the `# TYPE` lines of every family it
/// registers ([`every_family`]) with the suffixes prometheus-client gives samples.
fn exposed_series() -> BTreeSet<String> {
    let text = every_family();
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

#[test]
fn every_alert_series_is_registered_by_the_operator() {
    let template = repo_file("helm/templates/monitoring.yaml");
    let used = operator_series(&template);
    assert!(!used.is_empty(), "no linkerd_multus_ series in the alerts");
    let exposed = exposed_series();
    let missing: Vec<_> = used.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "alerts use series the operator does not expose: {missing:?}\nexposed: {exposed:?}"
    );
}

/// The book's page each runbook_url points into.
const ALERTS_PAGE: &str = "docs/src/troubleshooting/alerts.md";

#[test]
fn every_runbook_url_is_a_heading_of_the_alerts_page() {
    let template = repo_file("helm/templates/monitoring.yaml");
    let anchors = anchors(&repo_file(ALERTS_PAGE));
    let runbooks: Vec<&str> = template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: {{ $runbook }}"))
        .collect();
    let alerts = template.matches("- alert: ").count();
    assert_eq!(runbooks.len(), alerts, "every alert has a runbook_url");
    for a in runbooks {
        assert!(
            anchors.contains(a),
            "runbook_url #{a} is no heading of {ALERTS_PAGE}"
        );
    }
}
