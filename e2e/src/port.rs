//! Loopback ports for servers a test starts.
//!
//! A port the OS hands out for `bind(…:0)` comes from the ephemeral range, and is released before the
//! server under test binds it; in that gap any outgoing connection of any parallel test (every client of
//! the apiserver) may take it as its local port. A fresh-clone CI run failed exactly so. Ports are
//! therefore taken from below the ephemeral range, where no outgoing connection lands, each handed out
//! once per process, and only after a bind shows them free.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Below Linux's default ephemeral range (32768–60999) and above most well-known services.
const FIRST: u32 = 20_000;
const COUNT: u32 = 12_000;

static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

/// A loopback port free at the time of the call, never handed out before in this process.
pub fn free_port() -> u16 {
    for _ in 0..COUNT {
        let port = (FIRST + next_offset() % COUNT) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + COUNT)
}

/// Offsets start where this process's pid and clock say, so concurrent test binaries rarely overlap.
fn next_offset() -> u32 {
    let start = || {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        std::process::id().wrapping_mul(7919).wrapping_add(nanos) % COUNT
    };
    let _ = NEXT.compare_exchange(u32::MAX, start(), Ordering::Relaxed, Ordering::Relaxed);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `free_port` hands out only ports it could bind; binding them again here proved nothing more
    /// and failed CI runs: with the tiers' servers busy in the same range, about one run in seven
    /// here, a port bound a moment before was refused (EADDRINUSE) to the second bind.
    #[test]
    fn ports_are_bindable_below_the_ephemeral_range_and_never_repeat() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            ports.len(),
            "a port was handed out twice: {ports:?}"
        );
        for port in ports {
            assert!((FIRST..FIRST + COUNT).contains(&u32::from(port)), "{port}");
        }
    }
}
