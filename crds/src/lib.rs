//! Multus' NetworkAttachmentDefinition as a Rust type.
