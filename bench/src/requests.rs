//! Requests the apiserver served, from its own `apiserver_request_total`: how a part of ours loads
//! the apiserver is counted where it lands, not where it is sent.

use std::collections::BTreeMap;

use kube::Client;

/// Requests served, by `(verb, resource)` (`resource` with its subresource, `/metrics` as "").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Served(pub BTreeMap<(String, String), f64>);

/// The apiserver's own `/metrics` now, as Prometheus text: one read serves every parse of it.
pub async fn metrics_text(client: &Client) -> anyhow::Result<String> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(request).await?)
}

impl Served {
    /// The apiserver's counters now.
    pub async fn read(client: &Client) -> anyhow::Result<Self> {
        Ok(Self::parse(&metrics_text(client).await?))
    }

    /// Sums `apiserver_request_total` of the Prometheus text `text` by verb and resource.
    pub fn parse(text: &str) -> Self {
        let mut by = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(name)?.strip_prefix("=\""))
                    .map(|v| v.trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            let sub = label("subresource");
            let resource = match sub.as_str() {
                "" => label("resource"),
                sub => format!("{}/{sub}", label("resource")),
            };
            *by.entry((label("verb"), resource)).or_insert(0.0) += value;
        }
        Self(by)
    }

    /// What was served between `self` (before) and `after`, the reading requests themselves
    /// (GET /metrics) left out.
    pub fn since(&self, after: &Served) -> Served {
        let mut by = BTreeMap::new();
        for (key, v) in &after.0 {
            let d = v - self.0.get(key).copied().unwrap_or(0.0);
            if d > 0.0 && !(key.0 == "GET" && key.1.is_empty()) {
                by.insert(key.clone(), d);
            }
        }
        Served(by)
    }

    /// `self` less `floor` x `factor`, per verb and resource, none below 0: a window's requests
    /// without the idle apiserver's own (`factor`: this window's length over the floor's).
    pub fn less(&self, floor: &Served, factor: f64) -> Served {
        let mut by = BTreeMap::new();
        for (key, v) in &self.0 {
            let d = v - floor.0.get(key).copied().unwrap_or(0.0) * factor;
            if d > 0.0 {
                by.insert(key.clone(), d);
            }
        }
        Served(by)
    }

    /// Only the requests of the `(verb, resource)` pairs in `kinds`: what one client can ask for,
    /// without the apiserver's own requests of other kinds in the same window.
    pub fn only(&self, kinds: &[(&str, &str)]) -> Served {
        Served(
            self.0
                .iter()
                .filter(|((verb, resource), _)| kinds.contains(&(verb.as_str(), resource.as_str())))
                .map(|(key, v)| (key.clone(), *v))
                .collect(),
        )
    }

    /// Takes off `n` requests of `verb` on `resource` the bench itself sent in the window.
    pub fn without_own(mut self, verb: &str, resource: &str, n: f64) -> Served {
        let key = (verb.to_string(), resource.to_string());
        if let Some(v) = self.0.get_mut(&key) {
            *v -= n;
            if *v <= 0.0 {
                self.0.remove(&key);
            }
        }
        self
    }

    pub fn total(&self) -> f64 {
        // A fold from 0.0: `sum()` of no f64 is -0.0, which would print as "-0".
        self.0.values().fold(0.0, |a, b| a + b)
    }

    /// Writes among them (every verb but GET, LIST, WATCH).
    pub fn writes(&self) -> f64 {
        self.writes_where(|_| true)
    }

    /// Writes to `resource` alone.
    pub fn writes_to(&self, resource: &str) -> f64 {
        self.writes_where(|r| r == resource)
    }

    fn writes_where(&self, resource: impl Fn(&str) -> bool) -> f64 {
        self.0
            .iter()
            .filter(|((verb, r), _)| {
                resource(r) && !matches!(verb.as_str(), "GET" | "LIST" | "WATCH")
            })
            .map(|(_, v)| v)
            .fold(0.0, |a, b| a + b)
    }

    /// `verb resource ×n` for each, most first.
    pub fn describe(&self) -> String {
        let mut v: Vec<_> = self.0.iter().collect();
        v.sort_by(|a, b| b.1.total_cmp(a.1));
        v.iter()
            .map(|((verb, res), n)| format!("{verb} {res} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 1
"#;
    const AFTER: &str = r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="status",verb="PATCH",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 2
apiserver_request_total_other{verb="LIST"} 9
"#;

    #[test]
    fn counts_what_was_served_between_two_readings_without_the_readings() {
        let served = Served::parse(BEFORE).since(&Served::parse(AFTER));
        assert_eq!(served.total(), 7.0);
        assert_eq!(served.writes(), 4.0);
        // A resource's own writes: the steady state counts the Lease's renewals apart.
        assert_eq!(served.writes_to("pods/status"), 4.0);
        assert_eq!(served.writes_to("pods"), 0.0);
        assert_eq!(served.describe(), "PATCH pods/status x4, LIST pods x3");
        // The idle apiserver's own (here: 1 LIST pods per window) is taken off per verb and
        // resource, scaled to the window, and so are the bench's own requests.
        let idle = Served(BTreeMap::from([(("LIST".into(), "pods".into()), 1.0)]));
        assert_eq!(
            served.less(&idle, 2.0).describe(),
            "PATCH pods/status x4, LIST pods x1"
        );
        assert_eq!(served.less(&idle, 5.0).describe(), "PATCH pods/status x4");
        // One client's kinds only: the LIST of pods is not among them.
        assert_eq!(
            served
                .only(&[("PATCH", "pods/status"), ("GET", "pods")])
                .describe(),
            "PATCH pods/status x4"
        );
        assert_eq!(served.only(&[]).total(), 0.0);
        assert_eq!(
            served
                .without_own("PATCH", "pods/status", 1.0)
                .without_own("LIST", "pods", 3.0)
                .describe(),
            "PATCH pods/status x3"
        );
        let idle = Served::parse(BEFORE).since(&Served::parse(BEFORE));
        assert_eq!(
            format!("{:.1} {:.1}", idle.total(), idle.writes()),
            "0.0 0.0"
        );
    }
}
