//! PURE: `--admission` (helm `admission`), which path admits pods: the operator's webhook, or the
//! MutatingAdmissionPolicy ([`crate::admission_policy`]) the apiserver runs itself. `auto` takes the
//! policy where the server serves the API, decided from discovery (what the server lists), never from
//! its version: a 1.34 server serves v1beta1 only with the gate and the runtime-config on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::admission_policy::PolicyApi;

/// The admission mode, chosen by the admin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdmissionMode {
    /// The policy where the server serves MutatingAdmissionPolicy (v1, else v1beta1), else the webhook.
    #[default]
    Auto,
    /// The webhook for every pod, as before the policy existed; no policy is kept.
    Webhook,
    /// The policy; the webhook only for the pods the policy cannot decide.
    Policy,
}

/// What is live: which path admits the pods of enabled namespaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Live {
    /// The webhook alone (its configuration unnarrowed); `why` for logs and `check`.
    Webhook { why: String },
    /// The policy, of this API version, plus the webhook for what only it can do.
    Policy(PolicyApi),
}

impl Live {
    pub fn is_policy(&self) -> bool {
        matches!(self, Self::Policy(_))
    }

    /// One line for logs and `check`.
    pub fn describe(&self) -> String {
        match self {
            Self::Webhook { why } => format!("the webhook ({why})"),
            Self::Policy(api) => format!(
                "the MutatingAdmissionPolicy ({}), the webhook only for what it cannot do",
                api.api_version()
            ),
        }
    }
}

crate::named_values!(AdmissionMode {
    Auto => "auto",
    Webhook => "webhook",
    Policy => "policy",
});

impl AdmissionMode {
    /// The environment variable `--admission` is read from.
    pub const ENV: &'static str = "ADMISSION";

    pub fn parse(value: &str) -> Result<Self, String> {
        Self::named(value).ok_or_else(|| {
            let values = Self::VALUES.join(", ");
            format!("{value:?} is not an admission mode: {values}")
        })
    }

    /// The live path, given the version of the API the server serves (`served`, from discovery;
    /// None: none) and whether a webhook configuration is named to own the policy (`owner_named`,
    /// `--webhook-config-name`). `policy` on a server without the API keeps the webhook whole and says
    /// why: narrowing the webhook with no policy in place would leave pods unattached. Without an
    /// owner the policy would outlive an uninstall, so the webhook stays live.
    pub fn resolve(self, served: Option<PolicyApi>, owner_named: bool) -> Live {
        match (self, served) {
            (Self::Webhook, _) => Live::Webhook {
                why: "admission: webhook".into(),
            },
            (Self::Auto | Self::Policy, Some(_)) if !owner_named => Live::Webhook {
                why: format!(
                    "admission: {}, but no --webhook-config-name: the policy is owned by that \
                     configuration so that an uninstall removes it, and without one it would outlive \
                     the product",
                    self.as_str()
                ),
            },
            (Self::Auto | Self::Policy, Some(api)) => Live::Policy(api),
            (Self::Auto, None) => Live::Webhook {
                why: "admission: auto, and the server serves no MutatingAdmissionPolicy".into(),
            },
            (Self::Policy, None) => Live::Webhook {
                why: "admission: policy, but the server serves no MutatingAdmissionPolicy \
                      (v1, or v1beta1 with the MutatingAdmissionPolicy gate and \
                      --runtime-config=admissionregistration.k8s.io/v1beta1=true)"
                    .into(),
            },
        }
    }
}

/// Whether the namespace `meta` should carry [`vocab::ADMISSION_NAMESPACE_LABEL`] (the binding's
/// selector) while `live`: every enabled namespace ([`crate::namespaces::enabled`]) while the policy is
/// live, none otherwise (the label only spares other namespaces the policy's evaluation; the policy
/// itself reads the namespace's annotations, as the webhook does).
pub fn wants_label(meta: &ObjectMeta, linkerd_namespace: &str, live: &Live) -> bool {
    live.is_policy() && crate::namespaces::enabled(meta, linkerd_namespace)
}

/// Whether `meta` carries the label with `value` (the binding's; [`vocab::ADMISSION_NAMESPACE_LABEL_VALUE`]
/// but in tests).
pub fn labelled(meta: &ObjectMeta, value: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(vocab::ADMISSION_NAMESPACE_LABEL))
        .is_some_and(|v| v == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_refuses_others() {
        for value in AdmissionMode::VALUES {
            assert_eq!(AdmissionMode::parse(value).expect(value).as_str(), value);
        }
        assert_eq!(AdmissionMode::default(), AdmissionMode::Auto);
        let err = AdmissionMode::parse("Policy").expect_err("case matters");
        assert!(err.contains("auto, webhook, policy"), "{err}");
    }

    /// `auto` follows what the server serves; `webhook` never takes the policy; `policy` without the
    /// API keeps the webhook, never nothing.
    #[test]
    fn resolve_by_what_is_served() {
        use AdmissionMode::*;
        let v1 = Some(PolicyApi::V1);
        let beta = Some(PolicyApi::V1Beta1);
        assert_eq!(Auto.resolve(v1, true), Live::Policy(PolicyApi::V1));
        assert_eq!(Auto.resolve(beta, true), Live::Policy(PolicyApi::V1Beta1));
        assert!(!Auto.resolve(None, true).is_policy());
        assert!(!Webhook.resolve(v1, true).is_policy());
        assert_eq!(Policy.resolve(beta, true), Live::Policy(PolicyApi::V1Beta1));
        let Live::Webhook { why } = Policy.resolve(None, true) else {
            panic!("policy without the API")
        };
        assert!(why.contains("serves no MutatingAdmissionPolicy"), "{why}");
        // No owner, no policy: it would outlive an uninstall.
        for mode in [Auto, Policy] {
            let Live::Webhook { why } = mode.resolve(v1, false) else {
                panic!("{mode} without an owner")
            };
            assert!(why.contains("--webhook-config-name"), "{why}");
        }
    }

    /// Enabled namespaces (annotated, or Linkerd's) are labelled while the policy is live, and no
    /// namespace otherwise: would break if the binding missed an enabled namespace's pods.
    #[test]
    fn enabled_namespaces_are_labelled_while_the_policy_is_live() {
        let meta = |name: &str, multus: Option<&str>| ObjectMeta {
            name: Some(name.into()),
            annotations: multus
                .map(|v| [(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())].into()),
            ..Default::default()
        };
        let policy = Live::Policy(PolicyApi::V1);
        let webhook = AdmissionMode::Webhook.resolve(None, true);
        assert!(wants_label(&meta("a", Some("enabled")), "linkerd", &policy));
        assert!(wants_label(&meta("linkerd", None), "linkerd", &policy));
        assert!(!wants_label(
            &meta("a", Some("disabled")),
            "linkerd",
            &policy
        ));
        assert!(!wants_label(&meta("a", None), "linkerd", &policy));
        assert!(!wants_label(
            &meta("a", Some("enabled")),
            "linkerd",
            &webhook
        ));
        let mut m = meta("a", None);
        assert!(!labelled(&m, "enabled"));
        m.labels = Some(
            [(
                vocab::ADMISSION_NAMESPACE_LABEL.to_string(),
                "enabled".to_string(),
            )]
            .into(),
        );
        assert!(labelled(&m, "enabled"));
        assert!(!labelled(&m, "other"));
    }
}
