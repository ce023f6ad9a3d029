//! PURE: which namespaces want a NAD of ours. One rule, asked by the controller, `check`, the input
//! gauges and the repairer alike.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::attach::Attach;

/// What a namespace needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Annotated `linkerd.io/multus: enabled`, or the Linkerd control-plane namespace.
    Nad,
    /// Anything else: no NAD of ours may exist there.
    NoNad,
    /// Terminating: the namespace's own deletion removes the NAD; writing would only fail.
    LeaveAlone,
}

/// Decides what `ns` needs. The control-plane namespace needs the NAD whatever its annotation,
/// because the control plane's own pods are attached to linkerd-cni through it.
pub fn want(ns: &Namespace, linkerd_namespace: &str) -> Want {
    if is_terminating(ns) {
        return Want::LeaveAlone;
    }
    if enabled(&ns.metadata, linkerd_namespace) {
        Want::Nad
    } else {
        Want::NoNad
    }
}

/// Whether the namespace `meta` is enabled for linkerd-multus: annotated `linkerd.io/multus:
/// enabled`, or Linkerd's control-plane namespace (whatever its annotation). Terminating or not:
/// its pods' sandboxes may still be set up again. What [`want`] answers before placement, and what
/// the installer's node-local view ([`crate::namespace_view`]) lists.
pub fn enabled(meta: &ObjectMeta, linkerd_namespace: &str) -> bool {
    meta.name.as_deref() == Some(linkerd_namespace) || opts_in(meta.annotations.as_ref())
}

/// True when `annotations` carry `linkerd.io/multus: enabled`, the one value that opts in.
pub fn opts_in(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(vocab::MULTUS_ANNOTATION))
        .is_some_and(|v| v == vocab::MULTUS_ENABLED)
}

/// Whether `ns` needs a NAD of its own. One NAD per opted-in namespace ([`want`]) by default; with
/// `--nad-namespace` (`shared`), only that namespace holds one (whatever its annotation), shared by
/// the pods of every opted-in namespace, and any other namespace's NAD of ours is unwanted.
pub fn want_nad(ns: &Namespace, linkerd_namespace: &str, shared: Option<&str>) -> Want {
    match (want(ns, linkerd_namespace), shared) {
        (Want::LeaveAlone, _) => Want::LeaveAlone,
        (want, None) => want,
        (_, Some(shared)) if ns.metadata.name.as_deref() == Some(shared) => Want::Nad,
        (_, Some(_)) => Want::NoNad,
    }
}

/// Where our NAD lives (`--nad-namespace`): one in each namespace that wants it, or one shared by all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NadPlacement {
    /// One NAD per namespace that wants it ([`want`]); pods name it bare.
    #[default]
    PerNamespace,
    /// One NAD in this namespace; pods name it `<namespace>/<name>`.
    Shared(String),
}

impl NadPlacement {
    /// The flag's value: empty for [`NadPlacement::PerNamespace`], else a namespace name (an RFC 1123
    /// label), so a typo fails at start-up rather than writing to a namespace that cannot exist.
    pub fn parse(value: &str) -> Result<Self, String> {
        if value.is_empty() {
            return Ok(Self::PerNamespace);
        }
        let label = value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !value.starts_with('-')
            && !value.ends_with('-');
        if label {
            Ok(Self::Shared(value.to_string()))
        } else {
            Err(format!(
                "{value:?} is not a namespace name (lower-case letters, digits and '-', at most 63)"
            ))
        }
    }

    /// The shared NAD's namespace; None with one NAD per namespace.
    pub fn shared(&self) -> Option<&str> {
        match self {
            Self::PerNamespace => None,
            Self::Shared(namespace) => Some(namespace),
        }
    }
}

