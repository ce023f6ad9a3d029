//! The one poller: wait until a check yields a value, or fail saying what was awaited. A deadline
//! here marks a hang, not a timing assertion, so it is generous.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long anything a test waits for may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// The pause after a first failed check; each next one is half again as long, up to [`MAX_PAUSE`].
/// A check is often a `kubectl` run (a Go binary's start, ~0.1 s of CPU): polled every 100 ms for
/// minutes, four node tiers side by side kept 2 cores at load 20-34 (2026-11-29) and starved the
/// servers they waited on. What is ready at once is still seen within 100 ms.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two checks: what a long wait may see late.
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The pauses between the checks of one wait.
fn pauses() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FIRST_PAUSE), |d| Some((*d * 3 / 2).min(MAX_PAUSE)))
}

/// Polls `check` until it returns `Some`, panicking with `what` after [`DEADLINE`].
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(what, DEADLINE, check).await
}

/// [`eventually`] with a deadline of its own.
pub async fn eventually_within<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    let mut pauses = pauses();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting until {what}"
        );
        tokio::time::sleep(pauses.next().unwrap_or(MAX_PAUSE)).await;
    }
}

/// The blocking twin of [`eventually`], for tests without a runtime.
pub fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    wait_for_within(what, DEADLINE, check)
}

/// [`wait_for`] with a deadline of its own.
pub fn wait_for_within<T>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    let mut pauses = pauses();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting until {what}"
        );
        std::thread::sleep(pauses.next().unwrap_or(MAX_PAUSE));
    }
}

/// [`wait_for_within`] whose failure also says what was seen: `explain` runs once, on timeout (pod
/// events, `kubectl describe`).
pub fn wait_for_explained<T>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
    explain: impl FnOnce() -> String,
) -> T {
    let start = Instant::now();
    let mut pauses = pauses();
    loop {
        if let Some(v) = check() {
            return v;
        }
        if start.elapsed() >= deadline {
            panic!(
                "timed out after {deadline:?} waiting until {what}; seen:\n{}",
                explain()
            );
        }
        std::thread::sleep(pauses.next().unwrap_or(MAX_PAUSE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_from_100_ms_to_1_s() {
        let first: Vec<u128> = pauses().take(8).map(|d| d.as_millis()).collect();
        assert_eq!(first, [100, 150, 225, 337, 506, 759, 1000, 1000]);
        // A minute's wait checks ~65 times, not the ~600 of a fixed 100 ms.
        let mut waited = Duration::ZERO;
        let checks = pauses()
            .take_while(|d| {
                waited += *d;
                waited < DEADLINE
            })
            .count();
        assert!((55..70).contains(&checks), "{checks}");
    }

    #[test]
    fn wait_for_returns_the_first_value() {
        let mut n = 0;
        let got = wait_for("the third try", || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(got, 3);
    }

    #[test]
    #[should_panic(expected = "waiting until never")]
    fn wait_for_names_what_it_waited_for() {
        wait_for_within("never", Duration::from_millis(10), || None::<()>);
    }

    #[tokio::test]
    async fn eventually_returns_the_first_value() {
        let mut n = 0;
        let got = eventually("the second try", || {
            n += 1;
            let v = (n == 2).then_some(n);
            async move { v }
        })
        .await;
        assert_eq!(got, 2);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting until never")]
    async fn eventually_names_what_it_waited_for() {
        eventually_within("never", Duration::from_millis(10), || async { None::<()> }).await;
    }
}
