//! Graceful shutdown (SIGTERM/SIGINT): every partition this node leads resigns with
//! EndQuorumEpoch, the loop runs until the resignations are delivered or the deadline passes, then
//! every log is flushed and closed.

use ringlog_replication::host::HostError;
use ringlog_replication::{PartitionId, RaftError};

use super::convert::PartAnswer;
use super::{Node, NodeError};

impl Node {
    /// KIP-595 graceful shutdown: a leader (or candidate) resigns, so the voters elect a
    /// successor at once instead of waiting for the fetch timeout.
    pub(super) fn begin_shutdown(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        tracing::info!("shutting down");
        let ids: Vec<PartitionId> = self.table.ids().collect();
        for partition in ids {
            match self.host.resign(now, partition) {
                Ok(()) => {
                    tracing::info!(partition, "resigning");
                    self.deliver()?;
                }
                Err(HostError::Raft(RaftError::NothingToResign)) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => tracing::warn!(partition, %error, "resign failed"),
            }
        }
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        // Wait for the EndQuorumEpoch answers, but not longer than a request may take.
        self.shutdown_until_ms = Some(now + self.config.request_timeout_ms.min(1000));
        Ok(())
    }

    pub(super) async fn finish_shutdown(mut self) -> Result<(), NodeError> {
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            if let Some(pending) = self.pending.get_mut(&id) {
                for answer in &mut pending.answers {
                    answer.get_or_insert(PartAnswer::Error(
                        crate::protocol::ErrorCode::NotLeaderOrFollower,
                    ));
                }
            }
            self.maybe_complete(id)?;
        }
        self.host.close();
        tracing::info!("stopped");
        Ok(())
    }

    /// Shutdown: every waiting produce, parked fetch, voter change and group request is
    /// answered now.
    fn handlers_fail_all(&mut self, code: crate::protocol::ErrorCode) -> Result<(), NodeError> {
        self.handlers.produces.fail_all(&cx!(self), code)?;
        let lookup = super::metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        self.handlers.fetches.answer_all(&mut cx!(self), lookup)?;
        self.fail_voter_changes(code)?;
        self.groups_fail_all()
    }
}
