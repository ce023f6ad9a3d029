//! The vocabulary every part of linkerd-multus shares: annotation and label keys, object names, default
//! ports, uids and paths. No other crate spells one of these strings; they import them from here, so a
//! key can never drift between the operator, the webhook and the CNI plugin. Beside the words, a few
//! predicates that only read them (is this a control-plane pod, a proxy container, an object of ours);
//! the product's rules built on them live in the `rules` crate. And two std-only helpers every binary
//! shares: how a duration flag is written ([`duration`]) and how an error is told with its causes
//! ([`report`]).

use std::collections::BTreeMap;

pub mod duration;
mod proxy_uid;
pub mod report;

pub use proxy_uid::{parse_proxy_uid, ProxyUidError, MAX_KUBERNETES_UID, PROXY_UID_CASES};

// === Annotations and labels read or written on namespaces and pods ===

/// Namespace or pod annotation that opts into the Multus attachment of linkerd-cni.
pub const MULTUS_ANNOTATION: &str = "linkerd.io/multus";
/// The one value of [`MULTUS_ANNOTATION`] that enables it; anything else means "no".
pub const MULTUS_ENABLED: &str = "enabled";
/// Linkerd's own injection annotation, copied from the namespace like [`MULTUS_ANNOTATION`].
pub const INJECT_ANNOTATION: &str = "linkerd.io/inject";
/// The value of [`INJECT_ANNOTATION`] that means the pod gets no proxy.
pub const INJECT_DISABLED: &str = "disabled";
/// Multus' pod annotation listing extra network attachments.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// Label Linkerd puts on its control-plane pods.
pub const CONTROL_PLANE_COMPONENT_LABEL: &str = "linkerd.io/control-plane-component";
/// OpenShift's namespace annotation `<first uid>/<size>` of the uids pods there may run as.
pub const OPENSHIFT_UID_RANGE_ANNOTATION: &str = "openshift.io/sa.scc.uid-range";
/// The API group of OpenShift's SecurityContextConstraints: served only where SCC admission runs.
pub const OPENSHIFT_SCC_GROUP: &str = "security.openshift.io";

/// Linkerd proxy configuration annotations. The CNI plugin reads each on the pod, falling back to the
/// namespace; the proxy uid's sources are ordered by `rules::proxy_uid`, for the plugin and `check` alike.
pub const PROXY_UID_ANNOTATION: &str = "config.linkerd.io/proxy-uid";
pub const PROXY_GID_ANNOTATION: &str = "config.linkerd.io/proxy-gid";
pub const SKIP_INBOUND_PORTS_ANNOTATION: &str = "config.linkerd.io/skip-inbound-ports";
pub const SKIP_OUTBOUND_PORTS_ANNOTATION: &str = "config.linkerd.io/skip-outbound-ports";
pub const SKIP_SUBNETS_ANNOTATION: &str = "config.linkerd.io/skip-subnets";

/// Ownership label on everything the operator creates; without it an object is someone else's.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "linkerd-multus-operator";
/// Server-side apply field manager of the operator.
pub const FIELD_MANAGER: &str = "linkerd-multus-operator";
/// Label the operator puts on the namespaces it serves, so the MutatingAdmissionPolicy's binding selects
/// them (a namespaceSelector sees labels only): every other namespace's pod creates stay out of the
/// policy. The value is [`ADMISSION_NAMESPACE_LABEL_VALUE`].
pub const ADMISSION_NAMESPACE_LABEL: &str = "multus.linkerd.io/admission";
pub const ADMISSION_NAMESPACE_LABEL_VALUE: &str = "enabled";
/// Name of the MutatingAdmissionPolicy (and its binding) that makes the webhook's decision in the
/// apiserver, where the server serves that API.
pub const ADMISSION_POLICY_NAME: &str = "attach.multus.linkerd.io";
/// Name of the webhook entry in the chart's MutatingWebhookConfiguration, which the operator narrows
/// with a matchCondition when the policy is live.
pub const WEBHOOK_NAME: &str = "attach.multus.linkerd.io";
/// On an owned NAD that is (or was) the one shared NAD (`--nad-namespace`): pods of any namespace may
/// reference it, so it is deleted only once no pod anywhere does.
pub const SHARED_NAD_ANNOTATION: &str = "linkerd.io/multus-shared-nad";
pub const SHARED_NAD_VALUE: &str = "true";

// === Names and defaults ===

/// Name of the NetworkAttachmentDefinition, and the CNI `type`/`name` of the plugin.
pub const NAD_NAME: &str = "linkerd-cni";
pub const PLUGIN_TYPE: &str = "linkerd-cni";
pub const DEFAULT_CNI_VERSION: &str = "0.3.1";

