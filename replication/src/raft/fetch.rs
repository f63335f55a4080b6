//! Fetch, both sides (KIP-595 with KIP-320's DivergingEpoch), the high-watermark and the
//! leader's long-poll.

use super::{InFlightFetch, Out, Raft};
use crate::error::{ErrorCode, RaftError};
use crate::log_state::ValidatedOffset;
use crate::message::{FetchRequest, FetchResponse, Message};
use crate::mutation::Mutation;
use crate::quorum::{EpochState, ParkedReplicaFetch};
use crate::types::NodeId;
use crate::work::Work;

/// How many fetch responses, wholly above the durable end, a follower catching up lets wait
/// for its disk before it stops fetching ahead (`Raft::fetch_may_leave`).
pub(crate) const FETCH_AHEAD_RESPONSES: usize = 4;

impl Raft {
    /// While this replica leads: the least log end offset among the other voters, which fetch
    /// what lies past it from this log (0 for a voter not heard from in this epoch, which may
    /// need everything); `None` otherwise, or with no other voter. The host keeps the records
    /// past it in memory while its budget allows (`PartitionLog::keep_for_lagging_replicas`).
    /// Observers are not waited for: one gone for good would hold the budget.
    pub fn lagging_voters_end_offset(&self) -> Option<u64> {
        let EpochState::Leader(leader) = &self.state else {
            return None;
        };
        leader
            .voters
            .iter()
            .filter(|(id, _)| **id != self.config.node_id)
            .map(|(_, progress)| progress.end_offset.unwrap_or(0))
            .min()
    }

    fn fetch_response(&self, correlation_id: u64, error_code: ErrorCode) -> FetchResponse {
        FetchResponse {
            correlation_id,
            error_code,
            current_leader: self.leader_and_epoch(),
            high_watermark: self.log.high_watermark(),
            log_start_offset: self.log.log_start_offset(),
            diverging_epoch: None,
            snapshot_id: None,
            records: bytes::Bytes::new(),
        }
    }

