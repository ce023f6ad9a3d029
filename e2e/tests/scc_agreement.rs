//! The SCC stand-in (`linkerd_multus_e2e::stand_ins::scc`) agrees with OpenShift's real SCC admission:
//! one table of pods, created by a ServiceAccount only `restricted-v2` admits in a namespace with
//! OpenShift's uid-range annotations, goes once through the real plugin (a kube-apiserver of the test's
//! own in OpenShift mode, from the real platform) and once through the stand-in on the same binary as
//! a plain apiserver (also the test's own), beside the same webhooks: Linkerd's injector stand-in under its real name, a webhook with
//! `reinvocationPolicy: IfNeeded` that moves uids into the range (as this project's webhook does) sorted
//! before or after it, and one that adds a container without a uid. Both must give the same verdict,
//! the same uids and the same refusal text. Where they differ the stand-in is wrong.

use std::path::PathBuf;

use linkerd_multus_e2e::openshift::{
    plain_apiserver, restricted_service_account, uid_range_annotations, OpenShiftApiserver,
};
use linkerd_multus_e2e::platform::Platform;
use linkerd_multus_e2e::stand_ins::{allowed, linkerd_injector, scc, AdmissionServer, SccStandIn};
use linkerd_multus_e2e::{unique_name, Cluster, TestNamespace};
use serde_json::{json, Value};

const RANGE: &str = "1000650000/10000";
const FIRST: i64 = 1000650000;
const SIZE: i64 = 10000;
/// The uid this project's webhook gives the proxy in that range.
const PROXY_UID: i64 = FIRST + 2102;
/// What a refusal's text starts with, after the apiserver's or the webhook's own prefix.
const REFUSAL: &str = "unable to validate against any security context constraint: ";
/// Labels: every pod of a run; which helper webhooks act on it.
const RUN: &str = "scc-agreement/run";
const FIX: &str = "scc-agreement/fix";
const ADD: &str = "scc-agreement/add";
/// The container the adding webhook appends (no securityContext).
const LATE: &str = "late";

/// One pod of the table: what it asks, which webhooks act on it, and whether the real plugin admits
/// it (so a table whose webhooks were never called cannot pass by agreeing on nothing).
struct Case {
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    inject: bool,
    spec: Value,
    admitted: bool,
    /// Needs a server that keeps an init container's `restartPolicy` (native sidecars).
    native: bool,
}

fn container(name: &str, uid: Option<i64>) -> Value {
    match uid {
        Some(u) => json!({ "name": name, "image": "x", "securityContext": { "runAsUser": u } }),
        None => json!({ "name": name, "image": "x" }),
    }
}

fn app() -> Value {
    container("app", None)
}

