//! PURE: the proxy uid linkerd-cni's rules exempt from the redirect, and what follows from it. The one
//! owner of its sources' precedence: the plugin follows it to build its rules ([`Sources::exempted`]),
//! the webhook and `check` to predict them ([`Sources::exempted_valid`]), and all three judge a proxy
//! that does not run as the exempted uid by [`Sources::disagreement`]. Values are read by the one
//! parser, [`vocab::parse_proxy_uid`]. App containers running as that uid: [`collision`].

use std::collections::BTreeMap;

use vocab::{ProxyUidError, Uid};

pub mod collision;

/// Where the uid the plugin's rules exempt comes from, as Linkerd's own plugin reads it (linkerd2#2812:
/// the uid the proxy really runs as must be the one exempted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyUidSource {
    /// `config.linkerd.io/proxy-uid` on the pod.
    PodAnnotation,
    /// The proxy container's `runAsUser` (else the pod's).
    ProxyRunAsUser,
    /// `config.linkerd.io/proxy-uid` on the namespace.
    NamespaceAnnotation,
    /// The plugin's configuration (the linkerd-cni ConfigMap).
    Configured,
}

/// The order in which [`ProxyUidSource`]s are asked; the first that has a value wins. Written once,
/// walked once (by `Sources::first`).
pub const PROXY_UID_PRECEDENCE: [ProxyUidSource; 4] = [
    ProxyUidSource::PodAnnotation,
    ProxyUidSource::ProxyRunAsUser,
    ProxyUidSource::NamespaceAnnotation,
    ProxyUidSource::Configured,
];

/// What each source says about one pod, as its caller read it: annotation values raw (parsed here),
/// the proxy's uid as [`crate::pod::PodView::proxy_uid`] gives it (its own `runAsUser`, else the
/// pod's). `configured` is known to the plugin only; the webhook and `check` leave it None.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sources<'a> {
    pub pod_annotation: Option<&'a str>,
    pub proxy_run_as_user: Option<Uid>,
    pub namespace_annotation: Option<&'a str>,
    pub configured: Option<Uid>,
}

/// The exempted uid, and which source named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exempted {
    pub uid: Uid,
    pub source: ProxyUidSource,
}

/// The source that wins by precedence holds a value that is no uid: the plugin fails the pod's ADD
/// rather than start it with rules its owner did not ask for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} {value:?} on the {}: {error}", vocab::PROXY_UID_ANNOTATION, .from.place())]
pub struct Invalid {
    /// The source holding the value (thiserror reserves the name `source`).
    pub from: ProxyUidSource,
    pub value: String,
    #[source]
    pub error: ProxyUidError,
}

/// The rules exempt a uid the proxy does not run as: the proxy's own traffic is redirected back into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// The source that wins over the proxy's `runAsUser`, its raw value and its reading.
    pub source: ProxyUidSource,
    pub value: String,
    pub named: Result<Uid, ProxyUidError>,
    /// The uid the proxy runs as.
    pub run_as: Uid,
}

/// What one source says: its raw value (an annotation's; empty for a uid) and its reading.
struct Said<'a> {
    source: ProxyUidSource,
    raw: &'a str,
    read: Result<Uid, ProxyUidError>,
}

// === impl ProxyUidSource ===

impl ProxyUidSource {
    /// Where the source is read: "pod" or "namespace" for an annotation (as messages name it).
    pub fn place(self) -> &'static str {
        match self {
            Self::PodAnnotation => "pod",
            Self::NamespaceAnnotation => "namespace",
            Self::ProxyRunAsUser => "proxy container",
            Self::Configured => "plugin's configuration",
        }
    }
}

// === impl Sources ===

