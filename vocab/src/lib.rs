//! The vocabulary every part of linkerd-multus shares: annotation and label keys, object names, default
//! ports, uids and paths. No other crate spells one of these strings; they import them from here, so a
//! key can never drift between the operator, the webhook and the CNI plugin.

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

/// Linkerd proxy configuration annotations (pod, falling back to namespace).
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
pub const DEFAULT_KUBECONFIG_NAME: &str = "ZZZ-linkerd-cni-kubeconfig";
pub const DEFAULT_CNI_KUBECONFIG: &str = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig";
pub const DEFAULT_CNI_NET_DIR: &str = "/etc/cni/net.d";
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";

/// Containers the CNI plugin looks for in a pod.
pub const PROXY_CONTAINER: &str = "linkerd-proxy";
pub const INIT_CONTAINER: &str = "linkerd-init";

pub const DEFAULT_PROXY_UID: i64 = 2102;
pub const DEFAULT_INBOUND_PROXY_PORT: u16 = 4143;
pub const DEFAULT_OUTBOUND_PROXY_PORT: u16 = 4140;

// === The operator process ===

/// The Go operator's webhook path, kept so existing webhook configurations keep working.
pub const WEBHOOK_PATH: &str = "/annotate-multus-v1-pod";
pub const DEFAULT_WEBHOOK_ADDR: &str = "0.0.0.0:9443";
pub const DEFAULT_ADMIN_ADDR: &str = "0.0.0.0:8081";
pub const DEFAULT_TLS_CERT_FILE: &str = "/etc/webhook/certs/tls.crt";
pub const DEFAULT_TLS_KEY_FILE: &str = "/etc/webhook/certs/tls.key";
pub const DEFAULT_LEASE_NAME: &str = "linkerd-multus-operator";
/// Reconciles in flight at once (each holds an apiserver connection; see `bench/RESULTS.md`).
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 16;

// === The CNI node installer (linkerd-cni-install) ===

/// Where a pod's service-account token and cluster CA are mounted (`token`, `ca.crt`).
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Placeholders Linkerd's `cni_network_config` template may hold; the installer fills them.
pub const PLACEHOLDER_KUBECONFIG_FILEPATH: &str = "__KUBECONFIG_FILEPATH__";
pub const PLACEHOLDER_LOG_LEVEL: &str = "__LOG_LEVEL__";
pub const PLACEHOLDER_SERVICE_HOST: &str = "__KUBERNETES_SERVICE_HOST__";
pub const PLACEHOLDER_SERVICE_PORT: &str = "__KUBERNETES_SERVICE_PORT__";
pub const PLACEHOLDER_SERVICEACCOUNT_TOKEN: &str = "__SERVICEACCOUNT_TOKEN__";

// === Webhook (appended by the webhook crate) ===

/// The Service in front of the webhook; the self-managed certificate is issued for its DNS names.
pub const DEFAULT_WEBHOOK_SERVICE_NAME: &str = "linkerd-multus-webhook";
