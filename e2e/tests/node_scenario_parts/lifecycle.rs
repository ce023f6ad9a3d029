//! The lifecycle drill of the node scenario (issues 33 and 40): the product is in every pod's path,
//! so each of `helm upgrade` (a rollout of the installer while pods are created), `helm rollback`, a
//! force-deleted installer pod, the plugin cut off from the apiserver for a minute (aux-chain mode),
//! `helm uninstall`, a node reboot after it and a reinstall must leave every pod it touches able to
//! start: a plain and a meshed pod of an enabled namespace, a pod of an `openshift-*` namespace, and
//! in aux-chain mode (where linkerd-cni runs for every pod) a pod of a namespace that is not enabled.
//! A meshed pod that cannot get its rules is held by its linkerd-network-validator (exit 95), never
//! runs unredirected, and is restarted by repair once the product is back. Run once per attach mode,
//! on the release the scenario has installed in that mode.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use linkerd_multus_e2e::node::Node;
use linkerd_multus_e2e::{unique_name, wait_for_explained};
use serde_json::{json, Value};

use super::*;

/// How long a plain pod may take to be Ready after `helm uninstall` returned, or after the node is
/// back from a reboot (the bound).
const AFTER_UNINSTALL: Duration = Duration::from_secs(60);
/// Pods created during a rollout, one every [`CREATE_EVERY`], spread over the drill's targets: at
/// least [`PODS_PER_ROLLOUT`], and on until the action (the rollout awaited) has ended, so the window
/// between the old installer's exit and the new one's install is always covered (a fixed six pods
/// could all be created before the old installer was even stopped).
const PODS_PER_ROLLOUT: usize = 6;
const CREATE_EVERY: Duration = Duration::from_millis(700);
/// How long a force-deleted installer's replacement is kept from starting.
const HELD_BACK_FOR: Duration = Duration::from_secs(15);
/// An image the node does not have (pods use `imagePullPolicy: Never`): the held-back replacement.
const HELD_BACK_IMAGE: &str = "localhost/linkerd-multus/held-back:none";
/// A bound on the pods of one step, should an action hang (it then fails on its own).
const MAX_PODS_PER_ROLLOUT: usize = 120;
/// How long the plugin is cut off from the apiserver (the minute).
const CUT_FOR: Duration = Duration::from_secs(60);
/// The label of every object the drill creates, so each step removes its own.
const DRILL: &str = "linkerd-multus-test/drill";
/// Repair evicts at once and every 10 s; the replacement must then start and pass its validator.
const REPAIRED_WITHIN: Duration = Duration::from_secs(240);

/// What the drill needs of the scenario: the node, the release's install settings for this mode, and
/// the files the installer writes on the node in this mode.
pub struct Lifecycle<'a> {
    pub node: &'a Node,
    /// `--set` values the release was installed or upgraded with on top of [`values`].
    pub sets: Vec<String>,
    /// linkerd-cni's file in Multus' auxiliary chain (aux-chain mode), else `None`.
    pub chain_file: Option<PathBuf>,
    /// A short name of the mode for messages and namespace names.
    pub mode: &'static str,
    /// The scenario's enabled namespace (its NAD in nad mode, its meshed Deployment, the admission
    /// stand-ins that inject and admit pods labelled [`ADMITTED_AS_ON_OPENSHIFT`]).
    pub enabled: &'a str,
    /// Reboots the node as this mode's Multus needs it (aux-chain mode: the cluster network's config
    /// written back into /run by the boot).
    pub reboot: fn(&Node),
}

/// A pod the drill asserts on: plain (must be Ready) or meshed (must be Ready with its validator
/// passed, or held by it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Plain,
    Meshed,
}

/// The namespaces whose pods the drill creates and watches.
struct Targets {
    /// `(namespace, kind)`, the enabled namespace's plain and meshed first.
    pods: Vec<(String, Kind)>,
}

impl Targets {
    fn namespaces(&self) -> Vec<&str> {
        let mut all: Vec<&str> = self.pods.iter().map(|(ns, _)| ns.as_str()).collect();
        all.dedup();
        all
    }

