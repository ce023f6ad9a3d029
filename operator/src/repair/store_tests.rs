use std::sync::Arc;

use kube::runtime::watcher::Event;

use super::*;

fn pod(namespace: &str, name: &str, node: &str, ready: bool) -> WatchedPod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": namespace, "uid": format!("{namespace}-{name}"),
                     "resourceVersion": "1"},
        "spec": {"nodeName": node, "containers": [{"name": "app"}]},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .expect("pod")
}

fn names(store: &PodStore) -> Vec<String> {
    let mut names: Vec<_> = store
        .iter()
        .map(|p| format!("{}/{}", p.namespace, p.name()))
        .collect();
    names.sort();
    names
}

#[test]
fn events_keep_one_pod_per_namespace_and_name() {
    let mut store = PodStore::default();
    let judge = store.apply(Event::Apply(pod("a", "p", "n1", false)));
    assert_eq!(judge, Applied::Judge("a".into(), "p".into()));
    store.apply(Event::Apply(pod("b", "p", "n1", false)));
    // A change replaces the pod.
    store.apply(Event::Apply(pod("a", "p", "n1", true)));
    assert_eq!(names(&store), ["a/p", "b/p"]);
    assert!(store.get("a", "p").expect("a/p").ready);
    assert_eq!(store.get("a", "q"), None);
    match store.apply(Event::Delete(pod("a", "p", "n1", true))) {
        Applied::Gone(gone) => assert_eq!(gone.uid(), "a-p"),
        other => panic!("a delete gave {other:?}"),
    }
    assert_eq!(names(&store), ["b/p"]);
    assert_eq!(store.get("a", "p"), None);
}

/// A re-list replaces the store once complete: pods deleted while the watch was down go then, and
/// until then the pods of the last complete list stay.
#[test]
fn a_relist_replaces_the_pods_when_it_completes() {
    let mut store = PodStore::default();
    for name in ["p", "q"] {
        store.apply(Event::Apply(pod("a", name, "n1", false)));
    }
    assert_eq!(store.apply(Event::Init), Applied::Nothing);
    store.apply(Event::InitApply(pod("a", "q", "n1", true)));
    store.apply(Event::InitApply(pod("c", "r", "n2", false)));
    // Judged as listed; the old view holds until the list is complete.
    assert!(store.get("a", "q").expect("listed").ready);
    assert!(store.get("c", "r").is_some());
    assert_eq!(names(&store), ["a/p", "a/q"]);
    assert_eq!(store.apply(Event::InitDone), Applied::Listed(2));
    assert_eq!(names(&store), ["a/q", "c/r"]);
    assert_eq!(store.get("a", "p"), None);
}

/// The pods of a namespace share one copy of its name, and of their node's; a name no pod holds is
/// forgotten at the next complete list.
#[test]
fn pods_share_their_namespace_and_node_names() {
    let mut store = PodStore::default();
    store.apply(Event::Apply(pod("a", "p", "n1", false)));
    store.apply(Event::Apply(pod("a", "q", "n1", false)));
    let (p, q) = (store.get("a", "p").unwrap(), store.get("a", "q").unwrap());
    assert!(Arc::ptr_eq(&p.namespace, &q.namespace));
    assert!(Arc::ptr_eq(
        p.node.as_ref().unwrap(),
        q.node.as_ref().unwrap()
    ));
    store.apply(Event::Init);
    store.apply(Event::InitApply(pod("b", "p", "n2", false)));
    store.apply(Event::InitDone);
    let kept: Vec<&str> = {
        let mut n: Vec<&str> = store.names.iter().map(|n| &**n).collect();
        n.sort();
        n
    };
    assert_eq!(kept, ["b", "n2"]);
}

/// Pods of one template share one copy of their containers' view (kept only for a proxy or a
/// validator); a view no pod holds is forgotten at the next complete list.
#[test]
fn pods_share_their_containers_view() {
    let meshed = |name: &str, proxy_uid: u32| -> WatchedPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "a", "uid": name, "resourceVersion": "1"},
            "spec": {"containers": [
                {"name": "app"},
                {"name": "linkerd-proxy", "securityContext": {"runAsUser": proxy_uid}},
            ]},
        }))
        .expect("pod")
    };
    let mut store = PodStore::default();
    store.apply(Event::Apply(meshed("p", 2102)));
    store.apply(Event::Apply(meshed("q", 2102)));
    store.apply(Event::Apply(meshed("r", 3102)));
    store.apply(Event::Apply(pod("a", "plain", "n1", false)));
    let view = |name: &str| store.get("a", name).unwrap().view.clone();
    let (p, q, r) = (view("p").unwrap(), view("q").unwrap(), view("r").unwrap());
    assert!(Arc::ptr_eq(&p, &q));
    assert!(!Arc::ptr_eq(&p, &r));
    assert_eq!(r.proxy_uid(), Some(3102));
    assert_eq!(view("plain"), None);
    assert_eq!(store.views.len(), 2);
    drop((p, q, r));
    store.apply(Event::Init);
    store.apply(Event::InitApply(meshed("r", 3102)));
    store.apply(Event::InitDone);
    assert_eq!(store.views.len(), 1);
}
