//! The project's images: what the Dockerfile's targets say, what `e2e/images` declares, and what a built
//! OCI archive holds, so tests can check that the images the node runs are the Dockerfile's and fit the
//! chart. Parsing is pure; [`OciImage::read_archive`] is the one I/O shell (it runs `tar`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// A Dockerfile target as the Dockerfile writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// The `FROM` image.
    pub base: String,
    /// The `ENTRYPOINT`, in exec form.
    pub entrypoint: Vec<String>,
    /// `USER`, `None` when unset (root).
    pub user: Option<String>,
    /// `EXPOSE`d ports, sorted.
    pub ports: Vec<u16>,
    /// The files copied into `/usr/local/bin`, by file name, sorted.
    pub binaries: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
}

fn err(line: usize, what: impl Into<String>) -> ParseError {
    ParseError::Line {
        line: line + 1,
        what: what.into(),
    }
}

fn parse_ports(line: usize, words: &[&str]) -> Result<Vec<u16>, ParseError> {
    words
        .iter()
        .map(|p| {
            p.trim_end_matches("/tcp")
                .parse::<u16>()
                .map_err(|_| err(line, format!("bad port `{p}`")))
        })
        .collect()
}

/// The stages of a Dockerfile, keyed by their `AS` name (`stage-<line>` when unnamed), with what each
/// sets itself.
pub fn dockerfile_targets(text: &str) -> Result<BTreeMap<String, ImageSpec>, ParseError> {
    let mut targets = BTreeMap::new();
    let mut current: Option<(String, ImageSpec)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let mut words = line.split_whitespace();
        let Some(instruction) = words.next() else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                if let Some((name, spec)) = current.take() {
                    targets.insert(name, spec);
                }
                let (base, name) = match rest.as_slice() {
                    [base, as_, name] if as_.eq_ignore_ascii_case("as") => {
                        (base.to_string(), name.to_string())
                    }
                    [base] => (base.to_string(), format!("stage-{i}")),
                    _ => return Err(err(i, format!("cannot read `{line}`"))),
                };
                current = Some((
                    name,
                    ImageSpec {
                        base,
                        entrypoint: vec![],
                        user: None,
                        ports: vec![],
                        binaries: vec![],
                    },
                ));
            }
            other => {
                let Some((_, spec)) = current.as_mut() else {
                    continue;
                };
                match other {
                    "ENTRYPOINT" => {
                        let json = line[instruction.len()..].trim();
                        spec.entrypoint = serde_json::from_str(json).map_err(|e| {
                            err(i, format!("ENTRYPOINT is not an exec-form JSON array: {e}"))
                        })?;
                    }
                    "USER" => spec.user = rest.first().map(|u| u.to_string()),
                    "EXPOSE" => spec.ports.extend(parse_ports(i, &rest)?),
                    "COPY" => {
                        let paths: Vec<&str> = rest
                            .iter()
                            .filter(|w| !w.starts_with("--"))
                            .copied()
                            .collect();
                        if let [sources @ .., "/usr/local/bin/"] = paths.as_slice() {
                            spec.binaries.extend(sources.iter().map(|s| basename(s)));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some((name, spec)) = current.take() {
        targets.insert(name, spec);
    }
    for spec in targets.values_mut() {
        spec.ports.sort_unstable();
        spec.binaries.sort();
    }
    Ok(targets)
}

fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// One image `e2e/images` declares: a `shipped KEY TARGET NAME BINARIES` line (built from the
/// Dockerfile's TARGET) or an `image KEY NAME USER PORTS BINARIES` line (test-only, made there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    pub key: String,
    /// The Dockerfile target it is built from; `None` for the test-only images.
    pub dockerfile_target: Option<String>,
    pub name: String,
    /// The binaries it holds (for a shipped image: what its build context gets), sorted.
    pub binaries: Vec<String>,
}

/// The images `e2e/images` declares (its lines starting with `shipped ` or `image `).
pub fn local_images(script: &str) -> Result<Vec<LocalImage>, ParseError> {
    let list = |s: &str| -> Vec<String> {
        let mut v: Vec<String> = if s == "-" {
            vec![]
        } else {
            s.split(',').map(str::to_string).collect()
        };
        v.sort();
        v
    };
    let mut images = vec![];
    for (i, line) in script.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let image = match words.as_slice() {
            ["shipped", key, target, name, binaries] => LocalImage {
                key: key.to_string(),
                dockerfile_target: Some(target.to_string()),
                name: name.to_string(),
                binaries: list(binaries),
            },
            ["shipped", ..] => {
                return Err(err(
                    i,
                    format!("expected 4 words after `shipped`: `{line}`"),
                ))
            }
            ["image", key, name, _user, ports, binaries] => {
                let port_words: Vec<&str> = ports.split(',').filter(|p| *p != "-").collect();
                parse_ports(i, &port_words)?;
                LocalImage {
                    key: key.to_string(),
                    dockerfile_target: None,
                    name: name.to_string(),
                    binaries: list(binaries),
                }
            }
            ["image", ..] => {
                return Err(err(i, format!("expected 5 words after `image`: `{line}`")))
            }
            _ => continue,
        };
        images.push(image);
    }
    Ok(images)
}

/// What a built image runs, from its OCI image config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `User`, `None` when empty (root).
    pub user: Option<String>,
    /// `ExposedPorts` (`"8081/tcp"`), sorted.
    pub exposed_ports: Vec<u16>,
}

