//! The DaemonSet's readiness signal. After every pass the running installer records in a status file
//! inside its own container (`--ready-file`, the pod's /tmp emptyDir; never the node's CNI dirs, which
//! runtimes read) whether the node is installed, and why not; `linkerd-cni-install --ready-check` is
//! the exec probe that reads it.
//!
//! Why an exec probe over a status file: the image has no shell, so the probe runs this binary; an HTTP
//! endpoint would need a port on the host network (the pod uses it) that could clash with anything on
//! the node; and re-checking the node's files in the probe would copy the pass' logic and re-read the
//! plugin binary every period. The file carries the installer's own verdict, so the pod's events show
//! its reason word for word. It is rewritten every pass (at least every `--resync`), so a stuck
//! installer goes stale, and removed at start and on SIGTERM, so neither a restarted container's old
//! file nor an uninstalling installer counts as ready.

use crate::installer::Report;
use std::io;
use std::path::Path;
use std::time::Duration;

/// Mode of the status file: it holds no secret.
const STATUS_MODE: u32 = 0o644;
const READY: &str = "ready";
const NOT_READY: &str = "not ready: ";
const STALE_AFTER: &str = "stale-after-seconds: ";

/// What one pass means for the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Ready,
    NotReady(String),
}

impl Status {
    /// Ready when every step succeeded and nothing is still waiting (in `append` mode: for a primary
    /// network config to chain onto).
    pub fn of(report: &Report) -> Status {
        let mut why: Vec<String> = report
            .errors
            .iter()
            .map(|e| vocab::report::chain(e))
            .collect();
        why.extend(report.waiting.iter().cloned());
        if why.is_empty() {
            Status::Ready
        } else {
            Status::NotReady(why.join("; "))
        }
    }

    /// The status file's text: the verdict on one line, then how old it may get.
    pub fn render(&self, stale_after: Duration) -> String {
        let verdict = match self {
            Status::Ready => READY.to_string(),
            // One line: the reason is free text (error messages).
            Status::NotReady(why) => format!("{NOT_READY}{}", why.replace('\n', " ")),
        };
        format!("{verdict}\n{STALE_AFTER}{}\n", stale_after.as_secs())
    }
}

/// How old the status file may get before the probe calls the installer stuck: three missed passes,
/// plus slack for a slow one.
pub fn stale_after(resync: Duration) -> Duration {
    resync * 3 + Duration::from_secs(15)
}

/// Why the probe fails.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("the installer has not finished its first pass (no status file yet)")]
    NoStatus,
    #[error("{0}")]
    Reported(String),
    #[error("the installer's last pass was {age}s ago, stale after {limit}s: is it stuck?")]
    Stale { age: u64, limit: u64 },
    #[error("the status file is not the installer's: {0:?}")]
    Garbled(String),
    #[error("cannot read the status file: {0}")]
    Unreadable(String),
}

/// The probe's decision from the status file's text (`None`: no file) and its age.
pub fn verdict(text: Option<&str>, age: Duration) -> Result<(), NotReady> {
    let text = text.ok_or(NotReady::NoStatus)?;
    let garbled = || NotReady::Garbled(text.chars().take(200).collect());
    let mut lines = text.lines();
    let first = lines.next().ok_or_else(garbled)?;
    let limit: u64 = lines
        .next()
        .and_then(|l| l.strip_prefix(STALE_AFTER))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(garbled)?;
    if age.as_secs() > limit {
        return Err(NotReady::Stale {
            age: age.as_secs(),
            limit,
        });
    }
    match first {
        READY => Ok(()),
        _ => match first.strip_prefix(NOT_READY) {
            Some(why) => Err(NotReady::Reported(why.to_string())),
            None => Err(garbled()),
        },
    }
}

// === I/O ===

/// Records a pass' status (atomically: the probe never reads half a file).
pub fn publish(path: &Path, status: &Status, stale_after: Duration) -> io::Result<()> {
    crate::files::atomic_write(path, status.render(stale_after).as_bytes(), STATUS_MODE)
}

/// Removes the status file: the pod is not ready until the next pass says so.
pub fn clear(path: &Path) -> io::Result<bool> {
    crate::files::remove_optional(path)
}

