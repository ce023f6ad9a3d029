//! The installer's node-local view of the enabled namespaces, read before any request (Multus'
//! auxiliary chain only): the thin shell around [`rules::namespace_view`], which decides.

use std::path::Path;

use rules::namespace_view::{self, Found, Lookup};

use crate::config::LinkerdConfig;

/// Reads the view at `path`: missing, unusable (with why), or read.
pub fn read(path: &Path) -> Found {
    match std::fs::read(path) {
        Ok(bytes) => Found::Read(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Found::Missing,
        Err(e) => Found::Unusable(format!("cannot read {}: {e}", path.display())),
    }
}

/// Whether the pod of `namespace` needs the apiserver. Only in the auxiliary chain with a view
/// configured (`linkerd.enabled-namespaces-file`): through a NAD the pod asked for the plugin, and
/// without a view there is nothing to decide from.
pub fn lookup(cfg: &LinkerdConfig, namespace: &str) -> Lookup {
    match cfg.namespace_view.as_deref().filter(|_| cfg.aux_chain) {
        Some(path) => match namespace_view::lookup(&read(path), namespace) {
            Lookup::Ask { no_view: Some(why) } => Lookup::Ask {
                no_view: Some(format!("{}: {why}", path.display())),
            },
            decided => decided,
        },
        None => Lookup::Ask { no_view: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(aux_chain: bool, view: Option<&Path>) -> LinkerdConfig {
        LinkerdConfig {
            aux_chain,
            namespace_view: view.map(Path::to_path_buf),
            ..LinkerdConfig::default()
        }
    }

    /// The file as the plugin finds it, and where it is consulted at all: only in the chain with a
    /// path configured. Through a NAD a view never passes a pod through.
    #[test]
    fn the_view_is_read_in_the_chain_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
        let view = namespace_view::View {
            namespaces: ["demo".to_string()].into(),
            ..namespace_view::View::default()
        };

        assert_eq!(read(&path), Found::Missing);
        std::fs::write(&path, b"{").expect("write");
        let garbage = lookup(&cfg(true, Some(&path)), "other");
        assert!(
            matches!(&garbage, Lookup::Ask { no_view: Some(why) }
                if why.contains("not JSON") && why.contains(&*path.to_string_lossy())),
            "{garbage:?}"
        );
        std::fs::write(&path, view.render()).expect("write");
        assert_eq!(read(&path), Found::Read(view.render()));

        let asked = Lookup::Ask { no_view: None };
        assert_eq!(
            lookup(&cfg(true, Some(&path)), "other"),
            Lookup::PassThrough
        );
        assert_eq!(lookup(&cfg(true, Some(&path)), "demo"), asked);
        assert_eq!(lookup(&cfg(false, Some(&path)), "other"), asked, "a NAD");
        assert_eq!(lookup(&cfg(true, None), "other"), asked, "no view set");
    }
}
