//! Why a pod's sandbox failed, read from the kubelet's `FailedCreatePodSandBox` Event text: whether
//! it is this product's attachment (Multus refusing the NAD, the NAD missing, linkerd-cni failing)
//! and what the admin should do. Multus' own wording is matched (pkg/k8sclient and pkg/multus).
//! [`failing`] counts the pods failing that way now, for the operator's gauge and its alert.

use std::time::{Duration, SystemTime};

/// A sandbox failure caused by the attachment of linkerd-cni.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Multus' namespace isolation refused a NAD in another namespace.
    NamespaceIsolation {
        pod_namespace: String,
        nad_namespace: String,
    },
    /// The NAD the pod lists does not exist (deleted, or never created).
    NadMissing,
    /// The linkerd-cni plugin itself failed.
    Plugin,
}

impl Cause {
    /// Every cause's label value, in a fixed order: each is a series, 0 included.
    pub const LABELS: [&'static str; 3] = ["namespace-isolation", "nad-missing", "plugin"];

    /// This cause's label value (one of [`Cause::LABELS`]).
    pub fn label(&self) -> &'static str {
        Self::LABELS[self.slot()]
    }

    fn slot(&self) -> usize {
        match self {
            Cause::NamespaceIsolation { .. } => 0,
            Cause::NadMissing => 1,
            Cause::Plugin => 2,
        }
    }

    /// What to do about it, for `check`'s hint and the repair Event.
    pub fn advice(&self) -> String {
        match self {
            Cause::NamespaceIsolation { nad_namespace, .. } => format!(
                "Multus runs with namespaceIsolation and {nad_namespace} is not one of its \
                 globalNamespaces: set --nad-namespace (helm: operator.nadNamespace) to `default` or \
                 to a namespace in globalNamespaces, or empty for one NAD per namespace; then delete \
                 the pod so its owner recreates it"
            ),
            Cause::NadMissing => "the pod lists a NAD that does not exist: enable its namespace \
                 (linkerd.io/multus=enabled) so the operator creates it, or delete the pod so the \
                 webhook attaches its replacement to the NAD in use"
                .to_string(),
            Cause::Plugin => "linkerd-cni failed on the node: read the plugin's log there (the \
                 runtime's log, or cni.logFile) and the installer pod's readiness"
                .to_string(),
        }
    }
}

/// The cause of a failed sandbox when it is ours; `None` for every other failure (another network,
/// the runtime, an image), which is not this product's to report.
pub fn cause(message: &str, nad_name: &str) -> Option<Cause> {
    if let Some(at) = message.find("pod is in namespace ") {
        let rest = &message[at + "pod is in namespace ".len()..];
        if let Some((pod_ns, target)) = rest.split_once(" but refers to target namespace ") {
            let nad_ns = target
                .split(|c: char| c.is_whitespace() || c == '"' || c == ';' || c == ',')
                .next()
                .unwrap_or_default();
            return Some(Cause::NamespaceIsolation {
                pod_namespace: pod_ns.trim().to_string(),
                nad_namespace: nad_ns.to_string(),
            });
        }
    }
    let names_ours = message.contains(nad_name) || message.contains(vocab::PLUGIN_TYPE);
    if names_ours
        && (message.contains("cannot find a network-attachment-definition")
            || (message.contains("network-attachment-definitions")
                && message.contains("not found")))
    {
        return Some(Cause::NadMissing);
    }
    names_ours.then_some(Cause::Plugin)
}

/// How recent a pod's last failed sandbox must be for it to count as failing now. The kubelet
/// retries a failed sandbox on each sync of the pod, its back-off capped at 5 minutes, and repeats
/// of one message update one Event: a pod still failing has an Event younger than this; a pod
/// that started since, or was deleted, drops out within it.
pub const FAILING_WITHIN: Duration = Duration::from_secs(10 * 60);

/// One `FailedCreatePodSandBox` Event as [`failing`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Failure<'a> {
    /// The pod's uid (a pod recreated under the same name is another pod).
    pub pod_uid: &'a str,
    pub message: &'a str,
    /// When the runtime last failed it (None: the Event says no time, and does not count).
    pub at: Option<SystemTime>,
}

