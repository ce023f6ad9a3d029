//! PURE: how often the repairer may act. At most `max_per_minute` attempts in any 60 s, and a pod
//! (by uid) at most once per cooldown. The clock is passed in, so tests step it.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// May a repair of this pod be attempted now?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Yes; the attempt is recorded.
    Go,
    /// The pod was tried less than a cooldown ago (already reported then).
    CoolingDown,
    /// The minute's budget is spent; try again later.
    RateLimited,
}

#[derive(Debug)]
pub struct Limiter {
    max_per_minute: usize,
    cooldown: Duration,
    /// When each attempt of the last minute was made, oldest first.
    recent: VecDeque<Instant>,
    /// When each pod was last tried.
    tried: HashMap<String, Instant>,
}

impl Limiter {
    pub fn new(max_per_minute: u32, cooldown: Duration) -> Self {
        Self {
            max_per_minute: usize::try_from(max_per_minute).unwrap_or(usize::MAX),
            cooldown,
            recent: VecDeque::new(),
            tried: HashMap::new(),
        }
    }

    /// Decides for the pod of `uid` at `now`, and records the attempt when it may go.
    pub fn admit(&mut self, uid: &str, now: Instant) -> Admit {
        self.forget_before(now);
        if self.tried.contains_key(uid) {
            return Admit::CoolingDown;
        }
        if self.recent.len() >= self.max_per_minute {
            return Admit::RateLimited;
        }
        self.recent.push_back(now);
        self.tried.insert(uid.to_string(), now);
        Admit::Go
    }

    /// Drops what no longer limits anything, so memory follows the attempts of one cooldown.
    fn forget_before(&mut self, now: Instant) {
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            self.recent.pop_front();
        }
        let cooldown = self.cooldown;
        self.tried
            .retain(|_, t| now.saturating_duration_since(*t) < cooldown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn at_most_n_per_minute() {
        let t0 = Instant::now();
        let mut l = Limiter::new(2, Duration::from_secs(3600));
        assert_eq!(l.admit("a", t0), Admit::Go);
        assert_eq!(l.admit("b", t0 + Duration::from_secs(10)), Admit::Go);
        assert_eq!(
            l.admit("c", t0 + Duration::from_secs(20)),
            Admit::RateLimited
        );
        // A refusal spends nothing: c still waits, not cooling down.
        assert_eq!(
            l.admit("c", t0 + Duration::from_secs(59)),
            Admit::RateLimited
        );
        // a's slot frees 60 s after it was used; b's not yet.
        assert_eq!(l.admit("c", t0 + MIN), Admit::Go);
        assert_eq!(l.admit("d", t0 + MIN), Admit::RateLimited);
        assert_eq!(l.admit("d", t0 + MIN + Duration::from_secs(10)), Admit::Go);
    }

    #[test]
    fn a_pod_once_per_cooldown() {
        let t0 = Instant::now();
        let cooldown = Duration::from_secs(600);
        let mut l = Limiter::new(100, cooldown);
        assert_eq!(l.admit("a", t0), Admit::Go);
        assert_eq!(l.admit("a", t0 + MIN), Admit::CoolingDown);
        assert_eq!(
            l.admit("a", t0 + cooldown - Duration::from_secs(1)),
            Admit::CoolingDown
        );
        assert_eq!(l.admit("b", t0 + MIN), Admit::Go);
        assert_eq!(l.admit("a", t0 + cooldown), Admit::Go);
        // Forgotten entries do not pile up.
        assert_eq!(l.admit("c", t0 + 3 * cooldown), Admit::Go);
        assert_eq!(l.tried.len(), 1);
        assert_eq!(l.recent.len(), 1);
    }
}
