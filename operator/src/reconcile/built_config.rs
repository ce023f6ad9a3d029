//! The NAD config, built once per version of the CNI ConfigMap.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;

use crate::nad_config::NadConfigError;

/// The NAD config last built, with the ConfigMap version (uid, resourceVersion) it came from. A
/// ConfigMap edit reconciles every enabled namespace, and each would otherwise parse and render the
/// same JSON again.
#[derive(Debug, Default)]
pub(super) struct BuiltConfig(Mutex<Option<(Version, Arc<str>)>>);

/// A ConfigMap's uid and resourceVersion.
type Version = (String, String);

impl BuiltConfig {
    /// The config of `cm`, built at most once per version; a ConfigMap without a uid or
    /// resourceVersion (never one from the apiserver) is built each time.
    pub(super) fn get_or_build(
        &self,
        cm: Option<&ConfigMap>,
        build: impl FnOnce() -> Result<String, NadConfigError>,
    ) -> Result<Arc<str>, NadConfigError> {
        // Compared borrowed: a reconcile that finds the config built allocates nothing.
        let version = cm.and_then(|cm| {
            Some((
                cm.metadata.uid.as_deref()?,
                cm.metadata.resource_version.as_deref()?,
            ))
        });
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some((uid, rv)), Some(((built_uid, built_rv), config))) = (version, last.as_ref()) {
            if uid == built_uid && rv == built_rv {
                return Ok(config.clone());
            }
        }
        let config: Arc<str> = build()?.into();
        if let Some((uid, rv)) = version {
            *last = Some(((uid.to_string(), rv.to_string()), config.clone()));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn cm(uid: Option<&str>, rv: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.uid = uid.map(str::to_string);
        cm.metadata.resource_version = rv.map(str::to_string);
        cm
    }

    /// Builds through `built`, counting the builds in `builds`.
    fn get(built: &BuiltConfig, cm: &ConfigMap, config: &str, builds: &Cell<u32>) -> Arc<str> {
        built
            .get_or_build(Some(cm), || {
                builds.set(builds.get() + 1);
                Ok(config.to_string())
            })
            .expect("built")
    }

    #[test]
    fn one_build_per_version_of_the_configmap() {
        let (built, builds) = (BuiltConfig::default(), Cell::new(0));
        let v1 = cm(Some("u1"), Some("10"));
        assert_eq!(&*get(&built, &v1, "a", &builds), "a");
        assert_eq!(&*get(&built, &v1, "ignored", &builds), "a");
        assert_eq!(builds.get(), 1);
        // Edited: a new resourceVersion; recreated: a new uid (its resourceVersion may repeat).
        assert_eq!(
            &*get(&built, &cm(Some("u1"), Some("11")), "b", &builds),
            "b"
        );
        assert_eq!(
            &*get(&built, &cm(Some("u2"), Some("11")), "c", &builds),
            "c"
        );
        assert_eq!(builds.get(), 3);
    }

    #[test]
    fn no_version_or_a_failed_build_is_never_kept() {
        let (built, builds) = (BuiltConfig::default(), Cell::new(0));
        let unversioned = cm(Some("u1"), None);
        get(&built, &unversioned, "a", &builds);
        get(&built, &unversioned, "a", &builds);
        assert_eq!(builds.get(), 2);

        let v1 = cm(Some("u1"), Some("10"));
        let failed = built.get_or_build(Some(&v1), || {
            Err(NadConfigError::ConfigMapMissing {
                namespace: "ns".into(),
                name: "cm".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(&*get(&built, &v1, "a", &builds), "a");
        assert_eq!(builds.get(), 3);
    }
}
