//! Entering the pod's network namespace.
//!
//! We `setns(2)` the calling thread into the pod's netns for one closure and back into its own
//! netns afterwards (a guard brings it back if the closure panics), and spawn `iptables-restore`
//! from it: a child inherits the namespaces of the thread that forked it. Rather than `nsenter
//! --net=PATH` (what Linkerd's plugin does), because it costs no extra exec per call, needs no
//! util-linux on the node, and a vanished netns shows up as a precise error when opening its file
//! (DEL treats that as success). Rather than a thread of its own, because a plugin run is one short
//! process: that thread cost a clone, its stack, a fresh malloc arena and two wake-ups per call,
//! more than the rest of the netlink work (issue #43). The pod lookup happens before, in the host's
//! namespace, and whoever calls [`run_in`] is back in its own namespace when it returns.

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
    #[error("cannot return from network namespace {path} to the thread's own")]
    Return {
        path: String,
        #[source]
        source: nix::Error,
    },
}

/// The netns of the calling thread (`/proc/self` would name the process' main thread's).
const OWN: &str = "/proc/thread-self/ns/net";

/// Runs `f` on the calling thread inside the network namespace at `path` and returns its result;
/// the thread is back in its own namespace afterwards, also when `f` panics.
pub fn run_in<T, F>(path: &Path, f: F) -> Result<T, NetnsError>
where
    F: FnOnce() -> T,
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
    let own = File::open(OWN).map_err(|source| NetnsError::Open {
        path: OWN.into(),
        source,
    })?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
        path: shown.clone(),
        source,
    })?;
    let guard = Home(Some(own));
    let out = f();
    guard.go().map_err(|source| NetnsError::Return {
        path: shown,
        source,
    })?;
    Ok(out)
}

/// The thread's own netns, re-entered by [`Home::go`] or, when the closure unwinds, on drop.
struct Home(Option<File>);

impl Home {
    fn go(mut self) -> nix::Result<()> {
        match self.0.take() {
            Some(own) => setns(&own, CloneFlags::CLONE_NEWNET),
            None => Ok(()),
        }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if let Some(own) = self.0.take() {
            if let Err(e) = setns(&own, CloneFlags::CLONE_NEWNET) {
                eprintln!("linkerd-cni: cannot return to the thread's own network namespace: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_netns_is_gone() {
        let e = run_in(Path::new("/run/netns/linkerd-cni-does-not-exist"), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::Gone(_)), "{e}");
    }

    fn own_netns() -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(OWN).expect("own netns").ino()
    }

    /// The closure runs in the pod's netns, and the calling thread is back in its own afterwards,
    /// after a panic in the closure too.
    #[test]
    #[ignore = "needs root (netns): run by e2e/test-all"]
    fn runs_inside_and_comes_back() {
        use std::os::unix::fs::MetadataExt;
        let ns = linkerd_multus_e2e::netns::NetNs::create("lcni-home");
        let pod = std::fs::metadata(ns.path()).expect("netns file").ino();
        let home = own_netns();
        assert_ne!(home, pod);
        assert_eq!(run_in(&ns.path(), own_netns).expect("run_in"), pod);
        assert_eq!(own_netns(), home, "back after the closure");
        let unwound = std::panic::catch_unwind(|| run_in(&ns.path(), || panic!("inside")));
        assert!(unwound.is_err());
        assert_eq!(own_netns(), home, "back after a panic in the closure");
    }

    /// A path that is not a netns (here a regular file) must fail, not run on the host.
    #[test]
    fn a_file_that_is_no_netns_cannot_be_entered() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = run_in(f.path(), || ()).unwrap_err();
        assert!(matches!(e, NetnsError::Enter { .. }), "{e}");
    }
}
