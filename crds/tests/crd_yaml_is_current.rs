//! Fails when `crds/network-attachment-definition.yaml` no longer matches the Rust type: run
//! `cargo run -p linkerd-multus-crds --bin crdgen` and commit the result.

#[test]
fn committed_crd_yaml_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(linkerd_multus_crds::CRD_FILE);
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let generated = linkerd_multus_crds::crd_yaml().expect("render CRD");
    assert!(
        committed == generated,
        "{} is stale; regenerate it with `cargo run -p linkerd-multus-crds --bin crdgen`",
        path.display()
    );
}
