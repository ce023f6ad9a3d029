//! The Multus stand-in agrees with the real Multus (the thin plugin, v4.2.2 from the real platform):
//! one table of pods, NADs and node configs, each run through both as a runtime runs its CNI plugin
//! (ADD, then DEL, in a netns of the test's own), with Debian's bridge + host-local as the cluster
//! network and the project's `cni-recorder` and `linkerd-cni` as the delegates. Both must give the
//! same verdicts, the same refusal messages (what the kubelet's FailedCreatePodSandBox Event shows),
//! the same delegate calls (interface, cniVersion, CNI_ARGS, prevResult, config) and leave the
//! sandbox in the same state; every Event the real one posts on the pod, the stand-in posts too.
//! Where they differ, the stand-in is wrong.
//!
//! Without `LINKERD_MULTUS_PLATFORM` the table is reported not run. Pods and NADs are real objects
//! on the testbed's apiserver; everything Multus writes (cache, IPAM, chain configs) stays under the
//! case's temp dir, removed at its end with the bridge.

mod multus_agreement_parts;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_crds::{NetworkAttachmentDefinition, NetworkAttachmentDefinitionSpec};
use linkerd_multus_e2e::platform::Platform;
use linkerd_multus_e2e::pod_network::linkerd_cni_nad_config;
use linkerd_multus_e2e::{client, ensure_nad_crd, kubeconfig_path, unique_name, TestNamespace};
use multus_agreement_parts::{run, ClusterNet, Impl, Node, Outcome, Sandbox, Verdict, CHAIN};
use serde_json::{json, Value};

/// A delegate plugin of the table.
#[derive(Debug, Clone, Copy)]
enum Plugin {
    /// `cni-recorder`: records its calls, answers (standalone in a NAD, chained in the aux chain).
    Recorder {
        tag: &'static str,
        fail_on: Option<&'static str>,
    },
    /// The project's linkerd-cni, as its NAD holds it.
    LinkerdCni,
}

const fn rec(tag: &'static str) -> Plugin {
    Plugin::Recorder { tag, fail_on: None }
}

const fn failing(tag: &'static str) -> Plugin {
    Plugin::Recorder {
        tag,
        fail_on: Some("ADD"),
    }
}

#[derive(Debug, Clone, Copy)]
struct Nad {
    /// In the second namespace (`{shared}`) instead of the pod's.
    shared: bool,
    name: &'static str,
    plugin: Plugin,
}

const fn own(name: &'static str, plugin: Plugin) -> Nad {
    Nad {
        shared: false,
        name,
        plugin,
    }
}

const fn shared(name: &'static str, plugin: Plugin) -> Nad {
    Nad {
        shared: true,
        name,
        plugin,
    }
}

/// What is deleted while the sandbox lives: the pod (the kubelet tears a deleted pod's sandbox down
/// after it is gone from the apiserver), its NADs (`helm uninstall`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    Nothing,
    Pod,
    Nads,
}

/// What the real Multus must do with a case (so the table also says what it is about).
#[derive(Debug, Clone, Copy)]
enum Expect {
    Added,
    /// Refused with a message containing this (`{ns}`, `{shared}` filled in).
    Refused(&'static str),
}

#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    /// The pod's networks annotation (`{shared}`: the second namespace); empty: none.
    networks: &'static str,
    meshed: bool,
    nads: &'static [Nad],
    /// `namespaceIsolation` on with these `globalNamespaces`.
    isolation: Option<&'static str>,
    cluster: ClusterNet,
    /// `auxiliaryCNIChainName` set, and the chain directory's files (`&[]`: an empty directory).
    chain: Option<&'static [(&'static str, Plugin)]>,
    /// Deleted between ADD and DEL.
    gone: Gone,
    expect: Expect,
}

const OPENSHIFT_GLOBAL: &str = "default,openshift-multus,openshift-sriov-network-operator";

const BASE: Case = Case {
    name: "",
    networks: "",
    meshed: true,
    nads: &[],
    isolation: Some(OPENSHIFT_GLOBAL),
    cluster: ClusterNet::Delegates,
    chain: None,
    gone: Gone::Nothing,
    expect: Expect::Added,
};

