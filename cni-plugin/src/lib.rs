//! The linkerd-cni CNI plugin (the pod's iptables rules for the Linkerd proxy) and its node installer.

pub mod install;
