//! Entering the pod's network namespace.
//!
//! We `setns(2)` a dedicated thread into the pod's netns and spawn `iptables-restore` from it: a
//! child inherits the namespaces of the thread that forked it. Rather than `nsenter --net=PATH`
//! (what Linkerd's plugin does), because it costs no extra exec per call, needs no util-linux on the
//! node, and a vanished netns shows up as a precise error when opening its file (DEL treats that as
//! success). The pod lookup happens before, on the host's namespace, and the main thread never
//! leaves the host namespace.

use std::fs::File;
use std::path::Path;

use nix::sched::{setns, CloneFlags};

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace {0} does not exist")]
    Gone(String),
    #[error("cannot open network namespace {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot enter network namespace {path}")]
    Enter {
        path: String,
        #[source]
        source: nix::Error,
    },
    #[error("the thread working in network namespace {0} panicked")]
    Panicked(String),
}

/// Runs `f` on a fresh thread inside the network namespace at `path` and returns its result.
pub fn run_in<T, F>(path: &Path, f: F) -> Result<T, NetnsError>
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            NetnsError::Gone(shown.clone())
        } else {
            NetnsError::Open {
                path: shown.clone(),
                source,
            }
        }
    })?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                setns(&file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
                    path: shown.clone(),
                    source,
                })?;
                Ok(f())
            })
            .join()
            .map_err(|_| NetnsError::Panicked(shown.clone()))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_netns_is_gone() {
        let e = run_in(Path::new("/run/netns/linkerd-cni-does-not-exist"), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::Gone(_)), "{e}");
    }

    /// A path that is not a netns (here a regular file) must fail, not run on the host.
    #[test]
    fn a_file_that_is_no_netns_cannot_be_entered() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = run_in(f.path(), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::Enter { .. }), "{e}");
    }
}
