//! Fetch: the namespace's NAD as it exists, from the watch's store when it can be trusted, else read
//! live.

use kube::runtime::reflector::ObjectRef;

use super::Context;
use crate::desired::{ConfigDigest, Existing};
use crate::error::{is_api_missing, is_not_found, Error};
use crate::nad_cache::spec_config;

/// The NAD named `--nad-name` in `namespace`, if any. Planned from the watch cache: a namespace whose
/// NAD is up to date costs no request. A stale cache is safe: writes are guarded (see
/// `Plan::Apply`), and the watch event that makes it fresh triggers this namespace again.
pub async fn existing(ctx: &Context, namespace: &str) -> Result<Option<Existing>, Error> {
    match cached(ctx, namespace) {
        Some(e) => Ok(e),
        None => live(ctx, namespace).await,
    }
}

/// The namespace's NAD as the watch last saw it; `None` when the watch cannot be trusted (not
/// listed yet, or failing, e.g. without the CRD), so the caller reads the NAD live.
fn cached(ctx: &Context, namespace: &str) -> Option<Option<Existing>> {
    if !ctx.health.nad_cache_trusted() {
        return None;
    }
    let key = ObjectRef::new(&ctx.settings.nad_name).within(namespace);
    Some(ctx.nads.get(&key).map(|nad| nad.existing()))
}

/// Reads the live NAD. Read untyped, so a foreign NAD of an unexpected shape is still recognised as
/// foreign.
async fn live(ctx: &Context, namespace: &str) -> Result<Option<Existing>, Error> {
    let nad_name = &ctx.settings.nad_name;
    match ctx.nad_api(namespace).get(nad_name).await {
        Ok(obj) => {
            ctx.health.crd_served(true);
            Ok(Some(Existing {
                owned: vocab::is_managed_by_us(obj.metadata.labels.as_ref()),
                config: spec_config(&obj.data).map(ConfigDigest::of),
                uid: obj.metadata.uid.clone(),
            }))
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