/// Our NAD: its name and where it must exist. The flags every part shares (`--nad-name`,
/// `--linkerd-namespace`, `--nad-namespace`, `--attach`), parsed straight into this type (feature
/// `cli`) and handed whole to the controller, the webhook's decision, `check` and the repairer. The
/// fields' doc comments are the flags' `--help` (`--attach`'s is its owner's, [`crate::attach`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct OurNad {
    /// Name of the NetworkAttachmentDefinition the operator maintains (and the webhook attaches).
    #[cfg_attr(feature = "cli", arg(id = "nad_name", long = "nad-name", value_name = "NAD_NAME", global = true,
        env = "NAD_NAME", default_value = vocab::NAD_NAME))]
    pub name: String,
    /// Linkerd's control-plane namespace: it always gets the NAD, annotated or not, and its pods are
    /// always attached.
    #[cfg_attr(feature = "cli", arg(long, global = true, env = "LINKERD_NAMESPACE",
        default_value = vocab::DEFAULT_LINKERD_NAMESPACE))]
    pub linkerd_namespace: String,
    /// One shared NAD instead of one per namespace: the operator keeps --nad-name in this namespace
    /// only (which must exist) and the webhook attaches pods as `<this namespace>/<nad-name>`. With
    /// namespace isolation (on in OpenShift) Multus honours such a cross-namespace reference only to
    /// its `globalNamespaces` (OpenShift: `default`, `openshift-multus`). Per-namespace NADs left from
    /// the default mode are deleted once no pod of theirs lists them. Empty: one NAD per enabled
    /// namespace.
    #[cfg_attr(feature = "cli", arg(id = "nad_namespace", long = "nad-namespace", value_name = "NAD_NAMESPACE", global = true,
        env = "NAD_NAMESPACE", default_value = "", value_parser = NadPlacement::parse))]
    pub placement: NadPlacement,
    /// `--attach`, declared by its owner ([`crate::attach`]).
    #[cfg_attr(feature = "cli", command(flatten))]
    pub attach: Attach,
}

impl OurNad {
    /// The shared NAD's namespace, if any.
    pub fn shared(&self) -> Option<&str> {
        self.placement.shared()
    }

    /// The NAD as a networks annotation names it: `name`, or `namespace/name` when shared.
    pub fn reference(&self) -> String {
        crate::networks::reference(&self.name, self.shared())
    }

    /// Whether `ns` needs a NAD of its own ([`want_nad`]); none does in aux-chain mode.
    pub fn want(&self, ns: &Namespace) -> Want {
        self.want_placed(ns, self.shared())
    }

    /// [`OurNad::want`] with the shared namespace the operator decided (`--nad-namespace`, unless a
    /// node's Multus refuses it: `multus_node::Placement::shared`) instead of the flag's.
    pub fn want_placed(&self, ns: &Namespace, shared: Option<&str>) -> Want {
        match want_nad(ns, &self.linkerd_namespace, shared) {
            Want::Nad if !self.attach.uses_nads() => Want::NoNad,
            want => want,
        }
    }

    /// The `--nad-namespace` whose NAD every node's Multus must let other namespaces use: none in
    /// aux-chain mode, where no NAD is written, so no node's isolation refuses anything.
    pub fn shared_to_place(&self) -> Option<&str> {
        self.shared().filter(|_| self.attach.uses_nads())
    }
}

/// The binary's defaults: `linkerd-cni`, Linkerd's `linkerd` namespace, one NAD per namespace.
impl Default for OurNad {
    fn default() -> Self {
        Self {
            name: vocab::NAD_NAME.to_string(),
            linkerd_namespace: vocab::DEFAULT_LINKERD_NAMESPACE.to_string(),
            placement: NadPlacement::PerNamespace,
            attach: Attach::default(),
        }
    }
}

