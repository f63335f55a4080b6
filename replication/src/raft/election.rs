//! Elections: Vote, candidacy, becoming leader, BeginQuorumEpoch and check quorum (KIP-595);
//! resignation and leadership transfer are in resignation.rs.

use std::collections::{BTreeMap, BTreeSet};

use super::{Out, Raft};
use crate::error::{ErrorCode, RaftError};
use crate::message::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, Message, VoteRequest, VoteResponse,
};
use crate::mutation::Mutation;
use crate::quorum::{CandidateState, EpochState, LeaderState, ReplicaProgress};
use crate::types::{ElectionState, Epoch, NodeId, OffsetAndEpoch};
use crate::work::Work;

impl Raft {
    // ---- Vote ----

    /// Raft's election restriction, for votes and pre-votes alike: the requester's log ends
    /// at an (epoch, offset) at least as large as ours.
    pub(crate) fn candidate_log_is_up_to_date(&self, request: &VoteRequest) -> bool {
        // A replica repairing its log cannot tell (repair.rs): it grants nothing.
        !self.repair_pending
            && OffsetAndEpoch::new(request.last_offset, request.last_offset_epoch)
                >= self.log.end_offset_and_epoch()
    }

    /// KIP-595: a voter grants at most one vote per epoch, only to a candidate whose log
    /// (last epoch, end offset) is at least as up to date as its own, and the grant is durable
    /// (quorum-state written) before the response leaves.
    pub(crate) fn handle_vote_request(
        &mut self,
        from: NodeId,
        request: VoteRequest,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let respond = |raft: &Raft, out: &mut Out, error_code: ErrorCode, vote_granted: bool| {
            let current_leader = raft.leader_and_epoch();
            out.send(
                from,
                Message::VoteResponse(VoteResponse {
                    error_code,
                    current_leader,
                    vote_granted,
                }),
            );
        };
        // KIP-853: neither the candidate nor we need be in our voter set: either may have been
        // added by a record we have not fetched yet, and a voter set {1, 2} whose voter 1 still
        // lags at {2, 3} could never elect anyone if 1 refused (simulator, profile reconfig,
        // seed 54). The candidate counts only the grants of voters in its own set.
        if from != request.candidate_id {
            respond(self, out, ErrorCode::InconsistentVoterSet, false);
            return Ok(());
        }
        // KIP-853 `isValidVoterKey`: the candidate asks the voter its set records; if that is
        // another disk than ours (ours was replaced since), this replica is not that voter and
        // its vote must not count as one, whatever its log holds.
        if !self.is_own_key(request.voter_directory_id)
            && !self.config.mutated(Mutation::VoteIgnoresDirectoryId)
        {
            respond(self, out, ErrorCode::InvalidVoterKey, false);
            return Ok(());
        }
        if request.candidate_epoch < self.epoch() {
            respond(self, out, ErrorCode::FencedLeaderEpoch, false);
            return Ok(());
        }
        if request.candidate_epoch > self.epoch() {
            // (Also for a pre-vote, as Kafka does: a voter asking in a newer epoch shows ours is
            // over.) A newer epoch ends whatever we were doing in ours, leadership included. Our own
            // election timer keeps running (Raft resets it only when granting a vote): else a
            // lagging voter that keeps standing, and keeps being refused, would reset everyone
            // else's timer forever and no up-to-date voter could ever stand.
            let running_timer_ms = match &self.state {
                EpochState::Unattached(u) => u.election_deadline_ms,
                EpochState::Voted(v) => Some(v.election_deadline_ms),
                EpochState::Prospective(p) => Some(p.election_deadline_ms),
                EpochState::Follower(f) => Some(f.fetch_timeout_deadline_ms),
                EpochState::Candidate(c) => {
                    Some(c.backoff_until_ms.unwrap_or(c.election_deadline_ms))
                }
                EpochState::Leader(_) | EpochState::Resigned(_) => None,
            };
            self.transition_to_unattached(request.candidate_epoch, out)?;
            if let (EpochState::Unattached(u), Some(running)) = (&mut self.state, running_timer_ms)
            {
                u.election_deadline_ms = u.election_deadline_ms.map(|fresh| fresh.min(running));
            }
        }
        if request.pre_vote {
            self.answer_pre_vote(from, &request, out);
            return Ok(());
        }
        let log_ok = self.candidate_log_is_up_to_date(&request);
        let granted = match &self.state {
            EpochState::Unattached(_) => log_ok,
            EpochState::Voted(v) => {
                v.voted_id == request.candidate_id
                    || (log_ok && self.config.mutated(Mutation::DoubleVote))
            }
            _ => false,
        };
        if granted {
            match &self.state {
                EpochState::Unattached(_) => {
                    self.transition_to_voted(request.candidate_epoch, request.candidate_id, out)?
                }
                EpochState::Voted(v) if v.voted_id != request.candidate_id => {
                    // Only reachable under the DoubleVote mutation: overwrite the vote.
                    let epoch = request.candidate_epoch;
                    if let EpochState::Voted(v) = &mut self.state {
                        v.voted_id = request.candidate_id;
                    }
                    let election = ElectionState {
                        epoch,
                        leader_id: None,
                        voted_for: Some(request.candidate_id),
                    };
                    self.election = election;
                    out.pending_election = Some(election);
                }
                _ => {}
            }
        }
        respond(self, out, ErrorCode::None, granted);
        Ok(())
    }

