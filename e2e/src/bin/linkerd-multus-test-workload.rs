//! The test image's one binary: the app (8080), Linkerd's proxy (4143/4140) and network validator of a
//! meshed test pod, and a client. See `linkerd_multus_e2e::workload`.

use linkerd_multus_e2e::workload;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let hostname = std::env::var("HOSTNAME").ok();
    let result = workload::parse_args(&args, hostname.as_deref()).and_then(workload::run);
    if let Err(e) = result {
        eprintln!("linkerd-multus-test-workload: {}", vocab::report::chain(&e));
        std::process::exit(e.exit_code());
    }
}
