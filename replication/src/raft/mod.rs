//! The driver of one partition's quorum: a pure state machine fed with inputs and returning
//! the work to do.
//!
//! Inputs: [`Raft::step`] (a message from a peer), [`Raft::tick`] (time passed; returns the
//! next deadline), [`Raft::on_persisted`] (a flush or quorum-state write completed),
//! [`Raft::append`] (proposals on the leader) and [`Raft::resign`] (graceful shutdown). Every
//! input takes the host's current time in milliseconds, so the core never reads a clock, and
//! randomness comes from a seed given at construction. Output: a `Vec<Work>` to execute in
//! order (see [`Work`]).
//!
//! The handlers live in [`election`] (Vote, BeginQuorumEpoch, EndQuorumEpoch, candidacy,
//! resignation), [`fetch`] (Fetch on both sides, the high-watermark, long-poll) and
//! [`transitions`] (Unattached, Voted, Follower, and following a reported leader).

mod election;
mod fetch;
mod pre_vote;
mod queries;
mod reconfig;
mod repair;
mod resignation;
mod snapshot;
mod snapshot_fetch;
mod transitions;

use bytes::Bytes;

use crate::error::RaftError;
use crate::log_state::LogState;
use crate::message::{DescribeQuorumPartition, LeaderIdAndEpoch, Message, ReplicaState};
use crate::quorum::{
    EpochState, FollowerState, ReplicaProgress, ResignedState, UnattachedState, VotedState,
};
use crate::rng::SplitMix64;
use crate::types::{
    ElectionState, Epoch, NodeId, QuorumConfig, RecoveredSnapshots, RecoveredState,
};
use crate::voters::{VoterSet, VoterSetEntry, VoterSetHistory};
use crate::work::{Persisted, Work};

/// The offsets a leader assigned to an `append`: `[base_offset, last_offset]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: u64,
    pub last_offset: u64,
    pub leader_epoch: Epoch,
}

/// The fetch a follower (or an observer looking for the leader) has in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlightFetch {
    correlation_id: u64,
    to: NodeId,
    /// When it left (the fetch-timeout diagnostic says how long it has been out).
    sent_at_ms: u64,
    resend_at_ms: u64,
}

/// Collects the work of one input. Messages queued after a quorum-state write become
/// `SendAfterPersist`; the quorum-state write itself is emitted lazily so that two transitions
/// in one input (Unattached then Voted) cost one write.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub(crate) work: Vec<Work>,
    pending_election: Option<ElectionState>,
    barrier: bool,
}

impl Out {
    fn write_pending_election(&mut self) {
        if let Some(state) = self.pending_election.take() {
            self.work.push(Work::WriteQuorumState(state));
            self.barrier = true;
        }
    }

    pub(crate) fn send(&mut self, to: NodeId, message: Message) {
        self.write_pending_election();
        if self.barrier {
            self.work.push(Work::SendAfterPersist { to, message });
        } else {
            self.work.push(Work::Send { to, message });
        }
    }

    /// A message that names an epoch whose election state is not yet durable: it waits behind
    /// the outstanding quorum-state write, as a vote does. A replica that learned that epoch
    /// from it and never votes (an observer) could otherwise be left in an epoch the sender
    /// forgets at a crash, and refuse every leader of the lower epochs the quorum goes on in.
    pub(crate) fn send_after_persist(&mut self, to: NodeId, message: Message) {
        self.write_pending_election();
        self.work.push(Work::SendAfterPersist { to, message });
    }

    pub(crate) fn push(&mut self, work: Work) {
        debug_assert!(!matches!(
            work,
            Work::Send { .. } | Work::SendAfterPersist { .. }
        ));
        // A fetch answer never waits for a quorum-state write: only votes and the epoch a
        // candidate stands in must be durable first, and those were written before any fetch
        // in this epoch could be answered.
        self.work.push(work);
    }

    fn finish(mut self) -> Vec<Work> {
        self.write_pending_election();
        self.work
    }
}

