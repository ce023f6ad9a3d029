//! Benchmarks of linkerd-multus against their physical floors, driven by `bench/run`, which prints
//! every part's rows as one table. Each subcommand of the `linkerd-multus-bench` binary prints rows
//! (see [`row`]); it asserts nothing about time.
//!
//! Parts: [`fixture`] (the pod review every webhook measurement sends), [`floor_webhook`] (the same
//! axum + rustls stack answering a constant review), [`webhook_serve`] (the real webhook, alone),
//! [`fanout`] (the operator process on a dedicated apiserver against a minimal apply client).

pub mod fanout;
pub mod fixture;
pub mod floor_webhook;
pub mod row;
pub mod webhook_serve;
