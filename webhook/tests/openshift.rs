//! OpenShift's admission on the real local apiserver: this webhook beside the stand-in for Linkerd's
//! proxy injector (`linkerd_multus_e2e::stand_ins::linkerd_injector`) and the stand-in for OpenShift's
//! SCC admission with restricted-v2 (`stand_ins::scc`: called before every mutating webhook, again
//! before a reinvocation, and as the final validation, as the real built-in plugin is), all real HTTPS
//! webhooks. The apiserver calls mutating webhooks in the order of their configurations' names, so
//! each case registers this webhook under a real name: the chart's default (which must run after
//! Linkerd's injector, `linkerd-proxy-injector-webhook-config`) and the one it had before (which ran
//! first, and the SCC admission refused every meshed pod). The built `linkerd-cni` then sets up a real
//! netns for an admitted pod, and real traffic shows its rules exempt the proxy's uid and nothing else.
//!
//! Each case runs twice: with the SCC stand-in on the shared testbed, and on OpenShift's real SCC
//! admission (a kube-apiserver of the test's own in OpenShift mode, from the real platform:
//! `linkerd_multus_e2e::openshift`; reported not run without it). Pods in the namespace with a range
//! are created by a ServiceAccount only `restricted-v2` admits; pods elsewhere by the cluster admin
//! (on OpenShift an account more SCCs admit, as Linkerd's own are).

mod support;

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::chart;
use linkerd_multus_e2e::openshift::{
    restricted_service_account, uid_range_annotations, OpenShiftApiserver,
};
use linkerd_multus_e2e::pod_network::{PluginSettings, PodNetwork};
use linkerd_multus_e2e::stand_ins::{linkerd_injector, scc, AdmissionServer, SccStandIn};
use linkerd_multus_e2e::traffic::{ask_as, Answerer};
use linkerd_multus_e2e::{eventually, unique_name, Cluster, DeleteOnDrop, TestNamespace};
use serde_json::{json, Value};
use support::cluster::*;
use support::*;

const RANGE: &str = "1000650000/10000";
const FIRST: vocab::Uid = 1000650000;
const PROXY_UID: vocab::Uid = FIRST + 2102;
/// Pods with this label set to `off` are not checked by the SCC stand-in.
const SCC_OPT_OUT: &str = "scc-stand-in";
/// The ServiceAccount creating the pods in the namespace with a range.
const RESTRICTED: &str = "app";
/// The configuration's name before it was renamed to run after Linkerd's injector (the chart's
/// fullname for the README's release).
const NAME_BEFORE_RENAME: &str = "ld-controller-linkerd-multus";
/// The real SCC admission's words for Linkerd's validator uid, as the stand-in gives them (within its
/// list of every SCC: `unable to validate against any security context constraint: [...]`).
const VALIDATOR_REFUSED: &str = "provider restricted-v2: .initContainers[0].runAsUser: Invalid \
     value: 65534: must be in the ranges: [1000650000, 1000659999]";

async fn stored(kube: &Client, namespace: &str, name: &str) -> Value {
    let pod = Api::<Pod>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
        .expect("the pod is stored");
    serde_json::to_value(pod).unwrap()
}

/// The securityContext of the container `name` in `list` of the stored pod.
fn sc<'a>(pod: &'a Value, list: &str, name: &str) -> &'a Value {
    pod["spec"][list]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == name))
        .map(|c| &c["securityContext"])
        .unwrap_or_else(|| panic!("no {list} {name} in {pod}"))
}

fn in_range(uid: &Value) -> bool {
    uid.as_i64()
        .and_then(vocab::uid_from_kubernetes)
        .is_some_and(|u| (FIRST..FIRST + 10000).contains(&u))
}

/// Asserts the proxy (in `list`) runs as [`PROXY_UID`] and the validator inside the range as another
/// uid; returns the validator's securityContext.
fn proxy_and_validator<'a>(pod: &'a Value, list: &str, order: &str) -> &'a Value {
    assert_eq!(
        sc(pod, list, vocab::PROXY_CONTAINER)["runAsUser"],
        PROXY_UID,
        "{order}"
    );
    let v = sc(pod, "initContainers", vocab::VALIDATOR_CONTAINER);
    assert!(
        in_range(&v["runAsUser"]) && v["runAsUser"] != PROXY_UID,
        "{order}: {v}"
    );
    v
}

