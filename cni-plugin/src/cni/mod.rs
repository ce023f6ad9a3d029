//! The CNI protocol, as this plugin speaks it: the environment a runtime passes, the versions we
//! understand, result conversion between versions and the error object. Nothing here knows about
//! Linkerd or iptables.

mod env;
mod error;
mod result;
mod version;

pub use env::{CniArgs, CniEnv, Command};
pub use error::{codes, CniError};
pub use result::{convert_result, empty_result};
pub use version::{version_info, CniVersion};
