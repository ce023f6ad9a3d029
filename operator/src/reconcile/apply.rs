//! Apply: carry out the [`Plan`]: a create for a new NAD, a forced server-side apply pinned to the uid
//! seen for ours (or one being adopted), a uid-guarded delete.

use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, TypeMeta,
};

use super::{report, Context};
use crate::desired::{self, Desired, Plan};
use crate::error::{is_api_missing, is_not_found, Error};
use crate::nad_cache::NadView;
use crate::nad_read::NadRead;

/// What carrying out a plan left to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Done,
    /// A create found a NAD of the name already there (created since the decision): plan again
    /// from a live read; it is never written into.
    Raced,
    /// The NAD is kept for pods that still use it: look again soon.
    WaitForUsers,
}

/// Does what `plan` says to `namespace`'s NAD; `desired` is the wanted one (None: no NAD wanted).
pub async fn carry_out(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    plan: Plan,
    desired: Option<Desired<'_>>,
) -> Result<Step, Error> {
    // Only the plans that write (Create/Update/Adopt) read it, and those come with a NAD wanted.
    let desired = desired.unwrap_or_default();
    if !matches!(plan, Plan::KeepInUse { .. }) {
        // Kept no longer (or not now): a later opt-out with the same pods is reported afresh.
        ctx.in_use_reported.forget(namespace);
    }
    match plan {
        // FindUsers is resolved by the caller before carrying out.
        Plan::Nothing | Plan::FindUsers => Ok(Step::Done),
        Plan::Create => create(ctx, ns, namespace, desired).await,
        Plan::Update { uid } => {
            apply(ctx, ns, namespace, desired, uid).await?;
            Ok(Step::Done)
        }
        Plan::Adopt { uid } => {
            apply(ctx, ns, namespace, desired, Some(uid)).await?;
            report::adopted(ctx, ns, namespace).await;
            Ok(Step::Done)
        }
        Plan::KeepInUse { pods } => {
            report::in_use(ctx, ns, namespace, &pods).await;
            Ok(Step::WaitForUsers)
        }
        Plan::Delete { uid } => {
            delete(ctx, namespace, uid).await?;
            Ok(Step::Done)
        }
        Plan::Foreign => {
            report::foreign_nad(ctx, ns, namespace).await;
            Ok(Step::Done)
        }
    }
}

/// The desired NAD as an untyped object of the served kind; `only_onto` pins the uid (see
/// `desired::desired_nad`).
fn desired_object(
    ctx: &Context,
    namespace: &str,
    wanted: Desired<'_>,
    only_onto: Option<String>,
) -> DynamicObject {
    let nad_name = &ctx.settings.nad.name;
    let config = wanted.config.to_string();
    let nad = desired::desired_nad(namespace, nad_name, config, wanted.shared, only_onto);
    // Built field by field, not through a serde_json::Value of the typed NAD (a ConfigMap edit
    // builds one per enabled namespace).
    let resource = &ctx.settings.nad_resource;
    DynamicObject {
        types: Some(TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        }),
        metadata: nad.metadata,
        data: serde_json::json!({ "spec": { "config": nad.spec.config } }),
    }
}

/// Creates the NAD. The apiserver refuses a create when the name is taken, so a NAD that appeared
/// since the decision (someone else's, or ours not yet seen by the watch) is never written into.
async fn create(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    desired: Desired<'_>,
) -> Result<Step, Error> {
    let nad_name = &ctx.settings.nad.name;
    let nad = desired_object(ctx, namespace, desired, None);
    let params = PostParams {
        field_manager: Some(vocab::FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    ctx.metrics.wrote("create");
    // kube's `create` sends and answers with one type: the untyped one here (creates are one per
    // namespace; applies, one per namespace per edit, are answered narrowly).
    let api = Api::<DynamicObject>::namespaced_with(
        ctx.client.clone(),
        namespace,
        &ctx.settings.nad_resource,
    );
    match api.create(&params, &nad).await {
        Ok(created) => {
            let view = NadView::of(&NadRead::from(created));
            ctx.recent_writes.wrote(namespace, view, Instant::now());
            ctx.health.crd_served(true);
            tracing::info!(namespace, nad = %nad_name, "NAD created");
            Ok(Step::Done)
        }
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            tracing::info!(namespace, nad = %nad_name, "NAD appeared before the create; planning again");
            Ok(Step::Raced)
        }
        Err(e) => Err(write_failed(ctx, ns, namespace, e, Write::Create).await),
    }
}

/// Server-side applies the desired NAD, forced but only onto the object of uid `only_onto` (ours as
/// last seen, or the one being adopted; see `desired::desired_nad`).
async fn apply(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    desired: Desired<'_>,
    only_onto: Option<String>,
) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad.name;
    let nad = desired_object(ctx, namespace, desired, only_onto);
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    ctx.metrics.wrote("apply");
    match ctx
        .nad_api(namespace)
        .patch(nad_name, &params, &Patch::Apply(&nad))
        .await
    {
        Ok(applied) => {
            let view = NadView::of(&applied);
            ctx.recent_writes.wrote(namespace, view, Instant::now());
            ctx.health.crd_served(true);
            tracing::info!(namespace, nad = %nad_name, "NAD applied");
            Ok(())
        }
        Err(e) => Err(write_failed(ctx, ns, namespace, e, Write::Apply).await),
    }
}

enum Write {
    Create,
    Apply,
}

/// The error of a failed create or apply; a kind that is not served is reported on the namespace.
async fn write_failed(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    e: kube::Error,
    write: Write,
) -> Error {
    if is_api_missing(&e) {
        ctx.health.crd_served(false);
        let err = Error::CrdMissing(e);
        report::crd_missing(ctx, ns, &err, None).await;
        return err;
    }
    let (namespace, name, source) = (namespace.to_string(), ctx.settings.nad.name.clone(), e);
    match write {
        Write::Create => Error::CreateNad {
            namespace,
            name,
            source,
        },
        Write::Apply => Error::ApplyNad {
            namespace,
            name,
            source,
        },
    }
}

/// Deletes our NAD, guarded by its uid so a foreign NAD recreated under the name survives.
async fn delete(ctx: &Context, namespace: &str, uid: Option<String>) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad.name;
    let api = ctx.nad_api(namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    ctx.metrics.wrote("delete");
    match api.delete(nad_name, &params).await {
        Ok(_) => tracing::info!(namespace, nad = %nad_name, "NAD deleted"),
        // Gone already: the same for the plans that follow.
        Err(e) if is_not_found(&e) => {}
        Err(source) => {
            return Err(Error::DeleteNad {
                namespace: namespace.to_string(),
                name: nad_name.clone(),
                source,
            })
        }
    }
    ctx.recent_writes.deleted(namespace, uid, Instant::now());
    Ok(())
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
