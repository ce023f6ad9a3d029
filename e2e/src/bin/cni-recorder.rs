//! A CNI plugin for tests that records each call and changes nothing: see `linkerd_multus_e2e::recorder`.

fn main() {
    std::process::exit(linkerd_multus_e2e::recorder::main());
}
