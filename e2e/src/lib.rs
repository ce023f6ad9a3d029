//! The workspace's test kit, and the helpers for tests on the local control plane (`e2e/testbed up`).
//!
//! Where tests live: pure tests next to the code (`#[cfg(test)] mod tests`, or `foo_tests.rs` beside
//! `foo.rs`); tests on real parts (root, netns, iptables, the apiserver, helm, built binaries) under
//! `<crate>/tests/`, marked `#[ignore = "needs …: run by e2e/test-all"]`; helpers shared by more than
//! one crate here, and a crate's own harness in `<crate>/tests/support/mod.rs`, built on this kit.
//!
//! The kit: [`client`] (a kube client for the testbed's apiserver), [`TestNamespace`] and
//! [`DeleteOnDrop`] (objects deleted through their own client when dropped), [`eventually`] /
//! [`wait_for`] (the one poller), [`free_port`], [`admission::review`]. When the control plane is not
//! up, [`client`] panics with the command that starts it: a test that needs the apiserver never
//! passes without one.
//!
//! [`pod_network`]: a bridge + host-local pod network in a fresh netns with the built `linkerd-cni`
//! chained after it, with [`traffic::ask_as`] to send real traffic from it as a given uid.
//!
//! [`multus`]: the Multus stand-in the node testbed runs in Multus' place (its auxiliary CNI chain in
//! [`multus::aux_chain`]); [`recorder`]: `cni-recorder`, a CNI plugin that records the calls it gets.
//!
//! [`stand_ins`]: other products' admission webhooks (Linkerd's injector, OpenShift's SCC uid check)
//! as real HTTPS webhooks, for tests of this project's webhook beside them.
//!
//! [`chart`]: helm and the project's chart (rendering, the webhook configuration's name); [`bundle`]:
//! the OLM bundle generated from it (`bundlegen`).
//!
//! [`Cluster`] (a kubeconfig: kubectl, kubectl_ok, helm_ok, client, get_json, describe) is what
//! [`DedicatedTestbed`] and [`node::Node`] deref to; [`kubectl_ok`] is its runner for the shared
//! testbed. [`node::Node`] plays [`client`]'s part for the node mode (`e2e/testbed up --node`: kubelet,
//! containerd, the project's images).
//!
//! [`operator_process::OperatorProcess`]: the operator binary as a child process (scenarios, drills,
//! benches). [`events::wait_for_warning`]: the one waiter for a Warning Event. [`node_multus`]: the
//! NodeMultus kind in a test's own API group.
//!
//! [`platform::Platform`]: the real components of the optional real-platform tier
//! (`LINKERD_MULTUS_PLATFORM`), or the case reported not run; [`openshift::OpenShiftApiserver`]: a
//! kube-apiserver of a test's own with OpenShift's real SCC admission, from that platform.
//!
//! [`validator`]: who plays Linkerd's network validator (the test workload's, or Linkerd's real one
//! where the platform is given) and [`validator::passed`], the one test of a passing validator's logs.
//!
//! [`alerts`]: the chart's PrometheusRule and ServiceMonitor as Prometheus reads them;
//! [`prometheus::Prometheus`]: Debian's real Prometheus server as a child process.
//!
//! [`not_run()`]: the one way a test reports a case this server cannot run (never counted as passed;
//! `e2e/test-all` lists them at the end).

pub mod admission;
pub mod alerts;
pub mod book;
pub mod bundle;
pub mod chart;
mod cluster;
pub mod cni;
pub mod credentials;
pub mod dockerignore;
pub mod events;
mod guard;
pub mod images;
mod log_tail;
pub mod multus;
mod namespace;
pub mod netns;
pub mod node;
pub mod node_multus;
pub mod not_run;
pub mod olm;
pub mod openshift;
pub mod operator_process;
pub mod platform;
pub mod pod_network;
mod pod_status;
mod port;
pub mod prometheus;
pub mod recorder;
pub mod runnable;
pub mod stand_ins;
mod testbed;
pub mod traffic;
pub mod validator;
mod wait;
pub mod workload;

pub use cluster::Cluster;
pub use guard::DeleteOnDrop;
pub use log_tail::log_tail;
pub use namespace::unique_name;
pub use namespace::TestNamespace;
pub use not_run::not_run;
pub use pod_status::set_pod_status;
pub use port::free_port;
pub use testbed::{
    apply_nad_crd, binary, client, client_as_service_account, client_from, ensure_nad_crd,
    ensure_node_multus_crd, kubeconfig_path, kubectl, kubectl_ok, kubectl_ok_with, kubectl_with,
    testbed_dir, workspace_root, DedicatedTestbed,
};
pub use wait::{
    eventually, eventually_within, wait_for, wait_for_explained, wait_for_within, DEADLINE,
};
