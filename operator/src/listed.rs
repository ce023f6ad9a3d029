//! "Has this watch completed its first list?", for any number of waiters.
//!
//! kube-runtime's `Store::wait_until_ready` parks every waiter on one oneshot receiver, which keeps
//! only the last waker it was polled with: with two waiters at once, or a `now_or_never` probe in
//! between, the other waiter is never woken. Seen here: three reconciles waiting for the ConfigMap's
//! first list beside the start-up sync all stalled until their 20 s timeout. So the operator's own
//! code never waits on a store; it asks a [`Listed`], marked by the same watch's first `InitDone`.
//! (kube-runtime's controller still waits on the namespace store itself, as the only waiter.)

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tokio::sync::watch;

/// Marks its watch listed; see [`listed`].
#[derive(Debug)]
pub struct MarkListed(watch::Sender<bool>);

/// Whether (and when) a watch has completed its first list.
#[derive(Clone, Debug)]
pub struct Listed(watch::Receiver<bool>);

/// A new, not yet listed, pair.
pub fn listed() -> (MarkListed, Listed) {
    let (tx, rx) = watch::channel(false);
    (MarkListed(tx), Listed(rx))
}

impl MarkListed {
    pub fn mark(&self) {
        self.0.send_replace(true);
    }

    /// Passes a (reflector's) event stream through, marking listed at its first `InitDone`: by then
    /// the reflector has swapped the listed objects into its store.
    pub fn on_init_done<K, E>(
        self,
        events: impl Stream<Item = Result<watcher::Event<K>, E>>,
    ) -> impl Stream<Item = Result<watcher::Event<K>, E>> {
        events.inspect(move |event| {
            if matches!(event, Ok(watcher::Event::InitDone)) {
                self.mark();
            }
        })
    }
}

impl Listed {
    pub fn now(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits for the first list; `false` if the watch is gone without one.
    pub async fn wait(&self) -> bool {
        self.0.clone().wait_for(|listed| *listed).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;

    use super::*;

    /// The case kube-runtime's store gets wrong: several waiters, and a probe in between.
    #[tokio::test]
    async fn every_waiter_wakes_even_after_a_probe() {
        let (mark, listed) = listed();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let l = listed.clone();
                tokio::spawn(async move { l.wait().await })
            })
            .collect();
        tokio::task::yield_now().await;
        assert!(!listed.now());
        let events = stream::iter([
            Ok::<_, ()>(watcher::Event::<()>::Init),
            Ok(watcher::Event::InitApply(())),
            Ok(watcher::Event::InitDone),
        ]);
        let passed: Vec<_> = mark.on_init_done(events).collect().await;
        assert_eq!(passed.len(), 3, "events pass through");
        for w in waiters {
            let woke = tokio::time::timeout(Duration::from_secs(5), w).await;
            assert!(matches!(woke, Ok(Ok(true))), "a waiter was not woken");
        }
        assert!(listed.now());
    }

    #[tokio::test]
    async fn a_watch_gone_before_listing_is_not_listed() {
        let (mark, listed) = listed();
        drop(mark);
        assert!(!listed.wait().await);
    }
}
