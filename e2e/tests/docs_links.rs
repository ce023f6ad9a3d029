//! The book (docs/src) and the README link only to what exists: every relative link names a file of the
//! repository, every `#anchor` a heading of the page it names (as mdBook and GitHub make anchors), and
//! every page of the book is in its SUMMARY (mdBook renders nothing else). Pure: reads files only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use linkerd_multus_e2e::book::{anchors, prose};
use linkerd_multus_e2e::workspace_root;

/// The targets of the inline links `[text](target)` of a line, outside inline code.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Inline code spans dropped first: `[a](b)` there is an example, not a link.
    let plain: String = line
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ");
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        let tail = &rest[at + 2..];
        let Some(end) = tail.find(')') else { break };
        out.push(tail[..end].trim().to_string());
        rest = &tail[end..];
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// Every broken link of `file`: (link, why).
fn broken_links(file: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(file).expect("read");
    let mut broken = Vec::new();
    for line in prose(&text) {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.to_path_buf()
            } else {
                file.parent().expect("a directory").join(path)
            };
            if !resolved.exists() {
                broken.push((target.clone(), "no such file".to_string()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if resolved.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let headings = anchors(&std::fs::read_to_string(&resolved).expect("read"));
            if !headings.contains(fragment) {
                broken.push((target.clone(), "no such heading".to_string()));
            }
        }
    }
    broken
}

fn book_pages() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    markdown_files(&workspace_root().join("docs/src"), &mut pages);
    pages.sort();
    pages
}

#[test]
fn every_link_of_the_book_and_the_readme_resolves() {
    let root = workspace_root();
    let mut files = book_pages();
    files.push(root.join("README.md"));
    assert!(files.len() > 20, "{files:?}");
    let mut report = Vec::new();
    for file in &files {
        for (link, why) in broken_links(file) {
            report.push(format!(
                "{}: ({link}): {why}",
                file.strip_prefix(&root).unwrap_or(file).display()
            ));
        }
    }
    assert!(report.is_empty(), "broken links:\n{}", report.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let src = workspace_root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed: BTreeSet<PathBuf> = prose(&summary)
        .into_iter()
        .flat_map(link_targets)
        .map(|t| src.join(t))
        .collect();
    let unlisted: Vec<_> = book_pages()
        .into_iter()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(p))
        .collect();
    assert!(unlisted.is_empty(), "pages not in SUMMARY.md: {unlisted:?}");
}

/// The checker itself: a link to a missing heading, a missing file, and one inside code.
#[test]
fn the_checker_finds_broken_links_and_ignores_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("b.md"),
        "# Title\n## Two words `x`\n## Two words x\n",
    )
    .expect("write");
    let a = dir.path().join("a.md");
    std::fs::write(
        &a,
        "[ok](b.md#two-words-x) [dup](b.md#two-words-x-1) [bad](b.md#nope) [gone](c.md)\n\
         `[code](c.md)`\n```\n[fenced](c.md)\n```\n[self](#here)\n# Here\n",
    )
    .expect("write");
    let broken: Vec<String> = broken_links(&a).into_iter().map(|(l, _)| l).collect();
    assert_eq!(broken, ["b.md#nope", "c.md"]);
}
