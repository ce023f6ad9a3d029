//! One install pass and the uninstall: the I/O shell around the pure decisions in [`crate::chain`],
//! [`crate::aux_chain`], [`crate::kubeconfig`], [`rules::cni_template`] and [`crate::revert`]. Every
//! write says why in the log.

use crate::args::{ChainMode, Settings, TemplateSource};
use crate::aux_chain::{self, Current, Plan};
use crate::chain::{self, ConfigKind, Outcome};
pub use crate::credential::PluginToken;
use crate::error::InstallError;
use crate::files::{self, BINARY_MODE, CONFIG_MODE, DIR_MODE, KUBECONFIG_MODE};
use crate::revert::{self, Applied, Revert};
use crate::{credential, kubeconfig, multus, primary};
use linkerd_multus_crds::node_multus::{AuxChainFile, NodeIptables};
use rules::cni_template;
use rules::multus_node::Observation;
use std::fs;
use std::path::{Path, PathBuf};
use vocab::PLUGIN_TYPE;

/// Log level used for `__LOG_LEVEL__` when `--cni-log-level` is not given.
const DEFAULT_PLUGIN_LOG_LEVEL: &str = "info";

/// What a pass or the uninstall did.
#[derive(Debug, Default)]
pub struct Report {
    /// One line per change, with its reason.
    pub changes: Vec<String>,
    pub errors: Vec<InstallError>,
    /// Why the node is not installed yet although no step failed (readiness reads it).
    pub waiting: Option<String>,
    /// Doubts that do not stop the install (logged when they change).
    pub warnings: Vec<String>,
    /// The node's Multus as this pass read it (`aux-chain` and `none` modes), so the publisher need
    /// not re-read.
    pub observed: Option<Observation>,
    /// `aux-chain` mode: linkerd-cni's file in the chain, as published in the node's NodeMultus.
    pub aux_chain: Option<AuxChainFile>,
    /// The pods' rules backend on this node, as published; None without a usable template.
    pub iptables: Option<NodeIptables>,
}

/// What the `aux-chain` step found and did.
#[derive(Debug, Default)]
struct AuxStep {
    change: Option<String>,
    refusal: Option<String>,
    warning: Option<String>,
}

/// The installer's state between passes: what it wrote to the primary config.
#[derive(Debug)]
pub struct Installer {
    settings: Settings,
    applied: Option<Applied>,
    /// Identities of the source and installed binaries when they were last found equal: while both
    /// are unchanged, a pass does not re-read them (a debug build of the plugin is 150 MB).
    binary_verified: Option<(files::Identity, files::Identity)>,
    plugin_token: PluginToken,
}

impl Installer {
    pub fn new(settings: Settings) -> Self {
        Installer {
            settings,
            applied: None,
            binary_verified: None,
            plugin_token: PluginToken::FromServiceAccountDir,
        }
    }

