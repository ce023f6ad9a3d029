//! Running `iptables-restore` / `iptables-save` of the configured flavour.
//!
//! One `iptables-restore --noflush` per family applies a whole plan atomically (Linkerd's own
//! plugin execs iptables once per rule). `--noflush` keeps every chain we do not declare intact.
//! Reading back uses the `-save` of the same flavour: legacy and nft do not see each other's rules.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::plan::iptables::{failed_creating_a_chain, NatTable, Rules};
use crate::plan::Family;

/// `linkerd.iptables-mode`: owned by [`rules::backend_choice`] (names, parsing, default `auto`,
/// decided per node at each call by [`crate::backend`] with [`probe_node`]).
pub use rules::backend_choice::IptablesMode;

/// What the node under `root` shows for `auto` ([`rules::backend_choice::NodeNetfilter::from_node`]):
/// the binaries in its [`rules::backend_choice::SBIN_DIRS`] (not `$PATH`, which the installer
/// cannot see), and the legacy x_tables listed in `ip_tables_names` (read in the node's network
/// namespace). The installer reads its node the same way under `--node-root`.
pub fn probe_node(root: &Path, ip_tables_names: &Path) -> rules::backend_choice::NodeNetfilter {
    rules::backend_choice::NodeNetfilter::under(
        root,
        Path::is_file,
        std::fs::read_to_string(ip_tables_names).ok().as_deref(),
    )
}

/// Flavours to try, in order, when a binary is missing: nft → plain → legacy.
fn fallbacks(mode: IptablesMode) -> &'static [IptablesMode] {
    match mode {
        IptablesMode::Nft => &[IptablesMode::Nft, IptablesMode::Plain, IptablesMode::Legacy],
        IptablesMode::Plain => &[IptablesMode::Plain, IptablesMode::Legacy],
        IptablesMode::Legacy => &[IptablesMode::Legacy, IptablesMode::Plain],
        // Never falls back to binaries: the point of the mode is a node without them. Auto is
        // decided before (`backend::select`).
        IptablesMode::Nftables | IptablesMode::Auto => &[],
    }
}

/// The restore and save binary names of a flavour.
fn binaries(mode: IptablesMode, family: Family) -> (String, String) {
    let base = match family {
        Family::V4 => "iptables",
        Family::V6 => "ip6tables",
    };
    let infix = match mode {
        IptablesMode::Legacy => "-legacy",
        IptablesMode::Nft => "-nft",
        // Nftables has no fallbacks, so it never gets here.
        IptablesMode::Plain | IptablesMode::Nftables | IptablesMode::Auto => "",
    };
    (
        format!("{base}{infix}-restore"),
        format!("{base}{infix}-save"),
    )
}

#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    #[error("no {family} iptables binaries for mode {mode}: tried {tried}")]
    Missing {
        family: &'static str,
        mode: &'static str,
        tried: String,
    },
    #[error("cannot run {bin}")]
    Spawn {
        bin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{bin} failed ({status}): {stderr}")]
    Failed {
        bin: String,
        status: String,
        stderr: String,
    },
}

/// The binaries for one family, found on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub family: Family,
    /// The flavour actually used (after fallback).
    pub mode: IptablesMode,
    pub restore: PathBuf,
    pub save: PathBuf,
    pub use_wait_flag: bool,
}

/// Where binaries are looked for: `$PATH`, then the sbin directories a kubelet's minimal
/// environment may lack.
pub fn search_path() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for d in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let d = PathBuf::from(d);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Finds the tools for `mode`, falling back when a flavour's binaries are missing (logged, since
/// rules written by another flavour are invisible to this one).
pub fn resolve(
    mode: IptablesMode,
    family: Family,
    use_wait_flag: bool,
    dirs: &[PathBuf],
) -> Result<Tools, IptablesError> {
    let find = |name: &str| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file());
    let mut tried = Vec::new();
    for flavour in fallbacks(mode) {
        let (restore, save) = binaries(*flavour, family);
        if let (Some(restore), Some(save)) = (find(&restore), find(&save)) {
            if *flavour != mode {
                tracing::warn!(
                    wanted = mode.as_str(),
                    using = flavour.as_str(),
                    "iptables binaries of mode {} are missing; falling back to {}",
                    mode.as_str(),
                    flavour.as_str()
                );
            }
            return Ok(Tools {
                family,
                mode: *flavour,
                restore,
                save,
                use_wait_flag,
            });
        }
        tried.push(restore);
    }
    Err(IptablesError::Missing {
        family: family.label(),
        mode: mode.as_str(),
        tried: tried.join(", "),
    })
}

