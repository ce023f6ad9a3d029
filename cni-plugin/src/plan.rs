//! The pod's iptables rules as a pure function of its settings, and the exact `iptables-restore`
//! input that installs, checks or removes them.
//!
//! Every rule is written in the canonical form `iptables-save` prints (legacy and nft print the
//! same), so what CHECK reads back can be compared with the plan line for line. The chains and
//! comments are Linkerd proxy-init's, so tooling that knows those keeps working; the comments carry no
//! timestamp (unlike proxy-init's) so a repeated ADD yields the identical ruleset.

use std::fmt::Write as _;

use ipnet::IpNet;

use crate::ports::PortRange;

/// Chain for inbound traffic, jumped to from PREROUTING.
pub const REDIRECT_CHAIN: &str = "PROXY_INIT_REDIRECT";
/// Chain for outbound traffic, jumped to from OUTPUT.
pub const OUTPUT_CHAIN: &str = "PROXY_INIT_OUTPUT";
/// iptables' multiport match takes at most 15 ports; a range counts as two.
pub const MULTIPORT_SLOTS: usize = 15;

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

/// The address family, which picks `iptables` or `ip6tables`.
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

/// The rules of one family, each line as `iptables-save` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub family: Family,
    pub redirect_rules: Vec<String>,
    pub output_rules: Vec<String>,
}

/// The two jumps from the built-in chains into ours.
pub fn hooks() -> [String; 2] {
    [
        rule(
            "PREROUTING",
            "",
            "install-proxy-init-prerouting",
            REDIRECT_CHAIN,
        ),
        rule("OUTPUT", "", "install-proxy-init-output", OUTPUT_CHAIN),
    ]
}

/// One rule line: `-A CHAIN <matches> -m comment --comment "proxy-init/<comment>" -j <target>`.
fn rule(chain: &str, matches: &str, comment: &str, target: &str) -> String {
    let sep = if matches.is_empty() { "" } else { " " };
    format!("-A {chain}{sep}{matches} -m comment --comment \"proxy-init/{comment}\" -j {target}")
}

/// Splits ports into multiport groups of at most [`MULTIPORT_SLOTS`] slots, keeping their order.
pub fn multiport_groups(ports: &[PortRange]) -> Vec<Vec<PortRange>> {
    let mut groups: Vec<Vec<PortRange>> = Vec::new();
    let mut used = 0;
    for p in ports {
        if groups.is_empty() || used + p.slots() > MULTIPORT_SLOTS {
            groups.push(Vec::new());
            used = 0;
        }
        used += p.slots();
        if let Some(g) = groups.last_mut() {
            g.push(*p);
        }
    }
    groups
}

fn ignore_ports(chain: &str, ports: &[PortRange]) -> Vec<String> {
    multiport_groups(ports)
        .iter()
        .map(|g| {
            let list = g
                .iter()
                .map(PortRange::iptables)
                .collect::<Vec<_>>()
                .join(",");
            rule(
                chain,
                &format!("-p tcp -m multiport --dports {list}"),
                &format!("ignore-port-{list}"),
                "RETURN",
            )
        })
        .collect()
}