impl<'a> Sources<'a> {
    /// The sources read from the pod's and its namespace's annotations.
    pub fn from_annotations(
        pod: Option<&'a BTreeMap<String, String>>,
        proxy_run_as_user: Option<Uid>,
        namespace: Option<&'a BTreeMap<String, String>>,
        configured: Option<Uid>,
    ) -> Self {
        let read = |on: Option<&'a BTreeMap<String, String>>| {
            on.and_then(|a| a.get(vocab::PROXY_UID_ANNOTATION))
                .map(String::as_str)
        };
        Self {
            pod_annotation: read(pod),
            proxy_run_as_user,
            namespace_annotation: read(namespace),
            configured,
        }
    }

    /// What `source` says: None when it says nothing.
    fn says(&self, source: ProxyUidSource) -> Option<Said<'a>> {
        let annotation = |v: Option<&'a str>| {
            v.map(|v| Said {
                source,
                raw: v,
                read: vocab::parse_proxy_uid(v),
            })
        };
        let uid = |u: Option<Uid>| {
            u.map(|u| Said {
                source,
                raw: "",
                read: Ok(u),
            })
        };
        match source {
            ProxyUidSource::PodAnnotation => annotation(self.pod_annotation),
            ProxyUidSource::ProxyRunAsUser => uid(self.proxy_run_as_user),
            ProxyUidSource::NamespaceAnnotation => annotation(self.namespace_annotation),
            ProxyUidSource::Configured => uid(self.configured),
        }
    }

    /// The first source by [`PROXY_UID_PRECEDENCE`] that says anything (`skip_invalid`: passing over
    /// an annotation that is no uid). The one walk of the precedence.
    fn first(&self, skip_invalid: bool) -> Option<Said<'a>> {
        PROXY_UID_PRECEDENCE
            .iter()
            .filter_map(|&source| self.says(source))
            .find(|said| !skip_invalid || said.read.is_ok())
    }

    /// The plugin's reading: the uid its rules exempt (None when no source names one), or the
    /// invalid value that fails the ADD. An invalid annotation a source before it overrides is never
    /// read, as the plugin never reads it.
    pub fn exempted(&self) -> Result<Option<Exempted>, Invalid> {
        match self.first(false) {
            None => Ok(None),
            Some(Said {
                source,
                read: Ok(uid),
                ..
            }) => Ok(Some(Exempted { uid, source })),
            Some(Said {
                source,
                raw,
                read: Err(error),
            }) => Err(Invalid {
                from: source,
                value: raw.to_string(),
                error,
            }),
        }
    }

    /// The webhook's and `check`'s prediction of [`Self::exempted`]: an annotation that is no uid is
    /// passed over (each of them reports the value on a line of its own, and judges the uids the pod
    /// will have once it is fixed or removed).
    pub fn exempted_valid(&self) -> Option<Exempted> {
        let said = self.first(true)?;
        said.read.ok().map(|uid| Exempted {
            uid,
            source: said.source,
        })
    }

    /// The rules would exempt another uid than the one the proxy runs as: the source that wins by
    /// precedence is not the proxy's `runAsUser` and does not name it. Only a source before the
    /// `runAsUser` can (the pod's annotation): a namespace's annotation that differs is overridden by
    /// it, so the rules still exempt the uid the proxy runs as.
    pub fn disagreement(&self) -> Option<Disagreement> {
        let run_as = self.proxy_run_as_user?;
        let said = self.first(false)?;
        (said.read != Ok(run_as)).then(|| Disagreement {
            source: said.source,
            value: said.raw.to_string(),
            named: said.read,
            run_as,
        })
    }
}

// === The shared case table ===

/// One pod's sources and the verdict every reader of them must give.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub name: &'static str,
    pub sources: Sources<'static>,
    /// What the plugin exempts, or which source's value fails its ADD.
    pub plugin: Result<Option<Exempted>, ProxyUidSource>,
    /// What the webhook and `check` predict (invalid annotations passed over).
    pub valid: Option<Exempted>,
    /// Whether the rules exempt a uid the proxy does not run as.
    pub disagrees: bool,
}

const fn at(uid: Uid, source: ProxyUidSource) -> Option<Exempted> {
    Some(Exempted { uid, source })
}

const fn sources(
    pod: Option<&'static str>,
    run_as: Option<Uid>,
    ns: Option<&'static str>,
    configured: Option<Uid>,
) -> Sources<'static> {
    Sources {
        pod_annotation: pod,
        proxy_run_as_user: run_as,
        namespace_annotation: ns,
        configured,
    }
}