/// Runs the built `linkerd-cni` on the stored pod `namespace/name` of `cluster` in a fresh netns and
/// checks with real traffic that its rules exempt exactly `proxy_uid`: out of the pod as that uid goes
/// straight to the host, as any of `redirected` lands on the outbound proxy port.
fn rules_exempt_exactly(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    proxy_uid: vocab::Uid,
    redirected: &[vocab::Uid],
) {
    let settings = PluginSettings::with_kubeconfig("1.0.0", "legacy", cluster.kubeconfig());
    let mut net = PodNetwork::new(&settings, namespace, name);
    net.add().unwrap_or_else(|e| panic!("ADD: {e}"));
    let owners: Vec<String> = net
        .our_rules("iptables-legacy-save")
        .into_iter()
        .filter(|r| r.contains("--uid-owner"))
        .collect();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert!(
        owners[0].contains(&format!("--uid-owner {proxy_uid} ")),
        "{owners:?}"
    );
    let gateway = net.addr.gateway4.clone();
    let outbound = net
        .ns
        .run(|| TcpListener::bind("0.0.0.0:4140").expect("bind 4140"));
    let _proxy = Answerer::start(outbound, "outbound-proxy");
    let host = linkerd_multus_e2e::wait_for_within(
        "the host side's address can be bound",
        Duration::from_secs(20),
        || TcpListener::bind((gateway.as_str(), 9999)).ok(),
    );
    let _host = Answerer::start(host, "host");
    let as_uid = |uid: vocab::Uid| ask_as(&net.ns, uid, &gateway, 9999);
    assert_eq!(as_uid(proxy_uid), "host", "the proxy's uid bypasses");
    for uid in redirected {
        assert_eq!(as_uid(*uid), "outbound-proxy", "uid {uid} is redirected");
    }
}

/// Whether the server keeps an init container's `restartPolicy` (serves native sidecars): asked with a
/// dry-run create, whatever its version.
async fn serves_native_sidecars(kube: &Client, namespace: &str) -> bool {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "native-sidecar-probe" },
        "spec": {
            "initContainers": [{ "name": "s", "image": "x", "restartPolicy": "Always" }],
            "containers": [{ "name": "c", "image": "x" }],
        },
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let created = Api::<Pod>::namespaced(kube.clone(), namespace)
        .create(&dry_run, &pod)
        .await
        .expect("a dry-run pod create");
    created
        .spec
        .and_then(|s| s.init_containers)
        .is_some_and(|i| i[0].restart_policy.as_deref() == Some("Always"))
}

/// Everything one case needs: its selector, the configurations, whom the injector saw.
struct Order {
    selector: String,
    /// Per pod name: whether the injector saw this webhook's networks annotation (it ran after us).
    injector_saw_ours: Arc<Mutex<Vec<(String, bool)>>>,
    _guards: (ConfigGuard, ConfigGuard, Option<SccGuards>),
    _servers: (AdmissionServer, Option<SccStandIn>),
}

/// The SCC stand-in's two configurations.
type SccGuards = (ConfigGuard, DeleteOnDrop<ValidatingWebhookConfiguration>);

/// Creates `object` (a configuration as JSON) and deletes it when the guard drops.
async fn create<K>(kube: &Client, object: Value) -> DeleteOnDrop<K>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let object: K = serde_json::from_value(object).unwrap();
    let api = Api::<K>::all(kube.clone());
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    DeleteOnDrop::new(api, &name)
}

