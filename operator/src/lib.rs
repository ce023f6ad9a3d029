//! The linkerd-multus operator.
