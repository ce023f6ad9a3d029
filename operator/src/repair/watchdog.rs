//! PURE: repair that stops when it harms. After each eviction the owner's replacement must become
//! Ready within [`Watchdog::deadline`]; if none does, evicting that owner's pods stops (a restart
//! that cannot come up again turns a working pod into a broken one), and once [`Watchdog::halt_all_at`]
//! owners are halted, all repair stops: something cluster-wide is wrong (a NAD Multus refuses, the
//! plugin failing on the nodes). An owner is released as soon as one of its replacements is Ready.
//! Time is passed in, so tests step it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How long a replacement may take to become Ready before its owner's repair is halted: image
/// pulls and the proxy's start take tens of seconds; a sandbox that Multus refuses never comes up.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);
/// Halted owners at which all repair stops.
pub const DEFAULT_HALT_ALL_AT: usize = 3;
/// How far the operator's clock may run ahead of the API server's and a replacement still count.
///
/// Why time at all, and why this slack: a pod's `creationTimestamp` is the server's clock in whole
/// seconds, the eviction time the operator's, taken just before the eviction is sent. A ReplicaSet
/// recreates the pod within the same second (measured on the node: always), so comparing the
/// sub-second eviction time with the truncated creation time missed nearly every replacement and
/// halted healthy owners. Comparing whole seconds (both truncated) is exact when the clocks agree;
/// each second of the operator's clock ahead of the server's needs one second of slack, and nodes'
/// clocks drift by up to a second or so without NTP trouble. The cost of the slack: a pod of the
/// owner created up to this long *before* the eviction also counts, which only releases an owner
/// whose pods do start. Identity (the pods that existed at the eviction) would need no clock, but a
/// new leader reading the state back (see [`Watchdog::restore_halted`]) has no such list, only times.
pub const CLOCK_SLACK_SECONDS: i64 = 2;

/// What the watchdog knows of a pod of a watched owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    pub name: String,
    pub uid: String,
    pub created: Timestamp,
    pub ready: bool,
}

/// Whether the repairer may evict a pod of an owner now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allow {
    Go,
    /// This owner's last replacement never became Ready.
    OwnerHalted,
    /// Too many owners are halted: every repair waits.
    AllHalted {
        owners: usize,
    },
}

/// A change to report (Event, log, metric); `O` is how the caller names an owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<O> {
    /// `owner`'s replacement of `evicted` is not Ready after the deadline.
    Halted {
        owner: O,
        evicted: String,
        waiting: Vec<String>,
    },
    /// A replacement of `owner` is Ready again.
    Resumed { owner: O },
}

#[derive(Clone, Debug)]
struct Watched {
    /// The evicted pod's name (for reports) and uid (never its own replacement: a StatefulSet's
    /// replacement has the same name).
    evicted: String,
    evicted_uid: String,
    /// When the eviction was sent, by the operator's clock.
    at: Timestamp,
    halted: bool,
}

impl Watched {
    /// A pod of the owner created at or after the eviction, whole seconds compared, with
    /// [`CLOCK_SLACK_SECONDS`] for the operator's clock running ahead.
    fn replaced_by(&self, pod: &Replacement) -> bool {
        pod.uid != self.evicted_uid
            && pod.created.as_second() >= self.at.as_second() - CLOCK_SLACK_SECONDS
    }
}

/// One of the repairer's own `PodRepairHalted` / `PodRepairResumed` Events, as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported<O> {
    pub owner_uid: String,
    pub owner: O,
    pub halted: bool,
    pub at: Timestamp,
}

/// The owners whose latest report is a halt (with its time): what a new leader restores.
pub fn still_halted<O>(reports: Vec<Reported<O>>) -> Vec<Reported<O>> {
    let mut latest: BTreeMap<String, Reported<O>> = BTreeMap::new();
    for r in reports {
        if latest.get(&r.owner_uid).is_none_or(|l| l.at <= r.at) {
            latest.insert(r.owner_uid.clone(), r);
        }
    }
    latest.into_values().filter(|r| r.halted).collect()
}

/// Evictions whose replacements are awaited, by owner uid; `O` names the owner in reports.
#[derive(Clone, Debug)]
pub struct Watchdog<O> {
    pub deadline: Duration,
    pub halt_all_at: usize,
    watched: BTreeMap<String, (O, Watched)>,
}

impl<O: Clone> Default for Watchdog<O> {
    fn default() -> Self {
        Self::new(DEFAULT_DEADLINE, DEFAULT_HALT_ALL_AT)
    }
}

impl<O: Clone> Watchdog<O> {
    pub fn new(deadline: Duration, halt_all_at: usize) -> Self {
        Self {
            deadline,
            halt_all_at: halt_all_at.max(1),
            watched: BTreeMap::new(),
        }
    }

    /// Records an eviction of `pod` (name, uid) of `owner` (uid, and `Kind name` for reports), sent
    /// at `at` (take the time *before* sending: the replacement may be created before the answer
    /// arrives). An owner already watched keeps its first eviction: its replacement is still awaited.
    pub fn evicted(&mut self, owner_uid: &str, owner: O, pod: (&str, &str), at: Timestamp) {
        self.watched
            .entry(owner_uid.to_string())
            .or_insert_with(|| {
                (
                    owner,
                    Watched {
                        evicted: pod.0.to_string(),
                        evicted_uid: pod.1.to_string(),
                        at,
                        halted: false,
                    },
                )
            });
    }

