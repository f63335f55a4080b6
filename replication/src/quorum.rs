//! The epoch states of a replica, one type per state, and the legal transitions between them
//! (KIP-595; Kafka's `QuorumState`, with KIP-996's Prospective state).
//!
//! | from \ to      | Unattached | Voted        | Prospective | Candidate   | Leader        | Follower | Resigned |
//! |----------------|------------|--------------|-------------|-------------|---------------|----------|----------|
//! | Unattached(e)  | e' > e     | e' ≥ e, voter| same e      | –           | –             | e' ≥ e   | –        |
//! | Voted(e)       | e' > e     | e' > e       | same e      | –           | –             | e' ≥ e   | –        |
//! | Prospective(e) | e' > e     | e' > e       | –           | e + 1       | –             | e' ≥ e   | –        |
//! | Candidate(e)   | e' > e     | e' > e       | same e      | –           | same e, quorum| e' ≥ e   | same e   |
//! | Leader(e)      | e' > e     | e' > e       | –           | –           | –             | e' > e   | same e   |
//! | Follower(e)    | e' > e     | e' > e       | same e      | –           | –             | e' > e   | –        |
//! | Resigned(e)    | e' > e, or e once removed | e' > e | same e | –      | –             | e' > e   | –        |
//!
//! A leader that removed itself from the voter set resigns once the removal is committed and
//! then, when its election timer fires, becomes Unattached in the same epoch as an observer
//! (`check_to_removed`), since it may not stand.
//!
//! Only replicas that may stand (`Raft::may_stand`: the local node is in the voter set in
//! force, `controller.quorum.voters` or the newest voter set record in its log, or in the
//! committed one while a newer record removing it is not known to be committed) become
//! Prospective, Candidate or Leader: observers never stand and never lead. KIP-996: a timeout
//! makes a voter Prospective in its *current* epoch, and only a majority of pre-votes makes it a
//! Candidate, which always moves to epoch e + 1; a lost election goes back to Prospective. So a
//! voter that merely lost touch (a slow disk, a stalled process, a one-sided partition) cannot
//! raise the epoch and unseat a leader the others still follow. A leader must resign (or see a
//! newer epoch) before it can stand again. Any transition to a newer epoch is legal from any
//! state. Everything else is refused with `RaftError::IllegalTransition`.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::RaftError;
use crate::purgatory::Purgatory;
use crate::types::{Epoch, NodeId};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnattachedState {
    pub epoch: Epoch,
    /// None for observers: they never stand for election.
    pub election_deadline_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VotedState {
    pub epoch: Epoch,
    pub voted_id: NodeId,
    pub election_deadline_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateState {
    pub epoch: Epoch,
    pub granting: BTreeSet<NodeId>,
    pub rejecting: BTreeSet<NodeId>,
    pub election_deadline_ms: u64,
    /// Set once the election is lost (timed out or rejected by enough voters): the next
    /// candidacy starts at this time.
    pub backoff_until_ms: Option<u64>,
    /// When to resend the Vote request to voters that have not answered.
    pub vote_resend_ms: u64,
}

/// KIP-996: a voter whose fetch or election timer expired asks the others whether they would
/// vote for it (a pre-vote), without raising the epoch and without binding anyone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProspectiveState {
    pub epoch: Epoch,
    /// The leader this voter followed in `epoch` before its fetch timeout, if any: kept for
    /// the quorum-state (nothing is rewritten), never announced as our leader.
    pub retained_leader_id: Option<NodeId>,
    pub granting: BTreeSet<NodeId>,
    pub rejecting: BTreeSet<NodeId>,
    /// When this pre-vote round ends without a majority; the next round starts then.
    pub election_deadline_ms: u64,
    /// When to resend the pre-vote to voters that have not answered.
    pub vote_resend_ms: u64,
}

/// Counts one voter's answer to a Vote (or pre-vote) round: a grant replaces an earlier
/// refusal from the same voter (a resent request may be answered twice), a refusal never
/// replaces a grant. Shared by `CandidateState` and `ProspectiveState`.
pub fn record_vote(
    granting: &mut BTreeSet<NodeId>,
    rejecting: &mut BTreeSet<NodeId>,
    from: NodeId,
    granted: bool,
) {
    if granted {
        granting.insert(from);
        rejecting.remove(&from);
    } else if !granting.contains(&from) {
        rejecting.insert(from);
    }
}

/// What the leader knows about one replica's progress in its epoch.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReplicaProgress {
    /// The last validated fetch offset (the replica's durable log end).
    pub end_offset: Option<u64>,
    /// KIP-853: the directory id of the replica's last fetch (zero: none named). For a voter
    /// it matches the voter set in force (other fetches are an observer's).
    pub directory_id: [u8; 16],
    pub last_fetch_ms: Option<u64>,
    pub last_caught_up_ms: Option<u64>,
    /// The high-watermark the last Fetch answer to this replica carried, in this epoch. A
    /// fetch with no records to return is answered at once, not parked, while this is behind
    /// the leader's (a replica not answered yet in this epoch waits as before): else a
    /// follower whose fetch arrives just after the commit its peer's fetch
    /// completed learns of it only when its long poll ends (`fetch.max.wait.ms` later). Kafka
    /// fixed the same delay with the replica's high-watermark in the Fetch request (KIP-1166,
    /// Fetch v18); the leader's own record of what it told each replica needs no wire change.
    pub high_watermark_sent: Option<u64>,
}

