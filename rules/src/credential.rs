//! The plugin's credential over its lifetime: when an installer renews the token it issued for the
//! plugin, and when the token is so near its end that renewal must have been failing for a while
//! (the operator's `node_plugin_credential_expiring` gauge, its alert).

use std::time::SystemTime;

/// Share of a token's lifetime after which the installer renews it: early enough that a failing
/// apiserver has a fifth of the lifetime to come back before the plugin's token expires.
pub const RENEW_AT: f64 = 0.8;

/// Share of the lifetime left under which the token counts as expiring: half of the margin
/// [`RENEW_AT`] leaves, so renewal has been failing for that long (a tenth of a 24h token: 2.4 h).
pub const EXPIRING_UNDER: f64 = (1.0 - RENEW_AT) / 2.0;

/// Whether a token issued at `issued` and valid until `expires` is expiring (or expired) at `now`.
/// A lifetime that makes no sense (expiry not after issue) counts as expiring: nothing renews on it.
pub fn expiring(issued: SystemTime, expires: SystemTime, now: SystemTime) -> bool {
    let Ok(lifetime) = expires.duration_since(issued) else {
        return true;
    };
    match expires.duration_since(now) {
        Ok(left) => left.as_secs_f64() < lifetime.as_secs_f64() * EXPIRING_UNDER,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_token_is_expiring_in_the_last_tenth_of_its_life() {
        let issued = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let day = Duration::from_secs(24 * 3600);
        let expires = issued + day;
        let at = |h: f64| issued + Duration::from_secs_f64(h * 3600.0);
        // Renewal is due at 19.2 h; still fine past it, until 21.6 h.
        assert!(!expiring(issued, expires, at(0.0)));
        assert!(!expiring(issued, expires, at(19.5)));
        assert!(!expiring(issued, expires, at(21.5)));
        assert!(expiring(issued, expires, at(21.7)));
        assert!(expiring(issued, expires, at(25.0)), "expired");
        assert!(expiring(expires, issued, at(1.0)), "expiry before issue");
    }
}