    /// `FailedCreatePodSandBox` Events in every target namespace, with their repeats.
    fn sandbox_failures(&self, node: &Node) -> Vec<(String, i64)> {
        self.namespaces()
            .into_iter()
            .map(|ns| (ns.to_string(), sandbox_failures(node, ns)))
            .collect()
    }
}

impl Lifecycle<'_> {
    /// upgrade → rollback → force-deleted installer pod → uninstall → reboot → reinstall.
    pub fn run(&self, cleanup: &mut Cleanup) {
        self.upgrade_and_rollback(cleanup);
        self.uninstall_and_reinstall(cleanup);
    }

    /// The pods this mode's drill asserts on: the enabled namespace's plain and meshed pods, a pod of
    /// an `openshift-*` namespace, and in aux-chain mode a pod of a namespace that is not enabled.
    fn targets(&self, cleanup: &mut Cleanup) -> Targets {
        let mut pods = vec![
            (self.enabled.to_string(), Kind::Plain),
            (self.enabled.to_string(), Kind::Meshed),
            (
                create_namespace(self.node, cleanup, &format!("openshift-lc-{}", self.mode)),
                Kind::Plain,
            ),
        ];
        if self.chain_file.is_some() {
            pods.push((
                create_namespace(self.node, cleanup, &format!("lc-{}", self.mode)),
                Kind::Plain,
            ));
        }
        Targets { pods }
    }

    /// `helm upgrade` (a value of the installer's pod changed, so its DaemonSet rolls), `helm
    /// rollback` and a force-deleted installer pod, each while pods of every target are created.
    pub fn upgrade_and_rollback(&self, cleanup: &mut Cleanup) {
        let targets = self.targets(cleanup);
        self.while_creating_pods(&targets, "helm upgrade (the installer rolls)", || {
            helm_upgrade(self.node, &["cni.logLevel=debug"])
        });
        wait_daemonset_ready(self.node, CNI_NS, CNI_DAEMONSET);
        self.while_creating_pods(&targets, "helm rollback", || {
            self.node
                .helm_ok(&["rollback", RELEASE, "-n", RELEASE_NS, "--wait"]);
        });
        wait_daemonset_ready(self.node, CNI_NS, CNI_DAEMONSET);
        self.while_creating_pods(&targets, "the installer pod force-deleted", || {
            force_delete_installer_holding_back_its_replacement(self.node)
        });
    }

    /// `helm uninstall` leaves nothing in the pods' path, also across a node reboot; the same install
    /// afterwards works and repairs the meshed pods the reboot left without rules.
    pub fn uninstall_and_reinstall(&self, cleanup: &mut Cleanup) {
        let mode = self.mode;
        let targets = self.targets(cleanup);
        let with_plain = step(
            &format!("{mode}: plain deployments before uninstall"),
            || self.plain_deployments_before_uninstall(&targets),
        );
        step(
            &format!("{mode}: uninstall leaves nothing in the path"),
            || self.uninstall_leaves_nothing_in_the_path(cleanup),
        );
        let held = step(&format!("{mode}: reboot after uninstall"), || {
            self.reboot_after_uninstall(&targets, &with_plain)
        });
        step(&format!("{mode}: reinstall"), || self.reinstall());
        step(&format!("{mode}: repaired after reinstall"), || {
            self.repaired_after_reinstall(&held)
        });
        step(&format!("{mode}: delete drill objects"), || {
            delete_drill_objects(self.node)
        });
    }

    /// Runs `action` while [`PODS_PER_ROLLOUT`] pods are created, one per target in turn: every one
    /// Running and Ready (a meshed one with its validator's check passed), and no
    /// `FailedCreatePodSandBox` in any target namespace meanwhile.
    fn while_creating_pods(&self, targets: &Targets, what: &str, action: impl FnOnce() + Send) {
        step(
            &format!("{}: {what} while creating pods", self.mode),
            || self.creating_pods_while(targets, what, action),
        );
    }

    fn creating_pods_while(&self, targets: &Targets, what: &str, action: impl FnOnce() + Send) {
        let node = self.node;
        let before = targets.sandbox_failures(node);
        let start = Instant::now();
        let created: Vec<(String, String, Kind)> = std::thread::scope(|s| {
            let acting = s.spawn(action);
            let mut created = vec![];
            while created.len() < PODS_PER_ROLLOUT
                || (!acting.is_finished() && created.len() < MAX_PODS_PER_ROLLOUT)
            {
                let (ns, kind) = &targets.pods[created.len() % targets.pods.len()];
                let name = unique_name("p");
                apply(node, &drill_pod(node, ns, &name, *kind));
                std::thread::sleep(CREATE_EVERY);
                created.push((ns.clone(), name, *kind));
            }
            acting
                .join()
                .unwrap_or_else(|_| panic!("{what} failed (see above)"));
            created
        });
        for (ns, name, kind) in &created {
            wait_ready(node, ns, name, READY_WITHIN);
            if *kind == Kind::Meshed {
                assert!(
                    validator_passed(node, ns, name),
                    "{}: during {what} the meshed pod {ns}/{name} runs redirected",
                    self.mode
                );
            }
        }
        let failed = failures_since(node, targets, &before);
        eprintln!(
            "{}: {what} while creating {} pods ({:?}) -> all Ready in {:?}, failed sandboxes {failed:?}",
            self.mode,
            created.len(),
            created.iter().map(|(ns, _, k)| (ns.as_str(), *k)).collect::<Vec<_>>(),
            start.elapsed()
        );
        assert!(
            failed.is_empty(),
            "{}: no sandbox fails during {what}: {failed:?}",
            self.mode
        );
        delete_drill_objects(node);
    }

    /// The apiserver unreachable for [`CUT_FOR`] from the node's pods and processes (aux-chain mode:
    /// linkerd-cni runs for every pod): packets to the address the plugin's kubeconfig names (the
    /// apiserver's Service) are dropped in the node's network namespace, for the plugin and for the
    /// operator and installer pods alike, while the kubelet and the test still reach the apiserver at its
    /// own address (so pods are still created and run). Pods created meanwhile: every plain one (not
    /// enabled, enabled, `openshift-*`) starts with no failed sandbox; a meshed one is held by its
    /// validator (95) and never runs; once the apiserver can be reached again repair restarts it,
    /// redirected.
    pub fn apiserver_unreachable(&self, cleanup: &mut Cleanup) {
        let node = self.node;
        let targets = self.targets(cleanup);
        let before = targets.sandbox_failures(node);
        let cut = ServiceCut::new(node);
        let start = Instant::now();
        let mut plain = vec![];
        // The enabled namespace's last: its pods wait for the plugin's lookup (its attempts), the
        // others are passed through at once by the node's view of the enabled namespaces.
        for (ns, kind) in targets.pods.iter().rev() {
            match kind {
                Kind::Plain => {
                    let name = unique_name("p");
                    apply(node, &drill_pod(node, ns, &name, Kind::Plain));
                    plain.push((ns.clone(), name));
                }
                Kind::Meshed => apply(node, &drill_deployment(node, ns, "lc-meshed", Kind::Meshed)),
            }
        }
        for (ns, name) in &plain {
            wait_ready(node, ns, name, CUT_FOR.saturating_sub(start.elapsed()));
            eprintln!(
                "{}: apiserver unreachable -> plain pod {ns}/{name} Ready {:?} after the cut began",
                self.mode,
                start.elapsed()
            );
        }
        let held = wait_for_explained(
            "the meshed pod created while the apiserver is unreachable is held by its validator (95)",
            CUT_FOR.saturating_sub(start.elapsed()),
            || {
                meshed_drill_pods(node, self.enabled)
                    .into_iter()
                    .find(|p| validator_exit(p) == Some(95))
            },
            || node.describe(self.enabled, "pods"),
        );
        assert_never_ran(
            &held,
            None,
            "the meshed pod created while the apiserver was unreachable",
        );
        let failed = failures_since(node, &targets, &before);
        assert!(
            failed.is_empty(),
            "{}: no sandbox fails while the apiserver is unreachable: {failed:?}",
            self.mode
        );
        std::thread::sleep(CUT_FOR.saturating_sub(start.elapsed()));
        drop(cut);
        let back = Instant::now();
        self.wait_meshed_repaired(&name_of(&held), "the apiserver is reachable again");
        eprintln!(
            "{}: apiserver unreachable for {CUT_FOR:?}: plain pods started, the meshed pod held (95) \
             and repaired {:?} after the cut ended",
            self.mode,
            back.elapsed()
        );
        delete_drill_objects(node);
    }

    /// A plain Deployment in every target namespace, Ready (in nad mode the enabled namespace's carries
    /// the NAD, so linkerd-cni runs for it); the meshed Deployment the scenario made is Ready too.
    /// Returns the namespaces with a plain Deployment.
    fn plain_deployments_before_uninstall(&self, targets: &Targets) -> Vec<String> {
        let node = self.node;
        let mut namespaces = vec![];
        for ns in targets.namespaces() {
            apply(node, &drill_deployment(node, ns, "lc-plain", Kind::Plain));
            namespaces.push(ns.to_string());
        }
        for ns in &namespaces {
            wait_deployment_ready(node, ns, "lc-plain");
        }
        wait_deployment_ready(node, self.enabled, "meshed");
        if self.chain_file.is_none() {
            let pod = wait_pod_running(node, self.enabled, "app=lc-plain");
            let networks = pod["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION]
                .as_str()
                .unwrap_or_default();
            assert!(
                networks.contains("linkerd-cni"),
                "nad mode: the enabled namespace's plain pod is attached (linkerd-cni runs for it): {networks:?}"
            );
        }
        namespaces
    }

    /// `helm uninstall`: within [`AFTER_UNINSTALL`] a plain pod in a namespace created after it is
    /// Ready with no failed sandbox, and the installer left none of its files in the pods' path.
    fn uninstall_leaves_nothing_in_the_path(&self, cleanup: &mut Cleanup) {
        let node = self.node;
        node.helm_ok(&["uninstall", RELEASE, "-n", RELEASE_NS, "--wait"]);
        let uninstalled = Instant::now();
        let ns = create_namespace(node, cleanup, &format!("after-uninstall-{}", self.mode));
        let name = "p1";
        apply(node, &plain_pod(node, &ns, name));
        wait_ready(
            node,
            &ns,
            name,
            AFTER_UNINSTALL.saturating_sub(uninstalled.elapsed()),
        );
        eprintln!(
            "{}: helm uninstall -> a plain pod in a new namespace Ready in {:?}",
            self.mode,
            uninstalled.elapsed()
        );
        assert_eq!(
            sandbox_failures(node, &ns),
            0,
            "{}: no failed sandbox after uninstall: {}",
            self.mode,
            node.describe(&ns, "pods")
        );
        wait_for_explained(
            "the installer pods are gone",
            READY_WITHIN,
            || installer_pods(node).is_empty().then_some(()),
            || node.describe(CNI_NS, "pods"),
        );
        let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
        let left: Vec<_> = self
            .chain_file
            .iter()
            .chain([&kubeconfig])
            .filter(|f| f.exists())
            .collect();
        assert!(
            left.is_empty(),
            "{}: helm uninstall leaves none of the installer's files in the pods' path: {left:?}",
            self.mode
        );
    }

    /// A reboot after `helm uninstall`: every pod gets a new sandbox through what the uninstall left
    /// (nad mode: the NADs and the plugin, without its kubeconfig). Every plain pod is Ready within
    /// [`AFTER_UNINSTALL`] with no failed sandbox; every meshed pod is held by its validator (95) and
    /// never runs unredirected.
    /// Returns the names of the meshed pods held.
    fn reboot_after_uninstall(&self, targets: &Targets, with_plain: &[String]) -> Vec<String> {
        let node = self.node;
        let before = targets.sandbox_failures(node);
        let start = Instant::now();
        let rebooted = Timestamp::now();
        (self.reboot)(node);
        let back = Instant::now();
        eprintln!(
            "{}: reboot after uninstall -> node Ready in {:?}",
            self.mode,
            start.elapsed()
        );
        for ns in with_plain {
            wait_for_explained(
                &format!("{ns}'s plain pod Ready again after the reboot, in a new sandbox"),
                AFTER_UNINSTALL,
                || {
                    let pod = running_pod(node, ns, "app=lc-plain")?;
                    ready_since(&pod, rebooted).then_some(())
                },
                || node.describe(ns, "pods"),
            );
        }
        eprintln!(
            "{}: reboot after uninstall -> every plain pod Ready {:?} after the node",
            self.mode,
            back.elapsed()
        );
        let held = wait_for_explained(
            "every meshed pod held by its validator (95) after the reboot",
            READY_WITHIN,
            || {
                let pods = meshed_pods_of(node, self.enabled, "app=meshed");
                (!pods.is_empty() && pods.iter().all(|p| validator_exit(p) == Some(95)))
                    .then_some(pods)
            },
            || node.describe(self.enabled, "pods"),
        );
        for pod in &held {
            assert_never_ran(
                pod,
                Some(rebooted),
                "a meshed pod after uninstall and reboot",
            );
        }
        let failed = failures_since(node, targets, &before);
        assert!(
            failed.is_empty(),
            "{}: no sandbox fails after uninstall and reboot: {failed:?}",
            self.mode
        );
        eprintln!(
            "{}: reboot after uninstall -> 0 failed sandboxes, {} meshed pods held (95)",
            self.mode,
            held.len()
        );
        held.iter().map(name_of).collect()
    }

    /// The same install again works: the operator and the installer are Ready, and the installer's
    /// files are back.
    fn reinstall(&self) {
        let node = self.node;
        let sets: Vec<&str> = self.sets.iter().map(String::as_str).collect();
        let start = Instant::now();
        helm_install(node, &sets);
        wait_deployment_ready(node, RELEASE_NS, OPERATOR);
        wait_daemonset_ready(node, CNI_NS, CNI_DAEMONSET);
        eprintln!(
            "{}: reinstall -> operator and installer Ready in {:?}",
            self.mode,
            start.elapsed()
        );
        if let Some(file) = &self.chain_file {
            assert!(file.is_file(), "{}: the chain file is back", self.mode);
        }
        let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
        assert!(
            kubeconfig.is_file(),
            "{}: the kubeconfig is back",
            self.mode
        );
    }

    /// After the reinstall, repair restarts the meshed pods the reboot left `held` (their names, taken
    /// then: pods created since, repair's replacements, may not be Ready yet but are not held): each
    /// gone, every meshed pod of the namespace Ready and redirected.
    fn repaired_after_reinstall(&self, held: &[String]) {
        for name in held {
            self.wait_meshed_repaired(name, "the reinstall");
        }
        wait_deployment_ready(self.node, self.enabled, "meshed");
    }

    /// Pod `held` (held by its validator) is replaced by repair: gone, and every meshed pod of its
    /// namespace Ready with its validator's check passed.
    fn wait_meshed_repaired(&self, held: &str, after: &str) {
        let node = self.node;
        let ns = self.enabled;
        let start = Instant::now();
        wait_for_explained(
            &format!(
                "repair replaced the held pod {ns}/{held} after {after}, and it runs redirected"
            ),
            REPAIRED_WITHIN,
            || {
                let pods = meshed_pods_of(node, ns, "");
                (!pods.iter().any(|p| name_of(p) == held)
                    && !pods.is_empty()
                    && pods.iter().all(is_ready))
                .then_some(())
            },
            || node.describe(ns, "pods"),
        );
        for pod in meshed_pods_of(node, ns, "") {
            let name = name_of(&pod);
            assert!(
                validator_passed(node, ns, &name),
                "{}: after {after} the meshed pod {ns}/{name} runs redirected",
                self.mode
            );
        }
        eprintln!(
            "{}: after {after}: {ns}/{held} replaced by repair, every meshed pod Ready in {:?}",
            self.mode,
            start.elapsed()
        );
    }
}

