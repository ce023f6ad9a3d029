//! The installer's test harness, on the workspace's test kit (`linkerd_multus_e2e`): a fake node (temp net/bin dirs, a service-account dir with a token
//! and CA) and the real `linkerd-cni-install` binary run against it.
#![allow(dead_code)] // each test binary uses a different part

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};

use linkerd_multus_e2e::unique_name;
pub use linkerd_multus_e2e::wait_for;

pub const INSTALLER: &str = env!("CARGO_BIN_EXE_linkerd-cni-install");
pub const KUBECONFIG: &str = vocab::DEFAULT_KUBECONFIG_NAME;
/// Stand-in plugin binary for tests that never run it.
pub const FAKE_PLUGIN: &[u8] = b"#!/bin/sh\necho fake linkerd-cni\n";
pub const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

/// Environment variables the installer reads; cleared so the caller's environment cannot leak in.
const INSTALLER_ENV: &[&str] = &[
    "DEST_CNI_NET_DIR",
    "DEST_CNI_BIN_DIR",
    "CNI_LOG_LEVEL",
    "KUBECONFIG_FILE_NAME",
    "CNI_CHAIN_MODE",
    "AUX_CHAIN_NAME",
    "AUX_CHAIN_DIR",
    "SERVICE_ACCOUNT_DIR",
    "PLUGIN_BINARY",
    "CNI_NETWORK_CONFIG",
    "CNI_NETWORK_CONFIG_FILE",
    "CONTAINER_MOUNT_PREFIX",
    "MULTUS_HOST_PREFIX",
    "UNINSTALL_BINARY",
    "FORCE_APPEND_TO_MULTUS",
    "RESYNC",
    "PLUGIN_SERVICE_ACCOUNT",
    "PLUGIN_TOKEN_LIFETIME",
    "RUST_LOG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    // An environment naming a node would publish to whatever apiserver it points at.
    "NODE_NAME",
    "POD_NAME",
    "POD_NAMESPACE",
    "NODE_MULTUS_API_GROUP",
];

