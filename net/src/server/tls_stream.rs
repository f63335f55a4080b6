//! TLS on an accepted connection.
//!
//! The server's sockets are tokio-uring's, which do not implement tokio's `AsyncRead` and
//! `AsyncWrite`; tokio-rustls needs them. A TLS connection therefore runs over a duplicate of
//! the accepted descriptor (`dup(2)`) registered with tokio's reactor, which tokio-uring's
//! runtime drives as well. The tokio-uring stream stays in the server's table of connections:
//! `shutdown(2)` acts on the socket, not the descriptor, so a stop still ends a TLS
//! connection's reads exactly as a plaintext one's.
//!
//! Records go out through rustls, so a TLS reply is encrypted in userspace: file regions are
//! read into a buffer and written, not sent with `sendfile(2)` (kTLS, which would keep
//! `sendfile` working, is not used; docs/server.md, "TLS").

use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Arc;
use std::time::Duration;

use tokio_uring::net::TcpStream;

/// A server-side TLS session over a duplicate of an accepted socket.
pub(crate) type ServerTlsStream = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// How long a client may take to complete the handshake; a silent or slow one is closed.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a TLS connection did not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    #[error("duplicating the socket: {0}")]
    Dup(std::io::Error),
    #[error("handshake: {0}")]
    Tls(std::io::Error),
    #[error("handshake not completed within {HANDSHAKE_TIMEOUT:?}")]
    TimedOut,
}

/// Runs the server side of the handshake on a duplicate of `stream`'s descriptor.
pub(crate) async fn accept(
    stream: &TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Result<ServerTlsStream, HandshakeError> {
    // SAFETY: `dup` of a descriptor the connection owns and keeps open; the duplicate is owned
    // by the std stream made from it and closed when that (or the tokio stream) drops.
    let fd = unsafe { libc::dup(stream.as_raw_fd()) };
    if fd < 0 {
        return Err(HandshakeError::Dup(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor of a connected TCP socket that nothing else owns.
    let std_stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    // Non-blocking already (the accepted socket is, and the flag is the open file's, shared by
    // the duplicate); set again so a change elsewhere cannot make tokio block.
    std_stream
        .set_nonblocking(true)
        .map_err(HandshakeError::Dup)?;
    let tokio_stream = tokio::net::TcpStream::from_std(std_stream).map_err(HandshakeError::Dup)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tokio_stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(error)) => Err(HandshakeError::Tls(error)),
        Err(_) => Err(HandshakeError::TimedOut),
    }
}
