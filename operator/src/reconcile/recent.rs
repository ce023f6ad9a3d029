//! The NADs this operator wrote that its watch may not show yet.
//!
//! A reconcile plans from the NAD watch's cache. Right after our own create, apply or delete, the
//! cache still shows the old state until the watch event arrives (a few ms), and a second trigger
//! of the namespace in that gap (start-up bursts: namespace list, ConfigMap, NAD list) would plan
//! from it: a create refused as "already exists", or a delete answered 404, each a wasted write.
//! A 50 ms debounce on every trigger used to hide that gap, at 50 ms on every opt-in. Instead, each
//! write is remembered here until the watch shows it, and plans read it in place of the cache.
//!
//! Matching is by `resourceVersion` equality and uid, never by ordering them (both are opaque).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::watcher;

use crate::desired::Existing;
use crate::nad_cache::NadView;

/// How long a write is trusted over the cache at most; only matters if its watch event is lost.
/// Planning from a stale view is safe anyway (every write is guarded), so this only bounds how long
/// a change by someone else could go unseen by a plan.
const TRUST_FOR: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Written {
    /// Created or applied: the object the apiserver answered with.
    Present(NadView),
    /// Deleted: the uid it had.
    Deleted { uid: Option<String> },
}

#[derive(Debug)]
struct Entry {
    written: Written,
    at: Instant,
}

/// Per namespace, our last write not yet seen by the watch.
#[derive(Debug, Default)]
pub struct RecentWrites(Mutex<HashMap<String, Entry>>);

impl RecentWrites {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// We created or applied `nad` (as the apiserver answered) in `namespace`.
    pub fn wrote(&self, namespace: &str, nad: NadView, now: Instant) {
        self.put(namespace, Written::Present(nad), now);
    }

    /// We deleted the NAD of `uid` in `namespace`.
    pub fn deleted(&self, namespace: &str, uid: Option<String>, now: Instant) {
        self.put(namespace, Written::Deleted { uid }, now);
    }

    fn put(&self, namespace: &str, written: Written, at: Instant) {
        self.entries()
            .insert(namespace.to_string(), Entry { written, at });
    }

    /// What to plan from for `namespace`, given the cache's view: `Some` when our own write is newer
    /// than what the cache shows, `None` to use the cache. A write the cache already shows is dropped.
    pub fn newer_than_cache(
        &self,
        namespace: &str,
        cached: Option<&NadView>,
        now: Instant,
    ) -> Option<Option<Existing>> {
        let mut entries = self.entries();
        let entry = entries.get(namespace)?;
        let shown = now.duration_since(entry.at) > TRUST_FOR
            || match &entry.written {
                Written::Present(ours) => {
                    cached.is_some_and(|c| c.resource_version == ours.resource_version)
                }
                // Gone from the cache, or a new object there since.
                Written::Deleted { uid } => cached.is_none_or(|c| c.uid != *uid),
            };
        if shown {
            entries.remove(namespace);
            return None;
        }
        Some(match &entry.written {
            Written::Present(ours) => Some(ours.existing()),
            Written::Deleted { .. } => None,
        })
    }

    /// A NAD watch event, after the cache took it in: forgets the write it shows, or any write of
    /// that namespace the event is newer than. True when the event is our own write coming back:
    /// the cache now holds what the last plan wanted, so it needs no reconcile (a fan-out would
    /// otherwise reconcile every namespace twice). A (re-)list's objects reach the cache only at its end,
    /// and the list may predate a write made while it ran, so they settle nothing here: reads
    /// compare the cache with the write (`newer_than_cache`).
    pub fn observed(&self, event: &watcher::Event<NadView>) -> bool {
        let (nad, deleted) = match event {
            watcher::Event::Apply(nad) => (nad, false),
            watcher::Event::Delete(nad) => (nad, true),
            watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::InitDone => {
                return false
            }
        };
        let Some(namespace) = nad.namespace.as_deref() else {
            return false;
        };
        let mut entries = self.entries();
        let Some(entry) = entries.get(namespace) else {
            return false;
        };
        let (own, newer) = match &entry.written {
            // Our write's own event; or the object we wrote, deleted since.
            Written::Present(ours) => (
                !deleted && nad.resource_version == ours.resource_version,
                deleted && nad.uid == ours.uid,
            ),
            // Our delete's own event; or a new object created since.
            Written::Deleted { uid } => (deleted && nad.uid == *uid, !deleted && nad.uid != *uid),
        };
        if own || newer {
            entries.remove(namespace);
        }
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(uid: &str, rv: &str, config: &str) -> NadView {
        NadView {
            name: "linkerd-cni".into(),
            namespace: Some("apps".into()),
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            owned: true,
            adoptable: false,
            config: Some(crate::desired::ConfigDigest::of(config)),
            shared: false,
        }
    }

    #[test]
    fn a_create_is_planned_from_until_the_cache_shows_it() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        let ours = view("u1", "100", "{}");
        recent.wrote("apps", ours.clone(), t0);
        // Cache not there yet: plan from our write.
        assert_eq!(
            recent.newer_than_cache("apps", None, t0),
            Some(Some(ours.existing()))
        );
        // The cache shows our write: the cache again, and the entry is gone.
        assert_eq!(recent.newer_than_cache("apps", Some(&ours), t0), None);
        assert_eq!(recent.newer_than_cache("apps", None, t0), None);
    }