/// Registers this webhook as `<ours>-<suffix>`, the injector stand-in as Linkerd's
/// `linkerd-proxy-injector-webhook-config-<suffix>` and, unless the server has the real one, the SCC
/// stand-in, for a fresh selector. The common suffix keeps the names' order (neither name is a
/// prefix of the other).
async fn set_up(kube: &Client, ours: &Running, ca: &str, ours_name: &str, stand_in: bool) -> Order {
    let selector = unique_name("os");
    let saw = Arc::new(Mutex::new(Vec::new()));
    let record = saw.clone();
    let injector = AdmissionServer::start(move |request: Value| {
        let record = record.clone();
        async move {
            let meta = &request["object"]["metadata"];
            let name = meta["name"].as_str().unwrap_or_default().to_string();
            let ours_ran = !meta["annotations"][vocab::NETWORKS_ANNOTATION].is_null();
            record.lock().unwrap().push((name, ours_ran));
            linkerd_injector::respond(request).await
        }
    });

    let ours_guard = create_config(
        kube,
        &format!("{ours_name}-{selector}"),
        vec![webhook_entry(
            "pods.linkerd-multus.test",
            json!({ "url": ours.url(), "caBundle": ca }),
            &selector,
        )],
    )
    .await;
    let only_ours = json!({ "matchLabels": { (SELECTOR_KEY): selector } });
    let injector_guard = create(
        kube,
        linkerd_injector::configuration(
            &format!("{}-{selector}", linkerd_injector::CONFIGURATION_NAME),
            injector.client_config(),
            only_ours.clone(),
        ),
    )
    .await;
    let (scc, scc_guards) = if stand_in {
        let scc = SccStandIn::start(kube.clone());
        let mut checked = only_ours;
        checked["matchExpressions"] =
            json!([{ "key": SCC_OPT_OUT, "operator": "NotIn", "values": ["off"] }]);
        let [mutating, validating] = scc.configurations(&selector, checked);
        let guards = (create(kube, mutating).await, create(kube, validating).await);
        (Some(scc), Some(guards))
    } else {
        (None, None)
    };
    Order {
        selector,
        injector_saw_ours: saw,
        _guards: (ours_guard, injector_guard, scc_guards),
        _servers: (injector, scc),
    }
}

/// Waits until the apiserver calls all three webhooks for this order's pods: a probe pod created by
/// the admin comes back attached and injected, and one by the restricted account in the namespace
/// with a range, running as a uid outside the range, is refused. The admin's probe goes to the
/// namespace without a range (the stand-in does not check there); the real SCC admission refuses
/// every pod there, and admits the admin's in the range's namespace (through `anyuid`).
async fn wait_until_active(env: &Env, selector: &str) {
    let probes = if env.real { &env.range } else { &env.plain };
    let plain_pods = Api::<Pod>::namespaced(env.kube.clone(), &probes.name);
    let mut i = 0;
    eventually("the apiserver calls the three webhooks", || {
        i += 1;
        let (pods, name) = (plain_pods.clone(), format!("probe-{i}"));
        async move {
            let mut probe = pod_json(
                &name,
                selector,
                json!({ (vocab::INJECT_ANNOTATION): "enabled" }),
                json!({}),
            );
            let ready = match pods
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(probe.clone()).unwrap(),
                )
                .await
            {
                Ok(p) => {
                    let _ = pods.delete(&name, &DeleteParams::default()).await;
                    let p = serde_json::to_value(p).unwrap();
                    !p["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION].is_null()
                        && p["spec"]["containers"]
                            .as_array()
                            .is_some_and(|c| c.len() == 2)
                }
                Err(_) => false,
            };
            probe["metadata"]["name"] = json!(format!("{name}-refused"));
            probe["metadata"]["annotations"] = json!({});
            probe["spec"]["securityContext"] = json!({ "runAsUser": 1 });
            let refused = !env.create(&env.range.name, &probe).0;
            (ready && refused).then_some(())
        }
    })
    .await
}

