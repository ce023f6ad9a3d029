//! **OpenShift's real SCC admission** for tests: a kube-apiserver of the test's own running the real
//! platform's OpenShift-fork binary in OpenShift mode (`openshift/kube-apiserver-openshift`: OpenShift's
//! admission chain with the real `security.openshift.io/SecurityContextConstraint` plugin), with
//! OpenShift's SCC CRD, its default SCCs and the `restricted-v2` binding to `system:authenticated`
//! applied. Without the platform the case is reported not run ([`crate::platform::Platform`]).
//!
//! [`uid_range_annotations`] and [`restricted_service_account`] give what the SCC admission judges
//! by: a namespace with OpenShift's uid-range annotations and a ServiceAccount only `restricted-v2`
//! admits (every SCC but that one is "not usable by user or serviceaccount" for it).

use std::path::Path;

use crate::platform::{Platform, APISERVER};
use crate::{Cluster, DedicatedTestbed};

/// The drop-in apiserver command in the platform's `openshift/` folder.
const COMMAND: &str = "kube-apiserver-openshift";
/// The SCC CRD, applied (and Established) before the SCCs themselves.
const SCC_CRD_FILE: &str = "00-scc-crd.yaml";
const SCC_CRD: &str = "securitycontextconstraints.security.openshift.io";
/// The annotation the SCC admission's MustRunAs groups and SELinux strategies read.
pub const SUPPLEMENTAL_GROUPS_ANNOTATION: &str = "openshift.io/sa.scc.supplemental-groups";
pub const MCS_ANNOTATION: &str = "openshift.io/sa.scc.mcs";

/// A kube-apiserver in OpenShift mode on a testbed of its own (etcd included); stopped when dropped.
/// Derefs to its [`Cluster`].
pub struct OpenShiftApiserver {
    bed: DedicatedTestbed,
}

impl OpenShiftApiserver {
    /// Starts one from the real platform, or `None` after reporting `case` as not run (no platform).
    pub fn or_not_run(case: &str) -> Option<Self> {
        Platform::or_not_run(case).map(|p| Self::up(&p))
    }

    /// Starts the platform's apiserver in OpenShift mode and applies OpenShift's SCC manifests.
    pub fn up(platform: &Platform) -> Self {
        let binary = platform.binary(APISERVER);
        let openshift = platform.openshift_dir();
        let command = openshift.join(COMMAND);
        let bed = DedicatedTestbed::up_with("openshift", |dir| {
            vec![
                ("OPENSHIFT_APISERVER_BIN", binary),
                ("LINKERD_MULTUS_APISERVER", command),
                // Its generated KubeAPIServerConfig lives and goes with the testbed's state.
                ("OPENSHIFT_CONFIG_DIR", dir.join("openshift-config")),
            ]
        });
        apply_manifests(&bed, &openshift.join("manifests"));
        Self { bed }
    }

    /// The testbed's apiserver log (what its admission chain said).
    pub fn log(&self) -> std::path::PathBuf {
        self.bed.dir().join("apiserver.log")
    }
}

/// The same binary as a plain kube-apiserver (no OpenShift admission) on a testbed of its own: where a
/// comparison runs a stand-in beside the real thing on the same server version.
pub fn plain_apiserver(platform: &Platform) -> DedicatedTestbed {
    let binary = platform.binary(APISERVER);
    DedicatedTestbed::up_with("plain-1.35", |_| vec![("LINKERD_MULTUS_APISERVER", binary)])
}

impl std::ops::Deref for OpenShiftApiserver {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.bed
    }
}

/// The SCC CRD first, until Established, then every manifest (the SCCs, restricted-v2's role and
/// binding).
fn apply_manifests(cluster: &Cluster, manifests: &Path) {
    let path = |p: &Path| p.to_str().expect("a UTF-8 platform path").to_string();
    cluster.kubectl_ok(&["apply", "-f", &path(&manifests.join(SCC_CRD_FILE))]);
    cluster.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{SCC_CRD}"),
        "--timeout=30s",
    ]);
    cluster.kubectl_ok(&["apply", "-f", &path(manifests)]);
}

/// The annotations OpenShift's namespace controller gives a project, for the uid range
/// `<first>/<size>` (groups from the same range, a fixed MCS level).
pub fn uid_range_annotations(range: &str) -> Vec<(String, String)> {
    vec![
        (
            vocab::OPENSHIFT_UID_RANGE_ANNOTATION.to_string(),
            range.to_string(),
        ),
        (
            SUPPLEMENTAL_GROUPS_ANNOTATION.to_string(),
            range.to_string(),
        ),
        (MCS_ANNOTATION.to_string(), "s0:c26,c5".to_string()),
    ]
}

/// ServiceAccount `name` in `namespace` on `cluster`, allowed to create, get and delete pods there
/// and nothing else: on an OpenShift apiserver only `restricted-v2` (bound to every authenticated
/// user) admits its pods. Returns the kubectl flags that act as it (impersonation with the groups a
/// ServiceAccount's token carries).
pub fn restricted_service_account(cluster: &Cluster, namespace: &str, name: &str) -> Vec<String> {
    let ns = ["-n", namespace];
    let run = |args: &[&str]| cluster.kubectl_ok(&[&ns[..], args].concat());
    run(&["create", "serviceaccount", name]);
    run(&[
        "create",
        "role",
        name,
        "--verb=create,get,delete",
        "--resource=pods",
    ]);
    run(&[
        "create",
        "rolebinding",
        name,
        &format!("--role={name}"),
        &format!("--serviceaccount={namespace}:{name}"),
    ]);
    vec![
        format!("--as=system:serviceaccount:{namespace}:{name}"),
        "--as-group=system:serviceaccounts".to_string(),
        format!("--as-group=system:serviceaccounts:{namespace}"),
        "--as-group=system:authenticated".to_string(),
    ]
}