    /// Leader side. Order of checks as in KIP-595/KIP-320: the epoch (FENCED_LEADER_EPOCH,
    /// UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), then the offset against the epoch cache
    /// (DivergingEpoch, or a snapshot id below the log start), then records or a long-poll.
    pub(crate) fn handle_fetch_request(
        &mut self,
        from: NodeId,
        request: FetchRequest,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        let error = if request.current_leader_epoch < self.epoch() {
            Some(ErrorCode::FencedLeaderEpoch)
        } else if request.current_leader_epoch > self.epoch() {
            Some(ErrorCode::UnknownLeaderEpoch)
        } else if !self.is_leader() {
            Some(ErrorCode::NotLeaderOrFollower)
        } else if from != request.replica_id {
            Some(ErrorCode::InvalidRequest)
        } else {
            None
        };
        if let Some(error_code) = error {
            let response = self.fetch_response(request.correlation_id, error_code);
            // The answer names our epoch: not before that epoch is durable (a candidate whose
            // vote is still being written, say).
            if self.persisted_election.epoch < self.epoch() {
                out.send_after_persist(from, Message::FetchResponse(response));
            } else {
                out.push(Work::SendFetchResponse {
                    to: from,
                    response,
                    fetch_offset: request.fetch_offset,
                    max_bytes: 0,
                });
            }
            return Ok(());
        }
        match self
            .log
            .validate_offset_and_epoch(request.fetch_offset, request.last_fetched_epoch)
        {
            ValidatedOffset::Diverging(end) => {
                self.forget_observer_progress(from);
                let mut response = self.fetch_response(request.correlation_id, ErrorCode::None);
                response.diverging_epoch = Some(end);
                out.push(Work::SendFetchResponse {
                    to: from,
                    response,
                    fetch_offset: request.fetch_offset,
                    max_bytes: 0,
                });
            }
            ValidatedOffset::Snapshot(snapshot_id) => {
                self.forget_observer_progress(from);
                // KIP-630 hook: the snapshot layer makes the log start move; then the fetcher
                // is told which snapshot to load with FetchSnapshot.
                let mut response = self.fetch_response(request.correlation_id, ErrorCode::None);
                response.snapshot_id = Some(snapshot_id);
                out.push(Work::SendFetchResponse {
                    to: from,
                    response,
                    fetch_offset: request.fetch_offset,
                    max_bytes: 0,
                });
            }
            ValidatedOffset::Valid(_) => {
                let now = self.now_ms;
                let log_end_offset = self.log.log_end_offset();
                let high_watermark = self.log.high_watermark();
                // KIP-853: a voter is its id *and* its disk. A fetch from the voter's id with
                // another directory id (its disk replaced) is an observer's.
                let is_voter = self.is_voter_key(from, request.replica_directory_id);
                let max_wait_ms = request.max_wait_ms.min(self.config.fetch_max_wait_ms);
                let EpochState::Leader(leader) = &mut self.state else {
                    unreachable!("checked above")
                };
                // The fetch offset is the replica's durable log end (a replica flushes before it
                // fetches again, or fetches ahead only below the high-watermark, where counting
                // it changes nothing: `fetch_may_leave`), and validation proved its log matches
                // ours below it.
                let progress = if is_voter {
                    leader.endorsed.insert(from);
                    leader.voters.entry(from).or_default()
                } else {
                    leader.observers.entry(from).or_default()
                };
                progress.end_offset = Some(request.fetch_offset);
                progress.directory_id = request.replica_directory_id;
                progress.last_fetch_ms = Some(now);
                if request.fetch_offset >= log_end_offset {
                    progress.last_caught_up_ms = Some(now);
                }
                leader.parked.take(&from);
                let max_bytes = request.max_bytes.min(self.config.fetch_max_bytes);
                // Nothing new to send, but a commit it has not heard of: answer now (where
                // followers must hear of commits promptly: `prompt_high_watermark`).
                let high_watermark_news = self.config.prompt_high_watermark
                    && progress
                        .high_watermark_sent
                        .is_some_and(|sent| sent < high_watermark);
                if request.fetch_offset < log_end_offset || max_wait_ms == 0 || high_watermark_news
                {
                    progress.high_watermark_sent = Some(high_watermark);
                    let response = self.fetch_response(request.correlation_id, ErrorCode::None);
                    out.push(Work::SendFetchResponse {
                        to: from,
                        response,
                        fetch_offset: request.fetch_offset,
                        max_bytes,
                    });
                } else {
                    leader.parked.park(
                        from,
                        ParkedReplicaFetch {
                            correlation_id: request.correlation_id,
                            fetch_offset: request.fetch_offset,
                            max_bytes,
                        },
                        long_poll_deadline(now, max_wait_ms, self.config.fetch_wait_grain_ms),
                    );
                }
                if is_voter {
                    self.on_leader_progress(out);
                }
                // This replica may have been the last live one short of the latest snapshot.
                self.maybe_advance_log_start_offset(out);
                // The successor of a pending transfer may have just reached the log end.
                if is_voter {
                    self.maybe_complete_transfer(out)?;
                }
            }
        }
        Ok(())
    }

    /// An observer's fetch was answered with a divergence or a snapshot: it no longer holds
    /// what it last reported (its disk may have been replaced), so `add_voter` must not count
    /// it as caught up on that old progress. (The high-watermark never counts observer
    /// progress: `sync_leader_replicas` drops it when a replica becomes a voter.) KIP-853's
    /// directory ids would tell such a replica apart on the wire.
    fn forget_observer_progress(&mut self, from: NodeId) {
        if let EpochState::Leader(leader) = &mut self.state
            && let Some(progress) = leader.observers.get_mut(&from)
        {
            progress.end_offset = None;
            progress.last_caught_up_ms = None;
        }
    }

    /// Recomputes the high-watermark after a voter's (or our own durable) progress moved:
    /// the largest offset fsynced on a majority of voters, and only once it covers a record of
    /// the leader's own epoch (KIP-595; Raft §5.4.2). Parked fetches learn the new value
    /// (at once where `QuorumConfig::prompt_high_watermark`, else with records or at the end of
    /// their wait).
    pub(crate) fn on_leader_progress(&mut self, out: &mut Out) {
        self.sync_leader_replicas();
        self.advance_leader_high_watermark(out);
        // A leader that removed itself steps down once that is committed.
        self.maybe_resign_after_removal(out);
    }

