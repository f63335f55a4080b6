//! Bounded primitives of Kafka's wire format.
//!
//! The one rule of this file: **a length read from the wire is never trusted beyond the bytes
//! left in the frame.** Every string, byte blob and array length is checked against
//! [`Decoder::remaining`] before anything is sliced or allocated, so the memory a decode can
//! claim is a small constant times the frame size, whatever the lengths say. Blobs (`bytes`,
//! `records`) are returned as [`Bytes`] slices of the frame: no copy.
//!
//! Positions in errors are byte offsets from the start of the frame (the first byte after the
//! int32 size prefix), so a bad frame can be found with `xxd -s <position>`.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a frame could not be decoded. Every variant names the field (as `Struct.field`) and the
/// frame offset where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{field} at byte {position}: needs {needed} bytes, only {remaining} left in the frame")]
    Truncated {
        field: &'static str,
        position: usize,
        needed: usize,
        remaining: usize,
    },
    #[error(
        "{field} at byte {position}: length {length} needs at least {needed} bytes, only {remaining} left in the frame"
    )]
    LengthExceedsFrame {
        field: &'static str,
        position: usize,
        length: i64,
        needed: u64,
        remaining: usize,
    },
    #[error("{field} at byte {position}: invalid length {length}")]
    InvalidLength {
        field: &'static str,
        position: usize,
        length: i64,
    },
    #[error("{field} at byte {position}: null in a version where the field is not nullable")]
    NullNotAllowed {
        field: &'static str,
        position: usize,
    },
    #[error("{field} at byte {position}: string is not valid UTF-8")]
    InvalidUtf8 {
        field: &'static str,
        position: usize,
    },
    #[error("{field} at byte {position}: varint longer than {max_bytes} bytes")]
    VarintTooLong {
        field: &'static str,
        position: usize,
        max_bytes: usize,
    },
    #[error(
        "{field} at byte {position}: tagged field declared {declared} bytes, its value used {used}"
    )]
    TaggedFieldSize {
        field: &'static str,
        position: usize,
        declared: usize,
        used: usize,
    },
    /// Bytes after a complete **response**. Requests have no such error: their trailing bytes
    /// are ignored, as Kafka's brokers ignore them (`decode_request_frame`).
    #[error(
        "{remaining} trailing bytes at byte {position} after a complete api key {api_key} v{version} message"
    )]
    TrailingBytes {
        api_key: i16,
        version: i16,
        position: usize,
        remaining: usize,
    },
    /// A known API at a version we do not speak. The server answers ApiVersions with
    /// UNSUPPORTED_VERSION (KIP-511) and closes the connection for any other API.
    #[error(
        "api key {api_key} version {version} is not supported (correlation id {correlation_id})"
    )]
    UnsupportedVersion {
        api_key: i16,
        version: i16,
        correlation_id: i32,
    },
    #[error("api key {api_key} is not supported (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error("frame size {size_bytes} is outside 0..={max_bytes}")]
    FrameSize { size_bytes: i64, max_bytes: usize },
}

