//! Voter changes (KIP-595 "Quorum reassignment"; Kafka's KIP-853 AddRaftVoter / RemoveRaftVoter):
//! the leader appends a `VotersRecord` that adds or removes one voter; every replica acts on a
//! voter set as soon as it is in its log (`VoterSetHistory`), and reverts when it is truncated.
//!
//! Rules, and where they are enforced:
//! - One change in flight: `add_voter` / `remove_voter` refuse while the newest voter set
//!   record is not committed (`VoterChangeInFlight`), and until the leader has committed a record
//!   of its own epoch (`LeaderEpochNotCommitted`: the fix for the single-server change bug in
//!   Ongaro's thesis; a new leader may not yet know of a change its predecessor appended).
//! - Each record differs from the one before it by exactly one voter; a follower refuses a
//!   Fetch response that breaks this (`VoterSetChangeTooLarge`).
//! - A new voter must have caught up as an observer: it fetched within `fetch_timeout_ms` and was
//!   at the leader's log end within `fetch_timeout_ms` (`VoterNotCaughtUp`, REQUEST_TIMED_OUT).
//! - Votes, pre-votes, check quorum and the high-watermark use the set in force
//!   ([`Raft::voter_set`]); the leader's replica progress moves between voters and observers when
//!   the set changes.
//! - A leader that removed itself keeps leading (without counting itself) until the removal is
//!   committed, then resigns with EndQuorumEpoch; when its election timer would fire it becomes an
//!   observer (Unattached, fetching) instead of standing.
//! - A removed voter learns of it from its own log: it keeps fetching as an observer.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::{Out, Raft};
use crate::error::RaftError;
use crate::mutation::Mutation;
use crate::quorum::{EpochState, UnattachedState};
use crate::raft::AppendResult;
use crate::types::{NodeId, OffsetAndEpoch};
use crate::voters::{VoterInfo, VoterSet, VoterSetHistory};
use crate::work::Work;

impl Raft {
    // ---- queries ----

    /// The voter set this replica acts on: the newest one in its log (KIP-595: effective when
    /// appended), or the bootstrap `controller.quorum.voters` while the log holds none.
    pub fn voter_set(&self) -> &VoterSet {
        if self.config.mutated(Mutation::ActOnCommittedVoterSet) {
            // Broken on purpose: only a committed voter set counts.
            return self.committed_voter_set();
        }
        self.voters.latest()
    }

    /// The newest voter set below this replica's high-watermark (committed as far as it knows).
    pub(crate) fn committed_voter_set(&self) -> &VoterSet {
        self.voters.committed(self.log.high_watermark())
    }

    /// Every voter set record this replica's log holds, over the bootstrap set.
    pub fn voter_history(&self) -> &VoterSetHistory {
        &self.voters
    }

    /// The voter set in force at `offset` (what a snapshot ending after `offset` must hold).
    pub fn voter_set_at(&self, offset: u64) -> &VoterSet {
        self.voters.at(offset)
    }

    pub(crate) fn is_voter(&self, id: NodeId) -> bool {
        self.voter_set().contains(id)
    }

    /// This replica is a voter of the set in force: its id is there with its own directory id
    /// (or none). A replica whose disk was replaced under the same id is an observer until it
    /// is added again (KIP-853 `QuorumState.isVoter`, the local `ReplicaKey`).
    pub(crate) fn is_local_voter(&self) -> bool {
        self.is_voter_key(self.config.node_id, self.config.directory_id)
    }

    /// Whether this replica may stand for election: a voter of the set in force, or a voter of
    /// the committed set that a record it does not yet know to be committed removed. A leader
    /// that removed itself and crashed before the removal committed may hold the only copy of
    /// it, and the longest log; if it could not stand, the old set would have to elect someone
    /// without its vote (it refuses shorter logs), and one more lost voter in that set (a
    /// replaced disk, `InvalidVoterKey`) left no majority at all, for good (simulator: 7 of the
    /// reconfig seeds 0..10,000 before 2026-12-06, `host_reconfig_regression_seeds`). Standing
    /// is safe for any replica: it counts only grants of its set in force (`own_grant`),
    /// and as leader it commits the removal and resigns (`maybe_resign_after_removal`).
    ///
    /// Removed means its id is gone from the set in force: a set that still names the id with
    /// another disk (a replaced disk, `InvalidVoterKey`) is no removal, and that replica never
    /// stands.
    pub(crate) fn may_stand(&self) -> bool {
        let local = self.config.node_id;
        self.is_local_voter()
            || (!self.voter_set().contains(local)
                && self
                    .committed_voter_set()
                    .is_voter_key(local, self.config.directory_id))
    }

