//! Undoing the installer's change to a network config on shutdown. Pure: decides from what was written
//! and what the file holds now.
//!
//! When the file still holds exactly the bytes the installer wrote, nobody else touched it, and the
//! bytes from before the change go back (a converted `.conf` comes back under its own name). When
//! someone else rewrote it since, their version is kept and only the linkerd-cni entry comes out.

use crate::chain::{self, ChainError, ConfigKind, Outcome};
use std::path::PathBuf;

/// What the installer last wrote to the primary config, and what was there before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The file written (a `.conflist`).
    pub path: PathBuf,
    pub written: Vec<u8>,
    /// The file and bytes from before the change; `None` when the entry was already there when this
    /// process first saw the file (e.g. after a restart), so only stripping the entry is safe.
    pub original: Option<(PathBuf, Vec<u8>)>,
}

/// File operations that revert one change.
#[derive(Debug, PartialEq, Eq)]
pub enum Revert {
    /// Put the original bytes back at `write`, then delete `remove` (the `.conflist` a `.conf` became).
    Restore {
        write: PathBuf,
        bytes: Vec<u8>,
        remove: Option<PathBuf>,
    },
    /// Someone else changed the file since: write it back without the linkerd-cni entry.
    Strip { path: PathBuf, bytes: Vec<u8> },
    /// The file is gone or holds no linkerd-cni entry.
    Nothing,
}

/// Plans the revert of `applied`, given the file's current bytes (`None`: it no longer exists).
pub fn plan(applied: &Applied, current: Option<&[u8]>) -> Result<Revert, ChainError> {
    let Some(current) = current else {
        return Ok(Revert::Nothing);
    };
    if current == applied.written.as_slice() {
        if let Some((original_path, original)) = &applied.original {
            return Ok(Revert::Restore {
                write: original_path.clone(),
                bytes: original.clone(),
                remove: (original_path != &applied.path).then(|| applied.path.clone()),
            });
        }
    }
    strip(applied.path.clone(), current)
}

/// Plans taking the linkerd-cni entry out of any `.conflist`.
pub fn strip(path: PathBuf, current: &[u8]) -> Result<Revert, ChainError> {
    Ok(match chain::remove(current, ConfigKind::List)? {
        Outcome::Rewritten(bytes) | Outcome::Converted(bytes) => Revert::Strip { path, bytes },
        Outcome::Unchanged => Revert::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &[u8] = b"{ \"name\": \"k8s\",\n  \"plugins\": [ {\"type\": \"flannel\"} ] }";
    const WRITTEN: &[u8] = br#"{"name":"k8s","plugins":[{"type":"flannel"},{"type":"linkerd-cni","linkerd-multus.io/installed-by":"linkerd-cni-install"}]}"#;

    fn applied(original_name: &str) -> Applied {
        Applied {
            path: "/n/10-x.conflist".into(),
            written: WRITTEN.to_vec(),
            original: Some((original_name.into(), ORIGINAL.to_vec())),
        }
    }

    #[test]
    fn untouched_file_gets_its_original_bytes_back() {
        assert_eq!(
            plan(&applied("/n/10-x.conflist"), Some(WRITTEN)),
            Ok(Revert::Restore {
                write: "/n/10-x.conflist".into(),
                bytes: ORIGINAL.to_vec(),
                remove: None
            })
        );
    }

    #[test]
    fn converted_conf_comes_back_under_its_name() {
        assert_eq!(
            plan(&applied("/n/10-x.conf"), Some(WRITTEN)),
            Ok(Revert::Restore {
                write: "/n/10-x.conf".into(),
                bytes: ORIGINAL.to_vec(),
                remove: Some("/n/10-x.conflist".into()),
            })
        );
    }

    #[test]
    fn file_changed_by_someone_else_only_loses_our_entry() {
        let theirs = br#"{"name":"k8s","plugins":[{"type":"flannel","mtu":1400},{"type":"linkerd-cni","linkerd-multus.io/installed-by":"linkerd-cni-install"}]}"#;
        let Ok(Revert::Strip { path, bytes }) = plan(&applied("/n/10-x.conflist"), Some(theirs))
        else {
            panic!("expected a strip");
        };
        assert_eq!(path, PathBuf::from("/n/10-x.conflist"));
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(
            v["plugins"],
            serde_json::json!([{"type": "flannel", "mtu": 1400}])
        );
    }

    #[test]
    fn nothing_to_do() {
        let a = applied("/n/10-x.conflist");
        assert_eq!(plan(&a, None), Ok(Revert::Nothing), "file gone");
        assert_eq!(
            plan(&a, Some(ORIGINAL)),
            Ok(Revert::Nothing),
            "entry already gone"
        );
        let unknown = Applied {
            original: None,
            ..a
        };
        assert!(
            matches!(plan(&unknown, Some(WRITTEN)), Ok(Revert::Strip { .. })),
            "no original known"
        );
        assert!(
            plan(&applied("/n/10-x.conflist"), Some(b"{bad")).is_err(),
            "corrupt file is not touched"
        );
    }
}
