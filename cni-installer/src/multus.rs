//! The node's Multus as the runtime runs it: the primary network config (the file the runtime uses,
//! [`crate::primary`]) read through [`rules::multus_node`]. This module only does the reading.

use std::path::Path;

use rules::multus_node::Observation;

use crate::{files, primary};

/// What the net dir says about Multus now. Never fails: what cannot be read is the observation.
pub fn observe(net_dir: &Path, kubeconfig_name: &str) -> Observation {
    let names = match files::file_names(net_dir) {
        Ok(names) => names,
        Err(e) => {
            return Observation::Unreadable {
                file: None,
                reason: format!("cannot list {}: {e}", net_dir.display()),
            }
        }
    };
    let Some((name, _)) = primary::pick(names.iter().map(String::as_str), kubeconfig_name) else {
        return Observation::NoMultus { primary: None };
    };
    let bytes = std::fs::read(net_dir.join(name)).map_err(|e| format!("cannot read {name}: {e}"));
    Observation::of_primary(name.to_string(), bytes.as_deref().map_err(Clone::clone))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rules::multus_node::Flavour;
    use std::fs;

    const KUBECONFIG: &str = vocab::DEFAULT_KUBECONFIG_NAME;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, text) in files {
            fs::write(dir.path().join(name), text).expect("write");
        }
        dir
    }

    /// The file the runtime uses decides: Multus first in byte order is read, whatever sorts after.
    #[test]
    fn reads_the_primary_config() {
        let dir = dir_with(&[
            (
                "00-multus.conf",
                r#"{"type":"multus","namespaceIsolation":true,"globalNamespaces":"default"}"#,
            ),
            ("10-flannel.conflist", r#"{"plugins":[{"type":"flannel"}]}"#),
            (KUBECONFIG, "not json"),
        ]);
        let Observation::Multus { file, config } = observe(dir.path(), KUBECONFIG) else {
            panic!("not Multus")
        };
        assert_eq!(file, "00-multus.conf");
        assert_eq!(config.flavour, Some(Flavour::Thin));
        assert!(config.namespace_isolation);

        let thick = dir_with(&[("00-multus.conf", r#"{"type":"multus-shim"}"#)]);
        let Observation::Multus { config, .. } = observe(thick.path(), KUBECONFIG) else {
            panic!("not Multus")
        };
        assert_eq!(config.flavour, Some(Flavour::Thick));
    }

    #[test]
    fn no_multus_and_unreadable_say_so() {
        let flannel = dir_with(&[("10-flannel.conflist", r#"{"plugins":[{"type":"flannel"}]}"#)]);
        assert_eq!(
            observe(flannel.path(), KUBECONFIG),
            Observation::NoMultus {
                primary: Some("10-flannel.conflist".into())
            }
        );
        let empty = dir_with(&[(KUBECONFIG, "x")]);
        assert_eq!(
            observe(empty.path(), KUBECONFIG),
            Observation::NoMultus { primary: None }
        );
        let broken = dir_with(&[("00-multus.conf", "{\"type\": \"multus\"")]);
        let Observation::Unreadable { file, reason } = observe(broken.path(), KUBECONFIG) else {
            panic!("not unreadable")
        };
        assert_eq!(file.as_deref(), Some("00-multus.conf"));
        assert!(reason.contains("not valid JSON"), "{reason}");
        let missing = broken.path().join("nope");
        let Observation::Unreadable { file, reason } = observe(&missing, KUBECONFIG) else {
            panic!("not unreadable")
        };
        assert_eq!(file, None);
        assert!(reason.starts_with("cannot list"), "{reason}");
    }
}
