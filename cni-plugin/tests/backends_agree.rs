//! Every backend means the same plan: for random settings, iptables legacy, iptables nft and the
//! netlink nftables backend each install a pod's rules (both families) into a fresh network
//! namespace; the system's own tools read back what the kernel holds (`iptables-save`,
//! `nft -j list`), and each reading, parsed back into the plan's data, must be exactly
//! `plan(settings, family)` and be entered from the same hooks. The readers here are independent of
//! the renderers, so a renderer that drifts (a rule dropped, a match changed) fails the case.
//! Needs root; no apiserver. The last test is the pure half: the iptables rendering read back
//! without a kernel.

use linkerd_cni::backend::{Backend, Iptables, Nftables};
use linkerd_cni::plan::iptables::{rules, NatTable};
use linkerd_cni::plan::{
    plan, Family, Match, Plan, RuleSettings, Step, OUTPUT_CHAIN, REDIRECT_CHAIN,
};
use linkerd_cni::ports::PortRange;
use linkerd_cni::IptablesMode;
use linkerd_multus_e2e::netns::NetNs;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::Value;

const BOTH: [Family; 2] = [Family::V4, Family::V6];

/// What a family's rules mean in the kernel: which nat hook (at iptables' nat priority) enters
/// which of our chains, and the chains' steps.
#[derive(Debug, PartialEq)]
struct Meaning {
    entries: Vec<(String, String)>,
    plan: Plan,
}

fn planned(s: &RuleSettings, family: Family) -> Meaning {
    Meaning {
        entries: vec![
            ("prerouting".into(), REDIRECT_CHAIN.into()),
            ("output".into(), OUTPUT_CHAIN.into()),
        ],
        plan: plan(s, family),
    }
}

impl Meaning {
    /// Nothing read yet.
    fn new(family: Family) -> Self {
        Meaning {
            entries: Vec::new(),
            plan: Plan {
                family,
                inbound: Vec::new(),
                outbound: Vec::new(),
            },
        }
    }

    /// Appends the step of a rule in `chain`, merging it into the step before when both skip
    /// ports: a backend may spread one ports step over several rules (iptables' multiport groups,
    /// nftables' rule per range).
    fn step(&mut self, chain: &str, step: Step) -> Result<(), String> {
        let steps = match chain {
            REDIRECT_CHAIN => &mut self.plan.inbound,
            OUTPUT_CHAIN => &mut self.plan.outbound,
            other => return Err(format!("a rule in chain {other}")),
        };
        match (steps.last_mut(), step) {
            (Some(Step::Skip(Match::Ports(before))), Step::Skip(Match::Ports(more))) => {
                before.extend(more)
            }
            (_, step) => steps.push(step),
        }
        Ok(())
    }
}

/// One rule's matches, as either tool states them, before they are judged as a step.
#[derive(Debug, Default, PartialEq)]
struct Matches {
    tcp: bool,
    dports: Option<Vec<PortRange>>,
    subnet: Option<ipnet::IpNet>,
    uid: Option<u32>,
    gid: Option<u32>,
    oif: Option<String>,
}

/// The step a rule with `m` and a RETURN (`to: None`) or a REDIRECT to `to` means; an error for any
/// combination the plan has no step for.
fn step_of(m: Matches, to: Option<u16>) -> Result<Step, String> {
    let Matches {
        tcp,
        dports,
        subnet,
        uid,
        gid,
        oif,
    } = m;
    let ret = |m| Ok(Step::Skip(m));
    match (to, tcp, dports, subnet, uid, gid, oif.as_deref()) {
        (None, true, Some(p), None, None, None, None) => ret(Match::Ports(p)),
        (None, false, None, Some(n), None, None, None) => ret(Match::Subnet(n)),
        (None, false, None, None, Some(u), None, None) => ret(Match::Uid(u)),
        (None, false, None, None, None, Some(g), None) => ret(Match::Gid(g)),
        (None, false, None, None, None, None, Some("lo")) => ret(Match::Loopback),
        (Some(to), true, None, None, None, None, None) => Ok(Step::Redirect { dport: None, to }),
        (Some(to), true, Some(p), None, None, None, None)
            if p.len() == 1 && p[0].first == p[0].last =>
        {
            Ok(Step::Redirect {
                dport: Some(p[0].first),
                to,
            })
        }
        other => Err(format!("no step of the plan: {other:?}")),
    }
}

// === iptables-save ===

