//! Tests of the pod lines (`pods.rs`), on the fixtures of `evaluate_tests.rs`.

use super::*;

/// If this breaks, `check` stays silent about a proxy the rules do not exempt or a validator the SCC
/// rejects.
#[test]
fn uid_disagreements_are_listed() {
    let mut seen = healthy();
    seen.containers.insert(
        "app/web".into(),
        PodView::from_spec_json(Some(&serde_json::json!({
            "containers": [{ "name": "linkerd-proxy", "securityContext": { "runAsUser": 2102 } }],
            "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": 65534 } }],
        }))),
    );
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "proxy-uids");
    assert!(!v.ok);
    assert_eq!(
        v.items,
        [
            "app/web: linkerd-proxy runs as 2102 but config.linkerd.io/proxy-uid is 3102: the rules exempt 3102",
            "app/web: linkerd-network-validator runs as 65534, outside the namespace's uid range 1000/10000",
        ]
    );
}

/// Pods the webhook would leave alone are not flagged: restarting them would change nothing.
#[test]
fn pods_that_need_nothing_are_not_flagged() {
    let cfg = settings().decision;
    let ns = map(&[
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "disabled"),
    ]);
    assert_eq!(
        pod_problem(&pod("app", "p", &[]), "app", Some(&ns), &cfg, |_| false),
        None
    );
    // A custom uid inside the range is the admin's choice.
    let ranged = map(&[
        ("linkerd.io/multus", "enabled"),
        ("openshift.io/sa.scc.uid-range", "1000/10000"),
    ]);
    let inside = pod(
        "app",
        "p",
        &[
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "10999"),
        ],
    );
    assert_eq!(
        pod_problem(&inside, "app", Some(&ranged), &cfg, |_| false),
        None
    );
    let outside = pod(
        "app",
        "p",
        &[
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "11000"),
        ],
    );
    assert!(pod_problem(&outside, "app", Some(&ranged), &cfg, |_| false).is_some());
}

/// A terminating pod is not flagged by either pod check: it is already going (e.g. evicted by the
/// repairer).
#[test]
fn terminating_pods_are_not_flagged() {
    let mut seen = healthy();
    // Unattached, and its proxy outside the namespace's uid range 1000/10000.
    seen.pods[0] = pod(
        "app",
        "web",
        &[("config.linkerd.io/proxy-uid", "1000652102")],
    );
    let flagged = |seen: &Observed| {
        let all = evaluate(seen, &settings());
        [
            verdict(&all, "pods").items.len(),
            verdict(&all, "proxy-uids").items.len(),
        ]
    };
    assert_eq!(flagged(&seen), [1, 1]);
    seen.pods[0].deletion_timestamp = Some(Time(Default::default()));
    assert_eq!(flagged(&seen), [0, 0]);
}

/// A pod listing the operator's NAD of another namespace (kept after a `--nad-namespace` switch while
/// pods list it) is told so, not "created before its namespace was set up"; someone else's NAD there
/// is no attachment at all.
#[test]
fn pods_on_our_nad_elsewhere_are_told_why() {
    let mut seen = healthy();
    seen.nads.push(owned_nad("default"));
    seen.pods.push(pod(
        "app",
        "switched",
        &[
            ("k8s.v1.cni.cncf.io/networks", "default/linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "3102"),
        ],
    ));
    let items = |seen: &Observed| verdict(&evaluate(seen, &settings()), "pods").items.clone();
    assert_eq!(
        items(&seen),
        [
            "app/switched: attached to default/linkerd-cni, not linkerd-cni: a NAD from before a \
          --nad-namespace switch, kept only while pods list it: restart it to move it"
        ]
    );

    seen.nads.last_mut().unwrap().metadata.labels =
        Some(map(&[("app.kubernetes.io/managed-by", "helm")]));
    let items = items(&seen);
    assert_eq!(items.len(), 1);
    assert!(
        items[0].starts_with("app/switched: not attached to linkerd-cni"),
        "{items:?}"
    );
}

const ISOLATION_EVENT: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed \
    to setup network for sandbox \"9f\": plugin type=\"multus\" name=\"multus-cni-network\" failed \
    (add): [app/new:linkerd-cni]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in \
    getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: namespace isolation \
    enabled, annotation violates permission, pod is in namespace app but refers to target namespace \
    nad-home";

/// A pod that never started because Multus refuses its NAD is reported with Multus' message and the
/// fix; it is not offered "restart it" advice in the pods line, and a pod that started since, or a
/// failure of another network, is no failure of ours.
#[test]
fn a_pod_whose_sandbox_fails_over_our_nad_is_reported_as_never_started() {
    let mut seen = healthy();
    seen.pods.push(pod(
        "app",
        "new",
        &[("k8s.v1.cni.cncf.io/networks", "nad-home/linkerd-cni")],
    ));
    seen.sandbox_failures.insert(
        "app/new".into(),
        SandboxFailure {
            message: ISOLATION_EVENT.into(),
            count: 4,
            since: SandboxSince::NeverStarted,
        },
    );
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "sandboxes");
    assert!(!v.ok, "{v:?}");
    assert_eq!(v.items.len(), 1, "{v:?}");
    assert!(
        v.items[0].starts_with(
            "app/new: never started, its sandbox failed 4 time(s): [app/new:linkerd-cni]"
        ) && v.items[0].ends_with("refers to target namespace nad-home"),
        "{v:?}"
    );
    let hint = v.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("nad-home") && hint.contains("globalNamespaces"),
        "{hint}"
    );
    assert!(
        !verdict(&all, "pods")
            .items
            .iter()
            .any(|i| i.starts_with("app/new")),
        "{:?}",
        verdict(&all, "pods")
    );

    for (message, since) in [
        (ISOLATION_EVENT, SandboxSince::Created),
        (
            "failed (add): [app/new:macvlan]: plugin type=\"macvlan\" failed",
            SandboxSince::NeverStarted,
        ),
    ] {
        let mut seen = seen.clone();
        seen.sandbox_failures.insert(
            "app/new".into(),
            SandboxFailure {
                message: message.into(),
                count: 1,
                since,
            },
        );
        let all = evaluate(&seen, &settings());
        assert!(verdict(&all, "sandboxes").ok, "{message} {since:?}");
    }
}

