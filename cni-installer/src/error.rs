//! Everything that can stop one installer step, each with what to do about it. Each text says what
//! failed and leaves the cause to its `source()`: printed with [`vocab::report::chain`].

use crate::chain::ChainError;
use rules::cni_template::TemplateError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "cannot read the plugin binary {path} (set --plugin-binary to the linkerd-cni binary)"
    )]
    ReadPluginBinary {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}{}", writable_hint(source))]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove {path}{}", writable_hint(source))]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the directory {path}{}", create_dir_hint(source))]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot list {path} (is the host directory mounted into this container?)")]
    ReadDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the service-account file {path} (the kubeconfig needs the pod's token and CA; see --service-account-dir)")]
    ServiceAccount {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the service-account token {path} is empty")]
    EmptyToken { path: PathBuf },
    #[error("{name} is not set; Kubernetes sets it in every pod, and the kubeconfig's server address comes from it")]
    MissingEnv { name: &'static str },
    #[error("cannot read the CNI network config template {path}")]
    ReadTemplate {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("linkerd-cni is not chained into the primary network config {path} until it parses")]
    Unparseable {
        path: PathBuf,
        #[source]
        source: ChainError,
    },
    #[error("primary network config {path} is Multus's own (type {found}): appending linkerd-cni would turn it into a conflist, which Multus v4.2.x stores lossily (the bridge DEL then fails with `no IP ranges specified`); on a Multus node use --chain-mode none (helm: cni.chainMode=none), Multus attaches linkerd-cni through the NAD. The file is left untouched; --force-append-to-multus (cni.forceAppendToMultus) appends anyway")]
    MultusPrimary { path: PathBuf, found: String },
    #[error("cannot turn {from} into a list: {to} already exists; remove one of them")]
    ConvertTargetExists { from: PathBuf, to: PathBuf },
    #[error("{failed} install step(s) failed (see the errors above)")]
    Incomplete { failed: usize },
    #[error("cannot ask the apiserver for a token of service account {namespace}/{service_account} for the plugin's kubeconfig (the installer's service account needs `create` on `serviceaccounts/token` for it; helm: cni.pluginServiceAccountName)")]
    TokenRequest {
        namespace: String,
        service_account: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "the apiserver issued an empty token for service account {namespace}/{service_account}"
    )]
    EmptyIssuedToken {
        namespace: String,
        service_account: String,
    },
    #[error("no token for the plugin's service account {service_account} yet: the plugin's kubeconfig is not written until the TokenRequest succeeds")]
    NoPluginToken { service_account: String },
    #[error("cannot build the installer's own API client (from --service-account-dir)")]
    ApiClient(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot start the runtime")]
    Runtime(#[source] io::Error),
}

fn create_dir_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => {
            " (its parent does not exist: --aux-chain-dir must be the directory of the config file Multus' clusterNetwork names, mounted into this container)"
        }
        _ => writable_hint(e),
    }
}

fn writable_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::ReadOnlyFilesystem => {
            " (the directory is on a read-only file system: mount the host directory read-write)"
        }
        io::ErrorKind::PermissionDenied => {
            " (permission denied: the installer must run as root with the host directory mounted read-write)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text says what failed, the chain adds the cause once.
    #[test]
    fn the_cause_is_printed_once_by_the_chain() {
        let e = InstallError::ReadDir {
            path: "/host/etc/cni/net.d".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "No such file or directory"),
        };
        assert!(!e.to_string().contains("No such file"), "{e}");
        let told = vocab::report::chain(&e);
        assert_eq!(
            told.matches("No such file or directory").count(),
            1,
            "{told}"
        );
        assert!(
            told.starts_with("cannot list /host/etc/cni/net.d (is the host"),
            "{told}"
        );
    }
}
