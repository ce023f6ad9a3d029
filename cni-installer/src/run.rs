//! The long-running shell: a pass at start, a pass whenever the net dir or the service-account dir
//! change (in `aux-chain` mode also the chain's directory and its subdirectory; inotify via
//! `notify`), a pass every `--resync` as a safety net for missed events, and on SIGTERM/SIGINT the
//! uninstall (`append` mode always; `none` and `aux-chain` when [`crate::termination`] finds the
//! installer's DaemonSet deleted). After each pass the node's Multus (and in `aux-chain` mode the chain file's state)
//! is handed to the publisher ([`crate::publish`]), which writes it when it changed. `--uninstall`
//! runs once, without the loop.

use crate::args::{Args, InstallMode, Settings};
use crate::credential;
use crate::error::InstallError;
use crate::installer::{Installer, Report};
use crate::namespace_view;
use crate::publish::Publisher;
use crate::ready::{self, Status};
use crate::termination::{self, Verdict};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// How long to let a burst of file events settle before a pass (an installer writing its config
/// produces several events in a row).
const DEBOUNCE: Duration = Duration::from_millis(150);

/// Entry point of the `linkerd-cni-install` binary.
pub fn main(args: Args) -> ExitCode {
    if args.ready_check {
        let path = args.ready_file.unwrap_or_default(); // clap requires it with --ready-check
        return ready::check_main(&path);
    }
    let installer = std::env::current_exe().ok();
    let print_iptables_backend = args.print_iptables_backend;
    let settings = match Settings::resolve(args, |k| std::env::var(k).ok(), installer.as_deref()) {
        Ok(settings) => settings,
        Err(why) => {
            eprintln!("error: {why}");
            return ExitCode::from(2);
        }
    };
    if print_iptables_backend {
        // What a pass publishes for a plugin config without `iptables-mode` (auto).
        let published = Installer::new(settings).iptables_backend(&serde_json::json!({}));
        println!("{}", serde_json::json!(published));
        return ExitCode::SUCCESS;
    }
    if settings.uninstall {
        return uninstall_main(settings);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %vocab::report::Chain(&InstallError::Runtime(e)), "exiting");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %vocab::report::Chain(&e), "exiting");
            ExitCode::FAILURE
        }
    }
}

