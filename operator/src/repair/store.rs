//! PURE: every pod of the cluster as repair keeps it ([`SlimPod`]), by namespace and name, kept from
//! the pod watch's events.
//!
//! Not kube-runtime's reflector store: its objects must carry an `ObjectMeta` (~350 bytes before any
//! content) and it keys each one by an `ObjectRef` holding its name, namespace, uid and
//! resourceVersion a second time. Here a pod is two allocations (itself, and its strings in one),
//! and the table holds a pointer to it, found by hashing the pod's own namespace and name. At
//! OpenShift's maximums every byte a pod costs is 150 KB.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use kube::runtime::watcher;
use rules::pod::PodView;

use super::slim::{SlimPod, WatchedPod};

type Table = HashTable<Box<SlimPod>>;

/// The pods, and during a re-list the pods listed so far.
#[derive(Default)]
pub struct PodStore {
    pods: Table,
    /// Replaces `pods` once the re-list completes, so pods deleted while the watch was down go.
    relisting: Option<Table>,
    hasher: RandomState,
    /// One copy of each namespace's and node's name, shared by their pods.
    names: HashSet<Arc<str>>,
    /// One copy of each containers' view: a pod template's pods all have the same (~180 bytes each,
    /// 27 MB at 150,000 meshed pods, unshared).
    views: HashSet<Arc<PodView>>,
}

/// What an event asks of the repairer.
#[derive(Debug, PartialEq)]
pub enum Applied {
    /// This pod (namespace, name) is new or changed: judge it ([`PodStore::get`]).
    Judge(Arc<str>, Box<str>),
    /// This pod was deleted.
    Gone(Box<SlimPod>),
    /// A list completed: the store holds every pod, this many.
    Listed(usize),
    Nothing,
}

impl PodStore {
    /// Takes in one event of the pod watch.
    pub fn apply(&mut self, event: watcher::Event<WatchedPod>) -> Applied {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(Table::new());
                Applied::Nothing
            }
            watcher::Event::InitApply(pod) => self.insert(pod.pod, true),
            watcher::Event::Apply(pod) => self.insert(pod.pod, false),
            watcher::Event::Delete(pod) => {
                let pod = pod.pod;
                let hash = self.hash(&pod.namespace, pod.name());
                match self
                    .pods
                    .find_entry(hash, |p| same(p, &pod.namespace, pod.name()))
                {
                    Ok(entry) => Applied::Gone(entry.remove().0),
                    Err(_) => Applied::Gone(Box::new(pod)),
                }
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    self.pods = listed;
                }
                // Names and views no pod holds any more (a namespace or node gone, a template
                // changed).
                self.names.retain(|n| Arc::strong_count(n) > 1);
                self.views.retain(|v| Arc::strong_count(v) > 1);
                Applied::Listed(self.pods.len())
            }
        }
    }

    fn insert(&mut self, mut pod: SlimPod, listing: bool) -> Applied {
        let names = &mut self.names;
        pod.share_names(|name| intern(names, name));
        pod.share_view(|view| intern(&mut self.views, view));
        let judge = Applied::Judge(pod.namespace.clone(), pod.name().into());
        let hash = self.hash(&pod.namespace, pod.name());
        let hasher = self.hasher.clone();
        let table = match (&mut self.relisting, listing) {
            (Some(relisting), true) => relisting,
            _ => &mut self.pods,
        };
        #[allow(clippy::borrowed_box)] // the table's own element type
        let rehash = |p: &Box<SlimPod>| hasher.hash_one((&*p.namespace, p.name()));
        match table.entry(hash, |p| same(p, &pod.namespace, pod.name()), rehash) {
            Entry::Occupied(mut e) => **e.get_mut() = pod,
            Entry::Vacant(e) => {
                e.insert(Box::new(pod));
            }
        }
        judge
    }

    /// The pod, as listed so far during a re-list, else as last seen.
    pub fn get(&self, namespace: &str, name: &str) -> Option<&SlimPod> {
        let hash = self.hash(namespace, name);
        let find = |t| find(t, hash, namespace, name);
        self.relisting
            .as_ref()
            .and_then(find)
            .or_else(|| find(&self.pods))
    }

    /// Every pod as of the last complete list and the events since.
    pub fn iter(&self) -> impl Iterator<Item = &SlimPod> {
        self.pods.iter().map(|p| &**p)
    }

    fn hash(&self, namespace: &str, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }
}

/// The one copy of `value` in `set`, which keeps it from now on if it had none.
fn intern<T: Eq + std::hash::Hash + ?Sized>(set: &mut HashSet<Arc<T>>, value: &Arc<T>) -> Arc<T> {
    match set.get(value) {
        Some(shared) => shared.clone(),
        None => {
            set.insert(value.clone());
            value.clone()
        }
    }
}

fn find<'a>(table: &'a Table, hash: u64, namespace: &str, name: &str) -> Option<&'a SlimPod> {
    table.find(hash, |p| same(p, namespace, name)).map(|p| &**p)
}

fn same(pod: &SlimPod, namespace: &str, name: &str) -> bool {
    *pod.namespace == *namespace && pod.name() == name
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