/// This webhook and the namespaces the cases run in: one with a uid range, one without, Linkerd's;
/// on the shared testbed with the SCC stand-in, or on an apiserver with the real SCC admission.
struct Env {
    cluster: Cluster,
    /// The server has OpenShift's real SCC admission (else the stand-in is registered).
    real: bool,
    /// kubectl's flags acting as the ServiceAccount only restricted-v2 admits.
    as_restricted: Vec<String>,
    kube: Client,
    range: TestNamespace,
    plain: TestNamespace,
    control_plane: TestNamespace,
    ours: Running,
    ca: String,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start(real: Option<&OpenShiftApiserver>) -> Self {
        let cluster = real.map_or_else(Cluster::shared, |r| (**r).clone());
        let kube = cluster.client().await;
        let on = (vocab::MULTUS_ANNOTATION, "enabled");
        let mut range_annotations = ann(&[on]);
        range_annotations.extend(uid_range_annotations(RANGE));
        let range = TestNamespace::create_with(&kube, "os-range", range_annotations).await;
        let as_restricted = tokio::task::block_in_place(|| {
            restricted_service_account(&cluster, &range.name, RESTRICTED)
        });
        let plain = TestNamespace::create_with(&kube, "os-plain", ann(&[on])).await;
        let control_plane = TestNamespace::create(&kube, "os-cp").await;
        let dir = temp_dir();
        let bundle = write_cert(dir.path());
        let ours = Running::start(
            args(dir.path()),
            decision(&control_plane.name),
            "default",
            kube.clone(),
        )
        .await;
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bundle.ca_pem);
        Self {
            cluster,
            real: real.is_some(),
            as_restricted,
            kube,
            range,
            plain,
            control_plane,
            ours,
            ca,
            _dir: dir,
        }
    }

    /// Registers the three webhooks with this one named `<ours_name>-…` and waits until all are called.
    async fn order(&self, ours_name: &str) -> Order {
        let o = set_up(&self.kube, &self.ours, &self.ca, ours_name, !self.real).await;
        wait_until_active(self, &o.selector).await;
        o
    }

    /// What the case is called in messages: the order and where the SCC admission comes from.
    fn case(&self, order: &str) -> String {
        let scc = if self.real {
            "real SCC admission"
        } else {
            "SCC stand-in"
        };
        format!("{order} ({scc})")
    }

    /// `kubectl create` of a pod in `namespace` (as the restricted ServiceAccount in the namespace
    /// with a range, as the admin elsewhere): whether it was admitted, and kubectl's stderr.
    fn create(&self, namespace: &str, pod: &Value) -> (bool, String) {
        let as_admin = namespace != self.range.name;
        self.create_as(namespace, pod, as_admin)
    }

    fn create_as(&self, namespace: &str, pod: &Value, as_admin: bool) -> (bool, String) {
        let dir = temp_dir();
        let file = dir.path().join("pod.json");
        std::fs::write(&file, serde_json::to_vec(pod).unwrap()).unwrap();
        let mut args: Vec<&str> = if as_admin {
            Vec::new()
        } else {
            self.as_restricted.iter().map(String::as_str).collect()
        };
        args.extend(["create", "-n", namespace, "-f", file.to_str().unwrap()]);
        let out = tokio::task::block_in_place(|| self.cluster.kubectl(&args));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// Creates `pod` in the namespace with a range without the SCC admission's uid check: labelled
    /// out of the stand-in's scope, or on the real one by the admin (whom `anyuid` admits).
    fn create_unchecked(&self, pod: &Value) -> (bool, String) {
        let mut pod = pod.clone();
        pod["metadata"]["labels"][SCC_OPT_OUT] = json!("off");
        self.create_as(&self.range.name, &pod, self.real)
    }

    /// Asserts the app container's securityContext is what the SCC admission gave it and nothing of
    /// ours: the range's first uid (and, from the real one, restricted-v2's other defaults).
    fn assert_app_has_only_the_sccs(&self, pod: &Value, order: &str) {
        let mut want = json!({ "runAsUser": FIRST });
        if self.real {
            want["allowPrivilegeEscalation"] = json!(false);
            want["capabilities"] = json!({ "drop": ["ALL"] });
            want["runAsNonRoot"] = json!(true);
        }
        assert_eq!(
            sc(pod, "containers", "app"),
            &want,
            "{order}: the app runs as the range's first uid, set by the SCC admission, not by us"
        );
    }

    async fn stop(self) {
        self.ours.stop().await;
    }

    /// Whether the injector ran after this webhook for pod `name` (it saw our annotation).
    fn injector_saw_ours(o: &Order, name: &str) -> bool {
        let saw = o.injector_saw_ours.lock().unwrap().clone();
        saw.iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("the injector never saw {name}: {saw:?}"))
            .1
    }

    async fn delete_pods(&self, pods: &[(&str, &str)]) {
        for (namespace, name) in pods {
            Api::<Pod>::namespaced(self.kube.clone(), namespace)
                .delete(name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("delete {namespace}/{name}: {e}"));
        }
    }

    /// Cases 6 and 7, the same in either order: in Linkerd's namespace and in one without a range,
    /// the pod is attached and the injector's uids stay (the SCC stand-in does not check there). On
    /// OpenShift every namespace has a range: the real SCC admission refuses any pod in one without.
    async fn no_range_cases(&self, sel: &str, order: &str) {
        if self.real {
            for namespace in [&self.control_plane.name, &self.plain.name] {
                let pod = pod_json("no-range", sel, json!({}), json!({}));
                let (ok, stderr) = self.create(namespace, &pod);
                assert!(
                    !ok && stderr.contains(&format!(
                        "unable to find annotation {}",
                        vocab::OPENSHIFT_UID_RANGE_ANNOTATION
                    )),
                    "{order} {namespace}: {stderr}"
                );
            }
            return;
        }
        let cases = [
            (
                &self.control_plane.name,
                "control-plane",
                json!({ (vocab::CONTROL_PLANE_COMPONENT_LABEL): "destination" }),
            ),
            (&self.plain.name, "no-range", json!({})),
        ];
        for (namespace, name, labels) in cases {
            let (ok, stderr) = self.create(
                namespace,
                &pod_json(
                    name,
                    sel,
                    json!({ (vocab::INJECT_ANNOTATION): "enabled" }),
                    labels,
                ),
            );
            assert!(
                ok && !stderr.contains("Warning"),
                "{order} {name}: {stderr}"
            );
            let p = stored(&self.kube, namespace, name).await;
            assert!(
                !p["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION].is_null(),
                "{order} {name}"
            );
            assert!(
                p["metadata"]["annotations"][vocab::PROXY_UID_ANNOTATION].is_null(),
                "{order} {name}"
            );
            let validator = sc(&p, "initContainers", vocab::VALIDATOR_CONTAINER);
            assert_eq!(
                sc(&p, "containers", vocab::PROXY_CONTAINER)["runAsUser"],
                2102,
                "{order} {name}"
            );
            assert_eq!(validator["runAsUser"], 65534, "{order} {name}");
            assert_eq!(validator["runAsGroup"], 65534, "{order} {name}");
        }
        self.delete_pods(&[
            (&self.control_plane.name, "control-plane"),
            (&self.plain.name, "no-range"),
        ])
        .await;
    }
}

