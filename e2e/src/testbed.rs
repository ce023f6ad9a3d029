//! Finding the running testbed: its kubeconfig, a client for it, kubectl against it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// How to start the control plane, repeated in every failure message.
const HOW_TO_START: &str = "start the local control plane with `e2e/testbed up` \
     (or run the whole suite with the README's test command)";

/// The workspace root (the directory holding the top-level Cargo.toml).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("e2e/ has a parent")
        .to_path_buf()
}

/// Where `e2e/testbed` keeps its state; `LINKERD_MULTUS_TESTBED_DIR` overrides it, as for the script.
pub fn testbed_dir() -> PathBuf {
    std::env::var_os("LINKERD_MULTUS_TESTBED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".testbed"))
}

/// The testbed's admin kubeconfig. Panics, saying how to start it, when the testbed is not up.
pub fn kubeconfig_path() -> PathBuf {
    let path = testbed_dir().join("kubeconfig");
    assert!(
        path.is_file(),
        "no control plane: {} does not exist; {HOW_TO_START}",
        path.display()
    );
    path
}

/// A kube client for the testbed's apiserver, checked with a `/readyz`-style version call.
pub async fn client() -> Client {
    client_from(&kubeconfig_path()).await
}

/// A kube client for the apiserver of the kubeconfig at `path`, checked with a version call. It is
/// driven by the kit's own runtime, so it works from any test runtime and in guards' `Drop`.
pub async fn client_from(path: &Path) -> Client {
    let path = path.to_path_buf();
    crate::guard::kit_runtime()
        .spawn(async move { build_client(&path, None).await })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// A client for the testbed that acts as ServiceAccount `namespace/name` (impersonation, with the
/// groups the apiserver gives a ServiceAccount's token), so a test exercises the RBAC a chart grants.
pub async fn client_as_service_account(namespace: &str, name: &str) -> Client {
    let path = kubeconfig_path();
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let groups = vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_string(),
    ];
    crate::guard::kit_runtime()
        .spawn(async move { build_client(&path, Some((user, groups))).await })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

async fn build_client(path: &Path, impersonate: Option<(String, Vec<String>)>) -> Client {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; {HOW_TO_START}", path.display()));
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("bad kubeconfig {}: {e}; {HOW_TO_START}", path.display()));
    if let Some((user, groups)) = impersonate {
        config.auth_info.impersonate = Some(user);
        config.auth_info.impersonate_groups = Some(groups);
    }
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("building a kube client")
        .with_layer(&tower::layer::layer_fn(crate::guard::OnKit))
        .build();
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "the control plane in {} does not answer: {e}; {HOW_TO_START}",
            path.display()
        );
    }
    client
}

/// Runs `kubectl` against the testbed and returns its output (whatever the exit status).
pub fn kubectl(args: &[&str]) -> Output {
    kubectl_with(&kubeconfig_path(), args)
}

/// [`kubectl`] that must succeed: its stdout. Panics with the command and its stderr.
pub fn kubectl_ok(args: &[&str]) -> String {
    kubectl_ok_with(&kubeconfig_path(), args)
}

/// Runs `kubectl --kubeconfig <kubeconfig> args...` and returns its output (whatever the exit status).
pub fn kubectl_with(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl_binary())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl: {e}; {HOW_TO_START}"))
}

/// [`kubectl_with`] that must succeed: its stdout. Panics with the command and its stderr.
pub fn kubectl_ok_with(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl_with(kubeconfig, args);
    assert!(
        out.status.success(),
        "kubectl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The kubectl the testbed chose (it records it in `$TESTBED/kubectl-path`), else the one on PATH.
pub(crate) fn kubectl_binary() -> PathBuf {
    std::fs::read_to_string(testbed_dir().join("kubectl-path"))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|_| PathBuf::from("kubectl"))
}

/// A built binary of this workspace (`linkerd-multus-operator`, `linkerd-cni`, ...), found next to the
/// running test's own target directory. `e2e/test-all` builds every binary before the tests run.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test>-<hash> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a target directory");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first (e2e/test-all does)",
        path.display()
    );
    path
}

/// A control plane of a test's own, for tests that look at the whole cluster (every namespace, every
/// webhook) and so cannot share one with tests running in parallel. Started with `e2e/testbed up` in
/// a directory of its own; stopped with `e2e/testbed down` when dropped.
pub struct DedicatedTestbed {
    dir: PathBuf,
    cluster: crate::Cluster,
    /// A kube-apiserver this process restarted (see `start_apiserver`), reaped on drop.
    restarted: std::sync::Mutex<Option<std::process::Child>>,
}

impl DedicatedTestbed {
    /// Starts one in a fresh directory under the system's temp dir (needs the cached apiserver that
    /// `e2e/testbed up` builds once).
    pub fn up(prefix: &str) -> Self {
        Self::up_with(prefix, |_| Vec::new())
    }

