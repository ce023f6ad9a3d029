//! Fails when a committed CRD file (`crds/network-attachment-definition.yaml`, `crds/node-multus.yaml`)
//! no longer matches its Rust type: run `cargo run -p linkerd-multus-crds --bin crdgen` and commit the result.

#[test]
fn committed_crd_yaml_is_current() {
    let files = linkerd_multus_crds::generated().expect("render CRDs");
    assert_eq!(files.len(), 2);
    for (file, generated) in files {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        assert!(
            committed == generated,
            "{} is stale; regenerate it with `cargo run -p linkerd-multus-crds --bin crdgen`",
            path.display()
        );
    }
}
