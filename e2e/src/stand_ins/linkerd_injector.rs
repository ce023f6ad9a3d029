//! A **stand-in for Linkerd's proxy injector** (not Linkerd): on a pod CREATE whose own
//! `linkerd.io/inject` annotation is `enabled` and that has no `linkerd-proxy` yet, it adds what the
//! uid rules of this project care about, as Linkerd's templates write it:
//!
//! - the `linkerd-proxy` container with `runAsUser` = the pod's `config.linkerd.io/proxy-uid`
//!   annotation, or 2102; an init container with `restartPolicy: Always` (native sidecar) when the pod
//!   says `config.alpha.linkerd.io/proxy-enable-native-sidecar: "true"`;
//! - the CNI-mode init container `linkerd-network-validator` with `runAsUser` and `runAsGroup` 65534
//!   (hard-coded in Linkerd's template).
//!
//! Left out: everything else the injector does (images, ports, env, volumes, the namespace's config
//! annotations, `linkerd-init`). Like Linkerd's, its webhook configuration sets no
//! `reinvocationPolicy`.

use serde_json::{json, Value};

use super::server::allowed;

/// The annotation asking Linkerd for the proxy as a native sidecar.
pub const NATIVE_SIDECAR_ANNOTATION: &str = "config.alpha.linkerd.io/proxy-enable-native-sidecar";
/// The uid Linkerd's validator template hard-codes.
pub const VALIDATOR_UID: vocab::Uid = 65534;

/// The name of the configuration Linkerd's chart registers its injector under.
pub const CONFIGURATION_NAME: &str = "linkerd-proxy-injector-webhook-config";
/// The name of its webhook entry.
pub const WEBHOOK_NAME: &str = "linkerd-proxy-injector.linkerd.io";

/// What the injected containers run. Linkerd's images are not to be had here: by default they name an
/// image that does not exist (for the bare apiserver, where nothing runs); the node scenario gives the
/// test image and the validator `crate::validator::Validator::for_node` picks (the test workload's, or
/// Linkerd's real one in the test image where the platform is given).
#[derive(Clone, Debug)]
pub struct Containers {
    pub image: String,
    pub proxy_args: Vec<String>,
    /// The validator's `command` (empty: the image's entrypoint).
    pub validator_command: Vec<String>,
    pub validator_args: Vec<String>,
}

impl Default for Containers {
    fn default() -> Self {
        Self {
            image: "example.invalid/linkerd-proxy".into(),
            proxy_args: Vec::new(),
            validator_command: Vec::new(),
            validator_args: Vec::new(),
        }
    }
}

/// The admission response for `request` (an AdmissionReview request).
pub async fn respond(request: Value) -> Value {
    allowed(patch(&request["object"]))
}

/// [`respond`] injecting `containers`.
pub async fn respond_with(containers: Containers, request: Value) -> Value {
    allowed(patch_with(&request["object"], &containers))
}

/// The configuration registering the injector at `client_config` for pods matching `object_selector`,
/// named `name` (Linkerd's is [`CONFIGURATION_NAME`]). Like Linkerd's: no `reinvocationPolicy`,
/// `failurePolicy: Ignore`.
pub fn configuration(name: &str, client_config: Value, object_selector: Value) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": { "name": name },
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "clientConfig": client_config,
            "rules": [{ "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"] }],
            "objectSelector": object_selector,
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    })
}

/// The JSON patch operations injecting `pod` (none when it is not to be injected).
pub fn patch(pod: &Value) -> Vec<Value> {
    patch_with(pod, &Containers::default())
}