pub const DEFAULT_LINKERD_NAMESPACE: &str = "linkerd";
pub const DEFAULT_CNI_NAMESPACE: &str = "linkerd-cni";
pub const DEFAULT_CNI_CONFIGMAP: &str = "linkerd-cni-config";
/// Key of the linkerd-cni ConfigMap holding the plugin's network config (Linkerd's own chart's key).
pub const CNI_CONFIG_KEY: &str = "cni_network_config";
/// File name of the plugin's kubeconfig that this project's installer writes into the net dir
/// (`--kubeconfig-name`). Not [`LINKERD_KUBECONFIG_NAME`]: where Linkerd's own installer also ran (a
/// migration from Linkerd's CNI plugin), each keeps its own file, and ours never replaces theirs.
pub const DEFAULT_KUBECONFIG_NAME: &str = "ZZZ-linkerd-multus-kubeconfig";
/// File name of the kubeconfig Linkerd's own CNI installer (linkerd2-cni) writes, and this project's
/// installer's default before it had its own: its uninstall removes a file of this name only when it
/// carries this installer's mark.
pub const LINKERD_KUBECONFIG_NAME: &str = "ZZZ-linkerd-cni-kubeconfig";
/// The operator's `--cni-kubeconfig` default, which NADs name: where Linkerd's own CNI installer
/// writes its kubeconfig ([`LINKERD_KUBECONFIG_NAME`] in [`DEFAULT_CNI_NET_DIR`]), for clusters
/// whose plugin it installs; with this project's installer the chart passes that installer's path.
pub const DEFAULT_CNI_KUBECONFIG: &str = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig";
pub const DEFAULT_CNI_NET_DIR: &str = "/etc/cni/net.d";
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";
/// Multus' auxiliary CNI chain OpenShift 4.18+ configures (`auxiliaryCNIChainName`).
pub const DEFAULT_AUX_CHAIN_NAME: &str = "vendor-cni-chain";
/// Where thick Multus' daemon container sees the node's root (upstream's thick DaemonSet, OpenShift's
/// network operator): the paths it writes into the shim's config start with it.
pub const DEFAULT_MULTUS_HOST_PREFIX: &str = "/host";
/// The label (`key=value`) on every pod of the chart's linkerd-cni installer DaemonSet, by which
/// `check` and the repairer find the installers.
pub const CNI_INSTALLER_LABEL: &str = "app.kubernetes.io/component=cni";
/// linkerd-cni's plugin config in the auxiliary chain's directory. libcni reads `*.conf` there in
/// byte order, so this name runs after numbered vendor files.
pub const AUX_CHAIN_FILE_NAME: &str = "linkerd-cni.conf";
/// Key of the plugin config's `linkerd` block that the installer sets to `true` in the auxiliary
/// chain's file: the plugin then runs for every pod of the node, and passes a pod through unmeshed
/// (instead of failing its ADD) when its own kubeconfig is gone or its credential refused.
pub const CNI_CONFIG_AUX_CHAIN_KEY: &str = "aux-chain";
/// File name of the installer's node-local view of the namespaces whose pods linkerd-cni may have to
/// redirect (aux-chain mode), in the CNI net dir beside the plugin's kubeconfig. No `.conf`,
/// `.conflist` or `.json` suffix: runtimes and Multus load those from the net dir as network configs.
pub const NAMESPACE_VIEW_FILE_NAME: &str = "linkerd-multus-enabled-namespaces";
/// Key of the chain file's `linkerd` block naming that view's path as the node sees it: in the
/// auxiliary chain the plugin passes a pod of a namespace outside the view through without asking
/// the apiserver.
pub const CNI_CONFIG_NAMESPACE_VIEW_KEY: &str = "enabled-namespaces-file";

/// Containers the CNI plugin looks for in a pod.
pub const PROXY_CONTAINER: &str = "linkerd-proxy";
pub const INIT_CONTAINER: &str = "linkerd-init";
/// The init container Linkerd's injector adds in CNI mode to check that the rules are in place.
pub const VALIDATOR_CONTAINER: &str = "linkerd-network-validator";

/// A Linux uid, the one type every part holds a uid in. `u32::MAX` is `(uid_t)-1`, "no uid" to the
/// kernel, so it is never one. Kubernetes writes uids as int64 (`runAsUser`): [`uid_from_kubernetes`]
/// is the one conversion, where a pod is read; a `config.linkerd.io/proxy-uid` value is read by
/// [`parse_proxy_uid`].
pub type Uid = u32;

/// A Kubernetes `runAsUser` (int64) as a [`Uid`]; None when it names none (negative, `(uid_t)-1` or
/// beyond the largest uid), so such a value reads as absent rather than as a wrapped-around uid.
pub fn uid_from_kubernetes(run_as_user: i64) -> Option<Uid> {
    Uid::try_from(run_as_user)
        .ok()
        .filter(|uid| *uid != Uid::MAX)
}