const CASES: &[Case] = &[
    Case {
        name: "a pod without networks gets the cluster network alone",
        meshed: false,
        ..BASE
    },
    Case {
        name: "linkerd-cni of the pod's namespace: net1, no prevResult, Multus' CNI_ARGS",
        networks: "linkerd-cni",
        nads: &[own("linkerd-cni", rec("nad"))],
        ..BASE
    },
    Case {
        name: "linkerd-cni itself from its NAD installs the pod's redirect",
        networks: "linkerd-cni",
        nads: &[own("linkerd-cni", Plugin::LinkerdCni)],
        ..BASE
    },
    Case {
        name: "the JSON form: an interface the pod names, then net2",
        networks: r#"[{"name":"linkerd-cni","interface":"lcni0"},{"name":"second"}]"#,
        nads: &[own("linkerd-cni", rec("nad")), own("second", rec("second"))],
        ..BASE
    },
    Case {
        name: "a networks annotation naming no DNS-1123 label",
        networks: "linkerd.cni",
        nads: &[own("linkerd.cni", rec("nad"))],
        expect: Expect::Refused(
            "error loading k8s delegates k8s args: parsePodNetworkAnnotation: \
             parsePodNetworkObjectName: Failed to parse: one or more items did not match",
        ),
        ..BASE
    },
    Case {
        name: "a networks annotation of broken JSON",
        networks: r#"[{"name": "linkerd-cni"]"#,
        expect: Expect::Refused("failed to parse pod Network Attachment Selection Annotation JSON"),
        ..BASE
    },
    Case {
        name: "an interface name too long",
        networks: "linkerd-cni@an-interface-name",
        nads: &[own("linkerd-cni", rec("nad"))],
        expect: Expect::Refused(
            "Failed to parse interface name: must be less than 15 chars and not contain '/' or \
             spaces. interface name 'an-interface-name'",
        ),
        ..BASE
    },
    Case {
        name: "a NAD that does not exist",
        networks: "linkerd-cni",
        expect: Expect::Refused(
            "cannot find a network-attachment-definition (linkerd-cni) in namespace ({ns})",
        ),
        ..BASE
    },
    Case {
        name: "isolation: a NAD of a namespace not among globalNamespaces",
        networks: "{shared}/linkerd-cni",
        nads: &[shared("linkerd-cni", rec("nad"))],
        expect: Expect::Refused(
            "GetNetworkDelegates: namespace isolation enabled, annotation violates \
                 permission, pod is in namespace {ns} but refers to target namespace {shared}",
        ),
        ..BASE
    },
    Case {
        name: "isolation: a NAD of a namespace among globalNamespaces (with a space)",
        networks: "{shared}/linkerd-cni",
        nads: &[shared("linkerd-cni", rec("nad"))],
        isolation: Some("default, {shared}"),
        ..BASE
    },
    Case {
        name: "no isolation: a NAD of any namespace",
        networks: "{shared}/linkerd-cni",
        nads: &[shared("linkerd-cni", rec("nad"))],
        isolation: None,
        ..BASE
    },
    Case {
        name: "the pod deleted before DEL: its delegates still get their DEL",
        networks: "linkerd-cni",
        nads: &[own("linkerd-cni", rec("nad"))],
        gone: Gone::Pod,
        ..BASE
    },
    Case {
        name: "the NAD deleted before DEL: the delegate still gets its DEL",
        networks: "linkerd-cni",
        nads: &[own("linkerd-cni", rec("nad"))],
        gone: Gone::Nads,
        ..BASE
    },
    Case {
        name: "a delegate that fails: what ran is rolled back",
        networks: "linkerd-cni,broken",
        nads: &[
            own("linkerd-cni", rec("nad")),
            own("broken", failing("broken")),
        ],
        expect: Expect::Refused("cni-recorder: failing ADD as told"),
        ..BASE
    },
    Case {
        name: "a delegate whose DEL fails: every delegate is still deleted",
        networks: "linkerd-cni,sticky",
        nads: &[
            own("linkerd-cni", rec("nad")),
            own(
                "sticky",
                Plugin::Recorder {
                    tag: "sticky",
                    fail_on: Some("DEL"),
                },
            ),
        ],
        ..BASE
    },
    Case {
        name: "aux chain: clusterNetwork not a path",
        chain: Some(&[]),
        expect: Expect::Refused("ClusterNetwork"),
        ..BASE
    },
    Case {
        name: "aux chain: an empty chain directory runs nothing",
        cluster: ClusterNet::File,
        chain: Some(&[]),
        ..BASE
    },
    Case {
        name: "aux chain: its plugin after the pod's NAD, behind passthru",
        networks: "linkerd-cni",
        nads: &[own("linkerd-cni", rec("nad"))],
        cluster: ClusterNet::File,
        chain: Some(&[("10-rec.conf", rec("chain"))]),
        ..BASE
    },
    Case {
        name: "aux chain: linkerd-cni's conf meshes a pod with no NAD; DEL's config",
        cluster: ClusterNet::File,
        chain: Some(&[("linkerd-cni.conf", Plugin::LinkerdCni)]),
        ..BASE
    },
    Case {
        name: "aux chain: the pod deleted before DEL",
        cluster: ClusterNet::File,
        chain: Some(&[("10-rec.conf", rec("chain"))]),
        gone: Gone::Pod,
        ..BASE
    },
    Case {
        name: "aux chain: a plugin that fails fails the pod",
        cluster: ClusterNet::File,
        chain: Some(&[
            ("10-ok.conf", rec("ok")),
            ("20-fails.conf", failing("fails")),
        ]),
        expect: Expect::Refused("cni-recorder: failing ADD as told"),
        ..BASE
    },
];

