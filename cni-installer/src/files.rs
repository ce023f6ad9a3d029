//! The few file operations the installer needs, done so a runtime never sees a half-written file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of the installed plugin binary.
pub const BINARY_MODE: u32 = 0o755;
/// Mode of the kubeconfig: it holds a token.
pub const KUBECONFIG_MODE: u32 = 0o600;
/// Mode of a network config we create when there is no original to copy it from.
pub const CONFIG_MODE: u32 = 0o644;
/// Mode of a directory we create (the auxiliary chain's).
pub const DIR_MODE: u32 = 0o755;

/// Writes `bytes` to `path` atomically: a temp file in the same directory (so the rename stays on one
/// file system), fsync, rename over `path`, fsync the directory. The temp name ends in `.tmp`, an
/// extension no runtime reads as a network config.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = parent(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.linkerd-cni-install.tmp",
        std::process::id()
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have narrowed `mode`; the binary must end up executable whatever it is.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The file's bytes, or `None` when it does not exist.
pub fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Permission bits of an existing file.
pub fn mode_of(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// What identifies a file's content without reading it: inode, size, modification time. Any write
/// (ours rename a new inode into place) changes it.
pub type Identity = (u64, u64, i64, i64);

pub fn identity(path: &Path) -> Option<Identity> {
    let m = fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// Removes a file; a missing one is fine.
pub fn remove_optional(path: &Path) -> io::Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Creates the directory `path` with `mode` unless it is one already (its parent must exist: a
/// missing parent means a wrong path, not one to invent). True when it was created.
pub fn ensure_dir(path: &Path, mode: u32) -> io::Result<bool> {
    if fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Ok(false);
    }
    match fs::DirBuilder::new().mode(mode).create(path) {
        Ok(()) => {}
        // Created meanwhile by someone else: theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => return Ok(false),
        Err(e) => return Err(e),
    }
    // The umask may have narrowed `mode`.
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    Ok(true)
}

/// Names of the regular files in `dir` (not recursive).
pub fn file_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
    }
    Ok(names)
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_sets_mode_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        atomic_write(&path, b"one", KUBECONFIG_MODE).expect("write");
        atomic_write(&path, b"two", BINARY_MODE).expect("overwrite");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        assert_eq!(mode_of(&path), Some(BINARY_MODE));
        assert_eq!(file_names(dir.path()).expect("list"), vec!["f".to_string()]);
    }

    #[test]
    fn ensure_dir_creates_once_and_never_parents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("chain");
        assert!(ensure_dir(&sub, DIR_MODE).expect("create"));
        assert_eq!(mode_of(&sub), Some(DIR_MODE));
        assert!(!ensure_dir(&sub, DIR_MODE).expect("exists"));
        let orphan = dir.path().join("missing/chain");
        assert_eq!(
            ensure_dir(&orphan, DIR_MODE).expect_err("no parent").kind(),
            io::ErrorKind::NotFound
        );
        assert!(!dir.path().join("missing").exists());
        fs::write(dir.path().join("file"), "x").expect("write");
        assert!(ensure_dir(&dir.path().join("file"), DIR_MODE).is_err());
    }
}
