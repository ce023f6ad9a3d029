//! One install pass and the uninstall: the I/O shell around the pure decisions in [`crate::chain`],
//! [`crate::aux_chain`], [`crate::kubeconfig`], [`rules::cni_template`] and [`crate::revert`]. Every
//! mode installs the plugin binary and its kubeconfig; what `--chain-mode` adds on top is a [`Mode`]
//! ([`append`], [`nad`], [`aux`]), as the plugin's rule backends are each a `Backend`. Every write
//! says why in the log.

mod append;
mod aux;
mod mode;
mod nad;

use crate::args::{InstallMode, Settings, TemplateSource};
use crate::credential;
pub use crate::credential::PluginToken;
use crate::error::InstallError;
use crate::files::{self, BINARY_MODE, KUBECONFIG_MODE};
use crate::kubeconfig;
use crate::ownership::{self, Owner};
use linkerd_multus_crds::node_multus::{AuxChainFile, NodeIptables};
use mode::Mode;
use rules::cni_template;
use rules::multus_node::Observation;
use std::fs;
use std::path::Path;
use vocab::{LINKERD_KUBECONFIG_NAME, PLUGIN_TYPE};

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

/// The installer's state between passes: what it wrote to the primary config.
#[derive(Debug)]
pub struct Installer {
    settings: Settings,
    /// What `--chain-mode` adds, with its own state between passes.
    mode: Box<dyn Mode>,
    /// Identities of the source and installed binaries when they were last found equal: while both
    /// are unchanged, a pass does not re-read them (a debug build of the plugin is 150 MB).
    binary_verified: Option<(files::Identity, files::Identity)>,
    plugin_token: PluginToken,
}

