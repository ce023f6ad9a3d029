//! The test workload: one tiny static binary (`linkerd-multus-test-workload`) that plays both containers
//! of a pod meshed the way Linkerd's injector lays it out, so the node scenario can see where the CNI
//! rules deliver real connections:
//!
//! - `app [--port 8080] [--name NAME]` answers every connection with `app NAME` (the pod's `HOSTNAME`
//!   by default);
//! - `proxy [--inbound 4143] [--outbound 4140] [--uid UID]` listens where Linkerd's proxy does (after
//!   binding it switches to `UID`, the proxy uid, when started as root) and answers with the listener and
//!   the connection's original destination: `proxy inbound 4143 original-dst 10.0.0.7:8080`;
//! - `ask ADDR:PORT` connects, prints the answer and exits (run it as the proxy uid to check the bypass);
//! - `validate ADDR:PORT [--outbound 4140]` plays Linkerd's network validator (the CNI-mode init
//!   container): it listens on the outbound port, connects to ADDR:PORT and exits 0 when that
//!   connection was redirected to its own listener, else 95, as Linkerd's does. ADDR must be an address
//!   of the test's own network (a closed port there refuses at once when nothing redirects).
//!
//! Every listener prints `listening <role> <addr>` on stdout once bound. Addresses are IP literals only:
//! the binary is linked statically and must not need DNS or NSS.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;

use crate::traffic;
use crate::validator::WORKLOAD_PASSED;

/// What the binary was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    App {
        port: u16,
        name: String,
        ipv6: bool,
    },
    Proxy {
        inbound: u16,
        outbound: u16,
        uid: Option<vocab::Uid>,
        ipv6: bool,
    },
    Ask {
        addr: SocketAddr,
    },
    Validate {
        outbound: u16,
        target: SocketAddr,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("usage: {0}\n{USAGE}")]
    Usage(String),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot switch to uid {uid}")]
    SetUid { uid: vocab::Uid, source: nix::Error },
    #[error("asking {addr}")]
    Ask {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("a connection to {target} was not redirected to the outbound port: {why}")]
    NotRedirected { target: SocketAddr, why: String },
}

impl Error {
    /// The exit status: 2 for usage, 95 (Linkerd's validator's) when not redirected, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::NotRedirected { .. } => 95,
            _ => 1,
        }
    }
}

pub const USAGE: &str = "linkerd-multus-test-workload app [--port 8080] [--name NAME] [--ipv6]
linkerd-multus-test-workload proxy [--inbound 4143] [--outbound 4140] [--uid UID] [--ipv6]
linkerd-multus-test-workload ask ADDR:PORT
linkerd-multus-test-workload validate ADDR:PORT [--outbound 4140]";

/// Parses the arguments after the program name. `hostname` is the default app name (the pod's
/// `HOSTNAME`, which the kubelet sets to the pod name).
pub fn parse_args(args: &[String], hostname: Option<&str>) -> Result<Command, Error> {
    let usage = |why: String| Error::Usage(why);
    let (sub, rest) = args
        .split_first()
        .ok_or_else(|| usage("a subcommand is required".into()))?;
    let mut flags = Flags::parse(rest)?;
    let command = match sub.as_str() {
        "app" => Command::App {
            port: flags.number("--port")?.unwrap_or(8080),
            name: flags
                .take("--name")
                .or_else(|| hostname.map(str::to_string))
                .unwrap_or_else(|| "app".into()),
            ipv6: flags.switch("--ipv6"),
        },
        "proxy" => Command::Proxy {
            inbound: flags.number("--inbound")?.unwrap_or(4143),
            outbound: flags.number("--outbound")?.unwrap_or(4140),
            uid: flags.number("--uid")?,
            ipv6: flags.switch("--ipv6"),
        },
        "ask" => Command::Ask {
            addr: flags.address("ask")?,
        },
        "validate" => Command::Validate {
            outbound: flags.number("--outbound")?.unwrap_or(4140),
            target: flags.address("validate")?,
        },
        other => return Err(usage(format!("unknown subcommand `{other}`"))),
    };
    flags.finish()?;
    Ok(command)
}

/// `--key value` pairs, `--switch`es and positional words; [`Flags::finish`] refuses leftovers.
struct Flags {
    pairs: Vec<(String, String)>,
    switches: Vec<String>,
    positional: Vec<String>,
}

const SWITCHES: &[&str] = &["--ipv6"];

impl Flags {
    /// The positional `ADDR:PORT` that `command` needs.
    fn address(&mut self, command: &str) -> Result<SocketAddr, Error> {
        let target = self
            .positional
            .pop()
            .ok_or_else(|| Error::Usage(format!("{command} needs ADDR:PORT")))?;
        target.parse().map_err(|_| {
            Error::Usage(format!(
                "`{target}` is not an IP address with a port (no DNS here)"
            ))
        })
    }

