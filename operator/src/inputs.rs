//! The `input_healthy` gauge: one series per input the NAD controller reads, 1 when it is usable.
//! Computed at scrape time from the watch stores and [`Health`](crate::reconcile::Health). Inputs
//! never decide `/ready`: the webhook answers without any of them.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{ObjectRef, Store};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use crate::listed::Listed;
use crate::metrics::{INPUT_GAUGE_HELP, INPUT_GAUGE_NAME};
use crate::reconcile::Context;
use rules::namespaces::Want;

/// The `input` label values.
pub const CONFIGMAP: &str = "configmap";
pub const NAD_CRD: &str = "nad_crd";
pub const NAD_WATCH: &str = "nad_watch";
pub const FOREIGN_NADS: &str = "foreign_nads";
pub const SHARED_NAMESPACE: &str = "shared_namespace";
pub const NODE_MULTUS: &str = "node_multus";

/// What the stores and watches say at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub configmap_listed: bool,
    pub configmap_watch_failing: bool,
    /// The NAD config builds from the ConfigMap as last seen.
    pub config_builds: bool,
    pub nads_listed: bool,
    pub nad_watch_failing: bool,
    pub crd_missing: bool,
    /// NADs of our name, not ours, in namespaces that want ours.
    pub foreign_nads: usize,
    /// `--nad-namespace` is set and, the namespaces listed, it is not among them (missing, or
    /// outside `--namespace-selector`): no NAD can be kept, and the webhook's pods name one.
    pub shared_namespace_missing: bool,
    /// `--nad-namespace` is refused by some node's Multus (per-namespace NADs are used instead).
    pub shared_namespace_refused: bool,
    pub node_multus_listed: bool,
    pub node_multus_watch_failing: bool,
}

/// Each input and whether it is usable.
pub fn healthy(s: &Snapshot) -> [(&'static str, bool); 6] {
    [
        (
            CONFIGMAP,
            s.configmap_listed && !s.configmap_watch_failing && s.config_builds,
        ),
        (NAD_CRD, !s.crd_missing),
        (NAD_WATCH, s.nads_listed && !s.nad_watch_failing),
        (FOREIGN_NADS, s.foreign_nads == 0),
        (
            SHARED_NAMESPACE,
            !s.shared_namespace_missing && !s.shared_namespace_refused,
        ),
        (
            NODE_MULTUS,
            s.node_multus_listed && !s.node_multus_watch_failing,
        ),
    ]
}

/// The collector behind the gauge.
pub struct InputGauge {
    ctx: Arc<Context>,
    namespaces: Store<Namespace>,
    namespaces_listed: Listed,
}

impl InputGauge {
    pub fn new(ctx: Arc<Context>, namespaces: Store<Namespace>, namespaces_listed: Listed) -> Self {
        Self {
            ctx,
            namespaces,
            namespaces_listed,
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let ctx = &self.ctx;
        let nad = &ctx.settings.nad;
        let shared = ctx.shared();
        let foreign_nads = ctx
            .nads
            .state()
            .iter()
            .filter(|nad| !nad.owned)
            .filter_map(|nad| nad.namespace.as_deref())
            .filter_map(|ns| self.namespaces.get(&ObjectRef::new(ns)))
            .filter(|ns| nad.want_placed(ns, shared.as_deref()) == Want::Nad)
            .count();
        // In aux-chain mode no NAD is needed: the kind not being served only means there is no NAD
        // of ours left to delete, so neither the kind nor its watch (which cannot list) is at fault.
        let no_kind_needed = !nad.attach.uses_nads() && ctx.health.crd_missing();
        Snapshot {
            configmap_listed: ctx.configmap_listed.now(),
            configmap_watch_failing: ctx.health.configmap_watch_failing(),
            config_builds: ctx.build_config().is_ok(),
            nads_listed: ctx.nads_listed.now() || no_kind_needed,
            nad_watch_failing: ctx.health.nad_watch_failing() && !no_kind_needed,
            crd_missing: ctx.health.crd_missing() && !no_kind_needed,
            foreign_nads,
            shared_namespace_missing: shared_namespace_missing(
                shared.as_deref(),
                &self.namespaces,
                &self.namespaces_listed,
            ),
            shared_namespace_refused: ctx.placement.borrow().refused(),
            node_multus_listed: ctx.node_multus_listed.now(),
            node_multus_watch_failing: ctx.node_multus_health.failing(),
        }
    }
}

/// See [`Snapshot::shared_namespace_missing`]; before the first list nothing is known missing.
pub fn shared_namespace_missing(
    shared: Option<&str>,
    namespaces: &Store<Namespace>,
    listed: &Listed,
) -> bool {
    shared.is_some_and(|ns| listed.now() && namespaces.get(&ObjectRef::new(ns)).is_none())
}

impl std::fmt::Debug for InputGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputGauge").finish_non_exhaustive()
    }
}

