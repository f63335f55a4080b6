//! Delivering what the host and the handlers produced: after a handler's call, the requests it
//! queued for peers are sent and the admin answers whose records are applied leave
//! (`after_call`); the host's output goes to the quorum's wire side (quorum_rpc.rs) and then,
//! in order, to the API layer (appends and truncations to the producer state, high-watermarks,
//! snapshot jobs to a writer thread).

use super::super::*;

impl Node {
    /// After a handler's call with a [`context::Cx`]: sends the requests it queued for peers,
    /// answers the admin requests whose records are applied, and moves the host's output on
    /// (what its appends produced).
    pub(in crate::node) fn after_call(&mut self) -> Result<(), NodeError> {
        for r in std::mem::take(&mut self.to_peers) {
            self.send_to_peer(r.to, r.request, r.version, r.pending, r.fetch_lane)?;
        }
        self.answer_admin()?;
        if self.host.has_output() {
            self.deliver()?;
        }
        Ok(())
    }

    /// Answers the parked admin requests whose metadata records are applied (admin_answers.rs).
    pub(in crate::node) fn answer_admin(&mut self) -> Result<(), NodeError> {
        let metadata = context::metadata_raft(&self.host, &self.table);
        let (epoch, leading) = (metadata.epoch(), metadata.is_leader());
        let now = self.now_ms();
        self.handlers
            .admin
            .answer_ready(self.handlers.topics.applied_offset, epoch, leading, now)
    }

    pub(in crate::node) fn metadata_raft(&self) -> &core::Raft {
        context::metadata_raft(&self.host, &self.table)
    }

    pub(in crate::node) fn authorizer(&self) -> authorize::Authorizer<'_> {
        authorize::Authorizer {
            config: &self.config.authorizer,
            image: &self.handlers.acl_image,
        }
    }

    /// Moves what the host produced to the sockets and the API layer: messages to peers and
    /// answers to the requests that wait for them (quorum_rpc.rs), then appends and
    /// truncations to the producer state, high-watermarks to the state that follows them,
    /// snapshots to a writer thread.
    pub(in crate::node) fn deliver(&mut self) -> Result<(), NodeError> {
        self.adopt_offline_partitions()?;
        let mut later = Vec::new();
        let mut q = qx!(self);
        self.quorum.deliver(&mut q, &mut later)?;
        self.deliver_later(later)
    }

    /// The host's outputs for the API layer, in order (the quorum routed the rest).
    pub(in crate::node) fn deliver_later(&mut self, outputs: Vec<Output>) -> Result<(), NodeError> {
        for output in outputs {
            match output {
                Output::LeaderAppended {
                    partition,
                    base_offset,
                    batches,
                } => {
                    self.append_load
                        .record(batches.iter().map(|batch| batch.len()).sum());
                    self.handlers
                        .producers
                        .track_leader_append(partition, base_offset, &batches)
                }
                Output::FollowerAppended { partition, records } => {
                    self.append_load.record(records.len());
                    self.handlers
                        .producers
                        .track_follower_append(partition, &records)
                }
                Output::Truncated {
                    partition,
                    offset,
                    snapshot,
                } => self
                    .handlers
                    .producers
                    .track_truncation(&self.host, partition, offset, snapshot),
                // Produce waiters and parked consumer fetches are checked in `pump`.
                Output::HighWatermark {
                    partition,
                    high_watermark,
                } => {
                    if partition == context::metadata_partition_id(&self.table) {
                        self.handlers.acl_image.note_high_watermark(high_watermark);
                    }
                    self.handlers.producers.track_high_watermark(
                        &self.host,
                        partition,
                        high_watermark,
                    )
                }
                Output::GenerateSnapshot {
                    partition,
                    dir,
                    mut job,
                } => {
                    // The snapshot carries the producer state at its end offset, for a
                    // replica whose log starts there (docs/snapshots.md).
                    job.producer_state = self.handlers.producers.state_record(
                        &mut self.host,
                        &self.table,
                        partition,
                        job.snapshot_id.offset,
                    );
                    let now = self.now_ms();
                    self.snapshot_writers.spawn(partition, dir, job, now)?
                }
                Output::Send { .. }
                | Output::FetchResponse { .. }
                | Output::FetchSnapshotResponse { .. } => {
                    unreachable!("the quorum's outputs are routed in quorum_rpc.rs")
                }
            }
        }
        Ok(())
    }

    pub(in crate::node) fn control_requests_pending(&self) -> bool {
        self.quorum.peers.control_requests_pending()
    }

    pub(in crate::node) fn send_to_peer(
        &mut self,
        to: NodeId,
        request: crate::protocol::Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<(), NodeError> {
        self.send_to_peer_with_id(to, request, version, pending, fetch_lane)
            .map(|_| ())
    }

    /// [`Node::send_to_peer`], returning the wire correlation id of the request it queued
    /// (`None` when the peer has no lane or its lane is gone).
    pub(in crate::node) fn send_to_peer_with_id(
        &mut self,
        to: NodeId,
        request: crate::protocol::Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<Option<i32>, NodeError> {
        let q = qx!(self);
        self.quorum
            .send(&q, to, request, version, pending, fetch_lane)
    }

    /// Sends the replica Fetches that a later answered one on the same connection released
    /// (quorum_rpc.rs).
    pub(in crate::node) fn send_released_fetches(&mut self) -> Result<(), NodeError> {
        let q = qx!(self);
        self.quorum.send_released_fetches(&q)
    }
}