/// Packets to the apiserver's Service (the address the plugin's kubeconfig names) dropped in the node's
/// network namespace, in the `raw` table (before kube-proxy's DNAT): OUTPUT for the node's own processes
/// (the plugin, host-network pods), PREROUTING for the pods' (the operator, the installer). The kubelet
/// and the test reach the apiserver at its own address, untouched. Removed when dropped.
struct ServiceCut {
    netns: String,
    /// The match and target, after the chain.
    rule: Vec<String>,
}

impl ServiceCut {
    fn new(node: &Node) -> Self {
        let kubeconfig = node.cni_dir().join("net.d").join(KUBECONFIG_NAME);
        let text = std::fs::read_to_string(&kubeconfig)
            .unwrap_or_else(|e| panic!("the plugin's kubeconfig {}: {e}", kubeconfig.display()));
        let server = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("server:"))
            .map(|s| s.trim().trim_matches('"').to_string())
            .unwrap_or_else(|| panic!("no server in the plugin's kubeconfig: {text}"));
        let authority = server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let (host, port) = authority
            .rsplit_once(':')
            .map(|(h, p)| (h.to_string(), p.to_string()))
            .unwrap_or((authority.clone(), "443".into()));
        let holder = std::fs::read_to_string(node.dir().join("holder.pid")).expect("holder.pid");
        let cut = Self {
            netns: format!("--net=/proc/{}/ns/net", holder.trim()),
            rule: ["-d", &host, "-p", "tcp", "--dport", &port, "-j", "DROP"]
                .map(str::to_string)
                .to_vec(),
        };
        for chain in CUT_CHAINS {
            cut.iptables("-I", chain);
        }
        eprintln!("the node's route to the apiserver's Service {server} cut");
        cut
    }

    fn iptables(&self, op: &str, chain: &str) {
        let out = Command::new("nsenter")
            .args([
                self.netns.as_str(),
                "iptables",
                "-w",
                "-t",
                "raw",
                op,
                chain,
            ])
            .args(&self.rule)
            .output()
            .expect("nsenter iptables");
        assert!(
            out.status.success(),
            "iptables {op} {chain} {:?}: {}",
            self.rule,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The node's own processes, and its pods.
const CUT_CHAINS: [&str; 2] = ["OUTPUT", "PREROUTING"];

impl Drop for ServiceCut {
    fn drop(&mut self) {
        for chain in CUT_CHAINS {
            self.iptables("-D", chain);
        }
        eprintln!("the node's route to the apiserver's Service restored");
    }
}

/// Force-deletes the installer pod and holds its replacement back for [`HELD_BACK_FOR`] (its image
/// cannot start: the DaemonSet set to OnDelete with another image), then lets it come. Without the
/// hold the replacement is created at once and installs within seconds, and the pods created
/// meanwhile never met a node without an installer: the step passed with the installer removing its
/// files on every SIGTERM (seen on the v1.20 node, both modes). With the hold it fails so, and it
/// failed in aux mode while the force-deleted installer took its refused pod-bound token for an
/// uninstall.
fn force_delete_installer_holding_back_its_replacement(node: &Node) {
    let ds = node
        .get_json(&["-n", CNI_NS, "daemonset", CNI_DAEMONSET])
        .expect("the installer's DaemonSet");
    let container = &ds["spec"]["template"]["spec"]["containers"][0];
    let (name, image) = (container["name"].clone(), container["image"].clone());
    let strategy = ds["spec"]["updateStrategy"].clone();
    let patch = |patch: Value| patch_installer(node, "strategic", &patch);
    patch(json!({"spec": {
        "updateStrategy": {"type": "OnDelete", "rollingUpdate": null},
        "template": {"spec": {"containers": [{"name": name, "image": HELD_BACK_IMAGE}]}},
    }}));
    let old = installer_pods(node)
        .pop()
        .expect("an installer pod to delete");
    node.kubectl_ok(&[
        "-n",
        CNI_NS,
        "delete",
        "pod",
        &old,
        "--force",
        "--grace-period=0",
    ]);
    std::thread::sleep(HELD_BACK_FOR);
    patch(json!({"spec": {
        "updateStrategy": strategy,
        "template": {"spec": {"containers": [{"name": name, "image": image}]}},
    }}));
    // The held-back pod is replaced by the rollout back; deleting it saves the wait.
    for pod in installer_pods(node) {
        node.kubectl(&["-n", CNI_NS, "delete", "pod", &pod, "--wait=false"]);
    }
    wait_for_explained(
        "the installer is back and Ready after the held-back replacement",
        READY_WITHIN,
        || {
            let d = node.get_json(&["-n", CNI_NS, "daemonset", CNI_DAEMONSET])?;
            let list = node.get_json(&["-n", CNI_NS, "pods", "-l", INSTALLER_SELECTOR])?;
            let ready = list["items"].as_array()?.iter().any(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && p["spec"]["containers"][0]["image"] == image
                    && is_ready(p)
            });
            (ready
                && count(&d, "/status/numberReady") == count(&d, "/status/desiredNumberScheduled"))
            .then_some(())
        },
        || node.describe(CNI_NS, "pods"),
    );
}

/// A pod of the drill: plain (the test image's app only) or meshed (labelled for the admission
/// stand-ins, which inject the proxy and the validator and admit it as OpenShift would).
fn drill_pod(node: &Node, ns: &str, name: &str, kind: Kind) -> Value {
    let mut pod = plain_pod(node, ns, name);
    pod["metadata"]["labels"] = pod_labels(kind);
    if kind == Kind::Meshed {
        pod["metadata"]["annotations"] = json!({"linkerd.io/inject": "enabled"});
    }
    pod
}

fn pod_labels(kind: Kind) -> Value {
    match kind {
        Kind::Plain => json!({"app": "lc-plain", (DRILL): "true"}),
        Kind::Meshed => {
            json!({"app": "lc-meshed", (DRILL): "true", (ADMITTED_AS_ON_OPENSHIFT): "true"})
        }
    }
}

/// A one-replica Deployment `name` of the drill whose pods are [`drill_pod`]s of `kind`.
fn drill_deployment(node: &Node, ns: &str, name: &str, kind: Kind) -> Value {
    let pod = drill_pod(node, ns, "unused", kind);
    let app = pod["metadata"]["labels"]["app"].clone();
    let mut metadata = pod["metadata"].clone();
    if let Some(m) = metadata.as_object_mut() {
        m.remove("name");
        m.remove("namespace");
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {(DRILL): "true"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": metadata, "spec": pod["spec"]},
        },
    })
}

