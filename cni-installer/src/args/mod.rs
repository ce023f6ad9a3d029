//! The installer's flags (each also an environment variable, as a DaemonSet sets them,
//! [`flags`]) and the settings a pass reads, resolved once from them ([`settings`]).

mod flags;
mod settings;
#[cfg(test)]
mod tests;

pub use crate::install_mode::{ChainMode, InstallMode};
pub use flags::{Args, MIN_TOKEN_LIFETIME};
pub use settings::{AuxChain, OwnPod, PluginCredential, Publish, Settings, TemplateSource};