/// One replica of one partition.
#[derive(Clone, Debug)]
pub struct Raft {
    config: QuorumConfig,
    state: EpochState,
    /// The quorum-state this replica wants on disk (written through `Work::WriteQuorumState`).
    election: ElectionState,
    /// The last quorum-state the host reported durable.
    persisted_election: ElectionState,
    log: LogState,
    /// The voter sets in the log over `controller.quorum.voters` (KIP-595 reassignment): the
    /// newest is in force (`voter_set`).
    voters: VoterSetHistory,
    rng: SplitMix64,
    now_ms: u64,
    next_correlation_id: u64,
    fetch_in_flight: Option<InFlightFetch>,
    fetch_backoff_until_ms: u64,
    /// Round-robin position for an observer looking for the leader.
    discovery_index: usize,
    /// The last flush requested, as (generation, end offset), so one is not asked twice.
    requested_flush: Option<(u64, u64)>,
    /// When the latest snapshot was reported written (the start of its `max_replication_lag_ms`).
    latest_snapshot_written_ms: u64,
    /// The leader's log start offset from the last successful Fetch response.
    leader_log_start_offset: u64,
    /// KIP-630: the snapshot this follower is downloading; log fetching pauses meanwhile.
    snapshot_fetch: Option<snapshot_fetch::SnapshotFetch>,
    /// A successful fetch response brought records, and the next fetch waits for their flush:
    /// the follower's fetch timeout does not run meanwhile. That wait is our own disk's, not
    /// the leader's; counting it let a follower whose fsync took most of the fetch timeout
    /// stand for election against a healthy leader (docs/node.md, "Event-loop stalls"). The
    /// timer restarts with a full timeout when the next fetch leaves.
    fetch_timer_paused: bool,
    /// Where the records of the last few fetch responses began (our log end before they were
    /// appended), oldest first, at most `FETCH_AHEAD_RESPONSES + 1`. A follower behind the
    /// high-watermark fetches again before its flush completes, but only while fewer than
    /// `FETCH_AHEAD_RESPONSES` responses wholly above the durable end wait for the disk
    /// (`fetch_may_leave`).
    fetched_from: std::collections::VecDeque<u64>,
    /// The leader (and its epoch) whose successful Fetch answer last reached us in this
    /// process. A fetch to any other leader, or the first after a start, asks without waiting
    /// (MaxWaitMs 0): the leader parks a fetch that finds nothing new while it believes the
    /// replica holds its high-watermark, and after a restart (or in a new epoch) the replica
    /// may not, so it would learn the commit only when the long poll ended (`fetch.max.wait.ms`,
    /// 500 ms on a restarted node's metadata partition, before its topic partitions can
    /// start). Kafka's KIP-1166 sends the replica's high-watermark in Fetch v18 for this.
    answered_by: Option<(Epoch, NodeId)>,
    /// When the last Fetch or FetchSnapshot response arrived from the node we fetch from,
    /// successful or not (what the fetch-timeout diagnostic reports; not a timer).
    last_fetch_response_ms: Option<u64>,
    /// A Fetch (or FetchSnapshot) to our leader succeeded since we started following it (and
    /// it has not announced its resignation since): we refuse pre-votes while it is true.
    fetched_from_leader: bool,
    /// The leader that announced its resignation (EndQuorumEpoch) and its epoch. A resigned
    /// leader never leads that epoch again, so a late answer from it (a Fetch sent before it
    /// resigned) or a peer that has not heard yet (a pre-vote refusal naming it) must not send
    /// us back to it: that reset our fetch timeout and held the election back a full timeout.
    resigned_leader: Option<(Epoch, NodeId)>,
    /// The log was cut below damaged records at a start (the host's repair) and may hold less
    /// than this replica acknowledged: until it has caught up with a leader, it grants no vote
    /// (pre-vote or vote) and does not stand, so it never helps elect a leader that lacks a
    /// record committed with its acknowledgement (`repair.rs`).
    repair_pending: bool,
    /// The high-watermark this repair must reach durably: the first one a leader reported
    /// after it had committed in its own epoch (so it covers every record committed before).
    repair_target: Option<u64>,
}

