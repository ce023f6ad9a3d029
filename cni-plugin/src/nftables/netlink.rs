//! nf_tables over a `NETLINK_NETFILTER` socket: building the batch (pure) and the thin I/O that
//! sends it or lists our table. The socket is opened by the calling thread, so in the netns that
//! thread is in ([`crate::netns::run_in`]).

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};
use nix::sys::time::{TimeVal, TimeValLike};

use super::attr::{self, AttrWriter};
use super::expr::{self, Expr};
use super::ruleset::{nfproto, Base, Chain, Rule, Table, TABLE};
use crate::plan::Family;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFNL_SUBSYS_NFTABLES: u16 = 10;

const NEWTABLE: u16 = 0;
const GETTABLE: u16 = 1;
const DELTABLE: u16 = 2;
const NEWCHAIN: u16 = 3;
const GETCHAIN: u16 = 4;
const NEWRULE: u16 = 6;
const GETRULE: u16 = 7;

// Attribute numbers of tables, chains, hooks and rules.
const TABLE_NAME: u16 = 1;
const CHAIN_TABLE: u16 = 1;
const CHAIN_NAME: u16 = 3;
const CHAIN_HOOK: u16 = 4;
const CHAIN_POLICY: u16 = 5;
const CHAIN_TYPE: u16 = 7;
const HOOK_NUM: u16 = 1;
const HOOK_PRIORITY: u16 = 2;
const RULE_TABLE: u16 = 1;
const RULE_CHAIN: u16 = 2;
const RULE_EXPRESSIONS: u16 = 4;
const RULE_USERDATA: u16 = 7;
/// nft's rule userdata record holding the comment (`NFTNL_UDATA_RULE_COMMENT`).
const UDATA_COMMENT: u8 = 0;

/// How long to wait for the kernel's answer before giving up.
const TIMEOUT_SECS: i64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("cannot open a netfilter netlink socket: {0}")]
    Socket(Errno),
    #[error("netlink I/O with nf_tables failed: {0}")]
    Io(Errno),
    #[error("nf_tables rejected {what}: {errno}")]
    Rejected { what: String, errno: Errno },
    #[error("listing nf_tables {what} failed: {errno}")]
    List { what: &'static str, errno: Errno },
    #[error("malformed answer from nf_tables: {0}")]
    Malformed(String),
}

/// One message of a batch, with what it does for error messages.
#[derive(Debug, Clone)]
struct Msg {
    what: String,
    ty: u16,
    flags: u16,
    family: u8,
    attrs: Vec<u8>,
}

/// A transaction: the kernel applies all its messages or none.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    msgs: Vec<Msg>,
}

fn comment_udata(c: &str) -> Vec<u8> {
    let mut v = vec![UDATA_COMMENT, u8::try_from(c.len() + 1).unwrap_or(u8::MAX)];
    v.extend_from_slice(c.as_bytes());
    v.push(0);
    v
}

fn comment_of(udata: &[u8]) -> Option<String> {
    match udata {
        [UDATA_COMMENT, len, rest @ ..] => rest.get(..usize::from(*len)).map(attr::string),
        _ => None,
    }
}

impl Batch {
    fn push(&mut self, what: String, ty: u16, flags: u16, family: Family, w: AttrWriter) {
        self.msgs.push(Msg {
            what,
            ty,
            flags: flags | NLM_F_REQUEST | NLM_F_ACK,
            family: nfproto(family).0,
            attrs: w.buf,
        });
    }

    /// Makes sure our table is gone in `family`: create it (a no-op when it exists) and delete it,
    /// so this never fails on a table that is not there.
    pub fn delete_table(&mut self, family: Family) {
        let name = || {
            let mut w = AttrWriter::default();
            w.str(TABLE_NAME, TABLE);
            w
        };
        let fam = nfproto(family).1;
        self.push(
            format!("table {fam} {TABLE}"),
            NEWTABLE,
            NLM_F_CREATE,
            family,
            name(),
        );
        self.push(
            format!("delete table {fam} {TABLE}"),
            DELTABLE,
            0,
            family,
            name(),
        );
    }

