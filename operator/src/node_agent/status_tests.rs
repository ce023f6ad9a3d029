//! Table tests of the status judgement: each row a situation an admin meets, and the conditions
//! `kubectl get nodeagent` shows for it.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

fn now() -> Time {
    Time("2026-11-29T10:00:00Z".parse().expect("time"))
}

fn ds(generation: i64, status: Option<serde_json::Value>) -> DaemonSet {
    let mut ds = DaemonSet::default();
    ds.metadata.generation = Some(generation);
    ds.status = status.map(|s| serde_json::from_value::<DaemonSetStatus>(s).expect("status"));
    ds
}

fn counted(generation: i64, desired: i32, updated: i32, available: i32) -> serde_json::Value {
    json!({"observedGeneration": generation, "desiredNumberScheduled": desired,
           "currentNumberScheduled": desired, "numberMisscheduled": 0, "numberReady": available,
           "updatedNumberScheduled": updated, "numberAvailable": available})
}

fn pod(name: &str, node: &str, status: serde_json::Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"nodeName": node,
        "containers": []}, "status": status}),
    )
    .expect("pod")
}

fn ready_pod(name: &str, node: &str) -> Pod {
    pod(
        name,
        node,
        json!({"conditions": [{"type": "Ready", "status": "True"}]}),
    )
}

fn crash_pod(name: &str, node: &str) -> Pod {
    pod(
        name,
        node,
        json!({"conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"name": "install-cni", "ready": false, "restartCount": 4,
            "image": "i", "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff",
                "message": "back-off 40s restarting failed container"}}}]}),
    )
}

