//! The linkerd-cni CNI plugin: the pod's iptables rules for the Linkerd proxy. Its node installer is
//! the `linkerd-cni-installer` crate.
//!
//! The plugin's flow: [`cni`] reads the protocol, [`config`] the network config, in Multus'
//! auxiliary chain [`view`] the installer's view of the enabled namespaces, [`pod`] the pod
//! through the apiserver, [`overrides`] applies its annotations, and [`plan`] plans the pod's rules
//! once, as data (pure); each backend only renders that plan ([`plan::iptables`],
//! [`nftables::ruleset`]). The [`backend`] chosen from the config writes, checks or removes them
//! inside the pod's netns ([`netns`]): [`iptables`] runs one `iptables-restore` per family, or, in
//! `iptables-mode: nftables`, [`nftables`] writes them as one netlink batch, with no binary;
//! `simulate` only logs them. [`commands::run`] ties it together for the binary.

pub mod backend;
pub mod cni;
pub mod commands;
pub mod config;
pub mod connection;
pub mod iptables;
pub mod logging;
pub mod netns;
pub mod nftables;
pub mod overrides;
pub mod plan;
pub mod pod;
pub mod ports;
pub mod view;

pub use commands::{run, Outcome};
pub use config::{LinkerdConfig, PluginConfig};
pub use iptables::{IptablesError, IptablesMode};
