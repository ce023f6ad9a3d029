//! The operator binary: everything, flags included, lives in the library
//! (`linkerd_multus_operator::main`).

fn main() -> std::process::ExitCode {
    linkerd_multus_operator::main()
}
