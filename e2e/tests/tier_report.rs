//! `e2e/lib/tier.py report`, the last lines of every CI run: which cases no tier ran. Pure (python3).

use std::path::Path;
use std::process::Command;

fn report(summary: &str, not_run: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for (name, text) in not_run {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    for line in summary.lines() {
        lines.push_str(&line.replace("DIR", &dir.path().display().to_string()));
        lines.push('\n');
    }
    let tiers = dir.path().join("tiers");
    std::fs::write(&tiers, lines).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lib/tier.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("report")
        .arg(&tiers)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A case counts as run when a tier that ran its target did not report it; a tier that left the
/// target out (skipped, or ran only others, as the doc tests and the node tier do) does not run it.
#[test]
fn a_case_is_run_only_where_a_tier_ran_its_target() {
    let summary = "\
doc tests\t1\t0\t\t\t(doc tests)
v1.20.2 apiserver\t10\t0\tDIR/api\tnode,node_scenario\t
v1.20.2 node\t3\t0\tDIR/node\t\tnode,node_scenario
v1.35.6 apiserver\t5\t0\tDIR/k135\tnode,node_scenario,helm_chart\t
v1.35.6 gone\tnot run\tthe platform is not given";
    let out = report(
        summary,
        &[
            (
                "api",
                "policy/v1 PDB\tno policy/v1\thelm_install\nchart case\told server\thelm_chart\n",
            ),
            ("node", "native sidecar\t1.28+\tnode_scenario\n"),
            ("k135", ""),
        ],
    );
    assert!(
        out.contains("tier v1.20.2 apiserver: 10 passed, 0 failed, 2 cases not run"),
        "{out}"
    );
    assert!(
        out.contains("tier v1.35.6 gone: not run: the platform is not given"),
        "{out}"
    );
    // The PDB ran on 1.35; the chart case's target was skipped there, the sidecar's everywhere but
    // the node tier that reported it.
    assert!(out.contains("cases not run on any server: 2"), "{out}");
    assert!(
        out.contains("  - chart case (v1.20.2 apiserver: old server)"),
        "{out}"
    );
    assert!(
        out.contains("  - native sidecar (v1.20.2 node: 1.28+)"),
        "{out}"
    );
    assert!(!out.contains("  - policy/v1 PDB ("), "{out}");
}
