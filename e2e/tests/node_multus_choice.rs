//! `e2e/testbed up --node` refuses a Multus it cannot run (`LINKERD_MULTUS_NODE_MULTUS`) before it
//! starts anything: a name it does not know, the real Multus (thin, thick) without the real platform,
//! and the real Multus from a platform folder that is broken. Needs neither root nor a node: the
//! refusal comes first.

use std::path::Path;
use std::process::Command;

use linkerd_multus_e2e::platform::PLATFORM_ENV;
use linkerd_multus_e2e::workspace_root;

/// `up --node` with `kind` and the platform folder `platform` (None: unset): its stderr, once it failed.
fn refused_up(state: &Path, kind: &str, platform: Option<&Path>) -> String {
    let mut cmd = Command::new(workspace_root().join("e2e/testbed"));
    cmd.args(["up", "--node"])
        .env("LINKERD_MULTUS_TESTBED_DIR", state)
        .env("LINKERD_MULTUS_NODE_MULTUS", kind)
        .env_remove(PLATFORM_ENV);
    if let Some(dir) = platform {
        cmd.env(PLATFORM_ENV, dir);
    }
    let out = cmd.output().expect("run e2e/testbed");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "up --node with {kind} succeeded: {stderr}"
    );
    assert!(
        !state.exists(),
        "up --node with {kind} started something in {}: {stderr}",
        state.display()
    );
    stderr
}

#[test]
fn up_refuses_a_multus_it_cannot_run_before_starting_anything() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("node");
    let unknown = refused_up(&state, "thicc", None);
    assert!(
        unknown.contains(
            "LINKERD_MULTUS_NODE_MULTUS=thicc: use stand-in (the default), thin or thick"
        ),
        "{unknown}"
    );
    for kind in ["thin", "thick"] {
        let without = refused_up(&state, kind, None);
        assert!(
            without.contains(&format!(
                "LINKERD_MULTUS_NODE_MULTUS={kind} runs the real Multus"
            )) && without.contains(&format!("{PLATFORM_ENV} is not set")),
            "{without}"
        );
    }
    let broken = dir.path().join("platform");
    std::fs::create_dir_all(&broken).expect("platform dir");
    let broken_says = refused_up(&state, "thick", Some(&broken));
    assert!(
        broken_says.contains("the real Multus (multus-v4.2.2-")
            && broken_says.contains("has no SHA256SUMS"),
        "{broken_says}"
    );
}