    pub(crate) fn handle_vote_response(
        &mut self,
        from: NodeId,
        response: VoteResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        if self.observe_leader(response.current_leader, out)? {
            return Ok(());
        }
        if matches!(self.state, EpochState::Prospective(_)) {
            return self.count_pre_vote(from, &response, out);
        }
        let majority = self.majority();
        let voters = self.voter_set().len();
        let from_is_voter = self.is_voter(from);
        let now = self.now_ms;
        let backoff = self.rng.below(self.config.election_backoff_max_ms + 1);
        let EpochState::Candidate(candidate) = &mut self.state else {
            return Ok(());
        };
        if response.error_code == ErrorCode::InvalidVoterKey && from_is_voter {
            // KIP-853: that voter's disk was replaced; the replica there is not the voter and
            // never will be until it is added again: a refusal, not a reason to ask again.
            crate::quorum::record_vote(
                &mut candidate.granting,
                &mut candidate.rejecting,
                from,
                false,
            );
            return Ok(());
        }
        if response.error_code != ErrorCode::None && from_is_voter {
            // As for a pre-vote (`count_pre_vote`): ask again after the retry backoff.
            candidate.vote_resend_ms = candidate
                .vote_resend_ms
                .min(now + self.config.retry_backoff_ms);
            return Ok(());
        }
        if response.current_leader.leader_epoch != candidate.epoch || !from_is_voter {
            return Ok(());
        }
        crate::quorum::record_vote(
            &mut candidate.granting,
            &mut candidate.rejecting,
            from,
            response.vote_granted,
        );
        if candidate.backoff_until_ms.is_some() {
            return Ok(());
        }
        if candidate.granting.len() >= majority {
            self.transition_to_leader(out)?;
        } else if candidate.rejecting.len() > voters - majority {
            // The election cannot be won any more: back off now rather than at the timeout.
            candidate.backoff_until_ms = Some(now + backoff);
        }
        Ok(())
    }

    /// Stands for election in the next epoch, after winning a pre-vote (KIP-996): the vote for
    /// ourselves is persisted before any Vote request leaves.
    pub(crate) fn transition_to_candidate(&mut self, out: &mut Out) -> Result<(), RaftError> {
        self.state
            .check_to_candidate(self.may_stand(), self.majority())?;
        let epoch = self.epoch() + 1;
        let local = self.config.node_id;
        let deadline = self.now_ms + self.random_election_timeout_ms();
        self.state = EpochState::Candidate(CandidateState {
            epoch,
            granting: self.own_grant(),
            rejecting: BTreeSet::new(),
            election_deadline_ms: deadline,
            backoff_until_ms: None,
            vote_resend_ms: self.now_ms + self.config.request_timeout_ms,
        });
        self.set_election(
            ElectionState {
                epoch,
                leader_id: None,
                voted_for: Some(local),
            },
            out,
        );
        self.fetch_in_flight = None;
        // A lone voter's own vote is the majority, but it counts only once it is durable
        // (`maybe_win_with_own_vote`, called from `on_persisted`): if the vote for epoch E were
        // still in flight when this node led, served observers and crashed, the node would come
        // back in epoch E - 1, win epoch E again and put different batches at the offsets it had
        // already served in E (log matching broken; simulator seeds 5004073, 5004473, 5009855).
        // With more voters the Vote requests leave after the write, so every grant follows it.
        if self.majority() > 1 {
            self.send_vote_requests(out, &BTreeSet::new(), false);
        }
        Ok(())
    }

