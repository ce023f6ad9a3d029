//! `--attach aux-chain`: the node-local view of the enabled namespaces
//! ([`vocab::NAMESPACE_VIEW_FILE_NAME`] in the net dir, beside the plugin's kubeconfig), which the
//! chain file names (`linkerd.enabled-namespaces-file`) so that the plugin, run by Multus for every
//! pod of the node, passes a pod of any other namespace through without asking the apiserver
//! ([`rules::namespace_view`] says why that is safe, stale or not).
//!
//! A metadata watch of Namespaces beside the install loop (as the publisher is): [`Tracker`] (pure)
//! turns its events into the set of enabled namespaces, and the file is written atomically (rename)
//! whenever that set changes once the watch has listed them all. Never before: a half-listed view
//! would pass meshed pods through. An apiserver that cannot be reached leaves the file as it is
//! (nobody can enable a namespace through it meanwhile, and the node's pods are spared the wait); an
//! apiserver that refuses the installer's list or watch (401/403) gets the file removed, since it can
//! no longer be kept current, and the plugin asks the apiserver for every pod as before.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PartialObjectMeta;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use rules::namespace_view::{member, View};
use tokio::task::JoinHandle;

use crate::args::Settings;
use crate::credential;
use crate::error::InstallError;
use crate::files::{self, CONFIG_MODE};

/// How long to wait before building the client again when it cannot be built.
const CLIENT_RETRY: Duration = Duration::from_secs(5);

/// The view as this process writes it (prefix applied).
pub fn file(s: &Settings) -> PathBuf {
    s.net_dir.join(vocab::NAMESPACE_VIEW_FILE_NAME)
}

/// The view as the node (and so the plugin) sees it: what the chain file names.
pub fn file_on_node(s: &Settings) -> String {
    Path::new(&s.net_dir_on_node)
        .join(vocab::NAMESPACE_VIEW_FILE_NAME)
        .to_string_lossy()
        .into_owned()
}

/// The chain's plugin entry naming the view (`linkerd.enabled-namespaces-file`, the node's path),
/// beside the chain's mark ([`crate::aux_chain::mark`]). A `linkerd` value that is not an object is
/// left for the plugin to report.
pub fn name_in(mut entry: serde_json::Value, s: &Settings) -> serde_json::Value {
    if let Some(linkerd) = entry
        .as_object_mut()
        .and_then(|obj| obj.get_mut("linkerd"))
        .and_then(serde_json::Value::as_object_mut)
    {
        linkerd.insert(
            vocab::CNI_CONFIG_NAMESPACE_VIEW_KEY.to_string(),
            serde_json::Value::String(file_on_node(s)),
        );
    }
    entry
}

/// Why the view could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("cannot build the installer's client for the namespace watch")]
    Client(#[source] InstallError),
    #[error(
        "the apiserver refuses the installer's list/watch of namespaces ({code}): its service \
         account needs list and watch on namespaces (the chart grants them with attach=auxChain); \
         without a current view the plugin asks the apiserver for every pod"
    )]
    Refused {
        code: u16,
        #[source]
        source: watcher::Error,
    },
    #[error("the namespace watch failed (retried with backoff; the view is kept meanwhile)")]
    Watch(#[source] watcher::Error),
    #[error("cannot write the view of the enabled namespaces {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot remove the view of the enabled namespaces {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ViewError {
    /// A watch error: refused (401/403: the view cannot be kept current) or transient.
    fn of_watch(e: watcher::Error) -> Self {
        let code = match &e {
            watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
            watcher::Error::WatchError(s) => Some(s.code),
            _ => None,
        };
        match code {
            Some(code @ (401 | 403)) => Self::Refused { code, source: e },
            _ => Self::Watch(e),
        }
    }
}

// === impl Tracker ===

/// PURE: the enabled namespaces from the watch's events. `synced` is None until the first full
/// list is done, so no half-listed set is ever written.
#[derive(Debug)]
pub struct Tracker {
    linkerd_namespace: String,
    synced: Option<BTreeSet<String>>,
    /// The list in progress (between `Init` and `InitDone`).
    listing: Option<BTreeSet<String>>,
}

impl Tracker {
    pub fn new(linkerd_namespace: impl Into<String>) -> Self {
        Self {
            linkerd_namespace: linkerd_namespace.into(),
            synced: None,
            listing: None,
        }
    }

    /// The enabled namespaces once the watch has listed them all.
    pub fn synced(&self) -> Option<&BTreeSet<String>> {
        self.synced.as_ref()
    }

    /// Applies one event; true when the synced set changed (the view must be written).
    pub fn apply(&mut self, event: Event<PartialObjectMeta<Namespace>>) -> bool {
        match event {
            Event::Init => {
                self.listing = Some(BTreeSet::new());
                false
            }
            Event::InitApply(ns) => {
                if let (Some(listing), Some(name)) =
                    (self.listing.as_mut(), ns.metadata.name.as_ref())
                {
                    if member(&ns.metadata, &self.linkerd_namespace) {
                        listing.insert(name.clone());
                    }
                }
                false
            }
            Event::InitDone => match self.listing.take() {
                Some(listed) if self.synced.as_ref() != Some(&listed) => {
                    self.synced = Some(listed);
                    true
                }
                _ => false,
            },
            Event::Apply(ns) => {
                let enabled = member(&ns.metadata, &self.linkerd_namespace);
                self.change(ns.metadata.name.as_deref(), enabled)
            }
            Event::Delete(ns) => self.change(ns.metadata.name.as_deref(), false),
        }
    }

