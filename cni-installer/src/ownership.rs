//! What the uninstall may remove: only what this installer wrote. PURE: judges a file by what it
//! holds; [`crate::installer`] reads, and removes only a file judged ours.
//!
//! A removal by name alone would take other people's files: Linkerd's own CNI installer writes its
//! kubeconfig as `ZZZ-linkerd-cni-kubeconfig` (this installer's default before it had a name of its
//! own) and its plugin binary as `linkerd-cni`, where both ran (a migration from Linkerd's CNI
//! plugin); an admin or a vendor may put a `linkerd-cni.conf` into Multus' auxiliary chain. So each
//! file carries a mark only this installer writes, and is removed only with it:
//! - the plugin's kubeconfig: its first line, [`kubeconfig::MARK`] (every version of this installer
//!   wrote it; Linkerd's installer writes the same cluster, user and context names under its own);
//! - linkerd-cni's file in Multus' auxiliary chain: linkerd-cni's config marked
//!   `linkerd.aux-chain: true` ([`crate::aux_chain::mark`]; nothing else writes that key);
//! - the plugin binary (`--uninstall-binary`): the very bytes this installer installs
//!   (`--plugin-binary`), as each pass makes it;
//! - its entry in a network config (`--chain-mode append`): [`ENTRY_MARK_KEY`] in the entry
//!   ([`mark_entry`]); Linkerd's own installer appends an entry of the same `type`.
//!
//! A file without the mark stays, and the uninstall says why.

use crate::kubeconfig;
use serde_json::Value;

/// Whose a file is, as far as the uninstall is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Ours,
    /// Someone else's, or nobody can tell: it stays. Why it is not judged ours.
    Foreign(String),
}

/// Key of the mark this installer puts into each plugin entry it appends to a network config, with
/// [`ENTRY_MARK_VALUE`]. A top-level key of the entry: the plugin ignores keys it does not know.
pub const ENTRY_MARK_KEY: &str = "linkerd-multus.io/installed-by";
pub const ENTRY_MARK_VALUE: &str = "linkerd-cni-install";

/// The plugin entry as `append` mode writes it: marked as this installer's.
pub fn mark_entry(mut entry: Value) -> Value {
    if let Some(obj) = entry.as_object_mut() {
        obj.insert(ENTRY_MARK_KEY.into(), ENTRY_MARK_VALUE.into());
    }
    entry
}

/// Whether a plugin entry of a network config is one this installer appended: linkerd-cni's, with
/// the mark. An entry of that type without it (Linkerd's own installer's, or one written by hand)
/// is someone else's.
pub fn is_our_entry(plugin: &Value) -> bool {
    plugin.get("type").and_then(Value::as_str) == Some(vocab::PLUGIN_TYPE)
        && plugin.get(ENTRY_MARK_KEY).and_then(Value::as_str) == Some(ENTRY_MARK_VALUE)
}

/// The plugin's kubeconfig: ours when its first line is [`kubeconfig::MARK`].
pub fn kubeconfig(bytes: &[u8]) -> Owner {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    if first == kubeconfig::MARK.as_bytes() {
        return Owner::Ours;
    }
    let whose = if first.starts_with(LINKERD_KUBECONFIG_HEADER.as_bytes()) {
        "Linkerd's own CNI installer wrote it"
    } else {
        "this installer did not write it"
    };
    Owner::Foreign(format!(
        "{whose}: it does not start with this installer's mark {:?}",
        kubeconfig::MARK
    ))
}

/// The first line of the kubeconfig Linkerd's own installer (linkerd2-cni's `install-cni.sh`)
/// writes; only to say whose a foreign file is.
const LINKERD_KUBECONFIG_HEADER: &str = "# Kubeconfig file for linkerd CNI plugin";

/// linkerd-cni's file in Multus' auxiliary chain: ours when it is linkerd-cni's config carrying
/// `linkerd.aux-chain: true`.
pub fn chain_file(bytes: &[u8]) -> Owner {
    let Ok(config) = serde_json::from_slice::<Value>(bytes) else {
        return Owner::Foreign("it is not JSON, so not a config this installer wrote".into());
    };
    if config.get("type").and_then(Value::as_str) != Some(vocab::PLUGIN_TYPE) {
        return Owner::Foreign(format!(
            "it is not linkerd-cni's config (its \"type\" is not {:?})",
            vocab::PLUGIN_TYPE
        ));
    }
    let marked = config
        .pointer(&format!("/linkerd/{}", vocab::CNI_CONFIG_AUX_CHAIN_KEY))
        .and_then(Value::as_bool)
        == Some(true);
    if marked {
        Owner::Ours
    } else {
        Owner::Foreign(format!(
            "linkerd-cni's config without this installer's mark \"linkerd\": {{\"{}\": true}}, so \
             someone else wrote it",
            vocab::CNI_CONFIG_AUX_CHAIN_KEY
        ))
    }
}

