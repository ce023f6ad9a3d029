//! The node installer behind `linkerd-cni-install` (see the `linkerd-cni-install` binary).