    fn advance_leader_high_watermark(&mut self, out: &mut Out) {
        let local = self.config.node_id;
        let durable = self.log.durable_end_offset();
        let EpochState::Leader(leader) = &self.state else {
            return;
        };
        let mut offsets: Vec<u64> = leader
            .voters
            .iter()
            .map(|(id, p)| {
                if *id == local {
                    durable
                } else {
                    p.end_offset.unwrap_or(0)
                }
            })
            .collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        let majority_offset = if self.config.mutated(Mutation::HighWatermarkWithoutMajority) {
            offsets[0]
        } else {
            offsets[self.majority() - 1]
        };
        let own_epoch_committed = majority_offset > leader.epoch_start_offset
            || self.config.mutated(Mutation::SkipOwnEpochCommitRule);
        if own_epoch_committed
            && self
                .log
                .advance_high_watermark(majority_offset.min(self.log.log_end_offset()))
        {
            out.push(Work::HighWatermarkChanged {
                high_watermark: self.log.high_watermark(),
            });
            if self.config.prompt_high_watermark {
                self.complete_parked_fetches(out, false);
            }
        }
    }

    /// Records that the answer about to go to `replica` carries the current high-watermark
    /// (`ReplicaProgress::high_watermark_sent`).
    fn note_high_watermark_sent(&mut self, replica: NodeId) {
        let high_watermark = self.log.high_watermark();
        let EpochState::Leader(leader) = &mut self.state else {
            return;
        };
        if let Some(progress) = leader
            .voters
            .get_mut(&replica)
            .or_else(|| leader.observers.get_mut(&replica))
        {
            progress.high_watermark_sent = Some(high_watermark);
        }
    }

    /// Answers parked fetches: all of them when data arrived or the high-watermark moved
    /// (`only_expired == false`), else only those whose wait is over.
    pub(crate) fn complete_parked_fetches(&mut self, out: &mut Out, only_expired: bool) {
        let now = self.now_ms;
        let EpochState::Leader(leader) = &mut self.state else {
            return;
        };
        let answers = leader.parked.take_due(now, |_, _| !only_expired);
        for (to, parked) in answers {
            self.note_high_watermark_sent(to);
            let response = self.fetch_response(parked.correlation_id, ErrorCode::None);
            out.push(Work::SendFetchResponse {
                to,
                response,
                fetch_offset: parked.fetch_offset,
                max_bytes: parked.max_bytes,
            });
        }
    }

