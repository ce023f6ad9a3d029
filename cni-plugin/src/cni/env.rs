//! The `CNI_*` environment variables a runtime passes to a plugin.

use std::path::PathBuf;

use super::error::{codes, CniError};

/// `CNI_COMMAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
    /// CNI 1.1: "is the plugin ready?"
    Status,
    /// CNI 1.1: garbage-collect leftovers; we keep no state outside the pod's netns.
    Gc,
}

impl Command {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "VERSION" => Command::Version,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            _ => return None,
        })
    }
}

/// `CNI_ARGS`: `K=V` pairs separated by `;`, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs(Vec<(String, String)>);

impl CniArgs {
    /// Parses `K=V;K2=V2`; an empty string is no arguments, a pair without `=` is an error.
    pub fn parse(s: &str) -> Result<Self, CniError> {
        let mut pairs = Vec::new();
        for part in s.split(';').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                CniError::new(
                    codes::INVALID_ENV,
                    "CNI_ARGS is malformed",
                    format!("`{part}` is not KEY=VALUE"),
                )
            })?;
            pairs.push((k.to_string(), v.to_string()));
        }
        Ok(Self(pairs))
    }

    /// The value of `key`, if present and not empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// What the runtime told us through the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniEnv {
    pub command: Command,
    pub container_id: String,
    /// Empty when the runtime gave none (allowed for DEL, when the netns is already gone).
    pub netns: String,
    pub ifname: String,
    pub args: CniArgs,
    pub path: Vec<PathBuf>,
}

impl CniEnv {
    /// Reads the `CNI_*` variables from `vars` (normally `std::env::vars()`). The variables each
    /// command needs must be present: ADD and CHECK need the container id, netns and ifname; DEL
    /// may lack the netns; VERSION, STATUS and GC need nothing but the command.
    pub fn from_vars<I, K, V>(vars: I) -> Result<Self, CniError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut command = None;
        let (mut container_id, mut netns, mut ifname, mut args, mut path) =
            (None, None, None, None, None);
        for (k, v) in vars {
            let v = v.as_ref().to_string();
            match k.as_ref() {
                "CNI_COMMAND" => command = Some(v),
                "CNI_CONTAINERID" => container_id = Some(v),
                "CNI_NETNS" => netns = Some(v),
                "CNI_IFNAME" => ifname = Some(v),
                "CNI_ARGS" => args = Some(v),
                "CNI_PATH" => path = Some(v),
                _ => {}
            }
        }
        let missing = |name: &str| {
            CniError::new(
                codes::INVALID_ENV,
                format!("required environment variable {name} is missing"),
                "",
            )
        };
        let raw = command.ok_or_else(|| missing("CNI_COMMAND"))?;
        let command = Command::parse(&raw).ok_or_else(|| {
            CniError::new(
                codes::INVALID_ENV,
                format!("unknown CNI_COMMAND `{raw}`"),
                "expected ADD, DEL, CHECK, VERSION, STATUS or GC",
            )
        })?;
        let need = |value: Option<String>, name: &str, required: bool| match value {
            Some(v) if !v.is_empty() => Ok(v),
            _ if required => Err(missing(name)),
            _ => Ok(String::new()),
        };
        let pod_command = matches!(command, Command::Add | Command::Del | Command::Check);
        Ok(Self {
            command,
            container_id: need(container_id, "CNI_CONTAINERID", pod_command)?,
            netns: need(
                netns,
                "CNI_NETNS",
                matches!(command, Command::Add | Command::Check),
            )?,
            ifname: need(ifname, "CNI_IFNAME", pod_command)?,
            args: CniArgs::parse(&args.unwrap_or_default())?,
            path: path
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn add_reads_everything() {
        let env = CniEnv::from_vars(vars(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_NETNS", "/var/run/netns/x"),
            ("CNI_IFNAME", "eth0"),
            (
                "CNI_ARGS",
                "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p",
            ),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
            ("HOME", "/root"),
        ]))
        .unwrap();
        assert_eq!(env.command, Command::Add);
        assert_eq!(env.netns, "/var/run/netns/x");
        assert_eq!(env.args.get("K8S_POD_NAMESPACE"), Some("ns"));
        assert_eq!(env.args.get("K8S_POD_NAME"), Some("p"));
        assert_eq!(env.args.get("K8S_POD_UID"), None);
        assert_eq!(env.path.len(), 2);
    }

    /// A runtime that forgets a variable gets code 4 naming it, not a panic or a wrong netns.
    #[test]
    fn missing_or_bad_variables_are_code_4() {
        let e =
            CniEnv::from_vars(vars(&[("CNI_COMMAND", "ADD"), ("CNI_IFNAME", "eth0")])).unwrap_err();
        assert_eq!(e.code, codes::INVALID_ENV);
        assert!(e.msg.contains("CNI_CONTAINERID"), "{e}");

        let e = CniEnv::from_vars(vars(&[("CNI_COMMAND", "FROB")])).unwrap_err();
        assert!(e.msg.contains("FROB"), "{e}");

        let e = CniEnv::from_vars(Vec::<(String, String)>::new()).unwrap_err();
        assert!(e.msg.contains("CNI_COMMAND"), "{e}");

        let e = CniEnv::from_vars(vars(&[
            ("CNI_COMMAND", "VERSION"),
            ("CNI_ARGS", "a=b;oops"),
        ]))
        .unwrap_err();
        assert!(e.details.contains("oops"), "{e}");
    }

    /// DEL after the netns is gone arrives with an empty CNI_NETNS and must still be accepted.
    #[test]
    fn del_and_version_need_less() {
        let env = CniEnv::from_vars(vars(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "abc"),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", "eth0"),
        ]))
        .unwrap();
        assert_eq!(env.netns, "");
        let env = CniEnv::from_vars(vars(&[("CNI_COMMAND", "VERSION")])).unwrap();
        assert_eq!(env.command, Command::Version);
    }
}
