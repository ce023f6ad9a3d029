//! nf_tables expressions, the kernel's bytecode of a rule: the few kinds our rules use, their
//! netlink encoding both ways, and the `nft list` text of the sequences we write.
//!
//! Numbers are the kernel's (`linux/netfilter/nf_tables.h`); they are ABI and never change.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::attr::{self, AttrWriter, Malformed};

/// The verdict register and the first 128-bit data register.
pub const REG_VERDICT: u32 = 0;
pub const REG_1: u32 = 1;

pub const META_OIFNAME: u32 = 7;
pub const META_SKUID: u32 = 10;
pub const META_SKGID: u32 = 11;
pub const META_L4PROTO: u32 = 16;

pub const CMP_EQ: u32 = 0;
pub const CMP_GTE: u32 = 5;
pub const CMP_LTE: u32 = 3;

pub const PAYLOAD_NETWORK: u32 = 1;
pub const PAYLOAD_TRANSPORT: u32 = 2;

pub const VERDICT_RETURN: i32 = -5;
/// `NF_NAT_RANGE_PROTO_SPECIFIED`: the kernel sets it whenever a port register is given.
pub const NAT_PROTO_SPECIFIED: u32 = 2;
pub const IPPROTO_TCP: u8 = 6;
pub const IFNAMSIZ: usize = 16;

const LIST_ELEM: u16 = 1;
const EXPR_NAME: u16 = 1;
const EXPR_DATA: u16 = 2;
const DATA_VALUE: u16 = 1;
const DATA_VERDICT: u16 = 2;
const VERDICT_CODE: u16 = 1;

/// One expression. Registers and keys are kept as the kernel's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Meta {
        key: u32,
        dreg: u32,
    },
    Cmp {
        sreg: u32,
        op: u32,
        data: Vec<u8>,
    },
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    Bitwise {
        sreg: u32,
        dreg: u32,
        len: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    Immediate {
        dreg: u32,
        data: Vec<u8>,
    },
    Verdict {
        code: i32,
    },
    Redir {
        proto_min: u32,
        proto_max: u32,
        flags: u32,
    },
    /// A kind we never write, kept by name so CHECK can say what it found.
    Other {
        name: String,
    },
}

fn u32_of(attrs: &[(u16, &[u8])], ty: u16) -> u32 {
    attr::get(attrs, ty).and_then(attr::be_u32).unwrap_or(0)
}

fn value_of(attrs: &[(u16, &[u8])], ty: u16) -> Result<Vec<u8>, Malformed> {
    match attr::get(attrs, ty) {
        Some(data) => Ok(attr::get(&attr::parse(data)?, DATA_VALUE)
            .unwrap_or_default()
            .to_vec()),
        None => Ok(Vec::new()),
    }
}

impl Expr {
    /// Appends this expression as one element of a rule's expression list.
    pub fn encode(&self, w: &mut AttrWriter) {
        let (name, data) = self.name_and_data();
        w.nested(LIST_ELEM, |e| {
            e.str(EXPR_NAME, name);
            e.bytes(EXPR_DATA | attr::NLA_F_NESTED, &data.buf);
        });
    }