/// The precedence and the disagreement rule, case by case: this module's tests, the plugin's
/// (`overrides.rs`), the webhook's (`decision.rs`) and `check`'s (`uids.rs`) run their own call site
/// over it. A case with `configured` set is the plugin's alone (only it knows that uid).
pub const PROXY_UID_SOURCE_CASES: &[Case] = {
    use ProxyUidSource::*;
    &[
        Case {
            name: "nothing named: no uid exempted",
            sources: sources(None, None, None, None),
            plugin: Ok(None),
            valid: None,
            disagrees: false,
        },
        Case {
            name: "only the configured uid",
            sources: sources(None, None, None, Some(2102)),
            plugin: Ok(at(2102, Configured)),
            valid: at(2102, Configured),
            disagrees: false,
        },
        Case {
            name: "the pod's annotation beats everything",
            sources: sources(Some("1"), Some(2), Some("3"), Some(4)),
            plugin: Ok(at(1, PodAnnotation)),
            valid: at(1, PodAnnotation),
            disagrees: true,
        },
        Case {
            name: "the proxy's runAsUser beats the namespace's annotation",
            sources: sources(None, Some(2), Some("3"), None),
            plugin: Ok(at(2, ProxyRunAsUser)),
            valid: at(2, ProxyRunAsUser),
            // The one the plugin and `check` answered differently: the rules exempt 2, the uid the
            // proxy runs as, whatever the namespace says.
            disagrees: false,
        },
        Case {
            name: "the proxy's runAsUser beats the configured uid",
            sources: sources(None, Some(2), None, Some(4)),
            plugin: Ok(at(2, ProxyRunAsUser)),
            valid: at(2, ProxyRunAsUser),
            disagrees: false,
        },
        Case {
            name: "the namespace's annotation when the pod names none",
            sources: sources(None, None, Some("3"), Some(4)),
            plugin: Ok(at(3, NamespaceAnnotation)),
            valid: at(3, NamespaceAnnotation),
            disagrees: false,
        },
        Case {
            name: "a pod annotation naming the proxy's uid agrees",
            sources: sources(Some("007"), Some(7), Some("3"), None),
            plugin: Ok(at(7, PodAnnotation)),
            valid: at(7, PodAnnotation),
            disagrees: false,
        },
        Case {
            name: "a pod annotation that is no uid fails the ADD, and disagrees with the proxy",
            sources: sources(Some("root"), Some(2), Some("3"), None),
            plugin: Err(PodAnnotation),
            valid: at(2, ProxyRunAsUser),
            disagrees: true,
        },
        Case {
            name: "a pod annotation that is no uid, without a proxy uid",
            sources: sources(Some(" 5"), None, Some("3"), None),
            plugin: Err(PodAnnotation),
            valid: at(3, NamespaceAnnotation),
            disagrees: false,
        },
        Case {
            name: "a namespace annotation that is no uid is never read under a proxy runAsUser",
            sources: sources(None, Some(2), Some("-1"), None),
            plugin: Ok(at(2, ProxyRunAsUser)),
            valid: at(2, ProxyRunAsUser),
            disagrees: false,
        },
        Case {
            name: "a namespace annotation that is no uid, read: fails the ADD",
            sources: sources(None, None, Some("0x10"), Some(4)),
            plugin: Err(NamespaceAnnotation),
            valid: at(4, Configured),
            disagrees: false,
        },
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_table() {
        for case in PROXY_UID_SOURCE_CASES {
            let s = case.sources;
            assert_eq!(
                s.exempted().map_err(|e| e.from),
                case.plugin,
                "{}",
                case.name
            );
            assert_eq!(s.exempted_valid(), case.valid, "{}", case.name);
            assert_eq!(s.disagreement().is_some(), case.disagrees, "{}", case.name);
        }
    }

    /// Moved from `uid_collision` (the webhook's and `check`'s walk), where the configured uid was not
    /// a source: the same four verdicts.
    #[test]
    fn the_exempted_uid_follows_the_plugins_precedence() {
        use ProxyUidSource::*;
        let s = |pod, run_as, ns| Sources {
            pod_annotation: pod,
            proxy_run_as_user: run_as,
            namespace_annotation: ns,
            configured: None,
        };
        assert_eq!(
            s(Some("1"), Some(2), Some("3")).exempted_valid(),
            at(1, PodAnnotation)
        );
        assert_eq!(
            s(None, Some(2), Some("3")).exempted_valid(),
            at(2, ProxyRunAsUser)
        );
        assert_eq!(
            s(None, None, Some("3")).exempted_valid(),
            at(3, NamespaceAnnotation)
        );
        assert_eq!(s(None, None, None).exempted_valid(), None);
    }

    /// Every value of the parser's table, on the pod and on the namespace: the plugin takes a uid and
    /// refuses anything else with the parser's reason, naming where it was found.
    #[test]
    fn each_value_is_read_by_the_one_parser() {
        for (value, want) in vocab::PROXY_UID_CASES {
            for (source, s) in [
                (
                    ProxyUidSource::PodAnnotation,
                    sources(Some(value), None, None, None),
                ),
                (
                    ProxyUidSource::NamespaceAnnotation,
                    sources(None, None, Some(value), None),
                ),
            ] {
                let got = s.exempted();
                match want {
                    Ok(uid) => assert_eq!(got, Ok(at(*uid, source)), "{value:?}"),
                    Err(error) => assert_eq!(
                        got,
                        Err(Invalid {
                            from: source,
                            value: value.to_string(),
                            error: *error
                        }),
                        "{value:?}"
                    ),
                }
            }
        }
    }

    /// The error names the annotation, the value, where it was found and the parser's reason.
    #[test]
    fn an_invalid_value_says_where_it_is() {
        let err = sources(None, None, Some("root"), None)
            .exempted()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "config.linkerd.io/proxy-uid \"root\" on the namespace: not a uid: it is not a decimal \
             number; write the uid in digits, e.g. 2102"
        );
    }

    /// The disagreement carries what each caller's message names.
    #[test]
    fn a_disagreement_names_the_annotation_and_the_proxys_uid() {
        assert_eq!(
            sources(Some("4321"), Some(2102), None, None).disagreement(),
            Some(Disagreement {
                source: ProxyUidSource::PodAnnotation,
                value: "4321".into(),
                named: Ok(4321),
                run_as: 2102,
            })
        );
        assert_eq!(sources(Some("4321"), None, None, None).disagreement(), None);
    }
}