/// The installer with none of the caller's environment that it reads: it runs exactly the flags given.
pub fn clean_installer() -> Command {
    let mut cmd = Command::new(INSTALLER);
    for var in INSTALLER_ENV {
        cmd.env_remove(var);
    }
    cmd
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// The `type` of each plugin of a conflist.
pub fn plugin_types(bytes: &[u8]) -> Vec<String> {
    json(bytes)["plugins"]
        .as_array()
        .expect("a plugins array")
        .iter()
        .map(|p| p["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// A node's directories in a temp dir.
pub struct Node {
    _tmp: tempfile::TempDir,
    pub net: PathBuf,
    pub bin: PathBuf,
    pub sa: PathBuf,
    pub plugin: PathBuf,
    /// Environment for the installer; tests may change it.
    pub env: Vec<(String, String)>,
}

impl Node {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (net, bin, sa) = (
            tmp.path().join("net.d"),
            tmp.path().join("bin"),
            tmp.path().join("sa"),
        );
        for dir in [&net, &bin, &sa] {
            fs::create_dir(dir).expect("mkdir");
        }
        fs::write(sa.join("token"), "token-1\n").expect("token");
        fs::write(sa.join("ca.crt"), CA).expect("ca");
        let plugin = tmp.path().join("linkerd-cni-build");
        fs::write(&plugin, FAKE_PLUGIN).expect("plugin");
        let env = vec![
            (
                "KUBERNETES_SERVICE_HOST".to_string(),
                "10.96.0.1".to_string(),
            ),
            ("KUBERNETES_SERVICE_PORT".to_string(), "443".to_string()),
        ];
        Node {
            _tmp: tmp,
            net,
            bin,
            sa,
            plugin,
            env,
        }
    }

    /// A node whose net dir holds these fixtures.
    pub fn with(fixtures: &[&str]) -> Self {
        let node = Node::new();
        for name in fixtures {
            fs::write(node.net.join(name), fixture(name)).expect("write fixture");
        }
        node
    }

    /// The installer with this node's environment, service account and plugin, but no directories.
    pub fn bare_command(&self) -> Command {
        let mut cmd = clean_installer();
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.arg("--service-account-dir").arg(&self.sa);
        cmd.arg("--plugin-binary").arg(&self.plugin);
        cmd
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = self.bare_command();
        cmd.arg("--dest-cni-net-dir").arg(&self.net);
        cmd.arg("--dest-cni-bin-dir").arg(&self.bin);
        cmd.args(extra);
        cmd
    }

    /// Runs `--once` and returns its output.
    pub fn once(&self, extra: &[&str]) -> Output {
        let out = self
            .command(&[&["--once"], extra].concat())
            .output()
            .expect("run installer");
        eprintln!(
            "--- installer stderr ---\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Runs `--once`, which must succeed: a failure panics naming the flags and the installer's stderr.
    pub fn once_ok(&self, extra: &[&str]) -> Output {
        let out = self.once(extra);
        assert!(
            out.status.success(),
            "linkerd-cni-install --once {extra:?} exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Starts the watching installer, its log going to a file.
    pub fn spawn(&self, extra: &[&str]) -> Running {
        self.spawn_command(self.command(extra))
    }

    /// Starts `cmd` (from [`Self::bare_command`] or [`Self::command`]) as the watching installer.
    pub fn spawn_command(&self, mut cmd: Command) -> Running {
        let log = self
            ._tmp
            .path()
            .join(format!("{}.log", unique_name("installer")));
        let child = cmd
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start installer");
        Running {
            child: Some(child),
            log,
        }
    }

    pub fn read(&self, name: &str) -> Vec<u8> {
        fs::read(self.net.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Sorted file names of the net dir.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.net)
            .expect("read net dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.net.join(KUBECONFIG)
    }

    pub fn kubeconfig(&self) -> Option<String> {
        fs::read_to_string(self.kubeconfig_path()).ok()
    }

    pub fn binary(&self) -> PathBuf {
        self.bin.join(vocab::PLUGIN_TYPE)
    }

    /// The testbed's apiserver address, CA and token, laid out as this node's service-account mount
    /// (for tests that run the real plugin through the kubeconfig the installer writes).
    pub fn use_testbed_service_account(&mut self) {
        use base64::Engine as _;
        let text = fs::read_to_string(linkerd_multus_e2e::kubeconfig_path())
            .expect("testbed kubeconfig (is `e2e/testbed up` done?)");
        let kc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("kubeconfig yaml");
        let server = kc["clusters"][0]["cluster"]["server"]
            .as_str()
            .expect("server");
        let ca = kc["clusters"][0]["cluster"]["certificate-authority-data"]
            .as_str()
            .expect("ca data");
        let token = kc["users"][0]["user"]["token"].as_str().expect("token");
        let (host, port) = server
            .trim_start_matches("https://")
            .rsplit_once(':')
            .expect("host:port");
        let ca = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .expect("ca base64");
        fs::write(self.sa.join("ca.crt"), ca).expect("ca");
        fs::write(self.sa.join("token"), token).expect("token");
        self.env = vec![
            (
                "KUBERNETES_SERVICE_HOST".into(),
                host.trim_matches(|c| c == '[' || c == ']').into(),
            ),
            ("KUBERNETES_SERVICE_PORT".into(), port.into()),
        ];
    }
}

/// Writes `path` as config writers do, by renaming a finished file over it, so a watching installer
/// never reads it half-written (`fs::write` truncates first: the installer may read it empty).
pub fn write_atomically(path: &Path, bytes: impl AsRef<[u8]>) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).expect("write the new file");
    fs::rename(&tmp, path).expect("rename it into place");
}

/// (inode, bytes) of a file: an unchanged inode proves no rewrite happened (writes rename a new file).
pub fn identity(path: &Path) -> (u64, Vec<u8>) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (meta.ino(), fs::read(path).expect("read"))
}

pub fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

/// A running installer; killed (by its pid) if the test ends without stopping it.
pub struct Running {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Running {
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or_default()
    }

    /// SIGKILL, as when a node or the container runtime kills the pod: no cleanup runs.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        let status = wait_for("the installer exits after SIGTERM", || {
            child.try_wait().expect("wait")
        });
        let log = self.log();
        eprintln!("--- installer log ---\n{log}");
        (status, log)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            eprintln!("--- installer log ---\n{}", self.log());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
