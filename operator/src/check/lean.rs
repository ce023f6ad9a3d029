//! Lists that keep no managedFields: how `check`, and the repairing leader every minute
//! (`published.rs`), read the namespaces and NADs, 10,000 of each at OpenShift's maximums. A page at a
//! time, each object stripped as its page arrives: the whole list is never held with them (they are
//! about half of such an object's bytes), and the allocator keeps what a process ever held.

use std::fmt::Debug;

use kube::api::ListParams;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// Objects per page.
const PAGE: u32 = 500;

/// Every object `params` selects, without its managedFields.
pub async fn list<K>(api: &Api<K>, params: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = params.clone().limit(PAGE);
    let mut all = Vec::new();
    loop {
        let page = api.list(&params).await?;
        all.extend(page.items.into_iter().map(|mut o| {
            o.meta_mut().managed_fields = None;
            o
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(all),
        }
    }
}