    fn name_and_data(&self) -> (&str, AttrWriter) {
        let mut d = AttrWriter::default();
        let value = |w: &mut AttrWriter, ty: u16, v: &[u8]| {
            w.nested(ty, |n| {
                n.bytes(DATA_VALUE, v);
            });
        };
        let name = match self {
            Expr::Meta { key, dreg } => {
                d.u32_be(1, *dreg).u32_be(2, *key);
                "meta"
            }
            Expr::Cmp { sreg, op, data } => {
                d.u32_be(1, *sreg).u32_be(2, *op);
                value(&mut d, 3, data);
                "cmp"
            }
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                d.u32_be(1, *dreg)
                    .u32_be(2, *base)
                    .u32_be(3, *offset)
                    .u32_be(4, *len);
                "payload"
            }
            Expr::Bitwise {
                sreg,
                dreg,
                len,
                mask,
                xor,
            } => {
                d.u32_be(1, *sreg).u32_be(2, *dreg).u32_be(3, *len);
                value(&mut d, 4, mask);
                value(&mut d, 5, xor);
                "bitwise"
            }
            Expr::Immediate { dreg, data } => {
                d.u32_be(1, *dreg);
                value(&mut d, 2, data);
                "immediate"
            }
            Expr::Verdict { code } => {
                d.u32_be(1, REG_VERDICT).nested(2, |n| {
                    n.nested(DATA_VERDICT, |v| {
                        v.bytes(VERDICT_CODE, &code.to_be_bytes());
                    });
                });
                "immediate"
            }
            Expr::Redir {
                proto_min,
                proto_max,
                flags,
            } => {
                d.u32_be(1, *proto_min)
                    .u32_be(2, *proto_max)
                    .u32_be(3, *flags);
                "redir"
            }
            Expr::Other { name } => name,
        };
        (name, d)
    }

    /// Reads one element of a rule's expression list as the kernel dumps it. Attributes we do not
    /// write (the kernel adds some, e.g. bitwise's operation) are ignored.
    pub fn decode(elem: &[u8]) -> Result<Expr, Malformed> {
        let e = attr::parse(elem)?;
        let name = attr::string(attr::get(&e, EXPR_NAME).unwrap_or_default());
        let d = attr::parse(attr::get(&e, EXPR_DATA).unwrap_or_default())?;
        Ok(match name.as_str() {
            "meta" => Expr::Meta {
                dreg: u32_of(&d, 1),
                key: u32_of(&d, 2),
            },
            "cmp" => Expr::Cmp {
                sreg: u32_of(&d, 1),
                op: u32_of(&d, 2),
                data: value_of(&d, 3)?,
            },
            "payload" => Expr::Payload {
                dreg: u32_of(&d, 1),
                base: u32_of(&d, 2),
                offset: u32_of(&d, 3),
                len: u32_of(&d, 4),
            },
            "bitwise" => Expr::Bitwise {
                sreg: u32_of(&d, 1),
                dreg: u32_of(&d, 2),
                len: u32_of(&d, 3),
                mask: value_of(&d, 4)?,
                xor: value_of(&d, 5)?,
            },
            "immediate" if u32_of(&d, 1) == REG_VERDICT => {
                let data = attr::parse(attr::get(&d, 2).unwrap_or_default())?;
                let verdict = attr::parse(attr::get(&data, DATA_VERDICT).unwrap_or_default())?;
                Expr::Verdict {
                    code: attr::get(&verdict, VERDICT_CODE)
                        .and_then(attr::be_u32)
                        .map_or(0, |c| c as i32),
                }
            }
            "immediate" => Expr::Immediate {
                dreg: u32_of(&d, 1),
                data: value_of(&d, 2)?,
            },
            "redir" => Expr::Redir {
                proto_min: u32_of(&d, 1),
                proto_max: u32_of(&d, 2),
                flags: u32_of(&d, 3),
            },
            _ => Expr::Other { name },
        })
    }

    /// The low-level form, for what has no `nft` spelling here.
    fn raw(&self) -> String {
        format!("[{self:?}]")
    }
}

/// Decodes a rule's expression list (`NFTA_RULE_EXPRESSIONS`).
pub fn decode_list(list: &[u8]) -> Result<Vec<Expr>, Malformed> {
    attr::parse(list)?
        .into_iter()
        .map(|(_, elem)| Expr::decode(elem))
        .collect()
}

fn be16(b: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(b.try_into().ok()?))
}

fn prefix_len(mask: &[u8]) -> u32 {
    mask.iter().map(|b| b.count_ones()).sum()
}

fn addr(b: &[u8]) -> Option<String> {
    match b.len() {
        4 => Some(Ipv4Addr::from(<[u8; 4]>::try_from(b).ok()?).to_string()),
        16 => Some(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?).to_string()),
        _ => None,
    }
}

