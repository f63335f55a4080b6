//! Driving the core: timers, peers' messages, client appends, voter changes and resignation,
//! each call's work list executed before it returns (`execute`).

use bytes::Bytes;

use ringlog_engine::io::Io;

use super::{Host, HostError};
use crate::multi::PartitionMessage;
use crate::raft::AppendResult;
use crate::types::{NodeId, PartitionId};
use crate::voters::VoterInfo;

impl<I: Io> Host<I> {
    /// Timers: returns the next deadline (ms) the core asks to be ticked at.
    pub fn tick(&mut self, now_ms: u64) -> Result<u64, HostError> {
        self.now_ms = now_ms;
        let (work, next_deadline_ms) = self.multi.tick(now_ms)?;
        self.execute(work)?;
        self.write_due_confirmations(now_ms);
        Ok(next_deadline_ms.min(self.next_confirmation_due_ms().unwrap_or(u64::MAX)))
    }

    /// A message from a peer.
    pub fn step(
        &mut self,
        now_ms: u64,
        from: NodeId,
        message: PartitionMessage,
    ) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.step(now_ms, from, message)?;
        Ok(self.execute(work)?)
    }

    /// Leader: appends a client's batches (Produce). Each batch's CRC must have been checked
    /// when it arrived (a Produce is validated before anything is stored); the store does not
    /// compute it again ([`PartitionStore::append_as_leader`](super::PartitionStore::append_as_leader)).
    pub fn append(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        batches: Vec<Bytes>,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.append(now_ms, partition, batches)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// A new partition's designated first leader stands at once
    /// ([`Raft::stand_first`](crate::raft::Raft::stand_first)).
    pub fn stand_first(&mut self, now_ms: u64, partition: PartitionId) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.stand_first(now_ms, partition)?;
        Ok(self.execute(work)?)
    }

    /// KIP-853 AddRaftVoter: the partition's leader appends a voter set with `id` added. The
    /// change is in force at once and done when the returned record's offset is below the
    /// high-watermark (`Output::HighWatermark`).
    pub fn add_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.add_voter(now_ms, partition, id, info)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// KIP-853 RemoveRaftVoter: the partition's leader appends a voter set without `id` (see
    /// [`Host::add_voter`] for when it is done).
    pub fn remove_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
    ) -> Result<AppendResult, HostError> {
        self.now_ms = now_ms;
        let (appended, work) = self.multi.remove_voter(now_ms, partition, id)?;
        self.execute(work)?;
        Ok(appended)
    }

    /// KIP-853 UpdateRaftVoter: the partition's leader appends a voter set with `id`'s
    /// directory id and endpoints replaced; `None` when nothing changes.
    pub fn update_voter(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<Option<AppendResult>, HostError> {
        self.now_ms = now_ms;
        let Some((appended, work)) = self.multi.update_voter(now_ms, partition, id, info)? else {
            return Ok(None);
        };
        self.execute(work)?;
        Ok(Some(appended))
    }

    /// KIP-595 graceful shutdown of one partition: a leader resigns with EndQuorumEpoch.
    pub fn resign(&mut self, now_ms: u64, partition: PartitionId) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self.multi.resign(now_ms, partition)?;
        Ok(self.execute(work)?)
    }

    /// A leadership transfer of one partition to `successor` (`Raft::transfer_leadership`):
    /// Kafka's preferred-leader election.
    pub fn transfer_leadership(
        &mut self,
        now_ms: u64,
        partition: PartitionId,
        successor: NodeId,
    ) -> Result<(), HostError> {
        self.now_ms = now_ms;
        let work = self
            .multi
            .transfer_leadership(now_ms, partition, successor)?;
        Ok(self.execute(work)?)
    }
}