/// The uid Linkerd's proxy runs as.
pub const DEFAULT_PROXY_UID: Uid = 2102;
/// On OpenShift, the proxy uid is the namespace range's first uid plus this offset (Linkerd's uid, so
/// `1000652102` reads as "the proxy" in a range starting at 1000650000).
pub const DEFAULT_PROXY_UID_OFFSET: Uid = 2102;
pub const DEFAULT_INBOUND_PROXY_PORT: u16 = 4143;
pub const DEFAULT_OUTBOUND_PROXY_PORT: u16 = 4140;

// === The operator process ===

/// The Go operator's webhook path, kept so existing webhook configurations keep working.
pub const WEBHOOK_PATH: &str = "/annotate-multus-v1-pod";
pub const DEFAULT_WEBHOOK_ADDR: &str = "0.0.0.0:9443";
/// Connections the webhook holds at once (the apiserver needs a few dozen at most; the rest wait).
pub const DEFAULT_WEBHOOK_MAX_CONNECTIONS: u32 = 4096;
pub const DEFAULT_ADMIN_ADDR: &str = "0.0.0.0:8081";
pub const DEFAULT_TLS_CERT_FILE: &str = "/etc/webhook/certs/tls.crt";
pub const DEFAULT_TLS_KEY_FILE: &str = "/etc/webhook/certs/tls.key";
pub const DEFAULT_LEASE_NAME: &str = "linkerd-multus-operator";
/// Reconciles in flight at once (each holds an apiserver connection; see `bench/RESULTS.md`).
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 16;
/// Pod repair (`--repair-unattached-pods`): evictions sent per minute at most, and how long a pod
/// evicted (or tried) is left alone before it may be tried again.
pub const DEFAULT_REPAIR_MAX_PER_MINUTE: u32 = 5;
pub const DEFAULT_REPAIR_COOLDOWN: &str = "10m";
/// `--resync`: how often the operator re-checks every namespace (a safety net; the watches act at once).
pub const DEFAULT_RESYNC: &str = "5m";
/// `--webhook-cert-check-interval`: how often the self-managed certificate is re-read and re-synced.
pub const DEFAULT_WEBHOOK_CERT_CHECK_INTERVAL: &str = "5m";
/// `check --probe-timeout`: how long each webhook endpoint's TLS handshake may take.
pub const DEFAULT_PROBE_TIMEOUT: &str = "5s";
/// Exit code of Linkerd's `linkerd-network-validator` when the pod's traffic is not redirected (the
/// CNI plugin did not run for it); Linkerd's own repair controller restarts such pods.
pub const VALIDATOR_FAILED_EXIT_CODE: i32 = 95;

// === The CNI node installer (linkerd-cni-install) ===

/// Where a pod's service-account token and cluster CA are mounted (`token`, `ca.crt`).
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The installer's `--resync`: its safety-net pass when no file change is seen.
pub const DEFAULT_INSTALLER_RESYNC: &str = "5s";
// The placeholders of Linkerd's `cni_network_config` template: `rules::cni_template`.

// === The webhook ===

/// The Service in front of the webhook; the self-managed certificate is issued for its DNS names.
pub const DEFAULT_WEBHOOK_SERVICE_NAME: &str = "linkerd-multus-webhook";
/// Linkerd's proxy injector: the name of its Service, and the start of its webhook entry's name
/// (`linkerd-proxy-injector.linkerd.io`). `check` tells its configuration by either.
pub const LINKERD_PROXY_INJECTOR: &str = "linkerd-proxy-injector";

// === Rules every part answers the same way ===

/// True when `labels` carry Linkerd's control-plane label with a value. Linkerd's own CNI plugin and
/// injector read presence; an empty value is treated as absent so a stray `key=` does not widen the rule.
/// The plugin asks only this (it does not know Linkerd's namespace); what the webhook and `check` do for
/// the control plane asks [`is_linkerd_control_plane`].
pub fn is_control_plane_pod(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(CONTROL_PLANE_COMPONENT_LABEL))
        .is_some_and(|v| !v.is_empty())
}

/// A control-plane pod ([`is_control_plane_pod`]) in Linkerd's own namespace: the webhook attaches it
/// whatever its annotations and leaves its uids alone; a pod elsewhere with the label is not Linkerd's.
pub fn is_linkerd_control_plane(
    namespace: &str,
    linkerd_namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    namespace == linkerd_namespace && is_control_plane_pod(labels)
}

/// True when a container named `name` is Linkerd's proxy: a container, or an init container that keeps
/// running (`restartPolicy: Always`, a native sidecar). The webhook, the plugin and `check` all ask this.
pub fn is_proxy_container(name: &str, init_container: bool, restart_policy: Option<&str>) -> bool {
    name == PROXY_CONTAINER && (!init_container || restart_policy == Some("Always"))
}