    /// The votes a Prospective or Candidate starts with: its own, if it is a voter of the set
    /// in force (a replica standing under `may_stand` only counts the others').
    pub(crate) fn own_grant(&self) -> BTreeSet<NodeId> {
        if self.is_local_voter() {
            BTreeSet::from([self.config.node_id])
        } else {
            BTreeSet::new()
        }
    }

    /// KIP-853: replica `id` with disk `directory_id` is a voter of the set in force.
    pub(crate) fn is_voter_key(&self, id: NodeId, directory_id: [u8; 16]) -> bool {
        self.voter_set().is_voter_key(id, directory_id)
    }

    /// The directory id the set in force records for voter `id` (zero: none, or not a voter).
    pub(crate) fn voter_directory_id(&self, id: NodeId) -> [u8; 16] {
        self.voter_set()
            .directory_id_of(id)
            .unwrap_or(crate::voters::NO_DIRECTORY_ID)
    }

    pub(crate) fn majority(&self) -> usize {
        self.voter_set().majority()
    }

    // ---- leader API ----

    /// KIP-853 AddRaftVoter on the leader: appends a voter set with `id` added (zero directory
    /// id, no endpoints). `id` must have caught up as an observer first.
    pub fn add_voter(
        &mut self,
        now_ms: u64,
        id: NodeId,
    ) -> Result<(AppendResult, Vec<Work>), RaftError> {
        self.add_voter_with_info(now_ms, id, VoterInfo::default())
    }

