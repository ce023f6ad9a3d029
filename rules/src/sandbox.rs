//! Why a pod's sandbox failed, read from the kubelet's `FailedCreatePodSandBox` Event text: whether
//! it is this product's attachment (Multus refusing the NAD, the NAD missing, linkerd-cni failing)
//! and what the admin should do. Multus' own wording is matched (pkg/k8sclient and pkg/multus).

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
}
