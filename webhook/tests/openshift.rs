//! OpenShift in either webhook order, on the real local apiserver: this webhook beside the stand-in
//! for Linkerd's proxy injector (`linkerd_multus_e2e::stand_ins::linkerd_injector`) and the stand-in
//! for the restricted SCC's uid check (`stand_ins::scc`), all real HTTPS webhooks. Each order runs
//! with its own selector and configurations: the injector's configuration is named to sort before
//! this project's, then after it (the apiserver calls mutating webhooks in that order). The built
//! `linkerd-cni` then sets up a real netns for the stored pod, and real traffic shows its rules exempt
//! the proxy's uid and nothing else.

mod support;

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use linkerd_multus_e2e::pod_network::{PluginSettings, PodNetwork};
use linkerd_multus_e2e::stand_ins::{linkerd_injector, scc, AdmissionServer};
use linkerd_multus_e2e::traffic::{ask_as, Answerer};
use linkerd_multus_e2e::{eventually, kubectl, unique_name, DeleteOnDrop, TestNamespace};
use serde_json::{json, Value};
use support::cluster::*;
use support::*;

const RANGE: &str = "1000650000/10000";
const FIRST: u64 = 1000650000;
const PROXY_UID: u64 = FIRST + 2102;
/// Pods with this label set to `off` are not checked by the SCC stand-in.
const SCC_OPT_OUT: &str = "scc-stand-in";

/// `kubectl create` of a pod: whether it was admitted, and kubectl's stderr (warnings, denials).
fn try_create(namespace: &str, pod: &Value) -> (bool, String) {
    let dir = temp_dir();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, serde_json::to_vec(pod).unwrap()).unwrap();
    let out = kubectl(&["create", "-n", namespace, "-f", file.to_str().unwrap()]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

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
    uid.as_u64()
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

/// Runs the built `linkerd-cni` on the stored pod `namespace/name` in a fresh netns and checks with
/// real traffic that its rules exempt exactly `proxy_uid`: out of the pod as that uid goes straight to
/// the host, as any of `redirected` lands on the outbound proxy port.
fn rules_exempt_exactly(namespace: &str, name: &str, proxy_uid: u64, redirected: &[u64]) {
    let mut net = PodNetwork::new(&PluginSettings::new("1.0.0", "legacy"), namespace, name);
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
    let as_uid = |uid: u64| ask_as(&net.ns, u32::try_from(uid).unwrap(), &gateway, 9999);
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

/// Everything one order needs: its selector, the three configurations, whom the injector saw.
struct Order {
    selector: String,
    /// Per pod name: whether the injector saw this webhook's networks annotation (it ran after us).
    injector_saw_ours: Arc<Mutex<Vec<(String, bool)>>>,
    _guards: (
        ConfigGuard,
        ConfigGuard,
        DeleteOnDrop<ValidatingWebhookConfiguration>,
    ),
    _servers: (AdmissionServer, AdmissionServer),
}

async fn set_up(kube: &Client, ours: &Running, ca: &str, injector_first: bool) -> Order {
    let selector = unique_name("os");
    let ours_name = unique_name("m-linkerd-multus");
    let injector_name = unique_name(if injector_first {
        "a-linkerd-injector"
    } else {
        "z-linkerd-injector"
    });
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
    let client = kube.clone();
    let scc_server = AdmissionServer::start(move |request| scc::respond(client.clone(), request));

    let ours_guard = create_config(
        kube,
        &ours_name,
        vec![webhook_entry(
            "pods.linkerd-multus.test",
            json!({ "url": ours.url(), "caBundle": ca }),
            &selector,
        )],
    )
    .await;
    // Linkerd's injector sets no reinvocationPolicy.
    let mut entry = webhook_entry("injector.linkerd.test", injector.client_config(), &selector);
    entry.as_object_mut().unwrap().remove("reinvocationPolicy");
    let injector_guard = create_config(kube, &injector_name, vec![entry]).await;

    let mut entry = webhook_entry("scc.openshift.test", scc_server.client_config(), &selector);
    let e = entry.as_object_mut().unwrap();
    e.remove("reinvocationPolicy");
    e.insert("failurePolicy".into(), json!("Fail"));
    e["objectSelector"]["matchExpressions"] =
        json!([{ "key": SCC_OPT_OUT, "operator": "NotIn", "values": ["off"] }]);
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": { "name": unique_name("scc-stand-in") },
        "webhooks": [entry],
    }))
    .unwrap();
    let api = Api::<ValidatingWebhookConfiguration>::all(kube.clone());
    let name = config.metadata.name.clone().unwrap();
    api.create(&PostParams::default(), &config)
        .await
        .expect("create the SCC stand-in's configuration");
    let scc_guard = DeleteOnDrop::new(api, &name);
    Order {
        selector,
        injector_saw_ours: saw,
        _guards: (ours_guard, injector_guard, scc_guard),
        _servers: (injector, scc_server),
    }
}

