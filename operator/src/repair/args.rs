//! The repairer's flags (flattened into the operator's CLI) and their parsing.

use std::time::Duration;

use clap::Args;
use rules::decision::DecisionConfig;

use super::Settings;

/// Flags of the pod repairer (off by default).
#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    /// Restart, through the Eviction API (PodDisruptionBudgets apply), pods that run a Linkerd proxy
    /// in an enabled namespace (or are Linkerd's control plane) but lack the linkerd-cni attachment,
    /// and such pods whose linkerd-network-validator exited with code 95. Only pods a ReplicaSet,
    /// StatefulSet, DaemonSet or ReplicationController recreates; never bare pods or Jobs' pods. Only
    /// the leader repairs. Needs pods get/list/watch and pods/eviction create.
    #[arg(long, global = true, env = "REPAIR_UNATTACHED_PODS")]
    pub repair_unattached_pods: bool,

    /// Evictions (attempts, dry-run included) sent in any 60 s at most; the rest wait.
    #[arg(long, global = true, env = "REPAIR_MAX_PER_MINUTE",
          default_value_t = vocab::DEFAULT_REPAIR_MAX_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repair_max_per_minute: u32,

    /// A pod evicted (or whose eviction was tried) is not tried again for this long: a number
    /// followed by s, m or h (e.g. 90s, 10m, 1h).
    #[arg(long, global = true, env = "REPAIR_COOLDOWN",
          default_value = vocab::DEFAULT_REPAIR_COOLDOWN, value_parser = parse_duration)]
    pub repair_cooldown: Duration,

    /// Only report (log and metric `pod_repairs_total{outcome="dry_run"}`) what would be evicted:
    /// no eviction, no Event.
    #[arg(long, global = true, env = "REPAIR_DRY_RUN")]
    pub repair_dry_run: bool,
}

impl RepairArgs {
    /// The repairer's settings (it decides like the webhook, with `decision`); None when it is off.
    pub fn settings(&self, decision: DecisionConfig) -> Option<Settings> {
        self.repair_unattached_pods.then_some(Settings {
            decision,
            max_per_minute: self.repair_max_per_minute,
            cooldown: self.repair_cooldown,
            dry_run: self.repair_dry_run,
        })
    }
}

/// `<number><s|m|h>`, at least one second.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad =
        || format!("{text:?} is not a duration: write a number followed by s, m or h (e.g. 10m)");
    let text = text.trim();
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => Some(number),
        "m" => number.checked_mul(60),
        "h" => number.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(bad)?;
    if seconds == 0 {
        return Err(format!("{text:?}: the cooldown must be at least 1s"));
    }
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;
    use crate::config::Config;

    fn run_config(argv: &[&str]) -> Option<Settings> {
        match Config::from_cli(Cli::try_parse_from(argv).expect("parse")) {
            Config::Run(run) => run.controller.repair,
            Config::Check(_) => panic!("not run"),
        }
    }

    /// Off by default; on, it decides with the webhook's flags and the shared defaults.
    #[test]
    fn off_by_default_and_configured_once() {
        assert!(run_config(&["x"]).is_none());
        let s = run_config(&["x", "--repair-unattached-pods", "--nad-name=n"]).expect("on");
        assert_eq!(s.decision.nad_name, "n");
        assert_eq!(s.max_per_minute, vocab::DEFAULT_REPAIR_MAX_PER_MINUTE);
        assert_eq!(
            Ok(s.cooldown),
            parse_duration(vocab::DEFAULT_REPAIR_COOLDOWN)
        );
        assert!(!s.dry_run);
        let s = run_config(&[
            "x",
            "--repair-unattached-pods",
            "--repair-max-per-minute=2",
            "--repair-cooldown=90s",
            "--repair-dry-run",
        ])
        .expect("on");
        assert_eq!(
            (s.max_per_minute, s.cooldown, s.dry_run),
            (2, Duration::from_secs(90), true)
        );
    }

    #[test]
    fn bad_values_fail_to_parse() {
        for argv in [
            &["x", "--repair-max-per-minute", "0"][..],
            &["x", "--repair-cooldown", "10"],
            &["x", "--repair-cooldown", "0m"],
        ] {
            let err = Cli::try_parse_from(argv).expect_err("refused");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{argv:?}"
            );
        }
    }

    #[test]
    fn durations() {
        let cases = [
            ("90s", Some(90)),
            ("10m", Some(600)),
            ("1h", Some(3600)),
            (" 5m ", Some(300)),
            ("0s", None),
            ("10", None),
            ("m", None),
            ("", None),
            ("1d", None),
            ("-1m", None),
            ("1.5m", None),
            ("99999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_duration(text).ok(),
                want.map(Duration::from_secs),
                "{text:?}"
            );
        }
        assert!(parse_duration("10x").unwrap_err().contains("s, m or h"));
    }
}
