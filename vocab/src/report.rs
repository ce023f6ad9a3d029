//! How an error is told to a person: its own text, then each `source()` after ": ". Every error type
//! here prints only what it adds (its source is not repeated in its text), so a log line, an Event,
//! `check`'s output or the CNI result that printed only the outer `Display` would lose the cause:
//! they print [`chain`].

use std::error::Error;
use std::fmt;

/// `error` and its sources, joined with ": ". A source whose text is already printed (a library error
/// that prints its cause and also returns it as its source) is not repeated.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    Chain(error).to_string()
}

/// [`chain`] as a `Display`, for `tracing` fields (`error = %Chain(&e)`) and `format!` without an
/// intermediate `String`.
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = self.0.to_string();
        let mut next = self.0.source();
        while let Some(source) = next {
            let text = source.to_string();
            if !text.is_empty() && !out.contains(&text) {
                out.push_str(": ");
                out.push_str(&text);
            }
            next = source.source();
        }
        f.write_str(&out)
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Leaf;
    impl fmt::Display for Leaf {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("permission denied")
        }
    }
    impl Error for Leaf {}

    #[derive(Debug)]
    struct Outer(Leaf, &'static str);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.1)
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn sources_follow_after_a_colon() {
        let e = Outer(Leaf, "cannot write /etc/x");
        assert_eq!(chain(&e), "cannot write /etc/x: permission denied");
        assert_eq!(format!("{}", Chain(&Leaf)), "permission denied");
    }

    /// A wrapper that already printed its cause does not get it twice.
    #[test]
    fn a_cause_already_printed_is_not_repeated() {
        let e = Outer(Leaf, "cannot write /etc/x: permission denied");
        assert_eq!(chain(&e), "cannot write /etc/x: permission denied");
    }
}
