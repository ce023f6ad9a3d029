//! The linkerd-multus operator: the NAD controller, the admission webhook (crate
//! `linkerd-multus-webhook`) and the admin server, in one process sharing one shutdown token.

pub mod admin;
pub mod admission;
pub mod check;
pub mod cli;
pub mod config;
pub mod controller;
pub mod desired;
pub mod error;
pub mod events;
pub mod inputs;
pub mod leader;
pub mod listed;
pub mod listed_pod;
pub mod metrics;
pub mod nad_cache;
pub mod nad_config;
pub mod nad_read;
pub mod node_agent;
pub mod placement;
pub mod reconcile;
pub mod repair;
pub mod sandboxes;

use std::net::SocketAddr;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::Store;
use kube::Client;
use linkerd_multus_webhook::Webhook;
use prometheus_client::registry::Registry;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use vocab::report::Chain;

use crate::admin::{AdminError, AdminServer};
use crate::cli::LogFormat;
use crate::config::{Config, ControllerConfig};
use crate::controller::NadController;
use crate::leader::{LeaderError, Leadership};
use crate::repair::Repairer;

/// After shutdown starts, tasks get this long to finish before the process gives up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

/// Why the operator process stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot build a Kubernetes client (in-cluster config or KUBECONFIG)")]
    Client(#[source] kube::Error),
    #[error("webhook")]
    Webhook(#[from] linkerd_multus_webhook::Error),
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Leader(#[from] LeaderError),
    #[error("cannot listen for SIGTERM")]
    Signal(#[source] std::io::Error),
    #[error("check")]
    Check(#[from] check::CheckError),
    #[error("some checks failed (see above)")]
    CheckFailed,
    #[error("critical task `{0}` stopped unexpectedly")]
    TaskEnded(&'static str),
    #[error("critical task panicked: {0}")]
    TaskPanicked(String),
    #[error("tasks still running {0:?} after shutdown began; giving up on them")]
    ShutdownTimeout(Vec<&'static str>),
}

/// Sets up `tracing`: level from `RUST_LOG` (default `info`), format from `--log-format`.
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: in a container log or a file they are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The binary's whole body: flags, logging, a runtime, [`run`]. It lives here, not in the binary,
/// so that `run`'s state machine and every generic it reaches are compiled once, with this crate:
/// a binary that awaits `run` itself compiled them all again (40 s of the release build's critical
/// path, issue #43).
pub fn main() -> std::process::ExitCode {
    use clap::Parser;
    let cli = cli::Cli::parse();
    init_tracing(cli.run.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %Chain(&e), "cannot start the async runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(Config::from_cli(cli))) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %Chain(&e), "linkerd-multus-operator failed");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the whole operator until SIGTERM/SIGINT (or a critical task fails); or `check`.
pub async fn run(config: Config) -> Result<(), RunError> {
    // kube is built on ring; make it rustls' process default so nothing picks another provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match config {
        Config::Check(check) => {
            return match check::run(&check).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(RunError::CheckFailed),
                Err(e) => Err(RunError::Check(e)),
            };
        }
        Config::Run(config) => *config,
    };
    let client = Client::try_default().await.map_err(RunError::Client)?;
    let shutdown = CancellationToken::new();
    let mut registry = Registry::with_prefix("linkerd_multus");

    let mut webhook = Webhook::new(
        config.webhook,
        config.decision,
        config.operator_namespace,
        client.clone(),
        &mut registry,
    )
    .await?;
    let controller = build_controller_tasks(client, config.controller, registry, &shutdown).await?;
    webhook.share_namespaces(controller.namespaces);
    webhook.share_placement(controller.placement);
    let mut tasks = controller.tasks;
    let token = shutdown.clone();
    tasks.push((
        "webhook",
        async move { webhook.run(token).await.map_err(RunError::from) }.boxed(),
    ));
    tasks.push(("signals", on_signal(shutdown.clone()).boxed()));
    supervise(shutdown, tasks).await
}

/// The controller, its leader election and the admin server, started as one supervised task: what
/// tests on the local apiserver run (the webhook has its own tests).
pub struct RunningController {
    pub admin_addr: SocketAddr,
    pub task: tokio::task::JoinHandle<Result<(), RunError>>,
}

/// Starts the controller part of the operator in the background; stops when `shutdown` is cancelled.
pub async fn spawn_controller(
    client: Client,
    config: ControllerConfig,
    shutdown: CancellationToken,
) -> Result<RunningController, RunError> {
    let registry = Registry::with_prefix("linkerd_multus");
    let built = build_controller_tasks(client, config, registry, &shutdown).await?;
    let task = tokio::spawn(supervise(shutdown, built.tasks));
    Ok(RunningController {
        admin_addr: built.admin_addr,
        task,
    })
}

type Task = (&'static str, BoxFuture<'static, Result<(), RunError>>);

struct ControllerTasks {
    tasks: Vec<Task>,
    admin_addr: SocketAddr,
    /// The controller's namespace store, which the webhook shares.
    namespaces: Store<Namespace>,
    /// Where pods are attached from, which the webhook shares.
    placement: tokio::sync::watch::Receiver<rules::multus_node::Placement>,
}

async fn build_controller_tasks(
    client: Client,
    config: ControllerConfig,
    mut registry: Registry,
    shutdown: &CancellationToken,
) -> Result<ControllerTasks, RunError> {
    let leadership = match &config.lease {
        Some(lease) => {
            Leadership::elect(
                client.clone(),
                &lease.namespace,
                &lease.name,
                &config.identity,
            )
            .await?
        }
        None => Leadership::always(),
    };
    log_attach_mode(&config.settings.nad);
    let repair_client = client.clone();
    let admission_client = client.clone();
    let node_agent_client = client.clone();
    let node_agent_resync = config.settings.resync;
    let node_agent_leader = leadership.subscribe();
    let (live_tx, live_rx) = tokio::sync::watch::channel(None);
    let mut controller = NadController::new(
        client,
        config.settings,
        config.namespace_selector.as_deref(),
        leadership.subscribe(),
        (live_rx, config.admission.label_value.clone()),
        config.identity.clone(),
        &mut registry,
    );
    let namespaces = controller.namespace_store();
    let placement = controller.placement();
    let keeper = admission::Keeper::new(
        admission_client,
        config.admission,
        placement.clone(),
        leadership.subscribe(),
        (namespaces.clone(), controller.namespaces_listed()),
        live_tx,
    );
    let repairer = match config.repair {
        Some(settings) => {
            let findings = config.findings.map(|check| {
                check::leader::Findings::start(
                    repair_client.clone(),
                    check,
                    config.identity.clone(),
                    settings.state.clone(),
                )
            });
            let repairer = Repairer::new(
                repair_client,
                repair::evict::eviction_client()
                    .await
                    .map_err(RunError::Client)?,
                settings,
                (
                    namespaces.clone(),
                    controller.namespaces_listed(),
                    controller.nad_events(),
                ),
                leadership.subscribe(),
                config.identity,
                &mut registry,
            )
            .with_placement(placement.clone());
            Some(match findings {
                Some(f) => repairer.with_findings(Box::new(f)),
                None => repairer,
            })
        }
        None => None,
    };
    let admin = AdminServer::bind(config.admin_addr, registry, controller.readiness()).await?;
    let admin_addr = admin.local_addr().unwrap_or(config.admin_addr);

    let (t1, t2, t3, t5) = (
        shutdown.clone(),
        shutdown.clone(),
        shutdown.clone(),
        shutdown.clone(),
    );
    let mut tasks: Vec<Task> = vec![
        (
            "leader-election",
            async move {
                leadership.run(t1).await;
                Ok(())
            }
            .boxed(),
        ),
        (
            "nad-controller",
            async move {
                controller.run(t2).await;
                Ok(())
            }
            .boxed(),
        ),
        (
            "admin-server",
            async move { admin.run(t3).await.map_err(RunError::from) }.boxed(),
        ),
        (
            "admission",
            async move {
                keeper.run(t5).await;
                Ok(())
            }
            .boxed(),
        ),
    ];
    if let Some(settings) = config.node_agent {
        let keeper = node_agent::NodeAgentKeeper::new(
            node_agent_client,
            settings,
            node_agent_resync,
            node_agent_leader,
        );
        let t6 = shutdown.clone();
        tasks.push((
            "node-agent",
            async move {
                keeper.run(t6).await;
                Ok(())
            }
            .boxed(),
        ));
    }
    if let Some(repairer) = repairer {
        let t4 = shutdown.clone();
        tasks.push((
            "pod-repair",
            async move {
                repairer.run(t4).await;
                Ok(())
            }
            .boxed(),
        ));
    }
    Ok(ControllerTasks {
        tasks,
        admin_addr,
        namespaces,
        placement,
    })
}

/// Says once, at start-up, how pods are attached (`--attach`): what the admin reads to know which
/// parts act (NADs and the networks annotation, or neither).
fn log_attach_mode(nad: &rules::namespaces::OurNad) {
    let mode = nad.attach.as_str();
    if nad.attach.uses_nads() {
        tracing::info!(
            attach = mode,
            nad = %nad.reference(),
            "attach mode nad: the operator keeps NetworkAttachmentDefinitions and the webhook names \
             them in each attached pod's networks annotation"
        );
    } else {
        tracing::info!(
            attach = mode,
            "attach mode aux-chain: linkerd-cni runs from Multus' auxiliary CNI chain on each node \
             (installer --attach aux-chain); no NAD is written (ours left from nad mode are \
             deleted once no pod lists them), no networks annotation is added, and a node's Multus \
             isolation does not matter"
        );
    }
}

/// Cancels `shutdown` on SIGTERM or SIGINT; ends quietly when shutdown starts elsewhere.
async fn on_signal(shutdown: CancellationToken) -> Result<(), RunError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(RunError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(RunError::Signal)?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        () = shutdown.cancelled() => {}
    }
    shutdown.cancel();
    Ok(())
}

/// Runs every critical task to the end. The first one to stop before shutdown began (cleanly or
/// not) starts the shutdown of all the others; the first failure is what the process reports.
async fn supervise(shutdown: CancellationToken, tasks: Vec<Task>) -> Result<(), RunError> {
    let mut set = JoinSet::new();
    let mut running = std::collections::HashMap::new();
    for (name, task) in tasks {
        let handle = set.spawn(async move { (name, task.await) });
        running.insert(handle.id(), name);
    }
    let mut first_error = None;
    let deadline = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::pin!(deadline);
    loop {
        let joined = tokio::select! {
            joined = set.join_next_with_id() => joined,
            () = &mut deadline => {
                let left: Vec<_> = running.values().copied().collect();
                set.abort_all();
                return Err(first_error.unwrap_or(RunError::ShutdownTimeout(left)));
            }
        };
        let Some(joined) = joined else { break };
        let (name, result) = match joined {
            Ok((id, (name, result))) => {
                running.remove(&id);
                (name, result)
            }
            Err(e) => {
                running.remove(&e.id());
                ("unknown", Err(RunError::TaskPanicked(e.to_string())))
            }
        };
        if !shutdown.is_cancelled() {
            tracing::error!(task = name, "critical task stopped; shutting down");
            shutdown.cancel();
            if result.is_ok() {
                first_error.get_or_insert(RunError::TaskEnded(name));
            }
        }
        if let Err(e) = result {
            tracing::error!(task = name, error = %Chain(&e), "task failed");
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
