//! The message-definition DSL: one `message!` invocation per struct lists its fields, their
//! Rust types and the versions in which each field exists, is nullable, or is a tagged field.
//! The macro generates the struct, its `Default` (the schema defaults), and a [`Wire`] impl
//! (decode, encode, minimum wire size, test-value generation). Example:
//!
//! ```text
//! message! {
//!     /// One partition of a Fetch request.
//!     pub struct FetchPartition {
//!         partition: i32 { versions: 0.. },
//!         current_leader_epoch: i32 { versions: 9.., default: -1 },
//!         fetch_offset: i64 { versions: 0.. },
//!         replica_directory_id: Uuid { versions: 17.., tag: (0, 17..) },
//!     }
//! }
//! ```
//!
//! Keys, always in this order: `versions` (required), `nullable`, `tag: (number, versions)`,
//! `default`. Whether the enclosing message version is flexible (compact lengths, a tagged-field
//! section after every struct) is decided once per API in `mod.rs` and passed down in [`Ctx`].
//! Tagged fields must be listed in ascending tag order (they are written in field order).
//!
//! [`Wire`]: super::wire::Wire
//! [`Ctx`]: super::wire::Ctx

use super::wire::{Ctx, VersionRange};

/// One field's version table, built by `message!`.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    pub name: &'static str,
    pub versions: VersionRange,
    pub nullable: Option<VersionRange>,
    pub tag: Option<(u32, VersionRange)>,
}

impl FieldSpec {
    pub fn present(&self, version: i16) -> bool {
        self.versions.contains(version)
    }

    /// Sent in the tagged-field section at this version.
    pub fn tagged(&self, c: Ctx) -> bool {
        self.present(c.version) && matches!(self.tag, Some((_, r)) if r.contains(c.version))
    }

    /// Sent in the fixed field sequence at this version.
    pub fn regular(&self, c: Ctx) -> bool {
        self.present(c.version) && !self.tagged(c)
    }

    pub fn tag_number(&self) -> Option<u32> {
        self.tag.map(|(t, _)| t)
    }

    pub fn ctx(&self, c: Ctx) -> Ctx {
        let nullable = matches!(self.nullable, Some(r) if r.contains(c.version));
        c.field(self.name, nullable)
    }
}

/// `Default::default()` unless the field table names a default.
macro_rules! default_or {
    () => {
        Default::default()
    };
    ($d:expr) => {
        $d
    };
}
pub(crate) use default_or;

