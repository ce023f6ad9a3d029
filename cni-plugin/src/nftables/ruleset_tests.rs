//! Table tests of the nftables rendering: each case asserts the whole table as `nft list table`
//! text.

use super::*;
use crate::nftables::expr::Expr;
use crate::plan::tests::{base, ports};
use crate::plan::{plan, RuleSettings};

/// The nftables rendering of `settings`' plan.
fn planned(settings: &RuleSettings, family: Family) -> Table {
    table(&plan(settings, family))
}

/// If this regresses, the rules a pod gets in nftables mode change: every case spells them out.
#[test]
fn whole_table_per_case() {
    let cases: Vec<(&str, RuleSettings, Family, &str)> = vec![
        (
            "defaults",
            base(),
            Family::V4,
            concat!(
                r#"table ip linkerd-cni {
	chain PROXY_INIT_REDIRECT {
		type nat hook prerouting priority -100; policy accept;
		meta l4proto tcp redirect to :4143 comment "proxy-init/redirect-all-incoming-to-proxy-port"
	}
"#,
                include_str!("../../../fixtures/nft-default-output-chain.txt"),
                "}\n"
            ),
        ),
        (
            "ports, ranges, subnets of both families, uid and gid",
            RuleSettings {
                incoming_proxy_port: 5143,
                outgoing_proxy_port: 5140,
                proxy_uid: Some(1000650000),
                proxy_gid: Some(1000650001),
                inbound_ports_to_ignore: ports("4190,9000-9100"),
                outbound_ports_to_ignore: ports("443,6443-6444"),
                subnets_to_ignore: vec![
                    "10.1.2.3/8".parse().unwrap(),
                    "192.168.0.7/32".parse().unwrap(),
                    "fd00::1/64".parse().unwrap(),
                ],
                ..base()
            },
            Family::V4,
            r#"table ip linkerd-cni {
	chain PROXY_INIT_REDIRECT {
		type nat hook prerouting priority -100; policy accept;
		tcp dport 4190 return comment "proxy-init/ignore-port-4190"
		tcp dport 9000-9100 return comment "proxy-init/ignore-port-9000-9100"
		ip saddr 10.0.0.0/8 return comment "proxy-init/ignore-subnet-10.0.0.0/8"
		ip saddr 192.168.0.7 return comment "proxy-init/ignore-subnet-192.168.0.7/32"
		meta l4proto tcp redirect to :5143 comment "proxy-init/redirect-all-incoming-to-proxy-port"
	}
	chain PROXY_INIT_OUTPUT {
		type nat hook output priority -100; policy accept;
		meta skuid 1000650000 return comment "proxy-init/ignore-proxy-user-id"
		meta skgid 1000650001 return comment "proxy-init/ignore-proxy-group-id"
		oifname "lo" return comment "proxy-init/ignore-loopback"
		tcp dport 443 return comment "proxy-init/ignore-port-443"
		tcp dport 6443-6444 return comment "proxy-init/ignore-port-6443-6444"
		meta l4proto tcp redirect to :5140 comment "proxy-init/redirect-all-outgoing-to-proxy-port"
	}
}
"#,
        ),
        (
            "IPv6 keeps its own subnets; only listed ports redirected",
            RuleSettings {
                ports_to_redirect: vec![8080, 9090],
                subnets_to_ignore: vec![
                    "10.0.0.0/8".parse().unwrap(),
                    "fd00::1/64".parse().unwrap(),
                ],
                proxy_uid: None,
                ..base()
            },
            Family::V6,
            r#"table ip6 linkerd-cni {
	chain PROXY_INIT_REDIRECT {
		type nat hook prerouting priority -100; policy accept;
		ip6 saddr fd00::/64 return comment "proxy-init/ignore-subnet-fd00::/64"
		tcp dport 8080 redirect to :4143 comment "proxy-init/redirect-port-8080-to-proxy-port"
		tcp dport 9090 redirect to :4143 comment "proxy-init/redirect-port-9090-to-proxy-port"
	}
	chain PROXY_INIT_OUTPUT {
		type nat hook output priority -100; policy accept;
		oifname "lo" return comment "proxy-init/ignore-loopback"
		meta l4proto tcp redirect to :4140 comment "proxy-init/redirect-all-outgoing-to-proxy-port"
	}
}
"#,
        ),
    ];
    for (name, settings, family, want) in cases {
        assert_eq!(planned(&settings, family).render(), want, "case: {name}");
    }
}

/// The same settings give the same table: a repeated ADD installs the identical ruleset.
#[test]
fn the_plan_is_deterministic() {
    let s = RuleSettings {
        inbound_ports_to_ignore: ports("1,2-3"),
        ..base()
    };
    assert_eq!(planned(&s, Family::V4), planned(&s, Family::V4));
}

#[test]
fn check_accepts_exactly_the_plan() {
    let t = planned(&base(), Family::V4);
    assert_eq!(t.check(&t.chains), Ok(()));
}

/// CHECK names the first difference, in nft's words.
#[test]
fn check_names_the_first_difference() {
    let t = planned(&base(), Family::V4);
    let with = |f: &dyn Fn(&mut Vec<Chain>)| {
        let mut c = t.chains.clone();
        f(&mut c);
        t.check(&c).unwrap_err()
    };
    assert_eq!(
        with(&|c| {
            c[1].rules.remove(1);
        }),
        "table ip linkerd-cni: rule 2 of PROXY_INIT_OUTPUT is `meta l4proto tcp redirect to :4140 \
         comment \"proxy-init/redirect-all-outgoing-to-proxy-port\"`, expected `oifname \"lo\" return \
         comment \"proxy-init/ignore-loopback\"`"
    );
    assert_eq!(
        with(&|c| {
            c.remove(0);
        }),
        "table ip linkerd-cni: chain PROXY_INIT_REDIRECT does not exist"
    );
    assert_eq!(
        t.check(&[]).unwrap_err(),
        "table ip linkerd-cni: chain PROXY_INIT_REDIRECT does not exist"
    );
    assert_eq!(
        with(&|c| {
            c[0].base = None;
        }),
        "table ip linkerd-cni: chain PROXY_INIT_REDIRECT is `no hook`, expected \
         `type nat hook prerouting priority -100; policy accept;`"
    );
    assert_eq!(
        with(&|c| {
            let extra = c[0].rules[0].clone();
            c[0].rules.push(extra);
        }),
        "table ip linkerd-cni: PROXY_INIT_REDIRECT has an unexpected rule 2: `meta l4proto tcp \
         redirect to :4143 comment \"proxy-init/redirect-all-incoming-to-proxy-port\"`"
    );
    assert_eq!(
        with(&|c| {
            c.push(Chain {
                name: "x".into(),
                base: None,
                rules: vec![],
            });
        }),
        "table ip linkerd-cni: unexpected chain x"
    );
    // Same text, other bytes (a register changed): still a difference.
    let err = with(&|c| {
        if let Expr::Meta { dreg, .. } = &mut c[1].rules[0].exprs[0] {
            *dreg = 2;
        }
    });
    assert!(
        err.contains("rule 1 of PROXY_INIT_OUTPUT differs in its expressions"),
        "{err}"
    );
}
