//! The two Linkerd containers the webhook may change on OpenShift, and nothing else of the spec: the
//! proxy (`linkerd-proxy`, a container or a native-sidecar init container) and the CNI validator
//! (`linkerd-network-validator`, an init container). Pure: the pod's containers as received and the
//! uids they must run as → JSON patch operations on their `securityContext` alone, plus warnings.

use json_patch::jsonptr::{Pointer, PointerBuf};
use json_patch::{AddOperation, PatchOperation};
use serde_json::{json, Value};

use crate::uid_range::UidRange;
use vocab::Uid;

/// One container as the decision sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Container {
    pub name: Option<String>,
    /// The `securityContext` member as received; None when absent.
    pub security_context: Option<Value>,
    /// `restartPolicy` (an init container that keeps running is a native sidecar).
    pub restart_policy: Option<String>,
}

impl Container {
    /// From one element of a container list (anything that is not an object has no name).
    pub fn from_value(value: &Value) -> Self {
        Self {
            name: value
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string),
            security_context: value.get("securityContext").cloned(),
            restart_policy: value
                .get("restartPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// The pod's `containers` and `initContainers`, in order (a list that is not an array is empty), and
/// the pod's own `runAsUser` (what a container without one runs as).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodContainers {
    pub containers: Vec<Container>,
    pub init_containers: Vec<Container>,
    pub pod_run_as_user: Option<Uid>,
}

impl PodContainers {
    /// From the pod's `spec` (None or anything odd: no containers).
    pub fn from_spec(spec: Option<&Value>) -> Self {
        let list = |key: &str| {
            spec.and_then(|s| s.get(key))
                .and_then(Value::as_array)
                .map(|items| items.iter().map(Container::from_value).collect())
                .unwrap_or_default()
        };
        Self {
            containers: list("containers"),
            init_containers: list("initContainers"),
            pod_run_as_user: spec
                .and_then(|s| s.get("securityContext")?.get("runAsUser")?.as_i64())
                .and_then(vocab::uid_from_kubernetes),
        }
    }

    /// The first container in `lists` that `is` accepts, with its securityContext's JSON pointer.
    fn find(
        &self,
        lists: &[&'static str],
        is: impl Fn(&Container, bool) -> bool,
    ) -> Option<(PointerBuf, &Container)> {
        lists.iter().find_map(|list| {
            let init = *list == "initContainers";
            let items = if init {
                &self.init_containers
            } else {
                &self.containers
            };
            items.iter().position(|c| is(c, init)).map(|i| {
                let mut path = Pointer::from_static("/spec").to_buf();
                path.push_back(*list);
                path.push_back(i.to_string());
                path.push_back("securityContext");
                (path, &items[i])
            })
        })
    }

    fn proxy(&self) -> Option<(PointerBuf, &Container)> {
        self.find(&["containers", "initContainers"], |c, init| {
            c.name.as_deref().is_some_and(|name| {
                vocab::is_proxy_container(name, init, c.restart_policy.as_deref())
            })
        })
    }

    fn validator(&self) -> Option<(PointerBuf, &Container)> {
        self.find(&["initContainers"], |c, _| {
            c.name.as_deref() == Some(vocab::VALIDATOR_CONTAINER)
        })
    }

    /// True when the pod has a proxy container (or native-sidecar init container).
    pub fn has_proxy(&self) -> bool {
        self.proxy().is_some()
    }
}

/// `runAsUser`/`runAsGroup` of the container's own securityContext, when it names a uid (or gid).
pub(crate) fn run_as(c: &Container, field: &str) -> Option<Uid> {
    vocab::uid_from_kubernetes(c.security_context.as_ref()?.get(field)?.as_i64()?)
}

/// What [`align`] produces.
#[derive(Debug, Default)]
pub struct Aligned {
    pub ops: Vec<PatchOperation>,
    pub warnings: Vec<String>,
}

/// Makes the proxy run as `proxy_uid` (None: leave it, the uid is not the webhook's to enforce) and the
/// validator as a uid of `range` other than the proxy's, changing only what differs.
pub fn align(pod: &PodContainers, range: UidRange, proxy_uid: Option<Uid>) -> Aligned {
    let mut out = Aligned::default();
    if let (Some(uid), Some((path, proxy))) = (proxy_uid, pod.proxy()) {
        if run_as(proxy, "runAsUser") != Some(uid) {
            set(&mut out, &path, proxy, &[("runAsUser", uid)]);
        }
    }
    if let Some((path, validator)) = pod.validator() {
        // The validator checks that a test connection is redirected to the proxy; running as the proxy's
        // uid it would be exempt from the rules and fail. Any other uid of the range does.
        let ok = |uid: Option<Uid>| uid.is_some_and(|u| range.contains(u) && Some(u) != proxy_uid);
        let user = run_as(validator, "runAsUser");
        let target = match user {
            Some(u) if ok(Some(u)) => Some(u),
            _ => range.other_than(proxy_uid),
        };
        let mut fields = Vec::new();
        // An absent runAsUser is left to the platform, which picks the range's first uid.
        if has_field(validator, "runAsUser") && !ok(user) {
            fields.extend(target.map(|t| ("runAsUser", t)));
        }
        let group = run_as(validator, "runAsGroup");
        if has_field(validator, "runAsGroup") && !group.is_some_and(|g| range.contains(g)) {
            fields.extend(target.map(|t| ("runAsGroup", t)));
        }
        if !fields.is_empty() {
            set(&mut out, &path, validator, &fields);
        }
    }
    out
}

fn has_field(c: &Container, field: &str) -> bool {
    c.security_context
        .as_ref()
        .and_then(|s| s.get(field))
        .is_some_and(|v| !v.is_null())
}

/// `add` operations setting `fields` in the container's securityContext at `path`: one add of the whole
/// object when it is absent or null, else one per field (RFC 6902 `add` replaces an existing member).
fn set(out: &mut Aligned, path: &Pointer, c: &Container, fields: &[(&str, Uid)]) {
    match &c.security_context {
        None | Some(Value::Null) => {
            let object: serde_json::Map<String, Value> = fields
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            out.ops.push(PatchOperation::Add(AddOperation {
                path: path.to_buf(),
                value: Value::Object(object),
            }));
        }
        Some(Value::Object(_)) => {
            for (k, v) in fields {
                let mut field = path.to_buf();
                field.push_back(*k);
                out.ops.push(PatchOperation::Add(AddOperation {
                    path: field,
                    value: json!(v),
                }));
            }
        }
        Some(_) => out.warnings.push(format!(
            "linkerd-multus: container {} left unchanged: its securityContext is not an object",
            c.name.as_deref().unwrap_or_default()
        )),
    }
}