    #[test]
    fn a_delete_is_planned_from_until_the_cache_drops_it() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        let old = view("u1", "100", "{}");
        recent.deleted("apps", Some("u1".into()), t0);
        assert_eq!(recent.newer_than_cache("apps", Some(&old), t0), Some(None));
        // A new object under the name: the cache is newer than our delete.
        let new = view("u2", "120", "{}");
        assert_eq!(recent.newer_than_cache("apps", Some(&new), t0), None);
    }

    #[test]
    fn our_own_event_settles_the_write_and_a_later_hand_edit_is_seen() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        let ours = view("u1", "100", "{}");
        recent.wrote("apps", ours.clone(), t0);
        // An event of an older change (before ours) settles nothing.
        assert!(!recent.observed(&watcher::Event::Apply(view("u1", "90", "old"))));
        assert!(recent.newer_than_cache("apps", None, t0).is_some());
        assert!(
            recent.observed(&watcher::Event::Apply(ours.clone())),
            "our own"
        );
        // Once settled, the same event again is not taken for ours.
        assert!(!recent.observed(&watcher::Event::Apply(ours)));
        // A hand edit after ours: the cache's view (rv 105) is what plans read.
        let edited = view("u1", "105", "edited");
        assert_eq!(recent.newer_than_cache("apps", Some(&edited), t0), None);
    }

    #[test]
    fn the_previous_objects_delete_event_does_not_settle_a_new_create() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        let ours = view("u2", "130", "{}");
        recent.wrote("apps", ours.clone(), t0);
        assert!(!recent.observed(&watcher::Event::Delete(view("u1", "120", "{}"))));
        assert_eq!(
            recent.newer_than_cache("apps", None, t0),
            Some(Some(ours.existing()))
        );
        // Our object deleted by someone since: the cache (empty) is newer, and it is not ours.
        assert!(!recent.observed(&watcher::Event::Delete(ours)));
        assert_eq!(recent.newer_than_cache("apps", None, t0), None);
    }

    #[test]
    fn delete_events_settle_a_delete_and_a_relist_settles_only_what_it_shows() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        let old = view("u1", "100", "{}");
        recent.deleted("apps", Some("u1".into()), t0);
        assert!(!recent.observed(&watcher::Event::Apply(view("u1", "101", "{}"))));
        assert_eq!(recent.newer_than_cache("apps", Some(&old), t0), Some(None));
        assert!(
            recent.observed(&watcher::Event::Delete(old.clone())),
            "our own"
        );
        assert_eq!(recent.newer_than_cache("apps", Some(&old), t0), None);

        // A list taken before our create ends after it: its cache lacks the NAD, ours is newer.
        let ours = view("u3", "200", "{}");
        recent.wrote("apps", ours.clone(), t0);
        assert!(!recent.observed(&watcher::Event::InitApply(view("u1", "100", "{}"))));
        assert!(!recent.observed(&watcher::Event::InitDone));
        assert_eq!(
            recent.newer_than_cache("apps", None, t0),
            Some(Some(ours.existing()))
        );
        assert_eq!(recent.newer_than_cache("apps", Some(&ours), t0), None);
    }

    #[test]
    fn a_write_whose_event_never_comes_is_trusted_for_a_while_only() {
        let (recent, t0) = (RecentWrites::default(), Instant::now());
        recent.wrote("apps", view("u1", "100", "{}"), t0);
        assert!(recent
            .newer_than_cache("apps", None, t0 + TRUST_FOR)
            .is_some());
        assert_eq!(
            recent.newer_than_cache("apps", None, t0 + TRUST_FOR + Duration::from_millis(1)),
            None
        );
    }
}
