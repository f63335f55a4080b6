//! How each Rust field type maps to Kafka's wire types, version by version.
//!
//! A message field is declared with a Rust type; the [`Wire`] impl of that type picks the
//! encoding from the [`Ctx`] (flexible → compact lengths; nullable in this version or not):
//!
//! | Rust type | Kafka type |
//! | --- | --- |
//! | `i8 i16 i32 i64 u16 u32 f64 bool` | `int8 int16 int32 int64 uint16 uint32 float64 bool` |
//! | [`Uuid`] | `uuid` |
//! | `String` / `Option<String>` | `string` / nullable `string` (compact when flexible) |
//! | `Bytes` / `Option<Bytes>` | `bytes` / nullable `bytes` (zero-copy slices of the frame) |
//! | [`Records`] / `Option<Records>` | `records` (response side: may name an external region) |
//! | `Vec<T>` / `Option<Vec<T>>` | `[]T` / nullable `[]T` |
//! | a `message!` struct | a nested struct |

use std::fmt;
use std::ops::{Bound, RangeBounds};

use bytes::Bytes;

use super::codec::{DecodeError, Decoder, EncodeError, Encoder};

/// Everything a field's encoding depends on besides its value.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    pub version: i16,
    /// The message version is flexible (KIP-482): compact lengths and tagged fields.
    pub flexible: bool,
    /// This field may be null at this version.
    pub nullable: bool,
    /// `Struct.field`, for errors.
    pub field: &'static str,
}

impl Ctx {
    pub fn new(version: i16, flexible: bool) -> Self {
        Ctx {
            version,
            flexible,
            nullable: false,
            field: "",
        }
    }

    pub fn field(self, field: &'static str, nullable: bool) -> Self {
        Ctx {
            field,
            nullable,
            ..self
        }
    }
}

/// An inclusive range of versions, `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    pub min: i16,
    pub max: i16,
}

impl VersionRange {
    pub fn contains(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }

    /// `4..`, `0..=14`, `12..=12` as written in the message tables.
    pub fn of(range: impl RangeBounds<i16>) -> Self {
        let min = match range.start_bound() {
            Bound::Included(&v) => v,
            Bound::Excluded(&v) => v + 1,
            Bound::Unbounded => 0,
        };
        let max = match range.end_bound() {
            Bound::Included(&v) => v,
            Bound::Excluded(&v) => v - 1,
            Bound::Unbounded => i16::MAX,
        };
        VersionRange { min, max }
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.max == i16::MAX {
            write!(f, "{}+", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

/// A 128-bit UUID (topic ids, directory ids), kept as its 16 wire bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub const ZERO: Uuid = Uuid([0; 16]);
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A records field of a response (Fetch `Records`, FetchSnapshot `UnalignedRecords`).
///
/// Decoded records are always [`Records::Bytes`] (a slice of the frame). A server may instead
/// put [`Records::External`]: the frame then carries the length prefix and the caller writes
/// `size_bytes` bytes from wherever it keeps them (see `encode_response_parts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records {
    Bytes(Bytes),
    External { token: u64, size_bytes: u32 },
}

impl Default for Records {
    fn default() -> Self {
        Records::Bytes(Bytes::new())
    }
}

impl Records {
    pub fn size_bytes(&self) -> usize {
        match self {
            Records::Bytes(b) => b.len(),
            Records::External { size_bytes, .. } => *size_bytes as usize,
        }
    }

    /// The in-memory bytes, if these records are in memory.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Records::Bytes(b) => Some(b),
            Records::External { .. } => None,
        }
    }
}

impl From<Bytes> for Records {
    fn from(b: Bytes) -> Self {
        Records::Bytes(b)
    }
}

/// A Rust type that can be a message field. `decode` must check every wire length against
/// [`Decoder::remaining`] before allocating (see `codec.rs`).
pub trait Wire: Sized + Default + Clone + PartialEq + fmt::Debug {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError>;
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError>;
    /// The fewest bytes a value of this type occupies on the wire in this context; array
    /// decoding multiplies the element count by it before reserving memory.
    fn min_size(c: Ctx) -> usize;
    /// A value valid at this context's version (for differential tests and corpora).
    fn generate(g: &mut Generator, c: Ctx) -> Self;
}

macro_rules! scalar_wire {
    ($($ty:ty => $get:ident, $put:ident, $size:expr, $gen:expr;)*) => {$(
        impl Wire for $ty {
            fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
                d.$get(c.field)
            }
            fn encode(&self, e: &mut Encoder, _c: Ctx) -> Result<(), EncodeError> {
                e.$put(*self);
                Ok(())
            }
            fn min_size(_c: Ctx) -> usize {
                $size
            }
            fn generate(g: &mut Generator, _c: Ctx) -> Self {
                let f: fn(&mut Generator) -> $ty = $gen;
                f(g)
            }
        }
    )*};
}

