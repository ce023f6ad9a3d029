//! How a `config.linkerd.io/proxy-uid` value is read: one parser for the webhook, the CNI plugin and
//! `check`, so a value cannot be a uid to one and no uid to another.
//!
//! The rule: what Linkerd's injector reads (Go's `strconv.ParseInt(v, 10, 64)`: an optional sign, then
//! decimal digits, nothing else), limited to the uids Kubernetes accepts as a `runAsUser` (0 to
//! 2147483647), because the injector runs the proxy as that value. Whitespace around the digits is
//! refused, not trimmed: the injector ignores such a value and runs the proxy as its default uid, so a
//! trimmed reading would exempt a uid the proxy does not run as. A negative value is refused too: it is
//! no uid, and a proxy given it is refused by the apiserver.

use std::fmt;
use std::num::IntErrorKind;

use crate::Uid;

/// The largest uid Kubernetes accepts as a `runAsUser` (its validation allows 0 to 2^31 - 1).
pub const MAX_KUBERNETES_UID: Uid = 2_147_483_647;

/// Why a value is not a proxy uid. The text says what to write instead; callers name the annotation,
/// the value and where it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyUidError {
    /// Empty, or only whitespace.
    Empty,
    /// Digits with whitespace before or after them.
    Whitespace,
    /// Not an optional sign followed by decimal digits (`0x10`, `1e3`, `root`).
    NotDecimal,
    /// Below 0.
    Negative,
    /// Above [`MAX_KUBERNETES_UID`].
    TooLarge,
}

impl fmt::Display for ProxyUidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a uid: ")?;
        match self {
            Self::Empty => f.write_str("it is empty; write the proxy's uid, or remove the annotation"),
            Self::Whitespace => f.write_str(
                "it has whitespace around the digits; write the digits alone (Linkerd's injector \
                 ignores such a value, so the proxy would not run as it)",
            ),
            Self::NotDecimal => f.write_str("it is not a decimal number; write the uid in digits, e.g. 2102"),
            Self::Negative => write!(
                f,
                "it is negative; a uid is 0 to {MAX_KUBERNETES_UID} (Kubernetes refuses a negative runAsUser)"
            ),
            Self::TooLarge => write!(
                f,
                "it is larger than {MAX_KUBERNETES_UID}, the largest runAsUser Kubernetes accepts"
            ),
        }
    }
}

impl std::error::Error for ProxyUidError {}

/// Reads a `config.linkerd.io/proxy-uid` value (see the module's rule).
pub fn parse_proxy_uid(value: &str) -> Result<Uid, ProxyUidError> {
    if value.trim().is_empty() {
        return Err(ProxyUidError::Empty);
    }
    if value.trim() != value {
        return Err(ProxyUidError::Whitespace);
    }
    // Rust's i64 grammar is Go's ParseInt base 10: an optional + or -, then ASCII digits.
    match value.parse::<i64>() {
        Ok(n) if n < 0 => Err(ProxyUidError::Negative),
        Ok(n) => Uid::try_from(n)
            .ok()
            .filter(|uid| *uid <= MAX_KUBERNETES_UID)
            .ok_or(ProxyUidError::TooLarge),
        Err(e) => Err(match e.kind() {
            IntErrorKind::PosOverflow => ProxyUidError::TooLarge,
            IntErrorKind::NegOverflow => ProxyUidError::Negative,
            _ => ProxyUidError::NotDecimal,
        }),
    }
}

/// The verdict every reader of a proxy uid must give: the webhook's, the plugin's and `check`'s tests
/// run their own call site over this table, so they cannot drift apart.
pub const PROXY_UID_CASES: &[(&str, Result<Uid, ProxyUidError>)] = &[
    ("2102", Ok(2102)),
    ("0", Ok(0)),
    ("1000652102", Ok(1000652102)),
    ("2147483647", Ok(MAX_KUBERNETES_UID)),
    ("+5", Ok(5)),
    ("007", Ok(7)),
    ("-1", Err(ProxyUidError::Negative)),
    ("-99999999999999999999", Err(ProxyUidError::Negative)),
    (" 1000652102", Err(ProxyUidError::Whitespace)),
    ("2102 ", Err(ProxyUidError::Whitespace)),
    ("\t2102\n", Err(ProxyUidError::Whitespace)),
    ("", Err(ProxyUidError::Empty)),
    ("  ", Err(ProxyUidError::Empty)),
    ("2147483648", Err(ProxyUidError::TooLarge)),
    ("4294967295", Err(ProxyUidError::TooLarge)),
    ("4294967296", Err(ProxyUidError::TooLarge)),
    ("99999999999999999999", Err(ProxyUidError::TooLarge)),
    ("0x10", Err(ProxyUidError::NotDecimal)),
    ("1e3", Err(ProxyUidError::NotDecimal)),
    ("21 02", Err(ProxyUidError::NotDecimal)),
    ("1_000", Err(ProxyUidError::NotDecimal)),
    ("+", Err(ProxyUidError::NotDecimal)),
    ("root", Err(ProxyUidError::NotDecimal)),
    ("٣", Err(ProxyUidError::NotDecimal)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_table() {
        for (value, want) in PROXY_UID_CASES {
            assert_eq!(parse_proxy_uid(value), *want, "{value:?}");
        }
    }

    /// Each refusal says what to write instead.
    #[test]
    fn messages_say_what_to_write() {
        assert_eq!(
            parse_proxy_uid(" 1000652102").unwrap_err().to_string(),
            "not a uid: it has whitespace around the digits; write the digits alone (Linkerd's \
             injector ignores such a value, so the proxy would not run as it)"
        );
        assert_eq!(
            parse_proxy_uid("-1").unwrap_err().to_string(),
            "not a uid: it is negative; a uid is 0 to 2147483647 (Kubernetes refuses a negative runAsUser)"
        );
        assert_eq!(
            parse_proxy_uid("4294967296").unwrap_err().to_string(),
            "not a uid: it is larger than 2147483647, the largest runAsUser Kubernetes accepts"
        );
    }
}