macro_rules! message {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty {
                    versions: $versions:expr
                    $(, nullable: $nullable:expr)?
                    $(, tag: ($tag:literal, $tag_versions:expr))?
                    $(, default: $default:expr)?
                    $(,)?
                }
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $crate::protocol::dsl::default_or!($($default)?), )*
                }
            }
        }

        impl $name {
            /// The version table of every field, in wire order.
            pub fn field_specs() -> Vec<$crate::protocol::dsl::FieldSpec> {
                vec![$( $crate::protocol::dsl::field_spec!($name, $field, $versions
                    $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?) ),*]
            }
        }

        impl $crate::protocol::wire::Wire for $name {
            #[allow(unused_mut, unused_variables)]
            fn decode(
                d: &mut $crate::protocol::codec::Decoder,
                c: $crate::protocol::wire::Ctx,
            ) -> Result<Self, $crate::protocol::codec::DecodeError> {
                let mut out = Self::default();
                $({
                    let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                        $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                    if spec.regular(c) {
                        out.$field = <$ty as $crate::protocol::wire::Wire>::decode(d, spec.ctx(c))?;
                    }
                })*
                if c.flexible {
                    const SECTION: &str = concat!(stringify!($name), "._tagged_fields");
                    let count = d.unsigned_varint(SECTION)?;
                    // Each entry takes at least two bytes, so a lying count runs out of frame.
                    for _ in 0..count {
                        let tag = d.unsigned_varint(SECTION)?;
                        let size = d.unsigned_varint(SECTION)? as usize;
                        let start = d.position();
                        let mut value = d.split(size, SECTION)?;
                        $({
                            let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                                $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                            if spec.tagged(c) && spec.tag_number() == Some(tag) {
                                out.$field = <$ty as $crate::protocol::wire::Wire>::decode(
                                    &mut value, spec.ctx(c))?;
                                if value.remaining() != 0 {
                                    return Err($crate::protocol::codec::DecodeError::TaggedFieldSize {
                                        field: spec.name,
                                        position: start,
                                        declared: size,
                                        used: size - value.remaining(),
                                    });
                                }
                            }
                        })*
                        // Unknown tags are skipped: `value` already stepped over them.
                    }
                }
                Ok(out)
            }

            #[allow(unused_mut, unused_variables)]
            fn encode(
                &self,
                e: &mut $crate::protocol::codec::Encoder,
                c: $crate::protocol::wire::Ctx,
            ) -> Result<(), $crate::protocol::codec::EncodeError> {
                let mut tagged_count: u32 = 0;
                $({
                    let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                        $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                    if spec.regular(c) {
                        $crate::protocol::wire::Wire::encode(&self.$field, e, spec.ctx(c))?;
                    } else if spec.tagged(c) {
                        let default: $ty = $crate::protocol::dsl::default_or!($($default)?);
                        if self.$field != default {
                            tagged_count += 1;
                        }
                    }
                })*
                if c.flexible {
                    e.put_unsigned_varint(tagged_count);
                    $({
                        let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                            $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                        let default: $ty = $crate::protocol::dsl::default_or!($($default)?);
                        if let (true, Some(tag)) = (spec.tagged(c), spec.tag_number())
                            && self.$field != default
                        {
                            let mut value = $crate::protocol::codec::Encoder::new();
                            $crate::protocol::wire::Wire::encode(&self.$field, &mut value, spec.ctx(c))?;
                            e.put_unsigned_varint(tag);
                            e.put_unsigned_varint(u32::try_from(value.len()).map_err(|_| {
                                $crate::protocol::codec::EncodeError::TooLong {
                                    field: spec.name,
                                    length: value.len(),
                                    max: u32::MAX as usize,
                                }
                            })?);
                            e.put_slice(&value.into_bytes());
                        }
                    })*
                }
                Ok(())
            }

            #[allow(unused_mut)]
            fn min_size(c: $crate::protocol::wire::Ctx) -> usize {
                let mut size = usize::from(c.flexible);
                $({
                    let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                        $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                    if spec.regular(c) {
                        size += <$ty as $crate::protocol::wire::Wire>::min_size(spec.ctx(c));
                    }
                })*
                size
            }

            #[allow(unused_mut, unused_variables)]
            fn generate(
                g: &mut $crate::protocol::wire::Generator,
                c: $crate::protocol::wire::Ctx,
            ) -> Self {
                let mut out = Self::default();
                $({
                    let spec = $crate::protocol::dsl::field_spec!($name, $field, $versions
                        $(, nullable: $nullable)? $(, tag: ($tag, $tag_versions))?);
                    if spec.present(c.version) {
                        out.$field = <$ty as $crate::protocol::wire::Wire>::generate(g, spec.ctx(c));
                    }
                })*
                out
            }
        }
    };
}
pub(crate) use message;

/// Builds one field's [`FieldSpec`] from its table entry.
macro_rules! field_spec {
    ($name:ident, $field:ident, $versions:expr
        $(, nullable: $nullable:expr)? $(, tag: ($tag:literal, $tag_versions:expr))?) => {
        $crate::protocol::dsl::FieldSpec {
            name: concat!(stringify!($name), ".", stringify!($field)),
            versions: $crate::protocol::wire::VersionRange::of($versions),
            nullable: None $( .or(Some($crate::protocol::wire::VersionRange::of($nullable))) )?,
            tag: None $( .or(Some(($tag, $crate::protocol::wire::VersionRange::of($tag_versions)))) )?,
        }
    };
}
pub(crate) use field_spec;
