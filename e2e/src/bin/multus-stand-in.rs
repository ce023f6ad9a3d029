//! A stand-in for Multus' thin CNI plugin, for the test node: see `linkerd_multus_e2e::multus`.

fn main() {
    std::process::exit(linkerd_multus_e2e::multus::main());
}
