//! Framing and headers.
//!
//! Every message on a connection is `int32 size` + `size` bytes. A request body starts with a
//! request header:
//!
//! | header | fields | used when |
//! | --- | --- | --- |
//! | v1 | api_key int16, api_version int16, correlation_id int32, client_id nullable int16-string | the API version is not flexible |
//! | v2 | v1 + tagged fields | the API version is flexible (KIP-482) |
//!
//! The client id keeps its int16 length even in v2 (for ApiVersions' sake: a server must be able
//! to read it before it knows what the client speaks). Response headers are v0 (correlation_id)
//! or, for flexible versions, v1 (+ tagged fields), except ApiVersions, whose response always
//! uses v0 (KIP-511).

use bytes::{Buf, Bytes, BytesMut};

use super::codec::{DecodeError, Decoder, EncodeError, Encoder};

/// The request header, v1 or v2. Unknown tagged fields of v2 are skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// The response header, v0 or v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponseHeader {
    pub correlation_id: i32,
}

impl RequestHeader {
    /// Reads the part of the header shared by every version: api key, version, correlation id.
    pub(crate) fn decode_fixed(d: &mut Decoder) -> Result<RequestHeader, DecodeError> {
        Ok(RequestHeader {
            api_key: d.i16("RequestHeader.api_key")?,
            api_version: d.i16("RequestHeader.api_version")?,
            correlation_id: d.i32("RequestHeader.correlation_id")?,
            client_id: None,
        })
    }

    /// Reads the client id (and, in v2, the tagged fields) after [`Self::decode_fixed`].
    pub(crate) fn decode_rest(
        &mut self,
        d: &mut Decoder,
        flexible: bool,
    ) -> Result<(), DecodeError> {
        const FIELD: &str = "RequestHeader.client_id";
        let position = d.position();
        self.client_id = match d.length(false, false, FIELD)? {
            None => None,
            Some(n) => {
                let raw = d.bytes_of_len(n, FIELD)?;
                Some(
                    String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::InvalidUtf8 {
                        field: FIELD,
                        position,
                    })?,
                )
            }
        };
        if flexible {
            skip_tagged_fields(d, "RequestHeader._tagged_fields")?;
        }
        Ok(())
    }

    pub(crate) fn encode(&self, e: &mut Encoder, flexible: bool) -> Result<(), EncodeError> {
        e.put_i16(self.api_key);
        e.put_i16(self.api_version);
        e.put_i32(self.correlation_id);
        let client_id = self.client_id.as_deref().map(str::as_bytes);
        e.put_length(
            client_id.map(<[u8]>::len),
            false,
            false,
            "RequestHeader.client_id",
        )?;
        if let Some(id) = client_id {
            e.put_slice(id);
        }
        if flexible {
            e.put_unsigned_varint(0);
        }
        Ok(())
    }
}

impl ResponseHeader {
    pub(crate) fn decode(d: &mut Decoder, flexible: bool) -> Result<ResponseHeader, DecodeError> {
        let header = ResponseHeader {
            correlation_id: d.i32("ResponseHeader.correlation_id")?,
        };
        if flexible {
            skip_tagged_fields(d, "ResponseHeader._tagged_fields")?;
        }
        Ok(header)
    }

    pub(crate) fn encode(&self, e: &mut Encoder, flexible: bool) {
        e.put_i32(self.correlation_id);
        if flexible {
            e.put_unsigned_varint(0);
        }
    }
}

fn skip_tagged_fields(d: &mut Decoder, field: &'static str) -> Result<(), DecodeError> {
    let count = d.unsigned_varint(field)?;
    for _ in 0..count {
        d.unsigned_varint(field)?;
        let size = d.unsigned_varint(field)? as usize;
        d.skip(size, field)?;
    }
    Ok(())
}

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 104_857_600;

/// Takes one complete frame (without its size prefix) off the front of `buf`, or returns
/// `Ok(None)` when more bytes are needed. A size that is negative or above `max_frame_bytes`
/// is an error before any buffer is grown for it, so a peer cannot make us reserve memory by
/// announcing a big frame.
pub fn split_frame(
    buf: &mut BytesMut,
    max_frame_bytes: usize,
) -> Result<Option<Bytes>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 || size as usize > max_frame_bytes {
        return Err(DecodeError::FrameSize {
            size_bytes: i64::from(size),
            max_bytes: max_frame_bytes,
        });
    }
    let size = size as usize;
    if buf.len() < 4 + size {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size).freeze()))
}
