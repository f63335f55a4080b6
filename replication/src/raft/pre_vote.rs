//! KIP-996 pre-vote: a voter whose fetch or election timer expired becomes Prospective in its
//! current epoch and asks the other voters whether they would vote for it. Only a majority of
//! pre-votes lets it become a Candidate (and raise the epoch). A voter that still hears from
//! its leader refuses and names that leader, and the Prospective follows it again: so a voter
//! whose own process or disk stalled past its fetch timeout cannot unseat a healthy leader.

use std::collections::BTreeSet;

use super::{Out, Raft};
use crate::error::{ErrorCode, RaftError};
use crate::message::{LeaderIdAndEpoch, Message, VoteRequest, VoteResponse};
use crate::quorum::{EpochState, ProspectiveState};
use crate::types::NodeId;

impl Raft {
    /// A timer expired (a follower's fetch timeout, an unattached or voted voter's election
    /// timeout, a lost candidacy, a resignation nobody took over): ask for pre-votes.
    pub(crate) fn transition_to_prospective(&mut self, out: &mut Out) -> Result<(), RaftError> {
        if self.repair_pending {
            // It may not stand (repair.rs): its timer starts again, and it waits for a leader.
            self.postpone_standing();
            return Ok(());
        }
        self.state.check_to_prospective(self.may_stand())?;
        let retained_leader_id = match &self.state {
            EpochState::Follower(f) => Some(f.leader_id),
            _ => None,
        };
        self.state = EpochState::Prospective(ProspectiveState {
            epoch: self.epoch(),
            retained_leader_id,
            granting: self.own_grant(),
            rejecting: BTreeSet::new(),
            election_deadline_ms: self.now_ms + self.random_election_timeout_ms(),
            vote_resend_ms: self.now_ms + self.config.request_timeout_ms,
        });
        // Nothing durable changes: same epoch, same vote. A restart comes back as before.
        self.fetch_in_flight = None;
        self.fetch_timer_paused = false;
        if self.majority() == 1 && self.is_local_voter() {
            return self.transition_to_candidate(out);
        }
        self.send_vote_requests(out, &BTreeSet::new(), true);
        Ok(())
    }

    /// A round that reached no majority by its deadline starts over; unanswered voters are
    /// asked again every request timeout.
    pub(crate) fn poll_prospective(&mut self, out: &mut Out) -> Result<(), RaftError> {
        let now = self.now_ms;
        let request_timeout_ms = self.config.request_timeout_ms;
        let EpochState::Prospective(p) = &self.state else {
            return Ok(());
        };
        let new_round = now >= p.election_deadline_ms;
        if !new_round && now < p.vote_resend_ms {
            // Nothing due, and nothing drawn from the RNG: a tick before the deadline changes
            // nothing, so a waiting Prospective may rest between its timers
            // (`idle_tick_is_noop`).
            return Ok(());
        }
        // A new round's deadline and own grant, drawn and read only when it starts.
        let next_round =
            new_round.then(|| (now + self.random_election_timeout_ms(), self.own_grant()));
        let EpochState::Prospective(p) = &mut self.state else {
            return Ok(());
        };
        let answered: BTreeSet<NodeId> = match next_round {
            Some((next_round_ms, own_grant)) => {
                p.granting = own_grant;
                p.rejecting.clear();
                p.election_deadline_ms = next_round_ms;
                BTreeSet::new()
            }
            None => p.granting.union(&p.rejecting).copied().collect(),
        };
        p.vote_resend_ms = now + request_timeout_ms;
        self.send_vote_requests(out, &answered, true);
        Ok(())
    }

    /// Answers a pre-vote (after the epoch checks every Vote gets). Nothing here changes our
    /// state: a pre-vote binds nobody and is never persisted.
    ///
    /// Granted when the requester's log is at least as up to date as ours, unless we know a
    /// live leader of this epoch: we are it, or we follow it and fetched from it since we
    /// started following (Kafka's `FollowerState.canGrantVote`: a follower that never fetched
    /// must grant, else two followers of a dead leader would refuse each other forever). A
    /// refusal names that leader so the Prospective follows it again; a grant names none.
    pub(crate) fn answer_pre_vote(&mut self, from: NodeId, request: &VoteRequest, out: &mut Out) {
        debug_assert!(request.pre_vote);
        let log_ok = self.candidate_log_is_up_to_date(request);
        let (vote_granted, leader_id) = match &self.state {
            EpochState::Leader(_) => (false, Some(self.config.node_id)),
            EpochState::Follower(f) if self.fetched_from_leader => (false, Some(f.leader_id)),
            // A resigning leader is no leader to go back to.
            EpochState::Resigned(_) => (false, None),
            EpochState::Follower(_)
            | EpochState::Unattached(_)
            | EpochState::Voted(_)
            | EpochState::Prospective(_)
            | EpochState::Candidate(_) => (log_ok, None),
        };
        out.send(
            from,
            Message::VoteResponse(VoteResponse {
                error_code: ErrorCode::None,
                current_leader: LeaderIdAndEpoch {
                    leader_id,
                    leader_epoch: self.epoch(),
                },
                vote_granted,
            }),
        );
    }

    /// A Prospective counts the answers of its epoch; a majority makes it a Candidate. A round
    /// that can no longer be won ends after a random backoff instead of at its deadline.
    pub(crate) fn count_pre_vote(
        &mut self,
        from: NodeId,
        response: &VoteResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let majority = self.majority();
        let voters = self.voter_set().len();
        let from_is_voter = self.is_voter(from);
        let backoff_until_ms =
            self.now_ms + self.rng.below(self.config.election_backoff_max_ms + 1);
        let retry_at_ms = self.now_ms + self.config.retry_backoff_ms;
        let EpochState::Prospective(p) = &mut self.state else {
            return Ok(());
        };
        if response.error_code == ErrorCode::InvalidVoterKey && from_is_voter {
            // KIP-853: that voter's disk was replaced; the replica there is not the voter and
            // never will be until it is added again: a refusal, not a reason to ask again.
            crate::quorum::record_vote(&mut p.granting, &mut p.rejecting, from, false);
            return Ok(());
        }
        if response.error_code != ErrorCode::None && from_is_voter {
            // No answer yet (it may not host the partition yet: a new topic's replicas open it
            // a moment apart): ask again soon, as Kafka's RequestManager retries a failed
            // request after its retry backoff, not a whole request timeout later.
            p.vote_resend_ms = p.vote_resend_ms.min(retry_at_ms);
            return Ok(());
        }
        if response.current_leader.leader_epoch != p.epoch || !from_is_voter {
            return Ok(());
        }
        crate::quorum::record_vote(
            &mut p.granting,
            &mut p.rejecting,
            from,
            response.vote_granted,
        );
        if p.granting.len() >= majority {
            return self.transition_to_candidate(out);
        }
        if p.rejecting.len() > voters - majority {
            p.election_deadline_ms = p.election_deadline_ms.min(backoff_until_ms);
        }
        Ok(())
    }
}
