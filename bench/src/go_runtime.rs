//! The apiserver's Go runtime, as its own `/metrics` says: how many garbage collections ran and
//! how large its heap is. On a cluster of 150,000 pods the heap is gigabytes and one collection
//! marks all of it: a bench block that pays for one says so here.

use kube::client::Body;
use kube::Client;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GoRuntime {
    /// `go_gc_duration_seconds_count`: collections so far.
    pub gc_cycles: f64,
    /// `go_memstats_heap_inuse_bytes`.
    pub heap_bytes: f64,
}

/// Runs a collection of the apiserver's heap now and waits for it (Go's heap profile handler with
/// `gc=1`), so a timed block starts with none due: at 50,000 pods one costs the apiserver 2.5–3 s
/// of CPU, and the ConfigMap edit's rounds went 1.39x or 0.62x by which side's turn paid it. Needs
/// the apiserver's `--profiling` (bench/run's testbed turns it on); false where it is not served.
pub async fn collect(client: &Client) -> bool {
    let Ok(request) = http::Request::get("/debug/pprof/heap?gc=1").body(Body::empty()) else {
        return false;
    };
    // The answer's head comes once the collection is done; its body (a binary profile) is dropped.
    matches!(client.send(request).await, Ok(answer) if answer.status().is_success())
}

impl GoRuntime {
    pub async fn read(client: &Client) -> anyhow::Result<Self> {
        Ok(Self::parse(&crate::requests::metrics_text(client).await?))
    }

    /// Reads the two unlabelled samples from Prometheus text; a missing one is 0.
    pub fn parse(text: &str) -> Self {
        let sample = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        Self {
            gc_cycles: sample("go_gc_duration_seconds_count"),
            heap_bytes: sample("go_memstats_heap_inuse_bytes"),
        }
    }

    /// "2 GCs, heap 3.1 GB" between `earlier` and this reading (the heap as now).
    pub fn since(&self, earlier: &GoRuntime) -> String {
        format!(
            "{:.0} GCs, heap {:.2} GB",
            self.gc_cycles - earlier.gc_cycles,
            self.heap_bytes / 1e9
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_collections_and_the_heap_and_no_lookalike() {
        let text =
            "# HELP go_gc_duration_seconds x\ngo_gc_duration_seconds{quantile=\"0\"} 1e-05\n\
                    go_gc_duration_seconds_sum 0.5\ngo_gc_duration_seconds_count 12\n\
                    go_memstats_heap_inuse_bytes 3.1e+09\ngo_memstats_heap_inuse_bytes_x 7\n";
        let now = GoRuntime::parse(text);
        assert_eq!(now.gc_cycles, 12.0);
        assert_eq!(now.heap_bytes, 3.1e9);
        let before = GoRuntime {
            gc_cycles: 10.0,
            heap_bytes: 1.0,
        };
        assert_eq!(now.since(&before), "2 GCs, heap 3.10 GB");
        assert_eq!(GoRuntime::parse(""), GoRuntime::default());
    }
}
