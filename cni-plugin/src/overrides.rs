//! A pod's own settings: the plugin config's `linkerd` block, overridden by Linkerd's
//! `config.linkerd.io/*` annotations on the pod (falling back to its namespace's). Pure.

use ipnet::IpNet;

use rules::proxy_uid::{ProxyUidSource, Sources};
use vocab::Uid;

use crate::plan::RuleSettings;
use crate::pod::PodFacts;
use crate::ports::PortRange;

/// The apiserver ports a control-plane pod skips when `default/kubernetes` cannot be read.
pub const FALLBACK_APISERVER_PORTS: [u16; 2] = [443, 6443];

/// Where an annotation was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Pod,
    Namespace,
}

/// An annotation whose value cannot be used. The pod must not start with rules that silently
/// differ from what its owner asked for, so this fails the ADD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}={value:?} on the {where_}: {problem}")]
pub struct AnnotationError {
    pub key: &'static str,
    pub value: String,
    pub where_: &'static str,
    pub problem: String,
}

/// The annotation's value on the pod, else on the namespace.
fn lookup<'a>(pod: &'a PodFacts, key: &str) -> Option<(&'a str, Source)> {
    pod.annotations
        .get(key)
        .map(|v| (v.as_str(), Source::Pod))
        .or_else(|| {
            pod.namespace_annotations
                .get(key)
                .map(|v| (v.as_str(), Source::Namespace))
        })
}

fn error(key: &'static str, value: &str, src: Source, problem: String) -> AnnotationError {
    AnnotationError {
        key,
        value: value.to_string(),
        where_: match src {
            Source::Pod => "pod",
            Source::Namespace => "namespace",
        },
        problem,
    }
}

fn ranges(pod: &PodFacts, key: &'static str) -> Result<Option<Vec<PortRange>>, AnnotationError> {
    lookup(pod, key)
        .map(|(v, src)| PortRange::parse_list(v).map_err(|p| error(key, v, src, p)))
        .transpose()
}

/// The proxy-gid annotation: an integer; negative means "none" (Linkerd's `proxy.gid: -1`).
fn id(pod: &PodFacts, key: &'static str) -> Result<Option<Option<Uid>>, AnnotationError> {
    lookup(pod, key)
        .map(|(v, src)| match v.trim().parse::<i64>() {
            Ok(n) if n < 0 => Ok(None),
            Ok(n) => Uid::try_from(n)
                .map(Some)
                .map_err(|_| error(key, v, src, "too large for an id".into())),
            Err(_) => Err(error(key, v, src, "not an integer".into())),
        })
        .transpose()
}

/// What the proxy uid's sources say for this pod, ordered by `rules::proxy_uid` (the one owner of
/// their precedence, which the webhook and `check` follow too).
fn uid_sources<'a>(cfg: &RuleSettings, pod: &'a PodFacts) -> Sources<'a> {
    Sources::from_annotations(
        Some(&pod.annotations),
        pod.proxy_run_as_user,
        Some(&pod.namespace_annotations),
        cfg.proxy_uid,
    )
}

/// The uid the rules exempt; the annotation that wins is read by [`vocab::parse_proxy_uid`], and one
/// that is no uid is an error.
pub fn proxy_uid(cfg: &RuleSettings, pod: &PodFacts) -> Result<Option<Uid>, AnnotationError> {
    let key = vocab::PROXY_UID_ANNOTATION;
    match uid_sources(cfg, pod).exempted() {
        Ok(exempted) => Ok(exempted.map(|e| e.uid)),
        Err(invalid) => {
            let src = match invalid.from {
                ProxyUidSource::NamespaceAnnotation => Source::Namespace,
                _ => Source::Pod,
            };
            Err(error(key, &invalid.value, src, invalid.error.to_string()))
        }
    }
}

/// When the uid the rules exempt is not the one the proxy container runs as (the pod's own
/// proxy-uid annotation names another): the proxy's own traffic loops.
pub fn proxy_uid_disagreement(cfg: &RuleSettings, pod: &PodFacts) -> Option<String> {
    let d = uid_sources(cfg, pod).disagreement()?;
    Some(format!(
        "{} annotation {}={:?} differs from the {} container's runAsUser {}; \
         the rules exempt the annotation's uid",
        d.source.place(),
        vocab::PROXY_UID_ANNOTATION,
        d.value,
        vocab::PROXY_CONTAINER,
        d.run_as
    ))
}