/// Whether `ns` is being deleted.
pub fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Terminating")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn ns(name: &str, annotation: Option<&str>) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: annotation.map(|v| {
                    BTreeMap::from([(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())])
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Only the exact value `enabled` opts in; the control-plane namespace always does; a
    /// terminating namespace is never written to.
    #[test]
    fn which_namespaces_want_the_nad() {
        let cases = [
            (ns("a", Some("enabled")), Want::Nad),
            (ns("a", Some("disabled")), Want::NoNad),
            (ns("a", Some("Enabled")), Want::NoNad),
            (ns("a", Some("enabled ")), Want::NoNad),
            (ns("a", Some("")), Want::NoNad),
            (ns("a", None), Want::NoNad),
            (ns("linkerd", None), Want::Nad),
            (ns("linkerd", Some("disabled")), Want::Nad),
        ];
        for (n, want_) in cases {
            assert_eq!(want(&n, "linkerd"), want_, "{:?}", n.metadata);
        }

        let mut deleting = ns("a", Some("enabled"));
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(want(&deleting, "linkerd"), Want::LeaveAlone);
        let mut terminating = ns("linkerd", None);
        terminating.status = Some(NamespaceStatus {
            phase: Some("Terminating".into()),
            ..Default::default()
        });
        assert_eq!(want(&terminating, "linkerd"), Want::LeaveAlone);
    }

    /// Shared mode: only the shared namespace wants a NAD (opted in or not, the control plane's
    /// included); a terminating one is still left alone. Without the flag, `want` decides.
    #[test]
    fn which_namespaces_want_a_nad_of_their_own() {
        let cases = [
            (ns("shared", None), Some("shared"), Want::Nad),
            (ns("shared", Some("enabled")), Some("shared"), Want::Nad),
            (ns("a", Some("enabled")), Some("shared"), Want::NoNad),
            (ns("linkerd", None), Some("shared"), Want::NoNad),
            (ns("a", None), Some("shared"), Want::NoNad),
            (ns("a", Some("enabled")), None, Want::Nad),
            (ns("linkerd", None), None, Want::Nad),
            (ns("shared", None), None, Want::NoNad),
        ];
        for (n, shared, want_) in cases {
            assert_eq!(
                want_nad(&n, "linkerd", shared),
                want_,
                "{:?} {shared:?}",
                n.metadata.name
            );
        }
        let mut deleting = ns("shared", None);
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(
            want_nad(&deleting, "linkerd", Some("shared")),
            Want::LeaveAlone
        );
    }

    /// `--nad-namespace`: empty is one NAD per namespace, a namespace name is shared, anything else
    /// is refused with the value named.
    #[test]
    fn nad_placement_from_the_flag() {
        assert_eq!(NadPlacement::parse(""), Ok(NadPlacement::PerNamespace));
        assert_eq!(
            NadPlacement::parse("shared-1"),
            Ok(NadPlacement::Shared("shared-1".into()))
        );
        for bad in ["Default", "a/b", "-a", "a-", "a_b", &"a".repeat(64)] {
            let err = NadPlacement::parse(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        let nad = OurNad {
            placement: NadPlacement::Shared("s".into()),
            ..OurNad::default()
        };
        assert_eq!(nad.reference(), "s/linkerd-cni");
        assert_eq!(OurNad::default().reference(), "linkerd-cni");
        assert_eq!(nad.want(&ns("s", None)), Want::Nad);
        assert_eq!(nad.want(&ns("a", Some("enabled"))), Want::NoNad);
    }

    /// Aux-chain mode: no namespace wants a NAD, the control plane's and the shared one included, so
    /// every NAD of ours goes the way of a disabled namespace's.
    #[test]
    fn aux_chain_wants_no_nad() {
        for placement in [NadPlacement::PerNamespace, NadPlacement::Shared("s".into())] {
            let nad = OurNad {
                placement,
                attach: Attach::AuxChain,
                ..OurNad::default()
            };
            for name in ["linkerd", "s", "app"] {
                assert_eq!(nad.want(&ns(name, Some("enabled"))), Want::NoNad, "{name}");
                let placed = nad.want_placed(&ns(name, Some("enabled")), None);
                assert_eq!(placed, Want::NoNad, "{name}");
            }
            assert_eq!(nad.shared_to_place(), None);
        }
    }

    /// The placed shared namespace decides in NAD mode (a refused `--nad-namespace` falls back to
    /// one NAD per namespace); only NAD mode has a shared namespace to place.
    #[test]
    fn want_placed_follows_the_decided_namespace() {
        let nad = OurNad {
            placement: NadPlacement::Shared("s".into()),
            ..OurNad::default()
        };
        assert_eq!(nad.shared_to_place(), Some("s"));
        assert_eq!(
            nad.want_placed(&ns("app", Some("enabled")), None),
            Want::Nad
        );
        assert_eq!(nad.want_placed(&ns("s", None), None), Want::NoNad);
        assert_eq!(nad.want_placed(&ns("s", None), Some("s")), Want::Nad);
        let mut deleting = ns("app", Some("enabled"));
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        let aux = OurNad {
            attach: Attach::AuxChain,
            ..nad
        };
        assert_eq!(aux.want_placed(&deleting, None), Want::LeaveAlone);
    }
}