    /// Installs `t` as our table in its family; when `existing`, whatever was there goes first, in
    /// the same transaction. (Deleting costs a kernel RCU wait when the socket closes, ~15 ms here,
    /// so a fresh netns skips it.)
    pub fn replace_table(&mut self, t: &Table, existing: bool) {
        if existing {
            self.delete_table(t.family);
        }
        let fam = nfproto(t.family).1;
        let mut w = AttrWriter::default();
        w.str(TABLE_NAME, TABLE);
        self.push(
            format!("table {fam} {TABLE}"),
            NEWTABLE,
            NLM_F_CREATE,
            t.family,
            w,
        );
        for c in &t.chains {
            let mut w = AttrWriter::default();
            w.str(CHAIN_TABLE, TABLE).str(CHAIN_NAME, &c.name);
            if let Some(b) = &c.base {
                w.nested(CHAIN_HOOK, |h| {
                    h.u32_be(HOOK_NUM, b.hook)
                        .bytes(HOOK_PRIORITY, &b.priority.to_be_bytes());
                });
                w.u32_be(CHAIN_POLICY, b.policy)
                    .str(CHAIN_TYPE, &b.chain_type);
            }
            let what = format!("chain {fam} {TABLE} {}", c.name);
            self.push(what, NEWCHAIN, NLM_F_CREATE, t.family, w);
            for r in &c.rules {
                let mut w = AttrWriter::default();
                w.str(RULE_TABLE, TABLE).str(RULE_CHAIN, &c.name);
                w.nested(RULE_EXPRESSIONS, |l| {
                    for e in &r.exprs {
                        e.encode(l);
                    }
                });
                if let Some(comment) = &r.comment {
                    w.bytes(RULE_USERDATA, &comment_udata(comment));
                }
                let what = format!("rule {fam} {TABLE} {} `{}`", c.name, r.render());
                self.push(what, NEWRULE, NLM_F_CREATE | NLM_F_APPEND, t.family, w);
            }
        }
    }

    /// The bytes of the whole batch, sequence numbers from `seq`.
    fn encode(&self, seq: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let control = |ty| Msg {
            what: String::new(),
            ty,
            flags: NLM_F_REQUEST,
            family: 0,
            attrs: Vec::new(),
        };
        let all = std::iter::once(control(NFNL_MSG_BATCH_BEGIN))
            .chain(self.msgs.iter().cloned())
            .chain(std::iter::once(control(NFNL_MSG_BATCH_END)));
        for (i, m) in all.enumerate() {
            let ty = if m.ty >= NFNL_MSG_BATCH_BEGIN {
                m.ty
            } else {
                (NFNL_SUBSYS_NFTABLES << 8) | m.ty
            };
            // The batch markers name the subsystem in nfgenmsg's res_id (network order).
            let res_id = if m.ty >= NFNL_MSG_BATCH_BEGIN {
                NFNL_SUBSYS_NFTABLES
            } else {
                0
            };
            header(
                &mut out,
                ty,
                m.flags,
                seq + i as u32,
                m.family,
                res_id,
                &m.attrs,
            );
        }
        out
    }
}

/// `nlmsghdr` + `nfgenmsg` + attributes.
fn header(out: &mut Vec<u8>, ty: u16, flags: u16, seq: u32, family: u8, res_id: u16, attrs: &[u8]) {
    let len = 16 + 4 + attrs.len();
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[family, 0]);
    out.extend_from_slice(&res_id.to_be_bytes());
    out.extend_from_slice(attrs);
}

/// A received message: type, sequence number, payload after `nlmsghdr`.
struct Reply {
    ty: u16,
    seq: u32,
    payload: Vec<u8>,
}

fn split_replies(buf: &[u8]) -> Result<Vec<Reply>, NftError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let word = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let len = word(at) as usize;
        if len < 16 || at + len > buf.len() {
            return Err(NftError::Malformed(format!("netlink message length {len}")));
        }
        out.push(Reply {
            ty: u16::from_ne_bytes([buf[at + 4], buf[at + 5]]),
            seq: word(at + 8),
            payload: buf[at + 16..at + len].to_vec(),
        });
        at += attr::align4(len);
    }
    Ok(out)
}

