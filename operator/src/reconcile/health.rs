//! Input health: what the watches and the NAD API said about the operator's inputs, written only
//! through [`Health`]'s methods. Reported by the `input_healthy` gauge (`metrics.rs`), Events, the
//! log and `check`; never by `/ready`, since the webhook needs none of these inputs to answer.

use std::sync::atomic::{AtomicBool, Ordering};

/// Facts about the inputs that only the reconciler and the watches learn.
#[derive(Debug, Default)]
pub struct Health {
    /// Every watch has listed once.
    synced: AtomicBool,
    /// The NAD watch's last answer was an error (typically: CRD not installed).
    nad_watch_failing: AtomicBool,
    /// The last NAD API call answered "resource type not served".
    crd_missing: AtomicBool,
    /// The CNI ConfigMap watch's last answer was an error (its namespace or its read access missing).
    configmap_watch_failing: AtomicBool,
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

    /// The NAD watch failed; `api_missing`: because the kind is not served.
    pub fn nad_watch_failed(&self, api_missing: bool) {
        self.nad_watch_failing.store(true, Ordering::Relaxed);
        if api_missing {
            self.crd_missing.store(true, Ordering::Relaxed);
        }
    }

    /// What the last NAD API call said about the kind being served.
    pub fn crd_served(&self, served: bool) {
        self.crd_missing.store(!served, Ordering::Relaxed);
    }

    pub fn configmap_watch_answered(&self, ok: bool) {
        self.configmap_watch_failing.store(!ok, Ordering::Relaxed);
    }

    /// The NAD watch's store can stand in for a live read: listed, and not failing.
    pub fn nad_cache_trusted(&self) -> bool {
        self.synced.load(Ordering::Relaxed) && !self.nad_watch_failing.load(Ordering::Relaxed)
    }

    pub fn nad_watch_failing(&self) -> bool {
        self.nad_watch_failing.load(Ordering::Relaxed)
    }

    pub fn crd_missing(&self) -> bool {
        self.crd_missing.load(Ordering::Relaxed)
    }

    pub fn configmap_watch_failing(&self) -> bool {
        self.configmap_watch_failing.load(Ordering::Relaxed)
    }
}
