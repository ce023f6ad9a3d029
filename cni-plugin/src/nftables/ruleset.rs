//! The nf_tables rendering of the [plan](crate::plan): one table of our own per family, as the netlink
//! backend ([`super::netlink`]) writes it, in `nft list` syntax for logs, and the comparison
//! CHECK makes with what the kernel holds.
//!
//! Differences from the iptables rendering, none in what is redirected: the two chains are base
//! chains (no jump from PREROUTING/OUTPUT needed, DEL is deleting the table), and ignored ports are
//! one rule per port or range (nftables has no 15-port multiport limit to group around).

use std::fmt::Write as _;

use ipnet::IpNet;

use super::expr::*;
use crate::plan::{Direction, Family, Match, Plan, Step};
use crate::ports::PortRange;

/// Our table's name, in the `ip` and the `ip6` family. Nothing else lives in it.
pub const TABLE: &str = "linkerd-cni";
pub const HOOK_PREROUTING: u32 = 0;
pub const HOOK_OUTPUT: u32 = 3;
/// `NF_IP_PRI_NAT_DST`, where iptables' nat PREROUTING and OUTPUT sit.
pub const PRIORITY_DSTNAT: i32 = -100;
pub const POLICY_ACCEPT: u32 = 1;

/// The `nfgenmsg` family number and nft's name for it.
pub fn nfproto(family: Family) -> (u8, &'static str) {
    match family {
        Family::V4 => (2, "ip"),
        Family::V6 => (10, "ip6"),
    }
}

/// What makes a chain a base chain: its hook into the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub chain_type: String,
    pub hook: u32,
    pub priority: i32,
    pub policy: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub exprs: Vec<Expr>,
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub name: String,
    pub base: Option<Base>,
    pub rules: Vec<Rule>,
}

/// Our table in one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub family: Family,
    pub chains: Vec<Chain>,
}

fn rule(mut exprs: Vec<Expr>, verdict: Vec<Expr>, comment: String) -> Rule {
    exprs.extend(verdict);
    Rule {
        exprs,
        comment: Some(comment),
    }
}

fn load_cmp(load: Expr, op: u32, data: Vec<u8>) -> [Expr; 2] {
    [
        load,
        Expr::Cmp {
            sreg: REG_1,
            op,
            data,
        },
    ]
}

fn meta_is(key: u32, data: Vec<u8>) -> Vec<Expr> {
    load_cmp(Expr::Meta { key, dreg: REG_1 }, CMP_EQ, data).to_vec()
}

fn tcp() -> Vec<Expr> {
    meta_is(META_L4PROTO, vec![IPPROTO_TCP])
}

/// `tcp dport N` or `tcp dport A-B`.
fn tcp_dport(p: &PortRange) -> Vec<Expr> {
    let mut e = tcp();
    e.push(Expr::Payload {
        base: PAYLOAD_TRANSPORT,
        offset: 2,
        len: 2,
        dreg: REG_1,
    });
    let cmp = |op, port: u16| Expr::Cmp {
        sreg: REG_1,
        op,
        data: port.to_be_bytes().to_vec(),
    };
    if p.first == p.last {
        e.push(cmp(CMP_EQ, p.first));
    } else {
        e.push(cmp(CMP_GTE, p.first));
        e.push(cmp(CMP_LTE, p.last));
    }
    e
}

/// `ip saddr NET` / `ip6 saddr NET`; the mask is left out for a single address, as nft does.
fn saddr(net: &IpNet) -> Vec<Expr> {
    let (offset, addr, mask) = match net.trunc() {
        IpNet::V4(n) => (
            12,
            n.addr().octets().to_vec(),
            n.netmask().octets().to_vec(),
        ),
        IpNet::V6(n) => (8, n.addr().octets().to_vec(), n.netmask().octets().to_vec()),
    };
    let len = addr.len() as u32;
    let mut e = vec![Expr::Payload {
        base: PAYLOAD_NETWORK,
        offset,
        len,
        dreg: REG_1,
    }];
    if net.prefix_len() != net.max_prefix_len() {
        e.push(Expr::Bitwise {
            sreg: REG_1,
            dreg: REG_1,
            len,
            mask,
            xor: vec![0; addr.len()],
        });
    }
    e.push(Expr::Cmp {
        sreg: REG_1,
        op: CMP_EQ,
        data: addr,
    });
    e
}

fn ret() -> Vec<Expr> {
    vec![Expr::Verdict {
        code: VERDICT_RETURN,
    }]
}

fn redirect(port: u16) -> Vec<Expr> {
    vec![
        Expr::Immediate {
            dreg: REG_1,
            data: port.to_be_bytes().to_vec(),
        },
        Expr::Redir {
            proto_min: REG_1,
            proto_max: REG_1,
            flags: NAT_PROTO_SPECIFIED,
        },
    ]
}

fn nat_base(hook: u32) -> Option<Base> {
    Some(Base {
        chain_type: "nat".into(),
        hook,
        priority: PRIORITY_DSTNAT,
        policy: POLICY_ACCEPT,
    })
}