/// The plugin's config: in a NAD (`in_chain` false) with its own cniVersion and an answer of its own.
fn plugin_config(plugin: Plugin, log: &Path, in_chain: bool) -> Value {
    match plugin {
        Plugin::LinkerdCni => linkerd_cni_nad_config(&kubeconfig_path()),
        Plugin::Recorder { tag, fail_on } => {
            let mut c = json!({"type": "cni-recorder", "log": log, "tag": tag});
            if !in_chain {
                c["cniVersion"] = json!("0.4.0");
                c["standalone"] = json!(true);
            }
            if let Some(command) = fail_on {
                c["failOn"] = json!(command);
                // A name of its own, unlike the NAD's: which one Multus' message names.
                if !in_chain {
                    c["name"] = json!(format!("{tag}-net"));
                }
            }
            c
        }
    }
}

/// Removes the case's directory and bridge.
struct CaseDir {
    dir: PathBuf,
    bridge: String,
}

impl Drop for CaseDir {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An Event on the pod: type, reason, message.
type PodEvent = (String, String, String);

struct Ran {
    real: Outcome,
    stand_in: Outcome,
    /// The Events each posted on its pod (the real thin Multus loses some: it exits before they
    /// are sent).
    real_events: BTreeSet<PodEvent>,
    stand_in_events: BTreeSet<PodEvent>,
    logs: String,
    ns: String,
    shared: String,
}

async fn run_case(client: &Client, platform: &Platform, n: u32, case: &Case) -> Ran {
    let ns = TestNamespace::create(client, "mag").await;
    let other = TestNamespace::create(client, "mag-shared").await;
    let fill = |s: &str| s.replace("{ns}", &ns.name).replace("{shared}", &other.name);
    let pid = std::process::id();
    let dir = CaseDir {
        dir: std::env::temp_dir().join(unique_name("multus-agreement")),
        bridge: format!("lmag{:x}x{n}", pid % 0xffff),
    };
    std::fs::create_dir_all(&dir.dir).expect("case dir");
    let log = dir.dir.join("calls.log");
    let subnet_prefix = format!("10.{}.{}.", 200 + pid % 20, (pid / 20 + n * 7) % 250 + 1);

    let container_id = unique_name("ctr");

    let mut outcomes = Vec::new();
    let mut events = Vec::new();
    let mut logs = String::new();
    for imp in [Impl::Real, Impl::StandIn] {
        let node_dir = dir.dir.join(format!("{imp:?}").to_lowercase());
        let node = Node::new(imp, platform, node_dir, &dir.bridge, &subnet_prefix);
        let isolation = case.isolation.map(fill);
        let conf = node.conf(case.cluster, case.chain.is_some(), isolation.as_deref());
        if let Some(files) = case.chain {
            let chain_dir = node.net_d().join(CHAIN);
            std::fs::create_dir_all(&chain_dir).expect("chain dir");
            for (file, plugin) in files {
                let config = plugin_config(*plugin, &log, true);
                std::fs::write(chain_dir.join(file), config.to_string()).expect("chain conf");
            }
        }
        // The pod and NADs of each Multus' run: a case may delete them.
        let nads = create_nads(client, case, &log, [&ns.name, &other.name]).await;
        let uid = create_pod(client, &ns.name, &fill(case.networks), case.meshed).await;
        let sandbox = Sandbox::new(&container_id, &ns.name, "web", &uid);
        let between = || match case.gone {
            Gone::Nothing => {}
            Gone::Pod => delete(&["pod", "web", "-n", &ns.name]),
            Gone::Nads => {
                for (namespace, name) in &nads {
                    delete(&[NAD_RESOURCE, name, "-n", namespace]);
                }
            }
        };
        let started = std::time::Instant::now();
        let (outcome, stderr) = run(&node, &conf, &sandbox, &log, &uid, between);
        let took = started.elapsed().as_millis();
        eprintln!("{}: {imp:?} ADD+DEL in {took} ms", case.name);
        logs.push_str(&format!("--- {imp:?} ({took} ms)\n{stderr}\n"));
        outcomes.push(outcome);
        events.push(pod_events(client, &ns.name, &uid).await);
        delete(&["pod", "web", "-n", &ns.name]);
        for (namespace, name) in &nads {
            delete(&[NAD_RESOURCE, name, "-n", namespace]);
        }
    }
    let stand_in = outcomes.pop().expect("two outcomes");
    let real = outcomes.pop().expect("two outcomes");
    let stand_in_events = events.pop().expect("two event sets");
    let real_events = events.pop().expect("two event sets");
    Ran {
        real,
        stand_in,
        real_events,
        stand_in_events,
        logs,
        ns: ns.name.clone(),
        shared: other.name.clone(),
    }
}

/// The Events about the pod `uid` in `namespace`.
async fn pod_events(client: &Client, namespace: &str, uid: &str) -> BTreeSet<PodEvent> {
    let selector = format!("involvedObject.uid={uid}");
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().fields(&selector))
        .await
        .expect("list Events")
        .items
        .into_iter()
        .map(|e| {
            let s = |v: Option<String>| v.unwrap_or_default();
            (s(e.type_), s(e.reason), s(e.message))
        })
        .collect()
}