/// The probe: reads the status file and its age (from its mtime; a clock stepped back counts as new).
pub fn check(path: &Path) -> Result<(), NotReady> {
    let unreadable = |e: io::Error| NotReady::Unreadable(format!("{}: {e}", path.display()));
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(unreadable(e)),
    };
    let age = match &text {
        Some(_) => std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(unreadable)?
            .elapsed()
            .unwrap_or_default(),
        None => Duration::ZERO,
    };
    verdict(text.as_deref(), age)
}

/// `--ready-check`: prints the verdict (the kubelet shows it in the pod's events) and exits 0 or 1.
pub fn check_main(path: &Path) -> std::process::ExitCode {
    match check(path) {
        Ok(()) => {
            println!("ready: the node is installed");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            println!("not ready: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InstallError;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_pass_is_ready_only_without_errors_and_waits() {
        let ok = Report::default();
        assert_eq!(Status::of(&ok), Status::Ready);
        let changed = Report {
            changes: vec!["installed the binary".into()],
            ..Report::default()
        };
        assert_eq!(
            Status::of(&changed),
            Status::Ready,
            "a repair that succeeded"
        );
        let waiting = Report {
            waiting: Some("no primary network config yet".into()),
            ..Report::default()
        };
        assert_eq!(
            Status::of(&waiting),
            Status::NotReady("no primary network config yet".into())
        );
        let failed = Report {
            errors: vec![
                InstallError::MissingEnv {
                    name: "KUBERNETES_SERVICE_HOST",
                },
                InstallError::EmptyToken { path: "/sa".into() },
            ],
            ..Report::default()
        };
        let Status::NotReady(why) = Status::of(&failed) else {
            panic!("errors must not be ready");
        };
        assert!(why.contains("KUBERNETES_SERVICE_HOST is not set"), "{why}");
        assert!(why.contains("; the service-account token /sa"), "{why}");
    }

    #[test]
    fn verdict_table() {
        let ready = Status::Ready.render(20 * S);
        let failing = Status::NotReady("cannot write /x\n(read-only)".into()).render(20 * S);
        let cases: &[(Option<&str>, Duration, Result<(), NotReady>)] = &[
            (Some(&ready), Duration::ZERO, Ok(())),
            (Some(&ready), 20 * S, Ok(())),
            (
                Some(&ready),
                21 * S,
                Err(NotReady::Stale { age: 21, limit: 20 }),
            ),
            (None, Duration::ZERO, Err(NotReady::NoStatus)),
            (
                Some(&failing),
                S,
                Err(NotReady::Reported("cannot write /x (read-only)".into())),
            ),
            // A stale failure says stale: the reason may be long fixed by now.
            (
                Some(&failing),
                60 * S,
                Err(NotReady::Stale { age: 60, limit: 20 }),
            ),
            (Some(""), S, Err(NotReady::Garbled("".into()))),
            (Some("ready\n"), S, Err(NotReady::Garbled("ready\n".into()))),
            (
                Some("ready\nstale-after-seconds: soon\n"),
                S,
                Err(NotReady::Garbled(
                    "ready\nstale-after-seconds: soon\n".into(),
                )),
            ),
            (
                Some("installed\nstale-after-seconds: 20\n"),
                S,
                Err(NotReady::Garbled(
                    "installed\nstale-after-seconds: 20\n".into(),
                )),
            ),
        ];
        for (text, age, expected) in cases {
            assert_eq!(&verdict(*text, *age), expected, "{text:?} at {age:?}");
        }
    }

    #[test]
    fn stale_after_leaves_room_for_missed_passes() {
        assert_eq!(stale_after(5 * S), 30 * S);
        assert_eq!(stale_after(3600 * S), 10815 * S);
    }

    #[test]
    fn publish_check_clear_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ready");
        assert_eq!(check(&path), Err(NotReady::NoStatus));
        publish(&path, &Status::Ready, 20 * S).expect("publish");
        assert_eq!(check(&path), Ok(()));
        publish(&path, &Status::NotReady("waiting".into()), 20 * S).expect("publish");
        assert_eq!(check(&path), Err(NotReady::Reported("waiting".into())));
        assert!(clear(&path).expect("clear"));
        assert_eq!(check(&path), Err(NotReady::NoStatus));
    }
}
