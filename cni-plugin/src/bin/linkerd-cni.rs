//! `linkerd-cni`: the CNI plugin binary. A runtime runs it with `CNI_*` variables and the network
//! config on stdin; it prints only the CNI result or error JSON on stdout and logs to stderr.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    // A human running it by hand gets the explanation; a runtime never passes arguments.
    if std::env::args()
        .nth(1)
        .is_some_and(|a| a == "--help" || a == "-h")
    {
        print!("{}", linkerd_cni::commands::HELP);
        return ExitCode::SUCCESS;
    }
    // Hidden: the backend `iptables-mode: auto` picks on this node, as ADD and DEL decide it (the
    // test holding the installer's published backend equal to it runs both on one node).
    if std::env::args()
        .nth(1)
        .is_some_and(|a| a == "--iptables-backend")
    {
        println!("{}", linkerd_cni::backend::auto_on_this_node().as_str());
        return ExitCode::SUCCESS;
    }
    let mut stdin = Vec::new();
    // An unreadable stdin is the same as an empty config: the library reports it as such.
    let _ = std::io::stdin().read_to_end(&mut stdin);
    let vars = std::env::vars_os().map(|(k, v)| {
        (
            k.to_string_lossy().into_owned(),
            v.to_string_lossy().into_owned(),
        )
    });
    let outcome = linkerd_cni::run(vars, &stdin);
    if let Some(out) = outcome.stdout {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{out}");
        let _ = stdout.flush();
    }
    ExitCode::from(outcome.exit_code)
}
