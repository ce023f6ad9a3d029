//! A uniquely named namespace per test, so tests never share state and can run in parallel.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::guard::DeleteOnDrop;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace created for one test; deleted through the client it was created with when dropped,
/// unless `LINKERD_MULTUS_KEEP_NAMESPACES=1`.
pub struct TestNamespace {
    pub name: String,
    guard: DeleteOnDrop<Namespace>,
}

impl TestNamespace {
    /// Creates `<prefix>-<pid>-<n>` with no annotations.
    pub async fn create(client: &Client, prefix: &str) -> Self {
        Self::create_with(client, prefix, BTreeMap::new()).await
    }

    /// Creates a fresh namespace carrying `annotations`.
    pub async fn create_with(
        client: &Client,
        prefix: &str,
        annotations: BTreeMap<String, String>,
    ) -> Self {
        let name = unique_name(prefix);
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        };
        let api = Api::<Namespace>::all(client.clone());
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating test namespace {name}: {e}"));
        let mut guard = DeleteOnDrop::new(api, name.clone());
        if std::env::var("LINKERD_MULTUS_KEEP_NAMESPACES").as_deref() == Ok("1") {
            guard = guard.keep();
        }
        Self { name, guard }
    }

    /// Deletes the namespace now (tests that check what happens on deletion call this).
    pub async fn delete(&self) {
        self.guard.delete().await;
    }
}

/// A DNS-1123 name unique to this process and call: `<prefix>-<pid>-<n>`, trimmed to 63 characters.
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("-{}-{n}", std::process::id());
    let keep = 63usize.saturating_sub(suffix.len());
    let mut base: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(keep)
        .collect();
    while base.ends_with('-') {
        base.pop();
    }
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::unique_name;

    #[test]
    fn names_are_unique_and_valid() {
        let a = unique_name("Foo_Bar");
        let b = unique_name("Foo_Bar");
        assert_ne!(a, b);
        assert!(a.starts_with("foo-bar-"), "{a}");
        let long = unique_name(&"x".repeat(100));
        assert!(long.len() <= 63, "{long}");
    }
}