/// With the chart's default configuration name, this webhook runs after Linkerd's injector: the SCC
/// admission (first, and again before any reinvocation) admits meshed pods created in a namespace with
/// a range, with the proxy and validator on uids of the range, and the rules exempt the proxy only.
/// Fails when the chart's name sorts before the injector's (the name before the rename did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (netns, iptables), helm and the testbed (kube-apiserver): run by e2e/test-all"]
async fn after_linkerds_injector_the_scc_admission_admits_meshed_pods() {
    after_linkerds_injector(None).await;
}

/// [`after_linkerds_injector_the_scc_admission_admits_meshed_pods`] on OpenShift's real SCC admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (netns, iptables), helm and the real platform (LINKERD_MULTUS_PLATFORM): run by e2e/test-all"]
async fn after_linkerds_injector_openshifts_scc_admission_admits_meshed_pods() {
    let case =
        "webhook/tests/openshift.rs: after Linkerd's injector, on OpenShift's real SCC admission";
    if let Some(real) = tokio::task::block_in_place(|| OpenShiftApiserver::or_not_run(case)) {
        after_linkerds_injector(Some(&real)).await;
    }
}

async fn after_linkerds_injector(real: Option<&OpenShiftApiserver>) {
    let env = Env::start(real).await;
    let kube = &env.kube;
    let range = &env.range.name;
    let chart_name = chart::webhook_configuration_name(chart::README_RELEASE);
    let order = env.case(&format!("configuration {chart_name}"));
    let order = order.as_str();
    let o = env.order(&chart_name).await;
    let sel = &o.selector;
    let native_sidecars = serves_native_sidecars(kube, range).await;
    let inject = vocab::INJECT_ANNOTATION;
    let uid_key = vocab::PROXY_UID_ANNOTATION;
    let proxy = vocab::PROXY_CONTAINER;
    let validator = vocab::VALIDATOR_CONTAINER;

    // 1. A meshed pod in a namespace with a range.
    let (ok, stderr) = env.create(
        range,
        &pod_json("meshed", sel, json!({ (inject): "enabled" }), json!({})),
    );
    assert!(
        ok && !stderr.contains("Warning"),
        "{order}: the meshed pod must be admitted (refused when this webhook runs before Linkerd's \
         injector, {}): {stderr}",
        linkerd_injector::CONFIGURATION_NAME
    );
    assert!(
        !Env::injector_saw_ours(&o, "meshed"),
        "{order}: the injector ran first"
    );
    let p = stored(kube, range, "meshed").await;
    assert_eq!(
        p["metadata"]["annotations"][uid_key],
        PROXY_UID.to_string(),
        "{order}"
    );
    assert_eq!(
        p["metadata"]["annotations"][scc::SCC_ANNOTATION],
        scc::SCC,
        "{order}"
    );
    let v = proxy_and_validator(&p, "containers", order);
    assert!(in_range(&v["runAsGroup"]), "{order}: {v}");
    env.assert_app_has_only_the_sccs(&p, order);
    // The app (the range's first uid) and the validator are redirected; the proxy is not.
    let validator_uid = v["runAsUser"]
        .as_i64()
        .and_then(vocab::uid_from_kubernetes)
        .unwrap();
    rules_exempt_exactly(
        &env.cluster,
        range,
        "meshed",
        PROXY_UID,
        &[FIRST, validator_uid],
    );

    // 2. The user's proxy uid inside the range: kept, the proxy made to match.
    let (ok, stderr) = env.create(
        range,
        &pod_json(
            "user-inside",
            sel,
            json!({ (inject): "enabled", (uid_key): "1000650007" }),
            json!({}),
        ),
    );
    assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
    let p = stored(kube, range, "user-inside").await;
    assert_eq!(
        p["metadata"]["annotations"][uid_key], "1000650007",
        "{order}"
    );
    assert_eq!(
        sc(&p, "containers", proxy)["runAsUser"],
        1000650007u64,
        "{order}"
    );
    assert!(
        in_range(&sc(&p, "initContainers", validator)["runAsUser"]),
        "{order}"
    );

    // 3. The user's proxy uid outside the range: kept, the proxy left as the injector made it, a
    // warning; the SCC admission refuses that pod (shown with a copy it does not check).
    let outside = |name: &str| {
        pod_json(
            name,
            sel,
            json!({ (inject): "enabled", (uid_key): "1234" }),
            json!({}),
        )
    };
    let (ok, stderr) = env.create(range, &outside("user-outside-refused"));
    assert!(
        !ok && stderr
            .contains(".containers[1].runAsUser: Invalid value: 1234: must be in the ranges"),
        "{order}: {stderr}"
    );
    let (ok, stderr) = env.create_unchecked(&outside("user-outside"));
    assert!(
        ok && stderr.contains("\"1234\" is not a uid inside namespace annotation"),
        "{order}: {stderr}"
    );
    let p = stored(kube, range, "user-outside").await;
    assert_eq!(p["metadata"]["annotations"][uid_key], "1234", "{order}");
    assert_eq!(sc(&p, "containers", proxy)["runAsUser"], 1234, "{order}");
    assert!(
        in_range(&sc(&p, "initContainers", validator)["runAsUser"]),
        "{order}"
    );

    // 4. The proxy as a native sidecar, where the server serves an init container's restartPolicy
    // (one that drops it would store a blocking init container, not a sidecar).
    if native_sidecars {
        let (ok, stderr) = env.create(
            range,
            &pod_json(
                "native",
                sel,
                json!({ (inject): "enabled", (linkerd_injector::NATIVE_SIDECAR_ANNOTATION): "true" }),
                json!({}),
            ),
        );
        assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
        let p = stored(kube, range, "native").await;
        proxy_and_validator(&p, "initContainers", order);
        env.delete_pods(&[(range, "native")]).await;
    } else {
        linkerd_multus_e2e::not_run(
            &format!("webhook/tests/openshift.rs: {order}: the proxy as a native sidecar"),
            "the server drops an init container's restartPolicy (native sidecars: Kubernetes 1.28+)",
        );
    }

    // 5. Neither container: attached, annotated; only the SCC admission's uid on the app.
    let (ok, stderr) = env.create(range, &pod_json("neither", sel, json!({}), json!({})));
    assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
    let p = stored(kube, range, "neither").await;
    assert_eq!(
        p["metadata"]["annotations"][uid_key],
        PROXY_UID.to_string(),
        "{order}"
    );
    assert_eq!(
        p["spec"]["containers"].as_array().unwrap().len(),
        1,
        "{order}"
    );
    env.assert_app_has_only_the_sccs(&p, order);
    assert!(p["spec"]["initContainers"].is_null(), "{order}");

    // 6. and 7.
    env.no_range_cases(sel, order).await;
    env.delete_pods(&[
        (range, "meshed"),
        (range, "user-inside"),
        (range, "user-outside"),
        (range, "neither"),
    ])
    .await;
    env.stop().await;
}

