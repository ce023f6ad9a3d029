//! Tests of the published pod findings (`published.rs`): their ConfigMap, and when `check` trusts them.

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde_json::json;

use super::*;
use crate::nad_config::ConfigSource;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("time")
}

fn settings() -> CheckSettings {
    CheckSettings {
        source: ConfigSource {
            namespace: "linkerd-cni".into(),
            configmap: "linkerd-cni-config".into(),
            kubeconfig: "/k".into(),
        },
        decision: Default::default(),
        adopt_unowned: false,
        node_multus_group: None,
        repair_state: Some(StateLocation::new("ops", "lease")),
    }
}

fn found() -> PodFindings {
    PodFindings {
        stale: vec!["app/a: not attached".into()],
        uids: vec!["app/b: linkerd-proxy runs as 5".into()],
        waiting: [("app/c".to_string(), "app/c: left running".to_string())].into(),
        nad_users: [("gone".to_string(), 2)].into(),
    }
}

fn published(outcome: Outcome) -> PublishedFindings {
    PublishedFindings {
        by: "op-1".into(),
        settings: fingerprint(&settings()),
        pods: 15_000,
        at: t(0),
        outcome,
    }
}

fn lease(holder: Option<&str>, renewed: i64) -> LeaseSeen {
    LeaseSeen {
        holder: holder.map(Into::into),
        renewed: Some(t(renewed)),
        seconds: Some(15),
    }
}

fn why(source: Source) -> String {
    match source {
        Source::Walk { why } => why,
        Source::Published { .. } => panic!("published findings used"),
    }
}

/// The key as the leader writes it and `check` reads it: renamed on one side only, `check` would
/// walk every pod forever (or misread them).
#[test]
fn the_findings_in_their_configmap_and_back() {
    let p = published(Outcome::of(found()));
    let cm = p.configmap(&StateLocation::new("ops", "lease"));
    let value = serde_json::to_value(&cm).expect("json");
    assert_eq!(
        value["metadata"],
        json!({"name": "lease-repair", "namespace": "ops"})
    );
    let data: serde_json::Value =
        serde_json::from_str(value["data"]["podFindings"].as_str().expect("key")).expect("json");
    assert_eq!(
        data,
        json!({
            "by": "op-1", "settings": fingerprint(&settings()), "pods": 15000,
            "at": "2023-11-14T22:13:20Z",
            "outcome": {
                "kind": "found",
                "stale": ["app/a: not attached"],
                "uids": ["app/b: linkerd-proxy runs as 5"],
                "waiting": {"app/c": "app/c: left running"},
                "nadUsers": {"gone": 2},
            },
        })
    );
    assert_eq!(PublishedFindings::from_configmap(&cm), Ok(Some(p)));
    // The halts' keys alone: nothing published yet.
    let halts = crate::repair::state::Published::default().configmap(&StateLocation::new("o", "l"));
    assert_eq!(PublishedFindings::from_configmap(&halts), Ok(None));
    let mut broken = cm.clone();
    broken.data = Some([(FINDINGS_KEY.to_string(), "{".to_string())].into());
    let err = PublishedFindings::from_configmap(&broken).expect_err("broken");
    assert!(err.contains("`podFindings`"), "{err}");
}

#[test]
fn findings_of_the_current_leader_with_these_settings_are_used() {
    let source = judge(
        Ok(Some(published(Outcome::of(found())))),
        Ok(Some(lease(Some("op-1"), 5))),
        &fingerprint(&settings()),
        t(20),
    );
    let Source::Published {
        found: f,
        note,
        pods,
    } = source
    else {
        panic!("walked: {source:?}");
    };
    assert_eq!((f, pods), (found(), 15_000));
    assert_eq!(
        note,
        "as the operator's leader op-1 found them in the 15000 pod(s) it holds; it looks again \
         every 60 s, and they are unchanged since 2023-11-14T22:13:20Z"
    );
}