fn starting_pod(name: &str, node: &str) -> Pod {
    pod(
        name,
        node,
        json!({"conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"name": "install-cni", "ready": false, "restartCount": 0,
            "image": "i", "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
    )
}

fn unready_pod(name: &str, node: &str) -> Pod {
    pod(
        name,
        node,
        json!({"conditions": [{"type": "Ready", "status": "False",
        "reason": "ContainersNotReady", "message": "containers with unready status: [install-cni]"}],
        "containerStatuses": [{"name": "install-cni", "ready": false, "restartCount": 0,
            "image": "i", "imageID": "", "state": {"running": {}}}]}),
    )
}

/// (type, status, reason) of each condition.
type Summary = Vec<(String, String, String)>;

fn summary(status: &NodeAgentStatus) -> Summary {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn row(a: (&str, &str), p: (&str, &str), d: (&str, &str)) -> Summary {
    [("Available", a), ("Progressing", p), ("Degraded", d)]
        .iter()
        .map(|(t, (s, r))| (t.to_string(), s.to_string(), r.to_string()))
        .collect()
}

fn degraded_message(status: &NodeAgentStatus) -> &str {
    &status.conditions[2].message
}

/// Each situation gives the conditions its row says. Would break if a crash loop went unreported,
/// a pod merely starting in a rollout read as Degraded, or a cluster with no node read as down.
#[test]
fn conditions_per_situation() {
    let g = Some(3);
    let fresh = ds(3, None);
    let no_nodes = ds(3, Some(counted(3, 0, 0, 0)));
    let rolled = ds(3, Some(counted(3, 2, 2, 2)));
    let rolling = ds(4, Some(counted(3, 2, 1, 1)));
    let crash_settled = ds(3, Some(counted(3, 2, 2, 1)));
    let rollout_counted = ds(3, Some(counted(3, 2, 1, 1)));
    let pods_ok = [ready_pod("a", "n1"), ready_pod("b", "n2")];
    let pods_rolling = [ready_pod("a", "n1"), starting_pod("b", "n2")];
    let pods_crash = [ready_pod("a", "n1"), crash_pod("b", "n2")];
    let pods_unready = [ready_pod("a", "n1"), unready_pod("b", "n2")];
    let table: Vec<(&str, Observed, Summary)> = vec![
        (
            "not created yet",
            Observed {
                generation: g,
                ..Observed::default()
            },
            row(
                ("False", "NotCreated"),
                ("True", "Creating"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "created, no DaemonSet controller has counted it (a bare apiserver)",
            Observed {
                generation: g,
                daemonset: Some(&fresh),
                ..Observed::default()
            },
            row(
                ("Unknown", "NotCounted"),
                ("True", "NotCounted"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "no node to run on",
            Observed {
                generation: g,
                daemonset: Some(&no_nodes),
                ..Observed::default()
            },
            row(
                ("True", "NoNodes"),
                ("False", "RolledOut"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "every node ready",
            Observed {
                generation: g,
                daemonset: Some(&rolled),
                pods: &pods_ok,
                ..Observed::default()
            },
            row(
                ("True", "AllNodesReady"),
                ("False", "RolledOut"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "a rollout, a pod starting",
            Observed {
                generation: g,
                daemonset: Some(&rolling),
                pods: &pods_rolling,
                ..Observed::default()
            },
            row(
                ("Unknown", "NotCounted"),
                ("True", "NotCounted"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "a rollout counted, a pod starting",
            Observed {
                generation: g,
                daemonset: Some(&rollout_counted),
                pods: &pods_rolling,
                ..Observed::default()
            },
            row(
                ("False", "NodesNotReady"),
                ("True", "RollingOut"),
                ("False", "AsExpected"),
            ),
        ),
        (
            "a crash loop, even mid-rollout",
            Observed {
                generation: g,
                daemonset: Some(&rollout_counted),
                pods: &pods_crash,
                ..Observed::default()
            },
            row(
                ("False", "NodesNotReady"),
                ("True", "RollingOut"),
                ("True", "InstallersNotReady"),
            ),
        ),
        (
            "rolled out, a probe failing",
            Observed {
                generation: g,
                daemonset: Some(&crash_settled),
                pods: &pods_unready,
                ..Observed::default()
            },
            row(
                ("False", "NodesNotReady"),
                ("False", "RolledOut"),
                ("True", "InstallersNotReady"),
            ),
        ),
        (
            "a spec that renders nothing, the old DaemonSet still running",
            Observed {
                generation: g,
                blocked: Some(Blocked::InvalidSpec("spec.x: bad".into())),
                daemonset: Some(&rolled),
                pods: &pods_ok,
            },
            row(
                ("True", "AllNodesReady"),
                ("False", "Blocked"),
                ("True", "InvalidSpec"),
            ),
        ),
        (
            "a DaemonSet of that name is helm's",
            Observed {
                generation: g,
                blocked: Some(Blocked::NotOwned("DaemonSet x is helm's".into())),
                ..Observed::default()
            },
            row(
                ("False", "NotCreated"),
                ("False", "Blocked"),
                ("True", "NotOwned"),
            ),
        ),
    ];
    for (situation, observed, want) in table {
        let status = judge(&observed, None, &now());
        assert_eq!(summary(&status), want, "{situation}");
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(3)),
            "{situation}"
        );
    }
}

/// Degraded names each failing node with its pod and the reason, so the admin knows where to look.
#[test]
fn degraded_names_the_nodes_and_why() {
    let rolled = ds(3, Some(counted(3, 2, 2, 1)));
    let pods = [
        crash_pod("linkerd-cni-b", "node-2"),
        ready_pod("a", "node-1"),
    ];
    let status = judge(
        &Observed {
            generation: Some(3),
            daemonset: Some(&rolled),
            pods: &pods,
            ..Observed::default()
        },
        None,
        &now(),
    );
    assert_eq!(
        degraded_message(&status),
        "the installer is not ready on 1 node(s): node-2 (linkerd-cni-b: install-cni \
         CrashLoopBackOff: back-off 40s restarting failed container)"
    );
    assert_eq!(status.desired_number_scheduled, Some(2));
    assert_eq!(status.number_ready, Some(1));

    let many: Vec<Pod> = (0..12)
        .map(|i| crash_pod(&format!("p{i:02}"), &format!("n{i:02}")))
        .collect();
    let status = judge(
        &Observed {
            generation: Some(3),
            daemonset: Some(&rolled),
            pods: &many,
            ..Observed::default()
        },
        None,
        &now(),
    );
    let message = degraded_message(&status);
    assert!(
        message.starts_with("the installer is not ready on 12 node(s): n00 (p00"),
        "{message}"
    );
    assert!(message.ends_with("; and 2 more"), "{message}");
    assert!(!message.contains("n10 ("), "{message}");
}

/// An unchanged judgement is the previous status itself (its transition times kept), so the
/// operator writes nothing when idle; a changed condition gets the new time.
#[test]
fn unchanged_judgement_equals_the_previous_status() {
    let rolled = ds(3, Some(counted(3, 1, 1, 1)));
    let pods = [ready_pod("a", "n1")];
    let observed = Observed {
        generation: Some(3),
        daemonset: Some(&rolled),
        pods: &pods,
        ..Observed::default()
    };
    let first = judge(&observed, None, &now());
    let later = Time("2026-11-29T11:00:00Z".parse().expect("time"));
    assert_eq!(judge(&observed, Some(&first), &later), first);

    let crash = [crash_pod("a", "n1")];
    let broken = Observed {
        pods: &crash,
        daemonset: Some(&ds(3, Some(counted(3, 1, 1, 0)))),
        ..observed
    };
    let second = judge(&broken, Some(&first), &later);
    assert_ne!(second, first);
    let time_of = |s: &NodeAgentStatus, i: usize| s.conditions[i].last_transition_time.clone();
    assert_eq!(
        time_of(&second, 1),
        time_of(&first, 1),
        "Progressing stayed False"
    );
    assert_eq!(time_of(&second, 2), later, "Degraded turned True");
}
