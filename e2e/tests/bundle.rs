//! The OLM bundle (`bundle/`): it is what `bundlegen` makes now from the chart and the CRDs, and the
//! real validator (`bundlevalidate`: operator-registry's format and content checks and the
//! operator-framework/api validators `operator-sdk bundle validate` runs, from the real platform)
//! passes it, and refuses it with a DaemonSet in it.

use std::path::Path;
use std::process::Command;

use linkerd_multus_e2e::bundle;
use linkerd_multus_e2e::chart::helm_template;
use linkerd_multus_e2e::platform::{Platform, BUNDLEVALIDATE};

/// A chart or CRD change that is not in the committed bundle fails here: `bundle/` would ship stale.
#[test]
#[ignore = "needs helm (e2e/testbed install): run by e2e/test-all"]
fn bundle_is_what_bundlegen_makes_now() {
    let files = bundle::inputs()
        .and_then(|inputs| bundle::build(&inputs))
        .unwrap_or_else(|e| panic!("bundlegen: {e}"));
    let dir = bundle::bundle_dir();
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        bundle::write(&dir, &files).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let diffs = bundle::differences(&dir, &files).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        diffs.is_empty(),
        "bundle/ is not what bundlegen makes now; after review, rewrite it with `cargo run -p \
         linkerd-multus-e2e --bin bundlegen` (or UPDATE_GOLDEN=1):\n{}",
        diffs.join("\n")
    );
}

/// The committed bundle passes the default validators and `--good-practices` with no error; the
/// warnings are printed (`--nocapture`).
#[test]
#[ignore = "needs the real platform (LINKERD_MULTUS_PLATFORM): run by e2e/test-all"]
fn bundlevalidate_passes_the_bundle() {
    let Some(platform) = Platform::or_not_run("bundlevalidate on bundle/") else {
        return;
    };
    let validator = platform.binary(BUNDLEVALIDATE);
    for extra in [&[][..], &["--good-practices"][..]] {
        let (code, output) = validate(&validator, &bundle::bundle_dir(), extra);
        eprintln!("bundlevalidate bundle/ {}:\n{output}", extra.join(" "));
        assert_eq!(code, Some(0), "bundlevalidate {extra:?}:\n{output}");
        assert!(
            !output.contains("ERROR"),
            "bundlevalidate {extra:?}:\n{output}"
        );
        assert!(
            output.contains("bundle valid"),
            "bundlevalidate {extra:?}:\n{output}"
        );
    }
}

/// The validator is not a rubber stamp: the chart's own installer DaemonSet, dropped into a copy of
/// the bundle, is refused by name (what the node agent exists for).
#[test]
#[ignore = "needs helm and the real platform (LINKERD_MULTUS_PLATFORM): run by e2e/test-all"]
fn bundlevalidate_refuses_a_daemonset() {
    let Some(platform) = Platform::or_not_run("bundlevalidate refusing a DaemonSet") else {
        return;
    };
    let validator = platform.binary(BUNDLEVALIDATE);
    let copy = tempfile::tempdir().expect("temp dir");
    copy_dir(&bundle::bundle_dir(), copy.path());
    let rendered = helm_template(
        bundle::PACKAGE,
        bundle::PACKAGE,
        &["--set", "cni.enabled=true"],
    );
    let daemonset = rendered
        .split("\n---\n")
        .find(|doc| doc.contains("\nkind: DaemonSet\n"))
        .expect("the chart renders the installer DaemonSet with cni.enabled=true");
    std::fs::write(
        copy.path()
            .join("manifests/linkerd-cni_apps_v1_daemonset.yaml"),
        daemonset,
    )
    .expect("write the DaemonSet");
    let (code, output) = validate(&validator, copy.path(), &[]);
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains("DaemonSet is not supported type for registryV1 bundle"),
        "{output}"
    );
}

fn validate(validator: &Path, dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(validator)
        .arg(dir)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", validator.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read bundle/") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
