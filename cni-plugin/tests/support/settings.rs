//! Rule settings for the tests that apply rules in a netns without a pod (and so without the
//! harness' apiserver parts).

use linkerd_cni::plan::RuleSettings;

/// Linkerd's default rule settings with proxy uid `uid`.
pub fn settings(uid: vocab::Uid) -> RuleSettings {
    RuleSettings {
        incoming_proxy_port: 4143,
        outgoing_proxy_port: 4140,
        proxy_uid: Some(uid),
        proxy_gid: None,
        ports_to_redirect: vec![],
        inbound_ports_to_ignore: vec![],
        outbound_ports_to_ignore: vec![],
        subnets_to_ignore: vec![],
    }
}