/// Removes what the drill created from the API at once, so later steps count only their own pods: in
/// every namespace (the label is the drill's alone), the Deployments, then their ReplicaSets (they carry
/// the pods' labels), then the pods, each forced, so nothing is left to recreate a pod and the kubelet
/// tears the pods down in the background. Waiting for their graceful end took 22-56 s a step on the
/// v1.20 node (it releases a deleted pod's object only at its next status sync).
fn delete_drill_objects(node: &Node) {
    let selector = format!("{DRILL}=true");
    let start = Instant::now();
    node.kubectl_ok(&[
        "delete",
        "deployments,replicasets,pods",
        "-l",
        &selector,
        "--all-namespaces",
        "--ignore-not-found",
        "--force",
        "--grace-period=0",
        "--timeout=120s",
    ]);
    eprintln!("drill objects deleted in {:?}", start.elapsed());
}

/// The `FailedCreatePodSandBox` counts that grew since `before`, by namespace.
fn failures_since(node: &Node, targets: &Targets, before: &[(String, i64)]) -> Vec<(String, i64)> {
    targets
        .sandbox_failures(node)
        .into_iter()
        .zip(before)
        .map(|((ns, now), (_, then))| (ns, now - then))
        .filter(|(_, grew)| *grew > 0)
        .collect()
}

