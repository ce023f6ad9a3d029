//! PURE: the fields of a pod that [`SlimPod::from`](super::slim::SlimPod) reads, decoded off the API
//! and nothing else. A leader decodes every pod of the cluster before it judges again (150,000 at
//! OpenShift's maximums): a typed `Pod` allocates every container's env, ports, probes and mounts only
//! for them to be dropped, and that decode was most of the start's CPU (the scale bench's profile).
//! serde skips an unknown field without allocating.
//!
//! The decision keeps reading a typed `Pod` (one reading of "meshed", "Ready", "validator failed"
//! for every part): [`PodFields`] becomes a `Pod` with these fields alone. The tests in
//! [`super::slim`] hold both readings of each kind of pod equal.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodCondition,
    PodSecurityContext, PodSpec, PodStatus, SecurityContext,
};
use serde::Deserialize;

use crate::listed_pod::Meta;

#[derive(Deserialize)]
pub struct PodFields {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Spec>,
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    node_name: Option<String>,
    #[serde(default)]
    containers: Vec<Member>,
    init_containers: Option<Vec<Member>>,
    security_context: Option<RunAs>,
}

/// A container as `rules::pod::PodView` reads it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    #[serde(default)]
    name: String,
    restart_policy: Option<String>,
    security_context: Option<RunAs>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunAs {
    run_as_user: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    phase: Option<String>,
    conditions: Option<Vec<Condition>>,
    init_container_statuses: Option<Vec<InitStatus>>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitStatus {
    #[serde(default)]
    name: String,
    state: Option<State>,
    last_state: Option<State>,
}

#[derive(Deserialize)]
struct State {
    terminated: Option<Terminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Terminated {
    #[serde(default)]
    exit_code: i32,
}

impl From<PodFields> for Pod {
    fn from(p: PodFields) -> Self {
        Pod {
            metadata: p.metadata.into(),
            spec: p.spec.map(Spec::into_typed),
            status: p.status.map(Status::into_typed),
        }
    }
}

impl Spec {
    fn into_typed(self) -> PodSpec {
        let members = |m: Vec<Member>| m.into_iter().map(Member::into_typed).collect::<Vec<_>>();
        PodSpec {
            node_name: self.node_name,
            containers: members(self.containers),
            init_containers: self.init_containers.map(members),
            security_context: self.security_context.map(|s| PodSecurityContext {
                run_as_user: s.run_as_user,
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

impl Member {
    fn into_typed(self) -> Container {
        Container {
            name: self.name,
            restart_policy: self.restart_policy,
            security_context: self.security_context.map(|s| SecurityContext {
                run_as_user: s.run_as_user,
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

impl Status {
    fn into_typed(self) -> PodStatus {
        let state = |s: Option<State>| {
            s.map(|s| ContainerState {
                terminated: s.terminated.map(|t| ContainerStateTerminated {
                    exit_code: t.exit_code,
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        PodStatus {
            phase: self.phase,
            conditions: self.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| PodCondition {
                        type_: c.type_,
                        status: c.status,
                        ..Default::default()
                    })
                    .collect()
            }),
            init_container_statuses: self.init_container_statuses.map(|ss| {
                ss.into_iter()
                    .map(|s| ContainerStatus {
                        name: s.name,
                        state: state(s.state),
                        last_state: state(s.last_state),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }
    }
}
