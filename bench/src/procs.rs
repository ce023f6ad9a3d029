//! What /proc says of processes on this machine: a process's RSS and CPU time, and a snapshot of
//! the CPU of every process a bench part shares the machine with (the apiserver, etcd, the bench's
//! own servers) and of the machine itself, so a row that misses can say where the time went.

use std::collections::BTreeMap;

use anyhow::Context;

/// `field` (e.g. `VmRSS`) of `/proc/<pid>/status`, in KB (`pid` may be `self`).
pub(crate) fn status_kb(pid: &str, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// User + system CPU seconds of process `pid` so far.
pub(crate) fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    stat_cpu_seconds(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

/// User + system CPU seconds from a `/proc/<pid>/stat` line (fields 14 and 15, in clock ticks of
/// 1/100 s, the Linux default).
fn stat_cpu_seconds(stat: &str) -> anyhow::Result<f64> {
    // The command name (field 2) may hold spaces; the fields after its closing ')' do not.
    let after = stat
        .rsplit_once(')')
        .context("malformed /proc/<pid>/stat")?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields
            .get(i)
            .context("short /proc/<pid>/stat")?
            .parse::<f64>()?)
    };
    // `after` starts at field 3, so fields 14 and 15 are at 11 and 12.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// CPU seconds so far of the machine (busy, idle, stolen by the hypervisor) and of each process
/// the bench cares for, by label.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSnapshot {
    pub busy: f64,
    pub idle: f64,
    pub steal: f64,
    pub by_label: BTreeMap<String, f64>,
}

impl CpuSnapshot {
    /// Reads /proc now. Processes that vanish while being read are skipped.
    pub fn take() -> anyhow::Result<Self> {
        let mut snapshot = machine(&std::fs::read_to_string("/proc/stat")?)?;
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let dir = entry.path();
            let (Ok(stat), Ok(cmdline)) = (
                std::fs::read_to_string(dir.join("stat")),
                std::fs::read(dir.join("cmdline")),
            ) else {
                continue;
            };
            let argv: Vec<String> = cmdline
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if let (Some(label), Ok(secs)) = (label(&argv), stat_cpu_seconds(&stat)) {
                *snapshot.by_label.entry(label).or_default() += secs;
            }
        }
        Ok(snapshot)
    }

    /// What was spent between `earlier` and this snapshot, one line: "busy 3.1 s, idle 0.2 s,
    /// steal 0.0 s; kube-apiserver 2.0 s, ...".
    pub fn since(&self, earlier: &CpuSnapshot) -> String {
        let mut line = format!(
            "busy {:.1} s, idle {:.1} s, steal {:.1} s",
            self.busy - earlier.busy,
            self.idle - earlier.idle,
            self.steal - earlier.steal
        );
        let spent: Vec<String> = self
            .by_label
            .iter()
            .map(|(label, secs)| {
                let before = earlier.by_label.get(label).copied().unwrap_or(0.0);
                format!("{label} {:.2} s", secs - before)
            })
            .collect();
        if !spent.is_empty() {
            line.push_str("; ");
            line.push_str(&spent.join(", "));
        }
        line
    }
}

/// The machine's line of /proc/stat: `cpu user nice system idle iowait irq softirq steal ...`.
fn machine(stat: &str) -> anyhow::Result<CpuSnapshot> {
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("no cpu line in /proc/stat")?;
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<f64>().map(|t| t / 100.0))
        .collect::<Result<_, _>>()
        .context("malformed cpu line in /proc/stat")?;
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0.0);
    Ok(CpuSnapshot {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3) + at(4),
        steal: at(7),
        by_label: BTreeMap::new(),
    })
}

/// Which of the bench's neighbours a command line is: the control plane by its binary, the
/// bench's own processes by their subcommand (the constant-patch floor apart from the plain one).
fn label(argv: &[String]) -> Option<String> {
    let program = argv.first()?.rsplit('/').next()?;
    // The testbed runs cached builds named by version (`kube-apiserver-v1.20.2-r2`).
    if let Some(name) = ["kube-apiserver", "etcd"]
        .into_iter()
        .find(|name| program.starts_with(name))
    {
        return Some(name.to_string());
    }
    // The operator under test, also when a copy of it is named for an A/B run.
    if program.starts_with("linkerd-multus-operator") {
        return Some("operator".to_string());
    }
    match program {
        "linkerd-multus-bench" => {
            let sub = argv.get(1)?;
            if argv.iter().any(|a| a == "--patch") {
                Some(format!("{sub} --patch"))
            } else {
                Some(sub.clone())
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn labels_name_the_control_plane_and_the_benchs_servers_only() {
        assert_eq!(
            label(&argv("/usr/bin/etcd --data-dir x")).as_deref(),
            Some("etcd")
        );
        assert_eq!(
            label(&argv("/cache/kube-apiserver-v1.20.2-r2 --etcd-servers x")).as_deref(),
            Some("kube-apiserver")
        );
        assert_eq!(
            label(&argv(
                "target/release/linkerd-multus-bench webhook --addr a"
            ))
            .as_deref(),
            Some("webhook")
        );
        assert_eq!(
            label(&argv(
                "linkerd-multus-bench floor-webhook --echo-uid --patch"
            ))
            .as_deref(),
            Some("floor-webhook --patch")
        );
        assert_eq!(
            label(&argv("/tmp/linkerd-multus-operator-before run")).as_deref(),
            Some("operator")
        );
        assert_eq!(label(&argv("/usr/bin/bash -c etcd")), None);
        assert_eq!(label(&[]), None);
    }

    #[test]
    fn the_machine_line_splits_busy_idle_and_steal() {
        let stat = "cpu  100 0 50 300 10 5 5 20 0 0\ncpu0 50 0 25 150 5 2 3 10 0 0\n";
        let m = machine(stat).unwrap();
        assert_eq!((m.busy, m.idle, m.steal), (1.6, 3.1, 0.2));
        assert!(machine("intr 1 2 3").is_err());
    }

    #[test]
    fn a_process_stat_gives_user_plus_system_even_with_a_spaced_name() {
        let stat = "42 (a b) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(stat_cpu_seconds(stat).unwrap(), 3.0);
        assert!(stat_cpu_seconds("42 (x").is_err());
    }

    #[test]
    fn since_is_what_was_spent_in_between() {
        let earlier = CpuSnapshot {
            busy: 1.0,
            idle: 1.0,
            steal: 0.0,
            by_label: [("etcd".to_string(), 0.5)].into(),
        };
        let later = CpuSnapshot {
            busy: 3.0,
            idle: 1.5,
            steal: 0.25,
            by_label: [("etcd".to_string(), 1.0), ("webhook".to_string(), 0.3)].into(),
        };
        assert_eq!(
            later.since(&earlier),
            "busy 2.0 s, idle 0.5 s, steal 0.2 s; etcd 0.50 s, webhook 0.30 s"
        );
    }
}
