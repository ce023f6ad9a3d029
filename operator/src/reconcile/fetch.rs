//! Fetch: the namespace's NAD as it exists, from the watch's store when it can be trusted, else read
//! live.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::runtime::reflector::ObjectRef;
use kube::Api;

use super::Context;
use crate::desired::{Existing, Users};
use crate::error::{is_api_missing, is_not_found, Error};
use crate::nad_cache;

/// The NAD named `--nad-name` in `namespace`, if any. Planned from the watch cache: a namespace whose
/// NAD is up to date costs no request. A stale cache is safe: writes are guarded (see
/// `Plan::Apply`), and the watch event that makes it fresh triggers this namespace again.
pub async fn existing(ctx: &Context, namespace: &str) -> Result<Option<Existing>, Error> {
    match cached(ctx, namespace) {
        Some(e) => Ok(e),
        None => live(ctx, namespace).await,
    }
}

/// The namespace's NAD as the watch last saw it, or as our own write left it when the watch has not
/// shown that yet (`recent`); `None` when the watch cannot be trusted (not listed yet, or failing,
/// e.g. without the CRD), so the caller reads the NAD live.
fn cached(ctx: &Context, namespace: &str) -> Option<Option<Existing>> {
    if !ctx.health.nad_cache_trusted() {
        return None;
    }
    let key = ObjectRef::new(&ctx.settings.nad.name).within(namespace);
    let seen = ctx.nads.get(&key);
    let ours = ctx
        .recent_writes
        .newer_than_cache(namespace, seen.as_deref(), Instant::now());
    Some(ours.unwrap_or_else(|| seen.map(|nad| nad.existing())))
}

/// Reads the live NAD. Read untyped, so a foreign NAD of an unexpected shape is still recognised as
/// foreign.
pub async fn live(ctx: &Context, namespace: &str) -> Result<Option<Existing>, Error> {
    let nad_name = &ctx.settings.nad.name;
    match ctx.nad_api(namespace).get(nad_name).await {
        Ok(obj) => {
            ctx.health.crd_served(true);
            Ok(Some(nad_cache::existing(&obj)))
        }
        Err(e) if is_api_missing(&e) => {
            ctx.health.crd_served(false);
            Err(Error::CrdMissing(e))
        }
        Err(e) if is_not_found(&e) => {
            ctx.health.crd_served(true);
            Ok(None)
        }
        Err(source) => Err(Error::GetNad {
            namespace: namespace.to_string(),
            name: nad_name.clone(),
            source,
        }),
    }
}

/// The pods that still list our NAD of `namespace` and can still get a sandbox (not Succeeded or
/// Failed): those of `namespace`, or with `anywhere` (a NAD
/// that is or was shared) those of every namespace, named `pod-namespace/pod` when from elsewhere. A
/// metadata list, asked only for a namespace that no longer wants its NAD yet still holds it (rare
/// and transient), and asked again on a short requeue until none is left: the operator never watches
/// pods, which would cost a cache of every pod in the cluster for the sake of a few namespaces.
pub async fn users(ctx: &Context, namespace: &str, anywhere: bool) -> Result<Users, Error> {
    let api = if anywhere {
        Api::<Pod>::all(ctx.client.clone())
    } else {
        Api::<Pod>::namespaced(ctx.client.clone(), namespace)
    };
    let can_run = ListParams::default().fields(rules::attachment::PODS_THAT_CAN_RUN_AGAIN);
    let pods = api
        .list_metadata(&can_run)
        .await
        .map_err(|source| Error::ListPods {
            namespace: if anywhere {
                "every namespace (the NAD is shared)".to_string()
            } else {
                format!("namespace {namespace}")
            },
            source,
        })?;
    let nad = &ctx.settings.nad.name;
    let mut names: Vec<String> = pods
        .items
        .iter()
        .filter_map(|p| {
            let pod_ns = p.metadata.namespace.as_deref().unwrap_or(namespace);
            let name = p.metadata.name.as_deref()?;
            rules::attachment::uses_nad(&p.metadata, nad, namespace, pod_ns).then(|| {
                if pod_ns == namespace {
                    name.to_string()
                } else {
                    format!("{pod_ns}/{name}")
                }
            })
        })
        .collect();
    names.sort();
    Ok(Users::Pods(names))
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