/// The settings for this pod's rules.
pub fn settings_for(cfg: &RuleSettings, pod: &PodFacts) -> Result<RuleSettings, AnnotationError> {
    // skip-outbound-ports replaces the configured list; skip-inbound-ports adds to it (Linkerd's
    // own semantics, kept so annotations mean the same with and without this plugin).
    let mut outbound = ranges(pod, vocab::SKIP_OUTBOUND_PORTS_ANNOTATION)?
        .unwrap_or_else(|| cfg.outbound_ports_to_ignore.clone());
    let mut inbound = cfg.inbound_ports_to_ignore.clone();
    inbound.extend(ranges(pod, vocab::SKIP_INBOUND_PORTS_ANNOTATION)?.unwrap_or_default());

    let subnets = match lookup(pod, vocab::SKIP_SUBNETS_ANNOTATION) {
        None => cfg.subnets_to_ignore.clone(),
        Some((v, src)) => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>().map_err(|_| {
                    error(
                        vocab::SKIP_SUBNETS_ANNOTATION,
                        v,
                        src,
                        format!("`{s}` is not a CIDR"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
    };

    let proxy_uid = proxy_uid(cfg, pod)?;
    let proxy_gid = id(pod, vocab::PROXY_GID_ANNOTATION)?.unwrap_or(cfg.proxy_gid);

    if pod.control_plane {
        let api = if pod.apiserver_ports.is_empty() {
            FALLBACK_APISERVER_PORTS.to_vec()
        } else {
            pod.apiserver_ports.clone()
        };
        for port in api.into_iter().map(PortRange::single) {
            if !outbound.contains(&port) {
                outbound.push(port);
            }
        }
    }

    Ok(RuleSettings {
        incoming_proxy_port: cfg.incoming_proxy_port,
        outgoing_proxy_port: cfg.outgoing_proxy_port,
        proxy_uid,
        proxy_gid,
        ports_to_redirect: cfg.ports_to_redirect.clone(),
        inbound_ports_to_ignore: inbound,
        outbound_ports_to_ignore: outbound,
        subnets_to_ignore: subnets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn facts(pod: &[(&str, &str)], ns: &[(&str, &str)]) -> PodFacts {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        PodFacts {
            annotations: map(pod),
            namespace_annotations: map(ns),
            has_proxy: true,
            ..PodFacts::default()
        }
    }

    fn cfg() -> RuleSettings {
        RuleSettings {
            inbound_ports_to_ignore: PortRange::parse_list("4190,4191").unwrap(),
            outbound_ports_to_ignore: PortRange::parse_list("25").unwrap(),
            subnets_to_ignore: vec!["10.0.0.0/8".parse().unwrap()],
            ..RuleSettings::default()
        }
    }

    #[test]
    fn no_annotations_keep_the_config() {
        let s = settings_for(&cfg(), &facts(&[], &[])).unwrap();
        assert_eq!(s.inbound_ports_to_ignore, cfg().inbound_ports_to_ignore);
        assert_eq!(s.outbound_ports_to_ignore, cfg().outbound_ports_to_ignore);
        assert_eq!(s.subnets_to_ignore, cfg().subnets_to_ignore);
        assert_eq!((s.proxy_uid, s.proxy_gid), (Some(2102), None));
    }

    /// Outbound and subnets replace, inbound appends; the pod beats the namespace.
    #[test]
    fn annotations_override_with_linkerds_semantics() {
        let pod = facts(
            &[
                (vocab::SKIP_OUTBOUND_PORTS_ANNOTATION, "3306, 9000-9100"),
                (vocab::SKIP_INBOUND_PORTS_ANNOTATION, "8443"),
                (vocab::PROXY_GID_ANNOTATION, "3000"),
            ],
            &[
                (vocab::SKIP_OUTBOUND_PORTS_ANNOTATION, "1"),
                (vocab::SKIP_SUBNETS_ANNOTATION, "192.168.0.0/16,fd00::/8"),
                (vocab::PROXY_UID_ANNOTATION, "1234"),
            ],
        );
        let s = settings_for(&cfg(), &pod).unwrap();
        assert_eq!(
            s.outbound_ports_to_ignore,
            PortRange::parse_list("3306,9000-9100").unwrap()
        );
        assert_eq!(
            s.inbound_ports_to_ignore,
            PortRange::parse_list("4190,4191,8443").unwrap()
        );
        assert_eq!(
            s.subnets_to_ignore,
            vec![
                "192.168.0.0/16".parse::<IpNet>().unwrap(),
                "fd00::/8".parse().unwrap()
            ]
        );
        assert_eq!((s.proxy_uid, s.proxy_gid), (Some(1234), Some(3000)));
    }

    /// linkerd2#2812: the uid the proxy really runs as must be the one exempted.
    #[test]
    fn proxy_run_as_user_beats_config_and_namespace_but_not_the_pod_annotation() {
        let mut pod = facts(&[], &[(vocab::PROXY_UID_ANNOTATION, "1234")]);
        pod.proxy_run_as_user = Some(1000650000);
        assert_eq!(
            settings_for(&cfg(), &pod).unwrap().proxy_uid,
            Some(1000650000)
        );
        pod.annotations
            .insert(vocab::PROXY_UID_ANNOTATION.into(), "4321".into());
        assert_eq!(settings_for(&cfg(), &pod).unwrap().proxy_uid, Some(4321));
    }

    /// The plugin's verdict on each value of the table the webhook and `check` share: a uid is
    /// exempted, anything else fails the ADD naming the annotation, the value and the parser's reason.
    #[test]
    fn proxy_uids_follow_the_shared_table() {
        for (value, want) in vocab::PROXY_UID_CASES {
            for (on_pod, where_) in [(true, "pod"), (false, "namespace")] {
                let kv = [(vocab::PROXY_UID_ANNOTATION, *value)];
                let pod = if on_pod {
                    facts(&kv, &[])
                } else {
                    facts(&[], &kv)
                };
                let got = settings_for(&cfg(), &pod).map(|s| s.proxy_uid);
                match want {
                    Ok(uid) => assert_eq!(got, Ok(Some(*uid)), "{value:?}"),
                    Err(e) => assert_eq!(
                        got.unwrap_err().to_string(),
                        format!(
                            "annotation config.linkerd.io/proxy-uid={value:?} on the {where_}: {e}"
                        ),
                    ),
                }
            }
        }
    }

    /// The plugin on the proxy uid's shared case table: the uid it exempts (its configured one
    /// included), the annotation whose value fails the ADD, and when it warns that the proxy runs as
    /// another uid.
    #[test]
    fn proxy_uid_sources_follow_the_shared_case_table() {
        use rules::proxy_uid::PROXY_UID_SOURCE_CASES;
        for case in PROXY_UID_SOURCE_CASES {
            let s = case.sources;
            let on = |v: Option<&'static str>| -> Vec<(&str, &str)> {
                v.map(|v| (vocab::PROXY_UID_ANNOTATION, v))
                    .into_iter()
                    .collect()
            };
            let mut pod = facts(&on(s.pod_annotation), &on(s.namespace_annotation));
            pod.proxy_run_as_user = s.proxy_run_as_user;
            let cfg = RuleSettings {
                proxy_uid: s.configured,
                ..cfg()
            };
            let got = settings_for(&cfg, &pod).map(|s| s.proxy_uid);
            match case.plugin {
                Ok(exempted) => assert_eq!(got, Ok(exempted.map(|e| e.uid)), "{}", case.name),
                Err(from) => {
                    assert_eq!(
                        got.map_err(|e| e.where_),
                        Err(from.place()),
                        "{}",
                        case.name
                    )
                }
            }
            assert_eq!(
                proxy_uid_disagreement(&cfg, &pod).is_some(),
                case.disagrees,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn a_disagreeing_annotation_and_container_are_named() {
        let mut pod = facts(&[(vocab::PROXY_UID_ANNOTATION, "4321")], &[]);
        assert_eq!(proxy_uid_disagreement(&cfg(), &pod), None);
        pod.proxy_run_as_user = Some(4321);
        assert_eq!(proxy_uid_disagreement(&cfg(), &pod), None);
        pod.proxy_run_as_user = Some(2102);
        let warning = proxy_uid_disagreement(&cfg(), &pod).expect("a disagreement");
        assert!(
            warning.contains("\"4321\"") && warning.contains("2102"),
            "{warning}"
        );
    }

    #[test]
    fn control_plane_skips_the_apiserver_ports() {
        let mut pod = facts(&[], &[]);
        pod.control_plane = true;
        let s = settings_for(&cfg(), &pod).unwrap();
        assert_eq!(
            s.outbound_ports_to_ignore,
            PortRange::parse_list("25,443,6443").unwrap()
        );
        pod.apiserver_ports = vec![443, 8443, 25];
        let s = settings_for(&cfg(), &pod).unwrap();
        assert_eq!(
            s.outbound_ports_to_ignore,
            PortRange::parse_list("25,443,8443").unwrap()
        );
    }

    /// Each bad value names the annotation, the value and where it was found.
    #[test]
    fn bad_annotations_are_errors() {
        let cases = [
            (facts(&[(vocab::PROXY_UID_ANNOTATION, "root")], &[]), "annotation config.linkerd.io/proxy-uid=\"root\" on the pod: not a uid: it is not a decimal number; write the uid in digits, e.g. 2102"),
            (facts(&[], &[(vocab::PROXY_GID_ANNOTATION, "99999999999")]), "annotation config.linkerd.io/proxy-gid=\"99999999999\" on the namespace: too large for an id"),
            (facts(&[(vocab::SKIP_INBOUND_PORTS_ANNOTATION, "80,http")], &[]), "annotation config.linkerd.io/skip-inbound-ports=\"80,http\" on the pod: `http` is not a port (1-65535)"),
            (facts(&[(vocab::SKIP_OUTBOUND_PORTS_ANNOTATION, "9-1")], &[]), "annotation config.linkerd.io/skip-outbound-ports=\"9-1\" on the pod: `9-1` is an empty range"),
            (facts(&[], &[(vocab::SKIP_SUBNETS_ANNOTATION, "10.0.0.0/40")]), "annotation config.linkerd.io/skip-subnets=\"10.0.0.0/40\" on the namespace: `10.0.0.0/40` is not a CIDR"),
        ];
        for (pod, want) in cases {
            assert_eq!(settings_for(&cfg(), &pod).unwrap_err().to_string(), want);
        }
    }
}