impl Raft {
    /// Starts a replica from its recovered durable state. A replica that was leader comes back
    /// Resigned (its in-memory view is gone) and sends EndQuorumEpoch to the other voters at
    /// its first poll; one that knew a leader comes back its Follower;
    /// one that had voted keeps that vote.
    pub fn new(
        config: QuorumConfig,
        recovered: &RecoveredState,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        let log = LogState::recovered(recovered)?;
        let voters = VoterSetHistory::new(bootstrap_voter_set(&config)?);
        Self::from_log(config, recovered, log, voters, seed, now_ms)
    }

    /// [`Raft::new`] for a host that keeps snapshots (KIP-630): the snapshot at the log start
    /// and the latest one. Votes and fetches use the log-start snapshot's epoch while the log
    /// holds no record past it.
    pub fn new_with_snapshots(
        config: QuorumConfig,
        recovered: &RecoveredState,
        snapshots: RecoveredSnapshots,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        Self::recover(config, recovered, snapshots, Vec::new(), seed, now_ms)
    }

    /// [`Raft::new_with_snapshots`] for a log that may hold voter set records (KIP-853). The
    /// host gives every `VotersRecord` it finds while recovering the log (from the log start
    /// to its end, uncommitted ones included: they are in force until truncated) and, first,
    /// the voter set of the snapshot at the log start if it holds one (at any offset below the
    /// log start). With none, `config.voters` (the bootstrap set) is in force.
    pub fn recover(
        config: QuorumConfig,
        recovered: &RecoveredState,
        snapshots: RecoveredSnapshots,
        voter_records: Vec<VoterSetEntry>,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        let log = LogState::recovered_with_snapshots(recovered, snapshots)?;
        if voter_records
            .iter()
            .any(|e| e.offset >= recovered.log_end_offset)
        {
            return Err(RaftError::InvalidRecoveredState(
                "a voter set record past the log end",
            ));
        }
        let voters = VoterSetHistory::recovered(bootstrap_voter_set(&config)?, voter_records)?;
        Self::from_log(config, recovered, log, voters, seed, now_ms)
    }

    fn from_log(
        config: QuorumConfig,
        recovered: &RecoveredState,
        log: LogState,
        voters: VoterSetHistory,
        seed: u64,
        now_ms: u64,
    ) -> Result<Self, RaftError> {
        let election = recovered.election;
        let mut raft = Self {
            state: EpochState::Unattached(UnattachedState {
                epoch: election.epoch,
                election_deadline_ms: None,
            }),
            config,
            election,
            persisted_election: election,
            log,
            voters,
            rng: SplitMix64::new(seed),
            now_ms,
            next_correlation_id: 1,
            fetch_in_flight: None,
            fetch_backoff_until_ms: 0,
            discovery_index: 0,
            requested_flush: None,
            latest_snapshot_written_ms: now_ms,
            leader_log_start_offset: 0,
            snapshot_fetch: None,
            fetch_timer_paused: false,
            fetched_from: std::collections::VecDeque::new(),
            answered_by: None,
            last_fetch_response_ms: None,
            fetched_from_leader: false,
            resigned_leader: None,
            repair_pending: recovered.repair_pending,
            repair_target: None,
        };
        let local = raft.config.node_id;
        let may_stand = raft.may_stand();
        raft.state = match (election.leader_id, election.voted_for) {
            // As Kafka's QuorumState does, it tells every other voter, at its first poll, that
            // it no longer leads (EndQuorumEpoch): a voter that has since followed a newer
            // leader answers with it, so the restarted node follows that leader at once instead
            // of after an election timeout (1.4 s in scripts/catch-up.sh when the stopped
            // follower had led the metadata partition, 2026-12-04); voters still in its epoch
            // stand sooner.
            (Some(leader), _) if leader == local && may_stand => {
                let others: Vec<NodeId> = raft
                    .voter_set()
                    .ids()
                    .into_iter()
                    .filter(|&id| id != local)
                    .collect();
                EpochState::Resigned(ResignedState {
                    epoch: election.epoch,
                    unacknowledged: others.iter().copied().collect(),
                    preferred_successors: others,
                    end_quorum_resend_ms: now_ms,
                    election_deadline_ms: now_ms + raft.random_election_timeout_ms(),
                })
            }
            (Some(leader), _) if leader != local => EpochState::Follower(FollowerState {
                epoch: election.epoch,
                leader_id: leader,
                fetch_timeout_deadline_ms: now_ms + raft.config.fetch_timeout_ms,
            }),
            (_, Some(voted)) if may_stand => EpochState::Voted(VotedState {
                epoch: election.epoch,
                voted_id: voted,
                election_deadline_ms: now_ms + raft.random_election_timeout_ms(),
            }),
            _ => {
                let deadline = may_stand.then(|| now_ms + raft.random_election_timeout_ms());
                EpochState::Unattached(UnattachedState {
                    epoch: election.epoch,
                    election_deadline_ms: deadline,
                })
            }
        };
        Ok(raft)
    }

