//! The binding's namespace label (`vocab::ADMISSION_NAMESPACE_LABEL`): on every enabled namespace
//! while the MutatingAdmissionPolicy is live, on none otherwise (`rules::admission_mode::wants_label`),
//! by server-side apply of that one label, so the namespace's other labels stay their owners'.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::Api;
use rules::admission_mode::{labelled, wants_label};
use serde_json::json;

use super::Context;
use crate::error::Error;

/// Puts the label on `ns` or takes it off, as the live path wants; nothing is sent when it is as
/// wanted, or while the live path is not known yet.
pub async fn sync(ctx: &Context, ns: &Namespace, name: &str) -> Result<(), Error> {
    let Some(live) = ctx.admission_live.borrow().clone() else {
        return Ok(());
    };
    let wanted = wants_label(&ns.metadata, &ctx.settings.nad.linkerd_namespace, &live);
    let value = &ctx.admission_label_value;
    if wanted == labelled(&ns.metadata, value) {
        return Ok(());
    }
    let mut body = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } });
    if wanted {
        body["metadata"]["labels"] = json!({ vocab::ADMISSION_NAMESPACE_LABEL: value });
    }
    // Applying without the label gives it up: the apiserver removes it if no one else set it.
    let params = PatchParams::apply(vocab::FIELD_MANAGER).force();
    Api::<Namespace>::all(ctx.client.clone())
        .patch(name, &params, &Patch::Apply(&body))
        .await
        .map_err(|source| Error::LabelNamespace {
            namespace: name.to_string(),
            source,
        })?;
    tracing::info!(
        namespace = name,
        labelled = wanted,
        "admission label applied"
    );
    Ok(())
}