/// A pod that ran, lost its sandbox (a node reboot) and now waits because Multus refuses its NAD is
/// listed as waiting, with Multus' message and the fix, and gets no "restart it" advice in the pods
/// line (even where its attachment is not the one wanted today). If this breaks, `check` is green
/// while the pods of a rebooted node stay ContainerCreating over linkerd-cni's NAD.
#[test]
fn a_pod_that_ran_and_waits_for_a_sandbox_multus_refuses_is_listed() {
    let mut seen = healthy();
    seen.pods.push(pod(
        "app",
        "rebooted",
        &[("k8s.v1.cni.cncf.io/networks", "nad-home/linkerd-cni")],
    ));
    seen.sandbox_failures.insert(
        "app/rebooted".into(),
        SandboxFailure {
            message: ISOLATION_EVENT.replace("app/new", "app/rebooted"),
            count: 7,
            since: SandboxSince::Waiting,
        },
    );
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "sandboxes");
    assert!(!v.ok, "{v:?}");
    assert_eq!(v.items.len(), 1, "{v:?}");
    assert!(
        v.items[0].starts_with(
            "app/rebooted: ran before and waits for a new sandbox, which failed 7 time(s): \
             [app/rebooted:linkerd-cni]"
        ) && v.items[0].ends_with("refers to target namespace nad-home"),
        "{v:?}"
    );
    assert!(
        v.hint
            .as_deref()
            .unwrap_or_default()
            .contains("globalNamespaces"),
        "{v:?}"
    );
    let pods = verdict(&all, "pods");
    assert!(
        !pods.items.iter().any(|i| i.starts_with("app/rebooted")),
        "{pods:?}"
    );
}

