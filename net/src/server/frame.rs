//! Reading size-prefixed frames from a tokio-uring stream into a buffer the connection owns.
//!
//! tokio-uring moves an owned buffer into the kernel for each read and gives it back with the
//! result. The buffer is a `BytesMut`: a complete frame is split off its front and frozen into
//! [`Bytes`], which shares the allocation (zero copy up to the decoder and, for Produce, into
//! the records). When every frame handed out has been dropped, `reserve` reclaims the same
//! allocation for the next reads instead of allocating again.
//!
//! Memory for a frame is reserved as its bytes arrive, never when its size prefix does: a
//! client that announces 100 MiB and sends ten bytes costs ten bytes (plus the connection's
//! 64 KiB read buffer), not 100 MiB. A frame that outgrows the buffer gets a new one for the
//! bytes that have arrived (held, or waiting in the socket: `FIONREAD`), or, when fewer have,
//! one of at most twice the bytes held (and at least 64 KiB more); never more than the frame.
//! A frame thus costs at most about twice what was actually sent, and is copied about once in
//! all while it grows (once, at most 64 KiB, when it had arrived whole).
//!
//! On the server every growth beyond the connection's own read buffer is first charged to the
//! node-wide budget ([`RequestMemoryPool`], `queued.max.request.bytes`), which may make the
//! reader wait before it reads on.

use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::TcpStream;

use super::memory_pool::{FREE_BYTES_PER_CONNECTION, MemoryCharge, RequestMemoryPool};

/// Bytes asked for per read when no frame size is known yet (several small pipelined requests
/// arrive in one read); also the least a growing frame's buffer grows by.
const READ_CHUNK_BYTES: usize = FREE_BYTES_PER_CONNECTION;

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
    /// The server stopped while the frame waited for request memory.
    #[error("the server stopped while the frame waited for request memory")]
    Stopping,
}

/// One frame's body (without its size prefix) and the request memory charged for it, which
/// must be held until the request has been answered.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) body: Bytes,
    pub(crate) charge: Option<MemoryCharge>,
}

/// Where a connection's bytes come from: the socket itself (io_uring reads into the buffer),
/// or a TLS session over it (rustls decrypts into the buffer's spare capacity).
pub(crate) enum FrameSource {
    Plain(Rc<TcpStream>),
    Tls {
        reader: tokio::io::ReadHalf<super::tls_stream::ServerTlsStream>,
        /// The socket's descriptor, for `FIONREAD` (it counts encrypted bytes: a hint only).
        fd: RawFd,
    },
}

impl FrameSource {
    fn raw_fd(&self) -> RawFd {
        match self {
            FrameSource::Plain(stream) => stream.as_raw_fd(),
            FrameSource::Tls { fd, .. } => *fd,
        }
    }

    /// Reads into `buffer`'s spare capacity (which must not be empty); the bytes read are
    /// appended to it.
    async fn read(&mut self, buffer: BytesMut) -> (std::io::Result<usize>, BytesMut) {
        debug_assert!(buffer.capacity() > buffer.len());
        match self {
            FrameSource::Plain(stream) => {
                // tokio-uring reads at the start of the buffer it is given: hand it the spare
                // capacity after the bytes already held.
                let held = buffer.len();
                let (result, buffer) = stream.read(buffer.slice(held..)).await;
                (result, buffer.into_inner())
            }
            FrameSource::Tls { reader, .. } => {
                let mut buffer = buffer;
                // `read_buf` fills the spare capacity; it never grows a buffer that has some.
                let result = reader.read_buf(&mut buffer).await;
                (result, buffer)
            }
        }
    }
}

pub(crate) struct FrameReader {
    buffer: BytesMut,
    max_frame_bytes: usize,
    /// The server's request budget; `None` for the peer client reading responses.
    pool: Option<Rc<RequestMemoryPool>>,
    /// What the frame being read has been charged so far.
    charge: Option<MemoryCharge>,
    /// The buffer was allocated by [`FrameReader::grow`] for one frame (not a read chunk).
    buffer_grown: bool,
}

