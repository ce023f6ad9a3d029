//! The CNI ConfigMap edited -> every NAD updated, against a minimal client's applies of the same
//! change, then the operator's writes when idle (the `fanout` and `scale` parts' last steps).
//!
//! Both sides run in turns, each on its own NADs, in several rounds; each side goes first in every
//! other round and the row is the round with the median ratio. One edit per size gave 1.03x and
//! 1.13x at 10,000 NADs with the same commit (one of the apiserver's collections, seconds of its
//! CPU at 150,000 pods, may fall on either turn). Not at once, as the webhook storm runs: two
//! clients of equal concurrency then share the apiserver evenly and end together (1.00x in every
//! round at 1,000 NADs), and what the operator costs the apiserver besides its writes (its NAD
//! watches) slows the floor as much as itself. Each turn starts on a freshly collected apiserver
//! heap (`Window::open`): at 50,000 pods the turn that paid for a collection lost its round.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::PartialObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use linkerd_multus_crds::NetworkAttachmentDefinition;

use super::{
    floor_writes, nad_config, put_config, wait_nads, FloorWrite, Generations, Operator, FLOOR_NAD,
};
use crate::go_runtime::{self, GoRuntime};
use crate::procs::{cpu_seconds, CpuSnapshot};
use crate::requests::{metrics_text, Served};
use crate::row;

/// The edit as the part leaves it: both sides' NADs written with `config` from the ConfigMap's
/// `levels[0]`.
pub(crate) struct Edit<'a> {
    /// The rows' prefix ("controller", or the scale part's size).
    pub rows: &'a str,
    /// The ConfigMap's `log_level` now, and the other one the rounds switch to and back.
    pub levels: [&'static str; 2],
    /// The generations of the operator's and of the floor's NADs now.
    pub ours: Generations,
    pub floor: Generations,
    /// The NADs' config now.
    pub config: String,
    /// The floor's requests in flight (the operator's `--max-concurrent-reconciles`).
    pub concurrency: usize,
    /// The operator's `--resync`: the idle rows watch two.
    pub resync: Duration,
    /// Edits, each timed on both sides in turns (at least one).
    pub rounds: usize,
    /// The floor keeps a watch of its NADs through every round (`FloorWatch`), or none.
    pub floor_watches: Option<WatchKind>,
}

/// One round's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Round {
    ours: f64,
    floor: f64,
    ours_cpu: f64,
    floor_cpu: f64,
}

impl Round {
    fn ratio(&self) -> f64 {
        self.ours / self.floor
    }
}

/// Runs the rounds, prints the median round's rows and the idle row; returns the `log_level` the
/// ConfigMap is left with.
pub(crate) async fn edit_then_idle(
    client: &Client,
    names: &[String],
    operator: &mut Operator,
    mut edit: Edit<'_>,
) -> anyhow::Result<&'static str> {
    let n = names.len();
    let mut rounds = Vec::new();
    let mut level = edit.levels[0];
    let floor_watch = match edit.floor_watches {
        Some(kind) => Some(FloorWatch::synced(client, kind).await?),
        None => None,
    };
    for r in 0..edit.rounds.max(1) {
        level = edit.levels[(r + 1) % 2];
        // Each side goes first in every other round: whatever favours a round's first (or second)
        // turn falls on both.
        let floor_first = r % 2 == 1;
        let round = one_round(client, names, operator, &mut edit, level, floor_first).await?;
        eprintln!(
            "{}: the edit, round {r}{}: ours {:.2} s, floor {:.2} s ({:.2}x)",
            edit.rows,
            if floor_first { " (floor first)" } else { "" },
            round.ours,
            round.floor,
            round.ratio()
        );
        rounds.push(round);
    }
    if let Some(watch) = floor_watch {
        eprintln!(
            "{}: the floor's own NAD watch saw {} events",
            edit.rows,
            watch.stop()
        );
    }
    let median = median_round(&rounds);
    row::compare(
        &format!(
            "{}: ConfigMap edit -> {n} NADs updated, median of {} rounds (goal <= 1.1x)",
            edit.rows,
            rounds.len()
        ),
        median.ours,
        median.floor,
        "s",
    );
    // On 2 cores the client's CPU is taken from the apiserver and etcd.
    row::compare(
        "  of which client CPU time (the operator process; the floor: the bench process)",
        median.ours_cpu,
        median.floor_cpu,
        "s",
    );

    // Let the edit settle, then count writes over two resyncs.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = operator.writes().await?;
    tokio::time::sleep(edit.resync * 2 + Duration::from_secs(3)).await;
    let after = operator.writes().await?;
    row::single(
        &format!(
            "{}: idle, 2 resyncs of {n} namespaces (--resync {})",
            edit.rows,
            vocab::duration::format(edit.resync)
        ),
        &format!("{} writes", after - before),
        "target 0",
    );
    Ok(level)
}

