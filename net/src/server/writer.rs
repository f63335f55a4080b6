//! Writing replies: vectored writes for bytes in memory, `sendfile(2)` for file regions.
//!
//! Why `sendfile` and not io_uring splice: tokio-uring 0.5 exposes no splice operation, and a
//! splice needs a pipe per connection and two operations per chunk; `sendfile` moves page-cache
//! pages to the socket in one call. The socket is non-blocking (io_uring reads and writes on it
//! still wait for readiness inside the kernel, so only `sendfile` sees `EAGAIN`); on `EAGAIN`
//! the writer waits for writability on tokio's reactor, which drives tokio-uring's ring too.
//! The cost: a page-cache miss makes `sendfile` read the disk on this thread; the writer asks
//! for read-ahead (`posix_fadvise(WILLNEED)`) first. See `docs/server.md`.
//!
//! A TLS connection's bytes go through rustls: buffers are written one after the other into
//! the session (which cuts them into records) and flushed at the end of each reply, and a file
//! region is read (`pread(2)`, in chunks of [`TLS_FILE_CHUNK_BYTES`]) and written like any
//! buffer: encryption needs the bytes in userspace, so `sendfile` cannot apply (kTLS could
//! keep it; not used).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use bytes::{Buf, Bytes};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncWriteExt, Interest};
use tokio_uring::net::TcpStream;

use super::{FileRegion, RecordsSource};
use crate::protocol::ResponsePart;

/// Most buffers handed to one `writev` (well below IOV_MAX = 1024).
const MAX_IOVECS: usize = 512;
/// Most bytes asked of one `sendfile` call (it moves at most 0x7ffff000 anyway).
const MAX_SENDFILE_BYTES: usize = 1 << 30;
/// Bytes of a file region read at a time for a TLS connection.
const TLS_FILE_CHUNK_BYTES: usize = 256 * 1024;

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

    /// A file region through the TLS session: read in chunks, each written and flushed.
    async fn copy_file_region(&mut self, region: &FileRegion) -> Result<(), WriteError> {
        let tls = self.tls.as_mut().expect("a TLS connection");
        let file_fd = region.raw_fd();
        let mut position = region.position;
        let mut remaining = region.length as usize;
        let mut chunk = vec![0u8; remaining.min(TLS_FILE_CHUNK_BYTES)];
        while remaining > 0 {
            let want = remaining.min(chunk.len());
            // SAFETY: `chunk` holds at least `want` bytes; the region keeps `file_fd` open.
            let read = unsafe {
                libc::pread(
                    file_fd,
                    chunk.as_mut_ptr().cast(),
                    want,
                    position as libc::off_t,
                )
            };
            if read < 0 {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(WriteError::Io(error));
            }
            if read == 0 {
                return Err(WriteError::FileEnded {
                    fd: file_fd,
                    position,
                    missing_bytes: remaining,
                });
            }
            let read = read as usize;
            tls.write_all(&chunk[..read]).await?;
            position += read as u64;
            remaining -= read;
        }
        tls.flush().await?;
        Ok(())
    }

    /// Moves a file region to the socket without a userspace copy.
    pub(crate) async fn send_file_region(&mut self, region: &FileRegion) -> Result<(), WriteError> {
        let file_fd = region.raw_fd();
        let socket_fd = self.stream.as_raw_fd();
        let mut offset = i64::try_from(region.position).map_err(|_| {
            WriteError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "file position above i64::MAX",
            ))
        })?;
        let mut remaining = region.length as usize;
        if remaining == 0 {
            return Ok(());
        }
        // Start read-ahead so sendfile finds the pages cached rather than reading the disk
        // synchronously on this thread. Advice only: its failure changes nothing.
        // SAFETY: plain syscall on a descriptor the region keeps open.
        unsafe {
            libc::posix_fadvise(file_fd, offset, remaining as i64, libc::POSIX_FADV_WILLNEED);
        }
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
