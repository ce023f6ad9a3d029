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
pub(crate) mod tests {
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

    /// What the thick daemon of OpenShift 4.18+ writes into the directory CRI-O reads
    /// (/etc/kubernetes/cni/net.d): Multus v4.2's generator with the network operator's daemon
    /// config, paths as the daemon's container sees them.
    pub(crate) const OPENSHIFT_00_MULTUS: &str = r#"{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus-shim","logLevel":"verbose","logToStderr":true,"clusterNetwork":"/host/run/multus/cni/net.d/10-ovn-kubernetes.conf","namespaceIsolation":true,"globalNamespaces":"default,openshift-multus,openshift-sriov-network-operator,openshift-cnv","auxiliaryCNIChainName":"vendor-cni-chain","daemonSocketDir":"/run/multus/socket"}"#;

    /// Discovery, one case a row: OpenShift's thick config, a thin one, none at all; what is
    /// observed is what the NodeMultus publishes.
    #[test]
    fn discovery_table() {
        let openshift_globals =
            "default,openshift-multus,openshift-sriov-network-operator,openshift-cnv";
        let thin = r#"{"type":"multus","namespaceIsolation":false,"clusterNetwork":"/etc/cni/net.d/10-flannel.conflist"}"#;
        // (case, files, want: (flavour, isolation, globals, chain, clusterNetwork) or None: no Multus)
        type Want = Option<(
            Flavour,
            bool,
            Option<&'static str>,
            Option<&'static str>,
            Option<&'static str>,
        )>;
        type Files = Vec<(&'static str, &'static str)>;
        let cases: [(&str, Files, Want); 4] = [
            (
                "OpenShift thick: the daemon's generated config, container paths",
                vec![("00-multus.conf", OPENSHIFT_00_MULTUS), (KUBECONFIG, "x")],
                Some((
                    Flavour::Thick,
                    true,
                    Some(openshift_globals),
                    Some("vendor-cni-chain"),
                    Some("/host/run/multus/cni/net.d/10-ovn-kubernetes.conf"),
                )),
            ),
            (
                "thin",
                vec![
                    ("00-multus.conf", thin),
                    ("10-flannel.conflist", r#"{"plugins":[]}"#),
                ],
                Some((
                    Flavour::Thin,
                    false,
                    None,
                    None,
                    Some("/etc/cni/net.d/10-flannel.conflist"),
                )),
            ),
            (
                "none: a network, not Multus'",
                vec![("10-flannel.conflist", r#"{"plugins":[{"type":"flannel"}]}"#)],
                None,
            ),
            (
                "none at all: only our kubeconfig",
                vec![(KUBECONFIG, "x")],
                None,
            ),
        ];
        for (case, files, want) in cases {
            let dir = dir_with(&files);
            match (observe(dir.path(), KUBECONFIG), want) {
                (
                    Observation::Multus { file, config },
                    Some((flavour, iso, globals, chain, cluster)),
                ) => {
                    assert_eq!(file, "00-multus.conf", "{case}");
                    assert_eq!(config.flavour, Some(flavour), "{case}");
                    assert_eq!(config.namespace_isolation, iso, "{case}");
                    assert_eq!(config.global_namespaces.as_deref(), globals, "{case}");
                    assert_eq!(config.auxiliary_cni_chain_name.as_deref(), chain, "{case}");
                    assert_eq!(config.cluster_network.as_deref(), cluster, "{case}");
                }
                (Observation::NoMultus { .. }, None) => {}
                (got, want) => panic!("{case}: got {got:?}, want {want:?}"),
            }
        }
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