impl Installer {
    pub fn new(settings: Settings) -> Self {
        Installer {
            mode: mode_of(&settings),
            settings,
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
        report.iptables = entry(&self.settings)
            .ok()
            .map(|entry| self.iptables_backend(&entry));
        self.mode.pass(&self.settings, ready, &mut report);
        report
    }

    /// Whether SIGTERM removes what the mode installed on a rollout too (`append`), so that
    /// [`crate::termination`] need not be asked.
    pub fn removes_on_rollout(&self) -> bool {
        self.mode.removes_on_rollout()
    }

    /// SIGTERM: in `append` mode removes what the installer added (see [`Self::remove_installed`]).
    /// In `none` and `aux-chain` modes only on an `uninstall` ([`crate::termination`]); on a rollout
    /// it removes nothing: every NAD points at the binary and the kubeconfig, and without the chain
    /// file pods started during the rollout would run unmeshed, without the binary or the kubeconfig
    /// it names Multus would fail them.
    pub fn terminate(&mut self, uninstall: bool) -> Report {
        if uninstall || self.mode.removes_on_rollout() {
            return self.remove_installed();
        }
        self.mode.log_kept(&self.settings);
        Report::default()
    }

    /// Removes what `--chain-mode` installs: in `append` mode its entry in network configs (the
    /// original bytes when nobody else changed the file since), in `aux-chain` mode linkerd-cni's
    /// file in the chain directory (nothing else there); then the kubeconfig, and the binary if
    /// asked to. SIGTERM in `append` mode and on an uninstall, and `--uninstall` in any mode. The
    /// binary stays by default: the runtime still runs its DEL for the pods it set up (DEL reads no
    /// kubeconfig, so that one can go). Each file goes only when this installer wrote it
    /// ([`crate::ownership`]); another's stays, and a warning says why.
    pub fn remove_installed(&mut self) -> Report {
        let mut report = Report::default();
        if !self.mode.remove(&self.settings, &mut report) {
            return report;
        }
        let s = &self.settings;
        remove_if_ours(
            &s.net_dir.join(&s.kubeconfig_name),
            "uninstalling",
            ownership::kubeconfig,
            &mut report,
        );
        // This installer's default name before it had its own is Linkerd's: a kubeconfig there is
        // ours only with our mark (written by an earlier version), else Linkerd's installer's.
        if s.kubeconfig_name != LINKERD_KUBECONFIG_NAME {
            remove_if_ours(
                &s.net_dir.join(LINKERD_KUBECONFIG_NAME),
                "uninstalling; an earlier version of this installer wrote it under its old default name",
                ownership::kubeconfig,
                &mut report,
            );
        }
        if s.uninstall_binary {
            let source = &s.plugin_binary;
            remove_if_ours(
                &s.bin_dir.join(PLUGIN_TYPE),
                "uninstalling, --uninstall-binary",
                |installed| {
                    let ours = fs::read(source)
                        .map_err(|e| format!("cannot read {}: {e}", source.display()));
                    ownership::binary(installed, ours.as_deref().map_err(Clone::clone))
                },
                &mut report,
            );
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

    // === helpers ===

    /// The backend the plugin uses on this node for `entry`'s `linkerd.iptables-mode`: with `auto`
    /// decided as the plugin decides it ([`rules::backend_choice`]), from the node's binary
    /// directories under `--node-root` and the legacy tables of this (the node's: hostNetwork)
    /// network namespace.
    pub(crate) fn iptables_backend(&self, entry: &serde_json::Value) -> NodeIptables {
        use rules::backend_choice::{self as choice, IptablesMode, NodeNetfilter};
        let value = entry
            .pointer("/linkerd/iptables-mode")
            .and_then(|m| m.as_str());
        match IptablesMode::from_config(value) {
            Ok(IptablesMode::Auto) => {}
            // A fixed mode is the backend; one the plugin refuses is published as written.
            fixed => {
                let name = fixed.map_or_else(
                    |_| value.unwrap_or_default().to_string(),
                    |m| m.as_str().to_string(),
                );
                return NodeIptables {
                    configured: name.clone(),
                    backend: name,
                    reason: None,
                };
            }
        }
        let node = NodeNetfilter::under(
            &self.settings.node_root,
            Path::is_file,
            fs::read_to_string(choice::IP_TABLES_NAMES).ok().as_deref(),
        );
        let chosen = choice::choose(&node);
        NodeIptables {
            configured: choice::AUTO.to_string(),
            backend: chosen.backend.as_str().to_string(),
            reason: Some(chosen.reason),
        }
    }
}

/// Removes `path` when `judge` finds it this installer's ([`crate::ownership`]), saying `why` in the
/// report's change; someone else's file stays, and a warning says why. False when it could not be
/// read or removed (an error in the report): what still names the plugin must then stay too.
fn remove_if_ours(
    path: &Path,
    why: &str,
    judge: impl FnOnce(&[u8]) -> Owner,
    report: &mut Report,
) -> bool {
    let bytes = match files::read_optional(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return true,
        Err(source) => {
            report.errors.push(InstallError::ReadFile {
                path: path.to_path_buf(),
                source,
            });
            return false;
        }
    };
    if let Owner::Foreign(reason) = judge(&bytes) {
        report.warnings.push(format!(
            "kept {}: {reason}; an uninstall removes only what this installer wrote",
            path.display()
        ));
        return true;
    }
    match files::remove_optional(path) {
        Ok(true) => report
            .changes
            .push(format!("removed {} ({why})", path.display())),
        Ok(false) => {}
        Err(source) => {
            report.errors.push(InstallError::Remove {
                path: path.to_path_buf(),
                source,
            });
            return false;
        }
    }
    true
}

/// The [`Mode`] doing the resolved mode's part.
fn mode_of(s: &Settings) -> Box<dyn Mode> {
    match s.mode {
        InstallMode::Append => Box::<append::Append>::default(),
        InstallMode::Nad => Box::new(nad::Nad),
        InstallMode::AuxChain => Box::new(aux::AuxChain),
    }
}

/// The plugin entry: the template (re-read when it is a file) with placeholders filled.
fn entry(s: &Settings) -> Result<serde_json::Value, InstallError> {
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
    let mut entry = cni_template::render(&text, &values, s.log_level_override.as_deref())?;
    kubeconfig::name_in(&mut entry, &s.kubeconfig_node_path);
    let leftover = cni_template::placeholders(&entry.to_string())
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    if !leftover.is_empty() {
        tracing::warn!(?leftover, "the CNI network config template has placeholders this installer does not fill; the plugin sees them literally");
    }
    Ok(entry)
}
