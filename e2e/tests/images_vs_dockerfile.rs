//! The images `e2e/images` builds for the testbed node and the Dockerfile's targets must not drift: same
//! entrypoints, users, ports and binaries. And the `linkerd-cni` the installer copies onto nodes is
//! statically linked, so it runs on any node's libc.

use std::path::PathBuf;
use std::process::Command;

use linkerd_multus_e2e::images::{dockerfile_targets, local_images};
use linkerd_multus_e2e::workspace_root;

fn read(path: &str) -> String {
    let p = workspace_root().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

#[test]
fn every_dockerfile_target_is_built_alike_by_e2e_images() {
    let targets = dockerfile_targets(&read("Dockerfile")).expect("the Dockerfile parses");
    let local = local_images(&read("e2e/images")).expect("e2e/images' declarations parse");
    // The final stages (those with an ENTRYPOINT) are what gets shipped.
    let shipped: Vec<&String> = targets
        .iter()
        .filter(|(_, spec)| !spec.entrypoint.is_empty())
        .map(|(name, _)| name)
        .collect();
    assert!(
        shipped.len() >= 2,
        "expected the operator and cni targets, found {shipped:?}"
    );
    for name in shipped {
        let Some(image) = local
            .iter()
            .find(|i| i.dockerfile_target.as_deref() == Some(name))
        else {
            panic!("Dockerfile target `{name}` has no `image` line in e2e/images");
        };
        assert_eq!(
            image.spec, targets[name],
            "e2e/images' `{}` differs from the Dockerfile's target `{name}`",
            image.key
        );
    }
    for image in &local {
        if let Some(target) = &image.dockerfile_target {
            assert!(
                targets.contains_key(target),
                "e2e/images' `{}` names Dockerfile target `{target}`, which does not exist",
                image.key
            );
        }
    }
}

#[test]
fn e2e_images_declares_the_images_the_testbed_exports() {
    let local = local_images(&read("e2e/images")).expect("e2e/images' declarations parse");
    let keys: Vec<&str> = local.iter().map(|i| i.key.as_str()).collect();
    // `e2e/testbed env --node` exports LINKERD_MULTUS_{OPERATOR,CNI,TEST}_IMAGE; containerd needs pause.
    for key in ["operator", "cni", "test", "pause"] {
        assert!(
            keys.contains(&key),
            "e2e/images declares no `{key}` image: {keys:?}"
        );
    }
}

fn static_build(name: &str) -> PathBuf {
    let out = Command::new(workspace_root().join("e2e/images"))
        .arg("--bin-dir")
        .output()
        .expect("run e2e/images --bin-dir");
    assert!(out.status.success(), "e2e/images --bin-dir failed");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join(name);
    assert!(
        path.is_file(),
        "{} is not built: run e2e/images (e2e/testbed up --node does)",
        path.display()
    );
    path
}

#[test]
#[ignore = "needs the static builds of e2e/images: run by e2e/test-all"]
fn the_shipped_binaries_are_statically_linked() {
    for name in [
        "linkerd-cni",
        "linkerd-cni-install",
        "linkerd-multus-operator",
    ] {
        let path = static_build(name);
        let file = Command::new("file")
            .arg(&path)
            .output()
            .expect("running file");
        let file = String::from_utf8_lossy(&file.stdout).to_string();
        assert!(
            file.contains("statically linked") || file.contains("static-pie linked"),
            "{name} is not static: {file}"
        );
        assert!(
            !file.contains("interpreter"),
            "{name} names an ELF interpreter: {file}"
        );
        let ldd = Command::new("ldd")
            .arg(&path)
            .output()
            .expect("running ldd");
        let ldd = format!(
            "{}{}",
            String::from_utf8_lossy(&ldd.stdout),
            String::from_utf8_lossy(&ldd.stderr)
        );
        assert!(
            !ldd.contains("libc.so"),
            "{name} loads a shared libc: {ldd}"
        );
    }
}
