//! `--chain-mode append`: linkerd-cni as the last plugin of the primary network config (plain
//! clusters, as Linkerd's own installer does). Removed on every SIGTERM: the original bytes when
//! nobody else changed the file since.

use super::mode::{self, Mode};
use super::Report;
use crate::args::Settings;
use crate::chain::{self, ConfigKind, Outcome};
use crate::error::InstallError;
use crate::files::{self, CONFIG_MODE};
use crate::ownership;
use crate::primary;
use crate::revert::{self, Applied, Revert};
use std::fs;
use std::path::{Path, PathBuf};

/// What this process wrote to the primary config.
#[derive(Debug, Default)]
pub(super) struct Append {
    applied: Option<Applied>,
}

impl Mode for Append {
    fn pass(&mut self, s: &Settings, ready: bool, report: &mut Report) {
        if ready {
            match self.ensure_chained(s) {
                Ok(Some(changes)) => report.changes.extend(changes),
                Ok(None) => {
                    report.waiting = Some(format!(
                        "no primary network config in {} yet to chain linkerd-cni onto",
                        s.net_dir.display()
                    ))
                }
                Err(e) => report.errors.push(e),
            }
        }
        mode::remove_aux_chain_leftover(s, report);
    }

    /// No Multus reads the binary from a NAD here: the entry goes with the installer, as Linkerd's.
    fn removes_on_rollout(&self) -> bool {
        true
    }

    fn log_kept(&self, _s: &Settings) {}

    fn remove(&mut self, s: &Settings, report: &mut Report) -> bool {
        if let Err(e) = self.unchain(s, &mut report.changes, &mut report.warnings) {
            report.errors.push(e);
        }
        true
    }
}

impl Append {
    /// `None` when there is no primary network config to chain onto.
    fn ensure_chained(&mut self, s: &Settings) -> Result<Option<Vec<String>>, InstallError> {
        let mut changes = Vec::new();
        let dir = s.net_dir.clone();
        let names = files::file_names(&dir).map_err(|source| InstallError::ReadDir {
            path: dir.clone(),
            source,
        })?;
        let Some((name, kind)) =
            primary::pick(names.iter().map(String::as_str), &s.kubeconfig_name)
        else {
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
        if !s.force_append_to_multus {
            if let Some(found) = chain::multus_type(&current) {
                return Err(InstallError::MultusPrimary { path, found });
            }
        }
        // Marked as this installer's: the uninstall takes out only marked entries.
        let entry = ownership::mark_entry(super::entry(s)?);
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

    /// Takes this installer's entries out; another's linkerd-cni entry stays, said in `kept`.
    fn unchain(
        &mut self,
        s: &Settings,
        changes: &mut Vec<String>,
        kept: &mut Vec<String>,
    ) -> Result<(), InstallError> {
        if let Some(applied) = self.applied.take() {
            self.revert_applied(&applied, "uninstalling", changes)?;
        }
        // Entries this process did not write (left by an earlier run that was killed) come out too.
        let dir = &s.net_dir;
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
            let foreign = chain::foreign_entries(&current);
            if foreign > 0 {
                kept.push(format!(
                    "kept {foreign} linkerd-cni entr{} in {}: without this installer's mark \
                     \"{}\", so another installer (Linkerd's own appends one) wrote {}; an \
                     uninstall removes only what this installer wrote",
                    if foreign == 1 { "y" } else { "ies" },
                    path.display(),
                    ownership::ENTRY_MARK_KEY,
                    if foreign == 1 { "it" } else { "them" },
                ));
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