/// One round: the operator's turn (the ConfigMap set to `level`) and the floor's (its applies of
/// the config the operator should write), in the order `floor_first` says; each side timed until a
/// watch saw its `n` NADs move past `edit`'s generations, which the round then updates.
async fn one_round(
    client: &Client,
    names: &[String],
    operator: &mut Operator,
    edit: &mut Edit<'_>,
    level: &str,
    floor_first: bool,
) -> anyhow::Result<Round> {
    let expected = with_level(&edit.config, level)?;
    let (ours, floor) = if floor_first {
        let floor = floor_turn(client, names, edit, &expected, level).await?;
        (
            ours_turn(client, names, operator, edit, level).await?,
            floor,
        )
    } else {
        let ours = ours_turn(client, names, operator, edit, level).await?;
        (
            ours,
            floor_turn(client, names, edit, &expected, level).await?,
        )
    };
    let written = nad_config(client, &names[0]).await?;
    same_config(&written, &expected)?;
    edit.config = written;
    edit.ours = ours.gens;
    edit.floor = floor.gens;
    Ok(Round {
        ours: ours.secs,
        floor: floor.secs,
        ours_cpu: ours.cpu,
        floor_cpu: floor.cpu,
    })
}

/// One side's turn: seconds, its client's CPU seconds, and the generations its watch saw.
struct Turn {
    secs: f64,
    cpu: f64,
    gens: Generations,
}

/// The ConfigMap set to `level`, timed until the operator's `n` NADs moved past `edit.ours`.
async fn ours_turn(
    client: &Client,
    names: &[String],
    operator: &mut Operator,
    edit: &Edit<'_>,
    level: &str,
) -> anyhow::Result<Turn> {
    let window = Window::open(client).await?;
    let cpu = cpu_seconds(operator.pid())?;
    let started = Instant::now();
    put_config(client, level).await?;
    let gens = wait_nads(
        client,
        vocab::NAD_NAME,
        names.len(),
        |ns, g| g > edit.ours.get(ns).copied().unwrap_or(0),
        Some(&mut *operator),
    )
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(operator.pid())? - cpu;
    eprintln!(
        "{}: the edit to {level}, ours, {}",
        edit.rows,
        window.close(client).await?
    );
    Ok(Turn { secs, cpu, gens })
}

/// The floor's applies of `expected`, timed until its `n` NADs moved past `edit.floor`.
async fn floor_turn(
    client: &Client,
    names: &[String],
    edit: &Edit<'_>,
    expected: &str,
    level: &str,
) -> anyhow::Result<Turn> {
    let window = Window::open(client).await?;
    let cpu = cpu_seconds(std::process::id())?;
    let (secs, gens) = floor_writes(
        client,
        names,
        expected,
        edit.concurrency,
        FloorWrite::Apply,
        |ns, g| g > edit.floor.get(ns).copied().unwrap_or(0),
    )
    .await?;
    let cpu = cpu_seconds(std::process::id())? - cpu;
    eprintln!(
        "{}: the edit to {level}, floor, {}",
        edit.rows,
        window.close(client).await?
    );
    Ok(Turn { secs, cpu, gens })
}

/// A whole-object watch of the floor's NADs, listed before the first round and drained until
/// stopped: what the apiserver does for the operator's own NAD watch, done for the floor too.
struct FloorWatch {
    task: tokio::task::JoinHandle<()>,
    events: Arc<AtomicU64>,
}

/// What a diagnostic floor watch asks of its NADs: the whole object, as the operator's watch does,
/// or only their metadata (what a metadata-only watch in the operator would cost the apiserver).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchKind {
    Whole,
    Metadata,
}

/// A watch event as the floor counts it.
enum Seen {
    Listed,
    Changed,
    Other,
}

impl Seen {
    fn of<K>(event: watcher::Event<K>) -> Self {
        match event {
            watcher::Event::InitDone => Self::Listed,
            watcher::Event::Apply(_) => Self::Changed,
            _ => Self::Other,
        }
    }

    /// `api`'s watch, its events as the floor counts them (one type for either kind of watch).
    fn stream<K>(
        api: Api<K>,
        config: watcher::Config,
    ) -> BoxStream<'static, Result<Self, watcher::Error>>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        watcher::watcher(api, config)
            .default_backoff()
            .map_ok(Self::of)
            .boxed()
    }
}

