//! One shape for the product's settings that take one of a few names (`--attach`, `--admission`,
//! `iptables-mode`): the one table of a setting's names, with what every part derives from it.

/// `named_values!(Type { Variant => "name", ... })`: `Type::ALL` (the variants, in the order the help
/// names them), `Type::VALUES` (their names), `as_str`, `named` (the variant of a name) and `Display`
/// (clap shows a flag's default through it). Each setting keeps its own parsing and error text.
#[macro_export]
macro_rules! named_values {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in the order the help names them.
            pub const ALL: [Self; [$($name),+].len()] = [$(Self::$variant),+];

            /// Their names, in that order.
            pub const VALUES: [&'static str; [$($name),+].len()] = [$($name),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name),+
                }
            }

            /// The value named `name`, if one is.
            pub fn named(name: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == name)
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
