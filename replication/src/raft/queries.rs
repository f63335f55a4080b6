//! What a Raft group tells its host without changing: its identity, epoch, state, leader,
//! high-watermark, DescribeQuorum's view, and when its timers next need a `tick`.

use super::*;

impl Raft {
    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }
    pub fn config(&self) -> &QuorumConfig {
        &self.config
    }
    pub fn epoch(&self) -> Epoch {
        self.state.epoch()
    }
    pub fn state(&self) -> &EpochState {
        &self.state
    }
    pub fn is_leader(&self) -> bool {
        matches!(self.state, EpochState::Leader(_))
    }
    pub fn log(&self) -> &LogState {
        &self.log
    }
    pub fn high_watermark(&self) -> u64 {
        self.log.high_watermark()
    }
    /// The leader's log start offset as the last successful Fetch response gave it (a
    /// follower's; 0 before any). A follower's log start follows it only up to a snapshot of
    /// its own (snapshot.rs), so the node records one there for DeleteRecords.
    pub fn leader_log_start_offset(&self) -> u64 {
        self.leader_log_start_offset
    }
    /// The quorum-state this replica has asked to be written.
    pub fn election_state(&self) -> ElectionState {
        self.election
    }
    /// The quorum-state the host last reported durable.
    pub fn persisted_election_state(&self) -> ElectionState {
        self.persisted_election
    }

    /// The leader this replica knows of in its epoch.
    pub fn leader_id(&self) -> Option<NodeId> {
        match &self.state {
            EpochState::Leader(_) | EpochState::Resigned(_) => Some(self.config.node_id),
            EpochState::Follower(f) => Some(f.leader_id),
            _ => None,
        }
    }

    pub fn leader_and_epoch(&self) -> LeaderIdAndEpoch {
        LeaderIdAndEpoch {
            leader_id: self.leader_id(),
            leader_epoch: self.epoch(),
        }
    }

    /// DescribeQuorum, answered by the leader; other replicas answer NOT_LEADER_OR_FOLLOWER.
    pub fn describe_quorum(&self) -> DescribeQuorumPartition {
        let EpochState::Leader(leader) = &self.state else {
            return DescribeQuorumPartition {
                error_code: crate::error::ErrorCode::NotLeaderOrFollower,
                leader_id: self.leader_id(),
                leader_epoch: self.epoch(),
                high_watermark: self.log.high_watermark(),
                current_voters: Vec::new(),
                observers: Vec::new(),
            };
        };
        let replica = |(id, p): (&NodeId, &ReplicaProgress)| ReplicaState {
            replica_id: *id,
            replica_directory_id: p.directory_id,
            log_end_offset: p.end_offset,
            last_fetch_timestamp_ms: p.last_fetch_ms,
            last_caught_up_timestamp_ms: p.last_caught_up_ms,
        };
        let mut current_voters: Vec<ReplicaState> = leader.voters.iter().map(replica).collect();
        for voter in &mut current_voters {
            // A voter is shown with the disk its set names (its fetches with another are an
            // observer's).
            voter.replica_directory_id = self.voter_directory_id(voter.replica_id);
            if voter.replica_id == self.config.node_id {
                voter.log_end_offset = Some(self.log.log_end_offset());
                voter.last_fetch_timestamp_ms = Some(self.now_ms);
                voter.last_caught_up_timestamp_ms = Some(self.now_ms);
            }
        }
        DescribeQuorumPartition {
            error_code: crate::error::ErrorCode::None,
            leader_id: Some(self.config.node_id),
            leader_epoch: leader.epoch,
            high_watermark: self.log.high_watermark(),
            current_voters,
            observers: leader.observers.iter().map(replica).collect(),
        }
    }

    /// Whether a tick before [`Raft::next_deadline_ms`], with nothing else reaching the group
    /// since its last tick, has no work and changes nothing but the clock. Not while a leader
    /// waits to advance its log start: a lagging replica stops holding it back once its last
    /// fetch is older than the fetch timeout, a time no deadline names. A Prospective or
    /// Candidate rests too since 2026-12-07: its tick used to draw its next timeout from the
    /// RNG whether or not a timer was due, so every one was ticked on every turn of the host's
    /// loop, and a thousand partitions electing at once held two cores busy with those ticks
    /// (and the walks over the groups they touched) until elections timed out again.
    pub fn idle_tick_is_noop(&self) -> bool {
        match self.state {
            EpochState::Leader(_) => !self.log_start_advance_pending(),
            _ => true,
        }
    }

    /// Whether a voter other than the leader has not acknowledged its epoch yet (KIP-595:
    /// BeginQuorumEpoch is sent again until each has).
    pub(crate) fn has_unendorsed_voter(&self, leader: &crate::quorum::LeaderState) -> bool {
        let local = self.config.node_id;
        self.voter_set()
            .iter_ids()
            .any(|v| v != local && !leader.endorsed.contains(&v))
    }

    /// The earliest time at which `tick` has something to do.
    pub fn next_deadline_ms(&self) -> u64 {
        let mut deadline = match &self.state {
            EpochState::Unattached(s) => s.election_deadline_ms.unwrap_or(u64::MAX),
            EpochState::Voted(s) => s.election_deadline_ms,
            EpochState::Prospective(s) => s.election_deadline_ms.min(s.vote_resend_ms),
            EpochState::Candidate(s) => s
                .backoff_until_ms
                .unwrap_or(s.election_deadline_ms.min(s.vote_resend_ms)),
            EpochState::Leader(s) => {
                let parked = s.parked.next_deadline_ms();
                let begin = if self.has_unendorsed_voter(s) {
                    s.begin_quorum_resend_ms
                } else {
                    u64::MAX
                };
                let log_start = if self.log_start_advance_pending() {
                    self.log_start_lag_deadline_ms()
                } else {
                    u64::MAX
                };
                let transfer = s.transfer.map_or(u64::MAX, |t| t.deadline_ms);
                parked
                    .min(begin)
                    .min(self.check_quorum_deadline_ms(s))
                    .min(log_start)
                    .min(transfer)
            }
            EpochState::Follower(_) if self.fetch_timer_paused => u64::MAX,
            EpochState::Follower(s) => s.fetch_timeout_deadline_ms,
            EpochState::Resigned(s) => s.election_deadline_ms.min(if s.unacknowledged.is_empty() {
                u64::MAX
            } else {
                s.end_quorum_resend_ms
            }),
        };
        if let Some(fetch) = self.fetch_in_flight {
            deadline = deadline.min(fetch.resend_at_ms);
        } else if self.wants_to_fetch() && self.fetch_may_leave() {
            // Nothing in flight: fetch at once, or when the backoff ends.
            deadline = deadline.min(self.fetch_backoff_until_ms.max(self.now_ms));
        }
        deadline.max(self.now_ms)
    }
}