    fn parse(args: &[String]) -> Result<Self, Error> {
        let mut flags = Flags {
            pairs: Vec::new(),
            switches: Vec::new(),
            positional: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if SWITCHES.contains(&arg.as_str()) {
                flags.switches.push(arg.clone());
            } else if arg.starts_with("--") {
                let value = it
                    .next()
                    .ok_or_else(|| Error::Usage(format!("{arg} needs a value")))?;
                flags.pairs.push((arg.clone(), value.clone()));
            } else {
                flags.positional.push(arg.clone());
            }
        }
        Ok(flags)
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str) -> Result<Option<T>, Error> {
        self.take(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| Error::Usage(format!("{key} `{v}` is not a valid number")))
            })
            .transpose()
    }

    fn switch(&mut self, key: &str) -> bool {
        let had = self.switches.iter().any(|s| s == key);
        self.switches.retain(|s| s != key);
        had
    }

    fn finish(self) -> Result<(), Error> {
        let unknown: Vec<String> = (self.pairs.into_iter().map(|(k, _)| k))
            .chain(self.switches)
            .chain(self.positional)
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(Error::Usage(format!("unexpected {}", unknown.join(" "))))
        }
    }
}

/// Which proxy listener took a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Inbound,
    Outbound,
}

impl Listener {
    fn word(self) -> &'static str {
        match self {
            Listener::Inbound => "inbound",
            Listener::Outbound => "outbound",
        }
    }
}

/// One answer line, as sent and as parsed back by tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    App {
        name: String,
    },
    Proxy {
        listener: Listener,
        port: u16,
        original_dst: Option<SocketAddr>,
    },
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::App { name } => write!(f, "app {name}"),
            Answer::Proxy {
                listener,
                port,
                original_dst,
            } => {
                write!(f, "proxy {} {port} original-dst ", listener.word())?;
                match original_dst {
                    Some(dst) => write!(f, "{dst}"),
                    None => write!(f, "none"),
                }
            }
        }
    }
}

impl std::str::FromStr for Answer {
    type Err = String;

    fn from_str(line: &str) -> Result<Self, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["app", name] => Ok(Answer::App {
                name: name.to_string(),
            }),
            ["proxy", listener, port, "original-dst", dst] => Ok(Answer::Proxy {
                listener: match *listener {
                    "inbound" => Listener::Inbound,
                    "outbound" => Listener::Outbound,
                    other => return Err(format!("unknown listener `{other}` in `{line}`")),
                },
                port: port.parse().map_err(|_| format!("bad port in `{line}`"))?,
                original_dst: match *dst {
                    "none" => None,
                    dst => Some(
                        dst.parse()
                            .map_err(|_| format!("bad address in `{line}`"))?,
                    ),
                },
            }),
            _ => Err(format!("not a workload answer: `{line}`")),
        }
    }
}

/// Runs `command` until killed (`ask` returns after printing the answer).
pub fn run(command: Command) -> Result<(), Error> {
    match command {
        Command::App { port, name, ipv6 } => {
            let listener = bind(port, ipv6)?;
            announce("app", &listener);
            let answer = Answer::App { name }.to_string();
            serve(listener, move |_| answer.clone()).join().ok();
        }
        Command::Proxy {
            inbound,
            outbound,
            uid,
            ipv6,
        } => {
            let listeners = [
                (Listener::Inbound, bind(inbound, ipv6)?),
                (Listener::Outbound, bind(outbound, ipv6)?),
            ];
            // Bound first, then the proxy uid: its traffic is what the rules let through.
            if let Some(uid) = uid {
                let uid = nix::unistd::Uid::from_raw(uid);
                if nix::unistd::geteuid() != uid {
                    nix::unistd::setuid(uid).map_err(|source| Error::SetUid {
                        uid: uid.as_raw(),
                        source,
                    })?;
                }
            }
            let threads: Vec<JoinHandle<()>> = listeners
                .into_iter()
                .map(|(role, listener)| {
                    announce(role.word(), &listener);
                    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
                    serve(listener, move |stream| {
                        Answer::Proxy {
                            listener: role,
                            port,
                            original_dst: traffic::original_dst(stream).ok(),
                        }
                        .to_string()
                    })
                })
                .collect();
            for t in threads {
                t.join().ok();
            }
        }
        Command::Ask { addr } => {
            let answer = traffic::ask(addr).map_err(|source| Error::Ask { addr, source })?;
            print!("{answer}");
        }
        Command::Validate { outbound, target } => validate(outbound, target)?,
    }
    Ok(())
}

