//! Writing replies: vectored writes for bytes in memory, `sendfile(2)` for file regions.
//!
//! Why `sendfile` and not io_uring splice: tokio-uring 0.5 exposes no splice operation, and a
//! splice needs a pipe per connection and two operations per chunk; `sendfile` moves page-cache
//! pages to the socket in one call. The socket is non-blocking (io_uring reads and writes on it
//! still wait for readiness inside the kernel, so only `sendfile` sees `EAGAIN`); on `EAGAIN`
//! the writer waits for writability on tokio's reactor, which drives tokio-uring's ring too.
//!
//! `sendfile` of a page the cache does not hold would read the disk on this thread, the node's
//! only one. So a region goes in pieces of [`FILE_PIECE_BYTES`]: a piece whose pages are all
//! cached, read in completely ([`file_pages`](super::file_pages)), with `sendfile`; any other
//! piece is read through the ring (a buffered read, which waits for the disk without holding
//! the thread) and written from that buffer. See `docs/server.md`, "Zero-copy records".
//!
//! A TLS connection's bytes go through rustls: buffers are written one after the other into
//! the session (which cuts them into records) and flushed at the end of each reply, and a file
//! region is read through the ring (in pieces of [`FILE_PIECE_BYTES`]) and written like any
//! buffer: encryption needs the bytes in userspace, so `sendfile` cannot apply (kTLS could
//! keep it; not used).

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::rc::Rc;

use bytes::{Buf, Bytes};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWriteExt, Interest};
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::TcpStream;

use super::file_pages::CachedPages;
use super::{FileRegion, RecordsSource};
use crate::protocol::ResponsePart;

/// Most buffers handed to one `writev` (well below IOV_MAX = 1024).
const MAX_IOVECS: usize = 512;
/// Most bytes asked of one `sendfile` call (it moves at most 0x7ffff000 anyway).
const MAX_SENDFILE_BYTES: usize = 1 << 30;
/// Bytes of a file region looked at (cached or not) and sent or read at a time.
const FILE_PIECE_BYTES: u64 = 1 << 20;

/// The write side of a TLS session.
type TlsWriter = tokio::io::WriteHalf<super::tls_stream::ServerTlsStream>;

/// Why a reply could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("write: {0}")]
    Io(#[from] io::Error),
    #[error("the socket accepted no bytes")]
    WriteZero,
    #[error("records token {token} names no region (the reply has {regions})")]
    UnknownToken { token: u64, regions: usize },
    #[error(
        "records token {token}: the response promises {promised} bytes, the region holds {actual}"
    )]
    RegionSize {
        token: u64,
        promised: u32,
        actual: u64,
    },
    #[error(
        "file region ended early: fd {fd} at position {position}, {missing_bytes} bytes missing"
    )]
    FileEnded {
        fd: RawFd,
        position: u64,
        missing_bytes: usize,
    },
}

/// The raw socket descriptor, registered with tokio's reactor only for `sendfile`'s `EAGAIN`.
struct SocketFd(RawFd);

impl AsRawFd for SocketFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

pub(crate) struct SocketWriter {
    stream: Rc<TcpStream>,
    /// Registered on the first file region. Dropped in [`SocketWriter::close`] before the
    /// socket can be closed, so the reactor never holds a descriptor number that was reused.
    readiness: Option<AsyncFd<SocketFd>>,
    /// A TLS connection's session: every byte goes through it.
    tls: Option<TlsWriter>,
}

impl SocketWriter {
    pub(crate) fn new(stream: Rc<TcpStream>, tls: Option<TlsWriter>) -> SocketWriter {
        SocketWriter {
            stream,
            readiness: None,
            tls,
        }
    }

