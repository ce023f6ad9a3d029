//! The book (docs/src) as tests read it: its pages' headings as the anchors mdBook and GitHub make of
//! them, which links and alerts' runbook URLs must name.

use std::collections::{BTreeMap, BTreeSet};

/// The anchor of a heading: lower case, spaces as hyphens, other punctuation (backquotes included)
/// dropped.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of `markdown` outside fenced code blocks (a `#` there is no heading, a link no link).
pub fn prose(markdown: &str) -> Vec<&str> {
    let mut fenced = false;
    markdown
        .lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// Every heading's anchor of a page; a repeated heading gets `-1`, `-2`, ... as mdBook numbers them.
pub fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for line in prose(markdown) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let base = anchor(heading.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_default();
        all.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_as_mdbook_makes_them() {
        let page =
            "# Title\n## Attach modes: NADs or Multus' auxiliary chain\n## `check`, row by row\n\
                    ```sh\n# not a heading\n```\n## Two\n## Two\n";
        let want: BTreeSet<String> = [
            "title",
            "attach-modes-nads-or-multus-auxiliary-chain",
            "check-row-by-row",
            "two",
            "two-1",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(anchors(page), want);
    }
}