/// [`patch`] with the injected containers running `containers`.
pub fn patch_with(pod: &Value, containers: &Containers) -> Vec<Value> {
    let annotations = &pod["metadata"]["annotations"];
    let has_proxy = ["containers", "initContainers"].iter().any(|list| {
        pod["spec"][list]
            .as_array()
            .is_some_and(|l| l.iter().any(|c| c["name"] == vocab::PROXY_CONTAINER))
    });
    if annotations[vocab::INJECT_ANNOTATION] != "enabled" || has_proxy {
        return Vec::new();
    }
    let uid = annotations[vocab::PROXY_UID_ANNOTATION]
        .as_str()
        .and_then(|u| u.parse::<vocab::Uid>().ok())
        .unwrap_or(vocab::DEFAULT_PROXY_UID);
    let restricted = |user: vocab::Uid, group: Option<vocab::Uid>| {
        let mut sc = json!({
            "runAsUser": user,
            "runAsNonRoot": true,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
        });
        if let Some(g) = group {
            sc["runAsGroup"] = json!(g);
        }
        sc
    };
    let container = |name: &str, command: &[String], args: &[String], sc: Value| {
        let mut c = json!({ "name": name, "image": containers.image, "securityContext": sc });
        if !command.is_empty() {
            c["command"] = json!(command);
        }
        if !args.is_empty() {
            c["args"] = json!(args);
            c["imagePullPolicy"] = json!("Never");
        }
        c
    };
    let mut proxy = container(
        vocab::PROXY_CONTAINER,
        &[],
        &containers.proxy_args,
        restricted(uid, None),
    );
    let validator = container(
        vocab::VALIDATOR_CONTAINER,
        &containers.validator_command,
        &containers.validator_args,
        restricted(VALIDATOR_UID, Some(VALIDATOR_UID)),
    );
    let native = annotations[NATIVE_SIDECAR_ANNOTATION] == "true";
    let mut init = vec![validator];
    let mut ops = Vec::new();
    if native {
        proxy["restartPolicy"] = json!("Always");
        init.push(proxy);
    } else {
        ops.push(json!({ "op": "add", "path": "/spec/containers/-", "value": proxy }));
    }
    if pod["spec"]["initContainers"].is_array() {
        for c in init {
            ops.push(json!({ "op": "add", "path": "/spec/initContainers/-", "value": c }));
        }
    } else {
        ops.push(json!({ "op": "add", "path": "/spec/initContainers", "value": init }));
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injects_as_linkerd_templates_do() {
        let pod = |annotations: Value| json!({ "metadata": { "annotations": annotations }, "spec": { "containers": [{ "name": "app" }] } });
        assert!(patch(&pod(json!({}))).is_empty());
        let mut p =
            pod(json!({ "linkerd.io/inject": "enabled", "config.linkerd.io/proxy-uid": "7" }));
        let ops = patch(&p);
        json_patch_like(&mut p, &ops);
        assert_eq!(
            p["spec"]["containers"][1]["securityContext"]["runAsUser"],
            7
        );
        assert_eq!(
            p["spec"]["initContainers"][0]["securityContext"]["runAsUser"],
            65534
        );
        assert!(patch(&p).is_empty(), "an injected pod is left alone");
        let mut p =
            pod(json!({ "linkerd.io/inject": "enabled", (NATIVE_SIDECAR_ANNOTATION): "true" }));
        let ops = patch(&p);
        json_patch_like(&mut p, &ops);
        assert_eq!(
            p["spec"]["initContainers"][1]["securityContext"]["runAsUser"],
            2102
        );
        assert_eq!(p["spec"]["initContainers"][1]["restartPolicy"], "Always");
    }

    /// The validator runs the `command` it is given (Linkerd's binary in the test image) and the
    /// proxy the image's entrypoint: a `command` lost here would run the test workload with Linkerd's
    /// flags, and every meshed pod of the real-platform tiers would be held.
    #[test]
    fn the_validator_runs_the_command_it_is_given() {
        let pod = json!({ "metadata": { "annotations": { "linkerd.io/inject": "enabled" } },
                          "spec": { "containers": [{ "name": "app" }] } });
        let containers = Containers {
            image: "img".into(),
            proxy_args: vec!["proxy".into()],
            validator_command: vec!["/usr/lib/linkerd/linkerd2-network-validator".into()],
            validator_args: vec!["--timeout".into(), "10s".into()],
        };
        let ops = patch_with(&pod, &containers);
        let init = ops
            .iter()
            .find(|op| op["path"] == "/spec/initContainers")
            .expect("the init containers");
        assert_eq!(
            init["value"][0]["command"],
            json!(["/usr/lib/linkerd/linkerd2-network-validator"])
        );
        assert_eq!(init["value"][0]["args"], json!(["--timeout", "10s"]));
        let proxy = ops
            .iter()
            .find(|op| op["path"] == "/spec/containers/-")
            .expect("the proxy");
        assert!(proxy["value"].get("command").is_none(), "{proxy}");
        assert!(patch(&pod)
            .iter()
            .all(|op| !op["value"].to_string().contains("\"command\"")));
    }

    /// Applies the stand-in's adds (whole values or appends) as the apiserver would.
    fn json_patch_like(doc: &mut Value, ops: &[Value]) {
        for op in ops {
            let path = op["path"].as_str().unwrap();
            let value = op["value"].clone();
            match path.strip_suffix("/-") {
                Some(list) => doc
                    .pointer_mut(list)
                    .unwrap()
                    .as_array_mut()
                    .unwrap()
                    .push(value),
                None => doc["spec"]["initContainers"] = value,
            }
        }
    }
}
