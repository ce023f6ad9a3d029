//! Helpers for tests that run on the local control plane started by `e2e/testbed up`.
//!
//! A test asks for [`client`] (a kube 5 client for the testbed's apiserver) and a [`TestNamespace`] (a
//! fresh, uniquely named namespace deleted when dropped unless `LINKERD_MULTUS_KEEP_NAMESPACES=1`). When
//! the control plane is not up, these helpers panic with the command that starts it: a test that needs
//! the apiserver never passes without one. [`node::Node`] is the same for the node mode
//! (`e2e/testbed up --node`: kubelet, containerd, the project's images).

pub mod cni;
pub mod images;
mod namespace;
pub mod netns;
pub mod node;
mod testbed;
pub mod traffic;

pub use namespace::unique_name;
pub use namespace::TestNamespace;
pub use testbed::{
    binary, client, client_from, kubeconfig_path, kubectl, kubectl_with, testbed_dir,
    workspace_root, DedicatedTestbed,
};