    fn change(&mut self, name: Option<&str>, enabled: bool) -> bool {
        let (Some(set), Some(name)) = (self.synced.as_mut(), name) else {
            return false;
        };
        if enabled {
            set.insert(name.to_string())
        } else {
            set.remove(name)
        }
    }
}

// === the I/O shell ===

/// The watch task; aborted when dropped (the installer's loop holds it for its whole life).
pub struct ViewTask(JoinHandle<()>);

impl Drop for ViewTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts keeping the view on the current runtime.
pub fn spawn(settings: &Settings) -> ViewTask {
    ViewTask(tokio::spawn(keep(settings.clone())))
}

/// Watches namespaces for ever, writing the view whenever the synced set changes.
async fn keep(settings: Settings) {
    let path = file(&settings);
    let writer = settings
        .own_pod
        .as_ref()
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .unwrap_or_default();
    let mut log = Logged::default();
    // The set in the file, once known (read at the first sync): no rewrite of an unchanged set.
    let mut written: Option<BTreeSet<String>> = None;
    loop {
        let client = match credential::installer_config(&settings)
            .await
            .and_then(|config| {
                kube::Client::try_from(config).map_err(|e| InstallError::ApiClient(Box::new(e)))
            }) {
            Ok(client) => client,
            Err(e) => {
                log.error(&ViewError::Client(e));
                tokio::time::sleep(CLIENT_RETRY).await;
                continue;
            }
        };
        let api = Api::<PartialObjectMeta<Namespace>>::all(client);
        let mut tracker = Tracker::new(settings.linkerd_namespace.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let result = match event {
                Ok(event) => match tracker.apply(event).then(|| tracker.synced()).flatten() {
                    Some(set) => write(&path, set, &settings, &writer, &mut written),
                    None => Ok(None),
                },
                Err(e) => match ViewError::of_watch(e) {
                    refused @ ViewError::Refused { .. } => {
                        written = None;
                        // Resynced from a fresh list once the watch is allowed again.
                        tracker = Tracker::new(settings.linkerd_namespace.clone());
                        match remove(&path) {
                            Ok(Some(change)) => tracing::warn!("{change}"),
                            Ok(None) => {}
                            Err(e) => log.error(&e),
                        }
                        Err(refused)
                    }
                    other => Err(other),
                },
            };
            match result {
                Ok(change) => {
                    log.ok();
                    if let Some(change) = change {
                        tracing::info!("{change}");
                    }
                }
                Err(e) => log.error(&e),
            }
        }
    }
}