    /// A halt reported before this watchdog started (by a previous leader, or this process before a
    /// restart), read back from its `PodRepairHalted` Event: the owner stays halted until a pod of it
    /// created at or after `evicted_by` is Ready. The reports carry no eviction time, so the caller
    /// passes the earliest the eviction can have been (the Event's time minus the deadline and the
    /// review interval): a pod created in that window also counts, which only releases an owner
    /// whose pods do start.
    pub fn restore_halted(&mut self, owner_uid: &str, owner: O, evicted_by: Timestamp) {
        self.watched.insert(
            owner_uid.to_string(),
            (
                owner,
                Watched {
                    evicted: String::new(),
                    evicted_uid: String::new(),
                    at: evicted_by,
                    halted: true,
                },
            ),
        );
    }

    pub fn allow(&self, owner_uid: &str) -> Allow {
        let halted = self.halted();
        if halted >= self.halt_all_at {
            return Allow::AllHalted { owners: halted };
        }
        match self.watched.get(owner_uid) {
            Some((_, w)) if w.halted => Allow::OwnerHalted,
            _ => Allow::Go,
        }
    }

    pub fn halted(&self) -> usize {
        self.watched.values().filter(|(_, w)| w.halted).count()
    }

    /// The owners whose replacements are awaited (uids), for the caller to look their pods up.
    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.watched.keys().map(String::as_str)
    }

    /// Judges every watched owner at `now`; `pods_of(owner_uid)` are that owner's current pods.
    pub fn review(
        &mut self,
        now: Timestamp,
        pods_of: impl Fn(&str) -> Vec<Replacement>,
    ) -> Vec<Change<O>> {
        let mut changes = Vec::new();
        let deadline = self.deadline;
        self.watched.retain(|uid, (owner, w)| {
            let replacements: Vec<Replacement> = pods_of(uid)
                .into_iter()
                .filter(|p| w.replaced_by(p))
                .collect();
            if replacements.iter().any(|p| p.ready) {
                if w.halted {
                    changes.push(Change::Resumed {
                        owner: owner.clone(),
                    });
                }
                return false;
            }
            let waited = now.duration_since(w.at).unsigned_abs();
            if !w.halted && waited >= deadline {
                w.halted = true;
                changes.push(Change::Halted {
                    owner: owner.clone(),
                    evicted: w.evicted.clone(),
                    waiting: replacements.into_iter().map(|p| p.name).collect(),
                });
            }
            true
        });
        changes
    }
}

