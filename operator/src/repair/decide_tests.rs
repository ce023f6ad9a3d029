use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rules::installers::InstallerPod;

use super::*;

fn owner(api_version: &str, kind: &str, controller: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: "o".into(),
        uid: "u".into(),
        controller,
        block_owner_deletion: None,
    }
}

/// apiVersion, kind, `controller`.
type Owner<'a> = (&'a str, &'a str, Option<bool>);

/// Only a controller that recreates the pod; never a Job, a bare pod, or a lookalike kind.
#[test]
fn recreating_owners() {
    let cases: &[(&[Owner], bool)] = &[
        (&[("apps/v1", "ReplicaSet", Some(true))], true),
        (&[("apps/v1", "StatefulSet", Some(true))], true),
        (&[("apps/v1", "DaemonSet", Some(true))], true),
        (&[("v1", "ReplicationController", Some(true))], true),
        (&[("batch/v1", "Job", Some(true))], false),
        (&[("apps/v1", "ReplicaSet", None)], false),
        (&[("apps/v1", "ReplicaSet", Some(false))], false),
        (&[("example.com/v1", "ReplicaSet", Some(true))], false),
        (&[("v1", "Node", Some(true))], false),
        (&[("apps/v1", "Deployment", Some(true))], false),
        (&[], false),
        (
            &[
                ("batch/v1", "Job", Some(false)),
                ("apps/v1", "StatefulSet", Some(true)),
            ],
            true,
        ),
    ];
    for (owners, want) in cases {
        let refs: Vec<_> = owners.iter().map(|(a, k, c)| owner(a, k, *c)).collect();
        assert_eq!(recreating_owner(&refs).is_some(), *want, "{owners:?}");
    }
}

fn namespace(name: &str, enabled: bool) -> Namespace {
    let annotations = enabled.then(|| {
        BTreeMap::from([(
            vocab::MULTUS_ANNOTATION.to_string(),
            vocab::MULTUS_ENABLED.to_string(),
        )])
    });
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn container(name: &str) -> Container {
    Container {
        name: name.into(),
        ..Default::default()
    }
}

/// A meshed pod in `app` on node `n1`, owned by a ReplicaSet, with no networks annotation.
fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("app".into()),
            owner_references: Some(vec![owner("apps/v1", "ReplicaSet", Some(true))]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container("app"), container(vocab::PROXY_CONTAINER)],
            node_name: Some("n1".into()),
            ..Default::default()
        }),
        status: None,
    }
}

/// The installer pods seen: `(node, ready)` each.
fn installers(pods: &[(&str, bool)]) -> InstallerPods {
    pods.iter()
        .enumerate()
        .map(|(i, (node, ready))| InstallerPod {
            name: format!("linkerd-cni/installer-{i}"),
            node: Some(node.to_string()),
            ready: *ready,
        })
        .collect()
}

fn with_networks(mut p: Pod, value: &str) -> Pod {
    p.metadata.annotations = Some(BTreeMap::from([(
        vocab::NETWORKS_ANNOTATION.to_string(),
        value.to_string(),
    )]));
    p
}

fn validator_exit(mut p: Pod, code: i32, last: bool) -> Pod {
    let terminated = Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            ..Default::default()
        }),
        ..Default::default()
    });
    let (state, last_state) = if last {
        (None, terminated)
    } else {
        (terminated, None)
    };
    p.status = Some(PodStatus {
        init_container_statuses: Some(vec![ContainerStatus {
            name: vocab::VALIDATOR_CONTAINER.into(),
            state,
            last_state,
            ..Default::default()
        }]),
        ..Default::default()
    });
    p
}

