//! Graceful shutdown (SIGTERM/SIGINT): every partition this node leads resigns with
//! EndQuorumEpoch, the loop runs until the resignations are delivered or the deadline passes,
//! then every waiting request is answered and every log is flushed and closed.

use super::super::*;

impl Node {
    /// KIP-595 graceful shutdown: a leader (or candidate) resigns, so the voters elect a
    /// successor at once instead of waiting for the fetch timeout.
    pub(in crate::node) fn begin_shutdown(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        tracing::info!("shutting down");
        let ids: Vec<PartitionId> = self.table.ids().collect();
        for partition in ids {
            match self.host.resign(now, partition) {
                Ok(()) => {
                    tracing::info!(partition, "resigning");
                    self.deliver()?;
                }
                Err(HostError::Raft(core::RaftError::NothingToResign)) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => tracing::warn!(partition, %error, "resign failed"),
            }
        }
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        // Wait for the EndQuorumEpoch answers, but not longer than a request may take.
        self.shutdown_until_ms = Some(now + self.config.request_timeout_ms.min(1000));
        Ok(())
    }

    pub(in crate::node) async fn finish_shutdown(mut self) -> Result<(), NodeError> {
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        let q = qx!(self);
        self.quorum.fail_all(&q, ErrorCode::NotLeaderOrFollower)?;
        self.host.close();
        tracing::info!("stopped");
        Ok(())
    }
}