/// Waits until the apiserver calls all three webhooks for this order's pods: a probe pod in `plain`
/// (no range) comes back attached and injected, and one in `range` running as a uid outside the range
/// is refused.
async fn wait_until_active(kube: &Client, plain: &str, range: &str, selector: &str) {
    let plain_pods = Api::<Pod>::namespaced(kube.clone(), plain);
    let range_pods = Api::<Pod>::namespaced(kube.clone(), range);
    let mut i = 0;
    eventually("the apiserver calls the three webhooks", || {
        i += 1;
        let (pods, range_pods, name) =
            (plain_pods.clone(), range_pods.clone(), format!("probe-{i}"));
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
            let refused = range_pods
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(probe).unwrap(),
                )
                .await
                .is_err();
            (ready && refused).then_some(())
        }
    })
    .await
}

/// In both orders: the stored pods' proxy and validator uids, the annotation, and the SCC stand-in's
/// verdict are the same, and no securityContext changes outside a namespace with a range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (netns, iptables) and the testbed (kube-apiserver): run by e2e/test-all"]
async fn either_webhook_order_gives_pods_the_range_accepts() {
    let kube = linkerd_multus_e2e::client().await;
    let on = [(vocab::MULTUS_ANNOTATION, "enabled")];
    let range = TestNamespace::create_with(
        &kube,
        "os-range",
        ann(&[on[0], (vocab::OPENSHIFT_UID_RANGE_ANNOTATION, RANGE)]),
    )
    .await;
    let plain = TestNamespace::create_with(&kube, "os-plain", ann(&on)).await;
    let control_plane = TestNamespace::create(&kube, "os-cp").await;

    let dir = temp_dir();
    let bundle = write_cert(dir.path());
    let ours = Running::start(
        args(dir.path()),
        settings(&control_plane.name, "default"),
        kube.clone(),
    )
    .await;
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bundle.ca_pem);

    let native_sidecars = serves_native_sidecars(&kube, &plain.name).await;
    let inject = vocab::INJECT_ANNOTATION;
    let uid_key = vocab::PROXY_UID_ANNOTATION;
    let proxy = vocab::PROXY_CONTAINER;
    let validator = vocab::VALIDATOR_CONTAINER;
    for injector_first in [true, false] {
        let order = if injector_first {
            "injector first"
        } else {
            "injector after"
        };
        let o = set_up(&kube, &ours, &ca, injector_first).await;
        let sel = &o.selector;
        wait_until_active(&kube, &plain.name, &range.name, sel).await;

        // 1. A meshed pod in a namespace with a range.
        let (ok, stderr) = try_create(
            &range.name,
            &pod_json("meshed", sel, json!({ (inject): "enabled" }), json!({})),
        );
        assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
        let p = stored(&kube, &range.name, "meshed").await;
        assert_eq!(
            p["metadata"]["annotations"][uid_key],
            PROXY_UID.to_string(),
            "{order}"
        );
        let v = proxy_and_validator(&p, "containers", order);
        assert!(in_range(&v["runAsGroup"]), "{order}: {v}");
        assert_eq!(
            sc(&p, "containers", "app"),
            &Value::Null,
            "{order}: the app is not ours"
        );
        // The app (the range's first uid) and the validator are redirected; the proxy is not.
        let validator_uid = v["runAsUser"].as_u64().unwrap();
        rules_exempt_exactly(&range.name, "meshed", PROXY_UID, &[FIRST, validator_uid]);

        // 2. The user's proxy uid inside the range: kept, the proxy made to match.
        let (ok, stderr) = try_create(
            &range.name,
            &pod_json(
                "user-inside",
                sel,
                json!({ (inject): "enabled", (uid_key): "1000650007" }),
                json!({}),
            ),
        );
        assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
        let p = stored(&kube, &range.name, "user-inside").await;
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
        // warning; the SCC stand-in refuses that pod (shown with a copy it checks).
        let outside = |name: &str| {
            pod_json(
                name,
                sel,
                json!({ (inject): "enabled", (uid_key): "1234" }),
                json!({}),
            )
        };
        let (ok, stderr) = try_create(&range.name, &outside("user-outside-refused"));
        assert!(
            !ok && stderr.contains("scc stand-in") && stderr.contains("runs as 1234"),
            "{order}: {stderr}"
        );
        let mut unchecked = outside("user-outside");
        unchecked["metadata"]["labels"][SCC_OPT_OUT] = json!("off");
        let (ok, stderr) = try_create(&range.name, &unchecked);
        assert!(
            ok && stderr.contains("\"1234\" is not a uid inside namespace annotation"),
            "{order}: {stderr}"
        );
        let p = stored(&kube, &range.name, "user-outside").await;
        assert_eq!(p["metadata"]["annotations"][uid_key], "1234", "{order}");
        assert_eq!(sc(&p, "containers", proxy)["runAsUser"], 1234, "{order}");
        assert!(
            in_range(&sc(&p, "initContainers", validator)["runAsUser"]),
            "{order}"
        );

        // 4. The proxy as a native sidecar, where the server serves an init container's restartPolicy
        // (one that drops it would store a blocking init container, not a sidecar).
        if native_sidecars {
            let (ok, stderr) = try_create(
                &range.name,
                &pod_json(
                    "native",
                    sel,
                    json!({ (inject): "enabled", (linkerd_injector::NATIVE_SIDECAR_ANNOTATION): "true" }),
                    json!({}),
                ),
            );
            assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
            let p = stored(&kube, &range.name, "native").await;
            proxy_and_validator(&p, "initContainers", order);
        } else {
            eprintln!("{order}: native-sidecar case not run: the server drops an init container's restartPolicy");
        }

        // 5. Neither container: attached, annotated, no securityContext anywhere.
        let (ok, stderr) = try_create(&range.name, &pod_json("neither", sel, json!({}), json!({})));
        assert!(ok && !stderr.contains("Warning"), "{order}: {stderr}");
        let p = stored(&kube, &range.name, "neither").await;
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
        assert_eq!(sc(&p, "containers", "app"), &Value::Null, "{order}");
        assert!(p["spec"]["initContainers"].is_null(), "{order}");

        // 6. The control plane and 7. a namespace without a range: the injector's uids stay.
        let cases = [
            (
                &control_plane.name,
                "control-plane",
                json!({ (vocab::CONTROL_PLANE_COMPONENT_LABEL): "destination" }),
            ),
            (&plain.name, "no-range", json!({})),
        ];
        for (namespace, name, labels) in cases {
            let (ok, stderr) = try_create(
                namespace,
                &pod_json(name, sel, json!({ (inject): "enabled" }), labels),
            );
            assert!(
                ok && !stderr.contains("Warning"),
                "{order} {name}: {stderr}"
            );
            let p = stored(&kube, namespace, name).await;
            assert!(
                !p["metadata"]["annotations"][vocab::NETWORKS_ANNOTATION].is_null(),
                "{order} {name}"
            );
            assert!(
                p["metadata"]["annotations"][uid_key].is_null(),
                "{order} {name}"
            );
            assert_eq!(
                sc(&p, "containers", proxy)["runAsUser"],
                2102,
                "{order} {name}"
            );
            assert_eq!(
                sc(&p, "initContainers", validator)["runAsUser"],
                65534,
                "{order} {name}"
            );
            assert_eq!(
                sc(&p, "initContainers", validator)["runAsGroup"],
                65534,
                "{order} {name}"
            );
        }

        // The order really was as named: the injector saw our annotation only when it ran after us.
        let saw = o.injector_saw_ours.lock().unwrap().clone();
        let first_call = saw
            .iter()
            .find(|(n, _)| n == "meshed")
            .expect("the injector saw the pod");
        assert_eq!(first_call.1, !injector_first, "{order}: {saw:?}");
        for name in ["meshed", "user-inside", "user-outside", "native", "neither"] {
            let deleted = Api::<Pod>::namespaced(kube.clone(), &range.name)
                .delete(name, &DeleteParams::default())
                .await;
            assert!(
                deleted.is_ok() || name == "native" && !native_sidecars,
                "delete {name}"
            );
        }
        for (namespace, name) in [
            (&control_plane.name, "control-plane"),
            (&plain.name, "no-range"),
        ] {
            Api::<Pod>::namespaced(kube.clone(), namespace)
                .delete(name, &DeleteParams::default())
                .await
                .expect("delete");
        }
    }
    ours.stop().await;
}
