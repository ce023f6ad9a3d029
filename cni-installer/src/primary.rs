//! Which file in the net dir is the primary network config: the one the runtime will use.
//!
//! Runtimes (kubelet's CNI code, containerd's go-cni, CRI-O's ocicni) list the directory with libcni's
//! `ConfFiles(dir, [".conf", ".conflist", ".json"])`, sort the names byte-wise and take the first one
//! that loads. `.conflist` files are read as plugin lists, `.conf` and `.json` as one plugin. The
//! extension match is case-sensitive, like libcni's.

use crate::chain::ConfigKind;

/// How a runtime would read a file of this name, or `None` when it ignores it.
pub fn kind_of(file_name: &str) -> Option<ConfigKind> {
    if file_name.ends_with(".conflist") {
        Some(ConfigKind::List)
    } else if file_name.ends_with(".conf") || file_name.ends_with(".json") {
        Some(ConfigKind::Single)
    } else {
        None
    }
}

/// The first config file in byte-wise order, never our own kubeconfig.
pub fn pick<'a>(
    names: impl IntoIterator<Item = &'a str>,
    kubeconfig_name: &str,
) -> Option<(&'a str, ConfigKind)> {
    let mut candidates: Vec<(&str, ConfigKind)> = names
        .into_iter()
        .filter(|n| *n != kubeconfig_name)
        .filter_map(|n| kind_of(n).map(|k| (n, k)))
        .collect();
    candidates.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    candidates.into_iter().next()
}

/// The name a single-plugin file gets once it is a list: `10-bridge.conf` → `10-bridge.conflist`,
/// `10-bridge.json` → `10-bridge.conflist`.
pub fn list_name(file_name: &str) -> String {
    let stem = file_name
        .strip_suffix(".conf")
        .or_else(|| file_name.strip_suffix(".json"))
        .unwrap_or(file_name);
    format!("{stem}.conflist")
}

#[cfg(test)]
mod tests {
    use super::*;
    use vocab::DEFAULT_KUBECONFIG_NAME;

    #[test]
    fn picks_first_config_in_byte_order() {
        use ConfigKind::{List, Single};
        let k = DEFAULT_KUBECONFIG_NAME;
        type Case<'a> = (
            &'a str,
            &'a str,
            Vec<&'a str>,
            Option<(&'a str, ConfigKind)>,
        );
        let cases: Vec<Case> = vec![
            ("empty dir", k, vec![], None),
            ("only kubeconfig", k, vec![k], None),
            (
                "flannel",
                k,
                vec!["10-flannel.conflist", k],
                Some(("10-flannel.conflist", List)),
            ),
            (
                "multus first",
                k,
                vec!["10-calico.conflist", "00-multus.conf"],
                Some(("00-multus.conf", Single)),
            ),
            (
                "json counts",
                k,
                vec!["20-a.conflist", "10-b.json"],
                Some(("10-b.json", Single)),
            ),
            (
                "ignores others",
                k,
                vec!["README", "99.conflist.bak", "05.conf.tmp", "30-x.conflist"],
                Some(("30-x.conflist", List)),
            ),
            (
                "upper case sorts first",
                k,
                vec!["a.conflist", "B.conflist"],
                Some(("B.conflist", List)),
            ),
            (
                "case-sensitive extension",
                k,
                vec!["01.CONF", "02.conflist"],
                Some(("02.conflist", List)),
            ),
            (
                "kubeconfig named like a config",
                "00-kc.conf",
                vec!["00-kc.conf", "10-x.conflist"],
                Some(("10-x.conflist", List)),
            ),
        ];
        for (name, kubeconfig, files, want) in cases {
            assert_eq!(pick(files.iter().copied(), kubeconfig), want, "{name}");
        }
    }

    #[test]
    fn list_names() {
        assert_eq!(list_name("10-bridge.conf"), "10-bridge.conflist");
        assert_eq!(list_name("00-multus.conf"), "00-multus.conflist");
        assert_eq!(list_name("10-b.json"), "10-b.conflist");
    }
}
