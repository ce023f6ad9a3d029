//! Writes the NetworkAttachmentDefinition CRD YAML to `crds/network-attachment-definition.yaml`
//! (or prints it with `--stdout`).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let yaml = match linkerd_multus_crds::crd_yaml() {
        Ok(yaml) => yaml,
        Err(e) => {
            eprintln!("crdgen: cannot render the CRD: {e}");
            return ExitCode::FAILURE;
        }
    };
    if std::env::args().any(|a| a == "--stdout") {
        print!("{yaml}");
        return ExitCode::SUCCESS;
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(linkerd_multus_crds::CRD_FILE);
    match std::fs::write(&path, yaml) {
        Ok(()) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
