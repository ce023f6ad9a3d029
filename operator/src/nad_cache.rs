//! What the NAD watch keeps of each NAD: a [`NadView`] with just what the plan reads.
//!
//! A cached `DynamicObject`, even slimmed, cost ~2 KB per namespace at 10,000 namespaces (heaptrack:
//! a label map's B-tree node, an `ApiResource` copied into every store key, a JSON map for the data).
//! The view is a few strings, and its store keys carry no per-entry type information.

use std::borrow::Cow;

use kube::runtime::reflector::Lookup;
use kube::runtime::watcher;

use crate::desired::{ConfigDigest, Existing};
use crate::nad_read::NadRead;

/// One NAD named `--nad-name`, as the plan needs it. Read from the narrow decode, so a foreign NAD of
/// any shape is still seen (and judged foreign).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NadView {
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Carries the operator's managed-by label.
    pub owned: bool,
    /// See [`Existing::adoptable`].
    pub adoptable: bool,
    /// Digest of `spec.config`, when it is a string.
    pub config: Option<ConfigDigest>,
    /// See [`Existing::shared`].
    pub shared: bool,
}

impl NadView {
    pub fn of(nad: &NadRead) -> Self {
        let meta = &nad.metadata;
        let e = existing(nad);
        Self {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone(),
            uid: e.uid,
            resource_version: meta.resource_version.clone(),
            owned: e.owned,
            adoptable: e.adoptable,
            config: e.config,
            shared: e.shared,
        }
    }

    pub fn existing(&self) -> Existing {
        Existing {
            owned: self.owned,
            adoptable: self.adoptable,
            config: self.config,
            uid: self.uid.clone(),
            shared: self.shared,
        }
    }
}

/// What the plan reads of a NAD (the watch's view and a live read give the same).
pub fn existing(nad: &NadRead) -> Existing {
    Existing::of(
        nad.metadata.labels.as_ref(),
        nad.metadata.annotations.as_ref(),
        nad.config.as_deref(),
        nad.metadata.uid.clone(),
    )
}

/// The watch's events with each object turned into its view.
pub fn view_event(event: watcher::Event<NadRead>) -> watcher::Event<NadView> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(NadView::of(&o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(NadView::of(&o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(NadView::of(&o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Store keys only need name and namespace; the kind is fixed, so no type information per key.
impl Lookup for NadView {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "NetworkAttachmentDefinition".into()
    }

    // The store never builds API paths from these; they only label the object in logs.
    fn group(_: &()) -> Cow<'_, str> {
        "k8s.cni.cncf.io".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "network-attachment-definitions".into()
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.namespace.as_deref().map(Cow::Borrowed)
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.resource_version.as_deref().map(Cow::Borrowed)
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        self.uid.as_deref().map(Cow::Borrowed)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{json, Value};

    use super::*;

    fn nad(labels: &[(&str, &str)], spec: Value) -> NadRead {
        let labels: BTreeMap<_, _> = labels.iter().copied().collect();
        serde_json::from_value(json!({
            "metadata": { "name": "linkerd-cni", "namespace": "apps", "uid": "u-1", "labels": labels },
            "spec": spec,
        }))
        .expect("a NAD")
    }

    /// The view gives the plan the same `Existing` a live read gives.
    #[test]
    fn view_keeps_what_the_plan_reads() {
        let ours = nad(
            &[
                (vocab::MANAGED_BY_LABEL, vocab::MANAGED_BY_VALUE),
                ("team", "a"),
            ],
            json!({ "config": "{\"a\":1}" }),
        );
        let view = NadView::of(&ours);
        assert_eq!(
            view.existing(),
            Existing {
                owned: true,
                adoptable: false,
                config: Some(ConfigDigest::of("{\"a\":1}")),
                uid: Some("u-1".into()),
                shared: false,
            }
        );
        assert_eq!(view.name, "linkerd-cni");
        assert_eq!(view.namespace.as_deref(), Some("apps"));

        let mut shared = ours.clone();
        shared.metadata.annotations = Some(BTreeMap::from([(
            vocab::SHARED_NAD_ANNOTATION.to_string(),
            vocab::SHARED_NAD_VALUE.to_string(),
        )]));
        assert!(NadView::of(&shared).existing().owned_shared());

        let foreign = nad(&[("team", "a")], json!(3));
        let view = NadView::of(&foreign);
        assert!(!view.owned);
        assert_eq!(view.config, None);
    }

    /// Store keys built from a view and from a name + namespace match, as the reconciler looks up.
    #[test]
    fn store_finds_a_view_by_name_and_namespace() {
        use kube::runtime::reflector::{self, ObjectRef};
        let mut writer = reflector::store::Writer::<NadView>::default();
        let view = NadView::of(&nad(&[], Value::Null));
        writer.apply_watcher_event(&view_event(watcher::Event::Apply(nad(&[], Value::Null))));
        let store = writer.as_reader();
        let found = store.get(&ObjectRef::new("linkerd-cni").within("apps"));
        assert_eq!(found.as_deref(), Some(&view));
        assert!(store
            .get(&ObjectRef::new("linkerd-cni").within("other"))
            .is_none());
    }
}