    pub(crate) fn close(&mut self) {
        self.readiness = None;
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    pub(crate) async fn write_all(&mut self, bytes: Bytes) -> Result<(), WriteError> {
        if let Some(tls) = &mut self.tls {
            tls.write_all(&bytes).await?;
            tls.flush().await?;
            return Ok(());
        }
        let (result, _) = self.stream.write_all(bytes).await;
        result.map_err(WriteError::Io)
    }

    /// Writes the parts of one encoded response in order: runs of bytes in memory in one
    /// `writev` each, file regions with `sendfile`.
    pub(crate) async fn write_parts(
        &mut self,
        parts: Vec<ResponsePart>,
        regions: &[RecordsSource],
    ) -> Result<(), WriteError> {
        let mut run: Vec<Bytes> = Vec::with_capacity(parts.len());
        for part in parts {
            match part {
                ResponsePart::Encoded(bytes) | ResponsePart::Records(bytes) => run.push(bytes),
                ResponsePart::External { token, size_bytes } => {
                    let source = usize::try_from(token)
                        .ok()
                        .and_then(|index| regions.get(index))
                        .ok_or(WriteError::UnknownToken {
                            token,
                            regions: regions.len(),
                        })?;
                    if source.size_bytes() != u64::from(size_bytes) {
                        return Err(WriteError::RegionSize {
                            token,
                            promised: size_bytes,
                            actual: source.size_bytes(),
                        });
                    }
                    match source {
                        RecordsSource::Memory(bytes) => run.push(bytes.clone()),
                        RecordsSource::Chunks(chunks) => run.extend(chunks.iter().cloned()),
                        RecordsSource::File(region) if self.tls.is_some() => {
                            self.write_vectored(std::mem::take(&mut run)).await?;
                            self.copy_file_region(region).await?;
                        }
                        RecordsSource::File(region) => {
                            self.write_vectored(std::mem::take(&mut run)).await?;
                            self.send_file_region(region).await?;
                        }
                    }
                }
            }
        }
        self.write_vectored(run).await
    }

    /// One `writev` per [`MAX_IOVECS`] buffers, continuing after partial writes; the buffers
    /// are never joined into one.
    pub(crate) async fn write_vectored(
        &mut self,
        mut buffers: Vec<Bytes>,
    ) -> Result<(), WriteError> {
        if let Some(tls) = &mut self.tls {
            // rustls copies each buffer into its records anyway: one call per buffer.
            for buffer in &buffers {
                tls.write_all(buffer).await?;
            }
            tls.flush().await?;
            return Ok(());
        }
        buffers.retain(|buffer| !buffer.is_empty());
        while !buffers.is_empty() {
            let rest = if buffers.len() > MAX_IOVECS {
                buffers.split_off(MAX_IOVECS)
            } else {
                Vec::new()
            };
            let mut batch = buffers;
            while !batch.is_empty() {
                if batch.len() == 1 {
                    let single = batch.pop().expect("one buffer");
                    self.write_all(single).await?;
                    break;
                }
                let (result, mut returned) = self.stream.writev(batch).await;
                let mut written = match result {
                    Ok(0) => return Err(WriteError::WriteZero),
                    Ok(written) => written,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => 0,
                    Err(error) => return Err(WriteError::Io(error)),
                };
                let mut done = 0;
                while written > 0 {
                    let first = &mut returned[done];
                    if written >= first.len() {
                        written -= first.len();
                        done += 1;
                    } else {
                        first.advance(written);
                        written = 0;
                    }
                }
                returned.drain(..done);
                batch = returned;
            }
            buffers = rest;
        }
        Ok(())
    }

    /// A file region through the TLS session: read through the ring piece by piece, each
    /// piece written into the session; flushed at the end.
    async fn copy_file_region(&mut self, region: &FileRegion) -> Result<(), WriteError> {
        let mut reader = PieceReader::new(region)?;
        let mut position = region.position;
        let end = region.position + u64::from(region.length);
        while position < end {
            let piece = (end - position).min(FILE_PIECE_BYTES);
            let bytes = reader.read(position, piece).await?;
            let tls = self.tls.as_mut().expect("a TLS connection");
            tls.write_all(bytes).await?;
            position += piece;
        }
        let tls = self.tls.as_mut().expect("a TLS connection");
        tls.flush().await?;
        Ok(())
    }

    /// Moves a file region to the socket: each piece the page cache holds without a userspace
    /// copy (`sendfile`), any other piece read through the ring and written from its buffer, so
    /// the thread never waits for the disk.
    pub(crate) async fn send_file_region(&mut self, region: &FileRegion) -> Result<(), WriteError> {
        let end = region.position + u64::from(region.length);
        if region.length == 0 {
            return Ok(());
        }
        i64::try_from(end).map_err(|_| {
            WriteError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "file position above i64::MAX",
            ))
        })?;
        // Without a mapping to ask (mmap refused), every piece is read through the ring.
        let mut cached =
            CachedPages::map(region.raw_fd(), region.position, end - region.position).ok();
        let mut reader: Option<PieceReader> = None;
        let mut position = region.position;
        while position < end {
            let piece = (end - position).min(FILE_PIECE_BYTES);
            if cached
                .as_mut()
                .is_some_and(|pages| pages.all_cached(position, piece))
            {
                self.sendfile(region.raw_fd(), position, piece).await?;
            } else {
                if reader.is_none() {
                    reader = Some(PieceReader::new(region)?);
                }
                let reader = reader.as_mut().expect("made above");
                let buffer = reader.take(position, piece).await?;
                let (result, buffer) = self.stream.write_all(buffer).await;
                reader.give_back(buffer);
                result.map_err(WriteError::Io)?;
            }
            position += piece;
        }
        Ok(())
    }

    /// `sendfile` of `[position, position + length)`, whose pages the cache holds.
    async fn sendfile(
        &mut self,
        file_fd: RawFd,
        position: u64,
        length: u64,
    ) -> Result<(), WriteError> {
        let socket_fd = self.stream.as_raw_fd();
        let mut offset = position as i64;
        let mut remaining = length as usize;
        if self.readiness.is_none() {
            // SAFETY: the descriptor stays open while `readiness` lives: the writer owns an
            // `Rc` of the stream and drops `readiness` in `close` before that `Rc`.
            let registered =
                unsafe { AsyncFd::register_with_interest(SocketFd(socket_fd), Interest::WRITABLE) };
            self.readiness = Some(registered.map_err(|error| error.into_parts().1)?);
        }
        let readiness = self.readiness.as_ref().expect("registered above");
        while remaining > 0 {
            // Try first: the socket usually has room, and readiness starts out unknown.
            // SAFETY: both descriptors are open (the stream and the region's guard are alive)
            // and `offset` is a valid pointer for the call.
            let sent = unsafe {
                libc::sendfile(
                    socket_fd,
                    file_fd,
                    &mut offset,
                    remaining.min(MAX_SENDFILE_BYTES),
                )
            };
            if sent > 0 {
                remaining -= sent as usize;
                continue;
            }
            if sent == 0 {
                return Err(WriteError::FileEnded {
                    fd: file_fd,
                    position: offset as u64,
                    missing_bytes: remaining,
                });
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    let mut guard = readiness.writable().await?;
                    // The next sendfile will tell whether there is room again; clearing here
                    // makes the next wait real instead of a spin on stale readiness.
                    guard.clear_ready();
                }
                _ => return Err(WriteError::Io(error)),
            }
        }
        Ok(())
    }
}