/// The plan for one family.
pub fn plan(s: &RuleSettings, family: Family) -> Plan {
    let mut redirect = ignore_ports(REDIRECT_CHAIN, &s.inbound_ports_to_ignore);
    for net in &s.subnets_to_ignore {
        if family.holds(net) {
            // iptables stores the network address: 10.1.2.3/8 is saved as 10.0.0.0/8.
            let net = net.trunc();
            redirect.push(rule(
                REDIRECT_CHAIN,
                &format!("-s {net}"),
                &format!("ignore-subnet-{net}"),
                "RETURN",
            ));
        }
    }
    let to_inbound = format!("REDIRECT --to-ports {}", s.incoming_proxy_port);
    if s.ports_to_redirect.is_empty() {
        redirect.push(rule(
            REDIRECT_CHAIN,
            "-p tcp",
            "redirect-all-incoming-to-proxy-port",
            &to_inbound,
        ));
    } else {
        for port in &s.ports_to_redirect {
            redirect.push(rule(
                REDIRECT_CHAIN,
                &format!("-p tcp -m tcp --dport {port}"),
                &format!("redirect-port-{port}-to-proxy-port"),
                &to_inbound,
            ));
        }
    }

    let mut output = Vec::new();
    if let Some(uid) = s.proxy_uid {
        output.push(rule(
            OUTPUT_CHAIN,
            &format!("-m owner --uid-owner {uid}"),
            "ignore-proxy-user-id",
            "RETURN",
        ));
    }
    if let Some(gid) = s.proxy_gid {
        output.push(rule(
            OUTPUT_CHAIN,
            &format!("-m owner --gid-owner {gid}"),
            "ignore-proxy-group-id",
            "RETURN",
        ));
    }
    output.push(rule(OUTPUT_CHAIN, "-o lo", "ignore-loopback", "RETURN"));
    output.extend(ignore_ports(OUTPUT_CHAIN, &s.outbound_ports_to_ignore));
    output.push(rule(
        OUTPUT_CHAIN,
        "-p tcp",
        "redirect-all-outgoing-to-proxy-port",
        &format!("REDIRECT --to-ports {}", s.outgoing_proxy_port),
    ));
    Plan {
        family,
        redirect_rules: redirect,
        output_rules: output,
    }
}

/// The nat table as `iptables-save -t nat` printed it: declared chains and rule lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatTable {
    pub chains: Vec<String>,
    pub rules: Vec<String>,
}

impl NatTable {
    /// Reads the `*nat` section of `iptables-save` output; other tables and comments are skipped.
    pub fn parse(save: &str) -> Self {
        let mut t = NatTable::default();
        let mut in_nat = false;
        for line in save.lines().map(str::trim_end) {
            if let Some(table) = line.strip_prefix('*') {
                in_nat = table == "nat";
            } else if line == "COMMIT" {
                in_nat = false;
            } else if in_nat {
                if let Some(decl) = line.strip_prefix(':') {
                    if let Some(name) = decl.split_whitespace().next() {
                        t.chains.push(name.to_string());
                    }
                } else if line.starts_with("-A ") {
                    t.rules.push(line.to_string());
                }
            }
        }
        t
    }

    fn has_chain(&self, name: &str) -> bool {
        self.chains.iter().any(|c| c == name)
    }

    fn rules_of(&self, chain: &str) -> Vec<&str> {
        let prefix = format!("-A {chain} ");
        self.rules
            .iter()
            .filter(|r| r.starts_with(&prefix))
            .map(String::as_str)
            .collect()
    }

    /// Rules outside our chains that jump into them (our hooks, or anyone else's).
    fn jumps_into_ours(&self) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|r| {
                let in_ours = r.starts_with(&format!("-A {REDIRECT_CHAIN} "))
                    || r.starts_with(&format!("-A {OUTPUT_CHAIN} "));
                let jumps = r.ends_with(&format!("-j {REDIRECT_CHAIN}"))
                    || r.ends_with(&format!("-j {OUTPUT_CHAIN}"));
                !in_ours && jumps
            })
            .map(String::as_str)
            .collect()
    }
}

impl Plan {
    /// The `iptables-restore --noflush` input for ADD given the table as it is now (read when
    /// [`Plan::create_input`] found our chains). Declaring our chains flushes them (or creates
    /// them), so their rules are replaced wholesale; the hooks are appended only when missing.
    /// Running it twice leaves the same ruleset; other chains' rules are never touched.
    pub fn restore_input(&self, current: &NatTable) -> String {
        let mut out = String::from("*nat\n");
        let _ = writeln!(out, ":{REDIRECT_CHAIN} - [0:0]");
        let _ = writeln!(out, ":{OUTPUT_CHAIN} - [0:0]");
        let missing: Vec<String> = hooks()
            .into_iter()
            .filter(|h| !current.rules.contains(h))
            .collect();
        self.write_rules(&mut out, &missing);
        out
    }

