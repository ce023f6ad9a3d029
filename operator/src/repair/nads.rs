//! The repairer's view of the NADs named `--nad-name` (nad mode): which namespaces hold one, and
//! whether the kind is served at all. Fed from the controller's NAD watch ([`NadEvent::of`]; it
//! watches the same NADs), so the apiserver sends each NAD change once to this process, not twice;
//! [`NadWatch::apply`] is pure and tested here.

use std::collections::BTreeSet;

use kube::runtime::watcher;

use super::decide::NadsSeen;
use crate::error::watch_api_missing;
use crate::nad_cache::NadView;

/// The controller's NAD watch's events, as repair receives them (a concrete receiver, not a boxed
/// stream: the repairer is shared across its awaits, so it must be `Sync`).
pub type NadEvents = futures::channel::mpsc::UnboundedReceiver<NadEvent>;

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

impl NadEvent {
    /// One answer of the controller's NAD watch, reduced to what the view keeps.
    pub fn of(event: &Result<watcher::Event<NadView>, watcher::Error>) -> Self {
        let ns = |nad: &NadView| nad.namespace.clone().unwrap_or_default();
        match event {
            Ok(watcher::Event::Apply(nad)) => Self::Apply(ns(nad)),
            Ok(watcher::Event::Delete(nad)) => Self::Delete(ns(nad)),
            Ok(watcher::Event::Init) => Self::Init,
            Ok(watcher::Event::InitApply(nad)) => Self::InitApply(ns(nad)),
            Ok(watcher::Event::InitDone) => Self::InitDone,
            Err(e) => Self::Failed {
                api_missing: watch_api_missing(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(namespace: &str) -> NadView {
        NadView {
            name: "linkerd-cni".into(),
            namespace: Some(namespace.into()),
            uid: None,
            resource_version: None,
            owned: true,
            adoptable: false,
            config: None,
            shared: false,
        }
    }

    /// The controller's events keep the NAD's namespace; a failure says whether the kind is gone
    /// (a 404 for the group) or the apiserver merely failed.
    #[test]
    fn of_the_controllers_watch() {
        use kube::core::Status;
        let ok = |e| NadEvent::of(&Ok(e));
        assert_eq!(
            ok(watcher::Event::Apply(view("a"))),
            NadEvent::Apply("a".into())
        );
        assert_eq!(
            ok(watcher::Event::Delete(view("b"))),
            NadEvent::Delete("b".into())
        );
        assert_eq!(ok(watcher::Event::Init), NadEvent::Init);
        assert_eq!(
            ok(watcher::Event::InitApply(view("c"))),
            NadEvent::InitApply("c".into())
        );
        assert_eq!(ok(watcher::Event::InitDone), NadEvent::InitDone);
        let failed = |status: Status| {
            NadEvent::of(&Err(watcher::Error::InitialListFailed(kube::Error::Api(
                status.boxed(),
            ))))
        };
        assert_eq!(
            failed(Status::failure("404 page not found", "NotFound").with_code(404)),
            NadEvent::Failed { api_missing: true }
        );
        assert_eq!(
            failed(Status::failure("etcd is down", "InternalError").with_code(500)),
            NadEvent::Failed { api_missing: false }
        );
    }

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
