//! Tests of the plan as data; each backend's rendering of it is tested beside that backend
//! (`iptables_tests.rs` here, `nftables/ruleset_tests.rs`).

use super::*;

/// Linkerd's default settings (shared with the renderers' tests).
pub(crate) fn base() -> RuleSettings {
    RuleSettings {
        incoming_proxy_port: 4143,
        outgoing_proxy_port: 4140,
        proxy_uid: Some(2102),
        proxy_gid: None,
        ports_to_redirect: vec![],
        inbound_ports_to_ignore: vec![],
        outbound_ports_to_ignore: vec![],
        subnets_to_ignore: vec![],
    }
}

/// The plugin's defaults are Linkerd's, spelled out above.
#[test]
fn defaults_are_linkerds() {
    assert_eq!(RuleSettings::default(), base());
}

pub(crate) fn ports(list: &str) -> Vec<PortRange> {
    PortRange::parse_list(list).unwrap()
}

/// The decisions, whole, per case. If this regresses, every backend writes other rules for a pod.
#[test]
fn the_plan_per_case() {
    use Match::*;
    use Step::{Redirect, Skip};
    let net = |s: &str| s.parse::<IpNet>().unwrap();
    // (name, settings, family, inbound steps, outbound steps)
    type Case = (&'static str, RuleSettings, Family, Vec<Step>, Vec<Step>);
    let cases: Vec<Case> = vec![
        (
            "defaults",
            base(),
            Family::V4,
            vec![Redirect {
                dport: None,
                to: 4143,
            }],
            vec![
                Skip(Uid(2102)),
                Skip(Loopback),
                Redirect {
                    dport: None,
                    to: 4140,
                },
            ],
        ),
        (
            "everything set: ports before subnets inbound, uid before gid before loopback outbound",
            RuleSettings {
                incoming_proxy_port: 5143,
                outgoing_proxy_port: 5140,
                proxy_uid: Some(7),
                proxy_gid: Some(8),
                ports_to_redirect: vec![8080, 9090],
                inbound_ports_to_ignore: ports("4190,9000-9100"),
                outbound_ports_to_ignore: ports("443"),
                subnets_to_ignore: vec![
                    net("10.1.2.3/8"),
                    net("fd00::1/64"),
                    net("192.168.0.7/32"),
                ],
            },
            Family::V4,
            vec![
                Skip(Ports(ports("4190,9000-9100"))),
                Skip(Subnet(net("10.0.0.0/8"))),
                Skip(Subnet(net("192.168.0.7/32"))),
                Redirect {
                    dport: Some(8080),
                    to: 5143,
                },
                Redirect {
                    dport: Some(9090),
                    to: 5143,
                },
            ],
            vec![
                Skip(Uid(7)),
                Skip(Gid(8)),
                Skip(Loopback),
                Skip(Ports(ports("443"))),
                Redirect {
                    dport: None,
                    to: 5140,
                },
            ],
        ),
        (
            "ipv6 keeps only ipv6 subnets; no uid, nothing of the proxy's skips",
            RuleSettings {
                proxy_uid: None,
                subnets_to_ignore: vec![net("10.0.0.0/8"), net("fd00:1::5/64")],
                ..base()
            },
            Family::V6,
            vec![
                Skip(Subnet(net("fd00:1::/64"))),
                Redirect {
                    dport: None,
                    to: 4143,
                },
            ],
            vec![
                Skip(Loopback),
                Redirect {
                    dport: None,
                    to: 4140,
                },
            ],
        ),
    ];
    for (name, settings, family, inbound, outbound) in cases {
        let want = Plan {
            family,
            inbound,
            outbound,
        };
        assert_eq!(plan(&settings, family), want, "case: {name}");
    }
}

/// The comments are proxy-init's names; the port list is the backend's (it may split a step).
#[test]
fn comments_are_proxy_inits() {
    use Direction::*;
    let cases = [
        (
            Step::Skip(Match::Ports(ports("1,2"))),
            Inbound,
            "1,2",
            "proxy-init/ignore-port-1,2",
        ),
        (
            Step::Skip(Match::Loopback),
            Outbound,
            "",
            "proxy-init/ignore-loopback",
        ),
        (
            Step::Redirect { dport: None, to: 1 },
            Inbound,
            "",
            "proxy-init/redirect-all-incoming-to-proxy-port",
        ),
        (
            Step::Redirect { dport: None, to: 1 },
            Outbound,
            "",
            "proxy-init/redirect-all-outgoing-to-proxy-port",
        ),
        (
            Step::Redirect {
                dport: Some(80),
                to: 1,
            },
            Inbound,
            "",
            "proxy-init/redirect-port-80-to-proxy-port",
        ),
    ];
    for (step, dir, list, want) in cases {
        assert_eq!(step.comment(dir, list), want, "{step:?}");
    }
}