const NAD_RESOURCE: &str = "network-attachment-definitions.k8s.cni.cncf.io";

/// Deletes an object now, if it is there (kubectl: `between` runs between two Multus calls).
fn delete(what: &[&str]) {
    let mut args = vec!["delete", "--ignore-not-found", "--wait=false"];
    args.extend_from_slice(what);
    linkerd_multus_e2e::kubectl_ok(&args);
}

/// The case's NADs, in the pod's namespace or the second one (`namespaces`); `(namespace, name)` each.
async fn create_nads(
    client: &Client,
    case: &Case,
    log: &Path,
    namespaces: [&str; 2],
) -> Vec<(String, String)> {
    let mut created = Vec::new();
    for nad in case.nads {
        let namespace = namespaces[usize::from(nad.shared)];
        let config = plugin_config(nad.plugin, log, false);
        let object = NetworkAttachmentDefinition::new(
            nad.name,
            NetworkAttachmentDefinitionSpec {
                config: Some(config.to_string()),
            },
        );
        Api::<NetworkAttachmentDefinition>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &object)
            .await
            .expect("create NAD");
        created.push((namespace.to_string(), nad.name.to_string()));
    }
    created
}

/// The pod (Pending for ever on the bare apiserver: Multus only reads it); returns its uid.
async fn create_pod(client: &Client, namespace: &str, networks: &str, meshed: bool) -> String {
    let mut containers = vec![json!({"name": "app", "image": "example.com/app:1"})];
    if meshed {
        containers
            .push(json!({"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:stable"}));
    }
    let mut annotations = serde_json::Map::new();
    if !networks.is_empty() {
        annotations.insert(vocab::NETWORKS_ANNOTATION.into(), json!(networks));
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {"automountServiceAccountToken": false, "containers": containers}
    }))
    .expect("pod");
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    pod.metadata.uid.expect("a uid")
}

/// What is wrong with the real Multus' outcome against the case's expectation, if anything.
fn unexpected(case: &Case, real: &Outcome, fill: impl Fn(&str) -> String) -> Option<String> {
    match (case.expect, &real.add) {
        (Expect::Added, Verdict::Ok(_)) => None,
        (Expect::Refused(want), Verdict::Err { msg, .. }) if msg.contains(&fill(want)) => None,
        (want, got) => Some(format!("expected {want:?}, the real Multus: {got:?}")),
    }
}

#[tokio::test]
#[ignore = "needs root (netns) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn the_stand_in_refuses_and_delegates_as_the_real_multus() {
    let Some(platform) =
        Platform::or_not_run("Multus agreement: the stand-in against the real thin Multus")
    else {
        return;
    };
    ensure_nad_crd();
    let client = client().await;
    let mut failures = Vec::new();
    for (n, case) in CASES.iter().enumerate() {
        let ran = run_case(&client, &platform, n as u32, case).await;
        let fill = |s: &str| s.replace("{ns}", &ran.ns).replace("{shared}", &ran.shared);
        if let Some(why) = unexpected(case, &ran.real, fill) {
            failures.push(format!("{}: {why}\n{}", case.name, ran.logs));
        }
        let missed: Vec<_> = ran.real_events.difference(&ran.stand_in_events).collect();
        if !missed.is_empty() {
            failures.push(format!(
                "{}: the stand-in posts no such Event as the real Multus: {missed:?} (it posted {:?})",
                case.name, ran.stand_in_events
            ));
        }
        if ran.real != ran.stand_in {
            let diff = similar::TextDiff::from_lines(
                &format!("{:#?}", ran.real),
                &format!("{:#?}", ran.stand_in),
            )
            .unified_diff()
            .header("real Multus", "stand-in")
            .to_string();
            failures.push(format!(
                "{}: the stand-in differs\n{diff}\n{}",
                case.name, ran.logs
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