/// The rendering of `plan`: our table in its family, both chains hooked in as base chains.
pub fn table(plan: &Plan) -> Table {
    let chain = |(dir, steps): (Direction, &[Step]), hook| Chain {
        name: dir.chain().into(),
        base: nat_base(hook),
        rules: steps.iter().flat_map(|s| rules(dir, s)).collect(),
    };
    let [inbound, outbound] = plan.chains();
    Table {
        family: plan.family,
        chains: vec![
            chain(inbound, HOOK_PREROUTING),
            chain(outbound, HOOK_OUTPUT),
        ],
    }
}

/// A step's rules: one, or one per ignored port or range.
fn rules(dir: Direction, step: &Step) -> Vec<Rule> {
    let one = |m: Vec<Expr>, verdict| vec![rule(m, verdict, step.comment(dir, ""))];
    match step {
        Step::Skip(Match::Ports(ports)) => ports
            .iter()
            .map(|p| rule(tcp_dport(p), ret(), step.comment(dir, &p.to_string())))
            .collect(),
        Step::Skip(Match::Subnet(net)) => one(saddr(net), ret()),
        Step::Skip(Match::Uid(uid)) => one(meta_is(META_SKUID, uid.to_ne_bytes().to_vec()), ret()),
        Step::Skip(Match::Gid(gid)) => one(meta_is(META_SKGID, gid.to_ne_bytes().to_vec()), ret()),
        Step::Skip(Match::Loopback) => {
            let mut lo = b"lo".to_vec();
            lo.resize(IFNAMSIZ, 0);
            one(meta_is(META_OIFNAME, lo), ret())
        }
        Step::Redirect { dport: None, to } => one(tcp(), redirect(*to)),
        Step::Redirect { dport: Some(p), to } => {
            one(tcp_dport(&PortRange::single(*p)), redirect(*to))
        }
    }
}

impl Rule {
    /// As `nft list` prints a rule.
    pub fn render(&self) -> String {
        let mut s = render(&self.exprs);
        if let Some(c) = &self.comment {
            let _ = write!(s, " comment {c:?}");
        }
        s
    }
}

impl Base {
    fn render(&self) -> String {
        let hook = match self.hook {
            HOOK_PREROUTING => "prerouting".to_string(),
            HOOK_OUTPUT => "output".to_string(),
            n => format!("hook#{n}"),
        };
        let policy = if self.policy == POLICY_ACCEPT {
            "accept".to_string()
        } else {
            format!("policy#{}", self.policy)
        };
        format!(
            "type {} hook {hook} priority {}; policy {policy};",
            self.chain_type, self.priority
        )
    }
}

impl Table {
    /// The table in `nft list table` syntax: what ADD installs, for logs, `simulate` and tests.
    pub fn render(&self) -> String {
        let mut out = format!("table {} {TABLE} {{\n", nfproto(self.family).1);
        for c in &self.chains {
            let _ = writeln!(out, "\tchain {} {{", c.name);
            if let Some(b) = &c.base {
                let _ = writeln!(out, "\t\t{}", b.render());
            }
            for r in &c.rules {
                let _ = writeln!(out, "\t\t{}", r.render());
            }
            out.push_str("\t}\n");
        }
        out.push_str("}\n");
        out
    }

    /// CHECK: `found` (our table's chains as the kernel lists them) must be exactly this table.
    /// The error names the first difference.
    pub fn check(&self, found: &[Chain]) -> Result<(), String> {
        let (_, fam) = nfproto(self.family);
        let at = format!("table {fam} {TABLE}");
        for want in &self.chains {
            let name = &want.name;
            let Some(got) = found.iter().find(|c| c.name == *name) else {
                return Err(format!("{at}: chain {name} does not exist"));
            };
            if got.base != want.base {
                let shown = |b: &Option<Base>| b.as_ref().map_or("no hook".into(), Base::render);
                return Err(format!(
                    "{at}: chain {name} is `{}`, expected `{}`",
                    shown(&got.base),
                    shown(&want.base)
                ));
            }
            for (i, w) in want.rules.iter().enumerate() {
                let n = i + 1;
                match got.rules.get(i) {
                    Some(g) if g == w => {}
                    Some(g) if g.render() == w.render() => {
                        return Err(format!(
                        "{at}: rule {n} of {name} differs in its expressions: {:?}, expected {:?}",
                        g.exprs, w.exprs
                    ))
                    }
                    Some(g) => {
                        return Err(format!(
                            "{at}: rule {n} of {name} is `{}`, expected `{}`",
                            g.render(),
                            w.render()
                        ))
                    }
                    None => {
                        return Err(format!(
                            "{at}: rule {n} of {name} is missing, expected `{}`",
                            w.render()
                        ))
                    }
                }
            }
            if let Some(extra) = got.rules.get(want.rules.len()) {
                return Err(format!(
                    "{at}: {name} has an unexpected rule {}: `{}`",
                    want.rules.len() + 1,
                    extra.render()
                ));
            }
        }
        if let Some(extra) = found
            .iter()
            .find(|c| !self.chains.iter().any(|w| w.name == c.name))
        {
            return Err(format!("{at}: unexpected chain {}", extra.name));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "ruleset_tests.rs"]
mod tests;
