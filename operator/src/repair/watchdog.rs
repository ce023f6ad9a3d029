//! PURE: repair that stops when it harms. After each eviction the owner's replacement must become
//! Ready within [`Watchdog::deadline`]; if none does, evicting that owner's pods stops (a restart
//! that cannot come up again turns a working pod into a broken one), and once [`Watchdog::halt_all_at`]
//! owners are halted, all repair stops: something cluster-wide is wrong (a NAD Multus refuses, the
//! plugin failing on the nodes). An owner is released as soon as one of its replacements is Ready.
//! Time is passed in, so tests step it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How long a replacement may take to become Ready before its owner's repair is halted: image
/// pulls and the proxy's start take tens of seconds; a sandbox that Multus refuses never comes up.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);
/// Halted owners at which all repair stops.
pub const DEFAULT_HALT_ALL_AT: usize = 3;

/// What the watchdog knows of a pod of a watched owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    pub name: String,
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
    evicted: String,
    at: Timestamp,
    halted: bool,
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

    /// Records an eviction of `pod` of `owner` (uid, and `Kind name` for reports) at `at`. An owner
    /// already watched keeps its first eviction: the replacement of that one is still awaited.
    pub fn evicted(&mut self, owner_uid: &str, owner: O, pod: &str, at: Timestamp) {
        self.watched
            .entry(owner_uid.to_string())
            .or_insert_with(|| {
                (
                    owner,
                    Watched {
                        evicted: pod.to_string(),
                        at,
                        halted: false,
                    },
                )
            });
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
                .filter(|p| p.created >= w.at)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pod(name: &str, created: i64, ready: bool) -> Replacement {
        Replacement {
            name: name.into(),
            created: t(created),
            ready,
        }
    }

    #[test]
    fn a_ready_replacement_releases_the_owner_silently() {
        let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(120), 3);
        w.evicted("rs1", "ReplicaSet web", "web-a", t(0));
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
        w.evicted("rs1", "ReplicaSet web", "web-a", t(0));
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
        w.evicted("rs1", "ReplicaSet a", "a-1", t(0));
        w.evicted("rs2", "ReplicaSet b", "b-1", t(10));
        assert_eq!(w.review(t(65), |_| vec![]).len(), 1);
        assert_eq!(w.allow("rs3"), Allow::Go);
        assert_eq!(w.review(t(75), |_| vec![]).len(), 1);
        assert_eq!(w.allow("rs3"), Allow::AllHalted { owners: 2 });
        // A second eviction of a watched owner keeps the first one's clock.
        w.evicted("rs1", "ReplicaSet a", "a-2", t(80));
        assert_eq!(w.allow("rs1"), Allow::AllHalted { owners: 2 });
    }
}