    // ---- inputs ----

    /// Handles one message from `from`.
    pub fn step(
        &mut self,
        now_ms: u64,
        from: NodeId,
        message: Message,
    ) -> Result<Vec<Work>, RaftError> {
        self.advance_clock(now_ms);
        let mut out = self.new_out();
        match message {
            Message::VoteRequest(r) => self.handle_vote_request(from, r, &mut out)?,
            Message::VoteResponse(r) => self.handle_vote_response(from, r, &mut out)?,
            Message::BeginQuorumEpochRequest(r) => {
                self.handle_begin_quorum_epoch_request(from, r, &mut out)?
            }
            Message::BeginQuorumEpochResponse(r) => {
                self.handle_begin_quorum_epoch_response(from, r, &mut out)?
            }
            Message::EndQuorumEpochRequest(r) => {
                self.handle_end_quorum_epoch_request(from, r, &mut out)?
            }
            Message::EndQuorumEpochResponse(r) => {
                self.handle_end_quorum_epoch_response(from, r, &mut out)?
            }
            Message::FetchRequest(r) => self.handle_fetch_request(from, r, &mut out)?,
            Message::FetchResponse(r) => self.handle_fetch_response(from, r, &mut out)?,
            Message::FetchSnapshotRequest(r) => {
                self.handle_fetch_snapshot_request(from, r, &mut out)?
            }
            Message::FetchSnapshotResponse(r) => {
                self.handle_fetch_snapshot_response(from, r, &mut out)?
            }
        }
        self.maybe_send_fetch(&mut out);
        Ok(out.finish())
    }

    /// Lets time pass: fires every expired timer. Returns the work and the next deadline
    /// (the host calls `tick` again at that time at the latest).
    pub fn tick(&mut self, now_ms: u64) -> Result<(Vec<Work>, u64), RaftError> {
        self.advance_clock(now_ms);
        let mut out = self.new_out();
        self.poll_timers(&mut out)?;
        self.maybe_send_fetch(&mut out);
        Ok((out.finish(), self.next_deadline_ms()))
    }

    /// A brand-new partition's designated first leader stands at once instead of after a
    /// random election timeout: the host calls this on the replica it would name leader (a
    /// topic partition's first replica, the one Kafka's controller makes leader). It acts only
    /// on a voter that is unattached at epoch 0 with an empty log and no vote, so it changes
    /// when the first election starts and nothing else (Raft's safety never depends on when a
    /// voter stands); anywhere else it does nothing. Returns the work of the resulting tick.
    pub fn stand_first(&mut self, now_ms: u64) -> Result<Vec<Work>, RaftError> {
        let fresh = self.election.epoch == 0
            && self.election.voted_for.is_none()
            && self.election.leader_id.is_none()
            && self.log.log_end_offset() == 0
            && self.is_local_voter();
        if fresh && let EpochState::Unattached(u) = &mut self.state {
            u.election_deadline_ms = Some(now_ms.max(self.now_ms));
        }
        Ok(self.tick(now_ms)?.0)
    }