/// The errno of an `NLMSG_ERROR` (0 is an acknowledgement).
fn errno_of(r: &Reply) -> i32 {
    r.payload
        .get(..4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

struct Socket {
    fd: OwnedFd,
    buf: Vec<u8>,
    seq: u32,
}

/// Receive buffer of a socket that lists chains and rules: a dump message can be tens of KiB, and
/// a short buffer would truncate it.
const DUMP_BUF: usize = 1 << 17;
/// Receive buffer of a socket that only sends batches (their acknowledgements) and lists tables:
/// libmnl's `MNL_SOCKET_BUFFER_SIZE`, what nft reads its batches' acknowledgements with. Zeroing
/// `DUMP_BUF` cost ADD as many instructions as the batch itself (issue #43).
const ACK_BUF: usize = 1 << 13;

impl Socket {
    fn open(buf: usize) -> Result<Self, NftError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )
        .map_err(NftError::Socket)?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(NftError::Socket)?;
        setsockopt(
            &fd,
            sockopt::ReceiveTimeout,
            &TimeVal::seconds(TIMEOUT_SECS),
        )
        .map_err(NftError::Socket)?;
        Ok(Self {
            fd,
            buf: vec![0; buf],
            seq: 1,
        })
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), NftError> {
        send(self.fd.as_raw_fd(), bytes, MsgFlags::empty()).map_err(NftError::Io)?;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<Reply>, NftError> {
        let n =
            recv(self.fd.as_raw_fd(), &mut self.buf, MsgFlags::empty()).map_err(NftError::Io)?;
        split_replies(&self.buf[..n])
    }

    /// Sends `batch` and waits for every message's acknowledgement; the first error fails it
    /// (and the kernel has then applied nothing).
    fn apply(&mut self, batch: &Batch) -> Result<(), NftError> {
        let first = self.seq + 1; // after BATCH_BEGIN
        self.send(&batch.encode(self.seq))?;
        self.seq += batch.msgs.len() as u32 + 2;
        let mut acked = 0;
        while acked < batch.msgs.len() {
            for r in self.recv()? {
                if r.ty != NLMSG_ERROR {
                    continue;
                }
                match errno_of(&r) {
                    0 => acked += 1,
                    e => {
                        let what = r
                            .seq
                            .checked_sub(first)
                            .and_then(|i| batch.msgs.get(i as usize))
                            .map_or_else(|| "the batch".to_string(), |m| m.what.clone());
                        return Err(NftError::Rejected {
                            what,
                            errno: Errno::from_raw(-e),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Dumps every object of one kind (`GETCHAIN`, `GETRULE`) in `family`: their attributes.
    fn dump(
        &mut self,
        ty: u16,
        family: Family,
        what: &'static str,
    ) -> Result<Vec<Vec<u8>>, NftError> {
        let mut req = Vec::new();
        let seq = self.seq;
        self.seq += 1;
        header(
            &mut req,
            (NFNL_SUBSYS_NFTABLES << 8) | ty,
            NLM_F_REQUEST | NLM_F_DUMP,
            seq,
            nfproto(family).0,
            0,
            &[],
        );
        self.send(&req)?;
        let mut out = Vec::new();
        loop {
            for r in self.recv()? {
                if r.seq != seq {
                    continue;
                }
                match r.ty {
                    NLMSG_DONE => return Ok(out),
                    NLMSG_ERROR => match errno_of(&r) {
                        0 => return Ok(out),
                        e => {
                            return Err(NftError::List {
                                what,
                                errno: Errno::from_raw(-e),
                            })
                        }
                    },
                    // Skip nfgenmsg.
                    _ => out.push(r.payload.get(4..).unwrap_or_default().to_vec()),
                }
            }
        }
    }

    /// Whether a table named `name` exists in `family`.
    fn has_table(&mut self, family: Family, name: &str) -> Result<bool, NftError> {
        Ok(self.dump(GETTABLE, family, "tables")?.iter().any(|msg| {
            attr::parse(msg)
                .ok()
                .and_then(|a| attr::get(&a, TABLE_NAME).map(attr::string))
                .as_deref()
                == Some(name)
        }))
    }
}

/// Applies `batch` atomically in the calling thread's netns.
pub fn apply(batch: &Batch) -> Result<(), NftError> {
    Socket::open(ACK_BUF)?.apply(batch)
}

/// Installs `tables` (ours, one per family) in one transaction in the calling thread's netns,
/// replacing what our tables held.
pub fn replace(tables: &[Table]) -> Result<(), NftError> {
    let mut sock = Socket::open(ACK_BUF)?;
    let mut batch = Batch::default();
    for t in tables {
        let existing = sock.has_table(t.family, TABLE)?;
        batch.replace_table(t, existing);
    }
    sock.apply(&batch)
}

/// Deletes our tables of `families` that exist in the calling thread's netns. Looking first spares
/// a netns without them the kernel's RCU wait a deletion costs (DEL runs for every pod).
pub fn remove(families: &[Family]) -> Result<(), NftError> {
    let mut sock = Socket::open(ACK_BUF)?;
    let mut batch = Batch::default();
    for f in families {
        if sock.has_table(*f, TABLE)? {
            batch.delete_table(*f);
        }
    }
    if batch.msgs.is_empty() {
        return Ok(());
    }
    sock.apply(&batch)
}

/// Whether a table named `name` (another program's: iptables-nft keeps its `nat` table's rules in
/// the nf_tables tables `ip nat` and `ip6 nat`) exists in any of `families` in the calling thread's
/// netns.
pub fn any_table_named(name: &str, families: &[Family]) -> Result<bool, NftError> {
    let mut sock = Socket::open(DUMP_BUF)?;
    for f in families {
        if sock.has_table(*f, name)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn malformed(e: attr::Malformed) -> NftError {
    NftError::Malformed(e.to_string())
}

/// Our table's chains in `family` with their rules, as the kernel holds them (empty when the
/// table does not exist). Other tables are read past, never touched.
pub fn list(family: Family) -> Result<Vec<Chain>, NftError> {
    let mut sock = Socket::open(DUMP_BUF)?;
    let mut chains = Vec::new();
    for msg in sock.dump(GETCHAIN, family, "chains")? {
        let a = attr::parse(&msg).map_err(malformed)?;
        if attr::get(&a, CHAIN_TABLE).map(attr::string).as_deref() != Some(TABLE) {
            continue;
        }
        let base = match attr::get(&a, CHAIN_HOOK) {
            Some(hook) => {
                let h = attr::parse(hook).map_err(malformed)?;
                let num = |ty| attr::get(&h, ty).and_then(attr::be_u32).unwrap_or(0);
                Some(Base {
                    chain_type: attr::string(attr::get(&a, CHAIN_TYPE).unwrap_or_default()),
                    hook: num(HOOK_NUM),
                    priority: num(HOOK_PRIORITY) as i32,
                    policy: attr::get(&a, CHAIN_POLICY)
                        .and_then(attr::be_u32)
                        .unwrap_or(0),
                })
            }
            None => None,
        };
        chains.push(Chain {
            name: attr::string(attr::get(&a, CHAIN_NAME).unwrap_or_default()),
            base,
            rules: Vec::new(),
        });
    }
    for msg in sock.dump(GETRULE, family, "rules")? {
        let a = attr::parse(&msg).map_err(malformed)?;
        if attr::get(&a, RULE_TABLE).map(attr::string).as_deref() != Some(TABLE) {
            continue;
        }
        let chain = attr::string(attr::get(&a, RULE_CHAIN).unwrap_or_default());
        let exprs: Vec<Expr> =
            expr::decode_list(attr::get(&a, RULE_EXPRESSIONS).unwrap_or_default())
                .map_err(malformed)?;
        let rule = Rule {
            exprs,
            comment: attr::get(&a, RULE_USERDATA).and_then(comment_of),
        };
        if let Some(c) = chains.iter_mut().find(|c| c.name == chain) {
            c.rules.push(rule);
        }
    }
    Ok(chains)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_round_trip_through_userdata() {
        let u = comment_udata("proxy-init/ignore-loopback");
        assert_eq!(u[1] as usize, "proxy-init/ignore-loopback".len() + 1);
        assert_eq!(
            comment_of(&u).as_deref(),
            Some("proxy-init/ignore-loopback")
        );
    }

    /// Every message of a batch is framed between BEGIN and END with consecutive sequence numbers,
    /// and asks for an acknowledgement, so a rejected one is named.
    #[test]
    fn a_batch_is_framed_and_acknowledged() {
        let mut b = Batch::default();
        b.delete_table(Family::V6);
        let replies = split_replies(&b.encode(7)).unwrap();
        let types: Vec<u16> = replies.iter().map(|r| r.ty).collect();
        assert_eq!(types, [0x10, 0x0a00, 0x0a02, 0x11]);
        let seqs: Vec<u32> = replies.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [7, 8, 9, 10]);
        assert!(b.msgs.iter().all(|m| m.flags & NLM_F_ACK != 0));
        assert_eq!(replies[1].payload[0], 10, "ip6 is nfproto 10");
    }
}
