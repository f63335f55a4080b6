//! A server on a thread of its own, for tools, examples and tests that do not run the node's
//! event loop (which starts the server on its own runtime thread with [`Server::start`]).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use super::{RequestHandler, Server, ServerConfig, ServerError, StopReport};

/// A [`Server`] running on its own OS thread with its own tokio-uring runtime.
pub struct ServerThread {
    local_addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<Duration>>,
    thread: Option<std::thread::JoinHandle<StopReport>>,
}

impl ServerThread {
    /// Starts the thread; `make_handler` runs on it (handlers are `Rc`, not `Send`). Returns
    /// once the listener is bound, or with the bind error.
    pub fn spawn<F>(config: ServerConfig, make_handler: F) -> Result<ServerThread, ServerError>
    where
        F: FnOnce() -> Rc<dyn RequestHandler> + Send + 'static,
    {
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Duration>();
        let thread = std::thread::Builder::new()
            .name("ringlog-server".into())
            .spawn(move || {
                tokio_uring::start(async move {
                    let handle = match Server::start(config, make_handler()) {
                        Ok(handle) => handle,
                        Err(error) => {
                            let _ = started_tx.send(Err(error));
                            return StopReport::default();
                        }
                    };
                    let _ = started_tx.send(Ok(handle.local_addr()));
                    // A dropped ServerThread (sender gone) stops at once.
                    let grace = stop_rx.await.unwrap_or(Duration::ZERO);
                    handle.stop(grace).await
                })
            })
            .map_err(|source| ServerError::Thread { source })?;
        match started_rx.recv() {
            Ok(Ok(local_addr)) => Ok(ServerThread {
                local_addr,
                stop: Some(stop_tx),
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ServerError::Thread {
                    source: std::io::Error::other("server thread ended before it started"),
                })
            }
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Graceful stop (see [`super::ServerHandle::stop`]); waits for the thread to end.
    pub fn stop(mut self, grace: Duration) -> StopReport {
        self.stop_and_join(grace)
    }

    fn stop_and_join(&mut self, grace: Duration) -> StopReport {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(grace);
        }
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_default(),
            None => StopReport::default(),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop_and_join(Duration::ZERO);
    }
}