    /// [`DedicatedTestbed::up`] with extra environment for `e2e/testbed up`, given the testbed's
    /// directory (e.g. `LINKERD_MULTUS_APISERVER` naming another kube-apiserver).
    pub fn up_with(prefix: &str, env: impl FnOnce(&Path) -> Vec<(&'static str, PathBuf)>) -> Self {
        let dir = std::env::temp_dir().join(crate::unique_name(prefix));
        let env = env(&dir);
        let bed = Self {
            cluster: crate::Cluster::new(dir.join("kubeconfig")),
            dir,
            restarted: std::sync::Mutex::new(None),
        };
        let mut out = bed.script_with("up", &env);
        // Its ports are picked free, then bound: a testbed or test beside it (another tier) may take
        // one in between (seen on 2026-11-29). `up` again stops what the failed one started.
        for _ in 0..2 {
            let taken = String::from_utf8_lossy(&out.stderr).contains("address already in use");
            if out.status.success() || !taken {
                break;
            }
            out = bed.script_with("up", &env);
        }
        assert!(
            out.status.success(),
            "e2e/testbed up in {} failed:\n{}",
            bed.dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        bed
    }

    /// SIGKILLs this testbed's kube-apiserver (etcd keeps running); returns its command line, for
    /// [`DedicatedTestbed::start_apiserver`].
    pub fn kill_apiserver(&self) -> Vec<String> {
        let pid = std::fs::read_to_string(self.dir.join("apiserver.pid")).expect("apiserver.pid");
        let pid = pid.trim();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("apiserver cmdline");
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let killed = Command::new("kill")
            .args(["-KILL", pid])
            .status()
            .expect("kill");
        assert!(killed.success(), "kill -KILL {pid}");
        // Wait until it is gone (the port is free again).
        while std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists()
            && std::fs::read(format!("/proc/{pid}/stat"))
                .map(|s| !String::from_utf8_lossy(&s).contains(") Z "))
                .unwrap_or(false)
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        argv
    }

    /// Starts kube-apiserver again with `argv` (as [`DedicatedTestbed::kill_apiserver`] returned
    /// it), in a session of its own like the script's daemons, and records its pid so `down` stops
    /// it. Returns once it answers; fails at once, with its log, if it exits first.
    pub fn start_apiserver(&self, argv: &[String]) {
        let log_path = self.dir.join("apiserver.log");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log_path)
            .expect("apiserver.log");
        // `setsid` (it execs the apiserver, same pid), not just a process group: the kernel's
        // scheduler shares the CPU among sessions (autogroups) first. Left in the test's session,
        // the restarted apiserver shared one share with every test of its tier and the operators
        // they drive, and under a loaded run missed its deadline (CI, 2026-11-29, twice).
        let mut child = Command::new("setsid")
            .args(argv)
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("restart kube-apiserver (setsid from util-linux)");
        std::fs::write(self.dir.join("apiserver.pid"), child.id().to_string())
            .expect("apiserver.pid");
        let log_tail = || crate::log_tail(&log_path, 20);
        let started = std::time::Instant::now();
        crate::wait_for_explained(
            "the restarted kube-apiserver answers /readyz",
            std::time::Duration::from_secs(180),
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "the restarted kube-apiserver exited ({status}); its log ends:\n{}",
                        log_tail()
                    );
                }
                self.kubectl(&["get", "--raw", "/readyz"])
                    .status
                    .success()
                    .then_some(())
            },
            || format!("its log ends:\n{}", log_tail()),
        );
        eprintln!(
            "the restarted kube-apiserver answered /readyz {:.1?} after its start",
            started.elapsed()
        );
        let old = self
            .restarted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(child);
        if let Some(mut old) = old {
            let _ = old.wait();
        }
    }

    /// The testbed's directory (its state: logs, pki, kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn script(&self, command: &str) -> Output {
        self.script_with(command, &[])
    }

    fn script_with(&self, command: &str, env: &[(&'static str, PathBuf)]) -> Output {
        Command::new(workspace_root().join("e2e/testbed"))
            .arg(command)
            .env("LINKERD_MULTUS_TESTBED_DIR", &self.dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap_or_else(|e| panic!("cannot run e2e/testbed {command}: {e}"))
    }
}

/// kubeconfig, kubectl, client, get_json, describe: the testbed's cluster.
impl std::ops::Deref for DedicatedTestbed {
    type Target = crate::Cluster;
    fn deref(&self) -> &crate::Cluster {
        &self.cluster
    }
}

impl Drop for DedicatedTestbed {
    fn drop(&mut self) {
        let _ = self.script("down");
        let restarted = self.restarted.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = restarted.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Multus' CRD is cluster-wide and shared: created if absent, never removed. Once per process: a
/// file's tests run in parallel, and two concurrent `kubectl apply` of an absent object both try to
/// create it, the second failing with AlreadyExists.
pub fn ensure_nad_crd() {
    static CRD: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    CRD.get_or_init(|| apply_nad_crd(&kubeconfig_path()));
}

/// Creates the chart's NodeMultus CRD on the control plane of `kubeconfig` unless it exists, and waits
/// until it is served. Installs of the chart beside each other on one apiserver call this first: the
/// chart then leaves the CRD alone (it renders it only when absent, or its own), where two releases
/// finding it absent at once would both render it and the second would fail on helm's ownership check.
pub fn ensure_node_multus_crd(kubeconfig: &Path) {
    let crd = workspace_root().join("crds/node-multus.yaml");
    let out = kubectl_with(
        kubeconfig,
        &["create", "-f", crd.to_str().expect("UTF-8 path")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("AlreadyExists"),
        "kubectl create -f crds/node-multus.yaml: {stderr}"
    );
    kubectl_ok_with(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "crd/nodemultuses.linkerd-multus.io",
            "--timeout=30s",
        ],
    );
}

/// Applies Multus' NAD CRD to the control plane of `kubeconfig` and waits until it is served.
pub fn apply_nad_crd(kubeconfig: &Path) {
    let crd = workspace_root().join("crds/network-attachment-definition.yaml");
    kubectl_ok_with(
        kubeconfig,
        &["apply", "-f", crd.to_str().expect("UTF-8 path")],
    );
    kubectl_ok_with(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "crd/network-attachment-definitions.k8s.cni.cncf.io",
            "--timeout=30s",
        ],
    );
}