/// Each reason not to trust them, named: any one of them taken for "usable" would show an old
/// leader's, a stopped operator's or another configuration's findings as the cluster's.
#[test]
fn anything_but_the_current_leaders_findings_is_walked_over_with_the_reason() {
    let ours = fingerprint(&settings());
    let cases: Vec<(Source, &str)> = vec![
        (
            judge(Err("forbidden".into()), Ok(None), &ours, t(0)),
            "cannot read the leader's findings: forbidden",
        ),
        (
            judge(Ok(None), Ok(Some(lease(Some("op-1"), 0))), &ours, t(0)),
            "no leader has published its findings yet",
        ),
        (
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Ok(None),
                &ours,
                t(0),
            ),
            "there is no leader Lease",
        ),
        (
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Err("timed out".into()),
                &ours,
                t(0),
            ),
            "cannot read the leader Lease: timed out",
        ),
        (
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Ok(Some(lease(Some("op-2"), 0))),
                &ours,
                t(0),
            ),
            "the findings are op-1's, the Lease is op-2's",
        ),
        (
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Ok(Some(lease(None, 0))),
                &ours,
                t(0),
            ),
            "the findings are op-1's, the Lease is nobody's",
        ),
        (
            // Renewed 31 s ago, a 15 s Lease: past twice its term.
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Ok(Some(lease(Some("op-1"), 0))),
                &ours,
                t(31),
            ),
            "the leader op-1 has not renewed its Lease: the operator may be down",
        ),
        (
            judge(
                Ok(Some(published(Outcome::of(found())))),
                Ok(Some(lease(Some("op-1"), 0))),
                "another",
                t(0),
            ),
            "the leader runs another build or other settings than this check",
        ),
        (
            judge(
                Ok(Some(published(Outcome::TooMany))),
                Ok(Some(lease(Some("op-1"), 0))),
                &ours,
                t(0),
            ),
            "a row has more than 500 lines",
        ),
        (
            judge(
                Ok(Some(published(Outcome::Failed {
                    why: "cannot list namespaces".into(),
                }))),
                Ok(Some(lease(Some("op-1"), 0))),
                &ours,
                t(0),
            ),
            "the leader could not observe the cluster: cannot list namespaces",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(why(source), expected);
    }
    // Renewed 30 s ago: still inside twice the term.
    assert!(matches!(
        judge(
            Ok(Some(published(Outcome::of(found())))),
            Ok(Some(lease(Some("op-1"), 0))),
            &ours,
            t(30),
        ),
        Source::Published { .. }
    ));
}

#[test]
fn a_row_past_its_limit_is_not_published_and_the_time_alone_is_no_change() {
    let mut many = found();
    many.stale = (0..=MAX_LINES).map(|i| format!("app/p{i}: x")).collect();
    assert_eq!(Outcome::of(many.clone()), Outcome::TooMany);
    many.stale.pop();
    assert!(matches!(Outcome::of(many), Outcome::Found { .. }));

    let a = published(Outcome::of(found()));
    assert!(a.same_as(&PublishedFindings {
        at: t(60),
        ..a.clone()
    }));
    assert!(!a.same_as(&PublishedFindings {
        pods: 15_001,
        ..a.clone()
    }));
    assert!(!a.same_as(&PublishedFindings {
        by: "op-2".into(),
        ..a.clone()
    }));
}

/// The leader's and `check`'s settings agree only when the flags do.
#[test]
fn the_fingerprint_follows_the_settings() {
    let s = settings();
    assert_eq!(fingerprint(&s), fingerprint(&s.clone()));
    let other = CheckSettings {
        adopt_unowned: true,
        ..s.clone()
    };
    assert_ne!(fingerprint(&s), fingerprint(&other));
    assert_eq!(fingerprint(&s).len(), 16);
}

#[test]
fn the_lease_as_read() {
    let l = Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some("op-1".into()),
            renew_time: Some(MicroTime(t(3))),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(LeaseSeen::of(&l), lease(Some("op-1"), 3));
    assert_eq!(LeaseSeen::of(&Lease::default()), LeaseSeen::default());
}