/// A replica's fetch with nothing to return yet, parked in the leader's purgatory
/// ([`Purgatory`]) until data arrives, the high-watermark moves (where followers hear of it
/// promptly) or its wait ends (long-poll).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedReplicaFetch {
    pub correlation_id: u64,
    pub fetch_offset: u64,
    pub max_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderState {
    pub epoch: Epoch,
    /// Offset of this epoch's LeaderChangeMessage: the high-watermark may only pass it.
    pub epoch_start_offset: u64,
    pub granting_voters: Vec<NodeId>,
    pub voters: BTreeMap<NodeId, ReplicaProgress>,
    pub observers: BTreeMap<NodeId, ReplicaProgress>,
    /// Voters that acknowledged BeginQuorumEpoch (or fetched in this epoch).
    pub endorsed: BTreeSet<NodeId>,
    pub begin_quorum_resend_ms: u64,
    pub became_leader_ms: u64,
    /// Replica fetches waiting for records, a high-watermark move or their `max_wait_ms`.
    pub parked: Purgatory<NodeId, ParkedReplicaFetch>,
    /// A leadership transfer waiting for its successor to fetch the whole log
    /// (`Raft::transfer_leadership`): client appends are refused meanwhile.
    pub transfer: Option<PendingTransfer>,
}

