//! Kafka's four compression codecs, for the records section of a batch.
//!
//! A compressed batch keeps its 61-byte header in the clear; everything after it (the records,
//! laid out exactly as in an uncompressed batch) is one compressed stream
//! (`DefaultRecordBatch.compressedIterator`). The log stores such a batch exactly as the
//! producer sent it: the CRC covers the compressed bytes, so the batch is never rewritten.
//! Readers of records ([`super::RecordBatch::records`]) decompress into a new buffer.
//!
//! | id | codec  | what Kafka writes                                   | crate                        |
//! |----|--------|-----------------------------------------------------|------------------------------|
//! | 1  | gzip   | one gzip member (`GZIPOutputStream`)                | `flate2` (`MultiGzDecoder`)  |
//! | 2  | snappy | Java: xerial framing; librdkafka: one raw block     | `snap` (raw blocks)          |
//! | 3  | lz4    | an LZ4 frame (`Lz4BlockOutputStream`)               | `lz4_flex::frame`            |
//! | 4  | zstd   | one zstd frame (`ZstdOutputStream`)                 | `zstd` (libzstd)             |
//!
//! Ids 5-7 are not assigned by Kafka: [`super::BatchError::UnsupportedCompression`].
//!
//! **The output is bounded** by a limit ([`MAX_DECOMPRESSED_BATCH_BYTES`] when reading records):
//! a producer can send a few kilobytes that inflate to gigabytes. The streaming codecs (gzip,
//! lz4, zstd) are read into a buffer that grows as output arrives and stops one byte past the
//! limit, so at most the limit is ever held; snappy states its output length up front, and that claim is checked against
//! the limit (and against what snappy can possibly expand to) before anything is allocated.
//! zstd also sizes its window from the frame header; it is capped at 2^27 bytes, zstd's own
//! default and what Kafka's Java client accepts, and its pages are only touched as output is
//! written, so what the window really costs is bounded by the output too.

use std::io::{self, Read, Write};

use super::header::Compression;

/// Largest records section a batch may decompress to: 64 MiB, the same as the largest batch
/// the engine accepts at all ([`super::DEFAULT_MAX_BATCH_SIZE_BYTES`]). Kafka's own bound is
/// the JVM heap; a consensus node that every voter must keep running needs a number.
pub const MAX_DECOMPRESSED_BATCH_BYTES: usize = 64 * 1024 * 1024;

/// zstd's window (log2 bytes) accepted from a frame header: `ZSTD_WINDOWLOG_LIMIT_DEFAULT`.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// snappy-java's stream header: the magic, then version and compatible version (int32 each).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\0";
const XERIAL_HEADER_BYTES: usize = XERIAL_MAGIC.len() + 8;
/// The xerial framing's default block size (snappy-java `SnappyOutputStream`), for writing.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// The most a raw snappy block can expand: its densest element, a copy with a 2-byte offset,
/// is 3 bytes of input for at most 64 bytes of output (a 64/3 ratio, below 22).
const SNAPPY_MAX_EXPANSION: usize = 22;

/// Why a records section could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    /// Ids 5-7, or NONE (nothing to decompress).
    #[error("compression codec {codec} is not supported")]
    Unsupported { codec: u8 },
    /// The compressed bytes are not a valid stream of the codec.
    #[error("{codec} data is invalid: {reason}")]
    Corrupt { codec: &'static str, reason: String },
    /// The records would decompress to more than `limit` bytes.
    #[error("{codec} data decompresses to more than {limit} bytes")]
    TooLarge { codec: &'static str, limit: usize },
}

/// The name Kafka's `compression.type` uses for a codec ("none", "gzip", …, "unknown").
pub fn codec_name(codec: Compression) -> &'static str {
    match codec {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
        Compression::Unknown(_) => "unknown",
    }
}

/// Decompresses a records section written with `codec`, refusing output past `limit_bytes`.
pub fn decompress(
    codec: Compression,
    compressed: &[u8],
    limit_bytes: usize,
) -> Result<Vec<u8>, DecompressError> {
    let name = codec_name(codec);
    let corrupt = |error: io::Error| DecompressError::Corrupt {
        codec: name,
        reason: error.to_string(),
    };
    let out = match codec {
        Compression::Gzip => read_bounded(
            flate2::read::MultiGzDecoder::new(compressed),
            compressed.len(),
            limit_bytes,
        )
        .map_err(corrupt)?,
        Compression::Snappy => return decompress_snappy(compressed, limit_bytes),
        Compression::Lz4 => read_bounded(
            lz4_flex::frame::FrameDecoder::new(compressed),
            compressed.len(),
            limit_bytes,
        )
        .map_err(corrupt)?,
        Compression::Zstd => {
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(compressed).map_err(corrupt)?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(corrupt)?;
            read_bounded(decoder, compressed.len(), limit_bytes).map_err(corrupt)?
        }
        Compression::None | Compression::Unknown(_) => {
            return Err(DecompressError::Unsupported { codec: codec.id() });
        }
    };
    out.ok_or(DecompressError::TooLarge {
        codec: name,
        limit: limit_bytes,
    })
}

