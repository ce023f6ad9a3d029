//! The product's rules, answered once for every part: the controller, the webhook, `check`, the
//! repairer, the CNI plugin and its installer ask these functions and never re-derive them. Pure: no
//! kube client, no async runtime, no I/O (k8s-openapi's plain data types where a rule reads an object),
//! so the static plugin can depend on it and every rule is table-tested.
//!
//! - [`named_values`]: the one shape of a setting that takes one of a few names (its table, parsing,
//!   `Display`), for [`attach`], [`admission_mode`] and [`backend_choice`]'s `iptables-mode`.
//! - [`attach`]: how linkerd-cni reaches pods: NADs, or Multus' auxiliary chain.
//! - [`namespaces`]: which namespaces want a NAD of ours (one per namespace, or the shared one).
//! - [`namespace_view`]: the installer's node-local list of enabled namespaces (aux-chain mode) and
//!   whether the plugin may pass a pod through without asking the apiserver.
//! - [`networks`]: Multus' networks annotation (both formats): reading, naming a NAD, adding ours.
//! - [`attachment`]: is a pod attached as the webhook would attach it; does it use a NAD.
//! - [`ownership`]: may an unlabelled NAD be adopted.
//! - [`uid_range`]: OpenShift's uid range and the proxy uid taken from it.
//! - [`proxy_uid`]: the uid linkerd-cni's rules exempt, by its sources' precedence; a proxy that does
//!   not run as it; app containers running as it ([`proxy_uid::collision`]: they bypass the mesh).
//! - [`pod`]: the pod as every part reads it ([`pod::PodView`]: its proxy, validator and their uids).
//! - [`containers`]: the securityContext patches of Linkerd's proxy and validator.
//! - [`decision`]: the webhook's whole pod patch.
//! - [`admission_policy`]: that decision as a MutatingAdmissionPolicy, and what only the webhook can do.
//! - [`policy_agreement`]: does the live policy decide a probe pod as the webhook would (`check`).
//! - [`admission_mode`]: `--admission`: the webhook, the policy, or (`auto`) the policy where it is served.
//! - [`sandbox`]: whether a failed sandbox is this product's attachment, and what to do.
//! - [`credential`]: when the plugin's token is renewed, and when it is expiring.
//! - [`cni_template`]: Linkerd's linkerd-cni config template, read by the operator and the installer.
//! - [`multus_node`]: a node's Multus read from its CNI config, and where the shared NAD may live.
//! - [`backend_choice`]: `iptables-mode: auto`, the backend a node gets from what it shows.
//! - [`installers`]: linkerd-cni's installer pods (aux-chain mode): which pods, which nodes have a
//!   Ready one.

pub mod admission_mode;
pub mod admission_policy;
pub mod attach;
pub mod attachment;
pub mod backend_choice;
pub mod cni_template;
pub mod containers;
pub mod credential;
pub mod decision;
pub mod installers;
pub mod multus_node;
pub mod named_values;
pub mod namespace_view;
pub mod namespaces;
pub mod networks;
pub mod ownership;
pub mod pod;
pub mod policy_agreement;
pub mod proxy_uid;
pub mod sandbox;
pub mod uid_range;