/// Pods failing their sandbox over this product's attachment now, per cause in [`Cause::LABELS`]'s
/// order: each pod's latest failure decides, if it is ours and within [`FAILING_WITHIN`] of `now`
/// (a pod whose latest failure is another network's is not counted as ours).
pub fn failing<'a>(
    failures: impl IntoIterator<Item = Failure<'a>>,
    nad_name: &str,
    now: SystemTime,
) -> [(&'static str, i64); 3] {
    let mut latest: std::collections::HashMap<&str, (SystemTime, &str)> = Default::default();
    for f in failures {
        let Some(at) = f.at else { continue };
        let seen = latest.entry(f.pod_uid).or_insert((at, f.message));
        if seen.0 < at {
            *seen = (at, f.message);
        }
    }
    let mut counts = Cause::LABELS.map(|label| (label, 0));
    for (at, message) in latest.into_values() {
        let recent = now
            .duration_since(at)
            .map_or(true, |age| age <= FAILING_WITHIN);
        if let (true, Some(cause)) = (recent, cause(message, nad_name)) {
            counts[cause.slot()].1 += 1;
        }
    }
    counts
}

/// The part of the runtime's message that says what went wrong: what follows the failing plugin's
/// `failed (add): ` when present (the rest is the runtime's framing), else the whole message.
pub fn essence(message: &str) -> &str {
    message
        .rfind("failed (add): ")
        .map(|at| &message[at + "failed (add): ".len()..])
        .unwrap_or(message)
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISOLATION: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to \
        setup network for sandbox \"0a1b\": plugin type=\"multus\" name=\"multus-cni-network\" failed \
        (add): [shared-1/web-5d8f:linkerd-cni]: error loading k8s delegates k8s args: \
        TryLoadPodDelegates: error in getting k8s network for pod: GetNetworkDelegates: failed \
        getting the delegate: namespace isolation enabled, annotation violates permission, pod is \
        in namespace shared-1 but refers to target namespace nad-home";

    #[test]
    fn multus_isolation_refusal_names_both_namespaces() {
        assert_eq!(
            cause(ISOLATION, "linkerd-cni"),
            Some(Cause::NamespaceIsolation {
                pod_namespace: "shared-1".into(),
                nad_namespace: "nad-home".into()
            })
        );
        assert!(essence(ISOLATION).starts_with("[shared-1/web-5d8f:linkerd-cni]: error loading"));
        let advice = cause(ISOLATION, "linkerd-cni").unwrap().advice();
        assert!(
            advice.contains("nad-home") && advice.contains("`default`"),
            "{advice}"
        );
    }

    #[test]
    fn a_missing_nad_and_a_failing_plugin() {
        let missing = "... failed (add): [a/p:linkerd-cni]: error loading k8s delegates k8s args: \
            TryLoadPodDelegates: error in getting k8s network for pod: GetNetworkDelegates: failed \
            getting the delegate: getKubernetesDelegate: cannot find a network-attachment-definition \
            (linkerd-cni) in namespace (a): network-attachment-definitions.k8s.cni.cncf.io \
            \"linkerd-cni\" not found";
        assert_eq!(cause(missing, "linkerd-cni"), Some(Cause::NadMissing));
        let plugin = "... failed (add): [a/p:linkerd-cni]: error adding container to network \
            \"linkerd-cni\": cannot read pod a/p: 401 Unauthorized";
        assert_eq!(cause(plugin, "linkerd-cni"), Some(Cause::Plugin));
    }

    /// Failures of other networks or of the runtime are not ours to report.
    #[test]
    fn other_failures_are_not_ours() {
        for message in [
            "failed to setup network for sandbox: plugin type=\"bridge\" failed (add): no IP ranges",
            "failed to get sandbox image \"pause\": not found",
            "... failed (add): [a/p:macvlan-conf]: cannot find a network-attachment-definition \
             (macvlan-conf) in namespace (a): network-attachment-definitions.k8s.cni.cncf.io \
             \"macvlan-conf\" not found",
        ] {
            assert_eq!(cause(message, "linkerd-cni"), None, "{message}");
        }
    }

    #[test]
    fn failing_counts_each_pods_latest_recent_failure_by_cause() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ago = |s: u64| Some(now - Duration::from_secs(s));
        let plugin = "... failed (add): [a/p:linkerd-cni]: cannot read pod a/p: 401 Unauthorized";
        let other =
            "failed to setup network for sandbox: plugin type=\"bridge\" failed (add): no IP";
        let failures = [
            // Two Events of one pod: the later decides (isolation).
            Failure {
                pod_uid: "u1",
                message: plugin,
                at: ago(120),
            },
            Failure {
                pod_uid: "u1",
                message: ISOLATION,
                at: ago(60),
            },
            Failure {
                pod_uid: "u2",
                message: plugin,
                at: ago(30),
            },
            // Too old: started or gone since.
            Failure {
                pod_uid: "u3",
                message: plugin,
                at: ago(FAILING_WITHIN.as_secs() + 1),
            },
            // Ours once, then another network's failure: not ours now.
            Failure {
                pod_uid: "u4",
                message: plugin,
                at: ago(200),
            },
            Failure {
                pod_uid: "u4",
                message: other,
                at: ago(100),
            },
            // No time: not counted.
            Failure {
                pod_uid: "u5",
                message: plugin,
                at: None,
            },
        ];
        assert_eq!(
            failing(failures, "linkerd-cni", now),
            [
                ("namespace-isolation", 1),
                ("nad-missing", 0),
                ("plugin", 1)
            ]
        );
        assert_eq!(
            failing([], "linkerd-cni", now),
            [
                ("namespace-isolation", 0),
                ("nad-missing", 0),
                ("plugin", 0)
            ]
        );
    }
}
