//! The operator at OpenShift's cluster maximums, on a simulated cluster ([`cluster`]) grown through
//! the sizes asked for (e.g. 15k, 50k, 150k pods; namespaces and nodes in proportion), each part
//! against its floor in the same run:
//!
//! - operator RSS with repair off and on: per node (no namespace selected, minus the operator on an
//!   empty cluster), per namespace (off, minus no namespace selected) and per pod (on minus off);
//! - a leader's start: process start → repair has listed every pod (`repair_pods_listed`), against
//!   a bare client's paged LIST of the same pods;
//! - repair's steady state: the apiserver's writes (target 0) and the operator's CPU per minute with
//!   nothing to repair;
//! - `check`: wall time and the requests the apiserver served for it, by verb and resource (a
//!   request per namespace or per node shows as a count that grows with the size).
//!
//! - a ConfigMap edit -> every NAD updated, against a minimal client's same applies in turns, then
//!   the operator's NAD writes over two idle resyncs ([`fanout::edit`]);
//! - the nodes' load on the apiserver ([`nodes`]): a real installer's requests, and a plugin ADD's.

pub mod cluster;
pub mod nodes;
pub mod store_memory;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

use self::cluster::Size;
use crate::args::OperatorBenchArgs;
use crate::fanout::edit::{edit_then_idle, Edit};
use crate::fanout::{self, Operator, CNI_NAMESPACE, LABEL};
use crate::procs;
use crate::requests::Served;
use crate::row;

#[derive(clap::Args, Debug, Clone)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub target: OperatorBenchArgs,
    /// Pod counts to grow the cluster through, smallest first (namespaces: pods/15 up to 10,000;
    /// nodes: pods/75 up to 2,000).
    #[arg(long, value_delimiter = ',', default_value = "15000,50000,150000")]
    pub pods: Vec<usize>,
    /// Requests in flight while the bench builds the cluster.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// How long repair's steady state is watched at each size.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = vocab::duration::flag)]
    pub steady: Duration,
    /// Requests in flight for the ConfigMap edit: the operator's `--max-concurrent-reconciles` and
    /// the floor client's (the operator's default).
    #[arg(long, default_value_t = 16)]
    pub edit_concurrency: usize,
    /// ConfigMap edits at each size, each timed on both sides in turns; the row is the median round.
    #[arg(long, default_value_t = 3)]
    pub edit_rounds: usize,
    /// The operator's `--resync` for the idle rows after the edit.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = vocab::duration::flag)]
    pub resync: Duration,
    #[command(flatten)]
    pub nodes: nodes::NodesArgs,
}

/// How long the operator may take to list every pod or write every NAD.
const PATIENCE: Duration = Duration::from_secs(1800);

