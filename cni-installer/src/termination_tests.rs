use super::*;
use serde_json::json;

fn ds(name: &str, uid: &str, deleting: bool) -> Seen {
    Seen::DaemonSet {
        name: format!("linkerd-cni/{name}"),
        owner_uid: "uid-1".into(),
        found: Some(DaemonSetState {
            uid: uid.into(),
            deleting,
        }),
    }
}

fn refused(code: u16) -> Seen {
    Seen::Refused {
        what: "pod linkerd-cni/cni-x".into(),
        code,
        message: "no".into(),
    }
}

/// The own token refused (401), then `plugin` seen with the plugin's token.
fn again(plugin: Seen) -> Seen {
    Seen::AskedAgain {
        own: Box::new(refused(401)),
        plugin: Box::new(plugin),
    }
}

/// Every case SIGTERM can meet, with the words its logged reason must hold.
#[test]
fn decide_table() {
    let uninstall = true;
    let keep = false;
    let cases: Vec<(&str, Seen, bool, &str)> = vec![
        (
            "the DaemonSet is in place (rollout, drain)",
            ds("cni", "uid-1", false),
            keep,
            "its DaemonSet linkerd-cni/cni is in place: a rollout",
        ),
        (
            "the DaemonSet is gone (404)",
            Seen::DaemonSet {
                name: "linkerd-cni/cni".into(),
                owner_uid: "uid-1".into(),
                found: None,
            },
            uninstall,
            "its DaemonSet linkerd-cni/cni is deleted",
        ),
        (
            "the DaemonSet is being deleted (foreground)",
            ds("cni", "uid-1", true),
            uninstall,
            "is being deleted",
        ),
        (
            "another DaemonSet of the same name (uninstalled and installed again)",
            ds("cni", "uid-2", false),
            uninstall,
            "this pod's owner had uid uid-1; the one there now, uid uid-2",
        ),
        (
            "401: the installer's ServiceAccount is deleted",
            Seen::Refused {
                what: "pod linkerd-cni/cni-x".into(),
                code: 401,
                message: "Unauthorized".into(),
            },
            uninstall,
            "refuses this installer's own credential reading pod linkerd-cni/cni-x (401: Unauthorized)",
        ),
        (
            "403: its RBAC is deleted",
            Seen::Refused {
                what: "daemonset linkerd-cni/cni".into(),
                code: 403,
                message: "forbidden".into(),
            },
            uninstall,
            "its ServiceAccount or RBAC is deleted",
        ),
        (
            "unreachable",
            Seen::Unreachable {
                what: "pod linkerd-cni/cni-x".into(),
                error: "connection refused".into(),
            },
            keep,
            "cannot be reached to read pod linkerd-cni/cni-x (connection refused)",
        ),
        (
            "a 500",
            Seen::Failed {
                what: "pod linkerd-cni/cni-x".into(),
                error: "500: etcd".into(),
            },
            keep,
            "reading pod linkerd-cni/cni-x failed (500: etcd)",
        ),
        (
            "no POD_NAME",
            Seen::NoOwnPod,
            keep,
            "POD_NAME and POD_NAMESPACE are not set",
        ),
        (
            "no service-account files",
            Seen::NoCredential("cannot read /sa/token".into()),
            keep,
            "cannot read /sa/token",
        ),
        (
            "the pod force-deleted",
            Seen::PodGone {
                pod: "linkerd-cni/cni-x".into(),
            },
            keep,
            "no longer in the API",
        ),
        (
            "a pod started by hand",
            Seen::NotOwned {
                pod: "linkerd-cni/cni-x".into(),
            },
            keep,
            "not owned by a DaemonSet",
        ),
        (
            "401, and the plugin's token finds the pod gone: force-deleted (its bound token died)",
            again(Seen::PodGone {
                pod: "linkerd-cni/cni-x".into(),
            }),
            keep,
            "its pod linkerd-cni/cni-x is gone (read with the plugin's token)",
        ),
        (
            "401, and the plugin's token is refused too: uninstalled",
            again(refused(403)),
            uninstall,
            "(403: no)",
        ),
        (
            "401, and the plugin's token finds the DaemonSet gone: uninstalled",
            again(Seen::DaemonSet {
                name: "linkerd-cni/cni".into(),
                owner_uid: "uid-1".into(),
                found: None,
            }),
            uninstall,
            "its DaemonSet linkerd-cni/cni is deleted",
        ),
        (
            "401, and the second read fails: the refusal stands",
            again(Seen::Unreachable {
                what: "pod linkerd-cni/cni-x".into(),
                error: "reset".into(),
            }),
            uninstall,
            "(401: no)",
        ),
    ];
    for (case, seen, want_uninstall, words) in cases {
        let (got_uninstall, reason) = match decide(&seen) {
            Verdict::Uninstall(r) => (true, r),
            Verdict::Keep(r) => (false, r),
        };
        assert_eq!(got_uninstall, want_uninstall, "{case}: {reason}");
        assert!(reason.contains(words), "{case}: {reason:?} lacks {words:?}");
    }
}

