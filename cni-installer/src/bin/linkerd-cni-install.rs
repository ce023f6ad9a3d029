//! `linkerd-cni-install`: the container of the linkerd-cni DaemonSet. See `--help`.

use clap::Parser;
use linkerd_cni_installer::{self as install, Args};

fn main() -> std::process::ExitCode {
    install::init_logging();
    install::main(Args::parse())
}
