//! The smallest HTTP/1.0 server that Prometheus can scrape: `GET /metrics`, one request per
//! connection, the answer followed by a close.

use std::net::SocketAddr;
use std::time::Duration;

use super::MetricsRegistry;

/// Bytes of request head we read before giving up (Prometheus sends a few hundred).
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// A scraper that has not sent its request head by then is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The request line of an HTTP request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("request head incomplete")]
    Incomplete,
    #[error("request head above {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    #[error("malformed request line")]
    Malformed,
}

/// Parses a request head (everything up to and including the blank line).
pub fn parse_request(head: &[u8]) -> Result<HttpRequest, HttpError> {
    let end = find_head_end(head).ok_or(if head.len() > MAX_HEAD_BYTES {
        HttpError::TooLarge
    } else {
        HttpError::Incomplete
    })?;
    let head = std::str::from_utf8(&head[..end]).map_err(|_| HttpError::Malformed)?;
    let line = head.lines().next().ok_or(HttpError::Malformed)?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(HttpError::Malformed);
    };
    if method.is_empty() || !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(HttpError::Malformed);
    }
    let path = target.split('?').next().unwrap_or(target);
    Ok(HttpRequest {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// Fuzz entry point (`fuzz/fuzz_targets/metrics_request.rs`): any bytes, no panic.
pub fn fuzz_metrics_request(data: &[u8]) {
    if let Ok(request) = parse_request(data) {
        assert!(request.path.starts_with('/'));
        assert!(!request.method.is_empty());
    }
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    let limit = bytes.len().min(MAX_HEAD_BYTES);
    bytes[..limit]
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
        .or_else(|| {
            bytes[..limit]
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| at + 2)
        })
}

/// The endpoint, running on the current tokio-uring runtime.
pub struct MetricsServer {
    local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    pub fn start(address: SocketAddr, registry: MetricsRegistry) -> std::io::Result<MetricsServer> {
        // A restart right after a kill -9 may find the dead process's listener still open
        // (its io_uring is torn down after it was reaped): wait for it as the Kafka listeners do.
        let listener = tokio_uring::net::TcpListener::from_std(
            crate::server::bind_waiting_for_a_dead_owner(address)?,
        );
        let local_addr = listener.local_addr()?;
        let task = tokio_uring::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio_uring::spawn(serve(stream, registry.clone()));
                    }
                    Err(error) => {
                        tracing::warn!(%error, "metrics accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
        tracing::info!(%local_addr, "metrics endpoint listening");
        Ok(MetricsServer { local_addr, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(stream: tokio_uring::net::TcpStream, registry: MetricsRegistry) {
    let head = tokio::time::timeout(READ_TIMEOUT, read_head(&stream)).await;
    let (status, body) = match head {
        Err(_) => return,
        Ok(Err(error)) => ("400 Bad Request", format!("{error}\n")),
        Ok(Ok(request)) if request.method != "GET" => {
            ("405 Method Not Allowed", "only GET\n".to_string())
        }
        Ok(Ok(request)) if request.path != "/metrics" => {
            ("404 Not Found", "try /metrics\n".to_string())
        }
        Ok(Ok(_)) => ("200 OK", registry.render()),
    };
    let response = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (result, _) = stream.write_all(response.into_bytes()).await;
    if let Err(error) = result {
        tracing::debug!(%error, "metrics response not written");
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

async fn read_head(stream: &tokio_uring::net::TcpStream) -> Result<HttpRequest, HttpError> {
    let mut head: Vec<u8> = Vec::with_capacity(1024);
    loop {
        match parse_request(&head) {
            Err(HttpError::Incomplete) => {}
            other => return other,
        }
        let chunk = vec![0u8; 1024];
        let (result, chunk) = stream.read(chunk).await;
        match result {
            Ok(0) | Err(_) => return Err(HttpError::Incomplete),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Ok(HttpRequest {
                method: "GET".into(),
                path: "/metrics".into()
            })
        );
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.0\r\n"),
            Err(HttpError::Incomplete)
        );
        assert_eq!(
            parse_request(b"GET  HTTP/1.0\r\n\r\n"),
            Err(HttpError::Malformed)
        );
        assert_eq!(
            parse_request(b"\xff\xfe\r\n\r\n"),
            Err(HttpError::Malformed)
        );
        assert_eq!(parse_request(&[b'a'; 9000]), Err(HttpError::TooLarge));
    }
}