fn table() -> Vec<Case> {
    let plain = |name, spec, admitted| Case {
        name,
        labels: &[],
        inject: false,
        spec,
        admitted,
        native: false,
    };
    let proxy = container(vocab::PROXY_CONTAINER, Some(PROXY_UID));
    let validator = container(vocab::VALIDATOR_CONTAINER, Some(FIRST));
    let mut native_proxy = proxy.clone();
    native_proxy["restartPolicy"] = json!("Always");
    let mut native_outside = container(vocab::PROXY_CONTAINER, Some(2102));
    native_outside["restartPolicy"] = json!("Always");
    let meshed = |name, labels, admitted| Case {
        name,
        labels,
        inject: true,
        spec: json!({ "containers": [app()] }),
        admitted,
        native: false,
    };
    vec![
        plain(
            "no-uid",
            json!({ "containers": [app(), container("side", None)] }),
            true,
        ),
        plain(
            "outside",
            json!({ "containers": [container("app", Some(2102))] }),
            false,
        ),
        plain(
            "root",
            json!({ "containers": [container("app", Some(0))] }),
            false,
        ),
        plain(
            "last-of-range",
            json!({ "containers": [container("app", Some(FIRST + SIZE - 1))] }),
            true,
        ),
        plain(
            "past-the-range",
            json!({ "containers": [container("app", Some(FIRST + SIZE))] }),
            false,
        ),
        plain(
            "webhook-uids",
            json!({ "initContainers": [validator.clone()], "containers": [app(), proxy.clone()] }),
            true,
        ),
        plain(
            "validator-65534",
            json!({ "initContainers": [container(vocab::VALIDATOR_CONTAINER, Some(65534))], "containers": [app(), proxy] }),
            false,
        ),
        plain(
            "two-outside",
            json!({ "initContainers": [container(vocab::VALIDATOR_CONTAINER, Some(65534))], "containers": [app(), container(vocab::PROXY_CONTAINER, Some(2102))] }),
            false,
        ),
        plain(
            "init-no-uid",
            json!({ "initContainers": [container("init", None)], "containers": [app()] }),
            true,
        ),
        plain(
            "pod-level-outside",
            json!({ "securityContext": { "runAsUser": 7 }, "containers": [app()] }),
            false,
        ),
        plain(
            "pod-level-inside",
            json!({ "securityContext": { "runAsUser": FIRST + 5 }, "containers": [app(), container("own", Some(FIRST + 9))] }),
            true,
        ),
        plain(
            "pod-inside-container-outside",
            json!({ "securityContext": { "runAsUser": FIRST + 5 }, "containers": [app(), container("own", Some(2102))] }),
            false,
        ),
        plain(
            "pod-outside-container-inside",
            json!({ "securityContext": { "runAsUser": 2102 }, "initContainers": [container("init", Some(FIRST))], "containers": [app()] }),
            false,
        ),
        Case {
            native: true,
            ..plain(
                "native-sidecar",
                json!({ "initContainers": [validator, native_proxy], "containers": [app()] }),
                true,
            )
        },
        Case {
            native: true,
            ..plain(
                "native-sidecar-outside",
                json!({ "initContainers": [native_outside], "containers": [app()] }),
                false,
            )
        },
        // The injector adds the proxy (2102) and its validator (65534). Fixing them before it: the SCC
        // admission re-admits the injected pod before reinvoking the fixer, and refuses it.
        meshed("injected-fix-first", &[(FIX, "first")], false),
        // Fixing them after it: the SCC admission re-admits the fixed pod.
        meshed("injected-fix-last", &[(FIX, "last")], true),
        meshed("injected-unfixed", &[], false),
        // A container added without a uid after the SCC admission ran: re-admitted, it gets one.
        Case {
            labels: &[(ADD, "true")],
            ..plain("added-late", json!({ "containers": [app()] }), true)
        },
        Case {
            labels: &[(ADD, "true"), (FIX, "last")],
            inject: true,
            ..plain(
                "injected-fixed-and-added",
                json!({ "containers": [app()] }),
                true,
            )
        },
    ]
}

/// The pod as JSON, labelled for run `run`.
fn pod(case: &Case, run: &str) -> Value {
    let mut labels = json!({ RUN: run });
    for (k, v) in case.labels {
        labels[*k] = json!(v);
    }
    let mut annotations = json!({});
    if case.inject {
        annotations[vocab::INJECT_ANNOTATION] = json!("enabled");
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": case.name, "labels": labels, "annotations": annotations },
        "spec": case.spec,
    })
}

/// What the SCC admission decided, as a user sees it.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// The stored pod's uids (the pod's, then `<list>/<name>` per container) and its `openshift.io/scc`.
    Admitted {
        uids: Vec<(String, Option<i64>)>,
        scc: Option<String>,
    },
    /// The refusal from [`REFUSAL`] on.
    Refused(String),
}

impl Verdict {
    fn of(created: &std::process::Output) -> Self {
        let stderr = String::from_utf8_lossy(&created.stderr);
        if !created.status.success() {
            let text = stderr
                .find(REFUSAL)
                .map(|at| stderr[at..].trim().to_string())
                .unwrap_or_else(|| format!("(not an SCC refusal) {}", stderr.trim()));
            return Verdict::Refused(text);
        }
        let pod: Value = serde_json::from_slice(&created.stdout).expect("kubectl -o json");
        let mut uids = vec![(
            "pod".to_string(),
            pod["spec"]["securityContext"]["runAsUser"].as_i64(),
        )];
        for list in ["initContainers", "containers"] {
            for c in pod["spec"][list].as_array().into_iter().flatten() {
                uids.push((
                    format!("{list}/{}", c["name"].as_str().unwrap_or_default()),
                    c["securityContext"]["runAsUser"].as_i64(),
                ));
            }
        }
        let scc = pod["metadata"]["annotations"][scc::SCC_ANNOTATION]
            .as_str()
            .map(str::to_string);
        Verdict::Admitted { uids, scc }
    }