/// Compresses a records section with `codec` the way Kafka's clients do (snappy with the Java
/// client's xerial framing). For building batches; the log never recompresses what it stores.
///
/// Panics for NONE and ids 5-7: asking to compress with no codec is a caller bug.
pub fn compress(codec: Compression, records: &[u8]) -> Vec<u8> {
    // Writing into a Vec cannot fail, and a batch is far below every codec's input limit.
    const WRITE: &str = "compressing into a Vec cannot fail";
    match codec {
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(records).expect(WRITE);
            encoder.finish().expect(WRITE)
        }
        Compression::Snappy => compress_snappy_xerial(records),
        Compression::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(records).expect(WRITE);
            encoder.finish().expect(WRITE)
        }
        Compression::Zstd => zstd::stream::encode_all(records, 3).expect(WRITE),
        Compression::None | Compression::Unknown(_) => {
            panic!("no codec to compress with: {codec:?}")
        }
    }
}

/// Everything `reader` yields, or `None` once it yields more than `limit_bytes`.
///
/// The buffer grows by doubling from a guess, but never past `limit_bytes + 1`: that one byte
/// more is how "too large" shows, and no stream, whatever it claims, makes this hold more.
/// (`read_to_end` would double the capacity past the limit.)
fn read_bounded(
    mut reader: impl Read,
    compressed_bytes: usize,
    limit_bytes: usize,
) -> io::Result<Option<Vec<u8>>> {
    const FIRST_GUESS_BYTES_MIN: usize = 4 * 1024;
    let cap_bytes = limit_bytes.saturating_add(1);
    let first_guess = compressed_bytes
        .saturating_mul(4)
        .max(FIRST_GUESS_BYTES_MIN)
        .min(cap_bytes);
    let mut out = vec![0u8; first_guess];
    let mut filled = 0;
    loop {
        if filled == out.len() {
            let grown = out.len().saturating_mul(2).min(cap_bytes);
            if grown == out.len() {
                break;
            }
            out.reserve_exact(grown - out.len());
            out.resize(grown, 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
    debug_assert!(filled <= cap_bytes);
    if filled > limit_bytes {
        return Ok(None);
    }
    out.truncate(filled);
    Ok(Some(out))
}

/// Snappy as Kafka's Java producer writes it (snappy-java's xerial framing: the magic, two
/// int32 versions, then blocks of [int32 big-endian length][raw snappy block]) or as
/// librdkafka writes it (one raw snappy block); `SnappyInputStream` and librdkafka both tell
/// them apart by the magic.
fn decompress_snappy(compressed: &[u8], limit_bytes: usize) -> Result<Vec<u8>, DecompressError> {
    let Some(mut blocks) = compressed.strip_prefix(XERIAL_MAGIC) else {
        let mut out = Vec::new();
        decompress_snappy_block(compressed, &mut out, limit_bytes)?;
        return Ok(out);
    };
    // The two versions: snappy-java writes 1 and 1, and reads any.
    blocks = blocks
        .get(8..)
        .ok_or_else(|| snappy_corrupt("xerial header cut short"))?;
    let mut out = Vec::new();
    while !blocks.is_empty() {
        let (length, rest) = blocks
            .split_first_chunk::<4>()
            .ok_or_else(|| snappy_corrupt("xerial block length cut short"))?;
        let length = usize::try_from(i32::from_be_bytes(*length))
            .map_err(|_| snappy_corrupt("negative xerial block length"))?;
        if length > rest.len() {
            return Err(snappy_corrupt("xerial block runs past the end"));
        }
        let (block, rest) = rest.split_at(length);
        decompress_snappy_block(block, &mut out, limit_bytes)?;
        blocks = rest;
    }
    Ok(out)
}

/// Appends one raw snappy block to `out`, after checking the length it claims: within what
/// is left of the limit, and within what the block's size can expand to at all.
fn decompress_snappy_block(
    block: &[u8],
    out: &mut Vec<u8>,
    limit_bytes: usize,
) -> Result<(), DecompressError> {
    let claimed = snap::raw::decompress_len(block).map_err(|e| snappy_corrupt(e.to_string()))?;
    if claimed > limit_bytes.saturating_sub(out.len()) {
        return Err(DecompressError::TooLarge {
            codec: codec_name(Compression::Snappy),
            limit: limit_bytes,
        });
    }
    if claimed > block.len().saturating_mul(SNAPPY_MAX_EXPANSION) {
        return Err(snappy_corrupt(format!(
            "a {}-byte block claims {claimed} bytes, more than snappy can expand to",
            block.len()
        )));
    }
    let start = out.len();
    // Doubling (many small xerial blocks) but never past the limit.
    let needed = start + claimed;
    if needed > out.capacity() {
        let grown = out
            .capacity()
            .saturating_mul(2)
            .min(limit_bytes)
            .max(needed);
        out.reserve_exact(grown - start);
    }
    out.resize(needed, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| snappy_corrupt(e.to_string()))?;
    out.truncate(start + written);
    Ok(())
}

fn snappy_corrupt(reason: impl Into<String>) -> DecompressError {
    DecompressError::Corrupt {
        codec: codec_name(Compression::Snappy),
        reason: reason.into(),
    }
}

/// snappy-java's `SnappyOutputStream` framing: header, then 32 KiB input blocks.
fn compress_snappy_xerial(records: &[u8]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(XERIAL_HEADER_BYTES + snap::raw::max_compress_len(records.len()));
    out.extend_from_slice(XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for chunk in records.chunks(XERIAL_BLOCK_BYTES) {
        let block = encoder
            .compress_vec(chunk)
            .expect("a 32 KiB block is within snappy's input limit");
        let length = i32::try_from(block.len()).expect("a compressed 32 KiB block fits an i32");
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&block);
    }
    out
}