/// Linkerd's validator's check: a connection to `target` lands on our own `outbound` listener with
/// `target` as its original destination.
fn validate(outbound: u16, target: SocketAddr) -> Result<(), Error> {
    let listener = bind(outbound, target.is_ipv6())?;
    let not = |why: String| Error::NotRedirected { target, why };
    let timeout = std::time::Duration::from_secs(5);
    let _client = TcpStream::connect_timeout(&target, timeout).map_err(|e| not(e.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| not(e.to_string()))?;
    let deadline = std::time::Instant::now() + timeout;
    let (stream, _) = loop {
        match listener.accept() {
            Ok(accepted) => break accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(not("connected, but not to our listener".into()));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(not(e.to_string())),
        }
    };
    match traffic::original_dst(&stream) {
        Ok(dst) if dst == target => {
            println!("{WORKLOAD_PASSED} {target} is redirected to port {outbound}");
            Ok(())
        }
        Ok(dst) => Err(not(format!("our listener got one for {dst}"))),
        Err(e) => Err(not(format!("no original destination: {e}"))),
    }
}

fn bind(port: u16, ipv6: bool) -> Result<TcpListener, Error> {
    // `[::]` is dual-stack on Linux; `0.0.0.0` works in a pod without IPv6.
    let ip: std::net::IpAddr = if ipv6 {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let addr = SocketAddr::new(ip, port);
    TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })
}

fn announce(role: &str, listener: &TcpListener) {
    if let Ok(addr) = listener.local_addr() {
        println!("listening {role} {addr}");
        let _ = std::io::stdout().flush();
    }
}

/// Answers every connection with `answer(stream)` and a newline, from a thread of its own.
fn serve<F>(listener: TcpListener, answer: F) -> JoinHandle<()>
where
    F: Fn(&TcpStream) -> String + Send + 'static,
{
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let line = answer(&stream) + "\n";
            let _ = stream.write_all(line.as_bytes());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_every_subcommand_with_defaults_and_flags() {
        let table: &[(&str, Option<&str>, Command)] = &[
            (
                "app",
                Some("web-1"),
                Command::App {
                    port: 8080,
                    name: "web-1".into(),
                    ipv6: false,
                },
            ),
            (
                "app --port 9000 --name x --ipv6",
                Some("web-1"),
                Command::App {
                    port: 9000,
                    name: "x".into(),
                    ipv6: true,
                },
            ),
            (
                "app",
                None,
                Command::App {
                    port: 8080,
                    name: "app".into(),
                    ipv6: false,
                },
            ),
            (
                "proxy",
                None,
                Command::Proxy {
                    inbound: 4143,
                    outbound: 4140,
                    uid: None,
                    ipv6: false,
                },
            ),
            (
                "proxy --uid 2102 --inbound 1 --outbound 2",
                None,
                Command::Proxy {
                    inbound: 1,
                    outbound: 2,
                    uid: Some(2102),
                    ipv6: false,
                },
            ),
            (
                "ask 10.1.2.3:8080",
                None,
                Command::Ask {
                    addr: "10.1.2.3:8080".parse().unwrap(),
                },
            ),
            (
                "validate 10.1.2.3:20001",
                None,
                Command::Validate {
                    outbound: 4140,
                    target: "10.1.2.3:20001".parse().unwrap(),
                },
            ),
            (
                "validate --outbound 1 10.1.2.3:20001",
                None,
                Command::Validate {
                    outbound: 1,
                    target: "10.1.2.3:20001".parse().unwrap(),
                },
            ),
            (
                "ask [fd00::1]:80",
                None,
                Command::Ask {
                    addr: "[fd00::1]:80".parse().unwrap(),
                },
            ),
        ];
        for (line, hostname, want) in table {
            assert_eq!(&parse_args(&args(line), *hostname).unwrap(), want, "{line}");
        }
    }

    #[test]
    fn bad_arguments_get_a_usage_error_naming_them() {
        let table = [
            ("", "a subcommand is required"),
            ("serve", "unknown subcommand `serve`"),
            ("app --port http", "--port `http` is not a valid number"),
            ("app --port 70000", "--port `70000`"),
            ("app --name", "--name needs a value"),
            ("app --colour red", "unexpected --colour"),
            ("proxy extra", "unexpected extra"),
            ("ask", "ask needs ADDR:PORT"),
            ("ask web:8080", "`web:8080` is not an IP address"),
            ("validate", "validate needs ADDR:PORT"),
        ];
        for (line, want) in table {
            let err = parse_args(&args(line), None).unwrap_err().to_string();
            assert!(err.contains(want), "{line}: {err}");
            assert!(err.contains("usage:"), "{line}: {err}");
        }
    }

    #[test]
    fn answers_round_trip() {
        let table = [
            (Answer::App { name: "web".into() }, "app web"),
            (
                Answer::Proxy {
                    listener: Listener::Inbound,
                    port: 4143,
                    original_dst: Some("10.0.0.7:8080".parse().unwrap()),
                },
                "proxy inbound 4143 original-dst 10.0.0.7:8080",
            ),
            (
                Answer::Proxy {
                    listener: Listener::Outbound,
                    port: 4140,
                    original_dst: None,
                },
                "proxy outbound 4140 original-dst none",
            ),
        ];
        for (answer, line) in table {
            assert_eq!(answer.to_string(), line);
            assert_eq!(line.parse::<Answer>().unwrap(), answer);
        }
        assert!("proxy sideways 1 original-dst none"
            .parse::<Answer>()
            .is_err());
        assert!("hello".parse::<Answer>().is_err());
    }
}