/// The name before the rename sorted before Linkerd's injector: the injector adds the proxy and its
/// validator (uid 65534) after this webhook, and the SCC admission, rerun before this webhook's
/// reinvocation, refuses every meshed pod with the real plugin's words. Pods without Linkerd's
/// containers are admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn before_linkerds_injector_the_scc_admission_refuses_meshed_pods() {
    before_linkerds_injector(None).await;
}

/// [`before_linkerds_injector_the_scc_admission_refuses_meshed_pods`] on OpenShift's real SCC
/// admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (netns, iptables) and the real platform (LINKERD_MULTUS_PLATFORM): run by e2e/test-all"]
async fn before_linkerds_injector_openshifts_scc_admission_refuses_meshed_pods() {
    let case =
        "webhook/tests/openshift.rs: before Linkerd's injector, on OpenShift's real SCC admission";
    if let Some(real) = tokio::task::block_in_place(|| OpenShiftApiserver::or_not_run(case)) {
        before_linkerds_injector(Some(&real)).await;
    }
}

async fn before_linkerds_injector(real: Option<&OpenShiftApiserver>) {
    let env = Env::start(real).await;
    let range = &env.range.name;
    let order = env.case(&format!("configuration {NAME_BEFORE_RENAME}"));
    let order = order.as_str();
    assert!(NAME_BEFORE_RENAME < linkerd_injector::CONFIGURATION_NAME);
    let o = env.order(NAME_BEFORE_RENAME).await;
    let sel = &o.selector;
    let inject = vocab::INJECT_ANNOTATION;

    for (name, annotations) in [
        ("meshed", json!({ (inject): "enabled" })),
        (
            "user-inside",
            json!({ (inject): "enabled", (vocab::PROXY_UID_ANNOTATION): "1000650007" }),
        ),
    ] {
        let (ok, stderr) = env.create(range, &pod_json(name, sel, annotations, json!({})));
        assert!(
            !ok && stderr.contains(VALIDATOR_REFUSED),
            "{order} {name}: {stderr}"
        );
        assert!(
            Env::injector_saw_ours(&o, name),
            "{order}: the injector ran after this webhook"
        );
    }
    let (ok, stderr) = env.create(range, &pod_json("neither", sel, json!({}), json!({})));
    assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
    env.no_range_cases(sel, order).await;
    env.delete_pods(&[(range, "neither")]).await;
    env.stop().await;
}