impl ImageConfig {
    /// Reads an OCI image config (`{"config": {"User", "ExposedPorts", "Entrypoint", "Cmd"}}`).
    pub fn from_json(config: &Value) -> Result<Self, OciError> {
        let c = &config["config"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut exposed_ports = Vec::new();
        for key in c["ExposedPorts"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let port = key.strip_suffix("/tcp").unwrap_or(key);
            exposed_ports.push(
                port.parse::<u16>()
                    .map_err(|_| OciError::Invalid(format!("exposed port `{key}`")))?,
            );
        }
        exposed_ports.sort_unstable();
        Ok(Self {
            entrypoint: strings(&c["Entrypoint"]),
            cmd: strings(&c["Cmd"]),
            user: c["User"]
                .as_str()
                .filter(|u| !u.is_empty())
                .map(str::to_string),
            exposed_ports,
        })
    }

    /// The uid of `User` when it is numeric (`65532` or `65532:65532`); `Some(0)` when unset (root);
    /// `None` for a user name, which the kubelet cannot check against `runAsNonRoot`.
    pub fn uid(&self) -> Option<u32> {
        match &self.user {
            None => Some(0),
            Some(u) => u.split(':').next().and_then(|uid| uid.parse().ok()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("cannot read {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("tar {args}: {stderr}")]
    Tar { args: String, stderr: String },
}

/// Where an OCI layout keeps the blob a descriptor names (`{"digest": "sha256:<hex>"}` →
/// `blobs/sha256/<hex>`); a digest that could leave the layout is refused.
pub fn blob_path(descriptor: &Value) -> Result<String, OciError> {
    let digest = descriptor["digest"]
        .as_str()
        .ok_or_else(|| OciError::Invalid(format!("descriptor without a digest: {descriptor}")))?;
    let (algorithm, hex) = digest
        .split_once(':')
        .filter(|(a, h)| !a.is_empty() && !h.is_empty() && !h.contains('/') && !a.contains('/'))
        .ok_or_else(|| OciError::Invalid(format!("bad digest `{digest}`")))?;
    Ok(format!("blobs/{algorithm}/{hex}"))
}

/// An image read from an OCI archive (`buildah push IMG oci-archive:FILE`): its config and the files
/// its layers hold (path without the leading `/` → `tar -tv` mode string).
#[derive(Debug, Clone)]
pub struct OciImage {
    pub config: ImageConfig,
    pub files: BTreeMap<String, String>,
}

impl OciImage {
    /// Unpacks the archive into a temporary directory and reads index → manifest → config and layers.
    pub fn read_archive(archive: &Path) -> Result<Self, OciError> {
        let dir = tempfile::tempdir().map_err(|source| OciError::Io {
            path: "a temporary directory".into(),
            source,
        })?;
        let archive_arg = archive.to_string_lossy().into_owned();
        let dir_arg = dir.path().to_string_lossy().into_owned();
        tar(&["-xf", &archive_arg, "-C", &dir_arg])?;
        let json = |relative: &str| -> Result<Value, OciError> {
            let path = dir.path().join(relative);
            let text = std::fs::read_to_string(&path).map_err(|source| OciError::Io {
                path: path.display().to_string(),
                source,
            })?;
            serde_json::from_str(&text)
                .map_err(|e| OciError::Invalid(format!("{relative} is not JSON: {e}")))
        };
        let index = json("index.json")?;
        let manifest = json(&blob_path(&index["manifests"][0])?)?;
        let config = ImageConfig::from_json(&json(&blob_path(&manifest["config"])?)?)?;
        let mut files = BTreeMap::new();
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            let blob = dir.path().join(blob_path(layer)?);
            let listing = tar(&["-tvf", &blob.to_string_lossy()])?;
            files.extend(parse_listing(&listing));
        }
        Ok(Self { config, files })
    }

    /// Whether the layers hold `path` (absolute) as an executable regular file.
    pub fn has_executable(&self, path: &str) -> bool {
        self.files
            .get(path.trim_start_matches('/'))
            .is_some_and(|mode| mode.starts_with('-') && mode.chars().nth(3) == Some('x'))
    }

    /// The regular files the layers hold (absolute paths).
    pub fn regular_files(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, mode)| mode.starts_with('-'))
            .map(|(path, _)| format!("/{path}"))
            .collect()
    }
}

fn tar(args: &[&str]) -> Result<String, OciError> {
    let out = Command::new("tar")
        .args(args)
        .output()
        .map_err(|source| OciError::Io {
            path: "tar".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(OciError::Tar {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `tar -tv` lines (`-rwxr-xr-x 0/0 123 2026-01-01 00:00 usr/local/bin/x`) as path → mode.
fn parse_listing(listing: &str) -> BTreeMap<String, String> {
    listing
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (mode, path) = (fields.first()?, fields.get(5..)?.join(" "));
            let path = path.trim_start_matches("./").trim_end_matches('/');
            (!path.is_empty()).then(|| (path.to_string(), mode.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = r#"
ARG BIN_DIR=target/release
FROM scratch AS cni
ARG BIN_DIR
COPY ${BIN_DIR}/b ${BIN_DIR}/a-install /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/a-install"]
FROM scratch AS operator
COPY --chmod=755 ${BIN_DIR}/op /usr/local/bin/
USER 65532:65532
EXPOSE 9443 8081
ENTRYPOINT ["/usr/local/bin/op"]
"#;

    #[test]
    fn reads_each_named_stage() {
        let t = dockerfile_targets(DOCKERFILE).unwrap();
        assert_eq!(
            t["operator"],
            ImageSpec {
                base: "scratch".into(),
                entrypoint: vec!["/usr/local/bin/op".into()],
                user: Some("65532:65532".into()),
                ports: vec![8081, 9443],
                binaries: vec!["op".into()],
            }
        );
        assert_eq!(t["cni"].user, None);
        assert_eq!(t["cni"].binaries, vec!["a-install", "b"]);
        assert_eq!(t.len(), 2, "the ARG before FROM is no stage: {t:?}");
    }

    #[test]
    fn a_shell_form_entrypoint_is_an_error() {
        let e = dockerfile_targets("FROM x AS y\nENTRYPOINT /bin/op\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
    }

    #[test]
    fn reads_the_declarations_and_skips_the_functions() {
        let script = "shipped() { KEYS+=(\"$1\"); }\n\
                      shipped cni cni linkerd-cni-install linkerd-cni-install,linkerd-cni\n\
                      image test test-workload - 8080,4143 tw\n\
                      image pause pause - - -\n";
        let images = local_images(script).unwrap();
        assert_eq!(images.len(), 3);
        assert_eq!(images[0].dockerfile_target.as_deref(), Some("cni"));
        assert_eq!(
            images[0].binaries,
            vec!["linkerd-cni", "linkerd-cni-install"]
        );
        assert_eq!(images[1].dockerfile_target, None);
        assert_eq!(images[1].name, "test-workload");
        assert!(images[2].binaries.is_empty());
    }

    #[test]
    fn a_short_or_bad_declaration_is_an_error() {
        assert!(local_images("shipped operator operator op\n").is_err());
        assert!(local_images("image test tw - 80\n").is_err());
        let e = local_images("image test tw - 80,http tw\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: bad port `http`");
    }

    #[test]
    fn reads_an_image_config() {
        let config = serde_json::json!({"config": {
            "User": "65532:65532",
            "ExposedPorts": {"9443/tcp": {}, "8081/tcp": {}},
            "Entrypoint": ["/usr/local/bin/op"],
        }});
        let c = ImageConfig::from_json(&config).unwrap();
        assert_eq!(c.entrypoint, vec!["/usr/local/bin/op"]);
        assert_eq!(c.exposed_ports, vec![8081, 9443]);
        assert_eq!(c.uid(), Some(65532));
        assert!(c.cmd.is_empty());
        let root = ImageConfig::from_json(&serde_json::json!({"config": {"User": ""}})).unwrap();
        assert_eq!((root.user.clone(), root.uid()), (None, Some(0)));
        let named = ImageConfig::from_json(&serde_json::json!({"config": {"User": "nonroot"}}));
        assert_eq!(named.unwrap().uid(), None);
        let bad =
            ImageConfig::from_json(&serde_json::json!({"config": {"ExposedPorts": {"x/tcp": {}}}}));
        assert!(bad.is_err());
    }

    #[test]
    fn blob_paths_come_from_digests_only() {
        let ok = serde_json::json!({"digest": "sha256:ab12"});
        assert_eq!(blob_path(&ok).unwrap(), "blobs/sha256/ab12");
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"digest": "ab12"}),
            serde_json::json!({"digest": "sha256:../../etc/passwd"}),
        ] {
            assert!(blob_path(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_a_tar_listing() {
        let files = parse_listing(
            "drwxr-xr-x 0/0 0 2026-11-26 04:03 usr/local/bin/\n\
             -rwxr-xr-x 0/0 3 2026-11-26 04:03 usr/local/bin/op\n\
             -rw-r--r-- 0/0 3 2026-11-26 04:03 etc/a b\n",
        );
        let image = OciImage {
            config: ImageConfig::from_json(&serde_json::json!({})).unwrap(),
            files,
        };
        assert!(image.has_executable("/usr/local/bin/op"));
        assert!(!image.has_executable("/usr/local/bin"));
        assert!(!image.has_executable("/etc/a b"));
        assert_eq!(image.regular_files(), vec!["/etc/a b", "/usr/local/bin/op"]);
    }
}
