//! When a failed reconcile runs again: a short backoff for transient errors, a long wait for input
//! only a human can fix.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use vocab::report::Chain;

use super::Context;
use crate::error::Error;

/// Input errors wait for a change (the ConfigMap watch re-triggers at once); this is only a
/// safety net in case a change was missed.
const INVALID_INPUT_RETRY: Duration = Duration::from_secs(300);
/// Transient errors (apiserver, CRD not installed yet) retry with exponential backoff up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
const MIN_BACKOFF: Duration = Duration::from_millis(500);

/// Short backoff for transient errors, a long wait for input only a human can fix.
pub fn error_policy(ns: Arc<Namespace>, err: &Error, ctx: Arc<Context>) -> Action {
    let name = ns.name_any();
    if err.is_invalid_input() {
        tracing::warn!(namespace = %name, error = %Chain(err), "cannot reconcile until the input is fixed");
        return Action::requeue(INVALID_INPUT_RETRY);
    }
    let attempt = ctx.failures.record(&name);
    let delay = backoff(attempt);
    tracing::warn!(namespace = %name, error = %Chain(err), attempt, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// `MIN_BACKOFF · 2^(attempt-1)`, capped at `MAX_BACKOFF`.
pub fn backoff(attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(16);
    MIN_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(4));
        assert_eq!(backoff(5), Duration::from_secs(8));
        assert_eq!(backoff(6), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