/// A leadership transfer in progress: the leader resigns naming `successor` first once that
/// voter's fetch reaches its log end, or gives up at `deadline_ms` (one election timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingTransfer {
    pub successor: NodeId,
    pub deadline_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerState {
    pub epoch: Epoch,
    pub leader_id: NodeId,
    /// Without a successful fetch response before this time, a voter stands for election and
    /// an observer tries another voter.
    pub fetch_timeout_deadline_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResignedState {
    pub epoch: Epoch,
    pub preferred_successors: Vec<NodeId>,
    pub unacknowledged: BTreeSet<NodeId>,
    pub end_quorum_resend_ms: u64,
    pub election_deadline_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EpochState {
    Unattached(UnattachedState),
    Voted(VotedState),
    Prospective(ProspectiveState),
    Candidate(CandidateState),
    Leader(LeaderState),
    Follower(FollowerState),
    Resigned(ResignedState),
}

impl EpochState {
    pub fn epoch(&self) -> Epoch {
        match self {
            EpochState::Unattached(s) => s.epoch,
            EpochState::Voted(s) => s.epoch,
            EpochState::Prospective(s) => s.epoch,
            EpochState::Candidate(s) => s.epoch,
            EpochState::Leader(s) => s.epoch,
            EpochState::Follower(s) => s.epoch,
            EpochState::Resigned(s) => s.epoch,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            EpochState::Unattached(_) => "Unattached",
            EpochState::Voted(_) => "Voted",
            EpochState::Prospective(_) => "Prospective",
            EpochState::Candidate(_) => "Candidate",
            EpochState::Leader(_) => "Leader",
            EpochState::Follower(_) => "Follower",
            EpochState::Resigned(_) => "Resigned",
        }
    }

    fn illegal(&self, to: &'static str, epoch: Epoch) -> RaftError {
        RaftError::IllegalTransition {
            from: self.name(),
            to,
            epoch,
        }
    }

    /// Unattached: a newer epoch without a known leader.
    pub fn check_to_unattached(&self, epoch: Epoch) -> Result<(), RaftError> {
        if epoch > self.epoch() {
            Ok(())
        } else {
            Err(self.illegal("Unattached", epoch))
        }
    }

    /// Voted: only voters, only once per epoch, only from Unattached in the same epoch.
    pub fn check_to_voted(&self, epoch: Epoch, local_is_voter: bool) -> Result<(), RaftError> {
        let ok = local_is_voter
            && (epoch > self.epoch()
                || (epoch == self.epoch() && matches!(self, EpochState::Unattached(_))));
        if ok {
            Ok(())
        } else {
            Err(self.illegal("Voted", epoch))
        }
    }

    /// Prospective (KIP-996): only voters, in the same epoch, from any state but Leader
    /// (resign first) and Prospective itself (a new pre-vote round stays in the state).
    pub fn check_to_prospective(&self, local_is_voter: bool) -> Result<(), RaftError> {
        if local_is_voter && !matches!(self, EpochState::Leader(_) | EpochState::Prospective(_)) {
            Ok(())
        } else {
            Err(self.illegal("Prospective", self.epoch()))
        }
    }

    /// Candidate: only voters, and only a Prospective that won its pre-vote (KIP-996).
    pub fn check_to_candidate(
        &self,
        local_is_voter: bool,
        majority: usize,
    ) -> Result<(), RaftError> {
        match self {
            EpochState::Prospective(p) if local_is_voter && p.granting.len() >= majority => Ok(()),
            _ => Err(self.illegal("Candidate", self.epoch() + 1)),
        }
    }

    /// Leader: only a candidate holding a majority of grants, in its own epoch.
    pub fn check_to_leader(&self, majority: usize) -> Result<(), RaftError> {
        match self {
            EpochState::Candidate(c)
                if c.granting.len() >= majority && c.backoff_until_ms.is_none() =>
            {
                Ok(())
            }
            _ => Err(self.illegal("Leader", self.epoch())),
        }
    }

    /// Follower: a newer epoch, or the same epoch while no leader was known.
    pub fn check_to_follower(&self, epoch: Epoch) -> Result<(), RaftError> {
        let ok = epoch > self.epoch()
            || (epoch == self.epoch()
                && matches!(
                    self,
                    EpochState::Unattached(_)
                        | EpochState::Voted(_)
                        | EpochState::Prospective(_)
                        | EpochState::Candidate(_)
                ));
        if ok {
            Ok(())
        } else {
            Err(self.illegal("Follower", epoch))
        }
    }

    /// A resigned leader that removed itself from the voter set becomes an observer of its
    /// epoch (Unattached, same epoch) instead of standing again.
    pub fn check_to_removed(&self, local_is_voter: bool) -> Result<(), RaftError> {
        match self {
            EpochState::Resigned(_) if !local_is_voter => Ok(()),
            _ => Err(self.illegal("Unattached", self.epoch())),
        }
    }

    /// Resigned: a leader (or a candidate shutting down) in its own epoch.
    pub fn check_to_resigned(&self) -> Result<(), RaftError> {
        match self {
            EpochState::Leader(_) | EpochState::Candidate(_) => Ok(()),
            _ => Err(self.illegal("Resigned", self.epoch())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unattached(epoch: Epoch) -> EpochState {
        EpochState::Unattached(UnattachedState {
            epoch,
            election_deadline_ms: None,
        })
    }
    fn voted(epoch: Epoch) -> EpochState {
        EpochState::Voted(VotedState {
            epoch,
            voted_id: 2,
            election_deadline_ms: 0,
        })
    }
    fn candidate(epoch: Epoch, grants: &[NodeId]) -> EpochState {
        EpochState::Candidate(CandidateState {
            epoch,
            granting: grants.iter().copied().collect(),
            rejecting: BTreeSet::new(),
            election_deadline_ms: 0,
            backoff_until_ms: None,
            vote_resend_ms: 0,
        })
    }
    fn prospective(epoch: Epoch, grants: &[NodeId]) -> EpochState {
        EpochState::Prospective(ProspectiveState {
            epoch,
            retained_leader_id: Some(2),
            granting: grants.iter().copied().collect(),
            rejecting: BTreeSet::new(),
            election_deadline_ms: 0,
            vote_resend_ms: 0,
        })
    }
    fn leader(epoch: Epoch) -> EpochState {
        EpochState::Leader(LeaderState {
            epoch,
            epoch_start_offset: 0,
            granting_voters: vec![],
            voters: BTreeMap::new(),
            observers: BTreeMap::new(),
            endorsed: BTreeSet::new(),
            begin_quorum_resend_ms: 0,
            became_leader_ms: 0,
            parked: Purgatory::new(),
            transfer: None,
        })
    }
    fn follower(epoch: Epoch) -> EpochState {
        EpochState::Follower(FollowerState {
            epoch,
            leader_id: 2,
            fetch_timeout_deadline_ms: 0,
        })
    }
    fn resigned(epoch: Epoch) -> EpochState {
        EpochState::Resigned(ResignedState {
            epoch,
            preferred_successors: vec![],
            unacknowledged: BTreeSet::new(),
            end_quorum_resend_ms: 0,
            election_deadline_ms: 0,
        })
    }

    #[test]
    fn transition_table_matches_the_module_doc() {
        let states = [
            unattached(5),
            voted(5),
            prospective(5, &[1, 2]),
            candidate(5, &[1, 2]),
            leader(5),
            follower(5),
            resigned(5),
        ];
        // (to Unattached same epoch, Voted same epoch, Prospective, Candidate (majority 2),
        //  Leader (majority 2), Follower same epoch, Resigned)
        let expected = [
            (false, true, true, false, false, true, false), // Unattached
            (false, false, true, false, false, true, false), // Voted
            (false, false, false, true, false, true, false), // Prospective
            (false, false, true, false, true, true, true),  // Candidate
            (false, false, false, false, false, false, true), // Leader
            (false, false, true, false, false, false, false), // Follower
            (false, false, true, false, false, false, false), // Resigned
        ];
        for (state, want) in states.iter().zip(expected) {
            let got = (
                state.check_to_unattached(5).is_ok(),
                state.check_to_voted(5, true).is_ok(),
                state.check_to_prospective(true).is_ok(),
                state.check_to_candidate(true, 2).is_ok(),
                state.check_to_leader(2).is_ok(),
                state.check_to_follower(5).is_ok(),
                state.check_to_resigned().is_ok(),
            );
            assert_eq!(got, want, "from {}", state.name());
            // A newer epoch is always reachable as Unattached, Voted (voters) and Follower.
            assert!(state.check_to_unattached(6).is_ok());
            assert!(state.check_to_voted(6, true).is_ok());
            assert!(state.check_to_follower(6).is_ok());
            // Observers never vote, never ask for pre-votes and never stand.
            assert!(state.check_to_voted(6, false).is_err());
            assert!(state.check_to_prospective(false).is_err());
            assert!(state.check_to_candidate(false, 2).is_err());
        }
        assert!(
            candidate(5, &[1]).check_to_leader(2).is_err(),
            "a minority never leads"
        );
        assert!(
            prospective(5, &[1]).check_to_candidate(true, 2).is_err(),
            "a lost pre-vote never stands"
        );
    }
}
