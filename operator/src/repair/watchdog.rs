//! PURE: repair that stops when it harms. After each eviction the owner's replacement must become
//! Ready within [`Watchdog::deadline`]; if none does, evicting that owner's pods stops (a restart
//! that cannot come up again turns a working pod into a broken one), and once [`Watchdog::halt_all_at`]
//! owners are halted, all repair stops: something cluster-wide is wrong (a NAD Multus refuses, the
//! plugin failing on the nodes). An owner is released as soon as one of its replacements is Ready,
//! or once it is gone ([`Gone`]: deleted, another object under its name, or scaled to zero replicas,
//! as a Deployment's rollout leaves the ReplicaSet it replaced): a halt of an owner that no longer
//! exists would otherwise count towards stopping all repair for good. Time and the owners' fates are
//! passed in, so tests step them.

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
    /// `owner` is gone; `halted`: it was halted (reported), else only watched.
    Released { owner: O, why: Gone, halted: bool },
}

/// Why a watched owner is no longer there to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// No object of that name, or it is being deleted.
    Deleted,
    /// Another object (another uid) under the same name: the one evicted from is deleted.
    Recreated,
    /// It exists but wants no pods (`spec.replicas: 0`): a Deployment's rollout scaled it down in
    /// favour of its new ReplicaSet, or it was scaled down. It has nothing left to repair.
    ScaledToZero,
}

/// What a GET of a watched owner found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Missing,
    Found {
        uid: String,
        deleting: bool,
        /// `spec.replicas`; None for a kind without it (DaemonSet).
        replicas: Option<i64>,
    },
}

impl Gone {
    /// The owner watched as `owner_uid` is gone, as `lookup` found it, or None: it is still there.
    pub fn judge(owner_uid: &str, lookup: &Lookup) -> Option<Self> {
        match lookup {
            Lookup::Missing => Some(Self::Deleted),
            Lookup::Found { uid, .. } if uid != owner_uid => Some(Self::Recreated),
            Lookup::Found { deleting: true, .. } => Some(Self::Deleted),
            Lookup::Found {
                replicas: Some(0), ..
            } => Some(Self::ScaledToZero),
            Lookup::Found { .. } => None,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Deleted => "it is deleted",
            Self::Recreated => "it is deleted (another object of that name exists now)",
            Self::ScaledToZero => {
                "it is scaled to zero replicas (a Deployment's rollout replaced this ReplicaSet, or \
                 it was scaled down): it has no pod left to repair"
            }
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Deleted => "deleted",
            Self::Recreated => "recreated",
            Self::ScaledToZero => "scaled_to_zero",
        }
    }
}

/// A halted owner, as published and read back (see `state.rs`): the evicted pod and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halt<O> {
    pub owner_uid: String,
    pub owner: O,
    /// The evicted pod whose replacement never became Ready (empty when not known: read back from
    /// an Event).
    pub evicted: String,
    /// When it was evicted (by the operator's clock), or the earliest it can have been.
    pub evicted_at: Timestamp,
    /// When the halt was decided.
    pub halted_at: Timestamp,
}

#[derive(Clone, Debug)]
struct Watched {
    /// The evicted pod's name (for reports) and uid (never its own replacement: a StatefulSet's
    /// replacement has the same name).
    evicted: String,
    evicted_uid: String,
    /// When the eviction was sent, by the operator's clock.
    at: Timestamp,
    /// When the owner was halted.
    halted: Option<Timestamp>,
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
                        halted: None,
                    },
                )
            });
    }

    /// A halt decided before this watchdog started (by a previous leader, or this process before a
    /// restart), read back from the published state or a `PodRepairHalted` Event: the owner stays
    /// halted until a pod of it created at or after `halt.evicted_at` is Ready, or it is gone. An
    /// Event carries no eviction time, so for one the caller passes the earliest the eviction can
    /// have been (the Event's time minus the deadline and the review interval): a pod created in that
    /// window also counts, which only releases an owner whose pods do start.
    pub fn restore_halted(&mut self, halt: Halt<O>) {
        self.watched.insert(
            halt.owner_uid,
            (
                halt.owner,
                Watched {
                    evicted: halt.evicted,
                    evicted_uid: String::new(),
                    at: halt.evicted_at,
                    halted: Some(halt.halted_at),
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
            Some((_, w)) if w.halted.is_some() => Allow::OwnerHalted,
            _ => Allow::Go,
        }
    }

    pub fn halted(&self) -> usize {
        self.watched
            .values()
            .filter(|(_, w)| w.halted.is_some())
            .count()
    }

    /// Whether all repair stops ([`Allow::AllHalted`]).
    pub fn all_halted(&self) -> bool {
        self.halted() >= self.halt_all_at
    }

    /// The halted owners, by uid: what is published and what a new leader restores.
    pub fn halts(&self) -> Vec<Halt<O>> {
        self.watched
            .iter()
            .filter_map(|(uid, (owner, w))| {
                Some(Halt {
                    owner_uid: uid.clone(),
                    owner: owner.clone(),
                    evicted: w.evicted.clone(),
                    evicted_at: w.at,
                    halted_at: w.halted?,
                })
            })
            .collect()
    }

    /// The owners whose replacements are awaited or who are halted (uid, owner), for the caller to
    /// look their pods and their objects up.
    pub fn owners(&self) -> impl Iterator<Item = (&str, &O)> {
        self.watched
            .iter()
            .map(|(uid, (owner, _))| (uid.as_str(), owner))
    }

    /// Judges every watched owner at `now`; `pods_of(owner_uid)` are that owner's current pods,
    /// `gone(owner_uid)` whether the owner itself is gone (None: there, or not known).
    pub fn review(
        &mut self,
        now: Timestamp,
        pods_of: impl Fn(&str) -> Vec<Replacement>,
        gone: impl Fn(&str) -> Option<Gone>,
    ) -> Vec<Change<O>> {
        let mut changes = Vec::new();
        let deadline = self.deadline;
        self.watched.retain(|uid, (owner, w)| {
            let replacements: Vec<Replacement> = pods_of(uid)
                .into_iter()
                .filter(|p| w.replaced_by(p))
                .collect();
            if replacements.iter().any(|p| p.ready) {
                if w.halted.is_some() {
                    changes.push(Change::Resumed {
                        owner: owner.clone(),
                    });
                }
                return false;
            }
            // Before the deadline: an owner deleted while its replacement was awaited is never
            // halted (its pods go with it).
            if let Some(why) = gone(uid) {
                changes.push(Change::Released {
                    owner: owner.clone(),
                    why,
                    halted: w.halted.is_some(),
                });
                return false;
            }
            let waited = now.duration_since(w.at).unsigned_abs();
            if w.halted.is_none() && waited >= deadline {
                w.halted = Some(now);
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
#[path = "watchdog_tests.rs"]
mod tests;