    /// Follower (or observer) side.
    pub(crate) fn handle_fetch_response(
        &mut self,
        from: NodeId,
        response: FetchResponse,
        out: &mut Out,
    ) -> Result<(), RaftError> {
        match self.fetch_in_flight {
            Some(f) if f.correlation_id == response.correlation_id && f.to == from => {
                self.fetch_in_flight = None
            }
            // A duplicate or a late answer to a fetch we gave up on: ignore it.
            _ => return Ok(()),
        }
        self.last_fetch_response_ms = Some(self.now_ms);
        if self.observe_leader(response.current_leader, out)? {
            return Ok(());
        }
        let now = self.now_ms;
        let retry_backoff_ms = self
            .config
            .request_timeout_ms
            .min(self.config.fetch_max_wait_ms)
            .max(1);
        let local_is_voter = self.is_local_voter();
        let EpochState::Follower(follower) = &mut self.state else {
            // An observer looking for the leader asked a voter that does not know one either.
            self.fetch_backoff_until_ms = now + retry_backoff_ms;
            self.discovery_index += 1;
            return Ok(());
        };
        if response.error_code == ErrorCode::BrokerNotAvailable
            && follower.leader_id == from
            && local_is_voter
        {
            // The host could not reach our leader (its connection was refused, reset or timed
            // out): it may be gone, and a process killed with -9 closes its sockets at once.
            // Stand after a short random backoff instead of the whole fetch timeout, and stop
            // defending that leader against pre-votes (so the other followers of a dead leader
            // grant each other's). A leader that is alive loses nothing: a pre-vote binds
            // nobody, every voter still fetching from it refuses, and the refusal names it, so
            // we follow it again.
            let soon = now + self.rng.below(self.config.election_backoff_max_ms / 4 + 1);
            follower.fetch_timeout_deadline_ms = follower.fetch_timeout_deadline_ms.min(soon);
            self.fetched_from_leader = false;
        }
        if response.error_code != ErrorCode::None
            || follower.leader_id != from
            || response.current_leader.leader_epoch != follower.epoch
        {
            // Not (or no longer) the leader, or not yet aware of our epoch: try again a little
            // later; an observer asks the next voter, unless this one names the leader we
            // follow: then it goes back to that leader. (Walking on round-robin instead let an
            // observer whose fetch timeout kept firing while the leader parked its fetch miss
            // the leader forever: simulator seed 337 of the mixed profile.)
            self.fetch_backoff_until_ms = now + retry_backoff_ms;
            if !local_is_voter {
                let confirms_our_leader = from != follower.leader_id
                    && response.current_leader.leader_id == Some(follower.leader_id)
                    && response.current_leader.leader_epoch == follower.epoch;
                if confirms_our_leader {
                    self.discovery_index = 0;
                } else {
                    self.discovery_index += 1;
                }
            }
            return Ok(());
        }
        // An answer sent before our leader resigned still carries its records, but it no
        // longer proves a leader alive: the election the resignation asked for goes on.
        if self.resigned_leader != Some((follower.epoch, from)) {
            follower.fetch_timeout_deadline_ms = now + self.config.fetch_timeout_ms;
            self.fetched_from_leader = true;
        }
        self.discovery_index = 0;
        let leader_epoch = follower.epoch;
        self.answered_by = Some((leader_epoch, from));
        if let Some(diverging) = response.diverging_epoch {
            // KIP-320: truncate to the end of the largest common epoch, as far as we know it.
            // If we hold the leader's diverging epoch, both logs agree up to the smaller of the
            // two ends. If we do not, the end of our largest epoch below it is as far as our
            // log can still agree (the next fetch finds out); cutting at the leader's offset
            // instead could split one of our batches.
            let local_end = self.log.end_offset_for_epoch(diverging.epoch);
            let mut truncation = if local_end.epoch == diverging.epoch {
                local_end.offset.min(diverging.offset)
            } else {
                local_end.offset
            }
            .min(self.log.log_end_offset());
            let allow_below_hw = self.config.mutated(Mutation::TruncateBelowHighWatermark);
            if allow_below_hw && self.log.high_watermark() > 0 {
                let hw = self.log.high_watermark();
                let below = self
                    .log
                    .epoch_cache()
                    .iter()
                    .rev()
                    .find(|e| e.offset < hw)
                    .map_or(0, |e| e.offset);
                truncation = truncation.min(below);
            }
            // Refuse loudly to lose committed records (Kafka's handleFetchResponse does too).
            assert!(
                allow_below_hw || truncation >= self.log.high_watermark(),
                "node {}: leader {from} asks to truncate to {truncation}, below the high-watermark {}",
                self.config.node_id,
                self.log.high_watermark()
            );
            if truncation < self.log.log_end_offset() {
                self.log.truncate_to(truncation, allow_below_hw);
                out.push(Work::Truncate { offset: truncation });
                // KIP-595: a truncated voter set record is no longer in force.
                self.on_log_truncated(truncation, out);
            }
            return Ok(());
        }
        if let Some(snapshot_id) = response.snapshot_id {
            // KIP-630: our position is below the leader's log start (or diverges below it):
            // pause log fetching and download the snapshot (raft/snapshot_fetch.rs).
            self.leader_log_start_offset = response.log_start_offset;
            self.start_snapshot_fetch(from, snapshot_id);
            return Ok(());
        }
        if !response.records.is_empty() {
            let headers = crate::records::batch_headers(&response.records)?;
            let mut expected = self.log.log_end_offset();
            let mut last_epoch = self.log.last_fetched_epoch();
            if headers.first().is_some_and(|h| h.base_offset != expected) {
                // Records for a position we are no longer at: a stale response.
                return Ok(());
            }
            for header in &headers {
                if header.base_offset != expected {
                    return Err(RaftError::NonContiguousBatch {
                        expected,
                        actual: header.base_offset,
                    });
                }
                if header.partition_leader_epoch < last_epoch
                    || header.partition_leader_epoch > leader_epoch
                {
                    return Err(RaftError::InvalidBatchEpoch {
                        batch_epoch: header.partition_leader_epoch,
                        last_epoch,
                        leader_epoch,
                    });
                }
                expected = header.last_offset + 1;
                last_epoch = header.partition_leader_epoch;
            }
            // KIP-595: voter sets are in force once appended; check them before appending.
            let voter_sets = crate::records::voter_sets_in(&response.records)?;
            self.check_fetched_voter_sets(&voter_sets)?;
            self.fetched_from.push_back(self.log.log_end_offset());
            if self.fetched_from.len() > FETCH_AHEAD_RESPONSES + 1 {
                self.fetched_from.pop_front();
            }
            for header in &headers {
                self.log.append(
                    header.base_offset,
                    header.last_offset,
                    header.partition_leader_epoch,
                );
            }
            out.push(Work::AppendAsFollower {
                records: response.records.clone(),
            });
            self.on_voter_sets_appended(voter_sets, out);
            // The next fetch waits for this append's flush, unless the records are already
            // committed (`fetch_may_leave`).
            self.fetch_timer_paused = true;
            self.request_flush(out);
        }
        // The follower's log matches the leader's up to its end now, so the leader's
        // high-watermark applies up to there.
        let high_watermark = response.high_watermark.min(self.log.log_end_offset());
        if self.log.advance_high_watermark(high_watermark) {
            out.push(Work::HighWatermarkChanged { high_watermark });
        }
        self.leader_log_start_offset = response.log_start_offset;
        self.maybe_advance_log_start_offset(out);
        self.note_repair_progress(response.high_watermark);
        Ok(())
    }

