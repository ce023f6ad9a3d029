//! The repairer's view of the NADs named `--nad-name` (nad mode): which namespaces hold one, and
//! whether the kind is served at all. Its own metadata watch (names and namespaces only), so it
//! needs nothing from the controller, and [`NadWatch::apply`] is pure and tested here.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use super::decide::NadsSeen;
use crate::error::watch_api_missing;

/// One answer of the NAD watch, reduced to what the view keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NadEvent {
    Apply(String),
    Delete(String),
    Init,
    InitApply(String),
    InitDone,
    /// The watch failed; `api_missing`: because the kind is not served.
    Failed {
        api_missing: bool,
    },
}

/// [`NadsSeen`] kept current from [`NadEvent`]s.
#[derive(Clone, Debug, Default)]
pub struct NadWatch {
    pub seen: NadsSeen,
    /// A re-list in progress: replaces `seen.namespaces` once done.
    relisting: Option<BTreeSet<String>>,
}

impl NadWatch {
    pub fn apply(&mut self, event: NadEvent) {
        let seen = &mut self.seen;
        match event {
            NadEvent::Failed { api_missing } => {
                if api_missing {
                    seen.served = Some(false);
                }
                return;
            }
            NadEvent::Apply(ns) => {
                seen.namespaces.insert(ns);
            }
            NadEvent::Delete(ns) => {
                seen.namespaces.remove(&ns);
            }
            // Sent before the list is asked for: says nothing about the kind yet.
            NadEvent::Init => {
                self.relisting = Some(BTreeSet::new());
                return;
            }
            NadEvent::InitApply(ns) => {
                self.relisting.get_or_insert_default().insert(ns);
            }
            NadEvent::InitDone => seen.namespaces = self.relisting.take().unwrap_or_default(),
        }
        // Only a served kind lists or watches.
        seen.served = Some(true);
    }
}

/// The watch of NADs named `name` of the kind `resource` (`--nad-api-group`), as [`NadEvent`]s.
pub fn watch(
    client: Client,
    resource: &ApiResource,
    name: &str,
) -> impl Stream<Item = NadEvent> + Send + 'static {
    // Metadata only: the namespaces are all it keeps.
    let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client, resource);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let ns = |meta: &kube::api::ObjectMeta| meta.namespace.clone().unwrap_or_default();
    watcher(api, config)
        .default_backoff()
        .map(move |event| match event {
            Ok(watcher::Event::Apply(o)) => NadEvent::Apply(ns(&o.metadata)),
            Ok(watcher::Event::Delete(o)) => NadEvent::Delete(ns(&o.metadata)),
            Ok(watcher::Event::Init) => NadEvent::Init,
            Ok(watcher::Event::InitApply(o)) => NadEvent::InitApply(ns(&o.metadata)),
            Ok(watcher::Event::InitDone) => NadEvent::InitDone,
            Err(e) => {
                let api_missing = watch_api_missing(&e);
                tracing::debug!(error = %e, api_missing, "watching NADs for repair failed; retrying");
                NadEvent::Failed { api_missing }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaces(w: &NadWatch) -> Vec<&str> {
        w.seen.namespaces.iter().map(String::as_str).collect()
    }

    /// Unknown until the first answer; a missing kind is said as such; a re-list replaces the set
    /// (a NAD deleted while the watch was down is gone); a later failure keeps the last list.
    #[test]
    fn follows_the_watch() {
        let mut w = NadWatch::default();
        assert_eq!(w.seen.served, None);
        w.apply(NadEvent::Failed { api_missing: false });
        assert_eq!(
            w.seen.served, None,
            "an error that is not a missing kind says nothing"
        );
        w.apply(NadEvent::Failed { api_missing: true });
        assert_eq!(w.seen.served, Some(false));
        w.apply(NadEvent::Init);
        assert_eq!(
            w.seen.served,
            Some(false),
            "a list begun is not a kind served"
        );
        for e in [
            NadEvent::Init,
            NadEvent::InitApply("a".into()),
            NadEvent::InitApply("b".into()),
        ] {
            w.apply(e);
        }
        assert_eq!(
            namespaces(&w),
            Vec::<&str>::new(),
            "not before the list is done"
        );
        w.apply(NadEvent::InitDone);
        assert_eq!(
            (w.seen.served, namespaces(&w)),
            (Some(true), vec!["a", "b"])
        );
        w.apply(NadEvent::Apply("c".into()));
        w.apply(NadEvent::Delete("a".into()));
        assert_eq!(namespaces(&w), ["b", "c"]);
        w.apply(NadEvent::Failed { api_missing: false });
        assert_eq!(
            (w.seen.served, namespaces(&w)),
            (Some(true), vec!["b", "c"])
        );
        for e in [
            NadEvent::Init,
            NadEvent::InitApply("c".into()),
            NadEvent::InitDone,
        ] {
            w.apply(e);
        }
        assert_eq!(namespaces(&w), ["c"]);
        w.apply(NadEvent::Failed { api_missing: true });
        assert_eq!(w.seen.served, Some(false), "the CRD deleted");
    }
}