    /// The host finished a flush or a quorum-state write.
    pub fn on_persisted(
        &mut self,
        now_ms: u64,
        persisted: Persisted,
    ) -> Result<Vec<Work>, RaftError> {
        self.advance_clock(now_ms);
        let mut out = self.new_out();
        match persisted {
            Persisted::QuorumState(state) => {
                // Writes complete in the order they were issued, so the latest report is what
                // is on disk.
                assert!(
                    state.epoch >= self.persisted_election.epoch,
                    "quorum-state write completed out of order"
                );
                self.persisted_election = state;
                self.maybe_win_with_own_vote(&mut out)?;
            }
            Persisted::Log {
                generation,
                end_offset,
            } => {
                if self.log.on_flushed(generation, end_offset)
                    && matches!(self.state, EpochState::Leader(_))
                {
                    self.on_leader_progress(&mut out);
                }
                self.maybe_finish_repair();
            }
        }
        self.maybe_send_fetch(&mut out);
        Ok(out.finish())
    }

    /// Appends client batches on the leader. Each batch is a RecordBatch v2 whose record count
    /// is read from its header; the host stamps base offsets and the epoch.
    pub fn append(
        &mut self,
        now_ms: u64,
        batches: Vec<Bytes>,
    ) -> Result<(AppendResult, Vec<Work>), RaftError> {
        self.advance_clock(now_ms);
        let EpochState::Leader(leader) = &self.state else {
            return Err(RaftError::NotLeader {
                leader_id: self.leader_id(),
                epoch: self.epoch(),
            });
        };
        if leader.transfer.is_some() {
            // Handing leadership over (`transfer_leadership`): the log end must stay where
            // the successor can reach it. Clients send again, to whichever node leads then.
            return Err(RaftError::NotLeader {
                leader_id: Some(self.config.node_id),
                epoch: self.epoch(),
            });
        }
        let leader_epoch = leader.epoch;
        if batches.is_empty() {
            return Err(RaftError::EmptyAppend);
        }
        let mut counts = Vec::with_capacity(batches.len());
        for batch in &batches {
            let headers = crate::records::proposal_headers(batch)?;
            let [header] = headers.as_slice() else {
                return Err(RaftError::MalformedBatch {
                    position: 0,
                    reason: "expected exactly one batch",
                });
            };
            counts.push(header.records_count);
        }
        let base_offset = self.log.log_end_offset();
        for count in counts {
            let base = self.log.log_end_offset();
            self.log
                .append(base, base + u64::from(count) - 1, leader_epoch);
        }
        let last_offset = self.log.log_end_offset() - 1;
        let mut out = self.new_out();
        out.push(Work::AppendAsLeader {
            base_offset,
            leader_epoch,
            batches,
        });
        self.request_flush(&mut out);
        // Parked fetches learn about the new records at once.
        self.complete_parked_fetches(&mut out, false);
        Ok((
            AppendResult {
                base_offset,
                last_offset,
                leader_epoch,
            },
            out.finish(),
        ))
    }

    // ---- internals shared by the handlers ----

    /// A work collector. While a quorum-state write is outstanding (issued, not yet reported
    /// by `on_persisted`), every message waits for it: a vote granted again to the same
    /// candidate must not overtake the write that made the first grant durable.
    fn new_out(&self) -> Out {
        Out {
            barrier: self.election != self.persisted_election,
            ..Out::default()
        }
    }