/// Why a value could not be encoded (the value does not fit the wire format at this version).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("{field}: null in a version where the field is not nullable")]
    NullNotAllowed { field: &'static str },
    #[error("{field}: length {length} exceeds the wire maximum {max}")]
    TooLong {
        field: &'static str,
        length: usize,
        max: usize,
    },
    #[error("{field}: records held outside memory can only be sent with encode_response_parts")]
    ExternalRecords { field: &'static str },
    #[error("api key {api_key} version {version} is not supported")]
    UnsupportedVersion { api_key: i16, version: i16 },
    #[error("the header names api key {header_api_key}, the body is api key {body_api_key}")]
    ApiKeyMismatch {
        header_api_key: i16,
        body_api_key: i16,
    },
    #[error("frame of {size_bytes} bytes does not fit the int32 size prefix")]
    FrameTooLarge { size_bytes: usize },
}

/// A cursor over one frame. Sub-decoders (for a tagged field's value) share the frame and keep
/// absolute positions, but end where the field's declared size ends.
#[derive(Debug, Clone)]
pub struct Decoder {
    frame: Bytes,
    position: usize,
    end: usize,
}

impl Decoder {
    pub fn new(frame: Bytes) -> Self {
        let end = frame.len();
        Decoder {
            frame,
            position: 0,
            end,
        }
    }

    /// Offset of the next byte from the start of the frame.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn remaining(&self) -> usize {
        debug_assert!(self.position <= self.end);
        self.end - self.position
    }

    /// A decoder over the next `size` bytes, which this decoder skips.
    pub fn split(&mut self, size: usize, field: &'static str) -> Result<Decoder, DecodeError> {
        self.ensure(size, field)?;
        let sub = Decoder {
            frame: self.frame.clone(),
            position: self.position,
            end: self.position + size,
        };
        self.position += size;
        Ok(sub)
    }

    fn ensure(&self, needed: usize, field: &'static str) -> Result<(), DecodeError> {
        if needed > self.remaining() {
            return Err(DecodeError::Truncated {
                field,
                position: self.position,
                needed,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        self.ensure(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.frame[self.position..self.position + N]);
        self.position += N;
        Ok(out)
    }

    pub fn i8(&mut self, field: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }
    pub fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }
    pub fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }
    pub fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }
    pub fn f64(&mut self, field: &'static str) -> Result<f64, DecodeError> {
        Ok(f64::from_be_bytes(self.array(field)?))
    }
    /// Kafka's boolean: any non-zero byte is true (as the Java reader does).
    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        Ok(self.array::<1>(field)?[0] != 0)
    }
    pub fn uuid(&mut self, field: &'static str) -> Result<[u8; 16], DecodeError> {
        self.array(field)
    }

    /// Unsigned LEB128, at most 5 bytes, the fifth carrying at most 4 bits (u32).
    pub fn unsigned_varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let start = self.position;
        let mut value: u32 = 0;
        for i in 0..5 {
            let byte = self.array::<1>(field)?[0];
            if i == 4 && byte > 0x0f {
                return Err(DecodeError::VarintTooLong {
                    field,
                    position: start,
                    max_bytes: 5,
                });
            }
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong {
            field,
            position: start,
            max_bytes: 5,
        })
    }

    /// Unsigned LEB128 of a u64, at most 10 bytes.
    pub fn unsigned_varlong(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let start = self.position;
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = self.array::<1>(field)?[0];
            if i == 9 && byte > 0x01 {
                return Err(DecodeError::VarintTooLong {
                    field,
                    position: start,
                    max_bytes: 10,
                });
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintTooLong {
            field,
            position: start,
            max_bytes: 10,
        })
    }

    /// Zig-zag signed varint (record fields).
    pub fn varint(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        let raw = self.unsigned_varint(field)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// Zig-zag signed varlong (record fields).
    pub fn varlong(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        let raw = self.unsigned_varlong(field)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Reads a length prefix: int16/int32 (`-1` is null) or, when `compact`, an unsigned varint
    /// holding length + 1 (`0` is null). Returns `None` for null. The length is NOT yet checked
    /// against the frame: callers go through [`Decoder::bytes_of_len`] or
    /// [`Decoder::check_count`].
    pub fn length(
        &mut self,
        compact: bool,
        wide: bool,
        field: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let position = self.position;
        let raw: i64 = if compact {
            i64::from(self.unsigned_varint(field)?) - 1
        } else if wide {
            i64::from(self.i32(field)?)
        } else {
            i64::from(self.i16(field)?)
        };
        match raw {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::InvalidLength {
                field,
                position,
                length: n,
            }),
            // Fits: raw is at most u32::MAX - 1.
            n => Ok(Some(n as usize)),
        }
    }

    /// The next `length` bytes as a zero-copy slice of the frame.
    pub fn bytes_of_len(
        &mut self,
        length: usize,
        field: &'static str,
    ) -> Result<Bytes, DecodeError> {
        if length > self.remaining() {
            return Err(DecodeError::LengthExceedsFrame {
                field,
                position: self.position,
                length: length as i64,
                needed: length as u64,
                remaining: self.remaining(),
            });
        }
        let out = self.frame.slice(self.position..self.position + length);
        self.position += length;
        Ok(out)
    }

    /// Checks that `count` elements of at least `min_element_bytes` each fit in what is left,
    /// BEFORE the caller reserves memory for them. Zero-size elements count as one byte, so a
    /// count can never exceed the bytes left in the frame.
    pub fn check_count(
        &self,
        count: usize,
        min_element_bytes: usize,
        field: &'static str,
    ) -> Result<(), DecodeError> {
        let needed = (count as u64).saturating_mul(min_element_bytes.max(1) as u64);
        if needed > self.remaining() as u64 {
            return Err(DecodeError::LengthExceedsFrame {
                field,
                position: self.position,
                length: count as i64,
                needed,
                remaining: self.remaining(),
            });
        }
        Ok(())
    }

    /// Skips `length` bytes (an unknown tagged field).
    pub fn skip(&mut self, length: usize, field: &'static str) -> Result<(), DecodeError> {
        self.bytes_of_len(length, field).map(drop)
    }
}

/// Where encoded bytes go. In the normal mode every byte lands in one `BytesMut`; in the "parts"
/// mode a records blob is not copied: the buffer is cut before it and the blob (or the promise
/// of an external region) becomes a part of its own, so the caller can `writev`/`sendfile`.
#[derive(Debug, Default)]
pub struct Encoder {
    buf: BytesMut,
    parts: Option<Vec<ResponsePart>>,
}

