//! Health: facts `/ready` needs that only the reconciler and the watches learn, written only through
//! [`Health`]'s methods.

use std::sync::atomic::{AtomicBool, Ordering};

/// Facts `/ready` needs that only the reconciler and the watches learn.
#[derive(Debug, Default)]
pub struct Health {
    /// Every watch has listed once.
    synced: AtomicBool,
    /// The NAD watch's last answer was an error (typically: CRD not installed).
    nad_watch_failing: AtomicBool,
    /// The last NAD API call answered "resource type not served".
    crd_missing: AtomicBool,
}

impl Health {
    /// Every watch has listed once.
    pub fn watches_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// The NAD watch answered, so the kind is served (again).
    pub fn nad_watch_answered(&self) {
        self.nad_watch_failing.store(false, Ordering::Relaxed);
        self.crd_missing.store(false, Ordering::Relaxed);
    }

    pub fn nad_watch_failed(&self) {
        self.nad_watch_failing.store(true, Ordering::Relaxed);
    }

    /// What the last NAD API call said about the kind being served.
    pub fn crd_served(&self, served: bool) {
        self.crd_missing.store(!served, Ordering::Relaxed);
    }

    /// The NAD watch's store can stand in for a live read: listed, and not failing.
    pub fn nad_cache_trusted(&self) -> bool {
        self.synced.load(Ordering::Relaxed) && !self.nad_watch_failing.load(Ordering::Relaxed)
    }

    /// Why the watches or the NAD API are not usable, if they are not.
    pub fn problem(&self) -> Option<&'static str> {
        if !self.synced.load(Ordering::Relaxed) {
            return Some(
                "watches on Namespaces, NetworkAttachmentDefinitions and the CNI ConfigMap \
                        have not synced yet (is the NAD CRD installed?)",
            );
        }
        if self.nad_watch_failing.load(Ordering::Relaxed) {
            return Some("cannot watch NetworkAttachmentDefinitions (is the NAD CRD installed?)");
        }
        if self.crd_missing.load(Ordering::Relaxed) {
            return Some("the NetworkAttachmentDefinition API is not served: install the NAD CRD");
        }
        None
    }
}
