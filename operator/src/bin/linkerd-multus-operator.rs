//! The operator binary: parse flags, set up logging, run. Everything else lives in the library.

use clap::Parser;
use linkerd_multus_operator::cli::Cli;
use linkerd_multus_operator::config::Config;
use vocab::report::Chain;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    linkerd_multus_operator::init_tracing(cli.run.log_format);
    match linkerd_multus_operator::run(Config::from_cli(cli)).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %Chain(&e), "linkerd-multus-operator failed");
            std::process::ExitCode::FAILURE
        }
    }
}
