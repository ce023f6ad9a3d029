//! The one gate on the CRDs' YAML: every file `crdgen` writes (`linkerd_multus_crds::files`: the copies
//! in `crds/`, `config/crd/` and the chart) holds exactly what the Rust types render, and no other YAML
//! file under `crds/`, `config/` or `helm/` holds a CRD. A failure names each file and the command that
//! writes them all again (`cargo run -p linkerd-multus-crds --bin crdgen`); commit what it writes.

use std::path::Path;

use linkerd_multus_crds::files::{self, REGENERATE};

/// A CRD type changed without regenerating, or a copy edited by hand: the chart or kustomize would
/// install a CRD that is not the one the operator and the installer are built against.
#[test]
fn every_crd_file_is_what_crdgen_writes() {
    let root = files::workspace_root();
    let generated = files::generated().expect("render CRDs");
    let stale: Vec<String> = generated
        .iter()
        .filter_map(|file| {
            let committed = match std::fs::read_to_string(root.join(file.path)) {
                Ok(committed) => committed,
                Err(e) => return Some(format!("{}: cannot read it: {e}", file.path)),
            };
            first_difference(&committed, &file.yaml).map(|(line, committed, generated)| {
                format!(
                    "{}: differs from the generated CRD at line {line}:\n  committed: {committed}\n  \
                     generated: {generated}",
                    file.path
                )
            })
        })
        .collect();
    assert!(
        stale.is_empty(),
        "{} of {} CRD files are not what the Rust types render; write them all again with `{REGENERATE}` \
         and commit the result (never edit them by hand):\n{}",
        stale.len(),
        generated.len(),
        stale.join("\n")
    );
}

/// A new CRD file kept by hand beside the generated ones (a fourth copy, or a CRD added without
/// `crdgen`) would drift unseen; every CRD in these trees must be one `crdgen` writes.
#[test]
fn no_crd_file_outside_crdgen() {
    let root = files::workspace_root();
    let generated = files::generated().expect("render CRDs");
    let mut yaml_files = Vec::new();
    for dir in ["crds", "config", "helm"] {
        collect_yaml(&root, Path::new(dir), &mut yaml_files);
    }
    assert!(
        yaml_files.len() > generated.len(),
        "found too few YAML files: {yaml_files:?}"
    );
    let unlisted: Vec<&String> = yaml_files
        .iter()
        .filter(|path| !generated.iter().any(|f| f.path == path.as_str()))
        .filter(|path| {
            let text = std::fs::read_to_string(root.join(path.as_str()))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            text.lines()
                .any(|line| line.trim() == "kind: CustomResourceDefinition")
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "these files hold a CRD that `crdgen` does not write: {unlisted:?}; render it from the Rust type \
         instead (add the path to `linkerd_multus_crds::files`, then run `{REGENERATE}`)"
    );
}

/// The first line (1-based) where `committed` and `generated` differ, with both lines.
fn first_difference(committed: &str, generated: &str) -> Option<(usize, String, String)> {
    if committed == generated {
        return None;
    }
    let mut a = committed.lines();
    let mut b = generated.lines();
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => {
                let show =
                    |l: Option<&str>| l.map_or("<end of file>".to_string(), |l| format!("{l:?}"));
                // Equal lines to the end: they differ in line endings or the trailing newline.
                if x.is_none() && y.is_none() {
                    let what = "<the same lines, other line endings>".to_string();
                    return Some((line, what.clone(), what));
                }
                return Some((line, show(x), show(y)));
            }
        }
    }
}

/// Every `.yaml`/`.yml` file under `root/dir`, as a path relative to `root` with `/` separators.
fn collect_yaml(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries =
        std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let path = dir.join(entry.file_name());
        let kind = entry
            .file_type()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if kind.is_dir() {
            collect_yaml(root, &path, out);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            out.push(path.to_string_lossy().replace('\\', "/"));
        }
    }
}