/// Splits a saved rule into its words; `"..."` is one word (comments are quoted).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {}
            '"' => out.push(chars.by_ref().take_while(|c| *c != '"').collect()),
            c => {
                let mut w = c.to_string();
                while let Some(c) = chars.next_if(|c| *c != ' ') {
                    w.push(c);
                }
                out.push(w);
            }
        }
    }
    out
}

fn num<T: std::str::FromStr>(w: Option<&String>) -> Result<T, String> {
    w.and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("not a number: {w:?}"))
}

/// A saved rule: its chain, its target (`RETURN`, `REDIRECT`, a chain) with `--to-ports`, and its
/// matches. Unknown words are an error: nothing of a rule goes unread.
fn read_rule(line: &str) -> Result<(String, String, Option<u16>, Matches), String> {
    let w = words(line);
    let mut it = w.iter();
    let (mut chain, mut target, mut to, mut m) = (None, None, None, Matches::default());
    while let Some(word) = it.next() {
        match word.as_str() {
            "-A" => chain = it.next().cloned(),
            "-j" => target = it.next().cloned(),
            "--to-ports" => to = Some(num(it.next())?),
            "-p" if it.next().map(String::as_str) == Some("tcp") => m.tcp = true,
            // Modules only name where the options after them come from.
            "-m" => {
                it.next();
            }
            "--comment" => {
                it.next();
            }
            "--dports" | "--dport" => {
                let list = it.next().ok_or("a port list")?;
                let ports = list
                    .split(',')
                    .map(|p| PortRange::parse(&p.replace(':', "-")))
                    .collect::<Result<_, _>>()?;
                m.dports = Some(ports);
            }
            "-s" => m.subnet = Some(num(it.next())?),
            "--uid-owner" => m.uid = Some(num(it.next())?),
            "--gid-owner" => m.gid = Some(num(it.next())?),
            "-o" => m.oif = it.next().cloned(),
            other => return Err(format!("unknown word `{other}` in `{line}`")),
        }
    }
    let chain = chain.ok_or_else(|| format!("no chain: {line}"))?;
    let target = target.ok_or_else(|| format!("no target: {line}"))?;
    Ok((chain, target, to, m))
}

/// The meaning of a family's `iptables-save -t nat`.
fn read_iptables(save: &str, family: Family) -> Result<Meaning, String> {
    let table = NatTable::parse(save);
    let mut read = Meaning::new(family);
    for line in &table.rules {
        let (chain, target, to, m) = read_rule(line)?;
        let ours = [REDIRECT_CHAIN, OUTPUT_CHAIN];
        if !ours.contains(&chain.as_str()) {
            // A built-in chain: only its jumps into ours are ours.
            if ours.contains(&target.as_str()) {
                if m != Matches::default() {
                    return Err(format!("a conditional jump into our chain: {line}"));
                }
                read.entries.push((chain.to_lowercase(), target));
            }
            continue;
        }
        let to = match (target.as_str(), to) {
            ("RETURN", None) => None,
            ("REDIRECT", Some(to)) => Some(to),
            _ => return Err(format!("a target the plan has not: {line}")),
        };
        read.step(&chain, step_of(m, to)?)?;
    }
    Ok(read)
}

// === nft -j list ===

fn json_u32(v: &Value) -> Result<u32, String> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("not a number: {v}"))
}

fn json_port(v: &Value) -> Result<u16, String> {
    u16::try_from(json_u32(v)?).map_err(|e| e.to_string())
}

/// Adds one `match` expression (`{"op", "left", "right"}`) to `m`. nft folds our `meta l4proto`
/// dependency into `tcp dport`, and our two comparisons of a port range into one `range`.
fn read_match(e: &Value, m: &mut Matches) -> Result<(), String> {
    let (op, left, right) = (&e["op"], &e["left"], &e["right"]);
    let meta = left["meta"]["key"].as_str();
    let payload = (
        left["payload"]["protocol"].as_str(),
        left["payload"]["field"].as_str(),
    );
    let dport = |m: &mut Matches, first, last| m.dports = Some(vec![PortRange { first, last }]);
    match (op.as_str(), meta, payload) {
        (Some("=="), Some("l4proto"), _) if right == "tcp" => m.tcp = true,
        (Some("=="), Some("skuid"), _) => m.uid = Some(json_u32(right)?),
        (Some("=="), Some("skgid"), _) => m.gid = Some(json_u32(right)?),
        (Some("=="), Some("oifname"), _) => m.oif = right.as_str().map(str::to_string),
        (Some("=="), None, (Some("tcp"), Some("dport"))) => {
            m.tcp = true;
            match &right["range"] {
                Value::Array(r) if r.len() == 2 => dport(m, json_port(&r[0])?, json_port(&r[1])?),
                _ => {
                    let p = json_port(right)?;
                    dport(m, p, p)
                }
            }
        }
        (Some("=="), None, (Some("ip" | "ip6"), Some("saddr"))) => {
            let net = match right {
                Value::String(addr) => {
                    format!("{addr}/{}", if addr.contains(':') { 128 } else { 32 })
                }
                _ => format!(
                    "{}/{}",
                    right["prefix"]["addr"].as_str().unwrap_or("?"),
                    right["prefix"]["len"]
                ),
            };
            m.subnet = Some(net.parse().map_err(|e| format!("{net}: {e}"))?);
        }
        _ => return Err(format!("a match the plan has not: {e}")),
    }
    Ok(())
}