/// The `nft list` text of an expression list: the sequences our rules use get nft's spelling,
/// anything else its low-level form, so a tampered rule still shows what it does.
pub fn render(exprs: &[Expr]) -> String {
    use Expr::*;
    let mut out: Vec<String> = Vec::new();
    let mut rest = exprs;
    let is_tcp = |key: &u32, op: &u32, data: &[u8]| {
        *key == META_L4PROTO && *op == CMP_EQ && data == [IPPROTO_TCP]
    };
    while let Some(first) = rest.first() {
        let (text, used) = match rest {
            [Meta { key, .. }, Cmp { op, data: p, .. }, Payload {
                base: PAYLOAD_TRANSPORT,
                offset: 2,
                len: 2,
                ..
            }, Cmp {
                op: CMP_EQ,
                data: port,
                ..
            }, ..]
                if is_tcp(key, op, p) && be16(port).is_some() =>
            {
                (format!("tcp dport {}", be16(port).unwrap_or(0)), 4)
            }
            [Meta { key, .. }, Cmp { op, data: p, .. }, Payload {
                base: PAYLOAD_TRANSPORT,
                offset: 2,
                len: 2,
                ..
            }, Cmp {
                op: CMP_GTE,
                data: lo,
                ..
            }, Cmp {
                op: CMP_LTE,
                data: hi,
                ..
            }, ..]
                if is_tcp(key, op, p) && be16(lo).is_some() && be16(hi).is_some() =>
            {
                let (lo, hi) = (be16(lo).unwrap_or(0), be16(hi).unwrap_or(0));
                (format!("tcp dport {lo}-{hi}"), 5)
            }
            [Meta { key, .. }, Cmp { op, data, .. }, ..] if is_tcp(key, op, data) => {
                ("meta l4proto tcp".to_string(), 2)
            }
            [Payload {
                base: PAYLOAD_NETWORK,
                offset: 12 | 8,
                ..
            }, Bitwise { mask, .. }, Cmp {
                op: CMP_EQ, data, ..
            }, ..]
                if addr(data).is_some() =>
            {
                let ip = if data.len() == 4 { "ip" } else { "ip6" };
                let net = addr(data).unwrap_or_default();
                (format!("{ip} saddr {net}/{}", prefix_len(mask)), 3)
            }
            [Payload {
                base: PAYLOAD_NETWORK,
                offset: 12 | 8,
                ..
            }, Cmp {
                op: CMP_EQ, data, ..
            }, ..]
                if addr(data).is_some() =>
            {
                let ip = if data.len() == 4 { "ip" } else { "ip6" };
                (format!("{ip} saddr {}", addr(data).unwrap_or_default()), 2)
            }
            [Meta { key, .. }, Cmp {
                op: CMP_EQ, data, ..
            }, ..]
                if (*key == META_SKUID || *key == META_SKGID) && data.len() == 4 =>
            {
                let id = u32::from_ne_bytes(data[..4].try_into().unwrap_or_default());
                let what = if *key == META_SKUID { "skuid" } else { "skgid" };
                (format!("meta {what} {id}"), 2)
            }
            [Meta {
                key: META_OIFNAME, ..
            }, Cmp {
                op: CMP_EQ, data, ..
            }, ..] => (format!("oifname {:?}", attr::string(data)), 2),
            [Immediate { data, .. }, Redir { .. }, ..] if be16(data).is_some() => {
                (format!("redirect to :{}", be16(data).unwrap_or(0)), 2)
            }
            [Verdict {
                code: VERDICT_RETURN,
            }, ..] => ("return".to_string(), 1),
            _ => (first.raw(), 1),
        };
        out.push(text);
        rest = &rest[used..];
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds() -> Vec<Expr> {
        vec![
            Expr::Meta {
                key: META_L4PROTO,
                dreg: REG_1,
            },
            Expr::Cmp {
                sreg: REG_1,
                op: CMP_EQ,
                data: vec![IPPROTO_TCP],
            },
            Expr::Payload {
                base: PAYLOAD_NETWORK,
                offset: 12,
                len: 4,
                dreg: REG_1,
            },
            Expr::Bitwise {
                sreg: REG_1,
                dreg: REG_1,
                len: 4,
                mask: vec![255, 0, 0, 0],
                xor: vec![0; 4],
            },
            Expr::Immediate {
                dreg: REG_1,
                data: 4143u16.to_be_bytes().to_vec(),
            },
            Expr::Redir {
                proto_min: REG_1,
                proto_max: REG_1,
                flags: NAT_PROTO_SPECIFIED,
            },
            Expr::Verdict {
                code: VERDICT_RETURN,
            },
        ]
    }

    /// What we encode reads back as the same expressions: CHECK compares through this.
    #[test]
    fn every_kind_round_trips() {
        let mut w = AttrWriter::default();
        for e in all_kinds() {
            e.encode(&mut w);
        }
        assert_eq!(decode_list(&w.buf).unwrap(), all_kinds());
    }

    #[test]
    fn unknown_sequences_render_low_level() {
        let exprs = [Expr::Other {
            name: "counter".into(),
        }];
        assert_eq!(render(&exprs), "[Other { name: \"counter\" }]");
    }
}