/// Whether a pod has a sandbox since its latest failure, from its container statuses: each row is
/// what the kubelet reports for a pod in that situation. If this breaks, `check` either drops pods
/// that wait for their sandbox again (after a reboot) or lists pods whose failure is long behind
/// them (a crash-looping container ran since).
#[test]
fn sandbox_since_reads_the_container_statuses() {
    use k8s_openapi::api::core::v1::PodStatus;
    let at = |s: i64| k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + s).unwrap();
    let status = |v: serde_json::Value| -> PodStatus { serde_json::from_value(v).unwrap() };
    let time = |s: i64| at(s).to_string();
    let failed = Some(at(100));
    let cases = [
        ("no status yet", None, failed, SandboxSince::NeverStarted),
        (
            "never ran: ContainerCreating",
            Some(status(serde_json::json!({"containerStatuses": [
                {"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}))),
            failed,
            SandboxSince::NeverStarted,
        ),
        (
            "runs now",
            Some(status(serde_json::json!({"containerStatuses": [
                {"name": "app", "image": "i", "imageID": "", "ready": true, "restartCount": 1,
                 "state": {"running": {"startedAt": time(50)}}}]}))),
            failed,
            SandboxSince::Created,
        ),
        (
            "ran before the node rebooted, waits since",
            Some(status(serde_json::json!({"containerStatuses": [
                {"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 1,
                 "state": {"waiting": {"reason": "ContainerCreating"}},
                 "lastState": {"terminated": {"exitCode": 255, "reason": "Unknown",
                     "startedAt": time(0), "finishedAt": time(60)}}}]}))),
            failed,
            SandboxSince::Waiting,
        ),
        (
            "crash-looping: a container ended after the failure",
            Some(status(serde_json::json!({"containerStatuses": [
                {"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 9,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1, "startedAt": time(140),
                     "finishedAt": time(141)}}}]}))),
            failed,
            SandboxSince::Created,
        ),
        (
            "an init container completed in the failure's second",
            Some(status(serde_json::json!({"initContainerStatuses": [
                {"name": "linkerd-network-validator", "image": "i", "imageID": "", "ready": false,
                 "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                     "startedAt": time(100), "finishedAt": time(100)}}}]}))),
            failed,
            SandboxSince::Created,
        ),
        (
            "ran, the failure's time unknown",
            Some(status(serde_json::json!({"containerStatuses": [
                {"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 1,
                 "state": {"waiting": {"reason": "ContainerCreating"}},
                 "lastState": {"terminated": {"exitCode": 255, "finishedAt": time(60)}}}]}))),
            None,
            SandboxSince::Created,
        ),
    ];
    for (case, status, failed_at, want) in cases {
        assert_eq!(SandboxSince::of(status.as_ref(), failed_at), want, "{case}");
    }
}

fn halted_owner(name: &str) -> crate::repair::state::HaltedOwner {
    let at = |s: i64| {
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + s).unwrap()
            + k8s_openapi::jiff::SignedDuration::from_millis(250)
    };
    crate::repair::state::HaltedOwner {
        namespace: "app".into(),
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        evicted: format!("{name}-1"),
        evicted_at: at(0),
        halted_at: at(120),
    }
}

/// The repair line reads the operator's published halts, not Events: each halted owner is named with
/// its evicted pod; all repair halted says so, with how it resumes; nothing published yet, or repair
/// off, passes; a state that cannot be read fails. If this breaks, `check` is green while repair is
/// off for good.
#[test]
fn halted_owners_come_from_the_published_state() {
    use crate::repair::state::{Published, StateLocation};
    let mut s = settings();
    s.repair_state = Some(StateLocation::new("ops", "lease"));
    let mut seen = healthy();
    assert!(verdict(&evaluate(&seen, &s), "repair").ok, "repair off");
    seen.repair_halts = Some(Ok(None));
    let v = verdict(&evaluate(&seen, &s), "repair").clone();
    assert!(
        v.ok && v.message.contains("ConfigMap ops/lease-repair"),
        "{v:?}"
    );

    let mut published = Published {
        halt_all_at: 3,
        halted: vec![halted_owner("web"), halted_owner("db")],
    };
    seen.repair_halts = Some(Ok(Some(published.clone())));
    let v = verdict(&evaluate(&seen, &s), "repair").clone();
    assert!(!v.ok);
    assert!(
        v.message.starts_with("pod repair is halted for 2 owner(s)"),
        "{v:?}"
    );
    assert_eq!(
        v.items,
        [
            "app/ReplicaSet web: halted at 2023-11-14T22:15:20Z: pod web-1 evicted at \
             2023-11-14T22:13:20Z has no Ready replacement",
            "app/ReplicaSet db: halted at 2023-11-14T22:15:20Z: pod db-1 evicted at \
             2023-11-14T22:13:20Z has no Ready replacement",
        ]
    );

    published.halted.push(halted_owner("api"));
    seen.repair_halts = Some(Ok(Some(published)));
    let v = verdict(&evaluate(&seen, &s), "repair").clone();
    assert!(!v.ok);
    assert!(
        v.message
            .starts_with("all pod repair is halted: 3 owner(s)"),
        "{v:?}"
    );
    assert_eq!(v.items.len(), 3);
    let hint = v.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("deleted or scaled to zero") && hint.contains("ConfigMap ops/lease-repair"),
        "{hint}"
    );

    seen.repair_halts = Some(Ok(Some(Published {
        halt_all_at: 3,
        halted: vec![],
    })));
    assert!(verdict(&evaluate(&seen, &s), "repair").ok, "all released");
    seen.repair_halts = Some(Err("forbidden".into()));
    let v = verdict(&evaluate(&seen, &s), "repair").clone();
    assert!(!v.ok && v.message.contains("forbidden"), "{v:?}");
}

/// A pod the repairer leaves running for its NAD is listed while it still exists, still lacks its
/// attachment, and its NAD is still missing; then no longer.
#[test]
fn pods_waiting_for_their_nad_are_listed_while_they_wait() {
    let mut seen = healthy();
    seen.crd =
        Err("no CustomResourceDefinition network-attachment-definitions.k8s.cni.cncf.io".into());
    seen.nads.clear();
    let mut waiting = pod("app", "old", &[]);
    waiting.uid = Some("u-old".into());
    let mut replaced = pod("app", "gone", &[]);
    replaced.uid = Some("u-new".into());
    seen.pods.extend([waiting, replaced]);
    let event = |pod: &str, uid: &str| RepairWaiting {
        pod: format!("app/{pod}"),
        uid: Some(uid.into()),
        at: None,
        message: format!("Pod {pod} needs a restart but is left running: no CRD"),
    };
    // "gone"'s Event is about an earlier pod of that name.
    seen.repair_waiting = vec![event("old", "u-old"), event("gone", "u-gone")];
    let all = evaluate(&seen, &settings());
    let v = verdict(&all, "repair");
    assert!(!v.ok);
    assert_eq!(
        v.items,
        ["app/old: Pod old needs a restart but is left running: no CRD"]
    );
    assert!(
        v.message.contains("1 pod(s) need a restart"),
        "{}",
        v.message
    );

    // The CRD is back but the NAD not yet written: still waiting.
    seen.crd = Ok(true);
    assert!(!verdict(&evaluate(&seen, &settings()), "repair").ok);
    // The NAD exists: the repairer acts on it now; the line no longer says it waits.
    let healthy_nads = healthy().nads;
    seen.nads = healthy_nads;
    assert!(verdict(&evaluate(&seen, &settings()), "repair").ok);
    // Aux-chain mode names no NAD: never listed.
    seen.nads.clear();
    let mut aux = settings();
    aux.decision.nad.attach = rules::attach::Attach::AuxChain;
    assert!(verdict(&evaluate(&seen, &aux), "repair").ok);
}

/// The case: a user-set proxy uid equal to the range's first, which the restricted SCC gives
/// the app container (no runAsUser of its own): `check` fails, naming the pod, the container, the uid
/// and the fix. The same pod with the webhook's uid passes.
#[test]
fn an_app_container_running_as_the_proxy_uid_fails() {
    let mut seen = healthy();
    seen.pods[0] = pod(
        "app",
        "web",
        &[
            ("linkerd.io/multus", "enabled"),
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "1000"),
        ],
    );
    let with_proxy_as = |uid: vocab::Uid| {
        PodView::from_spec_json(Some(&serde_json::json!({
            "containers": [{ "name": "app" },
                           { "name": "linkerd-proxy", "securityContext": { "runAsUser": uid } }],
            "initContainers": [{ "name": "linkerd-network-validator", "securityContext": { "runAsUser": 1001 } }],
        })))
    };
    seen.containers
        .insert("app/web".into(), with_proxy_as(1000));
    let v = verdict(&evaluate(&seen, &settings()), "proxy-uids").clone();
    assert!(!v.ok);
    assert_eq!(
        v.items,
        ["app/web: container app runs as uid 1000 (the first uid of the namespace's uid range, which \
          the restricted SCC gives a container without runAsUser), the proxy uid the pod's \
          config.linkerd.io/proxy-uid names: linkerd-cni exempts that uid from the redirect, so the \
          container's traffic bypasses the mesh; remove config.linkerd.io/proxy-uid from the pod's \
          template, or set it to a uid no app container runs as; then restart the pod"]
    );

    seen.pods[0] = pod(
        "app",
        "web",
        &[
            ("linkerd.io/multus", "enabled"),
            ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
            ("config.linkerd.io/proxy-uid", "3102"),
        ],
    );
    seen.containers
        .insert("app/web".into(), with_proxy_as(3102));
    assert!(verdict(&evaluate(&seen, &settings()), "proxy-uids").ok);
}

/// `check`'s verdict on each value of the table the webhook and the plugin share: a uid inside the
/// range is fine, anything else is named with the parser's reason.
#[test]
fn proxy_uids_follow_the_shared_table() {
    let cfg = settings().decision;
    let ns = map(&[
        ("linkerd.io/multus", "enabled"),
        ("openshift.io/sa.scc.uid-range", "0/4294967295"),
    ]);
    for (value, want) in vocab::PROXY_UID_CASES {
        let p = pod(
            "app",
            "p",
            &[
                ("k8s.v1.cni.cncf.io/networks", "linkerd-cni"),
                ("config.linkerd.io/proxy-uid", value),
            ],
        );
        let got = pod_problem(&p, "app", Some(&ns), &cfg, |_| false);
        match want {
            Ok(_) => assert_eq!(got, None, "{value:?}"),
            Err(e) => assert_eq!(
                got,
                Some(format!(
                    "config.linkerd.io/proxy-uid {value:?} is {e}. Fix it in the workload's pod \
                     template (a restart keeps it)"
                ))
            ),
        }
    }
}