    /// The `iptables-restore --noflush` input for ADD into a table without our chains (a fresh pod
    /// netns, the common case), so no `-save` is needed first. `-N` fails when the chain exists
    /// (where `:CHAIN` would flush it), and a restore commits nothing unless every line applies:
    /// on a repeated ADD it changes nothing and the caller falls back to [`Plan::restore_input`].
    pub fn create_input(&self) -> String {
        let mut out = String::from("*nat\n");
        for chain in [REDIRECT_CHAIN, OUTPUT_CHAIN] {
            let _ = writeln!(out, "-N {chain}");
        }
        // Without our chains nothing can jump into them, so both hooks are missing.
        self.write_rules(&mut out, &hooks());
        out
    }

    /// Our chains' rules, then `hooks`, then the COMMIT.
    fn write_rules(&self, out: &mut String, hooks: &[String]) {
        for r in self
            .redirect_rules
            .iter()
            .chain(&self.output_rules)
            .chain(hooks)
        {
            let _ = writeln!(out, "{r}");
        }
        out.push_str("COMMIT\n");
    }

    /// CHECK: the table must hold our chains with exactly the planned rules, and each hook once.
    /// The error says the first difference found, precisely.
    pub fn check(&self, current: &NatTable) -> Result<(), String> {
        let fam = self.family.label();
        for (chain, expected) in [
            (REDIRECT_CHAIN, &self.redirect_rules),
            (OUTPUT_CHAIN, &self.output_rules),
        ] {
            if !current.has_chain(chain) {
                return Err(format!(
                    "{fam}: chain {chain} does not exist in the nat table"
                ));
            }
            let found = current.rules_of(chain);
            for (i, want) in expected.iter().enumerate() {
                match found.get(i) {
                    Some(got) if *got == want => {}
                    Some(got) => {
                        return Err(format!(
                            "{fam}: rule {} of {chain} is `{got}`, expected `{want}`",
                            i + 1
                        ))
                    }
                    None => {
                        return Err(format!(
                            "{fam}: rule {} of {chain} is missing, expected `{want}`",
                            i + 1
                        ))
                    }
                }
            }
            if let Some(extra) = found.get(expected.len()) {
                return Err(format!(
                    "{fam}: {chain} has an unexpected rule {}: `{extra}`",
                    expected.len() + 1
                ));
            }
        }
        for hook in hooks() {
            let n = current.rules.iter().filter(|r| **r == hook).count();
            if n != 1 {
                return Err(format!(
                    "{fam}: hook `{hook}` is present {n} times, expected once"
                ));
            }
        }
        Ok(())
    }
}

/// Whether a failed restore of `input` (a [`Plan::create_input`]) stopped at one of its `-N` lines,
/// i.e. our chain exists already. Both flavours name the line on stderr: legacy
/// `iptables-restore: line 2 failed`, nft `iptables-nft-restore: line 2 failed: Chain already
/// exists.` Any other failure (a rule the kernel refuses, the xtables lock) is not this.
pub fn failed_creating_a_chain(input: &str, stderr: &str) -> bool {
    stderr
        .split("line ")
        .skip(1)
        .filter_map(|rest| {
            let (n, tail) = rest.split_once(' ')?;
            tail.starts_with("failed")
                .then(|| n.parse::<usize>().ok())?
        })
        .any(|n| {
            n.checked_sub(1)
                .and_then(|i| input.lines().nth(i))
                .is_some_and(|l| l.starts_with("-N "))
        })
}

/// The `iptables-restore --noflush` input for DEL: delete every jump into our chains, then flush
/// and delete the chains. `None` when there is nothing of ours in the table.
pub fn delete_input(current: &NatTable) -> Option<String> {
    let mut body = String::new();
    for jump in current.jumps_into_ours() {
        if let Some(spec) = jump.strip_prefix("-A ") {
            let _ = writeln!(body, "-D {spec}");
        }
    }
    for chain in [REDIRECT_CHAIN, OUTPUT_CHAIN] {
        if current.has_chain(chain) {
            let _ = writeln!(body, "-F {chain}\n-X {chain}");
        }
    }
    (!body.is_empty()).then(|| format!("*nat\n{body}COMMIT\n"))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;
