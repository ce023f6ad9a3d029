//! `e2e/lib/mirror.py`, the one path e2e/images builds from: a file is rewritten there only when its
//! content changed, so cargo's file times say what changed since the last build. Pure (python3).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

fn mirror(src: &Path, dest: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lib/mirror.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(src)
        .arg(dest)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Every file of the mirror dated a day back: whatever is rewritten afterwards is newer.
fn age(dir: &Path) {
    let old = SystemTime::now() - Duration::from_secs(86_400);
    for entry in walk(dir) {
        fs::File::options()
            .write(true)
            .open(&entry)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn is_recent(path: &Path) -> bool {
    let modified = fs::metadata(path).unwrap().modified().unwrap();
    SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default()
        < Duration::from_secs(3_600)
}

/// Outside a git checkout (a tarball): build outputs and testbed state are left out; a second
/// mirror of the same files rewrites none; a changed content, a changed executable bit and a
/// removed file are what change.
#[test]
fn only_what_changed_is_rewritten() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let (s, d) = (src.path(), dest.path().join("src"));
    write(&s.join("Cargo.toml"), "[workspace]\n");
    write(&s.join("a/src/lib.rs"), "pub fn a() {}\n");
    write(&s.join("b/src/lib.rs"), "pub fn b() {}\n");
    write(&s.join("b/run.sh"), "#!/bin/sh\n");
    write(&s.join("gone.rs"), "\n");
    write(&s.join("target/debug/big"), "output\n");
    write(&s.join(".testbed-node/state"), "pid\n");

    let first = mirror(s, &d);
    assert!(first.contains("5 files, 5 rewritten, 0 removed"), "{first}");
    assert!(!d.join("target").exists() && !d.join(".testbed-node").exists());
    assert_eq!(
        fs::read_to_string(d.join("a/src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );

    age(&d);
    let again = mirror(s, &d);
    assert!(again.contains("5 files, 0 rewritten, 0 removed"), "{again}");
    assert!(
        walk(&d).iter().all(|f| !is_recent(f)),
        "an unchanged file was rewritten"
    );

    write(&s.join("a/src/lib.rs"), "pub fn a() -> u8 { 1 }\n");
    fs::set_permissions(s.join("b/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_file(s.join("gone.rs")).unwrap();
    let changed = mirror(s, &d);
    assert!(
        changed.contains("4 files, 2 rewritten, 1 removed"),
        "{changed}"
    );
    assert!(is_recent(&d.join("a/src/lib.rs")) && is_recent(&d.join("b/run.sh")));
    assert!(!is_recent(&d.join("b/src/lib.rs")) && !is_recent(&d.join("Cargo.toml")));
    assert!(!d.join("gone.rs").exists());
    let mode = fs::metadata(d.join("b/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the executable bit is mirrored");
    assert_eq!(
        fs::read_to_string(d.join("a/src/lib.rs")).unwrap(),
        "pub fn a() -> u8 { 1 }\n"
    );
}

/// In a git checkout the files are git's: tracked and untracked, never ignored ones.
#[test]
fn a_git_checkout_gives_its_tracked_and_untracked_files() {
    let src = tempfile::tempdir().unwrap();
    let dest = tempfile::tempdir().unwrap();
    let s = src.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(s)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    write(&s.join(".gitignore"), "/ignored/\n");
    write(&s.join("tracked.rs"), "1\n");
    write(&s.join("ignored/out.bin"), "x\n");
    git(&["add", ".gitignore", "tracked.rs"]);
    write(&s.join("new.rs"), "2\n");
    let out = mirror(s, dest.path());
    assert!(out.contains("3 files, 3 rewritten"), "{out}");
    assert!(dest.path().join("new.rs").exists() && dest.path().join("tracked.rs").exists());
    assert!(!dest.path().join("ignored").exists() && !dest.path().join(".git").exists());
}