/// One listed rule's step.
fn read_nft_rule(rule: &Value) -> Result<Step, String> {
    let (mut m, mut to, mut verdict) = (Matches::default(), None, false);
    for e in rule["expr"].as_array().ok_or("no expressions")? {
        if let Some(mat) = e.get("match") {
            read_match(mat, &mut m)?;
        } else if e.get("return").is_some() {
            verdict = true;
        } else if let Some(r) = e.get("redirect") {
            if r.as_object().map(|o| o.len()) != Some(1) {
                return Err(format!("a redirect the plan has not: {r}"));
            }
            (to, verdict) = (Some(json_port(&r["port"])?), true);
        } else {
            return Err(format!("an expression the plan has not: {e}"));
        }
    }
    if !verdict {
        return Err(format!("a rule without a verdict: {rule}"));
    }
    step_of(m, to)
}

/// The meaning of our table as `nft -j list table <family> linkerd-cni` shows it.
fn read_nft(listing: &str, family: Family) -> Result<Meaning, String> {
    let json: Value = serde_json::from_str(listing).map_err(|e| e.to_string())?;
    let mut read = Meaning::new(family);
    for item in json["nftables"].as_array().ok_or("no nftables array")? {
        if let Some(c) = item.get("chain") {
            let name = c["name"].as_str().unwrap_or("?").to_string();
            // Our chains sit where iptables' nat chains do: type nat, priority dstnat (-100).
            if c["type"] == "nat" && c["prio"] == -100 && c["policy"] == "accept" {
                read.entries
                    .push((c["hook"].as_str().unwrap_or("?").to_string(), name));
            } else {
                return Err(format!("a chain not hooked as iptables' nat: {c}"));
            }
        } else if let Some(r) = item.get("rule") {
            read.step(r["chain"].as_str().unwrap_or("?"), read_nft_rule(r)?)?;
        }
    }
    Ok(read)
}

// === the properties ===

fn port() -> impl Strategy<Value = u16> {
    1..=u16::MAX
}

fn port_range() -> impl Strategy<Value = PortRange> {
    (port(), prop_oneof![Just(0u16), 0..200u16]).prop_map(|(first, len)| PortRange {
        first,
        last: first.saturating_add(len),
    })
}

/// Subnets of both families. No `/0`: iptables saves `-s 0.0.0.0/0` as no match at all (the same
/// meaning, but CHECK's line comparison would call it a difference): left open, not this test's.
fn subnet() -> impl Strategy<Value = ipnet::IpNet> {
    prop_oneof![
        (any::<[u8; 4]>(), 1..=32u8).prop_map(|(a, len)| {
            ipnet::IpNet::V4(ipnet::Ipv4Net::new(a.into(), len).expect("a prefix length"))
        }),
        (any::<[u8; 16]>(), 1..=128u8).prop_map(|(a, len)| {
            ipnet::IpNet::V6(ipnet::Ipv6Net::new(a.into(), len).expect("a prefix length"))
        }),
    ]
}

fn id() -> impl Strategy<Value = Option<u32>> {
    proptest::option::of(0..=vocab::MAX_KUBERNETES_UID)
}

/// Settings as the plugin can be given them; more than 15 ignored ports, so iptables splits them.
fn settings() -> impl Strategy<Value = RuleSettings> {
    (
        (port(), port(), id(), id()),
        proptest::collection::vec(port(), 0..4),
        proptest::collection::vec(port_range(), 0..20),
        proptest::collection::vec(port_range(), 0..20),
        proptest::collection::vec(subnet(), 0..5),
    )
        .prop_map(
            |((inc, out, uid, gid), redirect, inbound, outbound, subnets)| RuleSettings {
                incoming_proxy_port: inc,
                outgoing_proxy_port: out,
                proxy_uid: uid,
                proxy_gid: gid,
                ports_to_redirect: redirect,
                inbound_ports_to_ignore: inbound,
                outbound_ports_to_ignore: outbound,
                subnets_to_ignore: subnets,
            },
        )
}

