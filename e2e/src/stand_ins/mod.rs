//! **Stand-ins** for admission webhooks of other products, served as real HTTPS webhooks the local
//! apiserver calls: [`linkerd_injector`] (Linkerd's proxy injector, as far as the securityContexts it
//! writes) and [`scc`] (OpenShift's SCC admission with restricted-v2, as far as uids go: called first,
//! again on reinvocation, and as the final validation). Neither is the product itself; each does only
//! what the tests of this project need, and says what it leaves out. [`AdmissionServer`] serves any
//! such handler on a loopback port with a self-signed certificate, on [`TlsServer`] (any router: the
//! cni-plugin tests' stand-in apiserver uses it too).

pub mod linkerd_injector;
pub mod scc;
mod server;

pub use scc::SccStandIn;
pub use server::{allowed, denied, AdmissionServer, TlsServer};