    fn admitted(&self) -> bool {
        matches!(self, Verdict::Admitted { .. })
    }
}

/// Moves every uid outside [`RANGE`] into it (`FIRST + uid % SIZE`), as this project's webhook gives
/// Linkerd's containers uids of the range; `IfNeeded`, like the chart's webhook.
fn fix(pod: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(uid) = c["securityContext"]["runAsUser"].as_i64() {
                if !(FIRST..FIRST + SIZE).contains(&uid) {
                    ops.push(json!({ "op": "replace", "path": format!("/spec/{list}/{i}/securityContext/runAsUser"), "value": FIRST + uid % SIZE }));
                }
            }
        }
    }
    ops
}

/// Appends [`LATE`] without a securityContext, once.
fn add(pod: &Value) -> Vec<Value> {
    let has = pod["spec"]["containers"]
        .as_array()
        .is_some_and(|l| l.iter().any(|c| c["name"] == LATE));
    if has {
        return Vec::new();
    }
    vec![
        json!({ "op": "add", "path": "/spec/containers/-", "value": { "name": LATE, "image": "x" } }),
    ]
}

/// The helper webhooks of one run, served by this process, and their configurations.
struct Webhooks {
    _servers: Vec<AdmissionServer>,
    configurations: Vec<Value>,
}

fn mutating(name: &str, server: &AdmissionServer, selector: Value, if_needed: bool) -> Value {
    let mut config = linkerd_injector::configuration(name, server.client_config(), selector);
    let hook = &mut config["webhooks"][0];
    hook["name"] = json!(format!(
        "{}.scc-agreement.test",
        name.split('-').next().unwrap_or("x")
    ));
    hook["failurePolicy"] = json!("Fail");
    if if_needed {
        hook["reinvocationPolicy"] = json!("IfNeeded");
    }
    config
}

impl Webhooks {
    /// Must be called inside the test's runtime (the servers are spawned on it).
    fn start(run: &str) -> Self {
        let serve = |f: fn(&Value) -> Vec<Value>| {
            AdmissionServer::start(
                move |request: Value| async move { allowed(f(&request["object"])) },
            )
        };
        let injector = AdmissionServer::start(linkerd_injector::respond);
        let (fixer, adder) = (serve(fix), serve(add));
        let only = |extra: Option<(&str, &str)>| {
            let mut labels = json!({ RUN: run });
            if let Some((k, v)) = extra {
                labels[k] = json!(v);
            }
            json!({ "matchLabels": labels })
        };
        // Mutating webhooks run in the order of their configurations' names.
        let configurations = vec![
            mutating(
                &format!("a-fix-{run}"),
                &fixer,
                only(Some((FIX, "first"))),
                true,
            ),
            linkerd_injector::configuration(
                &format!("{}-{run}", linkerd_injector::CONFIGURATION_NAME),
                injector.client_config(),
                only(None),
            ),
            mutating(
                &format!("m-add-{run}"),
                &adder,
                only(Some((ADD, "true"))),
                false,
            ),
            mutating(
                &format!("z-fix-{run}"),
                &fixer,
                only(Some((FIX, "last"))),
                true,
            ),
        ];
        Self {
            _servers: vec![injector, fixer, adder],
            configurations,
        }
    }
}

/// One side of the comparison: a cluster, its namespace with the range, the restricted account.
struct Side {
    label: &'static str,
    cluster: Cluster,
    namespace: TestNamespace,
    as_account: Vec<String>,
    dir: tempfile::TempDir,
    created: Vec<String>,
}

