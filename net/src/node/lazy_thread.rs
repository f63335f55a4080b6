//! A worker thread of the node started with its first job: the loop sends it jobs over a
//! channel, and it reports on the loop's unbounded channel (`listed_checks.rs`, the check
//! behind the start; `folder_prep.rs`, new partitions' folders). A node that never needs it
//! never starts it.

use std::sync::mpsc;

use tokio::sync::mpsc::UnboundedSender;

use super::NodeError;

/// The thread's body: takes jobs until the node drops its sender, reports on `done`.
pub(super) type Body<J, R> = fn(mpsc::Receiver<J>, UnboundedSender<R>);

pub(super) struct LazyThread<J, R> {
    name: &'static str,
    body: Body<J, R>,
    done: UnboundedSender<R>,
    jobs: Option<mpsc::Sender<J>>,
}

impl<J: Send + 'static, R: Send + 'static> LazyThread<J, R> {
    pub(super) fn new(name: &'static str, body: Body<J, R>, done: UnboundedSender<R>) -> Self {
        LazyThread {
            name,
            body,
            done,
            jobs: None,
        }
    }

    /// Sends `job`, starting the thread first if it has not run yet.
    pub(super) fn send(&mut self, job: J) -> Result<(), NodeError> {
        let sender = match &self.jobs {
            Some(sender) => sender,
            None => {
                let (sender, receiver) = mpsc::channel::<J>();
                let (body, done) = (self.body, self.done.clone());
                std::thread::Builder::new()
                    .name(self.name.into())
                    .spawn(move || body(receiver, done))
                    .map_err(NodeError::Runtime)?;
                self.jobs.insert(sender)
            }
        };
        // The thread ends only when the sender goes: this cannot fail while `self` lives.
        sender
            .send(job)
            .map_err(|_| NodeError::Runtime(std::io::Error::other(format!("{} ended", self.name))))
    }
}
