//! Reading size-prefixed frames from a tokio-uring stream into a buffer the connection owns.
//!
//! tokio-uring moves an owned buffer into the kernel for each read and gives it back with the
//! result. The buffer is a `BytesMut`: a complete frame is split off its front and frozen into
//! [`Bytes`], which shares the allocation (zero copy up to the decoder and, for Produce, into
//! the records). When every frame handed out has been dropped, `reserve` reclaims the same
//! allocation for the next reads instead of allocating again.

use bytes::{Buf, Bytes, BytesMut};
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::TcpStream;

/// Bytes asked for per read when no frame size is known yet (several small pipelined requests
/// arrive in one read).
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Why no frame came.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Closed,
    /// The peer closed the connection inside a frame.
    #[error("truncated frame: connection closed after {received_bytes} of {expected_bytes} bytes")]
    Truncated {
        received_bytes: usize,
        expected_bytes: usize,
    },
    /// A negative size prefix or one above the limit; the body was not read.
    #[error("frame size {size_bytes} is outside 0..={max_bytes}")]
    Size { size_bytes: i64, max_bytes: usize },
    #[error("read: {0}")]
    Io(#[from] std::io::Error),
}

pub(crate) struct FrameReader {
    buffer: BytesMut,
    max_frame_bytes: usize,
}

impl FrameReader {
    pub(crate) fn new(max_frame_bytes: usize) -> FrameReader {
        FrameReader {
            buffer: BytesMut::with_capacity(READ_CHUNK_BYTES),
            max_frame_bytes,
        }
    }

    /// The next frame's body (without its size prefix).
    pub(crate) async fn next_frame(&mut self, stream: &TcpStream) -> Result<Bytes, FrameError> {
        loop {
            let expected_bytes = if self.buffer.len() >= 4 {
                let size = i32::from_be_bytes([
                    self.buffer[0],
                    self.buffer[1],
                    self.buffer[2],
                    self.buffer[3],
                ]);
                // Checked before a single body byte is read or any memory is reserved for it,
                // so a client cannot make us allocate by announcing a huge frame.
                if size < 0 || size as usize > self.max_frame_bytes {
                    return Err(FrameError::Size {
                        size_bytes: i64::from(size),
                        max_bytes: self.max_frame_bytes,
                    });
                }
                let total = 4 + size as usize;
                if self.buffer.len() >= total {
                    self.buffer.advance(4);
                    return Ok(self.buffer.split_to(size as usize).freeze());
                }
                // Room for the rest of this frame in one piece: the body lands where the
                // decoder will read it.
                self.buffer.reserve(total - self.buffer.len());
                total
            } else {
                self.buffer.reserve(READ_CHUNK_BYTES);
                4
            };
            // tokio-uring reads at the start of the buffer it is given: hand it the spare
            // capacity after the bytes already held.
            let buffer = std::mem::take(&mut self.buffer);
            debug_assert!(buffer.capacity() > buffer.len());
            let held = buffer.len();
            let (result, buffer) = stream.read(buffer.slice(held..)).await;
            self.buffer = buffer.into_inner();
            match result {
                Ok(0) if self.buffer.is_empty() => return Err(FrameError::Closed),
                Ok(0) => {
                    return Err(FrameError::Truncated {
                        received_bytes: self.buffer.len(),
                        expected_bytes,
                    });
                }
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(FrameError::Io(error)),
            }
        }
    }
}
