//! Table tests of the iptables rendering: each case asserts the whole `iptables-restore` input.

use super::*;
use crate::plan::tests::{base, ports};
use crate::plan::{plan, RuleSettings};

/// The iptables rendering of `settings`' plan.
fn planned(settings: &RuleSettings, family: Family) -> Rules {
    rules(&plan(settings, family))
}

const HEAD: &str = "*nat\n:PROXY_INIT_REDIRECT - [0:0]\n:PROXY_INIT_OUTPUT - [0:0]\n";
const HOOKS: &str = "\
-A PREROUTING -m comment --comment \"proxy-init/install-proxy-init-prerouting\" -j PROXY_INIT_REDIRECT
-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT
COMMIT
";

/// If this regresses, the rules a fresh pod gets change: every case spells them out in full.
#[test]
fn restore_input_for_a_fresh_netns() {
    let cases: Vec<(&str, RuleSettings, Family, &str)> = vec![
        ("defaults", base(), Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        ("ports, ranges, custom proxy ports, uid and gid", RuleSettings {
            incoming_proxy_port: 5143,
            outgoing_proxy_port: 5140,
            proxy_uid: Some(1000650000),
            proxy_gid: Some(1000650001),
            inbound_ports_to_ignore: ports("4190,4191,9000-9100"),
            outbound_ports_to_ignore: ports("443,6443-6444"),
            ..base()
        }, Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4190,4191,9000:9100 -m comment --comment \"proxy-init/ignore-port-4190,4191,9000:9100\" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 5143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 1000650000 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -m owner --gid-owner 1000650001 -m comment --comment \"proxy-init/ignore-proxy-group-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 443,6443:6444 -m comment --comment \"proxy-init/ignore-port-443,6443:6444\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 5140
"),
        ("no uid: nothing bypasses the outbound redirect", RuleSettings { proxy_uid: None, ..base() }, Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        // 13 single ports (13 slots) + a range (2) = 15 fill the first group; the next range opens a second.
        (">15 slots split into groups", RuleSettings {
            inbound_ports_to_ignore: ports("1,2,3,4,5,6,7,8,9,10,11,12,13,100-200,300-400,500"),
            ..base()
        }, Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,100:200 -m comment --comment \"proxy-init/ignore-port-1,2,3,4,5,6,7,8,9,10,11,12,13,100:200\" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 300:400,500 -m comment --comment \"proxy-init/ignore-port-300:400,500\" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        // 14 single ports leave one slot: a range does not fit and starts the next group.
        ("a range never straddles groups", RuleSettings {
            outbound_ports_to_ignore: ports("1,2,3,4,5,6,7,8,9,10,11,12,13,14,20-30"),
            ..base()
        }, Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14 -m comment --comment \"proxy-init/ignore-port-1,2,3,4,5,6,7,8,9,10,11,12,13,14\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 20:30 -m comment --comment \"proxy-init/ignore-port-20:30\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        ("subnets (host bits dropped) and ports-to-redirect, ipv4 keeps ipv4 subnets", RuleSettings {
            subnets_to_ignore: vec!["10.1.2.3/8".parse().unwrap(), "fd00::/8".parse().unwrap(), "192.168.0.7/32".parse().unwrap()],
            ports_to_redirect: vec![8080, 9090],
            ..base()
        }, Family::V4, "\
-A PROXY_INIT_REDIRECT -s 10.0.0.0/8 -m comment --comment \"proxy-init/ignore-subnet-10.0.0.0/8\" -j RETURN
-A PROXY_INIT_REDIRECT -s 192.168.0.7/32 -m comment --comment \"proxy-init/ignore-subnet-192.168.0.7/32\" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m tcp --dport 8080 -m comment --comment \"proxy-init/redirect-port-8080-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_REDIRECT -p tcp -m tcp --dport 9090 -m comment --comment \"proxy-init/redirect-port-9090-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        ("ipv6 keeps only ipv6 subnets", RuleSettings {
            subnets_to_ignore: vec!["10.0.0.0/8".parse().unwrap(), "fd00:1::5/64".parse().unwrap()],
            inbound_ports_to_ignore: ports("4190"),
            ..base()
        }, Family::V6, "\
-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4190 -m comment --comment \"proxy-init/ignore-port-4190\" -j RETURN
-A PROXY_INIT_REDIRECT -s fd00:1::/64 -m comment --comment \"proxy-init/ignore-subnet-fd00:1::/64\" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
        // What overrides.rs produces for a control-plane pod: the apiserver's ports appended.
        ("control plane: apiserver ports skip outbound", RuleSettings {
            outbound_ports_to_ignore: ports("4567,4568,443,6443"),
            ..base()
        }, Family::V4, "\
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 4567,4568,443,6443 -m comment --comment \"proxy-init/ignore-port-4567,4568,443,6443\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
"),
    ];
    for (name, settings, family, rules) in cases {
        let got = planned(&settings, family).restore_input(&NatTable::default());
        assert_eq!(got, format!("{HEAD}{rules}{HOOKS}"), "case: {name}");
    }
}

/// The create input is the fresh-netns input with `-N` in place of the flushing `:CHAIN` lines.
#[test]
fn create_input_creates_the_chains_and_both_hooks() {
    let p = planned(&base(), Family::V4);
    let want = p
        .restore_input(&NatTable::default())
        .replace(":PROXY_INIT_REDIRECT - [0:0]", "-N PROXY_INIT_REDIRECT")
        .replace(":PROXY_INIT_OUTPUT - [0:0]", "-N PROXY_INIT_OUTPUT");
    assert_eq!(p.create_input(), want);
    assert!(p.create_input().starts_with(
        "*nat\n-N PROXY_INIT_REDIRECT\n-N PROXY_INIT_OUTPUT\n-A PROXY_INIT_REDIRECT "
    ));
    assert!(want.ends_with(HOOKS), "{want}");
}

/// Only a failure at a `-N` line (our chain exists) lets ADD fall back to save + restore; the
/// stderr texts are what iptables 1.8.9's legacy and nft restores print.
#[test]
fn only_a_failed_chain_creation_means_our_chains_exist() {
    let input = planned(&base(), Family::V4).create_input();
    let cases = [
        ("iptables-restore: line 2 failed", true),
        (
            "iptables-nft-restore: line 3 failed: Chain already exists.",
            true,
        ),
        ("ip6tables-restore: line 2 failed", true),
        // A rule line: the kernel refused a rule, which a fallback would only hide.
        ("iptables-restore: line 4 failed", false),
        (
            "iptables-nft-restore: line 7 failed: No chain/target/match by that name.",
            false,
        ),
        (
            "ip6tables-restore v1.8.9 (legacy): Couldn't load match `nosuchmatch':No such file or directory\n\nError occurred at line: 4",
            false,
        ),
        (
            "Another app is currently holding the xtables lock. Stopped waiting after 5s.",
            false,
        ),
        (
            "iptables-restore v1.8.9 (legacy): iptables-restore: unable to initialize table 'nat'",
            false,
        ),
        ("line 0 failed", false),
        ("line 99 failed", false),
        ("", false),
    ];
    for (stderr, exists) in cases {
        assert_eq!(failed_creating_a_chain(&input, stderr), exists, "{stderr}");
    }
}

const SAVED: &str = "\
# Generated by iptables-save v1.8.9 on Sun Nov 22 14:53:08 2026
*filter
:INPUT ACCEPT [0:0]
-A INPUT -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:PROXY_INIT_OUTPUT - [0:0]
:PROXY_INIT_REDIRECT - [0:0]
-A PREROUTING -m comment --comment \"proxy-init/install-proxy-init-prerouting\" -j PROXY_INIT_REDIRECT
-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT
-A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment \"proxy-init/ignore-loopback\" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment \"proxy-init/redirect-all-outgoing-to-proxy-port\" -j REDIRECT --to-ports 4140
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143
COMMIT
# Completed on Sun Nov 22 14:53:08 2026
";

/// A repeated ADD must not append the hooks a second time.
#[test]
fn existing_hooks_are_not_added_again() {
    let current = NatTable::parse(SAVED);
    assert_eq!(current.chains.len(), 6);
    assert_eq!(current.rules.len(), 7, "only nat rules are read");
    let input = planned(&base(), Family::V4).restore_input(&current);
    assert!(!input.contains("-A PREROUTING"), "{input}");
    assert!(!input.contains("-A OUTPUT "), "{input}");
    assert!(
        input.starts_with(HEAD) && input.ends_with("to-ports 4140\nCOMMIT\n"),
        "{input}"
    );
}

#[test]
fn check_accepts_exactly_the_plan() {
    let current = NatTable::parse(SAVED);
    assert_eq!(planned(&base(), Family::V4).check(&current), Ok(()));
}

/// CHECK must say which rule differs, not just "mismatch".
#[test]
fn check_names_the_first_difference() {
    let p = planned(&base(), Family::V4);
    let tampered = |from: &str, to: &str| NatTable::parse(&SAVED.replacen(from, to, 1));
    let cases = [
        (tampered("--uid-owner 2102", "--uid-owner 0"),
         "ipv4: rule 1 of PROXY_INIT_OUTPUT is `-A PROXY_INIT_OUTPUT -m owner --uid-owner 0 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN`, expected `-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment \"proxy-init/ignore-proxy-user-id\" -j RETURN`"),
        (tampered("-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143\n", ""),
         "ipv4: rule 1 of PROXY_INIT_REDIRECT is missing, expected `-A PROXY_INIT_REDIRECT -p tcp -m comment --comment \"proxy-init/redirect-all-incoming-to-proxy-port\" -j REDIRECT --to-ports 4143`"),
        (tampered("COMMIT\n# Completed", "-A PROXY_INIT_REDIRECT -p udp -j RETURN\nCOMMIT\n# Completed"),
         "ipv4: PROXY_INIT_REDIRECT has an unexpected rule 2: `-A PROXY_INIT_REDIRECT -p udp -j RETURN`"),
        (tampered("-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT\n", ""),
         "ipv4: hook `-A OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT` is present 0 times, expected once"),
        (tampered(":PROXY_INIT_REDIRECT - [0:0]\n", ""),
         "ipv4: chain PROXY_INIT_REDIRECT does not exist in the nat table"),
    ];
    for (table, want) in cases {
        assert_eq!(p.check(&table), Err(want.to_string()));
    }
    assert!(p.check(&NatTable::default()).is_err());
}

#[test]
fn delete_removes_hooks_then_chains_and_nothing_else() {
    let want = "\
*nat
-D PREROUTING -m comment --comment \"proxy-init/install-proxy-init-prerouting\" -j PROXY_INIT_REDIRECT
-D OUTPUT -m comment --comment \"proxy-init/install-proxy-init-output\" -j PROXY_INIT_OUTPUT
-F PROXY_INIT_REDIRECT
-X PROXY_INIT_REDIRECT
-F PROXY_INIT_OUTPUT
-X PROXY_INIT_OUTPUT
COMMIT
";
    assert_eq!(delete_input(&NatTable::parse(SAVED)).as_deref(), Some(want));
    let clean =
        NatTable::parse("*nat\n:PREROUTING ACCEPT [0:0]\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n");
    assert_eq!(delete_input(&clean), None);
}

#[test]
fn multiport_groups_respect_the_slot_limit() {
    let many: Vec<PortRange> = (1..=40).map(PortRange::single).collect();
    let groups = multiport_groups(&many);
    assert_eq!(
        groups.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![15, 15, 10]
    );
    let ranges: Vec<PortRange> = (0..8)
        .map(|i| PortRange {
            first: i * 10 + 1,
            last: i * 10 + 5,
        })
        .collect();
    let groups = multiport_groups(&ranges);
    assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), vec![7, 1]);
    assert!(multiport_groups(&[]).is_empty());
}
