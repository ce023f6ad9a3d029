//! Writes every file holding one of the CRDs' YAML (`linkerd_multus_crds::files`: the copies in
//! `crds/`, `config/crd/` and the chart), or prints each CRD once with `--stdout`.

use std::process::ExitCode;

use linkerd_multus_crds::files;

fn main() -> ExitCode {
    let generated = match files::generated() {
        Ok(generated) => generated,
        Err(e) => {
            eprintln!("crdgen: cannot render the CRDs: {e}");
            return ExitCode::FAILURE;
        }
    };
    if std::env::args().any(|a| a == "--stdout") {
        // A CRD's files are identical: print each content once.
        let mut printed: Vec<&str> = Vec::new();
        for file in &generated {
            if !printed.contains(&file.yaml.as_str()) {
                print!("---\n{}", file.yaml);
                printed.push(&file.yaml);
            }
        }
        return ExitCode::SUCCESS;
    }
    let root = files::workspace_root();
    for file in generated {
        let path = root.join(file.path);
        let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == file.yaml);
        if unchanged {
            println!("unchanged {}", file.path);
            continue;
        }
        if let Err(e) = std::fs::write(&path, &file.yaml) {
            eprintln!("crdgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", file.path);
    }
    ExitCode::SUCCESS
}