pub async fn run(args: ScaleArgs) -> anyhow::Result<()> {
    let mut sizes = args.pods.clone();
    sizes.sort_unstable();
    let client = args.target.client().await;
    fanout::ensure_crd(&client).await?;
    fanout::ensure_crd_served(
        &client,
        <linkerd_multus_crds::NodeMultus as kube::CustomResourceExt>::crd(),
        &linkerd_multus_crds::node_multus::api_resource(None),
    )
    .await?;
    fanout::apply_namespace(&client, CNI_NAMESPACE, LABEL, false).await?;
    fanout::put_config(&client, "info").await?;
    let dir = std::env::temp_dir().join(format!("linkerd-multus-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;

    let empty = {
        let operator = start(&args, &dir, false)?;
        operator.wait_ready().await;
        settle().await;
        operator.rss_mb()?
    };
    row::single(
        "scale: operator RSS, empty cluster",
        &format!("{empty:.1} MB"),
        "baseline",
    );

    let mut built = Size {
        nodes: 0,
        namespaces: 0,
        pods: 0,
    };
    let mut namespaces = Vec::new();
    // What the ConfigMap says: each size's edit rounds switch away from it and back.
    let mut level = "info";
    // The last size and repair's RSS at it (on above off), for the per-pod cost between sizes.
    let mut previous = None;
    for pods in sizes {
        let size = Size::for_pods(pods);
        let started = Instant::now();
        cluster::add_nodes(&client, built.nodes..size.nodes, args.concurrency).await?;
        if size.namespaces > built.namespaces {
            namespaces.extend(
                fanout::create_enabled(
                    &client,
                    built.namespaces..size.namespaces,
                    args.concurrency,
                )
                .await?,
            );
        }
        cluster::add_pods(
            &client,
            built.pods..size.pods,
            &namespaces,
            size.nodes,
            args.concurrency,
        )
        .await?;
        built = size;
        eprintln!(
            "scale: {} nodes, {} namespaces, {} pods in place ({:.0} s)",
            size.nodes,
            size.namespaces,
            size.pods,
            started.elapsed().as_secs_f64()
        );
        let repair = measure(&args, &client, &dir, size, empty).await?;
        if let Some((last, last_repair)) = previous.replace((size, repair)) {
            per_pod_since(last, last_repair, size, repair);
        }
        level = edit(&args, &client, &dir, size, &namespaces, level).await?;
    }
    nodes::measure(&args.nodes, &args.target, &client, built).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Every row of one size but the edit's; returns repair's RSS (on above off, MB).
async fn measure(
    args: &ScaleArgs,
    client: &Client,
    dir: &Path,
    size: Size,
    empty: f64,
) -> anyhow::Result<f64> {
    let at = at(size);

    // Repair off and no namespace selected: the nodes' cost (NodeMultus), the floor of the
    // namespaces' row (before, that row counted the nodes' objects as the namespaces').
    let unselected = {
        let operator = start_with(
            args,
            dir,
            &["--namespace-selector", "linkerd-multus-bench/none=1"],
        )?;
        operator.wait_ready().await;
        settle().await;
        operator.rss_mb()?
    };

    // Repair off: the controller alone, once every NAD is written.
    let off = {
        let operator = start(args, dir, false)?;
        operator.wait_ready().await;
        fanout::wait_nads(client, vocab::NAD_NAME, size.namespaces, |_, _| true, None).await?;
        settle().await;
        operator.rss_mb()?
    };

    // Repair on: from the process start until it has listed every pod; the floor lists them bare.
    let started = k8s_openapi::jiff::Timestamp::now();
    let mut operator = start(args, dir, true)?;
    let listed = wait_listed(&mut operator, size.pods).await?;
    let floor_list = bare_list(client).await?;
    row::compare(
        &format!("scale {at}: leader start -> repair has listed every pod (floor: paged LIST, 500 per page)"),
        listed,
        floor_list,
        "s",
    );
    settle().await;
    let on = operator.rss_mb()?;
    row::compare(
        &format!("scale {at}: operator RSS, repair on vs off"),
        on,
        off,
        "MB",
    );
    let kb = |mb: f64, n: usize| mb * 1024.0 / n.max(1) as f64;
    row::single(
        &format!(
            "scale {at}: operator RSS per node (no namespace selected, above the empty cluster)"
        ),
        &format!("{:.2} KB", kb(unselected - empty, size.nodes)),
        "-",
    );
    row::single(
        &format!(
            "scale {at}: operator RSS per namespace (repair off, above no namespace selected)"
        ),
        &format!("{:.2} KB", kb(off - unselected, size.namespaces)),
        "goal <= 3 KB",
    );
    row::single(
        &format!("scale {at}: operator RSS per pod (repair on above off)"),
        &format!("{:.2} KB", kb(on - off, size.pods)),
        "goal <= 1 KB; whole operator <= 256 MiB at 150k",
    );

    // Steady state: nothing to repair, nothing else running against this apiserver; from this
    // leader's first published findings on (their first write is not the steady state's).
    wait_findings(client, started).await?;
    let before = Served::read(client).await?;
    let cpu = procs::cpu_seconds(operator.pid())?;
    tokio::time::sleep(args.steady).await;
    let cpu = procs::cpu_seconds(operator.pid())? - cpu;
    let served = before.since(&Served::read(client).await?);
    let minutes = args.steady.as_secs_f64() / 60.0;
    let renewals = served.writes_to("leases");
    row::single(
        &format!("scale {at}: repair steady state, apiserver writes per minute (Lease apart)"),
        &format!("{:.1}", (served.writes() - renewals) / minutes),
        "target 0",
    );
    row::single(
        &format!("scale {at}: leader election, Lease renewals per minute"),
        &format!("{:.1}", renewals / minutes),
        "-",
    );
    row::single(
        &format!("scale {at}: repair steady state, operator CPU per minute"),
        &format!("{:.2} s", cpu / minutes),
        "-",
    );
    eprintln!("scale: steady state served: {}", served.describe());

    // check while the leader runs: its pod rows from the leader's published findings.
    let with = timed_check(args, client, "with the leader").await?;
    anyhow::ensure!(
        with.pods.contains("as the operator's leader"),
        "check did not read the leader's findings: {}",
        with.pods
    );
    row::single(
        &format!(
            "scale {at}: check, the leader's findings (exit {})",
            with.status
        ),
        &format!("{:.2} s", with.took),
        "goal <= 10 s",
    );
    row::single(
        &format!("scale {at}: check, the leader's findings, requests served"),
        &format!("{}", with.requests),
        "goal: none per namespace or node",
    );
    // The most it ever held: the list, the steady state's folds of the findings and their
    // observations of every namespace and NAD included.
    row::single(
        &format!("scale {at}: operator peak RSS, repair on (VmHWM, start to here)"),
        &format!("{:.2} MB", operator.peak_rss_mb()?),
        "whole operator <= 256 MiB at 150k",
    );
    operator.stop();

    // check without a leader (the operator down), alone against the apiserver: it reads every pod.
    let without = timed_check(args, client, "without a leader").await?;
    // Its floor: the one pod walk it cannot do without (it reads every pod's containers).
    let floor_check = bare_list(client).await?;
    row::compare(
        &format!(
            "scale {at}: check, no leader: reads every pod (exit {}; floor: paged LIST)",
            without.status
        ),
        without.took,
        floor_check,
        "s",
    );
    row::single(
        &format!("scale {at}: check, no leader, requests served"),
        &format!("{}", without.requests),
        "goal: none per namespace or node",
    );
    Ok(on - off)
}

/// Repair's RSS per pod added from the last size to this one. The per-pod row at one size divides
/// what repair holds by the pods, with what the allocator kept of the list's peak in it: at 15,000
/// pods that part weighs most and moved from 0.39 to 1.19 KB per pod between two runs of one
/// commit, while this row (the slope between sizes) stayed within 0.67-0.83 KB.
fn per_pod_since(last: Size, last_repair: f64, size: Size, repair: f64) {
    let added = size.pods.saturating_sub(last.pods).max(1) as f64;
    row::single(
        &format!(
            "scale {}: operator RSS per pod added since {}k pods (repair on above off)",
            at(size),
            last.pods / 1000
        ),
        &format!("{:.2} KB", (repair - last_repair) * 1024.0 / added),
        "goal <= 1 KB",
    );
}

/// One `check`, timed, with the requests the apiserver served meanwhile.
struct Checked {
    took: f64,
    status: i32,
    /// Its `pods` row's message (it says where the rows came from).
    pods: String,
    requests: f64,
}

async fn timed_check(args: &ScaleArgs, client: &Client, how: &str) -> anyhow::Result<Checked> {
    let before = Served::read(client).await?;
    let started = Instant::now();
    let (status, pods) = check(args, LEADER).await?;
    let took = started.elapsed().as_secs_f64();
    let served = before.since(&Served::read(client).await?);
    eprintln!("scale: check {how}: pods row: {pods}");
    eprintln!("scale: check {how} served: {}", served.describe());
    Ok(Checked {
        took,
        status,
        pods,
        requests: served.total(),
    })
}

/// The ConfigMap edit at this size: the operator (repair off, the edit's concurrency and resync) has
/// written every NAD; the floor has written its own; then the edit's rounds from `level`, the two
/// sides in turns. Returns the level the ConfigMap is left with.
async fn edit(
    args: &ScaleArgs,
    client: &Client,
    dir: &Path,
    size: Size,
    names: &[String],
    level: &'static str,
) -> anyhow::Result<&'static str> {
    let concurrency = args.edit_concurrency.to_string();
    let flags = [
        "--admission",
        "webhook",
        "--max-concurrent-reconciles",
        &concurrency,
    ];
    let mut operator = Operator::start(&args.target, args.resync, dir, &flags)?;
    let ours = fanout::wait_nads(
        client,
        vocab::NAD_NAME,
        names.len(),
        |_, _| true,
        Some(&mut operator),
    )
    .await?;
    let config = fanout::nad_config(client, &names[0]).await?;
    let (_, floor) = fanout::floor_writes(
        client,
        names,
        &config,
        args.edit_concurrency,
        fanout::FloorWrite::Create,
        |_, _| true,
    )
    .await?;
    let rows = format!("scale {}", at(size));
    let other = if level == "info" { "debug" } else { "info" };
    let result = edit_then_idle(
        client,
        names,
        &mut operator,
        Edit {
            rows: &rows,
            levels: [level, other],
            ours,
            floor,
            config,
            concurrency: args.edit_concurrency,
            resync: args.resync,
            rounds: args.edit_rounds,
            floor_watches: None,
        },
    )
    .await;
    operator.stop();
    result
}

/// The size, as the rows name it.
fn at(size: Size) -> String {
    format!(
        "{}k pods, {}k namespaces, {} nodes",
        size.pods / 1000,
        size.namespaces as f64 / 1000.0,
        size.nodes
    )
}

/// The repairing operator's flags, which `check` is given too: its leader publishes the pod rows'
/// findings only with a Lease, and `check` uses them only with the same settings.
const LEADER: &[&str] = &["--repair-unattached-pods", "--leader-elect"];

fn start(args: &ScaleArgs, dir: &Path, repair: bool) -> anyhow::Result<Operator> {
    start_with(args, dir, if repair { LEADER } else { &[] })
}

/// Until the leader has published pod findings written `since` its start (it folds a minute apart
/// at most). The size before left its leader's in the same ConfigMap; taking those, this leader's
/// first write fell in the steady state's window (1 write a minute at 50,000 pods, two runs).
async fn wait_findings(client: &Client, since: k8s_openapi::jiff::Timestamp) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::ConfigMap;
    use linkerd_multus_operator::check::published::PublishedFindings;
    let name = format!("{}-repair", vocab::DEFAULT_LEASE_NAME);
    let configmaps = kube::Api::<ConfigMap>::namespaced(client.clone(), CNI_NAMESPACE);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(180) {
        let cm = configmaps.get_opt(&name).await?;
        let found = cm.as_ref().map(PublishedFindings::from_configmap);
        if let Some(Ok(Some(findings))) = found {
            if findings.at >= since {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    anyhow::bail!(
        "the leader published no pod findings in ConfigMap {CNI_NAMESPACE}/{name} in 180 s \
         (since {since})"
    )
}

fn start_with(args: &ScaleArgs, dir: &Path, flags: &[&str]) -> anyhow::Result<Operator> {
    let flags = [&["--admission", "webhook"], flags].concat();
    Operator::start(&args.target, Duration::from_secs(300), dir, &flags)
}

/// The allocator's pages settle after a burst of work before RSS is read.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// Seconds from the operator's start until repair logs that it has listed every pod, at least
/// `pods`. Read off its log, not `/metrics`: a scrape reads every node's NodeMultus, and polling it
/// every 20 ms took a third of the operator's CPU during the list at 667 nodes (a profile), so the
/// bench slowed what it timed, the more the more nodes.
async fn wait_listed(operator: &mut Operator, pods: usize) -> anyhow::Result<f64> {
    let deadline = Instant::now() + PATIENCE;
    let mut log = LogFollower::default();
    loop {
        if let Some(status) = operator.exited() {
            bail!("the operator exited ({status}): {}", operator.log_tail(20));
        }
        let listed = log
            .read_new(operator.log_path())?
            .lines()
            .find_map(listed_pods);
        if listed.is_some_and(|n| n >= pods) {
            return Ok(operator.started().elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            bail!("repair did not log every pod listed ({pods}) after {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The count of repair's "every pod listed" log line (`pods=N`), if `line` is it.
fn listed_pods(line: &str) -> Option<usize> {
    let (_, after) = line.split_once(linkerd_multus_operator::repair::EVERY_POD_LISTED)?;
    let value = after.split_once("pods=")?.1;
    value
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Reads the whole lines a log file gained since the last read.
#[derive(Default)]
struct LogFollower {
    read: u64,
}

impl LogFollower {
    /// A line still being written is left for the next read, so no line is ever seen cut short.
    fn read_new(&mut self, path: &Path) -> anyhow::Result<String> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(path)?;
        file.seek(SeekFrom::Start(self.read))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(whole);
        self.read += whole as u64;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// A bare client's LIST of every pod, in the pages kube's watcher asks for.
async fn bare_list(client: &Client) -> anyhow::Result<f64> {
    let api = Api::<Pod>::all(client.clone());
    let started = Instant::now();
    let mut params = ListParams::default().limit(500);
    let mut n = 0;
    loop {
        let page = api.list(&params).await?;
        n += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let took = started.elapsed().as_secs_f64();
    eprintln!("scale: bare LIST of {n} pods in {took:.2} s");
    Ok(took)
}

/// Runs `linkerd-multus-operator check` as the bench's operator is configured (plus `flags`); its
/// exit status and its `pods` row's message (which says where the rows came from).
async fn check(args: &ScaleArgs, flags: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = tokio::process::Command::new(&args.target.operator)
        .arg("check")
        .args(["-o", "json"])
        .args([
            "--cni-namespace",
            CNI_NAMESPACE,
            "--namespace",
            CNI_NAMESPACE,
        ])
        .args([
            "--linkerd-namespace",
            "bench-linkerd",
            "--admission",
            "webhook",
        ])
        .args(["--namespace-selector", &format!("{LABEL}=1")])
        .args(flags)
        .env("KUBECONFIG", &args.target.kubeconfig)
        .stderr(Stdio::null())
        .output()
        .await
        .context("running check")?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("check's JSON: {}", String::from_utf8_lossy(&out.stdout)))?;
    let pods = report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["check"] == "pods")
        .and_then(|r| r["message"].as_str())
        .unwrap_or_default()
        .to_string();
    Ok((out.status.code().unwrap_or(-1), pods))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The leader start is read off the line repair logs (plain, as the operator logs to a file).
    #[test]
    fn the_listed_line_gives_its_count() {
        let line = format!(
            "2026-11-29T23:27:34.712780Z  INFO linkerd_multus_operator::repair: {} pods=50000",
            linkerd_multus_operator::repair::EVERY_POD_LISTED
        );
        assert_eq!(listed_pods(&line), Some(50000));
        assert_eq!(
            listed_pods("INFO linkerd_multus_operator::repair: pod repair on pods=3"),
            None
        );
        assert_eq!(listed_pods(&line.replace("pods=", "pods")), None);
    }

    /// A line caught half-written is read whole once its end is there, never cut short.
    #[test]
    fn a_line_being_written_waits_for_its_end() {
        use std::io::Write;
        let path = std::env::temp_dir().join(format!("scale-log-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        let mut log = LogFollower::default();
        write!(file, "first\nevery pod listed pods=50").unwrap();
        assert_eq!(log.read_new(&path).unwrap(), "first\n");
        writeln!(file, "000").unwrap();
        let text = log.read_new(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, "every pod listed pods=50000\n");
    }
}