    /// What the next passes write as the plugin's token.
    pub fn set_plugin_token(&mut self, token: PluginToken) {
        self.plugin_token = token;
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Brings the node to the installed state. The network config is only patched once the binary
    /// and the kubeconfig are in place: a chain naming a plugin that cannot run would fail every new
    /// pod on the node.
    pub fn pass(&mut self) -> Report {
        let mut report = Report::default();
        let binary = self.ensure_binary();
        let kubeconfig = self.ensure_kubeconfig();
        let ready = binary.is_ok() && kubeconfig.is_ok();
        for step in [binary, kubeconfig] {
            match step {
                Ok(Some(change)) => report.changes.push(change),
                Ok(None) => {}
                Err(e) => report.errors.push(e),
            }
        }
        if self.settings.chain_mode == ChainMode::Append && ready {
            match self.ensure_chained() {
                Ok(Some(changes)) => report.changes.extend(changes),
                Ok(None) => {
                    report.waiting = Some(format!(
                        "no primary network config in {} yet to chain linkerd-cni onto",
                        self.settings.net_dir.display()
                    ))
                }
                Err(e) => report.errors.push(e),
            }
        }
        report.iptables = self.entry().ok().map(|entry| self.iptables_backend(&entry));
        if self.settings.chain_mode == ChainMode::None {
            // NADs need the node's Multus: a directory with no network config at all is said, never
            // published as a silent "no Multus" (the runtime may read another directory).
            let observation =
                multus::observe(&self.settings.net_dir, &self.settings.kubeconfig_name);
            if observation == (Observation::NoMultus { primary: None }) {
                report
                    .warnings
                    .push(aux_chain::no_network_config(&self.settings.net_dir_on_node));
            }
            report.observed = Some(observation);
        }
        if self.settings.chain_mode == ChainMode::AuxChain {
            self.aux_chain_pass(ready, &mut report);
        } else {
            self.remove_aux_chain_leftover(&mut report);
        }
        report
    }

    /// Outside `aux-chain` mode (switched back to NADs, say), linkerd-cni's file left in the chain
    /// directory goes: Multus would run linkerd-cni from it for every pod, besides the NAD.
    fn remove_aux_chain_leftover(&self, report: &mut Report) {
        let file = self.settings.aux_chain.file();
        let Ok(bytes) = fs::read(&file) else {
            return;
        };
        if !aux_chain::is_leftover_of_ours(&bytes) {
            return;
        }
        match files::remove_optional(&file) {
            Ok(true) => report.changes.push(format!(
                "removed {} (left from --chain-mode aux-chain; in {} mode Multus would run linkerd-cni from it a second time)",
                file.display(),
                self.settings.chain_mode.name()
            )),
            Ok(false) => {}
            Err(source) => report.errors.push(InstallError::Remove { path: file, source }),
        }
    }

    /// `aux-chain` mode's part of a pass: the chain file once the binary and the kubeconfig are in
    /// place (Multus runs every file of the chain for every pod, so one naming a plugin that cannot
    /// run would fail them all), and what to publish about it.
    fn aux_chain_pass(&self, ready: bool, report: &mut Report) {
        let aux = &self.settings.aux_chain;
        let mut status = AuxChainFile {
            name: aux.target.name.clone(),
            file: aux.target.file_on_node().to_string_lossy().into_owned(),
            installed: false,
            reason: None,
        };
        if !ready {
            status.reason = Some(format!(
                "the plugin binary or its kubeconfig is not in place: {}",
                report
                    .errors
                    .iter()
                    .map(|e| vocab::report::chain(e))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
            report.aux_chain = Some(status);
            return;
        }
        let observation = multus::observe(&self.settings.net_dir, &self.settings.kubeconfig_name);
        match self.ensure_aux_chain(&observation) {
            Ok(step) => {
                report.changes.extend(step.change);
                status.installed = step.refusal.is_none();
                status.reason = step.refusal.clone().or(step.warning.clone());
                report.waiting = step.refusal;
                report.warnings.extend(step.warning);
            }
            Err(e) => {
                status.reason = Some(vocab::report::chain(&e));
                report.errors.push(e);
            }
        }
        report.observed = Some(observation);
        report.aux_chain = Some(status);
    }

    /// SIGTERM: in `append` mode removes what the installer added (see [`Self::remove_installed`]).
    /// In `none` and `aux-chain` modes only on an `uninstall` ([`crate::termination`]); on a rollout
    /// it removes nothing: every NAD points at the binary and the kubeconfig, and without the chain
    /// file pods started during the rollout would run unmeshed, without the binary or the kubeconfig
    /// it names Multus would fail them.
    pub fn terminate(&mut self, uninstall: bool) -> Report {
        let s = &self.settings;
        let binary = s.bin_dir.join(PLUGIN_TYPE);
        let kubeconfig = s.net_dir.join(&s.kubeconfig_name);
        match s.chain_mode {
            ChainMode::Append => return self.remove_installed(),
            _ if uninstall => return self.remove_installed(),
            ChainMode::None => tracing::info!(
                binary = %binary.display(),
                kubeconfig = %kubeconfig.display(),
                "--chain-mode none: leaving the plugin binary and its kubeconfig in place (NADs point at them)"
            ),
            ChainMode::AuxChain => tracing::info!(
                binary = %binary.display(),
                kubeconfig = %kubeconfig.display(),
                chain_file = %s.aux_chain.file().display(),
                "--chain-mode aux-chain: leaving the plugin binary, its kubeconfig and the chain file in place (a rollout must not start pods unmeshed or failing)"
            ),
        }
        Report::default()
    }

    /// Removes what `--chain-mode` installs: in `append` mode its entry in network configs (the
    /// original bytes when nobody else changed the file since), in `aux-chain` mode linkerd-cni's
    /// file in the chain directory (nothing else there); then the kubeconfig, and the binary if
    /// asked to. SIGTERM in `append` mode and on an uninstall, and `--uninstall` in any mode. The
    /// binary stays by default: the runtime still runs its DEL for the pods it set up (DEL reads no
    /// kubeconfig, so that one can go).
    pub fn remove_installed(&mut self) -> Report {
        let mut report = Report::default();
        match self.settings.chain_mode {
            ChainMode::Append => {
                if let Err(e) = self.unchain(&mut report.changes) {
                    report.errors.push(e);
                }
            }
            ChainMode::AuxChain => {
                let file = self.settings.aux_chain.file();
                match files::remove_optional(&file) {
                    Ok(true) => report
                        .changes
                        .push(format!("removed {} (uninstalling)", file.display())),
                    Ok(false) => {}
                    Err(source) => {
                        // The file stays, naming the plugin: so do the binary and the kubeconfig,
                        // or Multus would fail every pod's ADD on the node.
                        report
                            .errors
                            .push(InstallError::Remove { path: file, source });
                        return report;
                    }
                }
            }
            ChainMode::None => {}
        }
        let kubeconfig = self.settings.net_dir.join(&self.settings.kubeconfig_name);
        match files::remove_optional(&kubeconfig) {
            Ok(true) => report
                .changes
                .push(format!("removed {} (uninstalling)", kubeconfig.display())),
            Ok(false) => {}
            Err(source) => report.errors.push(InstallError::Remove {
                path: kubeconfig,
                source,
            }),
        }
        if self.settings.uninstall_binary {
            let binary = self.settings.bin_dir.join(PLUGIN_TYPE);
            match files::remove_optional(&binary) {
                Ok(true) => report.changes.push(format!(
                    "removed {} (uninstalling, --uninstall-binary)",
                    binary.display()
                )),
                Ok(false) => {}
                Err(source) => report.errors.push(InstallError::Remove {
                    path: binary,
                    source,
                }),
            }
        }
        report
    }

    // === steps ===

    fn ensure_binary(&mut self) -> Result<Option<String>, InstallError> {
        let source = &self.settings.plugin_binary;
        let dest = self.settings.bin_dir.join(PLUGIN_TYPE);
        let identities = files::identity(source).zip(files::identity(&dest));
        if identities.is_some() && identities == self.binary_verified {
            return Ok(None);
        }
        self.binary_verified = None;
        let bytes = fs::read(source).map_err(|e| InstallError::ReadPluginBinary {
            path: source.clone(),
            source: e,
        })?;
        let reason = match files::read_optional(&dest) {
            Ok(Some(current)) if current == bytes => {
                if files::mode_of(&dest) == Some(BINARY_MODE) {
                    self.binary_verified = files::identity(source).zip(files::identity(&dest));
                    return Ok(None);
                }
                "it was not mode 0755"
            }
            Ok(Some(_)) => "it differed from this installer's version",
            Ok(None) => "it was missing",
            Err(_) => "it was unreadable",
        };
        files::atomic_write(&dest, &bytes, BINARY_MODE).map_err(|source| InstallError::Write {
            path: dest.clone(),
            source,
        })?;
        self.binary_verified = files::identity(source).zip(files::identity(&dest));
        Ok(Some(format!(
            "installed {} from {} ({reason})",
            dest.display(),
            source.display()
        )))
    }

    fn ensure_kubeconfig(&self) -> Result<Option<String>, InstallError> {
        let s = &self.settings;
        let read_sa = |name: &str| credential::read_service_account(s, name);
        let token = match &self.plugin_token {
            PluginToken::Issued(token) => token.clone(),
            PluginToken::Missing { service_account } => {
                return Err(InstallError::NoPluginToken {
                    service_account: service_account.clone(),
                })
            }
            PluginToken::FromServiceAccountDir => {
                let token_path = s.service_account_dir.join("token");
                let token = String::from_utf8_lossy(&read_sa("token")?)
                    .trim()
                    .to_string();
                if token.is_empty() {
                    return Err(InstallError::EmptyToken { path: token_path });
                }
                token
            }
        };
        let ca = read_sa("ca.crt")?;
        let (host, port) = s.service_address()?;
        let text = kubeconfig::render(&kubeconfig::server_url(host, port), &token, &ca);
        let path = s.net_dir.join(&s.kubeconfig_name);
        let reason = match files::read_optional(&path) {
            Ok(Some(current)) if current == text.as_bytes() => {
                if files::mode_of(&path) == Some(KUBECONFIG_MODE) {
                    return Ok(None);
                }
                "it was not mode 0600"
            }
            Ok(Some(_)) => "the token, CA or apiserver address changed",
            Ok(None) => "it was missing",
            Err(_) => "it was unreadable",
        };
        files::atomic_write(&path, text.as_bytes(), KUBECONFIG_MODE).map_err(|source| {
            InstallError::Write {
                path: path.clone(),
                source,
            }
        })?;
        Ok(Some(format!(
            "wrote kubeconfig {} ({reason})",
            path.display()
        )))
    }

    /// `aux-chain` mode: linkerd-cni's file in the chain directory holds its config while the node's
    /// Multus runs the chain; otherwise nothing is written and a file already there stays.
    fn ensure_aux_chain(&self, observation: &Observation) -> Result<AuxStep, InstallError> {
        let aux = &self.settings.aux_chain;
        let desired = aux_chain::render(&aux_chain::mark(self.entry()?));
        let path = aux.file();
        let current = match files::read_optional(&path) {
            Ok(None) => Current::Missing,
            Ok(Some(bytes)) => Current::Present {
                bytes,
                mode: files::mode_of(&path),
            },
            Err(e) => Current::Unreadable(e.to_string()),
        };
        let plan = aux_chain::decide(
            &aux.target,
            &self.settings.net_dir_on_node,
            observation,
            &current,
            &desired,
        );
        let mut step = AuxStep::default();
        match plan {
            Plan::Refuse { reason } => step.refusal = Some(reason),
            Plan::Install { write, warning } => {
                step.warning = warning;
                if let Some(reason) = write {
                    let subdir = aux.subdir();
                    let created = files::ensure_dir(&subdir, DIR_MODE).map_err(|source| {
                        InstallError::CreateDir {
                            path: subdir.clone(),
                            source,
                        }
                    })?;
                    files::atomic_write(&path, &desired, CONFIG_MODE).map_err(|source| {
                        InstallError::Write {
                            path: path.clone(),
                            source,
                        }
                    })?;
                    let created = if created {
                        ", creating its directory"
                    } else {
                        ""
                    };
                    step.change = Some(format!(
                        "wrote linkerd-cni's config into Multus' auxiliary chain {} ({reason}{created})",
                        path.display()
                    ));
                }
            }
        }
        Ok(step)
    }

    /// `None` when there is no primary network config to chain onto.
    fn ensure_chained(&mut self) -> Result<Option<Vec<String>>, InstallError> {
        let mut changes = Vec::new();
        let dir = self.settings.net_dir.clone();
        let names = files::file_names(&dir).map_err(|source| InstallError::ReadDir {
            path: dir.clone(),
            source,
        })?;
        let Some((name, kind)) = primary::pick(
            names.iter().map(String::as_str),
            &self.settings.kubeconfig_name,
        ) else {
            // Nothing to chain onto yet: the primary network's installer has not run. Not an error;
            // the watch picks the file up when it appears.
            self.applied = None;
            return Ok(None);
        };
        let path = dir.join(name);
        // A different file became the primary (a new one sorts first): our entry in the old one is
        // dead weight the runtime no longer reads, so take it out before chaining onto the new one.
        if let Some(old) = self
            .applied
            .take_if(|a| a.path != path && a.original.as_ref().map(|o| &o.0) != Some(&path))
        {
            self.revert_applied(
                &old,
                "it is no longer the primary network config",
                &mut changes,
            )?;
        }
        let current = fs::read(&path).map_err(|source| InstallError::ReadFile {
            path: path.clone(),
            source,
        })?;
        if !self.settings.force_append_to_multus {
            if let Some(found) = chain::multus_type(&current) {
                return Err(InstallError::MultusPrimary { path, found });
            }
        }
        let entry = self.entry()?;
        let outcome =
            chain::append(&current, kind, &entry).map_err(|source| InstallError::Unparseable {
                path: path.clone(),
                source,
            })?;
        let mode = files::mode_of(&path).unwrap_or(CONFIG_MODE);
        match outcome {
            Outcome::Unchanged => {}
            Outcome::Rewritten(bytes) => {
                let reason = if chain::contains_ours(&current) {
                    "its linkerd-cni entry was outdated or duplicated"
                } else if self.applied.as_ref().is_some_and(|a| a.path == path) {
                    "it was rewritten by someone else without linkerd-cni"
                } else {
                    "linkerd-cni must run last in the primary network's chain"
                };
                let original = self.original_for(&path, &current);
                files::atomic_write(&path, &bytes, mode).map_err(|source| InstallError::Write {
                    path: path.clone(),
                    source,
                })?;
                changes.push(format!(
                    "appended linkerd-cni to {} ({reason})",
                    path.display()
                ));
                self.applied = Some(Applied {
                    path,
                    written: bytes,
                    original,
                });
            }
            Outcome::Converted(bytes) => {
                let list = dir.join(primary::list_name(name));
                // Our own earlier conversion may be overwritten (the primary's installer rewrote its
                // `.conf`); anyone else's `.conflist` may not.
                let ours = self.applied.as_ref().is_some_and(|a| a.path == list);
                if list.exists() && !ours {
                    return Err(InstallError::ConvertTargetExists {
                        from: path,
                        to: list,
                    });
                }
                files::atomic_write(&list, &bytes, mode).map_err(|source| InstallError::Write {
                    path: list.clone(),
                    source,
                })?;
                files::remove_optional(&path).map_err(|source| InstallError::Remove {
                    path: path.clone(),
                    source,
                })?;
                changes.push(format!(
                    "converted {} into {} with linkerd-cni last (a single-plugin config cannot chain)",
                    path.display(),
                    list.display()
                ));
                self.applied = Some(Applied {
                    path: list,
                    written: bytes,
                    original: Some((path, current)),
                });
            }
        }
        Ok(Some(changes))
    }

    // === helpers ===

    /// The backend the plugin uses on this node for `entry`'s `linkerd.iptables-mode`: with `auto`
    /// decided as the plugin decides it ([`rules::backend_choice`]), from the node's binary
    /// directories under `--node-root` and the legacy tables of this (the node's: hostNetwork)
    /// network namespace.
    fn iptables_backend(&self, entry: &serde_json::Value) -> NodeIptables {
        use rules::backend_choice::{self as choice, NodeNetfilter};
        let configured = entry
            .pointer("/linkerd/iptables-mode")
            .and_then(|m| m.as_str())
            .filter(|m| !m.is_empty())
            .unwrap_or(choice::AUTO)
            .to_string();
        if configured != choice::AUTO {
            return NodeIptables {
                backend: configured.clone(),
                configured,
                reason: None,
            };
        }
        let dirs: Vec<PathBuf> = choice::SBIN_DIRS
            .iter()
            .map(|d| self.settings.node_root.join(d.trim_start_matches('/')))
            .collect();
        let find = |name: &str| dirs.iter().any(|d| d.join(name).is_file());
        let node = NodeNetfilter {
            binaries: choice::BINARIES
                .iter()
                .filter(|(_, restore, save)| find(restore) && find(save))
                .map(|(b, _, _)| *b)
                .collect(),
            legacy_tables: fs::read_to_string(choice::IP_TABLES_NAMES)
                .map(|t| choice::parse_ip_tables_names(&t))
                .unwrap_or_default(),
        };
        let chosen = choice::choose(&node);
        NodeIptables {
            configured,
            backend: chosen.backend.as_str().to_string(),
            reason: Some(chosen.reason),
        }
    }

    /// The bytes to restore on uninstall. A file that already held our entry (rewritten with an
    /// outdated one) keeps the original remembered from before, if any.
    fn original_for(&self, path: &Path, current: &[u8]) -> Option<(PathBuf, Vec<u8>)> {
        if !chain::contains_ours(current) {
            return Some((path.to_path_buf(), current.to_vec()));
        }
        self.applied
            .as_ref()
            .filter(|a| a.path == path)
            .and_then(|a| a.original.clone())
    }

    /// The plugin entry: the template (re-read when it is a file) with placeholders filled.
    fn entry(&self) -> Result<serde_json::Value, InstallError> {
        let s = &self.settings;
        let text = match &s.template {
            TemplateSource::Text(text) => text.clone(),
            TemplateSource::File(path) => {
                fs::read_to_string(path).map_err(|source| InstallError::ReadTemplate {
                    path: path.clone(),
                    source,
                })?
            }
            TemplateSource::Default => cni_template::default_template(),
        };
        let (host, port) = s.service_address()?;
        let values = cni_template::Values {
            kubeconfig_path: &s.kubeconfig_node_path,
            log_level: s
                .log_level_override
                .as_deref()
                .unwrap_or(DEFAULT_PLUGIN_LOG_LEVEL),
            service_host: host,
            service_port: port,
        };
        let entry = cni_template::render(&text, &values, s.log_level_override.as_deref())?;
        let leftover = cni_template::placeholders(&entry.to_string())
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        if !leftover.is_empty() {
            tracing::warn!(?leftover, "the CNI network config template has placeholders this installer does not fill; the plugin sees them literally");
        }
        Ok(entry)
    }

    fn unchain(&mut self, changes: &mut Vec<String>) -> Result<(), InstallError> {
        if let Some(applied) = self.applied.take() {
            self.revert_applied(&applied, "uninstalling", changes)?;
        }
        // Entries this process did not write (left by an earlier run that was killed) come out too.
        let dir = &self.settings.net_dir;
        let names = files::file_names(dir).map_err(|source| InstallError::ReadDir {
            path: dir.clone(),
            source,
        })?;
        for name in names
            .iter()
            .filter(|n| primary::kind_of(n) == Some(ConfigKind::List))
        {
            let path = dir.join(name);
            let Ok(Some(current)) = files::read_optional(&path) else {
                continue;
            };
            if let Ok(plan) = revert::strip(path.clone(), &current) {
                self.execute(plan, "uninstalling; entry left by an earlier run", changes)?;
            }
        }
        Ok(())
    }

    fn revert_applied(
        &self,
        applied: &Applied,
        why: &str,
        changes: &mut Vec<String>,
    ) -> Result<(), InstallError> {
        let current =
            files::read_optional(&applied.path).map_err(|source| InstallError::ReadFile {
                path: applied.path.clone(),
                source,
            })?;
        let plan = revert::plan(applied, current.as_deref()).map_err(|source| {
            InstallError::Unparseable {
                path: applied.path.clone(),
                source,
            }
        })?;
        self.execute(plan, why, changes)
    }

    fn execute(
        &self,
        plan: Revert,
        why: &str,
        changes: &mut Vec<String>,
    ) -> Result<(), InstallError> {
        match plan {
            Revert::Nothing => {}
            Revert::Restore {
                write,
                bytes,
                remove,
            } => {
                let mode = remove
                    .as_deref()
                    .or(Some(&write))
                    .and_then(files::mode_of)
                    .unwrap_or(CONFIG_MODE);
                files::atomic_write(&write, &bytes, mode).map_err(|source| {
                    InstallError::Write {
                        path: write.clone(),
                        source,
                    }
                })?;
                if let Some(remove) = &remove {
                    files::remove_optional(remove).map_err(|source| InstallError::Remove {
                        path: remove.clone(),
                        source,
                    })?;
                }
                changes.push(format!(
                    "restored the original {} ({why}; nobody else changed it)",
                    write.display()
                ));
            }
            Revert::Strip { path, bytes } => {
                let mode = files::mode_of(&path).unwrap_or(CONFIG_MODE);
                files::atomic_write(&path, &bytes, mode).map_err(|source| InstallError::Write {
                    path: path.clone(),
                    source,
                })?;
                changes.push(format!(
                    "removed linkerd-cni from {} ({why})",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}