impl FloorWatch {
    async fn synced(client: &Client, kind: WatchKind) -> anyhow::Result<Self> {
        let mut config = watcher::Config::default().fields(&format!("metadata.name={FLOOR_NAD}"));
        config.page_size = None;
        let mut stream = match kind {
            WatchKind::Whole => Seen::stream(
                Api::<NetworkAttachmentDefinition>::all(client.clone()),
                config,
            ),
            WatchKind::Metadata => Seen::stream(
                Api::<PartialObjectMeta<NetworkAttachmentDefinition>>::all(client.clone()),
                config,
            ),
        };
        while let Some(event) = stream.next().await {
            if matches!(event, Ok(Seen::Listed)) {
                break;
            }
        }
        let events = Arc::new(AtomicU64::new(0));
        let seen = events.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                if let Ok(Seen::Changed) = event {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(Self { task, events })
    }

    /// Ends the watch; the events it saw after its list.
    fn stop(self) -> u64 {
        self.task.abort();
        self.events.load(Ordering::Relaxed)
    }
}

/// `config` with every `log_level` set to `level`: what the operator writes once the ConfigMap
/// says `level`, so the floor writes the same bytes' worth.
fn with_level(config: &str, level: &str) -> anyhow::Result<String> {
    fn set(v: &mut serde_json::Value, level: &str) {
        match v {
            serde_json::Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    if key == "log_level" {
                        *value = level.into();
                    } else {
                        set(value, level);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|i| set(i, level)),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(config)?;
    set(&mut v, level);
    Ok(v.to_string())
}

/// The operator wrote what the floor wrote (as JSON), or the two sides did not do the same work.
fn same_config(written: &str, expected: &str) -> anyhow::Result<()> {
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s);
    if parse(written)? != parse(expected)? {
        bail!("the operator wrote another config than the floor's:\n  {written}\n  {expected}");
    }
    Ok(())
}

/// The round with the median ratio (the upper one of an even count).
fn median_round(rounds: &[Round]) -> Round {
    let mut sorted = rounds.to_vec();
    sorted.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    sorted[sorted.len() / 2]
}

/// A turn's window, for the log: what the apiserver served by verb and resource, where the
/// machine's CPU went, and the apiserver's collections.
struct Window {
    served: Served,
    cpu: CpuSnapshot,
    go: GoRuntime,
    /// The apiserver's heap was collected just before (`go_runtime::collect`).
    collected: bool,
}

impl Window {
    /// Collects the apiserver's heap first, so no turn inherits a collection the last one made due.
    async fn open(client: &Client) -> anyhow::Result<Self> {
        let collected = go_runtime::collect(client).await;
        let metrics = metrics_text(client).await?;
        Ok(Self {
            served: Served::parse(&metrics),
            cpu: CpuSnapshot::take()?,
            go: GoRuntime::parse(&metrics),
            collected,
        })
    }

    /// "served: …; CPU: …; apiserver …" since `open`.
    async fn close(&self, client: &Client) -> anyhow::Result<String> {
        let metrics = metrics_text(client).await?;
        Ok(format!(
            "{}served: {}; CPU: {}; apiserver {}",
            if self.collected {
                ""
            } else {
                "(no collection before: no /debug/pprof) "
            },
            self.served.since(&Served::parse(&metrics)).describe(),
            CpuSnapshot::take()?.since(&self.cpu),
            GoRuntime::parse(&metrics).since(&self.go)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_level_sets_every_log_level_and_nothing_else() {
        let config = r#"{"cniVersion":"1.0.0","log_level":"info","plugins":[{"type":"linkerd-cni","log_level":"info","linkerd":{"proxy-uid":2102}}]}"#;
        let got: serde_json::Value =
            serde_json::from_str(&with_level(config, "debug").unwrap()).unwrap();
        assert_eq!(got["log_level"], "debug");
        assert_eq!(got["plugins"][0]["log_level"], "debug");
        assert_eq!(got["plugins"][0]["linkerd"]["proxy-uid"], 2102);
        assert_eq!(got["cniVersion"], "1.0.0");
    }

    #[test]
    fn with_level_refuses_a_config_that_is_not_json() {
        assert!(with_level("not json", "debug").is_err());
    }

    #[test]
    fn same_config_compares_json_not_bytes() {
        same_config(r#"{"a":1,"b":2}"#, r#"{ "b": 2, "a": 1 }"#).unwrap();
        let err = same_config(r#"{"a":1}"#, r#"{"a":2}"#).unwrap_err();
        assert!(err.to_string().contains("another config"), "{err}");
    }

    #[test]
    fn the_median_round_is_the_one_with_the_median_ratio() {
        let round = |ours, floor| Round {
            ours,
            floor,
            ours_cpu: 0.0,
            floor_cpu: 0.0,
        };
        // Ratios 1.3, 0.9, 1.05: the median ratio's round, not the median of each column.
        let rounds = [round(13.0, 10.0), round(9.0, 10.0), round(21.0, 20.0)];
        assert_eq!(median_round(&rounds), round(21.0, 20.0));
        assert_eq!(median_round(&rounds[..1]), round(13.0, 10.0));
    }
}