    fn advance_clock(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    fn random_election_timeout_ms(&mut self) -> u64 {
        self.config.election_timeout_ms + self.rng.below(self.config.election_timeout_ms)
    }

    fn next_correlation_id(&mut self) -> u64 {
        let id = self.next_correlation_id;
        self.next_correlation_id += 1;
        id
    }

    /// Records a new quorum-state to write before the next message leaves.
    fn set_election(&mut self, election: ElectionState, out: &mut Out) {
        assert!(
            election.epoch >= self.election.epoch,
            "quorum-state epoch moving back"
        );
        if election != self.election {
            self.election = election;
            out.pending_election = Some(election);
        }
    }

    fn request_flush(&mut self, out: &mut Out) {
        let want = (self.log.generation(), self.log.log_end_offset());
        if self.log.durable_end_offset() < want.1 && self.requested_flush != Some(want) {
            self.requested_flush = Some(want);
            out.push(Work::Flush {
                generation: want.0,
                end_offset: want.1,
            });
        }
    }

    fn poll_timers(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let now = self.now_ms;
        if let Some(fetch) = self.fetch_in_flight
            && now >= fetch.resend_at_ms
        {
            // The response is lost (or the leader is gone): free the slot to fetch again. An
            // observer asks the next voter: the one it asked may be down for good.
            self.fetch_in_flight = None;
            if !self.is_local_voter() {
                self.discovery_index += 1;
            }
        }
        match &self.state {
            EpochState::Unattached(s) => {
                if s.election_deadline_ms.is_some_and(|d| now >= d) {
                    self.transition_to_prospective(out)?;
                }
            }
            EpochState::Voted(s) => {
                if now >= s.election_deadline_ms {
                    if self.may_stand() {
                        self.transition_to_prospective(out)?;
                    } else if let EpochState::Voted(v) = &mut self.state {
                        // Not a voter in its own log (nor one whose removal it does not know to
                        // be committed): it may not stand; it fetches as an observer until it
                        // learns the leader.
                        v.election_deadline_ms = u64::MAX;
                    }
                }
            }
            EpochState::Prospective(_) => self.poll_prospective(out)?,
            EpochState::Candidate(_) => self.poll_candidate(out)?,
            EpochState::Leader(_) => self.poll_leader(out)?,
            EpochState::Follower(s) => {
                if now >= s.fetch_timeout_deadline_ms && !self.fetch_timer_paused {
                    // What an operator needs to tell a dead leader from a slow path: how long
                    // since the leader last answered, and whether our fetch is still out.
                    tracing::info!(
                        epoch = s.epoch,
                        leader = s.leader_id,
                        since_last_response_ms = self.last_fetch_response_ms.map(|t| now - t),
                        fetch_out_for_ms = self.fetch_in_flight.map(|f| now - f.sent_at_ms),
                        fetch_out_to = self.fetch_in_flight.map(|f| f.to),
                        voter = self.is_local_voter(),
                        "fetch timeout"
                    );
                    if self.may_stand() {
                        self.transition_to_prospective(out)?;
                    } else {
                        // An observer keeps its leader but asks another voter who leads now.
                        self.fetch_in_flight = None;
                        self.discovery_index += 1;
                        // It no longer hears that leader, so it stops defending it against
                        // pre-votes (a voter here becomes Prospective, which grants anyway).
                        // Otherwise a replica whose log still calls it an observer refuses,
                        // naming a leader that has since removed itself, a voter that the
                        // newer voter set needs, and no one is elected (simulator, profile
                        // reconfig, seeds 105, 157 and 272).
                        self.fetched_from_leader = false;
                        if let EpochState::Follower(f) = &mut self.state {
                            f.fetch_timeout_deadline_ms = now + self.config.fetch_timeout_ms;
                        }
                    }
                }
            }
            EpochState::Resigned(_) => self.poll_resigned(out)?,
        }
        Ok(())
    }
}

/// The voter set in force before any record: `controller.quorum.voters`, or none known yet for a
/// replica started with bootstrap servers only (KIP-853).
fn bootstrap_voter_set(config: &QuorumConfig) -> Result<VoterSet, RaftError> {
    if config.voters.is_empty() && !config.bootstrap_servers.is_empty() {
        Ok(VoterSet::unknown())
    } else {
        VoterSet::from_ids(&config.voters)
    }
}

#[cfg(test)]
mod bootstrap_servers_tests;
#[cfg(test)]
mod directory_id_tests;
#[cfg(test)]
mod reconfig_tests;
#[cfg(test)]
mod repair_tests;
#[cfg(test)]
mod tests;