/// `at` minus `d` (saturating at the earliest timestamp).
pub fn before(at: Timestamp, d: Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    at.checked_sub(d).unwrap_or(Timestamp::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    /// `t(secs)` plus `millis`: the operator's sub-second clock.
    fn t_ms(secs: i64, millis: i64) -> Timestamp {
        t(secs) + SignedDuration::from_millis(millis)
    }

    fn pod(name: &str, created: i64, ready: bool) -> Replacement {
        Replacement {
            name: name.into(),
            uid: format!("uid-{name}"),
            created: t(created),
            ready,
        }
    }

    #[test]
    fn a_ready_replacement_releases_the_owner_silently() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(120), 3);
        w.evicted("rs1", "ReplicaSet web", ("web-a", "uid-web-a"), t(0));
        assert_eq!(w.review(t(30), |_| vec![pod("web-b", 1, false)]), vec![]);
        assert_eq!(w.allow("rs1"), Allow::Go, "waiting is not halting");
        assert_eq!(w.review(t(40), |_| vec![pod("web-b", 1, true)]), vec![]);
        assert_eq!(w.owners().count(), 0);
    }

    /// The case: each replacement hangs in a failing sandbox. The owner stops being repaired
    /// after the deadline, resumes once a replacement is Ready; pods older than the eviction (the
    /// healthy ones left) do not count as replacements.
    #[test]
    fn a_replacement_that_never_becomes_ready_halts_its_owner_until_one_does() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(120), 3);
        w.evicted("rs1", "ReplicaSet web", ("web-a", "uid-web-a"), t(0));
        let hanging = |_: &str| vec![pod("old-healthy", -500, true), pod("web-b", 2, false)];
        assert_eq!(w.review(t(119), hanging), vec![]);
        assert_eq!(
            w.review(t(120), hanging),
            vec![Change::Halted {
                owner: "ReplicaSet web",
                evicted: "web-a".into(),
                waiting: vec!["web-b".into()],
            }]
        );
        assert_eq!(w.allow("rs1"), Allow::OwnerHalted);
        assert_eq!(w.allow("rs2"), Allow::Go);
        assert_eq!(w.review(t(200), hanging), vec![], "reported once");
        assert_eq!(
            w.review(t(300), |_| vec![pod("web-b", 2, true)]),
            vec![Change::Resumed {
                owner: "ReplicaSet web"
            }]
        );
        assert_eq!(w.allow("rs1"), Allow::Go);
    }

    #[test]
    fn enough_halted_owners_stop_all_repair() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 2);
        w.evicted("rs1", "ReplicaSet a", ("a-1", "uid-a-1"), t(0));
        w.evicted("rs2", "ReplicaSet b", ("b-1", "uid-b-1"), t(10));
        assert_eq!(w.review(t(65), |_| vec![]).len(), 1);
        assert_eq!(w.allow("rs3"), Allow::Go);
        assert_eq!(w.review(t(75), |_| vec![]).len(), 1);
        assert_eq!(w.allow("rs3"), Allow::AllHalted { owners: 2 });
        // A second eviction of a watched owner keeps the first one's clock.
        w.evicted("rs1", "ReplicaSet a", ("a-2", "uid-a-2"), t(80));
        assert_eq!(w.allow("rs1"), Allow::AllHalted { owners: 2 });
    }

    /// The case: a ReplicaSet's replacement created within the second of the eviction (its
    /// creationTimestamp truncated, the eviction time not) is a replacement; before the fix the owner
    /// was halted at the deadline although the new pod was Ready.
    #[test]
    fn a_replacement_created_in_the_same_second_counts() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(120), 3);
        w.evicted(
            "rs1",
            "ReplicaSet web",
            ("web-a", "uid-web-a"),
            t_ms(0, 700),
        );
        let ready = |_: &str| vec![pod("web-b", 0, true)];
        assert_eq!(
            w.review(t(130), ready),
            vec![],
            "halted a Ready replacement"
        );
        assert_eq!(w.owners().count(), 0, "released");
        assert_eq!(w.allow("rs1"), Allow::Go);
    }

    /// The operator's clock 0.9 s ahead of the server's: evicted at server time 100.9, recorded as
    /// 101.8; the replacement created at server time 101.5 reads 101, earlier than the record.
    #[test]
    fn a_replacement_counts_with_the_operator_clock_ahead() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(120), 3);
        w.evicted(
            "rs1",
            "ReplicaSet web",
            ("web-a", "uid-web-a"),
            t_ms(101, 800),
        );
        assert_eq!(w.review(t(300), |_| vec![pod("web-b", 101, true)]), vec![]);
        assert_eq!(w.owners().count(), 0, "released");
    }

    /// A StatefulSet recreates its pod under the same name: the new uid counts, the evicted pod
    /// itself (still Ready while it terminates, created in the eviction's second) does not; a pod
    /// created longer than the slack before the eviction does not either.
    #[test]
    fn identity_not_name_and_not_older_pods() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 3);
        w.evicted("ss1", "StatefulSet db", ("db-0", "old"), t_ms(10, 300));
        let terminating = Replacement {
            name: "db-0".into(),
            uid: "old".into(),
            created: t(10),
            ready: true,
        };
        let older = pod("db-1", 10 - CLOCK_SLACK_SECONDS - 1, true);
        let pods = |_: &str| vec![terminating.clone(), older.clone()];
        assert_eq!(w.review(t(69), pods), vec![]);
        assert_eq!(w.review(t(71), pods).len(), 1, "halted");
        let recreated = Replacement {
            name: "db-0".into(),
            uid: "new".into(),
            created: t(75),
            ready: true,
        };
        assert_eq!(
            w.review(t(80), |_| vec![recreated.clone()]),
            vec![Change::Resumed {
                owner: "StatefulSet db"
            }]
        );
    }

    /// A new leader reads its predecessor's Events: owners whose latest report is a halt stay
    /// halted (and count towards stopping all repair) until a pod created since the eviction is Ready.
    #[test]
    fn halts_survive_a_leader_change() {
        let report = |uid: &str, halted: bool, at: i64| Reported {
            owner_uid: uid.into(),
            owner: uid.to_string(),
            halted,
            at: t(at),
        };
        let reports = vec![
            report("a", true, 100),
            report("b", true, 100),
            report("b", false, 150),
            report("c", false, 100),
            report("c", true, 160),
        ];
        let halted = still_halted(reports);
        assert_eq!(
            halted
                .iter()
                .map(|r| r.owner_uid.as_str())
                .collect::<Vec<_>>(),
            ["a", "c"]
        );
        let mut w: Watchdog<String> = Watchdog::new(Duration::from_secs(60), 2);
        for r in halted {
            w.restore_halted(&r.owner_uid, r.owner, before(r.at, Duration::from_secs(70)));
        }
        assert_eq!(w.allow("b"), Allow::AllHalted { owners: 2 });
        // The hanging replacement of a (created at 45, after its eviction at about 40) turns Ready;
        // an old pod of c (created long before) does not release c.
        let pods = |uid: &str| match uid {
            "a" => vec![pod("a-new", 45, true)],
            _ => vec![pod("c-old", -1000, true)],
        };
        assert_eq!(
            w.review(t(200), pods),
            vec![Change::Resumed { owner: "a".into() }]
        );
        assert_eq!(w.allow("c"), Allow::OwnerHalted);
        assert_eq!(w.allow("b"), Allow::Go);
    }
}
