//! `apply::carry_out` against the mock apiserver (`mock_api.rs`): the write each plan makes, and
//! what each answer leads to.

use std::time::Instant;

use serde_json::{json, Value};

use super::*;
use crate::desired::Existing;
use crate::reconcile::mock_api::{self, managed_by, nad, Call, MockApi, NADS, NAD_PATH, NS};

const CONFIG: &str = r#"{"cniVersion":"0.3.1","type":"linkerd-cni"}"#;
/// Our field manager, spelled out: renaming it would orphan the fields the old name owns.
const MANAGER: &str = "linkerd-multus-operator";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/apps/events?";

fn namespace() -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": NS, "uid": "ns-uid"}})).expect("namespace")
}

fn wanted() -> Option<Desired<'static>> {
    Some(Desired {
        config: CONFIG,
        shared: false,
    })
}

/// Carries out `plan` (wanting [`wanted`]) against a mock apiserver answering `calls`; returns what
/// `carry_out` returned, once the calls are verified, and the context for what the write left.
async fn carry(plan: Plan, calls: Vec<Call>) -> (Result<Step, Error>, Context) {
    let (ctx, api): (Context, MockApi) = mock_api::context(calls);
    let step = carry_out(&ctx, &namespace(), NS, plan, wanted()).await;
    api.finish().await;
    (step, ctx)
}

/// What the plans would read of `namespace` now: our recorded write, if any (see `recent.rs`).
fn recorded(ctx: &Context, cached: Option<&NadView>) -> Option<Option<Existing>> {
    ctx.recent_writes
        .newer_than_cache(NS, cached, Instant::now())
}

/// Our create or apply as recorded for the plans to read (see `recent.rs`).
fn remembered(ctx: &Context) -> Existing {
    let recorded = recorded(ctx, None).expect("the write is remembered");
    recorded.expect("a NAD present")
}

/// The NAD we want, as sent: only the fields we own, with `uid` pinned when given.
fn our_nad(uid: Option<&str>) -> Value {
    let mut metadata = json!({"name": "linkerd-cni", "namespace": NS, "labels": managed_by()});
    if let Some(uid) = uid {
        metadata["uid"] = uid.into();
    }
    json!({
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": metadata,
        "spec": {"config": CONFIG},
    })
}

/// The create: a POST under our field manager.
fn create_call() -> Call {
    Call::post(format!("{NADS}?&fieldManager={MANAGER}"))
}

/// The apply: a forced server-side apply under our field manager.
fn apply_call() -> Call {
    Call::patch(format!("{NAD_PATH}?&force=true&fieldManager={MANAGER}"))
}

fn delete_call() -> Call {
    Call::delete(format!("{NAD_PATH}?"))
}

/// The uid the plans of these tests saw.
fn u1() -> Option<String> {
    Some("u1".into())
}

fn ours_as_written(uid: &str, resource_version: &str) -> Value {
    nad(uid, resource_version, managed_by(), json!({}), CONFIG)
}