/// Reads pieces of a file region through the runtime's ring, into one buffer reused for each.
struct PieceReader {
    /// A duplicate of the region's descriptor (the ring's file owns and closes its own).
    file: tokio_uring::fs::File,
    fd: RawFd,
    buffer: Option<Vec<u8>>,
}

impl PieceReader {
    fn new(region: &FileRegion) -> Result<PieceReader, WriteError> {
        let owned = region.file.as_fd().try_clone_to_owned()?;
        Ok(PieceReader {
            file: tokio_uring::fs::File::from_std(std::fs::File::from(owned)),
            fd: region.raw_fd(),
            buffer: None,
        })
    }

    /// `[position, position + length)` read into the buffer, which the caller hands back.
    async fn take(&mut self, position: u64, length: u64) -> Result<Vec<u8>, WriteError> {
        let mut buffer = self.buffer.take().unwrap_or_default();
        buffer.clear();
        buffer.reserve_exact(length as usize);
        let (result, buffer) = self
            .file
            .read_exact_at(buffer.slice(..length as usize), position)
            .await;
        let buffer = buffer.into_inner();
        match result {
            Ok(()) => Ok(buffer),
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => {
                Err(WriteError::FileEnded {
                    fd: self.fd,
                    position,
                    missing_bytes: length as usize - buffer.len(),
                })
            }
            Err(error) => Err(WriteError::Io(error)),
        }
    }

    fn give_back(&mut self, buffer: Vec<u8>) {
        self.buffer = Some(buffer);
    }

    /// The piece read, borrowed until the next read.
    async fn read(&mut self, position: u64, length: u64) -> Result<&[u8], WriteError> {
        let buffer = self.take(position, length).await?;
        Ok(self.buffer.insert(buffer))
    }
}

/// Makes the socket non-blocking, so `sendfile` returns `EAGAIN` instead of stalling the thread.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