scalar_wire! {
    i8 => i8, put_i8, 1, |g| g.next_u64() as i8;
    i16 => i16, put_i16, 2, |g| g.small_or_any() as i16;
    i32 => i32, put_i32, 4, |g| g.small_or_any() as i32;
    i64 => i64, put_i64, 8, |g| g.small_or_any();
    u16 => u16, put_u16, 2, |g| g.next_u64() as u16;
    u32 => u32, put_u32, 4, |g| g.next_u64() as u32;
    bool => bool, put_bool, 1, |g| g.next_u64() & 1 == 1;
}

impl Wire for f64 {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        d.f64(c.field)
    }
    fn encode(&self, e: &mut Encoder, _c: Ctx) -> Result<(), EncodeError> {
        e.put_f64(*self);
        Ok(())
    }
    fn min_size(_c: Ctx) -> usize {
        8
    }
    fn generate(g: &mut Generator, _c: Ctx) -> Self {
        // Finite values only, so that values compare equal after a round trip.
        (g.small_or_any() as f64) / 4.0
    }
}

impl Wire for Uuid {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        d.uuid(c.field).map(Uuid)
    }
    fn encode(&self, e: &mut Encoder, _c: Ctx) -> Result<(), EncodeError> {
        e.put_uuid(&self.0);
        Ok(())
    }
    fn min_size(_c: Ctx) -> usize {
        16
    }
    fn generate(g: &mut Generator, _c: Ctx) -> Self {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&g.next_u64().to_be_bytes());
        out[8..].copy_from_slice(&g.next_u64().to_be_bytes());
        Uuid(out)
    }
}

/// A length-prefixed string or blob; `wide` = int32 length (bytes) vs int16 (string).
fn decode_blob(d: &mut Decoder, c: Ctx, wide: bool) -> Result<Option<Bytes>, DecodeError> {
    let position = d.position();
    match d.length(c.flexible, wide, c.field)? {
        None if c.nullable => Ok(None),
        None => Err(DecodeError::NullNotAllowed {
            field: c.field,
            position,
        }),
        Some(n) => d.bytes_of_len(n, c.field).map(Some),
    }
}

fn encode_blob(
    e: &mut Encoder,
    c: Ctx,
    blob: Option<&[u8]>,
    wide: bool,
) -> Result<(), EncodeError> {
    match blob {
        None if !c.nullable => Err(EncodeError::NullNotAllowed { field: c.field }),
        None => e.put_length(None, c.flexible, wide, c.field),
        Some(b) => {
            e.put_length(Some(b.len()), c.flexible, wide, c.field)?;
            e.put_slice(b);
            Ok(())
        }
    }
}

fn blob_min_size(c: Ctx, wide: bool) -> usize {
    if c.flexible {
        1
    } else if wide {
        4
    } else {
        2
    }
}

fn decode_string(d: &mut Decoder, c: Ctx) -> Result<Option<String>, DecodeError> {
    let position = d.position();
    match decode_blob(d, c, false)? {
        None => Ok(None),
        Some(b) => String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| DecodeError::InvalidUtf8 {
                field: c.field,
                position,
            }),
    }
}

impl Wire for String {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        let position = d.position();
        decode_string(d, c.field(c.field, false))?.ok_or(DecodeError::NullNotAllowed {
            field: c.field,
            position,
        })
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_blob(e, c, Some(self.as_bytes()), false)
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, false)
    }
    fn generate(g: &mut Generator, _c: Ctx) -> Self {
        g.string()
    }
}

impl Wire for Option<String> {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        decode_string(d, c)
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_blob(e, c, self.as_deref().map(str::as_bytes), false)
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, false)
    }
    fn generate(g: &mut Generator, c: Ctx) -> Self {
        if c.nullable && g.one_in(4) {
            None
        } else {
            Some(g.string())
        }
    }
}

impl Wire for Bytes {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        let position = d.position();
        decode_blob(d, c.field(c.field, false), true)?.ok_or(DecodeError::NullNotAllowed {
            field: c.field,
            position,
        })
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_blob(e, c, Some(self), true)
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, true)
    }
    fn generate(g: &mut Generator, _c: Ctx) -> Self {
        g.blob()
    }
}

impl Wire for Option<Bytes> {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        decode_blob(d, c, true)
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_blob(e, c, self.as_deref(), true)
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, true)
    }
    fn generate(g: &mut Generator, c: Ctx) -> Self {
        if c.nullable && g.one_in(4) {
            None
        } else {
            Some(g.blob())
        }
    }
}

fn encode_records(e: &mut Encoder, c: Ctx, records: &Records) -> Result<(), EncodeError> {
    e.put_length(Some(records.size_bytes()), c.flexible, true, c.field)?;
    match records {
        Records::Bytes(b) => {
            e.put_records_blob(b);
            Ok(())
        }
        Records::External { token, size_bytes } => {
            e.put_external_records(*token, *size_bytes, c.field)
        }
    }
}

impl Wire for Records {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        Bytes::decode(d, c).map(Records::Bytes)
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_records(e, c, self)
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, true)
    }
    fn generate(g: &mut Generator, _c: Ctx) -> Self {
        Records::Bytes(g.blob())
    }
}

