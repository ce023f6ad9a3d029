//! The images the node runs are the Dockerfile's: `e2e/images` builds the shipped images with
//! `buildah build -f Dockerfile --target ...`, and the archives it imports are read back here (entrypoint,
//! user, ports, files) against the Dockerfile and against what the chart's Deployment and DaemonSet
//! expect of them. The build context stays small (`.dockerignore`), and the binaries the installer copies
//! onto nodes are static.

mod support;

use std::path::PathBuf;
use std::process::Command;

use linkerd_multus_e2e::dockerignore::{gitignore_samples, DockerIgnore};
use linkerd_multus_e2e::images::{dockerfile_targets, local_images, ImageSpec, OciImage};
use linkerd_multus_e2e::workspace_root;
use serde_json::Value;
use support::*;

fn read(path: &str) -> String {
    let p = workspace_root().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The Dockerfile's final stages (those with an ENTRYPOINT): what gets shipped.
fn shipped_targets() -> Vec<(String, ImageSpec)> {
    let targets = dockerfile_targets(&read("Dockerfile")).expect("the Dockerfile parses");
    targets
        .into_iter()
        .filter(|(_, spec)| !spec.entrypoint.is_empty())
        .collect()
}

/// Every shipped stage starts from scratch and is built by `e2e/images` from a context holding exactly
/// the binaries it copies; every target `e2e/images` names exists.
#[test]
fn e2e_images_builds_every_dockerfile_target_from_its_binaries() {
    let shipped = shipped_targets();
    let names: Vec<&str> = shipped.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["cni", "operator"]);
    let local = local_images(&read("e2e/images")).expect("e2e/images' declarations parse");
    for (name, spec) in &shipped {
        assert_eq!(spec.base, "scratch", "target {name}");
        let Some(image) = local
            .iter()
            .find(|i| i.dockerfile_target.as_deref() == Some(name.as_str()))
        else {
            panic!("Dockerfile target `{name}` has no `shipped` line in e2e/images");
        };
        assert_eq!(
            image.binaries, spec.binaries,
            "e2e/images' `{}` context vs the target's COPY",
            image.key
        );
    }
    for image in &local {
        if let Some(target) = &image.dockerfile_target {
            assert!(
                names.contains(&target.as_str()),
                "e2e/images' `{}` names Dockerfile target `{target}`, which does not exist",
                image.key
            );
        }
    }
    let keys: Vec<&str> = local.iter().map(|i| i.key.as_str()).collect();
    // `e2e/testbed env --node` exports LINKERD_MULTUS_{OPERATOR,CNI,TEST}_IMAGE; containerd needs pause.
    assert_eq!(keys, ["operator", "cni", "test", "pause"]);
}

/// With this checkout as the build context, `.dockerignore` lets in the shipped binaries at the
/// Dockerfile's default BIN_DIR and nothing else: every .gitignore entry (local state: target*,
/// .testbed*, .tools, ...) and every top-level entry of the checkout stays out.
#[test]
fn the_build_context_is_the_binaries_only() {
    let ignore = DockerIgnore::parse(&read(".dockerignore")).expect(".dockerignore parses");
    let dockerfile = read("Dockerfile");
    let bin_dir = dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix("ARG BIN_DIR="))
        .expect("the Dockerfile sets a default BIN_DIR");
    let mut binaries: Vec<String> = shipped_targets()
        .into_iter()
        .flat_map(|(_, spec)| spec.binaries)
        .collect();
    binaries.sort();
    for b in &binaries {
        let path = format!("{bin_dir}/{b}");
        assert!(!ignore.excludes(&path), "{path} must enter the context");
    }
    for pattern in read(".gitignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
    {
        for sample in gitignore_samples(pattern) {
            assert!(
                ignore.excludes(&sample),
                ".gitignore's `{pattern}` ({sample}) is not dockerignored"
            );
        }
    }
    let root = workspace_root();
    for entry in std::fs::read_dir(&root).expect("the checkout") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let holds_a_binary = binaries
            .iter()
            .any(|b| format!("{bin_dir}/{b}").starts_with(&format!("{name}/")));
        if !holds_a_binary && name != "Dockerfile" && name != ".dockerignore" {
            assert!(ignore.excludes(&name), "{name} enters the build context");
        }
    }
    for other in [
        format!("{bin_dir}/deps/{}", binaries[0]),
        format!("{bin_dir}/{}.d", binaries[0]),
        format!("target/debug/{}", binaries[0]),
        "target/release/linkerd-cni".to_string(),
    ] {
        assert!(ignore.excludes(&other), "{other} enters the build context");
    }
}