/// The installed plugin binary: ours when it holds the bytes this installer installs (`source`:
/// `--plugin-binary`'s bytes, or why they cannot be read). A pass replaces any other version with
/// those, so a binary that differs was written by someone else since.
pub fn binary(installed: &[u8], source: Result<&[u8], String>) -> Owner {
    match source {
        Ok(source) if source == installed => Owner::Ours,
        Ok(_) => Owner::Foreign(
            "it is not the binary this installer installs (--plugin-binary): another installer \
             (Linkerd's own puts its linkerd-cni there too) or another version wrote it"
                .into(),
        ),
        Err(why) => Owner::Foreign(format!(
            "cannot tell whether this installer wrote it: {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn foreign(owner: Owner) -> String {
        match owner {
            Owner::Foreign(why) => why,
            Owner::Ours => panic!("judged ours"),
        }
    }

    /// What this installer renders is ours; Linkerd's own kubeconfig (same names inside, its own
    /// header) and anything else are not. Would break: an uninstall deleting Linkerd's kubeconfig.
    #[test]
    fn kubeconfigs() {
        let ours = kubeconfig::render("https://10.96.0.1:443", "t", b"ca");
        assert_eq!(kubeconfig(ours.as_bytes()), Owner::Ours);
        let linkerds = format!(
            "{LINKERD_KUBECONFIG_HEADER}.\napiVersion: v1\nkind: Config\n{}",
            ours.split_once('\n').expect("two lines").1
        );
        assert!(foreign(kubeconfig(linkerds.as_bytes())).starts_with("Linkerd's own"));
        let cases = [
            String::new(),
            "apiVersion: v1\nkind: Config\n".into(),
            // The mark elsewhere than on the first line.
            format!("\n{}\n", kubeconfig::MARK),
            // The mark with something after it on the same line.
            format!("{} x\n", kubeconfig::MARK),
        ];
        for text in cases {
            assert!(
                foreign(kubeconfig(text.as_bytes())).starts_with("this installer did not"),
                "{text}"
            );
        }
    }

    /// Only linkerd-cni's config with the chain's mark is ours. Would break: an uninstall taking an
    /// admin's or a vendor's `linkerd-cni.conf` out of Multus' chain.
    #[test]
    fn chain_files() {
        let ours = crate::aux_chain::render(&crate::aux_chain::mark(
            json!({"type": "linkerd-cni", "linkerd": {"proxy-uid": 2102}}),
        ));
        assert_eq!(chain_file(&ours), Owner::Ours);
        let cases = [
            (
                json!({"type": "linkerd-cni"}),
                "without this installer's mark",
            ),
            (
                json!({"type": "linkerd-cni", "linkerd": {"aux-chain": false}}),
                "without this installer's mark",
            ),
            (
                json!({"type": "linkerd-cni", "linkerd": {"aux-chain": "true"}}),
                "without this installer's mark",
            ),
            (
                json!({"type": "tuning", "linkerd": {"aux-chain": true}}),
                "not linkerd-cni's config",
            ),
        ];
        for (config, why) in cases {
            assert!(
                foreign(chain_file(config.to_string().as_bytes())).contains(why),
                "{config}"
            );
        }
        assert!(foreign(chain_file(b"{bad")).contains("not JSON"));
    }

    /// Only a marked linkerd-cni entry is ours. Would break: an uninstall taking Linkerd's own
    /// entry out of a network config.
    #[test]
    fn entries() {
        let ours = mark_entry(json!({"type": "linkerd-cni", "log_level": "info"}));
        assert_eq!(ours[ENTRY_MARK_KEY], ENTRY_MARK_VALUE);
        assert!(is_our_entry(&ours));
        for other in [
            json!({"type": "linkerd-cni", "log_level": "info"}),
            json!({"type": "linkerd-cni", ENTRY_MARK_KEY: "someone"}),
            mark_entry(json!({"type": "calico"})),
        ] {
            assert!(!is_our_entry(&other), "{other}");
        }
        assert_eq!(mark_entry(json!(3)), json!(3), "not an object: left alone");
    }

    /// The binary is ours only while it is byte for byte what this installer installs.
    #[test]
    fn binaries() {
        assert_eq!(binary(b"ours", Ok(b"ours")), Owner::Ours);
        assert!(foreign(binary(b"linkerd's", Ok(b"ours"))).contains("not the binary"));
        assert!(foreign(binary(b"ours", Err("no such file".into()))).contains("no such file"));
    }
}
