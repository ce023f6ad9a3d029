//! Benchmarks of linkerd-multus against their physical floors, driven by `bench/run`, which prints
//! every part's rows as one table. Each subcommand of the `linkerd-multus-bench` binary prints rows
//! (see [`row`]); it asserts nothing about time.
//!
//! Parts: [`admission`] (pod creation through the apiserver with the real, the floor and no
//! webhook, one at a time), [`storm`] (the same three at once under a pod-creation storm), [`fixture`] (the pod review every webhook measurement
//! sends), [`floor_webhook`] (the same axum + rustls stack answering a constant review),
//! [`webhook_serve`] (the real webhook, alone),
//! [`fanout`] (the operator process on a dedicated apiserver against a minimal apply client; its
//! ConfigMap [`fanout::edit`] is shared with `scale`),
//! [`optin`] (one namespace opted in or out -> its NAD, against a minimal watch-and-create client),
//! [`shared`] (NAD writes and objects with one shared NAD against one per namespace), [`scale`] (the
//! operator on a simulated cluster grown to OpenShift's maximums); [`requests`] counts what the
//! apiserver served for the fan-out's edit and the scale part alike; [`procs`] and [`go_runtime`]
//! say where the machine's CPU went (each process, the apiserver's garbage collections).

pub mod admission;
pub mod args;
pub mod fanout;
pub mod fixture;
pub mod floor_webhook;
pub mod go_runtime;
pub mod optin;
pub mod procs;
pub mod requests;
pub mod row;
pub mod scale;
pub mod shared;
pub mod storm;
pub mod webhook_serve;
