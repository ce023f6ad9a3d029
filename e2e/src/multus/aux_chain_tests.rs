use super::*;

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).expect("write");
}

fn chain_dir() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("vendor-cni-chain");
    std::fs::create_dir(&dir).expect("chain dir");
    (root, dir)
}

/// Multus takes the chain from beside the cluster network's file; a name is not a path and fails.
#[test]
fn the_chain_lives_beside_the_cluster_networks_file() {
    assert_eq!(
        conf_dir(Some("/run/multus/cni/net.d/10-ovn-kubernetes.conf")).unwrap(),
        PathBuf::from("/run/multus/cni/net.d")
    );
    assert_eq!(conf_dir(Some("/10.conflist")).unwrap(), PathBuf::from("/"));
    assert_eq!(conf_dir(Some("rel/10.conf")).unwrap(), PathBuf::from("rel"));
    for not_a_path in [None, Some(""), Some("k8s-pod-network")] {
        let why = conf_dir(not_a_path).unwrap_err();
        assert!(why.contains("ClusterNetwork must be a path"), "{why}");
    }
}

#[test]
fn network_names_follow_the_cni_spec() {
    for ok in ["vendor-cni-chain", "a", "9.x_y-z"] {
        assert!(is_valid_network_name(ok), "{ok}");
    }
    for bad in ["", "-x", ".x", "a/b", "a b", "ü"] {
        assert!(!is_valid_network_name(bad), "{bad}");
    }
}

/// Only `*.conf` regular entries, bytewise by name (Go's os.ReadDir order): `10` before `9`, upper
/// case before lower; `.conflist`, `.conf.bak`, other files and directories are not read.
#[test]
fn plugin_files_are_conf_files_in_name_order() {
    let (_root, dir) = chain_dir();
    for name in [
        "b.conf",
        "9-x.conf",
        "10-x.conf",
        "A.conf",
        ".conf",
        "x.conflist",
        "x.conf.bak",
        "notes.txt",
        "conf",
    ] {
        write(&dir, name, "{}");
    }
    std::fs::create_dir(dir.join("d.conf")).expect("a directory named like a file");
    let names: Vec<String> = plugin_files(&dir)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [".conf", "10-x.conf", "9-x.conf", "A.conf", "b.conf"]
    );
}

/// Missing or empty: no chain at all, not even passthru.
#[test]
fn a_missing_or_empty_directory_is_no_chain() {
    let (root, dir) = chain_dir();
    assert_eq!(load(root.path(), "vendor-cni-chain", "0.3.1"), Ok(None));
    write(&dir, "readme.md", "not a plugin");
    assert_eq!(load(root.path(), "vendor-cni-chain", "0.3.1"), Ok(None));
    assert_eq!(load(root.path(), "other-chain", "0.3.1"), Ok(None));
}

/// passthru, then each file's JSON as written (libcni injects name and cniVersion when it runs them).
#[test]
fn the_chain_is_passthru_then_the_files() {
    let (root, dir) = chain_dir();
    write(
        &dir,
        "20-b.conf",
        r#"{"type": "tuning", "sysctl": {"a": "1"}}"#,
    );
    write(
        &dir,
        "10-a.conf",
        r#"{"cniVersion": "1.0.0", "name": "own", "type": "linkerd-cni"}"#,
    );
    let chain = load(root.path(), "vendor-cni-chain", "0.3.1")
        .unwrap()
        .expect("a chain");
    assert_eq!(chain.files, [dir.join("10-a.conf"), dir.join("20-b.conf")]);
    assert_eq!(
        chain.conflist(),
        json!({"cniVersion": "0.3.1", "name": "vendor-cni-chain", "plugins": [
            {"type": "passthru", "name": "passthru-cni"},
            {"cniVersion": "1.0.0", "name": "own", "type": "linkerd-cni"},
            {"type": "tuning", "sysctl": {"a": "1"}},
        ]})
    );
    let list = Network::new(chain.conflist(), vec![]);
    let as_run = list.plugin_config(&chain.plugins[1], Some(&json!({"cniVersion": "0.3.1"})));
    assert_eq!(as_run["name"], "vendor-cni-chain");
    assert_eq!(as_run["cniVersion"], "0.3.1");
    assert_eq!(as_run["prevResult"], json!({"cniVersion": "0.3.1"}));
}

/// One bad file, or a bad chain name: no chain this ADD, with the reason naming the file.
#[test]
fn a_bad_file_skips_the_chain_with_its_reason() {
    for (body, why) in [
        ("{", "error parsing configuration"),
        ("[]", "not a JSON object"),
        (r#"{"name": "x"}"#, "missing 'type'"),
        (r#"{"type": ""}"#, "missing 'type'"),
        (r#"{"type": 7}"#, "`type` is not a string"),
        (
            r#"{"type": "x", "cniVersion": 1}"#,
            "`cniVersion` is not a string",
        ),
    ] {
        let (root, dir) = chain_dir();
        write(&dir, "10-good.conf", r#"{"type": "tuning"}"#);
        write(&dir, "20-bad.conf", body);
        let err = load(root.path(), "vendor-cni-chain", "0.3.1").unwrap_err();
        assert!(
            err.contains("20-bad.conf") && err.contains(why),
            "{body}: {err}"
        );
    }
    let (root, _dir) = chain_dir();
    let err = load(root.path(), "../etc", "0.3.1").unwrap_err();
    assert!(err.contains("not a valid network name"), "{err}");
}

/// Multus' passthru: an empty result in the config's version on ADD, nothing on DEL, and skel's
/// refusal of a version it does not declare.
#[test]
fn passthru_answers_as_multus_passthru_does() {
    for v in PASSTHRU_VERSIONS {
        let conf = json!({"cniVersion": v, "name": "c", "type": "passthru"});
        assert_eq!(
            passthru("ADD", &conf).unwrap(),
            Some(json!({"cniVersion": v, "dns": {}}))
        );
        assert_eq!(passthru("DEL", &conf).unwrap(), None);
    }
    let old = json!({"cniVersion": "0.2.0", "type": "passthru"});
    let failure = passthru("ADD", &old).unwrap_err();
    assert_eq!(failure.exit_code, Some(1));
    assert_eq!(
        failure.error.as_ref().unwrap()["msg"],
        "incompatible CNI versions"
    );
    let check = json!({"cniVersion": "1.0.0", "type": "passthru"});
    assert!(passthru("CHECK", &check).is_err());
}

/// libcni hands DEL the cached result from 0.4.0 on only.
#[test]
fn del_gets_the_cached_result_from_0_4_0_on() {
    for (v, cached) in [
        ("0.3.0", false),
        ("0.3.1", false),
        ("0.4.0", true),
        ("1.0.0", true),
        ("1.1.0", true),
    ] {
        assert_eq!(del_gets_cached_result(v), cached, "{v}");
    }
}

/// With no `passthru` binary on the path, ADD and DEL of a chain of passthru alone run in-process:
/// ADD gives passthru's result, DEL succeeds; no process is needed for it.
#[test]
fn passthru_alone_runs_in_process() {
    let chain = Chain {
        name: "vendor-cni-chain".into(),
        cni_version: "0.4.0".into(),
        plugins: vec![passthru_entry()],
        files: vec![],
    };
    let rt = Runtime::new(Path::new("/nonexistent/netns"));
    let result = add(&chain, &[PathBuf::from("/nonexistent")], &rt).unwrap();
    assert_eq!(result, json!({"cniVersion": "0.4.0", "dns": {}}));
    del(&chain, &[PathBuf::from("/nonexistent")], &rt, Some(&result)).unwrap();
}
