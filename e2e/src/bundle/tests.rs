use super::*;

#[test]
fn top_level_keys_are_found_at_column_zero_only() {
    let values = "cni:\n  enabled: false\nnodeAgent:\n  enabled: false\n";
    assert!(has_top_level_key(values, "nodeAgent"));
    assert!(has_top_level_key(values, "cni"));
    assert!(!has_top_level_key(values, "enabled"));
    assert!(!has_top_level_key("nodeAgentX: 1\n", "nodeAgent"));
}
