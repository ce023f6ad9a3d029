//! The book's reference pages that are generated, never hand-kept: every flag (from the binaries' own clap
//! definitions), every CRD field (from the CRDs this project renders), every metric (from what the
//! operator registers). Each test renders its page and fails, naming the command that rewrites it, when
//! the file differs: `UPDATE_GOLDEN=1 cargo test -p linkerd-multus-e2e --test docs_reference`.
//! Pure: no cluster, no binary run.

use std::fmt::Write;

use clap::CommandFactory;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;
use linkerd_multus_e2e::workspace_root;

const REWRITE: &str = "UPDATE_GOLDEN=1 cargo test -p linkerd-multus-e2e --test docs_reference";

fn header(title: &str, source: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated from {source} by e2e/tests/docs_reference.rs; do not edit by hand: \
         `{REWRITE}` rewrites it. -->\n\n"
    )
}

/// A table cell: one line, no `|`, and `<name>` outside code spans written as text (Markdown would take
/// it for an HTML tag).
fn cell(text: &str) -> String {
    prose_text(&text.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

/// `<` and `>` outside code spans escaped.
fn prose_text(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace('<', "&lt;").replace('>', "&gt;")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// The page at `relative` (under docs/src/reference) holds `want`, or is rewritten to it.
fn assert_page(relative: &str, want: &str) {
    let path = workspace_root().join("docs/src/reference").join(relative);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, want).expect("write the page");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let diff = similar::TextDiff::from_lines(have.as_str(), want)
            .unified_diff()
            .header("in the book", "generated")
            .to_string();
        panic!(
            "{} is not what the definitions give; run `{REWRITE}`:\n{diff}",
            path.display()
        );
    }
}

// === flags ===

fn flag_rows(out: &mut String, cmd: &clap::Command) {
    out.push_str("| Flag | Environment | Default | Description |\n|---|---|---|---|\n");
    for arg in cmd.get_arguments() {
        if arg.is_hide_set() || arg.get_id() == "help" || arg.get_id() == "version" {
            continue;
        }
        let name = match (arg.get_long(), arg.get_short()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => format!("<{}>", arg.get_id()),
        };
        let value = match arg.get_value_names() {
            Some(names) if arg.get_action().takes_values() => format!(
                " <{}>",
                names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            _ if arg.get_action().takes_values() => {
                format!(" <{}>", arg.get_id().as_str().to_uppercase())
            }
            _ => String::new(),
        };
        let env = arg
            .get_env()
            .map(|e| format!("`{}`", e.to_string_lossy()))
            .unwrap_or_default();
        let default = arg
            .get_default_values()
            .iter()
            .map(|v| match v.to_string_lossy() {
                v if v.is_empty() => "`\"\"`".to_string(),
                v => format!("`{v}`"),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let possible: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|p| !p.is_hide_set())
            .map(|p| format!("`{}`", p.get_name()))
            .collect();
        if !possible.is_empty() && arg.get_action().takes_values() {
            if !help.trim_end().ends_with(['.', ')']) {
                help.push('.');
            }
            let _ = write!(help, " One of: {}.", possible.join(", "));
        }
        let _ = writeln!(
            out,
            "| `{name}{value}` | {env} | {default} | {} |",
            cell(&help)
        );
    }
}

fn command_section(out: &mut String, cmd: &clap::Command, path: &str, level: usize) {
    let _ = writeln!(out, "{} `{path}`\n", "#".repeat(level));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", prose_text(about.to_string().trim()));
    }
    flag_rows(out, cmd);
    out.push('\n');
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        command_section(
            out,
            sub,
            &format!("{path} {}", sub.get_name()),
            (level + 1).min(4),
        );
    }
}

#[test]
fn the_flags_page_is_the_binaries_own() {
    let mut page = header(
        "Flags",
        "the binaries' clap definitions (operator/src/cli.rs, cni-installer/src/args/flags.rs) and \
         linkerd-cni's help",
    );
    page.push_str(
        "Every flag can also be set by the environment variable named beside it; the chart sets the \
         operator's that way (see [Chart values](values.md)). Durations are a number followed by `h`, \
         `m` or `s` (`1h30m`); a bare number is seconds.\n\n",
    );
    let mut operator = linkerd_multus_operator::cli::Cli::command();
    operator.build();
    command_section(&mut page, &operator, "linkerd-multus-operator", 2);
    let mut installer = linkerd_cni_installer::args::Args::command();
    installer.build();
    command_section(&mut page, &installer, "linkerd-cni-install", 2);
    let _ = write!(
        page,
        "## `linkerd-cni`\n\nThe CNI plugin takes no flags: the runtime runs it with the `CNI_*` \
         variables and its network config on stdin. `linkerd-cni --help` prints:\n\n```text\n{}\n```\n",
        linkerd_cni::commands::HELP.trim_end()
    );
    assert_page("flags.md", &page);
}

// === custom resources ===

fn schema_rows(out: &mut String, path: &str, schema: &JSONSchemaProps) {
    let kind = schema.type_.clone().unwrap_or_else(|| {
        if schema.x_kubernetes_int_or_string == Some(true) {
            "int or string".into()
        } else {
            "any".into()
        }
    });
    if !path.is_empty() {
        let _ = writeln!(
            out,
            "| `{path}` | {kind} | {} |",
            cell(schema.description.as_deref().unwrap_or(""))
        );
    }
    for (name, child) in schema.properties.iter().flatten() {
        let child_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        schema_rows(out, &child_path, child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        schema_rows(out, &format!("{path}[]"), items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
        schema_rows(out, &format!("{path}.<key>"), values);
    }
}

fn crd_section(out: &mut String, crd: &CustomResourceDefinition) {
    let names = &crd.spec.names;
    let _ = writeln!(
        out,
        "## {} (`{}`)\n\n`{}`, {} (`kubectl get {}`).\n",
        names.kind,
        crd.spec.group,
        crd.metadata.name.as_deref().unwrap_or(""),
        crd.spec.scope,
        names.plural
    );
    for version in &crd.spec.versions {
        let _ = writeln!(out, "### {}/{}\n", crd.spec.group, version.name);
        out.push_str("| Field | Type | Description |\n|---|---|---|\n");
        if let Some(schema) = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        {
            let mut fields = schema.clone();
            // apiVersion, kind and metadata are every object's.
            if let Some(props) = fields.properties.as_mut() {
                props.retain(|k, _| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
            }
            schema_rows(out, "", &fields);
        }
        out.push('\n');
    }
}

#[test]
fn the_custom_resources_page_is_the_crds_own() {
    let mut page = header(
        "Custom resources",
        "the CRDs this project renders (crds/src: the one source of their YAML)",
    );
    page.push_str(
        "NodeMultus is this project's own: each node's installer publishes what the node's Multus \
         allows (see [Each node's Multus](../tasks/node-multus.md)). The NetworkAttachmentDefinition CRD \
         is Multus'; the chart installs it only with `installNADCRD=true`. NodeAgent is this project's \
         own too: the installer DaemonSet the operator keeps when started with `--node-agent=NAME` \
         (the path an OLM bundle takes; the chart installs it only with `nodeAgent.enabled=true`).\n\n",
    );
    crd_section(&mut page, &linkerd_multus_crds::NodeMultus::crd());
    crd_section(&mut page, &linkerd_multus_crds::NodeAgent::crd());
    crd_section(&mut page, &linkerd_multus_crds::crd());
    assert_page("crds.md", &page);
}

// === metrics ===

#[test]
fn the_metrics_page_is_what_the_operator_registers() {
    let mut page = header(
        "Metrics",
        "what the operator registers (linkerd_multus_operator::metrics::every_family)",
    );
    page.push_str(
        "The operator serves them on its admin port (`operator.adminPort`, 8081) at `/metrics`; the \
         chart's `monitoring.enabled` scrapes them and alerts on them (see [Alerts](../troubleshooting/alerts.md)). \
         Every replica serves the webhook's; the controller's and repair's are the leader's.\n\n\
         | Metric | Type | Description |\n|---|---|---|\n",
    );
    let text = linkerd_multus_operator::metrics::every_family();
    let mut help = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help.insert(name.to_string(), text.to_string());
        }
    }
    let mut rows = 0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').expect("# TYPE <name> <type>");
        let shown = if kind == "counter" {
            format!("{name}_total")
        } else {
            name.to_string()
        };
        let _ = writeln!(
            page,
            "| `{shown}` | {kind} | {} |",
            cell(help.get(name).map(String::as_str).unwrap_or(""))
        );
        rows += 1;
    }
    assert!(rows >= 10, "only {rows} metrics: {text}");
    assert_page("metrics.md", &page);
}