impl Side {
    async fn new(label: &'static str, cluster: Cluster, configurations: &[Value]) -> Self {
        let client = cluster.client().await;
        let namespace = TestNamespace::create_with(
            &client,
            "scc-agree",
            uid_range_annotations(RANGE).into_iter().collect(),
        )
        .await;
        let as_account = restricted_service_account(&cluster, &namespace.name, "app");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut side = Self {
            label,
            cluster,
            namespace,
            as_account,
            dir,
            created: Vec::new(),
        };
        for (i, c) in configurations.iter().enumerate() {
            let file = side.write(&format!("config-{i}.json"), c);
            side.cluster.kubectl_ok(&["create", "-f", &file]);
            side.created.push(format!(
                "{}/{}",
                c["kind"].as_str().expect("kind").to_lowercase(),
                c["metadata"]["name"].as_str().expect("name")
            ));
        }
        side
    }

    fn write(&self, name: &str, value: &Value) -> String {
        let path: PathBuf = self.dir.path().join(name);
        std::fs::write(&path, value.to_string()).expect("write a temp file");
        path.to_str().expect("UTF-8").to_string()
    }

    /// Creates `pod` as the restricted ServiceAccount; kubectl's output.
    fn create(&self, pod: &Value) -> std::process::Output {
        let file = self.write("pod.json", pod);
        let mut args: Vec<&str> = self.as_account.iter().map(String::as_str).collect();
        args.extend([
            "-n",
            &self.namespace.name,
            "create",
            "-o",
            "json",
            "-f",
            &file,
        ]);
        self.kubectl(&args)
    }

    /// kubectl on this side's cluster, off the runtime's worker (the webhooks it calls are served here).
    fn kubectl(&self, args: &[&str]) -> std::process::Output {
        tokio::task::block_in_place(|| self.cluster.kubectl(args))
    }

    fn delete(&self, name: &str) {
        let _ = self.kubectl(&[
            "-n",
            &self.namespace.name,
            "delete",
            "pod",
            name,
            "--wait=false",
            "--ignore-not-found",
        ]);
    }

    /// The verdict on `case`, its pod deleted again.
    fn judge(&self, case: &Case, run: &str) -> Verdict {
        let verdict = Verdict::of(&self.create(&pod(case, run)));
        if verdict.admitted() {
            self.delete(case.name);
        }
        verdict
    }

    /// Whether the server keeps an init container's `restartPolicy` (a dry run).
    fn serves_native_sidecars(&self) -> bool {
        let probe = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "native-probe" },
            "spec": { "initContainers": [{ "name": "s", "image": "x", "restartPolicy": "Always" }],
                      "containers": [{ "name": "c", "image": "x" }] },
        });
        // Off the runtime's worker, as every kubectl here (the webhooks it calls are served here).
        let pod = tokio::task::block_in_place(|| {
            self.cluster
                .dry_run_stored(Some(&self.namespace.name), &probe)
        });
        pod["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    }

    /// Waits until every webhook of the run is called: a probe pod comes back injected, fixed (the
    /// proxy's uid), extended and annotated by the SCC admission, and one asking uid 1 is refused.
    /// (What the SCC admission did to the uids is the table's business.)
    async fn wait_until_active(&self, run: &str) {
        let probe = Case {
            name: "probe",
            labels: &[(ADD, "true"), (FIX, "last")],
            inject: true,
            spec: json!({ "containers": [app()] }),
            admitted: true,
            native: false,
        };
        let refused = Case {
            name: "probe-refused",
            labels: &[],
            inject: false,
            spec: json!({ "containers": [container("app", Some(1))] }),
            admitted: false,
            native: false,
        };
        let label = self.label;
        linkerd_multus_e2e::eventually(&format!("{label}: every webhook is called"), || async {
            let ready = match self.judge(&probe, run) {
                Verdict::Admitted { uids, scc } => {
                    let proxy = format!("containers/{}", vocab::PROXY_CONTAINER);
                    let late = format!("containers/{LATE}");
                    scc.is_some()
                        && uids.iter().any(|(n, _)| *n == late)
                        && uids.contains(&(proxy, Some(PROXY_UID)))
                }
                Verdict::Refused(_) => false,
            };
            (ready && !self.judge(&refused, run).admitted()).then_some(())
        })
        .await;
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        for object in &self.created {
            let _ = self
                .cluster
                .kubectl(&["delete", object, "--ignore-not-found"]);
        }
    }
}

