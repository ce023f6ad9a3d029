//! The watchdog's table tests (`watchdog.rs`).

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

/// `t(secs)` plus `millis`: the operator's sub-second clock.
fn t_ms(secs: i64, millis: i64) -> Timestamp {
    t(secs) + SignedDuration::from_millis(millis)
}

/// Every owner still exists.
fn there(_: &str) -> Option<Gone> {
    None
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
    assert_eq!(
        w.review(t(30), |_| vec![pod("web-b", 1, false)], there),
        vec![]
    );
    assert_eq!(w.allow("rs1"), Allow::Go, "waiting is not halting");
    assert_eq!(
        w.review(t(40), |_| vec![pod("web-b", 1, true)], there),
        vec![]
    );
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
    assert_eq!(w.review(t(119), hanging, there), vec![]);
    assert_eq!(
        w.review(t(120), hanging, there),
        vec![Change::Halted {
            owner: "ReplicaSet web",
            evicted: "web-a".into(),
            waiting: vec!["web-b".into()],
        }]
    );
    assert_eq!(w.allow("rs1"), Allow::OwnerHalted);
    assert_eq!(w.allow("rs2"), Allow::Go);
    assert_eq!(w.review(t(200), hanging, there), vec![], "reported once");
    assert_eq!(
        w.review(t(300), |_| vec![pod("web-b", 2, true)], there),
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
    assert_eq!(w.review(t(65), |_| vec![], there).len(), 1);
    assert_eq!(w.allow("rs3"), Allow::Go);
    assert_eq!(w.review(t(75), |_| vec![], there).len(), 1);
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
        w.review(t(130), ready, there),
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
    assert_eq!(
        w.review(t(300), |_| vec![pod("web-b", 101, true)], there),
        vec![]
    );
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
    assert_eq!(w.review(t(69), pods, there), vec![]);
    assert_eq!(w.review(t(71), pods, there).len(), 1, "halted");
    let recreated = Replacement {
        name: "db-0".into(),
        uid: "new".into(),
        created: t(75),
        ready: true,
    };
    assert_eq!(
        w.review(t(80), |_| vec![recreated.clone()], there),
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
        w.restore_halted(Halt {
            owner_uid: r.owner_uid,
            owner: r.owner,
            evicted: String::new(),
            evicted_at: before(r.at, Duration::from_secs(70)),
            halted_at: r.at,
        });
    }
    assert_eq!(w.allow("b"), Allow::AllHalted { owners: 2 });
    // The hanging replacement of a (created at 45, after its eviction at about 40) turns Ready;
    // an old pod of c (created long before) does not release c.
    let pods = |uid: &str| match uid {
        "a" => vec![pod("a-new", 45, true)],
        _ => vec![pod("c-old", -1000, true)],
    };
    assert_eq!(
        w.review(t(200), pods, there),
        vec![Change::Resumed { owner: "a".into() }]
    );
    assert_eq!(w.allow("c"), Allow::OwnerHalted);
    assert_eq!(w.allow("b"), Allow::Go);
}

/// What a GET of the owner says about its fate: a halt is released only for an owner that is
/// gone, never for one that exists and wants pods (each row fails on its own if its rule breaks).
#[test]
fn gone_is_judged_from_the_owner_as_found() {
    let found = |uid: &str, deleting, replicas| Lookup::Found {
        uid: uid.into(),
        deleting,
        replicas,
    };
    for (lookup, want) in [
        (Lookup::Missing, Some(Gone::Deleted)),
        (found("rs1", true, Some(1)), Some(Gone::Deleted)),
        (found("other", false, Some(1)), Some(Gone::Recreated)),
        (found("rs1", false, Some(0)), Some(Gone::ScaledToZero)),
        (found("rs1", false, Some(2)), None),
        // A DaemonSet has no replicas: only its deletion releases it.
        (found("rs1", false, None), None),
    ] {
        assert_eq!(Gone::judge("rs1", &lookup), want, "{lookup:?}");
    }
}

/// The case: three owners halted stop all repair; two of them deleted (or their
/// ReplicaSet scaled down by a rollout) are released with the reason, and repair goes on for every
/// other owner. Before, they stayed halted for good.
#[test]
fn gone_halted_owners_are_released_and_repair_goes_on() {
    let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 3);
    for (uid, owner) in [
        ("a", "ReplicaSet a"),
        ("b", "ReplicaSet b"),
        ("c", "StatefulSet c"),
    ] {
        w.evicted(uid, owner, (uid, uid), t(0));
    }
    assert_eq!(w.review(t(60), |_| vec![], there).len(), 3);
    assert_eq!(w.allow("other"), Allow::AllHalted { owners: 3 });
    assert!(w.all_halted());
    let fate = |uid: &str| match uid {
        "a" => Some(Gone::Deleted),
        "b" => Some(Gone::ScaledToZero),
        _ => None,
    };
    assert_eq!(
        w.review(t(70), |_| vec![], fate),
        vec![
            Change::Released {
                owner: "ReplicaSet a",
                why: Gone::Deleted,
                halted: true
            },
            Change::Released {
                owner: "ReplicaSet b",
                why: Gone::ScaledToZero,
                halted: true
            },
        ]
    );
    assert_eq!(w.allow("other"), Allow::Go, "still all halted");
    assert!(!w.all_halted());
    assert_eq!(
        w.allow("c"),
        Allow::OwnerHalted,
        "an owner that exists stays halted"
    );
    assert_eq!(
        w.halts().iter().map(|h| h.owner).collect::<Vec<_>>(),
        ["StatefulSet c"]
    );
    assert_eq!(w.review(t(80), |_| vec![], fate), vec![], "released once");
}