impl Wire for Option<Records> {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        Ok(decode_blob(d, c, true)?.map(Records::Bytes))
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        match self {
            Some(records) => encode_records(e, c, records),
            None if c.nullable => e.put_length(None, c.flexible, true, c.field),
            None => Err(EncodeError::NullNotAllowed { field: c.field }),
        }
    }
    fn min_size(c: Ctx) -> usize {
        blob_min_size(c, true)
    }
    fn generate(g: &mut Generator, c: Ctx) -> Self {
        if c.nullable && g.one_in(4) {
            None
        } else {
            Some(Records::Bytes(g.blob()))
        }
    }
}

fn decode_array<T: Wire>(d: &mut Decoder, c: Ctx) -> Result<Option<Vec<T>>, DecodeError> {
    let position = d.position();
    let element = c.field(c.field, false);
    match d.length(c.flexible, true, c.field)? {
        None if c.nullable => Ok(None),
        None => Err(DecodeError::NullNotAllowed {
            field: c.field,
            position,
        }),
        Some(count) => {
            // The bound check that makes `with_capacity` safe: `count` elements of at least
            // `min_size` bytes each must fit in what is left of the frame.
            d.check_count(count, T::min_size(element), c.field)?;
            let mut out = Vec::with_capacity(count);
            for _ in 0..count {
                out.push(T::decode(d, element)?);
            }
            Ok(Some(out))
        }
    }
}

fn encode_array<T: Wire>(e: &mut Encoder, c: Ctx, items: Option<&[T]>) -> Result<(), EncodeError> {
    match items {
        None if !c.nullable => Err(EncodeError::NullNotAllowed { field: c.field }),
        None => e.put_length(None, c.flexible, true, c.field),
        Some(items) => {
            e.put_length(Some(items.len()), c.flexible, true, c.field)?;
            let element = c.field(c.field, false);
            items.iter().try_for_each(|item| item.encode(e, element))
        }
    }
}

fn array_min_size(c: Ctx) -> usize {
    if c.flexible { 1 } else { 4 }
}

fn generate_array<T: Wire>(g: &mut Generator, c: Ctx) -> Vec<T> {
    let count = g.count();
    let element = c.field(c.field, false);
    g.descend(|g| (0..count).map(|_| T::generate(g, element)).collect())
}

impl<T: Wire> Wire for Vec<T> {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        let position = d.position();
        decode_array(d, c.field(c.field, false))?.ok_or(DecodeError::NullNotAllowed {
            field: c.field,
            position,
        })
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_array(e, c, Some(self))
    }
    fn min_size(c: Ctx) -> usize {
        array_min_size(c)
    }
    fn generate(g: &mut Generator, c: Ctx) -> Self {
        generate_array(g, c)
    }
}

impl<T: Wire> Wire for Option<Vec<T>> {
    fn decode(d: &mut Decoder, c: Ctx) -> Result<Self, DecodeError> {
        decode_array(d, c)
    }
    fn encode(&self, e: &mut Encoder, c: Ctx) -> Result<(), EncodeError> {
        encode_array(e, c, self.as_deref())
    }
    fn min_size(c: Ctx) -> usize {
        array_min_size(c)
    }
    fn generate(g: &mut Generator, c: Ctx) -> Self {
        if c.nullable && g.one_in(4) {
            None
        } else {
            Some(generate_array(g, c))
        }
    }
}

/// A small deterministic value generator (xorshift64*), for differential tests, benches and
/// fuzz corpora. One seed always yields the same values.
#[derive(Debug, Clone)]
pub struct Generator {
    state: u64,
    depth: u32,
}

impl Generator {
    pub fn new(seed: u64) -> Self {
        Generator {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            depth: 0,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.next_u64().is_multiple_of(n)
    }

    /// Mostly small numbers (-1, 0, ids, offsets), sometimes any 64-bit value.
    pub fn small_or_any(&mut self) -> i64 {
        match self.next_u64() % 4 {
            0 => -1,
            1 => (self.next_u64() % 1000) as i64,
            _ => self.next_u64() as i64,
        }
    }

    /// Array lengths shrink with nesting depth so that generated messages stay small.
    fn count(&mut self) -> usize {
        let max = match self.depth {
            0 => 4,
            1 => 3,
            _ => 2,
        };
        (self.next_u64() % (max + 1)) as usize
    }

    fn descend<T>(&mut self, f: impl FnOnce(&mut Generator) -> T) -> T {
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    pub fn string(&mut self) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789._-";
        let len = (self.next_u64() % 12) as usize;
        let mut s: String = (0..len)
            .map(|_| ALPHABET[(self.next_u64() % ALPHABET.len() as u64) as usize] as char)
            .collect();
        if self.one_in(8) {
            // Multi-byte UTF-8: lengths on the wire are bytes, not chars.
            s.push('é');
        }
        s
    }

    pub fn blob(&mut self) -> Bytes {
        let len = (self.next_u64() % 40) as usize;
        Bytes::from((0..len).map(|_| self.next_u64() as u8).collect::<Vec<u8>>())
    }
}
