//! The iptables rendering of the [plan](super): the exact `iptables-restore` input that installs,
//! checks or removes a pod's rules, for the legacy and the nft flavour alike.
//!
//! Every rule is written in the canonical form `iptables-save` prints (legacy and nft print the
//! same), so what CHECK reads back can be compared with the rendering line for line. The chains and
//! comments are Linkerd proxy-init's. Ignored ports share rules through `multiport`, at most
//! [`MULTIPORT_SLOTS`] slots each.

use std::fmt::Write as _;

use super::{Direction, Family, Match, Plan, Step, OUTPUT_CHAIN, REDIRECT_CHAIN};
use crate::ports::PortRange;

/// iptables' multiport match takes at most 15 ports; a range counts as two.
pub const MULTIPORT_SLOTS: usize = 15;

/// One family's plan rendered: each rule line as `iptables-save` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
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
            "proxy-init/install-proxy-init-prerouting",
            REDIRECT_CHAIN,
        ),
        rule(
            "OUTPUT",
            "",
            "proxy-init/install-proxy-init-output",
            OUTPUT_CHAIN,
        ),
    ]
}

/// One rule line: `-A CHAIN <matches> -m comment --comment "<comment>" -j <target>`.
fn rule(chain: &str, matches: &str, comment: &str, target: &str) -> String {
    let sep = if matches.is_empty() { "" } else { " " };
    format!("-A {chain}{sep}{matches} -m comment --comment \"{comment}\" -j {target}")
}

/// The rendering of `plan`.
pub fn rules(plan: &Plan) -> Rules {
    let [inbound, outbound] = plan
        .chains()
        .map(|(dir, steps)| steps.iter().flat_map(|s| lines(dir, s)).collect());
    Rules {
        family: plan.family,
        redirect_rules: inbound,
        output_rules: outbound,
    }
}

/// A step's rule lines: one, or one per multiport group of ignored ports.
fn lines(dir: Direction, step: &Step) -> Vec<String> {
    let chain = dir.chain();
    let one =
        |matches: String, target: &str| vec![rule(chain, &matches, &step.comment(dir, ""), target)];
    match step {
        Step::Skip(Match::Ports(ports)) => multiport_groups(ports)
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
                    &step.comment(dir, &list),
                    "RETURN",
                )
            })
            .collect(),
        Step::Skip(Match::Subnet(net)) => one(format!("-s {net}"), "RETURN"),
        Step::Skip(Match::Uid(uid)) => one(format!("-m owner --uid-owner {uid}"), "RETURN"),
        Step::Skip(Match::Gid(gid)) => one(format!("-m owner --gid-owner {gid}"), "RETURN"),
        Step::Skip(Match::Loopback) => one("-o lo".into(), "RETURN"),
        Step::Redirect { dport, to } => {
            let matches = match dport {
                None => "-p tcp".to_string(),
                Some(p) => format!("-p tcp -m tcp --dport {p}"),
            };
            one(matches, &format!("REDIRECT --to-ports {to}"))
        }
    }
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

impl Rules {
    /// The `iptables-restore --noflush` input for ADD given the table as it is now (read when
    /// [`Rules::create_input`] found our chains). Declaring our chains flushes them (or creates
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
    /// on a repeated ADD it changes nothing and the caller falls back to [`Rules::restore_input`].
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

/// Whether a failed restore of `input` (a [`Rules::create_input`]) stopped at one of its `-N` lines,
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
#[path = "iptables_tests.rs"]
mod tests;
