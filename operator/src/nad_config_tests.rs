use super::*;
use serde_json::{json, Value};

const KUBECONFIG: &str = "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig";

fn src() -> ConfigSource {
    ConfigSource {
        namespace: "linkerd-cni".into(),
        configmap: "linkerd-cni-config".into(),
        kubeconfig: KUBECONFIG.into(),
    }
}

fn cm(data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn build(raw: &str) -> Result<Value, NadConfigError> {
    build_config(Some(&cm(&[(vocab::CNI_CONFIG_KEY, raw)])), &src())
        .map(|s| serde_json::from_str(&s).expect("output is JSON"))
}

/// Linkerd's linkerd2-cni chart `cni_network_config` (the repository's one copy) with every option
/// turned on, each to a value other than the plugin's default. If the builder lost a `linkerd.*` key
/// here, pods would silently run with the plugin's defaults (iptables-legacy, IPv4 only), the Go
/// operator's bug.
fn chart_template_all_options() -> String {
    let mut v: Value = serde_json::from_str(include_str!(
        "../../fixtures/linkerd2-cni-network-config.json"
    ))
    .expect("fixture");
    let linkerd = &mut v["linkerd"];
    linkerd["proxy-gid"] = json!(2102);
    linkerd["outbound-ports-to-ignore"] = json!(["443", "6443"]);
    linkerd["subnets-to-ignore"] = json!(["10.0.0.0/8"]);
    linkerd["use-wait-flag"] = json!(true);
    linkerd["iptables-mode"] = json!("nft");
    linkerd["ipv6"] = json!(true);
    v.to_string()
}

/// Table of ConfigMap shapes → whole expected config. A regression in any rule (defaults,
/// kubeconfig, keeping keys, dropping placeholders) changes one of these outputs.
#[test]
fn builds_whole_config_for_many_shapes() {
    let chart = chart_template_all_options();
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "linkerd chart template: policy dropped, kubeconfig set, every linkerd key kept",
            &chart,
            json!({
                "cniVersion": "0.3.1",
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "linkerd": {
                    "inbound-ports-to-ignore": ["4191", "4190"],
                    "incoming-proxy-port": 4143,
                    "iptables-mode": "nft",
                    "ipv6": true,
                    "outbound-ports-to-ignore": ["443", "6443"],
                    "outgoing-proxy-port": 4140,
                    "ports-to-redirect": [],
                    "proxy-gid": 2102,
                    "proxy-uid": 2102,
                    "simulate": false,
                    "subnets-to-ignore": ["10.0.0.0/8"],
                    "use-wait-flag": true
                },
                "log_level": "info",
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "empty object: all defaults",
            "{}",
            json!({
                "cniVersion": "0.3.1",
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "explicit cniVersion, name and type are kept",
            r#"{"cniVersion": "1.0.0", "name": "mesh", "type": "linkerd-cni-v2"}"#,
            json!({
                "cniVersion": "1.0.0",
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "name": "mesh",
                "type": "linkerd-cni-v2"
            }),
        ),
        (
            "an already-filled kubeconfig is replaced by the flag; other kubernetes keys kept",
            r#"{"kubernetes": {"kubeconfig": "/somewhere/else", "k8s_api_root": "https://10.0.0.1:443"}}"#,
            json!({
                "cniVersion": "0.3.1",
                "kubernetes": {"k8s_api_root": "https://10.0.0.1:443", "kubeconfig": KUBECONFIG},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "kubernetes that is not an object is replaced",
            r#"{"kubernetes": "x"}"#,
            json!({
                "cniVersion": "0.3.1",
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "a placeholder inside kubernetes drops only that key",
            r#"{"kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__", "token": "__SERVICEACCOUNT_TOKEN__", "ok": 1}}"#,
            json!({
                "cniVersion": "0.3.1",
                "kubernetes": {"kubeconfig": KUBECONFIG, "ok": 1},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "a placeholder in a nested array drops the top-level value holding it",
            r#"{"extra": {"list": ["a", "__X1__"]}, "keep": "__not a placeholder__", "also": "x__y__z"}"#,
            json!({
                "also": "x__y__z",
                "cniVersion": "0.3.1",
                "keep": "__not a placeholder__",
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
        (
            "unknown future keys, nulls and numbers are kept untouched",
            r#"{"future": {"b": [3, {"z": null, "a": 1.5}]}, "linkerd": {"new-knob": "on"}}"#,
            json!({
                "cniVersion": "0.3.1",
                "future": {"b": [3, {"a": 1.5, "z": null}]},
                "kubernetes": {"kubeconfig": KUBECONFIG},
                "linkerd": {"new-knob": "on"},
                "name": "linkerd-cni",
                "type": "linkerd-cni"
            }),
        ),
    ];
    for (what, raw, want) in cases {
        let got = build(raw).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got, want, "{what}");
    }
}

/// Same content in another key order and layout gives byte-identical text: otherwise a cosmetic
/// ConfigMap edit (or a map iteration order) would rewrite every NAD.
#[test]
fn output_is_canonical_and_compact() {
    let a = build_config(
        Some(&cm(&[(
            vocab::CNI_CONFIG_KEY,
            r#"{"b": {"y": 1, "x": 2}, "a": [1, 2]}"#,
        )])),
        &src(),
    )
    .expect("a");
    let b = build_config(
        Some(&cm(&[(
            vocab::CNI_CONFIG_KEY,
            "{\n \"a\": [1,2],\n \"b\": {\"x\": 2, \"y\": 1}\n}",
        )])),
        &src(),
    )
    .expect("b");
    assert_eq!(a, b);
    assert_eq!(
        a,
        r#"{"a":[1,2],"b":{"x":2,"y":1},"cniVersion":"0.3.1","kubernetes":{"kubeconfig":"/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"},"name":"linkerd-cni","type":"linkerd-cni"}"#
    );
}

/// Each kind of broken input gets its own error (and metric label), naming the ConfigMap.
#[test]
fn broken_inputs_get_typed_errors() {
    let missing = build_config(None, &src()).expect_err("missing");
    assert!(
        matches!(missing, NadConfigError::ConfigMapMissing { .. }),
        "{missing:?}"
    );
    assert_eq!(missing.metric_label(), "configmap_missing");
    assert!(
        missing
            .to_string()
            .contains("linkerd-cni/linkerd-cni-config"),
        "{missing}"
    );

    let no_key = build_config(Some(&cm(&[("other", "{}")])), &src()).expect_err("no key");
    assert!(
        matches!(no_key, NadConfigError::KeyMissing { .. }),
        "{no_key:?}"
    );
    assert_eq!(no_key.metric_label(), "config_key_missing");

    let no_data = build_config(Some(&ConfigMap::default()), &src()).expect_err("no data");
    assert!(
        matches!(no_data, NadConfigError::KeyMissing { .. }),
        "{no_data:?}"
    );

    for raw in ["{", "", "{\"a\": }", "not json"] {
        let e = build(raw).expect_err(raw);
        assert!(
            matches!(e, NadConfigError::InvalidJson { .. }),
            "{raw}: {e:?}"
        );
        assert_eq!(e.metric_label(), "config_invalid_json");
    }

    for (raw, found) in [
        ("[]", "an array"),
        ("\"x\"", "a string"),
        ("3", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
    ] {
        let e = build(raw).expect_err(raw);
        assert!(
            matches!(e, NadConfigError::NotAnObject { found: f, .. } if f == found),
            "{raw}: {e:?}"
        );
        assert_eq!(e.metric_label(), "config_not_object");
    }
}
