//! A **stand-in for OpenShift's restricted SCC** (not OpenShift), as far as uids go: a validating
//! webhook that rejects a pod when any of its containers or init containers would run as a uid
//! (its own `securityContext.runAsUser`, else the pod's) outside its namespace's
//! `openshift.io/sa.scc.uid-range`. A namespace without a range is not checked. Left out: defaulting
//! uids, groups, capabilities, SELinux and every other SCC rule.

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use serde_json::Value;

use super::server::{allowed, denied};

/// The admission response for `request`, reading the namespace's range through `client`.
pub async fn respond(client: Client, request: Value) -> Value {
    let namespace = request["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let range = match Api::<Namespace>::all(client).get(&namespace).await {
        Ok(ns) => ns
            .metadata
            .annotations
            .and_then(|a| a.get(vocab::OPENSHIFT_UID_RANGE_ANNOTATION).cloned()),
        Err(e) => return denied(&format!("scc stand-in: namespace {namespace}: {e}")),
    };
    match range.map(|r| violations(&request["object"], &r)) {
        Some(v) if !v.is_empty() => denied(&format!("scc stand-in: {}", v.join("; "))),
        _ => allowed(Vec::new()),
    }
}

/// Each container whose uid lies outside `range` (`<first>/<size>`; a malformed range rejects all).
pub fn violations(pod: &Value, range: &str) -> Vec<String> {
    let bounds = range
        .split_once('/')
        .and_then(|(f, s)| Some((f.trim().parse::<u64>().ok()?, s.trim().parse::<u64>().ok()?)));
    let pod_uid = pod["spec"]["securityContext"]["runAsUser"].as_u64();
    let mut out = Vec::new();
    for list in ["initContainers", "containers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            let Some(uid) = c["securityContext"]["runAsUser"].as_u64().or(pod_uid) else {
                continue;
            };
            if !bounds.is_some_and(|(first, size)| uid >= first && uid - first < size) {
                out.push(format!(
                    "{list} {} runs as {uid}, outside the uid range {range}",
                    c["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rejects_uids_outside_the_range() {
        let pod = json!({ "spec": {
            "securityContext": { "runAsUser": 1000650000 },
            "initContainers": [{ "name": "v", "securityContext": { "runAsUser": 65534 } }],
            "containers": [{ "name": "app" }, { "name": "p", "securityContext": { "runAsUser": 1000659999 } }],
        }});
        assert_eq!(
            violations(&pod, "1000650000/10000"),
            vec!["initContainers v runs as 65534, outside the uid range 1000650000/10000"]
        );
        assert_eq!(violations(&pod, "1000650000/9999").len(), 2);
    }
}