/// The table through the real SCC admission and through the stand-in: same verdicts, uids and texts.
/// Seen failing (2026-11-27) with a kinder stand-in: one refusing only in its validating phase admits
/// `injected-fix-first`; one never reinvoked leaves `late` without a uid (`added-late`,
/// `injected-fixed-and-added`), where the real plugin re-admits the pod before the reinvocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real platform (LINKERD_MULTUS_PLATFORM) and the testbed's etcd: run by e2e/test-all"]
async fn the_scc_stand_in_agrees_with_openshifts_scc_admission() {
    let started = std::time::Instant::now();
    let Some(platform) = Platform::or_not_run(
        "e2e/tests/scc_agreement.rs: the SCC stand-in agrees with OpenShift's SCC admission",
    ) else {
        return;
    };
    // The stand-in's side on the same server version without OpenShift's admission: the two differ
    // in the SCC admission alone, and native sidecars run on both whatever the shared testbed is.
    let (real, plain) = tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let plain = s.spawn(|| plain_apiserver(&platform));
            let real = OpenShiftApiserver::up(&platform);
            (real, plain.join().expect("the plain apiserver's thread"))
        })
    });
    eprintln!(
        "MEASURE OpenShift and plain apiservers up: {:?}",
        started.elapsed()
    );
    let run = unique_name("agree");
    let webhooks = Webhooks::start(&run);
    let real_side = Side::new(
        "real SCC admission",
        (*real).clone(),
        &webhooks.configurations,
    )
    .await;

    let shared = (*plain).clone();
    let stand_in = SccStandIn::start(shared.client().await);
    let mut configurations = webhooks.configurations.clone();
    configurations.extend(stand_in.configurations(&run, json!({ "matchLabels": { RUN: &run } })));
    let stand_in_side = Side::new("SCC stand-in", shared, &configurations).await;

    real_side.wait_until_active(&run).await;
    stand_in_side.wait_until_active(&run).await;
    let native = [
        real_side.serves_native_sidecars(),
        stand_in_side.serves_native_sidecars(),
    ];

    eprintln!(
        "MEASURE both sides' webhooks active: {:?}",
        started.elapsed()
    );
    let mut disagreements = Vec::new();
    let mut compared = 0;
    for case in table() {
        if case.native && !native.iter().all(|n| *n) {
            linkerd_multus_e2e::not_run(
                &format!("e2e/tests/scc_agreement.rs: {}", case.name),
                &format!(
                    "a server drops an init container's restartPolicy (native sidecars: Kubernetes \
                     1.28+; real: {}, stand-in's server: {})",
                    native[0], native[1]
                ),
            );
            continue;
        }
        // Both sides at once: each pod is a few kubectl calls per side.
        let (want, got) = tokio::task::block_in_place(|| {
            std::thread::scope(|s| {
                let real = s.spawn(|| real_side.judge(&case, &run));
                let got = stand_in_side.judge(&case, &run);
                (real.join().expect("the real side's thread"), got)
            })
        });
        eprintln!("{}: real {want:?}", case.name);
        assert_eq!(
            want.admitted(),
            case.admitted,
            "{}: the real SCC admission's verdict is not the table's: {want:?}",
            case.name
        );
        if want != got {
            disagreements.push(format!(
                "{}:\n  real:     {want:?}\n  stand-in: {got:?}",
                case.name
            ));
        }
        compared += 1;
    }
    eprintln!("MEASURE compared {compared} pods: {:?}", started.elapsed());
    assert!(
        disagreements.is_empty(),
        "the SCC stand-in disagrees with the real SCC admission on {} of {compared} pods:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    drop(stand_in_side);
    drop(real_side);
}