fn event_reason(reason: &'static str) -> impl FnOnce(&Value) + Send + 'static {
    move |body| assert_eq!(body["reason"], reason, "{body}")
}

/// Create is a POST of exactly the owned fields (managed-by label, config; no uid, no annotation)
/// under our field manager, and the created object is remembered until the watch shows it.
/// Regressions: a create that claims fields it does not own, loses the label (our own NAD then
/// reads as foreign), or is not remembered (the next trigger re-creates and gets a 409).
#[tokio::test]
async fn create_posts_the_owned_fields_and_remembers_the_result() {
    let (step, ctx) = carry(
        Plan::Create,
        vec![create_call()
            .header("content-type", "application/json")
            .body(|body| assert_eq!(body, &our_nad(None)))
            .answer(ours_as_written("u1", "10"))],
    )
    .await;
    assert_eq!(step.expect("created"), Step::Done);
    let remembered = remembered(&ctx);
    assert_eq!(
        (remembered.owned, remembered.uid.as_deref()),
        (true, Some("u1"))
    );
}

/// A create answered 409 (a NAD appeared since the decision) is `Raced`, not an error, and nothing
/// is remembered. Regression: the caller would not plan again from a live read, so a foreign NAD
/// that appeared would go unreported (or the reconcile fail and retry forever).
#[tokio::test]
async fn a_create_refused_as_already_there_is_raced() {
    let (step, ctx) = carry(Plan::Create, vec![create_call().fail(409, "AlreadyExists")]).await;
    assert_eq!(step.expect("not an error"), Step::Raced);
    assert_eq!(recorded(&ctx, None), None);
}

/// An update is a forced server-side apply under our field manager, pinned to the uid seen (so it
/// cannot land on another object of the name), and the result is remembered. Regressions: an
/// unforced apply (conflicts with a hand edit fail forever), another manager (fields left owned
/// twice), a lost uid pin (writes into a foreign NAD recreated under the name).
#[tokio::test]
async fn update_is_a_forced_server_side_apply_pinned_to_the_uid() {
    let (step, ctx) = carry(
        Plan::Update { uid: u1() },
        vec![apply_call()
            .header("content-type", "application/apply-patch+yaml")
            .body(|body| assert_eq!(body, &our_nad(Some("u1"))))
            .answer(ours_as_written("u1", "11"))],
    )
    .await;
    assert_eq!(step.expect("applied"), Step::Done);
    let remembered = remembered(&ctx);
    assert_eq!(remembered.uid.as_deref(), Some("u1"));
}

/// An apply refused as invalid (422, e.g. the uid pin no longer matching) is an `ApplyNad` error
/// keeping the apiserver's answer; no Event, nothing remembered. Regression: a refused write read
/// as done (the namespace left without its NAD), or taken for a missing CRD.
#[tokio::test]
async fn an_apply_refused_as_invalid_is_an_apply_error() {
    let (step, ctx) = carry(
        Plan::Update { uid: u1() },
        vec![apply_call().fail(422, "Invalid")],
    )
    .await;
    match step {
        Err(Error::ApplyNad {
            namespace,
            source: kube::Error::Api(status),
            ..
        }) => assert_eq!((namespace.as_str(), status.code), (NS, 422)),
        other => panic!("{other:?}"),
    }
    assert_eq!(recorded(&ctx, None), None);
    assert!(!ctx.health.crd_missing());
}

/// An apply answered "kind not served" is `CrdMissing`, flags the health and says so in a Warning
/// Event on the namespace. Regression: a missing CRD reported as an apply failure, or silently.
#[tokio::test]
async fn an_apply_of_an_unserved_kind_reports_the_crd_missing() {
    let (step, ctx) = carry(
        Plan::Update { uid: None },
        vec![
            apply_call().kind_not_served(),
            Call::post(EVENTS).body(event_reason(crate::events::REASON_CRD_MISSING)),
        ],
    )
    .await;
    assert!(matches!(step, Err(Error::CrdMissing(_))), "{step:?}");
    assert!(ctx.health.crd_missing());
}

/// Adopting is the same pinned, forced apply onto the unowned NAD's uid, then a Normal Event.
/// Regression: an adoption unannounced, or not pinned to the NAD that was judged adoptable.
#[tokio::test]
async fn adopt_applies_onto_the_uid_and_says_so() {
    let (step, _) = carry(
        Plan::Adopt { uid: "u7".into() },
        vec![
            apply_call()
                .body(|body| assert_eq!(body, &our_nad(Some("u7"))))
                .answer(ours_as_written("u7", "12")),
            Call::post(EVENTS).body(event_reason(crate::events::REASON_ADOPTED)),
        ],
    )
    .await;
    assert_eq!(step.expect("adopted"), Step::Done);
}

/// A foreign NAD is reported in a Warning Event and never written: the Event is the only call.
/// Regression: any write into someone else's NAD.
#[tokio::test]
async fn a_foreign_nad_is_reported_and_never_written() {
    let (step, _) = carry(
        Plan::Foreign,
        vec![Call::post(EVENTS).body(event_reason(crate::events::REASON_FOREIGN_NAD))],
    )
    .await;
    assert_eq!(step.expect("reported"), Step::Done);
}

/// A delete is guarded by a uid precondition (a foreign NAD recreated under the name survives it),
/// and is remembered until the watch shows it. Regressions: an unguarded delete, or a forgotten
/// one (the next trigger plans from the stale cache and deletes again, answered 404).
#[tokio::test]
async fn delete_is_guarded_by_the_uid_and_remembered() {
    let deleted = delete_call()
        .body(|body| assert_eq!(body["preconditions"], json!({"uid": "u1"}), "{body}"))
        .answer(json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}));
    assert_eq!(delete_answered(deleted).await.expect("deleted"), Step::Done);
}

/// A delete answered 404 (gone already) is done, not an error, and remembered like a delete.
/// Regression: a NAD deleted by someone else would fail the reconcile and retry forever.
#[tokio::test]
async fn a_delete_of_a_nad_gone_already_is_done() {
    let gone = delete_call().fail(404, "NotFound");
    assert_eq!(
        delete_answered(gone).await.expect("not an error"),
        Step::Done
    );
}

/// Carries out the delete of our NAD of uid u1, the apiserver answering `call`, and checks the
/// delete is remembered: while the cache still shows that NAD, plans read it as gone.
async fn delete_answered(call: Call) -> Result<Step, Error> {
    let (step, ctx) = carry(Plan::Delete { uid: u1() }, vec![call]).await;
    let cached = NadView::of(&serde_json::from_value(ours_as_written("u1", "11")).expect("nad"));
    let read = recorded(&ctx, Some(&cached));
    assert_eq!(read, Some(None), "the delete is remembered");
    step
}
