//! Apply: carry out the [`Plan`] with server-side apply or a uid-guarded delete.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};

use super::{report, Context};
use crate::desired::{self, Existing, Plan};
use crate::error::{is_api_missing, is_not_found, Error};

/// Does what `plan` says to `namespace`'s NAD; `config` is the desired one (None: no NAD wanted).
pub async fn carry_out(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    plan: Plan,
    config: Option<String>,
    existing: Option<Existing>,
) -> Result<(), Error> {
    match plan {
        Plan::Nothing => Ok(()),
        Plan::Apply { take_over } => {
            let config = config.unwrap_or_default();
            let uid = existing.and_then(|e| e.uid).filter(|_| take_over);
            apply(ctx, ns, namespace, config, uid).await
        }
        Plan::Delete { uid } => delete(ctx, namespace, uid).await,
        Plan::Foreign => {
            report::foreign_nad(ctx, ns, namespace).await;
            Ok(())
        }
    }
}

/// Server-side applies the desired NAD. With `take_over` (the uid of our NAD as last seen), the apply
/// forces, but only onto that object (see `desired::desired_nad`).
async fn apply(
    ctx: &Context,
    ns: &Namespace,
    namespace: &str,
    config: String,
    take_over: Option<String>,
) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad_name;
    let created = take_over.is_none();
    let desired = desired::desired_nad(namespace, nad_name, config, take_over);
    let mut nad = serde_json::to_value(desired).map_err(|e| Error::ApplyNad {
        namespace: namespace.to_string(),
        name: nad_name.clone(),
        source: kube::Error::SerdeError(e),
    })?;
    nad["apiVersion"] = ctx.settings.nad_resource.api_version.clone().into();
    let api = ctx.nad_api(namespace);
    let mut params = PatchParams::apply(vocab::FIELD_MANAGER);
    if !created {
        params = params.force();
    }
    ctx.metrics.wrote("apply");
    match api.patch(nad_name, &params, &Patch::Apply(&nad)).await {
        Ok(_) => {
            ctx.health.crd_served(true);
            tracing::info!(namespace, nad = %nad_name, created, "NAD applied");
            Ok(())
        }
        Err(e) if is_api_missing(&e) => {
            ctx.health.crd_served(false);
            let err = Error::CrdMissing(e);
            report::crd_missing(ctx, ns, &err, None).await;
            Err(err)
        }
        Err(source) => Err(Error::ApplyNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}

/// Deletes our NAD, guarded by its uid so a foreign NAD recreated under the name survives.
async fn delete(ctx: &Context, namespace: &str, uid: Option<String>) -> Result<(), Error> {
    let nad_name = &ctx.settings.nad_name;
    let api = ctx.nad_api(namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    ctx.metrics.wrote("delete");
    match api.delete(nad_name, &params).await {
        Ok(_) => {
            tracing::info!(namespace, nad = %nad_name, "NAD deleted");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::DeleteNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}