impl Collector for InputGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let states = healthy(&self.snapshot());
        let mut family = encoder.encode_descriptor(
            INPUT_GAUGE_NAME,
            INPUT_GAUGE_HELP,
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (input, ok) in states {
            let labels = [("input", input)];
            ConstGauge::new(i64::from(ok)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_good() -> Snapshot {
        Snapshot {
            configmap_listed: true,
            config_builds: true,
            nads_listed: true,
            node_multus_listed: true,
            ..Default::default()
        }
    }

    fn unhealthy(s: &Snapshot) -> Vec<&'static str> {
        healthy(s)
            .into_iter()
            .filter(|(_, ok)| !ok)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn each_fault_marks_its_input_only() {
        assert!(unhealthy(&all_good()).is_empty());
        type Fault = fn(&mut Snapshot);
        let cases: [(Fault, &str); 11] = [
            (|s| s.configmap_listed = false, CONFIGMAP),
            (|s| s.configmap_watch_failing = true, CONFIGMAP),
            (|s| s.config_builds = false, CONFIGMAP),
            (|s| s.crd_missing = true, NAD_CRD),
            (|s| s.nads_listed = false, NAD_WATCH),
            (|s| s.nad_watch_failing = true, NAD_WATCH),
            (|s| s.foreign_nads = 2, FOREIGN_NADS),
            (|s| s.shared_namespace_missing = true, SHARED_NAMESPACE),
            (|s| s.shared_namespace_refused = true, SHARED_NAMESPACE),
            (|s| s.node_multus_listed = false, NODE_MULTUS),
            (|s| s.node_multus_watch_failing = true, NODE_MULTUS),
        ];
        for (fault, input) in cases {
            let mut s = all_good();
            fault(&mut s);
            assert_eq!(unhealthy(&s), vec![input], "{s:?}");
        }
    }

    fn namespace(name: &str, enabled: bool) -> Namespace {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        if enabled {
            ns.metadata.annotations = Some(
                [(
                    vocab::MULTUS_ANNOTATION.into(),
                    vocab::MULTUS_ENABLED.into(),
                )]
                .into(),
            );
        }
        ns
    }

    /// A foreign NAD of our name in an enabled namespace (one NAD per namespace), a
    /// `--nad-namespace` missing from the listed namespaces, the NAD kind not served: each unhealthy
    /// in NAD mode; in aux-chain mode no NAD is wanted anywhere, so none matters and the gauge stays
    /// healthy. A NAD watch failing for another reason is unhealthy in both.
    #[tokio::test]
    async fn aux_chain_mode_has_no_shared_namespace_or_foreign_nad_to_miss() {
        use kube::runtime::{reflector, watcher};
        use rules::attach::Attach;
        use rules::namespaces::NadPlacement;

        use crate::nad_cache::NadView;
        use crate::reconcile::mock_api;

        let per_namespace = NadPlacement::PerNamespace;
        let shared = NadPlacement::Shared("nad-home".into());
        // (mode, placement, the NAD watch failing and whether for want of the kind, unhealthy)
        let cases = [
            (Attach::Nad, per_namespace.clone(), None, vec![FOREIGN_NADS]),
            (Attach::Nad, shared.clone(), None, vec![SHARED_NAMESPACE]),
            (
                Attach::Nad,
                per_namespace.clone(),
                Some(true),
                vec![NAD_CRD, NAD_WATCH, FOREIGN_NADS],
            ),
            (Attach::AuxChain, per_namespace.clone(), None, vec![]),
            (Attach::AuxChain, shared, None, vec![]),
            (Attach::AuxChain, per_namespace.clone(), Some(true), vec![]),
            (
                Attach::AuxChain,
                per_namespace,
                Some(false),
                vec![NAD_WATCH],
            ),
        ];
        for (attach, placement, watch_failed, unhealthy_inputs) in cases {
            let mut settings = mock_api::settings();
            settings.nad.placement = placement.clone();
            settings.nad.attach = attach;
            let mut nads = reflector::store::Writer::<NadView>::default();
            nads.apply_watcher_event(&watcher::Event::Apply(NadView {
                name: mock_api::NAD.into(),
                namespace: Some("app".into()),
                uid: Some("u".into()),
                resource_version: None,
                owned: false,
                adoptable: false,
                config: None,
                shared: false,
            }));
            let (ctx, api) = mock_api::context_with(settings, nads.as_reader(), vec![]);
            if let Some(api_missing) = watch_failed {
                ctx.health.nad_watch_failed(api_missing);
            }
            let mut namespaces = reflector::store::Writer::<Namespace>::default();
            namespaces.apply_watcher_event(&watcher::Event::Apply(namespace("app", true)));
            let (mark, listed) = crate::listed::listed();
            mark.mark();
            let gauge = InputGauge::new(Arc::new(ctx), namespaces.as_reader(), listed);
            let mut snapshot = gauge.snapshot();
            api.finish().await;
            // The inputs this test does not set up read as fine; the NAD watch listed unless it
            // failed, and then only aux-chain mode without the kind reads as listed.
            snapshot.configmap_listed = true;
            snapshot.config_builds = true;
            if watch_failed.is_none() {
                snapshot.nads_listed = true;
            }
            assert_eq!(
                unhealthy(&snapshot),
                unhealthy_inputs,
                "{attach:?} {placement:?} {watch_failed:?}"
            );
        }
    }
}
