//! Rendering the verdicts for people (✓/× lines with hints) and for tools (JSON).

use std::fmt::Write;

use clap::ValueEnum;

use super::Verdict;

/// Items a row shows in the human report. At a cluster's maximums a row can name thousands of
/// nodes or namespaces, which buries the other rows; `-o json` keeps every one.
const SHOWN_ITEMS: usize = 20;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Human,
    Json,
}

pub fn render_human(verdicts: &[Verdict]) -> String {
    let mut out = String::from("linkerd-multus\n--------------\n");
    for v in verdicts {
        let mark = match (v.ok, v.warning) {
            (true, false) => "✓",
            (true, true) => "‼",
            (false, _) => "×",
        };
        let _ = writeln!(out, "{mark} {}: {}", v.check, v.message);
        for item in v.items.iter().take(SHOWN_ITEMS) {
            let _ = writeln!(out, "    * {item}");
        }
        if let Some(more) = v.items.len().checked_sub(SHOWN_ITEMS).filter(|&n| n > 0) {
            let _ = writeln!(out, "    * … and {more} more (`-o json` lists every one)");
        }
        if let Some(hint) = &v.hint {
            let _ = writeln!(out, "    see: {hint}");
        }
        // What the row means and how to fix it, for every row that is not a plain ✓.
        if !v.ok || v.warning {
            let _ = writeln!(out, "    docs: {}", v.check.docs());
        }
    }
    let failed = verdicts.iter().filter(|v| !v.ok).count();
    // Not "N passed, N failed": CI log readers take that shape for a test runner's summary.
    if failed == 0 {
        let _ = writeln!(
            out,
            "\nStatus check results are ✓ ({} checks)",
            verdicts.len()
        );
    } else {
        let _ = writeln!(
            out,
            "\nStatus check results are × ({failed} of {} checks)",
            verdicts.len()
        );
    }
    out
}

pub fn render_json(verdicts: &[Verdict]) -> String {
    // Every row carries its section of the book, ✓ or not: a tool shows it where it wants.
    let checks: Vec<serde_json::Value> = verdicts
        .iter()
        .map(|v| {
            let mut row = serde_json::to_value(v).unwrap_or_default();
            row["docs"] = v.check.docs().into();
            row
        })
        .collect();
    let doc = serde_json::json!({
        "success": verdicts.iter().all(|v| v.ok),
        "checks": checks,
    });
    // A Value of strings and bools always serialises.
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::row::Row;

    fn verdicts() -> Vec<Verdict> {
        vec![
            Verdict {
                check: Row::NadCrd,
                ok: true,
                message: "installed".into(),
                hint: None,
                items: vec![],
                warning: false,
            },
            Verdict {
                check: Row::Pods,
                ok: false,
                message: "1 pod(s) need a restart".into(),
                hint: Some("restart them".into()),
                items: vec!["app/web: not attached".into()],
                warning: false,
            },
        ]
    }

    #[test]
    fn human_output_marks_each_check_and_lists_items_and_hints() {
        let out = render_human(&verdicts());
        assert_eq!(
            out,
            format!(
                "linkerd-multus\n--------------\n✓ nad-crd: installed\n× pods: 1 pod(s) need a restart\n    \
                 * app/web: not attached\n    see: restart them\n    docs: {}\n\nStatus check results are \
                 × (1 of 2 checks)\n",
                Row::Pods.docs()
            )
        );
    }

    #[test]
    fn human_output_shows_the_first_items_and_counts_the_rest() {
        let mut many = verdicts();
        many[1].items = (0..SHOWN_ITEMS + 3).map(|i| format!("ns-{i}")).collect();
        let out = render_human(&many);
        assert!(
            out.contains(&format!("    * ns-{}\n", SHOWN_ITEMS - 1)),
            "{out}"
        );
        assert!(
            !out.contains(&format!("    * ns-{}\n", SHOWN_ITEMS)),
            "{out}"
        );
        assert!(
            out.contains("    * … and 3 more (`-o json` lists every one)\n"),
            "{out}"
        );
        let json: serde_json::Value = serde_json::from_str(&render_json(&many)).expect("json");
        assert_eq!(
            json["checks"][1]["items"].as_array().map(Vec::len),
            Some(SHOWN_ITEMS + 3)
        );
        many[1].items.truncate(SHOWN_ITEMS);
        assert!(!render_human(&many).contains("more (`-o json`"));
    }

    #[test]
    fn json_output_is_machine_readable() {
        let doc: serde_json::Value = serde_json::from_str(&render_json(&verdicts())).expect("json");
        assert_eq!(doc["success"], false);
        assert_eq!(doc["checks"][0]["check"], "nad-crd");
        assert_eq!(doc["checks"][0].get("hint"), None);
        assert_eq!(doc["checks"][1]["items"][0], "app/web: not attached");
        assert_eq!(doc["checks"][1]["docs"], Row::Pods.docs());
    }
}