/// The pods of `ns` matching `selector` (all with "") that carry Linkerd's network validator, not on
/// their way out.
pub fn meshed_pods_of(node: &Node, ns: &str, selector: &str) -> Vec<Value> {
    let mut args = vec!["-n", ns, "pods"];
    if !selector.is_empty() {
        args.extend(["-l", selector]);
    }
    let list = node.get_json(&args).expect("pods");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["spec"]["initContainers"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["name"] == "linkerd-network-validator"))
        })
        .cloned()
        .collect()
}

/// The drill's own meshed pods in `ns`.
fn meshed_drill_pods(node: &Node, ns: &str) -> Vec<Value> {
    meshed_pods_of(node, ns, "app=lc-meshed")
}

/// The first pod of `ns` matching `selector` that is Running now, if any.
pub fn running_pod(node: &Node, ns: &str, selector: &str) -> Option<Value> {
    let list = node.get_json(&["-n", ns, "pods", "-l", selector])?;
    list["items"]
        .as_array()?
        .iter()
        .find(|p| p["metadata"]["deletionTimestamp"].is_null() && p["status"]["phase"] == "Running")
        .cloned()
}

/// Ready, with every container running since `since`: right after a reboot the API still shows the
/// status from before it (Running, Ready) until the kubelet has seen the pod again, so Ready alone
/// passed while the new sandbox was failing (seen with linkerd-cni's fail-open disabled: 0.35 s
/// after the node was back).
pub fn ready_since(pod: &Value, since: Timestamp) -> bool {
    let statuses = pod["status"]["containerStatuses"].as_array();
    is_ready(pod)
        && statuses.is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| started_since(&c["state"]["running"], Some(since)) == Some(true))
        })
}

