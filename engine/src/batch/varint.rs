//! Kafka's variable-length integers (`ByteUtils.readVarint` & co.): base-128, least significant
//! group first; signed values are zig-zag encoded first so that small negatives stay short
//! (-1 is the single byte 0x01).
//!
//! Decoding mirrors Java exactly, including its leniency: at most 5 bytes for an int and 10 for a
//! long, and surplus high bits of the last byte are dropped by the shift rather than rejected.

use bytes::BufMut;

/// A cursor over a byte slice that never reads past its end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Why a read failed. Callers turn this into a positioned [`super::BatchError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    Eof,
    VarintTooLong,
}

impl ReadError {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            ReadError::Eof => "ends before the field does",
            ReadError::VarintTooLong => "varint longer than its type allows",
        }
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ReadError> {
        let b = *self.buf.get(self.pos).ok_or(ReadError::Eof)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], ReadError> {
        if self.remaining() < len {
            return Err(ReadError::Eof);
        }
        let slice = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(slice)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, ReadError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, ReadError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, ReadError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// `ByteUtils.readUnsignedVarint`.
    pub(crate) fn unsigned_varint(&mut self) -> Result<u32, ReadError> {
        let mut value: u32 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if b & 0x80 == 0 {
                return Ok(value | (u32::from(b) << shift));
            }
            value |= u32::from(b & 0x7f) << shift;
            shift += 7;
            if shift > 28 {
                return Err(ReadError::VarintTooLong);
            }
        }
    }

    /// `ByteUtils.readVarint`: zig-zag int32.
    pub(crate) fn varint(&mut self) -> Result<i32, ReadError> {
        let raw = self.unsigned_varint()?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// `ByteUtils.readVarlong`: zig-zag int64.
    pub(crate) fn varlong(&mut self) -> Result<i64, ReadError> {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if b & 0x80 == 0 {
                let raw = value | (u64::from(b) << shift);
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
            value |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if shift > 63 {
                return Err(ReadError::VarintTooLong);
            }
        }
    }
}

pub(crate) fn put_unsigned_varint(buf: &mut impl BufMut, mut value: u32) {
    while value & !0x7f != 0 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

pub(crate) fn put_varint(buf: &mut impl BufMut, value: i32) {
    put_unsigned_varint(buf, ((value << 1) ^ (value >> 31)) as u32);
}

pub(crate) fn put_varlong(buf: &mut impl BufMut, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw & !0x7f != 0 {
        buf.put_u8((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    buf.put_u8(raw as u8);
}

pub(crate) fn size_of_unsigned_varint(value: u32) -> usize {
    // One byte per started group of 7 bits, at least one.
    let bits = 32 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

pub(crate) fn size_of_varint(value: i32) -> usize {
    size_of_unsigned_varint(((value << 1) ^ (value >> 31)) as u32)
}

pub(crate) fn size_of_varlong(value: i64) -> usize {
    let raw = ((value << 1) ^ (value >> 63)) as u64;
    let bits = 64 - (raw | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked examples from Kafka's ByteUtilsTest (zig-zag: 0->0, -1->1, 1->2, ...).
    #[test]
    fn varint_matches_kafka_examples() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (-65, &[0x81, 0x01]),
            (8191, &[0xfe, 0x7f]),
            (-8192, &[0xff, 0x7f]),
            (8192, &[0x80, 0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(value, bytes) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out, bytes, "encode {value}");
            assert_eq!(size_of_varint(value), bytes.len());
            assert_eq!(Reader::new(bytes).varint(), Ok(value), "decode {value}");
        }
    }

    #[test]
    fn varlong_round_trips_extremes() {
        for value in [0, -1, 1, i64::MAX, i64::MIN, 1 << 35, -(1 << 40)] {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(size_of_varlong(value), out.len());
            let mut reader = Reader::new(&out);
            assert_eq!(reader.varlong(), Ok(value));
            assert_eq!(reader.remaining(), 0);
        }
        let mut out = Vec::new();
        put_varlong(&mut out, i64::MIN);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn too_long_or_short_varints_are_errors() {
        assert_eq!(
            Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).varint(),
            Err(ReadError::VarintTooLong)
        );
        assert_eq!(Reader::new(&[0x80]).varint(), Err(ReadError::Eof));
        assert_eq!(
            Reader::new(&[0xff; 11]).varlong(),
            Err(ReadError::VarintTooLong)
        );
    }
}
