//! `iptables-mode: nftables`: the pod's rules programmed into nf_tables directly over netlink, so
//! the node needs no `iptables*` or `nft` binary.
//!
//! What it writes is the plan's nf_tables rendering ([`ruleset`]: a table of our own
//! per family); [`expr`] holds the kernel's expressions both ways, [`attr`] netlink attributes,
//! and [`netlink`] the socket: one atomic batch per ADD or DEL, a listing of our table for CHECK.
//!
//! Why our own netlink code: `nftnl` binds the C libnftnl (a static C library for our crt-static
//! build), `nftables` runs `nft` (what this mode exists to avoid), and `rustables` is GPL-3.0 with a
//! bindgen build step and no `redir` expression; we need seven expression kinds and six messages.

pub mod attr;
pub mod expr;
pub mod netlink;
pub mod ruleset;

pub use netlink::NftError;
pub use ruleset::{table, Table, TABLE};
