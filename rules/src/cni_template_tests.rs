use super::*;

/// Linkerd's linkerd2-cni chart `cni_network_config`, the one copy in the repository.
const CHART: &str = include_str!("../../fixtures/linkerd2-cni-network-config.json");

fn values() -> Values<'static> {
    Values {
        kubeconfig_path: "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig",
        log_level: "debug",
        service_host: "fd00::1",
        service_port: "443",
    }
}

/// Every case either former scanner (the operator's `has_placeholder`, the installer's
/// `leftover_placeholders`) was tested with, plus the inputs where they disagreed (last rows): a name
/// without a letter is not a placeholder.
#[test]
fn placeholder_scanner() {
    let cases: &[(&str, &[&str])] = &[
        ("__A__", &["__A__"]),
        ("x__KUBECONFIG_FILEPATH__y", &["__KUBECONFIG_FILEPATH__"]),
        ("https://__H__:__P__", &["__H__", "__P__"]),
        ("__A_1__", &["__A_1__"]),
        (
            r#"{"a": "__CNI_MTU__", "b": "x__y", "c": "__NODE_NAME__"}"#,
            &["__CNI_MTU__", "__NODE_NAME__"],
        ),
        ("___A__", &["___A__"]),
        ("é__A__é", &["__A__"]),
        ("", &[]),
        ("__", &[]),
        ("____", &[]),
        ("__a__", &[]),
        ("__A", &[]),
        ("A__", &[]),
        ("_A_", &[]),
        ("__A b__", &[]),
        ("snake_case__name", &[]),
        ("no placeholders, __ nor ____", &[]),
        // The installer's scanner reported these; the operator's (and now both) do not.
        ("__1__", &[]),
        ("______", &[]),
        ("__1_2__", &[]),
    ];
    for (text, want) in cases {
        assert_eq!(placeholders(text), *want, "{text}");
    }
}

#[test]
fn placeholders_found_at_any_depth() {
    assert!(holds_placeholder(&json!({"a": [1, {"b": "x__B__"}]})));
    assert!(holds_placeholder(&json!(["__A__"])));
    assert!(!holds_placeholder(
        &json!({"__KEY__": "v", "n": null, "x": 1.5})
    ));
    assert!(!holds_placeholder(&json!("__1__")));
}

/// The chart's template renders to a usable entry: every placeholder filled, an IPv6 host in
/// brackets, never the token.
#[test]
fn renders_linkerd_chart_template() {
    let mut template = parse(CHART).expect("the fixture is an object");
    template.insert("log_level".into(), json!(PLACEHOLDER_LOG_LEVEL));
    let got = render(&Value::Object(template).to_string(), &values(), None).expect("renders");
    assert_eq!(
        got["kubernetes"]["kubeconfig"],
        "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
    );
    assert_eq!(got["log_level"], "debug");
    assert_eq!(got["policy"]["k8s_api_root"], "https://[fd00::1]:443");
    assert_eq!(
        got["policy"]["k8s_auth_token"], "",
        "the token never lands in the conflist"
    );
    assert_eq!(got["linkerd"]["proxy-uid"], 2102);
    assert!(placeholders(&got.to_string()).is_empty());
}

#[test]
fn service_hosts_go_into_the_url_once_bracketed() {
    for (host, want) in [
        ("10.96.0.1", "https://10.96.0.1:443"),
        ("fd00::1", "https://[fd00::1]:443"),
        ("[fd00::1]", "https://[fd00::1]:443"),
        (
            "kubernetes.default.svc",
            "https://kubernetes.default.svc:443",
        ),
    ] {
        let v = Values {
            service_host: host,
            ..values()
        };
        let got = render(CHART, &v, None).expect("renders");
        assert_eq!(got["policy"]["k8s_api_root"], want, "{host}");
    }
}

#[test]
fn default_template_renders() {
    let got = render(&default_template(), &values(), None).expect("renders");
    assert_eq!(got["type"], PLUGIN_TYPE);
    assert_eq!(got["kubernetes"]["kubeconfig"], values().kubeconfig_path);
    assert_eq!(
        got["linkerd"]["incoming-proxy-port"],
        DEFAULT_INBOUND_PROXY_PORT
    );
}

#[test]
fn explicit_log_level_wins_over_a_literal_one() {
    let template = r#"{"type": "linkerd-cni", "log_level": "info"}"#;
    assert_eq!(
        render(template, &values(), None).expect("ok")["log_level"],
        "info"
    );
    assert_eq!(
        render(template, &values(), Some("trace")).expect("ok")["log_level"],
        "trace"
    );
}

#[test]
fn values_are_escaped_into_json() {
    let v = Values {
        kubeconfig_path: "/a \"b\"\\c",
        ..values()
    };
    let got = render(
        r#"{"type": "linkerd-cni", "k": "__KUBECONFIG_FILEPATH__"}"#,
        &v,
        None,
    )
    .expect("ok");
    assert_eq!(got["k"], "/a \"b\"\\c");
}

#[test]
fn bad_templates_are_named() {
    let e = render("{\"type\": ", &values(), None).expect_err("not json");
    assert!(
        matches!(e, TemplateError::Parse(ParseError::InvalidJson(_))),
        "{e:?}"
    );
    // Told through the chain: each cause once, the parser's position included.
    let told = vocab::report::chain(&e);
    assert!(
        told.starts_with(
            "the CNI network config template (placeholders filled): is not valid JSON: "
        ) && told.matches("EOF while parsing").count() == 1,
        "{told}"
    );
    let e = render("[]", &values(), None).expect_err("list");
    assert!(
        matches!(
            e,
            TemplateError::Parse(ParseError::NotAnObject { found: "an array" })
        ),
        "{e:?}"
    );
    for (template, want) in [("{}", None), ("{\"type\": \"bridge\"}", Some("bridge"))] {
        let e = render(template, &values(), None).expect_err(template);
        assert!(
            matches!(&e, TemplateError::WrongType { found } if found.as_deref() == want),
            "{template}: {e:?}"
        );
    }
}

/// The operator's reading of the chart's template: the `policy` block (placeholders only the
/// installer fills) dropped, our kubeconfig set, the rest kept, keys sorted.
#[test]
fn chart_template_for_a_nad() {
    let got: Value = serde_json::from_str(&for_nad(CHART, "/k").expect("builds")).expect("JSON");
    let chart: Value = serde_json::from_str(CHART).expect("fixture");
    assert_eq!(got["kubernetes"], json!({"kubeconfig": "/k"}));
    assert_eq!(got["linkerd"], chart["linkerd"]);
    assert_eq!(got["cniVersion"], DEFAULT_CNI_VERSION);
    assert!(got.get("policy").is_none());
    assert!(!holds_placeholder(&got));
    let keys: Vec<&String> = got.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        [
            "cniVersion",
            "kubernetes",
            "linkerd",
            "log_level",
            "name",
            "type"
        ]
    );
}
