//! The book's runnable shell blocks: a fenced `sh` block right after a line `<!-- runnable ... -->` is run
//! as written by a test (Istio's idea of docs whose snippets cannot rot). The marker is an HTML comment,
//! so the rendered page shows the block as any other.

use std::path::Path;
use std::process::{Command, Output};

use crate::chart::helm_binary;
use crate::{unique_name, workspace_root};

/// The marker's opening; the rest of the comment is free text (say who runs it).
pub const MARKER: &str = "<!-- runnable";

/// The runnable blocks of `markdown`, in page order, each the block's text (lines joined by `\n`).
pub fn blocks(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = markdown.lines();
    let mut marked = false;
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed.starts_with(MARKER) {
            marked = true;
            // A marker comment may run over several lines: up to its end.
            if !trimmed.contains("-->") {
                for rest in lines.by_ref() {
                    if rest.contains("-->") {
                        break;
                    }
                }
            }
            continue;
        }
        if trimmed.starts_with("```") {
            let fence_is_sh = matches!(trimmed.trim_start_matches('`'), "sh" | "bash" | "shell");
            let mut block = Vec::new();
            for inner in lines.by_ref() {
                if inner.trim().starts_with("```") {
                    break;
                }
                block.push(inner);
            }
            if marked && fence_is_sh {
                out.push(block.join("\n"));
            }
            marked = false;
            continue;
        }
        // A marker applies to the very next block only, with at most blank lines between.
        if !trimmed.is_empty() {
            marked = false;
        }
    }
    out
}

/// bash (`-euo pipefail`) running `script` in the workspace root against the cluster of `kubeconfig`, with
/// helm and the testbed's kubectl first on PATH and helm's own directories in a fresh temp dir: how
/// the book's lines are run as written.
pub fn command(script: &str, kubeconfig: &Path) -> Command {
    let mut path =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    for tool in [helm_binary(), crate::testbed::kubectl_binary()] {
        if let Some(dir) = tool.parent().filter(|d| !d.as_os_str().is_empty()) {
            path.insert(0, dir.to_path_buf());
        }
    }
    let home = std::env::temp_dir().join(unique_name("book-helm-home"));
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script])
        .current_dir(workspace_root())
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env("KUBECONFIG", kubeconfig)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"));
    cmd
}

/// Runs `block` ([`command`]) after `prelude` (shell functions a test defines, e.g. a `helm` that adds
/// the node's image values).
pub fn run(block: &str, kubeconfig: &Path, prelude: &str) -> Output {
    command(&format!("{prelude}\n{block}"), kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("bash: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_marked_sh_blocks_are_runnable() {
        let page = "intro\n<!-- runnable -->\n```sh\na\nb \\\n  c\n```\n\n```sh\nnot marked\n```\n\
                    <!-- runnable: by a test,\nover two lines -->\n\n```sh\nd\n```\n\
                    <!-- runnable -->\n```yaml\nkey: no\n```\n<!-- runnable -->\ntext between\n```sh\nno\n```\n";
        assert_eq!(blocks(page), ["a\nb \\\n  c", "d"]);
    }
}