#[test]
fn verdicts() {
    let cfg = DecisionConfig::default();
    let enabled = namespace("app", true);
    let disabled = namespace("app", false);
    let rs = owner("apps/v1", "ReplicaSet", Some(true));
    let repair = |why| Verdict::Repair {
        why,
        owner: rs.clone(),
    };

    let mut bare = pod();
    bare.metadata.owner_references = None;
    let mut job = pod();
    job.metadata.owner_references = Some(vec![owner("batch/v1", "Job", Some(true))]);
    let mut unmeshed = pod();
    unmeshed.spec.as_mut().unwrap().containers = vec![container("app")];
    let mut sidecar = pod();
    let spec = sidecar.spec.as_mut().unwrap();
    spec.containers = vec![container("app")];
    spec.init_containers = Some(vec![Container {
        restart_policy: Some("Always".into()),
        ..container(vocab::PROXY_CONTAINER)
    }]);
    let mut deleting = pod();
    deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
    let mut finished = pod();
    finished.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    let mut opted_out = pod();
    opted_out.metadata.annotations = Some(BTreeMap::from([(
        vocab::MULTUS_ANNOTATION.to_string(),
        "disabled".to_string(),
    )]));
    let mut control_plane = pod();
    control_plane.metadata.namespace = Some("linkerd".into());
    control_plane.metadata.labels = Some(BTreeMap::from([(
        vocab::CONTROL_PLANE_COMPONENT_LABEL.to_string(),
        "destination".to_string(),
    )]));
    let linkerd = namespace("linkerd", false);

    let cases: Vec<(&str, Pod, Option<&Namespace>, Verdict)> = vec![
        ("unattached", pod(), Some(&enabled), repair(Why::Unattached)),
        (
            "native sidecar proxy",
            sidecar,
            Some(&enabled),
            repair(Why::Unattached),
        ),
        (
            "attached",
            with_networks(pod(), "macvlan, linkerd-cni"),
            Some(&enabled),
            Verdict::Skip(Skip::Healthy),
        ),
        (
            // The repair Event names both NADs, not "not attached" (as it did before).
            "other namespace's NAD",
            with_networks(pod(), "other/linkerd-cni"),
            Some(&enabled),
            repair(Why::OnAnotherNad {
                listed: "other/linkerd-cni".into(),
                wanted: "app/linkerd-cni".into(),
            }),
        ),
        (
            // Unreadable: the webhook would not attach it either, a restart changes nothing.
            "unreadable networks",
            with_networks(pod(), "a,,b"),
            Some(&enabled),
            Verdict::Skip(Skip::Healthy),
        ),
        (
            "validator 95, last run",
            validator_exit(with_networks(pod(), "linkerd-cni"), 95, true),
            Some(&enabled),
            repair(Why::ValidatorFailed),
        ),
        (
            "validator 95, current run",
            validator_exit(with_networks(pod(), "linkerd-cni"), 95, false),
            Some(&enabled),
            repair(Why::ValidatorFailed),
        ),
        (
            "validator other exit",
            validator_exit(with_networks(pod(), "linkerd-cni"), 1, true),
            Some(&enabled),
            Verdict::Skip(Skip::Healthy),
        ),
        (
            "bare",
            bare,
            Some(&enabled),
            Verdict::Skip(Skip::NoRecreatingOwner),
        ),
        (
            "job",
            job,
            Some(&enabled),
            Verdict::Skip(Skip::NoRecreatingOwner),
        ),
        (
            "not meshed",
            unmeshed,
            Some(&enabled),
            Verdict::Skip(Skip::NotMeshed),
        ),
        (
            "deleting",
            deleting,
            Some(&enabled),
            Verdict::Skip(Skip::Gone),
        ),
        (
            "finished",
            finished,
            Some(&enabled),
            Verdict::Skip(Skip::Gone),
        ),
        (
            "namespace not enabled",
            pod(),
            Some(&disabled),
            Verdict::Skip(Skip::NamespaceNotEnabled),
        ),
        (
            "namespace unknown",
            pod(),
            None,
            Verdict::Skip(Skip::NamespaceNotEnabled),
        ),
        (
            "pod opted out",
            opted_out,
            Some(&enabled),
            Verdict::Skip(Skip::Healthy),
        ),
        (
            "control plane",
            control_plane,
            Some(&linkerd),
            repair(Why::Unattached),
        ),
    ];
    // NAD mode reads no installer: none is Ready, and the validator's 95 still gets a pod restarted.
    let none = InstallerPods::default();
    for (name, pod, ns, want) in cases {
        assert_eq!(decide(&pod, ns, &cfg, &none), want, "{name}");
    }
}

