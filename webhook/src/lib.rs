//! The mutating admission webhook.