    /// Whether this replica should have a fetch going: a follower, or an observer that does not
    /// know the leader.
    pub(crate) fn wants_to_fetch(&self) -> bool {
        match &self.state {
            EpochState::Follower(_) => true,
            EpochState::Unattached(_) | EpochState::Voted(_) => !self.is_local_voter(),
            _ => false,
        }
    }

    /// Whether the next fetch may leave as far as our own disk is concerned. The leader counts
    /// a voter's fetch offset as fsynced on it, so a fetch normally waits until the log is
    /// durable up to its end. A follower catching up may fetch ahead of its flush when every
    /// record it holds is already below the high-watermark (committed on a majority without
    /// it) and fewer than `FETCH_AHEAD_RESPONSES` responses wait wholly for the disk:
    ///
    /// - counting those offsets cannot move the leader's high-watermark: they are at most the
    ///   high-watermark the leader sent us, which is at most its own (or, for a leader of a
    ///   later epoch, at most its epoch's start offset, since a leader holds every committed
    ///   record), and replacing one voter's offset by a value no larger than that cannot change
    ///   an order statistic above it;
    /// - a crash loses only records a majority holds durably, and a smaller fetch offset after
    ///   the restart simply fetches them again;
    /// - the writes stay bounded: a few responses (each at most the fetch's `max_bytes`) wait
    ///   for the disk while the next one travels, and those that arrive while a flush is in
    ///   flight go to the disk together in the next one (one fdatasync for all of them: a
    ///   follower sharing its disk with busy nodes waits for fsyncs more than for bytes).
    ///
    /// So the follower's disk work overlaps its next transfers without a field beyond Kafka's
    /// Fetch schema. At the head (records not yet committed) nothing changes.
    pub(crate) fn fetch_may_leave(&self) -> bool {
        let durable = self.log.durable_end_offset();
        let end = self.log.log_end_offset();
        let committed = end <= self.log.high_watermark()
            || self.config.mutated(Mutation::FetchAheadOfUncommittedFlush);
        let waiting = self
            .fetched_from
            .iter()
            .filter(|&&from| from >= durable && from < end)
            .count();
        durable >= end || (committed && waiting < FETCH_AHEAD_RESPONSES)
    }