/// Aux-chain mode: the node's chain attaches every pod, so neither a missing networks annotation nor
/// another NAD's gets a pod evicted; a validator that exited 95 still does (the pod started where the
/// chain's file was missing). The same pods in NAD mode, for contrast.
#[test]
fn aux_chain_verdicts() {
    let nad_mode = DecisionConfig::default();
    let mut aux = DecisionConfig::default();
    aux.nad.attach = rules::attach::Attach::AuxChain;
    let enabled = namespace("app", true);
    let disabled = namespace("app", false);
    let rs = owner("apps/v1", "ReplicaSet", Some(true));
    let repair = |why| Verdict::Repair {
        why,
        owner: rs.clone(),
    };
    let healthy = Verdict::Skip(Skip::Healthy);
    let mut bare_failed = validator_exit(pod(), 95, true);
    bare_failed.metadata.owner_references = None;
    let mut control_plane = pod();
    control_plane.metadata.namespace = Some("linkerd".into());
    control_plane.metadata.labels = Some(BTreeMap::from([(
        vocab::CONTROL_PLANE_COMPONENT_LABEL.to_string(),
        "destination".to_string(),
    )]));
    let linkerd = namespace("linkerd", false);

    // (case, pod, namespace, verdict in NAD mode, verdict in aux-chain mode)
    let cases: Vec<(&str, Pod, Option<&Namespace>, Verdict, Verdict)> = vec![
        (
            "no networks annotation",
            pod(),
            Some(&enabled),
            repair(Why::Unattached),
            healthy.clone(),
        ),
        (
            "another namespace's NAD",
            with_networks(pod(), "other/linkerd-cni"),
            Some(&enabled),
            repair(Why::OnAnotherNad {
                listed: "other/linkerd-cni".into(),
                wanted: "app/linkerd-cni".into(),
            }),
            healthy.clone(),
        ),
        (
            "our NAD listed (left from NAD mode)",
            with_networks(pod(), "linkerd-cni"),
            Some(&enabled),
            healthy.clone(),
            healthy.clone(),
        ),
        (
            "control plane, no annotation",
            control_plane,
            Some(&linkerd),
            repair(Why::Unattached),
            healthy.clone(),
        ),
        (
            "validator 95, no annotation",
            validator_exit(pod(), 95, true),
            Some(&enabled),
            repair(Why::Unattached),
            repair(Why::ValidatorFailed),
        ),
        (
            "validator 95, current run",
            validator_exit(pod(), 95, false),
            Some(&enabled),
            repair(Why::Unattached),
            repair(Why::ValidatorFailed),
        ),
        (
            "validator other exit",
            validator_exit(pod(), 1, true),
            Some(&enabled),
            repair(Why::Unattached),
            healthy.clone(),
        ),
        (
            "validator 95, namespace not enabled",
            validator_exit(pod(), 95, true),
            Some(&disabled),
            Verdict::Skip(Skip::NamespaceNotEnabled),
            Verdict::Skip(Skip::NamespaceNotEnabled),
        ),
        (
            "validator 95, bare pod",
            bare_failed,
            Some(&enabled),
            Verdict::Skip(Skip::NoRecreatingOwner),
            Verdict::Skip(Skip::NoRecreatingOwner),
        ),
    ];
    // The pods' node n1 has a Ready installer (the chain's file is in place).
    let ready = installers(&[("n1", true)]);
    for (name, pod, ns, in_nad_mode, in_aux_mode) in cases {
        assert_eq!(
            decide(&pod, ns, &nad_mode, &ready),
            in_nad_mode,
            "NAD mode: {name}"
        );
        assert_eq!(
            decide(&pod, ns, &aux, &ready),
            in_aux_mode,
            "aux-chain mode: {name}"
        );
    }
}

/// Aux-chain mode: a pod whose validator exited 95 is restarted only once its node has a Ready
/// installer (after a reboot the chain's file is back only then; a replacement started before would
/// fail alike). Until then it waits (`ChainNotInstalled`); nad mode restarts it as before, whatever the
/// installers.
#[test]
fn aux_chain_waits_for_the_nodes_installer() {
    let nad_mode = DecisionConfig::default();
    let mut aux = DecisionConfig::default();
    aux.nad.attach = rules::attach::Attach::AuxChain;
    let enabled = namespace("app", true);
    let repair = Verdict::Repair {
        why: Why::ValidatorFailed,
        owner: owner("apps/v1", "ReplicaSet", Some(true)),
    };
    let waits = Verdict::Skip(Skip::ChainNotInstalled);
    // Attached (nad mode's NAD listed), so nad mode judges it by the validator alone.
    let failed = || validator_exit(with_networks(pod(), "linkerd-cni"), 95, true);
    let mut unscheduled = failed();
    unscheduled.spec.as_mut().unwrap().node_name = None;
    let mut bare = failed();
    bare.metadata.owner_references = None;

    // (case, pod, installers seen, verdict in aux-chain mode)
    let cases: Vec<(&str, Pod, InstallerPods, Verdict)> = vec![
        (
            "node's installer Ready",
            failed(),
            installers(&[("n1", true)]),
            repair.clone(),
        ),
        (
            "node's installer Ready, another not",
            failed(),
            installers(&[("n1", false), ("n1", true)]),
            repair.clone(),
        ),
        (
            "node's installer not Ready",
            failed(),
            installers(&[("n1", false), ("n2", true)]),
            waits.clone(),
        ),
        (
            "no installer on the node",
            failed(),
            installers(&[("n2", true)]),
            waits.clone(),
        ),
        (
            "no installer at all",
            failed(),
            InstallerPods::default(),
            waits.clone(),
        ),
        (
            "not scheduled yet",
            unscheduled,
            installers(&[("n1", true)]),
            waits.clone(),
        ),
        (
            // Nothing to wait for: nothing would recreate it.
            "bare pod, installer not Ready",
            bare,
            installers(&[("n1", false)]),
            Verdict::Skip(Skip::NoRecreatingOwner),
        ),
        (
            "validator did not fail, installer not Ready",
            validator_exit(pod(), 1, true),
            installers(&[("n1", false)]),
            Verdict::Skip(Skip::Healthy),
        ),
    ];
    for (name, pod, seen, in_aux_mode) in cases {
        assert_eq!(
            decide(&pod, Some(&enabled), &aux, &seen),
            in_aux_mode,
            "aux-chain mode: {name}"
        );
        // NAD mode as before: the installers are not asked.
        let in_nad_mode = decide(&pod, Some(&enabled), &nad_mode, &seen);
        let as_before = decide(&pod, Some(&enabled), &nad_mode, &InstallerPods::default());
        assert_eq!(in_nad_mode, as_before, "NAD mode: {name}");
        if validator_failed(&pod) && pod.metadata.owner_references.is_some() {
            assert_eq!(in_nad_mode, repair, "NAD mode: {name}");
        }
    }
}