    /// A Candidate whose own durable vote is a majority (a single-voter quorum) becomes
    /// leader; called when a quorum-state write completes.
    pub(crate) fn maybe_win_with_own_vote(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let majority = self.majority();
        let node_id = self.config.node_id;
        let persisted = (
            self.persisted_election.epoch,
            self.persisted_election.voted_for,
        );
        let EpochState::Candidate(candidate) = &mut self.state else {
            return Ok(());
        };
        let own_vote_durable = persisted == (candidate.epoch, Some(node_id));
        if own_vote_durable && candidate.granting.len() >= majority {
            // The epoch is won even if the election timer fired while the vote was being
            // written (a slow disk): the backoff was for an election that has now succeeded.
            candidate.backoff_until_ms = None;
            self.transition_to_leader(out)?;
        }
        Ok(())
    }

    /// A Vote (or, with `pre_vote`, a pre-vote in our current epoch) to every other voter that
    /// has not answered yet.
    pub(crate) fn send_vote_requests(
        &mut self,
        out: &mut Out,
        answered: &BTreeSet<NodeId>,
        pre_vote: bool,
    ) {
        let end = self.log.end_offset_and_epoch();
        let request = VoteRequest {
            candidate_epoch: self.epoch(),
            candidate_id: self.config.node_id,
            last_offset_epoch: end.epoch,
            last_offset: end.offset,
            pre_vote,
            candidate_directory_id: self.config.directory_id,
            voter_directory_id: crate::voters::NO_DIRECTORY_ID,
        };
        let voters: Vec<(NodeId, [u8; 16])> = self
            .voter_set()
            .voters()
            .iter()
            .map(|(id, info)| (*id, info.directory_id))
            .collect();
        for (voter, voter_directory_id) in voters {
            if voter != self.config.node_id && !answered.contains(&voter) {
                out.send(
                    voter,
                    Message::VoteRequest(VoteRequest {
                        voter_directory_id,
                        ..request.clone()
                    }),
                );
            }
        }
    }

    pub(crate) fn poll_candidate(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let now = self.now_ms;
        let request_timeout = self.config.request_timeout_ms;
        let backoff_max_ms = self.config.election_backoff_max_ms;
        let rng = &mut self.rng;
        let EpochState::Candidate(candidate) = &mut self.state else {
            return Ok(());
        };
        match candidate.backoff_until_ms {
            // A lost election asks for pre-votes again before raising the epoch once more.
            Some(until) if now >= until => return self.transition_to_prospective(out),
            Some(_) => return Ok(()),
            None if now >= candidate.election_deadline_ms => {
                // Drawn only when due, so that a tick before the deadline changes nothing and
                // a waiting candidate may rest between its timers (`idle_tick_is_noop`).
                candidate.backoff_until_ms = Some(now + rng.below(backoff_max_ms + 1));
                return Ok(());
            }
            None => {}
        }
        if now >= candidate.vote_resend_ms {
            candidate.vote_resend_ms = now + request_timeout;
            let answered: BTreeSet<NodeId> = candidate
                .granting
                .union(&candidate.rejecting)
                .copied()
                .collect();
            self.send_vote_requests(out, &answered, false);
        }
        Ok(())
    }

    // ---- becoming leader and BeginQuorumEpoch ----

    /// A candidate with a majority becomes leader: it writes the quorum-state, appends a
    /// LeaderChangeMessage (so the high-watermark has a record of its own epoch to commit; not
    /// into an empty log where `leader_change_on_empty_log` is off) and
    /// tells every voter with BeginQuorumEpoch.
    pub(crate) fn transition_to_leader(&mut self, out: &mut Out) -> Result<(), RaftError> {
        self.state.check_to_leader(self.majority())?;
        let EpochState::Candidate(candidate) = &self.state else {
            unreachable!("checked above")
        };
        let epoch = candidate.epoch;
        let granting_voters: Vec<NodeId> = candidate.granting.iter().copied().collect();
        let local = self.config.node_id;
        // KIP-595: an epoch names one leader and one log. The candidate's vote for itself in
        // this epoch is on disk before it leads, so a crash can never bring it back to an older
        // epoch from which it could win this one again with a different log.
        assert!(
            self.persisted_election.epoch == epoch
                && self.persisted_election.voted_for == Some(local),
            "leading epoch {epoch} before the vote for it is durable (durable: {:?})",
            self.persisted_election
        );
        let epoch_start_offset = self.log.log_end_offset();
        let voters: BTreeMap<NodeId, ReplicaProgress> = self
            .voter_set()
            .iter_ids()
            .map(|v| (v, ReplicaProgress::default()))
            .collect();
        self.state = EpochState::Leader(LeaderState {
            epoch,
            epoch_start_offset,
            granting_voters: granting_voters.clone(),
            voters,
            observers: BTreeMap::new(),
            endorsed: BTreeSet::new(),
            begin_quorum_resend_ms: self.now_ms + self.config.request_timeout_ms,
            became_leader_ms: self.now_ms,
            parked: crate::purgatory::Purgatory::new(),
            transfer: None,
        });
        self.set_election(
            ElectionState {
                epoch,
                leader_id: Some(local),
                voted_for: Some(local),
            },
            out,
        );
        self.fetch_in_flight = None;
        // An empty log has no earlier epoch's record to commit: a partition configured so
        // (QuorumConfig::leader_change_on_empty_log, Kafka topic partitions) starts its epoch
        // with the next client record, which the high-watermark commits as any other.
        let log_is_empty = self.log.log_end_offset() == self.log.log_start_offset();
        if self.config.leader_change_on_empty_log || !log_is_empty {
            let batch = crate::records::leader_change_batch(
                local,
                &self.voter_set().ids(),
                &granting_voters,
            );
            self.log
                .append(epoch_start_offset, epoch_start_offset, epoch);
            out.push(Work::AppendAsLeader {
                base_offset: epoch_start_offset,
                leader_epoch: epoch,
                batches: vec![batch],
            });
            self.request_flush(out);
        }
        self.send_begin_quorum_epoch(out);
        // A single-voter quorum commits on its own flush.
        self.on_leader_progress(out);
        Ok(())
    }

