//! A real Prometheus server (Debian's `prometheus` package, which ships it beside promtool; `e2e/testbed
//! install` installs it) as a test's child process: a generated config and rules file in a temp dir,
//! run in a given network namespace (the node's, where the pods and the apiserver are), its HTTP API
//! asked through curl in that namespace. Stopped by its PID when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

/// How long the server may take to load its config and rules and answer `/-/ready`.
const READY_WITHIN: Duration = Duration::from_secs(30);

pub struct Prometheus {
    child: Child,
    netns: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `prometheus` in the network namespace `netns` (a `/proc/<pid>/ns/net` path) scraping
    /// `scrape_configs` every second and evaluating the rules file `rules` (a PrometheusRule's `spec`)
    /// every second; returns once it is ready. Panics, saying why, where the binary is missing or it
    /// does not start (never a test that passes without it).
    pub fn start(netns: &Path, scrape_configs: &[Value], rules: &Value) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        // JSON is YAML: Prometheus reads both files as written.
        let rules_file = dir.path().join("rules.yaml");
        std::fs::write(&rules_file, rules.to_string()).expect("write rules");
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules_file],
            "scrape_configs": scrape_configs,
        });
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config.to_string()).expect("write config");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        // A port free on the namespace's loopback (the host's says nothing about it).
        let port = crate::netns::run_in(netns, crate::free_port);
        let child = Command::new("nsenter")
            .arg(format!("--net={}", netns.display()))
            .arg("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run nsenter prometheus ({e}): install Debian's `prometheus` package (e2e/testbed install)"));
        let mut prometheus = Self {
            child,
            netns: netns.to_path_buf(),
            port,
            dir,
        };
        let start = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", prometheus.log());
            }
            if prometheus.curl(&["/-/ready"]).is_some() {
                return prometheus;
            }
            assert!(
                start.elapsed() < READY_WITHIN,
                "prometheus not ready after {READY_WITHIN:?}:\n{}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET <path>` with each `(name, value)` URL-encoded: its body, or None when the request fails.
    fn curl(&self, args: &[&str]) -> Option<String> {
        let (path, params) = args.split_first().expect("a path");
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net={}", self.netns.display()))
            .args(["curl", "-sfG", "--max-time", "10"])
            .arg(format!("http://127.0.0.1:{}{path}", self.port));
        for p in params {
            command.args(["--data-urlencode", p]);
        }
        let out = command.output().expect("run nsenter curl");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `data` of an HTTP API answer (`/api/v1/...`, parameters as `name=value`); panics unless
    /// the server answers with status success.
    pub fn api(&self, path: &str, params: &[&str]) -> Value {
        let mut args = vec![path];
        args.extend_from_slice(params);
        let body = self
            .curl(&args)
            .unwrap_or_else(|| panic!("GET {path} {params:?} failed:\n{}", self.log()));
        let answer: Value = serde_json::from_str(&body).expect("JSON answer");
        assert_eq!(
            answer["status"], "success",
            "GET {path} {params:?}: {answer}"
        );
        answer["data"].clone()
    }

    /// The names of the series the server holds now (`/api/v1/label/__name__/values`).
    pub fn series_names(&self) -> Vec<String> {
        self.api("/api/v1/label/__name__/values", &[])
            .as_array()
            .expect("names")
            .iter()
            .filter_map(|n| n.as_str().map(String::from))
            .collect()
    }

    /// The active alerts (`/api/v1/alerts`): each with `labels.alertname` and `state`.
    pub fn alerts(&self) -> Vec<Value> {
        self.api("/api/v1/alerts", &[])["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The scrape targets and their health (`/api/v1/targets`: `activeTargets`).
    pub fn targets(&self) -> Vec<Value> {
        self.api("/api/v1/targets", &[])["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // nsenter execs prometheus (no --fork): this PID is the server's.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