/// Nad mode: a pod is restarted only into a NAD that exists where the webhook would name it and
/// that Multus on its node accepts; each reason otherwise. Aux-chain mode names no NAD.
#[test]
fn the_replacement_nad_must_exist() {
    use rules::namespaces::NadPlacement;
    let per_namespace = DecisionConfig::default();
    let mut shared = DecisionConfig::default();
    shared.nad.placement = NadPlacement::Shared("nads".into());
    let mut aux = DecisionConfig::default();
    aux.nad.attach = rules::attach::Attach::AuxChain;
    let seen =
        |served: Option<bool>, namespaces: &[&str], refused: Option<(&str, &[&str])>| NadsSeen {
            served,
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            refused: refused.map(|(ns, nodes)| {
                (
                    ns.to_string(),
                    nodes.iter().map(|n| n.to_string()).collect(),
                )
            }),
        };
    use NadUnavailable::*;
    // (case, config, NADs seen, verdict) for `pod()`: namespace app, node n1.
    let cases: Vec<(&str, &DecisionConfig, NadsSeen, Option<NadUnavailable>)> = vec![
        (
            "its namespace's NAD",
            &per_namespace,
            seen(Some(true), &["app"], None),
            None,
        ),
        (
            "not listed yet",
            &per_namespace,
            seen(None, &["app"], None),
            Some(NotListed),
        ),
        (
            "no CRD",
            &per_namespace,
            seen(Some(false), &[], None),
            Some(CrdMissing),
        ),
        // A CRD deleted after a list: the stale list does not count.
        (
            "CRD gone, stale list",
            &per_namespace,
            seen(Some(false), &["app"], None),
            Some(CrdMissing),
        ),
        (
            "not written yet",
            &per_namespace,
            seen(Some(true), &["other"], None),
            Some(NadMissing),
        ),
        (
            "shared NAD",
            &shared,
            seen(Some(true), &["nads"], None),
            None,
        ),
        (
            "shared NAD missing, own there",
            &shared,
            seen(Some(true), &["app"], None),
            Some(NadMissing),
        ),
        (
            "shared NAD refused on its node",
            &shared,
            seen(Some(true), &["nads"], Some(("nads", &["n1"]))),
            Some(RefusedByMultus),
        ),
        (
            "shared NAD refused on another node",
            &shared,
            seen(Some(true), &["nads"], Some(("nads", &["n2"]))),
            None,
        ),
        (
            // Its own namespace's NAD is never refused.
            "own NAD, another namespace refused",
            &per_namespace,
            seen(Some(true), &["app"], Some(("nads", &["n1"]))),
            None,
        ),
        (
            "aux-chain, no CRD",
            &aux,
            seen(Some(false), &[], None),
            None,
        ),
    ];
    for (name, cfg, nads, want) in cases {
        assert_eq!(nad_unavailable(&pod(), cfg, &nads), want, "{name}");
    }
    assert_eq!(
        replacement_nad("app", &shared),
        ("nads".to_string(), vocab::NAD_NAME.to_string())
    );
    // Every reason names the NAD; the refusal its node.
    for reason in [NotListed, CrdMissing, NadMissing, RefusedByMultus] {
        let text = reason.describe("nads/linkerd-cni", "n1");
        assert!(text.contains("nads/linkerd-cni"), "{text}");
        assert!(reason.label().starts_with("waiting_"));
    }
    assert!(RefusedByMultus.describe("a/b", "n1").contains("node n1"));
}
