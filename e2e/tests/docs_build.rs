//! The book builds with the real mdBook, and what it renders has the anchors `check` prints: each row's
//! `docs:` link lands on a heading of the rendered page, not only of the Markdown.

use std::path::PathBuf;
use std::process::Command;

use linkerd_multus_e2e::workspace_root;
use linkerd_multus_operator::check::row::Row;

/// mdBook: `LINKERD_MULTUS_MDBOOK` (e2e/test-all installs it under ~/.cache/linkerd-multus/tools), else
/// `mdbook` on the PATH.
fn mdbook() -> PathBuf {
    std::env::var_os("LINKERD_MULTUS_MDBOOK")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("mdbook"))
}

#[test]
#[ignore = "needs mdbook (`cargo install mdbook`; e2e/test-all installs it): run by e2e/test-all"]
fn the_book_builds_and_has_every_check_anchor() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(mdbook())
        .arg("build")
        .arg(workspace_root().join("docs"))
        .arg("--dest-dir")
        .arg(out_dir.path())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): `cargo install mdbook`, or run e2e/test-all",
                mdbook().display()
            )
        });
    assert!(
        out.status.success(),
        "mdbook build failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // mdBook warns (and renders wrongly) on what it takes for unclosed HTML tags and the like.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<_> = stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert!(
        warnings.is_empty(),
        "mdbook warned:\n{}",
        warnings.join("\n")
    );
    let page = std::fs::read_to_string(out_dir.path().join("troubleshooting/check.html"))
        .expect("mdbook rendered troubleshooting/check.html");
    let missing: Vec<_> = Row::ALL
        .iter()
        .filter(|r| !page.contains(&format!("id=\"{}\"", r.id())))
        .collect();
    assert!(
        missing.is_empty(),
        "rows without an anchor in the rendered page: {missing:?}"
    );
    for rendered in ["index.html", "tasks/uninstall.html", "reference/flags.html"] {
        assert!(
            out_dir.path().join(rendered).exists(),
            "{rendered} not rendered"
        );
    }
}
