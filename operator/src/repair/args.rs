//! The repairer's flags (flattened into the operator's CLI) and their parsing.

use std::time::Duration;

use clap::Args;
use rules::decision::DecisionConfig;

use super::state::StateLocation;
use super::RepairSettings;

/// Flags of the pod repairer (off by default).
#[derive(Args, Debug, Clone)]
pub struct RepairArgs {
    /// Restart, through the Eviction API (PodDisruptionBudgets apply), pods that run a Linkerd proxy
    /// in an enabled namespace (or are Linkerd's control plane) but lack the linkerd-cni attachment,
    /// and such pods whose linkerd-network-validator exited with code 95 (with --attach aux-chain:
    /// once a linkerd-cni installer pod on their node is Ready). Only pods a ReplicaSet,
    /// StatefulSet, DaemonSet or ReplicationController recreates; never bare pods or Jobs' pods. Only
    /// the leader repairs. Needs pods get/list/watch and pods/eviction create.
    #[arg(long, global = true, env = "REPAIR_UNATTACHED_PODS")]
    pub repair_unattached_pods: bool,

    /// Evictions (attempts, dry-run included) sent in any 60 s at most; the rest wait.
    #[arg(long, global = true, env = "REPAIR_MAX_PER_MINUTE",
          default_value_t = vocab::DEFAULT_REPAIR_MAX_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repair_max_per_minute: u32,

    /// A pod evicted (or whose eviction was tried) is not tried again for this long: e.g. 90s, 10m,
    /// 1h30m (a bare number is seconds).
    #[arg(long, global = true, env = "REPAIR_COOLDOWN", value_name = "DURATION",
          default_value = vocab::DEFAULT_REPAIR_COOLDOWN, value_parser = vocab::duration::flag)]
    pub repair_cooldown: Duration,

    /// How long the replacement of an evicted pod may take to become Ready: past it, the owner's pods
    /// are not evicted again until one is, or the owner is deleted or scaled to zero (Events
    /// PodRepairHalted, PodRepairResumed, PodRepairReleased), and with 3 owners halted all repair
    /// stops. The halted owners are kept in ConfigMap <--lease-name>-repair in --namespace. E.g. 2m,
    /// 90s (a bare number is seconds).
    #[arg(long, global = true, env = "REPAIR_DEADLINE", value_name = "DURATION",
          default_value = DEFAULT_DEADLINE, value_parser = vocab::duration::flag)]
    pub repair_deadline: Duration,

    /// Only report (log and metric `pod_repairs_total{outcome="dry_run"}`) what would be evicted:
    /// no eviction, no Event.
    #[arg(long, global = true, env = "REPAIR_DRY_RUN")]
    pub repair_dry_run: bool,
}

/// `--repair-deadline`'s default, [`super::watchdog::DEFAULT_DEADLINE`] as the flag writes it.
const DEFAULT_DEADLINE: &str = "2m";

impl RepairArgs {
    /// The repairer's settings (it decides like the webhook, with `decision`; the installer pods run
    /// in `cni_namespace`; its halts are published at `state`); None when it is off. The NADs it
    /// reads come from the controller's watch.
    pub fn settings(
        &self,
        decision: DecisionConfig,
        cni_namespace: &str,
        state: StateLocation,
    ) -> Option<RepairSettings> {
        self.repair_unattached_pods.then(|| RepairSettings {
            decision,
            cni_namespace: cni_namespace.to_string(),
            max_per_minute: self.repair_max_per_minute,
            cooldown: self.repair_cooldown,
            deadline: self.repair_deadline,
            dry_run: self.repair_dry_run,
            state,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;
    use crate::config::Config;

    fn run_config(argv: &[&str]) -> Option<RepairSettings> {
        match Config::from_cli(Cli::try_parse_from(argv).expect("parse")) {
            Config::Run(run) => run.controller.repair,
            Config::Check(_) => panic!("not run"),
        }
    }

    /// Off by default; on, it decides with the webhook's flags and the shared defaults.
    #[test]
    fn off_by_default_and_configured_once() {
        assert!(run_config(&["x"]).is_none());
        let s = run_config(&[
            "x",
            "--repair-unattached-pods",
            "--nad-name=n",
            "--cni-namespace=c",
        ])
        .expect("on");
        assert_eq!(s.decision.nad.name, "n");
        assert_eq!(s.cni_namespace, "c");
        assert_eq!(s.max_per_minute, vocab::DEFAULT_REPAIR_MAX_PER_MINUTE);
        assert_eq!(
            Ok(s.cooldown),
            vocab::duration::flag(vocab::DEFAULT_REPAIR_COOLDOWN)
        );
        assert!(!s.dry_run);
        assert_eq!(s.deadline, super::super::watchdog::DEFAULT_DEADLINE);
        let s = run_config(&[
            "x",
            "--repair-unattached-pods",
            "--namespace=ops",
            "--lease-name=ld",
        ])
        .expect("on");
        assert_eq!(
            s.state,
            StateLocation {
                namespace: "ops".into(),
                name: "ld-repair".into()
            }
        );
        let s = run_config(&[
            "x",
            "--repair-unattached-pods",
            "--repair-max-per-minute=2",
            "--repair-cooldown=90s",
            "--repair-dry-run",
            "--repair-deadline=15s",
        ])
        .expect("on");
        assert_eq!(
            (s.max_per_minute, s.cooldown, s.dry_run, s.deadline),
            (2, Duration::from_secs(90), true, Duration::from_secs(15))
        );
    }

    #[test]
    fn bad_values_fail_to_parse() {
        for argv in [
            &["x", "--repair-max-per-minute", "0"][..],
            &["x", "--repair-cooldown", "10x"],
            &["x", "--repair-cooldown", "0m"],
            &["x", "--repair-deadline", "soon"],
        ] {
            let err = Cli::try_parse_from(argv).expect_err("refused");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{argv:?}"
            );
        }
        // A bare number is seconds, as for every duration flag.
        let s = run_config(&["x", "--repair-unattached-pods", "--repair-cooldown=10"]).expect("on");
        assert_eq!(s.cooldown, Duration::from_secs(10));
    }
}