/// `--uninstall`: removes what the chain mode installed, prints each removal on stdout, and fails
/// when a removal did.
fn uninstall_main(settings: Settings) -> ExitCode {
    let mode = settings.mode.flags();
    let view_removed = keeps_view(&settings) && remove_view(&settings, |line| println!("{line}"));
    let report = Installer::new(settings).remove_installed();
    // What was removed, then what was kept as someone else's (and why).
    for line in report.changes.iter().chain(&report.warnings) {
        println!("{line}");
    }
    if report.changes.is_empty() && report.errors.is_empty() && !view_removed {
        println!("nothing to remove for {mode} on this node");
    }
    for e in &report.errors {
        tracing::error!(error = %vocab::report::Chain(e), "uninstall step failed");
    }
    if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Installs, then (unless `--once`) keeps the node installed until SIGTERM/SIGINT, and uninstalls
/// when that is an uninstall (see [`crate::termination`]).
pub async fn run(settings: Settings) -> Result<(), InstallError> {
    tracing::info!(
        net_dir = %settings.net_dir.display(),
        bin_dir = %settings.bin_dir.display(),
        mode = %settings.mode.flags(),
        plugin_binary = %settings.plugin_binary.display(),
        "linkerd-cni-install starting"
    );
    let once = settings.once;
    let resync = settings.resync;
    let mut watched = vec![
        settings.net_dir.clone(),
        settings.service_account_dir.clone(),
    ];
    if settings.mode == InstallMode::AuxChain {
        // The subdirectory may not exist yet (the pass creates it when Multus runs the chain): the
        // watch on its parent sees it appear, and DirWatch picks it up then.
        watched.push(settings.aux_chain.dir.clone());
        watched.push(settings.aux_chain.subdir());
    }
    let mut status_file = StatusFile::new(settings.ready_file.clone(), resync);
    let mut keeper = credential::Keeper::new(&settings.plugin_credential);
    let observe = (settings.net_dir.clone(), settings.kubeconfig_name.clone());
    let publish = settings.publish.clone();
    let net_dir_on_node = settings.net_dir_on_node.clone();
    let mut installer = Installer::new(settings);
    if once {
        let report = pass(&mut installer, keeper.as_mut()).await;
        let failed = report.errors.len();
        log_report(&report, &mut Logged::default(), false);
        return if failed == 0 {
            Ok(())
        } else {
            Err(InstallError::Incomplete { failed })
        };
    }

    // Signals and the watch come first, so nothing that happens during the first pass is missed.
    let mut sigterm = signal(SignalKind::terminate()).map_err(InstallError::Runtime)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(InstallError::Runtime)?;
    let (tx, mut events) = mpsc::unbounded_channel::<()>();
    let mut watch = DirWatch::new(tx, watched);
    let publisher = match publish {
        Some(publish) => Some(Publisher::spawn(publish, net_dir_on_node)),
        None => {
            tracing::info!("no --node-name (NODE_NAME): the node's Multus is not published");
            None
        }
    };

    // aux-chain: the node's view of the enabled namespaces, kept beside the loop (a pass never
    // waits for the apiserver); the chain file names it.
    let view =
        keeps_view(installer.settings()).then(|| namespace_view::spawn(installer.settings()));

    let mut logged = Logged::default();
    let mut tick = tokio::time::interval(resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    // A restarted container finds its previous run's file in the emptyDir: not ready until a pass says so.
    status_file.clear();
    loop {
        watch.ensure();
        let mut report = pass(&mut installer, keeper.as_mut()).await;
        // A directory the pass created is watched before the next change can be missed.
        watch.ensure();
        log_report(&report, &mut logged, true);
        status_file.publish(&Status::of(&report));
        // The net dir is re-read on every change and resync: the node's Multus as of now.
        if let Some(publisher) = &publisher {
            let observation = report
                .observed
                .take()
                .unwrap_or_else(|| crate::multus::observe(&observe.0, &observe.1));
            publisher.offer(
                observation,
                report.aux_chain.take(),
                report.iptables.take(),
                keeper.as_ref().and_then(credential::Keeper::held_validity),
                credential::installer_kubeconfig(installer.settings())
                    .map_err(|e| vocab::report::chain(&e)),
            );
        }
        if std::mem::take(&mut first) {
            tracing::info!(every = ?resync, "first pass done; watching for changes");
        }
        tokio::select! {
            _ = sigterm.recv() => { tracing::info!("SIGTERM received"); break; }
            _ = sigint.recv() => { tracing::info!("SIGINT received"); break; }
            Some(()) = events.recv() => {
                tokio::time::sleep(DEBOUNCE).await;
                while events.try_recv().is_ok() {}
                tracing::debug!("files changed: re-checking");
            }
            _ = tick.tick() => {}
        }
    }
    drop(watch);
    status_file.clear();
    // The mode says whether a rollout's SIGTERM removes it too; else only an uninstall does.
    let uninstall = installer.removes_on_rollout()
        || match termination::decide(
            &termination::observe(
                installer.settings(),
                keeper.as_ref().and_then(|k| k.held_token()),
            )
            .await,
        ) {
            Verdict::Uninstall(reason) => {
                tracing::info!(
                    "uninstall: {reason}; removing what {} installed on this node",
                    installer.settings().mode.flags()
                );
                true
            }
            Verdict::Keep(reason) => {
                tracing::info!("not an uninstall: {reason}");
                false
            }
        };
    drop(view);
    let report = installer.terminate(uninstall);
    log_report(&report, &mut Logged::default(), false);
    if uninstall && keeps_view(installer.settings()) {
        remove_view(installer.settings(), |line| tracing::info!("{line}"));
    }
    // Exit 0 even if some cleanup failed (it is logged): a failing preStop/terminate would only make
    // the kubelet retry a pod that is going away.
    Ok(())
}

/// Whether this installer keeps the view of the enabled namespaces: `--attach aux-chain` only.
fn keeps_view(s: &Settings) -> bool {
    s.mode == InstallMode::AuxChain
}

/// The uninstall's removal of the view (only a view: another file of that name stays), said by
/// `say`; a failure is logged and fails nothing (the plugin reads it only from the chain's file).
/// Whether there was anything to say.
fn remove_view(s: &Settings, say: impl Fn(&str)) -> bool {
    match namespace_view::remove(&namespace_view::file(s)) {
        Ok(Some(line)) => {
            say(&format!("{line} (uninstalling)"));
            true
        }
        Ok(None) => false,
        Err(e) => {
            tracing::error!(error = %vocab::report::Chain(&e), "uninstall step failed");
            false
        }
    }
}

/// One pass, with the plugin's token renewed first when it is due (TokenRequest mode).
async fn pass(installer: &mut Installer, keeper: Option<&mut credential::Keeper>) -> Report {
    let mut failure = None;
    if let Some(keeper) = keeper {
        let (token, error) = keeper.refresh(installer.settings()).await;
        installer.set_plugin_token(token);
        failure = error;
    }
    let mut report = installer.pass();
    report.errors.splice(0..0, failure);
    report
}

/// What the loop last logged of the conditions that persist across passes.
#[derive(Default)]
struct Logged {
    errors: Vec<String>,
    waiting: Option<String>,
    warnings: Vec<String>,
}

/// Logs every change with its reason; logs errors at error level when they are new, and at debug
/// while they repeat, so a persistent problem is reported without flooding the log every resync.
/// Why the node is waiting, and warnings, are logged once each time they change.
fn log_report(report: &Report, last: &mut Logged, retrying: bool) {
    for change in &report.changes {
        tracing::info!("{change}");
    }
    let errors: Vec<String> = report
        .errors
        .iter()
        .map(|e| vocab::report::chain(e))
        .collect();
    for error in &errors {
        if last.errors.contains(error) {
            tracing::debug!(error = %error, "still failing; retrying");
        } else if retrying {
            tracing::error!(error = %error, "install step failed; retrying");
        } else {
            tracing::error!(error = %error, "install step failed");
        }
    }
    for gone in last.errors.iter().filter(|e| !errors.contains(e)) {
        tracing::info!(previous = %gone, "resolved");
    }
    last.errors = errors;
    if report.waiting != last.waiting {
        match &report.waiting {
            Some(why) => tracing::warn!(reason = %why, "not installed"),
            None => {
                if let Some(previous) = &last.waiting {
                    tracing::info!(previous = %previous, "no longer waiting");
                }
            }
        }
        last.waiting = report.waiting.clone();
    }
    for warning in report
        .warnings
        .iter()
        .filter(|w| !last.warnings.contains(w))
    {
        tracing::warn!("{warning}");
    }
    last.warnings = report.warnings.clone();
}

/// The `--ready-file` side of the loop. Failing to write it is logged once per kind of failure and
/// otherwise ignored: it costs only readiness, never the node's install.
struct StatusFile {
    path: Option<PathBuf>,
    stale_after: Duration,
    last_error: Option<String>,
}

impl StatusFile {
    fn new(path: Option<PathBuf>, resync: Duration) -> Self {
        StatusFile {
            path,
            stale_after: ready::stale_after(resync),
            last_error: None,
        }
    }

    fn publish(&mut self, status: &Status) {
        if let Some(path) = &self.path {
            Self::outcome(
                &mut self.last_error,
                path,
                ready::publish(path, status, self.stale_after),
            );
        }
    }

    fn clear(&mut self) {
        if let Some(path) = &self.path {
            Self::outcome(&mut self.last_error, path, ready::clear(path).map(drop));
        }
    }

    fn outcome(last: &mut Option<String>, path: &std::path::Path, result: std::io::Result<()>) {
        let error = result.err().map(|e| e.to_string());
        if let Some(e) = error.as_ref().filter(|e| last.as_ref() != Some(*e)) {
            tracing::warn!(path = %path.display(), error = %e, "cannot update the readiness status file; the pod stays unready");
        }
        *last = error;
    }
}

/// inotify watches on the directories, (re)tried every pass: a directory missing at start (the
/// service-account mount, a net dir not yet created, the auxiliary chain's subdirectory) is picked up
/// once it exists, and one deleted and created again (its old watch went with it) is watched anew.
struct DirWatch {
    tx: mpsc::UnboundedSender<()>,
    /// Each directory with the inode it is watched at, `None` while not watched.
    dirs: Vec<(PathBuf, Option<u64>)>,
    watcher: Option<RecommendedWatcher>,
}

impl DirWatch {
    fn new(tx: mpsc::UnboundedSender<()>, dirs: Vec<PathBuf>) -> Self {
        // One watch per directory (the chain's directory is often the net dir).
        let mut unique: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            if !unique.contains(&dir) {
                unique.push(dir);
            }
        }
        DirWatch {
            tx,
            dirs: unique.into_iter().map(|d| (d, None)).collect(),
            watcher: None,
        }
    }

    fn ensure(&mut self) {
        if self.watcher.is_none() {
            let tx = self.tx.clone();
            match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok_and(|e| !e.kind.is_access()) {
                    let _ = tx.send(());
                }
            }) {
                Ok(w) => self.watcher = Some(w),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the file watch; relying on the periodic re-check");
                    return;
                }
            }
        }
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        for (dir, watching) in &mut self.dirs {
            let inode = std::fs::metadata(&*dir)
                .ok()
                .filter(|m| m.is_dir())
                .map(|m| m.ino());
            if inode.is_some() && *watching == inode {
                continue;
            }
            // Gone or replaced, its watch went with the old inode: watch the path anew (no unwatch,
            // the kernel dropped the old watch already).
            *watching = None;
            if inode.is_none() {
                continue;
            }
            match watcher.watch(dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    *watching = inode;
                    tracing::debug!(dir = %dir.display(), "watching");
                }
                Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "cannot watch yet"),
            }
        }
    }
}
