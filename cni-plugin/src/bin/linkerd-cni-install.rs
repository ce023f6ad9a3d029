//! `linkerd-cni-install`: the container of the linkerd-cni DaemonSet. See `--help`.

use clap::Parser;
use linkerd_cni::install::{self, Args};

fn main() -> std::process::ExitCode {
    install::init_logging();
    install::main(Args::parse())
}
