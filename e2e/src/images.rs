//! What an image runs: read from the Dockerfile's targets and from `e2e/images`' declarations, so a test
//! can check the two never drift apart. Pure parsing, no I/O.

use std::collections::BTreeMap;

/// The runtime contract of an image: what the kubelet and the chart rely on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// The `ENTRYPOINT`, in exec form.
    pub entrypoint: Vec<String>,
    /// `USER`, `None` when unset (root).
    pub user: Option<String>,
    /// `EXPOSE`d ports, sorted.
    pub ports: Vec<u16>,
    /// The files copied into `/usr/local/bin`, sorted.
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

/// The stages of a Dockerfile that are named with `AS`, keyed by name, with what each sets itself
/// (a stage's `FROM` image may set more; the project's stages start from images that set none of these).
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
                let name = match rest.as_slice() {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                    [_] => format!("stage-{i}"),
                    _ => return Err(err(i, format!("cannot read `{line}`"))),
                };
                current = Some((
                    name,
                    ImageSpec {
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

/// One `image KEY TARGET NAME USER PORTS BINARIES` line of `e2e/images`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    pub key: String,
    /// The Dockerfile target it stands for; `None` for images only the testbed has (`-`).
    pub dockerfile_target: Option<String>,
    pub name: String,
    pub spec: ImageSpec,
}

/// The images `e2e/images` declares (its lines starting with `image `).
pub fn local_images(script: &str) -> Result<Vec<LocalImage>, ParseError> {
    let dash = |s: &str| (s != "-").then(|| s.to_string());
    let list = |s: &str| -> Vec<String> {
        if s == "-" {
            vec![]
        } else {
            s.split(',').map(str::to_string).collect()
        }
    };
    let mut images = vec![];
    for (i, line) in script.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() != Some(&"image") {
            continue;
        }
        let [_, key, target, name, user, ports, binaries] = words.as_slice() else {
            return Err(err(i, format!("expected 6 words after `image`: `{line}`")));
        };
        let port_words: Vec<&str> = ports.split(',').filter(|p| *p != "-").collect();
        let binaries = list(binaries);
        let entrypoint = match binaries.first() {
            Some(first) => vec![format!("/usr/local/bin/{first}")],
            None => vec![],
        };
        let mut spec = ImageSpec {
            entrypoint,
            user: dash(user),
            ports: parse_ports(i, &port_words)?,
            binaries,
        };
        spec.ports.sort_unstable();
        spec.binaries.sort();
        images.push(LocalImage {
            key: key.to_string(),
            dockerfile_target: dash(target),
            name: name.to_string(),
            spec,
        });
    }
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = r#"
FROM rust:1-alpine AS build
RUN cargo build
FROM distroless:latest AS cni
COPY --from=build /out/b /out/a-install /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/a-install"]
FROM distroless:nonroot AS operator
COPY --from=build /out/op /usr/local/bin/
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
                entrypoint: vec!["/usr/local/bin/op".into()],
                user: Some("65532:65532".into()),
                ports: vec![8081, 9443],
                binaries: vec!["op".into()],
            }
        );
        assert_eq!(t["cni"].user, None);
        assert_eq!(t["cni"].binaries, vec!["a-install", "b"]);
        assert_eq!(t["build"].entrypoint, Vec::<String>::new());
    }

    #[test]
    fn a_shell_form_entrypoint_is_an_error() {
        let e = dockerfile_targets("FROM x AS y\nENTRYPOINT /bin/op\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2:"), "{e}");
    }

    #[test]
    fn reads_the_declarations_and_skips_the_function() {
        let script = "image() { KEYS+=(\"$1\"); }\n\
                      image operator operator op 65532:65532 9443,8081 op\n\
                      image pause - pause - - -\n";
        let images = local_images(script).unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].dockerfile_target.as_deref(), Some("operator"));
        assert_eq!(images[0].spec.ports, vec![8081, 9443]);
        assert_eq!(images[0].spec.entrypoint, vec!["/usr/local/bin/op"]);
        assert_eq!(images[1].dockerfile_target, None);
        assert_eq!(images[1].spec.user, None);
    }

    #[test]
    fn a_short_declaration_is_an_error() {
        assert!(local_images("image operator operator op\n").is_err());
    }
}
