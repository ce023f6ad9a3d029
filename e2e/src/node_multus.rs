//! The NodeMultus kind in an API group of a test's own: what a test publishes or writes by hand is
//! seen by no other test's operator (NodeMultus objects are cluster-wide, and one that isolates would
//! change where every operator with `--nad-namespace` attaches pods).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client, CustomResourceExt};
use linkerd_multus_crds::NodeMultus;

use crate::{eventually, unique_name, DeleteOnDrop};

/// A fresh API group for one test's NodeMultus kind.
pub fn test_group(prefix: &str) -> String {
    format!("{}.test.linkerd-multus.io", unique_name(prefix))
}

/// Installs the NodeMultus CRD moved to `group` and waits until it is served; deleted (with its
/// objects) when the guard drops.
pub async fn install_crd_in(
    client: &Client,
    group: &str,
) -> DeleteOnDrop<CustomResourceDefinition> {
    let mut crd = NodeMultus::crd();
    crd.spec.group = group.to_string();
    let name = format!("{}.{group}", crd.spec.names.plural);
    crd.metadata.name = Some(name.clone());
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .unwrap_or_else(|e| panic!("creating CRD {name}: {e}"));
    let guard = DeleteOnDrop::new(api.clone(), name.clone());
    wait_established(&api, &name).await;
    guard
}

/// Waits until the CRD `name` is Established (its kind served).
pub async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) {
    eventually(&format!("CRD {name} is Established"), || async {
        let crd = api.get(name).await.ok()?;
        crd.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// The NodeMultus objects of `group`.
pub fn api(client: &Client, group: &str) -> Api<DynamicObject> {
    let resource = linkerd_multus_crds::node_multus::api_resource(Some(group));
    Api::all_with(client.clone(), &resource)
}
