//! What the plugin writes for a pod: its rules planned once, as data, from its settings.
//!
//! [`plan`] decides what is redirected to the proxy and what skips it (by port, subnet, the proxy's
//! uid and gid, loopback), in which order, in the inbound and the outbound chain. Every backend
//! only renders that plan in its own syntax: [`iptables`] as `iptables-restore` input (legacy and
//! nft), [`nftables`] as the nf_tables table the netlink backend writes; `simulate` logs one of
//! those. So nodes that run different backends mesh a pod the same way: they differ in syntax,
//! never in decisions (`tests/backends_agree.rs` reads each back from the kernel to hold them to it).

pub mod iptables;

use ipnet::IpNet;

use crate::ports::PortRange;

/// Chain for inbound traffic, jumped to from PREROUTING.
pub const REDIRECT_CHAIN: &str = "PROXY_INIT_REDIRECT";
/// Chain for outbound traffic, jumped to from OUTPUT.
pub const OUTPUT_CHAIN: &str = "PROXY_INIT_OUTPUT";

/// Everything the rules depend on, after the pod's annotations were applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSettings {
    pub incoming_proxy_port: u16,
    pub outgoing_proxy_port: u16,
    pub proxy_uid: Option<vocab::Uid>,
    pub proxy_gid: Option<u32>,
    /// Empty: redirect all inbound TCP.
    pub ports_to_redirect: Vec<u16>,
    pub inbound_ports_to_ignore: Vec<PortRange>,
    pub outbound_ports_to_ignore: Vec<PortRange>,
    /// Sources whose inbound traffic skips the proxy; each family keeps its own.
    pub subnets_to_ignore: Vec<IpNet>,
}

/// Linkerd's defaults: its proxy's ports and uid, no gid, every port redirected, nothing skipped.
impl Default for RuleSettings {
    fn default() -> Self {
        Self {
            incoming_proxy_port: vocab::DEFAULT_INBOUND_PROXY_PORT,
            outgoing_proxy_port: vocab::DEFAULT_OUTBOUND_PROXY_PORT,
            proxy_uid: Some(vocab::DEFAULT_PROXY_UID),
            proxy_gid: None,
            ports_to_redirect: Vec::new(),
            inbound_ports_to_ignore: Vec::new(),
            outbound_ports_to_ignore: Vec::new(),
            subnets_to_ignore: Vec::new(),
        }
    }
}

/// The address family, which picks `iptables` or `ip6tables` (`ip` or `ip6` in nftables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// Whether `net` is of this family: each family's rules skip only their own subnets.
    pub fn holds(self, net: &IpNet) -> bool {
        matches!(
            (net, self),
            (IpNet::V4(_), Family::V4) | (IpNet::V6(_), Family::V6)
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }
}

/// Which way the traffic goes, and so which of our chains holds the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Inbound,
    Outbound,
}

impl Direction {
    pub fn chain(self) -> &'static str {
        match self {
            Direction::Inbound => REDIRECT_CHAIN,
            Direction::Outbound => OUTPUT_CHAIN,
        }
    }
}

/// What a [`Step::Skip`] matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// TCP to any of these destination ports, in this order.
    Ports(Vec<PortRange>),
    /// From this source network, host bits dropped (10.1.2.3/8 is 10.0.0.0/8, as iptables stores it).
    Subnet(IpNet),
    /// Sent by a socket of this uid: the proxy's own traffic.
    Uid(vocab::Uid),
    /// Sent by a socket of this gid.
    Gid(u32),
    /// Out through the loopback interface `lo`.
    Loopback,
}

/// One decision of a chain; the first that matches a packet is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Matching traffic leaves our chain: it skips the proxy.
    Skip(Match),
    /// TCP to `dport` (every port when `None`) goes to the proxy's port `to`.
    Redirect { dport: Option<u16>, to: u16 },
}

impl Step {
    /// The rule's comment: Linkerd proxy-init's names, so tooling that knows those keeps working;
    /// no timestamp (unlike proxy-init's), so a repeated ADD yields the identical ruleset.
    /// `ports` is the rule's port list as its backend writes it: a backend may spread one
    /// [`Match::Ports`] over several rules.
    pub fn comment(&self, dir: Direction, ports: &str) -> String {
        let name = match self {
            Step::Skip(Match::Ports(_)) => format!("ignore-port-{ports}"),
            Step::Skip(Match::Subnet(net)) => format!("ignore-subnet-{net}"),
            Step::Skip(Match::Uid(_)) => "ignore-proxy-user-id".into(),
            Step::Skip(Match::Gid(_)) => "ignore-proxy-group-id".into(),
            Step::Skip(Match::Loopback) => "ignore-loopback".into(),
            Step::Redirect { dport: Some(p), .. } => format!("redirect-port-{p}-to-proxy-port"),
            Step::Redirect { dport: None, .. } => match dir {
                Direction::Inbound => "redirect-all-incoming-to-proxy-port".into(),
                Direction::Outbound => "redirect-all-outgoing-to-proxy-port".into(),
            },
        };
        format!("proxy-init/{name}")
    }
}

/// One family's rules: the steps of our inbound and our outbound chain, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub family: Family,
    pub inbound: Vec<Step>,
    pub outbound: Vec<Step>,
}

impl Plan {
    /// Both chains with their steps, inbound first (the order the backends write them in).
    pub fn chains(&self) -> [(Direction, &[Step]); 2] {
        [
            (Direction::Inbound, &self.inbound),
            (Direction::Outbound, &self.outbound),
        ]
    }
}

/// The plan for one family.
///
/// Inbound: ignored ports, then this family's ignored subnets, skip; then all TCP, or only the
/// listed ports, go to the inbound proxy port. Outbound: the proxy's uid and gid, loopback and
/// ignored ports skip; all other TCP goes to the outbound proxy port.
pub fn plan(s: &RuleSettings, family: Family) -> Plan {
    let ports = |p: &[PortRange]| (!p.is_empty()).then(|| Step::Skip(Match::Ports(p.to_vec())));

    let mut inbound: Vec<Step> = ports(&s.inbound_ports_to_ignore).into_iter().collect();
    inbound.extend(
        s.subnets_to_ignore
            .iter()
            .filter(|net| family.holds(net))
            .map(|net| Step::Skip(Match::Subnet(net.trunc()))),
    );
    let to = s.incoming_proxy_port;
    if s.ports_to_redirect.is_empty() {
        inbound.push(Step::Redirect { dport: None, to });
    } else {
        inbound.extend(s.ports_to_redirect.iter().map(|p| Step::Redirect {
            dport: Some(*p),
            to,
        }));
    }

    let outbound = [
        s.proxy_uid.map(Match::Uid),
        s.proxy_gid.map(Match::Gid),
        Some(Match::Loopback),
    ]
    .into_iter()
    .flatten()
    .map(Step::Skip)
    .chain(ports(&s.outbound_ports_to_ignore))
    .chain([Step::Redirect {
        dport: None,
        to: s.outgoing_proxy_port,
    }])
    .collect();

    Plan {
        family,
        inbound,
        outbound,
    }
}

#[cfg(test)]
pub(crate) mod tests;