fn stdout(ns: &NetNs, args: &[&str]) -> String {
    let out = ns.exec(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Installs `s` with `backend` into a fresh netns and reads each family back with `read`.
fn installed(
    backend: &dyn Backend,
    s: &RuleSettings,
    read: impl Fn(&NetNs, Family) -> Result<Meaning, String>,
) -> Result<Vec<Meaning>, TestCaseError> {
    let ns = NetNs::create("lcni-agree");
    backend
        .install(&ns.path(), s)
        .map_err(|e| TestCaseError::fail(format!("{backend:?} install: {e}")))?;
    BOTH.iter()
        .map(|f| read(&ns, *f).map_err(|e| TestCaseError::fail(format!("{backend:?}: {e}"))))
        .collect()
}

fn iptables(mode: IptablesMode, s: &RuleSettings) -> Result<Vec<Meaning>, TestCaseError> {
    let b = Iptables {
        mode,
        families: BOTH.to_vec(),
        use_wait_flag: false,
    };
    let flavour = if mode == IptablesMode::Legacy {
        "legacy"
    } else {
        "nft"
    };
    installed(&b, s, |ns, family| {
        let save = match family {
            Family::V4 => format!("iptables-{flavour}-save"),
            Family::V6 => format!("ip6tables-{flavour}-save"),
        };
        read_iptables(&stdout(ns, &[&save, "-t", "nat"]), family)
    })
}

fn nftables(s: &RuleSettings) -> Result<Vec<Meaning>, TestCaseError> {
    let b = Nftables {
        families: BOTH.to_vec(),
    };
    installed(&b, s, |ns, family| {
        let fam = if family == Family::V4 { "ip" } else { "ip6" };
        read_nft(
            &stdout(ns, &["nft", "-j", "list", "table", fam, "linkerd-cni"]),
            family,
        )
    })
}

/// Few cases (each makes three network namespaces); failures are not persisted to a file.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..Config::default()
    })
}

/// If this fails, a pod's rules mean something else on a node that runs another backend.
#[test]
#[ignore = "needs root (netns, iptables, nftables): run by e2e/test-all"]
fn every_backend_installs_the_same_plan() {
    runner(24)
        .run(&settings(), |s| {
            for (backend, read) in [
                ("iptables legacy", iptables(IptablesMode::Legacy, &s)?),
                ("iptables nft", iptables(IptablesMode::Nft, &s)?),
                ("nftables (netlink)", nftables(&s)?),
            ] {
                for (got, family) in read.iter().zip(BOTH) {
                    prop_assert_eq!(got, &planned(&s, family), "{} {:?}", backend, family);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// The iptables rendering read back without a kernel (the rendering is `iptables-save`'s form):
/// cheap, so it runs with the pure tests and catches a renderer's drift before the netns tier.
#[test]
fn the_iptables_rendering_reads_back_as_the_plan() {
    runner(256)
        .run(
            &(settings(), prop_oneof![Just(Family::V4), Just(Family::V6)]),
            |(s, family)| {
                let r = rules(&plan(&s, family));
                let save = format!(
                    "*nat\n{}\nCOMMIT\n",
                    r.create_input()
                        .lines()
                        .filter(|l| l.starts_with("-A "))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                let got = read_iptables(&save, family).map_err(TestCaseError::fail)?;
                prop_assert_eq!(got, planned(&s, family));
                Ok(())
            },
        )
        .unwrap();
}

/// The reader is strict: a uid exemption without its uid is no step of the plan.
#[test]
fn the_iptables_reader_refuses_what_the_plan_has_not() {
    let save = "*nat\n-A PROXY_INIT_OUTPUT -m owner -j RETURN\nCOMMIT\n";
    let err = read_iptables(save, Family::V4).unwrap_err();
    assert!(err.starts_with("no step of the plan"), "{err}");
    let save = "*nat\n-A PROXY_INIT_OUTPUT -m mark --mark 1 -j RETURN\nCOMMIT\n";
    let err = read_iptables(save, Family::V4).unwrap_err();
    assert!(err.starts_with("unknown word `--mark`"), "{err}");
}