    /// Sends the next fetch if none is in flight, once `fetch_may_leave`.
    pub(crate) fn maybe_send_fetch(&mut self, out: &mut Out) {
        if !self.wants_to_fetch()
            || self.fetch_in_flight.is_some()
            || self.now_ms < self.fetch_backoff_until_ms
        {
            return;
        }
        // Asks only for what is not durable yet, once.
        self.request_flush(out);
        if !self.fetch_may_leave() {
            return;
        }
        if std::mem::take(&mut self.fetch_timer_paused)
            && let EpochState::Follower(follower) = &mut self.state
            && self.resigned_leader != Some((follower.epoch, follower.leader_id))
        {
            // The wait for our own flush is over: the leader gets a full timeout to answer.
            follower.fetch_timeout_deadline_ms = follower
                .fetch_timeout_deadline_ms
                .max(self.now_ms + self.config.fetch_timeout_ms);
        }
        if self.maybe_send_fetch_snapshot(out) {
            return;
        }
        let to = match &self.state {
            EpochState::Follower(f) if self.is_local_voter() => f.leader_id,
            _ => {
                // An observer fetches from the leader it knows; once that stops answering (or
                // while it knows none) it asks the voters in turn, or, configured with
                // `controller.quorum.bootstrap.servers` (KIP-853), those servers: their
                // answers name the leader, and the node learns its address from them.
                let known = if let EpochState::Follower(f) = &self.state {
                    Some(f.leader_id)
                } else {
                    None
                };
                let others: Vec<NodeId> = if self.config.bootstrap_servers.is_empty() {
                    self.voter_set()
                        .iter_ids()
                        .filter(|&v| v != self.config.node_id)
                        .collect()
                } else {
                    self.config.bootstrap_servers.clone()
                };
                match (known, self.discovery_index) {
                    (Some(leader), 0) => leader,
                    _ if others.is_empty() => return,
                    (_, index) => others[index % others.len()],
                }
            }
        };
        let correlation_id = self.next_correlation_id();
        // No long poll until this leader has answered us once (`answered_by`).
        let max_wait_ms = if self.answered_by == Some((self.epoch(), to)) {
            self.config.fetch_max_wait_ms
        } else {
            0
        };
        let request = FetchRequest {
            correlation_id,
            replica_id: self.config.node_id,
            current_leader_epoch: self.epoch(),
            fetch_offset: self.log.log_end_offset(),
            last_fetched_epoch: self.log.last_fetched_epoch(),
            max_bytes: self.config.fetch_max_bytes,
            max_wait_ms,
            replica_directory_id: self.config.directory_id,
        };
        self.fetch_in_flight = Some(InFlightFetch {
            correlation_id,
            to,
            sent_at_ms: self.now_ms,
            resend_at_ms: self.now_ms
                + self.config.fetch_max_wait_ms
                + self.config.request_timeout_ms,
        });
        out.send(to, Message::FetchRequest(request));
    }
}

/// When a fetch parked at `now_ms` for up to `max_wait_ms` is answered: at the last multiple of
/// `grain_ms` within its wait, or when the wait ends if it is shorter than the grain (or there
/// is none). Never later than asked, and always after `now_ms`.
pub(crate) fn long_poll_deadline(now_ms: u64, max_wait_ms: u64, grain_ms: u64) -> u64 {
    let end = now_ms + max_wait_ms;
    if grain_ms == 0 || max_wait_ms < grain_ms {
        return end;
    }
    end - end % grain_ms
}

#[cfg(test)]
mod long_poll_tests {
    use super::long_poll_deadline;

    #[test]
    fn a_long_poll_ends_on_the_grain_within_its_wait() {
        assert_eq!(long_poll_deadline(1_234, 500, 0), 1_734, "no grain");
        assert_eq!(long_poll_deadline(1_234, 500, 100), 1_700);
        assert_eq!(
            long_poll_deadline(1_299, 500, 100),
            1_700,
            "parked together"
        );
        assert_eq!(long_poll_deadline(1_300, 500, 100), 1_800);
        assert_eq!(
            long_poll_deadline(1_234, 50, 100),
            1_284,
            "shorter than the grain"
        );
        for now in 0..1_000 {
            let deadline = long_poll_deadline(now, 100, 100);
            assert!(deadline > now && deadline <= now + 100, "{now}: {deadline}");
        }
    }
}