/// Writes the view of `set` unless the file already lists exactly that set.
fn write(
    path: &Path,
    set: &BTreeSet<String>,
    settings: &Settings,
    writer: &str,
    written: &mut Option<BTreeSet<String>>,
) -> Result<Option<String>, ViewError> {
    if written.is_none() {
        *written = files::read_optional(path)
            .ok()
            .flatten()
            .and_then(|bytes| View::parse(&bytes).ok())
            .map(|view| view.namespaces);
    }
    if written.as_ref() == Some(set) {
        return Ok(None);
    }
    let view = View {
        namespaces: set.clone(),
        linkerd_namespace: settings.linkerd_namespace.clone(),
        written_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        writer: writer.to_string(),
    };
    files::atomic_write(path, &view.render(), CONFIG_MODE).map_err(|source| ViewError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    *written = Some(set.clone());
    Ok(Some(format!(
        "wrote {} ({} enabled namespace(s)): the plugin in Multus' auxiliary chain passes pods of \
         any other namespace through without asking the apiserver",
        path.display(),
        set.len()
    )))
}

/// Removes the view at `path` when it is one (a file of that name that is not stays); what was done.
pub fn remove(path: &Path) -> Result<Option<String>, ViewError> {
    match files::read_optional(path) {
        Ok(Some(bytes)) if View::parse(&bytes).is_err() => {
            return Ok(Some(format!(
                "kept {}: it is not this installer's view of the enabled namespaces",
                path.display()
            )))
        }
        Ok(None) => return Ok(None),
        Ok(Some(_)) | Err(_) => {}
    }
    match files::remove_optional(path) {
        Ok(true) => Ok(Some(format!("removed {}", path.display()))),
        Ok(false) => Ok(None),
        Err(source) => Err(ViewError::Remove {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Logs an error once while it repeats, and its end.
#[derive(Default)]
struct Logged {
    last: Option<String>,
}

impl Logged {
    fn error(&mut self, e: &ViewError) {
        let text = vocab::report::chain(e);
        if self.last.as_ref() != Some(&text) {
            tracing::warn!(error = %text, "the view of the enabled namespaces is not kept current");
            self.last = Some(text);
        }
    }

    fn ok(&mut self) {
        if let Some(previous) = self.last.take() {
            tracing::info!(previous = %previous, "the view of the enabled namespaces is kept again");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn ns(name: &str, annotation: Option<&str>) -> PartialObjectMeta<Namespace> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: annotation.map(|v| {
                    BTreeMap::from([(vocab::MULTUS_ANNOTATION.to_string(), v.to_string())])
                }),
                ..Default::default()
            },
            _phantom: Default::default(),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// Nothing is synced (so nothing written) before the first full list; then each event that
    /// changes the set says so, and one that does not, does not (no rewrite). A relist replaces the
    /// set whole. If this regressed, a half-listed view could pass a meshed pod through, or every
    /// namespace event would rewrite the node's file.
    #[test]
    fn the_set_follows_the_watch() {
        let mut t = Tracker::new("linkerd");
        type Step<'a> = (
            &'a str,
            Event<PartialObjectMeta<Namespace>>,
            bool,
            Option<&'a [&'a str]>,
        );
        let steps: Vec<Step> = vec![
            ("list starts", Event::Init, false, None),
            (
                "listed, enabled",
                Event::InitApply(ns("a", Some("enabled"))),
                false,
                None,
            ),
            ("listed, not", Event::InitApply(ns("b", None)), false, None),
            (
                "listed, control plane",
                Event::InitApply(ns("linkerd", None)),
                false,
                None,
            ),
            ("list done", Event::InitDone, true, Some(&["a", "linkerd"])),
            (
                "annotated",
                Event::Apply(ns("b", Some("enabled"))),
                true,
                Some(&["a", "b", "linkerd"]),
            ),
            (
                "same again",
                Event::Apply(ns("b", Some("enabled"))),
                false,
                Some(&["a", "b", "linkerd"]),
            ),
            (
                "other value",
                Event::Apply(ns("a", Some("disabled"))),
                true,
                Some(&["b", "linkerd"]),
            ),
            (
                "unrelated",
                Event::Apply(ns("c", None)),
                false,
                Some(&["b", "linkerd"]),
            ),
            (
                "deleted",
                Event::Delete(ns("b", Some("enabled"))),
                true,
                Some(&["linkerd"]),
            ),
            ("relist starts", Event::Init, false, Some(&["linkerd"])),
            (
                "relisted",
                Event::InitApply(ns("d", Some("enabled"))),
                false,
                Some(&["linkerd"]),
            ),
            ("relist done", Event::InitDone, true, Some(&["d"])),
            ("relist again", Event::Init, false, Some(&["d"])),
            (
                "same list",
                Event::InitApply(ns("d", Some("enabled"))),
                false,
                Some(&["d"]),
            ),
            ("same list done", Event::InitDone, false, Some(&["d"])),
        ];
        for (step, event, changed, expected) in steps {
            assert_eq!(t.apply(event), changed, "{step}");
            assert_eq!(t.synced(), expected.map(set).as_ref(), "{step}");
        }
        let mut early = Tracker::new("linkerd");
        assert!(
            !early.apply(Event::Apply(ns("a", Some("enabled")))),
            "before any list"
        );
        assert_eq!(early.synced(), None);
    }

    /// A refusal (401/403) is told from a transient failure: only it removes the view.
    #[test]
    fn refusals_are_told_from_transient_failures() {
        let status = |code: u16| kube::core::Status {
            code,
            ..Default::default()
        };
        let refused = ViewError::of_watch(watcher::Error::InitialListFailed(kube::Error::Api(
            Box::new(status(403)),
        )));
        assert!(
            matches!(refused, ViewError::Refused { code: 403, .. }),
            "{refused:?}"
        );
        let refused = ViewError::of_watch(watcher::Error::WatchError(Box::new(status(401))));
        assert!(
            matches!(refused, ViewError::Refused { code: 401, .. }),
            "{refused:?}"
        );
        let gone = ViewError::of_watch(watcher::Error::WatchError(Box::new(status(410))));
        assert!(matches!(gone, ViewError::Watch(_)), "{gone:?}");
        let down = ViewError::of_watch(watcher::Error::NoResourceVersion);
        assert!(matches!(down, ViewError::Watch(_)), "{down:?}");
    }

    /// The uninstall's removal takes only a view; a foreign file of that name stays.
    #[test]
    fn remove_takes_only_a_view() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(vocab::NAMESPACE_VIEW_FILE_NAME);
        assert_eq!(remove(&path).expect("nothing"), None);
        std::fs::write(&path, b"someone else's").expect("write");
        let kept = remove(&path).expect("kept").expect("said");
        assert!(kept.starts_with("kept"), "{kept}");
        assert!(path.exists());
        std::fs::write(&path, View::default().render()).expect("write");
        let removed = remove(&path).expect("removed").expect("said");
        assert!(removed.starts_with("removed"), "{removed}");
        assert!(!path.exists());
    }
}