/// An owner deleted while its replacement is awaited is forgotten then, never halted at its
/// deadline (it would have counted towards stopping all repair).
#[test]
fn an_owner_deleted_before_its_deadline_is_never_halted() {
    let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 3);
    w.evicted("rs1", "ReplicaSet web", ("web-a", "uid-web-a"), t(0));
    assert_eq!(
        w.review(t(10), |_| vec![], |_| Some(Gone::Recreated)),
        vec![Change::Released {
            owner: "ReplicaSet web",
            why: Gone::Recreated,
            halted: false
        }]
    );
    assert_eq!(w.review(t(100), |_| vec![], there), vec![], "halted");
    assert_eq!(w.owners().count(), 0);
    assert_eq!(w.halted(), 0);
}

/// What is published is what a new leader restores: the evicted pod, the eviction's and the
/// halt's times; the restored owner is halted, and released by a replacement created since its
/// eviction (not by an older pod).
#[test]
fn published_halts_restore_to_the_same_watchdog() {
    let mut w: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 3);
    w.evicted("rs1", "ReplicaSet web", ("web-a", "uid-web-a"), t(5));
    w.review(t(70), |_| vec![], there);
    let halts = w.halts();
    assert_eq!(
        halts,
        vec![Halt {
            owner_uid: "rs1".into(),
            owner: "ReplicaSet web",
            evicted: "web-a".into(),
            evicted_at: t(5),
            halted_at: t(70),
        }]
    );
    let mut next: Watchdog<&str> = Watchdog::new(Duration::from_secs(60), 3);
    for h in halts.clone() {
        next.restore_halted(h);
    }
    assert_eq!(next.halts(), halts);
    assert_eq!(next.allow("rs1"), Allow::OwnerHalted);
    let older = |_: &str| vec![pod("web-old", 5 - CLOCK_SLACK_SECONDS - 1, true)];
    assert_eq!(next.review(t(80), older, there), vec![]);
    assert_eq!(
        next.review(t(90), |_| vec![pod("web-b", 6, true)], there),
        vec![Change::Resumed {
            owner: "ReplicaSet web"
        }]
    );
}
