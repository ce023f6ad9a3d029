//! `linkerd-multus-operator` as a real child process, for the scenarios, the drills and the benches.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

/// How to start the operator: the binary with `KUBECONFIG` and `--admin-addr` on a free port; its
/// stdout and stderr go to `log`.
pub struct OperatorCommand {
    command: Command,
    admin: SocketAddr,
    log: PathBuf,
    append: bool,
    stdout_discarded: bool,
}

impl OperatorCommand {
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.command.args(args);
        self
    }

    /// Appends to the log instead of truncating it (a replica restarted under the same name).
    pub fn append_log(mut self) -> Self {
        self.append = true;
        self
    }

    /// Only stderr goes to the log (the benches).
    pub fn discard_stdout(mut self) -> Self {
        self.stdout_discarded = true;
        self
    }

    pub fn spawn(mut self) -> std::io::Result<OperatorProcess> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.append)
            .truncate(!self.append)
            .open(&self.log)?;
        let stdout = if self.stdout_discarded {
            Stdio::null()
        } else {
            Stdio::from(out.try_clone()?)
        };
        let started = Instant::now();
        let child = self
            .command
            .stdout(stdout)
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()?;
        Ok(OperatorProcess {
            child,
            admin: self.admin,
            log: self.log,
            started,
        })
    }
}

/// The running operator; SIGKILLed and reaped when dropped (its log tail printed if a test panics).
pub struct OperatorProcess {
    child: Child,
    admin: SocketAddr,
    log: PathBuf,
    started: Instant,
}

impl OperatorProcess {
    /// The operator `binary` against the apiserver of `kubeconfig`, logging to `log`.
    pub fn command(binary: &Path, kubeconfig: &Path, log: PathBuf) -> OperatorCommand {
        let admin = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
        let mut command = Command::new(binary);
        command
            .env("KUBECONFIG", kubeconfig)
            .args(["--admin-addr", &admin.to_string()]);
        OperatorCommand {
            command,
            admin,
            log,
            append: false,
            stdout_discarded: false,
        }
    }

    /// The admin server (`/ready`, `/metrics`).
    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// When it was spawned.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::log_tail(&self.log, lines)
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// GET `path` on the admin server: status and body; `None` when it does not answer.
    pub fn get_blocking(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.admin, path).ok()
    }

    /// [`OperatorProcess::get_blocking`] off the async runtime's threads.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let (admin, path) = (self.admin, path.to_string());
        tokio::task::spawn_blocking(move || http_get(admin, &path).ok())
            .await
            .ok()
            .flatten()
    }

    /// The sample of metric `name` (unlabelled), when it answers.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The sum of every sample of /metrics whose line starts with `prefix`.
    pub async fn metric_sum(&self, prefix: &str) -> std::io::Result<f64> {
        let (admin, path) = (self.admin, "/metrics");
        let (_, body) = tokio::task::spawn_blocking(move || http_get(admin, path))
            .await
            .map_err(std::io::Error::other)??;
        Ok(body
            .lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// Waits until `/metrics` reads `value` for `name`.
    pub async fn wait_metric(&self, name: &str, value: f64) {
        crate::eventually(&format!("{name} reads {value}"), || async {
            (self.metric(name).await? == value).then_some(())
        })
        .await
    }

    /// Waits until `/ready` answers 200 (the kit's deadline).
    pub async fn wait_ready(&self) {
        crate::eventually("the operator's /ready answers 200", || async {
            (self.get("/ready").await?.0 == 200).then_some(())
        })
        .await
    }

    /// Waits until `/ready` answers 200, at most `timeout`; the failure shows the log tail.
    pub fn wait_ready_blocking(&self, timeout: Duration) {
        let _tail = self.log_on_panic();
        crate::wait_for_within("the operator's /ready", timeout, || {
            (self.get_blocking("/ready")?.0 == 200).then_some(())
        });
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).expect("a pid"));
        nix::sys::signal::kill(pid, signal).unwrap_or_else(|e| panic!("kill -{signal}: {e}"));
    }

    /// Its exit status once it exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for it to exit.
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.child.wait().expect("wait")
    }

    /// SIGKILL now, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (it drains and exits), then reap.
    pub fn stop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }

    /// A guard that prints the log tail when dropped during a panic (a wait that failed).
    pub fn log_on_panic(&self) -> impl Drop + '_ {
        struct Tail<'a>(&'a OperatorProcess);
        impl Drop for Tail<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    eprintln!("{}", self.0.log_report());
                }
            }
        }
        Tail(self)
    }

    /// The log's path and tail, as a failure shows it.
    pub fn log_report(&self) -> String {
        format!(
            "operator log tail ({}):\n{}",
            self.log.display(),
            self.log_tail(30)
        )
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("{}", self.log_report());
        }
    }
}

/// HTTP/1.0 GET (the server closes the connection after the answer): status and body.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {answer:.80}")))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