/// `e2e/images --bin-dir` / `--archive KEY`: where it keeps its static builds and images.
fn e2e_images(args: &[&str]) -> PathBuf {
    let out = Command::new(workspace_root().join("e2e/images"))
        .args(args)
        .output()
        .expect("run e2e/images");
    assert!(out.status.success(), "e2e/images {args:?} failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn archive(key: &str) -> OciImage {
    let path = e2e_images(&["--archive", key]);
    assert!(
        path.is_file(),
        "{} is not built: run e2e/images (e2e/testbed up --node does)",
        path.display()
    );
    OciImage::read_archive(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The built archive of a shipped image against its Dockerfile target: the same entrypoint, user and
/// ports, and its layers hold exactly the binaries the target copies, executable.
fn assert_built_from(image: &OciImage, target: &str, spec: &ImageSpec) {
    assert_eq!(image.config.entrypoint, spec.entrypoint, "{target}");
    assert!(image.config.cmd.is_empty(), "{target}: {:?}", image.config);
    assert_eq!(image.config.user, spec.user, "{target}");
    assert_eq!(image.config.exposed_ports, spec.ports, "{target}");
    let wanted: Vec<String> = spec
        .binaries
        .iter()
        .map(|b| format!("/usr/local/bin/{b}"))
        .collect();
    assert_eq!(
        image.regular_files(),
        wanted,
        "{target}: the files of the image"
    );
    for path in &wanted {
        assert!(
            image.has_executable(path),
            "{target}: {path} is not executable"
        );
    }
}

/// A rendered container runs in `image`: no `command` (the image's entrypoint runs) or one the image
/// holds; its exec probes name files of the image; its ports are ones the image exposes.
fn assert_container_fits(container: &Value, image: &OciImage, what: &str) {
    let entry = match container["command"].as_array() {
        None => image.config.entrypoint.first().cloned(),
        Some(c) => c.first().and_then(Value::as_str).map(str::to_string),
    };
    let entry = entry.unwrap_or_else(|| panic!("{what}: nothing to run"));
    assert!(
        image.has_executable(&entry),
        "{what}: {entry} is not in the image"
    );
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        if let Some(cmd) = container[probe]["exec"]["command"][0].as_str() {
            assert!(
                image.has_executable(cmd),
                "{what}: {probe} runs {cmd}, not in the image"
            );
        }
    }
    for port in container["ports"].as_array().into_iter().flatten() {
        let p = port["containerPort"].as_u64().expect("containerPort");
        assert!(
            image
                .config
                .exposed_ports
                .iter()
                .any(|e| u64::from(*e) == p),
            "{what}: port {p} is not exposed by the image ({:?})",
            image.config.exposed_ports
        );
    }
}

/// The images the node imports are the Dockerfile's, and fit the chart: the operator's Deployment runs
/// its entrypoint on its exposed ports, with the image's non-root uid as the pod's runAsUser (and, where
/// OpenShift's values leave runAsUser to the SCC, a numeric USER the kubelet can check runAsNonRoot
/// against); the CNI DaemonSet runs the installer as root, its readiness probe a binary of the image, and
/// the image carries the plugin the installer copies onto the node.
#[test]
#[ignore = "needs the images e2e/images built (e2e/testbed up --node) and helm: run by e2e/test-all"]
fn the_images_the_node_imports_are_the_dockerfiles_and_fit_the_chart() {
    let targets: std::collections::BTreeMap<String, ImageSpec> =
        shipped_targets().into_iter().collect();
    let operator = archive("operator");
    let cni = archive("cni");
    assert_built_from(&operator, "operator", &targets["operator"]);
    assert_built_from(&cni, "cni", &targets["cni"]);

    let docs = parse_docs(&helm_template(
        TEMPLATE_RELEASE,
        TEMPLATE_NAMESPACE,
        &["--set", "cni.enabled=true"],
    ));
    let ds = &find(&docs, "DaemonSet", None)["spec"]["template"]["spec"];
    let installer = &ds["containers"][0];
    assert_container_fits(installer, &cni, "CNI DaemonSet");
    assert_eq!(cni.config.uid(), Some(0));
    assert_eq!(installer["securityContext"]["runAsUser"], 0);
    assert!(cni.has_executable("/usr/local/bin/linkerd-cni"));

    let pod = &find(&docs, "Deployment", None)["spec"]["template"]["spec"];
    assert_container_fits(&pod["containers"][0], &operator, "operator Deployment");
    let uid = operator
        .config
        .uid()
        .expect("the operator image's USER is numeric");
    assert_ne!(uid, 0, "the operator image runs as root");
    assert_eq!(pod["securityContext"]["runAsUser"], uid);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);

    let openshift = chart_dir().join("values-openshift.yaml");
    let docs = parse_docs(&helm_template(
        TEMPLATE_RELEASE,
        TEMPLATE_NAMESPACE,
        &["-f", path_str(&openshift)],
    ));
    let pod = &find(&docs, "Deployment", None)["spec"]["template"]["spec"];
    assert!(pod["securityContext"]["runAsUser"].is_null(), "{pod}");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
}

#[test]
#[ignore = "needs the static builds of e2e/images: run by e2e/test-all"]
fn the_shipped_binaries_are_statically_linked() {
    let dir = e2e_images(&["--bin-dir"]);
    for name in [
        "linkerd-cni",
        "linkerd-cni-install",
        "linkerd-multus-operator",
    ] {
        let path = dir.join(name);
        assert!(
            path.is_file(),
            "{} is not built: run e2e/images (e2e/testbed up --node does)",
            path.display()
        );
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
