//! How every duration flag is written: `<number><unit>` with unit `h`, `m` or `s`, combined as in
//! `1h30m`; a bare number is seconds, as the flags were written before they took units. One parser for
//! every binary, so `--resync 5m` and `--repair-cooldown 5m` cannot mean two things. It has no
//! dependency (the static CNI plugin links this crate) and returns a `String` error, which clap prints
//! after the flag's name and value.

use std::time::Duration;

/// Parses `text`, refusing anything below `min` (every duration flag needs at least one second: a zero
/// period would spin, a zero timeout would always fail).
pub fn parse_at_least(text: &str, min: Duration) -> Result<Duration, String> {
    let value = parse(text)?;
    if value < min {
        return Err(format!(
            "{text:?} is too short: it must be at least {}",
            format(min)
        ));
    }
    Ok(value)
}

/// The clap `value_parser` of every duration flag: [`parse_at_least`] one second.
pub fn flag(text: &str) -> Result<Duration, String> {
    parse_at_least(text, Duration::from_secs(1))
}

/// Parses `text` with no lower bound (`0s` is a duration).
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration: write a number followed by h, m or s, combined as in 1h30m \
             (a bare number is seconds)"
        )
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed.parse().map(Duration::from_secs).map_err(|_| bad());
    }
    let mut seconds: u64 = 0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, after) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad())?;
        let unit = after.chars().next().ok_or_else(bad)?;
        let scale = match unit {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        seconds = number
            .checked_mul(scale)
            .and_then(|part| seconds.checked_add(part))
            .ok_or_else(bad)?;
        rest = &after[unit.len_utf8()..];
    }
    Ok(Duration::from_secs(seconds))
}

/// `duration` as this module writes it (whole seconds): `1h30m`, `90s` reads back as `1m30s`, zero as `0s`.
pub fn format(duration: Duration) -> String {
    let total = duration.as_secs();
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    for (n, unit) in [(h, 'h'), (m, 'm'), (s, 's')] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_combinations_and_bare_seconds() {
        let cases = [
            ("90s", Some(90)),
            ("10m", Some(600)),
            ("1h", Some(3600)),
            ("1h30m", Some(5400)),
            ("1h30m15s", Some(5415)),
            ("30s1m", Some(90)),
            (" 5m ", Some(300)),
            ("300", Some(300)),
            ("0", Some(0)),
            ("0s", Some(0)),
            ("m", None),
            ("", None),
            ("  ", None),
            ("1d", None),
            ("-1m", None),
            ("1.5m", None),
            ("10 m", None),
            ("1h 30m", None),
            ("5ms", None),
            ("10x", None),
            ("h1", None),
            ("99999999999999999h", None),
            ("99999999999999999999", None),
            ("5é", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).ok(), want.map(Duration::from_secs), "{text:?}");
        }
    }

    /// The message names the value and says how to write one.
    #[test]
    fn garbage_is_named_in_the_error() {
        let err = parse("soon").unwrap_err();
        assert!(err.contains("\"soon\""), "{err}");
        assert!(err.contains("h, m or s"), "{err}");
        assert!(err.contains("bare number is seconds"), "{err}");
    }

    #[test]
    fn the_minimum_is_checked_at_parse_time() {
        assert_eq!(flag("1"), Ok(Duration::from_secs(1)));
        assert_eq!(flag("2m"), Ok(Duration::from_secs(120)));
        for zero in ["0", "0s", "0h0m"] {
            let err = flag(zero).unwrap_err();
            assert!(err.contains("at least 1s"), "{zero}: {err}");
            assert!(err.contains(&format!("{zero:?}")), "{zero}: {err}");
        }
        let err = parse_at_least("30s", Duration::from_secs(60)).unwrap_err();
        assert!(err.contains("at least 1m"), "{err}");
    }

    #[test]
    fn format_reads_back() {
        for (seconds, text) in [(0, "0s"), (90, "1m30s"), (3600, "1h"), (5415, "1h30m15s")] {
            assert_eq!(format(Duration::from_secs(seconds)), text);
            assert_eq!(parse(text), Ok(Duration::from_secs(seconds)));
        }
    }
}
