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
pub const VALIDATOR_UID: u64 = 65534;

/// The admission response for `request` (an AdmissionReview request).
pub async fn respond(request: Value) -> Value {
    allowed(patch(&request["object"]))
}

/// The JSON patch operations injecting `pod` (none when it is not to be injected).
pub fn patch(pod: &Value) -> Vec<Value> {
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
        .and_then(|u| u.parse::<u64>().ok())
        .unwrap_or(vocab::DEFAULT_PROXY_UID as u64);
    let restricted = |user: u64, group: Option<u64>| {
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
    let mut proxy = json!({
        "name": vocab::PROXY_CONTAINER,
        "image": "example.invalid/linkerd-proxy",
        "securityContext": restricted(uid, None),
    });
    let validator = json!({
        "name": vocab::VALIDATOR_CONTAINER,
        "image": "example.invalid/linkerd-network-validator",
        "securityContext": restricted(VALIDATOR_UID, Some(VALIDATOR_UID)),
    });
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
