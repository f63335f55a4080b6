//! The generic epoch-state transitions (Unattached, Voted, Follower) and reacting to the
//! leader and epoch another replica reports; each transition checks the table in `quorum.rs`.
//! Candidacy, leadership and resignation live in `election.rs`, Prospective in `pre_vote.rs`.

use super::{Out, Raft};
use crate::error::RaftError;
use crate::message::LeaderIdAndEpoch;
use crate::quorum::{EpochState, FollowerState, UnattachedState, VotedState};
use crate::types::{ElectionState, Epoch, NodeId};

impl Raft {
    pub(crate) fn transition_to_unattached(
        &mut self,
        epoch: Epoch,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        self.state.check_to_unattached(epoch)?;
        let deadline = self
            .may_stand()
            .then(|| self.now_ms + self.random_election_timeout_ms());
        self.state = EpochState::Unattached(UnattachedState {
            epoch,
            election_deadline_ms: deadline,
        });
        self.set_election(
            ElectionState {
                epoch,
                leader_id: None,
                voted_for: None,
            },
            out,
        );
        self.fetch_in_flight = None;
        Ok(())
    }

    pub(crate) fn transition_to_voted(
        &mut self,
        epoch: Epoch,
        candidate: NodeId,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        // KIP-853: a replica votes whether or not its log names it a voter yet (see
        // `handle_vote_request`); only the candidate's voter set decides whether it counts.
        self.state.check_to_voted(epoch, true)?;
        let deadline = self.now_ms + self.random_election_timeout_ms();
        self.state = EpochState::Voted(VotedState {
            epoch,
            voted_id: candidate,
            election_deadline_ms: deadline,
        });
        self.set_election(
            ElectionState {
                epoch,
                leader_id: None,
                voted_for: Some(candidate),
            },
            out,
        );
        self.fetch_in_flight = None;
        Ok(())
    }

    pub(crate) fn transition_to_follower(
        &mut self,
        epoch: Epoch,
        leader_id: NodeId,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        assert_ne!(leader_id, self.config.node_id, "following ourselves");
        self.state.check_to_follower(epoch)?;
        // Keep the vote cast in this epoch: after a restart it must still forbid a second one.
        let voted_for = if epoch == self.election.epoch {
            self.election.voted_for
        } else {
            None
        };
        self.state = EpochState::Follower(FollowerState {
            epoch,
            leader_id,
            fetch_timeout_deadline_ms: self.now_ms + self.config.fetch_timeout_ms,
        });
        self.set_election(
            ElectionState {
                epoch,
                leader_id: Some(leader_id),
                voted_for,
            },
            out,
        );
        self.fetch_in_flight = None;
        self.fetch_backoff_until_ms = 0;
        self.last_fetch_response_ms = None;
        self.fetched_from_leader = false;
        // An observer that was asking the voters in turn fetches from the leader it just learned.
        self.discovery_index = 0;
        Ok(())
    }

    /// Reacts to the leader and epoch another replica reports (in any request or response):
    /// a newer epoch makes us follow its leader, or wait unattached when none is known yet.
    /// Returns true if the state changed.
    pub(crate) fn observe_leader(
        &mut self,
        seen: LeaderIdAndEpoch,
        out: &mut Out,
    ) -> Result<bool, RaftError> {
        let local = self.config.node_id;
        let epoch = self.epoch();
        if seen.leader_epoch == epoch
            && seen.leader_id.is_some()
            && self.resigned_leader == seen.leader_id.map(|leader| (epoch, leader))
        {
            // It announced its resignation: it will not lead this epoch again.
            return Ok(false);
        }
        match seen.leader_id {
            Some(leader) if leader != local && seen.leader_epoch > epoch => {
                self.transition_to_follower(seen.leader_epoch, leader, out)?;
                Ok(true)
            }
            Some(leader)
                if leader != local
                    && seen.leader_epoch == epoch
                    && matches!(
                        self.state,
                        EpochState::Unattached(_)
                            | EpochState::Voted(_)
                            | EpochState::Prospective(_)
                            | EpochState::Candidate(_)
                    ) =>
            {
                self.transition_to_follower(epoch, leader, out)?;
                Ok(true)
            }
            _ if seen.leader_epoch > epoch => {
                self.transition_to_unattached(seen.leader_epoch, out)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
