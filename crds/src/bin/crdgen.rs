//! Writes the CRD YAML files (`crds/network-attachment-definition.yaml`, `crds/node-multus.yaml`), or
//! prints them with `--stdout`.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let files = match linkerd_multus_crds::generated() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("crdgen: cannot render the CRDs: {e}");
            return ExitCode::FAILURE;
        }
    };
    if std::env::args().any(|a| a == "--stdout") {
        for (_, yaml) in &files {
            print!("---\n{yaml}");
        }
        return ExitCode::SUCCESS;
    }
    for (file, yaml) in files {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
        if let Err(e) = std::fs::write(&path, yaml) {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