/// Only an apps/v1 DaemonSet that controls the pod is its owner.
#[test]
fn the_owner_is_the_controlling_daemonset() {
    let pod = |refs: serde_json::Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "ownerReferences": refs}}))
            .expect("pod")
    };
    let r = |kind: &str, api: &str, controller: bool, name: &str| {
        json!({"apiVersion": api, "kind": kind, "name": name, "uid": format!("uid-{name}"),
            "controller": controller})
    };
    assert_eq!(
        owner_of(&pod(json!([
            r("ConfigMap", "v1", false, "x"),
            r("DaemonSet", "apps/v1", true, "cni")
        ]))),
        Some(("cni".into(), "uid-cni".into()))
    );
    for (case, refs) in [
        (
            "not the controller",
            json!([r("DaemonSet", "apps/v1", false, "cni")]),
        ),
        (
            "another kind",
            json!([r("ReplicaSet", "apps/v1", true, "rs")]),
        ),
        (
            "another group",
            json!([r("DaemonSet", "example.com/v1", true, "cni")]),
        ),
        ("none", json!([])),
    ] {
        assert_eq!(owner_of(&pod(refs)), None, "{case}");
    }
    let bare: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).expect("pod");
    assert_eq!(owner_of(&bare), None);
}

#[test]
fn daemonset_state_reads_uid_and_deletion() {
    let d: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "cni", "uid": "u1",
        "deletionTimestamp": "2026-01-01T00:00:00Z"}}))
    .expect("ds");
    assert_eq!(
        state_of(&d),
        DaemonSetState {
            uid: "u1".into(),
            deleting: true
        }
    );
    let d: DaemonSet =
        serde_json::from_value(json!({"metadata": {"name": "cni", "uid": "u1"}})).expect("ds");
    assert!(!state_of(&d).deleting);
}

/// 404 is the caller's (what is gone); 401/403 a refusal; other statuses a failure; transport
/// errors unreachable.
#[test]
fn errors_are_classified() {
    let api = |code: u16| {
        kube::Error::Api(
            kube::core::Status::failure("m", "R")
                .with_code(code)
                .boxed(),
        )
    };
    assert_eq!(from_error("pod p", &api(404)), None);
    for code in [401, 403] {
        assert!(
            matches!(from_error("pod p", &api(code)), Some(Seen::Refused { code: c, .. }) if c == code),
            "{code}"
        );
    }
    assert!(matches!(
        from_error("pod p", &api(500)),
        Some(Seen::Failed { .. })
    ));
    assert!(matches!(
        from_error("pod p", &kube::Error::Service("timed out".into())),
        Some(Seen::Unreachable { .. })
    ));
    assert!(matches!(
        from_error("pod p", &kube::Error::LinesCodecMaxLineLengthExceeded),
        Some(Seen::Failed { .. })
    ));
}