    /// [`Raft::add_voter`] with the voter's directory id and endpoints.
    pub fn add_voter_with_info(
        &mut self,
        now_ms: u64,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<(AppendResult, Vec<Work>), RaftError> {
        self.advance_clock(now_ms);
        self.check_voter_change_allowed()?;
        if self.voters.latest().contains(id) {
            return Err(RaftError::AlreadyVoter(id));
        }
        self.check_caught_up(id)?;
        let next = self.voters.latest().with_voter(id, info);
        Ok(self.append_voter_set(next, 1))
    }

    /// KIP-853 UpdateRaftVoter on the leader: appends a voter set with `id`'s directory id and
    /// endpoints replaced; the ids stay the same, so every majority stays a majority. `Ok(None)`
    /// when nothing changes (nothing is appended). A voter known with another (non-zero)
    /// directory id is another disk: `UnknownVoter`.
    pub fn update_voter(
        &mut self,
        now_ms: u64,
        id: NodeId,
        info: VoterInfo,
    ) -> Result<Option<(AppendResult, Vec<Work>)>, RaftError> {
        self.advance_clock(now_ms);
        self.check_voter_change_allowed()?;
        let Some(existing) = self.voters.latest().voters().get(&id) else {
            return Err(RaftError::UnknownVoter(id));
        };
        if existing.directory_id != [0; 16] && existing.directory_id != info.directory_id {
            return Err(RaftError::UnknownVoter(id));
        }
        if *existing == info {
            return Ok(None);
        }
        let next = self.voters.latest().with_voter(id, info);
        Ok(Some(self.append_voter_set(next, 0)))
    }

    /// KIP-853 RemoveRaftVoter on the leader: appends a voter set without `id` (which may be
    /// the leader itself: it resigns once the removal is committed).
    pub fn remove_voter(
        &mut self,
        now_ms: u64,
        id: NodeId,
    ) -> Result<(AppendResult, Vec<Work>), RaftError> {
        self.advance_clock(now_ms);
        self.check_voter_change_allowed()?;
        if !self.voters.latest().contains(id) {
            return Err(RaftError::UnknownVoter(id));
        }
        let next = self
            .voters
            .latest()
            .without_voter(id)
            .ok_or_else(|| RaftError::InvalidVoterSet(Vec::new()))?;
        Ok(self.append_voter_set(next, 1))
    }

    /// Leader, own epoch committed, previous change committed.
    fn check_voter_change_allowed(&self) -> Result<(), RaftError> {
        let EpochState::Leader(leader) = &self.state else {
            return Err(RaftError::NotLeader {
                leader_id: self.leader_id(),
                epoch: self.epoch(),
            });
        };
        let high_watermark = self.log.high_watermark();
        if high_watermark <= leader.epoch_start_offset {
            return Err(RaftError::LeaderEpochNotCommitted {
                epoch_start_offset: leader.epoch_start_offset,
                high_watermark,
            });
        }
        if let Some(pending_offset) = self.voters.latest_offset()
            && pending_offset >= high_watermark
            && !self.config.mutated(Mutation::SecondVoterChangeInFlight)
        {
            return Err(RaftError::VoterChangeInFlight {
                pending_offset,
                high_watermark,
            });
        }
        Ok(())
    }

    /// A new voter must be a live observer that reached the leader's log end recently.
    fn check_caught_up(&self, id: NodeId) -> Result<(), RaftError> {
        let EpochState::Leader(leader) = &self.state else {
            unreachable!("checked by check_voter_change_allowed")
        };
        let progress = leader.observers.get(&id).or_else(|| leader.voters.get(&id));
        let recent = |t: Option<u64>| {
            t.is_some_and(|t| t + self.config.fetch_timeout_ms >= self.now_ms && t > 0)
        };
        let caught_up = id != self.config.node_id
            && progress.is_some_and(|p| recent(p.last_fetch_ms) && recent(p.last_caught_up_ms));
        if caught_up {
            Ok(())
        } else {
            Err(RaftError::VoterNotCaughtUp {
                voter_id: id,
                fetch_offset: progress.and_then(|p| p.end_offset),
                log_end_offset: self.log.log_end_offset(),
            })
        }
    }

    /// Appends `next` as a VotersRecord in the leader's epoch; it is in force from now on.
    /// `difference`: how many ids it adds or removes (1, or 0 for an update of a voter's
    /// endpoints).
    fn append_voter_set(&mut self, next: VoterSet, difference: usize) -> (AppendResult, Vec<Work>) {
        let EpochState::Leader(leader) = &self.state else {
            unreachable!("checked by check_voter_change_allowed")
        };
        let leader_epoch = leader.epoch;
        assert_eq!(
            self.voters.latest().id_difference(&next),
            difference,
            "a voter change adds or removes at most one voter"
        );
        let base_offset = self.log.log_end_offset();
        // The first voter set in the log moves the quorum to kraft.version 1: as Kafka's
        // leader does, a KRaftVersionRecord goes first, in the same batch (KIP-853).
        let (batch, voters_offset): (Bytes, u64) = if self.voters.latest_offset().is_none() {
            (
                crate::records::first_voters_batch(&next, self.now_ms as i64),
                base_offset + 1,
            )
        } else {
            (
                crate::records::voters_batch(&next, self.now_ms as i64),
                base_offset,
            )
        };
        self.log.append(base_offset, voters_offset, leader_epoch);
        self.voters.add_at(voters_offset, next);
        let mut out = self.new_out();
        out.push(Work::AppendAsLeader {
            base_offset,
            leader_epoch,
            batches: vec![batch],
        });
        self.request_flush(&mut out);
        self.complete_parked_fetches(&mut out, false);
        self.on_voter_set_changed(&mut out);
        (
            AppendResult {
                base_offset,
                last_offset: voters_offset,
                leader_epoch,
            },
            out.finish(),
        )
    }

    // ---- following the log ----

    /// A follower appended records from the leader: records the voter sets among them
    /// (already checked by [`Raft::check_fetched_voter_sets`]).
    pub(crate) fn on_voter_sets_appended(&mut self, found: Vec<(u64, VoterSet)>, out: &mut Out) {
        if found.is_empty() {
            return;
        }
        for (offset, voters) in found {
            self.voters.add_at(offset, voters);
        }
        self.on_voter_set_changed(out);
    }

    /// Before appending a Fetch response: each voter set in it must differ from the one before
    /// it by one voter (KIP-595: one change at a time). A response that breaks this is refused
    /// whole.
    pub(crate) fn check_fetched_voter_sets(
        &self,
        found: &[(u64, VoterSet)],
    ) -> Result<(), RaftError> {
        let mut previous = self.voters.latest();
        for (offset, voters) in found {
            let difference = previous.id_difference(voters);
            // A replica started with bootstrap servers only knows no set yet: the first one it
            // fetches is the quorum's, whatever its size (KIP-853).
            if difference > 1 && !previous.is_empty() {
                return Err(RaftError::VoterSetChangeTooLarge {
                    offset: *offset,
                    difference,
                });
            }
            previous = voters;
        }
        Ok(())
    }

    /// The log was truncated to `offset`: voter sets from there on are no longer in force.
    pub(crate) fn on_log_truncated(&mut self, offset: u64, out: &mut Out) {
        if self.voters.truncate_from(offset) {
            self.on_voter_set_changed(out);
        }
    }

    /// KIP-630 + KIP-853: the host installed the fetched snapshot `snapshot_id` (after
    /// `Work::InstallSnapshot`) and read the voter set it holds (`None`: it holds none, the
    /// bootstrap set applies). Call before any other input.
    pub fn on_snapshot_installed(
        &mut self,
        now_ms: u64,
        snapshot_id: OffsetAndEpoch,
        voters: Option<VoterSet>,
    ) -> Vec<Work> {
        self.advance_clock(now_ms);
        let mut out = self.new_out();
        if self.log.log_start_snapshot_id() == Some(snapshot_id) {
            self.voters.reset_to_snapshot(snapshot_id.offset, voters);
            self.on_voter_set_changed(&mut out);
        }
        out.finish()
    }

    /// The set in force may have changed: a leader recomputes the high-watermark with it (and
    /// resigns if it removed itself and that is committed).
    pub(crate) fn on_voter_set_changed(&mut self, out: &mut Out) {
        self.on_leader_progress(out);
    }

    /// A leader's replica progress follows the set in force: a removed voter's progress moves
    /// to the observers, an added voter's (it fetched as an observer) to the voters, so the
    /// high-watermark and check quorum count exactly the voters in force.
    pub(crate) fn sync_leader_replicas(&mut self) {
        let EpochState::Leader(leader) = &self.state else {
            return;
        };
        let voters = self.voter_set();
        let local = self.config.node_id;
        // A voter whose recorded progress came from another disk than the one the set now
        // names (UpdateRaftVoter recorded a directory id) starts over, as a new voter does.
        let stale_disk = |id: NodeId, p: &crate::quorum::ReplicaProgress| {
            id != local && p.end_offset.is_some() && !voters.is_voter_key(id, p.directory_id)
        };
        if leader.voters.len() == voters.len()
            && leader.voters.keys().all(|id| voters.contains(*id))
            && !leader.voters.iter().any(|(id, p)| stale_disk(*id, p))
        {
            return;
        }
        let voters = voters.clone();
        let EpochState::Leader(leader) = &mut self.state else {
            return;
        };
        for (id, progress) in leader.voters.iter_mut() {
            if *id != local
                && progress.end_offset.is_some()
                && !voters.is_voter_key(*id, progress.directory_id)
            {
                progress.end_offset = None;
            }
        }
        let removed: Vec<NodeId> = leader
            .voters
            .keys()
            .copied()
            .filter(|id| !voters.contains(*id))
            .collect();
        for id in removed {
            let progress = leader.voters.remove(&id).unwrap_or_default();
            leader.endorsed.remove(&id);
            // A replica that already fetches as an observer (its disk replaced: same id, new
            // directory id) keeps that newer progress.
            if id != local {
                leader.observers.entry(id).or_insert(progress);
            }
        }
        for id in voters.iter_ids() {
            if !leader.voters.contains_key(&id) {
                // A new (or re-added) voter's fetch offset counts toward the high-watermark
                // only from its first fetch as a voter: what it reported as an observer may be
                // gone (a replaced disk restarts empty, and the leader cannot tell without
                // KIP-853's directory ids). Counting it let a leader commit on a wiped spare's
                // old offset (simulator, profile reconfig, seeds 170 and 289). Its fetch times
                // stay: check quorum and the caught-up check only need liveness.
                let mut progress = leader.observers.remove(&id).unwrap_or_default();
                progress.end_offset = None;
                leader.voters.insert(id, progress);
            }
        }
    }

    /// A leader no longer in the voter set resigns once that voter set is committed (KIP-595:
    /// "it will step down by sending EndQuorumEpoch to the current voters").
    pub(crate) fn maybe_resign_after_removal(&mut self, out: &mut Out) {
        if !matches!(self.state, EpochState::Leader(_)) || self.is_local_voter() {
            return;
        }
        let committed = self
            .voters
            .latest_offset()
            .is_some_and(|offset| offset < self.log.high_watermark());
        if committed {
            tracing::info!(
                node_id = self.config.node_id,
                epoch = self.epoch(),
                "removed from the voter set: resigning"
            );
            self.transition_to_resigned(out, None)
                .expect("a leader can always resign");
        }
    }

    /// A resigned leader that is no longer a voter does not stand: it becomes an observer of
    /// its epoch, looking for the next leader.
    pub(crate) fn transition_to_removed_observer(&mut self) -> Result<(), RaftError> {
        self.state.check_to_removed(self.is_local_voter())?;
        self.state = EpochState::Unattached(UnattachedState {
            epoch: self.epoch(),
            election_deadline_ms: None,
        });
        self.fetch_in_flight = None;
        self.discovery_index = 0;
        Ok(())
    }
}