/// True when `labels` mark an object as this project's (NADs, the webhook's Secret).
pub fn is_managed_by_us(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// Host and port of an `https://host[:port][/path]` URL; IPv6 brackets dropped, the port defaulting to
/// 443. `None` for any other scheme or an empty host.
pub fn https_host_port(url: &str) -> Option<(&str, u16)> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => 443,
    };
    (!host.is_empty()).then_some((host, port))
}

/// `host` as it goes into a URL: an IPv6 literal in brackets (`KUBERNETES_SERVICE_HOST` holds it bare).
pub fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn control_plane_pods() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[(CONTROL_PLANE_COMPONENT_LABEL, "destination")], true),
            (&[(CONTROL_PLANE_COMPONENT_LABEL, "")], false),
            (&[("app", "x")], false),
            (&[], false),
        ];
        for (pairs, want) in cases {
            assert_eq!(
                is_control_plane_pod(Some(&labels(pairs))),
                *want,
                "{pairs:?}"
            );
        }
        assert!(!is_control_plane_pod(None));
        let cp = labels(&[(CONTROL_PLANE_COMPONENT_LABEL, "destination")]);
        assert!(is_linkerd_control_plane("linkerd", "linkerd", Some(&cp)));
        assert!(!is_linkerd_control_plane("app", "linkerd", Some(&cp)));
        assert!(!is_linkerd_control_plane("linkerd", "linkerd", None));
    }

    #[test]
    fn proxy_containers() {
        assert!(is_proxy_container(PROXY_CONTAINER, false, None));
        assert!(is_proxy_container(PROXY_CONTAINER, true, Some("Always")));
        assert!(!is_proxy_container(PROXY_CONTAINER, true, None));
        assert!(!is_proxy_container("app", false, None));
    }

    #[test]
    fn managed_by_us() {
        assert!(is_managed_by_us(Some(&labels(&[(
            MANAGED_BY_LABEL,
            MANAGED_BY_VALUE
        )]))));
        assert!(!is_managed_by_us(Some(&labels(&[(
            MANAGED_BY_LABEL,
            "helm"
        )]))));
        assert!(!is_managed_by_us(Some(&labels(&[]))));
        assert!(!is_managed_by_us(None));
    }

    #[test]
    fn https_urls() {
        let cases = [
            ("https://127.0.0.1:9443/x", Some(("127.0.0.1", 9443))),
            ("https://svc.ns.svc/x", Some(("svc.ns.svc", 443))),
            ("https://[::1]:9443/x", Some(("::1", 9443))),
            ("https://[::1]/x", Some(("::1", 443))),
            ("https://h:notaport/x", None),
            ("https:///x", None),
            ("http://127.0.0.1/x", None),
        ];
        for (url, want) in cases {
            assert_eq!(https_host_port(url), want, "{url}");
        }
    }

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("10.0.0.1"), "10.0.0.1");
        assert_eq!(url_host("fd00::1"), "[fd00::1]");
        assert_eq!(url_host("[fd00::1]"), "[fd00::1]");
        assert_eq!(url_host("fd00:10:96::1"), "[fd00:10:96::1]");
        assert_eq!(url_host("::1"), "[::1]");
        assert_eq!(url_host("kubernetes.default.svc"), "kubernetes.default.svc");
    }

    /// The one boundary from Kubernetes' int64: every uid passes, anything else reads as none.
    #[test]
    fn kubernetes_uids() {
        let cases = [
            (0, Some(0)),
            (2102, Some(2102)),
            (1000652102, Some(1000652102)),
            (i64::from(u32::MAX) - 1, Some(u32::MAX - 1)),
            (i64::from(u32::MAX), None),
            (i64::from(u32::MAX) + 1, None),
            (-1, None),
            (i64::MIN, None),
            (i64::MAX, None),
        ];
        for (run_as_user, want) in cases {
            assert_eq!(uid_from_kubernetes(run_as_user), want, "{run_as_user}");
        }
    }

    /// The installer's kubeconfig name is its own, never Linkerd's (whose file an uninstall must not
    /// take), and the operator's default path is Linkerd's file in the default net dir.
    #[test]
    fn kubeconfig_names() {
        assert_ne!(DEFAULT_KUBECONFIG_NAME, LINKERD_KUBECONFIG_NAME);
        assert_eq!(
            DEFAULT_CNI_KUBECONFIG,
            format!("{DEFAULT_CNI_NET_DIR}/{LINKERD_KUBECONFIG_NAME}")
        );
        for name in [DEFAULT_KUBECONFIG_NAME, LINKERD_KUBECONFIG_NAME] {
            assert!(
                [".conf", ".conflist", ".json"]
                    .iter()
                    .all(|ext| !name.ends_with(ext)),
                "{name}: a runtime would load it as a network config"
            );
        }
    }
}
