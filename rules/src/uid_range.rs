//! OpenShift's namespace uid range (`openshift.io/sa.scc.uid-range: <first uid>/<size>`) and the proxy uid
//! picked inside it.
//!
//! Pods in such a namespace must run with a uid from the range; the app containers get the first one.
//! The proxy needs a different uid (its own traffic is exempted from redirection by uid), so it gets
//! first + offset, which must still lie inside the range.

use std::fmt;

use vocab::Uid;

/// Why no proxy uid can be derived from a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UidRangeError {
    /// The value is not `<first uid>/<size>` with two decimal numbers.
    Malformed { value: String, reason: &'static str },
    /// The offset does not fall inside the range.
    OffsetOutsideRange { offset: Uid, size: u32 },
    /// The offset is 0: the proxy would share the app containers' uid and bypass its own rules.
    OffsetIsFirstUid,
    /// first + offset is not a valid uid.
    Overflow { first: Uid, offset: Uid },
}

impl fmt::Display for UidRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed { value, reason } => {
                write!(f, "{value:?} is not \"<first uid>/<size>\" ({reason})")
            }
            Self::OffsetOutsideRange { offset, size } => write!(
                f,
                "the proxy uid offset {offset} is not smaller than the range size {size}"
            ),
            Self::OffsetIsFirstUid => {
                f.write_str("the proxy uid offset is 0, which is the app containers' uid")
            }
            Self::Overflow { first, offset } => {
                write!(
                    f,
                    "{first} + offset {offset} is larger than the largest uid"
                )
            }
        }
    }
}

/// A parsed uid range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidRange {
    pub first: Uid,
    /// How many uids, from `first` on.
    pub size: u32,
}

impl UidRange {
    pub fn parse(value: &str) -> Result<Self, UidRangeError> {
        let malformed = |reason| UidRangeError::Malformed {
            value: value.to_string(),
            reason,
        };
        let (first, size) = value.trim().split_once('/').ok_or(malformed("no '/'"))?;
        let number = |s: &str, what| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed(what));
            }
            s.parse::<u32>()
                .map_err(|_| malformed("a number is larger than the largest uid"))
        };
        Ok(Self {
            first: number(first, "the first uid is not a decimal number")?,
            size: number(size, "the size is not a decimal number")?,
        })
    }

    /// True when `uid` lies inside the range.
    pub fn contains(&self, uid: Uid) -> bool {
        uid >= self.first && uid - self.first < self.size
    }

    /// A uid of the range other than `taken`: the first, else the second; None if there is none.
    pub fn other_than(&self, taken: Option<Uid>) -> Option<Uid> {
        [0, 1]
            .into_iter()
            .filter_map(|i| self.first.checked_add(i))
            .filter(|u| self.contains(*u) && *u != Uid::MAX)
            .find(|u| Some(*u) != taken)
    }

    /// The proxy uid `first + offset`, if the offset lies inside the range and the result is a uid.
    pub fn proxy_uid(&self, offset: Uid) -> Result<Uid, UidRangeError> {
        if offset == 0 {
            return Err(UidRangeError::OffsetIsFirstUid);
        }
        if offset >= self.size {
            return Err(UidRangeError::OffsetOutsideRange {
                offset,
                size: self.size,
            });
        }
        // Uid::MAX is (uid_t)-1, "no uid" to the kernel.
        self.first
            .checked_add(offset)
            .filter(|uid| *uid != Uid::MAX)
            .ok_or(UidRangeError::Overflow {
                first: self.first,
                offset,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_picks() {
        let r = UidRange::parse("1000650000/10000").unwrap();
        assert_eq!(
            r,
            UidRange {
                first: 1000650000,
                size: 10000
            }
        );
        assert_eq!(r.proxy_uid(2102), Ok(1000652102));
        assert_eq!(r.proxy_uid(9999), Ok(1000659999));
        assert_eq!(
            r.proxy_uid(10000),
            Err(UidRangeError::OffsetOutsideRange {
                offset: 10000,
                size: 10000
            })
        );
        assert_eq!(r.proxy_uid(0), Err(UidRangeError::OffsetIsFirstUid));
        assert!(r.contains(1000650000) && r.contains(1000659999));
        assert!(!r.contains(1000649999) && !r.contains(1000660000));
        assert_eq!(r.other_than(Some(1000652102)), Some(1000650000));
        assert_eq!(r.other_than(Some(1000650000)), Some(1000650001));
        let one = UidRange { first: 7, size: 1 };
        assert_eq!(one.other_than(Some(7)), None);
        assert_eq!(one.other_than(None), Some(7));
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "1000",
            "a/10",
            "10/b",
            "-1/10",
            "1/+2",
            "1//2",
            "99999999999/10",
            "1/2/3",
        ] {
            assert!(
                matches!(UidRange::parse(bad), Err(UidRangeError::Malformed { .. })),
                "{bad}"
            );
        }
        let top = UidRange {
            first: u32::MAX - 10,
            size: 100,
        };
        assert!(matches!(
            top.proxy_uid(10),
            Err(UidRangeError::Overflow { .. })
        ));
        assert_eq!(top.proxy_uid(9), Ok(u32::MAX - 1));
    }
}
