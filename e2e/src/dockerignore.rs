//! `.dockerignore` as Docker and buildah read it, enough to tell which paths of this checkout enter the
//! build context: `#` comments, `!` exceptions, the last matching pattern decides, a pattern that matches a
//! directory excludes what is under it, `*` and `?` within a path segment, `**` across segments. Character
//! classes (`[...]`) are not supported and are refused. Pure.

/// The patterns of a `.dockerignore`.
#[derive(Debug, Clone)]
pub struct DockerIgnore {
    /// (segments of the pattern, whether it is a `!` exception), in file order.
    patterns: Vec<(Vec<String>, bool)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: `{pattern}`: character classes are not supported")]
pub struct UnsupportedPattern {
    pub line: usize,
    pub pattern: String,
}

impl DockerIgnore {
    pub fn parse(text: &str) -> Result<Self, UnsupportedPattern> {
        let mut patterns = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (exception, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            if pattern.contains('[') {
                return Err(UnsupportedPattern {
                    line: i + 1,
                    pattern: line.to_string(),
                });
            }
            patterns.push((segments(pattern), exception));
        }
        Ok(Self { patterns })
    }

    /// Whether `path` (relative to the context, `/`-separated) stays out of the build context.
    pub fn excludes(&self, path: &str) -> bool {
        let path = segments(path);
        let mut excluded = false;
        for (pattern, exception) in &self.patterns {
            let hit = (1..=path.len()).any(|n| matches(pattern, &path[..n]));
            if hit {
                excluded = !exception;
            }
        }
        excluded
    }
}

/// A path's segments with `.`, empty segments and a leading `/` dropped (Docker cleans patterns so).
fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .map(str::to_string)
        .collect()
}

fn matches(pattern: &[String], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| matches(rest, &path[skip..]))
        }
        Some((first, rest)) => path
            .split_first()
            .is_some_and(|(segment, tail)| glob(first, segment) && matches(rest, tail)),
    }
}

/// `*` (any run of characters) and `?` (one character) within one segment.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A path a `.gitignore` pattern stands for, to ask the `.dockerignore` about: `*` becomes `x`; an
/// unanchored pattern without a `/` (it applies at every depth) also gets a nested variant.
pub fn gitignore_samples(pattern: &str) -> Vec<String> {
    let anchored = pattern.starts_with('/') || pattern.trim_end_matches('/').contains('/');
    let path = pattern.trim_matches('/').replace('*', "x");
    if anchored {
        vec![path]
    } else {
        vec![path.clone(), format!("some/dir/{path}")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ignore(text: &str) -> DockerIgnore {
        DockerIgnore::parse(text).unwrap()
    }

    #[test]
    fn globs_stay_within_a_segment() {
        assert!(glob("target-*", "target-x"));
        assert!(glob("*.profraw", "a.profraw"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(!glob("target-*", "target"));
        let i = ignore("*.profraw\n");
        assert!(i.excludes("a.profraw"));
        assert!(!i.excludes("dir/a.profraw"), "`*` does not cross `/`");
        assert!(ignore("**/*.profraw\n").excludes("dir/sub/a.profraw"));
    }

    #[test]
    fn a_directory_pattern_excludes_its_contents() {
        let i = ignore("# state\n/.testbed/\ntarget\n");
        assert!(i.excludes(".testbed"));
        assert!(i.excludes(".testbed/kubeconfig"));
        assert!(i.excludes("target/debug/deps/x"));
        assert!(!i.excludes("src/main.rs"));
        assert!(!i.excludes(".testbed-node"));
    }

    #[test]
    fn the_last_match_decides_and_exceptions_reinclude() {
        let i = ignore("*\n!target/release/op\n");
        assert!(i.excludes("Cargo.toml"));
        assert!(i.excludes("target"));
        assert!(i.excludes("target/release/other"));
        assert!(!i.excludes("target/release/op"));
        let j = ignore("!keep\n*\n");
        assert!(
            j.excludes("keep"),
            "a later pattern overrides the exception"
        );
    }

    #[test]
    fn character_classes_are_refused() {
        let e = DockerIgnore::parse("a\n[ab]c\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: `[ab]c`: character classes are not supported"
        );
    }

    #[test]
    fn gitignore_patterns_become_sample_paths() {
        assert_eq!(gitignore_samples("/target-*"), vec!["target-x"]);
        assert_eq!(gitignore_samples("/.tools/"), vec![".tools"]);
        assert_eq!(gitignore_samples("/fuzz/target"), vec!["fuzz/target"]);
        assert_eq!(
            gitignore_samples("*.profraw"),
            vec!["x.profraw", "some/dir/x.profraw"]
        );
    }
}
