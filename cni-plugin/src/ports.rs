//! Ports and port ranges as Linkerd writes them: `4190`, or `9000-9100`.

use std::fmt;

/// An inclusive range of TCP ports; a single port has `first == last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn single(port: u16) -> Self {
        Self {
            first: port,
            last: port,
        }
    }

    /// Parses `N` or `A-B` (whitespace around the parts allowed). Port 0 and `A > B` are errors.
    pub fn parse(s: &str) -> Result<Self, String> {
        let port = |p: &str| -> Result<u16, String> {
            match p.trim().parse::<u16>() {
                Ok(0) | Err(_) => Err(format!("`{}` is not a port (1-65535)", p.trim())),
                Ok(n) => Ok(n),
            }
        };
        let range = match s.split_once('-') {
            None => Self::single(port(s)?),
            Some((a, b)) => Self {
                first: port(a)?,
                last: port(b)?,
            },
        };
        if range.first > range.last {
            return Err(format!("`{}` is an empty range", s.trim()));
        }
        Ok(range)
    }

    /// Parses a comma-separated list as annotations carry it (`4190,4191, 9000-9100`).
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(Self::parse)
            .collect()
    }

    /// How many of multiport's 15 slots this takes: a range needs two.
    pub fn slots(&self) -> usize {
        if self.first == self.last {
            1
        } else {
            2
        }
    }

    /// iptables' spelling: `N` or `A:B`.
    pub fn iptables(&self) -> String {
        if self.first == self.last {
            self.first.to_string()
        } else {
            format!("{}:{}", self.first, self.last)
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ports_and_ranges() {
        assert_eq!(PortRange::parse("4190"), Ok(PortRange::single(4190)));
        assert_eq!(
            PortRange::parse(" 9000 - 9100 "),
            Ok(PortRange {
                first: 9000,
                last: 9100
            })
        );
        assert_eq!(PortRange::parse("25-25").unwrap().slots(), 1);
        assert_eq!(PortRange::parse("1-2").unwrap().iptables(), "1:2");
        assert_eq!(
            PortRange::parse_list("1, 2-3,,").unwrap(),
            vec![PortRange::single(1), PortRange { first: 2, last: 3 }]
        );
    }

    #[test]
    fn rejects_what_iptables_would() {
        for bad in ["", "0", "65536", "a", "5-3", "1-", "-1", "1-2-3"] {
            assert!(PortRange::parse(bad).is_err(), "{bad}");
        }
        assert!(PortRange::parse_list("80,http")
            .unwrap_err()
            .contains("http"));
    }
}