impl Tools {
    /// `<flavour>-save -t nat`. Runs in the calling thread's network namespace.
    pub fn save_nat(&self) -> Result<String, IptablesError> {
        let out = Command::new(&self.save)
            .args(["-t", "nat"])
            .stdin(Stdio::null())
            .output()
            .map_err(|source| spawn_error(&self.save, source))?;
        if !out.status.success() {
            return Err(failed(&self.save, &out.status, &out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `<flavour>-restore --noflush [-w]` with `input` on stdin.
    pub fn restore(&self, input: &str) -> Result<(), IptablesError> {
        let mut args: Vec<OsString> = vec!["--noflush".into()];
        if self.use_wait_flag {
            args.push("-w".into());
        }
        let mut child = Command::new(&self.restore)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| spawn_error(&self.restore, source))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .map_err(|source| spawn_error(&self.restore, source))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|source| spawn_error(&self.restore, source))?;
        if !out.status.success() {
            return Err(failed(&self.restore, &out.status, &out.stderr));
        }
        Ok(())
    }
}

/// How [`Tools::install`] got the plan in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// One restore created our chains (the table had none).
    Created,
    /// Our chains existed (a repeated ADD): their rules were replaced after reading the table.
    Replaced,
}

impl Tools {
    /// ADD's work: one restore that creates our chains; only if one exists already, `-save` the
    /// table and restore the idempotent input. Any other failure is returned as it is.
    pub fn install(&self, plan: &Rules) -> Result<Installed, IptablesError> {
        let create = plan.create_input();
        tracing::debug!(family = plan.family.label(), bin = %self.restore.display(), "applying\n{create}");
        match self.restore(&create) {
            Ok(()) => return Ok(Installed::Created),
            Err(IptablesError::Failed { stderr, .. })
                if failed_creating_a_chain(&create, &stderr) =>
            {
                tracing::debug!(family = plan.family.label(), %stderr, "our chains exist; replacing their rules");
            }
            Err(e) => return Err(e),
        }
        let current = NatTable::parse(&self.save_nat()?);
        let input = plan.restore_input(&current);
        tracing::debug!(family = plan.family.label(), bin = %self.restore.display(), "applying\n{input}");
        self.restore(&input)?;
        Ok(Installed::Replaced)
    }
}

fn spawn_error(bin: &Path, source: std::io::Error) -> IptablesError {
    IptablesError::Spawn {
        bin: bin.display().to_string(),
        source,
    }
}

fn failed(bin: &Path, status: &std::process::ExitStatus, stderr: &[u8]) -> IptablesError {
    IptablesError::Failed {
        bin: bin.display().to_string(),
        status: status.to_string(),
        stderr: String::from_utf8_lossy(stderr).trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(names: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        d
    }

    /// `auto` on three nodes: none of the binaries, legacy rules in use, nft binaries only.
    #[test]
    fn auto_probes_binaries_and_legacy_tables() {
        use rules::backend_choice::{choose, Backend};
        let tables = tempfile::tempdir().unwrap();
        let names = tables.path().join("ip_tables_names");
        let missing_file = tables.path().join("absent");
        // A node's root with `binaries` in its `dir`.
        let node_with = |dir: &str, binaries: &[&str]| {
            let root = tempfile::tempdir().unwrap();
            let d = root.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            for b in binaries {
                std::fs::write(d.join(b), "").unwrap();
            }
            root
        };
        let empty = node_with("usr/sbin", &[]);
        let node = probe_node(empty.path(), &missing_file);
        assert!(
            node.binaries.is_empty() && node.legacy_tables.is_empty(),
            "{node:?}"
        );
        assert_eq!(choose(&node).backend, Backend::Nftables);
        assert_eq!(
            IptablesMode::from(choose(&node).backend),
            IptablesMode::Nftables
        );

        let debian = [
            "iptables-legacy-restore",
            "iptables-legacy-save",
            "iptables-nft-restore",
            "iptables-nft-save",
            "iptables-restore",
        ];
        std::fs::write(&names, "nat\nfilter\n").unwrap();
        for dir in rules::backend_choice::SBIN_DIRS {
            let root = node_with(dir.trim_start_matches('/'), &debian);
            let node = probe_node(root.path(), &names);
            assert_eq!(
                node.binaries,
                [Backend::Legacy, Backend::Nft],
                "in {dir}: plain lacks its save"
            );
            assert_eq!(node.legacy_tables, ["nat", "filter"]);
            assert_eq!(
                IptablesMode::from(choose(&node).backend),
                IptablesMode::Legacy
            );
        }
        // Outside those directories (in /usr/local/sbin, say) the node shows none: the installer,
        // which sees only what the chart mounts, must predict the same.
        let elsewhere = node_with("usr/local/sbin", &debian);
        assert!(probe_node(elsewhere.path(), &names).binaries.is_empty());
        std::fs::write(&names, "").unwrap();
        let root = node_with("sbin", &debian);
        let node = probe_node(root.path(), &names);
        assert_eq!(IptablesMode::from(choose(&node).backend), IptablesMode::Nft);
    }

    #[test]
    fn picks_the_modes_binaries() {
        let d = dir_with(&[
            "iptables-nft-restore",
            "iptables-nft-save",
            "iptables-restore",
            "iptables-save",
        ]);
        let t = resolve(IptablesMode::Nft, Family::V4, true, &[d.path().into()]).unwrap();
        assert_eq!(t.mode, IptablesMode::Nft);
        assert_eq!(t.restore, d.path().join("iptables-nft-restore"));
        assert_eq!(t.save, d.path().join("iptables-nft-save"));
    }

    /// A node without iptables-nft still gets rules, from the next flavour in line.
    #[test]
    fn falls_back_nft_plain_legacy() {
        let d = dir_with(&[
            "ip6tables-legacy-restore",
            "ip6tables-legacy-save",
            "ip6tables-nft-restore",
        ]);
        let t = resolve(IptablesMode::Nft, Family::V6, false, &[d.path().into()]).unwrap();
        assert_eq!(t.mode, IptablesMode::Legacy);
        assert_eq!(t.save, d.path().join("ip6tables-legacy-save"));
    }

    #[test]
    fn missing_everywhere_is_an_error_listing_what_was_tried() {
        let d = dir_with(&[]);
        let e = resolve(IptablesMode::Legacy, Family::V4, false, &[d.path().into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no ipv4 iptables binaries for mode legacy: tried iptables-legacy-restore, iptables-restore"
        );
    }
}
