//! Every row `check` prints, by its stable id. The id is the row's name in the human output, its `check`
//! key in `-o json`, and the anchor of its section on the book's check page
//! (docs/src/troubleshooting/check.md), which says what the row means, how to confirm it and how to fix
//! it. A row cannot be added without an id here, and `every_row_has_a_section_in_the_book` fails until
//! the page has it.

use std::fmt;

/// The book's check page as published; a row's section is `#<id>`.
pub const BOOK_PAGE: &str = concat!(
    "https://github.com/linkerd-multus/linkerd-multus/blob/main/",
    "docs/src/troubleshooting/check.md"
);

macro_rules! rows {
    ($($variant:ident => $id:literal,)*) => {
        /// One row of `check`'s output.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Row {
            $($variant,)*
        }

        impl Row {
            /// Every row, in the order the book lists them.
            pub const ALL: &'static [Row] = &[$(Row::$variant,)*];

            /// The stable id: never renamed, as scripts read `-o json` by it and links point to it.
            pub const fn id(self) -> &'static str {
                match self {
                    $(Row::$variant => $id,)*
                }
            }
        }
    };
}

rows! {
    Attach => "attach",
    NadCrd => "nad-crd",
    CniConfigmap => "cni-configmap",
    Nads => "nads",
    SharedNad => "shared-nad",
    ForeignNads => "foreign-nads",
    AuxChain => "aux-chain",
    NodeMultus => "node-multus",
    Webhook => "webhook",
    WebhookOrder => "webhook-order",
    Admission => "admission",
    AdmissionAgreement => "admission-agreement",
    Pods => "pods",
    ProxyUids => "proxy-uids",
    Sandboxes => "sandboxes",
    Repair => "repair",
}

impl Row {
    /// The row's section in the book.
    pub fn docs(self) -> String {
        format!("{BOOK_PAGE}#{}", self.id())
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl serde::Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// Tests and callers find a row by its id as printed.
impl PartialEq<&str> for Row {
    fn eq(&self, other: &&str) -> bool {
        self.id() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The headings of the book's check page, as mdBook and GitHub make their anchors (the ids are
    /// already lower case with hyphens, so the heading is the anchor).
    fn book_sections() -> BTreeSet<String> {
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/src/troubleshooting/check.md");
        std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("read {}: {e}", page.display()))
            .lines()
            .filter_map(|l| l.strip_prefix("## "))
            .map(|h| h.trim().trim_matches('`').to_string())
            .collect()
    }

    #[test]
    fn every_row_has_a_section_in_the_book() {
        let sections = book_sections();
        let missing: Vec<_> = Row::ALL
            .iter()
            .filter(|r| !sections.contains(r.id()))
            .collect();
        assert!(
            missing.is_empty(),
            "rows with no `## <id>` section on docs/src/troubleshooting/check.md: {missing:?}"
        );
        // And no section for a row that no longer exists (a stale page).
        let ids: BTreeSet<_> = Row::ALL.iter().map(|r| r.id().to_string()).collect();
        let stale: Vec<_> = sections.difference(&ids).collect();
        assert!(stale.is_empty(), "sections of no row: {stale:?}");
    }

    #[test]
    fn ids_are_unique_and_usable_as_anchors() {
        let ids: BTreeSet<_> = Row::ALL.iter().map(|r| r.id()).collect();
        assert_eq!(ids.len(), Row::ALL.len());
        for id in ids {
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{id}"
            );
        }
    }

    #[test]
    fn a_row_links_to_its_section() {
        assert_eq!(Row::ProxyUids.docs(), format!("{BOOK_PAGE}#proxy-uids"));
        assert_eq!(serde_json::to_value(Row::NadCrd).expect("json"), "nad-crd");
    }
}
