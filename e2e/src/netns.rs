//! A network namespace for one test: `ip netns add` with a unique name, deleted on drop.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::namespace::unique_name;

/// A named network namespace (`/run/netns/<name>`), with `lo` up. Deleted when dropped.
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates `<prefix>-<pid>-<n>`. Panics if `ip netns add` fails (tests run as root).
    pub fn create(prefix: &str) -> Self {
        // Interface and netns names are kept short so names derived from them stay valid.
        let name = unique_name(prefix);
        let out = ip(&["netns", "add", &name]);
        assert!(
            out.status.success(),
            "ip netns add {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ns = Self { name };
        let up = ns.exec(&["ip", "link", "set", "lo", "up"]);
        assert!(up.status.success(), "lo up in {}", ns.name);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path a CNI runtime passes as `CNI_NETNS`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// A command that runs `program` inside the namespace (`ip netns exec <name> <program>`); add
    /// arguments and run it as usual.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `args[0] args[1..]` inside the namespace and returns its output, whatever its status.
    pub fn exec(&self, args: &[&str]) -> Output {
        let (program, rest) = args.split_first().expect("a command to run");
        self.command(program)
            .args(rest)
            .output()
            .unwrap_or_else(|e| panic!("running {args:?} in netns {}: {e}", self.name))
    }

    /// Runs `f` on a fresh thread that has entered the namespace. Sockets created in `f` belong to
    /// the namespace for their whole life, so `f` may return a bound listener or a connected
    /// stream for the test to use from any thread.
    pub fn run<T, F>(&self, f: F) -> T
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        run_in(&self.path(), f)
    }

    /// Deletes the namespace now (idempotent; tests of "DEL after the netns is gone" call it).
    pub fn delete(&self) {
        if self.path().exists() {
            let _ = ip(&["netns", "del", &self.name]);
        }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        self.delete();
    }
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ip {args:?}: {e}"))
}

/// Runs `f` on a fresh thread that has entered the network namespace at `path` (a `/run/netns/…` or
/// `/proc/<pid>/ns/net` file). Sockets created in `f` stay in that namespace for their whole life.
pub fn run_in<T, F>(path: &std::path::Path, f: F) -> T
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    let file =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("setns into {}: {e}", path.display()));
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "needs root (netns): run by e2e/test-all"]
    fn create_run_inside_and_delete() {
        let ns = NetNs::create("e2e-netns");
        let path = ns.path();
        assert!(path.exists());
        let links = ns.exec(&["ip", "-o", "link"]);
        let links = String::from_utf8_lossy(&links.stdout);
        assert_eq!(
            links.lines().count(),
            1,
            "a fresh netns has only lo: {links}"
        );
        // A listener bound inside is reachable inside and absent outside.
        let listener = ns.run(|| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
        let port = listener.local_addr().unwrap().port();
        assert!(ns
            .run(|| std::net::TcpStream::connect(("127.0.0.1", port)))
            .is_ok());
        drop(ns);
        assert!(!path.exists());
    }
}