    fn send_begin_quorum_epoch(&mut self, out: &mut Out) {
        let EpochState::Leader(leader) = &self.state else {
            return;
        };
        let request = BeginQuorumEpochRequest {
            leader_id: self.config.node_id,
            leader_epoch: leader.epoch,
            voter_directory_id: crate::voters::NO_DIRECTORY_ID,
        };
        let targets: Vec<NodeId> = self
            .voter_set()
            .iter_ids()
            .filter(|&v| v != self.config.node_id && !leader.endorsed.contains(&v))
            .collect();
        for voter in targets {
            let voter_directory_id = self.voter_directory_id(voter);
            out.send(
                voter,
                Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                    voter_directory_id,
                    ..request.clone()
                }),
            );
        }
    }

    /// KIP-853 `isValidVoterKey`: a request naming this replica's directory id, or none, is
    /// meant for this disk.
    pub(crate) fn is_own_key(&self, voter_directory_id: [u8; 16]) -> bool {
        voter_directory_id == crate::voters::NO_DIRECTORY_ID
            || voter_directory_id == self.config.directory_id
    }

    /// KIP-595's checks shared by BeginQuorumEpoch and EndQuorumEpoch: the sender must be the
    /// voter it names as leader and this node a voter (else INCONSISTENT_VOTER_SET), and the
    /// request's epoch must not be older than ours (else FENCED_LEADER_EPOCH).
    pub(crate) fn reject_leader_request(
        &self,
        from: NodeId,
        leader_id: NodeId,
        leader_epoch: Epoch,
    ) -> Option<ErrorCode> {
        // KIP-853: the leader need not be in our voter set yet (a voter added by a record we have
        // not fetched); we must be a voter, and the sender must be the leader it names.
        if !self.is_local_voter() || from != leader_id {
            return Some(ErrorCode::InconsistentVoterSet);
        }
        if leader_epoch < self.epoch() {
            return Some(ErrorCode::FencedLeaderEpoch);
        }
        None
    }

    pub(crate) fn handle_begin_quorum_epoch_request(
        &mut self,
        from: NodeId,
        request: BeginQuorumEpochRequest,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let respond = |raft: &Raft, out: &mut Out, error_code: ErrorCode| {
            let current_leader = raft.leader_and_epoch();
            out.send(
                from,
                Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
                    error_code,
                    current_leader,
                }),
            );
        };
        // KIP-853: the leader announces itself to the disk its voter set names.
        if !self.is_own_key(request.voter_directory_id) {
            respond(self, out, ErrorCode::InvalidVoterKey);
            return Ok(());
        }
        if let Some(error_code) =
            self.reject_leader_request(from, request.leader_id, request.leader_epoch)
        {
            respond(self, out, error_code);
            return Ok(());
        }
        if request.leader_epoch == self.epoch()
            && let Some(known) = self.leader_id()
            && known != request.leader_id
        {
            return Err(RaftError::ConflictingLeader {
                epoch: request.leader_epoch,
                local: known,
                remote: request.leader_id,
            });
        }
        let seen = crate::message::LeaderIdAndEpoch {
            leader_id: Some(request.leader_id),
            leader_epoch: request.leader_epoch,
        };
        self.observe_leader(seen, out)?;
        respond(self, out, ErrorCode::None);
        Ok(())
    }

    pub(crate) fn handle_begin_quorum_epoch_response(
        &mut self,
        from: NodeId,
        response: BeginQuorumEpochResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        if self.observe_leader(response.current_leader, out)? {
            return Ok(());
        }
        let retry_at_ms = self.now_ms + self.config.retry_backoff_ms;
        let EpochState::Leader(leader) = &mut self.state else {
            return Ok(());
        };
        if response.error_code == ErrorCode::None {
            if response.current_leader.leader_epoch == leader.epoch {
                leader.endorsed.insert(from);
            }
        } else if response.error_code != ErrorCode::InvalidVoterKey {
            // Not delivered (the host answers BROKER_NOT_AVAILABLE for a request its lane
            // lost), or the voter cannot take it yet (it does not host the partition yet): ask
            // again after the retry backoff, as Kafka's request manager does, not a request
            // timeout later. A replaced disk (INVALID_VOTER_KEY) waits for the usual resend.
            leader.begin_quorum_resend_ms = leader.begin_quorum_resend_ms.min(retry_at_ms);
        }
        Ok(())
    }

    /// Leader timers: BeginQuorumEpoch retries until every voter endorsed us; check quorum;
    /// parked fetches whose wait is over.
    pub(crate) fn poll_leader(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let now = self.now_ms;
        let EpochState::Leader(leader) = &self.state else {
            return Ok(());
        };
        if now >= self.check_quorum_deadline_ms(leader) {
            // KIP-595: a leader that a majority has not fetched from within the fetch timeout
            // may be partitioned away: it resigns so the others can elect a new leader.
            let since_last_fetch_ms: Vec<(NodeId, Option<u64>)> = leader
                .voters
                .iter()
                .filter(|(id, _)| **id != self.config.node_id)
                .map(|(id, p)| (*id, p.last_fetch_ms.map(|t| now.saturating_sub(t))))
                .collect();
            tracing::info!(
                epoch = leader.epoch,
                ?since_last_fetch_ms,
                "check quorum: no majority fetched within the timeout, resigning"
            );
            return self.transition_to_resigned(out, None);
        }
        // The resend timer runs only while a voter has not acknowledged the epoch (as
        // `next_deadline_ms` has it): a voter added later hears BeginQuorumEpoch at the next
        // tick, not at the end of a period that ran while nobody needed it.
        if now >= leader.begin_quorum_resend_ms && self.has_unendorsed_voter(leader) {
            if let EpochState::Leader(leader) = &mut self.state {
                leader.begin_quorum_resend_ms = now + self.config.request_timeout_ms;
            }
            self.send_begin_quorum_epoch(out);
        }
        self.complete_parked_fetches(out, true);
        self.maybe_advance_log_start_offset(out);
        self.maybe_complete_transfer(out)
    }

    /// When check quorum fires: 1.5 × `fetch_timeout_ms` after the majority-th most recent
    /// fetch from a voter (the leader counts as fetching now; a fresh leader gets a full
    /// timeout).
    ///
    /// Why 1.5 × and not the fetch timeout itself (Kafka's `LeaderState`,
    /// `CHECK_QUORUM_TIMEOUT_FACTOR = 1.5`): a follower's fetches reach the leader at most
    /// every fetch_max_wait + its own flush + two trips apart, and the follower waits a full
    /// fetch timeout for an answer. With the same timeout on both sides, a follower held up by
    /// its own disk or scheduling for a little under its timeout makes the leader resign
    /// although nobody failed; the margin lets the followers, who see the leader directly, be
    /// the ones to decide it is gone.
    pub(crate) fn check_quorum_deadline_ms(&self, leader: &LeaderState) -> u64 {
        // The leader counts itself only while it is a voter (a leader that removed itself
        // leads without counting until the removal is committed).
        let others_needed = self.majority() - usize::from(self.is_local_voter());
        if others_needed == 0 {
            return u64::MAX;
        }
        let mut times: Vec<u64> = leader
            .voters
            .iter()
            .filter(|(id, _)| **id != self.config.node_id)
            .map(|(_, p)| {
                p.last_fetch_ms
                    .unwrap_or(leader.became_leader_ms)
                    .max(leader.became_leader_ms)
            })
            .collect();
        times.sort_unstable_by(|a, b| b.cmp(a));
        // The leader itself is one of the majority; the others must be fresh.
        times[others_needed - 1] + check_quorum_timeout_ms(self.config.fetch_timeout_ms)
    }
}

/// How long a leader waits without fetches from a majority before it resigns (see
/// `check_quorum_deadline_ms`).
pub(crate) fn check_quorum_timeout_ms(fetch_timeout_ms: u64) -> u64 {
    fetch_timeout_ms.saturating_add(fetch_timeout_ms / 2)
}
