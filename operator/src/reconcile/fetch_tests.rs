//! `fetch` against the mock apiserver (`mock_api.rs`): which reads it makes, and how it reads the
//! answers.

use serde_json::{json, Value};

use super::*;
use crate::desired::ConfigDigest;
use crate::reconcile::mock_api::{self, managed_by, nad, Call, NAD_PATH, NS};

const CONFIG: &str = r#"{"cniVersion":"0.3.1","type":"linkerd-cni"}"#;
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// A pod's metadata as a metadata list holds it; `networks`: its Multus annotation, if any.
fn pod(namespace: &str, name: &str, networks: Option<&str>) -> Value {
    let annotations = networks.map(|n| json!({ "k8s.v1.cni.cncf.io/networks": n }));
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
    })
}

/// The users `users` (`anywhere` or not) finds, against a mock answering the metadata list at `uri`
/// with `pods`.
async fn users_listed(anywhere: bool, uri: &str, pods: Vec<Value>) -> Vec<String> {
    let list = json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "1"},
        "items": pods,
    });
    let call = Call::get(uri).header("accept", METADATA_LIST).answer(list);
    let (ctx, api) = mock_api::context(vec![call]);
    let got = users(&ctx, NS, anywhere).await;
    api.finish().await;
    match got.expect("users") {
        Users::Pods(names) => names,
        other => panic!("{other:?}"),
    }
}

/// A live read of a NAD that exists gives what the plan needs of it: owned (our label), its uid
/// (what the guarded apply and delete pin), its config digest and shared annotation; and it marks
/// the kind served again. Regressions: reading the wrong path, losing the uid (writes unguarded),
/// or taking our NAD for foreign.
#[tokio::test]
async fn live_reads_the_nad_that_exists() {
    let shared = json!({ vocab::SHARED_NAD_ANNOTATION: vocab::SHARED_NAD_VALUE });
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).answer(nad(
        "u1",
        "42",
        managed_by(),
        shared,
        CONFIG,
    ))]);
    ctx.health.crd_served(false);
    let got = live(&ctx, NS).await;
    api.finish().await;
    let want = Existing {
        owned: true,
        adoptable: false,
        config: Some(ConfigDigest::of(CONFIG)),
        uid: Some("u1".into()),
        shared: true,
    };
    assert_eq!(got.expect("read"), Some(want));
    assert!(
        !ctx.health.crd_missing(),
        "the answer shows the kind served"
    );
}

/// A NAD without our label is read as not ours (and, with a linkerd-cni config, adoptable).
/// Regression: a foreign NAD taken for ours would be overwritten or deleted.
#[tokio::test]
async fn live_reads_an_unlabelled_nad_as_not_ours() {
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).answer(nad(
        "u9",
        "7",
        json!({}),
        json!({}),
        CONFIG,
    ))]);
    let got = live(&ctx, NS).await.expect("read").expect("a NAD");
    api.finish().await;
    assert!(!got.owned && got.adoptable && !got.shared, "{got:?}");
    assert_eq!(got.uid.as_deref(), Some("u9"));
}

/// The object's 404 means "no NAD": `Ok(None)`, so the plan creates one. Regression: a missing NAD
/// read as an error would never be created.
#[tokio::test]
async fn live_reads_an_object_404_as_no_nad() {
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).fail(404, "NotFound")]);
    let got = live(&ctx, NS).await;
    api.finish().await;
    assert_eq!(got.expect("no error"), None);
    assert!(!ctx.health.crd_missing());
}

/// A 404 naming no object means the kind is not served: `CrdMissing` and the health flag set.
/// Regression: read as "no NAD", the reconcile would try to create one and report a create error.
#[tokio::test]
async fn live_reads_a_kind_404_as_crd_missing() {
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).kind_not_served()]);
    let got = live(&ctx, NS).await;
    api.finish().await;
    assert!(matches!(got, Err(Error::CrdMissing(_))), "{got:?}");
    assert!(ctx.health.crd_missing());
}

/// Any other error is a typed `GetNad` naming the NAD and keeping the apiserver's answer.
/// Regression: a refused read (e.g. RBAC) taken for "no NAD" would make the plan create one.
#[tokio::test]
async fn live_reports_another_error_as_get_nad() {
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).fail(403, "Forbidden")]);
    let got = live(&ctx, NS).await;
    api.finish().await;
    match got {
        Err(Error::GetNad {
            namespace,
            name,
            source: kube::Error::Api(status),
        }) => assert_eq!(
            (namespace.as_str(), name.as_str(), status.code),
            (NS, "linkerd-cni", 403)
        ),
        other => panic!("{other:?}"),
    }
}

/// Until the NAD watch has listed, `existing` reads live; once its cache is trusted it plans from
/// the cache with no request at all. Regressions: a live read per reconcile (10,000 namespaces:
/// 10,000 GETs per resync), or planning from a cache that was never filled.
#[tokio::test]
async fn existing_reads_live_until_the_cache_is_trusted() {
    let (ctx, api) = mock_api::context(vec![Call::get(NAD_PATH).fail(404, "NotFound")]);
    let live = existing(&ctx, NS).await;
    ctx.health.watches_synced();
    let cached = existing(&ctx, NS).await;
    api.finish().await;
    assert_eq!(live.expect("live"), None);
    assert_eq!(cached.expect("cached"), None);
}

/// The users of a namespace's own NAD: a metadata list of that namespace's pods only, and of
/// those, the ones whose networks annotation lists the NAD (in any of Multus' forms), sorted; only pods
/// that can run again (the field selector leaves Succeeded and Failed ones to the apiserver).
/// Regressions: listing whole pods or every namespace (cost), deleting a NAD a pod still lists, or
/// keeping one for a finished pod.
#[tokio::test]
async fn users_lists_the_namespaces_pod_metadata() {
    let pods = vec![
        pod(NS, "web", Some("linkerd-cni")),
        pod(NS, "bare", None),
        pod(NS, "other", Some("elsewhere/linkerd-cni")),
        pod(NS, "api", Some("macvlan, apps/linkerd-cni@net1")),
    ];
    assert_eq!(
        users_listed(false, "/api/v1/namespaces/apps/pods?&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed", pods).await,
        ["api", "web"]
    );
}

/// A NAD that is or was shared is looked up in every namespace; a pod elsewhere that lists it is
/// named `namespace/pod`, and one that lists its own namespace's NAD of the name is not a user.
/// Regression: deleting a shared NAD that pods of other namespaces still list.
#[tokio::test]
async fn users_anywhere_lists_every_namespace() {
    let pods = vec![
        pod(NS, "local", Some("linkerd-cni")),
        pod("web", "remote", Some("apps/linkerd-cni")),
        pod("web", "own", Some("linkerd-cni")),
    ];
    assert_eq!(
        users_listed(
            true,
            "/api/v1/pods?&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
            pods
        )
        .await,
        ["local", "web/remote"]
    );
}

/// A failed pod list is a `ListPods` error saying which list failed. Regression: a failed list
/// read as "no users" would delete a NAD pods still need.
#[tokio::test]
async fn users_reports_a_failed_list() {
    let (ctx, api) = mock_api::context(vec![Call::get(
        "/api/v1/pods?&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed",
    )
    .fail(403, "Forbidden")]);
    let got = users(&ctx, NS, true).await;
    api.finish().await;
    match got {
        Err(Error::ListPods { namespace, .. }) => {
            assert!(namespace.contains("every"), "{namespace}")
        }
        other => panic!("{other:?}"),
    }
}