/// Whether a container state (`running` or `terminated`) started at or after `since`: `None` when
/// the state holds no readable start; with no `since`, any start counts.
fn started_since(state: &Value, since: Option<Timestamp>) -> Option<bool> {
    let at = state["startedAt"].as_str()?.parse::<Timestamp>().ok()?;
    Some(since.is_none_or(|since| at.as_second() >= since.as_second()))
}

fn name_of(pod: &Value) -> String {
    pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The exit code of the pod's linkerd-network-validator's current or last run.
pub fn validator_exit(pod: &Value) -> Option<i64> {
    let status = pod["status"]["initContainerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == "linkerd-network-validator")?;
    ["state", "lastState"]
        .iter()
        .find_map(|s| status[s]["terminated"]["exitCode"].as_i64())
}

/// A meshed pod held by its validator never started its app or its proxy since `since` (the reboot
/// that gave it a new sandbox; `None`: ever): not Ready, no container of `spec.containers` running, and
/// none started at or after `since`. Containers killed by the reboot ran before it, redirected.
fn assert_never_ran(pod: &Value, since: Option<Timestamp>, what: &str) {
    assert!(!is_ready(pod), "{what} is not Ready: {}", pod["status"]);
    // A state without a readable start counts as having run: the assertion errs on failing.
    let ran_since = |state: &Value| {
        ["running", "terminated"]
            .iter()
            .any(|s| !state[s].is_null() && started_since(&state[s], since) != Some(false))
    };
    let ran: Vec<&Value> = pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            !c["state"]["running"].is_null() || ran_since(&c["state"]) || ran_since(&c["lastState"])
        })
        .collect();
    assert!(
        ran.is_empty(),
        "{what}: no container ran unredirected: {ran:?}"
    );
}

/// A pod of the test image's app only: no proxy, not meshed.
pub fn plain_pod(node: &Node, ns: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "plain"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "app", "image": image(node, "test"), "imagePullPolicy": "Never", "args": ["app"]}]},
    })
}

/// Waits until pod `ns/name` is Running and Ready, failing with its description after `within`.
pub fn wait_ready(node: &Node, ns: &str, name: &str, within: Duration) {
    wait_for_explained(
        &format!("pod {ns}/{name} Running and Ready"),
        within,
        || {
            let p = node.get_json(&["-n", ns, "pod", name])?;
            (p["status"]["phase"] == "Running" && is_ready(&p)).then_some(())
        },
        || node.describe(ns, &format!("pod/{name}")),
    );
}

/// The `FailedCreatePodSandBox` Events of `ns`, counted with their repeats.
pub fn sandbox_failures(node: &Node, ns: &str) -> i64 {
    events(
        node,
        ns,
        "FailedCreatePodSandBox",
        &["jsonpath={range .items[*]}{.count}{\"\\n\"}{end}"],
    )
    .lines()
    .map(|c| c.trim().parse::<i64>().unwrap_or(1))
    .sum()
}