/// One piece of an encoded frame, in wire order. See [`crate::protocol::encode_response_parts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponsePart {
    /// Encoded protocol bytes (the size prefix, the header, fields around the records).
    Encoded(Bytes),
    /// A records blob that was given in memory: written by reference, never copied.
    Records(Bytes),
    /// A records region the caller promised to supply (e.g. a file range for `sendfile`);
    /// exactly `size_bytes` bytes must be written here.
    External { token: u64, size_bytes: u32 },
}

impl Encoder {
    pub fn new() -> Self {
        Encoder::default()
    }

    pub(crate) fn with_parts() -> Self {
        Encoder {
            buf: BytesMut::new(),
            parts: Some(Vec::new()),
        }
    }

    /// Bytes written so far into the current (unsplit) buffer.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn into_bytes(self) -> Bytes {
        debug_assert!(self.parts.is_none());
        self.buf.freeze()
    }

    pub(crate) fn into_parts(mut self) -> Vec<ResponsePart> {
        let mut parts = self.parts.take().unwrap_or_default();
        if !self.buf.is_empty() {
            parts.push(ResponsePart::Encoded(self.buf.split().freeze()));
        }
        parts
    }

    pub(crate) fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    pub fn put_i8(&mut self, v: i8) {
        self.buf.put_i8(v)
    }
    pub fn put_i16(&mut self, v: i16) {
        self.buf.put_i16(v)
    }
    pub fn put_i32(&mut self, v: i32) {
        self.buf.put_i32(v)
    }
    pub fn put_i64(&mut self, v: i64) {
        self.buf.put_i64(v)
    }
    pub fn put_u16(&mut self, v: u16) {
        self.buf.put_u16(v)
    }
    pub fn put_u32(&mut self, v: u32) {
        self.buf.put_u32(v)
    }
    pub fn put_f64(&mut self, v: f64) {
        self.buf.put_f64(v)
    }
    pub fn put_bool(&mut self, v: bool) {
        self.buf.put_u8(u8::from(v))
    }
    pub fn put_uuid(&mut self, v: &[u8; 16]) {
        self.buf.put_slice(v)
    }
    pub fn put_slice(&mut self, v: &[u8]) {
        self.buf.put_slice(v)
    }

    pub fn put_unsigned_varint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8)
    }

    pub fn put_unsigned_varlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8)
    }

    pub fn put_varint(&mut self, v: i32) {
        self.put_unsigned_varint(((v << 1) ^ (v >> 31)) as u32)
    }

    pub fn put_varlong(&mut self, v: i64) {
        self.put_unsigned_varlong(((v << 1) ^ (v >> 63)) as u64)
    }

    /// Writes a length prefix (see [`Decoder::length`]); `None` writes null.
    pub fn put_length(
        &mut self,
        length: Option<usize>,
        compact: bool,
        wide: bool,
        field: &'static str,
    ) -> Result<(), EncodeError> {
        let max = if compact || wide {
            i32::MAX as usize - 1
        } else {
            i16::MAX as usize
        };
        match length {
            Some(n) if n > max => Err(EncodeError::TooLong {
                field,
                length: n,
                max,
            }),
            Some(n) if compact => {
                self.put_unsigned_varint(n as u32 + 1);
                Ok(())
            }
            Some(n) if wide => {
                self.put_i32(n as i32);
                Ok(())
            }
            Some(n) => {
                self.put_i16(n as i16);
                Ok(())
            }
            None if compact => {
                self.put_unsigned_varint(0);
                Ok(())
            }
            None if wide => {
                self.put_i32(-1);
                Ok(())
            }
            None => {
                self.put_i16(-1);
                Ok(())
            }
        }
    }

    /// Writes a records blob: copied in the normal mode, by reference in the parts mode.
    pub(crate) fn put_records_blob(&mut self, blob: &Bytes) {
        match &mut self.parts {
            Some(parts) => {
                if !self.buf.is_empty() {
                    parts.push(ResponsePart::Encoded(self.buf.split().freeze()));
                }
                parts.push(ResponsePart::Records(blob.clone()));
            }
            None => self.buf.put_slice(blob),
        }
    }

    /// Registers an external records region. Only the parts mode can carry one.
    pub(crate) fn put_external_records(
        &mut self,
        token: u64,
        size_bytes: u32,
        field: &'static str,
    ) -> Result<(), EncodeError> {
        match &mut self.parts {
            Some(parts) => {
                if !self.buf.is_empty() {
                    parts.push(ResponsePart::Encoded(self.buf.split().freeze()));
                }
                parts.push(ResponsePart::External { token, size_bytes });
                Ok(())
            }
            None => Err(EncodeError::ExternalRecords { field }),
        }
    }
}