impl FrameReader {
    /// Changes the largest frame accepted from the next size prefix on (a SASL listener reads
    /// small frames until the client authenticated, connection.rs).
    pub(crate) fn set_max_frame_bytes(&mut self, max_frame_bytes: usize) {
        self.max_frame_bytes = max_frame_bytes;
    }

    pub(crate) fn new(max_frame_bytes: usize, pool: Option<Rc<RequestMemoryPool>>) -> FrameReader {
        FrameReader {
            buffer: BytesMut::with_capacity(READ_CHUNK_BYTES),
            max_frame_bytes,
            pool,
            charge: None,
            buffer_grown: false,
        }
    }

    /// The next frame.
    pub(crate) async fn next_frame(
        &mut self,
        stream: &mut FrameSource,
    ) -> Result<Frame, FrameError> {
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
                    let body = self.buffer.split_to(size as usize).freeze();
                    let mut charge = self.charge.take();
                    if let Some(charge) = &mut charge {
                        charge.complete();
                    }
                    return Ok(Frame { body, charge });
                }
                if self.buffer.capacity() == self.buffer.len() {
                    self.grow(total, stream.raw_fd()).await?;
                }
                total
            } else {
                if self.buffer.capacity() == self.buffer.len() {
                    if std::mem::replace(&mut self.buffer_grown, false) {
                        // A fresh buffer rather than `reserve`, which could take back a whole
                        // grown frame's allocation (up to 100 MiB) once that frame is dropped,
                        // and read small frames into it uncharged.
                        let mut fresh = BytesMut::with_capacity(READ_CHUNK_BYTES);
                        fresh.extend_from_slice(&self.buffer);
                        self.buffer = fresh;
                    } else {
                        self.buffer.reserve(READ_CHUNK_BYTES);
                    }
                }
                4
            };
            let buffer = std::mem::take(&mut self.buffer);
            let (result, buffer) = stream.read(buffer).await;
            self.buffer = buffer;
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

    /// Makes room for more of a frame of `total_bytes` (size prefix included) whose buffer is
    /// full: a new buffer for the bytes that have arrived (held, or waiting in the socket `fd`)
    /// if the budget grants that at once, else one of at most twice the bytes held.
    async fn grow(&mut self, total_bytes: usize, fd: RawFd) -> Result<(), FrameError> {
        let held_bytes = self.buffer.len();
        debug_assert!(held_bytes < total_bytes);
        let doubled_bytes = total_bytes.min((2 * held_bytes).max(held_bytes + READ_CHUNK_BYTES));
        // A frame that has already arrived gets its whole buffer at once (one copy of the held
        // bytes), instead of doubling towards it (a copy per doubling).
        let arrived_bytes = total_bytes.min(held_bytes + bytes_waiting_in_socket(fd));
        let mut target_bytes = doubled_bytes.max(arrived_bytes);
        if let Some(pool) = &self.pool {
            // The connection's own read buffer is free; only what goes beyond it is charged.
            let charged = |target: usize| target.saturating_sub(FREE_BYTES_PER_CONNECTION) as u64;
            if charged(target_bytes) > 0 {
                let need_bytes = (total_bytes - FREE_BYTES_PER_CONNECTION) as u64;
                let charge = self
                    .charge
                    .get_or_insert_with(|| pool.open_charge(need_bytes));
                let held_charge = charge.held_bytes();
                let preferred = charged(target_bytes) - held_charge;
                let minimum = charged(doubled_bytes).saturating_sub(held_charge);
                let granted = pool
                    .reserve(charge, minimum, preferred)
                    .await
                    .map_err(|_| FrameError::Stopping)?;
                if granted < preferred {
                    target_bytes = doubled_bytes;
                }
            }
        }
        let mut grown = BytesMut::with_capacity(target_bytes);
        grown.extend_from_slice(&self.buffer);
        self.buffer = grown;
        self.buffer_grown = true;
        Ok(())
    }
}

/// Bytes received on the socket and not yet read (`FIONREAD`); 0 if the kernel will not say.
fn bytes_waiting_in_socket(fd: RawFd) -> usize {
    let mut waiting: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer; `fd` is the connection's open socket.
    let result = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut waiting) };
    if result < 0 {
        return 0;
    }
    usize::try_from(waiting).unwrap_or(0)
}
