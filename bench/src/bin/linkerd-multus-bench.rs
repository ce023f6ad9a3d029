//! Parts of the benchmark that `bench/run` starts; each prints its table rows on stdout.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// linkerd-multus benchmarks (run them all with `bench/run`, which prints one table).
#[derive(Parser)]
#[command(name = "linkerd-multus-bench")]
struct Cli {
    #[command(subcommand)]
    command: Part,
}

#[derive(Subcommand)]
enum Part {
    /// Writes a CA-signed serving certificate for 127.0.0.1/localhost: DIR/tls.crt, DIR/tls.key.
    Cert { dir: PathBuf },
    /// Writes what the webhook load needs into DIR: review.json (the pod review every webhook
    /// measurement sends), review.lua (a wrk script POSTing it), path (the webhook's URL path).
    LoadFiles { dir: PathBuf },
    /// Serves the real webhook alone (namespace cache on $KUBECONFIG's apiserver).
    Webhook(Serve),
    /// Serves the floor: the same axum + rustls stack answering a constant allowed review.
    FloorWebhook(FloorServe),
    /// Controller fan-out, idle writes and memory: the operator process against a minimal client.
    Fanout(linkerd_multus_bench::fanout::FanoutArgs),
    /// Opt-in latency: annotate -> NAD visible, disable -> NAD gone, against a minimal client.
    Optin(linkerd_multus_bench::optin::OptinArgs),
    /// NAD writes, objects and operator RSS of the attach modes: one shared NAD (--nad-namespace), one
    /// per namespace, none (--attach aux-chain).
    Shared(linkerd_multus_bench::shared::SharedArgs),
    /// Pod admission through the apiserver: real webhook, floor webhook, none.
    Admission(linkerd_multus_bench::admission::AdmissionArgs),
    /// A pod-creation storm through the apiserver: real webhook, constant-patch webhook, none.
    Storm(linkerd_multus_bench::storm::StormArgs),
    /// The operator on a simulated cluster grown through pod counts up to OpenShift's maximums:
    /// RSS, a leader's start, repair's steady state, check.
    Scale(linkerd_multus_bench::scale::ScaleArgs),
    /// Repair's pod store alone, in this process, filled with the scale part's pods: RSS per pod
    /// without the apiserver, the list's pages or the rest of the operator.
    StoreMemory {
        #[arg(long, default_value_t = 150_000)]
        pods: usize,
    },
}

#[derive(clap::Args)]
struct Serve {
    #[arg(long)]
    addr: SocketAddr,
    #[arg(long)]
    cert: PathBuf,
    #[arg(long)]
    key: PathBuf,
}

#[derive(clap::Args)]
struct FloorServe {
    #[command(flatten)]
    serve: Serve,
    /// Answer with the request's uid (needed behind a real apiserver).
    #[arg(long)]
    echo_uid: bool,
    /// With --echo-uid: also a constant patch adding the Multus networks annotation.
    #[arg(long, requires = "echo_uid")]
    patch: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Part::Cert { dir } => {
            let bundle = linkerd_multus_webhook::cert_authority::issue(
                &["localhost".to_string(), "127.0.0.1".to_string()],
                std::time::SystemTime::now(),
                linkerd_multus_webhook::cert_authority::VALIDITY,
                None,
            )?;
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("tls.crt"), &bundle.cert_pem)?;
            std::fs::write(dir.join("tls.key"), &bundle.key_pem)?;
            std::fs::write(dir.join("ca.crt"), &bundle.ca_pem)?;
        }
        Part::LoadFiles { dir } => linkerd_multus_bench::fixture::write_load_files(&dir)?,
        Part::Webhook(s) => {
            linkerd_multus_bench::webhook_serve::serve(s.addr, s.cert, s.key).await?
        }
        Part::FloorWebhook(FloorServe {
            serve: s,
            echo_uid,
            patch,
        }) => {
            use linkerd_multus_bench::floor_webhook::{serve, Answer};
            let answer = match (echo_uid, patch) {
                (false, _) => Answer::Constant,
                (true, false) => Answer::EchoUid,
                (true, true) => Answer::EchoUidPatch,
            };
            serve(s.addr, s.cert, s.key, answer).await?
        }
        Part::Fanout(args) => linkerd_multus_bench::fanout::run(args).await?,
        Part::Admission(args) => linkerd_multus_bench::admission::run(args).await?,
        Part::Storm(args) => linkerd_multus_bench::storm::run(args).await?,
        Part::Optin(args) => linkerd_multus_bench::optin::run(args).await?,
        Part::Shared(args) => linkerd_multus_bench::shared::run(args).await?,
        Part::Scale(args) => linkerd_multus_bench::scale::run(args).await?,
        Part::StoreMemory { pods } => {
            let m = linkerd_multus_bench::scale::store_memory::measure(pods)?;
            linkerd_multus_bench::row::single(
                &format!("repair's pod store alone, in one process, {pods} pods: per pod"),
                &format!("{:.2} KB", m.per_pod_bytes() / 1024.0),
                &format!(
                    "RSS {} KB before, {} KB stored, {} KB with it dropped",
                    m.before_kb, m.stored_kb, m.dropped_kb
                ),
            );
        }
    }
    Ok(())
}
